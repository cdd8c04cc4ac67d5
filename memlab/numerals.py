"""Numbers and calendar words in Chinese and English: tables and one reader, not tunables.

The ground floor under every rule that reads a number or a date in text: the look-back window
(:func:`memlab.text.time_window_days`), the question's time expressions
(:mod:`memlab.recall.timeexpr`) and the expanded keys' dates (:mod:`memlab.write.keys`). One table
and one reader, so that "二十七", "两" and "二〇二三" mean the same number in all three.
"""

from __future__ import annotations

import calendar

__all__ = ["ZH_DIGIT", "EN_NUMBER", "MONTHS", "ZH_SMALL", "ZH_YEAR", "zh_int"]

#: Chinese digits (〇 and 零 both zero; 两 is two)
ZH_DIGIT: dict[str, int] = {"〇": 0, "零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
                            "六": 6, "七": 7, "八": 8, "九": 9}
#: English number words a question counts with ("two weeks ago", "a couple of days")
EN_NUMBER: dict[str, int] = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                             "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
                             "twelve": 12, "couple of": 2, "a couple of": 2, "couple": 2,
                             "few": 3, "a few": 3}
#: English month names and abbreviations, capitalised as written (Sept too) -> 1..12
MONTHS: dict[str, int] = {name: i for i, name in enumerate(calendar.month_name) if name} | \
    {name: i for i, name in enumerate(calendar.month_abbr) if name} | {"Sept": 9}
#: a regex alternative: a small number (1-99) in digits or Chinese numerals
ZH_SMALL = "[0-9]{1,2}|[一二三四五六七八九十两]{1,3}"
#: a regex alternative: a year in digits or Chinese digits
ZH_YEAR = "[0-9]{4}|[〇零一二三四五六七八九]{4}"


def zh_int(text: str) -> int | None:
    """A number written in digits or Chinese numerals: "27", "二十七", "两", "十五", "二〇二三"
    (three or more Chinese digits are read digit by digit, for years); None when it is not one
    ("二三", "十十五", "")."""
    if text.isdigit():
        return int(text)
    if len(text) >= 3 and all(c in ZH_DIGIT for c in text):   # 二〇二三: digit by digit
        return int("".join(str(ZH_DIGIT[c]) for c in text))
    if "十" in text:
        tens, _, ones = text.partition("十")
        if len(tens) > 1 or len(ones) > 1:
            return None
        t = ZH_DIGIT.get(tens) if tens else 1
        o = ZH_DIGIT.get(ones) if ones else 0
        return None if t is None or o is None else 10 * t + o
    if len(text) == 1 and text in ZH_DIGIT:
        return ZH_DIGIT[text]
    return None

"""Time expressions in a question, resolved into a window ``[start, end)`` of Unix seconds.

Pure: the question, the time it is asked (``now``, Unix seconds) and the calendar's offset from
UTC in hours. Calendar days are read in that offset (a day runs from local midnight to local
midnight), weeks start on Monday (ISO 8601), and every window covers whole days, weeks, months or
years, so "in May 2023" is the month, not a point.

The forms, in Chinese and English (the rules are the table :data:`RULES`, tried in its order; the
text a rule matched is masked before the next rule runs, so "2023年5月" is one month, not a month
and a year):

================================  ===============================  ===============================
form                              examples                         window
================================  ===============================  ===============================
a date                            2023年5月8日, 4月27日, 5月8号,    that day; without a year the
                                  April 27th, 27 April, May 8,     most recent such date on or
                                  2023, 2023-05-08, 2023/5/8       before ``now``
a month                           2023年5月, 5月份, 五月,           that month; without a year the
                                  in May 2023, May, in May         most recent one begun by ``now``
a year                            2023年, 去年, 今年, 前年,          that year
                                  in 2023, last year, this year
a named day                       昨天, 前天, 大前天, 今天,          that day
                                  yesterday, today, the day
                                  before yesterday
a weekday                         上周六, 这周三, 上星期天,          上周六: Saturday of last
                                  周六, last Saturday, on          calendar week; last Saturday:
                                  Saturday                         the most recent Saturday before
                                                                   today; a bare weekday: the most
                                                                   recent on or before today
a weekend                         上周末, 周末, last weekend       Saturday and Sunday of the last
                                                                   (or this) calendar week
a calendar week / month           上周, 这周, 上个月, 这个月,        that week / month
                                  last week, this month
N units ago                       三天前, 两周前, 3个月前,           the day, calendar week, month
                                  两年前, 3 days ago, two weeks     or year holding now - N units
                                  ago, a month ago
a look-back                       最近三个月, 过去两周, in the      [now - N units, now]
                                  last 2 weeks, past 10 days       (:func:`memlab.text.time_window_days`)
================================  ===============================  ===============================

Several expressions in one question give the smallest window holding them all ("between March and
May" -> March 1 to May 31). Chinese numerals (一 to 九十九, 两, and year digits such as 二〇二三) are
read as numbers. Not read: anchored offsets ("the week before August 3, 2023" is read as August 3,
2023) and times of day.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Callable

from memlab.numerals import EN_NUMBER, MONTHS, ZH_SMALL, ZH_YEAR, zh_int
from memlab.text import time_window_days

__all__ = ["Window", "resolve", "distance_days", "zh_int", "RULES"]

SECONDS_PER_DAY = 86_400.0

# -- calendar facts (tables, not tunables) --------------------------------------------------------
_EN_NUMBER = {w: n for w, n in EN_NUMBER.items() if w != "couple"}   # "couple" alone: not here
_MONTHS = MONTHS
_WEEKDAYS_EN = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_ZH_UNIT = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month",
            "年": "year"}

_ZN = ZH_SMALL          # a small number, digits or Chinese
_ZY = ZH_YEAR           # a year, digits or Chinese digits
_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"([0-9]{1,2})(?:st|nd|rd|th)?"
_EN_N = r"(\d+|" + "|".join(sorted(_EN_NUMBER, key=len, reverse=True)) + ")"
_WD_EN = "(" + "|".join(_WEEKDAYS_EN) + ")"


@dataclass(frozen=True, slots=True)
class Window:
    """A time window ``[start, end)`` in Unix seconds and the text that named it."""

    start: float
    end: float
    text: str

    @property
    def days(self) -> float:
        return (self.end - self.start) / SECONDS_PER_DAY


# -- calendar arithmetic on local dates ------------------------------------------------------------
_Span = tuple[date, date]        # [first day, day after the last)


def _day(d: date) -> _Span:
    return d, d + timedelta(days=1)


def _month(y: int, m: int) -> _Span:
    return date(y, m, 1), (date(y + 1, 1, 1) if m == 12 else date(y, m + 1, 1))


def _year(y: int) -> _Span:
    return date(y, 1, 1), date(y + 1, 1, 1)


def _week(d: date) -> _Span:
    monday = d - timedelta(days=d.weekday())
    return monday, monday + timedelta(days=7)


def _months_back(today: date, n: int) -> _Span:
    k = today.year * 12 + today.month - 1 - n
    return _month(k // 12, k % 12 + 1)


def _safe_date(y: int, m: int, d: int) -> date | None:
    try:
        return date(y, m, d)
    except ValueError:
        return None


def _recent_date(today: date, m: int, d: int) -> date | None:
    """The most recent m/d on or before ``today`` (Feb 29 looks back to a leap year)."""
    for y in range(today.year, today.year - 8, -1):
        got = _safe_date(y, m, d)
        if got is not None and got <= today:
            return got
    return None


def _recent_month(today: date, m: int) -> _Span:
    return _month(today.year if m <= today.month else today.year - 1, m)


def _date_span(today: date, y: int | None, m: int | None, d: int | None) -> _Span | None:
    if m is None or not 1 <= m <= 12:
        return None
    if d is None:
        return _month(y, m) if y is not None else _recent_month(today, m)
    got = _safe_date(y, m, d) if y is not None else _recent_date(today, m, d)
    return _day(got) if got is not None else None


def _ago(today: date, n: int, unit: str) -> _Span | None:
    if n < 0 or n > 10_000:
        return None
    if unit == "day":
        return _day(today - timedelta(days=n))
    if unit == "week":
        return _week(today - timedelta(days=7 * n))
    if unit == "month":
        return _months_back(today, n)
    return _year(today.year - n) if today.year - n >= 1 else None


def _last_weekday(today: date, wd: int, *, strictly_before: bool) -> date:
    back = (today.weekday() - wd) % 7
    if back == 0 and strictly_before:
        back = 7
    return today - timedelta(days=back)


# -- the rules -------------------------------------------------------------------------------------
def _zh_full_date(m: re.Match, today: date) -> _Span | None:
    y = zh_int(m.group(1)) if m.group(1) else None
    return _date_span(today, y, zh_int(m.group(2)), zh_int(m.group(3)))


def _zh_year_month(m: re.Match, today: date) -> _Span | None:
    return _date_span(today, zh_int(m.group(1)), zh_int(m.group(2)), None)


def _zh_month(m: re.Match, today: date) -> _Span | None:
    return _date_span(today, None, zh_int(m.group(1)), None)


def _zh_year(m: re.Match, today: date) -> _Span | None:
    y = zh_int(m.group(1))
    return _year(y) if y is not None and 1 <= y <= 9999 else None


_REL_YEAR = {"今": 0, "去": 1, "前": 2, "大前": 3}
_REL_DAY = {"今天": 0, "今日": 0, "昨天": 1, "昨日": 1, "前天": 2, "大前天": 3}
_REL_WEEK = {"上": 1, "这": 0, "本": 0, "上上": 2}


def _zh_rel_year(m: re.Match, today: date) -> _Span:
    return _year(today.year - _REL_YEAR[m.group(1)])


def _zh_rel_day(m: re.Match, today: date) -> _Span:
    return _day(today - timedelta(days=_REL_DAY[m.group(0)]))


def _zh_week_day(m: re.Match, today: date) -> _Span:
    monday = _week(today)[0] - timedelta(days=7 * _REL_WEEK[m.group(1)])
    return _day(monday + timedelta(days=_WEEKDAYS_ZH[m.group(2)]))


def _zh_weekend(m: re.Match, today: date) -> _Span:
    n = _REL_WEEK.get(m.group(1) or "", None)
    if n is None:   # a bare 周末: the most recent weekend begun by today
        sat = _last_weekday(today, 5, strictly_before=False)
        return sat, sat + timedelta(days=2)
    sat = _week(today)[0] - timedelta(days=7 * n) + timedelta(days=5)
    return sat, sat + timedelta(days=2)


def _zh_week(m: re.Match, today: date) -> _Span:
    return _ago(today, _REL_WEEK[m.group(1)], "week")


def _zh_rel_month(m: re.Match, today: date) -> _Span:
    return _months_back(today, _REL_WEEK[m.group(1)])


def _zh_ago(m: re.Match, today: date) -> _Span | None:
    n = zh_int(m.group(1))
    return None if n is None else _ago(today, n, _ZH_UNIT[m.group(2)])


def _zh_bare_weekday(m: re.Match, today: date) -> _Span:
    return _day(_last_weekday(today, _WEEKDAYS_ZH[m.group(1)], strictly_before=False))


def _en_month_day(m: re.Match, today: date) -> _Span | None:
    y = int(m.group(3)) if m.group(3) else None
    return _date_span(today, y, _MONTHS[m.group(1).rstrip(".")], int(m.group(2)))


def _en_day_month(m: re.Match, today: date) -> _Span | None:
    y = int(m.group(3)) if m.group(3) else None
    return _date_span(today, y, _MONTHS[m.group(2).rstrip(".")], int(m.group(1)))


def _iso_date(m: re.Match, today: date) -> _Span | None:
    return _date_span(today, int(m.group(1)), int(m.group(2)), int(m.group(3)))


def _en_month_year(m: re.Match, today: date) -> _Span | None:
    return _date_span(today, int(m.group(2)), _MONTHS[m.group(1).rstrip(".")], None)


def _en_month_any(m: re.Match, today: date) -> _Span | None:
    return _date_span(today, None, _MONTHS[m.group(1) or m.group(2)], None)


def _en_year(m: re.Match, today: date) -> _Span:
    return _year(int(m.group(1)))


def _en_rel_year(m: re.Match, today: date) -> _Span:
    return _year(today.year - {"this": 0, "last": 1}[m.group(1).lower()])


def _en_rel_day(m: re.Match, today: date) -> _Span:
    word = " ".join(m.group(0).lower().split())
    back = {"today": 0, "yesterday": 1, "the day before yesterday": 2}[word]
    return _day(today - timedelta(days=back))


def _en_weekday(m: re.Match, today: date) -> _Span:
    wd = _WEEKDAYS_EN[m.group(2).lower()]
    which = (m.group(1) or "").lower()
    if which == "this":
        return _day(_week(today)[0] + timedelta(days=wd))
    return _day(_last_weekday(today, wd, strictly_before=which == "last"))


def _en_weekend(m: re.Match, today: date) -> _Span:
    n = {"last": 1, "this": 0}[m.group(1).lower()]
    sat = _week(today)[0] - timedelta(days=7 * n) + timedelta(days=5)
    return sat, sat + timedelta(days=2)


def _en_rel_unit(m: re.Match, today: date) -> _Span | None:
    n = {"this": 0, "last": 1}[m.group(1).lower()]
    return _ago(today, n, m.group(2).lower())


def _en_ago(m: re.Match, today: date) -> _Span | None:
    word = " ".join(m.group(1).lower().split())
    n = int(word) if word.isdigit() else _EN_NUMBER[word]
    return _ago(today, n, m.group(2).lower())


Rule = tuple[str, "re.Pattern[str]", Callable[[re.Match, date], "_Span | None"]]
_I = re.IGNORECASE
#: (name, pattern, resolver), tried in this order; a match masks its text for the later rules.
RULES: tuple[Rule, ...] = (
    ("zh_date", re.compile(rf"(?:({_ZY})年)?({_ZN})月({_ZN})[日号]"), _zh_full_date),
    ("zh_year_month", re.compile(rf"({_ZY})年({_ZN})月份?"), _zh_year_month),
    ("zh_year", re.compile(rf"({_ZY})年"), _zh_year),
    ("zh_rel_year", re.compile(r"(大前|前|去|今)年"), _zh_rel_year),
    ("zh_rel_day", re.compile(r"大前天|前天|昨天|昨日|今天|今日"), _zh_rel_day),
    ("zh_week_day", re.compile(r"(上上|上|这|本)个?(?:周|星期|礼拜)([一二三四五六日天])"),
     _zh_week_day),
    ("zh_weekend", re.compile(r"(上上|上|这|本)?个?周末"), _zh_weekend),
    ("zh_week", re.compile(r"(上上|上|这|本)个?(?:周|星期|礼拜)"), _zh_week),
    ("zh_rel_month", re.compile(r"(上上|上|这|本)个月"), _zh_rel_month),
    ("zh_ago", re.compile(rf"({_ZN}|[0-9]+)个?(天|日|周|星期|礼拜|月|年)(?:以前|之前|前)"), _zh_ago),
    ("zh_month", re.compile(rf"(?<![个0-9一二三四五六七八九十两几])({_ZN})月(?:份)?(?![0-9一二三四五六七八九十两]*[日号])"),
     _zh_month),
    ("zh_weekday", re.compile(r"(?<![0-9一二三四五六七八九十两几每])(?:周|星期|礼拜)"
                              r"([一二三四五六日天])"), _zh_bare_weekday),
    ("iso_date", re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b"), _iso_date),
    ("en_month_day", re.compile(rf"\b({_MONTH})\s+{_DAY}\b(?:,?\s+(\d{{4}})\b)?"),
     _en_month_day),
    ("en_day_month", re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_MONTH})(?:,?\s+(\d{{4}})\b)?"),
     _en_day_month),
    ("en_month_year", re.compile(rf"\b({_MONTH}),?\s+(\d{{4}})\b"), _en_month_year),
    ("en_day_before_yesterday", re.compile(r"\bthe\s+day\s+before\s+yesterday\b", _I),
     _en_rel_day),
    ("en_rel_day", re.compile(r"\b(?:yesterday|today)\b", _I), _en_rel_day),
    ("en_weekend", re.compile(r"\b(last|this)\s+weekend\b", _I), _en_weekend),
    ("en_weekday", re.compile(rf"\b(?:(last|this|on)\s+)?{_WD_EN}\b", _I), _en_weekday),
    ("en_rel_year", re.compile(r"\b(this|last)\s+year\b", _I), _en_rel_year),
    ("en_rel_unit", re.compile(r"\b(this|last)\s+(week|month)\b", _I), _en_rel_unit),
    ("en_ago", re.compile(rf"\b{_EN_N}\s+(day|week|month|year)s?\s+ago\b", _I), _en_ago),
    ("en_year", re.compile(r"\b(?:in|during|of|since|by|from|year|summer|winter|spring|fall|"
                           r"autumn)\s+((?:19|20)\d\d)\b", _I), _en_year),
    # a month name alone: capitalised, and "May" only after a preposition (not the modal verb)
    ("en_month", re.compile(r"\b(?:(?:in|during|of|since|by|from|early|late|mid|last|this)\s+"
                            r"(May)|(?!May\b)(" + "|".join(n for n in calendar.month_name if n)
                            + r"))\b"), _en_month_any),
)
#: a match naming a year (four digits, or four Chinese digits) is absolute: it wins over relative
#: expressions in the same question ("last Friday on 23 January, 2022" is that day)
_HAS_YEAR = re.compile(r"\d{4}|[〇零一二三四五六七八九]{4}")


def _spans(query: str, today: date) -> list[tuple[_Span, str]]:
    """Every expression's span of local days, with the text it matched, rules in order; only
    the absolute ones (naming a year) when there are any."""
    text, found = query, []
    for _name, pattern, fn in RULES:
        for m in pattern.finditer(text):
            span = fn(m, today)
            if span is not None:
                found.append((span, m.group(0)))
        text = pattern.sub(lambda m: "\0" * len(m.group(0)), text)
    absolute = [f for f in found if _HAS_YEAR.search(f[1])]
    return absolute or found


def resolve(query: str, now: float, *, utc_offset_hours: float = 0.0) -> Window | None:
    """The window the question's time expressions name, read at ``now`` in a calendar
    ``utc_offset_hours`` east of UTC; None when it names none."""
    tz = timezone(timedelta(hours=utc_offset_hours))
    local = datetime.fromtimestamp(now, tz=tz)
    found = _spans(query, local.date())
    texts = [t for _, t in found]
    if found:
        first = min(s[0] for s, _ in found)
        last = max(s[1] for s, _ in found)

        def unix(d: date) -> float:
            return datetime(d.year, d.month, d.day, tzinfo=tz).timestamp()

        return Window(unix(first), unix(last), " ".join(texts))
    days = time_window_days(query)
    if days:
        return Window(now - days * SECONDS_PER_DAY, now, query)
    return None


def distance_days(t, window: Window | None):
    """Days from time(s) ``t`` (Unix seconds, a float or a numpy array) to ``window``: 0 inside
    (or on an edge), else the gap to the nearer edge; NaN when there is no window."""
    import numpy as np

    t = np.asarray(t, dtype=np.float64)
    if window is None:
        return np.full(t.shape, np.nan)
    gap = np.maximum(np.maximum(window.start - t, t - window.end), 0.0)
    return gap / SECONDS_PER_DAY

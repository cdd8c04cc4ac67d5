"""One reader of numbers and calendar words (memlab.numerals) under the three rules that read them.

The look-back window (memlab.text.time_window_days), the question's time expressions
(memlab.recall.timeexpr.resolve) and the expanded keys' dates (memlab.write.keys.date_keys) must
read the same Chinese numeral as the same number, and an English month the same month.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlab.numerals import MONTHS, zh_int
from memlab.recall.timeexpr import resolve
from memlab.text import time_window_days
from memlab.write.keys import date_keys

NOW = datetime(2026, 5, 13, 15, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize("text,value", [
    ("27", 27), ("二十七", 27), ("十五", 15), ("十", 10), ("两", 2), ("九", 9), ("二〇二三", 2023),
    ("一九九九", 1999), ("二三", None), ("十十五", None), ("二十三四", None), ("", None), ("abc", None),
])
def test_zh_int_reads_digits_tens_and_year_digits(text, value):
    assert zh_int(text) == value


def test_months_hold_names_abbreviations_and_sept():
    assert (MONTHS["January"], MONTHS["May"], MONTHS["Sep"], MONTHS["Sept"], MONTHS["Dec"]) == \
        (1, 5, 9, 9, 12)
    assert len(set(MONTHS.values())) == 12


@pytest.mark.parametrize("n_zh,n", [("二十七", 27), ("两", 2), ("十二", 12)])
def test_the_three_readers_agree_on_a_chinese_numeral(n_zh, n):
    assert time_window_days(f"最近{n_zh}天我做了什么") == pytest.approx(float(n))
    day = datetime(2026, 5, 13, tzinfo=timezone.utc) - timedelta(days=n)   # N days ago: that day
    w = resolve(f"{n_zh}天前我做了什么", NOW)
    assert (w.start, w.end) == (day.timestamp(), (day + timedelta(days=1)).timestamp())
    if n <= 12:   # a month number: the same month in the key and in the question's window
        assert date_keys(f"我在{n_zh}月三号去了北京")[0] == f"date:{n:02d}-03"
        assert date_keys(f"I went to Beijing on {list(MONTHS)[n - 1]} 3rd")[0] == f"date:{n:02d}-03"


def test_the_year_in_chinese_digits_is_one_year_in_keys_and_windows():
    assert date_keys("二〇二三年五月八日搬家") == ["date:05-08", "date:2023-05-08", "month:2023-05"]
    w = resolve("二〇二三年五月发生了什么", NOW)
    assert (w.start, w.end) == (datetime(2023, 5, 1, tzinfo=timezone.utc).timestamp(),
                                datetime(2023, 6, 1, tzinfo=timezone.utc).timestamp())
    assert time_window_days("过去半年") == pytest.approx(0.5 * 365.25)

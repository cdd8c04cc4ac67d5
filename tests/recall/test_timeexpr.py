"""Time expressions resolved into windows (memlab.recall.timeexpr), zh and en, worked by hand.

The question is asked on Wednesday 2026-05-13 at 15:00 UTC. Calendar weeks start on Monday: this
week is May 11-17, last week May 4-10 (its Saturday May 9), the week of May 13 - 14 days is
April 27 - May 3.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memlab.recall.timeexpr import distance_days, resolve, zh_int

NOW = datetime(2026, 5, 13, 15, 0, tzinfo=timezone.utc).timestamp()
DAY = 86_400.0


def _utc(y, m, d) -> float:
    return datetime(y, m, d, tzinfo=timezone.utc).timestamp()


CASES = [   # question, first day, day after the last
    ("我4月27日做了什么？", (2026, 4, 27), (2026, 4, 28)),
    ("What did I do on April 27th?", (2026, 4, 27), (2026, 4, 28)),
    ("what happened on 27 April", (2026, 4, 27), (2026, 4, 28)),
    ("今天是5月13日吗", (2026, 5, 13), (2026, 5, 14)),    # today's date is on or before asked_at
    # a date after today's: the most recent one on or before asked_at is last year's
    ("5月20日那天呢", (2025, 5, 20), (2025, 5, 21)),
    ("What about May 20?", (2025, 5, 20), (2025, 5, 21)),
    ("2023年5月我在哪？", (2023, 5, 1), (2023, 6, 1)),
    ("Where was I in May 2023?", (2023, 5, 1), (2023, 6, 1)),
    ("二〇二三年三月", (2023, 3, 1), (2023, 4, 1)),
    ("5月份去了哪里", (2026, 5, 1), (2026, 6, 1)),        # May has begun: this May
    ("六月份去了哪里", (2025, 6, 1), (2025, 7, 1)),        # June has not: last June
    ("What did I do in June?", (2025, 6, 1), (2025, 7, 1)),
    ("十二月二十五日", (2025, 12, 25), (2025, 12, 26)),
    ("2023年5月8日", (2023, 5, 8), (2023, 5, 9)),
    ("What did Joanna finish last Friday on 23 January, 2022?", (2022, 1, 23), (2022, 1, 24)),
    ("2023-05-08", (2023, 5, 8), (2023, 5, 9)),
    ("上周六干嘛了", (2026, 5, 9), (2026, 5, 10)),
    ("What did I do last Saturday?", (2026, 5, 9), (2026, 5, 10)),
    ("上周我见了谁", (2026, 5, 4), (2026, 5, 11)),
    ("Who did I meet last week?", (2026, 5, 4), (2026, 5, 11)),
    ("两周前买了什么", (2026, 4, 27), (2026, 5, 4)),
    ("What did I buy two weeks ago?", (2026, 4, 27), (2026, 5, 4)),
    ("三天前", (2026, 5, 10), (2026, 5, 11)),
    ("3 days ago", (2026, 5, 10), (2026, 5, 11)),
    ("昨天吃了什么", (2026, 5, 12), (2026, 5, 13)),
    ("What did I eat yesterday?", (2026, 5, 12), (2026, 5, 13)),
    ("前天", (2026, 5, 11), (2026, 5, 12)),
    ("去年去了哪", (2025, 1, 1), (2026, 1, 1)),
    ("Where did I go last year?", (2025, 1, 1), (2026, 1, 1)),
    ("上个月", (2026, 4, 1), (2026, 5, 1)),
    ("What did I read last month?", (2026, 4, 1), (2026, 5, 1)),
    ("三个月前", (2026, 2, 1), (2026, 3, 1)),
    ("上周末", (2026, 5, 9), (2026, 5, 11)),
    ("last weekend", (2026, 5, 9), (2026, 5, 11)),
    ("How many times did I swim in 2023?", (2023, 1, 1), (2024, 1, 1)),
]


@pytest.mark.parametrize("question,first,after", CASES, ids=[c[0] for c in CASES])
def test_windows_worked_by_hand(question, first, after):
    w = resolve(question, NOW)
    assert w is not None, question
    assert (w.start, w.end) == (_utc(*first), _utc(*after)), question


@pytest.mark.parametrize("question", ["What is my cat called?", "我的猫叫什么名字？",
                                      "May I ask what you did?", "我一周三次去健身房", "每周三做什么",
                                      "哪个月份最忙？"])
def test_no_time_named_no_window(question):
    assert resolve(question, NOW) is None


def test_look_backs_are_windows_ending_now():
    assert resolve("最近三个月我去过哪里", NOW).start == pytest.approx(NOW - 3 * 30.44 * DAY)
    w = resolve("in the last 2 weeks", NOW)
    assert (w.start, w.end) == (NOW - 14 * DAY, NOW)


def test_days_are_read_in_the_configured_calendar():
    """昨天 asked at 2026-05-13 01:00 in Beijing (+08:00; 2026-05-12 17:00 UTC) is May 12 there:
    [May 11 16:00, May 12 16:00) UTC. Read in UTC it would be May 11."""
    asked = datetime(2026, 5, 12, 17, 0, tzinfo=timezone.utc).timestamp()
    w = resolve("我昨天吃了什么？", asked, utc_offset_hours=8.0)
    assert (w.start, w.end) == (_utc(2026, 5, 12) - 8 * 3600, _utc(2026, 5, 13) - 8 * 3600)
    assert resolve("我昨天吃了什么？", asked).start == _utc(2026, 5, 11)


def test_several_expressions_give_the_window_holding_them():
    w = resolve("What did I do between March 2026 and April 2026?", NOW)
    assert (w.start, w.end) == (_utc(2026, 3, 1), _utc(2026, 5, 1))


@pytest.mark.parametrize("text,value", [("27", 27), ("二十七", 27), ("两", 2), ("十五", 15),
                                        ("十", 10), ("二〇二三", 2023), ("九十九", 99),
                                        ("几", None), ("十二三", None)])
def test_chinese_numerals(text, value):
    assert zh_int(text) == value


def test_distance_in_days_zero_inside():
    """Window [May 9, May 10): May 9 12:00 is inside (0); May 7 00:00 is 2 days before its start;
    May 12 06:00 is 2.25 days after its end; no window: NaN."""
    w = resolve("上周六", NOW)
    t = np.array([_utc(2026, 5, 9) + 12 * 3600, _utc(2026, 5, 7), _utc(2026, 5, 12) + 6 * 3600])
    assert distance_days(t, w).tolist() == [0.0, 2.0, 2.25]
    assert all(math.isnan(v) for v in distance_days(t, None))
    assert resolve("上周六", NOW).days == 1.0
    assert resolve("2023年5月", NOW).days == 31.0
    assert timedelta(days=resolve("last week", NOW).days) == timedelta(days=7)


def test_last_weekday_on_that_weekday_is_a_week_back():
    """Asked on Saturday 2026-05-16: "last Saturday" is May 9, a bare 周六 / "on Saturday" is
    today, and 上周六 is Saturday of last calendar week (May 9)."""
    sat = _utc(2026, 5, 16) + 10 * 3600
    assert resolve("What did I do last Saturday?", sat).start == _utc(2026, 5, 9)
    assert resolve("What am I doing on Saturday?", sat).start == _utc(2026, 5, 16)
    assert resolve("周六做什么", sat).start == _utc(2026, 5, 16)
    assert resolve("上周六做了什么", sat).start == _utc(2026, 5, 9)

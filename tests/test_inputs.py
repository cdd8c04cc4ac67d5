"""memlab.inputs: the one place where times, counts, nesting and texts are checked (issue 19).
The bounds are written out here as the README states them, not read from the module."""

from __future__ import annotations

import json
import math
import sys
import unicodedata
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from memlab.errors import InvalidInput
from memlab.inputs import (MAX_INT, MAX_NESTING, MAX_TIME, MIN_TIME, check_int, check_json_depth,
                           check_text, check_time, check_unicode, time_problem)

UTC = timezone.utc


def test_the_time_range_is_what_datetime_can_show():
    assert MIN_TIME == -62_135_596_800.0 == datetime(1, 1, 1, tzinfo=UTC).timestamp()
    assert MAX_TIME == 253_402_300_799.0
    assert datetime.fromtimestamp(MAX_TIME, tz=UTC) == datetime(9999, 12, 31, 23, 59, 59,
                                                                 tzinfo=UTC)
    assert datetime.fromtimestamp(MIN_TIME, tz=UTC).year == 1


@pytest.mark.parametrize("value, seconds", [
    (0, 0.0), (1_750_000_000, 1_750_000_000.0), (-1.5, -1.5), (np.float64(2.5), 2.5),
    (np.int64(7), 7.0), (-62_135_596_800, -62_135_596_800.0), (253_402_300_799, 253_402_300_799.0),
    (datetime(2026, 8, 29, 20, tzinfo=timezone(timedelta(hours=8))), 1_788_004_800.0),
    (datetime(1, 1, 1, tzinfo=UTC), -62_135_596_800.0),
])
def test_check_time_accepts_the_range_in_seconds_or_aware_datetimes(value, seconds):
    assert check_time(value, "timestamp") == seconds


@pytest.mark.parametrize("value, rule", [
    (1e12, "finite time in 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z"),
    (1e300, "finite time"), (-1e12, "finite time"), (math.nan, "finite time"),
    (math.inf, "finite time"), (-math.inf, "finite time"),
    (253_402_300_799.5, "finite time"), (-62_135_596_800.5, "finite time"),
    (datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))), "finite time"),   # year 0 in UTC
    (datetime(2026, 1, 1), "timezone-aware"),
    ("2026-01-01", "Unix seconds (a number) or a timezone-aware datetime"),
    (True, "Unix seconds"), (None, "Unix seconds"), ([1.0], "Unix seconds"),
])
def test_check_time_refuses_by_field_rule_and_value(value, rule):
    with pytest.raises(InvalidInput) as e:
        check_time(value, "items[2].timestamp")
    assert e.value.field == "items[2].timestamp" and rule in e.value.rule
    assert time_problem(value) == e.value.rule


def test_check_time_optional():
    assert check_time(None, "event_time", optional=True) is None
    assert time_problem(1.0) is None


@pytest.mark.parametrize("value, lo, ok", [
    (0, 0, True), (2**53 - 1, 0, True), (2**53, 0, False), (10**30, 0, False), (-1, 0, False),
    (0, 1, False), (1, 1, True), (True, 0, False), (3.0, 0, False), ("3", 0, False),
    (np.int64(3), 0, False),        # SQLite cannot bind a numpy integer
])
def test_check_int_bounds_counts_at_2_53(value, lo, ok):
    assert MAX_INT == 9_007_199_254_740_991 == 2**53 - 1
    assert float(MAX_INT) == MAX_INT and float(MAX_INT + 1) == float(MAX_INT + 2)  # exact below
    if ok:
        assert check_int(value, "access_count", lo=lo) == value
    else:
        with pytest.raises(InvalidInput, match=rf"^access_count: must be a whole number in "
                                               rf"\[{lo}, 9007199254740991\]"):
            check_int(value, "access_count", lo=lo)


def _nest(levels: int, make) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = make(value)
    return value


@pytest.mark.parametrize("make", [lambda v: {"k": v}, lambda v: [v], lambda v: ("a", 1, v)],
                         ids=["dict", "list", "tuple"])
def test_nesting_is_bounded_at_64_levels_without_recursion(make):
    assert MAX_NESTING == 64
    check_unicode(_nest(64, make), "meta")
    with pytest.raises(InvalidInput, match=r"^meta: nests deeper than 64 levels"):
        check_unicode(_nest(65, make), "meta")
    limit = sys.getrecursionlimit()
    with pytest.raises(InvalidInput, match=r"^meta: nests deeper than 64 levels"):
        check_unicode(_nest(50_000, make), "meta")   # no RecursionError
    assert sys.getrecursionlimit() == limit


def test_check_unicode_names_the_path_of_a_lone_surrogate():
    with pytest.raises(InvalidInput, match=r"^meta\['a'\]\[1\]: lone surrogate U\+DC80"):
        check_unicode({"a": ["ok", "b\udc80"]}, "meta")
    with pytest.raises(InvalidInput, match=r"^meta key: lone surrogate U\+D800"):
        check_unicode({"\ud800": 1}, "meta")


def test_json_depth_is_counted_outside_strings_and_names_the_top_level_key():
    check_json_depth(json.dumps({"id": "[[[[{{{{" * 40, "meta": _nest(63, lambda v: {"k": v})}),
                     "header")
    text = json.dumps({"id": "m", "meta": _nest(64, lambda v: {"k": v})})
    check_json_depth(text, "header", max_depth=65)
    with pytest.raises(InvalidInput) as e:
        check_json_depth(text, "header")
    assert e.value.field == "header.meta" and "deeper than 64 levels" in e.value.rule
    with pytest.raises(InvalidInput, match=r"^body: nests deeper"):
        check_json_depth("[" * 50_000 + "]" * 50_000, "body")
    check_json_depth(r'{"a": "\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}',
                     "header", max_depth=1)   # brackets inside a string, after an escaped quote


INVISIBLE = ["\u200b", "\u200c\u200d", "\ufeff", "\u2060", "\u00ad", "\u180e", "\u3164",
             "\uffa0", "\u115f\u1160", "\ufe0f", "\U000e0041\U000e007f", "\U000e0100",
             " \u200b\t\n", "\u202e\u2066"]


@pytest.mark.parametrize("text", INVISIBLE, ids=lambda t: " ".join(f"U+{ord(c):04X}" for c in t))
def test_a_text_with_nothing_visible_is_blank(text):
    with pytest.raises(InvalidInput, match=r"^text: must hold a visible character"):
        check_text(text, "text", max_chars=None, limit_name="x")


@pytest.mark.parametrize("text", ["a\u200b", "用户\u200d喜欢猫", "❤️", "\u0301", "👨\u200d👩", "٠",
                                  "\u0600\u0661"])
def test_a_text_with_something_visible_is_text(text):
    assert check_text(text, "text", max_chars=None, limit_name="x") == text


def test_the_blank_characters_are_whitespace_format_and_default_ignorable():
    """Alone, a code point is blank exactly when it is whitespace, a format character (Cf) or
    one of the default-ignorables of other categories (Hangul fillers: Lo; variation selectors
    and the grapheme joiner: Mn; reserved ones: Cn); after a letter, none is refused."""
    ignorable_other = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F,
                       0x3164, 0xFFA0, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)}
    # the planes that hold blank characters (BMP, the SMP's ignorables, plane 14), and a sample
    planes = [range(0x10000), range(0x1BC90, 0x1BCB0), range(0x1D170, 0x1D180),
              range(0xE0000, 0xE1000), range(0x10000, 0x30000, 97)]
    for cp in (cp for r in planes for cp in r):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        cat = unicodedata.category(c)
        if cat == "Cc":
            continue                         # refused as control characters, or whitespace
        try:
            check_text(c, "t", max_chars=None, limit_name="x")
            blank = False
        except InvalidInput as exc:
            blank = "visible character" in exc.rule or "non-empty" in exc.rule
        expected = c.isspace() or cat == "Cf" or cp in ignorable_other or (
            cat == "Cn" and (0x2060 <= cp <= 0x206F or 0xFFF0 <= cp <= 0xFFF8
                             or 0xE0000 <= cp <= 0xE0FFF))
        assert blank == expected, hex(cp)
        if blank:
            check_text("x" + c, "t", max_chars=None, limit_name="x")   # beside a letter: text

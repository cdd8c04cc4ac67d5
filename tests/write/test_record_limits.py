"""What a write may carry (issue 19, items 5 and 12): times in 0001-01-01..9999-12-31 UTC, counts
up to 2**53 - 1, structures at most 64 levels deep, a text with something visible. Each refusal
is memlab's InvalidInput naming the item's field, the rule and the value, and the store is
unchanged: in zh and en alike."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

HCFG = MemlabConfig().replace(**{"embedding.backend": "hashing"})
T0 = 1_750_000_000.0


@pytest.fixture
def mstore():
    with memlab.open_store(":memory:", config=HCFG, clock=FixedClock(T0)) as st:
        st.add_many([{"text": "用户喜欢绿茶"}, {"text": "Alice likes green tea"}])
        yield st


def _deep(levels: int) -> list:
    value: list = ["x"]
    for _ in range(levels - 1):
        value = [value]
    return value


def _rows(st) -> list:
    return st._store.conn.execute("SELECT * FROM memory_records ORDER BY rowid").fetchall()


@pytest.mark.parametrize("text", ["用户上周去了北京", "I went to Beijing last week"])
@pytest.mark.parametrize("fields, field, rule", [
    ({"timestamp": 1e12}, "timestamp", "finite time in 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z"),
    ({"timestamp": 1e300}, "timestamp", "finite time"),        # was a raw OverflowError
    ({"timestamp": -1e12}, "timestamp", "finite time"),        # was ValueError: year -29719
    ({"timestamp": math.nan}, "timestamp", "finite time"),
    ({"timestamp": "2024-05-01"}, "timestamp", "Unix seconds (a number) or a timezone-aware"),
    ({"timestamp": datetime(2024, 5, 1)}, "timestamp", "timezone-aware"),
    ({"event_time": 1e12}, "event_time", "finite time"),
    ({"last_accessed": 1e300}, "last_accessed", "finite time"),
    ({"access_count": 10**30}, "access_count", "[0, 9007199254740991]"),
    ({"mention_count": 2**63}, "mention_count", "[1, 9007199254740991]"),
    ({"meta": {"k": _deep(64)}}, "meta", "nests deeper than 64 levels"),   # 65 with meta
    ({"tags": ["a", _deep(64)]}, "tags", "nests deeper than 64 levels"),
])
def test_a_write_outside_the_limits_is_refused_by_name(mstore, text, fields, field, rule):
    before = _rows(mstore)
    with pytest.raises(InvalidInput) as e:
        mstore.add_many([{"text": "一条正常的记忆"}, {"text": text, **fields}])
    assert e.value.field in (f"items[1].{field}", field) and rule in e.value.rule
    assert _rows(mstore) == before


@pytest.mark.parametrize("ts", [1e12, 1e300, -1e12])
def test_the_issue_s_reproduction_is_a_named_error(ts):
    """`open_store(':memory:').add('x', timestamp=1e12)` raised ValueError: year 33658 is out of
    range; 1e300 OverflowError."""
    with memlab.open_store(":memory:", config=HCFG) as st:
        with pytest.raises(InvalidInput, match=r"^items\[0\]\.timestamp: must be a finite time "
                                               r"in 0001-01-01T00:00:00Z\.\.9999-12-31T23:59:59Z"):
            st.add("x", timestamp=ts)
        assert len(st) == 0


def test_a_clock_outside_the_range_is_named_when_it_would_be_stored():
    with memlab.open_store(":memory:", config=HCFG, clock=FixedClock(1e12)) as st:
        with pytest.raises(InvalidInput, match=r"^items\[0\]\.timestamp: .*\(got 1000000000000"):
            st.add("用户喜欢猫")
        assert len(st) == 0


def test_the_ends_of_the_range_are_stored_and_recalled(mstore):
    lo = datetime(1, 1, 1, tzinfo=timezone.utc)
    hi = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
    a = mstore.add("我祖父生于公元一年", timestamp=lo, importance=0.9)
    b = mstore.add("a note from the year 9999", timestamp=hi.timestamp(), event_time=hi,
                   access_count=2**53 - 1, importance=0.9)
    assert (a.timestamp, b.timestamp, b.event_time) == (-62135596800.0, 253402300799.0,
                                                        253402300799.0)
    assert {r.embedding_status for r in mstore.get([a.id, b.id])} == {"ready"}


@pytest.mark.parametrize("text", ["\u200b", "\u200b\u200c\u200d", " \ufeff\n", "\u2060\u00ad",
                                  "\u3164", "\U000e0041\U000e0042"])
def test_a_text_with_nothing_visible_is_refused(mstore, text):
    """A zero-width-only text used to be stored (it shows as nothing in the prompt)."""
    before = _rows(mstore)
    with pytest.raises(InvalidInput, match=r"^items\[0\]\.text: must hold a visible character"):
        mstore.add(text)
    assert _rows(mstore) == before
    with pytest.raises(InvalidInput, match=r"^query: must hold a visible character"):
        mstore.recall(text, k=3)


@pytest.mark.parametrize("text", ["用户\u200d喜欢猫", "I like\u200b tea", "❤️"])
def test_a_text_with_zero_width_characters_among_visible_ones_is_stored(mstore, text):
    assert mstore.add(text).text == text


def test_reinforce_keeps_times_and_counts_in_range(mstore):
    repo = mstore._store.repo
    rowid = repo.ids_to_rows([mstore.add("用户养了一只猫").id])
    with pytest.raises(InvalidInput, match=r"^now: must be a finite time"):
        repo.reinforce(rowid, now=1e12)
    with pytest.raises(InvalidInput, match=r"^times: must be a whole number in \[1, "):
        repo.reinforce(rowid, now=T0, times=10**30)
    mstore._store.conn.execute("UPDATE memory_records SET access_count = ? WHERE rowid = ?",
                               (2**53 - 2, rowid[0]))
    repo.reinforce(rowid, now=T0, times=5)          # stops at the bound, never past it
    assert mstore._store.conn.execute("SELECT access_count FROM memory_records WHERE rowid = ?",
                                      (rowid[0],)).fetchone()[0] == 2**53 - 1

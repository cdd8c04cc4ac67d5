"""Times and counts memlab cannot store (issue 19, items 4 and 5): refused at the store's insert
by name, leaving the store unchanged; a memory already stored with such a time (before memlab
checked, or behind its back) is reported by `memlab store check`, skipped by embed_pending and
`memlab store rebuild` with a report, never a raw OverflowError."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import memlab
from memlab.cli import app
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.errors import InvalidInput, StoreInconsistent
from memlab.inputs import MAX_INT, MAX_NESTING, MAX_TIME, MIN_TIME
from memlab.store import Store, connect, quarter, quarters_between
from memlab.store.checkup import check_store
from memlab.store.health import rebuild_store
from memlab.text import memory_terms
from memlab.types import MemoryRecord

from store_helpers import dump

HCFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})
T0 = 1_750_000_000.0
TEXTS = ["用户最喜欢玩星露谷物语", "Alice drinks green tea every morning", "用户对咖啡因过敏",
         "Bob moved to Toronto last year", "周末和朋友去公园散步", "my red bicycle is fast"]


def _add(st: Store, **fields) -> None:
    rec = MemoryRecord(**{"id": "m_x", "text": "我喜欢绿茶", "timestamp": T0, **fields})
    st.add([rec], terms=[memory_terms(rec.text)], entities=[[]])


@pytest.mark.parametrize("fields, name, rule", [
    ({"timestamp": 1e12}, "timestamp", "9999-12-31T23:59:59Z"),     # used to be stored
    ({"timestamp": -1e12}, "timestamp", "0001-01-01T00:00:00Z"),
    ({"event_time": 1e300}, "event_time", "finite time"),
    ({"last_accessed": math.inf}, "last_accessed", "finite time"),
    ({"access_count": 10**30}, "access_count", f"[0, {MAX_INT}]"),  # used to be OverflowError
    ({"mention_count": 2**63}, "mention_count", f"[1, {MAX_INT}]"),
    ({"text": "\u200b\u2060\ufe0f"}, "text", "visible character"),  # used to be stored
    ({"text": "a\x00b"}, "text", "U+0000"),
    ({"meta": {"k": "x\ud800"}}, "meta['k']", "U+D800"),          # used to be UnicodeEncodeError
])
def test_the_store_refuses_what_it_cannot_keep_by_name(tmp_path, fields, name, rule):
    with Store.open(tmp_path / "s.sqlite", embedder=HashingEmbedder()) as st:
        before = dump(st.conn)
        with pytest.raises(InvalidInput) as e:
            if "text" in fields:
                st.add([MemoryRecord(id="m_x", timestamp=T0, **fields)], terms=[[]],
                       entities=[[]])
            else:
                _add(st, **fields)
        assert e.value.field == name and rule in str(e.value)
        assert dump(st.conn) == before


def test_meta_50000_deep_is_refused_by_name(tmp_path):
    """Used to end in a raw RecursionError."""
    deep: dict = {}
    for _ in range(50_000):
        deep = {"k": deep}
    with Store.open(tmp_path / "s.sqlite") as st:
        before = dump(st.conn)
        with pytest.raises(InvalidInput, match=rf"^meta: nests deeper than {MAX_NESTING}"):
            _add(st, meta=deep)
        assert dump(st.conn) == before


def test_the_extreme_times_and_counts_are_stored_and_embedded(tmp_path):
    with Store.open(tmp_path / "s.sqlite", embedder=HashingEmbedder()) as st:
        recs = [MemoryRecord(id="m_lo", text="最早的记忆", timestamp=MIN_TIME),
                MemoryRecord(id="m_hi", text="the latest memory", timestamp=MAX_TIME,
                             event_time=MAX_TIME, access_count=MAX_INT)]
        vecs = HashingEmbedder().embed_documents([r.text for r in recs])
        stored = st.add(recs, terms=[memory_terms(r.text) for r in recs], entities=[[], []],
                        vectors=vecs)
        assert [r.embedding_status for r in stored] == ["ready", "ready"]


def test_quarter_and_search_bounds_at_the_ends_of_the_range():
    assert quarter(MIN_TIME) == "0001-Q1" and quarter(MAX_TIME) == "9999-Q4"
    for bad in (MAX_TIME + 1, MIN_TIME - 1, 1e300, math.nan):
        with pytest.raises(InvalidInput, match="^event_time: "):
            quarter(bad)
    # a search bound beyond the range is clipped to it: no stored time lies outside
    assert quarters_between(MAX_TIME - 1, 1e300) == ["9999-Q4"]
    assert quarters_between(-math.inf, MIN_TIME + 1) == ["0001-Q1"]
    with pytest.raises(InvalidInput, match="^since: "):
        quarters_between(math.nan, 0.0)


@pytest.mark.parametrize("read_index", ["numpy", "sqlite-vec"])
def test_a_search_with_bounds_beyond_the_range_finds_what_it_would_within(tmp_path, read_index):
    cfg = HCFG.replace(**{"store.read_index": read_index, "store.partition_by_quarter": True})
    emb = HashingEmbedder()
    with Store.open(tmp_path / "s.sqlite", config=cfg, embedder=emb) as st:
        recs = [MemoryRecord(id=f"m{i}", text=t, timestamp=T0 + i) for i, t in enumerate(TEXTS)]
        st.add(recs, terms=[memory_terms(t) for t in TEXTS], entities=[[]] * len(TEXTS),
               vectors=emb.embed_documents(TEXTS))
        q = emb.embed_queries(["green tea"])[0]
        wide = st.dense.search(q, 6, agent_id="agent_0", user_id="user_0", since=-1e300,
                               until=1e300)
        inside = st.dense.search(q, 6, agent_id="agent_0", user_id="user_0", since=MIN_TIME,
                                 until=MAX_TIME + 1)
        assert len(wide[0]) == 6
        assert np.array_equal(wide[0], inside[0]) and np.array_equal(wide[1], inside[1])


# -- a store that already holds a bad time ----------------------------------------------------

@pytest.fixture
def damaged(tmp_path):
    """A store of 6 memories written without an embedder (pending), 3 of them then given bad
    times behind memlab's back: a timestamp of 1e300 (what a workspace import used to admit), an
    event_time of 1e12, a timestamp that is text."""
    path = tmp_path / "s.sqlite"
    with memlab.open_store(path, config=HCFG, clock=FixedClock(T0), load_embedder=False) as st:
        st.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(TEXTS)])
    conn = connect(path, busy_timeout_ms=1000)
    conn.execute("UPDATE memory_records SET timestamp = 1e300 WHERE id = 'm1'")
    conn.execute("UPDATE memory_records SET event_time = 1e12 WHERE id = 'm3'")
    conn.execute("UPDATE memory_records SET timestamp = 'yesterday' WHERE id = 'm5'")
    conn.close()
    return path


def test_check_reports_memories_with_bad_times_and_is_not_healthy(damaged):
    report = check_store(damaged)
    assert not report.healthy
    [problem] = [p for p in report.problems if "time outside" in p]
    assert problem.startswith("3 memories have a time outside 0001-01-01T00:00:00Z.."
                              "9999-12-31T23:59:59Z or not a number")
    assert "'m1' (timestamp=1e+300)" in problem and "'m3' (event_time=1000000000000.0)" in problem
    assert "'m5' (timestamp='yesterday')" in problem
    res = CliRunner().invoke(app, ["store", "check", str(damaged)])
    assert res.exit_code == 1 and "UNHEALTHY" in res.stdout and "'m1'" in res.stdout


def test_embed_pending_skips_them_with_a_warning(damaged, caplog):
    """Used to die with a raw OverflowError (store/vectors.py quarter), leaving the rest
    pending for good."""
    with memlab.open_store(damaged, config=HCFG, clock=FixedClock(T0)) as st:
        with caplog.at_level(logging.WARNING, logger="memlab"):
            assert st.embed_pending() == 3          # m0, m2, m4
        assert st._store.stats["memories with bad times"] == 3
        assert sum("3 memories have a time outside" in r.message for r in caplog.records) == 1
        health = st.health
        assert health.vectors == 3 and health.pending == 3
        assert st.embed_pending() == 0                        # and no endless loop
        assert "m0" in st.recall("星露谷物语", k=3).ids


def test_rebuild_skips_them_and_says_so(damaged):
    """`memlab store rebuild` used to die with a raw OverflowError."""
    report = rebuild_store(damaged, config=HCFG, embedder=HashingEmbedder())
    assert (report.vectors, report.pending, report.bad_times.count) == (3, 3, 3)
    assert any(line.startswith("skipped   3 memories have a time outside")
               for line in report.lines())
    res = CliRunner().invoke(app, ["store", "rebuild", str(damaged), "--set",
                                   "embedding.backend=hashing"])
    assert res.exit_code == 0 and "skipped   3 memories" in res.stdout
    res = CliRunner().invoke(app, ["store", "rebuild", str(damaged), "--json", "--set",
                                   "embedding.backend=hashing"])
    assert res.exit_code == 0 and '"count": 3' in res.stdout


def test_an_embedded_memory_given_a_bad_time_is_named_at_open_and_rebuild_drops_its_vector(
        tmp_path):
    path = tmp_path / "s.sqlite"
    with memlab.open_store(path, config=HCFG, clock=FixedClock(T0)) as st:
        st.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(TEXTS)])
        assert st.health.vectors == 6
    conn = connect(path, busy_timeout_ms=1000)
    conn.execute("UPDATE memory_records SET timestamp = 'yesterday' WHERE id = 'm5'")
    conn.close()
    with pytest.raises(StoreInconsistent, match=r"its time 'yesterday' is outside .*"
                                                r"memlab store rebuild"):
        memlab.open_store(path, config=HCFG)
    report = rebuild_store(path, config=HCFG, embedder=HashingEmbedder())
    assert (report.vectors, report.pending, report.bad_times.count) == (5, 1, 1)
    with memlab.open_store(path, config=HCFG, clock=FixedClock(T0)) as st:   # opens; m5 pending
        assert st.health.vectors == 5 and st.embed_pending() == 0
        assert "m0" in st.recall("星露谷物语", k=3).ids

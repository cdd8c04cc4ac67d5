"""The expanded-key field (issue 21, recall.expanded_keys): keys written with every memory, their
statistics kept in the write's transaction (schema version 10), BM25 over them as the columns
key_bm25 and key_bm25_z worked out by hand on a tiny zh/en corpus, a question whose date matches
a memory only through its keys, the SQL and in-process paths equal, a store of version 9 opened."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.store import Repository, connect, migrate
from memlab.store.memindex import MemoryIndex
from memlab.store.migrations import LATEST, MIGRATIONS

NOW = 1_700_000_000.0
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.expanded_keys": True})
TEXTS = ["我4月27日去了公园",                           # keys: date:04-27, atom:event
         "On April 27th I went hiking with Caroline",   # on, caroline, date:04-27
         "我对青霉素过敏",                                # atom:constraint
         "今天天气不错"]                                  # atom:event
KEYS = [["date:04-27", "atom:event"], ["on", "caroline", "date:04-27"], ["atom:constraint"],
        ["atom:event"]]
N, TOTAL = 4, 7                                          # searchable memories, their keys
K1, B = 1.2, 0.75


def _bm25(idf: float, dl: int, n: int = N, total: int = TOTAL) -> float:
    return idf * (K1 + 1) / (1 + K1 * (1 - B + B * dl / (total / n)))


def _z(values):
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / sd if sd else 0.0 for v in values]


def _open(cfg=CFG):
    s = memlab.open_store(":memory:", config=cfg, clock=FixedClock(NOW))
    s.add_many([{"text": t, "id": f"m{i}", "timestamp": NOW - 100 + i}
                for i, t in enumerate(TEXTS)])
    return s


@pytest.fixture
def store():
    s = _open()
    yield s
    s.close()


def _frame(s, questions):
    f = s.features(questions, k=10, now=NOW)
    t = f.table.copy()
    t["id"] = [f.ids[int(r)] for r in t["row"]]
    return t


def test_keys_are_written_with_their_statistics(store):
    conn = store._store.conn
    got = [(i, json.loads(k)) for i, k in conn.execute(
        "SELECT id, keys_json FROM memory_records ORDER BY rowid")]
    assert got == [(f"m{i}", k) for i, k in enumerate(KEYS)]
    assert dict(conn.execute("SELECT term, df FROM key_stats")) == {
        "date:04-27": 2, "atom:event": 2, "on": 1, "caroline": 1, "atom:constraint": 1}
    assert conn.execute("SELECT n_docs, total_keys FROM memory_owners").fetchall() == \
        [(N, TOTAL)]


@pytest.mark.parametrize("question,lang", [("我4月27号做了什么？", "zh"),
                                           ("What did I do on April 27th?", "en")])
def test_key_bm25_by_hand(store, question, lang):
    t = _frame(store, [question]).set_index("id")
    idf = math.log(1 + (N - 2 + 0.5) / (2 + 0.5))                 # date:04-27, df 2: ln 2
    assert idf == pytest.approx(math.log(2))
    want = {"m0": _bm25(idf, 2), "m1": _bm25(idf, 3), "m2": 0.0, "m3": 0.0}
    if lang == "en":   # "on" is a key of m1 too (df 1)
        want["m1"] += _bm25(math.log(1 + (N - 1 + 0.5) / (1 + 0.5)), 3)
    # ln 2 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / 1.75)) = 1.524924 / 2.328571
    assert want["m0"] == pytest.approx(0.654875, abs=1e-6)
    for mid, v in want.items():
        assert t.loc[mid, "key_bm25"] == pytest.approx(v, rel=1e-6)
    ids = sorted(want)
    for mid, z in zip(ids, _z([want[i] for i in ids])):
        assert t.loc[mid, "key_bm25_z"] == pytest.approx(z, abs=1e-5)


def test_a_date_matches_across_languages_only_through_the_keys(store):
    """The Chinese question names April 27th as 4月27号; the English memory writes 'April 27th':
    no lexical term is shared (BM25 0, not in the lexical route), the key field matches."""
    t = _frame(store, ["我4月27号做了什么？"]).set_index("id")
    assert t.loc["m1", "bm25"] == 0.0 and t.loc["m1", "lexical_rank"] == 0
    assert t.loc["m1", "key_bm25"] > 0.0
    assert t.loc["m1", "key_bm25_z"] > t.loc["m2", "key_bm25_z"]


def test_an_atom_kind_matches_a_question_of_that_kind(store):
    t = _frame(store, ["我对什么过敏？"]).set_index("id")
    idf = math.log(1 + (N - 1 + 0.5) / (1 + 0.5))                 # atom:constraint, df 1
    assert t.loc["m2", "key_bm25"] == pytest.approx(_bm25(idf, 1), rel=1e-6)
    assert (t.drop(index="m2")["key_bm25"] == 0).all()


def test_off_writes_no_keys_and_the_columns_are_nan():
    s = _open(CFG.replace(**{"recall.expanded_keys": False}))
    try:
        conn = s._store.conn
        assert {k for (k,) in conn.execute("SELECT keys_json FROM memory_records")} == {"[]"}
        assert conn.execute("SELECT count(*) FROM key_stats").fetchone() == (0,)
        t = _frame(s, ["What did I do on April 27th?"])
        assert t["key_bm25"].isna().all() and t["key_bm25_z"].isna().all()
    finally:
        s.close()


def test_superseded_and_deleted_memories_leave_the_field(store):
    repo = store._store.repo
    repo.update_fields("m1", lifecycle_state="superseded")
    conn = repo.conn
    assert dict(conn.execute("SELECT term, df FROM key_stats")) == {
        "date:04-27": 1, "atom:event": 2, "atom:constraint": 1}
    assert conn.execute("SELECT n_docs, total_keys FROM memory_owners").fetchone() == (3, 4)
    t = _frame(store, ["What did I do on April 27th?"]).set_index("id")
    assert "m1" not in t.index
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    assert t.loc["m0", "key_bm25"] == pytest.approx(_bm25(idf, 2, n=3, total=4), rel=1e-6)
    repo.update_fields("m1", lifecycle_state="active")            # back: it counts again
    assert conn.execute("SELECT n_docs, total_keys FROM memory_owners").fetchone() == (N, TOTAL)
    repo.delete(["m0"])
    assert dict(conn.execute("SELECT term, df FROM key_stats")) == {
        "date:04-27": 1, "atom:event": 1, "on": 1, "caroline": 1, "atom:constraint": 1}
    assert conn.execute("SELECT n_docs, total_keys FROM memory_owners").fetchone() == (3, 5)


def test_a_new_text_drops_the_old_texts_keys(store):
    repo = store._store.repo
    repo.update_fields("m2", text="我不吃香菜", terms=["香菜"])
    conn = repo.conn
    assert conn.execute("SELECT keys_json FROM memory_records WHERE id = 'm2'").fetchone() == \
        ("[]",)
    assert "atom:constraint" not in dict(conn.execute("SELECT term, df FROM key_stats"))
    repo.update_fields("m2", keys=["atom:constraint", "香菜"])
    assert dict(conn.execute("SELECT term, df FROM key_stats"))["香菜"] == 1
    assert conn.execute("SELECT total_keys FROM memory_owners").fetchone() == (TOTAL + 1,)


def test_a_refused_add_leaves_the_key_statistics_unchanged(store):
    conn = store._store.conn
    before = (sorted(conn.execute("SELECT * FROM key_stats")),
              conn.execute("SELECT total_keys FROM memory_owners").fetchall())
    with pytest.raises(InvalidInput, match="already stored"):
        store.add_many([{"text": "My favourite food is dumplings", "id": "new"},
                        {"text": "5月8日见", "id": "m0"}])
    assert (sorted(conn.execute("SELECT * FROM key_stats")),
            conn.execute("SELECT total_keys FROM memory_owners").fetchall()) == before


def test_sql_and_in_process_index_give_the_same_key_bm25(store):
    conn = store._store.conn
    repo = Repository(conn, config=CFG)
    index = MemoryIndex.load(conn, config=CFG)
    rows = [r for (r,) in conn.execute("SELECT rowid FROM memory_records ORDER BY rowid")]
    agent, user = conn.execute("SELECT agent_id, user_id FROM memory_owners").fetchone()
    who = {"agent_id": agent, "user_id": user}
    for q in (["date:04-27", "on"], ["atom:event", "caroline", "nothing"], [], ["atom:constraint"]):
        a = repo.key_bm25(q, rows, **who)
        np.testing.assert_allclose(index.key_bm25(q, rows, **who), a, rtol=1e-12)
    assert repo.key_bm25(["date:04-27"], rows, **who)[0] > 0
    # the index follows a supersession (its change log) as SQL does
    repo.update_fields("m0", lifecycle_state="superseded")
    index.sync(conn)
    np.testing.assert_allclose(index.key_bm25(["date:04-27"], rows, **who),
                               repo.key_bm25(["date:04-27"], rows, **who), rtol=1e-12)
    assert repo.key_bm25(["date:04-27"], rows, **who)[1] == pytest.approx(
        _bm25(math.log(1 + 2.5 / 1.5), 3, n=3, total=5), rel=1e-9)


def test_a_version_9_store_opens_and_gets_the_field(tmp_path):
    path = tmp_path / "v9.sqlite"
    conn = connect(path, busy_timeout_ms=1000)
    migrate(conn, migrations=MIGRATIONS[:9])
    conn.execute("INSERT INTO memory_owners (agent_id, user_id, n_docs) VALUES ('a', 'u', 0)")
    conn.commit()
    conn.close()
    assert LATEST == 11
    s = memlab.open_store(path, config=CFG, clock=FixedClock(NOW))
    try:
        c = s._store.conn
        assert c.execute("PRAGMA user_version").fetchone() == (11,)
        assert c.execute("SELECT total_keys FROM memory_owners").fetchall() == [(0,)]
        s.add_many([{"text": t, "id": f"m{i}", "timestamp": NOW - 100 + i}
                    for i, t in enumerate(TEXTS)])
        t = _frame(s, ["我4月27号做了什么？"]).set_index("id")
        assert t.loc["m1", "key_bm25"] > 0
    finally:
        s.close()

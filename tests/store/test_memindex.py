"""MemoryIndex: every read equals the Repository's SQL, before and after every kind of write,
whichever connection wrote; it never reads inside an open transaction."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, StoreInconsistent
from memlab.store import Store, open_store
from memlab.store.memindex import MemoryIndex
from memlab.text import extract_entities, memory_terms
from store_helpers import add, rec

WORDS = ("paris london cats dogs tea coffee music chess garden river 小明 小红 猫 咖啡 音乐 "
         "花园 下棋 北京 上海 Caroline Melanie").split()
OWNERS = [("agent_0", "user_0"), ("agent_0", "user_1"), ("agent_1", "user_0")]
LAYERS = ("permanent", "long_term", "short_term")


def random_records(rng: random.Random, n: int, start: int = 0):
    out = []
    for i in range(start, start + n):
        a, u = rng.choice(OWNERS)
        words = rng.sample(WORDS, rng.randint(1, 6))
        text = " ".join(words) + f" {rng.choice(['Caroline', 'Melanie', '小明', ''])} note{i % 7}"
        out.append(rec(f"m{i}", text, agent_id=a, user_id=u,
                       retention_layer=rng.choice(LAYERS),
                       importance=round(rng.random(), 2),
                       timestamp=1.7e9 + rng.randint(0, 10_000) * 60.0,
                       event_time=None if rng.random() < 0.5 else 1.69e9 + rng.random() * 1e6,
                       access_count=rng.randint(0, 3),
                       emotions={"joy": float(rng.randint(0, 90))} if rng.random() < 0.3 else {},
                       lifecycle_state="superseded" if rng.random() < 0.1 else "active",
                       deprecated=rng.random() < 0.05, pinned=rng.random() < 0.1,
                       speaker=rng.choice(["Caroline", "刘思远", ""]),
                       session_id=rng.choice(["", "s1", "s2", "s3", "s4"])))
    return out


QUERIES = ["paris cats", "咖啡 音乐 花园", "Caroline tea", "note3 river chess dogs", "北京",
           "nothing-matches-this", "小明 猫 paris", "Melanie coffee note1"]


def assert_same_reads(repo, index: MemoryIndex, rowids):
    """Every candidate and signal call answers alike (BM25 within float rounding)."""
    for a, u in OWNERS + [("nobody", "none")]:
        who = {"agent_id": a, "user_id": u}
        for limit in (3, 50):
            assert index.permanent_candidates(**who, limit=limit).tolist() == \
                repo.permanent_candidates(**who, limit=limit).tolist()
            for window in ({}, {"since": 1.6e9, "until": 1.7e9 + 5_000 * 60.0}):
                assert index.superseded_candidates(**who, limit=limit, **window).tolist() == \
                    repo.superseded_candidates(**who, limit=limit, **window).tolist()
        for q in QUERIES:
            terms = memory_terms(q)
            for limit in (2, 5, 500):
                r1, c1, s1 = repo.lexical_candidates(terms, **who, limit=limit)
                r2, c2, s2 = index.lexical_candidates(terms, **who, limit=limit)
                np.testing.assert_allclose(s2, s1, rtol=1e-12)
                # same ranking; rows may swap only where scores tie within rounding
                assert sorted(r1.tolist()) == sorted(r2.tolist()) or \
                    np.isclose(s1[-1], s1[-2] if len(s1) > 1 else s1[-1])
                same = dict(zip(r1.tolist(), c1.tolist()))
                assert all(same[r] == c for r, c in zip(r2.tolist(), c2.tolist()) if r in same)
            ents = extract_entities(q) + ["caroline", "小明"]
            for limit in (1, 100):
                e1, n1 = repo.entity_candidates(ents, **who, limit=limit)
                e2, n2 = index.entity_candidates(ents, **who, limit=limit)
                assert (e1.tolist(), n1.tolist()) == (e2.tolist(), n2.tolist())
            assert index.entity_matches(ents, rowids).tolist() == \
                repo.entity_matches(ents, rowids).tolist()
    # the ranking context's session layout (issue 21), on every row and on a shuffled half
    for rows in (rowids, random.Random(3).sample(list(rowids), len(rowids) // 2)):
        got, want = index.session_layout(rows), repo.session_layout(rows)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.tolist() == w.tolist()
    f1, f2 = repo.feature_columns(rowids), index.feature_columns(rowids)
    assert f1.keys() == f2.keys()
    for key in f1:
        if key == "terms":
            assert list(f1[key]) == list(f2[key])
            for q in QUERIES:
                qt = frozenset(memory_terms(q))
                idx = np.arange(len(rowids))
                assert f1[key].overlap(qt, idx).tolist() == f2[key].overlap(qt, idx).tolist()
        elif isinstance(f1[key], list):
            assert f1[key] == f2[key], key
        else:
            assert f1[key].dtype == f2[key].dtype, key
            np.testing.assert_array_equal(f1[key], f2[key], err_msg=key)


def all_rowids(conn):
    return [r for (r,) in conn.execute("SELECT rowid FROM memory_records ORDER BY rowid")]


def test_reads_equal_sql_on_a_random_store(store):
    conn, repo = store
    rng = random.Random(5)
    add(repo, random_records(rng, 300))
    index = MemoryIndex.load(conn)
    assert len(index) == 300
    assert_same_reads(repo, index, all_rowids(conn))


def test_sync_follows_every_kind_of_write(store):
    conn, repo = store
    rng = random.Random(7)
    add(repo, random_records(rng, 120))
    index = MemoryIndex.load(conn)
    gen = index.generation
    add(repo, random_records(rng, 40, start=120))
    assert index.sync(conn) == 40 and index.generation > gen
    rows = all_rowids(conn)
    repo.reinforce(rows[20:30], now=1.8e9)                       # in place
    repo.update_fields("m3", importance=0.99, retention_layer="permanent")
    repo.update_fields("m4", text="totally new text about chess and 北京",
                       terms=memory_terms("totally new text about chess and 北京"))
    repo.update_fields("m5", lifecycle_state="superseded")         # leaves the lexical index
    repo.update_fields("m6", agent_id="agent_1", user_id="user_0")   # another owner
    repo.update_fields("m7", entities=["caroline", "melanie"])
    repo.update_fields("m10", speaker="Melanie (changed)")       # the speaker_named column's
    repo.delete(["m8", "m9"])
    repo.update_fields("m10", session_id="s9")                     # another session
    repo.update_fields("m11", timestamp=1.6e9)                      # first of its session now
    assert index.sync(conn) == 10 + 9
    assert index.feature_columns(repo.ids_to_rows(["m10"]))["speakers"] == ["Melanie (changed)"]
    assert index.sync(conn) == 0
    conn.execute("UPDATE memory_records SET session_id = 's8' WHERE id = 'm12'")   # SQL alone
    assert index.sync(conn) == 1
    rows = all_rowids(conn)
    assert_same_reads(repo, index, rows)
    fresh = MemoryIndex.load(conn)
    assert_same_reads(fresh, index, rows)
    # a superseded revision deprecated (in place: it was not searchable before either)
    who = {"agent_id": repo.get(["m5"])[0].agent_id, "user_id": repo.get(["m5"])[0].user_id}
    m5 = repo.ids_to_rows(["m5"])[0]
    assert m5 in index.superseded_candidates(**who, limit=500).tolist()
    repo.update_fields("m5", deprecated=True)
    assert index.sync(conn) == 1
    assert m5 not in index.superseded_candidates(**who, limit=500).tolist()
    assert_same_reads(repo, index, rows)
    with pytest.raises(StoreInconsistent, match="does not hold rowid 10000"):
        index.feature_columns([rows[0], 10_000])   # rowids come from recall's routes: internal


def test_embedding_status_updates_log_nothing(store):
    conn, repo = store
    rows = add(repo, random_records(random.Random(1), 5))
    index = MemoryIndex.load(conn)
    repo.mark_embedded(rows, "some-model")
    assert index.sync(conn) == 0


def test_another_connection_writes_and_the_index_follows(tmp_path):
    path = tmp_path / "s.sqlite"
    cfg = MemlabConfig()
    a, b = Store.open(path, config=cfg), Store.open(path, config=cfg)
    rng = random.Random(3)
    add(a.repo, random_records(rng, 50))
    assert a.signals() is a.repo                  # a one-off read: SQL, no index load
    index = a.signals()
    assert isinstance(index, MemoryIndex) and len(index) == 50
    add(b.repo, random_records(rng, 30, start=50))
    b.repo.delete(["m1"])
    b.repo.reinforce(b.repo.ids_to_rows(["m2"]), now=1.9e9)
    assert a.signals() is index and len(index) == 79
    assert_same_reads(a.repo, index, all_rowids(a.conn))
    a.close(), b.close()


def test_open_transaction_reads_sql_and_sync_refuses(tmp_path):
    store = Store.open(tmp_path / "s.sqlite")
    add(store.repo, random_records(random.Random(2), 10))
    assert isinstance(store.signals(load=True), MemoryIndex)
    store.conn.execute("BEGIN")
    add(store.repo, random_records(random.Random(4), 5, start=10))
    assert store.signals() is store.repo          # uncommitted rows could still roll back
    with pytest.raises(InvalidInput, match="transaction"):
        store._memory_index.sync(store.conn)
    store.conn.execute("ROLLBACK")
    assert len(store.signals()) == 10
    store.close()


def test_sqlite_mode_reads_sql(tmp_path):
    cfg = MemlabConfig().replace(**{"store.memory_index": "sqlite"})
    store = Store.open(tmp_path / "s.sqlite", config=cfg)
    assert store.signals() is store.repo
    store.close()


def test_many_dead_positions_reload(store):
    conn, repo = store
    add(repo, [rec(f"m{i}", f"word{i} shared") for i in range(30)])
    index = MemoryIndex.load(conn)
    for round_ in range(80):   # each text change kills a position and appends one
        for i in range(30):
            t = f"word{i} shared round{round_}"
            repo.update_fields(f"m{i}", text=t, terms=memory_terms(t))
        index.sync(conn)
    assert index._n < 1024 + 2 * 30            # reloaded instead of growing without end
    assert_same_reads(repo, index, all_rowids(conn))


def test_counter_behind_the_index_reloads(store):
    conn, repo = store
    add(repo, random_records(random.Random(9), 20))
    index = MemoryIndex.load(conn)
    index.generation += 1000                  # as if the file were swapped for an older one
    assert index.sync(conn) == -1
    assert_same_reads(repo, index, all_rowids(conn))


def test_open_store_helper_migrates_to_the_change_log(tmp_path):
    conn, repo = open_store(tmp_path / "x.sqlite")
    add(repo, [rec("a", "hello world")])
    assert conn.execute("SELECT gen FROM memory_generation").fetchone()[0] >= 1
    assert conn.execute("SELECT count(*) FROM memory_changes").fetchone()[0] == 1
    conn.close()

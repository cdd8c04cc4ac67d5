"""Read snapshots (one committed state for several reads) and recall's resync of its indexes."""

from __future__ import annotations

import logging

import pytest

import memlab
from memlab.config import MemlabConfig
from memlab.errors import ReadOnlyStore, StoreInconsistent
from memlab.store import (MemoryIndex, Store, VectorCache, driver, in_read_snapshot,
                          in_write_transaction, load_meta, open_store, read_snapshot, transaction)
from store_helpers import add, dump, fake_embed, rec

CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "embedding.hashing_dim": 64,
                                "recall.floor_mode": "absolute", "recall.relevance_floor": 0.0})


def _query_only(conn) -> int:
    return conn.execute("PRAGMA query_only").fetchone()[0]


def test_a_read_snapshot_pins_one_committed_state(tmp_path):
    a, repo_a = open_store(tmp_path / "s.sqlite")
    b, repo_b = open_store(tmp_path / "s.sqlite")
    add(repo_b, [rec("m1"), rec("m2")])
    with read_snapshot(a) as conn:
        assert conn is a and in_read_snapshot(a) and not in_write_transaction(a)
        assert repo_a.count() == 2
        add(repo_b, [rec("m3")])                  # another connection commits meanwhile
        assert repo_b.count() == 3
        assert repo_a.count() == 2                # ... unseen inside the snapshot
        assert [r.id for r in repo_a.get(["m1", "m2"])] == ["m1", "m2"]
    assert not a.in_transaction and _query_only(a) == 0
    assert repo_a.count() == 3
    a.close(), b.close()


def test_a_read_snapshot_is_read_only_and_ends_cleanly_on_error(tmp_path):
    conn, repo = open_store(tmp_path / "s.sqlite")
    add(repo, [rec("m1")])
    before = dump(conn)
    with pytest.raises(ReadOnlyStore, match="readonly"):
        with read_snapshot(conn):
            add(repo, [rec("m2")])                # a write cannot join a read snapshot
    assert not conn.in_transaction and _query_only(conn) == 0
    assert dump(conn) == before
    add(repo, [rec("m2")])                        # writes work again after it
    assert repo.count() == 2
    conn.close()


def test_inside_a_write_transaction_a_read_snapshot_changes_nothing(tmp_path):
    conn, repo = open_store(tmp_path / "s.sqlite")
    with transaction(conn):
        add(repo, [rec("m1")])
        assert in_write_transaction(conn) and not in_read_snapshot(conn)
        with read_snapshot(conn):
            assert in_write_transaction(conn) and _query_only(conn) == 0
            assert repo.count() == 1              # the transaction's own write
        assert conn.in_transaction                # still the caller's transaction
    assert repo.count() == 1
    conn.close()


def test_store_signals_inside_a_read_is_the_index_synced_to_that_snapshot(tmp_path):
    a = Store.open(tmp_path / "s.sqlite")
    b = Store.open(tmp_path / "s.sqlite")
    add(b.repo, [rec(f"m{i}", f"Caroline memory {i}") for i in range(4)])
    a.warm()

    def read():
        index = a.signals()
        add(b.repo, [rec("late", "Caroline late memory")])   # commits after the snapshot began
        assert a.signals() is index and isinstance(index, MemoryIndex)
        return len(index), a.repo.count()

    assert a.read(read) == (4, 4)
    assert a.read(lambda: (len(a.signals()), a.repo.count())) == (5, 5)
    with transaction(a.conn):
        assert a.read(a.signals) is a.repo        # a write transaction reads SQL
    a.close(), b.close()


def test_an_index_out_of_step_is_reloaded_and_never_blamed_on_the_caller(tmp_path, caplog):
    """A MemoryIndex that missed rows (here: told it is current when it is not) makes recall's
    routes disagree; recall reloads its indexes, answers, and logs and counts it once."""
    path = tmp_path / "s.sqlite"
    reader = memlab.open_store(path, config=CFG)
    writer = memlab.open_store(path, config=CFG)
    writer.add("Alice drinks green tea", importance=0.5)
    reader.warm()
    index = reader._store._memory_index
    new = [writer.add(f"Alice has tea with {n}", importance=0.5).id for n in ("Bob", "Carol")]
    index.generation = reader._store.conn.execute(
        "SELECT gen FROM memory_generation").fetchone()[0]    # out of step: it lacks `new`
    with caplog.at_level(logging.WARNING, logger="memlab"):
        res = reader.recall("Alice tea", k=5)
        assert set(new) <= set(res.ids) and len(res) == 3
        assert reader._store.stats["index resync"] == 1
        reader.recall("Alice tea", k=5)
    assert reader._store.stats["index resync"] == 1       # reloaded once, in step since
    assert sum("out of step" in r.getMessage() for r in caplog.records) == 1
    reader.close(), writer.close()


def test_a_vector_without_a_record_is_an_inconsistency_until_rebuilt(tmp_path):
    """A vector row whose memory is gone (a damaged cache) is the store's fault, named with the
    path and the remedy; rebuilding the vector cache from the truth repairs it."""
    path = tmp_path / "s.sqlite"
    st = memlab.open_store(path, config=CFG)
    keep = st.add("Alice drinks green tea", importance=0.5)
    gone = st.add("Alice tea party", importance=0.5)
    conn = st._store.conn
    (rowid,) = conn.execute("SELECT rowid FROM memory_records WHERE id = ?", (gone.id,)).fetchone()
    with transaction(conn):   # the record goes, its vector stays: what no memlab write does
        conn.execute("DELETE FROM memory_records WHERE rowid = ?", (rowid,))
        conn.execute(f"UPDATE vector_tables SET generation = generation + 1")
    with pytest.raises(StoreInconsistent, match=f"rowid {rowid} has no record") as err:
        load_meta(conn, [rowid])
    with pytest.raises(StoreInconsistent) as err:
        st.recall("Alice tea", k=5)
    assert str(path) in str(err.value) and "rebuild" in str(err.value)
    assert st.rebuild_vectors() == 1
    assert st.recall("Alice tea", k=5).ids == [keep.id]
    st.close()


def test_a_missing_vector_is_an_inconsistency_not_bad_input(store):
    conn, repo = store
    cache = VectorCache(conn, model_version="fake", dim=16)
    rows = add(repo, [rec("a"), rec("b")])
    repo.put_vectors(cache, rows[:1], fake_embed(["a"]))
    with pytest.raises(StoreInconsistent, match=f"rowid {rows[1]} has no vector"):
        cache.vectors(rows)

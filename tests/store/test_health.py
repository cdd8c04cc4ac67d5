"""The vector cache can be lost and is detected, said and rebuilt with identical rankings (issue 7,
defect 3); the store's health report (`memlab store check`)."""

from __future__ import annotations

import logging

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.store import connect
from store_helpers import EN, HCFG, QUERIES, ZH

N = 60


def _open(path, embedder):
    return memlab.open_store(path, config=HCFG, embedder=embedder,
                             clock=FixedClock(1_750_000_000))


def _rankings(st) -> list:
    return [list(zip(r.ids, r.to_frame()["score"].round(6), r.to_frame()["relevance"].round(6)))
            for r in (st.recall(q, k=8) for q in QUERIES)]


def _raw(path):
    """A plain connection with sqlite-vec loaded (what another tool, or a user, would use)."""
    return connect(path, busy_timeout_ms=1000)


def _drop_table_and_registry(path, table):
    conn = _raw(path)
    conn.execute(f"DROP TABLE {table}")
    conn.execute("DELETE FROM vector_tables")
    conn.close()


def _drop_table_only(path, table):
    conn = _raw(path)
    conn.execute(f"DROP TABLE {table}")
    conn.close()


def _delete_a_third(path, table):
    conn = _raw(path)
    conn.execute(f"DELETE FROM {table} WHERE rowid % 3 = 0")
    conn.close()


def _drop_registry_only(path, table):
    conn = _raw(path)
    conn.execute("DELETE FROM vector_tables")
    conn.close()


LOSSES = {"registry row deleted, table left": (_drop_registry_only, N, "unregistered"),
          "table and registry row dropped": (_drop_table_and_registry, N, "missing"),
          "table dropped, registry row left": (_drop_table_only, N, "missing"),
          "a third of the rows deleted": (_delete_a_third, N // 3, "short")}


@pytest.fixture
def built(tmp_path, counting_embedder):
    path = tmp_path / "m.sqlite"
    with _open(path, counting_embedder) as st:
        st.add_many([{"text": f"{(ZH + EN)[i % 12]} ({i})", "id": f"m{i}",
                      "importance": 0.3 + 0.01 * (i % 50)} for i in range(N)])
        ref = _rankings(st)
        table = st._store.vectors.table
        assert st.health.ok and st.health.vectors == N
    return path, table, ref


@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("restore", ["embed_pending", "rebuild_vectors"])
def test_a_lost_vector_cache_is_detected_said_and_restored(built, counting_embedder, caplog, loss,
                                                           restore):
    path, table, ref = built
    damage, lost, word = LOSSES[loss]
    damage(path, table)
    embedded = len(counting_embedder.documents)
    with caplog.at_level(logging.WARNING, logger="memlab"):
        st = _open(path, counting_embedder)          # opening works (no raw OperationalError)
    with st:
        health = st.health
        assert not health.ok and health.lost == lost and word in health.problem
        assert health.pending == lost
        assert sum(str(path) in r.message and f"{lost} memories" in r.message
                   for r in caplog.records) == 1    # logged once, naming the store
        notes = st.recall("green tea", k=3).notes
        assert any(f"{lost} memories" in n and "embed_pending" in n for n in notes), notes
        if restore == "embed_pending":
            assert st.embed_pending() == lost
        else:
            assert st.rebuild_vectors() == N
        assert _rankings(st) == ref
        assert st.health.ok and st.recall("green tea", k=3).notes == ()
    assert len(counting_embedder.documents) == embedded   # through the embedding cache
    with _open(path, counting_embedder) as st:        # and after reopening
        assert st.health.ok and _rankings(st) == ref


@pytest.mark.parametrize("damage, problem", [
    ("DROP TRIGGER memory_records_log_update", "triggers ['memory_records_log_update'] are missing"),
    ("UPDATE memory_owners SET n_docs = n_docs + 1", "lexical index counts 61"),
    ("UPDATE memory_changes SET seq = seq + 1000", "ahead of the store's generation"),
])
def test_check_store_names_what_would_make_recall_wrong(built, damage, problem):
    import hashlib

    from memlab.store.checkup import check_store

    path, _, _ = built
    assert check_store(path).healthy
    conn = _raw(path)
    conn.execute(damage)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    report = check_store(path, full=True)
    assert not report.healthy and any(problem in p for p in report.problems), report.problems
    assert report.integrity == ["ok"]              # SQLite sees no damage: memlab's checks do
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_vectors_of_memories_deleted_behind_the_stores_back_are_dropped_at_open(built, caplog):
    """A memory deleted with plain SQL (its vector left in the cache): opening drops the orphan
    vector and says so, instead of failing every recall on an unknown rowid."""
    path, table, _ = built
    conn = _raw(path)
    conn.execute("DELETE FROM memory_records WHERE id = 'm7'")   # cascades to its embedded mark
    conn.close()
    with caplog.at_level(logging.WARNING, logger="memlab"):
        st = _open(path, memlab.embed.HashingEmbedder())
    with st:
        assert "vectors of deleted memories" in st._store.vector_check.problem
        assert st.health.ok and st.health.vectors == st.health.embedded == N - 1
        res = st.recall("Caroline adopted a cat named Momo (7)", k=8)
        assert "m7" not in res.ids and res.notes == ()
    assert any("vectors of deleted memories" in r.message for r in caplog.records)
    with _open(path, memlab.embed.HashingEmbedder()) as st:
        assert st.health.ok


def test_a_vector_whose_marked_memory_is_unreadable_is_corrupt_store(built):
    """The record is gone but its embedded mark and vector stay (what a damaged page of
    memory_records looks like; memlab never writes it): CorruptStore, and `store check` names
    the broken reference."""
    from memlab.errors import CorruptStore
    from memlab.store.checkup import check_store

    path, table, _ = built
    conn = _raw(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("DELETE FROM memory_records WHERE id = 'm7'")
    conn.close()
    with pytest.raises(CorruptStore) as err:
        _open(path, memlab.embed.HashingEmbedder())
    assert str(path) in str(err.value) and "no memory record" in str(err.value)
    report = check_store(path)
    assert not report.healthy and any("foreign key" in p for p in report.problems)


def test_a_damaged_vector_table_can_still_be_rebuilt(built):
    """A vector table that cannot be loaded (NaN bytes where the sample at open does not read:
    it is off here): `memlab store rebuild` does not need to load it first, and rebuilds it from
    the records with the original rankings."""
    from typer.testing import CliRunner

    from memlab.cli import app
    from memlab.errors import CorruptStore

    path, table, ref = built
    conn = _raw(path)
    chunk, blob = conn.execute(f"SELECT rowid, vectors FROM {table}_vector_chunks00").fetchone()
    conn.execute(f"UPDATE {table}_vector_chunks00 SET vectors = ? WHERE rowid = ?",
                 (b"\xff" * 64 + blob[64:], chunk))
    conn.close()
    with pytest.raises(CorruptStore, match="memlab store rebuild"):
        memlab.open_store(path, config=HCFG.replace(**{"store.vector_sample": 0}),
                          embedder=memlab.embed.HashingEmbedder())
    res = CliRunner().invoke(app, ["store", "rebuild", str(path), "--set",
                                   "embedding.backend=hashing", "--set", "store.vector_sample=0"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "before    the contents of all 60 vectors checked: 1 damaged (1 not finite)" \
        in res.output
    with _open(path, memlab.embed.HashingEmbedder()) as st:
        assert st.health.ok and _rankings(st) == ref

"""Damaged vector contents are found, said and repaired (issue 19, item 7; item 12's rebuild
report): vectors zeroed, NaN, scaled or swapped behind memlab's back keep the table's counts, so
only a check of the contents (memlab.store.vecscan) finds them."""

from __future__ import annotations

import hashlib
import json
import logging

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.store import connect
from store_helpers import EN, HCFG, QUERIES, ZH

N = 60


def _cfg(**kw):
    return HCFG.replace(**kw)


def _open(path, embedder, cfg=HCFG):
    return memlab.open_store(path, config=cfg, embedder=embedder, clock=FixedClock(1_750_000_000))


def _rankings(st) -> list:
    return [list(zip(r.ids, r.frame["score"].round(6), r.frame["relevance"].round(6)))
            for r in (st.recall(q, k=8) for q in QUERIES)]


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _build(path, embedder, cfg=HCFG):
    with _open(path, embedder, cfg) as st:
        st.add_many([{"text": f"{(ZH + EN)[i % 12]} ({i})", "id": f"m{i}",
                      "importance": 0.3 + 0.01 * (i % 50)} for i in range(N)])
        ref = _rankings(st)
        table = st._store.vectors.table
        assert st.health.ok and st.health.vectors == N
    conn = connect(path, busy_timeout_ms=1000)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return table, ref


class Raw:
    """The stored bytes of a vec0 table's vectors, read and written behind memlab's back through
    sqlite-vec's shadow tables (as another tool, or damage, would)."""

    def __init__(self, path, table: str) -> None:
        self.conn, self.table = connect(path, busy_timeout_ms=1000), table
        dtype = self.conn.execute("SELECT dtype, dim FROM vector_tables").fetchone()
        self.width = dtype[1] * (1 if dtype[0] == "int8" else 4)

    def _where(self, rowid: int) -> tuple[int, int]:
        return self.conn.execute(f'SELECT chunk_id, chunk_offset FROM "{self.table}_rowids" '
                                 f"WHERE rowid = ?", (rowid,)).fetchone()

    def get(self, rowid: int) -> bytes:
        chunk, off = self._where(rowid)
        blob = self.conn.execute(f'SELECT vectors FROM "{self.table}_vector_chunks00" WHERE '
                                 f"rowid = ?", (chunk,)).fetchone()[0]
        return blob[off * self.width:(off + 1) * self.width]

    def put(self, rowid: int, data: bytes) -> None:
        assert len(data) == self.width
        chunk, off = self._where(rowid)
        blob = bytearray(self.conn.execute(f'SELECT vectors FROM "{self.table}_vector_chunks00" '
                                           f"WHERE rowid = ?", (chunk,)).fetchone()[0])
        blob[off * self.width:(off + 1) * self.width] = data
        self.conn.execute(f'UPDATE "{self.table}_vector_chunks00" SET vectors = ? WHERE rowid = ?',
                          (bytes(blob), chunk))

    def rowids(self) -> list[int]:
        return [r[0] for r in self.conn.execute(f'SELECT rowid FROM "{self.table}_rowids" '
                                                f"ORDER BY rowid")]

    def close(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.conn.close()


def _zero(raw, rowid):
    raw.put(rowid, bytes(raw.width))


def _nan(raw, rowid):
    raw.put(rowid, b"\xff" * raw.width)


def _scale(raw, rowid):   # float32 tables only: x1000, the same direction
    raw.put(rowid, (np.frombuffer(raw.get(rowid), np.float32) * 1000).tobytes())


def _negate(raw, rowid):  # int8 too: the opposite direction
    dtype = np.int8 if raw.width < 1000 else np.float32
    raw.put(rowid, (-np.frombuffer(raw.get(rowid), dtype)).astype(dtype).tobytes())


def _swap_pairs(raw, rowids):
    for a, b in zip(rowids[::2], rowids[1::2]):
        va, vb = raw.get(a), raw.get(b)
        raw.put(a, vb)
        raw.put(b, va)


def damage(path, table, how: str, rowids=None) -> int:
    """Damage the vectors of ``rowids`` (default: all) ``how``; returns how many."""
    raw = Raw(path, table)
    rows = raw.rowids() if rowids is None else list(rowids)
    if how == "swapped":
        _swap_pairs(raw, rows)
    else:
        fn = {"all zero": _zero, "not finite": _nan, "scaled": _scale, "negated": _negate}[how]
        for r in rows:
            fn(raw, r)
    raw.close()
    return len(rows)


KINDS = {"all zero": "all zero", "not finite": "not finite",
         "scaled": "not the embedding cache's vector of their text",
         "negated": "not the embedding cache's vector of their text",
         "swapped": "not the embedding cache's vector of their text"}


@pytest.mark.parametrize("dtype, how", [("float32", "all zero"), ("float32", "not finite"),
                                        ("float32", "scaled"), ("float32", "swapped"),
                                        ("int8", "all zero"), ("int8", "negated"),
                                        ("int8", "swapped")])
@pytest.mark.parametrize("restore", ["embed_pending", "rebuild_vectors"])
def test_a_damaged_vector_table_is_found_at_open_said_and_restored(tmp_path, counting_embedder,
                                                                   caplog, dtype, how, restore):
    """Every vector damaged with the counts kept (the issue: zeroed, NaN, scaled; a swap keeps
    even the set of bytes): found by the sample at open, every vector then checked, said (a
    warning naming the store, MemoryStore.health, a note on every recall), the memories marked
    pending; embed_pending() or rebuild_vectors() restores the rankings through the embedding
    cache, without calling the model."""
    cfg = _cfg(**{"store.vector_dtype": dtype})
    path = tmp_path / "m.sqlite"
    table, ref = _build(path, counting_embedder, cfg)
    n = damage(path, table, how)
    embedded = len(counting_embedder.documents)
    with caplog.at_level(logging.WARNING, logger="memlab"):
        st = _open(path, counting_embedder, cfg)
    with st:
        health = st.health
        assert not health.ok and health.lost == n == N and health.pending == N
        assert health.problem == f"damaged (all {N} vectors checked: {N} {KINDS[how]})"
        assert health.vectors == 0 and health.checked == N
        said = [r.message for r in caplog.records if str(path) in r.message]
        assert len(said) == 1 and f"{N} memories lost their vectors" in said[0]
        assert KINDS[how] in said[0]
        for q in QUERIES[:2]:
            notes = st.recall(q, k=3).notes
            assert any(KINDS[how] in x and "embed_pending" in x for x in notes), notes
        if restore == "embed_pending":
            assert st.embed_pending() == N
        else:
            assert st.rebuild_vectors() == N
        assert _rankings(st) == ref
        assert st.health.ok and st.recall("green tea", k=3).notes == ()
    assert len(counting_embedder.documents) == embedded     # through the embedding cache
    with _open(path, counting_embedder, cfg) as st:
        assert st.health.ok and not st.health.problem and _rankings(st) == ref


def test_damage_outside_the_sample_is_found_by_a_full_check(tmp_path, counting_embedder):
    """The sample at open reads store.vector_sample vectors evenly spaced (rowids 1, 16, 31, 46
    of 60 with a sample of 4): a vector between them zeroed and two others swapped are not seen
    there; `store check` with the same sample says healthy, `store check --full` reads every
    vector and names all three; both leave the file byte-identical."""
    from memlab.store.checkup import check_store
    from memlab.store.vecscan import sample_rowids

    path = tmp_path / "m.sqlite"
    table, _ = _build(path, counting_embedder)
    conn = connect(path, busy_timeout_ms=1000)
    assert sample_rowids(conn, table, 4) == [1, 16, 31, 46]
    assert sample_rowids(conn, table, 1000) == list(range(1, N + 1))
    conn.close()
    damage(path, table, "all zero", [40])
    damage(path, table, "swapped", [7, 52])
    before = _sha(path)
    sampled = check_store(path, vector_sample=4)
    assert sampled.healthy, sampled.problems
    assert sampled.vectors[0]["contents_checked"] == 4
    full = check_store(path, full=True, vector_sample=4)
    assert not full.healthy
    assert full.vectors[0]["contents_checked"] == N and full.vectors[0]["damaged_vectors"] == 3
    [problem] = [p for p in full.problems if "damaged" in p]
    assert problem.startswith(f"3 vectors in {table} of ")
    assert (f"(1 all zero, 2 not the embedding cache's vector of their text; all {N} vectors "
            f"checked): `memlab store rebuild {path}`") in problem
    assert _sha(path) == before
    with _open(path, counting_embedder, _cfg(**{"store.vector_sample": 4})) as st:
        assert st.health.ok and st.health.checked == 4    # not in the sample: not seen at open


def test_the_sample_at_open_reads_a_fixed_number_of_vectors(tmp_path, counting_embedder):
    path = tmp_path / "m.sqlite"
    _build(path, counting_embedder)
    for size, checked in ((0, 0), (1, 1), (7, 7), (N, N), (10 * N, N)):
        with _open(path, counting_embedder, _cfg(**{"store.vector_sample": size})) as st:
            assert st.health.checked == checked and st.health.ok


def test_store_check_full_on_the_cli_names_damaged_vectors(cli, tmp_path, counting_embedder):
    path = tmp_path / "m.sqlite"
    table, _ = _build(path, counting_embedder)
    assert cli("store", "check", path, "--full").exit_code == 0
    damage(path, table, "all zero")
    before = _sha(path)
    res = cli("store", "check", path, "--full")
    assert res.exit_code == 1 and "UNHEALTHY" in res.stdout, res.output
    assert f"contents of {N} checked, {N} damaged" in res.stdout
    assert f"{N} vectors in {table}" in res.stdout and f"{N} all zero" in res.stdout
    report = json.loads(cli("store", "check", path, "--json").stdout)   # the sample finds it too
    assert not report["healthy"] and report["vectors"][0]["damaged_kinds"] == f"{N} all zero"
    assert _sha(path) == before


def test_rebuild_after_a_count_preserving_swap_says_what_it_found(cli, tmp_path,
                                                                  counting_embedder):
    """Issue 19, item 12: two vectors swapped keep every count; `store rebuild` said "the table
    was whole". It opens the store without reading the table (a damaged one may be unreadable),
    checks every vector before replacing the table and says what it replaced; the rankings come
    back."""
    path = tmp_path / "m.sqlite"
    table, ref = _build(path, counting_embedder)
    damage(path, table, "swapped", [5, 33])
    args = ["store", "rebuild", path, "--set", "embedding.backend=hashing"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    kind = "2 not the embedding cache's vector of their text"
    assert "at open    the table was whole (its counts)" in res.stdout
    assert f"before    the contents of all {N} vectors checked: 2 damaged ({kind}), replaced" \
        in res.stdout
    assert f"rebuilt   {N} vectors for {N} memories: {N} from the embedding cache" in res.stdout
    with _open(path, counting_embedder) as st:
        assert st.health.ok and _rankings(st) == ref
    again = json.loads(cli(*args, "--json").stdout)
    assert (again["problem_at_open"], again["checked_before"], again["damaged_before"]) == \
        ("", N, 0)


def test_rebuild_through_the_api_reports_the_open_check(tmp_path, counting_embedder):
    """A store opened as usual (the sample at open: all 60) finds the swap at open; its rebuild
    report says so, and that the vectors left were whole."""
    path = tmp_path / "m.sqlite"
    table, ref = _build(path, counting_embedder)
    damage(path, table, "swapped", [5, 33])
    with _open(path, counting_embedder) as st:
        report = st._store.rebuild(counting_embedder)
        assert _rankings(st) == ref
    kind = "2 not the embedding cache's vector of their text"
    assert report.lines()[1] == (f"at open    the table was damaged (all {N} vectors checked: "
                                 f"{kind}): 2 memories had lost their vectors")
    assert report.lines()[2] == f"before    the contents of all {N - 2} vectors checked: none " \
                                f"damaged"


def test_a_table_sqlite_vec_cannot_read_is_corrupt_at_open_and_rebuilt(cli, tmp_path,
                                                                     counting_embedder):
    """A chunk of vectors cut short: the sample at open cannot read it (CorruptStore naming the
    path, the file unchanged); `memlab store rebuild` does not read the table at open, reports
    what it could not read, replaces it, and the rankings come back."""
    from memlab.errors import CorruptStore

    path = tmp_path / "m.sqlite"
    table, ref = _build(path, counting_embedder)
    conn = connect(path, busy_timeout_ms=1000)
    chunk, blob = conn.execute(f'SELECT rowid, vectors FROM "{table}_vector_chunks00"').fetchone()
    conn.execute(f'UPDATE "{table}_vector_chunks00" SET vectors = ? WHERE rowid = ?',
                 (blob[:100], chunk))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = _sha(path)
    with pytest.raises(CorruptStore) as err:
        _open(path, counting_embedder)
    assert str(path) in str(err.value) and "Could not fetch vector data" in str(err.value)
    assert _sha(path) == before
    res = cli("store", "rebuild", path, "--set", "embedding.backend=hashing")
    assert res.exit_code == 0, res.output
    assert "before    the table could not be read (Could not fetch vector data for 1" \
        in res.stdout and "), replaced" in res.stdout
    with _open(path, counting_embedder) as st:
        assert st.health.ok and _rankings(st) == ref


@pytest.fixture
def cli():
    from pathlib import Path

    from typer.testing import CliRunner

    from memlab.cli import app

    runner = CliRunner()

    def run(*args):
        return runner.invoke(app, [str(a) if isinstance(a, Path) else a for a in args],
                             catch_exceptions=False)
    return run


def test_two_memories_of_one_text_keep_their_own_vectors(tmp_path):
    """Vectors a caller gives (``vectors=``) for one text twice, different: the second used to
    replace the first in the embedding cache, so a rebuild gave the first memory the second's
    vector and the contents check called the first damaged. Each is cached under a key of its
    own: the open finds nothing, and a rebuild restores both vectors."""
    from memlab.store import connect

    rng = np.random.default_rng(0)
    v = rng.standard_normal((3, 384)).astype(np.float32)
    path = tmp_path / "m.sqlite"
    with _open(path, memlab.embed.HashingEmbedder()) as st:
        st.add_many([{"text": "同一句话 the same text", "id": "a"}], vectors=v[:1])
        st.add_many([{"text": "同一句话 the same text", "id": "b"},
                     {"text": "同一句话 the same text", "id": "c"}], vectors=v[1:])
        table = st._store.vectors.table

    def stored() -> dict:
        conn = connect(path, busy_timeout_ms=1000)
        got = dict(conn.execute("SELECT r.id, v.embedding FROM memory_records r JOIN "
                                f'"{table}" v ON v.rowid = r.rowid').fetchall())
        conn.close()
        return got

    want = {i: row.tobytes() for i, row in zip("abc", v)}
    assert stored() == want
    with _open(path, memlab.embed.HashingEmbedder()) as st:
        assert st.health.ok and not st.health.problem and st.health.checked == 3
        assert st.rebuild_vectors() == 3
    assert stored() == want

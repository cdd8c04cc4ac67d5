"""Crash safety and concurrency: nothing half-written, nothing lost."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.store import VectorCache, open_store, transaction
from store_helpers import add, dump, fake_embed, rec

ROOT = Path(__file__).resolve().parents[2]


def test_exception_inside_a_write_leaves_nothing(store):
    conn, repo = store
    cache = VectorCache(conn, model_version="fake", dim=16)
    cache.ensure()
    before = dump(conn)
    with pytest.raises(RuntimeError):
        with transaction(conn):
            rows = add(repo, [rec("a", "Caroline in Paris"), rec("b", "cats")])
            repo.put_vectors(cache, rows, fake_embed(["x", "y"]))
            assert repo.count() == 2 and cache.count() == 2
            raise RuntimeError("the embedder died after the write")
    assert dump(conn) == before
    assert repo.count() == 0 and cache.count() == 0
    assert conn.execute("SELECT count(*) FROM memory_terms").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM memory_entity_links").fetchone()[0] == 0


CHILD = r"""
import sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})
from memlab.store import VectorCache, open_store, transaction
from store_helpers import add, fake_embed, rec
conn, repo = open_store({path!r})
conn.execute("PRAGMA cache_size = 20")   # spill uncommitted pages into the WAL mid-transaction
cache = VectorCache(conn, model_version="fake", dim=16)
add(repo, [rec("committed", "this one is committed")])
with transaction(conn):
    records = [rec(f"m{{i}}", f"half written memory {{i}} Caroline") for i in range(2000)]
    rows = add(repo, records)
    repo.put_vectors(cache, rows, fake_embed([r.text for r in records]))
    print("written", len(rows), flush=True)
    sys.stdin.readline()   # blocks before COMMIT until killed
"""


def test_process_killed_mid_write_leaves_no_half_memory(tmp_path):
    path = tmp_path / "s.sqlite"
    code = CHILD.format(root=str(ROOT), here=str(Path(__file__).parent), path=str(path))
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip() == "written 2000", child.stderr.read()
        assert (tmp_path / "s.sqlite-wal").stat().st_size > 200_000   # uncommitted frames
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    conn, repo = open_store(path, quick_check=True)
    assert repo.count() == 1 and [r.id for r in repo.get(["committed"])] == ["committed"]
    assert conn.execute("SELECT count(*) FROM memory_terms").fetchone()[0] == 4
    assert conn.execute("SELECT count(*) FROM memory_entity_links").fetchone()[0] == 0
    assert conn.execute("SELECT n_docs FROM memory_owners").fetchone()[0] == 1
    assert VectorCache(conn, model_version="fake", dim=16).exists() is False
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def _writer(path: str, prefix: str, barrier) -> None:
    conn, repo = open_store(path)
    barrier.wait()
    for start in range(0, 500, 25):
        add(repo, [rec(f"{prefix}{i}", f"{prefix} memory {i}") for i in range(start, start + 25)])
    conn.close()


def test_two_processes_adding_concurrently_lose_nothing(tmp_path):
    path = str(tmp_path / "s.sqlite")
    conn, _ = open_store(path)
    conn.close()
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_writer, args=(path, p, barrier)) for p in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    conn, repo = open_store(path)
    assert repo.count() == 1000
    ids = [f"{p}{i}" for p in "ab" for i in range(500)]
    assert [r.id for r in repo.get(ids)] == ids
    assert conn.execute("SELECT n_docs FROM memory_owners").fetchone()[0] == 1000
    got, _, _ = repo.lexical_candidates(["memory"], agent_id="agent_0", user_id="user_0",
                                        limit=2000)
    assert len(got) == 1000
    conn.close()

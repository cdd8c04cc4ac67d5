"""Fold workers as real processes (reverie §11.4): a worker SIGKILLed mid-job leaves its job to be
leased again once its lease expires and completed exactly once; two worker processes on one store
never hold one job at once and complete every job exactly once.

Handshakes are pipes (a child says where it is on stdout and blocks reading stdin); time is a
FixedClock in every process (the children lease at T0; the test's worker reads its own clock), so
lease expiry is decided by the clock the test sets, not by waiting. Side effects are counted: each
completion inserts one row in ``effects`` in its completing transaction, and each start of a
handler appends one line to a log file."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.jobs import JobKind, Outcome, Worker, enqueue, register
from memlab.jobs import queue
from memlab.store import Store

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_700_000_000.0

CHILD = r"""
import os, sys
sys.path.insert(0, {root!r})
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.jobs import JobKind, Outcome, Worker, register

BLOCK = {block!r}      # "handler", "write" (inside the completing transaction) or "first"
first = [True]

def handshake(where, job_id):
    print(where, job_id, flush=True)
    if sys.stdin.readline().strip() != "go":     # blocks until the test answers (or kills us)
        raise SystemExit("no go")

def handler(ctx):
    with open({log!r}, "a") as fh:
        fh.write(f"start {{ctx.job.id}} {{os.getpid()}}\n")
    if BLOCK == "handler" or (BLOCK == "first" and first[0]):
        first[0] = False
        handshake("started", ctx.job.id)

    def write(conn):
        conn.execute("INSERT INTO effects (job, worker) VALUES (?, ?)", (ctx.job.id, {name!r}))
        if BLOCK == "write":
            handshake("written", ctx.job.id)
    return Outcome({{"by": {name!r}}}, write)

register(JobKind("effect", handler, "test: one effects row per completion"))
worker = Worker.open({path!r}, config=MemlabConfig(), clock=FixedClock({t0!r}), worker_id={name!r})
report = worker.run()
print("finished", len(report.done), flush=True)
"""


def _child(path: Path, log: Path, name: str, block: str) -> subprocess.Popen:
    code = CHILD.format(root=str(ROOT), path=str(path), log=str(log), name=name, block=block,
                        t0=T0)
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _expect(child: subprocess.Popen, word: str) -> int:
    line = child.stdout.readline().split()
    if not line or line[0] != word:
        child.kill()
        raise AssertionError(f"expected {word!r}, got {line!r}: {child.stderr.read()}")
    return int(line[1])


@pytest.fixture
def setup(tmp_path):
    path, log = tmp_path / "s.sqlite", tmp_path / "starts.log"
    with Store.open(path, config=MemlabConfig()) as st:
        st.conn.execute("CREATE TABLE effects (job INTEGER NOT NULL, worker TEXT NOT NULL)")
    log.touch()

    def handler(ctx):          # the test's own worker: the same effect, no handshake
        with open(log, "a") as fh:
            fh.write(f"start {ctx.job.id} {os.getpid()}\n")

        def write(conn):
            conn.execute("INSERT INTO effects (job, worker) VALUES (?, 'parent')", (ctx.job.id,))
        return Outcome({"by": "parent"}, write)

    register(JobKind("effect", handler, "test: one effects row per completion"), replace=True)
    return path, log


@pytest.mark.parametrize("block", ["handler", "write"])
def test_a_worker_killed_mid_job_leaves_it_to_be_leased_again_and_done_once(setup, block):
    """``handler``: killed while the handler runs; ``write``: killed inside the completing
    transaction, after the job's write and before its commit."""
    path, log = setup
    with Store.open(path) as st:
        job = enqueue(st, "effect", now=T0)
        other = enqueue(st, "effect", now=T0)
    child = _child(path, log, "child", block)
    try:
        assert _expect(child, "started" if block == "handler" else "written") == job.id
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL
    with Store.open(path, quick_check=True) as st:
        stored = queue.get(st.conn, job.id)
        assert (stored.state, stored.lease_owner, stored.attempts) == ("leased", "child", 1)
        assert stored.lease_until == T0 + 300
        assert st.conn.execute("SELECT count(*) FROM effects").fetchone()[0] == 0
        clock = FixedClock(T0 + 299.5)
        worker = Worker(st, clock=clock, worker_id="parent")
        report = worker.run()                   # the other job only: the lease still holds
        assert [j.id for j in report.done] == [other.id]
        clock.advance(0.5)                      # T0 + 300: the child's lease has expired
        report = worker.run()
        assert [j.id for j in report.done] == [job.id]
        done = queue.get(st.conn, job.id)
        assert (done.state, done.attempts, done.lease_owner) == ("done", 2, "parent")
        assert "the lease of worker child expired" in done.error
        assert st.conn.execute("SELECT job, worker FROM effects ORDER BY job").fetchall() == [
            (job.id, "parent"), (other.id, "parent")]
        assert st.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    starts = log.read_text().split("\n")
    assert sum(1 for s in starts if s.startswith(f"start {job.id} ")) == 2   # ran twice, done once


def test_two_worker_processes_never_hold_one_job_and_complete_each_once(setup):
    path, log = setup
    n = 60
    with Store.open(path) as st:
        ids = [enqueue(st, "effect", now=T0).id for _ in range(n)]
    a, b = _child(path, log, "a", "first"), _child(path, log, "b", "first")
    try:
        # both hold a job at the same time (each blocks in its first handler): two different jobs
        held = {_expect(a, "started"), _expect(b, "started")}
        assert len(held) == 2
        with Store.open(path) as st:
            leased = {j.id: j.lease_owner for j in queue.list_jobs(st.conn, states=["leased"])}
        assert set(leased) == held and sorted(leased.values()) == ["a", "b"]
        for child in (a, b):
            child.stdin.write("go\n")
            child.stdin.flush()
        finished = [_expect(child, "finished") for child in (a, b)]
        for child in (a, b):
            assert child.wait(timeout=120) == 0, child.stderr.read()
    finally:
        for child in (a, b):
            if child.poll() is None:
                child.kill()
    assert sum(finished) == n
    with Store.open(path) as st:
        assert queue.counts(st.conn) == {("effect", "done"): n}
        effects = st.conn.execute("SELECT job, worker FROM effects").fetchall()
        assert sorted(j for j, _ in effects) == ids                   # each job once
        by = {w: sum(1 for _, x in effects if x == w) for w in ("a", "b")}
        assert by["a"] >= 1 and by["b"] >= 1 and by["a"] + by["b"] == n
        for j in queue.list_jobs(st.conn):
            assert j.attempts == 1 and j.result == {"by": j.lease_owner}
    starts = [s.split() for s in log.read_text().splitlines()]
    assert sorted(int(s[1]) for s in starts) == ids                   # each handler ran once

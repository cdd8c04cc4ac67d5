"""Properties of the lease protocol under any interleaving of workers (hypothesis): whatever the
workers do — lease, complete, fail, extend, or go silent (a crash) — and however time moves, no two
workers ever hold unexpired leases on one job, a job's writes are committed at most once while it
runs and exactly once when it is done, and attempts never exceed max_attempts."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.config import MemlabConfig
from memlab.errors import LeaseLost
from memlab.jobs import queue
from memlab.store import Store

LEASE = 300.0
T0 = 1_000.0

#: the actions, leases and time steps weighted up (a lease lost to another worker needs a time
#: step past the lease and the other worker's lease in a row); two workers
ACTIONS = ("lease", "lease", "lease", "advance", "advance", "complete", "fail", "heartbeat",
           "crash")
STEPS = (1.0, 150.0, 299.0, 300.0, 301.0, 1000.0)


def _ops(rnd, n):
    """``n`` (action, worker or seconds) drawn uniformly from a seeded generator: hypothesis's own
    draws (and its ``randoms()``) lean to the first choice, which almost never lets the second
    worker take an expired lease; the failing seed is reported, so a failure is reproducible."""
    return [(a, rnd.choice(STEPS) if a == "advance" else rnd.randrange(2))
            for a in (rnd.choice(ACTIONS) for _ in range(n))]


@settings(max_examples=120)
@given(seed=st.integers(0, 2**32 - 1), n_ops=st.integers(10, 60), n_jobs=st.integers(1, 4),
       max_attempts=st.integers(1, 3))
def test_leases_never_overlap_and_writes_happen_once(seed, n_ops, n_jobs, max_attempts):
    check_protocol(_ops(random.Random(seed), n_ops), n_jobs, max_attempts)


def check_protocol(ops, n_jobs, max_attempts):
    with Store.open(":memory:", config=MemlabConfig()) as store:
        conn = store.conn
        conn.execute("CREATE TABLE effects (job INTEGER NOT NULL)")
        for _ in range(n_jobs):
            queue.insert(conn, "test", {}, now=T0, max_attempts=max_attempts)
        now = T0
        held: dict[int, queue.Lease] = {}          # worker -> the lease it believes it holds

        def effects(job_id):
            return conn.execute("SELECT count(*) FROM effects WHERE job = ?",
                                (job_id,)).fetchone()[0]

        def write_for(job_id):
            return lambda c: c.execute("INSERT INTO effects (job) VALUES (?)", (job_id,)) and None

        for name, arg in ops:
            if name == "advance":
                now += arg
                continue
            w = arg
            if name == "lease":
                if w not in held:
                    got = queue.lease(conn, now=now, owner=f"w{w}", lease_seconds=LEASE)
                    if got is not None:
                        held[w] = got
            elif w in held and name == "crash":
                del held[w]                          # the worker vanishes, its lease stays
            elif w in held:
                lease = held.pop(w)
                # the model: a call succeeds exactly when the job is still leased under this lease
                holds = bool(conn.execute("SELECT state = 'leased' AND lease_token = ? FROM "
                                          "memory_jobs WHERE id = ?",
                                          (lease.token, lease.job.id)).fetchone()[0])
                try:
                    if name == "complete":
                        queue.complete(conn, lease, now=now, result={},
                                       write=write_for(lease.job.id))
                    elif name == "fail":
                        queue.fail(conn, lease, now=now, error="boom")
                    else:
                        held[w] = queue.heartbeat(conn, lease, now=now, lease_seconds=LEASE)
                    lost = False
                except LeaseLost:
                    lost = True
                assert lost is not holds
            # no two workers hold unexpired leases on one job
            live = [h.job.id for h in held.values() if h.until > now]
            assert len(live) == len(set(live))
            for job in queue.list_jobs(conn):
                assert job.attempts <= job.max_attempts
                assert effects(job.id) == (1 if job.state == "done" else 0)
        # afterwards, a worker that outlives every lease finishes the queue
        now += 10 * LEASE
        while (got := queue.lease(conn, now=now, owner="last", lease_seconds=LEASE)) is not None:
            queue.complete(conn, got, now=now, result={}, write=write_for(got.job.id))
        for job in queue.list_jobs(conn):
            assert job.state in ("done", "failed")
            assert effects(job.id) == (1 if job.state == "done" else 0)

"""The memory_jobs queue: leases of governance.fold_lease_seconds, exactly-once completion, attempts
(reverie §11.4). Times come from a FixedClock; nothing sleeps."""

from __future__ import annotations

import pytest

from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, JobError, LeaseLost
from memlab.jobs import JobKind, Outcome, Worker, enqueue, kinds, register
from memlab.jobs import queue
from memlab.store import Store

T0 = 1_700_000_000.0
LEASE = 300.0      # governance.fold_lease_seconds, the spec's 300 s


@pytest.fixture
def store(tmp_path):
    st = Store.open(tmp_path / "s.sqlite", config=MemlabConfig())
    yield st
    st.close()


@pytest.fixture
def effects():
    """A job kind whose write appends one row per completion (no dedup): every completion is
    counted, so a job completed twice would show."""
    log: list[int] = []

    def handler(ctx):
        if ctx.job.payload.get("boom"):
            raise RuntimeError(f"boom {ctx.job.attempts}")

        def write(conn):
            conn.execute("INSERT INTO effects (job) VALUES (?)", (ctx.job.id,))
            log.append(ctx.job.id)
            return {"wrote": 1}
        return Outcome({"payload": dict(ctx.job.payload)}, write)

    register(JobKind("test_effect", handler, "test: one row per completion"), replace=True)
    yield log


def _effects(store):
    store.conn.execute("CREATE TABLE IF NOT EXISTS effects (job INTEGER)")
    return lambda: [r[0] for r in store.conn.execute("SELECT job FROM effects ORDER BY rowid")]


def test_the_lease_is_the_configured_300_seconds(store):
    assert MemlabConfig().governance.fold_lease_seconds == LEASE
    job = enqueue(store, "cleanup_usage", now=T0)
    held = queue.lease(store.conn, now=T0 + 5, owner="w1", lease_seconds=LEASE)
    assert held.job.id == job.id and held.until == T0 + 5 + 300
    assert (held.job.state, held.job.attempts, held.job.lease_owner) == ("leased", 1, "w1")
    assert Worker(store, clock=FixedClock(T0)).lease_seconds == 300.0


def test_a_held_job_is_not_leased_again_until_its_lease_expires(store):
    enqueue(store, "cleanup_usage", now=T0)
    first = queue.lease(store.conn, now=T0, owner="w1", lease_seconds=LEASE)
    assert queue.lease(store.conn, now=T0 + 299.999, owner="w2", lease_seconds=LEASE) is None
    assert queue.ready(store.conn, now=T0 + 299.999) == 0
    assert queue.ready(store.conn, now=T0 + 300) == 1
    again = queue.lease(store.conn, now=T0 + 300, owner="w2", lease_seconds=LEASE)
    assert again.job.id == first.job.id and again.job.attempts == 2
    assert again.token != first.token and again.job.lease_owner == "w2"
    assert "attempt 1: the lease of worker w1 expired" in again.job.error


def test_completion_is_exactly_once_and_checks_the_lease(store, effects):
    rows = _effects(store)
    job = enqueue(store, "test_effect", {"x": 1}, now=T0)
    a = Worker(store, clock=FixedClock(T0), worker_id="a")
    b = Worker(store, clock=FixedClock(T0 + 301), worker_id="b")
    held_a = a.lease()
    held_b = b.lease()             # a's lease expired: b takes the job
    assert held_b.job.id == job.id
    assert a.run_lease(held_a) is None          # a's completion is refused, its write rolled back
    assert rows() == [] and a.stats["lease lost: test_effect"] == 1
    done = b.run_lease(held_b)
    assert done.state == "done" and done.result == {"payload": {"x": 1}, "wrote": 1}
    assert rows() == [job.id]
    with pytest.raises(LeaseLost, match="lost"):   # completing twice is refused too
        queue.complete(store.conn, held_b, now=T0 + 302, result={})
    assert rows() == [job.id] and queue.get(store.conn, job.id).state == "done"


def test_an_expired_lease_nobody_took_still_completes(store, effects):
    rows = _effects(store)
    enqueue(store, "test_effect", now=T0)
    clock = FixedClock(T0)
    w = Worker(store, clock=clock)
    held = w.lease()
    clock.advance(1000)            # past the lease, but no other worker leased the job
    assert w.run_lease(held).state == "done" and len(rows()) == 1


def test_heartbeat_extends_a_held_lease_and_refuses_a_lost_one(store):
    enqueue(store, "cleanup_usage", now=T0)
    held = queue.lease(store.conn, now=T0, owner="w1", lease_seconds=LEASE)
    longer = queue.heartbeat(store.conn, held, now=T0 + 200, lease_seconds=LEASE)
    assert longer.until == T0 + 500
    assert queue.lease(store.conn, now=T0 + 450, owner="w2", lease_seconds=LEASE) is None
    taken = queue.lease(store.conn, now=T0 + 500, owner="w2", lease_seconds=LEASE)
    assert taken is not None
    with pytest.raises(LeaseLost, match="leased by worker w2"):
        queue.heartbeat(store.conn, longer, now=T0 + 501, lease_seconds=LEASE)


def test_errors_are_retried_then_failed_with_the_error_kept(store, effects):
    rows = _effects(store)
    job = enqueue(store, "test_effect", {"boom": True}, now=T0, max_attempts=3)
    report = Worker(store, clock=FixedClock(T0)).run()
    assert [j.state for j in report.retried] == ["queued", "queued"]
    assert [j.state for j in report.failed] == ["failed"]
    stored = queue.get(store.conn, job.id)
    assert (stored.state, stored.attempts) == ("failed", 3)
    assert stored.error == "RuntimeError: boom 3" and rows() == []


def test_a_lease_expired_on_the_last_attempt_fails_the_job(store):
    job = enqueue(store, "cleanup_usage", now=T0, max_attempts=2)
    queue.lease(store.conn, now=T0, owner="w1", lease_seconds=LEASE)
    queue.lease(store.conn, now=T0 + 300, owner="w2", lease_seconds=LEASE)
    assert queue.ready(store.conn, now=T0 + 600) == 0
    assert queue.lease(store.conn, now=T0 + 600, owner="w3", lease_seconds=LEASE) is None
    stored = queue.get(store.conn, job.id)
    assert stored.state == "failed" and stored.finished_at == T0 + 600
    assert "attempt 2 of 2: the lease of worker w2 expired" in stored.error
    assert "no attempts left" in stored.error


def test_max_attempts_defaults_to_the_config(tmp_path):
    cfg = MemlabConfig().replace(**{"jobs.max_attempts": 5})
    with Store.open(tmp_path / "s.sqlite", config=cfg) as st:
        assert enqueue(st, "cleanup_usage", now=T0).max_attempts == 5


def test_leases_go_oldest_first_and_by_kind(store):
    a = enqueue(store, "cleanup_usage", now=T0)
    b = enqueue(store, "extract_atoms", now=T0)
    c = enqueue(store, "cleanup_usage", now=T0)
    got = queue.lease(store.conn, now=T0, owner="w", lease_seconds=LEASE, kinds=["extract_atoms"])
    assert got.job.id == b.id
    assert [queue.lease(store.conn, now=T0, owner="w", lease_seconds=LEASE).job.id
            for _ in range(2)] == [a.id, c.id]


def test_dedup_key_holds_one_open_job(store):
    one = enqueue(store, "cleanup_usage", now=T0, dedup_key="daily")
    same = enqueue(store, "cleanup_usage", now=T0 + 1, dedup_key="daily")
    assert same.id == one.id
    w = Worker(store, clock=FixedClock(T0))
    w.run()
    assert enqueue(store, "cleanup_usage", now=T0 + 2, dedup_key="daily").id != one.id


def test_unknown_kinds_and_bad_payloads_are_refused_before_anything_is_queued(store):
    with pytest.raises(JobError, match="'nope': unknown; known kinds: .*extract_atoms"):
        enqueue(store, "nope", now=T0)
    with pytest.raises(InvalidInput, match="payload.days: unknown key"):
        enqueue(store, "evidence_check", {"days": 3}, now=T0)
    with pytest.raises(InvalidInput, match="cleanup_usage takes no payload"):
        enqueue(store, "cleanup_usage", {"x": 1}, now=T0)
    with pytest.raises(JobError, match="both agent_id and user_id"):
        enqueue(store, "extract_atoms", now=T0, agent_id="a")
    with pytest.raises(InvalidInput, match="JSON"):
        queue.insert(store.conn, "extract_atoms", {"x": float("nan")}, now=T0, max_attempts=1)
    assert queue.list_jobs(store.conn) == []


def test_a_job_of_a_kind_this_process_does_not_know_fails_at_once(store):
    queue.insert(store.conn, "from_a_newer_memlab", {}, now=T0, max_attempts=3)
    report = Worker(store, clock=FixedClock(T0)).run()
    [job] = report.failed
    assert job.attempts == 1 and "JobError: job kind 'from_a_newer_memlab': unknown" in job.error


def test_run_respects_max_jobs_and_status_counts(store):
    for _ in range(3):
        enqueue(store, "cleanup_usage", now=T0)
    w = Worker(store, clock=FixedClock(T0))
    assert w.run(max_jobs=2).processed == 2
    assert w.status() == {("cleanup_usage", "done"): 2, ("cleanup_usage", "queued"): 1}
    frame = w.to_frame()
    assert list(frame["state"]) == ["queued", "done", "done"]     # newest first
    with pytest.raises(InvalidInput, match="max_jobs"):
        w.run(max_jobs=0)


def test_builtin_kinds_are_registered():
    assert {"extract_atoms", "evidence_check", "cleanup_usage", "reembed",
            "consolidate"} <= set(kinds())


def test_a_handler_extends_its_lease_through_the_context(store):
    clock = FixedClock(T0)
    seen = []

    def handler(ctx):
        clock.advance(250)
        ctx.heartbeat()                 # lease now until T0 + 550
        clock.advance(250)              # T0 + 500: past the first lease, inside the new one
        seen.append(queue.lease(store.conn, now=clock.now(), owner="other", lease_seconds=LEASE))
        return Outcome({"ok": True})

    register(JobKind("test_long", handler, "test: heartbeats"), replace=True)
    enqueue(store, "test_long", now=T0)
    [job] = Worker(store, clock=clock).run().done
    assert seen == [None] and job.attempts == 1 and job.result == {"ok": True}


def test_owner_ids_in_a_payload_are_checked(store):
    with pytest.raises(InvalidInput, match="payload.user_id"):
        enqueue(store, "evidence_check", {"agent_id": "a", "user_id": 3}, now=T0)
    job = enqueue(store, "evidence_check", now=T0, agent_id="a", user_id="u")
    assert (job.agent_id, job.user_id, dict(job.payload)) == ("a", "u", {"agent_id": "a",
                                                                         "user_id": "u"})


def test_a_version_3_store_with_queued_jobs_migrates_and_its_jobs_run(tmp_path):
    """Migration 6 adds columns to memory_jobs: a job queued before it keeps its row and runs."""
    from memlab.store import connect, migrate
    from memlab.store.migrations import MIGRATIONS

    path = tmp_path / "v3.sqlite"
    conn = connect(path, busy_timeout_ms=1000)
    migrate(conn, migrations=MIGRATIONS[:3])
    conn.execute("INSERT INTO memory_jobs (kind, payload, state, attempts, created_at, updated_at) "
                 "VALUES ('cleanup_usage', '{}', 'queued', 0, ?, ?)", (T0, T0))
    conn.close()
    with Store.open(path) as st:
        [job] = Worker(st, clock=FixedClock(T0)).run().done
        assert (job.kind, job.max_attempts, job.attempts, job.dedup_key) == (
            "cleanup_usage", 3, 1, None)

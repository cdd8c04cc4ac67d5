"""The ``memory_jobs`` table: queue, lease, heartbeat, complete, fail (reverie §11.4).

A job is ``queued``, then ``leased`` by one worker until ``lease_until`` (``governance.
fold_lease_seconds``, 300 s), then ``done`` or ``failed``; a failure with attempts left puts it back
in the queue. Every step is one short ``BEGIN IMMEDIATE`` transaction, so several worker processes
share one store:

- **Leasing** is a single ``UPDATE ... WHERE id = (the oldest ready job) RETURNING ...``: a ready
  job is queued, or leased with an expired lease (its worker crashed or ran past the lease). The
  write lock serialises leases, so two workers never hold one job. Each lease gets a fresh token.
- **Completion** checks, in the transaction that writes the job's results, that the job is still
  leased under the worker's token; otherwise :class:`~memlab.errors.LeaseLost` is raised and the
  job's writes roll back with it. So a job's writes are committed exactly once, whichever worker
  crashes or is slow. A lease that expired but that nobody took again still completes: nobody
  else ran the job.
- **Attempts**: each lease counts one. A job whose lease expired on its last attempt is marked
  failed (error: the expired lease) the next time any worker leases; a handler error with attempts
  left re-queues the job, on the last attempt fails it; the last error's text is kept.

Times are Unix seconds from the clock the caller passes; nothing here reads the wall clock.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memlab.errors import InvalidInput, LeaseLost
from memlab.store import Connection, transaction

JOB_STATES = ("queued", "leased", "done", "failed")

_COLUMNS = ("id, kind, payload, state, attempts, max_attempts, lease_until, lease_owner, "
            "created_at, updated_at, started_at, finished_at, result_json, error, dedup_key, "
            "agent_id, user_id")


@dataclass(frozen=True)
class Job:
    """One row of ``memory_jobs``."""

    id: int
    kind: str
    payload: Mapping[str, Any]
    state: str
    attempts: int
    max_attempts: int
    lease_until: float | None
    lease_owner: str | None
    created_at: float
    updated_at: float
    started_at: float | None
    finished_at: float | None
    result: Mapping[str, Any] | None
    error: str | None
    dedup_key: str | None
    agent_id: str | None
    user_id: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> "Job":
        (id_, kind, payload, state, attempts, max_attempts, lease_until, owner, created, updated,
         started, finished, result, error, dedup, agent, user) = row
        return cls(int(id_), kind, json.loads(payload), state, int(attempts), int(max_attempts),
                   lease_until, owner, created, updated, started, finished,
                   None if result is None else json.loads(result), error, dedup, agent, user)

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


@dataclass(frozen=True)
class Lease:
    """A worker's hold on a job: valid while the row carries ``token`` (see :func:`complete`)."""

    job: Job
    token: str
    owner: str
    until: float


def _now(now: Any) -> float:
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise InvalidInput("now", "must be a finite number of Unix seconds", now)
    return float(now)


def _positive(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise InvalidInput(field, "must be a finite number > 0", value)
    return float(value)


def _json(value: Any, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"must be JSON (str keys; numbers, strings, lists, mappings; "
                           f"no NaN): {exc}", value) from None


def insert(conn: Connection, kind: str, payload: Mapping[str, Any], *, now: float,
           max_attempts: int, dedup_key: str | None = None, agent_id: str | None = None,
           user_id: str | None = None) -> tuple[Job, bool]:
    """Queue a job; ``(job, created)``. With a ``dedup_key`` already held by a queued or leased
    job, that job is returned (``created`` False) and nothing is written. The kind and payload are
    checked by the caller (:func:`memlab.jobs.enqueue`)."""
    now = _now(now)
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidInput("max_attempts", "must be a whole number >= 1", max_attempts)
    if not isinstance(payload, Mapping):
        raise InvalidInput("payload", "must be a mapping (a JSON object)", payload)
    text = _json(dict(payload), "payload")
    with transaction(conn):
        if dedup_key is not None:
            row = conn.execute(f"SELECT {_COLUMNS} FROM memory_jobs WHERE dedup_key = ? AND "
                               "state IN ('queued', 'leased')", (dedup_key,)).fetchone()
            if row is not None:
                return Job.from_row(row), False
        row = conn.execute(
            "INSERT INTO memory_jobs (kind, payload, state, attempts, max_attempts, created_at, "
            "updated_at, dedup_key, agent_id, user_id) VALUES (?, ?, 'queued', 0, ?, ?, ?, ?, ?, ?) "
            f"RETURNING {_COLUMNS}",
            (kind, text, max_attempts, now, now, dedup_key, agent_id, user_id)).fetchone()
    return Job.from_row(row), True


def _kinds_clause(kinds: Sequence[str] | None) -> tuple[str, list[Any]]:
    if kinds is None:
        return "", []
    return " AND kind IN (SELECT value FROM json_each(?))", [json.dumps(list(kinds))]


def lease(conn: Connection, *, now: float, owner: str, lease_seconds: float,
          kinds: Sequence[str] | None = None) -> Lease | None:
    """Lease the oldest ready job (of ``kinds``, default any) to ``owner`` until ``now +
    lease_seconds``; None when no job is ready. One transaction: first the jobs whose lease expired
    on their last attempt are marked failed, then one ready job is leased by a single UPDATE."""
    now = _now(now)
    seconds = _positive(lease_seconds, "lease_seconds")
    where, args = _kinds_clause(kinds)
    token = uuid.uuid4().hex
    with transaction(conn):
        conn.execute(
            "UPDATE memory_jobs SET state = 'failed', finished_at = ?, updated_at = ?, "
            "error = 'attempt ' || attempts || ' of ' || max_attempts || ': the lease of worker ' "
            "|| coalesce(lease_owner, '?') || ' expired at ' || lease_until || ' before it "
            "finished (it crashed or ran past its lease); no attempts left', "
            "lease_owner = NULL, lease_token = NULL, lease_until = NULL "
            "WHERE state = 'leased' AND lease_until <= ? AND attempts >= max_attempts",
            (now, now, now))
        row = conn.execute(
            "UPDATE memory_jobs SET state = 'leased', lease_owner = ?, lease_token = ?, "
            "lease_until = ?, attempts = attempts + 1, updated_at = ?, started_at = ?, "
            "error = CASE WHEN state = 'leased' THEN 'attempt ' || attempts || ': the lease of "
            "worker ' || coalesce(lease_owner, '?') || ' expired at ' || lease_until || ' before it "
            "finished' ELSE error END "
            "WHERE id = (SELECT id FROM memory_jobs WHERE (state = 'queued' OR (state = 'leased' "
            f"AND lease_until <= ?)){where} ORDER BY id LIMIT 1) RETURNING {_COLUMNS}",
            [owner, token, now + seconds, now, now, now] + args).fetchone()
    if row is None:
        return None
    job = Job.from_row(row)
    return Lease(job, token, owner, float(job.lease_until))


def _check_held(conn: Connection, lease: Lease) -> None:
    """Inside a transaction: raise LeaseLost unless the job is still leased under this token."""
    row = conn.execute("SELECT state, lease_token, lease_owner FROM memory_jobs WHERE id = ?",
                       (lease.job.id,)).fetchone()
    if row is None:
        raise LeaseLost(f"job {lease.job.id} ({lease.job.kind}): no such job any more; the "
                        f"result of worker {lease.owner} is discarded")
    state, token, owner = row
    if state != "leased" or token != lease.token:
        who = f"leased by worker {owner}" if state == "leased" else state
        raise LeaseLost(f"job {lease.job.id} ({lease.job.kind}): the lease of worker "
                        f"{lease.owner} was lost (the job is now {who}); its result is "
                        f"discarded and nothing it would write was written")


def heartbeat(conn: Connection, lease: Lease, *, now: float, lease_seconds: float) -> Lease:
    """Extend a held lease to ``now + lease_seconds`` (a long job calls it between steps).

    Raises:
        LeaseLost: the job is no longer leased under this lease's token.
    """
    now = _now(now)
    until = now + _positive(lease_seconds, "lease_seconds")
    with transaction(conn):
        _check_held(conn, lease)
        conn.execute("UPDATE memory_jobs SET lease_until = ?, updated_at = ? WHERE id = ?",
                     (until, now, lease.job.id))
    return replace(lease, until=until)


def complete(conn: Connection, lease: Lease, *, now: float, result: Mapping[str, Any],
             write: Callable[[Connection], Mapping[str, Any] | None] | None = None) -> Job:
    """Mark the leased job done with ``result`` (a JSON mapping) and return it.

    ``write(conn)``, when given, runs in the same transaction after the lease check: the job's
    writes to the store, committed with its completion or not at all; what it returns is merged
    into the result.

    Raises:
        LeaseLost: the job is no longer leased under this lease's token; nothing is written.
    """
    now = _now(now)
    out = dict(result)
    with transaction(conn):
        _check_held(conn, lease)
        if write is not None:
            out.update(write(conn) or {})
        row = conn.execute(
            "UPDATE memory_jobs SET state = 'done', result_json = ?, finished_at = ?, "
            "updated_at = ?, lease_token = NULL, lease_until = NULL WHERE id = ? "
            f"RETURNING {_COLUMNS}", (_json(out, "result"), now, now, lease.job.id)).fetchone()
    return Job.from_row(row)


def fail(conn: Connection, lease: Lease, *, now: float, error: str, retry: bool = True) -> Job:
    """Record ``error`` for the leased job: back to the queue while attempts are left (and
    ``retry``: False for an error no retry can mend, e.g. an unknown kind), else failed. Returns
    the job as stored.

    Raises:
        LeaseLost: the job is no longer leased under this lease's token; nothing is written.
    """
    now = _now(now)
    with transaction(conn):
        _check_held(conn, lease)
        row = conn.execute(
            "UPDATE memory_jobs SET state = CASE WHEN ? OR attempts >= max_attempts THEN "
            "'failed' ELSE 'queued' END, finished_at = CASE WHEN ? OR attempts >= max_attempts "
            "THEN ? END, error = ?, updated_at = ?, lease_token = NULL, lease_until = NULL, "
            f"lease_owner = NULL WHERE id = ? RETURNING {_COLUMNS}",
            (not retry, not retry, now, str(error), now, lease.job.id)).fetchone()
    return Job.from_row(row)


def get(conn: Connection, job_id: int) -> Job:
    """The job ``job_id``; InvalidInput naming it when there is none."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM memory_jobs WHERE id = ?", (int(job_id),)
                       ).fetchone()
    if row is None:
        raise InvalidInput("job_id", "no such job", job_id)
    return Job.from_row(row)


def list_jobs(conn: Connection, *, states: Sequence[str] | None = None,
              kinds: Sequence[str] | None = None, limit: int | None = None) -> list[Job]:
    """Jobs, newest first, optionally of some states and kinds."""
    for s in states or ():
        if s not in JOB_STATES:
            raise InvalidInput("state", f"one of {JOB_STATES}", s)
    sql, args = f"SELECT {_COLUMNS} FROM memory_jobs WHERE 1", []
    if states is not None:
        sql, args = sql + " AND state IN (SELECT value FROM json_each(?))", \
            args + [json.dumps(list(states))]
    where, extra = _kinds_clause(kinds)
    sql, args = sql + where + " ORDER BY id DESC", args + extra
    if limit is not None:
        sql, args = sql + " LIMIT ?", args + [int(limit)]
    return [Job.from_row(r) for r in conn.execute(sql, args)]


def counts(conn: Connection) -> dict[tuple[str, str], int]:
    """``{(kind, state): number of jobs}``."""
    return {(k, s): int(n) for k, s, n in conn.execute(
        "SELECT kind, state, count(*) FROM memory_jobs GROUP BY kind, state ORDER BY kind, state")}


def ready(conn: Connection, *, now: float, kinds: Sequence[str] | None = None) -> int:
    """How many jobs a worker could lease at ``now`` (queued, or leased with an expired lease and
    attempts left)."""
    where, args = _kinds_clause(kinds)
    return int(conn.execute(
        "SELECT count(*) FROM memory_jobs WHERE (state = 'queued' OR (state = 'leased' AND "
        f"lease_until <= ? AND attempts < max_attempts)){where}", [_now(now)] + args
    ).fetchone()[0])

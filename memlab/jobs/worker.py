"""The fold worker (reverie §11.4): lease a job, run its kind's handler, complete it exactly once.

``Worker(store, clock=...)`` drives the queue of one store (:class:`memlab.store.Store`; from the
facade, ``memory_store.worker()``): :meth:`Worker.run` leases and runs ready jobs until none is
left (or ``max_jobs``), :meth:`Worker.run_one` one job. Several workers, in one process or many,
share a store: the queue's leases keep one job to one worker at a time and its completion checks
the lease (:mod:`memlab.jobs.queue`).

A handler's error is recorded in its job (``error``: the exception's type and message), logged once
per kind of error and counted in ``Worker.stats``; the job goes back to the queue while it has
attempts left (``jobs.max_attempts``), then is marked failed; the worker goes on with the next job.
A job whose kind this process does not know, or cannot run yet, is failed at once (no retry mends
it). A lease lost meanwhile (the worker ran past it and another worker took the job) discards the
result: the other worker's completion is the one that counts.

Nothing here reads the wall clock: the worker's ``clock`` gives every lease, heartbeat and
completion time (the CLI passes the system clock; tests a fixed one).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab.clock import Clock
from memlab.config import MemlabConfig
from memlab.errors import EmbeddingUnavailable, InvalidInput, JobError, LeaseLost
from memlab.store import Store

from . import queue
from .kinds import JobContext, enqueue, get_kind

log = logging.getLogger("memlab")


@dataclass
class RunReport:
    """What :meth:`Worker.run` did: the jobs it finished (done or failed), re-queued after an
    error, and the leases it lost."""

    done: list[queue.Job] = field(default_factory=list)
    failed: list[queue.Job] = field(default_factory=list)
    retried: list[queue.Job] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)

    @property
    def processed(self) -> int:
        return len(self.done) + len(self.failed) + len(self.retried) + len(self.lost)

    def summary(self) -> str:
        return (f"{len(self.done)} done, {len(self.failed)} failed, {len(self.retried)} back in "
                f"the queue after an error, {len(self.lost)} lease(s) lost")

    def to_frame(self):
        """One row per job processed: ``outcome`` (done, failed, retried or lost) and the job's
        fields (a lost lease: its job id alone)."""
        import pandas as pd

        cols = ["outcome", *queue.Job.__dataclass_fields__]
        rows = [{"outcome": outcome, **job.to_dict()}
                for outcome in ("done", "failed", "retried") for job in getattr(self, outcome)]
        rows += [{"outcome": "lost", "id": job_id} for job_id in self.lost]
        return pd.DataFrame(rows, columns=cols)


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """Runs the fold jobs of one store.

    Args:
        store: the opened store (:class:`memlab.store.Store`).
        clock: the time of leases and completions.
        embedder: for ``reembed``: an embedder, or a function that makes one (loaded only when a
            ``reembed`` job runs); None: ``reembed`` jobs fail with EmbeddingUnavailable.
        worker_id: names the lease holder (default host:pid:random).
        lease_seconds: default ``governance.fold_lease_seconds`` (300).
    """

    def __init__(self, store: Store, *, clock: Clock, embedder: Any = None,
                 worker_id: str | None = None, lease_seconds: float | None = None) -> None:
        self.store, self.clock = store, clock
        self.config: MemlabConfig = store.config
        self.worker_id = worker_id or _worker_id()
        self.lease_seconds = float(self.config.governance.fold_lease_seconds
                                   if lease_seconds is None else lease_seconds)
        if self.lease_seconds <= 0:
            raise InvalidInput("lease_seconds", "must be > 0", lease_seconds)
        self._embedder = embedder
        self._owns_store = False
        self.stats: Counter[str] = Counter()

    @classmethod
    def open(cls, path: str | Path, *, config: MemlabConfig | None = None, clock: Clock,
             embedder: Any = None, **kwargs: Any) -> "Worker":
        """Open the store file ``path`` (migrating it) for a worker; :meth:`close` closes it."""
        instance = embedder if hasattr(embedder, "embed_documents") else None
        worker = cls(Store.open(path, config=config, embedder=instance), clock=clock,
                     embedder=embedder, **kwargs)
        worker._owns_store = True
        return worker

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the queue ---------------------------------------------------------------------------
    def enqueue(self, kind: str, payload: Mapping[str, Any] | None = None, **kwargs: Any
                ) -> queue.Job:
        """Queue a job at the worker's clock (:func:`memlab.jobs.enqueue`)."""
        return enqueue(self.store, kind, payload, now=self.clock.now(), **kwargs)

    def jobs(self, *, states: Sequence[str] | None = None, kinds: Sequence[str] | None = None,
             limit: int | None = None) -> list[queue.Job]:
        """The store's jobs, newest first."""
        return queue.list_jobs(self.store.conn, states=states, kinds=kinds, limit=limit)

    def to_frame(self, *, states: Sequence[str] | None = None,
                 kinds: Sequence[str] | None = None, limit: int | None = None):
        """:meth:`jobs` as a pandas DataFrame (one row per job)."""
        import pandas as pd

        cols = list(queue.Job.__dataclass_fields__)
        return pd.DataFrame([j.to_dict() for j in self.jobs(states=states, kinds=kinds,
                                                             limit=limit)], columns=cols)

    def frame(self, **kwargs: Any):
        """Retired: :meth:`to_frame`."""
        from memlab.frames import renamed

        renamed("Worker.frame()", "Worker.to_frame()")
        return self.to_frame(**kwargs)

    def status(self) -> dict[tuple[str, str], int]:
        """``{(kind, state): jobs}``."""
        return queue.counts(self.store.conn)

    def ready(self, kinds: Sequence[str] | None = None) -> int:
        """Jobs a worker could lease now."""
        return queue.ready(self.store.conn, now=self.clock.now(), kinds=kinds)

    # -- running -----------------------------------------------------------------------------
    def lease(self, kinds: Sequence[str] | None = None) -> queue.Lease | None:
        """Lease the oldest ready job (of ``kinds``), or None."""
        return queue.lease(self.store.conn, now=self.clock.now(), owner=self.worker_id,
                           lease_seconds=self.lease_seconds, kinds=kinds)

    def run_one(self, kinds: Sequence[str] | None = None) -> queue.Job | None:
        """Lease and run one job; the job as stored afterwards (None: no job was ready, or the
        lease was lost)."""
        held = self.lease(kinds)
        return None if held is None else self.run_lease(held)

    def run_lease(self, held: queue.Lease) -> queue.Job | None:
        """Run the job of a lease this worker holds; the job as stored afterwards, or None when
        the lease was lost meanwhile (the result is discarded)."""
        conn, job = self.store.conn, held.job
        lease = [held]

        def heartbeat() -> None:
            lease[0] = queue.heartbeat(conn, lease[0], now=self.clock.now(),
                                       lease_seconds=self.lease_seconds)

        try:
            kind = get_kind(job.kind)
        except JobError as exc:
            return self._failed(lease[0], exc, retry=False)
        ctx = JobContext(job=job, store=self.store, config=self.config, now=held.job.started_at,
                         embedder=self._get_embedder, heartbeat=heartbeat)
        try:
            outcome = kind.handler(ctx)
            stored = queue.complete(conn, lease[0], now=self.clock.now(), result=outcome.result,
                                    write=outcome.write)
        except LeaseLost as exc:
            self._count(f"lease lost: {job.kind}", str(exc))
            return None
        except Exception as exc:   # recorded in the job, logged and counted (module doc)
            return self._failed(lease[0], exc, retry=not isinstance(exc, JobError))
        self.stats[f"done: {job.kind}"] += 1
        return stored

    def _failed(self, lease: queue.Lease, exc: BaseException, *, retry: bool) -> queue.Job | None:
        error = f"{type(exc).__name__}: {exc}"
        try:
            stored = queue.fail(self.store.conn, lease, now=self.clock.now(), error=error,
                                retry=retry)
        except LeaseLost as lost:
            self._count(f"lease lost: {lease.job.kind}", str(lost))
            return None
        what = "failed" if stored.state == "failed" else "error, retried"
        self._count(f"{what}: {lease.job.kind}", f"job {lease.job.id} ({lease.job.kind}) "
                    f"attempt {stored.attempts} of {stored.max_attempts}: {error}")
        return stored

    def _count(self, key: str, message: str) -> None:
        self.stats[key] += 1
        if self.stats[key] == 1:
            log.warning("memlab jobs: %s", message)

    def _get_embedder(self) -> Any:
        emb = self._embedder
        if emb is None:
            raise EmbeddingUnavailable("this worker has no embedder: open it with one "
                                       "(Worker(..., embedder=...), memory_store.worker())")
        if not hasattr(emb, "embed_documents"):
            emb = self._embedder = emb()
        return emb

    def run(self, *, max_jobs: int | None = None, kinds: Sequence[str] | None = None,
            progress: bool = False) -> RunReport:
        """Lease and run jobs until none is ready (or ``max_jobs`` were run); a tqdm bar with
        ``progress``. Jobs put back in the queue after an error are run again (up to their
        attempts) within the same call."""
        if max_jobs is not None and (isinstance(max_jobs, bool) or not isinstance(max_jobs, int)
                                     or max_jobs < 1):
            raise InvalidInput("max_jobs", "must be a whole number >= 1 (or None: all)", max_jobs)
        from tqdm.auto import tqdm

        report = RunReport()
        total = self.ready(kinds)
        bar = tqdm(total=total if max_jobs is None else min(total, max_jobs), unit="job",
                   desc="fold jobs", disable=not progress)
        try:
            while max_jobs is None or report.processed < max_jobs:
                held = self.lease(kinds)
                if held is None:
                    break
                stored = self.run_lease(held)
                if stored is None:
                    report.lost.append(held.job.id)
                else:
                    {"done": report.done, "failed": report.failed}.get(
                        stored.state, report.retried).append(stored)
                if bar.n >= bar.total:
                    bar.total = bar.n + 1
                bar.update(1)
                bar.set_postfix_str(f"{held.job.kind} #{held.job.id}", refresh=False)
        finally:
            bar.close()
        return report


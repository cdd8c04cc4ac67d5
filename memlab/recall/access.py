"""Buffered access statistics of the Familiars reader (§5.3.2 ``last_accessed_ts``,
``access_count``: "reader 批量 flush").

Every memory a read returns gets ``last_accessed = now`` and ``access_count += 1``, but not one
write transaction per read: :class:`AccessBuffer` keeps them in memory and writes them in one
transaction per batch (the store's reinforcement path,
:meth:`memlab.store.Repository.record_accesses`) when either limit is reached:

- ``reader.flush_size`` accesses are buffered (one access = one memory returned by one read), or
- the oldest buffered access is ``reader.flush_interval_s`` seconds old by the clock passed in
  (checked at each read: no background thread; an idle store keeps its batch until the next
  read, :meth:`AccessBuffer.flush` or the store's ``close()``).

So a crash (SIGKILL) loses at most the one unflushed batch, fewer than ``flush_size`` accesses,
and never a record: the records are written by the write path, not here. A flush the store
refuses at a read (a lock held past the busy timeout) keeps the batch, is logged once and
counted (``failed``), and is retried at the next read; only then can more than one batch be at
risk. An explicit :meth:`AccessBuffer.flush` raises the store's error.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Mapping

from memlab.clock import Clock, to_unix
from memlab.config import ReaderConfig
from memlab.errors import StoreError

log = logging.getLogger("memlab")

#: {memory id: (accesses, last access time)} -> memories updated (one transaction)
WriteFn = Callable[[Mapping[str, "tuple[int, float]"]], int]


class AccessBuffer:
    """Access statistics waiting to be written (see the module docstring)."""

    def __init__(self, write: WriteFn, *, cfg: ReaderConfig, clock: Clock) -> None:
        self._write, self._cfg, self._clock = write, cfg, clock
        self._pending: dict[str, tuple[int, float]] = {}
        self._events = 0
        self._since: float | None = None   # clock time of the oldest buffered access
        #: batches written, accesses written, automatic flushes the store refused
        self.batches = 0
        self.written = 0
        self.failed = 0

    @property
    def pending(self) -> int:
        """Accesses buffered, not yet written."""
        return self._events

    def record(self, ids: Iterable[str], *, at: float) -> int:
        """Buffer one access of each memory in ``ids`` at time ``at`` (the read's ``now``);
        flush when a limit is reached. Returns the accesses written now (0: still buffered)."""
        ids = list(ids)
        if not ids:
            return 0
        at = float(at)
        for i in ids:
            n, last = self._pending.get(i, (0, at))
            self._pending[i] = (n + 1, max(last, at))
        self._events += len(ids)
        clock_now = to_unix(self._clock.now())
        if self._since is None:
            self._since = clock_now
        if self._events < self._cfg.flush_size and \
                clock_now - self._since < self._cfg.flush_interval_s:
            return 0
        try:
            return self.flush()
        except StoreError as exc:   # keep the batch; the next read retries
            self.failed += 1
            if self.failed == 1:
                log.warning("memlab degraded: reader access statistics not flushed (%s); kept "
                            "in memory and retried at the next read", type(exc).__name__)
            return 0

    def flush(self) -> int:
        """Write every buffered access in one transaction; returns how many accesses were
        written. On an error the buffer is kept (nothing is lost) and the error raised."""
        if not self._pending:
            return 0
        self._write(dict(self._pending))
        n = self._events
        self._pending.clear()
        self._events, self._since = 0, None
        self.batches += 1
        self.written += n
        return n

"""The VRAM gate (familiars §5.10): which models stay resident on a GPU while a user chats.

Every model memlab runs on the GPU is registered with a priority (1 CRITICAL .. 4 BACKGROUND,
named by ``vram.priority_*``), an estimated size, a category (``sync``: a user waits for it;
``queue``: a background job that may be interrupted) and a load/unload pair. ``acquire`` is a
context manager that loads the model on demand and yields what ``load()`` returned::

    gate = VRAMGate(SimulatedDevice(8000), cfg.vram)
    gate.register("embedder", priority=1, estimated_mb=700, load=load_bge, on_evict=free_bge)
    with gate.acquire("embedder") as model:
        vectors = model.encode(texts)

Who may evict whom is the policy's (:class:`memlab.vram.policy.PriorityPolicy` by default): a
sync acquire evicts idle residents and queue residents (a working queue job is checkpointed
first: its ``on_checkpoint()`` state is handed to ``on_resume`` exactly once, on the model's next
acquire), lowest priority then least recently active first; it never evicts a working sync
resident. A queue acquire evicts only idle queue residents of its priority or lower and
otherwise waits. Waits are bounded (``vram.sync_wait_s``, ``vram.queue_wait_s``, or
``timeout_s``, measured on the real monotonic clock of the condition variable, while the trace
and the idle reclaim read the gate's ``clock``) and use one condition variable (no polling); a
request that cannot be met raises
:class:`ModelBudgetExceeded` naming the MB it needs, the free MB and what holds the memory.

Priority of a request: the smaller of the model's and the thread's boost
(:func:`memlab.vram.priority.boost_thread_priority`), for sync and queue requests alike.

Capacity: ``device.total_mb() - vram.reserve_mb``; the room a request sees is the smaller of the
capacity minus the residents' estimates and the device's free MB minus the reserve (a real
device also counts other processes). Loads, unloads and callbacks run under the gate's lock: two
loads never race for the same free memory (a load blocks other acquires while it runs).

Idle reclaim (§5.10.3): :meth:`VRAMGate.reap_idle` unloads every idle resident idle for its
policy's limit or longer; :meth:`VRAMGate.start_reaper` runs it every ``vram.reaper_interval_s``
on a daemon thread. Tests drive ``reap_idle`` with a fake clock.

Every decision is a :mod:`memlab.vram.trace` event (a load's: when it began and how long it took,
on the gate's clock).
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Literal

from memlab.config import VRAMConfig
from memlab.errors import InvalidInput, VRAMError
from memlab.vram.devices import Device
from memlab.vram.policy import Policy, PriorityPolicy
from memlab.vram.priority import current_priority
from memlab.vram.trace import Trace

_EPS = 1e-9


class ModelBudgetExceeded(VRAMError):
    """A model cannot be made resident: it is larger than the gate's capacity, or what holds the
    memory may not be evicted (working sync models; for a queue request, anything but idle
    queue models of its priority or lower) and the bounded wait ran out.

    ``model_id``, ``need_mb``, ``free_mb``, ``capacity_mb``; ``holders``: (model, category,
    priority, MB, working) of every resident; ``waited_s``."""

    def __init__(self, model_id: str, *, need_mb: float, free_mb: float, capacity_mb: float,
                 holders: list[tuple[str, str, int, float, bool]], why: str,
                 waited_s: float = 0.0) -> None:
        self.model_id, self.need_mb, self.free_mb = model_id, need_mb, free_mb
        self.capacity_mb, self.holders, self.waited_s = capacity_mb, holders, waited_s
        held = ", ".join(f"{m} ({c}, priority {p}, {mb:g} MB, {'working' if w else 'idle'})"
                         for m, c, p, mb, w in holders) or "nothing"
        super().__init__(f"VRAM: {model_id!r} needs {need_mb:g} MB; {free_mb:g} MB free of "
                         f"{capacity_mb:g} MB capacity; held by {held}: {why}")


@dataclass(eq=False)
class _Entry:
    model_id: str
    priority: int
    estimated_mb: float
    on_evict: Callable[[], None] | None = None
    category: Literal["sync", "queue"] = "sync"
    on_checkpoint: Callable[[], Any] | None = None
    last_active_at: float = 0.0
    idle_ttl_sec: float | None = None
    load: Callable[[], Any] | None = None
    on_resume: Callable[[Any], None] | None = None
    order: int = 0
    users: int = 0
    resident: bool = False
    handle: Any = None
    saved: list = field(default_factory=list)     # [state] while a checkpoint awaits its resume
    release_when_idle: bool = False

    @property
    def is_working(self) -> bool:
        return self.users > 0


@dataclass(frozen=True)
class Resident:
    """A snapshot of one registered model (:meth:`VRAMGate.snapshot`)."""

    model_id: str
    priority: int
    category: str
    estimated_mb: float
    resident: bool
    is_working: bool
    last_active_at: float
    order: int
    idle_ttl_sec: float | None


class Request:
    """One acquire, stepwise (``acquire`` loops over it; the simulator drives it in simulated
    time): :meth:`try_admit` without blocking, :meth:`deny` to give up; once admitted, the
    holder ends with :meth:`VRAMGate.leave`."""

    def __init__(self, gate: "VRAMGate", entry: _Entry, priority: int) -> None:
        self.gate, self.entry, self.priority = gate, entry, priority
        self.started = gate._clock()
        self.waiting = False
        self.admitted = False
        self.handle: Any = None

    def try_admit(self) -> bool:
        """Make the model resident and count this request as its user, when the policy allows
        it now; False (and a ``wait`` event the first time) otherwise."""
        g = self.gate
        with g._cond:
            if self.admitted:
                raise InvalidInput("request", "is already admitted", self.entry.model_id)
            waited = g._clock() - self.started
            if not g._admit(self.entry, self.priority, waited if self.waiting else 0.0):
                if not self.waiting:
                    self.waiting = True
                    g._record("wait", self.entry, priority=self.priority)
                return False
            self.admitted = True
            self.handle = self.entry.handle
            return True

    def deny(self, why: str) -> ModelBudgetExceeded:
        """Give up: a ``denied`` event; returns the error to raise."""
        g = self.gate
        with g._cond:
            return g._deny(self.entry, self.priority, why, g._clock() - self.started)


class VRAMGate:
    """See the module docstring."""

    def __init__(self, device: Device, cfg: VRAMConfig, *,
                 clock: Callable[[], float] = time.monotonic, trace: Trace | None = None,
                 policy: Policy | None = None) -> None:
        self.device, self.cfg, self._clock = device, cfg, clock
        self._trace = trace if trace is not None else Trace()
        self.policy: Policy = policy if policy is not None else \
            PriorityPolicy(cfg.idle_evict_seconds)
        self.capacity_mb = float(device.total_mb()) - cfg.reserve_mb
        if self.capacity_mb <= 0:
            raise InvalidInput("vram.reserve_mb", f"leaves no capacity on {device.name} "
                               f"({device.total_mb():g} MB)", cfg.reserve_mb)
        self.levels = {cfg.priority_critical: "CRITICAL", cfg.priority_important: "IMPORTANT",
                       cfg.priority_nice: "NICE", cfg.priority_background: "BACKGROUND"}
        self._entries: dict[str, _Entry] = {}
        self._cond = threading.Condition(threading.RLock())
        self._reaper: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def trace(self) -> Trace:
        return self._trace

    # -- registration ------------------------------------------------------------------------
    def register(self, model_id: str, *, priority: int, estimated_mb: float,
                 category: Literal["sync", "queue"] = "sync",
                 load: Callable[[], Any] | None = None,
                 on_evict: Callable[[], None] | None = None,
                 on_checkpoint: Callable[[], Any] | None = None,
                 on_resume: Callable[[Any], None] | None = None,
                 idle_ttl_sec: float | None = None) -> None:
        if not isinstance(model_id, str) or not model_id:
            raise InvalidInput("model_id", "must be a non-empty string", model_id)
        if isinstance(priority, bool) or priority not in self.levels:
            raise InvalidInput("priority", "must be one of the vram.priority_* levels "
                               f"{sorted(self.levels)}", priority)
        if category not in ("sync", "queue"):
            raise InvalidInput("category", "must be 'sync' or 'queue'", category)
        if not (math.isfinite(estimated_mb) and estimated_mb >= 0):   # 0: a client that holds no VRAM (an HTTP LLM), traced all the same
            raise InvalidInput("estimated_mb", "must be >= 0 (a finite number of MB)", estimated_mb)
        if idle_ttl_sec is not None and not idle_ttl_sec > 0:
            raise InvalidInput("idle_ttl_sec", "must be > 0 or None", idle_ttl_sec)
        with self._cond:
            if model_id in self._entries:
                raise InvalidInput("model_id", "is already registered", model_id)
            e = _Entry(model_id, priority, float(estimated_mb), on_evict, category,
                       on_checkpoint, self._clock(), idle_ttl_sec, load, on_resume,
                       order=len(self._entries))
            self._entries[model_id] = e
            self._record("register", e)

    def register_client(self, client: Any) -> None:
        """Register a model client: ``model_id``, ``priority``, ``category``,
        ``estimated_mb()``, ``load()``, ``unload()`` and optionally ``checkpoint()``,
        ``resume(state)``, ``idle_ttl_sec``."""
        self.register(client.model_id, priority=client.priority,
                      estimated_mb=client.estimated_mb(), category=client.category,
                      load=client.load, on_evict=client.unload,
                      on_checkpoint=getattr(client, "checkpoint", None),
                      on_resume=getattr(client, "resume", None),
                      idle_ttl_sec=getattr(client, "idle_ttl_sec", None))

    def snapshot(self) -> list[Resident]:
        """Every registered model as it is now, in registration order."""
        with self._cond:
            return [Resident(e.model_id, e.priority, e.category, e.estimated_mb, e.resident,
                             e.is_working, e.last_active_at, e.order, e.idle_ttl_sec)
                    for e in self._entries.values()]

    def resident_mb(self) -> float:
        with self._cond:
            return sum(e.estimated_mb for e in self._entries.values() if e.resident)

    def available_mb(self) -> float:
        """What a request may take without evicting anything."""
        with self._cond:
            return min(self.capacity_mb - self.resident_mb(),
                       self.device.free_mb() - self.cfg.reserve_mb)

    # -- acquire -----------------------------------------------------------------------------
    def request(self, model_id: str) -> Request:
        """Start an acquire (an ``acquire`` event); raises ModelBudgetExceeded at once when the
        model is larger than the capacity."""
        with self._cond:
            e = self._entry(model_id)
            boost = current_priority()
            p = e.priority if boost is None else min(e.priority, boost)
            self._record("acquire", e, priority=p)
            if e.estimated_mb > self.capacity_mb + _EPS:
                raise self._deny(e, p, "larger than the capacity", 0.0)
            return Request(self, e, p)

    @contextmanager
    def acquire(self, model_id: str, *, timeout_s: float | None = None) -> Iterator[Any]:
        """Hold ``model_id`` for the block, loading it (and evicting what the policy allows)
        when needed; yields ``load()``'s handle. Waits at most ``timeout_s`` (default
        ``vram.sync_wait_s`` or ``vram.queue_wait_s``) for memory held by what it may not evict."""
        with self._cond:
            req = self.request(model_id)
            if timeout_s is None:
                timeout_s = self.cfg.sync_wait_s if req.entry.category == "sync" \
                    else self.cfg.queue_wait_s
            deadline = time.monotonic() + timeout_s
            while not req.try_admit():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise req.deny(f"no memory it may take within {timeout_s:g} s")
                self._cond.wait(remaining)
        try:
            yield req.handle
        finally:
            self.leave(model_id)

    def leave(self, model_id: str) -> None:
        """The end of one admitted request (``acquire`` calls it on leaving the block)."""
        with self._cond:
            e = self._entry(model_id)
            if e.users <= 0:
                raise InvalidInput("model_id", "is not held", model_id)
            e.users -= 1
            e.last_active_at = self._clock()
            if e.users == 0 and e.release_when_idle and e.resident:
                self._evict(e, "release")
            self._cond.notify_all()

    def release(self, model_id: str) -> None:
        """Unload ``model_id`` now if it is idle, else as soon as its last user leaves."""
        with self._cond:
            e = self._entry(model_id)
            if e.resident and e.is_working:
                e.release_when_idle = True
            elif e.resident:
                self._evict(e, "release")
                self._cond.notify_all()

    def release_all(self) -> None:
        with self._cond:
            for model_id in list(self._entries):
                self.release(model_id)

    # -- idle reclaim --------------------------------------------------------------------------
    def reap_idle(self) -> list[str]:
        """One idle-reclaim pass: unload every idle resident idle for its policy limit or longer
        (``vram.idle_evict_seconds`` or its own ``idle_ttl_sec`` for the priority policy)."""
        with self._cond:
            now = self._clock()
            gone = []
            for e in list(self._entries.values()):
                limit = self.policy.idle_limit(e)
                if e.resident and not e.is_working and limit is not None \
                        and now - e.last_active_at >= limit - _EPS:
                    self._evict(e, "idle")
                    gone.append(e)
            if gone:
                self._trace.record("idle_reclaim", t=now, mb=sum(e.estimated_mb for e in gone),
                                   free_mb=self.device.free_mb(), reason=",".join(
                                       e.model_id for e in gone))
                self._cond.notify_all()
            return [e.model_id for e in gone]

    def start_reaper(self, interval_s: float | None = None) -> None:
        """Run :meth:`reap_idle` every ``interval_s`` (default ``vram.reaper_interval_s``) on a
        daemon thread until :meth:`stop_reaper`."""
        interval = self.cfg.reaper_interval_s if interval_s is None else interval_s
        if self._reaper is not None:
            raise InvalidInput("reaper", "is already running", self._reaper.name)
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                self.reap_idle()

        self._reaper = threading.Thread(target=loop, name="vram-reaper", daemon=True)
        self._reaper.start()

    def stop_reaper(self) -> None:
        if self._reaper is not None:
            self._stop.set()
            self._reaper.join()
            self._reaper = None

    # -- internals (under self._cond) ------------------------------------------------------------
    def _entry(self, model_id: str) -> _Entry:
        try:
            return self._entries[model_id]
        except KeyError:
            raise InvalidInput("model_id", f"is not registered with the gate (registered: "
                               f"{sorted(self._entries)})", model_id) from None

    def _record(self, event: str, e: _Entry, *, t: float | None = None, **kw: Any) -> None:
        kw.setdefault("priority", e.priority)
        self._trace.record(event, t=self._clock() if t is None else t, model=e.model_id,
                           mb=e.estimated_mb, free_mb=self.device.free_mb(),
                           category=e.category, **kw)

    def _admit(self, e: _Entry, p: int, waited: float) -> bool:
        if e.resident:
            e.users += 1
            e.last_active_at = self._clock()
            self._record("hit", e, priority=p, wait_s=waited)
            self._resume(e, p)
            return True
        room = self.available_mb()
        chosen: list[_Entry] = []
        if e.estimated_mb > room + _EPS:
            residents = [r for r in self._entries.values() if r.resident]
            freed = 0.0
            for v in self.policy.victims(e, p, residents):
                if e.estimated_mb <= room + freed + _EPS:
                    break
                chosen.append(v)
                freed += v.estimated_mb
            if e.estimated_mb > room + freed + _EPS:
                return False
        for v in chosen:
            self._evict(v, "sync-preempt" if v.is_working else self.policy.name)
        began = self._clock()
        e.handle = e.load() if e.load is not None else None
        e.resident = True
        self.device.on_load(e.model_id, e.estimated_mb)
        e.users += 1
        e.last_active_at = self._clock()
        e.release_when_idle = False
        self._record("load", e, priority=p, wait_s=waited, t=began,
                     load_s=e.last_active_at - began)
        self._resume(e, p)
        return True

    def _resume(self, e: _Entry, p: int) -> None:
        if e.saved:
            state = e.saved.pop()
            self._record("resume", e, priority=p)
            if e.on_resume is not None:
                e.on_resume(state)

    def _evict(self, e: _Entry, reason: str) -> None:
        if e.is_working and e.category == "queue" and e.on_checkpoint is not None:
            e.saved[:] = [e.on_checkpoint()]
            self._record("checkpoint", e, reason=reason)
        if e.on_evict is not None:
            e.on_evict()
        e.handle = None
        e.resident = False
        self.device.on_unload(e.model_id)
        self._record("evict", e, reason=reason)

    def _deny(self, e: _Entry, p: int, why: str, waited: float) -> ModelBudgetExceeded:
        self._record("denied", e, priority=p, reason=why, wait_s=waited)
        holders = [(r.model_id, r.category, r.priority, r.estimated_mb, r.is_working)
                   for r in self._entries.values() if r.resident]
        return ModelBudgetExceeded(e.model_id, need_mb=e.estimated_mb,
                                   free_mb=self.available_mb(), capacity_mb=self.capacity_mb,
                                   holders=holders, why=why, waited_s=waited)

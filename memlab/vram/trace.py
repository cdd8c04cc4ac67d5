"""The gate's event trace (issue 11, item 4): every decision the gate takes, in order.

One :class:`TraceEvent` per event, with the gate clock's time (monotonic seconds, or simulated
seconds in :mod:`memlab.vram.simulate`), the model, the priority the request ran at, the model's
estimated MB, the device's free MB after the event and the thread's name. Events:

``register``    a model joins the gate
``acquire``     a request starts (then ``hit``, ``load``, ``wait`` or ``denied`` follow)
``hit``         the model was resident: no load (``wait_s``: how long the request waited)
``load``        the model was loaded (after the evictions that made room): ``t`` is when the load
                began, ``load_s`` how long it took (the gate's clock; the simulator's
                ``load_s`` of the model)
``evict``       a model was unloaded; ``reason``: the policy's name (``priority`` for the gate,
                ``lru``, ``keepalive``) when it made room for a request, ``sync-preempt`` when a
                working queue job was checkpointed and stopped for a sync request, ``idle`` when
                the reaper reclaimed it, ``release`` when asked (``release``/``release_all``)
``checkpoint``  a working queue job's ``on_checkpoint`` ran before its eviction
``resume``      the saved checkpoint was handed to ``on_resume`` on the model's next acquire
``idle_reclaim`` one reaper pass that reclaimed something (``mb``: what it freed)
``wait``        a request found no memory it may take and started to wait
``denied``      a request gave up (``reason`` says why): ModelBudgetExceeded was raised

As a DataFrame (:meth:`Trace.to_frame`), JSON Lines (:meth:`Trace.to_jsonl`,
:meth:`Trace.from_jsonl`; a file written before ``load_s`` existed reads with it None), summary
metrics (:meth:`Trace.summary`) and a timeline (:func:`memlab.vram.plots.vram_timeline`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

EVENTS = ("register", "acquire", "hit", "load", "evict", "checkpoint", "resume", "idle_reclaim",
          "wait", "denied")


@dataclass(frozen=True)
class TraceEvent:
    t: float
    event: str
    model: str | None
    priority: int | None
    mb: float | None
    free_mb: float | None
    thread: str
    reason: str | None = None
    category: str | None = None
    wait_s: float | None = None
    load_s: float | None = None


FIELDS = tuple(f.name for f in dataclasses.fields(TraceEvent))


class Trace:
    """Thread-safe, append-only list of :class:`TraceEvent`; ``listeners`` are called with each
    event as it is recorded (under the gate's lock: keep them short). ``thread_name``, when set,
    names the actor instead of the current thread (the simulator's turns and jobs)."""

    def __init__(self, events: Iterable[TraceEvent] = ()) -> None:
        self._events: list[TraceEvent] = list(events)
        self._lock = threading.Lock()
        self.listeners: list[Callable[[TraceEvent], None]] = []
        self.thread_name: Callable[[], str] | None = None

    def record(self, event: str, *, t: float, model: str | None = None,
               priority: int | None = None, mb: float | None = None,
               free_mb: float | None = None, reason: str | None = None,
               category: str | None = None, wait_s: float | None = None,
               load_s: float | None = None, thread: str | None = None) -> TraceEvent:
        if event not in EVENTS:
            raise ValueError(f"unknown trace event {event!r}; one of {EVENTS}")
        ev = TraceEvent(float(t), event, model, priority, None if mb is None else float(mb),
                        None if free_mb is None else float(free_mb),
                        thread or (self.thread_name() if self.thread_name is not None
                                   else threading.current_thread().name),
                        reason, category, wait_s, None if load_s is None else float(load_s))
        with self._lock:
            self._events.append(ev)
        for fn in list(self.listeners):
            fn(ev)
        return ev

    @property
    def events(self) -> list[TraceEvent]:
        with self._lock:
            return list(self._events)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def __iter__(self):
        return iter(self.events)

    def tuples(self, *fields: str) -> list[tuple]:
        """The events as tuples of ``fields`` (default: t, event, model, reason)."""
        fields = fields or ("t", "event", "model", "reason")
        return [tuple(getattr(e, f) for f in fields) for e in self.events]

    # -- formats ---------------------------------------------------------------------------
    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(e) for e in self.events], columns=list(FIELDS))

    def to_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as fh:
            for e in self.events:
                fh.write(json.dumps(dataclasses.asdict(e), ensure_ascii=False) + "\n")
        return path

    @classmethod
    def from_jsonl(cls, path: str | Path) -> "Trace":
        from memlab.errors import DatasetError

        events = []
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                events.append(TraceEvent(**{k: data.get(k) for k in FIELDS}))
            except (ValueError, TypeError) as exc:
                raise DatasetError(str(path), f"not a trace event ({exc})", line=n) from None
        return cls(events)

    # -- metrics ---------------------------------------------------------------------------
    def residency(self) -> list[tuple[float, float]]:
        """(t, resident MB after the event) at each load and evict."""
        out, resident = [], 0.0
        for e in self.events:
            if e.event == "load":
                resident += e.mb or 0.0
            elif e.event == "evict":
                resident -= e.mb or 0.0
            else:
                continue
            out.append((e.t, resident))
        return out

    def summary(self, capacity_mb: float | None = None) -> dict[str, float]:
        """Flat metrics (MLflow-ready): counts of each event, evictions by reason, p50/p95 of the
        wait of the sync acquires that got their model (seconds of the gate's clock; a denied
        one counts in ``denied``), the seconds spent loading (``load_time_s``, the loads'
        ``load_s``), the peak resident MB and, given ``capacity_mb``, the seconds during which
        the resident MB exceeded it."""
        import numpy as np

        events = self.events
        out: dict[str, float] = {}
        plural = {"register": "registers", "acquire": "acquires", "hit": "hits", "load": "loads",
                  "evict": "evictions", "checkpoint": "checkpoints", "resume": "resumes",
                  "idle_reclaim": "idle_reclaims", "wait": "waits", "denied": "denied"}
        for name, key in plural.items():
            out[key] = sum(e.event == name for e in events)
        for reason in ("priority", "sync-preempt", "idle", "release", "lru", "keepalive"):
            out[f"evictions_{reason.replace('-', '_')}"] = sum(
                e.event == "evict" and e.reason == reason for e in events)
        waits = [e.wait_s or 0.0 for e in events
                 if e.event in ("hit", "load") and e.category == "sync"]
        out["sync_acquires"] = len(waits)
        out["sync_wait_p50_s"] = float(np.percentile(waits, 50)) if waits else 0.0
        out["sync_wait_p95_s"] = float(np.percentile(waits, 95)) if waits else 0.0
        out["sync_wait_max_s"] = float(max(waits)) if waits else 0.0
        out["load_time_s"] = float(sum(e.load_s or 0.0 for e in events if e.event == "load"))
        res = self.residency()
        out["peak_resident_mb"] = max((mb for _, mb in res), default=0.0)
        if capacity_mb is not None:
            over = 0.0
            for (t0, mb), (t1, _) in zip(res, res[1:]):
                if mb > capacity_mb + 1e-9:
                    over += t1 - t0
            if res and res[-1][1] > capacity_mb + 1e-9 and events:
                over += events[-1].t - res[-1][0]
            out["time_over_capacity_s"] = over
        return out


def plot_timeline(trace: Trace, capacity_mb: float, ax: Any = None):
    """Deprecated: :func:`memlab.vram.plots.vram_timeline` (residency lanes and a memory panel;
    ``ax``'s slot is split into the two)."""
    import warnings

    from memlab.vram.plots import vram_timeline

    warnings.warn("memlab.vram.plot_timeline is memlab.vram.plots.vram_timeline now",
                  DeprecationWarning, stacklevel=2)
    return vram_timeline(trace, capacity_mb, ax=ax)

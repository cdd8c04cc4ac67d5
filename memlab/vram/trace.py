"""The gate's event trace (issue 11, item 4): every decision the gate takes, in order.

One :class:`TraceEvent` per event, with the gate clock's time (monotonic seconds, or simulated
seconds in :mod:`memlab.vram.simulate`), the model, the priority the request ran at, the model's
estimated MB, the device's free MB after the event and the thread's name. Events:

``register``    a model joins the gate
``acquire``     a request starts (then ``hit``, ``load``, ``wait`` or ``denied`` follow)
``hit``         the model was resident: no load (``wait_s``: how long the request waited)
``load``        the model was loaded (after the evictions that made room)
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
:meth:`Trace.from_jsonl`), summary metrics (:meth:`Trace.summary`) and a timeline
(:func:`plot_timeline`).
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
               thread: str | None = None) -> TraceEvent:
        if event not in EVENTS:
            raise ValueError(f"unknown trace event {event!r}; one of {EVENTS}")
        ev = TraceEvent(float(t), event, model, priority, None if mb is None else float(mb),
                        None if free_mb is None else float(free_mb),
                        thread or (self.thread_name() if self.thread_name is not None
                                   else threading.current_thread().name),
                        reason, category, wait_s)
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
        one counts in ``denied``), the peak resident MB and, given ``capacity_mb``, the seconds
        during which the resident MB exceeded it."""
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
    """A matplotlib Figure of the trace: one lane per model with a bar while it is resident
    (colour by priority), ``x`` where it was evicted, ``v`` where it was checkpointed, ``^``
    where it resumed; on the right axis, the resident MB over time and the ``capacity`` line.
    Drawn on ``ax`` when given (its figure is returned), else on a new Agg figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    own = ax is None
    if own:
        fig = Figure(figsize=(11, 4.5))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        fig.subplots_adjust(left=0.09, right=0.8)
    else:
        fig = ax.figure
    events = trace.events
    end = max((e.t for e in events), default=0.0)
    models: list[str] = []
    for e in events:
        if e.model is not None and e.model not in models:
            models.append(e.model)
    lane = {m: i for i, m in enumerate(models)}
    colours = {1: "tab:red", 2: "tab:orange", 3: "tab:blue", 4: "tab:gray"}
    prio: dict[str, int | None] = {}
    open_at: dict[str, float] = {}
    bars: dict[str, list[tuple[float, float]]] = {m: [] for m in models}
    for e in events:
        if e.event == "register":
            prio[e.model] = e.priority
        elif e.event == "load":
            open_at[e.model] = e.t
        elif e.event == "evict" and e.model in open_at:
            t0 = open_at.pop(e.model)
            bars[e.model].append((t0, e.t - t0))
    for m, t0 in open_at.items():
        bars[m].append((t0, end - t0))
    for m in models:
        ax.broken_barh(bars[m], (lane[m] - 0.35, 0.7),
                       facecolors=colours.get(prio.get(m) or 0, "tab:green"), alpha=0.6)
    marks = {"evict": ("x", "black", "evict"), "checkpoint": ("v", "tab:purple", "checkpoint"),
             "resume": ("^", "tab:green", "resume")}
    for name, (marker, colour, label) in marks.items():
        pts = [(e.t, lane[e.model]) for e in events if e.event == name and e.model in lane]
        if pts:
            ax.scatter(*zip(*pts), marker=marker, color=colour, label=label, zorder=3)
    ax.set_yticks(range(len(models)), models)
    ax.set_xlabel("time (s)")
    ax.set_ylim(-0.6, max(len(models), 1) - 0.4)
    mem = ax.twinx()
    res = trace.residency()
    if res:
        ts = [0.0] + [t for t, _ in res] + [end]
        mbs = [0.0] + [mb for _, mb in res] + [res[-1][1]]
        mem.step(ts, mbs, where="post", color="tab:brown", lw=1, label="resident MB")
    mem.axhline(capacity_mb, color="red", ls="--", lw=1.2, label="capacity")
    mem.set_ylabel("MB")
    mem.set_ylim(0, capacity_mb * 1.15)
    handles = ax.get_legend_handles_labels()
    handles2 = mem.get_legend_handles_labels()
    if handles[0] or handles2[0]:
        ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], loc="upper left",
                  bbox_to_anchor=(1.08, 1.0), fontsize="small")
    ax.set_title("VRAM gate timeline")
    return fig

"""The VRAM gate's figures (issue 20): a trace's timeline, and the policies side by side.

:func:`vram_timeline` draws a :class:`~memlab.vram.trace.Trace` (a simulation's, a benchmark's or a
real GPU's) as two panels over one time axis:

- residency lanes, one per model (labelled with its priority, category and MB): a bar while it
  loads (``loading``: from a load event's ``t`` for its ``load_s``), a bar while it is resident
  after that, a thin hatched bar while a request for it waits (``queued``: from its ``wait``
  event to the admission or the denial of the same request, i.e. the same thread), and markers
  where it was evicted (by reason: to make room, preempted with a checkpoint, reclaimed idle,
  released), where a checkpointed job resumed and where a request was denied;
- a memory panel: the MB the gate holds (every resident's estimate, loading ones included)
  against the gate's capacity.

:func:`vram_policies` puts the rows of :func:`memlab.vram.simulate.compare_policies` side by
side: one small panel per metric, one bar per policy.

Figures are :class:`matplotlib.figure.Figure` on the Agg canvas (no pyplot, no window); each
title names the workload and what is plotted. :func:`timeline_lanes` is the timeline's data
(pure, no matplotlib).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from memlab.errors import InvalidInput
from memlab.vram.trace import Trace

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["EVICTIONS", "POLICY_METRICS", "STATES", "Lane", "timeline_lanes", "vram_policies",
           "vram_timeline"]

#: lane states: label -> colour
STATES = {"resident": "tab:blue", "loading": "tab:orange", "queued": "0.6"}
#: eviction reasons grouped as the timeline marks them: group -> (reasons, marker, colour, label)
EVICTIONS = {
    "room": (("priority", "lru", "keepalive"), "x", "black", "evicted to make room"),
    "preempt": (("sync-preempt",), "v", "tab:purple", "preempted (checkpointed)"),
    "idle": (("idle",), "x", "0.55", "reclaimed idle"),
    "release": (("release",), "x", "tab:olive", "released"),
}
_OTHER = ("other", "x", "tab:brown", "evicted (other)")
_MARKS = {"resumed": ("^", "tab:green", "resumed"), "denied": ("X", "tab:red", "denied")}
#: the metrics :func:`vram_policies` shows by default, with their axis labels
POLICY_METRICS = {"turns_denied": "turns denied", "jobs_denied": "jobs denied",
                  "sync_latency_p95_s": "sync latency p95 (s)", "loads": "loads",
                  "load_time_s": "time loading (s)"}
_POLICY_NAMES = {"priority": "gate", "lru": "lru", "keepalive": "keep-alive"}


@dataclass
class Lane:
    """One model's row of the timeline: spans as (start, duration), marks as times."""

    model: str
    priority: int | None = None
    category: str | None = None
    mb: float | None = None
    loading: list[tuple[float, float]] = field(default_factory=list)
    resident: list[tuple[float, float]] = field(default_factory=list)
    queued: list[tuple[float, float]] = field(default_factory=list)
    evicted: dict[str, list[float]] = field(default_factory=dict)   # EVICTIONS group -> times
    resumed: list[float] = field(default_factory=list)
    denied: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        parts = [f"P{self.priority}" if self.priority is not None else None, self.category,
                 f"{self.mb:,.0f} MB" if self.mb is not None else None]
        inner = " ".join(p for p in parts if p)
        return f"{self.model} ({inner})" if inner else self.model


def _group(reason: str | None) -> str:
    for name, (reasons, *_rest) in EVICTIONS.items():
        if reason in reasons:
            return name
    return "other"


def trace_end(trace: Trace) -> float:
    """The last moment the trace covers: its last event, or the end of a load after it."""
    return max((e.t + (e.load_s or 0.0) if e.event == "load" else e.t for e in trace.events),
               default=0.0)


def timeline_lanes(trace: Trace) -> list[Lane]:
    """The lanes of :func:`vram_timeline`, in the order the models first appear.

    A load at ``t`` with ``load_s`` is ``loading`` over ``[t, t + load_s]`` and ``resident``
    from there to its eviction (or the trace's end); a ``wait`` is ``queued`` until the next
    ``load``, ``hit`` or ``denied`` of the same model and thread (or the trace's end)."""
    events = trace.events
    end = trace_end(trace)
    lanes: dict[str, Lane] = {}
    loaded_at: dict[str, float] = {}
    waiting: dict[tuple[str, str], float] = {}
    for e in events:
        if e.model is None:
            continue
        lane = lanes.setdefault(e.model, Lane(e.model))
        if e.event == "register":
            lane.priority, lane.category, lane.mb = e.priority, e.category, e.mb
        elif e.event == "load":
            lane.loading.append((e.t, e.load_s or 0.0))
            loaded_at[e.model] = e.t + (e.load_s or 0.0)
        elif e.event == "evict":
            if e.model in loaded_at:
                t0 = loaded_at.pop(e.model)
                lane.resident.append((t0, max(e.t - t0, 0.0)))
            lane.evicted.setdefault(_group(e.reason), []).append(e.t)
        elif e.event == "resume":
            lane.resumed.append(e.t)
        elif e.event == "wait":
            waiting[(e.model, e.thread)] = e.t
        if e.event in ("load", "hit", "denied") and (e.model, e.thread) in waiting:
            t0 = waiting.pop((e.model, e.thread))
            lane.queued.append((t0, e.t - t0))
        if e.event == "denied":
            lane.denied.append(e.t)
    for model, t0 in loaded_at.items():
        lanes[model].resident.append((t0, max(end - t0, 0.0)))
    for (model, _), t0 in waiting.items():
        lanes[model].queued.append((t0, end - t0))
    for lane in lanes.values():
        lane.queued.sort()
    return list(lanes.values())


def _merged(points: list[tuple[float, float]], within: float) -> list[tuple[float, float]]:
    """(t, MB) steps with those less than ``within`` seconds after the previous one folded
    into it (its MB the later one's): an eviction and the load it made room for, at one moment
    or microseconds apart, draw no dip."""
    out: list[tuple[float, float]] = []
    for t, mb in points:
        if out and t - out[-1][0] <= within:
            out[-1] = (out[-1][0], mb)
        else:
            out.append((t, mb))
    return out


def _panels(fig: "Figure | None", ax: "Axes | None", n_lanes: int):
    """(figure, lanes axes, memory axes): a new figure, two rows in ``fig``, or ``ax``'s slot
    split in two."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if fig is not None and ax is not None:
        raise InvalidInput("fig", "give fig or ax, not both", "fig and ax")
    ratios = (max(n_lanes, 1) * 0.45 + 0.5, 1.8)
    if ax is not None:
        fig = ax.figure
        grid = ax.get_subplotspec().subgridspec(2, 1, height_ratios=ratios, hspace=0.08)
        ax.remove()
    else:
        if fig is None:
            fig = Figure(figsize=(11.0, sum(ratios) + 1.1), layout="constrained")
            FigureCanvasAgg(fig)
        grid = fig.add_gridspec(2, 1, height_ratios=ratios)
    top = fig.add_subplot(grid[0])
    return fig, top, fig.add_subplot(grid[1], sharex=top)


def vram_timeline(trace: Any, capacity_mb: float | None = None, *, fig: "Figure | None" = None,
                  ax: "Axes | None" = None, workload: str | None = None,
                  title: str | None = None,
                  xlim: tuple[float, float] | None = None) -> "Figure":
    """Residency lanes and the memory panel of ``trace`` (see the module docstring).

    Args:
        trace: a :class:`~memlab.vram.trace.Trace`, or a
            :class:`~memlab.vram.simulate.SimResult` (its trace, capacity, workload and policy).
        capacity_mb: the gate's capacity (the line on the memory panel); a SimResult's own
            when None.
        fig: draw the two panels into this (empty) figure; ax: split these axes' slot into the
            two panels; neither: a new figure.
        workload: what ran, for the title (a SimResult's workload name when None).
        title: the whole title instead.
        xlim: show only this time window (seconds; a trace whose first event is not at 0, as
            a real clock's, is drawn from its first event).

    Returns the figure; its first two new axes are the lanes and the memory panel."""
    policy = None
    if not isinstance(trace, Trace):
        result = trace
        trace = result.trace
        capacity_mb = result.capacity_mb if capacity_mb is None else capacity_mb
        policy = result.policy
        if workload is None and result.workload is not None:
            workload = result.workload.name
    if capacity_mb is None or not capacity_mb > 0:
        raise InvalidInput("capacity_mb", "must be > 0 (the gate's capacity)", capacity_mb)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    first = min((e.t for e in trace.events), default=0.0)
    if first:              # a real clock's trace (monotonic seconds): from its first event
        trace = Trace(dataclasses.replace(e, t=e.t - first) for e in trace.events)
    lanes = timeline_lanes(trace)
    fig, top, mem = _panels(fig, ax, len(lanes))
    start, end = 0.0, max(trace_end(trace), 1e-9)
    handles: list[Any] = []
    used: set[str] = set()
    for y, lane in enumerate(lanes):
        if lane.queued:
            top.broken_barh(lane.queued, (y - 0.12, 0.24), facecolors="none",
                            edgecolors=STATES["queued"], hatch="////", lw=0.6)
            used.add("queued")
        if lane.loading:
            top.broken_barh(lane.loading, (y - 0.35, 0.7), facecolors=STATES["loading"])
            if any(d > (end - start) * 1e-3 for _, d in lane.loading):   # one that shows
                used.add("loading")
        if lane.resident:
            top.broken_barh(lane.resident, (y - 0.35, 0.7), facecolors=STATES["resident"],
                            alpha=0.8)
            used.add("resident")
    for name in ("resident", "loading", "queued"):
        if name in used:
            hatch = "////" if name == "queued" else None
            handles.append(Patch(facecolor="none" if hatch else STATES[name], hatch=hatch,
                                 edgecolor=STATES[name] if hatch else "none",
                                 label=f"{name}" + (" (a request waits)" if hatch else "")))
    groups = {**{k: v[1:] for k, v in EVICTIONS.items()}, "other": _OTHER[1:]}
    for key, (marker, colour, label) in groups.items():
        pts = [(t, y) for y, lane in enumerate(lanes) for t in lane.evicted.get(key, [])]
        if pts:
            top.scatter(*zip(*pts), marker=marker, color=colour, s=28, zorder=3, label=label)
    for key, (marker, colour, label) in _MARKS.items():
        pts = [(t, y) for y, lane in enumerate(lanes) for t in getattr(lane, key)]
        if pts:
            top.scatter(*zip(*pts), marker=marker, color=colour, zorder=4, label=label,
                        s=70 if key == "denied" else 30, edgecolors="white" if key == "denied"
                        else None, linewidths=0.5)
    top.set_yticks(range(len(lanes)), [lane.label for lane in lanes])
    top.set_ylim(len(lanes) - 0.5, -0.5)          # the first model on top
    top.tick_params(axis="x", labelbottom=False)
    top.grid(axis="x", alpha=0.3)
    if not any(lane.loading for lane in lanes):
        top.text(0.5, 0.5, "no model was loaded in this trace", transform=top.transAxes,
                 ha="center", va="center", color="0.35")
    # memory panel
    res = _merged(trace.residency(), (end - start) * 1e-4)
    ts = [start] + [t for t, _ in res] + [end]
    mbs = [0.0] + [mb for _, mb in res] + [res[-1][1] if res else 0.0]
    mem.fill_between(ts, mbs, step="post", color=STATES["resident"], alpha=0.25, lw=0)
    mem.step(ts, mbs, where="post", color=STATES["resident"], lw=1.2, label="resident MB")
    mem.axhline(capacity_mb, color="tab:red", ls="--", lw=1.2, label="capacity")
    peak = max(mbs)
    mem.set_ylim(0, max(capacity_mb, peak) * 1.15)
    mem.set_ylabel("resident MB")
    mem.set_xlabel("time (s)" if not first else "time (s from the trace's first event)")
    mem.grid(alpha=0.3)
    mem.set_xlim(*(xlim if xlim is not None else (start, end + (end - start) * 0.01)))
    handles += top.get_legend_handles_labels()[0] + mem.get_legend_handles_labels()[0]
    top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0),
               fontsize="small", frameon=False)
    if title is None:
        what = f"VRAM gate: {workload}" if workload else "VRAM gate"
        where = ", ".join(p for p in (f"policy {policy}" if policy else None,
                                      f"capacity {capacity_mb:,.0f} MB") if p)
        title = f"{what}: residency per model and resident MB ({where})"
    top.set_title(title)
    return fig


def vram_policies(table: "pd.DataFrame", *, fig: "Figure | None" = None,
                  workload: str | None = None,
                  metrics: dict[str, str] | Sequence[str] | None = None) -> "Figure":
    """The policies of :func:`memlab.vram.simulate.compare_policies` side by side: one panel
    per metric (``metrics``: names, or names -> axis labels; default :data:`POLICY_METRICS`),
    one bar per policy (the gate's ``priority`` shown as ``gate``), its value written on it.

    ``fig``: draw into this (empty) figure; ``workload``: named in the title."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    labels = dict(POLICY_METRICS) if metrics is None else (
        dict(metrics) if isinstance(metrics, dict) else {m: m.replace("_", " ") for m in metrics})
    if not labels:
        raise InvalidInput("metrics", "must name at least one metric", metrics)
    absent = [m for m in labels if m not in table.columns]
    if absent:
        raise InvalidInput("metrics", f"not columns of the table ({list(table.columns)})", absent)
    if fig is None:
        fig = Figure(figsize=(2.3 * len(labels) + 0.6, 3.2), layout="constrained")
        FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(labels), squeeze=False)[0]
    names = [_POLICY_NAMES.get(str(p), str(p)) for p in table.index]
    colours = [f"C{i}" for i in range(len(names))]
    for a, (metric, label) in zip(axes, labels.items()):
        values = table[metric].astype(float).to_numpy()
        bars = a.bar(names, values, color=colours)
        a.bar_label(bars, labels=[f"{v:g}" for v in values], fontsize="small", padding=2)
        a.set_title(label, fontsize="medium")
        a.set_ylim(0, max(float(values.max()), 1.0) * 1.2)
        a.tick_params(axis="x", labelrotation=0)
        a.grid(axis="y", alpha=0.3)
    head = f"{workload}: " if workload else ""
    fig.suptitle(f"{head}the VRAM gate against LRU and keep-alive (simulated)")
    return fig

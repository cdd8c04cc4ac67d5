"""The VRAM figures (memlab.vram.plots): the timeline's lanes worked out by hand from the
simulator's rules, and the figures' axes, series and labels (not pixels)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection, PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from memlab.config import VRAMConfig
from memlab.errors import InvalidInput
from memlab.vram import plot_timeline
from memlab.vram.plots import (POLICY_METRICS, timeline_lanes, vram_policies, vram_timeline)
from memlab.vram.simulate import SCRIPTED, Workload, compare_policies, simulate
from memlab.vram.trace import Trace


def _scripted():
    cfg = VRAMConfig(**SCRIPTED["config"])
    return simulate(Workload.from_dict(SCRIPTED["workload"], cfg), SCRIPTED["capacity_mb"], cfg)


def _contended():
    """Two 800 MB sync models on a 1000 MB device, sync_wait_s 5, idle reclaim after 20 s:

    - t=0  turn-0 loads a (load_s 1) and works until 0 + 1 + 9 = 10;
    - t=1  turn-1 asks for b: a is working (a sync request never evicts a working sync model),
           so it waits; at 1 + 5 = 6 it is denied;
    - t=8  turn-2 asks for b and waits; at 10 a is idle, evicted to make room (reason
           ``priority``), b loads (load_s 2) and works until 10 + 2 + 1 = 13;
    - idle reclaim: b at 13 + 20 = 33.
    """
    cfg = VRAMConfig(reserve_mb=0.0, sync_wait_s=5.0, idle_evict_seconds=20.0)
    wl = Workload.from_dict({
        "name": "contended",
        "models": {"a": {"mb": 800, "priority": 1, "category": "sync", "load_s": 1},
                   "b": {"mb": 800, "priority": 1, "category": "sync", "load_s": 2}},
        "events": [{"at": 0, "turn": [{"model": "a", "s": 9}]},
                   {"at": 1, "turn": [{"model": "b", "s": 1}]},
                   {"at": 8, "turn": [{"model": "b", "s": 1}]}]}, cfg)
    return simulate(wl, 1000, cfg)


def test_lanes_of_the_scripted_workload():
    """From the documented sequence (memlab.vram.simulate's docstring); no load_s: no loading
    time."""
    lanes = {lane.model: lane for lane in timeline_lanes(_scripted().trace)}
    assert list(lanes) == ["asr", "tts", "ocr", "indexer"]            # registration order
    assert lanes["asr"].label == "asr (P1 sync 1,000 MB)"
    assert lanes["ocr"].label == "ocr (P3 queue 1,500 MB)"
    assert lanes["indexer"].resident == [(0.0, 4.0)]
    assert lanes["indexer"].evicted == {"room": [4.0]}
    assert lanes["ocr"].resident == [(1.0, 5.0), (26.0, 25.0)]
    assert lanes["ocr"].evicted == {"preempt": [6.0], "idle": [51.0]}
    assert lanes["ocr"].queued == [(6.0, 20.0)]                       # waits from 6 to 26
    assert lanes["ocr"].resumed == [26.0]
    assert lanes["asr"].resident == [(4.0, 22.0)] and lanes["tts"].resident == [(6.0, 21.0)]
    assert lanes["asr"].evicted == {"idle": [26.0]} and lanes["tts"].evicted == {"idle": [27.0]}
    assert all(lane.loading == [(t, 0.0) for t, _ in lane.resident] for lane in lanes.values())
    assert not any(lane.denied for lane in lanes.values())


def test_lanes_show_loading_waiting_and_denied_requests():
    res = _contended()
    a, b = timeline_lanes(res.trace)
    assert (a.loading, a.resident, a.evicted) == ([(0.0, 1.0)], [(1.0, 9.0)], {"room": [10.0]})
    assert b.queued == [(1.0, 5.0), (8.0, 2.0)]      # turn-1: denied at 6; turn-2: loads at 10
    assert b.denied == [6.0]
    assert (b.loading, b.resident, b.evicted) == ([(10.0, 2.0)], [(12.0, 21.0)], {"idle": [33.0]})
    s = res.summary
    assert (s["turns_denied"], s["loads"], s["load_time_s"]) == (1, 2, 3.0)


def _axes(fig):
    lanes, mem = fig.axes[:2]
    return lanes, mem


def test_timeline_figure_axes_series_and_labels():
    res = _contended()
    fig = vram_timeline(res)
    assert isinstance(fig, Figure)
    lanes, mem = _axes(fig)
    assert [t.get_text() for t in lanes.get_yticklabels()] == ["a (P1 sync 800 MB)",
                                                               "b (P1 sync 800 MB)"]
    assert lanes.get_ylim() == (1.5, -0.5)                              # the first model on top
    assert lanes.get_title() == ("VRAM gate: contended: residency per model and resident MB "
                                 "(policy priority, capacity 1,000 MB)")
    # bars: per lane, queued (b only), loading, resident
    bars = [c for c in lanes.collections if isinstance(c, PolyCollection)]
    spans = [[tuple(np.round(p.get_extents().bounds, 6)) for p in c.get_paths()] for c in bars]
    assert len(bars) == 5                       # a: loading, resident; b: queued, loading, resident
    face = [[to_hex(f) for f in c.get_facecolor()] for c in bars]
    assert face == [[to_hex("tab:orange")], [to_hex("tab:blue")], [], [to_hex("tab:orange")],
                    [to_hex("tab:blue")]]
    assert bars[2].get_hatch() == "////"                                # queued: hatched, empty
    assert [len(s) for s in spans] == [1, 1, 2, 1, 1]
    assert spans[2][0][:3] == (1.0, 0.88, 5.0)       # b queued from 1 for 5 s, thin (0.24 high)
    marks = {c.get_label(): [tuple(o) for o in c.get_offsets()] for c in lanes.collections
             if isinstance(c, PathCollection)}
    assert marks == {"evicted to make room": [(10.0, 0.0)], "reclaimed idle": [(33.0, 1.0)],
                     "denied": [(6.0, 1.0)]}
    legend = [t.get_text() for t in lanes.get_legend().get_texts()]
    assert legend == ["resident", "loading", "queued (a request waits)", "evicted to make room",
                      "reclaimed idle", "denied", "resident MB", "capacity"]
    # the memory panel: resident MB as a step over the residency, the capacity line
    lines = {ln.get_label(): ln for ln in mem.get_lines()}
    assert list(lines["capacity"].get_ydata()) == [1000.0, 1000.0]
    step = lines["resident MB"]
    assert list(step.get_xdata()) == [0.0, 0.0, 10.0, 33.0, 33.0]
    assert list(step.get_ydata()) == [0.0, 800.0, 800.0, 0.0, 0.0]
    assert mem.get_ylabel() == "resident MB" and mem.get_xlabel() == "time (s)"
    assert mem.get_ylim()[1] == pytest.approx(1000.0 * 1.15)
    assert mem.get_xlim() == pytest.approx((0.0, 33.0 * 1.01))
    assert lanes.get_shared_x_axes().joined(lanes, mem)


def test_an_eviction_and_a_load_at_one_moment_draw_no_dip():
    """At t=4 the scripted workload evicts the indexer (1000 MB) and loads asr (1000 MB): the
    memory panel goes from 2500 to 2500, not through 1500."""
    lanes, mem = _axes(vram_timeline(_scripted()))
    legend = [t.get_text() for t in lanes.get_legend().get_texts()]
    assert legend == ["resident", "queued (a request waits)", "evicted to make room",
                      "preempted (checkpointed)", "reclaimed idle", "resumed", "resident MB",
                      "capacity"]                   # no load_s: no loading in the legend
    step = next(ln for ln in mem.get_lines() if ln.get_label() == "resident MB")
    pts = list(zip(step.get_xdata(), step.get_ydata()))
    assert (4.0, 1500.0) not in pts and (4.0, 2500.0) in pts
    assert [mb for t, mb in pts if t == 6.0] == [2000.0]    # ocr preempted, tts loaded


def test_timeline_into_a_figure_or_an_axes_slot_and_bad_input():
    res = _scripted()
    fig = Figure()
    FigureCanvasAgg(fig)
    assert vram_timeline(res, fig=fig, xlim=(0, 10)) is fig and len(fig.axes) == 2
    assert fig.axes[1].get_xlim() == (0.0, 10.0)
    grid = Figure()
    FigureCanvasAgg(grid)
    left, right = grid.subplots(1, 2)
    out = vram_timeline(res.trace, 3000.0, ax=right, workload="w1", title="mine")
    assert out is grid and right not in grid.axes and len(grid.axes) == 3
    assert left in grid.axes and grid.axes[1].get_title() == "mine"
    assert vram_timeline(res.trace, 3000.0, workload="w1").axes[0].get_title().startswith(
        "VRAM gate: w1: residency")
    with pytest.raises(InvalidInput) as err:
        vram_timeline(res, fig=fig, ax=left)
    assert err.value.field == "fig"
    with pytest.raises(InvalidInput) as err:
        vram_timeline(res.trace)
    assert err.value.field == "capacity_mb"


def test_a_trace_without_a_load_says_so():
    from memlab.vram import SimulatedDevice, VRAMGate

    gate = VRAMGate(SimulatedDevice(1000), VRAMConfig(reserve_mb=0.0))
    gate.register("embedder", priority=2, estimated_mb=300)
    lanes, mem = _axes(vram_timeline(gate.trace, 1000.0))
    assert [t.get_text() for t in lanes.texts] == ["no model was loaded in this trace"]
    assert [t.get_text() for t in lanes.get_yticklabels()] == ["embedder (P2 sync 300 MB)"]


def test_plot_timeline_is_a_deprecated_alias():
    res = _scripted()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plot_timeline(res.trace, res.capacity_mb)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "vram_timeline" in str(caught[0].message)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][0] == "asr (P1 sync 1,000 MB)"


def test_policies_figure_panels_bars_and_labels():
    cfg = VRAMConfig(reserve_mb=0.0, sync_wait_s=5.0, idle_evict_seconds=20.0)
    wl = _contended().workload
    table = compare_policies(wl, 1000, cfg)
    fig = vram_policies(table, workload="contended")
    assert len(fig.axes) == len(POLICY_METRICS)
    assert fig.get_suptitle() == "contended: the VRAM gate against LRU and keep-alive (simulated)"
    for ax, (metric, label) in zip(fig.axes, POLICY_METRICS.items()):
        assert ax.get_title() == label
        assert [t.get_text() for t in ax.get_xticklabels()] == ["gate", "lru", "keep-alive"]
        assert [p.get_height() for p in ax.patches] == list(table[metric].astype(float))
        assert [t.get_text() for t in ax.texts] == [f"{v:g}" for v in table[metric]]
    mine = vram_policies(table, metrics=["loads", "evictions"])
    assert [ax.get_title() for ax in mine.axes] == ["loads", "evictions"]
    with pytest.raises(InvalidInput) as err:
        vram_policies(table, metrics=["nope"])
    assert err.value.field == "metrics" and "nope" in str(err.value)
    with pytest.raises(InvalidInput):
        vram_policies(pd.DataFrame(), metrics={})


def test_a_real_clocks_trace_is_drawn_from_its_first_event():
    """Monotonic seconds (here from 5000): the lanes and the memory panel start at the first
    event, and an eviction and a load 50 us apart (a real clock reads twice) draw no dip."""
    trace = Trace()
    for t, event, model in [(5000.0, "register", "a"), (5000.0, "register", "b"),
                            (5000.0, "load", "a"), (5002.0, "evict", "a"),
                            (5002.00005, "load", "b"), (5005.0, "evict", "b")]:
        trace.record(event, t=t, model=model, priority=1, mb=600.0, category="sync",
                     reason="priority" if event == "evict" else None,
                     load_s=0.5 if event == "load" else None)
    lanes, mem = _axes(vram_timeline(trace, 1000.0))
    a, b = timeline_lanes(trace)
    assert (a.loading, a.resident) == ([(5000.0, 0.5)], [(5000.5, 1.5)])
    bars = [[tuple(np.round(p.get_extents().bounds, 6)) for p in c.get_paths()]
            for c in lanes.collections if isinstance(c, PolyCollection)]
    assert bars[0] == [(0.0, -0.35, 0.5, 0.7)] and bars[1] == [(0.5, -0.35, 1.5, 0.7)]
    marks = {c.get_label(): [tuple(o) for o in c.get_offsets()] for c in lanes.collections
             if isinstance(c, PathCollection)}
    assert marks == {"evicted to make room": [(2.0, 0.0), (5.0, 1.0)]}
    step = next(ln for ln in mem.get_lines() if ln.get_label() == "resident MB")
    assert list(step.get_xdata()) == [0.0, 0.0, 2.0, 5.0, 5.0]
    assert list(step.get_ydata()) == [0.0, 600.0, 600.0, 0.0, 0.0]
    assert mem.get_xlabel() == "time (s from the trace's first event)"

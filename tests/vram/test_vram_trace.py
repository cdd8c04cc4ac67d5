"""The trace: DataFrame, JSON Lines round trip, summary, timeline figure."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from memlab.config import VRAMConfig
from memlab.errors import DatasetError
from memlab.vram import SimulatedDevice, Trace, VRAMGate, plot_timeline
from memlab.vram.trace import FIELDS


def _trace():
    t = [0.0]
    gate = VRAMGate(SimulatedDevice(2000), VRAMConfig(reserve_mb=0.0), clock=lambda: t[0])
    gate.register("ocr", priority=3, estimated_mb=1500, category="queue",
                  on_checkpoint=lambda: "p3", on_resume=lambda s: None)
    gate.register("tts", priority=1, estimated_mb=1000)
    with gate.acquire("ocr"):
        t[0] = 2.0
        with gate.acquire("tts"):
            t[0] = 5.0
    gate.release("tts")
    t[0] = 6.0
    with gate.acquire("ocr"):
        t[0] = 9.0
    return gate


def test_frame_jsonl_round_trip_and_events(tmp_path):
    gate = _trace()
    df = gate.trace.to_frame()
    assert list(df.columns) == list(FIELDS)
    assert {"t", "event", "model", "priority", "mb", "free_mb", "thread", "reason"} <= set(FIELDS)
    assert list(df["event"]) == ["register", "register", "acquire", "load", "acquire",
                                 "checkpoint", "evict", "load", "evict", "acquire", "load",
                                 "resume"]
    assert list(df["free_mb"])[3] == 500.0 and list(df["free_mb"])[6] == 2000.0
    path = gate.trace.to_jsonl(tmp_path / "t.jsonl")
    back = Trace.from_jsonl(path)
    assert back.events == gate.trace.events
    path.write_text(path.read_text() + "{not json\n")
    with pytest.raises(DatasetError) as err:
        Trace.from_jsonl(path)
    assert err.value.line == 13


def test_summary_counts_and_residency():
    s = _trace().trace.summary(capacity_mb=2000)
    assert (s["loads"], s["hits"], s["evictions"], s["checkpoints"], s["resumes"]) == \
        (3, 0, 2, 1, 1)
    assert s["evictions_sync_preempt"] == 1 and s["evictions_release"] == 1
    assert s["peak_resident_mb"] == 1500 and s["time_over_capacity_s"] == 0.0
    # against 1200 MB: ocr's 1500 MB from t=0 to its eviction at t=2 is over; tts's 1000 MB
    # is not; ocr again from t=6 to the last event (t=6) adds nothing
    over = _trace().trace.summary(capacity_mb=1200)["time_over_capacity_s"]
    assert over == 2.0


def test_plot_timeline_returns_a_figure_with_the_capacity_line(tmp_path):
    gate = _trace()
    fig = plot_timeline(gate.trace, 2000.0)
    assert isinstance(fig, Figure)
    lines = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_label() == "capacity"]
    assert len(lines) == 1 and list(lines[0].get_ydata()) == [2000.0, 2000.0]
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == ["ocr", "tts"]
    fig.savefig(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000

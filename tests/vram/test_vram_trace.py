"""The trace: DataFrame, JSON Lines round trip, summary, load times (the figures:
test_vram_plots.py)."""

from __future__ import annotations

import pytest
from memlab.config import VRAMConfig
from memlab.errors import DatasetError
from memlab.vram import SimulatedDevice, Trace, VRAMGate
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


def test_a_load_records_when_it_began_and_how_long_it_took(tmp_path):
    """The gate's clock around ``load()``: the load event's t is the start, load_s the time the
    load took (here the loader moves the fake clock by 0.75 s); the summary adds the loads'
    times. A trace written before load_s existed reads with it None."""
    t = [10.0]

    def load():
        t[0] += 0.75
        return "model"

    gate = VRAMGate(SimulatedDevice(2000), VRAMConfig(reserve_mb=0.0), clock=lambda: t[0])
    gate.register("asr", priority=1, estimated_mb=500, load=load)
    with gate.acquire("asr") as handle:
        assert handle == "model"
    (ev,) = [e for e in gate.trace if e.event == "load"]
    assert (ev.t, ev.load_s) == (10.0, 0.75)
    assert gate.trace.summary()["load_time_s"] == 0.75
    old = tmp_path / "old.jsonl"
    old.write_text('{"t": 1, "event": "load", "model": "m", "priority": 1, "mb": 5, '
                   '"free_mb": 0, "thread": "x"}\n')
    assert Trace.from_jsonl(old).events[0].load_s is None
    assert Trace.from_jsonl(old).summary()["load_time_s"] == 0.0

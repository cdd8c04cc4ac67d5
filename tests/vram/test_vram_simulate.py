"""The simulator: the documented scripted sequence, the shipped workloads, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlab.cli import app
from memlab.config import VRAMConfig
from memlab.errors import DatasetError
from memlab.vram import Trace, simulate as simulate_module
from memlab.vram.simulate import (SCRIPTED, SCRIPTED_EVENTS, Workload, compare_policies,
                                  format_events, simulate)

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "experiments" / "workloads"


def _scripted(policy="priority"):
    cfg = VRAMConfig(**SCRIPTED["config"])
    wl = Workload.from_dict(SCRIPTED["workload"], cfg)
    return simulate(wl, SCRIPTED["capacity_mb"], cfg, policy=policy)


def test_scripted_workload_gives_the_documented_event_sequence():
    res = _scripted()
    assert res.trace.tuples("t", "event", "model", "reason") == SCRIPTED_EVENTS
    assert format_events(SCRIPTED_EVENTS) in simulate_module.__doc__
    assert [(e.model, e.thread) for e in res.trace.events if e.event == "acquire"] == [
        ("indexer", "job-0-indexer"), ("ocr", "job-1-ocr"), ("asr", "turn-0"), ("tts", "turn-0"),
        ("ocr", "job-1-ocr")]
    assert {e.thread for e in res.trace.events if e.event == "idle_reclaim"} == {"reaper"}
    s = res.summary
    assert (s["checkpoints"], s["resumes"], s["resumed_jobs"], s["jobs_done"],
            s["turns_done"]) == (1, 1, 1, 2, 1)
    assert s["time_over_capacity_s"] == 0.0 and s["sync_wait_max_s"] == 0.0
    # the OCR job's 10 s: 5 s before t=6, the 5 s left after its resume at 26
    assert s["makespan_s"] == 31.0


def test_scripted_workload_under_lru_evicts_the_users_model_not_the_job():
    """LRU never preempts the working OCR job: the turn's tts evicts the idle (CRITICAL) asr,
    the least recently used, and nothing is checkpointed; no idle reclaim."""
    res = _scripted("lru")
    assert [e for e in res.trace.tuples() if e[1] in ("evict", "checkpoint", "wait")] == [
        (4.0, "evict", "indexer", "lru"), (6.0, "evict", "asr", "lru")]
    assert res.summary["time_over_capacity_s"] == 0.0
    keep = _scripted("keepalive")     # vram.keepalive_s = 300: reclaimed 300 s after last use
    assert [e for e in keep.trace.tuples() if e[1] == "evict"][2:] == [
        (307.0, "evict", "tts", "idle"), (311.0, "evict", "ocr", "idle")]


@pytest.mark.parametrize("name", ["chat_with_background_jobs", "tight_capacity"])
def test_shipped_workloads_never_exceed_capacity_and_the_gate_serves_every_turn(name):
    cfg = VRAMConfig()
    wl = Workload.from_yaml(WORKLOADS / f"{name}.yaml", cfg)
    table = compare_policies(wl, wl.capacity_mb, cfg)
    assert list(table.index) == ["priority", "lru", "keepalive"]
    assert (table["time_over_capacity_s"] == 0).all()
    gate = table.loc["priority"]
    assert gate["turns_denied"] == 0 and gate["sync_wait_max_s"] == 0
    assert gate["checkpoints"] == gate["resumes"]


def test_tight_capacity_measures_the_gates_benefit():
    cfg = VRAMConfig()
    wl = Workload.from_yaml(WORKLOADS / "tight_capacity.yaml", cfg)
    table = compare_policies(wl, wl.capacity_mb, cfg)
    gate, lru = table.loc["priority"], table.loc["lru"]
    assert gate["checkpoints"] > 0 and lru["checkpoints"] == 0
    assert lru["turns_denied"] > 0 and lru["sync_wait_p95_s"] > gate["sync_wait_p95_s"]


@pytest.mark.parametrize("data, field", [
    ({"models": {"a": {"mb": 1, "priority": 9, "category": "sync"}}, "events": []},
     "models.a.priority"),
    ({"models": {"a": {"mb": 1, "priority": 1, "category": "sync"}},
      "events": [{"job": "a", "s": 1}]}, "events[0].job"),
    ({"models": {"a": {"mb": 1, "priority": 1, "category": "queue"}},
      "events": [{"turn": [{"model": "a", "s": 1}]}]}, "events[0].turn[0]"),
    ({"models": {"a": {"mb": 1, "priority": 1, "category": "sync"}},
      "events": [{"at": -1, "turn": [{"model": "a", "s": 1}]}]}, "events[0].at"),
    ({"models": {"a": {"mb": 1, "priority": 1, "category": "sync"}},
      "events": [{"count": 2, "turn": [{"model": "a", "s": 1}]}]}, "events[0]"),
])
def test_bad_workloads_are_named(data, field):
    with pytest.raises(DatasetError) as err:
        Workload.from_dict(data, VRAMConfig(), source="w.yaml")
    assert err.value.field == field and err.value.file == "w.yaml"


def test_cli_simulate_compare_policy_writes_json_trace_and_plot(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["vram", "simulate", "--workload",
                              str(WORKLOADS / "tight_capacity.yaml"), "--capacity-mb", "6144",
                              "--compare-policy", "--keepalive-s", "120",
                              "--json", str(tmp_path / "s.json"),
                              "--trace", str(tmp_path / "t.jsonl"),
                              "--plot", str(tmp_path / "t.png")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    header = res.stdout.splitlines()[1].split()
    assert header == ["priority", "lru", "keepalive"]
    assert "time_over_capacity_s" in res.stdout and "sync_wait_p95_s" in res.stdout
    data = json.loads((tmp_path / "s.json").read_text())
    assert set(data["policies"]) == {"priority", "lru", "keepalive"}
    assert data["gate_capacity_mb"] == 6144 - VRAMConfig().reserve_mb
    trace = Trace.from_jsonl(tmp_path / "t.jsonl")
    assert trace.summary()["loads"] == data["summary"]["loads"]
    assert (tmp_path / "t.png").stat().st_size > 1000
    bad = runner.invoke(app, ["vram", "simulate", "--workload", str(tmp_path / "nope.yaml"),
                              "--capacity-mb", "1000"])
    assert bad.exit_code == 2 and "nope.yaml" in bad.output


def test_load_time_counts_in_the_latency_of_a_sync_step_and_holds_the_model():
    cfg = VRAMConfig(reserve_mb=0.0)
    wl = Workload.from_dict({"models": {"asr": {"mb": 500, "priority": 1, "category": "sync",
                                                "load_s": 2.0}},
                             "events": [{"at": 0, "every": 10, "count": 2,
                                         "turn": [{"model": "asr", "s": 1}]}]}, cfg)
    s = simulate(wl, 1000, cfg).summary
    # first turn loads (latency 2 s, done at 3), the second hits (latency 0, done at 11)
    assert (s["loads"], s["hits"], s["load_time_s"], s["makespan_s"]) == (1, 1, 2.0, 11.0)
    assert (s["sync_latency_p50_s"], s["sync_wait_max_s"]) == (1.0, 0.0)


@pytest.mark.parametrize("name", ["chat_with_background_jobs", "tight_capacity"])
def test_a_workload_round_trips_through_to_dict_and_its_result_knows_what_ran(name):
    cfg = VRAMConfig()
    wl = Workload.from_yaml(WORKLOADS / f"{name}.yaml", cfg)
    data = wl.to_dict()
    assert Workload.from_dict(data, cfg) == wl
    assert len(data["events"]) == len(wl.turns) + len(wl.jobs)      # repeats written out
    res = simulate(wl, wl.capacity_mb, cfg, policy="keepalive")
    assert (res.workload, res.device_mb, res.config) == (wl, wl.capacity_mb, cfg)
    assert res.keepalive_s == cfg.keepalive_s and simulate(wl, 9000, cfg).keepalive_s is None
    loads = [e for e in res.trace if e.event == "load"]
    load_s = {m.name: m.load_s for m in wl.models}
    assert [e.load_s for e in loads] == [load_s[e.model] for e in loads]   # each load's time
    assert res.summary["load_time_s"] == pytest.approx(sum(e.load_s for e in loads))
    frame = res.to_frame()
    assert len(frame) == len(res.trace) and frame["load_s"].notna().sum() == len(loads)


def test_a_workload_file_with_a_key_twice_names_the_line(tmp_path):
    p = tmp_path / "twice.yaml"
    p.write_text("models:\n  asr: {mb: 500, priority: 1, category: sync}\n"
                 "  asr: {mb: 900, priority: 1, category: sync}\nevents: []\n", encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        Workload.from_yaml(p, VRAMConfig())
    assert err.value.file == f"{p}:3:3" and "duplicate key 'asr'" in err.value.rule

"""A simulation logged to MLflow (``memlab vram simulate --track`` and track_simulation): params,
summary metrics, trace, timeline, workload; a rerun adds no run. MLflow on a SQLite file in
tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memlab.bench.vramtrack import run_key, simulation_report, track_simulation
from memlab.cli import app
from memlab.config import VRAMConfig
from memlab.errors import InvalidInput
from memlab.vram.simulate import SCRIPTED, Workload, compare_policies, simulate
from memlab.vram.trace import Trace

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "experiments" / "workloads"


def _scripted(policy: str = "priority"):
    cfg = VRAMConfig(**SCRIPTED["config"])
    return simulate(Workload.from_dict(SCRIPTED["workload"], cfg), SCRIPTED["capacity_mb"], cfg,
                    policy=policy)


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _runs(uri: str, experiment: str = "memlab-vram"):
    client = _client(uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id])


def test_a_tracked_simulation_carries_params_metrics_trace_timeline_and_workload(tmp_path):
    res = _scripted()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = track_simulation(res, tracking_uri=uri)
    assert out["logged"] is True and out["tracking_uri"] == uri
    assert out["experiment"] == "memlab-vram"
    client = _client(uri)
    run = client.get_run(out["run_id"])
    assert run.info.run_name == "vram scripted: priority" and run.info.status == "FINISHED"
    p = run.data.params
    assert (p["workload"], p["policy"], p["device_mb"], p["gate_capacity_mb"]) == \
        ("scripted", "priority", "3000.0", "3000.0")
    assert (p["workload.turns"], p["workload.jobs"]) == ("1", "2")
    assert p["vram.idle_evict_seconds"] == "20.0" and p["vram.reserve_mb"] == "0.0"
    assert "keepalive_s" not in p
    assert run.data.metrics == {k: float(v) for k, v in res.summary.items()}
    assert run.data.metrics["makespan_s"] == 31.0 and run.data.metrics["checkpoints"] == 1
    tags = run.data.tags
    assert (tags["memlab.kind"], tags["memlab.workload"]) == ("vram-simulation", "scripted")
    assert tags["memlab.run_key"] == run_key(res) and tags["vram.simulated"] == "true"
    assert tags["vram.note"].startswith("5 load(s) (0.00 s loading), 0 hit(s), 5 eviction(s)")
    names = {a.path for a in client.list_artifacts(out["run_id"])} | \
        {a.path for a in client.list_artifacts(out["run_id"], "vram")}
    assert names == {"vram", "workload.yaml", "summary.json", "vram/trace.jsonl",
                     "vram/timeline.png", "vram/summary.txt"}
    dl = Path(client.download_artifacts(out["run_id"], "", str(tmp_path / "dl")))
    assert Trace.from_jsonl(dl / "vram" / "trace.jsonl").events == res.trace.events
    assert (dl / "vram" / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (dl / "vram" / "summary.txt").read_text().splitlines()[0] == tags["vram.note"]
    again = Workload.from_dict(yaml.safe_load((dl / "workload.yaml").read_text()), res.config)
    assert again == res.workload
    assert simulate(again, 3000.0, res.config).summary == res.summary   # it reruns the run


def test_a_rerun_adds_no_run_and_a_change_does(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = track_simulation(_scripted(), tracking_uri=uri)
    second = track_simulation(_scripted(), tracking_uri=uri)
    assert second == {**first, "logged": False}
    assert len(_runs(uri)) == 1
    lru = track_simulation(_scripted("lru"), tracking_uri=uri)
    assert lru["logged"] and lru["run_id"] != first["run_id"]
    cfg = VRAMConfig(**{**SCRIPTED["config"], "idle_evict_seconds": 30.0})
    other = simulate(Workload.from_dict(SCRIPTED["workload"], cfg), 3000.0, cfg)
    assert run_key(other) != run_key(_scripted())
    assert track_simulation(other, tracking_uri=uri)["logged"]
    assert len(_runs(uri)) == 3
    assert len(_runs(uri, "elsewhere")) == 0
    assert track_simulation(_scripted(), tracking_uri=uri, experiment="elsewhere")["logged"]


def test_compared_policies_are_logged_beside_the_run(tmp_path):
    cfg = VRAMConfig()
    wl = Workload.from_yaml(WORKLOADS / "tight_capacity.yaml", cfg)
    res = simulate(wl, wl.capacity_mb, cfg)
    table = compare_policies(wl, wl.capacity_mb, cfg)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = track_simulation(res, policies=table, tracking_uri=uri)
    client = _client(uri)
    m = client.get_run(out["run_id"]).data.metrics
    assert m["lru/turns_denied"] == table.loc["lru", "turns_denied"] > 0
    assert m["priority/turns_denied"] == m["turns_denied"] == 0
    assert m["keepalive/loads"] == table.loc["keepalive", "loads"]
    names = {a.path for a in client.list_artifacts(out["run_id"], "vram")}
    assert "vram/policies.png" in names
    assert "policies.csv" in {a.path for a in client.list_artifacts(out["run_id"])}
    assert run_key(res, compared=True) != run_key(res)
    report = simulation_report(res, table)
    assert set(report["policies"]) == {"priority", "lru", "keepalive"}
    assert report["gate_capacity_mb"] == wl.capacity_mb - cfg.reserve_mb


def test_bad_input_is_refused_before_anything_is_logged(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with pytest.raises(InvalidInput) as err:
        track_simulation(object(), tracking_uri=uri)
    assert err.value.field == "result"
    with pytest.raises(InvalidInput) as err:
        track_simulation(_scripted(), tracking_uri=str(tmp_path / "mlruns"))
    assert err.value.field == "tracking_uri"
    assert not (tmp_path / "mlflow.db").exists()


def test_cli_simulate_track(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    args = ["vram", "simulate", "--workload", str(WORKLOADS / "chat_with_background_jobs.yaml"),
            "--compare-policy", "--track", "--experiment", "sim"]
    res = runner.invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"          # the default: here, as memlab bench
    (run,) = _runs(uri, "sim")
    assert res.stdout.splitlines()[-1] == (f"MLflow: run {run.info.run_id} in experiment 'sim' "
                                           f"({uri})")
    assert run.data.params["workload"] == "chat_with_background_jobs"
    assert run.data.metrics["jobs_denied"] == 4 and run.data.metrics["lru/jobs_denied"] == 0
    assert runner.invoke(app, args).exit_code == 0
    assert len(_runs(uri, "sim")) == 1                                # the rerun adds none
    bad = runner.invoke(app, ["vram", "simulate", "--workload",
                              str(WORKLOADS / "tight_capacity.yaml"), "--track",
                              "--tracking-uri", "./mlruns"])
    assert bad.exit_code == 2 and "tracking_uri" in bad.output
    assert "workload tight_capacity" not in bad.output                  # refused before it ran

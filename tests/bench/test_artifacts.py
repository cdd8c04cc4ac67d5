"""Finished work is never lost (issue 18, item 5): ``memlab bench`` prints the table and writes the
JSON report before its optional artifacts; a preset name with '/' (``tuned/locomo``) gets a safe
folder; an artifact that cannot be written is named on stderr and counted in the JSON, exit 0.
Through the real CLI (typer's CliRunner) on the tiny dataset of tests/conftest.py, with the
hashing embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlab.bench.artifacts import RUN_ENTRIES, preset_folders, write_artifacts
from memlab.bench.run import resolve_preset, run_bench
from memlab.cli import app
from memlab.config import load_config

HASHING = ["--set", "embedding.backend=hashing", "--set", "recall.floor_mode=absolute",
           "--set", "recall.relevance_floor=0.0"]
PRESET_FILES = {"config.yaml", "per_query.csv", "aggregate.csv", "recall_curve.png",
                "per_category.png"}


@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_compare_with_a_tuned_preset_end_to_end(cli, tiny_bench_folder, cache_dir, tmp_path):
    """The run of issue 18 that lost 591 s of work: 'tuned/locomo' as a folder name."""
    from mlflow.tracking import MlflowClient

    out_json, results = tmp_path / "out.json", tmp_path / "results"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = cli("bench", "--dataset", tiny_bench_folder, "--compare", "reverie,tuned/locomo",
              *HASHING, "--cache-dir", cache_dir, "--tracking-uri", uri, "--experiment", "tuned",
              "--out-dir", results, "--json", out_json, "-q")
    assert res.exit_code == 0, res.output
    assert "tuned/locomo" in res.stdout and res.stderr == ""
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["presets"] == ["reverie", "tuned/locomo"]
    assert report["artifact_errors"] == []
    assert report["artifact_folders"] == {"reverie": "reverie", "tuned/locomo": "tuned-locomo"}
    run_dir = Path(report["artifacts"])
    assert run_dir.parent == results
    assert {p.name for p in run_dir.iterdir()} >= {"reverie", "tuned-locomo", "report.json",
                                                   "recall_curve.png", "per_category.png"}
    for folder in ("reverie", "tuned-locomo"):
        assert {p.name for p in (run_dir / folder).iterdir()} == PRESET_FILES
    want = load_config(resolve_preset("tuned/locomo")[1], overrides={
        "embedding.backend": "hashing", "recall.floor_mode": "absolute",
        "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)})
    assert load_config(run_dir / "tuned-locomo" / "config.yaml") == want
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(report["mlflow_runs"]["tuned/locomo"]["run_id"])
    assert run.data.tags["memlab.preset"] == "tuned/locomo"
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == PRESET_FILES | {"vram"}


def test_an_unwritable_results_folder_is_named_and_counted(cli, tiny_bench_folder, cache_dir,
                                                          tmp_path):
    """--out-dir is a file: no artifact can be written; the table and the JSON still come out,
    exit 0."""
    blocker = tmp_path / "results"
    blocker.write_text("not a folder\n", encoding="utf-8")
    out_json = tmp_path / "out.json"
    res = cli("bench", "--dataset", tiny_bench_folder, "--compare", "reverie,tuned/locomo",
              *HASHING, "--cache-dir", cache_dir, "--no-track", "--out-dir", blocker,
              "--json", out_json, "-q")
    assert res.exit_code == 0, res.output
    assert "recall@10" in res.stdout                                    # the table
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["metrics"]["reverie"]["recall@1"] == pytest.approx(0.5)   # tests/conftest.py
    (err,) = report["artifact_errors"]
    assert err["path"] == report["artifacts"] and "NotADirectoryError" in err["error"]
    lines = res.stderr.strip().splitlines()
    assert lines == [f"artifact not written: {err['path']}: {err['error']}"]


def test_a_report_that_cannot_be_written_exits_1_after_the_artifacts(cli, tiny_bench_folder,
                                                                     cache_dir, tmp_path):
    taken = tmp_path / "taken.json"
    taken.mkdir()                                             # a folder where the file would go
    res = cli("bench", "--dataset", tiny_bench_folder, *HASHING, "--cache-dir", cache_dir,
              "--no-track", "--out-dir", tmp_path / "results", "--json", taken, "-q")
    assert res.exit_code == 1
    assert res.stderr.startswith(f"report not written: {taken}: IsADirectoryError")
    (run_dir,) = (tmp_path / "results").iterdir()
    report = json.loads((run_dir / "report.json").read_text(encoding="utf-8"))
    assert report["metrics"]["recall@1"] == pytest.approx(0.5)
    assert list(taken.iterdir()) == []                        # no temporary left behind


def test_one_file_in_the_way_costs_only_itself(tiny_bench_folder, hashing_cfg, tmp_path):
    out = run_bench(dataset=str(tiny_bench_folder), presets=[
        ("a/b", hashing_cfg), ("a-b", hashing_cfg.replace(**{"fusion.scorer": "rrf"}))],
        progress=False)
    run_dir = tmp_path / "run"
    (run_dir / "a-b" / "per_query.csv").mkdir(parents=True)   # a folder where the CSV goes
    arts = write_artifacts(out, run_dir)
    assert arts.folders == {"a/b": run_dir / "a-b", "a-b": run_dir / "a-b-2"}
    (err,) = arts.errors
    assert err["path"] == str(run_dir / "a-b" / "per_query.csv")
    assert err["error"].startswith("IsADirectoryError")
    assert {p.name for p in (run_dir / "a-b").iterdir()} == PRESET_FILES
    assert {p.name for p in (run_dir / "a-b-2").iterdir()} == PRESET_FILES
    assert (run_dir / "report.json").is_file() and (run_dir / "recall_curve.png").is_file()


def test_preset_folders_keep_clear_of_the_run_folders_entries():
    names = ["vram", "REPORT.JSON", "tuned/locomo", "记忆/调优"]
    got = preset_folders(names)
    assert got == {"vram": "vram-2", "REPORT.JSON": "REPORT.JSON-2",
                   "tuned/locomo": "tuned-locomo", "记忆/调优": "记忆-调优"}
    assert not {g.casefold() for g in got.values()} & {e.casefold() for e in RUN_ENTRIES}


def test_a_bad_tracking_uri_stops_before_the_run(cli, tiny_bench_folder, cache_dir, tmp_path):
    res = cli("bench", "--dataset", tiny_bench_folder, *HASHING, "--cache-dir", cache_dir,
              "--tracking-uri", "./mlruns", "--out-dir", tmp_path / "results", "-q")
    assert res.exit_code == 2 and "tracking_uri" in res.stderr and "./mlruns" in res.stderr
    assert res.stdout == "" and not (tmp_path / "results").exists() and not cache_dir.exists()

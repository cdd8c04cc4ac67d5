"""A sweep in MLflow: one parent run (settings, best and default values, the trial table and the
plots), the best trials as child runs with their full flat configuration; to a SQLite store and
to a real ``mlflow server`` started here on 127.0.0.1."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from memlab.tune import plots
from memlab.tune.space import Space
from memlab.tune.sweep import sweep
from memlab.tune.track import track_sweep


def mlflow_binary() -> Path | None:
    """The ``mlflow`` command of the environment running the tests (beside ``sys.executable``, as
    a venv has it; else on PATH): mlflow is a core dependency, so it is there."""
    here = Path(sys.executable).parent / ("mlflow.exe" if os.name == "nt" else "mlflow")
    found = here if here.is_file() else shutil.which("mlflow")
    return Path(found) if found else None


SPACE = Space.from_dict({"params": {
    "fusion.relevance": {"float": [0.0, 1.0]},
    "selection.char_budget": {"int": [10, 400], "log": True}}}, name="track")


@pytest.fixture
def result(tiny_bench_folder, cache_dir, tmp_path):
    hashing = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
               "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)}
    return sweep(dataset=str(tiny_bench_folder), preset="reverie", space=SPACE, trials=9,
                 sampler="random", overrides=hashing, out_dir=tmp_path / "s", progress=False)


def check_runs(result, uri: str, ids: dict, top: int) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(ids["parent"])
    assert parent.data.params["space"] == "track" and parent.data.params["preset"] == "reverie"
    assert parent.data.metrics["best_ndcg_at_10"] == pytest.approx(
        result.best["values"]["ndcg@10"])
    assert parent.data.metrics["default_ndcg_at_10"] == pytest.approx(result.default["ndcg@10"])
    assert parent.data.metrics["trials_finished"] == 9
    arts = {a.path for a in client.list_artifacts(ids["parent"])}
    assert {"trials.csv", "best_config.yaml", "history.png", "importance.png",
            "best_config.png", "sweep.json"} <= arts
    exp = parent.info.experiment_id
    children = client.search_runs([exp], filter_string=f"tags.mlflow.parentRunId = "
                                  f"'{ids['parent']}'")
    assert len(children) == top == len(ids["children"])
    want = result.top(top)
    by_trial = {int(r.data.tags["memlab.trial"]): r for r in children}
    assert set(by_trial) == set(int(n) for n in want["number"])
    for n, run in by_trial.items():
        cfg = result.base.replace(**result.space.apply(result.study.trials[n].params))
        flat = cfg.to_flat()
        assert len(run.data.params) == len(flat)                  # the full flat config
        assert run.data.params["embedding.backend"] == "hashing"
        assert float(run.data.params["fusion.relevance"]) == pytest.approx(
            flat["fusion.relevance"])
        assert run.data.metrics["ndcg_at_10"] == pytest.approx(want.loc[n, "ndcg@10"])


def test_sweep_logged_to_sqlite(result, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = track_sweep(result, tracking_uri=uri, top=3)
    check_runs(result, uri, ids, 3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_sweep_logged_to_a_real_mlflow_server(result, tmp_path):
    mlflow = mlflow_binary()
    assert mlflow is not None, f"no mlflow command beside {sys.executable} nor on PATH"
    port = free_port()
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    server = subprocess.Popen(
        [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'srv.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts"), "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        ready = False
        for _ in range(240):   # bounded: each try waits up to 0.5 s on the server process
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    ready = r.status == 200
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if ready or server.poll() is not None:
                break
            try:
                server.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        assert ready, f"mlflow server did not start: {server.stderr.read().decode()[-2000:]}"
        ids = track_sweep(result, tracking_uri=url, top=2)
        assert ids["tracking_uri"] == url
        check_runs(result, url, ids, 2)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_importance_says_why_when_too_few_trials(result, caplog):
    import pandas as pd

    few = result.trials.head(plots.MIN_TRIALS_IMPORTANCE - 1)
    small = type(result)(**{**result.__dict__, "trials": few})
    with caplog.at_level(logging.WARNING, logger="memlab.tune.plots"):
        fig = plots.importance(small)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any(f"needs at least {plots.MIN_TRIALS_IMPORTANCE}" in t for t in texts)
    assert "parameter importance" in caplog.text
    fig = plots.importance(result)            # 9 trials: bars, one per key, summing to 1
    widths = [p.get_width() for p in fig.axes[0].patches]
    assert len(widths) == 2 and sum(widths) == pytest.approx(1.0)
    assert isinstance(result.trials, pd.DataFrame)


def test_cli_sweep_logs_to_the_tracking_uri(tiny_bench_folder, cache_dir, tmp_path):
    import json

    from mlflow.tracking import MlflowClient
    from typer.testing import CliRunner

    from memlab.cli import app

    space = tmp_path / "s.yaml"
    space.write_text("params:\n  fusion.relevance: {float: [0.0, 1.0]}\n", encoding="utf-8")
    uri = f"sqlite:///{tmp_path / 'cli.db'}"
    sets = ["--set", "embedding.backend=hashing", "--set", "recall.floor_mode=absolute",
            "--set", "recall.relevance_floor=0.0", "--cache-dir", str(cache_dir)]
    out = CliRunner().invoke(app, ["sweep", "-d", str(tiny_bench_folder), "--space", str(space),
                                   "--preset", "reverie", "--trials", "3", "--sampler", "random",
                                   "-q", "--tracking-uri", uri, "--top", "2", "--experiment",
                                   "cli-sweep", "--out-dir", str(tmp_path / "o"), "--json",
                                   str(tmp_path / "s.json"), *sets])
    assert out.exit_code == 0, out.output
    rep = json.loads((tmp_path / "s.json").read_text())
    client = MlflowClient(tracking_uri=uri)
    parent = client.get_run(rep["mlflow"]["parent"])
    assert client.get_experiment(parent.info.experiment_id).name == "cli-sweep"
    kids = [client.get_run(r) for r in rep["mlflow"]["children"].values()]
    assert len(kids) == 2
    assert all(k.data.tags["mlflow.parentRunId"] == parent.info.run_id for k in kids)

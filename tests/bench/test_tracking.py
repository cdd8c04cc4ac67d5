"""memlab.bench.tracking: names, batching, URIs, and a real run in a temporary SQLite store."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from memlab.bench import tracking
from memlab.bench.tracking import (
    dataset_tags,
    git_commit,
    log_run,
    memlab_version,
    metrics_from_aggregate,
    mlflow_key,
    plan_batches,
    provenance_tags,
    resolve_tracking_uri,
)
from memlab.errors import InvalidInput

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402


def _no_fsync(dbapi_connection, _record) -> None:
    dbapi_connection.execute("PRAGMA synchronous=OFF")


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated database per module; tests copy it.

    MLflow's ~100 migrations commit one by one; on a disk each commit waits for fsync (4-15 s
    in all). The template is a throwaway, so it is built with ``synchronous=OFF`` (CPU-bound,
    ~1-2 s); the copies the tests log into are ordinary databases.
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    db = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    event.listen(Engine, "connect", _no_fsync)
    try:
        MlflowClient(tracking_uri=f"sqlite:///{db}").search_experiments()
    finally:
        event.remove(Engine, "connect", _no_fsync)
    return db


@pytest.fixture
def uri(template_db: Path, tmp_path: Path) -> str:
    shutil.copy(template_db, tmp_path / "mlflow.db")
    return resolve_tracking_uri(None, workdir=tmp_path)


def test_limits_agree_with_mlflow() -> None:
    from mlflow.utils import validation as v

    assert tracking.MAX_PARAMS_TAGS_PER_BATCH == v.MAX_PARAMS_TAGS_PER_BATCH
    assert tracking.MAX_ENTITIES_PER_BATCH == v.MAX_ENTITIES_PER_BATCH
    assert tracking.MAX_PARAM_VALUE_LENGTH == v.MAX_PARAM_VAL_LENGTH
    assert tracking.MAX_TAG_VALUE_LENGTH == v.MAX_TAG_VAL_LENGTH
    assert tracking.MAX_KEY_LENGTH == v.MAX_ENTITY_KEY_LENGTH


@pytest.mark.parametrize(("name", "key"), [
    ("recall@10", "recall_at_10"),
    ("recall_any@5/multi-hop", "recall_any_at_5/multi-hop"),
    ("ndcg@10/cat:3 (temporal)", "ndcg_at_10/cat_3 _temporal_"),
    ("召回@10/时间", "召回_at_10/时间"),  # word characters are Unicode-aware, as in MLflow
    ("fusion.relevance", "fusion.relevance"),
])
def test_mlflow_key_mapping(name: str, key: str) -> None:
    assert mlflow_key(name) == key
    from mlflow.utils.validation import validate_param_and_metric_name

    assert validate_param_and_metric_name(key)


@pytest.mark.parametrize("name", ["a//b", "./a", "a/", "../a", "", "x" * 251])
def test_mlflow_key_refuses_path_like_or_long_names(name: str) -> None:
    with pytest.raises(InvalidInput):
        mlflow_key(name)


def test_plan_batches_uses_fewest_requests() -> None:
    params = [(f"p{i}", "v") for i in range(250)]
    tags = [(f"t{i}", "v") for i in range(5)]
    metrics = [(f"m{i}", 0.5) for i in range(1900)]
    batches = plan_batches(params=params, tags=tags, metrics=metrics)
    # lower bound: max(ceil(250/100), ceil(5/100), ceil(2155/1000)) = 3
    assert len(batches) == 3
    assert all(len(b.params) <= 100 and len(b.tags) <= 100 and len(b) <= 1000 for b in batches)
    assert [p for b in batches for p in b.params] == params
    assert [m for b in batches for m in b.metrics] == metrics
    assert [t for b in batches for t in b.tags] == tags
    # a typical run: 150 params -> 2 requests; 90 params + 60 metrics + 5 tags -> 1
    assert len(plan_batches(params=params[:150], tags=tags, metrics=metrics[:60])) == 2
    assert len(plan_batches(params=params[:90], tags=tags, metrics=metrics[:60])) == 1


def test_plan_batches_respects_byte_budget() -> None:
    params = [(f"p{i}", "x" * 6000) for i in range(100)]  # ~606 kB
    batches = plan_batches(params=params, tags=[], metrics=[], max_bytes=300_000)
    assert len(batches) == 3  # 49 params of 6,066 estimated bytes fit in 300 kB
    assert [len(b.params) for b in batches] == [49, 49, 2]


def test_resolve_tracking_uri(tmp_path: Path) -> None:
    work = tmp_path.resolve()
    assert resolve_tracking_uri(None, workdir=tmp_path) == f"sqlite:///{work}/mlflow.db"
    assert resolve_tracking_uri("sqlite:///runs/x.db", workdir=tmp_path) == \
        f"sqlite:///{work}/runs/x.db"
    assert resolve_tracking_uri("sqlite:////abs/x.db", workdir=tmp_path) == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("http://mlflow:5000", workdir=tmp_path) == "http://mlflow:5000"
    assert resolve_tracking_uri("postgresql://u@h/db", workdir=tmp_path) == "postgresql://u@h/db"
    for bad in ("./mlruns", "file:///tmp/mlruns", "sqlite://x.db"):
        with pytest.raises(InvalidInput, match="tracking_uri"):
            resolve_tracking_uri(bad, workdir=tmp_path)


def test_metrics_from_aggregate() -> None:
    agg = pd.DataFrame({"recall@10": [0.5, 0.25], "n": [4, 2]},
                       index=pd.Index(["all", "temporal"], name="category"))
    assert metrics_from_aggregate(agg) == {"recall@10": 0.5, "n": 4.0,
                                           "recall@10/temporal": 0.25, "n/temporal": 2.0}


def test_log_run_round_trip(uri: str, tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    (tmp_path / "config.yaml").write_text("fusion:\n  relevance: 0.62\n", encoding="utf-8")
    (tmp_path / "per_query.csv").write_text("query_id,recall@10\nq1,1.0\n", encoding="utf-8")
    (tmp_path / "recall.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    params: dict[str, object] = {f"section{i // 10}.key{i}": i / 4 for i in range(147)}
    params |= {"text.template": "{speaker}: {text}", "bench.ks": [1, 5, 10],
               "text.stopwords": "w" * 7000}
    metrics = {f"recall@{k}/cat{c}": (k + c) / 100 for k in (1, 3, 5, 10, 20) for c in range(12)}
    tags = dataset_tags(name="locomo", version="1", content_hash="abc123")
    capfd.readouterr()

    parent = log_run(experiment="sweep", run_name="parent", params={}, metrics={}, tags={},
                     artifacts={}, tracking_uri=uri)
    run_id = log_run(experiment="sweep", run_name="trial-1", params=params, metrics=metrics,
                     tags=tags, tracking_uri=uri, parent_run_id=parent,
                     artifacts={"config.yaml": tmp_path / "config.yaml",
                                "results/per_query.csv": tmp_path / "per_query.csv",
                                "plots/recall.png": tmp_path / "recall.png"})
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # no run URLs, no emoji, no INFO logs

    run = MlflowClient(tracking_uri=uri).get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "trial-1"
    assert run.data.tags["mlflow.parentRunId"] == parent
    assert run.data.tags["memlab.dataset.hash"] == "abc123"
    assert len(run.data.params) == 150
    assert run.data.params["section3.key31"] == str(31 / 4)
    assert run.data.params["bench.ks"] == "[1, 5, 10]"
    long_value = run.data.params["text.stopwords"]
    assert len(long_value) == 6000 and long_value.endswith("...[truncated 7000 chars]")
    assert run.data.tags["memlab.params_truncated"] == "text.stopwords"
    assert len(run.data.metrics) == 60
    assert run.data.metrics["recall_at_10/cat3"] == pytest.approx(13 / 100)

    client = MlflowClient(tracking_uri=uri)
    listed = {a.path for a in client.list_artifacts(run_id)}
    assert listed == {"config.yaml", "results", "plots"}
    assert [a.path for a in client.list_artifacts(run_id, "plots")] == ["plots/recall.png"]
    local = Path(client.download_artifacts(run_id, "results/per_query.csv", str(tmp_path / "dl")))
    assert local.read_text(encoding="utf-8") == "query_id,recall@10\nq1,1.0\n"
    exp = client.get_experiment_by_name("sweep")
    assert exp.artifact_location == (tmp_path.resolve() / "mlartifacts" / "sweep").as_uri()


def test_bad_input_leaves_the_store_unchanged(uri: str, tmp_path: Path) -> None:
    bad_calls = [
        {"artifacts": {"config.yaml": tmp_path / "missing.yaml"}},
        {"artifacts": {"../escape.txt": tmp_path}},
        {"metrics": {"recall@1": 0.5, "recall_at_1": 0.4}},  # both map to recall_at_1
        {"metrics": {"recall@1": "high"}},
        {"tags": {"note": "x" * 8001}},
    ]
    for override in bad_calls:
        kwargs = {"params": {}, "metrics": {}, "tags": {}, "artifacts": {}} | override
        with pytest.raises(InvalidInput):
            log_run(experiment="bad", run_name="r", tracking_uri=uri, **kwargs)
    assert MlflowClient(tracking_uri=uri).get_experiment_by_name("bad") is None


def test_telemetry_opt_out_respects_the_user(uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_DISABLE_TELEMETRY", raising=False)
    log_run(experiment="t", run_name="r", params={}, metrics={}, tags={}, artifacts={},
            tracking_uri=uri)
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    log_run(experiment="t", run_name="r2", params={}, metrics={}, tags={}, artifacts={},
            tracking_uri=uri)
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "false"


def test_git_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert git_commit(tmp_path) is None  # not a repository
    with pytest.raises(InvalidInput, match="repo_dir"):
        git_commit(tmp_path / "absent")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    assert git_commit(repo) is None  # a repository without commits has no HEAD
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    expected = (repo / ".git" / "refs" / "heads" / "main").read_text().strip()
    assert git_commit(repo) == expected and len(expected) == 40
    assert provenance_tags(repo_dir=repo)["mlflow.source.git.commit"] == expected
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    assert git_commit(repo) is None  # git not installed


def test_memlab_version_matches_the_project() -> None:
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    expected = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]
    assert memlab_version() == expected
    assert provenance_tags()["memlab.version"] == expected


def test_non_finite_metric_is_logged_as_nan(uri: str) -> None:
    run_id = log_run(experiment="nan", run_name="r", params={}, metrics={"mrr": float("nan")},
                     tags={}, artifacts={}, tracking_uri=uri)
    assert math.isnan(MlflowClient(tracking_uri=uri).get_run(run_id).data.metrics["mrr"])


def test_a_new_sqlite_store_is_made_without_a_word_on_stderr(tmp_path: Path) -> None:
    """The first use of a new mlflow.db (a fresh process: mlflow not imported yet) prints
    nothing: in a notebook stderr is a red box (mlflow's import used to reset the levels
    that _quiet set, and alembic said 'Creating initial MLflow database tables')."""
    import sys

    code = ("from memlab.bench.tracking import find_run\n"
            f"print(find_run(tracking_uri='sqlite:///{tmp_path / 'new.db'}', "
            "experiment='e', key='0' * 16))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True, cwd=tmp_path)
    assert done.stdout.strip() == "None" and done.stderr == ""
    assert (tmp_path / "new.db").exists()

"""The notebook-facing runs (issue 20, items 2 and 3): ``memlab.bench`` and ``memlab.sweep`` with
real signatures, logging to MLflow as the commands do, with the run's own times; a rerun of the
same config, data and code adds no MLflow run; sweep child runs mark the swept keys and the change
from the preset; caches, results and mlflow.db under the memlab home, never forked into the
notebook's folder. Real SQLite tracking stores in tmp folders; the model-free hashing embedder."""

from __future__ import annotations

import inspect
import json
import os
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

import memlab
from memlab.errors import ConfigError, InvalidInput
from memlab.tune.space import Space

ROOT = Path(__file__).resolve().parents[1]

HASHING = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
           "recall.relevance_floor": 0.0}
SPACE = Space.from_dict({"params": {
    "fusion.relevance": {"float": [0.0, 1.0]},
    "selection.char_budget": {"int": [10, 400], "log": True}}}, name="wb")


def runs(uri: str, experiment: str) -> list:
    """Every active run of ``experiment`` (none when it does not exist)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder (pyproject.toml) with notebooks/ as the working folder; no
    MEMLAB_HOME."""
    root = tmp_path / "proj"
    (root / "notebooks").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
    monkeypatch.delenv("MEMLAB_HOME", raising=False)
    monkeypatch.chdir(root / "notebooks")
    return root


# -- signatures ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, positional", [("open_store", {"path"}),
                                              ("bench", {"dataset", "path"}),
                                              ("sweep", {"dataset", "path"})])
def test_the_api_has_real_keyword_only_signatures(name, positional):
    fn = getattr(memlab, name)
    sig = inspect.signature(fn)
    kinds = {p.name: p.kind for p in sig.parameters.values()}
    assert inspect.Parameter.VAR_KEYWORD not in kinds.values()       # no **kwargs pass-through
    assert inspect.Parameter.VAR_POSITIONAL not in kinds.values()
    assert {n for n, k in kinds.items() if k != inspect.Parameter.KEYWORD_ONLY} == positional
    text = pydoc.render_doc(fn, renderer=pydoc.plaintext)
    assert all(p in text for p in kinds)                             # help() shows every one


def test_bench_and_sweep_take_what_their_commands_take():
    bench = set(inspect.signature(memlab.bench).parameters)
    sweep = set(inspect.signature(memlab.sweep).parameters)
    common = {"dataset", "path", "options", "limit", "overrides", "cache_dir", "vram_gate",
              "out_dir", "track", "tracking_uri", "experiment", "progress"}
    assert common | {"presets", "config", "mode", "metric", "lexical_only", "lenient"} <= bench
    assert common | {"space", "preset", "objective", "trials", "sampler", "folds", "n_jobs",
                     "storage", "study", "seed", "top", "test_dataset"} <= sweep


def test_memlab_bench_is_the_package_and_the_function():
    import memlab.bench.run  # noqa: F401  (the package stays a package)

    assert callable(memlab.bench) and memlab.bench is sys.modules["memlab.bench"]
    assert hasattr(memlab.bench, "run")


def test_import_memlab_imports_nothing_heavy():
    """``import memlab`` in a fresh interpreter loads memlab's own light modules only: no
    pandas, numpy, pydantic, matplotlib, MLflow or Optuna (they load on first use)."""
    code = ("import sys, memlab; print(sorted(m for m in sys.modules if m.startswith('memlab.')"
            " or m.split('.')[0] in ('numpy', 'pandas', 'pydantic', 'matplotlib', 'mlflow', "
            "'optuna')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "['memlab.notebook', 'memlab.version']"


# -- memlab.bench -------------------------------------------------------------------------------
def test_bench_logs_once_with_the_runs_own_times(tiny_bench_folder, cache_dir, tmp_path,
                                                 capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    kw = dict(overrides=HASHING, cache_dir=cache_dir, out_dir=tmp_path / "results",
              tracking_uri=uri, experiment="wb", progress=False)
    first = memlab.bench(str(tiny_bench_folder), **kw)
    said = capsys.readouterr().out
    assert "memlab home" in said and "MLflow: 1 run(s) logged" in said
    assert first.results[0].aggregate.loc["all", "recall@1"] == pytest.approx(0.5)
    logged = runs(uri, "wb")
    assert len(logged) == 1 and first.mlflow_runs["reverie"]["logged"] is True
    run = logged[0]
    assert run.info.run_id == first.mlflow_runs["reverie"]["run_id"]
    assert float(run.data.metrics["recall_at_1"]) == pytest.approx(0.5)
    # the run's own times: it ended before its files were written, and lasted the bench's total
    # (logging it afterwards would start it after report.json and last the logging's time)
    written_ms = (first.run_dir / "report.json").stat().st_mtime_ns / 1e6
    assert run.info.end_time <= written_ms + 1
    assert run.info.end_time - run.info.start_time >= first.timings["total"] * 1000 - 1
    # the same call again: no new run, and the output says which run holds it
    second = memlab.bench(str(tiny_bench_folder), **kw)
    said = capsys.readouterr().out
    assert len(runs(uri, "wb")) == 1
    assert second.mlflow_runs["reverie"] == {**first.mlflow_runs["reverie"], "logged": False}
    assert "already there with the same config, data and code" in said
    assert run.info.run_id in said
    # another config is another run
    memlab.bench(str(tiny_bench_folder), **{**kw, "overrides": {**HASHING,
                                                                "fusion.relevance": 0.3}})
    assert len(runs(uri, "wb")) == 2


def test_a_compare_rerun_adds_no_run(tiny_bench_folder, cache_dir, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    kw = dict(presets="reverie,cosine", overrides=HASHING, cache_dir=cache_dir,
              out_dir=tmp_path / "r", tracking_uri=uri, experiment="cmp", progress=False,
              verbose=False)
    a = memlab.bench(str(tiny_bench_folder), **kw)
    assert len(runs(uri, "cmp")) == 3                               # a parent and two presets
    b = memlab.bench(str(tiny_bench_folder), **kw)
    assert len(runs(uri, "cmp")) == 3
    assert {n: v["run_id"] for n, v in a.mlflow_runs.items()} == \
        {n: v["run_id"] for n, v in b.mlflow_runs.items()}
    assert not any(v["logged"] for v in b.mlflow_runs.values())
    frame = b.to_frame()
    assert list(frame.index.names) == ["preset", "question"]
    assert sorted(frame.index.unique("preset")) == ["cosine", "reverie"] and len(frame) == 8


def test_track_outcome_times_and_run_folder(tiny_bench_folder, hashing_cfg, tmp_path):
    """track_outcome on a bare outcome writes the run folder it needs (it raised 'report.json:
    file does not exist' unless the command's own function ran first) and logs the times given
    as MLflow's start and end."""
    from memlab.bench.run import run_bench
    from memlab.bench.track import track_outcome

    out = run_bench(dataset=str(tiny_bench_folder), presets=[("reverie", hashing_cfg)],
                    progress=False)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    ids = track_outcome(out, run_dir=tmp_path / "run", tracking_uri=uri, experiment="t",
                        started=1_700_000_000.25, ended=1_700_000_100.5)
    run = runs(uri, "t")[0]
    assert run.info.run_id == ids["reverie"]["run_id"]
    assert (run.info.start_time, run.info.end_time) == (1_700_000_000_250, 1_700_000_100_500)
    assert (tmp_path / "run" / "report.json").is_file()


def test_bench_refuses_bad_arguments_before_running(tiny_bench_folder, tmp_path):
    with pytest.raises(InvalidInput, match="tracking_uri"):
        memlab.bench(str(tiny_bench_folder), overrides=HASHING, tracking_uri="./mlruns")
    with pytest.raises(InvalidInput, match="presets or config"):
        memlab.bench(str(tiny_bench_folder), presets="reverie", config=tmp_path / "x.yaml")
    with pytest.raises(ConfigError, match="preset"):
        memlab.bench(str(tiny_bench_folder), presets="no-such-preset")
    with pytest.raises(InvalidInput, match="metric"):
        memlab.bench(str(tiny_bench_folder), overrides=HASHING, metric="recall@7")
    with pytest.raises(InvalidInput, match="track"):
        memlab.bench(str(tiny_bench_folder), overrides=HASHING, track="yes")


# -- memlab.sweep -------------------------------------------------------------------------------
def test_sweep_logs_once_and_marks_the_swept_keys(tiny_bench_folder, cache_dir, tmp_path,
                                                  capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    kw = dict(space=SPACE, preset="reverie", trials=4, sampler="random", overrides=HASHING,
              cache_dir=cache_dir, out_dir=tmp_path / "s", tracking_uri=uri, experiment="sw",
              top=3, progress=False)
    first = memlab.sweep(str(tiny_bench_folder), **kw)
    said = capsys.readouterr().out
    assert "memlab home" in said and "MLflow: parent run" in said
    assert first.mlflow["logged"] is True and len(first.mlflow["children"]) == 3
    assert first.to_frame().shape[0] == 4
    logged = runs(uri, "sw")
    assert len(logged) == 4                                          # the parent and 3 trials
    base = first.base.to_flat()
    by_number = {t.number: t for t in first.study.trials}
    for run in logged:
        if run.data.tags.get("memlab.kind") != "sweep-trial":
            assert run.data.tags["memlab.swept_keys"] == "fusion.relevance,selection.char_budget"
            continue
        n = int(run.data.tags["memlab.trial"])
        applied = first.space.apply(by_number[n].params)
        tags = run.data.tags
        assert tags["memlab.swept_keys"] == "fusion.relevance,selection.char_budget"
        assert {k: json.loads(tags[f"swept.{k}"]) for k in SPACE.keys} == applied
        changed = [k for k in SPACE.keys if applied[k] != base[k]]
        assert tags["memlab.changed_keys"] == ",".join(changed)
        assert {k[len("changed."):]: v for k, v in tags.items() if k.startswith("changed.")} \
            == {k: f"{json.dumps(base[k])} -> {json.dumps(applied[k])}" for k in changed}
        assert len(run.data.params) == len(base)                     # the full flat config
        t = by_number[n]                                             # the trial's own times
        assert run.info.start_time == round(t.datetime_start.timestamp() * 1000)
        assert run.info.end_time == round(t.datetime_complete.timestamp() * 1000)
    # the same cell again: the study has its 4 trials, nothing runs, nothing is logged again
    again = memlab.sweep(str(tiny_bench_folder), **kw)
    said = capsys.readouterr().out
    assert len(runs(uri, "sw")) == 4 and again.mlflow["logged"] is False
    assert again.mlflow["parent"] == first.mlflow["parent"]
    assert again.mlflow["children"] == first.mlflow["children"]
    assert "already logged" in said and first.mlflow["parent"] in said
    # two more trials: a new outcome, a new parent run
    memlab.sweep(str(tiny_bench_folder), **{**kw, "trials": 6, "verbose": False})
    assert len([r for r in runs(uri, "sw") if r.data.tags["memlab.kind"] == "sweep"]) == 2


def test_the_changed_tags_name_only_keys_that_moved(tiny_bench_folder, cache_dir, tmp_path):
    """The preset's own configuration as a trial (start_from_default): swept, nothing changed."""
    from memlab.tune.track import trial_tags

    holds_default = Space.from_dict({"params": {
        "fusion.relevance": {"float": [0.0, 1.0]},
        "selection.char_budget": {"int": [10, 5000], "log": True}}}, name="wb2")
    res = memlab.sweep(str(tiny_bench_folder), space=holds_default, preset="reverie", trials=1,
                       sampler="random", overrides=HASHING, cache_dir=cache_dir,
                       out_dir=tmp_path / "s", track=False, progress=False, verbose=False)
    applied = res.space.apply(res.study.trials[0].params)
    tags = trial_tags(res, applied)
    assert tags["memlab.changed_keys"] == "" and not any(k.startswith("changed.") for k in tags)
    assert {k for k in tags if k.startswith("swept.")} == {f"swept.{k}" for k in SPACE.keys}
    assert tags["swept.selection.char_budget"] == json.dumps(res.base.selection.char_budget)
    moved = trial_tags(res, {**applied, "fusion.relevance": 0.5})
    assert moved["memlab.changed_keys"] == "fusion.relevance"
    base = res.base.to_flat()["fusion.relevance"]
    assert moved["changed.fusion.relevance"] == f"{json.dumps(base)} -> 0.5"


# -- the memlab home ----------------------------------------------------------------------------
def test_a_notebook_in_a_subfolder_uses_the_project_root(project, tiny_bench_folder, capsys):
    """A bench from notebooks/ with every default: the caches, the run folder and mlflow.db are
    the project root's, and nothing is made in notebooks/."""
    out = memlab.bench(str(tiny_bench_folder), overrides=HASHING, experiment="home",
                       progress=False)
    said = capsys.readouterr().out
    assert f"memlab home {project} (project root: pyproject.toml found there)" in said
    assert (project / ".cache" / "memlab" / "embeddings.sqlite").is_file()
    assert any((project / ".cache" / "memlab" / "features").iterdir())
    assert out.run_dir.parent == project / "results"
    assert (project / "mlflow.db").is_file()
    assert len(runs(f"sqlite:///{project / 'mlflow.db'}", "home")) == 1
    assert list((project / "notebooks").iterdir()) == []


def test_memlab_home_from_the_environment(project, tmp_path, monkeypatch):
    from memlab.home import find_home

    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / "elsewhere"))
    home = find_home()
    assert (home.root, home.found_by) == (tmp_path / "elsewhere", "MEMLAB_HOME")
    assert home.tracking_uri == f"sqlite:///{tmp_path / 'elsewhere' / 'mlflow.db'}"
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / "afile"))
    with pytest.raises(InvalidInput, match="MEMLAB_HOME"):
        find_home()


def test_find_home_takes_the_nearest_marker(tmp_path):
    from memlab.home import find_home, under_home

    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert find_home(deep, {}).found_by == "working folder"
    assert find_home(deep, {}).root == deep
    (tmp_path / "a" / ".git").mkdir()
    assert find_home(deep, {}).root == tmp_path / "a"
    (tmp_path / "a" / "b" / ".memlab").write_text("")
    home = find_home(deep, {})
    assert (home.root, home.found_by) == (tmp_path / "a" / "b", ".memlab")
    assert under_home(".cache/memlab", home) == tmp_path / "a" / "b" / ".cache" / "memlab"
    assert under_home("/abs/cache", home) == Path("/abs/cache")


def test_memlab_where_prints_the_home(project):
    from typer.testing import CliRunner

    from memlab.cli import app

    res = CliRunner().invoke(app, ["where", "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info == {"home": str(project), "found_by": "pyproject.toml",
                    "cache_dir": str(project / ".cache" / "memlab"),
                    "results_dir": str(project / "results"),
                    "sweeps_dir": str(project / "results" / "sweeps"),
                    "tracking_uri": f"sqlite:///{project / 'mlflow.db'}",
                    "mlflow_ui": f"mlflow ui --backend-store-uri sqlite:///{project / 'mlflow.db'}"}
    text = CliRunner().invoke(app, ["where", "--set", "bench.cache_dir=/x/c"]).stdout
    assert text.splitlines()[1].split() == ["caches", "/x/c", "(bench.cache_dir)"]

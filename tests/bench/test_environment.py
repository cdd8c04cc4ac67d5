"""The environment block (memlab.bench.environment): what it holds, read from the machine itself;
it is in the bench JSON, under the bench table, in the sweep JSON, the fit output and, as tags, in
every MLflow run."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from memlab.bench import environment as E
from memlab.embed import HashingEmbedder
from memlab.embed.numerics import fingerprint

KEYS = {"memlab", "python", "libraries", "sqlite", "os", "cpu", "threads", "embedder", "gpu",
        "source"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_the_block_is_read_from_this_machine():
    from memlab.store.connect import driver

    env = E.environment(embedder=HashingEmbedder(dim=64), threads=2)
    assert set(env) == KEYS
    assert env["libraries"]["numpy"] == np.__version__
    for dist, version in env["libraries"].items():
        try:
            assert version == importlib.metadata.version(dist), dist
        except importlib.metadata.PackageNotFoundError:
            assert version is None, dist
    assert env["sqlite"]["version"] == driver().sqlite_version
    assert env["cpu"]["model"] and set(env["cpu"]["simd"]) <= set(E.SIMD)
    assert env["threads"]["embedding"] == 2 and env["threads"]["usable"] >= 1
    assert env["embedder"] == {"name": "hashing", "version": "hashing-v1-d64-t80",
                               "numerics": fingerprint(HashingEmbedder(dim=64)), "device": "cpu"}
    assert env["gpu"] == {"used": False}
    json.dumps(env)                                            # JSON as it is
    assert E.environment()["embedder"] is None


def test_the_commit_and_dirty_flag_of_a_checkout(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    _git(repo, "add", "a.txt")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert E.git_state(repo) == (head, False)
    (repo / "new.txt").write_text("untracked files do not count\n")
    assert E.git_state(repo) == (head, False)
    (repo / "a.txt").write_text("two\n")
    assert E.git_state(repo) == (head, True)
    assert E.git_state(tmp_path) == (None, None)               # not a work tree


def test_memlabs_own_commit_is_this_checkouts():
    if not (E.REPO_ROOT / ".git").exists():
        pytest.skip("memlab is not run from a git checkout here")
    env = E.environment()
    assert env["memlab"]["commit"] == _git(E.REPO_ROOT, "rev-parse", "HEAD")
    assert isinstance(env["memlab"]["dirty"], bool)


class _OnGpu(HashingEmbedder):
    device = "cuda:0"


def test_a_gpu_embedder_is_said_to_use_the_gpu():
    env = E.environment(embedder=_OnGpu(dim=64))
    assert env["gpu"] == {"used": True} and env["embedder"]["device"] == "cuda:0"


def test_the_line_and_the_tags():
    env = E.environment(embedder=HashingEmbedder(dim=64))
    line = E.environment_line(env)
    assert line.startswith("environment: memlab ") and "\n" not in line
    assert f"@{env['embedder']['numerics']}" in line and env["cpu"]["model"] in line
    if env["memlab"]["commit"]:
        assert env["memlab"]["commit"][:10] in line
    tags = E.environment_tags(env)
    assert tags["memlab.env.libraries.numpy"] == np.__version__
    assert tags["memlab.env.embedder.numerics"] == env["embedder"]["numerics"]
    assert tags["memlab.env.cpu.simd"] == ",".join(env["cpu"]["simd"])
    assert tags["memlab.env.gpu.used"] == "False"
    assert all(isinstance(v, str) for v in tags.values())
    assert "memlab.env.threads.embedding" not in tags          # None is left out
    assert (tags["mlflow.source.name"], tags["mlflow.source.type"]) == (
        env["source"]["name"], env["source"]["type"])


@pytest.mark.parametrize("argv, modules, source", [
    (["/venv/bin/memlab", "bench", "--compare", "reverie,cosine"], {}, ("memlab bench", "LOCAL")),
    (["/venv/bin/memlab", "-q", "sweep", "--storage", "postgresql://u:pw@h/db"], {},
     ("memlab sweep", "LOCAL")),
    (["/repo/memlab/cli.py", "fit"], {}, ("memlab fit", "LOCAL")),
    (["/venv/bin/memlab"], {}, ("memlab", "LOCAL")),
    (["benchmarks/quality.py", "--datasets", "lifelog"], {}, ("quality.py", "LOCAL")),
    (["/venv/lib/python3.11/site-packages/ipykernel_launcher.py", "-f", "k.json"],
     {"ipykernel": object()}, ("notebook", "NOTEBOOK")),
    (["/venv/lib/python3.11/site-packages/ipykernel_launcher.py"], {}, ("ipykernel_launcher.py",
                                                                          "LOCAL")),
    ([], {}, ("python", "LOCAL")),
])
def test_the_source_names_the_program_and_command_never_the_arguments(argv, modules, source):
    got = E.source_of(argv, modules)
    assert (got["name"], got["type"]) == source
    assert "pw" not in got["name"]


def test_a_bench_carries_it_in_its_json_its_table_and_its_mlflow_runs(tiny_bench_folder,
                                                                      hashing_cfg, tmp_path):
    from mlflow.tracking import MlflowClient

    from memlab.bench.artifacts import write_artifacts
    from memlab.bench.run import format_table, run_bench
    from memlab.bench.track import track_outcome

    out = run_bench(dataset=str(tiny_bench_folder), presets=[("a", hashing_cfg)], progress=False)
    env = out.to_json()["environment"]
    assert set(env) == KEYS and env["embedder"]["version"] == "hashing-v1-d384-t80"
    assert format_table(out).splitlines()[-1] == E.environment_line(env)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = track_outcome(out, run_dir=write_artifacts(out, tmp_path / "results").run_dir,
                        tracking_uri=uri, experiment="env")
    tags = MlflowClient(tracking_uri=uri).get_run(ids["a"]["run_id"]).data.tags
    assert tags["memlab.env.embedder.numerics"] == env["embedder"]["numerics"]
    assert tags["memlab.env.cpu.model"] == env["cpu"]["model"]
    assert tags["memlab.env.python"] == env["python"]


def test_a_sweep_carries_it_in_its_json_and_its_mlflow_runs(tiny_bench_folder, cache_dir,
                                                            tmp_path):
    from mlflow.tracking import MlflowClient

    from memlab.tune.space import Space
    from memlab.tune.sweep import sweep
    from memlab.tune.track import track_sweep

    space = Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 1.0]}}}, name="env")
    result = sweep(dataset=str(tiny_bench_folder), preset="reverie", space=space, trials=2,
                   sampler="random", out_dir=tmp_path / "s", progress=False,
                   overrides={"embedding.backend": "hashing", "bench.cache_dir": str(cache_dir)})
    env = result.to_json()["environment"]
    assert set(env) == KEYS and env["embedder"]["name"] == "hashing"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = track_sweep(result, tracking_uri=uri, top=1)
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(ids["parent"]).data.tags["memlab.env.libraries.numpy"] == np.__version__

"""The dataset registry (names, paths, env var, checksums) and the ``memlab datasets`` CLI."""

from __future__ import annotations


import pytest
from typer.testing import CliRunner

from memlab.bench.datasets import registry as R
from memlab.bench.datasets.canonical import read_dataset, write_dataset
from memlab.bench.datasets.cli import datasets_app, parse_options
from memlab.bench.datasets.locomo import load_locomo
from memlab.errors import DatasetError, InvalidInput

NAMES = ["locomo", "longmemeval-m", "longmemeval-oracle", "longmemeval-s", "madial-en", "madial-zh", "memdaily",
         "memlab-lifelog"]


@pytest.fixture
def no_defaults(monkeypatch, tmp_path):
    """No MEMLAB_DATASETS and a repository root with no ../shared/datasets beside it."""
    monkeypatch.delenv(R.ENV_VAR, raising=False)
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path / "nowhere" / "repo")


def test_names_and_specs():
    assert [s.name for s in R.list_datasets()] == NAMES
    spec = R.info("locomo")
    assert spec.language == "en" and spec.license == "CC BY-NC 4.0" and spec.default_relpath == "locomo/locomo10.json"
    assert spec.sha256 == {"locomo10.json": "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"}
    assert set(R.info("madial-en").sha256) == {"MADial-Bench-en-dialogue.json", "MADial-Bench-en-memory.json"}
    with pytest.raises(InvalidInput, match="locomo, longmemeval-m"):
        R.info("locomo11")
    with pytest.raises(InvalidInput, match="already registered"):
        R.register(spec)


def test_load_by_name_with_path(locomo_file):
    assert R.load("locomo", path=locomo_file, categories=[4]) == load_locomo(locomo_file, categories=[4])


def test_env_var_is_read_at_call_time(monkeypatch, tmp_path, locomo_file, memdaily_root, no_defaults):
    with pytest.raises(DatasetError):
        R.load("locomo")
    monkeypatch.setenv(R.ENV_VAR, str(tmp_path))  # tmp_path/locomo/locomo10.json, tmp_path/memdaily, memorybank
    assert len(R.load("locomo").questions) == 9
    # memdaily finds its distractor pool at <root>/memorybank/cn
    assert len(R.load("memdaily", noise=1).items) == 5 * 2


def test_missing_file_tells_where_to_download(monkeypatch, tmp_path, no_defaults):
    monkeypatch.setenv(R.ENV_VAR, str(tmp_path))
    with pytest.raises(DatasetError) as err:
        R.load("longmemeval-s")
    msg = str(err.value)
    assert "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned" in msg
    assert "--path /path/to/longmemeval_s_cleaned.json" in msg and str(tmp_path) in msg
    monkeypatch.delenv(R.ENV_VAR)
    with pytest.raises(DatasetError, match="no ../shared/datasets"):
        R.load("locomo")
    with pytest.raises(DatasetError, match="not found"):
        R.load("locomo", path=tmp_path / "absent.json")


def test_shared_folder_next_to_the_repo(monkeypatch, tmp_path, locomo_file):
    monkeypatch.delenv(R.ENV_VAR, raising=False)
    (tmp_path / "shared" / "datasets").mkdir(parents=True)
    locomo_file.parent.rename(tmp_path / "shared" / "datasets" / "locomo")
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path / "main")
    assert R.datasets_root() == tmp_path / "shared" / "datasets"
    assert len(R.load("locomo").items) == 7


def test_canonical_folder_by_path(tmp_path, locomo_file):
    ds = load_locomo(locomo_file)
    out = write_dataset(ds, tmp_path / "canon")
    assert R.load(out) == ds and R.load(str(out)) == ds
    with pytest.raises(InvalidInput, match="path"):
        R.load(out, path=locomo_file)
    with pytest.raises(InvalidInput, match="options"):
        R.load(out, noise=9)
    with pytest.raises(DatasetError, match="neither a registered dataset"):
        R.load(tmp_path / "missing")
    with pytest.raises(DatasetError, match="neither a registered dataset"):
        R.load(locomo_file)  # a native file is not a canonical folder


def test_bundled_lifelog(monkeypatch, tmp_path, locomo_file):
    monkeypatch.setattr(R, "REPO_ROOT", tmp_path / "repo")
    with pytest.raises(DatasetError, match="ships with the repository"):
        R.load("memlab-lifelog")
    ds = load_locomo(locomo_file)
    write_dataset(ds, tmp_path / "repo" / "datasets" / "memlab-lifelog")
    assert R.load("memlab-lifelog") == ds


def test_checksums(tmp_path, locomo_file):
    f = tmp_path / "abc.txt"
    f.write_bytes(b"abc")
    assert R.sha256_of(f, chunk_bytes=2) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert R.verify("locomo", locomo_file) == {"locomo10.json": False}
    with pytest.raises(DatasetError, match="official sha256") as err:
        R.load("locomo", path=locomo_file, check_sha256=True)
    assert err.value.field == "sha256"


# ----------------------------------------------------------------------------- CLI

def test_parse_options():
    assert parse_options(["noise=9", "categories=[1,2]", "tz=Asia/Shanghai", "name="]) == {
        "noise": 9, "categories": [1, 2], "tz": "Asia/Shanghai", "name": ""}
    with pytest.raises(InvalidInput, match="key=value"):
        parse_options(["noise"])


def test_cli_convert(tmp_path, locomo_file):
    out = tmp_path / "out"
    res = CliRunner().invoke(datasets_app, ["convert", "locomo", "--path", str(locomo_file), "--out", str(out),
                                            "--option", "categories=[1,2]"])
    assert res.exit_code == 0, res.output
    ds = read_dataset(out)
    assert {q.category for q in ds.questions} == {"1", "2"} and len(ds.questions) == 3
    assert f"sha256 {ds.content_hash()}" in res.output and "category not selected" in res.output


def test_cli_errors_exit_2(tmp_path):
    runner = CliRunner()
    res = runner.invoke(datasets_app, ["convert", "nope", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "not a registered dataset" in res.output
    res = runner.invoke(datasets_app, ["convert", "locomo", "--path", str(tmp_path / "x.json"), "--out",
                                       str(tmp_path / "o"), "-o", "bad"])
    assert res.exit_code == 2 and "key=value" in res.output
    assert not (tmp_path / "o").exists()


def test_cli_list_and_info(monkeypatch, tmp_path, no_defaults):
    runner = CliRunner()
    res = runner.invoke(datasets_app, ["list"])
    assert res.exit_code == 0 and all(name in res.output for name in NAMES)
    assert "(not found locally)" in res.output
    res = runner.invoke(datasets_app, ["info", "madial-en"])
    assert res.exit_code == 0
    assert "https://github.com/hejunqing/MADial-Bench" in res.output and "zh_path" in res.output
    assert runner.invoke(datasets_app, ["info", "nope"]).exit_code == 2

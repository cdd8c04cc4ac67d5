"""``memlab fit`` through typer's CliRunner on a small generated dataset (hashing embedder): the
learned config YAML is what ``memlab bench --config`` reads, the hgb model file is what the
``learned`` scorer reads, and --folds reports the three methods held out."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from typer.testing import CliRunner

from memlab.bench.environment import environment_line
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question, write_dataset
from memlab.cli import app
from memlab.config import load_config

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
WORDS = ["violin", "garden", "lisbon", "marathon", "coffee", "python", "piano", "tomato",
         "bicycle", "kyoto", "sushi", "chess", "camera", "hiking", "novel", "jazz", "pottery",
         "surfing", "yoga", "ramen"]
HASHING = ["--set", "embedding.backend=hashing", "--set", "recall.floor_mode=absolute",
           "--set", "recall.relevance_floor=0.0"]


def _dataset(tmp_path):
    rng = np.random.default_rng(0)
    items, questions = [], []
    for c in range(3):
        for i in range(24):
            w = rng.choice(WORDS, 3, replace=False)
            items.append(Item(f"u{c}", f"i{i}", "s1", "Ann",
                              f"I talked about {w[0]} {w[1]} and {w[2]}", T0 + timedelta(days=i)))
        for j in range(8):
            gold = items[c * 24 + int(rng.integers(24))]
            words = gold.text.split()[3:]
            questions.append(Question(f"u{c}", f"q{j}", f"what about {words[0]} and {words[-1]}",
                                      T0 + timedelta(days=40), "x", (gold.item_id,)))
    card = Card(name="fit-cli", version="1", language="en", license="CC0-1.0",
                source="memlab tests", granularity="turn", description="generated")
    return write_dataset(Dataset(card, items, questions), tmp_path / "fit-cli")


@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *a: runner.invoke(app, [str(x) for x in a], catch_exceptions=False)


def test_fit_writes_a_config_bench_reads_and_a_model_the_scorer_reads(cli, tmp_path):
    folder = _dataset(tmp_path)
    common = ["fit", "--dataset", folder, "--cache-dir", tmp_path / "cache", "-q", *HASHING]
    res = cli(*common, "--out", tmp_path / "tuned.yaml", "--json", tmp_path / "fit.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "fit.json").read_text(encoding="utf-8"))
    cfg = load_config(tmp_path / "tuned.yaml")
    assert cfg.fusion.relevance == pytest.approx(report["weights"]["fusion.relevance"])
    assert cfg.embedding.backend == "hashing"        # the preset's full config, overrides kept
    assert "in-sample ndcg@10" in res.output
    env = report["environment"]                      # where it was fitted: JSON and YAML header
    assert env["embedder"]["version"] == "hashing-v1-d384-t80" and env["cpu"]["model"]
    assert f"# {environment_line(env)}" in (tmp_path / "tuned.yaml").read_text(encoding="utf-8")
    res = cli("bench", "--dataset", folder, "--config", tmp_path / "tuned.yaml", "--no-track",
              "-q", "--out-dir", tmp_path / "results", "--cache-dir", tmp_path / "cache")
    assert res.exit_code == 0, res.output

    res = cli(*common, "--model", "hgb", "--out", tmp_path / "m.skops", "--folds", "3",
              "--json", tmp_path / "cv.json", "--figure", tmp_path / "imp.png")
    assert res.exit_code == 0, res.output
    cv = json.loads((tmp_path / "cv.json").read_text(encoding="utf-8"))["folds"]
    assert set(cv["scores"]) == {"defaults", "linear", "hgb"}
    assert all(len(v) == 3 for v in cv["scores"].values())
    assert "cosine" in cv["importance"] and (tmp_path / "imp.png").stat().st_size > 0
    from memlab.recall.learned import load_model

    assert load_model(tmp_path / "m.skops").manifest["environment"]["cpu"]["model"] == \
        env["cpu"]["model"]
    res = cli("bench", "--dataset", folder, "--no-track", "-q", "--out-dir", tmp_path / "r2",
              "--cache-dir", tmp_path / "cache", *HASHING, "--set", "fusion.scorer=learned",
              "--set", f"fusion.learned_model={tmp_path / 'm.skops'}")
    assert res.exit_code == 0, res.output


def test_fit_lambdarank_writes_a_ranker_the_scorer_reads(cli, tmp_path):
    pytest.importorskip("lightgbm")
    from memlab.recall.learned import load_model

    folder = _dataset(tmp_path)
    res = cli("fit", "--dataset", folder, "--cache-dir", tmp_path / "cache", "-q", *HASHING,
              "--model", "lambdarank", "--out", tmp_path / "r.skops", "--folds", "3",
              "--no-importance", "--json", tmp_path / "cv.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "cv.json").read_text(encoding="utf-8"))
    assert set(report["folds"]["scores"]) == {"defaults", "linear", "hgb", "lambdarank"}
    assert len(report["folds"]["scores"]["lambdarank"]) == 3
    m = load_model(tmp_path / "r.skops")
    assert m.kind == "lambdarank" and m.manifest["config"]["embedding.backend"] == "hashing"
    assert m.manifest["dataset"]["name"] == "fit-cli" and "retention" in m.features
    res = cli("bench", "--dataset", folder, "--no-track", "-q", "--out-dir", tmp_path / "r2",
              "--cache-dir", tmp_path / "cache", *HASHING, "--set", "fusion.scorer=learned",
              "--set", f"fusion.learned_model={tmp_path / 'r.skops'}",
              "--set", "fusion.learned_floor=false")
    assert res.exit_code == 0, res.output


def test_fit_refuses_a_preset_that_is_not_reverie(cli, tmp_path):
    folder = _dataset(tmp_path)
    res = CliRunner().invoke(app, ["fit", "--dataset", str(folder), "--preset", "cosine", "-q",
                                   "--cache-dir", str(tmp_path / "c"), *HASHING])
    assert res.exit_code == 2 and "fusion.scorer" in res.output and "reverie" in res.output

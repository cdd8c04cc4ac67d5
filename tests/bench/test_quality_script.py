"""benchmarks/quality.py end to end on two small canonical datasets (hashing embedder): every
row of its tables (k-fold, leave one dataset out, Optuna per fold) is produced and reprinted.

Two users of the shipped memlab-lifelog per dataset (zh and en), 2 folds, 2 Optuna trials per
fold: a smoke run of the script's paths (a renamed argument crashed ``--trials`` once unseen),
not a measurement."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIFELOG = ROOT / "datasets" / "memlab-lifelog"
pytest.importorskip("lightgbm")
pytest.importorskip("optuna")


def _quality():
    spec = importlib.util.spec_from_file_location("quality_script", ROOT / "benchmarks" /
                                                  "quality.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["quality_script"] = mod
    spec.loader.exec_module(mod)
    return mod


def _subset(dst: Path, users: tuple[str, ...]) -> Path:
    """A canonical dataset folder holding ``users``' items and questions of memlab-lifelog."""
    dst.mkdir(parents=True)
    card = json.loads((LIFELOG / "card.json").read_text("utf-8"))
    card["name"] = dst.name
    card.pop("sha256", None)
    (dst / "card.json").write_text(json.dumps(card, ensure_ascii=False), "utf-8")
    for f in ("items.jsonl", "queries.jsonl"):
        lines = [ln for ln in (LIFELOG / f).read_text("utf-8").splitlines()
                 if json.loads(ln)["conversation_id"] in users]
        (dst / f).write_text("\n".join(lines) + "\n", "utf-8")
    return dst


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("quality")
    zh = _subset(tmp / "life-zh", ("u01-zh", "u02-zh"))
    en = _subset(tmp / "life-en", ("u05-en", "u06-en"))
    out = tmp / "q.json"
    q = _quality()
    rc = q.main(["--datasets", f"{zh},{en}", "--set", "embedding.backend=hashing",
                 "--cache-dir", str(tmp / "cache"), "--folds", "2", "--trials", "2",
                 "--no-hgb", "--resamples", "200", "--out-dir", str(tmp / "results"),
                 "--tuned-dir", str(tmp / "tuned"),
                 "--json", str(out), "-q"])
    return q, rc, json.loads(out.read_text("utf-8")), out, (str(zh), str(en))


def test_every_row_is_held_out_and_reported(run):
    _, rc, res, _, labels = run
    assert rc == 0 and set(res["datasets"]) == set(labels)
    # each dataset's tuned preset is written where --tuned-dir says, named by the folder
    assert sorted(p.name for p in (Path(labels[0]).parent / "tuned").iterdir()) == \
        ["life-en.yaml", "life-zh.yaml"]
    for label in labels:
        entry = res["datasets"][label]
        assert entry["folds"] == 2 and entry["conversations"] == 2
        kf = entry["kfold"]["methods"]
        assert set(kf) == {"reverie", "optuna", "linear", "reverie_plus", "ranker",
                           "ranker_all", "ranker_portable", "cosine", "bm25", "hybrid_rrf"}
        lodo = entry["lodo"]["methods"]
        assert {"plus_lodo", "ranker_lodo", "portable_lodo"} <= set(lodo)
        for m, row in {**kf, **{f"lodo {k}": v for k, v in lodo.items()}}.items():
            assert 0.0 <= row["mean"]["ndcg@10"] <= 1.0, m
            lo, hi = row["ci"]
            assert lo <= row["mean"]["ndcg@10"] <= hi, m
            if m != entry["kfold"]["best_reference"]:
                assert row["p_best"] is None or 0.0 < row["p_best"] <= 1.0, m
    from memlab.recall.learned import COMPUTED, FEATURES

    for label in labels:   # the joint ranker's permutation importance: one row per column read
        signals = [r["signal"] for r in res["importance"][label]]
        assert signals and set(signals) <= set(FEATURES) | set(COMPUTED)


def test_the_report_reprints(run, capsys):
    q, _, _, out, labels = run
    capsys.readouterr()
    assert q.main(["--report", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "k-fold by conversation" in printed and "ranker_portable" in printed
    assert "leave one dataset out" in printed and "portable_lodo" in printed


def test_an_unknown_dataset_is_refused(tmp_path):
    q = _quality()
    with pytest.raises(SystemExit):
        q.main(["--datasets", str(tmp_path / "nope"), "--json", str(tmp_path / "q.json")])

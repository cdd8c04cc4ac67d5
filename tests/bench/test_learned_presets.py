"""The presets ``learned`` and ``reverie_plus`` (issue 21, item 2): the packaged model and its
manifest, named by a package-relative name; the optional extra; the column-gate rule; both
presets run by name in ``memlab bench --compare`` on a small generated zh/en dataset."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memlab.bench.datasets.canonical import Card, Dataset, Item, Question, write_dataset
from memlab.bench.run import resolve_preset
from memlab.cli import app
from memlab.config import load_config
from memlab.errors import ConfigError
from memlab.recall import learned as L
from memlab.recall.features import make_table
from memlab.recall.modelfile import resolve
from memlab.recall.score import score

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
COMPARE = "reverie,learned,reverie_plus,cosine,hybrid_rrf"


def _bilingual() -> Dataset:
    """Two users (en, zh), two sessions each; questions a day after the last turn."""
    en = [("Ann", "I adopted a cat named Momo"), ("Ann", "Momo naps on the sofa all day"),
          ("Ann", "my sister Grace lives in Berlin"), ("Ann", "Grace sent me a postcard"),
          ("Ann", "we booked a flight to Lisbon for May"), ("Ann", "I play the violin at night")]
    zh = [("小明", "我养了一只叫小白的猫"), ("小明", "小白喜欢吃鱼"), ("小明", "我在深圳做软件工程师"),
          ("小明", "周末和老王去爬山"), ("小明", "我喜欢喝绿茶"), ("小明", "老王推荐了一本书《三体》")]
    items, questions = [], []
    for conv, turns in (("en", en), ("zh", zh)):
        for i, (who, text) in enumerate(turns):
            items.append(Item(conv, str(i), f"s{i // 3}", who, text, T0 + timedelta(days=2 * i)))
    last = T0 + timedelta(days=12)
    for conv, qs in (("en", [("What is my cat called?", ("0",)),
                             ("Where does Grace live?", ("2",)),
                             ("Where are we flying in May?", ("4",))]),
                     ("zh", [("我的猫叫什么名字？", ("0",)), ("我在哪里工作？", ("2",)),
                             ("老王推荐了什么书？", ("5",))])):
        for j, (text, ev) in enumerate(qs):
            questions.append(Question(conv, f"q{j}", text, last, "c", ev))
    card = Card(name="presets-mini", version="1", language="mixed", license="CC0-1.0",
                source="memlab tests", granularity="turn", description="zh/en presets set")
    return Dataset(card, items, questions)


def test_the_preset_names_its_model_by_a_package_relative_name():
    cfg = load_config(resolve_preset("learned")[1])
    assert cfg.fusion.scorer == "learned"
    assert cfg.fusion.learned_model == "memlab:learned.skops"
    assert not Path(cfg.fusion.learned_model).is_absolute()
    path = resolve(cfg.fusion.learned_model)
    assert path.is_file() and path.parent.name == "models" and path.parent.parent.name == "data"
    assert cfg.recall.abstain_model is None or resolve(cfg.recall.abstain_model).is_file()


@pytest.mark.parametrize("name", ["memlab:", "memlab:../config.py", "memlab:a/b.skops"])
def test_a_packaged_name_is_a_file_name(name):
    with pytest.raises(ConfigError) as e:
        resolve(name)
    assert e.value.key == "fusion.learned_model"


def test_the_packaged_model_records_its_training():
    pytest.importorskip("lightgbm")
    m = L.load_model("memlab:learned.skops")
    man = m.manifest
    assert m.kind == "lambdarank" and man["lightgbm"] and man["sklearn"]
    assert set(L.GATE_FEATURES) <= set(m.features)
    parts = man["dataset"]["parts"]
    assert {p["name"] for p in parts} >= {"memlab-lifelog", "locomo"}
    assert all(len(p["content_hash"]) == 64 and p["questions"] > 0 and p["version"]
               for p in parts)
    assert man["trained"]["command"].startswith("python benchmarks/train_presets.py")
    assert man["trained"]["git_commit"] and man["trained"]["groups_used"] > 0
    assert man["config"]["recall.session_context"] is True


def test_without_lightgbm_the_preset_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightgbm", None)       # import lightgbm -> ImportError
    L._load.cache_clear()
    cfg = load_config(resolve_preset("learned")[1], overrides={"recall.floor_mode": "zscore"})
    table = make_table(cosine=[0.9, 0.5], q_bg_mean=[0.1] * 2, q_bg_std=[0.1] * 2,
                       m_bg_mean=[0.1] * 2, m_bg_std=[0.1] * 2)
    try:
        with pytest.raises(ConfigError, match=r"memlab\[rank\]"):
            score(table, cfg)
    finally:
        L._load.cache_clear()


def test_a_column_gate_the_model_was_trained_with_must_be_on():
    """The model reads the session columns and was trained with recall.session_context on:
    scoring with it off (every such column NaN) is refused, naming the field."""
    pytest.importorskip("lightgbm")
    cfg = load_config(resolve_preset("learned")[1],
                      overrides={"recall.session_context": False, "recall.floor_mode": "zscore"})
    table = make_table(cosine=[0.9, 0.5], q_bg_mean=[0.1] * 2, q_bg_std=[0.1] * 2,
                       m_bg_mean=[0.1] * 2, m_bg_std=[0.1] * 2)
    with pytest.raises(ConfigError) as e:
        score(table, cfg)
    assert e.value.key == "recall.session_context"
    # a table column the model does not read is ignored: the rule is the manifest's names
    ok = load_config(resolve_preset("learned")[1], overrides={"recall.floor_mode": "zscore"})
    assert len(score(table, ok).score) == 2


def test_reverie_plus_preset_is_reverie_with_fitted_terms():
    cfg = load_config(resolve_preset("reverie_plus")[1])
    assert cfg.fusion.scorer == "reverie_plus" and cfg.recall.session_context
    text = resolve_preset("reverie_plus")[1].read_text(encoding="utf-8")
    assert "fitted" in text.lower() and "train_presets.py" in text


def test_bench_compare_runs_both_presets_by_name(tmp_path):
    """``memlab bench --compare reverie,learned,reverie_plus,cosine,hybrid_rrf`` on a generated
    zh/en dataset: every preset ranks every question; the JSON names them in order."""
    pytest.importorskip("lightgbm")
    folder = write_dataset(_bilingual(), tmp_path / "mini")
    out = tmp_path / "report.json"
    res = CliRunner().invoke(app, [
        "bench", "--dataset", str(folder), "--compare", COMPARE,
        "--set", "embedding.backend=hashing", "--set", f"bench.cache_dir={tmp_path / 'cache'}",
        "--no-track", "--out-dir", str(tmp_path / "results"), "--json", str(out), "-q"],
        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["presets"] == COMPARE.split(",")
    for name in COMPARE.split(","):
        m = report["metrics"][name]
        assert 0.0 <= m["ndcg@10"] <= 1.0 and not np.isnan(m["ndcg@10"])
    assert report["config"]["learned"]["fusion.learned_model"] == "memlab:learned.skops"
    assert report["config"]["reverie_plus"]["fusion.scorer"] == "reverie_plus"


def test_the_recorded_command_names_no_path_of_this_machine():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import train_presets as T

    root = T.ROOT
    got = T.recorded_command(["--data", "/somewhere/else/datasets", "--json=/tmp/x/fig.json",
                              "--out-dir", str(root / "memlab" / "data" / "models"),
                              "--datasets", "lifelog,locomo"])
    assert got == ("python benchmarks/train_presets.py --data .../datasets --json=.../fig.json "
                   "--out-dir memlab/data/models --datasets lifelog,locomo")
    assert str(root) not in got and "/somewhere" not in got

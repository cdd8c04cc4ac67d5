"""Published anchors stored as data (issue 20, notebook 03): ``memlab/data/anchors.yaml`` read and
checked by ``memlab.bench.anchors``, matched to a run by dataset and categories, set beside the
presets; the README's tables regenerated from a bench report's JSON (``memlab.bench.tables``);
LoCoMo's numbered categories shown by name."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pandas as pd
import pytest

from memlab.bench.anchors import ANCHORS_FILE, load_anchors
from memlab.bench.datasets.canonical import Dataset, Question
from memlab.bench.datasets.locomo import CATEGORY_NAMES
from memlab.bench.plots import per_category_bars
from memlab.bench.run import run_bench
from memlab.bench.tables import overall_table, per_category_table, read_report, to_markdown
from memlab.errors import DatasetError, InvalidInput


def test_the_shipped_anchors_are_the_figures_design_and_readme_cite():
    anchors = load_anchors()
    assert anchors.file == str(ANCHORS_FILE) and len(anchors) == 7
    frame = anchors.to_frame()
    assert {"dataset", "level", "metric", "value", "source", "kind", "comparable"} <= \
        set(frame.columns)
    locomo = anchors.for_dataset("locomo", ["1", "2", "3", "4"])
    dragon = next(a for a in locomo if a.method == "DRAGON")
    assert dict(dragon.metrics) == {"recall@5": 0.588, "recall@10": 0.675}
    assert dragon.kind == "published" and dragon.level == "turn" and "LoCoMo paper" in dragon.source
    rrf = next(a for a in locomo if a.preset == "hybrid_rrf")
    assert dict(rrf.metrics) == {"recall@10": 0.584, "ndcg@10": 0.453}
    assert next(a for a in anchors.for_dataset("madial-zh")).metrics["ndcg@10"] == 0.553
    lme = next(iter(anchors.for_dataset("longmemeval-oracle")))
    assert lme.comparable is False and "not comparable" in lme.note
    # LoCoMo's figures are for categories 1-4: a run of category 5 has no anchor
    assert len(anchors.for_dataset("locomo", ["5"])) == 0
    assert len(anchors.for_dataset("locomo", ["1", "2", "3", "4", "5"])) == 0


def _write(tmp_path, text):
    path = tmp_path / "anchors.yaml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = ("version: 1\nanchors:\n  - {dataset: d, level: turn, method: m, kind: published,\n"
        "     comparable: true, source: s, metrics: {recall@10: 0.5}}\n")


@pytest.mark.parametrize("change, field, rule", [
    (("recall@10: 0.5", "recall@10: 67.5"), "anchors[0].metrics.recall@10", "in [0, 1]"),
    (("level: turn", "level: paragraph"), "anchors[0].level", "one of turn"),
    (("kind: published", "kind: rumour"), "anchors[0].kind", "one of published"),
    (("comparable: true", "comparable: yes please"), "anchors[0].comparable", "true or false"),
    (("source: s, ", ""), "anchors[0].source", "is required"),
    (("method: m", "method: m, typo: 1"), "anchors[0].typo", "unknown field"),
    (("version: 1", "version: 2"), "version", "must be 1"),
])
def test_a_malformed_anchor_is_named(tmp_path, change, field, rule):
    assert len(load_anchors(_write(tmp_path, GOOD))) == 1
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(DatasetError, match=re.escape(rule)) as info:
        load_anchors(path)
    assert info.value.field == field and info.value.file == str(path)


def _locomo_like(tiny_bench: Dataset) -> Dataset:
    """The tiny set as LoCoMo names it: card ``locomo``, categories 1-4 with their names."""
    codes = {"pets": 1, "travel": 2, "things": 3, "music": 4}
    qs = [dataclasses.replace(q, category=str(codes[q.category]),
                              meta={"category_name": CATEGORY_NAMES[codes[q.category]]})
          for q in tiny_bench.questions]
    return Dataset(dataclasses.replace(tiny_bench.card, name="locomo"), tiny_bench.items, qs)


@pytest.fixture
def locomo_outcome(tiny_bench, hashing_cfg, tmp_path):
    from memlab.bench.datasets.canonical import write_dataset

    folder = write_dataset(_locomo_like(tiny_bench), tmp_path / "locomo-like")
    return run_bench(dataset=str(folder), progress=False,
                     presets=[("hybrid_rrf", hashing_cfg.replace(**{"fusion.scorer": "rrf"})),
                              ("cosine", hashing_cfg.replace(**{"fusion.scorer": "cosine"}))])


def test_anchors_beside_a_run(locomo_outcome):
    table = load_anchors().beside(locomo_outcome)
    assert table.attrs == {"dataset": "locomo", "anchors": 4}
    assert list(table.index[:2]) == ["hybrid_rrf", "cosine"]
    assert list(table.columns) == ["kind", "preset", "comparable", "recall@5", "recall@10",
                                   "ndcg@10"]
    mine = locomo_outcome.results[0].aggregate.loc["all"]
    assert table.loc["hybrid_rrf", "recall@10"] == mine["recall@10"]
    dragon = table.loc["anchor: DRAGON (LoCoMo paper)"]
    assert dragon["recall@10"] == 0.675 and math.isnan(dragon["ndcg@10"])
    assert dragon["kind"] == "published"
    rrf = table.loc["anchor: cosine + BM25, reciprocal rank fusion (k = 60) (memlab DESIGN.md)"]
    assert rrf["preset"] == "hybrid_rrf" and rrf["ndcg@10"] == 0.453
    with pytest.raises(InvalidInput, match="outcome"):
        load_anchors().beside(pd.DataFrame())


def test_locomo_categories_are_shown_by_name(locomo_outcome):
    assert locomo_outcome.dataset.category_names() == {
        "1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
    fig = per_category_bars(locomo_outcome)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == \
        ["all", "multi-hop", "temporal", "open-domain", "single-hop"]
    # a frame has no dataset: names= labels it; without, the codes stay
    aggs = {r.name: r.aggregate for r in locomo_outcome.results}
    fig = per_category_bars(aggs, names={"1": "multi-hop"})
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][:3] == \
        ["all", "multi-hop", "2"]


def test_readme_tables_from_the_json_report(locomo_outcome, tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(locomo_outcome.to_json()), encoding="utf-8")
    assert read_report(tmp_path) == read_report(path) == json.loads(path.read_text())
    table = overall_table(path, anchors=load_anchors())
    agg = {r.name: r.aggregate.loc["all"] for r in locomo_outcome.results}
    assert table.loc["cosine", "mrr"] == pytest.approx(agg["cosine"]["mrr"], abs=1e-6)
    assert table.loc["anchor: DRAGON (LoCoMo paper)", "recall@5"] == 0.588
    text = to_markdown(table)
    lines = text.splitlines()
    assert lines[0] == "| preset | R@5 | R@10 | nDCG@10 | MRR |"
    assert lines[1] == "|---|---|---|---|---|"
    best = max(("hybrid_rrf", "cosine"), key=lambda p: round(agg[p]["mrr"], 3))
    row = next(line for line in lines if line.startswith(f"| {best} |"))
    assert row.endswith(f"| **{agg[best]['mrr']:.3f}** |") or \
        round(agg["cosine"]["mrr"], 3) == round(agg["hybrid_rrf"]["mrr"], 3)
    assert "| anchor: DRAGON (LoCoMo paper) | 0.588 | 0.675 |  |  |" in lines   # never bold
    per = per_category_table(path, names=locomo_outcome.dataset.category_names())
    assert list(per.index) == ["multi-hop", "temporal", "open-domain", "single-hop"]
    assert list(per.columns) == ["hybrid_rrf", "cosine", "n"] and list(per["n"]) == [1, 1, 1, 1]
    first = to_markdown(per, first="category", bold="row").splitlines()
    assert first[0] == "| category | hybrid_rrf | cosine | n |"
    assert first[2].endswith(" | 1 |")                  # n as a whole number
    with pytest.raises(InvalidInput, match="not a bench report"):
        read_report({"dataset": {}})


def test_bold_marks_the_best_of_a_column_or_a_row():
    frame = pd.DataFrame({"a": [0.1, 0.3], "b": [0.5, 0.2], "n": [4, 4]}, index=["x", "y"])
    assert to_markdown(frame).splitlines()[2:] == ["| x | 0.100 | **0.500** | 4 |",
                                                   "| y | **0.300** | 0.200 | 4 |"]
    assert to_markdown(frame, bold="row").splitlines()[2:] == ["| x | 0.100 | **0.500** | 4 |",
                                                               "| y | **0.300** | 0.200 | 4 |"]
    frame.loc["y", "a"] = 0.6
    assert to_markdown(frame, bold="row").splitlines()[3] == "| y | **0.600** | 0.200 | 4 |"
    assert to_markdown(frame, bold="column").splitlines()[2] == "| x | 0.100 | **0.500** | 4 |"
    assert "**" not in to_markdown(frame, bold=None)

"""memlab.bench.plots: line/bar counts, labels, values drawn, PNG output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from memlab.bench.metrics import aggregate, evaluate
from memlab.bench.plots import per_category_bars, recall_curve, save
from memlab.errors import InvalidInput

KS = (1, 2, 3)


def _per_query() -> pd.DataFrame:
    # q1: gold at rank 1; q2: gold at rank 3 -> recall@1 = 1/2, @2 = 1/2, @3 = 1
    return evaluate({"q1": ["g", "x", "y"], "q2": ["x", "y", "g"]}, {"q1": ["g"], "q2": ["g"]},
                    ks=KS, metrics=["recall"])


def _aggregate() -> pd.DataFrame:
    return aggregate(_per_query(), by=pd.Series({"q1": "single-hop", "q2": "temporal"}))


def test_recall_curve_one_run_from_per_query_frame() -> None:
    fig = recall_curve(_per_query(), ks=KS, label="bm25")
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    (line,) = ax.get_lines()
    assert line.get_label() == "bm25"
    assert list(line.get_xdata()) == [1, 2, 3]
    np.testing.assert_allclose(line.get_ydata(), [0.5, 0.5, 1.0])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bm25"]


def test_recall_curve_overlays_runs_and_uses_overall_row() -> None:
    runs = {"cosine": _aggregate(), "hybrid": _per_query()}
    fig = recall_curve(runs, ks=KS)
    lines = fig.axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["cosine", "hybrid"]
    np.testing.assert_allclose(lines[0].get_ydata(), [0.5, 0.5, 1.0])  # the "all" row


def test_per_category_bars_groups_runs() -> None:
    agg = _aggregate()
    other = agg.copy()
    other["recall@3"] = [0.25, 0.5, 0.0]
    fig = per_category_bars({"a": agg, "b": other}, metric="recall@3")
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 3  # 2 runs x (all, single-hop, temporal)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["all", "single-hop", "temporal"]
    assert [p.get_height() for p in ax.patches] == [1.0, 1.0, 1.0, 0.25, 0.5, 0.0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b"]


def test_per_category_bars_without_overall_and_missing_category() -> None:
    agg = _aggregate()
    partial = agg.drop(index="temporal")
    fig = per_category_bars({"a": agg, "b": partial}, metric="recall@1", include_overall=False)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["single-hop", "temporal"]
    assert len(ax.patches) == 2 + 1  # run b has no "temporal" bar rather than a zero bar


def test_draws_into_given_axes() -> None:
    fig = Figure()
    ax = fig.add_subplot()
    assert recall_curve(_per_query(), ks=KS, ax=ax) is fig


def test_save_writes_png(tmp_path: Path) -> None:
    out = save(recall_curve(_per_query(), ks=KS), tmp_path / "plots" / "recall.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input() -> None:
    with pytest.raises(InvalidInput, match="recall@20"):
        recall_curve(_per_query(), ks=(1, 20))
    with pytest.raises(InvalidInput, match="aggregate"):
        per_category_bars(_per_query(), metric="recall@1")
    with pytest.raises(InvalidInput, match="suffix"):
        save(Figure(), "no_suffix")

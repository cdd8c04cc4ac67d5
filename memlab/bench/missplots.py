"""Figures of "why did recall miss?": where the gold is lost per preset, and two runs' wins, ties
and losses per group.

Each function takes ``ax=`` (draws there and returns its figure) or makes a new figure with the Agg
canvas (never pyplot: no window, no global backend switched), names the dataset and the metric in
its title, and returns the :class:`matplotlib.figure.Figure`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from memlab.bench.trace import STAGE_DESCRIPTIONS, STAGES
from memlab.errors import InvalidInput

if TYPE_CHECKING:
    from memlab.bench.compare import Comparison
    from memlab.bench.misses import MissReport

__all__ = ["where_lost_bars", "win_tie_loss_bars", "STAGE_COLOURS", "OUTCOME_COLOURS"]

#: one colour per stage, the same in every figure
STAGE_COLOURS: dict[str, str] = dict(zip(STAGES, (
    "#7f7f7f", "#9467bd", "#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#bcbd22", "#1f77b4",
    "#2ca02c")))
OUTCOME_COLOURS = {"wins": "#2ca02c", "ties": "#c7c7c7", "losses": "#d62728"}


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _label(value) -> str:
    return " · ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _stacked(ax: Axes, table: pd.DataFrame, colours: dict[str, str], *, share: bool,
             names: dict[str, str] | None = None, counts: pd.Series | None = None) -> None:
    """Horizontal stacked bars, one per row of ``table`` (top to bottom), one segment per column;
    a segment of at least 6% of the axis is labelled with its value; ``counts``: each bar's
    number of questions, shown after its label."""
    y = np.arange(len(table))[::-1]
    left = np.zeros(len(table))
    span = float(table.sum(axis=1).max() or 1.0)
    for col in table.columns:
        values = table[col].to_numpy(dtype=float)
        ax.barh(y, values, left=left, color=colours[col], label=(names or {}).get(col, col),
                edgecolor="white", linewidth=0.5)
        for yi, x0, v in zip(y, left, values):
            if v / span >= 0.06:
                ax.text(x0 + v / 2, yi, f"{v:.0%}" if share else f"{v:g}", ha="center",
                        va="center", fontsize=8)
        left += values
    labels = [_label(i) for i in table.index]
    if counts is not None:
        labels = [f"{lab} (n={int(n)})" for lab, n in zip(labels, counts)]
    ax.set_yticks(y, labels)


def where_lost_bars(report: MissReport, *, ax: Axes | None = None, share: bool = True,
                    misses_only: bool = True, by: str | None = None,
                    figsize: tuple[float, float] | None = None) -> Figure:
    """Where each preset loses the gold: one stacked bar per preset (per preset and ``by`` group
    with ``by``), one segment per stage (:data:`memlab.bench.trace.STAGES`); with ``share``, each
    bar's label says how many questions (misses) it holds.

    Args:
        report: a :class:`memlab.bench.misses.MissReport` (``explain_misses(...)``).
        ax: draw into these axes instead of a new figure.
        share: segments as shares of the bar's questions (else counts).
        misses_only: only the missed questions (no ``found`` segment).
        by: a column of ``report.to_frame()`` (``category``, ``language``) for one bar per group.
        figsize: size in inches of a new figure.
    """
    from memlab.bench.misses import MissReport

    if not isinstance(report, MissReport):
        raise InvalidInput("report", "a MissReport (memlab.bench.misses.explain_misses)",
                           type(report).__name__)
    counts = report.summary(by=by, misses_only=misses_only)
    table = report.summary(by=by, share=share, misses_only=misses_only)
    table = table.loc[:, (table.fillna(0) > 0).any(axis=0)]   # stages nobody reaches: no legend
    fig, ax = _axes(ax, figsize or (8.0, 1.2 + 0.45 * max(1, len(table))))
    _stacked(ax, table.fillna(0.0), STAGE_COLOURS, share=share,
             names={s: f"{s}: {STAGE_DESCRIPTIONS[s]}" for s in STAGES},
             counts=counts.sum(axis=1) if share else None)
    ks = sorted({t.k for t in report.traces.values()})
    cut = "/".join(f"recall@{k}" for k in ks)
    what = "misses" if misses_only else "questions"
    ax.set_xlabel(f"share of the {what}" if share else what)
    if share:
        ax.set_xlim(0.0, 1.0)
    ax.set_title(f"{report.dataset}: where the gold is lost ({cut} {what}, per preset)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


def win_tie_loss_bars(comparison: Comparison, *, by: str | None = "category",
                      ax: Axes | None = None, share: bool = False,
                      figsize: tuple[float, float] | None = None) -> Figure:
    """Run b against run a: one stacked bar of wins, ties and losses (for b) overall and per
    ``by`` group (``category``, ``language``, ``gold_age``; None: overall only), the group's
    paired-test p-value at the bar's end.

    Args:
        comparison: a :class:`memlab.bench.compare.Comparison` (``memlab.compare(a, b)``).
        by: the grouping of :meth:`~memlab.bench.compare.Comparison.summary`.
        ax: draw into these axes instead of a new figure.
        share: segments as shares of the group's questions (else counts).
        figsize: size in inches of a new figure.
    """
    from memlab.bench.compare import Comparison

    if not isinstance(comparison, Comparison):
        raise InvalidInput("comparison", "a Comparison (memlab.compare)",
                           type(comparison).__name__)
    summ = comparison.summary(by=by)
    table = summ[["wins", "ties", "losses"]].astype(float)
    if share:
        table = table.div(summ["n"].astype(float), axis=0)
    fig, ax = _axes(ax, figsize or (8.0, 1.2 + 0.45 * len(table)))
    _stacked(ax, table, OUTCOME_COLOURS, share=share,
             names={"wins": f"{comparison.b} better", "ties": "tie",
                    "losses": f"{comparison.a} better"})
    end = table.sum(axis=1).to_numpy()
    for yi, x, p in zip(np.arange(len(table))[::-1], end, summ["p"]):
        ax.text(x, yi, f"  p={p:.3f}" if p >= 0.001 else "  p<0.001", va="center", fontsize=8)
    ax.set_xlim(0.0, (1.0 if share else float(end.max())) * 1.18)
    ax.set_xlabel("share of questions" if share else "questions")
    ax.set_title(f"{comparison.dataset or 'dataset not named'}: {comparison.b} vs "
                 f"{comparison.a}, {comparison.metric} per question")
    ax.legend(fontsize=8, loc="lower right", frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig

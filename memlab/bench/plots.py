"""Benchmark plots: recall@k curves and per-category bars, one run or several overlaid.

Figures are built with :class:`matplotlib.figure.Figure` and the Agg canvas directly, never through
``pyplot``: nothing opens a window, no global backend is switched, and no figure lingers in
pyplot's registry. In Jupyter a returned Figure renders inline once memlab is imported
(:mod:`memlab.notebook`).

Every function takes a benchmark's outcome (what :func:`memlab.bench` returns: every preset, the
dataset named in the title), one frame, or a ``{label: frame}`` dict (several runs overlaid), and
returns the Figure, its title naming the dataset (``dataset=``, or the outcome's) and the metric.
A frame is either the output of :func:`memlab.bench.metrics.aggregate` (its overall row is used,
or one row per category) or a per-query frame from :func:`memlab.bench.metrics.evaluate`
(averaged here). They are re-exported by :mod:`memlab.plots`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from memlab.errors import InvalidInput
from memlab.frames import labelled

__all__ = ["per_category_bars", "recall_curve", "save"]

Frames = pd.DataFrame | Mapping[str, pd.DataFrame]


def _is_outcome(data: object) -> bool:
    """A :class:`memlab.bench.run.BenchOutcome` (duck-typed: this module imports no run)."""
    return hasattr(data, "results") and hasattr(data, "dataset")


def _of_outcome(data, dataset: str | None) -> tuple[object, str | None]:
    """An outcome as ``{preset: aggregate}`` and its dataset's name; anything else as given."""
    if _is_outcome(data):
        return ({r.name: r.aggregate for r in data.results},
                dataset if dataset is not None else data.dataset.card.name)
    return data, dataset


def _title(ax: Axes, what: str, dataset: str | None) -> None:
    ax.set_title(f"{dataset}: {what}" if dataset else what)


def _is_aggregate(frame: pd.DataFrame, overall_label: str) -> bool:
    return "n" in frame.columns and overall_label in frame.index


def _overall(frame: pd.DataFrame, *, overall_label: str) -> pd.Series:
    if _is_aggregate(frame, overall_label):
        return frame.loc[overall_label]
    return frame.mean(axis=0, numeric_only=True)


def _axes(ax: Axes | None, *, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def recall_curve(data, *, ks: Sequence[int] | None = None, ax: Axes | None = None,
                 label: str | None = None, metric: str = "recall", overall_label: str = "all",
                 dataset: str | None = None, figsize: tuple[float, float] = (5.0, 3.5)
                 ) -> Figure:
    """``<metric>@k`` against ``k``: one line per run.

    Args:
        data: a benchmark outcome (every preset), an aggregate or per-query frame, or
            ``{label: frame}`` for several runs.
        ks: the cut-offs on the x axis; every ``<metric>@k`` column must exist (default: an
            outcome's ``bench.ks``; required with frames).
        ax: draw into these axes (their figure is returned) instead of a new figure.
        label: the legend label when ``data`` is a single frame (default ``"run"``).
        metric: the family plotted (``"recall"``, ``"ndcg"``, ``"recall_all"``, ...).
        overall_label: the overall row's label in an aggregate frame.
        dataset: the dataset's name in the title (default: an outcome's).
        figsize: size in inches of a new figure.
    """
    if ks is None and _is_outcome(data):
        ks = data.results[0].config.bench.ks
    if ks is None or len(ks) == 0:
        raise InvalidInput("ks", "must name at least one cut-off", ks)
    data, dataset = _of_outcome(data, dataset)
    runs = labelled(data, field="data", label=label or "run")
    columns = [f"{metric}@{k}" for k in ks]
    fig, ax = _axes(ax, figsize=figsize)
    for name, frame in runs.items():
        absent = [c for c in columns if c not in frame.columns]
        if absent:
            raise InvalidInput(f"data[{name!r}]", "lacks the metric columns plotted", absent)
        row = _overall(frame, overall_label=overall_label)
        ax.plot(list(ks), row[columns].to_numpy(dtype=float), marker="o", label=name)
    ax.set_xlabel("k")
    ax.set_ylabel(f"{metric}@k")
    _title(ax, f"{metric}@k", dataset)
    ax.set_xticks(list(ks))
    ax.set_ylim(0.0, 1.0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig


def per_category_bars(data, *, metric: str = "recall@10", ax: Axes | None = None,
                      label: str | None = None, include_overall: bool = True,
                      overall_label: str = "all", dataset: str | None = None,
                      figsize: tuple[float, float] = (7.0, 3.5),
                      group_width: float = 0.8, names: Mapping[str, str] | None = None
                      ) -> Figure:
    """Grouped bars of ``metric`` per category: one bar colour per run.

    Args:
        data: a benchmark outcome, an aggregate frame (rows: overall + categories), or
            ``{label: frame}``.
        metric: the column plotted.
        ax, label, overall_label, dataset, figsize: as in :func:`recall_curve`.
        include_overall: draw the overall row as the first group.
        group_width: the fraction of a category slot the bars of one group fill.
        names: category -> the label shown (LoCoMo numbers its categories: ``{"1":
            "multi-hop", ...}``); default for an outcome: its dataset's
            ``category_names()``, else the categories themselves.

    Categories are the union over runs, in first-seen order; a run without a category draws no
    bar there (it is not drawn as zero).
    """
    if names is None and _is_outcome(data):
        names = data.dataset.category_names()
    if names is not None and not isinstance(names, Mapping):
        raise InvalidInput("names", "a mapping of category -> label", type(names).__name__)
    labels = {str(k): str(v) for k, v in (names or {}).items()}
    data, dataset = _of_outcome(data, dataset)
    runs = labelled(data, field="data", label=label or "run")
    categories: dict[str, None] = {}
    for name, frame in runs.items():
        if metric not in frame.columns:
            raise InvalidInput(f"data[{name!r}]", "lacks the metric column plotted", metric)
        if not _is_aggregate(frame, overall_label):
            raise InvalidInput(f"data[{name!r}]", "must be an aggregate frame (an "
                               f"{overall_label!r} row and an 'n' column)", list(frame.columns))
        for cat in frame.index:
            if include_overall or cat != overall_label:
                categories.setdefault(str(cat), None)
    cats = list(categories)
    fig, ax = _axes(ax, figsize=figsize)
    x = np.arange(len(cats), dtype=float)
    width = group_width / len(runs)
    for i, (name, frame) in enumerate(runs.items()):
        values = frame[metric].rename(index=str)
        present = [j for j, c in enumerate(cats) if c in values.index]
        heights = [float(values[cats[j]]) for j in present]
        offset = (i - (len(runs) - 1) / 2) * width
        ax.bar(x[present] + offset, heights, width=width, label=name)
    ax.set_xticks(x, [labels.get(c, c) for c in cats], rotation=30, ha="right")
    ax.set_ylabel(metric)
    _title(ax, f"{metric} per category", dataset)
    ax.set_ylim(0.0, 1.0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    return fig


def save(fig: Figure, path: str | Path, *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix, e.g. ``.png``); create parent folders."""
    out = Path(path)
    if not out.suffix:
        raise InvalidInput("path", "needs a file suffix that names the format (.png, .svg, .pdf)",
                           str(path))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    return out

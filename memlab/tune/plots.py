"""Sweep plots: optimisation history, parameter importance, best config against the defaults, and
the Pareto front. Figures are built on the Agg canvas, never through ``pyplot`` (as
:mod:`memlab.bench.plots`); each function takes the sweep's result and ``ax=`` (draw there, its
figure returned) and returns a Figure (inline in Jupyter), titled with the dataset and the
metric. Re-exported by :mod:`memlab.plots` as ``sweep_history``, ``sweep_importance``,
``sweep_best_config`` and ``sweep_pareto``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from memlab.bench.plots import save  # noqa: F401 (re-exported: plots.save(fig, path))

if TYPE_CHECKING:
    from memlab.tune.report import SweepResult

__all__ = ["history", "importance", "best_config", "pareto", "save", "MIN_TRIALS_IMPORTANCE",
           "CAUTION_TRIALS_PER_KEY"]

log = logging.getLogger(__name__)

#: fewer finished trials than this: parameter importance is not estimated (a forest fitted on
#: a handful of points ranks noise), the figure says so. memlab's choice.
MIN_TRIALS_IMPORTANCE = 8
#: fewer finished trials than this many per searched key: the importance figure carries a
#: caution (a forest over few points per key ranks keys unreliably). memlab's choice.
CAUTION_TRIALS_PER_KEY = 10


def _figure(size=(6.4, 4.0), ax=None):
    """A new figure and its axes (laid out tight when drawn), or ``ax`` and its figure (whose
    layout is the caller's)."""
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=size, layout="tight")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _title(result: "SweepResult", what: str, metric: str) -> str:
    """``<dataset>: <metric>, <what>`` (the study on a second line)."""
    return f"{result.settings.get('dataset', '?')}: {metric}, {what}\n" \
           f"study {result.study.study_name}"


def _done(result: "SweepResult"):
    return result.trials[result.trials["state"] == "COMPLETE"].sort_values("number")


def history(result: "SweepResult", *, ax=None) -> Figure:
    """Each finished trial's value of the first objective by trial number, the best so far, and
    the preset's default as a horizontal line."""
    fig, ax = _figure(ax=ax)
    col = result.objective.columns[0]
    done = _done(result)
    ax.plot(done["number"], done[col], "o", ms=3, alpha=0.6, label="trial")
    if len(done):
        run = (np.minimum.accumulate(done[col].to_numpy())
               if result.objective.directions[0] == "minimize"
               else np.maximum.accumulate(done[col].to_numpy()))
        ax.step(done["number"], run, where="post", label="best so far")
    ax.axhline(result.default[col], color="grey", ls="--", label="preset default")
    ax.set_xlabel("trial")
    ax.set_ylabel(col)
    ax.set_title(_title(result, "optimisation history", col), fontsize="medium")
    ax.legend(loc="best", fontsize="small")
    return fig


def importance(result: "SweepResult", *, ax=None) -> Figure:
    """fANOVA importance of each key for the first objective (``optuna.importance``). With fewer
    than :data:`MIN_TRIALS_IMPORTANCE` finished trials, or values that never vary, the figure
    states why there are no bars instead; with fewer than :data:`CAUTION_TRIALS_PER_KEY` trials
    per searched key its x label carries a caution."""
    from optuna.importance import get_param_importances

    fig, ax = _figure((6.4, max(2.5, 0.3 * len(result.space.keys) + 1)), ax)
    done = _done(result)
    col = result.objective.columns[0]
    why = None
    if len(done) < MIN_TRIALS_IMPORTANCE:
        why = (f"{len(done)} finished trials: parameter importance needs at least "
               f"{MIN_TRIALS_IMPORTANCE}")
    elif done[col].nunique() < 2:
        why = f"every trial scored {col} = {done[col].iloc[0]:.4g}: nothing to attribute"
    if why is None:
        imp = get_param_importances(result.study, target=lambda t: t.values[0])
        keys = list(imp)[::-1]
        ax.barh(keys, [imp[k] for k in keys])
        label = f"importance for {col} (fANOVA, sums to 1)"
        need = CAUTION_TRIALS_PER_KEY * len(result.space.keys)
        if len(done) < need:
            label += (f"\ncaution: {len(done)} trials for {len(result.space.keys)} keys "
                      f"(under {need}): the ranking is unreliable")
        ax.set_xlabel(label)
    else:
        log.warning("parameter importance: %s", why)
        ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, transform=ax.transAxes)
        ax.set_axis_off()
    ax.set_title(_title(result, "parameter importance", col), fontsize="medium")
    return fig


def best_config(result: "SweepResult", *, ax=None) -> Figure:
    """Each numeric key of the space: the best trial's value beside the preset's default, as a
    fraction of the searched range (categorical keys are listed in the labels)."""
    flat = result.base.to_flat()
    best = (result.best or {}).get("params", {})
    rows = []
    for p in result.space.params:
        d, b = flat[p.key], best.get(p.key, flat[p.key])
        if p.kind == "categorical":
            rows.append((f"{p.key} ({d} -> {b})", np.nan, np.nan))
            continue
        span = lambda v: ((np.log(v) - np.log(p.low)) / (np.log(p.high) - np.log(p.low))  # noqa
                          if p.log else (v - p.low) / (p.high - p.low))
        rows.append((p.key, span(d) if (not p.log or d > 0) else np.nan, span(b)))
    fig, ax = _figure((6.4, max(2.5, 0.3 * len(rows) + 1)), ax)
    y = np.arange(len(rows))
    ax.barh(y - 0.2, [r[1] for r in rows], height=0.4, label="preset default")
    ax.barh(y + 0.2, [r[2] for r in rows], height=0.4, label="best trial")
    ax.set_yticks(y, [r[0] for r in rows], fontsize="small")
    ax.set_xlabel("position in the searched range (0 = low, 1 = high)")
    ax.set_title(_title(result, "best config against the preset",
                        result.objective.columns[0]), fontsize="medium")
    ax.legend(loc="best", fontsize="small")
    return fig


def pareto(result: "SweepResult", *, ax=None) -> Figure:
    """Every finished trial on the first two objectives, the Pareto front highlighted, and the
    preset's default."""
    cols = result.objective.columns
    fig, ax = _figure(ax=ax)
    done = _done(result)
    x, y = cols[min(1, len(cols) - 1)], cols[0]
    ax.plot(done[x], done[y], "o", ms=3, alpha=0.4, label="trial")
    front = sorted(result.pareto or [], key=lambda p: p["values"][x])
    if front:
        ax.plot([p["values"][x] for p in front], [p["values"][y] for p in front], "o-",
                color="C3", label="Pareto front")
    ax.plot([result.default[x]], [result.default[y]], "k*", ms=10, label="preset default")
    ax.set_xlabel(x + (" (minimised)" if result.objective.directions[cols.index(x)] ==
                       "minimize" else ""))
    ax.set_ylabel(y)
    ax.set_title(_title(result, "Pareto front", " vs ".join(cols[:2])), fontsize="medium")
    ax.legend(loc="best", fontsize="small")
    return fig

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

__all__ = ["history", "importance", "best_config", "pareto", "heatmap", "heatmap_table", "save",
           "MIN_TRIALS_IMPORTANCE", "CAUTION_TRIALS_PER_KEY", "GRID_VALUES_MAX"]

log = logging.getLogger(__name__)

#: fewer finished trials than this: parameter importance is not estimated (a forest fitted on
#: a handful of points ranks noise), the figure says so. memlab's choice.
MIN_TRIALS_IMPORTANCE = 8
#: fewer finished trials than this many per searched key: the importance figure carries a
#: caution (a forest over few points per key ranks keys unreliably). memlab's choice.
CAUTION_TRIALS_PER_KEY = 10
#: a key whose applied values number at most this many (and at most ``bins``) is drawn one cell
#: per value (a grid sweep's points) instead of binned. memlab's choice.
GRID_VALUES_MAX = 12


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


def _edges(values: np.ndarray, bins: int, log: bool) -> tuple[np.ndarray, np.ndarray, bool]:
    """(cell edges, cell centres, whether each cell is one value) for one key's applied values:
    one cell per distinct value when there are few (a grid), else ``bins`` equal bins of the
    range (equal in log space for a log key)."""
    uniq = np.unique(values)
    if len(uniq) <= min(bins, GRID_VALUES_MAX):
        pos = np.log(uniq) if log else uniq.astype(float)
        if len(pos) == 1:
            mids = np.array([pos[0] - 0.5, pos[0] + 0.5]) if not log else \
                np.array([pos[0] - 0.1, pos[0] + 0.1])
        else:
            inner = (pos[1:] + pos[:-1]) / 2
            mids = np.concatenate([[pos[0] - (inner[0] - pos[0])], inner,
                                   [pos[-1] + (pos[-1] - inner[-1])]])
        edges = np.exp(mids) if log else mids
        return edges, uniq.astype(float), True
    lo, hi = float(uniq[0]), float(uniq[-1])
    edges = np.geomspace(lo, hi, bins + 1) if log else np.linspace(lo, hi, bins + 1)
    centres = np.sqrt(edges[1:] * edges[:-1]) if log else (edges[1:] + edges[:-1]) / 2
    return edges, centres, False


def _cell_of(values: np.ndarray, edges: np.ndarray, centres: np.ndarray, exact: bool
             ) -> np.ndarray:
    if exact:
        return np.searchsorted(centres, values)
    return np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)


def heatmap_table(result: "SweepResult", x: str, y: str, *, metric: str | None = None,
                  bins: int = 8, agg: str = "best"):
    """The numbers :func:`heatmap` draws: one row per cell with trials, columns ``x_lo``,
    ``x_hi``, ``y_lo``, ``y_hi`` (the cell's edges, in applied units), ``x``, ``y`` (its centre;
    a grid's value), ``value`` (the best trial's metric in the cell, or the mean with
    ``agg="mean"``) and ``trials``. See :func:`heatmap` for the cells."""
    import pandas as pd

    from memlab.errors import InvalidInput

    params = {p.key: p for p in result.space.params}
    for name, key in (("x", x), ("y", y)):
        if key not in params:
            raise InvalidInput(name, f"a key of the space {result.space.name!r}: "
                               f"{', '.join(params)}", key)
        if params[key].kind == "categorical":
            raise InvalidInput(name, "a float or int key (a heatmap's axes are numbers); "
                               f"{key} is categorical", key)
    if x == y:
        raise InvalidInput("y", "another key than x", y)
    col = metric or result.objective.columns[0]
    if col not in result.objective.columns:
        raise InvalidInput("metric", f"an objective column of the sweep: "
                           f"{', '.join(result.objective.columns)}", metric)
    if agg not in ("best", "mean"):
        raise InvalidInput("agg", "best or mean", agg)
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise InvalidInput("bins", "an integer >= 1", bins)
    done = _done(result)
    done = done[np.isfinite(done[col].to_numpy(float))]
    if done.empty:
        raise InvalidInput("result", "has no finished trial to draw", 0)
    xv, yv = done[x].to_numpy(float), done[y].to_numpy(float)
    xe, xc, xg = _edges(xv, bins, params[x].log and xv.min() > 0)
    ye, yc, yg = _edges(yv, bins, params[y].log and yv.min() > 0)
    frame = pd.DataFrame({"i": _cell_of(xv, xe, xc, xg), "j": _cell_of(yv, ye, yc, yg),
                          "v": done[col].to_numpy(float)})
    minimise = result.objective.directions[result.objective.columns.index(col)] == "minimize"
    how = "mean" if agg == "mean" else ("min" if minimise else "max")
    cells = frame.groupby(["i", "j"]).agg(value=("v", how), trials=("v", "size")).reset_index()
    out = pd.DataFrame({"x_lo": xe[cells["i"]], "x_hi": xe[cells["i"] + 1],
                        "y_lo": ye[cells["j"]], "y_hi": ye[cells["j"] + 1],
                        "x": xc[cells["i"]], "y": yc[cells["j"]],
                        "value": cells["value"].to_numpy(), "trials": cells["trials"].to_numpy()})
    out.attrs = {"x": x, "y": y, "metric": col, "agg": agg, "x_edges": xe, "y_edges": ye,
                 "x_grid": xg, "y_grid": yg, "cells": (len(xe) - 1, len(ye) - 1),
                 "x_log": params[x].log and xv.min() > 0, "y_log": params[y].log and yv.min() > 0}
    return out


def heatmap(result: "SweepResult", x: str, y: str, *, metric: str | None = None, bins: int = 8,
            agg: str = "best", annotate: bool = True, ax=None) -> Figure:
    """The metric over two keys of the space, in the units the configuration applies: the trial
    table's applied values (after the space's constraints: a ``normalise``d weight as it was
    scored, an ``order``ed half-life as mapped), never the sampled ones Optuna records.

    Each cell holds the trials whose two values fall in it: its colour is the best trial's value
    of ``metric`` (default the first objective; ``agg="mean"``: their mean), its text the value
    and the count. A key with few distinct values (a grid sweep: at most ``bins`` and
    :data:`GRID_VALUES_MAX`) gets one cell per value; otherwise its applied range is cut into
    ``bins`` equal bins (equal ratios for a ``log`` key, drawn on a log axis). Cells without a
    trial stay blank. The preset's default (star) and the best trial (circle) are marked.
    :func:`heatmap_table` returns the cells."""
    from matplotlib.colors import Normalize

    cells = heatmap_table(result, x, y, metric=metric, bins=bins, agg=agg)
    a = cells.attrs
    nx, ny = a["cells"]
    grid = np.full((ny, nx), np.nan)
    xi = np.searchsorted(a["x_edges"], cells["x_lo"].to_numpy())
    yi = np.searchsorted(a["y_edges"], cells["y_lo"].to_numpy())
    grid[yi, xi] = cells["value"].to_numpy()
    fig, ax = _figure((6.4, 4.8), ax)
    vals = cells["value"].to_numpy()
    mesh = ax.pcolormesh(a["x_edges"], a["y_edges"], np.ma.masked_invalid(grid),
                         cmap="viridis", norm=Normalize(vals.min(), vals.max()))
    fig.colorbar(mesh, ax=ax, label=f"{a['metric']} ({'mean' if agg == 'mean' else 'best'} "
                 "trial per cell)")
    if a["x_log"]:
        ax.set_xscale("log")
    if a["y_log"]:
        ax.set_yscale("log")
    if annotate and len(cells) <= 100:
        mid = (vals.min() + vals.max()) / 2
        for _, c in cells.iterrows():
            ax.text(c["x"], c["y"], f"{c['value']:.3f}\nn={int(c['trials'])}", ha="center",
                    va="center", fontsize="x-small",
                    color="black" if c["value"] > mid else "white")
    flat = result.base.to_flat()
    ax.plot([flat[x]], [flat[y]], "*", color="red", ms=12, mec="white", label="preset default")
    best = (result.best or {}).get("params", {})
    if x in best and y in best:
        ax.plot([best[x]], [best[y]], "o", mfc="none", mec="red", ms=12, mew=2,
                label=f"best trial #{result.best['number']}")
    xs, ys = [*a["x_edges"][[0, -1]], flat[x]], [*a["y_edges"][[0, -1]], flat[y]]
    ax.set_xlim(min(xs), max(xs))     # the cells, and the default where it lies outside them
    ax.set_ylim(min(ys), max(ys))
    ax.set_xlabel(f"{x} (applied)")
    ax.set_ylabel(f"{y} (applied)")
    ax.legend(loc="upper left", bbox_to_anchor=(0, -0.12), ncol=2, fontsize="small",
              frameon=False)
    ax.set_title(_title(result, f"over {x} and {y}", a["metric"]), fontsize="medium")
    return fig

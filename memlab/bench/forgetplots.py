"""Forgetting figures (issue 20): the curves of :mod:`memlab.forgetting` under a configuration,
recall against the age of the gold memory (:mod:`memlab.bench.goldage`), and the forgetting fit's
validation (:mod:`memlab.tune.forgetfit`).

One function per figure: each takes ``ax=`` (draws there and returns its figure) or makes its own
figure with the Agg canvas (no pyplot, nothing global; a returned Figure renders inline in
Jupyter), and names in its title what it shows and of what: the configuration (``label``) for
the curves, the dataset and metric for the measured ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from memlab import forgetting as fg
from memlab.bench.goldage import AGE_BINS, bin_labels, wilson_interval
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

#: a :class:`memlab.tune.forgetfit.ForgettingFit` (tune sits above bench: not imported here)
ForgettingFit = Any

__all__ = ["retention_plot", "half_life_plot", "eligibility_plot", "cue_reactivation_plot",
           "recall_by_age_plot", "forgetting_fit_plot", "calibration_plot"]

VARY = {"importance": (0.2, 0.5, 0.9), "emotion": (0.0, 0.5, 1.0), "refs": (0, 3, 10)}
_SPAN = {"long_term": 365.0, "short_term": 60.0, "permanent": 365.0}


def _axes(ax: Axes | None, figsize: tuple[float, float] = (5.6, 3.6)) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _layer_name(layer: str | int) -> str:
    code = fg.layer_code(layer)
    return next(n for n, c in fg.LAYER_CODES.items() if c == code)


def _days(days: Sequence[float] | None, layer: str) -> np.ndarray:
    d = np.linspace(0.0, _SPAN[layer], 241) if days is None else np.asarray(days, float)
    if d.ndim != 1 or len(d) < 2:
        raise InvalidInput("days", "at least two days to draw a curve over", days)
    return d


def retention_plot(cfg: MemlabConfig, *, vary: str = "importance",
                   levels: Sequence[float] | None = None, layer: str | int = "long_term",
                   importance: float = 0.5, emotion: float = 0.0, refs: float = 0.0,
                   days: Sequence[float] | None = None, label: str = "spec defaults",
                   ax: Axes | None = None) -> Figure:
    """Retention over days since the last access, one line per level of ``vary``
    (``importance``, ``emotion`` or ``refs``; the other two as given), each marked at its
    effective half-life."""
    if vary not in VARY:
        raise InvalidInput("vary", f"must be one of {', '.join(VARY)}", vary)
    name = _layer_name(layer)
    d = _days(days, name)
    fig, ax = _axes(ax)
    for i, level in enumerate(VARY[vary] if levels is None else levels):
        kw = {"importance": importance, "emotion": emotion, "refs": refs, vary: level}
        r = fg.forgetting_curve(d, layer=name, cfg=cfg, **kw)
        h = float(fg.half_life(layer=name, cfg=cfg, **kw))
        ax.plot(d, r, color=f"C{i}", label=f"{vary} {level:g} (half-life {h:.1f} d)")
        if h <= d[-1]:
            ax.plot([h], [0.5], "o", color=f"C{i}", markersize=4)
    ax.axhline(cfg.forgetting.eligibility_threshold, color="grey", linestyle=":", linewidth=1,
               label=f"eligibility threshold {cfg.forgetting.eligibility_threshold:g}")
    ax.set(xlabel="days since last access", ylabel="retention", ylim=(0, 1.02),
           title=f"Retention over days: {name.replace('_', '-')} layer by {vary}\n({label})")
    ax.legend(fontsize=7)
    return fig


def half_life_plot(cfg: MemlabConfig, *, emotions: Sequence[float] = (0.0, 1.0),
                   label: str = "spec defaults", ax: Axes | None = None) -> Figure:
    """The effective half-life (days, log scale) against importance, per layer (colour) and
    emotion intensity (line style)."""
    imp = np.linspace(0.0, 1.0, 101)
    fig, ax = _axes(ax)
    styles = ["-", "--", ":", "-."]
    for i, name in enumerate(("long_term", "short_term")):
        for j, emo in enumerate(emotions):
            h = fg.half_life(importance=imp, emotion=emo, layer=name, cfg=cfg)
            ax.plot(imp, h, color=f"C{i}", linestyle=styles[j % len(styles)],
                    label=f"{name.replace('_', '-')}, emotion {emo:g}")
    ax.set_yscale("log")
    ax.set(xlabel="importance", ylabel="effective half-life (days)",
           title=f"Effective half-life by importance and layer\n({label})")
    ax.legend(fontsize=7)
    return fig


def eligibility_plot(cfg: MemlabConfig, *, importance: float = 0.5,
                     layer: str | int = "short_term", relevances: Sequence[float] = (0.5, 0.85),
                     days: Sequence[float] | None = None, label: str = "spec defaults",
                     ax: Axes | None = None) -> Figure:
    """Retention and eligibility over days: a memory may be retrieved while its retention is at
    or above ``eligibility_threshold``, afterwards only by a cue of relevance at or above
    ``eligibility_relevance`` (one step line per cue relevance, 1 = eligible)."""
    name = _layer_name(layer)
    d = _days(days, name)
    fig, ax = _axes(ax)
    ax.plot(d, fg.forgetting_curve(d, importance=importance, layer=name, cfg=cfg),
            color="black", label=f"retention (importance {importance:g})")
    f = cfg.forgetting
    ax.axhline(f.eligibility_threshold, color="grey", linestyle=":", linewidth=1,
               label=f"threshold {f.eligibility_threshold:g}")
    for i, rel in enumerate(relevances):
        ok = fg.eligibility_curve(d, relevance=rel, importance=importance, layer=name, cfg=cfg)
        ax.step(d, ok.astype(float) - 0.015 * i, where="post", color=f"C{i}",
                label=f"eligible, cue relevance {rel:g}")
    last = float(fg.forgotten_after(importance=importance, layer=name, cfg=cfg))
    if math.isfinite(last) and last <= d[-1]:
        ax.axvline(last, color="grey", linestyle="--", linewidth=1)
        ax.annotate(f"forgotten after {last:.1f} d", (last, 0.8), fontsize=7,
                    xytext=(4, 0), textcoords="offset points")
    ax.set(xlabel="days since last access", ylabel="retention / eligible", ylim=(-0.05, 1.05),
           title=f"Eligibility over days: {name.replace('_', '-')} layer, importance "
                 f"{importance:g}\n({label})")
    ax.legend(fontsize=7, loc="center right")
    return fig


def cue_reactivation_plot(cfg: MemlabConfig, *, relevances: Sequence[float] = (0.3, 0.6, 0.9),
                          importance: float = 0.5, layer: str | int = "short_term",
                          days: Sequence[float] | None = None, label: str = "spec defaults",
                          ax: Axes | None = None) -> Figure:
    """The two score terms retention enters (§8) over days: the cue reactivation
    ``min(relevance * (1 - retention) * factor, cap)`` per cue relevance, and the resident
    boost ``retention * resident_boost_cap`` (dashed)."""
    name = _layer_name(layer)
    d = _days(days, name)
    r = fg.forgetting_curve(d, importance=importance, layer=name, cfg=cfg)
    fig, ax = _axes(ax)
    for i, rel in enumerate(relevances):
        ax.plot(d, fg.cue_reactivation(np.full(d.shape, rel), r, cfg), color=f"C{i}",
                label=f"cue reactivation, relevance {rel:g}")
    ax.plot(d, r * cfg.fusion.resident_boost_cap, color="black", linestyle="--",
            label="resident boost")
    ax.axhline(cfg.fusion.cue_reactivation_cap, color="grey", linestyle=":", linewidth=1,
               label=f"cue cap {cfg.fusion.cue_reactivation_cap:g}")
    ax.set(xlabel="days since last access", ylabel="score term",
           title=f"Cue reactivation and resident boost over days\n{name.replace('_', '-')} "
                 f"layer, importance {importance:g} ({label})")
    ax.legend(fontsize=7, loc="center right")
    return fig


def recall_by_age_plot(table: pd.DataFrame, *, dataset: str, ax: Axes | None = None) -> Figure:
    """:func:`memlab.bench.goldage.recall_by_age`'s table: per bin of the gold memory's age, the
    mean metric with its interval, one series per preset side by side; each bin's question
    count under its label."""
    need = {"preset", "bin", "n", "mean", "low", "high"}
    if not isinstance(table, pd.DataFrame) or need - set(table.columns):
        raise InvalidInput("table", "must be recall_by_age's frame (columns "
                           f"{', '.join(sorted(need))})", type(table).__name__)
    bins = list(dict.fromkeys(table["bin"]))
    presets = list(dict.fromkeys(table["preset"]))
    fig, ax = _axes(ax, figsize=(6.4, 3.8))
    width = 0.7 / max(1, len(presets))
    for i, name in enumerate(presets):
        t = table[(table["preset"] == name) & (table["n"] > 0)]
        x = np.array([bins.index(b) for b in t["bin"]]) + (i - (len(presets) - 1) / 2) * width
        m = t["mean"].to_numpy()
        ax.errorbar(x, m, yerr=[m - t["low"].to_numpy(), t["high"].to_numpy() - m], fmt="o-",
                    color=f"C{i}", capsize=2, markersize=4, linewidth=1, label=name)
    counts = table.drop_duplicates("bin").set_index("bin")["n"]
    ax.set_xticks(range(len(bins)), [f"{b}\nn={int(counts[b])}" for b in bins], fontsize=7)
    metric = table.attrs.get("metric", "metric")
    how = table.attrs.get("interval", "")
    ax.set(xlabel="age of the gold memory when asked (days)", ylabel=metric, ylim=(0, 1.02),
           title=f"{dataset}: {metric} by age of the gold memory"
                 + (f"\n(intervals: {how} {table.attrs.get('confidence', 0.95):.0%})"
                    if how else ""))
    ax.legend(fontsize=7)
    return fig


def _binned(ev: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    edges = np.asarray(AGE_BINS)
    which = np.searchsorted(edges, ev["age_days"].to_numpy(), side="right") - 1
    labels = bin_labels(edges)
    g = ev.assign(bin=[labels[i] for i in which], pos=which).groupby("pos")
    out = g[list(columns)].mean()
    out["n"] = g.size()
    out["bin"] = [labels[i] for i in out.index]
    out["age"] = g["age_days"].median()
    return out


def forgetting_fit_plot(fit: ForgettingFit, *, dataset: str, held_out: bool = True,
                        ax: Axes | None = None) -> Figure:
    """Recall of the gold against its age (held-out events, or all): observed per age bin with
    Wilson intervals, and the mean predicted recall of the fitted and of the spec's curve."""
    ev = fit.events[fit.events["test"]] if held_out else fit.events
    t = _binned(ev, ["y", "p_fitted", "p_spec"])
    fig, ax = _axes(ax, figsize=(6.4, 3.8))
    ci = np.array([wilson_interval(m, int(n)) for m, n in zip(t["y"], t["n"])])
    x = np.arange(len(t))
    ax.errorbar(x, t["y"], yerr=[t["y"] - ci[:, 0], ci[:, 1] - t["y"]], fmt="o", color="black",
                capsize=2, markersize=4, label="observed")
    fitted = ", ".join(f"{k.split('.')[-1].replace('_half_life_days', '')} {v:.1f} d"
                       for k, v in fit.theta.items())
    ax.plot(x, t["p_fitted"], "-", color="C0", label=f"fitted ({fitted})")
    spec = ", ".join(f"{k.split('.')[-1].replace('_half_life_days', '')} {v:g} d"
                     for k, v in fit.params["spec"].items())
    ax.plot(x, t["p_spec"], "--", color="C1", label=f"spec ({spec})")
    ax.set_xticks(x, [f"{b}\nn={int(n)}" for b, n in zip(t["bin"], t["n"])], fontsize=7)
    metric = fit.settings.get("metric") or "recall"
    ax.set(xlabel="age of the gold memory when asked (days)", ylabel=f"{metric}",
           ylim=(0, 1.02), title=f"{dataset}: {metric} by age of the gold memory\nforgetting "
                                 f"fit, {'held-out' if held_out else 'all'} questions")
    ax.legend(fontsize=7)
    return fig


def calibration_plot(fit: ForgettingFit, *, dataset: str, bins: int = 8,
                     ax: Axes | None = None) -> Figure:
    """Observed recall against predicted recall on the held-out events (quantile bins of the
    prediction), for the fitted and the spec's curve; the diagonal is perfect calibration."""
    if bins < 2:
        raise InvalidInput("bins", "at least two bins", bins)
    ev = fit.events[fit.events["test"]]
    fig, ax = _axes(ax, figsize=(4.4, 4.0))
    for i, (col, name) in enumerate((("p_fitted", "fitted"), ("p_spec", "spec"))):
        q = pd.qcut(ev[col], bins, duplicates="drop")
        g = ev.groupby(q, observed=True)
        ax.plot(g[col].mean(), g["y"].mean(), "o-", color=f"C{i}", markersize=4,
                label=f"{name} (log loss {fit.validation.loc[name, 'log_loss']:.3f})")
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    metric = fit.settings.get("metric") or "recall"
    ax.set(xlabel=f"predicted {metric}", ylabel=f"observed {metric}", xlim=(0, 1), ylim=(0, 1),
           title=f"{dataset}: {metric}, calibration of\nthe forgetting fit (held out)")
    ax.legend(fontsize=7)
    return fig

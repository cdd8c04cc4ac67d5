"""``memlab.plots``: every figure memlab draws, in one namespace.

Each figure is one function in the module of its area (``memlab/bench/plots.py``,
``memlab/tune/plots.py``, ...), re-exported here under the name below. Each takes ``ax=`` (draw
into those axes; their figure is returned) or makes its own figure, returns a
:class:`matplotlib.figure.Figure` titled with the dataset and the metric, and never touches
``pyplot``: the command line stays headless, and in Jupyter a returned figure displays inline
without ``%matplotlib`` (:mod:`memlab.notebook`). ``save(fig, path)`` writes one (PNG, SVG, PDF).

Adding a figure is one line in :data:`FIGURES`: ``"name": "module:function"``. A function is
imported when first used, so ``import memlab.plots`` loads neither matplotlib nor the modules.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

#: name in memlab.plots -> "module:function" where it lives
FIGURES: dict[str, str] = {
    # benchmarks (memlab.bench, memlab bench): a BenchOutcome, an aggregate or per-query frame
    "recall_curve": "memlab.bench.plots:recall_curve",
    "per_category_bars": "memlab.bench.plots:per_category_bars",
    # sweeps (memlab.sweep, memlab sweep): a SweepResult
    "sweep_history": "memlab.tune.plots:history",
    "sweep_importance": "memlab.tune.plots:importance",
    "sweep_best_config": "memlab.tune.plots:best_config",
    "sweep_pareto": "memlab.tune.plots:pareto",
    "sweep_heatmap": "memlab.tune.plots:heatmap",
    # learned weights (memlab fit): permutation importance over folds
    "fit_importance": "memlab.tune.crossfit:importance_figure",
    # why recall missed (memlab.compare, memlab explain-misses)
    "win_tie_loss_bars": "memlab.bench.missplots:win_tie_loss_bars",
    "where_lost_bars": "memlab.bench.missplots:where_lost_bars",
    # forgetting: the retention curves of the config, recall by the gold's age, the fit
    "retention_plot": "memlab.bench.forgetplots:retention_plot",
    "half_life_plot": "memlab.bench.forgetplots:half_life_plot",
    "eligibility_plot": "memlab.bench.forgetplots:eligibility_plot",
    "cue_reactivation_plot": "memlab.bench.forgetplots:cue_reactivation_plot",
    "recall_by_age_plot": "memlab.bench.forgetplots:recall_by_age_plot",
    "forgetting_fit_plot": "memlab.bench.forgetplots:forgetting_fit_plot",
    "calibration_plot": "memlab.bench.forgetplots:calibration_plot",
    # a chat session's turns; a consolidation plan (Familiars §5.9)
    "chat_turns": "memlab.chat:turns_plot",
    "consolidation_plan": "memlab.lifecycle.plots:consolidation_plan",
    # the VRAM gate: a trace's or a simulation's timeline, the policies compared
    "vram_timeline": "memlab.vram.plots:vram_timeline",
    "vram_policies": "memlab.vram.plots:vram_policies",
}

#: helpers beside the figures
HELPERS: dict[str, str] = {"save": "memlab.bench.plots:save"}

__all__ = [*FIGURES, *HELPERS]


def resolve(name: str) -> Callable[..., Any]:
    """The function ``name`` stands for (imported now)."""
    where = FIGURES.get(name) or HELPERS.get(name)
    if where is None:
        raise AttributeError(f"module 'memlab.plots' has no attribute {name!r}; its figures: "
                             f"{', '.join(FIGURES)}")
    module, attr = where.split(":")
    return getattr(importlib.import_module(module), attr)


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__"):
        raise AttributeError(name)
    fn = resolve(name)
    globals()[name] = fn
    return fn


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

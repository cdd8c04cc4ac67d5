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
    # learned weights (memlab fit): permutation importance over folds
    "fit_importance": "memlab.tune.crossfit:importance_figure",
    # the VRAM gate: a trace's residency timeline
    "vram_timeline": "memlab.vram.trace:plot_timeline",
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

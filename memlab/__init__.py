"""memlab: a research toolkit for the long-term memory of conversational AI agents.

The notebook-facing API (each imported on first use, so ``import memlab`` stays fast):

- ``memlab.open_store(path, *, config=..., clock=..., ...)``: a memory store
  (:func:`memlab.api.open_store`);
- ``memlab.bench(dataset, *, presets=..., track=..., ...)``: ``memlab bench`` in Python
  (:func:`memlab.bench.workbench.bench`; ``memlab.bench`` is also the benchmark package);
- ``memlab.sweep(dataset, *, space=..., trials=..., track=..., ...)``: ``memlab sweep`` in Python
  (:func:`memlab.workbench.sweep`);
- ``memlab.plots``: every figure, one namespace (:mod:`memlab.plots`);
- ``memlab.MemlabConfig``, ``memlab.load_config``, the clocks and memlab's errors.

Every result with rows has ``.to_frame()``. Where caches, results and ``mlflow.db`` live: the
memlab home (:mod:`memlab.home`, ``memlab where``).
"""

from __future__ import annotations

import importlib

from memlab.version import __version__
from memlab.notebook import show_figures_inline

#: name -> (module, attribute; None: the module itself), imported on first use
_LAZY: dict[str, tuple[str, str | None]] = {
    "open_store": ("memlab.api", "open_store"),
    "bench": ("memlab.bench", None),          # a package you can call: memlab.bench(...)
    "sweep": ("memlab.workbench", "sweep"),
    "plots": ("memlab.plots", None),
    "ChatSession": ("memlab.chat", "ChatSession"),
    "MemlabConfig": ("memlab.config", "MemlabConfig"),
    "load_config": ("memlab.config", "load_config"),
    "FixedClock": ("memlab.clock", "FixedClock"),
    "ReplayClock": ("memlab.clock", "ReplayClock"),
    "SystemClock": ("memlab.clock", "SystemClock"),
    **{name: ("memlab.errors", name) for name in (
        "MemlabError", "ConfigError", "InvalidInput", "InvalidCell", "StoreError",
        "CorruptStore", "EmbeddingUnavailable", "DatasetError")},
}


def compare(run_a, run_b, *, metric: str = "recall@10", dataset: str | None = None,
            method: str | None = None, resamples: int | None = None, seed: int | None = None):
    """Compare two benchmark runs question by question: the gold's best rank under each,
    win/tie/loss on ``metric`` and the paired test, filterable by category, language and gold
    age; see :func:`memlab.bench.compare.compare` (what a run may be: a bench result, a results
    folder or JSON report, a per-query frame)."""
    from memlab.bench.compare import compare as _compare

    return _compare(run_a, run_b, metric=metric, dataset=dataset, method=method,
                    resamples=resamples, seed=seed)


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'memlab' has no attribute {name!r}")
    module = importlib.import_module(where[0])
    value = module if where[1] is None else getattr(module, where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [*_LAZY, "compare", "__version__"]

# In a Jupyter kernel, a matplotlib Figure that memlab returns is shown as a PNG (no %matplotlib
# needed); anywhere else this does nothing (memlab.notebook).
show_figures_inline()

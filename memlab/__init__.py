"""memlab: a research toolkit for the long-term memory of conversational AI agents."""

from __future__ import annotations

from memlab.version import __version__

from memlab.clock import FixedClock, ReplayClock, SystemClock  # noqa: E402
from memlab.config import MemlabConfig, load_config  # noqa: E402
from memlab.errors import (ConfigError, CorruptStore, DatasetError, EmbeddingUnavailable,  # noqa: E402
                           InvalidCell, InvalidInput, MemlabError, StoreError)


def open_store(*args, **kwargs):
    """Open (or create) a memory store; see :func:`memlab.api.open_store`."""
    from memlab.api import open_store as _open

    return _open(*args, **kwargs)


def sweep(**kwargs):
    """Tune a preset's weights on a labelled dataset; see :func:`memlab.tune.sweep.sweep`.
    Returns a result whose ``.trials`` is the trial table (a DataFrame) and ``.study`` the
    Optuna study."""
    from memlab.tune.sweep import sweep as _sweep

    return _sweep(**kwargs)


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
    if name == "ChatSession":   # imported on first use: it pulls in the store and recall
        from memlab.chat import ChatSession

        return ChatSession
    raise AttributeError(f"module 'memlab' has no attribute {name!r}")


__all__ = ["open_store", "sweep", "compare", "ChatSession", "MemlabConfig", "load_config", "FixedClock", "ReplayClock",
           "SystemClock",
           "MemlabError", "ConfigError", "InvalidInput", "InvalidCell", "StoreError",
           "CorruptStore", "EmbeddingUnavailable", "DatasetError", "__version__"]

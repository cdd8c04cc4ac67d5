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


def __getattr__(name: str):
    if name == "ChatSession":   # imported on first use: it pulls in the store and recall
        from memlab.chat import ChatSession

        return ChatSession
    raise AttributeError(f"module 'memlab' has no attribute {name!r}")


__all__ = ["open_store", "sweep", "ChatSession", "MemlabConfig", "load_config", "FixedClock", "ReplayClock",
           "SystemClock",
           "MemlabError", "ConfigError", "InvalidInput", "InvalidCell", "StoreError",
           "CorruptStore", "EmbeddingUnavailable", "DatasetError", "__version__"]

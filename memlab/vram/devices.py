"""Where the gate reads how much memory there is: the :class:`Device` protocol and the
:class:`SimulatedDevice` (a GPU of configured capacity, used when there is none and by the
simulator). Real devices (NVML, torch) live in :mod:`memlab.vram.nvml`."""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from memlab.errors import InvalidInput


@runtime_checkable
class Device(Protocol):
    """A GPU's memory as the gate sees it (MB = 2**20 bytes)."""

    name: str
    simulated: bool

    def total_mb(self) -> float: ...

    def free_mb(self) -> float: ...

    def on_load(self, model_id: str, mb: float) -> None:
        """The gate loaded ``model_id`` (estimated ``mb``); a real device ignores it."""

    def on_unload(self, model_id: str) -> None:
        """The gate unloaded ``model_id``; a real device ignores it."""


class SimulatedDevice:
    """A device of ``capacity_mb``: free = capacity - the MB of what the gate loaded. It never
    refuses a load, so a gate that overcommits shows as negative free memory (the simulator and
    the tests measure it: time over capacity)."""

    simulated = True

    def __init__(self, capacity_mb: float, *, name: str = "simulated") -> None:
        if not capacity_mb > 0:
            raise InvalidInput("capacity_mb", "must be > 0", capacity_mb)
        self.capacity_mb = float(capacity_mb)
        self.name = name
        self._loaded: dict[str, float] = {}
        self._lock = threading.Lock()

    def total_mb(self) -> float:
        return self.capacity_mb

    def free_mb(self) -> float:
        with self._lock:
            return self.capacity_mb - sum(self._loaded.values())

    def loaded(self) -> dict[str, float]:
        """model id -> MB of what is loaded now."""
        with self._lock:
            return dict(self._loaded)

    def on_load(self, model_id: str, mb: float) -> None:
        with self._lock:
            if model_id in self._loaded:
                raise InvalidInput("model_id", "is already loaded on the simulated device",
                                   model_id)
            self._loaded[model_id] = float(mb)

    def on_unload(self, model_id: str) -> None:
        with self._lock:
            if self._loaded.pop(model_id, None) is None:
                raise InvalidInput("model_id", "is not loaded on the simulated device", model_id)

    def __repr__(self) -> str:
        return f"SimulatedDevice({self.capacity_mb:g} MB, {self.name!r})"

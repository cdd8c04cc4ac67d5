"""A real device seen through a smaller capacity: the gate manages ``capacity_mb`` of a large GPU
as if it were a small one (the GPU check runs two models under a capacity below their sum on an
H200), while every reading still comes from the real device.

What this process and others took since the view was made counts against the capacity:
``used = free at start - free now`` (from the inner device's own probe), ``free = capacity - used``.
Memory freed by others after the start makes ``used`` negative and ``free`` larger than the
capacity: the readings are reported as measured, never clamped.
"""

from __future__ import annotations

from typing import Any

from memlab.errors import InvalidInput


class CappedDevice:
    """``inner`` (NVMLDevice, TorchCudaProbe) with ``total_mb() == capacity_mb``.

    ``on_load``/``on_unload`` go to the inner device (no-ops on real ones)."""

    def __init__(self, inner: Any, capacity_mb: float) -> None:
        if not capacity_mb > 0:
            raise InvalidInput("capacity_mb", "must be > 0", capacity_mb)
        self.inner, self.capacity_mb = inner, float(capacity_mb)
        self.simulated = bool(inner.simulated)
        self.name = f"{inner.name} (capped at {self.capacity_mb:.0f} MB)"
        self.baseline_free_mb = float(inner.free_mb())

    def total_mb(self) -> float:
        return self.capacity_mb

    def used_mb(self) -> float:
        return self.baseline_free_mb - float(self.inner.free_mb())

    def free_mb(self) -> float:
        return self.capacity_mb - self.used_mb()

    def on_load(self, model_id: str, mb: float) -> None:
        self.inner.on_load(model_id, mb)

    def on_unload(self, model_id: str) -> None:
        self.inner.on_unload(model_id)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"CappedDevice({self.inner!r}, capacity_mb={self.capacity_mb})"

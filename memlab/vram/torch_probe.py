"""A second probe of a CUDA device: ``torch.cuda.mem_get_info`` (free and total bytes as the CUDA
driver reports them to this process), beside NVML (:mod:`memlab.vram.nvml`).

It satisfies the gate's ``Device`` protocol (``simulated`` False, no-op ``on_load``/``on_unload``),
so a machine with torch but without nvidia-ml-py can still run the gate on its real GPU. torch is
imported when a probe is made (the ``st`` extra), never at import of memlab.

Note: the first call initialises CUDA in this process, which itself takes device memory (the CUDA
context, a few hundred MB): measure deltas after it (:func:`memlab.vram.sizes.check_load_delta`).
Sizes are MB of 2**20 bytes.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from memlab.errors import DeviceUnavailable
from memlab.vram.sizes import MB

PROBE = "torch.cuda"


def load_torch() -> ModuleType:
    """``torch``, or DeviceUnavailable naming the ``st`` extra."""
    try:
        import torch
    except ImportError as exc:
        raise DeviceUnavailable(PROBE, f"torch is not installed ({exc}): pip install "
                                "torch==2.13.0 then pip install 'memlab[st]'") from None
    return torch


class TorchCudaProbe:
    """CUDA device ``index`` as torch sees it.

    Args:
        index: the CUDA device index (``cuda:<index>``).
        torch_module: the ``torch`` module; tests inject a fake. Default: the installed torch.

    Raises:
        DeviceUnavailable: torch missing, ``torch.cuda.is_available()`` False (a CPU build or no
            device), or no device at ``index``.
    """

    simulated = False

    def __init__(self, index: int = 0, *, torch_module: ModuleType | Any = None) -> None:
        self._torch = torch_module if torch_module is not None else load_torch()
        self.index = int(index)
        cuda = self._torch.cuda
        if not cuda.is_available():
            raise DeviceUnavailable(PROBE, "torch.cuda.is_available() is False (a CPU build of "
                                    f"torch {getattr(self._torch, '__version__', '?')}, or no "
                                    "CUDA device or driver)")
        count = int(cuda.device_count())
        if not 0 <= self.index < count:
            raise DeviceUnavailable(PROBE, f"no device at index {self.index} ({count} CUDA "
                                    "device(s))")
        self.gpu_name = str(cuda.get_device_name(self.index))
        self.name = f"cuda:{self.index} {self.gpu_name}"

    def mem_get_info(self) -> tuple[float, float]:
        """(free MB, total MB) now, from ``torch.cuda.mem_get_info``."""
        try:
            free, total = self._torch.cuda.mem_get_info(self.index)
        except RuntimeError as exc:     # torch raises RuntimeError for CUDA errors
            raise DeviceUnavailable(PROBE, f"mem_get_info({self.index}) failed: {exc}") from None
        return free / MB, total / MB

    def free_mb(self) -> float:
        return self.mem_get_info()[0]

    def total_mb(self) -> float:
        return self.mem_get_info()[1]

    def on_load(self, model_id: str, mb: float) -> None:
        """Nothing: the driver sees the load."""

    def on_unload(self, model_id: str) -> None:
        """Nothing: the driver sees the memory come back (after ``torch.cuda.empty_cache``)."""

    def __repr__(self) -> str:
        return f"TorchCudaProbe(index={self.index}, name={self.gpu_name!r})"

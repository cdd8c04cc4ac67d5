"""An NVIDIA GPU as a VRAM-gate device, read through NVML (Familiars §5.10, issue 11 item 2).

NVML comes from ``nvidia-ml-py`` (a dependency of memlab), imported as ``pynvml``: total, used and free
memory of one device (``nvmlDeviceGetMemoryInfo``), its name, and the memory each compute process
uses where the driver reports it (``nvmlDeviceGetComputeRunningProcesses``; ``None`` where the
driver answers NVML_VALUE_NOT_AVAILABLE, e.g. under WDDM or in a container without the host's PID
namespace). ``nvmlInit`` runs when the device is opened, ``nvmlShutdown`` on :meth:`NVMLDevice.close`
(or leaving its ``with`` block).

Sizes are in MB of 2**20 bytes (MiB, as ``nvidia-smi`` prints them) everywhere in memlab.vram.

NVML reads the whole device: memory held by other processes counts as used. The gate's own
accounting of what it loaded is separate (a real device ignores ``on_load``/``on_unload``).
A machine without a driver raises :class:`~memlab.errors.DeviceUnavailable` naming the probe and
the NVML error; :func:`memlab.vram.detect.detect_device` then uses the simulated device.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

from memlab.errors import DeviceUnavailable
from memlab.vram.sizes import MB

PROBE = "nvml"
#: what NVML writes into ``usedGpuMemory`` when the driver cannot tell (unsigned long long -1)
NOT_AVAILABLE = 2 ** 64 - 1


@dataclass(frozen=True)
class MemoryInfo:
    """One reading of a device's memory, in MB."""

    total_mb: float
    used_mb: float
    free_mb: float


@dataclass(frozen=True)
class ProcessUse:
    """A compute process on the device and the memory it holds (None: the driver cannot tell)."""

    pid: int
    used_mb: float | None


def load_pynvml() -> ModuleType:
    """The ``pynvml`` module of nvidia-ml-py, or DeviceUnavailable naming the package."""
    try:
        import pynvml
    except ImportError as exc:
        raise DeviceUnavailable(PROBE, f"nvidia-ml-py is not installed ({exc}), a dependency "
                                "of memlab: pip install nvidia-ml-py") from None
    return pynvml


class NVMLDevice:
    """GPU ``index`` through NVML; satisfies the gate's ``Device`` protocol (``simulated`` False,
    ``on_load``/``on_unload`` do nothing: NVML measures the device itself).

    Args:
        index: the device's NVML index (``nvidia-smi -L``).
        nvml: the ``pynvml`` module; tests inject a fake. Default: the installed nvidia-ml-py.

    Raises:
        DeviceUnavailable: nvidia-ml-py missing, ``nvmlInit`` failed (no driver, no library), or
            no device at ``index``.
    """

    simulated = False

    def __init__(self, index: int = 0, *, nvml: ModuleType | Any = None) -> None:
        self._nv = nvml if nvml is not None else load_pynvml()
        self.index = int(index)
        try:
            self._nv.nvmlInit()
        except self._nv.NVMLError as exc:
            raise DeviceUnavailable(PROBE, f"nvmlInit failed: {exc} (no NVIDIA driver or "
                                    "library on this machine?)") from None
        self._open = True
        try:
            self._handle = self._nv.nvmlDeviceGetHandleByIndex(self.index)
            raw = self._nv.nvmlDeviceGetName(self._handle)
        except self._nv.NVMLError as exc:
            self.close()
            raise DeviceUnavailable(PROBE, f"no device at index {self.index}: {exc}") from None
        self.gpu_name = raw.decode() if isinstance(raw, bytes) else str(raw)
        self.name = f"nvml:{self.index} {self.gpu_name}"

    def _call(self, what: str, fn, *args):
        if not self._open:
            raise DeviceUnavailable(PROBE, f"{what}: the device was closed (nvmlShutdown)")
        try:
            return fn(*args)
        except self._nv.NVMLError as exc:
            raise DeviceUnavailable(PROBE, f"{what} on device {self.index} failed: {exc}") \
                from None

    def memory(self) -> MemoryInfo:
        """Total, used and free memory now (``nvmlDeviceGetMemoryInfo``), in MB."""
        info = self._call("nvmlDeviceGetMemoryInfo", self._nv.nvmlDeviceGetMemoryInfo,
                          self._handle)
        return MemoryInfo(total_mb=info.total / MB, used_mb=info.used / MB,
                          free_mb=info.free / MB)

    def total_mb(self) -> float:
        return self.memory().total_mb

    def used_mb(self) -> float:
        return self.memory().used_mb

    def free_mb(self) -> float:
        return self.memory().free_mb

    def processes(self) -> list[ProcessUse]:
        """The compute processes on the device and their memory (None where NVML answers
        NVML_VALUE_NOT_AVAILABLE: pynvml gives None or the raw sentinel, both read as None)."""
        procs = self._call("nvmlDeviceGetComputeRunningProcesses",
                           self._nv.nvmlDeviceGetComputeRunningProcesses, self._handle)
        out = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            out.append(ProcessUse(pid=int(p.pid), used_mb=None if used is None
                                  or used == NOT_AVAILABLE else used / MB))
        return out

    def on_load(self, model_id: str, mb: float) -> None:
        """Nothing: NVML sees the load in the device's own memory."""

    def on_unload(self, model_id: str) -> None:
        """Nothing: NVML sees the memory come back (after ``torch.cuda.empty_cache``)."""

    def close(self) -> None:
        """``nvmlShutdown`` (once; NVML counts inits, so other users of NVML are not cut off)."""
        if self._open:
            self._open = False
            try:
                self._nv.nvmlShutdown()
            except self._nv.NVMLError as exc:
                raise DeviceUnavailable(PROBE, f"nvmlShutdown failed: {exc}") from None

    def __enter__(self) -> "NVMLDevice":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NVMLDevice(index={self.index}, name={self.gpu_name!r}, open={self._open})"

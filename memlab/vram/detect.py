"""Which device the gate manages: the GPU when NVML answers, else the simulated device of
``vram.simulated_capacity_mb`` (issue 11 item 2).

The fallback is one INFO log line naming why (the NVML error) and the capacity used (a CPU machine
is a normal place to run memlab: no warning, nothing red in a notebook); the returned
device's ``simulated`` flag says which it is, and :func:`device_tags` turns it into MLflow tags,
so a benchmark run on a machine without a GPU says so.

``capacity_mb`` sets the capacity either way: the simulated device's, or a cap on the real GPU
(:class:`~memlab.vram.capped.CappedDevice`), for experiments that need a small device on a big one.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from memlab.config import MemlabConfig
from memlab.errors import DeviceUnavailable, InvalidInput
from memlab.vram.capped import CappedDevice
from memlab.vram.nvml import NVMLDevice

log = logging.getLogger("memlab")


def _simulated(capacity_mb: float) -> Any:
    from memlab.vram.devices import SimulatedDevice    # the gate's module (lazy: built apart)

    return SimulatedDevice(capacity_mb=capacity_mb)


def detect_device(cfg: MemlabConfig, *, capacity_mb: float | None = None, index: int = 0,
                  nvml_factory: Callable[[int], Any] = NVMLDevice,
                  simulated_factory: Callable[[float], Any] = _simulated) -> Any:
    """NVML device ``index`` if a GPU answers, else the simulated device (one INFO log line).

    Args:
        cfg: reads ``vram.simulated_capacity_mb``.
        capacity_mb: the capacity to manage: the simulated device's (instead of the config's), or
            a cap on the real GPU. None: the config's / the whole GPU.
        index: the GPU's NVML index.
        nvml_factory, simulated_factory: how the devices are made (tests inject fakes).
    """
    if capacity_mb is not None and not capacity_mb > 0:
        raise InvalidInput("capacity_mb", "must be > 0", capacity_mb)
    try:
        device = nvml_factory(index)
    except DeviceUnavailable as exc:
        mb = float(capacity_mb if capacity_mb is not None else cfg.vram.simulated_capacity_mb)
        device = simulated_factory(mb)
        log.info("memlab.vram: no GPU found (%s); the VRAM gate uses a simulated device of "
                 "%.0f MB (%s)", exc, mb, "capacity_mb" if capacity_mb is not None
                 else "vram.simulated_capacity_mb")
        return device
    return device if capacity_mb is None else CappedDevice(device, capacity_mb)


def device_tags(device: Any) -> dict[str, str]:
    """MLflow tags naming the device and whether it is simulated."""
    return {"vram.device": str(device.name),
            "vram.simulated": "true" if device.simulated else "false"}

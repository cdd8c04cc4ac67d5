"""What a model takes in memory: the real bytes of a torch module, the size of a checkpoint on
disk, and a check of either against the device's own free-memory delta across a load.

- :func:`torch_module_bytes`: the bytes of a module's parameters and buffers, each storage counted
  once (tied weights, e.g. an input embedding shared with an output layer, and views such as an
  expanded ``position_ids`` buffer share one storage). For tensors without real storage (the
  ``meta`` device) ``numel * element_size``.
- :func:`checkpoint_mb`: the weight files of a model folder (``*.safetensors``, ``*.bin``,
  ``*.pt``, ``*.pth``, ``*.ckpt``) before anything is loaded: the estimate a client gives the gate
  before its first load. For float32 weights loaded as float32 it is the parameter bytes plus the
  file's header; for weights cast on load (fp16 -> fp32) it is off by that factor.
- :func:`check_load_delta`: free MB before and after a load on a real device and the ratio of the
  measured delta to the expected size. On a GPU the delta includes the caching allocator's
  rounding (blocks of 512 bytes in segments of 2 MB) and anything else the process allocated
  meanwhile; the first CUDA call also creates the context (hundreds of MB): initialise CUDA before
  measuring.

Sizes are MB of 2**20 bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from memlab.errors import InvalidInput

MB = float(2 ** 20)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def torch_module_bytes(module: Any) -> int:
    """Bytes of ``module``'s parameters and buffers, each underlying storage counted once."""
    seen: set[tuple[str, int]] = set()
    meta: set[int] = set()
    total = 0
    tensors = [t for _, t in module.named_parameters(remove_duplicate=False)]
    tensors += [t for _, t in module.named_buffers(remove_duplicate=False) if t is not None]
    for t in tensors:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr == 0:            # meta tensors and empty ones own no memory: count their size
            if id(t) not in meta:
                meta.add(id(t))
                total += t.numel() * t.element_size()
            continue
        key = (str(t.device), ptr)
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total


def torch_module_mb(module: Any) -> float:
    """:func:`torch_module_bytes` in MB."""
    return torch_module_bytes(module) / MB


def checkpoint_mb(folder: str | Path) -> float:
    """MB of the weight files under ``folder`` (recursively; a file linked twice counted once).

    Raises InvalidInput when ``folder`` is not a folder or holds no weight file."""
    root = Path(folder)
    if not root.is_dir():
        raise InvalidInput("folder", "a model folder", str(folder))
    files = {p.resolve() for p in root.rglob("*") if p.suffix in WEIGHT_SUFFIXES and p.is_file()}
    if not files:
        raise InvalidInput("folder", f"holds no weight file ({', '.join(WEIGHT_SUFFIXES)})",
                           str(folder))
    return sum(p.stat().st_size for p in files) / MB


class FreeProbe(Protocol):
    def free_mb(self) -> float: ...


@dataclass(frozen=True)
class LoadDelta:
    """Free MB around a load and how the measured delta compares with the expected size.

    ``ratio`` = ``delta_mb / expected_mb``; ``within`` = ``|ratio - 1| <= tolerance``."""

    free_before_mb: float
    free_after_mb: float
    delta_mb: float
    expected_mb: float
    ratio: float
    tolerance: float
    within: bool
    handle: Any = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, float | bool]:
        out = asdict(self)
        out.pop("handle")
        return out


def check_load_delta(probe: FreeProbe, load_fn: Callable[[], Any], expected_mb: float,
                     tolerance: float) -> LoadDelta:
    """Run ``load_fn`` between two readings of ``probe.free_mb()``; the result keeps the handle
    ``load_fn`` returned (``LoadDelta.handle``) so the caller can use and free the model.

    Args:
        probe: anything with ``free_mb()`` (NVMLDevice, TorchCudaProbe).
        load_fn: loads the model onto the probed device and returns it.
        expected_mb: the size it should take (e.g. :func:`torch_module_mb` of the loaded model).
        tolerance: the accepted relative difference, ``|delta / expected - 1|``.
    """
    if not expected_mb > 0:
        raise InvalidInput("expected_mb", "must be > 0", expected_mb)
    if not tolerance >= 0:
        raise InvalidInput("tolerance", "must be >= 0", tolerance)
    before = float(probe.free_mb())
    handle = load_fn()
    after = float(probe.free_mb())
    delta = before - after
    ratio = delta / expected_mb
    return LoadDelta(free_before_mb=before, free_after_mb=after, delta_mb=delta,
                     expected_mb=float(expected_mb), ratio=ratio, tolerance=float(tolerance),
                     within=abs(ratio - 1.0) <= tolerance, handle=handle)

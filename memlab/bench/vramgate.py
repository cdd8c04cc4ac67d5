"""Benchmarks and sweeps run their models through a VRAM gate and log its trace (issue 11 item 6).

:func:`open_bench_gate` gives ``memlab bench`` / ``memlab sweep`` a :class:`BenchVRAM`: the gate
(:func:`memlab.vram.embedder.default_gate`: on the GPU when NVML answers, else the simulated
device of ``vram.simulated_capacity_mb``, with one log line) and the embedder as a client of it
(:func:`memlab.vram.embedder.gate_embedder`: every embedding call of the replay is one
``gate.acquire``; sizes and wrappers are described there).

Priority: the embedder role of §5.10.1 (:data:`memlab.vram.clients.ROLES`): IMPORTANT
(``vram.priority_important``), sync. CRITICAL is for an embed on an active user request (the gate
raises it with ``boost_thread_priority``); a benchmark serves no user.

The gate changes no result: the wrapper returns the inner embedder's vectors unchanged and has
its ``version`` (the embedding and feature caches' key); ``vram.enabled`` is a runtime field,
outside the feature key. :meth:`BenchVRAM.write` puts the trace (``trace.jsonl``) and the
timeline (``timeline.png``) in a folder; :meth:`BenchVRAM.metrics` and :meth:`BenchVRAM.tags`
are what the MLflow runs get (``vram.<summary key>``, :func:`~memlab.vram.detect.device_tags`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab.config import MemlabConfig
from memlab.vram.detect import device_tags
from memlab.vram.embedder import default_gate, gate_embedder
from memlab.vram.gate import VRAMGate
from memlab.vram.trace import plot_timeline

#: the artifact paths inside an MLflow run
TRACE_ARTIFACT = "vram/trace.jsonl"
TIMELINE_ARTIFACT = "vram/timeline.png"


@dataclass
class BenchVRAM:
    """The gate of one benchmark or sweep and what it manages."""

    gate: VRAMGate
    embedder: Any = None              # the gated embedder (None: lexical only, nothing gated)
    clients: dict[str, str] = field(default_factory=dict)   # model id -> where its MB come from

    @property
    def device(self) -> Any:
        return self.gate.device

    def summary(self) -> dict[str, float]:
        """:meth:`memlab.vram.trace.Trace.summary` with the gate's capacity."""
        return self.gate.trace.summary(self.gate.capacity_mb)

    def metrics(self) -> dict[str, float]:
        """``vram.<key>`` of :meth:`summary`, and ``vram.capacity_mb``."""
        return {**{f"vram.{k}": float(v) for k, v in self.summary().items()},
                "vram.capacity_mb": float(self.gate.capacity_mb)}

    def tags(self) -> dict[str, str]:
        """:func:`device_tags` (``vram.device``, ``vram.simulated``) and ``vram.clients``."""
        return {**device_tags(self.device),
                "vram.clients": ",".join(f"{m} ({src})" for m, src in self.clients.items())
                or "none"}

    def write(self, folder: Path) -> dict[str, Path]:
        """The trace as JSON Lines and the timeline as PNG in ``folder``; returns the MLflow
        artifact names (:data:`TRACE_ARTIFACT`, :data:`TIMELINE_ARTIFACT`) -> files."""
        from memlab.bench import plots

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        trace = self.gate.trace.to_jsonl(folder / "trace.jsonl")
        timeline = folder / "timeline.png"
        plots.save(plot_timeline(self.gate.trace, self.gate.capacity_mb), timeline)
        return {TRACE_ARTIFACT: trace, TIMELINE_ARTIFACT: timeline}

    def to_json(self) -> dict[str, Any]:
        return {"tags": self.tags(), "summary": {k: round(float(v), 6)
                                                 for k, v in self.summary().items()},
                "capacity_mb": self.gate.capacity_mb}


def open_bench_gate(cfg: MemlabConfig, embedder: Any, *, gate: VRAMGate | None = None,
                    build_embedder: bool = False) -> BenchVRAM:
    """The gate (``gate`` or :func:`default_gate`) with the embedder registered as an IMPORTANT
    sync client; ``.embedder`` is the embedder to replay with.

    ``build_embedder``: ``embedder`` is None because the caller wants the config's embedder
    built here as a gate client (:func:`memlab.vram.embedder.gate_embedder`). Without it, an
    ``embedder`` of None means lexical only: nothing is registered."""
    gate = gate if gate is not None else default_gate(cfg)
    out = BenchVRAM(gate)
    if embedder is None and not build_embedder:
        return out
    models = gate_embedder(cfg, gate, embedder)
    out.embedder, out.clients = models.embedder, models.clients
    return out


__all__ = ["BenchVRAM", "TIMELINE_ARTIFACT", "TRACE_ARTIFACT", "default_gate", "open_bench_gate"]

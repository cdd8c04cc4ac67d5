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
outside the feature key. :meth:`BenchVRAM.write` puts the trace (``trace.jsonl``), a summary
(``summary.txt``: :meth:`BenchVRAM.note` and the summary's numbers) and, when a model was
loaded, the timeline (``timeline.png``) in a folder; :meth:`BenchVRAM.metrics` and
:meth:`BenchVRAM.tags` are what the MLflow runs get (``vram.<summary key>``,
:func:`~memlab.vram.detect.device_tags`, ``vram.note``).

What happened, in one line (:meth:`BenchVRAM.note`): a run whose feature cache is warm embeds
nothing, so its gate registers the embedder and loads no model; its artifacts say so (the note,
no empty timeline).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab.config import MemlabConfig
from memlab.vram.detect import device_tags
from memlab.vram.embedder import default_gate, gate_embedder
from memlab.vram.gate import VRAMGate
from memlab.vram.plots import vram_timeline

#: the artifact paths inside an MLflow run
TRACE_ARTIFACT = "vram/trace.jsonl"
TIMELINE_ARTIFACT = "vram/timeline.png"
SUMMARY_ARTIFACT = "vram/summary.txt"


def trace_note(summary: dict[str, float], registered: dict[str, float], capacity_mb: float,
               *, features_cached: bool | None = None) -> str:
    """One line saying what a gate's trace holds: ``summary`` is :meth:`Trace.summary`,
    ``registered`` model -> estimated MB; ``features_cached`` True: the run's raw signals came
    from the feature cache (said first: what the gate saw is then not the replay's)."""
    if features_cached:
        return ("the features came from the feature cache (no replay); the gate saw only what "
                "ran outside it (the embedder's numerics probe, which keys the cache): "
                + trace_note(summary, registered, capacity_mb))
    models = ", ".join(f"{m} ({mb:,.0f} MB)" for m, mb in registered.items())
    if not registered:
        return "no model was registered with the gate (a lexical-only run: nothing to embed)"
    if not summary["acquires"]:
        return (f"no model was loaded: nothing was embedded in this run (the feature and "
                f"embedding caches held every vector it needed); registered: {models}")
    if not summary["loads"]:
        return (f"no model was loaded: {summary['acquires']:.0f} acquire(s) found their model "
                f"resident (loaded before this run); registered: {models}")
    return (f"{summary['loads']:.0f} load(s) ({summary['load_time_s']:.2f} s loading), "
            f"{summary['hits']:.0f} hit(s), {summary['evictions']:.0f} eviction(s), "
            f"{summary['denied']:.0f} denied; peak {summary['peak_resident_mb']:,.0f} MB of "
            f"{capacity_mb:,.0f} MB; registered: {models}")


@dataclass
class BenchVRAM:
    """The gate of one benchmark or sweep and what it manages."""

    gate: VRAMGate
    embedder: Any = None              # the gated embedder (None: lexical only, nothing gated)
    clients: dict[str, str] = field(default_factory=dict)   # model id -> where its MB come from
    #: True when the run's raw signals came from the feature cache (set by the run that knows:
    #: its ``counts["feature_cache_hit"]``); None: not known. Read by :meth:`note`.
    features_cached: bool | None = None

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

    def note(self) -> str:
        """What happened, in one line (:func:`trace_note`): loads, evictions and the peak, or
        why no model was loaded."""
        return trace_note(self.summary(), {e.model: e.mb or 0.0 for e in self.gate.trace
                                           if e.event == "register"}, self.gate.capacity_mb,
                          features_cached=self.features_cached)

    def tags(self) -> dict[str, str]:
        """:func:`device_tags` (``vram.device``, ``vram.simulated``), ``vram.clients`` and
        ``vram.note`` (:meth:`note`)."""
        return {**device_tags(self.device),
                "vram.clients": ",".join(f"{m} ({src})" for m, src in self.clients.items())
                or "none", "vram.note": self.note()}

    def write(self, folder: Path) -> dict[str, Path]:
        """In ``folder``: the trace as JSON Lines, ``summary.txt`` (:meth:`note`, then each
        summary number) and, when the trace has a load, the timeline as PNG (none when no
        model was loaded: the note says why). Returns the MLflow artifact names
        (:data:`TRACE_ARTIFACT`, :data:`SUMMARY_ARTIFACT`, :data:`TIMELINE_ARTIFACT`) -> files."""
        from memlab.bench import plots

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = {TRACE_ARTIFACT: self.gate.trace.to_jsonl(folder / "trace.jsonl")}
        summary = self.summary()
        lines = [self.note(), "", f"capacity_mb: {self.gate.capacity_mb:g}",
                 *(f"{k}: {v:g}" for k, v in summary.items())]
        out[SUMMARY_ARTIFACT] = folder / "summary.txt"
        out[SUMMARY_ARTIFACT].write_text("\n".join(lines) + "\n", encoding="utf-8")
        if summary["loads"]:
            timeline = folder / "timeline.png"
            plots.save(vram_timeline(self.gate.trace, self.gate.capacity_mb,
                                     workload="the replay's embedder"), timeline)
            out[TIMELINE_ARTIFACT] = timeline
        return out

    def to_json(self) -> dict[str, Any]:
        return {"tags": self.tags(), "note": self.note(),
                "summary": {k: round(float(v), 6) for k, v in self.summary().items()},
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


__all__ = ["BenchVRAM", "SUMMARY_ARTIFACT", "TIMELINE_ARTIFACT", "TRACE_ARTIFACT", "default_gate",
           "open_bench_gate", "trace_note"]

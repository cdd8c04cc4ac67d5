"""The public API: ``open_store(path, config=...)``, ``store.add(...)``, ``store.recall(...)``.

A thin facade that wires the edges together — SQLite truth source, vector cache, embedder, clock —
and hands the pure parts (scoring, selection) their inputs. Reinforcement is a separate, explicit
step (``store.reinforce(result)``), never a side effect of recall.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import Counter
from dataclasses import replace as dc_replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from memlab.clock import Clock, SystemClock, to_unix
from memlab.config import MemlabConfig
from memlab.embed import Embedder, make_embedder
from memlab.errors import EmbeddingUnavailable, InvalidCell, InvalidInput
from memlab.recall.candidates import Scope, build_features
from memlab.recall.result import RecallResult
from memlab.recall.score import score as score_table
from memlab.recall.select import explain_columns, select
from memlab.store import Store
from memlab.text import extract_entities, memory_terms
from memlab.types import (COGNITIVE_LAYERS, RETENTION_LAYERS, VALID_CELLS, MemoryRecord)
from memlab.write.importance import (choose_layer, cognitive_layer_of, long_term_threshold,
                                     score_importance)

log = logging.getLogger("memlab")

_ID_PREFIX = {"permanent": "pm", "long_term": "lt", "short_term": "st"}


class MemoryStore:
    """One memory database: add, recall, reinforce. Use :func:`open_store` to make one."""

    def __init__(self, store: Store, *, config: MemlabConfig, embedder: Embedder | None,
                 clock: Clock, embedder_error: str = "") -> None:
        self.config = config
        self._store = store
        self._embedder = embedder
        self._embedder_error = embedder_error
        self.clock = clock
        self.stats: Counter[str] = Counter()

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder | None:
        return self._embedder

    @property
    def path(self) -> str:
        return self._store.path

    def __len__(self) -> int:
        return self._store.repo.count()

    def count(self, *, agent_id: str | None = None, user_id: str | None = None) -> int:
        return self._store.repo.count(agent_id=agent_id, user_id=user_id)

    # -- write -------------------------------------------------------------------------------
    def add(self, text: str, **fields: Any) -> MemoryRecord:
        """Add one memory; see :meth:`add_many` for the fields. Returns the stored record."""
        clock = fields.pop("clock", None)
        return self.add_many([{"text": text, **fields}], clock=clock)[0]

    def add_many(self, items: Iterable[Mapping[str, Any]], *, clock: Clock | None = None,
                 vectors: np.ndarray | None = None) -> list[MemoryRecord]:
        """Add memories in one all-or-nothing transaction.

        Each item: ``text`` (required) and optionally ``id``, ``agent_id``, ``user_id``, ``layer``
        (permanent/long_term/short_term; default from importance, §5), ``importance`` (default from
        the §5 scorer), ``emotions`` ({name: 0..100}), ``cognitive_layer``, ``timestamp`` (default
        the clock), ``event_time``, ``speaker``, ``session_id``, ``fact_key``, ``pinned``, ``scope``
        and ``category`` (a valid Familiars cell), ``meta`` and the other MemoryRecord fields.
        Invalid input raises InvalidInput naming the field and leaves the store unchanged.
        ``vectors``: precomputed document vectors of the texts (benchmarks embed in batches
        through their cache); default: embedded here through the store's embedding cache.
        """
        now = to_unix((clock or self.clock).now())
        used: list[int] = []  # long-term chars, read once per batch (§11.3 budget pressure)

        def long_term_used() -> int:
            if not used:
                used.append(self._store.repo.layer_chars("long_term"))
            return used[0]

        records = [self._build_record(dict(it), now=now, index=i, long_term_used=long_term_used)
                   for i, it in enumerate(items)]
        if not records:
            return []
        rc = self.config.recall
        terms = [memory_terms(r.text, term_cap=rc.term_cap, text_cap=rc.text_cap) for r in records]
        ents = [extract_entities(r.text, min_chars=self.config.entity.min_chars) for r in records]
        if vectors is None:
            vectors = self._embed_documents([r.text for r in records])
        elif len(vectors) != len(records):
            raise InvalidInput("vectors", f"one vector per item ({len(records)})", len(vectors))
        stored = self._store.add(records, terms=terms, entities=ents, vectors=vectors)
        self.stats["added"] += len(stored)
        return stored

    def _build_record(self, it: dict[str, Any], *, now: float, index: int,
                      long_term_used) -> MemoryRecord:
        cfg = self.config
        where = f"items[{index}]"
        text = it.pop("text", None)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(f"{where}.text", "must be a non-empty string", text)
        if len(text) > cfg.recall.max_text_chars:
            raise InvalidInput(f"{where}.text", f"longer than recall.max_text_chars "
                               f"({cfg.recall.max_text_chars})", len(text))
        emotions = dict(it.pop("emotions", None) or {})
        for k, v in emotions.items():
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InvalidInput(f"{where}.emotions[{k!r}]", "must be a finite number", v)
        intensity = min(1.0, max((abs(v) for v in emotions.values()), default=0.0)
                        / cfg.fusion.emotion_scale)
        layer = it.pop("layer", None) or it.pop("retention_layer", None)
        importance = it.pop("importance", None)
        if importance is None:
            importance = (cfg.layers.permanent_importance if layer == "permanent" else
                          score_importance(text, emotion_intensity=intensity,
                                           cfg=cfg.importance, term_cap=cfg.recall.term_cap,
                                           text_cap=cfg.recall.text_cap))
        if isinstance(importance, bool) or not isinstance(importance, (int, float)) \
                or not math.isfinite(importance) or not 0.0 <= importance <= 1.0:
            raise InvalidInput(f"{where}.importance", "must be a finite number in [0, 1]",
                               importance)
        if layer is None:
            layer = choose_layer(float(importance), threshold=long_term_threshold(
                long_term_used(), layers=cfg.layers, gov=cfg.governance))
        if layer not in RETENTION_LAYERS:
            raise InvalidInput(f"{where}.layer", f"one of {RETENTION_LAYERS}", layer)
        cognitive = it.pop("cognitive_layer", None) or cognitive_layer_of(
            text, episodic_prefix=cfg.layers.episodic_prefix)
        if cognitive not in COGNITIVE_LAYERS:
            raise InvalidInput(f"{where}.cognitive_layer", f"one of {COGNITIVE_LAYERS}", cognitive)
        scope, category = it.get("scope"), it.get("category")
        if scope is not None or category is not None:
            if (scope, category) not in VALID_CELLS:
                raise InvalidCell(f"{where}.(scope, category)", "not a valid Familiars cell "
                                  "(familiars §5.2.3 VALID_CELLS)", (scope, category))
        ts = it.pop("timestamp", None)
        ts = now if ts is None else to_unix(ts)
        ev = it.pop("event_time", None)
        mem_id = it.pop("id", None) or f"{_ID_PREFIX[layer]}_{uuid.uuid4().hex}"
        for name in ("agent_id", "user_id"):
            if it.get(name) is None:
                it[name] = getattr(cfg.writer, f"default_{name}")
        for name in ("tags", "derived_from", "source_quote"):
            if name in it:
                it[name] = tuple(it[name])
        try:
            return MemoryRecord(id=str(mem_id), text=text, retention_layer=layer,
                                cognitive_layer=cognitive, timestamp=float(ts),
                                event_time=None if ev is None else to_unix(ev),
                                importance=float(importance), emotions=emotions, **it)
        except TypeError as exc:
            raise InvalidInput(where, f"unknown field ({exc})", sorted(it)) from None

    def _embed_documents(self, texts: Sequence[str]) -> np.ndarray | None:
        if self._embedder is None:
            self._degraded("documents stored without vectors (pending)")
            return None
        try:
            return self._store.embed_cached(self._embedder, texts, query=False)
        except EmbeddingUnavailable as exc:
            self._degraded(f"embedding failed ({exc}); documents stored as pending")
            return None

    def embed_pending(self, *, batch: int = 256) -> int:
        """Embed records whose vector is missing (after the embedder comes back). Returns count."""
        if self._embedder is None:
            raise EmbeddingUnavailable(self._embedder_error or "no embedder")
        return self._store.embed_pending(self._embedder, batch=batch)

    def rebuild_vectors(self) -> int:
        """Drop the vector cache and rebuild it from the truth (texts via the embedding cache)."""
        if self._embedder is None:
            raise EmbeddingUnavailable(self._embedder_error or "no embedder")
        return self._store.rebuild_vectors(self._embedder)

    # -- read --------------------------------------------------------------------------------
    def warm(self) -> None:
        """Load (or bring up to date) the in-process read indexes now — the MemoryIndex of
        ``store.memory_index = "memory"`` and the dense ExactIndex — instead of at the next
        recall (~0.5 s per 10k memories at first load; later only the changed rows are read)."""
        self._store.warm()

    def recall(self, query: str, *, k: int | None = None, clock: Clock | None = None,
               agent_id: str | None = None, user_id: str | None = None) -> RecallResult:
        """The k most relevant memories for ``query`` at the clock's time (§8), with ``explain``."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query", "must be a non-empty string", query)
        cfg = self.config
        k = cfg.recall.k if k is None else int(k)
        if k < 1:
            raise InvalidInput("k", "must be >= 1", k)
        now = to_unix((clock or self.clock).now())
        scope = Scope(agent_id or cfg.writer.default_agent_id, user_id or cfg.writer.default_user_id)
        notes: list[str] = []
        qv = self._embed_query(query, notes)
        # every read of the store from here on sees one committed state (Store.read)
        return self._store.read(lambda: self._recall_read(query, qv, scope, now, k, notes))

    def _recall_read(self, query: str, qv: np.ndarray | None, scope: Scope, now: float, k: int,
                     notes: list[str]) -> RecallResult:
        cfg = self.config
        feats = build_features([query], query_vectors=qv, repo=self._store.signals(),
                               dense=self._store.dense, scope=scope, now=now, k=k, cfg=cfg)
        table = feats.columns
        if not len(feats):
            reason = ("no memories stored for this agent and user"
                      if self.count(agent_id=scope.agent_id, user_id=scope.user_id) == 0
                      else "no stored memory shares a term or an entity with the query")
            return RecallResult(query, (), explain_columns(table, None, np.zeros(0, int), {}, {}),
                                cfg.selection.prompt_max_items, reason, tuple(notes))
        scored = score_table(table, cfg)
        positions = select(table, scored, terms=feats.terms, k=k, cfg=cfg)[0]
        frame = explain_columns(table, scored, positions, feats.ids, feats.texts)
        rows = table["row"][positions]
        memories = tuple(self._store.repo.get_rows(rows.tolist()))
        reason = "" if len(memories) else (
            "nothing relevant enough: every candidate is below the relevance floor or forgotten")
        return RecallResult(query, memories, frame, cfg.selection.prompt_max_items, reason,
                            tuple(notes))

    def features(self, queries: Sequence[str], *, k: int, now: float,
                 query_vectors: np.ndarray | None = None, agent_id: str | None = None,
                 user_id: str | None = None):
        """The raw-signal table of several queries asked at ``now`` (benchmarks and sweeps score
        it many times). ``query_vectors`` default: embedded here (None if the embedder is out)."""
        cfg = self.config
        scope = Scope(agent_id or cfg.writer.default_agent_id, user_id or cfg.writer.default_user_id)
        if query_vectors is None and self._embedder is not None and cfg.recall.use_dense:
            try:
                query_vectors = self._embedder.embed_queries(list(queries))
            except EmbeddingUnavailable as exc:
                self._degraded(f"lexical recall only: {exc}")
        if not cfg.recall.use_dense:
            query_vectors = None
        return self._store.read(lambda: build_features(
            list(queries), query_vectors=query_vectors, repo=self._store.signals(),
            dense=self._store.dense, scope=scope, now=now, k=k, cfg=cfg))

    def _embed_query(self, query: str, notes: list[str]) -> np.ndarray | None:
        if self._embedder is None or not self.config.recall.use_dense:
            if self._embedder is None:
                notes.append(self._degraded("lexical recall only: embedder unavailable"))
            return None
        try:
            return self._embedder.embed_queries([query])
        except EmbeddingUnavailable as exc:
            notes.append(self._degraded(f"lexical recall only: {exc}"))
            return None

    def _degraded(self, what: str) -> str:
        """Log a documented degradation once per kind and count every occurrence."""
        self.stats[f"degraded: {what}"] += 1
        if self.stats[f"degraded: {what}"] == 1:
            log.warning("memlab degraded: %s%s", what,
                        f" ({self._embedder_error})" if self._embedder_error else "")
        return what

    def reinforce(self, result: RecallResult | Sequence[str], *, clock: Clock | None = None
                  ) -> int:
        """The explicit, batched reinforcement step after selection: last_accessed = now and
        access_count += 1 for the recalled memories. Returns how many were updated."""
        ids = result.ids if isinstance(result, RecallResult) else list(result)
        now = to_unix((clock or self.clock).now())
        return self._store.repo.reinforce_ids(ids, now=now)

    def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        return self._store.repo.get(list(ids))


def open_store(path: str | Path = ":memory:", *, config: MemlabConfig | None = None,
               embedder: Embedder | None = None, clock: Clock | None = None,
               load_embedder: bool = True) -> MemoryStore:
    """Open (or create) a memory store.

    ``embedder``: an Embedder instance; default the one ``config.embedding`` names. If it cannot
    load, the store still opens: recall degrades to lexical (logged once, counted), and writes are
    stored as pending until :meth:`MemoryStore.embed_pending`.
    """
    cfg = config or MemlabConfig()
    error = ""
    if embedder is None and load_embedder:
        try:
            embedder = make_embedder(cfg)
        except EmbeddingUnavailable as exc:
            error = str(exc)
            log.warning("memlab: embedder unavailable (%s); lexical recall only", exc)
    store = Store.open(path, config=cfg, embedder=embedder)
    return MemoryStore(store, config=cfg, embedder=embedder, clock=clock or SystemClock(),
                       embedder_error=error)

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
from memlab.errors import ConfigError, EmbeddingUnavailable, InvalidCell, InvalidInput, StoreError
from memlab.inputs import check_id, check_ids, check_k, check_tenant, check_text, check_unicode
from memlab.recall.background import Background, background_for, load_texts, missing_cache_rows
from memlab.recall.candidates import Scope, build_features, max_k
from memlab.recall.result import RecallResult
from memlab.recall.score import score as score_table
from memlab.recall.select import explain_columns, select
from memlab.store import Store
from memlab.store.cache import FreshVectors
from memlab.store.vectors import MAX_K as VECTOR_SEARCH_LIMIT
from memlab.text import extract_entities, memory_terms
from memlab.types import (COGNITIVE_LAYERS, RETENTION_LAYERS, VALID_CELLS, MemoryRecord)
from memlab.write.importance import (choose_layer, cognitive_layer_of, long_term_threshold,
                                     score_importance)
from memlab.write import facts, feedback as usage, pins
from memlab.write.facts import supersede_step
from memlab.write.pins import check_pin_cap

log = logging.getLogger("memlab")

_ID_PREFIX = {"permanent": "pm", "long_term": "lt", "short_term": "st"}
_NO_QUERY_VECTOR = "lexical recall only: the embedder gives this query no vector"
#: The ``MemoryStore.stats`` key counting texts the embedder cut to ``embedding.max_tokens``.
TRUNCATED = "truncated: texts cut to embedding.max_tokens"


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
        self._bg: Background | None = None
        self._bg_cached = False   # the store's cache holds the background sample (see add)

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
        """Memories of every agent and user."""
        return self._store.repo.count()

    def count(self, *, agent_id: str | None = None, user_id: str | None = None) -> int:
        """Memories of one agent and user (None: the default, as everywhere)."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return self._store.repo.count(agent_id=agent_id, user_id=user_id)

    def _tenant(self, agent_id: Any, user_id: Any, *, where: str = "") -> tuple[str, str]:
        """The validated (agent_id, user_id) of a call; None alone means the config's default."""
        w = self.config.writer
        return check_tenant(agent_id, user_id, default_agent_id=w.default_agent_id,
                            default_user_id=w.default_user_id, where=where)

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
        fresh: list[FreshVectors] = []
        if vectors is None:   # embedded here: the cache gets them and what the sample lacks
            vectors, new = self._embed_documents([r.text for r in records])
            fresh = ([new] if new is not None else []) + self._background_rows()
        elif len(vectors) != len(records):
            raise InvalidInput("vectors", f"one vector per item ({len(records)})", len(vectors))
        stored = self._store.add(records, terms=terms, entities=ents, vectors=vectors, fresh=fresh,
                                 prepare=self._govern_writes)
        self._bg_cached = self._bg_cached or bool(fresh)
        self.stats["added"] += len(stored)
        return stored

    def _govern_writes(self, repo, records: list[MemoryRecord]) -> list[MemoryRecord]:
        """The lifecycle step of every write, inside its transaction (§6.1, §11.3): fact keys,
        supersession of older revisions (:func:`memlab.write.facts.supersede_step`), then the
        pin cap (:func:`memlab.write.pins.check_pin_cap`)."""
        records = supersede_step(repo, records, self.config)
        check_pin_cap(repo, records, self.config)
        return records

    def _build_record(self, it: dict[str, Any], *, now: float, index: int,
                      long_term_used) -> MemoryRecord:
        cfg = self.config
        where = f"items[{index}]"
        text = check_text(it.pop("text", None), f"{where}.text",
                          max_chars=cfg.recall.max_text_chars, limit_name="recall.max_text_chars")
        for name, value in it.items():
            check_unicode(value, f"{where}.{name}")
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
        mem_id = it.pop("id", None)
        mem_id = f"{_ID_PREFIX[layer]}_{uuid.uuid4().hex}" if mem_id is None \
            else check_id(mem_id, f"{where}.id")
        it["agent_id"], it["user_id"] = self._tenant(it.get("agent_id"), it.get("user_id"),
                                                     where=f"{where}.")
        for name in ("tags", "derived_from", "source_quote"):
            if name in it:
                it[name] = tuple(it[name])
        try:
            return MemoryRecord(id=mem_id, text=text, retention_layer=layer,
                                cognitive_layer=cognitive, timestamp=float(ts),
                                event_time=None if ev is None else to_unix(ev),
                                importance=float(importance), emotions=emotions, **it)
        except TypeError as exc:
            raise InvalidInput(where, f"unknown field ({exc})", sorted(it)) from None

    def _embed_documents(self, texts: Sequence[str]):
        """(vectors, the newly embedded ones the add caches in its transaction), or (None, None):
        stored as pending."""
        if self._embedder is None:
            self._degraded("documents stored without vectors (pending)")
            return None, None
        try:
            return self._embed(self._store.lookup_cached, self._embedder, texts)
        except EmbeddingUnavailable as exc:
            self._degraded(f"embedding failed ({exc}); documents stored as pending")
            return None, None

    @property
    def health(self):
        """The vector cache now (:class:`memlab.store.health.VectorState`: records, embedded
        memories, vectors, pending) and what the check at open found (``lost``, ``problem``)
        until :meth:`embed_pending` or :meth:`rebuild_vectors` restores it; None without an
        embedder. The full report of a store file: ``memlab store check PATH``."""
        return self._store.vector_state()

    def embed_pending(self, *, batch: int = 256) -> int:
        """Embed records whose vector is missing (after the embedder comes back). Returns count."""
        if self._embedder is None:
            raise EmbeddingUnavailable(self._embedder_error or "no embedder")
        return self._embed(self._store.embed_pending, self._embedder, batch=batch)

    def rebuild_vectors(self) -> int:
        """Drop the vector cache and rebuild it from the truth (texts via the embedding cache)."""
        if self._embedder is None:
            raise EmbeddingUnavailable(self._embedder_error or "no embedder")
        return self._embed(self._store.rebuild_vectors, self._embedder)

    # -- read --------------------------------------------------------------------------------
    def warm(self) -> None:
        """Load (or bring up to date) the in-process read indexes now — the MemoryIndex of
        ``store.memory_index = "memory"`` and the dense ExactIndex — instead of at the next
        recall (~0.5 s per 10k memories at first load; later only the changed rows are read)."""
        self._store.warm()

    def recall(self, query: str, *, k: int | None = None, clock: Clock | None = None,
               agent_id: str | None = None, user_id: str | None = None) -> RecallResult:
        """The k most relevant memories for ``query`` at the clock's time (§8), with ``explain``."""
        query = check_text(query, "query", max_chars=self.config.recall.max_query_chars,
                           limit_name="recall.max_query_chars")
        cfg = self.config
        k = self._k(k)
        now = to_unix((clock or self.clock).now())
        scope = Scope(*self._tenant(agent_id, user_id))
        notes: list[str] = self._store.notes()
        qv = self._embed_query(query, notes)
        background = None
        if qv is not None:
            background = self.background(notes)
            qv = None if background is None else qv
        # every read of the store from here on sees one committed state (Store.read)
        return self._store.read(
            lambda: self._recall_read(query, qv, scope, now, k, notes, background))

    def _recall_read(self, query: str, qv: np.ndarray | None, scope: Scope, now: float, k: int,
                     notes: list[str], background: Background | None) -> RecallResult:
        cfg = self.config
        feats = build_features([query], query_vectors=qv, repo=self._store.signals(),
                               dense=self._store.dense, scope=scope, now=now, k=k, cfg=cfg,
                               background=background)
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
                 user_id: str | None = None, background: Background | None = None):
        """The raw-signal table of several queries asked at ``now`` (benchmarks and sweeps score
        it many times). ``query_vectors`` default: embedded here (None if the embedder is out).
        ``background``: the embedder's background sample (:mod:`memlab.recall.background`);
        default: :meth:`background` (benchmarks pass one embedded through their cache)."""
        cfg = self.config
        k = self._k(k)
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise InvalidInput("queries", "must be a list of query strings", type(queries).__name__)
        queries = [check_text(q, f"queries[{i}]", max_chars=cfg.recall.max_query_chars,
                              limit_name="recall.max_query_chars") for i, q in enumerate(queries)]
        scope = Scope(*self._tenant(agent_id, user_id))
        if query_vectors is None and self._embedder is not None and cfg.recall.use_dense:
            try:
                query_vectors = self._embed(self._embedder.embed_queries, queries)
            except EmbeddingUnavailable as exc:
                self._degraded(f"lexical recall only: {exc}")
        if not cfg.recall.use_dense:
            query_vectors = None
        if query_vectors is not None and not np.asarray(query_vectors).any(axis=1).all():
            # build_features skips the dense route of a query without a vector
            self._degraded(_NO_QUERY_VECTOR, n=int((~np.asarray(query_vectors).any(axis=1)).sum()))
        if query_vectors is not None and background is None:
            background = self.background([])
            query_vectors = None if background is None else query_vectors
        return self._store.read(lambda: build_features(
            list(queries), query_vectors=query_vectors, repo=self._store.signals(),
            dense=self._store.dense, scope=scope, now=now, k=k, cfg=cfg, background=background))

    def background(self, notes: list[str] | None = None) -> Background | None:
        """The background sample embedded by this store's embedder (the zscore relevance floor's
        calibration, :mod:`memlab.recall.background`), kept in memory once embedded. Read through
        the store's embedding cache, never written to it here (a recall does not write): the
        store's next add caches what it lacks. None when the embedder cannot embed it: recall
        then degrades to lexical (logged once, counted, noted)."""
        if self._bg is None and self._embedder is not None:
            try:
                self._bg = background_for(self.config.recall, version=self._embedder.version,
                                          embed=self._lookup_embed)
            except EmbeddingUnavailable as exc:
                what = self._degraded(f"lexical recall only: background sample not embedded "
                                      f"({exc})")
                if notes is not None:
                    notes.append(what)
        return self._bg

    def _background_rows(self) -> list[FreshVectors]:
        """The background sample's vectors the store's embedding cache lacks, for the add that
        embeds its own texts to cache in its transaction (checked once per opened store). An
        embedder that cannot embed the sample leaves it uncached: recall says so (see
        :meth:`background`), the add goes on."""
        if self._bg_cached or self._embedder is None:
            return []
        if self._bg is None:
            embedder = self._embedder
            try:
                self._bg = background_for(self.config.recall, version=embedder.version,
                                          embed=self._lookup_embed)
            except EmbeddingUnavailable:
                self._bg_cached = True   # not retried at every add; recall notes it
                return []
        return missing_cache_rows(self._bg, load_texts(self.config.recall), self._store.embeddings)

    def _lookup_embed(self, texts: list[str], query: bool) -> np.ndarray:
        """The embedder's vectors of ``texts`` through the store's cache, read only."""
        embedder = self._embedder
        key = embedder.version + ("|query" if query else "")
        fn = embedder.embed_queries if query else embedder.embed_documents
        return self._store.embeddings.lookup(key, texts, fn)[0]

    def _k(self, k: Any) -> int:
        """The validated k of a call (None: ``recall.k``): a whole number in [1, max k], max k
        being the largest whose dense pool (``recall.dense_pool_per_k * k``) fits the vector
        search, which returns at most VECTOR_SEARCH_LIMIT (4096, sqlite-vec's limit) rows."""
        rc = self.config.recall
        if rc.use_dense and rc.dense_pool_min > VECTOR_SEARCH_LIMIT:
            raise ConfigError("recall.dense_pool_min", f"must be <= {VECTOR_SEARCH_LIMIT}, the "
                              "most rows the vector search returns", rc.dense_pool_min)
        return check_k(rc.k if k is None else k, field="recall.k" if k is None else "k",
                       max_k=max_k(rc, VECTOR_SEARCH_LIMIT),
                       why=f"the dense pool, recall.dense_pool_per_k * k = "
                           f"{rc.dense_pool_per_k} * k, must fit the vector search's limit of "
                           f"{VECTOR_SEARCH_LIMIT} rows")

    def _embed_query(self, query: str, notes: list[str]) -> np.ndarray | None:
        if self._embedder is None or not self.config.recall.use_dense:
            if self._embedder is None:
                notes.append(self._degraded("lexical recall only: embedder unavailable"))
            return None
        try:
            qv = self._embed(self._embedder.embed_queries, [query])
        except EmbeddingUnavailable as exc:
            notes.append(self._degraded(f"lexical recall only: {exc}"))
            return None
        if not np.asarray(qv).any():
            notes.append(self._degraded(_NO_QUERY_VECTOR))
            return None
        return qv

    def _embed(self, fn, *args: Any, **kwargs: Any) -> Any:
        """Call the embedder (directly or through the store's cache); count the texts it cut to
        ``embedding.max_tokens`` (the embedder logs the first) in ``stats``."""
        before = getattr(self._embedder, "truncated", 0)
        try:
            return fn(*args, **kwargs)
        finally:
            cut = getattr(self._embedder, "truncated", 0) - before
            if cut:
                self.stats[TRUNCATED] += cut

    def _degraded(self, what: str, *, n: int = 1) -> str:
        """Log a documented degradation once per kind and count every occurrence (``n`` here)."""
        self.stats[f"degraded: {what}"] += n
        if self.stats[f"degraded: {what}"] == n:
            log.warning("memlab degraded: %s%s", what,
                        f" ({self._embedder_error})" if self._embedder_error else "")
        return what

    def reinforce(self, result: RecallResult | Sequence[str], *, clock: Clock | None = None,
                  agent_id: str | None = None, user_id: str | None = None) -> int:
        """The explicit, batched reinforcement step after selection: last_accessed = now and
        access_count += 1 for the recalled memories. Returns how many were updated.

        The memories must belong to the agent and user (None: the default); another tenant's id
        is refused like an unknown one (InvalidInput naming it) and nothing is updated."""
        ids = check_ids(result.ids if isinstance(result, RecallResult) else result)
        agent_id, user_id = self._tenant(agent_id, user_id)
        now = to_unix((clock or self.clock).now())
        return self._store.repo.reinforce_ids(ids, now=now, agent_id=agent_id, user_id=user_id)

    # -- lifecycle governance (memlab/write/facts.py, pins.py, feedback.py) ---------------------
    def history(self, memory_id: str, *, agent_id: str | None = None,
                user_id: str | None = None) -> list[MemoryRecord]:
        """Every revision of the fact ``memory_id`` states, oldest first (§6.1 fact_revision)."""
        a, u = self._tenant(agent_id, user_id)
        return facts.history(self._store.repo, check_id(memory_id, "memory_id"), agent_id=a,
                             user_id=u)

    def expire(self, ids: Sequence[str], *, agent_id: str | None = None,
               user_id: str | None = None) -> int:
        """Mark memories expired: kept, never recalled again. Returns how many changed."""
        a, u = self._tenant(agent_id, user_id)
        return facts.expire(self._store.repo, check_ids(ids), agent_id=a, user_id=u)

    def pin(self, memory_id: str, *, agent_id: str | None = None,
            user_id: str | None = None) -> MemoryRecord:
        """Pin a memory: it never decays and is never consolidated (§11.3); at most
        ``governance.pins_max`` per agent and user (PinLimitExceeded beyond, nothing changed)."""
        a, u = self._tenant(agent_id, user_id)
        return pins.pin(self._store.repo, check_id(memory_id, "memory_id"), agent_id=a,
                        user_id=u, cfg=self.config)

    def unpin(self, memory_id: str, *, agent_id: str | None = None,
              user_id: str | None = None) -> MemoryRecord:
        a, u = self._tenant(agent_id, user_id)
        return pins.unpin(self._store.repo, check_id(memory_id, "memory_id"), agent_id=a,
                          user_id=u)

    def pinned(self, *, agent_id: str | None = None, user_id: str | None = None
               ) -> list[MemoryRecord]:
        a, u = self._tenant(agent_id, user_id)
        return pins.pinned(self._store.repo, agent_id=a, user_id=u)

    def feedback(self, result: RecallResult | Sequence[str] = (), *, reply: str | None = None,
                 confirmed: Sequence[str] = (), rejected: Sequence[str] = (),
                 clock: Clock | None = None, agent_id: str | None = None,
                 user_id: str | None = None) -> usage.FeedbackReport:
        """Usage feedback after a turn (§11.3): the injected memories (a RecallResult or ids),
        the reply, the memories the user confirmed or rejected. Use it instead of
        :meth:`reinforce` for a turn. Returns what was counted (:class:`FeedbackReport`)."""
        ids = check_ids(result.ids if isinstance(result, RecallResult) else result)
        if reply is not None:
            reply = check_text(reply, "reply", max_chars=None, limit_name="")
        a, u = self._tenant(agent_id, user_id)
        return usage.apply_feedback(self._store.repo, ids, reply=reply,
                                    confirmed=check_ids(confirmed, "confirmed"),
                                    rejected=check_ids(rejected, "rejected"),
                                    now=to_unix((clock or self.clock).now()), cfg=self.config,
                                    agent_id=a, user_id=u)

    def contradictions(self, *, check: bool = False, clock: Clock | None = None,
                       open_only: bool = True, agent_id: str | None = None,
                       user_id: str | None = None) -> list[facts.Contradiction]:
        """Recorded contradictions of the agent and user (with ``check``: run the evidence check
        first, recording what it finds)."""
        a, u = self._tenant(agent_id, user_id)
        if check:
            facts.evidence_check(self._store.repo, agent_id=a, user_id=u, cfg=self.config,
                                 at=to_unix((clock or self.clock).now()))
        return facts.list_contradictions(self._store.repo, agent_id=a, user_id=u,
                                         open_only=open_only)

    def get(self, ids: Sequence[str], *, agent_id: str | None = None,
            user_id: str | None = None) -> list[MemoryRecord]:
        """Memories by id, in order, of the agent and user (None: the default); an unknown id
        or another tenant's raises InvalidInput naming it."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return self._store.repo.get(check_ids(ids), agent_id=agent_id, user_id=user_id)


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

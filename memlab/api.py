"""The public API: ``open_store(path, config=...)``, ``store.add(...)``, ``store.recall(...)``.

A thin facade that wires the edges together — SQLite truth source, vector cache, embedder, clock —
and hands the pure parts (scoring, selection) their inputs. Reinforcement is a separate, explicit
step (``store.reinforce(result)``), never a side effect of recall.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from memlab.clock import Clock, FixedClock, SystemClock, to_unix
from memlab.config import MemlabConfig
from memlab.embed import Embedder, make_embedder
from memlab.errors import ConfigError, EmbeddingUnavailable, InvalidInput, StoreError, UnsafeWrite
from memlab.inputs import check_id, check_ids, check_k, check_tenant, check_text
from memlab.llm import LLM, as_llm
from memlab.recall.associate import association_counts
from memlab.recall.background import Background, background_for, load_texts, missing_cache_rows
from memlab.recall.candidates import Scope, build_features, max_k
from memlab.recall.fuzzy import fuzz_recall
from memlab.recall.web import rank_web, with_web
from memlab.store.web import WebContent
from memlab.recall.result import RecallResult
from memlab.recall.score import score as score_table
from memlab.recall.select import explain_columns, select
from memlab.safety import guard_user_message
from memlab.store import Store
from memlab.store.cache import FreshVectors
from memlab.store.vectors import MAX_K as VECTOR_SEARCH_LIMIT
from memlab.types import MemoryRecord
from memlab.write.card import SOURCE_TYPE as CARD_SOURCE
from memlab.write.card import CardSync, anchor_items, load_card, plan_sync
from memlab.write.correction import CorrectionResult, resolve_user_correction
from memlab.write.interaction import (CorrectionHook, InteractionResult, remember,
                                      store_interaction)
from memlab.write.pipeline import WritePipeline
from memlab.write import facts, feedback as usage, pins

log = logging.getLogger("memlab")

_NO_QUERY_VECTOR = "lexical recall only: the embedder gives this query no vector"
#: The ``MemoryStore.stats`` key counting texts the embedder cut to ``embedding.max_tokens``.
TRUNCATED = "truncated: texts cut to embedding.max_tokens"


class MemoryStore:
    """One memory database: add, recall, reinforce. Use :func:`open_store` to make one."""

    def __init__(self, store: Store, *, config: MemlabConfig, embedder: Embedder | None,
                 clock: Clock, embedder_error: str = "", llm: LLM | None = None) -> None:
        self.config = config
        self._store = store
        self._embedder = embedder
        self._embedder_error = embedder_error
        self.clock = clock
        self.stats: Counter[str] = Counter()
        self._bg: Background | None = None
        self._bg_cached = False   # the store's cache holds the background sample (see add)
        self._bg_pending = False  # the last write carried the sample's missing rows
        #: the LLM of the LLM gate (gate.mode = "llm"); None: none
        self.llm: LLM | None = None if llm is None else as_llm(llm)
        #: store_interaction's user-correction hook (§5 step ①): by default fuzzy recall's
        #: :meth:`resolve_user_correction` (a message that corrects a logged swap rolls it back);
        #: None: none
        self.corrections: CorrectionHook | None = self._correct
        #: the short-term draw of store_interaction (layers.short_term_seed), one per opened store
        self._short_term_rng = np.random.default_rng(config.layers.short_term_seed)
        self._writer = WritePipeline(
            store, config=config, embed=self._embed_for_write, associate=self._associations,
            counters=self.stats,
            tenant=lambda a, u, where: self._tenant(a, u, where=where))

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

    # -- write (memlab.write.pipeline: the one write path) ------------------------------------
    def add(self, text: str, **fields: Any) -> MemoryRecord:
        """Add one memory; see :meth:`add_many` for the fields. Returns the stored record."""
        clock = fields.pop("clock", None)
        return self.add_many([{"text": text, **fields}], clock=clock)[0]

    def add_many(self, items: Iterable[Mapping[str, Any]], *, clock: Clock | None = None,
                 vectors: np.ndarray | None = None, replacing: Sequence[str] = ()
                 ) -> list[MemoryRecord]:
        """Add memories in one all-or-nothing transaction, through the write pipeline
        (:mod:`memlab.write.pipeline`).

        Each item: ``text`` (required) and optionally ``id``, ``agent_id``, ``user_id``, ``layer``
        (permanent/long_term/short_term; default: routed by importance under the owner's budget
        pressure, §5 and §11.3 — an explicit add is always stored, short term below the
        threshold), ``importance`` (default from the §5 scorer, association ⑤ included),
        ``emotions`` ({name: 0..100}), ``cognitive_layer`` (default by prefix, §4.1),
        ``timestamp`` (default the clock), ``event_time``, ``speaker``, ``session_id``,
        ``fact_key``, ``pinned``, ``scope`` and ``category`` (a valid Familiars cell), ``meta``
        and the other MemoryRecord fields. Invalid input raises InvalidInput naming the field and
        leaves the store unchanged. ``vectors``: precomputed document vectors of the texts
        (benchmarks embed in batches through their cache); default: embedded here through the
        store's embedding cache. ``replacing``: ids deleted in the same transaction
        (:meth:`sync_card`). A write that tries to hijack identity or instructions raises
        UnsafeWrite (:mod:`memlab.safety`) and is audited; nothing of the batch is written.
        """
        now = to_unix((clock or self.clock).now())
        with self._refusals_audited(now):
            stored = self._writer.write(items, now=now, vectors=vectors, replacing=replacing)
        self._bg_cached = self._bg_cached or self._bg_pending
        return stored

    @contextlib.contextmanager
    def _refusals_audited(self, now: float):
        """An UnsafeWrite raised by the write pipeline leaves an audit row (§12), then goes on."""
        try:
            yield
        except UnsafeWrite as exc:
            self._audit("refused_write", now=now, agent_id=exc.agent_id, user_id=exc.user_id,
                        rule=exc.safety_rule, field=exc.field, pattern=exc.pattern,
                        excerpt=exc.excerpt)
            raise

    def sync_card(self, card: str | Path, *, agent_id: str | None = None,
                  user_id: str | None = None, dry_run: bool = False,
                  clock: Clock | None = None) -> CardSync:
        """Sync the permanent layer of an agent and user with a character card (§4.2,
        :mod:`memlab.write.card`): anchors the card no longer yields are deleted and new ones
        added, in one transaction; unchanged anchors and every other memory are left as they
        are. ``dry_run``: only the plan (print it: ``str(plan)``). A malformed card raises
        CardError naming the file, the field and the rule, and writes nothing."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        c = load_card(card, max_chars=self.config.recall.max_text_chars)
        existing = self._store.repo.by_source(CARD_SOURCE, agent_id=agent_id, user_id=user_id)
        plan = plan_sync(c, existing, cfg=self.config.card, agent_id=agent_id, user_id=user_id,
                         dry_run=dry_run)
        if plan.changed and not dry_run:
            self.add_many(anchor_items(plan, importance=self.config.layers.permanent_importance),
                          clock=clock, replacing=[a.id for a in plan.removed])
            self.stats["card anchors added"] += len(plan.added)
            self.stats["card anchors removed"] += len(plan.removed)
        return plan


    def store_interaction(self, user_message: str, assistant_reply: str = "", *,
                          emotion: float | Mapping[str, float] | None = None,
                          agent_id: str | None = None, user_id: str | None = None,
                          clock: Clock | None = None, llm: Any = None,
                          corrections: Any = None) -> InteractionResult:
        """Remember one exchange, or not (§5; :mod:`memlab.write.interaction`): corrections
        hook, importance (association through recall), the autonomy gate (``gate.mode``), layer
        routing with the seeded short-term draw, one transaction. Returns an
        :class:`~memlab.write.interaction.InteractionResult` saying what was stored or why not.

        ``emotion``: an intensity in [0, 1] or an emotion vector {name: 0..100}. ``llm``: the LLM
        of the LLM gate (default: the store's, ``open_store(llm=...)``). ``corrections``: the
        user-correction hook run first (default: the store's ``corrections``, none unless set).
        """
        now = to_unix((clock or self.clock).now())
        with self._refusals_audited(now):
            return store_interaction(
                self._writer, user_message, assistant_reply, emotion=emotion, agent_id=agent_id,
                user_id=user_id, now=now, rng=self._short_term_rng,
                llm=self.llm if llm is None else as_llm(llm),
                corrections=self.corrections if corrections is None else corrections,
                degraded=self._degraded)

    def remember_many(self, items: Iterable[Mapping[str, Any]], *, clock: Clock | None = None,
                      vectors: np.ndarray | None = None, llm: Any = None,
                      message_vectors: np.ndarray | None = None) -> list[InteractionResult]:
        """store_interaction's steps ②-⑤ for a batch of add_many items (benchmark writer mode):
        each item is scored (§5, association included), gated and routed with the short-term
        draw, and what is kept is written in one transaction; one
        :class:`~memlab.write.interaction.InteractionResult` per item. An item may carry
        ``message`` and ``reply``: what the scorer and the gate read (default: its text and '').
        An item with an explicit ``layer`` (a character card's permanent memory) is written as
        given; one with an ``importance`` is not re-scored. ``vectors``: as in :meth:`add_many`;
        ``message_vectors``: the messages embedded as queries (the association lookup), when the
        caller has them (benchmarks embed them once through their cache).
        """
        now = to_unix((clock or self.clock).now())
        items = [dict(it) for it in items]
        messages = [it.pop("message", None) for it in items]
        replies = [it.pop("reply", None) or "" for it in items]
        with self._refusals_audited(now):
            drafts = self._writer.prepare(items, now=now)
        for i, (m, r) in enumerate(zip(messages, replies)):
            if m is not None:
                check_text(m, f"items[{i}].message", max_chars=self.config.recall.max_text_chars,
                           limit_name="recall.max_text_chars")
            if not isinstance(r, str):
                raise InvalidInput(f"items[{i}].reply", "must be a string", type(r).__name__)
        for name, arr in (("vectors", vectors), ("message_vectors", message_vectors)):
            if arr is not None and len(arr) != len(drafts):
                raise InvalidInput(name, f"one vector per item ({len(drafts)})", len(arr))
        results = remember(self._writer, drafts, messages=[m or d.text for m, d in
                                                           zip(messages, drafts)],
                           replies=replies, now=now, rng=self._short_term_rng,
                           llm=self.llm if llm is None else as_llm(llm), degraded=self._degraded,
                           vectors=vectors, message_vectors=message_vectors)
        self._bg_cached = self._bg_cached or self._bg_pending
        return results

    def _embed_for_write(self, texts: list[str]):
        """The write pipeline's embed step: (vectors or None, vectors the cache lacks)."""
        self._bg_pending = False
        vectors, new = self._embed_documents(texts)
        if vectors is None:
            return None, []
        bg = self._background_rows()
        self._bg_pending = bool(bg)
        return vectors, ([new] if new is not None else []) + bg

    def _associations(self, texts: list[str], owner: tuple[str, str], now: float,
                      vectors: np.ndarray | None = None) -> list[int]:
        """§5 ⑤ for the write pipeline: per text, the owner's memories recall finds relevant
        (:mod:`memlab.recall.associate`); ``vectors``: the texts' query vectors, if known."""
        cfg = self.config
        qs = [t[:cfg.recall.max_query_chars] for t in texts]
        feats = self.features(qs, k=cfg.importance.association_k, now=now, agent_id=owner[0],
                              user_id=owner[1], query_vectors=vectors)
        return association_counts(feats.columns, n_queries=len(qs), cfg=cfg).tolist()

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
               agent_id: str | None = None, user_id: str | None = None,
               include_web: bool = False) -> RecallResult:
        """The k most relevant memories for ``query`` at the clock's time (§8), with ``explain``.
        ``include_web``: also up to ``safety.web_k`` items of untrusted web content (stored apart,
        never seen otherwise; :mod:`memlab.recall.web`), after the memories and labelled."""
        if not isinstance(include_web, bool):
            raise InvalidInput("include_web", "must be a bool", include_web)
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
        result = self._store.read(
            lambda: self._recall_read(query, qv, scope, now, k, notes, background))
        if cfg.fuzzy.enabled:   # §9.2: a projection of the texts, each swap logged
            try:
                result = fuzz_recall(result, store=self._store, agent_id=scope.agent_id,
                                     user_id=scope.user_id, at=now, cfg=cfg.fuzzy)
            except StoreError as exc:   # never an unaudited swap: the true texts instead
                self._degraded(f"fuzzy recall skipped: its audit rows cannot be written "
                               f"({type(exc).__name__})")
                return result
            self.stats["fuzzy: memories projected"] += len(result)
            self.stats["fuzzy: swaps"] += len(result.swaps)
        if include_web:
            result = self._with_web(result, query, qv, scope)
        return result

    def _with_web(self, result: RecallResult, query: str, qv: np.ndarray | None,
                  scope: Scope) -> RecallResult:
        """The explicit path of untrusted web content (:mod:`memlab.recall.web`)."""
        e = self._embedder
        rows = WebContent(self._store.conn).owner_rows(
            agent_id=scope.agent_id, user_id=scope.user_id,
            model_version=e.version if e is not None else "", dim=int(e.dim) if e else 0)
        return with_web(result, rank_web(rows, query, qv, k=self.config.safety.web_k,
                                         cfg=self.config))

    def get_web(self, ids: Sequence[str], *, agent_id: str | None = None,
                user_id: str | None = None) -> list[MemoryRecord]:
        """Untrusted web content by id (stored apart: :meth:`get` never returns it)."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return WebContent(self._store.conn).get(check_ids(ids), agent_id=agent_id,
                                                user_id=user_id)

    def guarded_recall(self, user_message: str, **kwargs: Any) -> RecallResult:
        """:meth:`recall` behind the injection guard (§10 ``guard.memory_safe``): a user message
        that matches a hijack rule (:func:`memlab.safety.guard_user_message`) does not recall;
        the result is empty, its ``empty_reason`` names the rule, the skip is counted in
        ``stats`` and recorded in ``memory_audit`` (action ``recall_skipped``). Otherwise exactly
        ``recall(user_message, **kwargs)``."""
        query = check_text(user_message, "user_message",
                           max_chars=self.config.recall.max_query_chars,
                           limit_name="recall.max_query_chars")
        verdict = guard_user_message(query, self.config.safety)
        if verdict.allowed:
            return self.recall(query, **kwargs)
        agent_id, user_id = self._tenant(kwargs.get("agent_id"), kwargs.get("user_id"))
        clock = kwargs.get("clock")
        self._audit("recall_skipped", now=to_unix((clock or self.clock).now()),
                    agent_id=agent_id, user_id=user_id, rule=verdict.rule or "",
                    pattern=verdict.pattern or "", excerpt=verdict.excerpt)
        self.stats["recall skipped: injection guard"] += 1
        return RecallResult(query, (), {}, self.config.selection.prompt_max_items,
                            f"injection guard: recall skipped (safety rule {verdict.rule!r})",
                            untrusted_label=self.config.safety.untrusted_label)

    def audit_log(self, *, agent_id: str | None = None, user_id: str | None = None
                  ) -> list[dict[str, Any]]:
        """The ``memory_audit`` rows of the agent and user (None: the default), oldest first:
        id, at, agent_id, user_id, action, rule, field, pattern, excerpt
        (:mod:`memlab.store.audit`)."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return self._store.audit.rows(agent_id=agent_id, user_id=user_id)

    def _audit(self, action: str, *, now: float, agent_id: str | None, user_id: str | None,
               **row: str) -> None:
        """Record a refusal; a store that cannot write it is a documented degradation (logged
        once, counted): the refusal itself still stands."""
        w = self.config.writer
        try:
            self._store.audit.record(at=now, agent_id=agent_id or w.default_agent_id,
                                     user_id=user_id or w.default_user_id, action=action, **row)
        except StoreError as exc:
            self._degraded(f"audit row not written ({type(exc).__name__})")
            log.debug("memlab: audit row not written: %s", exc)

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
                                cfg.selection.prompt_max_items, reason, tuple(notes),
                                untrusted_label=cfg.safety.untrusted_label)
        scored = score_table(table, cfg)
        positions = select(table, scored, terms=feats.terms, k=k, cfg=cfg)[0]
        frame = explain_columns(table, scored, positions, feats.ids, feats.texts)
        rows = table["row"][positions]
        memories = tuple(self._store.repo.get_rows(rows.tolist()))
        reason = "" if len(memories) else (
            "nothing relevant enough: every candidate is below the relevance floor or forgotten")
        return RecallResult(query, memories, frame, cfg.selection.prompt_max_items, reason,
                            tuple(notes), untrusted_label=cfg.safety.untrusted_label,
                            past_label=cfg.facts.past_label)

    def resolve_user_correction(self, message: str, *, agent_id: str | None = None,
                                user_id: str | None = None, clock: Clock | None = None
                                ) -> CorrectionResult | None:
        """Roll back the misremembering the user's ``message`` corrects, if any (§9.2,
        :func:`memlab.write.correction.resolve_user_correction`): the swap is marked resolved
        and the true memory gains ``fuzzy.correction_bonus`` importance (clamped at 1)."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        got = resolve_user_correction(self._store, message, agent_id=agent_id, user_id=user_id,
                                      clock=clock or self.clock, cfg=self.config)
        if got is not None:
            self.stats["fuzzy: corrections"] += 1
        return got

    def _correct(self, user_message: str, *, agent_id: str, user_id: str,
                 now: float) -> CorrectionResult | None:
        """The default corrections hook of store_interaction (§5 ①, §9.2)."""
        return self.resolve_user_correction(user_message, agent_id=agent_id, user_id=user_id,
                                            clock=FixedClock(now))

    def fuzzy_rates(self) -> dict[str, float]:
        """This store object's fuzzy recall counters: memories projected, swaps, corrections,
        fuzz rate (swaps / projected) and correction rate (corrections / swaps); NaN for 0/0.
        Per owner from the persistent log: :func:`memlab.recall.fuzzy.fuzzy_report`."""
        projected = self.stats["fuzzy: memories projected"]
        swaps, fixed = self.stats["fuzzy: swaps"], self.stats["fuzzy: corrections"]
        return {"projected": projected, "swaps": swaps, "corrections": fixed,
                "fuzz_rate": swaps / projected if projected else math.nan,
                "correction_rate": fixed / swaps if swaps else math.nan}

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

    # -- fold jobs (memlab.jobs) -------------------------------------------------------------
    def worker(self, **kwargs: Any):
        """A :class:`memlab.jobs.Worker` over this store, its clock and embedder."""
        from memlab.jobs import Worker

        return Worker(self._store, clock=kwargs.pop("clock", self.clock),
                      embedder=kwargs.pop("embedder", self._embedder), **kwargs)

    def enqueue_job(self, kind: str, payload: Mapping[str, Any] | None = None, **kwargs: Any):
        """Queue a fold job at the store's clock (:func:`memlab.jobs.enqueue`)."""
        from memlab.jobs import enqueue

        return enqueue(self._store, kind, payload, now=to_unix(self.clock.now()), **kwargs)

    def compress_history(self, turns: Sequence[Any], *, summarise: Any = None,
                         agent_id: str | None = None, user_id: str | None = None,
                         session_id: str = "", clock: Clock | None = None) -> list[MemoryRecord]:
        """Summarise the old chunks of a conversation and store the summaries (reverie §11.5,
        :mod:`memlab.jobs.compress`); returns the new summary memories."""
        from memlab.jobs.compress import summary_items

        agent_id, user_id = self._tenant(agent_id, user_id)
        items = summary_items(self._store, turns, summarise=summarise, agent_id=agent_id,
                              user_id=user_id, session_id=session_id)
        return self.add_many(items, clock=clock)

    def recall_summaries(self, query: str, *, k: int | None = None, clock: Clock | None = None,
                         agent_id: str | None = None, user_id: str | None = None):
        """The best conversation summaries for ``query`` (:func:`memlab.jobs.compress.
        recall_summaries`: importance filter, similarity, recency)."""
        from memlab.jobs.compress import recall_summaries

        agent_id, user_id = self._tenant(agent_id, user_id)
        return recall_summaries(self._store, self._embedder, query, k=k, agent_id=agent_id,
                                user_id=user_id, now=to_unix((clock or self.clock).now()))

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
               load_embedder: bool = True, card: str | Path | None = None,
               llm: Any = None) -> MemoryStore:
    """Open (or create) a memory store.

    ``card``: a character card file (YAML or JSON) synced into the permanent layer of the
    default agent and user (``writer.default_agent_id`` / ``default_user_id``) at open
    (:meth:`MemoryStore.sync_card`; other owners: call it yourself). A malformed card closes
    the store and raises CardError.

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
    out = MemoryStore(store, config=cfg, embedder=embedder, clock=clock or SystemClock(),
                      embedder_error=error, llm=llm)
    if card is not None:
        try:
            out.sync_card(card)
        except BaseException:
            out.close()
            raise
    return out

"""The public API: ``open_store(path, config=...)``, ``store.add(...)``, ``store.recall(...)``.

A thin facade that wires the edges together — SQLite truth source, vector cache, embedder, clock —
and hands the pure parts (scoring, selection) their inputs. Reinforcement is a separate, explicit
step (``store.reinforce(result)``), never a side effect of recall.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.clock import Clock, FixedClock, SystemClock, to_unix
from memlab.config import MemlabConfig
from memlab.embed import Embedder, make_embedder
from memlab.errors import EmbeddingUnavailable, UnsafeWrite
from memlab.frames import Records, frame_items, is_frame
from memlab.inputs import check_id, check_ids, check_tenant, check_text
from memlab.lifecycle.ttl import TTLContext, expire_due
from memlab.llm import LLM, as_llm
from memlab.recall import live
from memlab.recall.access import AccessBuffer
from memlab.recall.associate import association_counts
from memlab.recall.background import Background
from memlab.recall.candidates import Scope
from memlab.recall.embedding import TRUNCATED, EmbeddingAccess
from memlab.recall.fuzzy import fuzzy_rates
from memlab.recall.reader import ReaderResult, build_rag_context
from memlab.recall.result import RecallResult
from memlab.recall.tree import TreeDistances
from memlab.safety import guard_user_message
from memlab.status import HITS, RECALLS, RETURNED, StoreStatus, store_status
from memlab.store import Store, browse
from memlab.store.snapshot import read_snapshot
from memlab.store.audit import COLUMNS as AUDIT_COLUMNS, record_refusal
from memlab.store.web import WebContent
from memlab.types import MemoryRecord
from memlab.write.card import CardSync, sync_card
from memlab.write.correction import CorrectionResult, resolve_user_correction
from memlab.write.interaction import (CorrectionHook, InteractionResult, remember_items,
                                      store_interaction)
from memlab.write.familiars import apply_writes
from memlab.write.layers import layer_item
from memlab.write.pipeline import WritePipeline
from memlab.write import facts, feedback as usage, pins

log = logging.getLogger("memlab")
__all__ = ["MemoryStore", "open_store", "TRUNCATED"]


class MemoryStore:
    """One memory database: add, recall, reinforce. Use :func:`open_store` to make one."""

    def __init__(self, store: Store, *, config: MemlabConfig, embedder: Embedder | None,
                 clock: Clock, embedder_error: str = "", llm: LLM | None = None) -> None:
        self.config = config
        self._store = store
        self.clock = clock
        self.stats: Counter[str] = Counter()
        #: the embedder, its background sample and degradations (memlab.recall.embedding)
        self._emb = EmbeddingAccess(store, config=config, embedder=embedder,
                                    embedder_error=embedder_error, stats=self.stats)
        #: the LLM of the LLM gate (gate.mode = "llm"); None: none
        self.llm: LLM | None = None if llm is None else as_llm(llm)
        #: store_interaction's user-correction hook (§5 step ①): by default fuzzy recall's
        #: :meth:`resolve_user_correction` (a message that corrects a logged swap rolls it back);
        #: None: none
        self.corrections: CorrectionHook | None = self._correct
        #: the short-term draw of store_interaction (layers.short_term_seed), one per opened store
        self._short_term_rng = np.random.default_rng(config.layers.short_term_seed)
        self._access: AccessBuffer | None = None   # the reader's (see access_stats)
        self._writer = WritePipeline(
            store, config=config, embed=self._emb.for_write, associate=self._associations,
            counters=self.stats, embed_windows=self._emb.documents,
            tenant=lambda a, u, where: self._tenant(a, u, where=where))

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Flush the reader's buffered access statistics, then close the store."""
        try:
            if self._access is not None:
                self._access.flush()
        finally:
            self._store.close()

    def __enter__(self) -> "MemoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def embedder(self) -> Embedder | None:
        return self._emb.embedder

    @property
    def _embedder(self) -> Embedder | None:
        return self._emb.embedder

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
        clock, turn = fields.pop("clock", None), fields.pop("turn", None)
        return self.add_many([{"text": text, **fields}], clock=clock, turn=turn)[0]

    def add_many(self, items: Iterable[Mapping[str, Any]] | pd.DataFrame, *,
                 clock: Clock | None = None, vectors: np.ndarray | None = None,
                 replacing: Sequence[str] = (), turn: int | None = None,
                 supersede: bool = False, windows: Sequence[np.ndarray] | None = None
                 ) -> Records:
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
        (:meth:`sync_card`). ``turn``: the dialogue's turn counter, when known (Familiars TTL:
        a turns ``ttl`` without ``created_turn`` and an ephemeral memory without a ttl get it,
        :mod:`memlab.lifecycle.ttl`). A write that tries to hijack identity or instructions raises
        UnsafeWrite (:mod:`memlab.safety`) and is audited; nothing of the batch is written.
        ``supersede``: an item's ``supersedes`` must name a live memory of its owner, marked
        deprecated in the same transaction (Familiars' writer, :mod:`memlab.write.familiars`).
        ``windows``: with ``chunk.enabled`` and ``vectors``, the window vectors of each text
        (:mod:`memlab.windows`; benchmarks embed them in batches); default: split and embedded
        here.

        ``items`` may be a DataFrame: one item per row, its columns the fields; a missing value
        (NaN, None, NaT) is a field not given (:func:`memlab.frames.frame_items`). Returns the
        stored records (a list with ``.to_frame()``).
        """
        if is_frame(items):
            items = frame_items(items)
        now = to_unix((clock or self.clock).now())
        with self._refusals_audited(now):
            stored = self._writer.write(items, now=now, vectors=vectors, replacing=replacing,
                                        turn=turn, supersede=supersede, windows=windows)
        self._emb.written()
        return Records.of(stored, MemoryRecord)

    def store_long_term(self, text: str, importance: float | None = None,
                        emotions: Mapping[str, float] | None = None, **fields: Any) -> str:
        """Reverie §4.1: one memory in the long-term layer as given (no §5 scoring or routing),
        importance default ``layers.long_term_default_importance``; returns its ``lt_`` id.
        ``fields``: as :meth:`add_many`'s items (source_type, source_uri, clock, ...)."""
        return self.add(**layer_item("long_term", text, importance=importance,
                                     layers=self.config.layers, emotions=emotions or {},
                                     **fields)).id

    def store_short_term(self, text: str, importance: float | None = None,
                         emotions: Mapping[str, float] | None = None, **fields: Any) -> str:
        """:meth:`store_long_term` for the short-term layer (default importance
        ``layers.short_term_default_importance``; an ``st_`` id)."""
        return self.add(**layer_item("short_term", text, importance=importance,
                                     layers=self.config.layers, emotions=emotions or {},
                                     **fields)).id

    def write(self, writer_output: Any, **kwargs: Any):
        """Apply a Familiars writer's output (familiars §5.7; :func:`memlab.write.familiars.
        apply_writes`: budget, supersedes, evidence, ids ``m_`` + 8 hex)."""
        return apply_writes(self, writer_output, **kwargs)

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
        return sync_card(self._store.repo, card, agent_id=agent_id, user_id=user_id,
                         dry_run=dry_run, cfg=self.config, stats=self.stats,
                         add_many=lambda items, replacing: self.add_many(
                             items, clock=clock, replacing=replacing))

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
                      message_vectors: np.ndarray | None = None,
                      windows: Sequence[np.ndarray] | None = None) -> list[InteractionResult]:
        """store_interaction's steps ②-⑤ for a batch of add_many items (benchmark writer mode):
        each item is scored (§5, association included), gated and routed with the short-term
        draw, and what is kept is written in one transaction; one
        :class:`~memlab.write.interaction.InteractionResult` per item. An item may carry
        ``message`` and ``reply``: what the scorer and the gate read (default: its text and '').
        An item with an explicit ``layer`` (a character card's permanent memory) is written as
        given; one with an ``importance`` is not re-scored. ``vectors``: as in :meth:`add_many`;
        ``message_vectors``: the messages embedded as queries (the association lookup), when the
        caller has them (benchmarks embed them once through their cache); ``windows``: as in
        :meth:`add_many`. ``items`` may be a DataFrame, as in :meth:`add_many`.
        """
        if is_frame(items):
            items = frame_items(items)
        now = to_unix((clock or self.clock).now())
        with self._refusals_audited(now):
            results = remember_items(
                self._writer, items, now=now, rng=self._short_term_rng,
                llm=self.llm if llm is None else as_llm(llm), degraded=self._degraded,
                vectors=vectors, message_vectors=message_vectors, windows=windows)
        self._emb.written()
        return results

    def _associations(self, texts: list[str], owner: tuple[str, str], now: float,
                      vectors: np.ndarray | None = None) -> list[int]:
        """§5 ⑤ for the write pipeline: per text, the owner's memories recall finds relevant
        (:mod:`memlab.recall.associate`); ``vectors``: the texts' query vectors, if known."""
        cfg = self.config
        qs = [t[:cfg.recall.max_query_chars] for t in texts]
        feats = self.features(qs, k=cfg.importance.association_k, now=now, agent_id=owner[0],
                              user_id=owner[1], query_vectors=vectors)
        return association_counts(feats.columns, n_queries=len(qs), cfg=cfg).tolist()

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
            raise EmbeddingUnavailable(self._emb.embedder_error or "no embedder")
        return self._embed(self._store.embed_pending, self._embedder, batch=batch)

    def rebuild_vectors(self) -> int:
        """Drop the vector cache and rebuild it from the truth (texts via the embedding cache)."""
        if self._embedder is None:
            raise EmbeddingUnavailable(self._emb.embedder_error or "no embedder")
        return self._embed(self._store.rebuild_vectors, self._embedder)

    # -- read --------------------------------------------------------------------------------
    def warm(self) -> None:
        """Load (or bring up to date) the in-process read indexes now — the MemoryIndex of
        ``store.memory_index = "memory"`` and the dense ExactIndex — instead of at the next
        recall (~0.5 s per 10k memories at first load; later only the changed rows are read)."""
        self._store.warm()

    def recall(self, query: str, *, k: int | None = None, clock: Clock | None = None,
               agent_id: str | None = None, user_id: str | None = None,
               include_web: bool = False, tree: TreeDistances | None = None) -> RecallResult:
        """The k most relevant memories for ``query`` at the clock's time (§8), with ``explain``.
        ``include_web``: also up to ``safety.web_k`` items of untrusted web content (stored apart,
        never seen otherwise; :mod:`memlab.recall.web`), after the memories and labelled.
        ``tree``: hops from the query's anchor node in a dialogue tree, by memory id (a mapping
        or a callable, e.g. ``DialogTree.memory_distances(anchor)``), the raw signal the
        ``dialog_tree`` scorer reads (:mod:`memlab.recall.tree`); default: unknown."""
        result = live.recall(self._store, self._emb, query, k=k, include_web=include_web,
                             now=to_unix((clock or self.clock).now()), tree=tree,
                             scope=Scope(*self._tenant(agent_id, user_id)), cfg=self.config)
        self.stats[RECALLS] += 1               # hit statistics (memlab.status)
        self.stats[HITS] += bool(len(result))
        self.stats[RETURNED] += len(result)
        return result

    def status(self) -> StoreStatus:
        """Counts of this store and this object's recall statistics (:mod:`memlab.status`)."""
        return store_status(self._store, stats=self.stats)

    def list_memories(self, *, limit: int, offset: int = 0, q: str | None = None,
                      scope: str | None = None, category: str | None = None,
                      agent_id: str | None = None, user_id: str | None = None
                      ) -> tuple[int, Records]:
        """One page of the agent's and user's memories, newest first: (matches in all, the
        page). ``q``: the text contains it; ``scope``/``category``: Familiars cell filters."""
        a, u = self._tenant(agent_id, user_id)
        with read_snapshot(self._store.conn):
            n, rows = browse.list_rowids(self._store.conn, agent_id=a, user_id=u, scope=scope,
                                         category=category, q=q, limit=limit, offset=offset)
            return n, Records.of(self._store.repo.get_rows(rows), MemoryRecord)

    def release_memory(self) -> dict[str, int]:
        """Drop the in-process read indexes (they reload from SQLite at the next recall);
        what each held (:meth:`memlab.store.Store.release`)."""
        return self._store.release()

    def get_web(self, ids: Sequence[str], *, agent_id: str | None = None,
                user_id: str | None = None) -> Records:
        """Untrusted web content by id (stored apart: :meth:`get` never returns it)."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return Records.of(WebContent(self._store.conn).get(check_ids(ids), agent_id=agent_id,
                                                           user_id=user_id), MemoryRecord)

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
        return live.skipped(query, verdict.rule, self.config)

    def audit_log(self, *, agent_id: str | None = None, user_id: str | None = None
                  ) -> Records:
        """The ``memory_audit`` rows of the agent and user (None: the default), oldest first:
        id, at, agent_id, user_id, action, rule, field, pattern, excerpt
        (:mod:`memlab.store.audit`)."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return Records(self._store.audit.rows(agent_id=agent_id, user_id=user_id),
                       columns=AUDIT_COLUMNS)

    def _audit(self, action: str, *, now: float, agent_id: str | None, user_id: str | None,
               **row: str) -> None:
        """Record a refusal (:func:`memlab.store.audit.record_refusal`)."""
        w = self.config.writer
        record_refusal(self._store.audit, degraded=self._degraded, at=now, action=action,
                       agent_id=agent_id or w.default_agent_id,
                       user_id=user_id or w.default_user_id, **row)

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
        return fuzzy_rates(self.stats)

    def features(self, queries: Sequence[str], *, k: int, now: float,
                 query_vectors: np.ndarray | None = None, agent_id: str | None = None,
                 user_id: str | None = None, background: Background | None = None):
        """The raw-signal table of several queries asked at ``now`` (benchmarks and sweeps score
        it many times). ``query_vectors`` default: embedded here (None if the embedder is out).
        ``background``: the embedder's background sample (:mod:`memlab.recall.background`);
        default: :meth:`background` (benchmarks pass one embedded through their cache)."""
        return live.features(self._store, self._emb, queries, k=k, now=now,
                             scope=Scope(*self._tenant(agent_id, user_id)),
                             query_vectors=query_vectors, background=background, cfg=self.config)

    def background(self, notes: list[str] | None = None) -> Background | None:
        """The background sample embedded by this store's embedder (the zscore relevance floor's
        calibration, :mod:`memlab.recall.embedding`); None when the embedder cannot embed it."""
        return self._emb.background(notes)

    def _embed(self, fn, *args: Any, **kwargs: Any) -> Any:
        return self._emb.embed(fn, *args, **kwargs)

    def _degraded(self, what: str, *, n: int = 1) -> str:
        """Log a documented degradation once per kind and count it (:mod:`.recall.embedding`)."""
        return self._emb.degraded(what, n=n)

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
                         session_id: str = "", clock: Clock | None = None) -> Records:
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
        from memlab.jobs.compress import SummaryHit, recall_summaries

        agent_id, user_id = self._tenant(agent_id, user_id)
        return Records.of(recall_summaries(self._store, self._embedder, query, k=k,
                                           agent_id=agent_id, user_id=user_id,
                                           now=to_unix((clock or self.clock).now())), SummaryHit)

    # -- Familiars: markdown workspace and consolidation (memlab/workspace, memlab/lifecycle) ----
    def export_workspace(self, directory: str | Path, **kwargs: Any):
        """:func:`memlab.workspace.export_workspace` of this store (every owner by default)."""
        from memlab.workspace import export_workspace

        return export_workspace(self._store, directory, **kwargs)

    def import_workspace(self, directory: str | Path):
        """:func:`memlab.workspace.import_workspace` into this store (records stay pending until
        :meth:`embed_pending`)."""
        from memlab.workspace import import_workspace

        return import_workspace(self._store, directory)

    def consolidate(self, *, dry_run: bool = False, agent_id: str | None = None,
                    user_id: str | None = None, **kwargs: Any):
        """The Familiars consolidator (:func:`memlab.lifecycle.consolidate.consolidate`) over the
        cells of one agent and user (None: the default, as everywhere), with the store's embedder
        and LLM; returns (plan, new entries). ``plan.to_frame()`` shows what merges."""
        from memlab.lifecycle.consolidate import consolidate

        if self._embedder is None:
            raise EmbeddingUnavailable(f"consolidation needs the embedder's vectors: "
                                       f"{self._emb.embedder_error or 'this store has no embedder'}")
        a, u = self._tenant(agent_id, user_id)
        kwargs.setdefault("llm", self.llm)
        return consolidate(self._store, embedder=self._embedder, dry_run=dry_run, agent_id=a,
                           user_id=u, **kwargs)

    # -- lifecycle governance (memlab/write/facts.py, pins.py, feedback.py) ---------------------
    def history(self, memory_id: str, *, agent_id: str | None = None,
                user_id: str | None = None) -> Records:
        """Every revision of the fact ``memory_id`` states, oldest first (§6.1 fact_revision)."""
        a, u = self._tenant(agent_id, user_id)
        return Records.of(facts.history(self._store.repo, check_id(memory_id, "memory_id"),
                                        agent_id=a, user_id=u), MemoryRecord)

    def expire(self, ids: Sequence[str], *, agent_id: str | None = None,
               user_id: str | None = None) -> int:
        """Mark memories expired: kept, never recalled again. Returns how many changed."""
        a, u = self._tenant(agent_id, user_id)
        return facts.expire(self._store.repo, check_ids(ids), agent_id=a, user_id=u)

    def expire_due(self, ctx: TTLContext, *, agent_id: str | None = None,
                   user_id: str | None = None) -> list[str]:
        """Mark the agent's and user's memories whose TTL ran out at ``ctx`` expired (kept,
        never recalled again; :func:`memlab.lifecycle.ttl.expire_due`). Returns their ids."""
        a, u = self._tenant(agent_id, user_id)
        return expire_due(self._store, ctx, agent_id=a, user_id=u)

    # -- Familiars reader (memlab/recall/reader.py) ------------------------------------------------
    def build_rag_context(self, query: str, **kwargs: Any) -> ReaderResult:
        """Familiars' reader (§5.8): :func:`memlab.recall.reader.build_rag_context` on this
        store (its access statistics buffered in :attr:`access_stats`)."""
        return build_rag_context(self, query, **kwargs)

    @property
    def access_stats(self) -> AccessBuffer:
        """The reader's buffered access statistics (``flush()``; flushed at :meth:`close`)."""
        if self._access is None:
            self._access = AccessBuffer(self._store.repo.record_accesses,
                                        cfg=self.config.reader, clock=self.clock)
        return self._access

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
               ) -> Records:
        a, u = self._tenant(agent_id, user_id)
        return Records.of(pins.pinned(self._store.repo, agent_id=a, user_id=u), MemoryRecord)

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
                       user_id: str | None = None) -> Records:
        """Recorded contradictions of the agent and user (with ``check``: run the evidence check
        first, recording what it finds)."""
        a, u = self._tenant(agent_id, user_id)
        if check:
            facts.evidence_check(self._store.repo, agent_id=a, user_id=u, cfg=self.config,
                                 at=to_unix((clock or self.clock).now()))
        return Records.of(facts.list_contradictions(self._store.repo, agent_id=a, user_id=u,
                                                    open_only=open_only), facts.Contradiction)

    def get(self, ids: Sequence[str], *, agent_id: str | None = None,
            user_id: str | None = None) -> Records:
        """Memories by id, in order, of the agent and user (None: the default); an unknown id
        or another tenant's raises InvalidInput naming it."""
        agent_id, user_id = self._tenant(agent_id, user_id)
        return Records.of(self._store.repo.get(check_ids(ids), agent_id=agent_id,
                                                user_id=user_id), MemoryRecord)


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

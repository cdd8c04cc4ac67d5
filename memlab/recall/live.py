"""Live recall over an opened store (moved out of ``memlab.api``, which delegates here): one
query end to end — candidates and raw signals in one read snapshot, the pure scorer, selection,
the fuzzy projection (§9.2), the explicit web path (§12) — and the raw-signal table of many
queries (benchmarks, sweeps, the §5 association lookup).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput, StoreError
from memlab.inputs import check_k, check_text
from memlab.recall.background import Background
from memlab.recall.candidates import Scope, build_features, max_k
from memlab.recall.embedding import EmbeddingAccess
from memlab.recall.fuzzy import fuzz_recall
from memlab.recall.result import RecallResult
from memlab.recall.score import score as score_table
from memlab.recall.select import explain_columns, select
from memlab.recall.tree import TreeDistances, with_tree_distance
from memlab.recall.web import rank_web, with_web
from memlab.store import Store
from memlab.store.vectors import MAX_K as VECTOR_SEARCH_LIMIT
from memlab.store.web import WebContent


def valid_k(cfg: MemlabConfig, k: Any) -> int:
    """The validated k of a call (None: ``recall.k``): a whole number in [1, max k], max k
    being the largest whose dense pool (``recall.dense_pool_per_k * k``) fits the vector
    search, which returns at most VECTOR_SEARCH_LIMIT (4096, sqlite-vec's limit) rows."""
    rc = cfg.recall
    if rc.use_dense and rc.dense_pool_min > VECTOR_SEARCH_LIMIT:
        raise ConfigError("recall.dense_pool_min", f"must be <= {VECTOR_SEARCH_LIMIT}, the "
                          "most rows the vector search returns", rc.dense_pool_min)
    return check_k(rc.k if k is None else k, field="recall.k" if k is None else "k",
                   max_k=max_k(rc, VECTOR_SEARCH_LIMIT),
                   why=f"the dense pool, recall.dense_pool_per_k * k = "
                       f"{rc.dense_pool_per_k} * k, must fit the vector search's limit of "
                       f"{VECTOR_SEARCH_LIMIT} rows")


def recall(store: Store, emb: EmbeddingAccess, query: str, *, k: Any, now: float, scope: Scope,
           include_web: bool, cfg: MemlabConfig, tree: TreeDistances | None = None
           ) -> RecallResult:
    """``MemoryStore.recall`` once the owner and the time are known. ``tree``: the dialogue
    tree's hops by memory id (:mod:`memlab.recall.tree`), None: unknown."""
    if not isinstance(include_web, bool):
        raise InvalidInput("include_web", "must be a bool", include_web)
    query = check_text(query, "query", max_chars=cfg.recall.max_query_chars,
                       limit_name="recall.max_query_chars")
    k = valid_k(cfg, k)
    notes: list[str] = store.notes()
    qv = emb.query(query, notes)
    background = None
    if qv is not None:
        background = emb.background(notes)
        qv = None if background is None else qv
    # every read of the store from here on sees one committed state (Store.read)
    result = store.read(lambda: _read(store, query, qv, scope, now, k, notes, background, cfg,
                                      tree))
    if cfg.fuzzy.enabled:   # §9.2: a projection of the texts, each swap logged
        try:
            result = fuzz_recall(result, store=store, agent_id=scope.agent_id,
                                 user_id=scope.user_id, at=now, cfg=cfg.fuzzy)
        except StoreError as exc:   # never an unaudited swap: the true texts instead
            emb.degraded(f"fuzzy recall skipped: its audit rows cannot be written "
                         f"({type(exc).__name__})")
            return result
        emb.stats["fuzzy: memories projected"] += len(result)
        emb.stats["fuzzy: swaps"] += len(result.swaps)
    if include_web:   # the explicit path of untrusted web content (memlab.recall.web)
        e = emb.embedder
        rows = WebContent(store.conn).owner_rows(
            agent_id=scope.agent_id, user_id=scope.user_id,
            model_version=e.version if e is not None else "", dim=int(e.dim) if e else 0)
        result = with_web(result, rank_web(rows, query, qv, k=cfg.safety.web_k, cfg=cfg))
    return result


def skipped(query: str, rule: str | None, cfg: MemlabConfig) -> RecallResult:
    """The empty result of a recall the injection guard skipped (``guarded_recall``)."""
    return RecallResult(query, (), {}, cfg.selection.prompt_max_items,
                        f"injection guard: recall skipped (safety rule {rule!r})",
                        untrusted_label=cfg.safety.untrusted_label)


def _read(store: Store, query: str, qv: np.ndarray | None, scope: Scope, now: float, k: int,
          notes: list[str], background: Background | None, cfg: MemlabConfig,
          tree: TreeDistances | None = None) -> RecallResult:
    feats = build_features([query], query_vectors=qv, repo=store.signals(), dense=store.dense,
                           scope=scope, now=now, k=k, cfg=cfg, background=background)
    if tree is not None:
        feats = with_tree_distance(feats, [tree])
    table = feats.columns
    if not len(feats):
        reason = ("no memories stored for this agent and user"
                  if store.repo.count(agent_id=scope.agent_id, user_id=scope.user_id) == 0
                  else "no stored memory shares a term or an entity with the query")
        return RecallResult(query, (), explain_columns(table, None, np.zeros(0, int), {}, {}),
                            cfg.selection.prompt_max_items, reason, tuple(notes),
                            untrusted_label=cfg.safety.untrusted_label)
    scored = score_table(table, cfg)
    positions = select(table, scored, terms=feats.terms, k=k, cfg=cfg)[0]
    frame = explain_columns(table, scored, positions, feats.ids, feats.texts)
    rows = table["row"][positions]
    memories = tuple(store.repo.get_rows(rows.tolist()))
    reason = "" if len(memories) else (
        "nothing relevant enough: every candidate is below the relevance floor or forgotten")
    return RecallResult(query, memories, frame, cfg.selection.prompt_max_items, reason,
                        tuple(notes), untrusted_label=cfg.safety.untrusted_label,
                        past_label=cfg.facts.past_label)


def features(store: Store, emb: EmbeddingAccess, queries: Sequence[str], *, k: Any, now: float,
             scope: Scope, query_vectors: np.ndarray | None, background: Background | None,
             cfg: MemlabConfig):
    """``MemoryStore.features`` once the owner is known."""
    k = valid_k(cfg, k)
    if isinstance(queries, str) or not isinstance(queries, Sequence):
        raise InvalidInput("queries", "must be a list of query strings", type(queries).__name__)
    queries = [check_text(q, f"queries[{i}]", max_chars=cfg.recall.max_query_chars,
                          limit_name="recall.max_query_chars") for i, q in enumerate(queries)]
    query_vectors, background = emb.queries(queries, query_vectors, background)
    return store.read(lambda: build_features(
        list(queries), query_vectors=query_vectors, repo=store.signals(), dense=store.dense,
        scope=scope, now=now, k=k, cfg=cfg, background=background))


__all__ = ["features", "recall", "skipped", "valid_k"]

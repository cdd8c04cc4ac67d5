"""Familiars' reader (§5.8): ``build_rag_context(query)`` assembles the RAG context.

§5.8.1: dense recall (cosine) -> time decay -> tree distance -> combined score -> top k injected.
Nothing here re-implements a formula; each step is the piece recall already has:

1. candidates and raw signals: :meth:`memlab.api.MemoryStore.features` (the raw-signal table of
   :mod:`memlab.recall.features`: every route's candidates with their cosine, age, ...);
2. §5.8.2 ``is_live``: candidates that are deprecated or whose TTL has run out at ``ttl_ctx``
   (:mod:`memlab.lifecycle.ttl`) are left out (they stay on disk);
3. the table's ``tree_distance`` column is filled from ``tree_distance(record)``: the hops from
   the current dialogue node to the memory's node, given by the dialogue tree (None: unknown,
   NaN, the tree term adds 0);
4. the ``dialog_tree`` scorer (:func:`memlab.recall.score.dialog_tree`, §5.4.2):
   ``alpha*cos + beta*exp(-age_s/recency_tau) + gamma*exp(-tree_distance/tree_tau)`` with the
   ``dialog_tree`` config section; its additive terms are ``cosine_term``, ``recency_term`` and
   ``tree_term``;
5. top k by that score through recall's selection (:func:`memlab.recall.select.select`: the
   relevance floor, dedup and character budget of ``recall`` and ``selection``, exactly as the
   benchmark scores the ``dialog_tree`` scorer), rendered as recall's escaped prompt block
   (:func:`memlab.recall.inject.render_prompt_block`, via :meth:`RecallResult.to_prompt`);
6. every memory returned gets ``last_accessed = now`` and ``access_count += 1``, buffered and
   written in batches (:mod:`memlab.recall.access`; the store's ``access_stats``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable

import numpy as np
import pandas as pd

from memlab.clock import to_unix
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.lifecycle.ttl import TTLContext, is_live
from memlab.recall.result import RecallResult
from memlab.frames import renamed
from memlab.recall.score import score
from memlab.recall.select import explain_frame, select
from memlab.types import MemoryRecord

SCORER = "dialog_tree"
#: (memory) -> hops from the current dialogue node to the memory's node; None: unknown
TreeDistance = Callable[[MemoryRecord], "float | None"]

__all__ = ["ReaderResult", "build_rag_context", "SCORER", "TreeDistance"]


@dataclass(frozen=True)
class ReaderResult:
    """What the reader returns: ``memories`` best first, their ``scores``, ``to_frame()`` (one
    row per memory: rank, id, text, score, the raw signals and the additive terms listed in
    ``additive``, whose sum is the score; ``frame`` is its retired spelling), ``context`` (the
    prompt block; "" when empty) and ``empty_reason``. ``left_out`` counts the candidates
    ``is_live`` left out."""

    query: str
    memories: tuple[MemoryRecord, ...]
    _table: pd.DataFrame
    additive: tuple[str, ...]
    context: str
    empty_reason: str = ""
    left_out: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return len(self.memories)

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.memories]

    @property
    def scores(self) -> np.ndarray:
        return self._table["score"].to_numpy() if len(self._table) else np.zeros(0)

    def to_frame(self) -> pd.DataFrame:
        """One row per memory: rank, id, text, score, raw signals and additive terms (a copy)."""
        return self._table.copy()

    @property
    def frame(self) -> pd.DataFrame:
        """Retired: :meth:`to_frame`."""
        renamed("ReaderResult.frame", "ReaderResult.to_frame()")
        return self._table

    def _repr_html_(self) -> str:  # Jupyter
        if not self.memories:
            return f"<p>no memories: {self.empty_reason}</p>"
        return self._table._repr_html_()

    @property
    def terms(self) -> pd.DataFrame:
        """The additive terms of each memory (columns ``additive``), indexed by id."""
        return self._table.set_index("id")[list(self.additive)] if len(self._table) else \
            pd.DataFrame(columns=list(self.additive))


def _hops(fn: TreeDistance, rec: MemoryRecord) -> float:
    d = fn(rec)
    if d is None:
        return math.nan
    if isinstance(d, bool) or not isinstance(d, Real) or not math.isfinite(d) or d < 0:
        raise InvalidInput(f"tree_distance({rec.id})", "must be None (unknown) or a finite "
                           "number of hops >= 0", d)
    return float(d)


def build_rag_context(store: Any, query: str, *, k: int | None = None, now: float,
                      ttl_ctx: TTLContext | None = None,
                      tree_distance: TreeDistance | None = None,
                      cfg: MemlabConfig | None = None, agent_id: str | None = None,
                      user_id: str | None = None, record_access: bool = True) -> ReaderResult:
    """Familiars' RAG context for ``query`` at ``now`` (Unix seconds UTC, or an aware datetime),
    from a :class:`memlab.api.MemoryStore` (see the module docstring for the steps).

    ``k``: memories at most (default ``recall.k``). ``ttl_ctx``: the TTL context (default
    ``TTLContext(now)``: no turn counter, so a memory with a turns TTL raises InvalidInput -
    give the turn). ``tree_distance``: hops from the current dialogue node to a memory's node
    (None: no tree, every distance unknown). ``cfg``: the configuration scored with (default
    the store's; candidates are always generated with the store's). ``record_access``: False
    leaves the access statistics alone (an inspection that is not a read).
    """
    cfg = store.config if cfg is None else cfg
    if not isinstance(cfg, MemlabConfig):
        raise InvalidInput("cfg", "must be a MemlabConfig", type(cfg).__name__)
    now = to_unix(now)
    ctx = TTLContext(now=now) if ttl_ctx is None else ttl_ctx
    if not isinstance(ctx, TTLContext):
        raise InvalidInput("ttl_ctx", "must be a TTLContext", type(ctx).__name__)
    k = cfg.recall.k if k is None else k
    feats = store.features([query], k=k, now=now, agent_id=agent_id, user_id=user_id)
    table = {c: np.array(v, copy=True) for c, v in feats.columns.items()}
    rows = table["row"].tolist()
    records = store.get([feats.ids[r] for r in rows], agent_id=agent_id,
                        user_id=user_id) if rows else []
    kw = ctx.kwargs()
    live = np.fromiter((is_live(r, **kw) for r in records), bool, count=len(records))
    table = {c: v[live] for c, v in table.items()}
    records = [r for r, ok in zip(records, live) if ok]
    if tree_distance is not None:
        table["tree_distance"] = np.array([_hops(tree_distance, r) for r in records],
                                          dtype=np.float32)
    scored = score(table, cfg, scorer=SCORER)
    positions = select(table, scored, terms=feats.terms, k=k, cfg=cfg)[0] if records else \
        np.zeros(0, dtype=np.int64)
    frame = explain_frame(table, scored, positions, feats.ids, feats.texts)
    memories = tuple(records[p] for p in positions.tolist())
    reason = ""
    if not memories:
        reason = ("no live memory (every candidate deprecated or expired)" if rows
                  else "no candidate memory for this query")
        if records:
            reason = "nothing relevant enough: every live candidate is below the relevance floor"
    if memories and record_access:
        store.access_stats.record([m.id for m in memories], at=now)
    context = RecallResult(query, memories, frame, cfg.selection.prompt_max_items,
                           untrusted_label=cfg.safety.untrusted_label).to_prompt()
    return ReaderResult(query, memories, frame, scored.additive, context, reason,
                        left_out=int((~live).sum()), notes=tuple(feats.notes))

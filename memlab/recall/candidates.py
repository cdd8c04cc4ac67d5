"""Candidates and raw signals: the expensive, impure half of recall (§8).

For each query, gather candidates from every route — permanent (always considered), dense (vector
search), lexical (term index, BM25-ranked) and entity (memories sharing a named entity, §11.1) —
and compute their raw signals into one :mod:`memlab.recall.features` table. Nothing here depends on
a scoring weight: the pure scorer reads the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from memlab.config import MemlabConfig, RecallConfig
from memlab.recall.features import LAYER_CODES, Features, empty_table, make_table
from memlab.text import extract_entities, memory_terms, temporal_intent, time_window_days

SECONDS_PER_DAY = 86_400.0


def pool_sizes(k: int, rc: RecallConfig) -> tuple[int, int, int]:
    """(permanent, dense, lexical) pool sizes of §8: max(80, min(400, 24k)), max(12, 4k),
    max(120, 30k) with the config's defaults."""
    permanent = max(rc.permanent_pool_min, min(rc.permanent_pool_max, rc.permanent_pool_per_k * k))
    dense = max(rc.dense_pool_min, rc.dense_pool_per_k * k)
    lexical = max(rc.lexical_pool_min, rc.lexical_pool_per_k * k)
    return permanent, dense, lexical


class DenseIndex(Protocol):
    def search(self, query_vec: np.ndarray, k: int, *, agent_id: str, user_id: str
               ) -> tuple[np.ndarray, np.ndarray]: ...

    def vectors(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class Scope:
    """Whose memories a recall may see: filtered before ranking, never after."""

    agent_id: str
    user_id: str


def build_features(queries: Sequence[str], *, query_vectors: np.ndarray | None, repo,
                   dense: DenseIndex | None, scope: Scope, now: float, k: int,
                   cfg: MemlabConfig) -> Features:
    """The raw-signal table for a batch of queries asked at ``now`` by ``scope``.

    ``query_vectors`` is None when the embedder is unavailable: the dense route is skipped and
    cosine is NaN (a documented degradation; the caller logs and counts it).
    """
    rc, tc = cfg.recall, cfg.temporal
    n_perm, n_dense, n_lex = pool_sizes(k, rc)
    parts, terms_by_row, texts_by_row, ids_by_row = [], {}, {}, {}
    for qi, query in enumerate(queries):
        qterms = memory_terms(query, term_cap=rc.term_cap, text_cap=rc.text_cap)
        intent = temporal_intent(query, recent=tc.recent_cues, historical=tc.historical_cues,
                                 when=tc.when_cues, first=tc.first_cues) if tc.enabled else None
        window = time_window_days(query) if tc.enabled and tc.time_windows else None
        since = now - window * SECONDS_PER_DAY if window else None
        bounds = {"since": since, "until": now + 1.0} if since is not None else {}
        rows: dict[int, None] = {}
        dense_rank: dict[int, int] = {}
        lex_rank: dict[int, int] = {}
        bm25: dict[int, float] = {}
        if rc.use_permanent and n_perm > 0:
            for r in repo.permanent_candidates(agent_id=scope.agent_id, user_id=scope.user_id,
                                               limit=n_perm):
                rows[int(r)] = None
        qv = query_vectors[qi] if query_vectors is not None else None
        if rc.use_dense and qv is not None and dense is not None and n_dense > 0:
            d_rows, _ = dense.search(qv, n_dense, agent_id=scope.agent_id, user_id=scope.user_id,
                                     **bounds)
            for rank, r in enumerate(d_rows, 1):
                rows[int(r)] = None
                dense_rank[int(r)] = rank
        if rc.use_lexical and qterms and n_lex > 0:
            l_rows, _, l_bm25 = repo.lexical_candidates(qterms, agent_id=scope.agent_id,
                                                        user_id=scope.user_id, limit=n_lex)
            for rank, (r, s) in enumerate(zip(l_rows, l_bm25), 1):
                rows[int(r)] = None
                lex_rank[int(r)] = rank
                bm25[int(r)] = float(s)
        entities = extract_entities(query, min_chars=cfg.entity.min_chars) \
            if cfg.entity.enabled else []
        if entities:
            for r in repo.entity_rows(entities, agent_id=scope.agent_id, user_id=scope.user_id,
                                      limit=n_lex):
                rows[int(r)] = None
        if not rows:
            continue
        rowids = np.fromiter(rows, dtype=np.int64, count=len(rows))
        cols = repo.feature_columns(rowids)
        if since is not None:  # the window binds every route but the permanent one
            ev_all = np.where(np.isnan(cols["event_time"]), cols["timestamp"], cols["event_time"])
            keep = (cols["layer"] == LAYER_CODES["permanent"]) | (ev_all >= since)
            if not keep.all():
                rowids = rowids[keep]
                cols = {c: (v[keep] if isinstance(v, np.ndarray) else [x for x, m in zip(v, keep) if m])
                        for c, v in cols.items()}
            if not len(rowids):
                continue
        cosine = np.full(len(rowids), np.nan, dtype=np.float32)
        if qv is not None and dense is not None:
            have, vecs = dense.vectors(rowids)
            if len(vecs):
                cosine[have] = vecs @ np.asarray(qv, dtype=np.float32)
        qset = frozenset(qterms)
        mterms = [frozenset(t) for t in cols["terms"]]
        lexical = np.array([len(qset & m) / len(qset) if qset else 0.0 for m in mterms],
                           dtype=np.float32)
        ts = cols["timestamp"]
        last = np.where(np.isnan(cols["last_accessed"]), ts, cols["last_accessed"])
        ev = np.where(np.isnan(cols["event_time"]), ts, cols["event_time"])
        ent = repo.entity_matches(entities, rowids) if entities else np.zeros(len(rowids))
        parts.append(make_table(
            qid=np.full(len(rowids), qi), row=rowids, cosine=cosine, lexical=lexical,
            bm25=[bm25.get(int(r), 0.0) for r in rowids],
            dense_rank=[dense_rank.get(int(r), 0) for r in rowids],
            lexical_rank=[lex_rank.get(int(r), 0) for r in rowids],
            importance=cols["importance"], access_count=cols["access_count"],
            mention_count=cols["mention_count"],
            age_days=np.maximum(0.0, (now - ts) / SECONDS_PER_DAY),
            since_access_days=np.maximum(0.0, (now - last) / SECONDS_PER_DAY),
            event_age_days=(now - ev) / SECONDS_PER_DAY, event_time=ev,
            emotion_max=cols["emotion_max"], layer=cols["layer"], cognitive=cols["cognitive"],
            pinned=cols["pinned"], entity_matches=ent,
            intent=np.full(len(rowids), intent.code if intent else 0),
            text_len=cols["text_len"],
        ))
        for r, t, tx, i in zip(rowids, mterms, cols["texts"], cols["ids"]):
            terms_by_row[int(r)] = t
            texts_by_row[int(r)] = tx
            ids_by_row[int(r)] = i
    import pandas as pd

    table = pd.concat(parts, ignore_index=True) if parts else empty_table()
    return Features(table=table, terms=terms_by_row, texts=texts_by_row, ids=ids_by_row,
                    query_texts=tuple(queries))

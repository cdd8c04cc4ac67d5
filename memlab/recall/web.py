"""The explicit recall path of untrusted web content (Reverie §12; stored apart,
:mod:`memlab.store.web`).

Plain recall never sees web content. ``MemoryStore.recall(query, include_web=True)`` adds, after
the local memories, at most ``safety.web_k`` web items of the owner: those with a vector ranked by
cosine with the query (best first), then those without one by the share of the query's terms they
hold; an item with neither a vector nor a shared term is left out. They keep ``source_type``
``untrusted_web``, so the prompt block labels each ``safety.untrusted_label``; the explain frame
marks them ``web`` (their score is the cosine, or the term share).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from memlab.config import MemlabConfig
from memlab.recall.result import RecallResult
from memlab.store.web import WebRows
from memlab.text import memory_terms


@dataclasses.dataclass(frozen=True)
class WebHit:
    record: object
    cosine: float
    lexical: float


def rank_web(rows: WebRows, query: str, query_vector: np.ndarray | None, *, k: int,
             cfg: MemlabConfig) -> list[WebHit]:
    """The best ``k`` web items for ``query`` (see the module docstring)."""
    n = len(rows.records)
    if n == 0 or k <= 0:
        return []
    rc = cfg.recall
    qterms = frozenset(memory_terms(query, term_cap=rc.query_term_cap, text_cap=rc.text_cap))
    lexical = np.array([len(qterms & t) / len(qterms) if qterms else 0.0 for t in rows.terms])
    cosine = np.full(n, np.nan)
    if rows.vectors is not None and query_vector is not None:
        q = np.asarray(query_vector, np.float32).reshape(-1)
        if q.any():
            vecs = rows.vectors
            norms = np.linalg.norm(vecs, axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                cosine = (vecs @ q) / (norms * np.linalg.norm(q))
    has = np.isfinite(cosine)
    keep = np.flatnonzero(has | (lexical > 0))
    # vectors first by cosine, then the others by term share; ties: newest first (row order)
    order = np.lexsort((keep, -lexical[keep], -np.where(has[keep], cosine[keep], -np.inf),
                        ~has[keep]))
    return [WebHit(rows.records[i], float(cosine[i]), float(lexical[i]))
            for i in keep[order][:k]]


def with_web(result: RecallResult, hits: list[WebHit]) -> RecallResult:
    """``result`` with the web hits after its memories (explain rows marked ``web``)."""
    if not hits:
        return result
    frame = result.to_frame()
    if "web" not in frame.columns:
        frame["web"] = False
    start = int(frame["rank"].max()) if len(frame) and "rank" in frame else 0
    extra = pd.DataFrame({
        "rank": np.arange(start + 1, start + 1 + len(hits)),
        "id": [h.record.id for h in hits], "text": [h.record.text for h in hits],
        "score": [h.cosine if np.isfinite(h.cosine) else h.lexical for h in hits],
        "cosine": [h.cosine for h in hits], "lexical": [h.lexical for h in hits], "web": True})
    frame = pd.concat([frame, extra], ignore_index=True) if len(frame) else extra
    reason = "" if hits else result.empty_reason
    return dataclasses.replace(result, memories=result.memories + tuple(h.record for h in hits),
                               explain=frame, empty_reason=reason)


__all__ = ["WebHit", "rank_web", "with_web"]

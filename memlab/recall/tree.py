"""The dialogue tree's raw signal: fill ``tree_distance`` in a built feature table.

:func:`~memlab.recall.candidates.build_features` leaves ``tree_distance`` unknown (NaN): the store
knows nothing of dialogue trees. Who holds one (a benchmark replaying a conversation into
:class:`memlab.dialog.DialogTree`, a caller of ``MemoryStore.recall(tree=...)``) knows, for each
query, the hops from the query's anchor node to the node each memory was written from; this
post-step writes them into the candidate rows, by memory id. A memory the mapping does not name
stays NaN (unknown: not from a turn of the tree, or from another tree of the forest); the
``dialog_tree`` scorer gives it a tree term of 0. No weight is read here: the table stays raw.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from memlab.errors import InvalidInput
from memlab.recall.features import Features, column

__all__ = ["TreeDistances", "tree_distance_column", "with_tree_distance"]

#: hops by memory id from one query's anchor node: a mapping or a callable (None: unknown)
TreeDistances = Mapping[str, float] | Callable[[str], "float | None"]


def _lookup(dist: TreeDistances) -> Callable[[str], float | None]:
    if isinstance(dist, Mapping):
        return dist.get
    if callable(dist):
        return dist
    raise InvalidInput("tree", "a mapping or a callable of memory id -> hops (None: unknown)",
                       type(dist).__name__)


def tree_distance_column(qid: np.ndarray, rows: np.ndarray, ids: Mapping[int, str],
                         per_query: Sequence[TreeDistances | None]) -> np.ndarray:
    """float32 hops for each table row: ``per_query[qid]`` looked up by the row's memory id
    (``ids[row]``); NaN where it gives None or the query has no mapping (None)."""
    qid = np.asarray(qid, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    out = np.full(len(qid), np.nan, dtype=np.float32)
    lookups = [None if d is None else _lookup(d) for d in per_query]
    for i, (q, r) in enumerate(zip(qid.tolist(), rows.tolist())):
        if q >= len(lookups) or lookups[q] is None:
            continue
        hops = lookups[q](ids[r])
        if hops is None:
            continue
        if isinstance(hops, bool) or not isinstance(hops, (int, float, np.number)) \
                or math.isnan(hops) or hops < 0:
            raise InvalidInput(f"tree[{ids[r]!r}]", "hops must be a number >= 0 (None: unknown)",
                               hops)
        out[i] = hops
    return out


def with_tree_distance(features: Features, per_query: Sequence[TreeDistances | None]
                       ) -> Features:
    """``features`` with its ``tree_distance`` column filled from ``per_query`` (one mapping or
    callable per query of the batch, in qid order; None: that query's distances unknown)."""
    if len(per_query) != len(features.query_texts) and features.query_texts:
        raise InvalidInput("tree", f"one entry per query ({len(features.query_texts)})",
                           len(per_query))
    if not len(features):
        return features
    cols = dict(features.columns)
    cols["tree_distance"] = tree_distance_column(column(cols, "qid"), column(cols, "row"),
                                                 features.ids, per_query)
    return Features(columns=cols, terms=features.terms, texts=features.texts, ids=features.ids,
                    query_texts=features.query_texts, notes=features.notes)

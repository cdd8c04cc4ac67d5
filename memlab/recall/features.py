"""The raw-signal table: one row per (query, candidate memory).

Recall is split into an expensive, impure part (candidates and these raw signals: store, embedder,
clock) and a cheap, pure part (scoring, selection, metrics). This module defines the table that joins
them. Every column is a *raw* signal: nothing here depends on a scoring weight, so a sweep computes the
table once per dataset and rescores it for every configuration.

Columns (dtype; meaning):

=================  ========  =====================================================================
qid                int32     query index within the batch (0 for a single recall)
row                int64     the memory's rowid in the store
cosine             float32   cosine(query, memory) from the dense route; NaN when unknown
lexical            float32   |query terms ∩ memory terms| / |query terms| (memory_terms, §6.2)
bm25               float32   BM25 of the memory for the query terms (0 when no term matches)
dense_rank         int32     1-based rank in the dense route's result list; 0 = not retrieved
lexical_rank       int32     1-based rank by BM25 in the lexical route; 0 = not retrieved
importance         float32   stored importance in [0, 1]
access_count       int32     times recalled (reinforcement)
mention_count      int32     times written (>= 1)
age_days           float32   (now - written timestamp) / 86400, >= 0
since_access_days  float32   (now - (last_accessed or timestamp)) / 86400, >= 0: forgetting anchor
event_age_days     float32   (now - (event_time or timestamp)) / 86400 (may be negative: future)
event_time         float64   event_time or timestamp (Unix s): oldest-first ordering
emotion_max        float32   max |emotion value| (raw, on [0, fusion.emotion_scale])
layer              int8      0 permanent, 1 long_term, 2 short_term
cognitive          int8      0 episodic, 1 semantic, 2 procedural
pinned             bool      pinned memories are never forgotten
entity_matches     int16     entities shared by the query and the memory (§11.1)
intent             int8      the query's TemporalIntent code (1 recent, 2 historical, 4 when, 8 first)
tree_distance      float32   hops between the query's anchor node and the memory's (NaN: unknown)
text_len           int32     characters of the memory text (the selection budget)
=================  ========  =====================================================================

Term sets (for dedup) and texts travel beside the table, keyed by ``row``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

LAYER_CODES = {"permanent": 0, "long_term": 1, "short_term": 2}
COGNITIVE_CODES = {"episodic": 0, "semantic": 1, "procedural": 2}

COLUMNS: dict[str, str] = {
    "qid": "int32", "row": "int64", "cosine": "float32", "lexical": "float32",
    "bm25": "float32", "dense_rank": "int32", "lexical_rank": "int32",
    "importance": "float32", "access_count": "int32", "mention_count": "int32",
    "age_days": "float32", "since_access_days": "float32", "event_age_days": "float32",
    "event_time": "float64", "emotion_max": "float32", "layer": "int8", "cognitive": "int8",
    "pinned": "bool", "entity_matches": "int16", "intent": "int8", "tree_distance": "float32",
    "text_len": "int32",
}


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in COLUMNS.items()})


def make_table(**cols) -> pd.DataFrame:
    """A feature table from column arrays; missing columns get neutral values, dtypes enforced.

    Neutral values: cosine NaN, ranks 0, counts 0 (mention_count 1), times 0, layer long_term (1),
    cognitive semantic (1), intent 0, tree_distance NaN. ``qid`` defaults to 0.
    """
    n = None
    for v in cols.values():
        n = len(v)
        break
    if n is None:
        return empty_table()
    neutral = {"qid": 0, "cosine": np.nan, "lexical": 0.0, "bm25": 0.0, "dense_rank": 0,
               "lexical_rank": 0, "importance": 0.5, "access_count": 0, "mention_count": 1,
               "age_days": 0.0, "since_access_days": 0.0, "event_age_days": 0.0,
               "event_time": 0.0, "emotion_max": 0.0, "layer": 1, "cognitive": 1,
               "pinned": False, "entity_matches": 0, "intent": 0, "tree_distance": np.nan,
               "text_len": 0}
    unknown = set(cols) - set(COLUMNS)
    if unknown:
        raise KeyError(f"unknown feature columns: {sorted(unknown)}")
    data = {}
    for c, t in COLUMNS.items():
        if c in cols:
            data[c] = np.asarray(cols[c]).astype(t, copy=False)
        elif c == "row":
            data[c] = np.arange(n, dtype=t)
        else:
            data[c] = np.full(n, neutral[c], dtype=t)
    return pd.DataFrame(data)


@dataclass
class Features:
    """The raw-signal table plus what travels beside it (term sets for dedup, texts, ids)."""

    table: pd.DataFrame
    terms: Mapping[int, frozenset[str]] = field(default_factory=dict)
    texts: Mapping[int, str] = field(default_factory=dict)
    ids: Mapping[int, str] = field(default_factory=dict)
    query_texts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

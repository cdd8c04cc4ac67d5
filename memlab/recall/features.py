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
q_bg_mean          float32   mean cosine of the query to the background sample (as memories) in
                             the memory's language (:mod:`memlab.recall.background`); NaN: unknown
q_bg_std           float32   their standard deviation; NaN: unknown
m_bg_mean          float32   mean cosine of the memory to the background sample (as questions) in
                             the query's language, calibrated against real questions
                             (recall.background_calibration: + location * std); NaN: unknown
m_bg_std           float32   their standard deviation (calibrated: * scale); NaN: unknown
-- query understanding (issue 21; query.*: memlab.recall.timeexpr, qtype, speaker) --------------
q_window_days      float32   length in days of the window the question's time expressions name
                             (4月27日: 1, 上周: 7, in May 2023: 31); 0: it names none
window_dist_days   float32   days from the memory's event_time to that window, 0 inside; NaN
                             when the question names no window
q_type             int16     the question's types as bit flags (who 1, what 2, where 4, how_many
                             8, yes_no 16, why_how 32, multi 64); when/first: the intent column
speaker_named      int8      1 the question names this memory's speaker, -1 another candidate's
                             and not this one, 0 neither (or no speaker stored)
-- ranking context (issue 21, :mod:`memlab.recall.context`; NaN when its gate is off) --------------
dense_z            float32   cosine z-scored over the query's candidates (no cosine: the lowest z)
bm25_z             float32   BM25 z-scored over the lexical route's rows (others: the lowest z)
fused_z            float32   mean of dense_z and bm25_z (recall.zscore_signals)
nb1_dense          float32   best dense_z of the turns next to it in its session (+-1)
nb1_bm25           float32   best bm25_z of the turns next to it (+-1)
nb2_dense          float32   best dense_z of the turns within 2 of it (+-1, +-2)
nb2_bm25           float32   best bm25_z of the turns within 2 of it
sess_best          float32   best fused_z over its session's turns (non-candidates at the floor)
sess_mean          float32   mean fused_z over its session's turns
sess_pos           float32   position / (turns - 1) in its session (0 first, 1 last)
sess_first         float32   1 for the session's first turn, else 0
sess_last          float32   1 for the session's last turn, else 0 (recall.session_context)
-- calibrated abstention (issue 21, :mod:`memlab.recall.abstain`) --------------------------------
q_lang             int8      the question's language as the background sample reads it
                             (:func:`memlab.recall.background.language_codes`: zh 0, en 1, mixed
                             or neither 2), for the per-language abstention thresholds
-- window max (issue 21, chunk.*: memlab.windows; NaN when chunk.enabled is off) -----------------
chunk_max          float32   the query's best cosine over the memory's stored windows; its cosine
                             where it has none (not split); NaN without a cosine
chunk_gain         float32   chunk_max - cosine (0 for a memory not split)
-- expanded keys (issue 21, recall.expanded_keys: memlab.write.keys; NaN when off) ----------------
key_bm25           float32   BM25 of the question's terms, dates and atom kinds over the memory's
                             expanded keys (its fact, names, dates, atom kinds); 0: none shared
key_bm25_z         float32   key_bm25 z-scored over the query's candidates (all equal: 0)
=================  ========  =====================================================================

Term sets (for dedup) and texts travel beside the table, keyed by ``row``.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from memlab.types import COGNITIVE_CODES, LAYER_CODES, ListTermSets, TermSets  # noqa: F401 (re-exported)

COLUMNS: dict[str, str] = {
    "qid": "int32", "row": "int64", "cosine": "float32", "lexical": "float32",
    "bm25": "float32", "dense_rank": "int32", "lexical_rank": "int32",
    "importance": "float32", "access_count": "int32", "mention_count": "int32",
    "age_days": "float32", "since_access_days": "float32", "event_age_days": "float32",
    "event_time": "float64", "emotion_max": "float32", "layer": "int8", "cognitive": "int8",
    "pinned": "bool", "entity_matches": "int16", "intent": "int8", "tree_distance": "float32",
    "text_len": "int32", "q_bg_mean": "float32", "q_bg_std": "float32",
    "m_bg_mean": "float32", "m_bg_std": "float32",
    # query understanding (issue 21)
    "q_window_days": "float32", "window_dist_days": "float32", "q_type": "int16",
    "speaker_named": "int8",
    # ranking context (issue 21): per-query z-scores, session neighbours, session, position
    "dense_z": "float32", "bm25_z": "float32", "fused_z": "float32", "nb1_dense": "float32",
    "nb1_bm25": "float32", "nb2_dense": "float32", "nb2_bm25": "float32",
    "sess_best": "float32", "sess_mean": "float32", "sess_pos": "float32",
    "sess_first": "float32", "sess_last": "float32",
    # calibrated abstention (issue 21): the question's language (zh 0, en 1, mixed 2)
    "q_lang": "int8",
    # window max (issue 21): the best window of a long memory
    "chunk_max": "float32", "chunk_gain": "float32",
    # expanded keys (issue 21): BM25 over the key field written with every memory
    "key_bm25": "float32", "key_bm25_z": "float32",
}

#: The ranking-context columns (issue 21): NaN where unknown or gated off.
CONTEXT_COLUMNS: tuple[str, ...] = ("dense_z", "bm25_z", "fused_z", "nb1_dense", "nb1_bm25",
                                    "nb2_dense", "nb2_bm25", "sess_best", "sess_mean",
                                    "sess_pos", "sess_first", "sess_last")

#: The window-max columns (issue 21, chunk.*): NaN where unknown or gated off.
CHUNK_COLUMNS: tuple[str, ...] = ("chunk_max", "chunk_gain")


#: A feature table: a DataFrame, or a mapping of column name -> array (recall's own, faster path).
Table = pd.DataFrame | Mapping[str, np.ndarray]

_NEUTRAL = {"qid": 0, "cosine": np.nan, "lexical": 0.0, "bm25": 0.0, "dense_rank": 0,
            "lexical_rank": 0, "importance": 0.5, "access_count": 0, "mention_count": 1,
            "age_days": 0.0, "since_access_days": 0.0, "event_age_days": 0.0,
            "event_time": 0.0, "emotion_max": 0.0, "layer": 1, "cognitive": 1,
            "pinned": False, "entity_matches": 0, "intent": 0, "tree_distance": np.nan,
            "text_len": 0, "q_bg_mean": np.nan, "q_bg_std": np.nan, "m_bg_mean": np.nan,
            "m_bg_std": np.nan,
            # query understanding (issue 21)
            "q_window_days": 0.0, "window_dist_days": np.nan, "q_type": 0,
            "speaker_named": 0,
            # ranking context (issue 21): unknown
            **{c: np.nan for c in CONTEXT_COLUMNS},
            # calibrated abstention (issue 21): unknown language (background.BOTH)
            "q_lang": 2,
            # window max (issue 21): unknown
            **{c: np.nan for c in CHUNK_COLUMNS},
            # expanded keys (issue 21): unknown
            "key_bm25": np.nan, "key_bm25_z": np.nan}


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in COLUMNS.items()})


def make_columns(**cols) -> dict[str, np.ndarray]:
    """Feature columns from arrays, as :func:`make_table` but a dict of numpy arrays."""
    unknown = set(cols) - set(COLUMNS)
    if unknown:
        raise KeyError(f"unknown feature columns: {sorted(unknown)}")
    n = len(next(iter(cols.values()))) if cols else 0
    data = {}
    for c, t in COLUMNS.items():
        if c in cols:
            data[c] = np.asarray(cols[c]).astype(t, copy=False)
        elif c == "row":
            data[c] = np.arange(n, dtype=t)
        else:
            data[c] = np.full(n, _NEUTRAL[c], dtype=t)
    return data


def make_table(**cols) -> pd.DataFrame:
    """A feature table from column arrays; missing columns get neutral values, dtypes enforced.

    Neutral values: cosine NaN, ranks 0, counts 0 (mention_count 1), times 0, layer long_term (1),
    cognitive semantic (1), intent 0, tree_distance NaN, background statistics NaN, no time window
    (q_window_days 0, window_dist_days NaN), q_type 0, speaker_named 0. ``qid`` defaults to
    0.
    """
    return pd.DataFrame(make_columns(**cols)) if cols else empty_table()


def column(table: Table, name: str, dtype: type | None = None) -> np.ndarray:
    """One column of a :data:`Table` as a numpy array (``dtype``: converted)."""
    values = table[name]
    if not isinstance(values, np.ndarray):
        values = values.to_numpy()
    return values if dtype is None else np.asarray(values, dtype=dtype)


def n_rows(table: Table) -> int:
    """Rows of a :data:`Table`."""
    if isinstance(table, pd.DataFrame):
        return len(table)
    return len(table["qid"]) if "qid" in table else 0


class Features:
    """The raw-signal table plus what travels beside it (term sets for dedup, texts, ids).

    Built from a DataFrame (``table``) or from column arrays (``columns``, recall's own path);
    the other form is made on first access.
    """

    def __init__(self, table: pd.DataFrame | None = None, *,
                 columns: Mapping[str, np.ndarray] | None = None,
                 terms: Mapping[int, frozenset[str]] | None = None,
                 texts: Mapping[int, str] | None = None, ids: Mapping[int, str] | None = None,
                 query_texts: tuple[str, ...] = (), notes: tuple[str, ...] = ()) -> None:
        if (table is None) == (columns is None):
            raise TypeError("Features needs exactly one of table and columns")
        self._table, self._columns = table, columns
        self.terms = {} if terms is None else terms
        self.texts = {} if texts is None else texts
        self.ids = {} if ids is None else ids
        self.query_texts, self.notes = tuple(query_texts), tuple(notes)

    @property
    def table(self) -> pd.DataFrame:
        if self._table is None:
            self._table = pd.DataFrame(self._columns) if n_rows(self._columns) else empty_table()
        return self._table

    @property
    def columns(self) -> Mapping[str, np.ndarray]:
        if self._columns is None:
            self._columns = {c: self._table[c].to_numpy() for c in self._table.columns}
        return self._columns

    def __len__(self) -> int:
        return n_rows(self._table if self._table is not None else self._columns)

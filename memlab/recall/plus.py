"""The ``reverie_plus`` scorer (issue 21, item 2): Reverie's formula (:func:`memlab.recall.score.
reverie`, unchanged) plus issue 21's signals as additive, explainable terms, each one weight
times one raw signal of the table. PURE and vectorised.

======================  ========================================================================
term                    value
======================  ========================================================================
``dense_z_term``        ``fusion.dense_z`` * dense_z
``bm25_z_term``         ``fusion.bm25_z`` * bm25_z
``neighbour_term``      ``fusion.neighbour`` * neighbour, neighbour = (nb1_dense + nb1_bm25) / 2
``session_term``        ``fusion.session`` * sess_best
``window_term``         ``fusion.window`` * 2^(-window_dist_days / ``fusion.window_half_life_days``)
``speaker_term``        ``fusion.speaker`` * speaker_named
``context_typed_term``  ``fusion.context_typed`` * neighbour, for a question of a type in
                        ``fusion.context_types`` (q_type's bits); 0 for the others
======================  ========================================================================

**Unknown is neutral.** A signal that is NaN (a route that scored nothing, a turn outside any
session or without neighbours, a question that names no date window) adds 0. A weight above 0 on
a signal whose gate is off (:data:`TERM_GATES`: ``recall.zscore_signals``,
``recall.session_context``, ``query.*``) would add 0 on every row, silently: the scorer refuses
it (ConfigError naming the gate field). Every weight is 0 by default, so ``reverie_plus`` at the
defaults scores exactly as ``reverie`` (tested); ``memlab fit --preset reverie_plus`` learns them
with reverie's own (:data:`memlab.tune.fit.PLUS_TERMS`).
"""

from __future__ import annotations

import numpy as np

from memlab.config import QUESTION_TYPES, MemlabConfig
from memlab.errors import ConfigError
from memlab.recall.features import Table, column, n_rows
from memlab.recall.score import Scored, register, reverie

__all__ = ["PLUS_TERMS", "TERM_GATES", "plus_terms", "reverie_plus"]

#: term -> the fusion weight that scales it
PLUS_TERMS: dict[str, str] = {
    "dense_z_term": "fusion.dense_z", "bm25_z_term": "fusion.bm25_z",
    "neighbour_term": "fusion.neighbour", "session_term": "fusion.session",
    "window_term": "fusion.window", "speaker_term": "fusion.speaker",
    "context_typed_term": "fusion.context_typed"}
#: weight -> the config fields that compute its signal (all must be on when the weight is > 0)
TERM_GATES: dict[str, tuple[str, ...]] = {
    "fusion.dense_z": ("recall.zscore_signals",), "fusion.bm25_z": ("recall.zscore_signals",),
    "fusion.neighbour": ("recall.zscore_signals", "recall.session_context"),
    "fusion.session": ("recall.zscore_signals", "recall.session_context"),
    "fusion.window": ("query.time_expressions",), "fusion.speaker": ("query.speakers",),
    "fusion.context_typed": ("recall.zscore_signals", "recall.session_context",
                             "query.question_types")}


def _check_gates(cfg: MemlabConfig) -> None:
    flat = cfg.to_flat()
    for weight, gates in TERM_GATES.items():
        if flat[weight] > 0:
            for gate in gates:
                if not flat[gate]:
                    raise ConfigError(gate, f"{weight} = {flat[weight]} reads a signal this field "
                                      f"computes: set {gate}=true (or {weight}=0)", False)


def _known(table: Table, name: str) -> np.ndarray:
    """Column ``name`` as float64 with NaN (unknown) as 0."""
    return np.nan_to_num(column(table, name, np.float64), nan=0.0)


def plus_terms(table: Table, cfg: MemlabConfig) -> dict[str, np.ndarray]:
    """The :data:`PLUS_TERMS` of every row (a term whose weight is 0 is zeros: its column is not
    read)."""
    fu = cfg.fusion
    n = n_rows(table)
    zero = np.zeros(n)
    out = {name: zero for name in PLUS_TERMS}
    if fu.dense_z:
        out["dense_z_term"] = fu.dense_z * _known(table, "dense_z")
    if fu.bm25_z:
        out["bm25_z_term"] = fu.bm25_z * _known(table, "bm25_z")
    if fu.neighbour or fu.context_typed:
        with np.errstate(invalid="ignore"):
            neighbour = np.nan_to_num((column(table, "nb1_dense", np.float64)
                                       + column(table, "nb1_bm25", np.float64)) / 2.0, nan=0.0)
        if fu.neighbour:
            out["neighbour_term"] = fu.neighbour * neighbour
        if fu.context_typed:
            bits = sum(1 << QUESTION_TYPES.index(t) for t in fu.context_types)
            typed = (column(table, "q_type", np.int64) & bits) != 0
            out["context_typed_term"] = fu.context_typed * np.where(typed, neighbour, 0.0)
    if fu.session:
        out["session_term"] = fu.session * _known(table, "sess_best")
    if fu.window:
        dist = column(table, "window_dist_days", np.float64)
        close = np.exp2(-np.maximum(np.nan_to_num(dist, nan=np.inf), 0.0)
                        / fu.window_half_life_days)
        out["window_term"] = fu.window * close
    if fu.speaker:
        out["speaker_term"] = fu.speaker * column(table, "speaker_named", np.float64)
    return out


@register("reverie_plus")
def reverie_plus(table: Table, cfg: MemlabConfig) -> Scored:
    """``reverie`` + :func:`plus_terms` (gates, floor and components as reverie's; the new terms
    appended to ``additive`` after reverie's, their sum added to its score)."""
    _check_gates(cfg)
    base = reverie(table, cfg)
    terms = plus_terms(table, cfg)
    total = np.asarray(base.score, np.float64)
    for v in terms.values():
        total = total + v
    return Scored(score=total, eligible=base.eligible, relevant=base.relevant,
                  components={**base.components, **terms}, additive=base.additive + tuple(terms),
                  scorer="reverie_plus")

"""Scoring: raw signals in, one score per (query, candidate) row out. PURE and vectorised.

The feature table (:mod:`memlab.recall.features`) holds raw signals only; every weight comes from
the config here, so a sweep computes the table once and calls :func:`score` per configuration. All
rows of all queries are scored at once with numpy; per-query normalisations (Generative Agents' min-max, the
'first' boost's age ranks) are grouped by ``qid`` with sort + ``reduceat``, never a Python loop.

Scorers live in a registry (:data:`SCORERS`, :func:`register`); ``fusion.scorer`` names one:

``reverie``            Reverie §8 fused score (governance on/off), §9.1 retention, §11.1-11.2 boosts.
``cosine``             cosine similarity (rows the dense route did not score: -1, not relevant).
``bm25``               BM25 (rows without a matching term: not relevant).
``rrf``                reciprocal rank fusion of the dense and lexical routes, 1/(rrf_k + rank).
``generative_agents``  Park et al. 2023: min-max normalised relevance + importance + recency.
``dialog_tree``        Familiars §5.4.2: a*cos + b*exp(-dt/recency_tau) + g*exp(-hops/tree_tau).
``learned``            a saved model over the raw signals (recall/learned.py, fusion.learned_model).
``reverie_plus``       reverie + issue 21's signals as additive terms (recall/plus.py).

Every :class:`Scored` carries its ``components``: the raw signals behind the score and the additive
terms (named ``*_term``, listed in ``Scored.additive``) whose sum *is* the score, so ``explain``
shows why a memory won.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from memlab import forgetting
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.frames import renamed
from memlab.recall.features import LAYER_CODES, Table, column
from memlab.text import TemporalIntent

SECONDS_PER_DAY = 86_400.0
HOURS_PER_DAY = 24.0
INTENT_RECENT = TemporalIntent(recent=True).code
INTENT_HISTORICAL = TemporalIntent(historical=True).code
INTENT_FIRST = TemporalIntent(first=True).code

__all__ = ["Scored", "Scorer", "SCORERS", "register", "score", "relevance_mask", "floor_z",
           "FLOOR_MODES", "REVERIE_MEMORY_COLUMNS", "reverie_memory", "reverie_gate",
           "reverie_scored"]


@dataclass(frozen=True)
class Scored:
    """The scores of a feature table, one entry per table row (positional).

    ``score`` float64; ``eligible`` bool (the forgetting gate, §9.1; baselines: all True);
    ``relevant`` bool (passes the relevance floor of ``recall.floor_mode``, or
    ``recall.lexical_floor``); ``components`` every raw signal and every term of the formula;
    ``additive`` the names of the terms whose sum is ``score``, in formula order.
    """

    score: np.ndarray
    eligible: np.ndarray
    relevant: np.ndarray
    components: Mapping[str, np.ndarray] = field(default_factory=dict)
    additive: tuple[str, ...] = ()
    scorer: str = ""

    def __len__(self) -> int:
        return len(self.score)

    def to_frame(self) -> pd.DataFrame:
        """Score, gates and every component as one DataFrame (rows aligned with the table)."""
        data = {"score": self.score, "eligible": self.eligible, "relevant": self.relevant}
        data.update(self.components)
        return pd.DataFrame(data)

    def frame(self) -> pd.DataFrame:
        """Retired: :meth:`to_frame`."""
        renamed("Scored.frame()", "Scored.to_frame()")
        return self.to_frame()


Scorer = Callable[[Table, MemlabConfig], Scored]
SCORERS: dict[str, Scorer] = {}


def register(name: str) -> Callable[[Scorer], Scorer]:
    """Decorator: register ``fn(table, cfg) -> Scored`` under ``name``."""
    if not isinstance(name, str) or not name:
        raise InvalidInput("name", "a scorer name must be a non-empty string", name)

    def deco(fn: Scorer) -> Scorer:
        if name in SCORERS and SCORERS[name] is not fn:
            raise InvalidInput("name", "a scorer of this name is already registered", name)
        SCORERS[name] = fn
        return fn

    return deco


def score(table: Table, cfg: MemlabConfig, *, scorer: str | None = None) -> Scored:
    """Score every row of ``table`` with the named scorer (default ``cfg.fusion.scorer``).

    Raises :class:`ConfigError` for an unknown scorer and :class:`InvalidInput` for a table that
    lacks a column the scorer needs or holds NaN where a signal must be a number.
    """
    name = cfg.fusion.scorer if scorer is None else scorer
    fn = SCORERS.get(name)
    if fn is None:
        raise ConfigError("fusion.scorer", f"unknown scorer; known: {', '.join(sorted(SCORERS))}",
                          name)
    out = fn(table, cfg)
    if not np.all(np.isfinite(out.score)):
        _raise_for_nan(table, name)
    return out


# -- helpers -------------------------------------------------------------------------------------
_NULLABLE = frozenset({"cosine", "tree_distance", "q_bg_mean", "q_bg_std", "m_bg_mean",
                       "m_bg_std"})


def _raise_for_nan(table: Table, name: str) -> None:
    for col in list(table):
        values = column(table, col)
        if col not in _NULLABLE and values.dtype.kind == "f" and np.isnan(values).any():
            raise InvalidInput(f"table.{col}", "must not be NaN (only cosine, tree_distance and "
                               "the background statistics may be unknown)", float("nan"))
    raise InvalidInput("table", f"scorer {name!r} produced a non-finite score", None)


def _col(table: Table, name: str, dtype: type = np.float64) -> np.ndarray:
    if name not in table:
        raise InvalidInput("table", f"missing feature column {name!r}", sorted(map(str, table)))
    return column(table, name, dtype)


def floor_z(cosine: np.ndarray, q_mean: np.ndarray, q_std: np.ndarray, m_mean: np.ndarray,
            m_std: np.ndarray) -> np.ndarray:
    """min(z_query, z_memory): how far a cosine stands out from the background on both sides.

    z_query = (cosine - q_mean) / q_std (against the query's cosines to the background as
    memories), z_memory = (cosine - m_mean) / m_std (against the memory's cosines to the
    background as questions). A std of 0 (a degenerate background) gives +inf above the mean,
    -inf below it, NaN at it; a NaN anywhere gives NaN (fails any floor).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        zq = (cosine - q_mean) / q_std
        zm = (cosine - m_mean) / m_std
    return np.minimum(zq, zm)


def _floor_absolute(table: Table, cosine: np.ndarray, cfg: MemlabConfig
                    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    return cosine >= cfg.recall.relevance_floor, {}


def _floor_zscore(table: Table, cosine: np.ndarray, cfg: MemlabConfig
                  ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    stats = [_col(table, c) for c in ("q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std")]
    unknown = ~np.isnan(cosine) & np.isnan(np.stack(stats)).any(axis=0)
    if unknown.any():
        raise InvalidInput("table.q_bg_mean", "recall.floor_mode 'zscore' needs the background "
                           "statistics (q_bg_*, m_bg_*) of every row with a cosine: build the "
                           "table with a background sample, or use floor_mode 'absolute'",
                           int(np.flatnonzero(unknown)[0]))
    z = floor_z(cosine, *stats)
    return z >= cfg.recall.relevance_z, {"floor_z": z}


def _floor_learned(table: Table, cosine: np.ndarray, cfg: MemlabConfig
                   ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The zscore floor's rows plus each query's best row by floor z; ``answered`` per row: its
    query's P(answerable) >= the threshold of its language (``recall.abstain_threshold``, or
    ``abstain_threshold_zh`` / ``_en``; :mod:`memlab.recall.abstain`)."""
    from memlab.recall.abstain import answer_mask, load_abstain_model, thresholds_of

    if cfg.recall.abstain_model is None:
        raise ConfigError("recall.abstain_model", "floor_mode 'learned' needs a model file "
                          "(memlab.tune.abstainfit)", None)
    model = load_abstain_model(cfg.recall.abstain_model)
    ok, extra = _floor_zscore(table, cosine, cfg)
    z = np.where(np.isnan(extra["floor_z"]), -np.inf, extra["floor_z"])
    qid = _col(table, "qid", np.int64)
    best = np.zeros(len(z), bool)
    if len(z):
        order = np.lexsort((-z, qid))               # per query, best z first
        first = order[_group_starts(qid[order])]
        best[first] = np.isfinite(z[first])
    answered = answer_mask(table, model, thresholds_of(cfg.recall))
    return ok | best, {**extra, "answered": answered}


FLOOR_MODES: dict[str, Callable[[Table, np.ndarray, MemlabConfig],
                                tuple[np.ndarray, dict[str, np.ndarray]]]] = {
    "absolute": _floor_absolute, "zscore": _floor_zscore, "learned": _floor_learned}


def relevance_mask(table: Table, cfg: MemlabConfig) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(relevant, extra components): the cosine test of ``recall.floor_mode`` OR lexical >=
    ``recall.lexical_floor``.

    ``absolute``: cosine >= ``recall.relevance_floor``; a floor of exactly 0 disables the test
    (every row relevant). ``zscore``: :func:`floor_z` >= ``recall.relevance_z`` (its value is
    returned as the component ``floor_z``). A NaN cosine fails the cosine test. ``learned``:
    zscore's test or the query's best row, and only in the queries the abstention model answers
    (component ``answered``).
    """
    cosine = _col(table, "cosine")
    if cfg.recall.floor_mode == "absolute" and cfg.recall.relevance_floor == 0:
        return np.ones(len(cosine), dtype=bool), {}
    cos_ok, extra = FLOOR_MODES[cfg.recall.floor_mode](table, cosine, cfg)
    relevant = cos_ok | (_col(table, "lexical") >= cfg.recall.lexical_floor)
    return (relevant & extra["answered"] if "answered" in extra else relevant), extra


def _group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Start index of each run of equal keys in an already sorted array (non-empty)."""
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


def _grouping(qid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, starts, sizes): a stable sort by qid and its runs, shared by several columns."""
    order = np.argsort(qid, kind="stable")
    starts = _group_starts(qid[order])
    return order, starts, np.diff(np.r_[starts, qid.size])


def minmax_by_query(values: np.ndarray, qid: np.ndarray, *,
                    grouping: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
                    ) -> np.ndarray:
    """Min-max normalise ``values`` within each query to [0, 1].

    A query whose column is constant (or a single row) normalises to 0; NaN values are ignored for
    the min and max and normalise to 0 (they sit with the minimum). ``grouping`` (from a previous
    call's sort by ``qid``) saves the sort when several columns share one table.
    """
    n = len(values)
    if n == 0:
        return np.zeros(0)
    order, starts, sizes = _grouping(qid) if grouping is None else grouping
    xs = values[order]
    nan = np.isnan(xs)
    lo = np.repeat(np.minimum.reduceat(np.where(nan, np.inf, xs), starts), sizes)
    hi = np.repeat(np.maximum.reduceat(np.where(nan, -np.inf, xs), starts), sizes)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = np.where((span > 0) & np.isfinite(span) & ~nan, (xs - lo) / span, 0.0)
    out = np.empty(n)
    out[order] = norm
    return out


def _first_boost(qid: np.ndarray, intent: np.ndarray, event_time: np.ndarray,
                 relevant: np.ndarray, amount: float) -> np.ndarray:
    """``temporal.first_boost`` scaled by age rank among a 'first' query's relevant rows.

    The oldest relevant row gets ``amount``, the r-th oldest (0-based) of n gets ``amount*(1-r/n)``.
    """
    out = np.zeros(len(qid))
    if amount == 0:
        return out
    idx = np.flatnonzero(((intent & INTENT_FIRST) != 0) & relevant)
    if idx.size == 0:
        return out
    order = idx[np.lexsort((event_time[idx], qid[idx]))]
    starts = _group_starts(qid[order])
    sizes = np.diff(np.r_[starts, order.size])
    rank = np.arange(order.size) - np.repeat(starts, sizes)
    out[order] = amount * (1.0 - rank / np.repeat(sizes, sizes))
    return out


def _cognitive(codes: np.ndarray, cfg: MemlabConfig) -> np.ndarray:
    fu = cfg.fusion
    lookup = np.array([fu.cognitive_episodic, fu.cognitive_semantic, fu.cognitive_procedural])
    bad = (codes < 0) | (codes >= lookup.size)
    if np.any(bad):
        raise InvalidInput("table.cognitive", "must be 0 episodic, 1 semantic or 2 procedural",
                           int(codes[bad][0]))
    return lookup[codes]


def _build(name: str, score: np.ndarray, eligible: np.ndarray, relevant: np.ndarray,
           raw: dict[str, np.ndarray], terms: dict[str, np.ndarray]) -> Scored:
    components = dict(raw)
    components.update(terms)
    return Scored(score=score, eligible=eligible, relevant=relevant, components=components,
                  additive=tuple(terms), scorer=name)


def _sum(terms: dict[str, np.ndarray], n: int) -> np.ndarray:
    total = np.zeros(n)
    for v in terms.values():
        total = total + v
    return total


# -- scorers -------------------------------------------------------------------------------------
#: The columns of reverie's memory-level quantities (:func:`reverie_memory`): they depend on the
#: memory and the time of the question only, not on the query's text.
REVERIE_MEMORY_COLUMNS = ("importance", "age_days", "since_access_days", "emotion_max",
                          "access_count", "mention_count", "layer", "cognitive", "pinned")


@register("reverie")
def reverie(table: Table, cfg: MemlabConfig) -> Scored:
    """Reverie's fused score (§8), with retention (§9.1), entity (§11.1) and intent (§11.2) terms.

    Governance on (``governance.enabled``)::

        0.62*relevance + 0.16*lexical + 0.08*importance + 0.04*frequency + cognitive
        + 0.24*temporal + 0.10*emotion + retention*resident_boost_cap + cue + entity + intent

    relevance = clip((cosine - b) / (1 - b), 0, 1) with b = fusion.relevance_baseline (0: raw
    cosine; NaN: 0); frequency = min(1, log1p(refs)/log1p(sat)); recency = 2^(-age_days /
    temporal_half_life_days); temporal = recency ('recency' mode) or, in 'intent' mode, recency
    under a recent intent, 1 - recency under a historical intent, else 0; emotion = intensity;
    cue = min(relevance * (1 - retention) * factor, cap); entity = min(each * matches, cap);
    intent = +/-intent_boost for a new/old memory under a recent intent (reversed for historical);
    plus ``temporal.first_boost`` by age rank for 'first' questions (0 by default).

    Governance off (the §8 alternative): relevance is replaced by
    ``relevance * min(1, retention * reinforcement)`` and there is no resident boost. memlab's
    choice: the cue reactivation stays, computed from the *raw* relevance, since it is the cue's
    strength (not the decayed trace) that lifts a weak memory.
    """
    return reverie_scored(table, cfg, reverie_memory(table, cfg))


def reverie_memory(table: Table, cfg: MemlabConfig) -> Mapping[str, np.ndarray]:
    """Reverie's quantities that read only :data:`REVERIE_MEMORY_COLUMNS` (one value per row of
    ``table``): importance, age, permanence, references, reinforcement, frequency, cognitive
    term, recency, emotion and retention. :func:`reverie` computes them on its table; a sweep may
    compute them once per distinct memory state and hand :func:`reverie_scored` their rows."""
    fu = cfg.fusion
    importance = _col(table, "importance")
    age = np.maximum(_col(table, "age_days"), 0.0)
    layer = _col(table, "layer", np.int64)
    refs = forgetting.references(_col(table, "access_count"), _col(table, "mention_count"))
    emotion = forgetting.emotion_intensity(_col(table, "emotion_max"), scale=fu.emotion_scale)
    return {
        "importance": importance, "age": age, "permanent": layer == LAYER_CODES["permanent"],
        "references": refs,
        "reinforcement": forgetting.reinforcement(refs, alpha=cfg.forgetting.reinforcement_alpha),
        "frequency": np.minimum(1.0, np.log1p(refs) / np.log1p(fu.frequency_saturation)),
        "cognitive": _cognitive(_col(table, "cognitive", np.int64), cfg),
        "recency": np.exp2(-age / fu.temporal_half_life_days),
        "emotion": emotion,
        "retention": forgetting.retention(layer, _col(table, "since_access_days"), importance,
                                          emotion, refs, _col(table, "pinned", bool), cfg),
    }


def reverie_gate(table: Table, cfg: MemlabConfig, memory: Mapping[str, np.ndarray],
                 relevant: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """(relevance, eligible, relevant, floor components) of reverie's rows: relevance =
    clip((cosine - b) / (1 - b), 0, 1), the forgetting gate (§9.1) and the relevance floor
    (``relevant``: :func:`relevance_mask` of these rows, already known; no floor components)."""
    base = cfg.fusion.relevance_baseline
    relevance = np.clip((np.nan_to_num(_col(table, "cosine"), nan=0.0) - base) / (1.0 - base),
                        0.0, 1.0)
    relevant, floor = relevance_mask(table, cfg) if relevant is None else (relevant, {})
    eligible = forgetting.eligible(memory["retention"], relevance, memory["permanent"], cfg)
    return relevance, eligible, relevant, floor


def reverie_scored(table: Table, cfg: MemlabConfig, memory: Mapping[str, np.ndarray],
                   relevant: np.ndarray | None = None) -> Scored:
    """:func:`reverie` given its :func:`reverie_memory` values for the rows of ``table`` (and,
    optionally, their :func:`relevance_mask`, as :func:`reverie_gate` takes it)."""
    fu = cfg.fusion
    qid = _col(table, "qid", np.int64)
    n = len(qid)
    lexical = _col(table, "lexical")
    intent = _col(table, "intent", np.int64)
    importance, age, refs = memory["importance"], memory["age"], memory["references"]
    reinf, frequency, recency = memory["reinforcement"], memory["frequency"], memory["recency"]
    emotion, retention = memory["emotion"], memory["retention"]
    relevance, eligible, relevant, floor = reverie_gate(table, cfg, memory, relevant)
    if fu.temporal_mode == "recency":
        temporal = recency
    else:
        temporal = np.where((intent & INTENT_RECENT) != 0, recency,
                            np.where((intent & INTENT_HISTORICAL) != 0, 1.0 - recency, 0.0))

    if cfg.governance.enabled:
        rel_eff = relevance
        resident = retention * fu.resident_boost_cap
    else:
        rel_eff = relevance * np.minimum(1.0, retention * reinf)
        resident = np.zeros(n)
    cue = np.minimum(relevance * (1.0 - retention) * fu.cue_reactivation_factor,
                     fu.cue_reactivation_cap)
    if cfg.entity.enabled:
        entity = np.minimum(cfg.entity.boost_each * _col(table, "entity_matches"),
                            cfg.entity.boost_cap)
    else:
        entity = np.zeros(n)

    tc = cfg.temporal
    if tc.enabled:
        new = np.where(age < tc.recent_window_days, 1.0, -1.0)
        direction = ((intent & INTENT_RECENT) != 0).astype(float) \
            - ((intent & INTENT_HISTORICAL) != 0).astype(float)
        intent_term = tc.intent_boost * new * direction
        first = _first_boost(qid, intent, _col(table, "event_time"), relevant, tc.first_boost)
    else:
        intent_term = first = np.zeros(n)

    terms = {
        "relevance_term": fu.relevance * rel_eff,
        "lexical_term": fu.lexical * lexical,
        "importance_term": fu.importance * importance,
        "frequency_term": fu.frequency * frequency,
        "cognitive_term": memory["cognitive"],
        "temporal_term": fu.temporal * temporal,
        "emotion_term": fu.emotion * emotion,
        "resident_term": resident,
        "cue_term": cue,
        "entity_term": entity,
        "intent_term": intent_term,
        "first_term": first,
    }
    raw = {"relevance": relevance, "relevance_effective": rel_eff, "lexical": lexical,
           "importance": importance, "references": refs, "reinforcement": reinf,
           "frequency": frequency, "temporal": temporal, "emotion": emotion,
           "retention": retention, **floor}
    return _build("reverie", _sum(terms, n), eligible, relevant, raw, terms)


@register("cosine")
def cosine(table: Table, cfg: MemlabConfig) -> Scored:
    """Plain cosine. Rows without a cosine (not dense candidates) score -1 and are not relevant."""
    cos = _col(table, "cosine")
    known = ~np.isnan(cos)
    s = np.where(known, cos, -1.0)
    relevant, floor = relevance_mask(table, cfg)
    return _build("cosine", s, np.ones(len(s), dtype=bool), relevant & known, floor,
                  {"cosine": s})


@register("bm25")
def bm25(table: Table, cfg: MemlabConfig) -> Scored:
    """Plain BM25. Rows with BM25 0 (no query term matched: not lexical hits) are not relevant."""
    b = _col(table, "bm25")
    relevant, floor = relevance_mask(table, cfg)
    return _build("bm25", b, np.ones(len(b), dtype=bool), relevant & (b > 0), floor, {"bm25": b})


def rrf_terms(dense_rank: np.ndarray, lexical_rank: np.ndarray, k: float
              ) -> tuple[np.ndarray, np.ndarray]:
    """Each route's reciprocal-rank term 1/(k + rank); rank 0 (absent from the route) gives 0."""
    dr = np.asarray(dense_rank, np.float64)
    lr = np.asarray(lexical_rank, np.float64)
    with np.errstate(divide="ignore"):
        return (np.where(dr > 0, 1.0 / (k + dr), 0.0), np.where(lr > 0, 1.0 / (k + lr), 0.0))


@register("rrf")
def rrf(table: Table, cfg: MemlabConfig) -> Scored:
    """Reciprocal rank fusion: sum over routes of 1/(rrf_k + rank); rank 0 (absent) adds 0.

    Rows retrieved by neither route are not relevant (the hybrid returns route hits only).
    """
    dr = _col(table, "dense_rank")
    lr = _col(table, "lexical_rank")
    dense, lexical = rrf_terms(dr, lr, cfg.baselines.rrf_k)
    relevant, floor = relevance_mask(table, cfg)
    terms = {"dense_term": dense, "lexical_term": lexical}
    return _build("rrf", dense + lexical, np.ones(len(dr), dtype=bool),
                  relevant & ((dr > 0) | (lr > 0)),
                  {"dense_rank": dr, "lexical_rank": lr, **floor}, terms)


@register("generative_agents")
def generative_agents(table: Table, cfg: MemlabConfig) -> Scored:
    """Park et al. 2023: ga_relevance*rel + ga_importance*imp + ga_recency*rec, min-max per query.

    relevance = cosine; recency = ga_recency_decay ** (hours since last access). memlab's choices:
    a column that is constant within a query normalises to 0 (it cannot rank), and a NaN cosine
    (not a dense candidate) normalises to 0 (the query's minimum).
    """
    b = cfg.baselines
    qid = _col(table, "qid", np.int64)
    cos = _col(table, "cosine")
    importance = _col(table, "importance")
    hours = np.maximum(_col(table, "since_access_days"), 0.0) * HOURS_PER_DAY
    recency = np.power(b.ga_recency_decay, hours)
    groups = _grouping(qid) if qid.size else None
    rel_n = minmax_by_query(cos, qid, grouping=groups)
    imp_n = minmax_by_query(importance, qid, grouping=groups)
    rec_n = minmax_by_query(recency, qid, grouping=groups)
    terms = {"relevance_term": b.ga_relevance * rel_n, "importance_term": b.ga_importance * imp_n,
             "recency_term": b.ga_recency * rec_n}
    raw = {"relevance": cos, "importance": importance, "recency": recency,
           "relevance_norm": rel_n, "importance_norm": imp_n, "recency_norm": rec_n}
    relevant, floor = relevance_mask(table, cfg)
    raw.update(floor)
    return _build("generative_agents", _sum(terms, len(cos)), np.ones(len(cos), dtype=bool),
                  relevant, raw, terms)


@register("dialog_tree")
def dialog_tree(table: Table, cfg: MemlabConfig) -> Scored:
    """Familiars §5.4.2: alpha*cos + beta*exp(-age_s/recency_tau) + gamma*exp(-hops/tree_tau).

    A NaN cosine or NaN tree distance (unknown) contributes 0 to its term.
    """
    d = cfg.dialog_tree
    cos = _col(table, "cosine")
    seconds = np.maximum(_col(table, "age_days"), 0.0) * SECONDS_PER_DAY
    hops = _col(table, "tree_distance")
    recency = np.exp(-seconds / d.recency_tau)
    tree = np.where(np.isnan(hops), 0.0, np.exp(-np.nan_to_num(hops, nan=0.0) / d.tree_tau))
    cos0 = np.nan_to_num(cos, nan=0.0)
    terms = {"cosine_term": d.alpha * cos0, "recency_term": d.beta * recency,
             "tree_term": d.gamma * tree}
    raw = {"cosine": cos0, "recency": recency, "tree": tree}
    relevant, floor = relevance_mask(table, cfg)
    raw.update(floor)
    return _build("dialog_tree", _sum(terms, len(cos)), np.ones(len(cos), dtype=bool), relevant,
                  raw, terms)


# the scorers of other modules register themselves on import (after everything above exists)
from memlab.recall import learned as _learned  # noqa: E402,F401
from memlab.recall import plus as _plus  # noqa: E402,F401

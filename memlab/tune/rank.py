"""Learning to rank (issue 21, item 2): a LightGBM ``lambdarank`` model beside the pointwise HGB
of :func:`memlab.tune.fit.fit_hgb`, trained on one or several replays together.

**Rows and groups.** Each question is a query group (its key ``part::conversation::query``, so
that two datasets never share a group); its rows are its candidates, labelled 1 for gold evidence
and 0 otherwise. A group without gold, or with nothing but gold, has no order to learn and is
left out (counted). Rows are every candidate: the gates are not hard cuts here but features
(:data:`memlab.recall.learned.GATE_FEATURES`: retention, eligibility, the floor's margin), so
the ranker decides how much a faded memory or one under the floor should count; a file written
for it is scored with ``fusion.learned_floor`` false. ``kind="hgb"`` builds the same rows with
the relevance floor as a cut and no gate features (exactly :func:`fit_hgb`'s rows for one part)
and fits its classifier: the pointwise model, trained on several datasets the same way.

**Features.** Every raw signal of the table (:data:`memlab.recall.learned.FEATURES`, which
follows :data:`memlab.recall.features.COLUMNS`: a column added there flows in), minus those
unknown (NaN) on every training row and those ``drop`` names (a column or a group of
:data:`GROUPS`: the ablation hook; ``not_portable``: :data:`NOT_PORTABLE`, for a model meant to
carry to other datasets). A column in no group is in the group ``other``.

**Monotone constraints** where the spec says more is better (:data:`MONOTONE`: reverie §8's
positively weighted signals — cosine, lexical overlap and BM25, importance, access and mention
counts (frequency), emotion, entity matches (§11.1) — and the gates: retention, eligibility, the
floor's margin): the model may not rank a memory lower because one of these grew, all else equal.
Ranks are left free (0 means "not retrieved", so a rank is not monotone), and so are ages (the
spec's temporal term goes either way with the question's intent).

**Training.** ``lightgbm.train`` with objective ``lambdarank`` (metric nDCG@10), deterministic
(one seed, ``deterministic``, row-wise histograms: the same rows give the same model); a tenth of
the groups (``valid_fraction``, seeded) held back for early stopping. ``params`` override the
defaults (:data:`DEFAULTS`); ``base_feature`` / ``base_scale`` among them boost the trees from a
baseline's rank (``init_score`` = :func:`memlab.recall.learned.base_score`, recorded in the
model's manifest and added back when it scores). ``threads`` 1 by default: measured on this
2-core machine under load, one LightGBM fit took 1.1 s with one thread and 19.7 s with two
(OpenMP threads spin while they wait for a core).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.bench.replay import Replayed
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.features import column
from memlab.recall.learned import COMPUTED, FEATURES, GATE_FEATURES, ROUTE_FEATURES, \
    computed_features, lightgbm
from memlab.recall.score import relevance_mask
from memlab.tune.fit import gold_mask, question_keys

__all__ = ["GROUPS", "NOT_PORTABLE", "MONOTONE", "DEFAULTS", "KINDS", "Part", "Rows", "groups_of",
           "resolve_drop", "build_rows", "fit_model"]

KINDS = ("lambdarank", "hgb")
#: column groups for the ablation (``drop``); a column in none is in ``other``
GROUPS: dict[str, tuple[str, ...]] = {
    "dense": ("cosine", "dense_rank"),
    "lexical": ("lexical", "bm25", "lexical_rank"),
    "memory": ("importance", "access_count", "mention_count", "emotion_max", "layer",
               "cognitive", "pinned"),
    "time": ("age_days", "since_access_days", "event_age_days", "intent"),
    "entity": ("entity_matches",),
    "tree": ("tree_distance",),
    "length": ("text_len",),
    "background": ("q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std"),
    "keys": ("key_bm25", "key_bm25_z"),
    "gates": GATE_FEATURES,
    "fusion": ROUTE_FEATURES,   # the hybrid_rrf baseline's score and rank, from the two ranks
    "chunk": ("chunk_max", "chunk_gain"),     # issue 21: the window max (chunk.*)
    # issue 21: what the question says (query.*), the per-query z-scores, the session context
    "query": ("q_window_days", "window_dist_days", "q_type", "speaker_named"),
    "zscore": ("dense_z", "bm25_z", "fused_z"),
    "context": ("nb1_dense", "nb1_bm25", "nb2_dense", "nb2_bm25", "sess_best", "sess_mean",
                "sess_pos", "sess_first", "sess_last"),
}
#: the columns and groups whose scale or meaning is bound to a dataset's genre, language or
#: generator: the raw cosine and the lexical group (overlap, BM25 and its rank: their scale moves
#: with the language and the embedder; the dense rank and the per-query z-scores stay), the
#: memory's stored signals, ages, length,
#: the background statistics, the tree and the window max. ``drop=("not_portable",)`` leaves them
#: out, for a model meant for data it never saw: leave one dataset out (lifelog, LoCoMo 1-4,
#: MADial zh, MADial en; nDCG@10) 0.698 / 0.285 / 0.514 / 0.504 with every column, 0.709 / 0.402 /
#: 0.523 / 0.545 without these; k-fold within the sets 0.777 / 0.614 / 0.509 / 0.522 against
#: 0.748 / 0.583 / 0.509 / 0.517 (README, issue 21).
NOT_PORTABLE: tuple[str, ...] = ("cosine", "lexical", "memory", "time", "length", "background",
                                 "tree", "chunk")
#: +1: more is better (see the module doc)
MONOTONE: dict[str, int] = {c: 1 for c in (
    "cosine", "lexical", "bm25", "importance", "access_count", "mention_count", "emotion_max",
    "entity_matches", "retention", "eligible", "floor_margin", "rrf")}
DEFAULTS: dict[str, Any] = {
    "objective": "lambdarank", "metric": "ndcg", "eval_at": [10], "learning_rate": 0.05,
    "num_leaves": 31, "min_data_in_leaf": 20, "feature_fraction": 0.9,
    "lambdarank_truncation_level": 20, "monotone_constraints_method": "intermediate",
    "deterministic": True, "force_row_wise": True, "verbose": -1}
ROUNDS, PATIENCE = 400, 40


@dataclass
class Part:
    """One replay to train on: a name (its dataset), the replay, the preset whose gates and
    floor the rows are read under, and the question keys to use (None: all)."""

    name: str
    rep: Replayed
    cfg: MemlabConfig
    questions: pd.Index | None = None


def groups_of(features: Iterable[str]) -> dict[str, list[str]]:
    """Group name -> the ``features`` in it (``other``: those in no group)."""
    owner = {c: g for g, cols in GROUPS.items() for c in cols}
    out: dict[str, list[str]] = {}
    for c in features:
        out.setdefault(owner.get(c, "other"), []).append(c)
    return out


def resolve_drop(drop: Sequence[str], features: Sequence[str]) -> set[str]:
    """The columns that ``drop`` (group names or column names) removes from ``features``;
    InvalidInput naming an entry that is neither."""
    groups = groups_of(features)
    out: set[str] = set()
    for d in drop:
        if d == "not_portable":
            out.update(resolve_drop([n for n in NOT_PORTABLE if n in GROUPS or n in features],
                                    features))
        elif d in groups:
            out.update(groups[d])
        elif d in GROUPS:
            out.update(GROUPS[d])
        elif d in features:
            out.add(d)
        else:
            known = ", ".join(sorted(set(GROUPS) | set(groups) | {"not_portable"}))
            raise InvalidInput("drop", f"not a column group ({known}) nor a feature column", d)
    return out


@dataclass
class Rows:
    """The training matrix: ``X`` (rows grouped by question, groups contiguous), ``y`` (gold),
    ``sizes`` (rows per group, in order), ``keys`` (group keys), ``features``, ``counts``."""

    X: np.ndarray
    y: np.ndarray
    sizes: np.ndarray
    keys: list[str]
    features: tuple[str, ...]
    counts: dict[str, Any] = field(default_factory=dict)


def _part_rows(part: Part, features: Sequence[str], floor: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """(X, gold, group key per row) of one part, sorted by question (stable)."""
    table = part.rep.features.columns
    gold = gold_mask(part.rep)
    n = len(gold)
    qid = column(table, "qid", np.int64) if n else np.zeros(0, np.int64)
    keep = np.asarray(relevance_mask(table, part.cfg)[0], bool).copy() if floor and n \
        else np.ones(n, bool)
    keys = question_keys(part.rep)[qid] if n else np.zeros(0, dtype=object)
    if part.questions is not None:
        keep &= pd.Series(keys).isin(pd.Index(part.questions)).to_numpy()
    gates = computed_features(table, part.cfg, features)
    X = np.column_stack([gates[c] if c in gates else column(table, c, np.float64)
                         for c in features]) if features else np.zeros((n, 0))
    order = np.flatnonzero(keep)[np.argsort(qid[keep], kind="stable")]
    counts = {"rows": int(keep.sum()), "gold_rows": int(gold[keep].sum()),
              "gold_cut": int((gold & ~keep).sum()) if part.questions is None else
              int((gold & ~keep & pd.Series(keys).isin(pd.Index(part.questions)).to_numpy()).sum())}
    return X[order], gold[order], np.asarray([f"{part.name}::{k}" for k in keys[order]],
                                             dtype=object), counts


def build_rows(parts: Sequence[Part], *, kind: Literal["lambdarank", "hgb"] = "lambdarank",
               drop: Sequence[str] = ()) -> Rows:
    """The rows of every part (see the module doc), the groups that teach an order only."""
    if kind not in KINDS:
        raise InvalidInput("kind", f"must be one of {', '.join(KINDS)}", kind)
    if not parts:
        raise InvalidInput("parts", "at least one replay to train on", 0)
    gates = kind == "lambdarank"
    candidates = [c for c in FEATURES + (COMPUTED if gates else ())]
    removed = resolve_drop(drop, candidates)
    features = [c for c in candidates if c not in removed]
    Xs, ys, ks, per = [], [], [], {}
    for part in parts:
        X, y, k, c = _part_rows(part, features, floor=not gates)
        Xs.append(X), ys.append(y), ks.append(k)
        per[part.name] = c
    X, y, k = np.vstack(Xs), np.concatenate(ys), np.concatenate(ks)
    known = ~np.isnan(X).all(axis=0) if len(X) else np.zeros(len(features), bool)
    X, features = X[:, known], [f for f, ok in zip(features, known) if ok]
    # groups: contiguous runs of equal keys (each part is sorted by question, parts differ)
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if len(k) else np.zeros(0, int)
    sizes = np.diff(np.r_[starts, len(k)])
    gsum = np.add.reduceat(y.astype(int), starts) if len(k) else np.zeros(0, int)
    useful = (gsum > 0) & (gsum < sizes)
    keep_rows = np.repeat(useful, sizes)
    counts = {"parts": per, "groups": int(len(sizes)), "groups_used": int(useful.sum()),
              "rows_used": int(keep_rows.sum()), "gold_rows_used": int(y[keep_rows].sum()),
              "dropped_columns": sorted(removed), "unknown_columns":
              [f for f, ok in zip([c for c in candidates if c not in removed], known) if not ok]}
    if not useful.any():
        raise InvalidInput("train", "no question has both a gold and a non-gold candidate: "
                           "nothing to learn an order from", int(len(sizes)))
    return Rows(X[keep_rows], y[keep_rows], sizes[useful], list(k[starts][useful]),
                tuple(features), counts)


def _split(n_groups: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask of the validation groups (at least one, at most all but one)."""
    n_valid = min(max(1, int(round(fraction * n_groups))), n_groups - 1)
    mask = np.zeros(n_groups, bool)
    if n_valid > 0:
        mask[rng.choice(n_groups, size=n_valid, replace=False)] = True
    return mask


def fit_model(parts: Sequence[Part], *, kind: Literal["lambdarank", "hgb"] = "lambdarank",
              drop: Sequence[str] = (), monotone: bool = True, seed: int = 0,
              valid_fraction: float = 0.1, threads: int = 1,
              params: Mapping[str, Any] | None = None) -> tuple[Any, tuple[str, ...], dict]:
    """Fit ``kind`` on ``parts`` together: (model, features, counts). A lambdarank model is a
    LightGBM Booster (``memlab[rank]``); an hgb one scikit-learn's classifier, as
    :func:`memlab.tune.fit.fit_hgb` fits it."""
    if not 0.0 < valid_fraction < 1.0:
        raise InvalidInput("valid_fraction", "must be in (0, 1)", valid_fraction)
    rows = build_rows(parts, kind=kind, drop=drop)
    counts = dict(rows.counts)
    if kind == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier

        opts = {"max_iter": 300, "learning_rate": 0.1, "early_stopping": True,
                "class_weight": "balanced", "random_state": seed, **(params or {})}
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=threads or None, user_api="openmp"):
            model = HistGradientBoostingClassifier(**opts).fit(rows.X, rows.y.astype(int))
        return model, rows.features, counts
    lgb = lightgbm()
    valid = _split(len(rows.sizes), valid_fraction, np.random.default_rng(seed))
    in_valid = np.repeat(valid, rows.sizes)
    mono = [MONOTONE.get(f, 0) if monotone else 0 for f in rows.features]
    opts = {**DEFAULTS, "seed": seed, "num_threads": threads, "monotone_constraints": mono,
            **(params or {})}
    rounds = int(opts.pop("num_boost_round", ROUNDS))
    base_feature, base_scale = opts.pop("base_feature", None), float(opts.pop("base_scale", 1.0))
    init = None
    if base_feature:
        from memlab.recall.learned import base_score

        if base_feature not in rows.features:
            raise InvalidInput("base_feature", "a feature the model reads", base_feature)
        init = base_score(rows.X[:, rows.features.index(base_feature)], base_scale)
        counts["base"] = {"feature": base_feature, "scale": base_scale}
    train = lgb.Dataset(rows.X[~in_valid], rows.y[~in_valid].astype(int),
                        group=rows.sizes[~valid], feature_name=list(rows.features),
                        free_raw_data=True, init_score=None if init is None else init[~in_valid])
    val = lgb.Dataset(rows.X[in_valid], rows.y[in_valid].astype(int), group=rows.sizes[valid],
                      reference=train, init_score=None if init is None else init[in_valid])
    booster = lgb.train(opts, train, num_boost_round=rounds, valid_sets=[val],
                        callbacks=[lgb.early_stopping(PATIENCE, verbose=False)])
    counts.update(best_iteration=int(booster.best_iteration), valid_groups=int(valid.sum()),
                  monotone={f: m for f, m in zip(rows.features, mono) if m})
    if booster.best_iteration > 0:   # the text keeps every tree; predict reads the best ones
        booster = lgb.Booster(model_str=booster.model_to_string(
            num_iteration=booster.best_iteration))
    return booster, rows.features, counts

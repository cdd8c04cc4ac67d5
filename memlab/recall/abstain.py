"""A per-query "nothing relevant" decision learned from answerable and unanswerable questions.

The zscore floor (:mod:`memlab.recall.score`) judges each memory alone: with ~450 memories some
unrelated one often stands out by chance, and a question about a near topic of the user's own (a
mother's job when the mother is in the memories) is never refused. ``recall.floor_mode`` 'learned'
replaces the fixed ``recall.relevance_z`` with one decision per query: a classifier's
P(answerable) from the query's candidates (:data:`QUERY_FEATURES`, :func:`query_features`) is
compared with ``recall.abstain_threshold``. A query refused gets no memory; a query answered keeps
the rows the zscore floor passes and, so that it is answered, its best row by floor z.

Query-level features (one row per qid; a query without a row, or without a cosine, takes the
value a query with nothing would have: z -10, overlap 0):

=============  =====================================================================
best_z         max floor z (min(z_query, z_memory), :func:`memlab.recall.score.floor_z`)
best_zq        max z_query (the query side alone)
best_zm        max z_memory (the memory side alone)
z_gap          best_z minus the second best (0 with one row): does one memory stand out?
best_lexical   max query-term overlap (lexical)
best_bm25      max BM25
best_entity    max entities shared (entity_matches)
best_dense_z   max dense_z: how far the best cosine stands above the query's other candidates
               (``recall.zscore_signals``; a model reading it refuses a table without it)
best_fused_z   max fused_z (mean of dense_z and bm25_z), the same gate
q_who ...      the question's type, one 0/1 flag per :data:`memlab.config.QUESTION_TYPES`
q_multi        (q_who, q_what, q_where, q_how_many, q_yes_no, q_why_how, q_multi), from q_type
=============  =====================================================================

The decision is per language: the query's language (the ``q_lang`` column) picks
``recall.abstain_threshold_zh`` or ``recall.abstain_threshold_en`` when set, else
``recall.abstain_threshold`` (:func:`thresholds_of`); :mod:`memlab.tune.abstainfit` chooses them on
training folds so that a target share of answerable questions is answered.

The model is a scikit-learn classifier saved with skops beside a manifest (features, training
data, config), as :func:`memlab.recall.learned.save_model` does; :func:`fit_abstention` fits it
(logistic regression, classes balanced) and :mod:`memlab.tune.abstainfit` measures it k-fold.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from memlab.config import QUESTION_TYPES, RecallConfig
from memlab.errors import ConfigError
from memlab.recall.background import BOTH, EN, ZH
from memlab.recall.features import Table, column, n_rows
from memlab.recall.modelfile import file_key, read_archive, write_archive
from memlab.version import __version__

__all__ = ["QUERY_FEATURES", "NOTHING", "TYPE_FEATURES", "Z_FEATURES", "query_features",
           "query_languages", "thresholds_of", "AbstainModel", "save_abstain_model",
           "load_abstain_model", "answer_mask", "fit_abstention", "KEY"]

KEY = "recall.abstain_model"
FORMAT = "memlab-abstain-1"
#: the question's type as 0/1 flags, bit i of q_type for QUESTION_TYPES[i]
TYPE_FEATURES = tuple(f"q_{name}" for name in QUESTION_TYPES)
#: features read off the ranking-context z columns (recall.zscore_signals)
Z_FEATURES = ("best_dense_z", "best_fused_z")
QUERY_FEATURES = ("best_z", "best_zq", "best_zm", "z_gap", "best_lexical", "best_bm25",
                  "best_entity", *Z_FEATURES, *TYPE_FEATURES)
#: the value of each feature for a query with no row (or no cosine): nothing stands out
NOTHING = {"best_z": -10.0, "best_zq": -10.0, "best_zm": -10.0, "z_gap": 0.0,
           "best_lexical": 0.0, "best_bm25": 0.0, "best_entity": 0.0,
           "best_dense_z": -10.0, "best_fused_z": -10.0, **{f: 0.0 for f in TYPE_FEATURES}}


def _z_sides(table: Table) -> tuple[np.ndarray, np.ndarray]:
    cos = column(table, "cosine", np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        zq = (cos - column(table, "q_bg_mean", np.float64)) / column(table, "q_bg_std", np.float64)
        zm = (cos - column(table, "m_bg_mean", np.float64)) / column(table, "m_bg_std", np.float64)
    return zq, zm


def query_features(table: Table, n_queries: int | None = None) -> pd.DataFrame:
    """:data:`QUERY_FEATURES` per qid (index 0 .. ``n_queries`` - 1; default: the largest qid
    + 1), from the raw-signal table (float64)."""
    qid = column(table, "qid", np.int64) if n_rows(table) else np.zeros(0, np.int64)
    n = int(qid.max()) + 1 if n_queries is None and len(qid) else (n_queries or 0)
    if not len(qid):
        return pd.DataFrame({f: np.full(n, NOTHING[f]) for f in QUERY_FEATURES})
    zq, zm = _z_sides(table)
    # per qid, with numpy (a live recall is one query: pandas' groupby cost ~80 ms there):
    # the max of each column over its finite values (none: NaN -> NOTHING), and the second
    # best finite z for the gap
    cols = {"best_z": np.minimum(zq, zm), "best_zq": zq, "best_zm": zm,
            "best_lexical": column(table, "lexical", np.float64),
            "best_bm25": column(table, "bm25", np.float64),
            "best_entity": column(table, "entity_matches", np.float64),
            "best_dense_z": column(table, "dense_z", np.float64),
            "best_fused_z": column(table, "fused_z", np.float64)}
    order = np.argsort(qid, kind="stable")
    q = qid[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    got = {}
    for name, v in cols.items():
        v = v[order]
        m = np.maximum.reduceat(np.where(np.isfinite(v), v, -np.inf), starts)
        got[name] = np.where(np.isfinite(m), m, NOTHING[name])
    z = np.minimum(zq, zm)
    zz = np.where(np.isfinite(z), z, -np.inf)
    desc = np.lexsort((-zz, qid))                  # per qid, best z first
    finite = np.add.reduceat(np.isfinite(zz[desc]).astype(np.int64), starts)
    second = np.where(finite >= 2, zz[desc][np.minimum(starts + 1, len(desc) - 1)], np.nan)
    best = np.maximum.reduceat(zz[desc], starts)
    with np.errstate(invalid="ignore"):
        gap = best - second
    got["z_gap"] = np.where(np.isfinite(gap), gap, 0.0)
    code = np.maximum.reduceat(column(table, "q_type", np.int64)[order], starts)   # one per query
    for i, name in enumerate(TYPE_FEATURES):
        got[name] = ((code >> i) & 1).astype(np.float64)
    uq = q[starts]
    keep = uq < n
    out = {}
    for name in QUERY_FEATURES:
        col = np.full(n, NOTHING[name])
        col[uq[keep]] = got[name][keep]
        out[name] = col
    return pd.DataFrame(out)


class AbstainModel:
    """A loaded abstention model and its manifest."""

    def __init__(self, model: Any, manifest: Mapping[str, Any], path: str = "") -> None:
        self.model, self.manifest, self.path = model, dict(manifest), path

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.manifest["features"])

    def p_answerable(self, feats: pd.DataFrame) -> np.ndarray:
        """P(answerable) per row of a :func:`query_features` frame."""
        if not len(feats):
            return np.zeros(0)
        return self.model.predict_proba(feats[list(self.features)].to_numpy(np.float64))[:, 1]


def save_abstain_model(model: Any, path: str | Path, *, features: tuple[str, ...] | list[str],
                       dataset: Mapping[str, Any] | None = None,
                       trained: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` and its manifest as one skops file (beside, then renamed into place)."""
    import sklearn

    unknown = [f for f in features if f not in QUERY_FEATURES]
    if unknown:
        raise ConfigError(KEY, "features must be query features", unknown[0])
    manifest = {"format": FORMAT, "features": list(features), "memlab": __version__,
                "sklearn": sklearn.__version__, "dataset": dict(dataset or {}),
                "trained": dict(trained or {})}
    return write_archive(path, model, manifest)


def load_abstain_model(path: str | Path) -> AbstainModel:
    """The model of ``path`` (cached by path, size and modification time); ConfigError naming
    ``recall.abstain_model`` and the path when it is missing, corrupt or not an abstention
    model."""
    return _load(*file_key(path, KEY))


@lru_cache(maxsize=4)
def _load(path: str, size: int, mtime_ns: int) -> AbstainModel:   # size, mtime: cache key only
    # a scaler and a logistic regression in a pipeline: scikit-learn's own types only
    obj = read_archive(path, KEY, what="abstention model")
    man = obj.get("manifest") if isinstance(obj, dict) else None
    if not isinstance(man, dict) or man.get("format") != FORMAT or "model" not in obj:
        raise ConfigError(KEY, f"not a memlab abstention model (format {FORMAT!r})", path)
    feats = man.get("features")
    if not isinstance(feats, list) or any(f not in QUERY_FEATURES for f in feats):
        raise ConfigError(KEY, f"the manifest's features are not query features ({feats!r})",
                          path)
    model = obj["model"]
    if not hasattr(model, "predict_proba") or getattr(model, "n_features_in_", None) != len(feats):
        raise ConfigError(KEY, f"the model does not read the manifest's {len(feats)} features",
                          path)
    return AbstainModel(model, man, path)


def query_languages(table: Table, n_queries: int) -> np.ndarray:
    """The ``q_lang`` code per qid (0 .. ``n_queries`` - 1; a query without a row: BOTH)."""
    out = np.full(n_queries, BOTH, np.int64)
    if n_rows(table):
        qid = column(table, "qid", np.int64)
        keep = qid < n_queries
        out[qid[keep]] = column(table, "q_lang", np.int64)[keep]
    return out


def thresholds_of(rc: RecallConfig) -> dict[int, float]:
    """The threshold per language code: ``abstain_threshold_zh`` / ``_en`` where set, else
    ``abstain_threshold`` (and always it for mixed text)."""
    zh, en = rc.abstain_threshold_zh, rc.abstain_threshold_en
    return {ZH: rc.abstain_threshold if zh is None else zh,
            EN: rc.abstain_threshold if en is None else en, BOTH: rc.abstain_threshold}


def _check_z_columns(table: Table, model: AbstainModel) -> None:
    """A model that reads the z columns cannot decide on a table without them."""
    if not any(f in Z_FEATURES for f in model.features):
        return
    cos = column(table, "cosine", np.float64)
    dz = column(table, "dense_z", np.float64)
    if np.isfinite(cos).any() and not np.isfinite(dz).any():
        raise ConfigError("recall.zscore_signals", "the abstention model reads best_dense_z / "
                          "best_fused_z; the table has no dense_z (the gate is off)", False)


def answer_mask(table: Table, model: AbstainModel,
                threshold: float | Mapping[int, float]) -> np.ndarray:
    """Per table row: is its query answered (P(answerable) >= the threshold of its language)?
    ``threshold``: one value, or one per language code (:func:`thresholds_of`)."""
    if not n_rows(table):
        return np.zeros(0, bool)
    _check_z_columns(table, model)
    qid = column(table, "qid", np.int64)
    n = int(qid.max()) + 1
    feats = query_features(table, n)
    if isinstance(threshold, Mapping):
        thr = np.array([threshold[int(c)] for c in query_languages(table, n)])
    else:
        thr = np.full(n, float(threshold))
    return (model.p_answerable(feats) >= thr)[qid]


def fit_abstention(feats: pd.DataFrame, answerable: np.ndarray, *, C: float = 1.0,
                   features: tuple[str, ...] = QUERY_FEATURES):
    """A standardised logistic regression of P(answerable) over ``features`` of ``feats``
    (classes balanced: unanswerable questions are ~10% of memlab-lifelog's)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = np.asarray(answerable, bool)
    if y.all() or not y.any():
        raise ConfigError(KEY, "training needs answerable and unanswerable questions",
                          int(y.sum()))
    model = make_pipeline(StandardScaler(), LogisticRegression(C=C, class_weight="balanced",
                                                               max_iter=1000))
    return model.fit(feats[list(features)].to_numpy(np.float64), y.astype(int))

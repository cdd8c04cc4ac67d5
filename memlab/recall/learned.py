"""The ``learned`` scorer: a saved non-linear model over the raw signals (issue 8, item 5).

An upper bound of what the raw-signal table can do, beside the spec's explainable formula: a
classifier (``HistGradientBoostingClassifier``, trained by :func:`memlab.tune.fit.fit_hgb`) gives
every row its probability of being gold evidence, and that probability is the score. The file that
``fusion.learned_model`` names is a skops archive (no pickle: only the types listed in
:data:`TRUSTED_TYPES` are loaded) holding the model and a manifest::

    {"format": 1, "features": [...], "memlab": "0.1.0", "sklearn": "1.9.1",
     "dataset": {...}, "trained": {...}}

The manifest names the feature columns in the order the model reads them; a file that is missing,
not a skops archive, holds other types, lacks the manifest, has another format, a column the table
does not know, or was written by another scikit-learn minor version raises :class:`ConfigError`
naming ``fusion.learned_model``, the rule and the path.

**Two kinds of model** (manifest ``kind``): ``hgb`` (the default, absent in older files), the
classifier above; ``lambdarank``, a LightGBM ranker (:mod:`memlab.tune.rank`) whose score is its
raw output (an order, not a probability). skops could hold a LightGBM model only by trusting
LightGBM's own classes (loaded through their generic ``__reduce__`` state), so the archive holds
LightGBM's text format instead (``Booster.model_to_string()``, a plain ``str``) beside the
manifest: nothing but builtins is loaded, and LightGBM (the optional extra ``memlab[rank]``,
imported when such a file is read) rebuilds the booster from the text. The manifest also records
the LightGBM version.

**Gate features.** A model's columns may include :data:`GATE_FEATURES`, computed from the table
and the config by :func:`gate_features` (not stored): the memory's ``retention`` (§9), whether
the forgetting gate lets it through (``eligible``) and the relevance floor's margin
(``floor_margin``: ``floor_z - recall.relevance_z`` in the zscore and learned modes, ``cosine -
recall.relevance_floor`` in the absolute one; NaN where unknown). With them a model learns how
much the gates should count instead of obeying them as hard cuts.

Gates: like the baselines, no forgetting gate (every row eligible) and, with
``fusion.learned_floor`` (the default), the relevance floor of ``recall.floor_mode`` (a question
about nothing stored still returns nothing); with ``fusion.learned_floor`` false every row is
relevant and the ranking is the model's alone, except under ``recall.floor_mode`` 'learned',
whose decision is a question's, not a row's: a question its abstention model refuses gets nothing,
every row of one it answers is relevant.

**Route features** (:data:`ROUTE_FEATURES`, :func:`route_features`, also computed, not stored):
``rrf``, the hybrid_rrf baseline's score (1/(``baselines.rrf_k`` + rank) summed over the dense
and lexical routes) and ``rrf_rank``, its rank within the question: a model can start from the
plain hybrid instead of rebuilding it from the two ranks with its trees. A lambdarank model may
also be fitted boosted from a baseline (manifest ``base``: a rank feature and a scale; LightGBM's
``init_score``): its score is then the trees' output plus :func:`base_score` of that rank.

**Columns a model and a table do not share** (one rule, :meth:`LearnedModel.matrix`): the model
reads the manifest's columns by name, in its order; a table column it does not name is ignored
(a model trained before a column existed keeps working); a manifest column memlab does not know
is refused when the file is read (ConfigError naming the column: retrain). A column whose gate
(:data:`COLUMN_GATES`: the config field that computes it) was on when the model was trained (the
manifest's ``config``) and is off in the config scoring it would be NaN on every row, which a tree
reads as "missing", silently: refused, ConfigError naming the field and the value to set.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import ConfigError
from memlab.recall.features import COLUMNS, Table, column, n_rows
from memlab.recall.modelfile import file_key, read_archive, write_archive
from memlab.recall.score import Scored, register, relevance_mask
from memlab.version import __version__

__all__ = ["FORMAT", "FEATURES", "GATE_FEATURES", "ROUTE_FEATURES", "COMPUTED", "COLUMN_GATES",
           "KINDS", "TRUSTED_TYPES", "LearnedModel", "gate_features", "route_features",
           "computed_features", "save_model", "load_model", "learned"]

FORMAT = 1
#: every raw signal but the row's identity (qid, row) and the absolute event time (Unix seconds:
#: it says when the dataset was recorded, not how old a memory is; event_age_days does that)
FEATURES: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("qid", "row", "event_time"))
#: the only non-builtin types a model file may hold besides scikit-learn's own estimators
TRUSTED_TYPES = ("sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",)
KEY = "fusion.learned_model"
#: the model kinds a file may hold (manifest ``kind``)
KINDS = ("hgb", "lambdarank")
#: columns computed from the table and the config at scoring time (see the module doc)
GATE_FEATURES: tuple[str, ...] = ("retention", "eligible", "floor_margin")
#: the hybrid's fusion of the two routes, computed from the ranks at scoring time (see the doc)
ROUTE_FEATURES: tuple[str, ...] = ("rrf", "rrf_rank")
#: every column a model may read that the table does not store
COMPUTED: tuple[str, ...] = GATE_FEATURES + ROUTE_FEATURES
#: config field -> the columns it computes (off: NaN or neutral on every row)
COLUMN_GATES: dict[str, tuple[str, ...]] = {
    "recall.zscore_signals": ("dense_z", "bm25_z", "fused_z"),
    "recall.session_context": ("nb1_dense", "nb1_bm25", "nb2_dense", "nb2_bm25", "sess_best",
                               "sess_mean", "sess_pos", "sess_first", "sess_last"),
    "query.time_expressions": ("q_window_days", "window_dist_days"),
    "query.question_types": ("q_type",),
    "query.speakers": ("speaker_named",),
}


def route_features(table: Table, cfg: MemlabConfig) -> dict[str, np.ndarray]:
    """The :data:`ROUTE_FEATURES` of every row: ``rrf``, the hybrid_rrf baseline's score (the sum
    of 1/(``baselines.rrf_k`` + rank) over the dense and lexical routes, 0 for a row neither
    route retrieved) and ``rrf_rank``, its rank within the question (1 = best; ties by row
    order; 0 where ``rrf`` is 0)."""
    from memlab.recall.score import rrf_terms

    n = n_rows(table)
    if n == 0:
        return {c: np.zeros(0) for c in ROUTE_FEATURES}
    dense, lexical = rrf_terms(column(table, "dense_rank", np.float64),
                               column(table, "lexical_rank", np.float64), cfg.baselines.rrf_k)
    score = dense + lexical
    qid = column(table, "qid", np.int64)
    order = np.lexsort((-score, qid))     # stable: ties keep the row order
    starts = np.r_[0, np.flatnonzero(qid[order][1:] != qid[order][:-1]) + 1]
    pos = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    rank = np.empty(n, np.float64)
    rank[order] = pos + 1
    return {"rrf": score, "rrf_rank": np.where(score > 0, rank, 0.0)}


def base_score(rank: np.ndarray, scale: float) -> np.ndarray:
    """The score a ranker boosts from (its ``init_score``): ``-scale * ln(rank)`` of a
    baseline's rank within the question (1 = best: 0); a row the baseline does not rank (rank 0
    or NaN) gets the score of rank 1,000."""
    r = np.asarray(rank, np.float64)
    r = np.where(np.isfinite(r) & (r > 0), r, 1000.0)
    return -float(scale) * np.log(r)


def computed_features(table: Table, cfg: MemlabConfig, names: Any = COMPUTED
                      ) -> dict[str, np.ndarray]:
    """The :data:`COMPUTED` columns among ``names`` (only the groups asked for are computed)."""
    out: dict[str, np.ndarray] = {}
    if any(c in GATE_FEATURES for c in names):
        out.update(gate_features(table, cfg))
    if any(c in ROUTE_FEATURES for c in names):
        out.update(route_features(table, cfg))
    return out


def gate_features(table: Table, cfg: MemlabConfig) -> dict[str, np.ndarray]:
    """The :data:`GATE_FEATURES` of every row of ``table`` under ``cfg`` (float64)."""
    from memlab.recall.score import floor_z, reverie_gate, reverie_memory

    n = n_rows(table)
    if n == 0:
        return {c: np.zeros(0) for c in GATE_FEATURES}
    memory = reverie_memory(table, cfg)
    _, eligible, _, _ = reverie_gate(table, cfg, memory, np.ones(n, dtype=bool))
    cosine = column(table, "cosine", np.float64)
    if cfg.recall.floor_mode in ("zscore", "learned"):    # learned: the zscore floor's rows
        stats = [column(table, c, np.float64) for c in ("q_bg_mean", "q_bg_std", "m_bg_mean",
                                                         "m_bg_std")]
        with np.errstate(invalid="ignore"):
            margin = floor_z(cosine, *stats) - cfg.recall.relevance_z
    else:
        margin = cosine - cfg.recall.relevance_floor
    margin = np.where(np.isfinite(margin), margin, np.nan)
    return {"retention": np.asarray(memory["retention"], np.float64),
            "eligible": np.asarray(eligible, np.float64), "floor_margin": margin}


class LearnedModel:
    """A loaded model and its manifest."""

    def __init__(self, model: Any, manifest: Mapping[str, Any], path: str = "") -> None:
        self.model, self.manifest, self.path = model, dict(manifest), path

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.manifest["features"])

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind", "hgb"))

    def matrix(self, table: Table, cfg: MemlabConfig | None = None) -> np.ndarray:
        """The model's input: the manifest's columns of ``table`` as float64 (NaN kept: the
        gradient-boosting models treat it as missing); gate features from ``cfg``."""
        missing = [c for c in self.features if c not in table and c not in COMPUTED]
        if missing:
            raise ConfigError(KEY, f"the model reads column {missing[0]!r}, which the feature "
                              "table lacks", self.path)
        if cfg is not None:
            self.check_gates(cfg)
        gates = {}
        if any(c in COMPUTED for c in self.features):
            if cfg is None:
                raise ConfigError(KEY, "the model reads computed features (gates, routes): "
                                  "pass the config", self.path)
            gates = computed_features(table, cfg, self.features)
        return np.column_stack([gates[c] if c in gates else column(table, c, np.float64)
                                for c in self.features]) \
            if self.features else np.zeros((n_rows(table), 0))

    def check_gates(self, cfg: MemlabConfig) -> None:
        """ConfigError naming the first field of :data:`COLUMN_GATES` that was on when the model
        was trained (manifest ``config``) and is off in ``cfg``, for a column the model reads."""
        trained = self.manifest.get("config") or {}
        flat = cfg.to_flat()
        for key, cols in COLUMN_GATES.items():
            if trained.get(key) is True and flat.get(key) is False and \
                    any(c in self.features for c in cols):
                raise ConfigError(key, f"the model {self.path} reads columns this field computes "
                                  f"({', '.join(c for c in cols if c in self.features)}) and was "
                                  f"trained with it on: set {key}=true", False)

    def predict(self, table: Table, cfg: MemlabConfig | None = None) -> np.ndarray:
        """The score of every row: P(gold) (hgb) or the ranker's raw output (lambdarank)."""
        if n_rows(table) == 0:
            return np.zeros(0)
        X = self.matrix(table, cfg)
        if self.kind == "lambdarank":   # one thread: a recall's few hundred rows do not pay
            # for OpenMP's start (measured: 21 ms per recall with the default threads on a
            # loaded 2-core machine); the scores do not depend on it
            out = np.asarray(self.model.predict(X, num_threads=1), np.float64)
            base = self.manifest.get("base")
            if base:
                out = out + base_score(X[:, self.features.index(base["feature"])],
                                       float(base["scale"]))
            return out
        return self.model.predict_proba(X)[:, 1]


def _sklearn_minor() -> str:
    import sklearn

    return ".".join(sklearn.__version__.split(".")[:2])


def lightgbm():
    """The lightgbm module, or ConfigError naming the extra that installs it."""
    try:
        import lightgbm as lgb
    except ImportError:
        raise ConfigError(KEY, "a lambdarank model needs LightGBM: pip install 'memlab[rank]'",
                          "lightgbm") from None
    return lgb


def save_model(model: Any, path: str | Path, *, features: tuple[str, ...] | list[str],
               dataset: Mapping[str, Any] | None = None,
               trained: Mapping[str, Any] | None = None,
               environment: Mapping[str, Any] | None = None,
               kind: str = "hgb", config: Mapping[str, Any] | None = None,
               base: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` (fitted on ``features``, in that order) and its manifest as one skops file
    (``kind`` lambdarank: a LightGBM Booster or LGBMRanker, kept as LightGBM's text; ``config``:
    the flat training config, recorded). Written beside and renamed into place, so a reader never
    sees half a file."""
    import sklearn

    if kind not in KINDS:
        raise ConfigError(KEY, f"kind must be one of {', '.join(KINDS)}", kind)
    unknown = [c for c in features if c not in COLUMNS and c not in COMPUTED]
    if unknown:
        raise ConfigError(KEY, "feature columns must be raw-signal columns", unknown[0])
    manifest = {"format": FORMAT, "kind": kind, "features": list(features),
                "memlab": __version__, "sklearn": sklearn.__version__,
                "dataset": dict(dataset or {}), "trained": dict(trained or {}),
                "environment": dict(environment or {}), "config": dict(config or {})}
    if base:
        if kind != "lambdarank" or base.get("feature") not in features:
            raise ConfigError(KEY, "a base score needs a lambdarank model reading its feature",
                              dict(base))
        manifest["base"] = {"feature": str(base["feature"]), "scale": float(base["scale"])}
    if kind == "lambdarank":
        booster = getattr(model, "booster_", model)
        manifest["lightgbm"] = lightgbm().__version__
        model = booster.model_to_string()
    return write_archive(path, model, manifest)


def load_model(path: str | Path) -> LearnedModel:
    """The model of ``path`` (cached by path, size and modification time); ConfigError naming the
    path when it is missing, corrupt or incompatible."""
    return _load(*file_key(path, KEY))


@lru_cache(maxsize=8)
def _load(path: str, size: int, mtime_ns: int) -> LearnedModel:   # size, mtime: cache key only
    obj = read_archive(path, KEY, what="model file", trusted=TRUSTED_TYPES)
    if not isinstance(obj, dict) or "model" not in obj or "manifest" not in obj:
        raise ConfigError(KEY, "not a memlab model file: no model and manifest", path)
    man = obj["manifest"] if isinstance(obj["manifest"], dict) else {}
    if man.get("format") != FORMAT:
        raise ConfigError(KEY, f"model file format {man.get('format')!r}, this memlab reads "
                          f"format {FORMAT}", path)
    feats = man.get("features")
    if not isinstance(feats, list) or any(c not in COLUMNS and c not in COMPUTED
                                          for c in feats):
        raise ConfigError(KEY, f"the manifest's feature columns are not raw-signal columns "
                          f"({feats!r})", path)
    kind = man.get("kind", "hgb")
    if kind not in KINDS:
        raise ConfigError(KEY, f"model kind {kind!r}, this memlab reads {', '.join(KINDS)}", path)
    if kind == "lambdarank":
        return _ranker(obj["model"], man, feats, path)
    if ".".join(str(man.get("sklearn", "")).split(".")[:2]) != _sklearn_minor():
        raise ConfigError(KEY, f"written by scikit-learn {man.get('sklearn')}, this is "
                          f"{_sklearn_minor()}: retrain it (memlab fit --model hgb)", path)
    model = obj["model"]
    if not hasattr(model, "predict_proba") or getattr(model, "n_features_in_", None) != len(feats):
        raise ConfigError(KEY, f"the model does not read the manifest's {len(feats)} columns",
                          path)
    return LearnedModel(model, man, path)


def _ranker(text: Any, man: Mapping[str, Any], feats: list, path: str) -> LearnedModel:
    """A LightGBM booster from its text (see the module doc)."""
    lgb = lightgbm()
    if not isinstance(text, str):
        raise ConfigError(KEY, "a lambdarank model file holds LightGBM's text model", path)
    try:
        booster = lgb.Booster(model_str=text)
    except lgb.basic.LightGBMError as exc:
        raise ConfigError(KEY, f"LightGBM cannot read the model: {exc}", path) from None
    if booster.num_feature() != len(feats):
        raise ConfigError(KEY, f"the model does not read the manifest's {len(feats)} columns",
                          path)
    return LearnedModel(booster, man, path)


@register("learned")
def learned(table: Table, cfg: MemlabConfig) -> Scored:
    """P(gold) from the model that ``fusion.learned_model`` names; its only term is
    ``learned_term``. An empty table scores to empty arrays without reading the file."""
    n = n_rows(table)
    if n == 0:
        z = np.zeros(0)
        return Scored(z, np.zeros(0, bool), np.zeros(0, bool), {"learned_term": z},
                      ("learned_term",), "learned")
    path = cfg.fusion.learned_model
    if not path:
        raise ConfigError(KEY, "fusion.scorer 'learned' needs a model file (memlab fit --model "
                          "hgb --out FILE)", path)
    p = load_model(path).predict(table, cfg)
    if cfg.fusion.learned_floor:
        relevant, floor = relevance_mask(table, cfg)
    elif cfg.recall.floor_mode == "learned":     # the question's decision, not the rows'
        _, floor = relevance_mask(table, cfg)
        relevant = np.asarray(floor["answered"], bool)
    else:
        relevant, floor = np.ones(n, dtype=bool), {}
    return Scored(score=p, eligible=np.ones(n, dtype=bool), relevant=relevant,
                  components={**floor, "learned_term": p}, additive=("learned_term",),
                  scorer="learned")

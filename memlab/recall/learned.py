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

Gates: like the baselines, no forgetting gate (every row eligible) and the relevance floor of
``recall.floor_mode`` (a question about nothing stored still returns nothing).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import ConfigError
from memlab.recall.features import COLUMNS, Table, column, n_rows
from memlab.recall.score import Scored, register, relevance_mask
from memlab.version import __version__

__all__ = ["FORMAT", "FEATURES", "TRUSTED_TYPES", "LearnedModel", "save_model", "load_model",
           "learned"]

FORMAT = 1
#: every raw signal but the row's identity (qid, row) and the absolute event time (Unix seconds:
#: it says when the dataset was recorded, not how old a memory is; event_age_days does that)
FEATURES: tuple[str, ...] = tuple(c for c in COLUMNS if c not in ("qid", "row", "event_time"))
#: the only non-builtin types a model file may hold besides scikit-learn's own estimators
TRUSTED_TYPES = ("sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",)
KEY = "fusion.learned_model"


class LearnedModel:
    """A loaded model and its manifest."""

    def __init__(self, model: Any, manifest: Mapping[str, Any], path: str = "") -> None:
        self.model, self.manifest, self.path = model, dict(manifest), path

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.manifest["features"])

    def matrix(self, table: Table) -> np.ndarray:
        """The model's input: the manifest's columns of ``table`` as float64 (NaN kept: the
        gradient-boosting model treats it as missing)."""
        missing = [c for c in self.features if c not in table]
        if missing:
            raise ConfigError(KEY, f"the model reads column {missing[0]!r}, which the feature "
                              "table lacks", self.path)
        return np.column_stack([column(table, c, np.float64) for c in self.features]) \
            if self.features else np.zeros((n_rows(table), 0))

    def predict(self, table: Table) -> np.ndarray:
        """P(gold) of every row."""
        if n_rows(table) == 0:
            return np.zeros(0)
        return self.model.predict_proba(self.matrix(table))[:, 1]


def _sklearn_minor() -> str:
    import sklearn

    return ".".join(sklearn.__version__.split(".")[:2])


def save_model(model: Any, path: str | Path, *, features: tuple[str, ...] | list[str],
               dataset: Mapping[str, Any] | None = None,
               trained: Mapping[str, Any] | None = None,
               environment: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` (fitted on ``features``, in that order) and its manifest as one skops file.
    Written beside and renamed into place, so a reader never sees half a file."""
    import sklearn
    import skops.io as sio

    unknown = [c for c in features if c not in COLUMNS]
    if unknown:
        raise ConfigError(KEY, "feature columns must be raw-signal columns", unknown[0])
    manifest = {"format": FORMAT, "features": list(features), "memlab": __version__,
                "sklearn": sklearn.__version__, "dataset": dict(dataset or {}),
                "trained": dict(trained or {}), "environment": dict(environment or {})}
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_bytes(sio.dumps({"model": model, "manifest": manifest}))
    os.replace(tmp, p)
    return p


def load_model(path: str | Path) -> LearnedModel:
    """The model of ``path`` (cached by path, size and modification time); ConfigError naming the
    path when it is missing, corrupt or incompatible."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except OSError as exc:
        raise ConfigError(KEY, f"cannot read the model file ({exc.strerror})", str(p)) from None
    return _load(str(p.resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _load(path: str, size: int, mtime_ns: int) -> LearnedModel:   # size, mtime: cache key only
    import skops.io as sio

    try:
        data = Path(path).read_bytes()
        found = sio.get_untrusted_types(data=data)
        extra = sorted(set(found) - set(TRUSTED_TYPES))
        if extra:
            raise ConfigError(KEY, f"the model file holds types memlab does not load: "
                              f"{', '.join(extra)}", path)
        obj = sio.loads(data, trusted=list(found))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt archive fails in zipfile, json or
        # skops with many types; each becomes the one named refusal, nothing is loaded
        raise ConfigError(KEY, f"not a memlab model file (skops): {type(exc).__name__}: {exc}",
                          path) from None
    if not isinstance(obj, dict) or "model" not in obj or "manifest" not in obj:
        raise ConfigError(KEY, "not a memlab model file: no model and manifest", path)
    man = obj["manifest"] if isinstance(obj["manifest"], dict) else {}
    if man.get("format") != FORMAT:
        raise ConfigError(KEY, f"model file format {man.get('format')!r}, this memlab reads "
                          f"format {FORMAT}", path)
    feats = man.get("features")
    if not isinstance(feats, list) or any(c not in COLUMNS for c in feats):
        raise ConfigError(KEY, f"the manifest's feature columns are not raw-signal columns "
                          f"({feats!r})", path)
    if ".".join(str(man.get("sklearn", "")).split(".")[:2]) != _sklearn_minor():
        raise ConfigError(KEY, f"written by scikit-learn {man.get('sklearn')}, this is "
                          f"{_sklearn_minor()}: retrain it (memlab fit --model hgb)", path)
    model = obj["model"]
    if not hasattr(model, "predict_proba") or getattr(model, "n_features_in_", None) != len(feats):
        raise ConfigError(KEY, f"the model does not read the manifest's {len(feats)} columns",
                          path)
    return LearnedModel(model, man, path)


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
    p = load_model(path).predict(table)
    relevant, floor = relevance_mask(table, cfg)
    return Scored(score=p, eligible=np.ones(n, dtype=bool), relevant=relevant,
                  components={**floor, "learned_term": p}, additive=("learned_term",),
                  scorer="learned")

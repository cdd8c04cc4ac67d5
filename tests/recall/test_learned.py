"""The ``learned`` scorer (memlab.recall.learned): a saved non-linear model round-trips through its
file and scores every row with its P(gold); a missing, corrupt or incompatible file is refused
with ConfigError naming fusion.learned_model and the path."""

from __future__ import annotations

import numpy as np
import pytest
import skops.io as sio
from sklearn.ensemble import HistGradientBoostingClassifier

from memlab import __version__
from memlab.config import MemlabConfig
from memlab.errors import ConfigError
from memlab.recall import learned as L
from memlab.recall.features import make_columns
from memlab.recall.score import SCORERS, score

FEATS = ("cosine", "lexical")


def _data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    table = make_columns(qid=np.repeat(np.arange(n // 30), 30), cosine=rng.uniform(0, 1, n),
                         lexical=rng.uniform(0, 1, n))
    y = (table["cosine"] + 2 * table["lexical"] + rng.normal(0, 0.3, n) > 1.8).astype(int)
    return table, y


@pytest.fixture(scope="module")
def model():
    table, y = _data()
    X = np.column_stack([table[c].astype(float) for c in FEATS])
    return HistGradientBoostingClassifier(max_iter=30, random_state=0).fit(X, y)


def _cfg(path) -> MemlabConfig:
    return MemlabConfig().replace(**{"fusion.scorer": "learned", "fusion.learned_model": str(path),
                                     "recall.floor_mode": "absolute",
                                     "recall.relevance_floor": 0.2, "recall.lexical_floor": 1.0})


def test_a_saved_model_round_trips_and_scores_its_probability(model, tmp_path):
    assert "learned" in SCORERS
    path = L.save_model(model, tmp_path / "m.skops", features=FEATS,
                        dataset={"name": "synthetic"}, trained={"rows": 600})
    table, _ = _data(seed=1)
    s = score(table, _cfg(path))
    X = np.column_stack([table[c].astype(float) for c in FEATS])
    np.testing.assert_array_equal(s.score, model.predict_proba(X)[:, 1])
    assert s.additive == ("learned_term",) and s.eligible.all()
    np.testing.assert_array_equal(s.relevant, table["cosine"] >= 0.2)   # the recall floor
    man = L.load_model(path).manifest
    assert man["features"] == list(FEATS) and man["memlab"] == __version__
    assert man["dataset"] == {"name": "synthetic"} and man["format"] == L.FORMAT


def test_without_a_model_file_the_scorer_refuses():
    table, _ = _data()
    with pytest.raises(ConfigError, match="fusion.learned_model.*needs a model file"):
        score(table, MemlabConfig().replace(**{"fusion.scorer": "learned"}))
    with pytest.raises(ConfigError, match="fusion.learned_model.*cannot read.*nope.skops"):
        score(table, _cfg("/nonexistent/nope.skops"))


def _refused(path, match):
    table, _ = _data()
    with pytest.raises(ConfigError, match=match) as err:
        score(table, _cfg(path))
    assert str(path) in str(err.value) and "fusion.learned_model" in str(err.value)


def test_a_corrupt_file_is_refused(model, tmp_path):
    garbage = tmp_path / "garbage.skops"
    garbage.write_bytes(b"not a zip archive at all")
    _refused(garbage, "not a memlab model file")
    good = L.save_model(model, tmp_path / "good.skops", features=FEATS)
    cut = tmp_path / "cut.skops"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    _refused(cut, "not a memlab model file")


def _raw(tmp_path, name, obj):
    p = tmp_path / name
    p.write_bytes(sio.dumps(obj))
    return p


def test_an_incompatible_file_is_refused(model, tmp_path):
    import fractions
    import sklearn

    man = {"format": L.FORMAT, "features": list(FEATS), "memlab": __version__,
           "sklearn": sklearn.__version__}
    _refused(_raw(tmp_path, "fmt.skops", {"model": model, "manifest": {**man, "format": 99}}),
             "format 99")
    _refused(_raw(tmp_path, "old.skops", {"model": model,
                                          "manifest": {**man, "sklearn": "0.24.2"}}),
             "scikit-learn 0.24.2")
    _refused(_raw(tmp_path, "col.skops", {"model": model,
                                          "manifest": {**man, "features": ["cosine", "magic"]}}),
             "not raw-signal columns")
    _refused(_raw(tmp_path, "n.skops", {"model": model,
                                        "manifest": {**man, "features": ["cosine"]}}),
             "does not read the manifest's 1 columns")
    _refused(_raw(tmp_path, "bare.skops", {"model": model}), "no model and manifest")
    _refused(_raw(tmp_path, "odd.skops", {"model": model, "manifest": man,
                                          "x": fractions.Fraction(1, 3)}),
             "types memlab does not load: fractions.Fraction")


def test_an_empty_table_needs_no_model():
    s = score(make_columns(cosine=[]), MemlabConfig().replace(**{"fusion.scorer": "learned"}))
    assert len(s) == 0

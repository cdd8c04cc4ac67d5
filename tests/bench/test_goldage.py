"""memlab.bench.goldage: the gold memory's age at asked_at and its stored layer, importance,
emotion and references (per_query columns of memlab bench and tune.evaluate), and recall binned by
that age with Wilson or bootstrap intervals; values worked out by hand."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memlab.bench.datasets import registry
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.goldage import (AGE_BINS, GOLD_COLUMNS, bin_labels, bootstrap_interval,
                                  gold_columns, recall_by_age, wilson_interval)
from memlab.bench.replay import Replayed
from memlab.bench.run import replay_cached, run_bench
from memlab.errors import InvalidInput
from memlab.recall.features import Features, make_table
from memlab.tune.evaluate import per_query

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
CARD = Card(name="gold-age", version="1", language="en", license="CC0-1.0", source="memlab tests",
            granularity="turn", description="ages by hand")


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def three_golds() -> Dataset:
    """One question on day 40 with gold i1 (day 0, long term, importance 0.9), i2 (day 25.5,
    short term, importance 0.3, emotion 0.4) and i3 (day 50: not written yet); another whose only
    gold is from the future."""
    meta1 = {"layer": "long_term", "importance": 0.9}
    meta2 = {"layer": "short_term", "importance": 0.3, "emotion": 0.4}
    items = [Item("c", "i1", "s1", "Ann", "the blue lake cabin", day(0), meta1),
             Item("c", "i2", "s1", "Ann", "the blue lake cabin again", day(25.5), meta2),
             Item("c", "i3", "s2", "Ann", "the blue lake cabin once more", day(50))]
    questions = [Question("c", "q1", "blue lake cabin", day(40), "x", ("i1", "i2", "i3")),
                 Question("c", "q2", "blue lake cabin", day(40), "x", ("i3",))]
    return Dataset(CARD, items, questions)


# ----------------------------------------------------------------------------- gold columns

def test_gold_columns_of_the_tiny_benchmark(tiny_bench, hashing_cfg, counting_embedder):
    rep = replay_cached(tiny_bench, hashing_cfg, embedder=counting_embedder, progress=False)
    g = gold_columns(tiny_bench, rep, cfg=hashing_cfg)
    assert list(g.columns) == list(GOLD_COLUMNS)
    assert list(g.index) == ["u1::q1", "u1::q2", "u1::q3", "u2::q1"]
    # asked on day 10: i1 written day 1 -> 9 days; u1::q2's gold (day 30) not written yet; i3 day 3
    np.testing.assert_allclose(g["gold_age_days"], [9.0, np.nan, 7.0, 9.0])
    assert g["gold_count"].tolist() == [1, 0, 1, 1]
    # no meta: importance 0.5 (bench.default_importance), routed by importance: 0.5 <= 0.6 ->
    # short term; written once, never recalled: 0 references
    assert g["gold_layer"].fillna("?").tolist() == ["short_term", "?", "short_term", "short_term"]
    np.testing.assert_allclose(g["gold_importance"], [0.5, np.nan, 0.5, 0.5])
    np.testing.assert_allclose(g["gold_references"], [0.0, np.nan, 0.0, 0.0])


def test_the_youngest_written_gold_gives_age_and_stored_values(hashing_cfg, counting_embedder):
    ds = three_golds()
    rep = replay_cached(ds, hashing_cfg, embedder=counting_embedder, progress=False)
    g = gold_columns(ds, rep, cfg=hashing_cfg)
    q1 = g.loc["c::q1"]
    # written by day 40: i1 (40 days old) and i2 (14.5 days); i3 (day 50) is not
    assert q1["gold_age_days"] == pytest.approx(14.5)
    assert q1["gold_age_days_oldest"] == pytest.approx(40.0)
    assert q1["gold_count"] == 2
    # i2's stored values (meta layer and importance, emotion 0.4 of 1 -> 40 of 100 -> 0.4)
    assert q1["gold_layer"] == "short_term"
    assert q1["gold_importance"] == pytest.approx(0.3)
    assert q1["gold_emotion"] == pytest.approx(0.4)
    assert math.isnan(g.loc["c::q2", "gold_age_days"]) and g.loc["c::q2", "gold_count"] == 0
    # without a replay: the age only
    bare = gold_columns(ds)
    assert bare.loc["c::q1", "gold_age_days"] == pytest.approx(14.5)
    assert pd.isna(bare.loc["c::q1", "gold_layer"]) and bare.attrs["gold_unseen"] == 0


def test_stored_values_come_from_the_memorys_row_and_unseen_golds_are_counted():
    ds = three_golds()
    # a hand-made replay table: i1 is global row 7 (long term, importance 0.8, emotion 50 of 100,
    # 2 accesses and 2 mentions -> 3 references); i2 has no row
    table = make_table(qid=[0], row=[7], layer=[1], importance=[0.8], emotion_max=[50.0],
                       access_count=[2], mention_count=[2])
    rep = Replayed(Features(table=table), pd.DataFrame({"qid": [0, 1], "conversation_id": ["c", "c"],
                                                        "query_id": ["q1", "q2"]}),
                   {7: "i1"}, {7: "s1"})
    g = gold_columns(ds, rep)
    assert pd.isna(g.loc["c::q1", "gold_layer"]) and g.attrs["gold_unseen"] == 1   # i2: no row
    ds1 = Dataset(CARD, ds.items[:1], [Question("c", "q1", "cabin", day(3), "x", ("i1",))])
    g1 = gold_columns(ds1, rep)
    assert g1.loc["c::q1", "gold_layer"] == "long_term"
    assert g1.loc["c::q1", "gold_importance"] == pytest.approx(0.8)
    assert g1.loc["c::q1", "gold_emotion"] == pytest.approx(0.5)
    assert g1.loc["c::q1", "gold_references"] == 3.0
    assert g1.attrs["gold_unseen"] == 0


def test_bench_and_tune_per_query_carry_the_gold_columns(tiny_bench_folder, hashing_cfg,
                                                         counting_embedder):
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("cos", hashing_cfg.replace(
        **{"fusion.scorer": "cosine"}))], progress=False, embedder=counting_embedder)
    pq = out.results[0].per_query
    np.testing.assert_allclose(pq["gold_age_days"], [9.0, np.nan, 7.0, 9.0])
    ds = registry.load(str(tiny_bench_folder))
    rep = replay_cached(ds, hashing_cfg, embedder=counting_embedder, progress=False)
    got = per_query(rep, hashing_cfg.replace(**{"fusion.scorer": "cosine"}), dataset=ds)
    pd.testing.assert_frame_equal(got[list(GOLD_COLUMNS)], pq[list(GOLD_COLUMNS)])
    assert "gold_age_days" not in per_query(rep, hashing_cfg).columns   # only with dataset=


# ----------------------------------------------------------------------------- binning

def frame(ages, values, metric="recall@10"):
    return pd.DataFrame({metric: values, "gold_age_days": ages})


def test_recall_by_age_counts_means_and_half_open_bins():
    f = frame([0.5, 1.0, 3.0, 10.0, 100.0, np.nan], [1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    t = recall_by_age({"a": f}, bins=(0, 1, 7, 30, math.inf))
    assert t["bin"].tolist() == ["0-1", "1-7", "7-30", "30+"]
    # day 1.0 falls in [1, 7): bins are [lo, hi)
    assert t["n"].tolist() == [1, 2, 1, 1]
    np.testing.assert_allclose(t["mean"], [1.0, 0.5, 1.0, 0.0])
    np.testing.assert_allclose(t["age_median"], [0.5, 2.0, 10.0, 100.0])
    assert t.attrs["without_age"] == {"a": 1}


def test_wilson_interval_by_its_formula_and_against_scipy():
    # mean 0.5 of 2, z = 1.96: centre 0.5, half 1.96 * sqrt(0.125 + z^2/16) / (1 + z^2/2)
    z = stats.norm.ppf(0.975)
    half = z * math.sqrt(0.125 + z * z / 16) / (1 + z * z / 2)
    assert wilson_interval(0.5, 2) == pytest.approx((0.5 - half, 0.5 + half))
    for k, n in [(0, 5), (3, 7), (10, 10), (41, 120)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k / n, n) == pytest.approx((ci.low, ci.high))
    assert all(math.isnan(v) for v in wilson_interval(math.nan, 0))


def test_recall_by_age_uses_the_interval_asked_for():
    f = frame([2.0, 3.0, 4.0, 5.0], [1.0, 0.0, 1.0, 1.0])
    w = recall_by_age(f, bins=(0, 7))
    assert (w["low"][0], w["high"][0]) == pytest.approx(wilson_interval(0.75, 4))
    b = recall_by_age(f, bins=(0, 7), interval="bootstrap", resamples=500, seed=1)
    assert (b["low"][0], b["high"][0]) == bootstrap_interval(
        np.array([1.0, 0.0, 1.0, 1.0]), resamples=500, seed=1)
    assert b["low"][0] <= 0.75 <= b["high"][0]
    assert bootstrap_interval(np.ones(5)) == (1.0, 1.0)


def test_default_bins_and_labels():
    assert bin_labels(AGE_BINS) == ["0-1", "1-7", "7-14", "14-30", "30-60", "60-120",
                                    "120-240", "240+"]
    t = recall_by_age({"x": frame([0.2], [1.0]), "y": frame([500.0], [0.0])})
    assert t.groupby("preset")["n"].sum().to_dict() == {"x": 1, "y": 1}
    assert t.loc[(t.preset == "y") & (t.bin == "240+"), "n"].item() == 1


@pytest.mark.parametrize("kwargs,match", [
    ({"interval": "normal"}, "interval"), ({"bins": (0,)}, "bins"), ({"bins": (7, 1)}, "bins"),
    ({"metric": "ndcg@5"}, "ndcg@5"), ({"confidence": 1.0}, "confidence")])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(InvalidInput, match=match):
        recall_by_age(frame([1.0], [1.0]), **kwargs)


def test_values_outside_the_unit_interval_are_refused():
    with pytest.raises(InvalidInput, match="recall@10"):
        recall_by_age(frame([1.0, 2.0], [0.5, 2.0]))

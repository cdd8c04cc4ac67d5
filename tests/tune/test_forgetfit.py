"""memlab.tune.forgetfit: the forgetting fit recovers the parameters it was given (synthetic events
drawn from memlab's retention curve), its prior, split, validation and events from per-query frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sklearn import metrics as skm

from memlab import forgetting as fg
from memlab.bench.goldage import AGE_BINS
from memlab.bench.run import replay_cached, run_bench
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.tune.forgetfit import (events_of, fit_forgetting, held_out_comparison, predict,
                                   simulate_events, time_split)

CFG = MemlabConfig()
LONG, SHORT = "forgetting.long_term_half_life_days", "forgetting.short_term_half_life_days"
TRUTH = {LONG: 150.0, SHORT: 12.0}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_fit_recovers_known_half_lives(seed):
    """8,000 events drawn with long 150 and short 12 days, base 0.15, gain 0.7 (the spec says
    90 and 7), a weak prior (sd 10 in ln units): each half-life within 15% of the truth and
    inside its Hessian interval, base and gain within 0.03 (over seeds 0-5 the largest
    half-life error was 10%)."""
    ev = simulate_events(8000, cfg=CFG, theta=TRUTH, base=0.15, gain=0.7, seed=seed)
    fit = fit_forgetting(ev, cfg=CFG, prior_sd=10.0, bootstrap=0)
    assert list(fit.params.index) == [LONG, SHORT]            # both layers hold events
    for key, true in TRUTH.items():
        row = fit.params.loc[key]
        assert row["fitted"] == pytest.approx(true, rel=0.15)
        assert row["se_low"] <= true <= row["se_high"]
        assert row["spec"] == CFG.to_flat()[key]
    assert fit.base == pytest.approx(0.15, abs=0.03) and fit.gain == pytest.approx(0.7, abs=0.03)
    assert fit.config.forgetting.long_term_half_life_days == fit.params.loc[LONG, "fitted"]
    # the true curve predicts the held-out events better than the spec's
    assert fit.validation.loc["fitted", "log_loss"] < fit.validation.loc["spec", "log_loss"]


def test_a_strong_prior_keeps_the_defaults_and_a_weak_one_lets_the_data_speak():
    ev = simulate_events(300, cfg=CFG, theta=TRUTH, base=0.15, gain=0.7, seed=4)
    strong = fit_forgetting(ev, cfg=CFG, prior_sd=0.01, bootstrap=0)
    weak = fit_forgetting(ev, cfg=CFG, prior_sd=10.0, bootstrap=0)
    assert strong.theta[SHORT] == pytest.approx(7.0, rel=0.02)
    assert strong.theta[LONG] == pytest.approx(90.0, rel=0.02)
    assert abs(math.log(weak.theta[SHORT] / 7.0)) > 0.2     # moved toward 12


def test_a_layer_without_events_keeps_its_half_life():
    ev = simulate_events(2000, cfg=CFG, theta=TRUTH, base=0.15, gain=0.7, long_share=0.0,
                         seed=5)
    fit = fit_forgetting(ev, cfg=CFG, bootstrap=0)
    assert list(fit.params.index) == [SHORT]
    assert fit.config.forgetting.long_term_half_life_days == 90.0
    with pytest.raises(InvalidInput, match="fit"):
        fit_forgetting(ev, cfg=CFG, fit=["forgetting.decay_lambda"], bootstrap=0)


def test_the_bootstrap_interval_holds_the_estimate_and_is_reproducible():
    ev = simulate_events(1500, cfg=CFG, theta=TRUTH, base=0.15, gain=0.7, seed=6)
    a = fit_forgetting(ev, cfg=CFG, prior_sd=10.0, bootstrap=20, seed=3)
    b = fit_forgetting(ev, cfg=CFG, prior_sd=10.0, bootstrap=20, seed=3)
    pd.testing.assert_frame_equal(a.params, b.params)
    assert ((a.params["low"] <= a.params["fitted"] * 1.001)
            & (a.params["fitted"] <= a.params["high"] * 1.001)).all()


def test_time_split_holds_out_the_last_moments_whole():
    ev = pd.DataFrame({"asked_at": [1.0] * 5 + [2.0] * 3 + [3.0] * 2, "key": range(10)})
    # shares of the tail from each moment: 2: 5/10, 3: 2/10; 0.3 is closest to 0.2 -> moment 3
    assert time_split(ev, test_fraction=0.3).tolist() == [False] * 8 + [True] * 2
    assert time_split(ev, test_fraction=0.45).tolist() == [False] * 5 + [True] * 5
    with pytest.raises(InvalidInput, match="two moments"):
        time_split(ev.assign(asked_at=1.0))
    with pytest.raises(InvalidInput, match="test_fraction"):
        time_split(ev, test_fraction=1.0)


def test_validation_by_its_formulas():
    ev = simulate_events(2000, cfg=CFG, theta=TRUTH, base=0.2, gain=0.6, seed=7)
    fit = fit_forgetting(ev, cfg=CFG, bootstrap=0)
    held = fit.events[fit.events["test"]]
    y, p = held["y"].to_numpy(), held["p_fitted"].to_numpy()
    assert fit.validation.loc["fitted", "log_loss"] == pytest.approx(
        -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    assert fit.validation.loc["fitted", "auc"] == pytest.approx(skm.roc_auc_score(y, p))
    bins = pd.cut(held["age_days"], list(AGE_BINS), right=False)
    g = pd.DataFrame({"y": y, "p": p, "b": bins}).groupby("b", observed=True)
    rmse = math.sqrt(((g["y"].mean() - g["p"].mean()) ** 2 * g.size()).sum() / len(y))
    assert fit.validation.loc["fitted", "rmse_bins"] == pytest.approx(rmse)
    assert fit.validation.loc["spec", "n"] == len(held) == fit.settings["test"]
    # conversation c asks on day c: the last moments are held out, the rest fit
    train = fit.events[~fit.events["test"]]
    assert fit.settings["conversations"] == train["conversation_id"].nunique() < 10
    assert train["asked_at"].max() < held["asked_at"].min()
    # the predictions are base + gain * memlab's retention of each event's memory
    r = fg.retention(held["layer"], held["age_days"], held["importance"], held["emotion"],
                     held["references"], np.zeros(len(held), bool),
                     CFG.replace(**fit.theta))
    np.testing.assert_allclose(p, fit.base + fit.gain * r)


def test_conversation_weighting_gives_each_conversation_the_same_weight():
    ev = simulate_events(1000, cfg=CFG, theta=TRUTH, base=0.2, gain=0.6, seed=8)
    fit = fit_forgetting(ev, cfg=CFG, weighting="conversation", bootstrap=0)
    per_conv = fit.events.groupby("conversation_id")["weight"].sum()
    np.testing.assert_allclose(per_conv, per_conv.iloc[0])
    assert fit.events["weight"].mean() == pytest.approx(1.0)
    with pytest.raises(InvalidInput, match="weighting"):
        fit_forgetting(ev, cfg=CFG, weighting="memory", bootstrap=0)


def test_predict_is_base_plus_gain_times_retention():
    ev = pd.DataFrame({"layer": [1, 2, 0], "age_days": [87.75, 6.825, 1000.0],
                       "importance": [0.5, 0.5, 0.0], "emotion": [0.0] * 3,
                       "references": [0.0] * 3})
    # the effective half-lives at importance 0.5: R = 1/2; permanent: R = 1
    np.testing.assert_allclose(predict(ev, CFG, {}, base=0.1, gain=0.8), [0.5, 0.5, 0.9])


def test_events_from_a_benchmarks_per_query_frame(tiny_bench_folder, hashing_cfg,
                                                  counting_embedder):
    from memlab.bench.datasets import registry

    out = run_bench(dataset=str(tiny_bench_folder), presets=[("rev", hashing_cfg)],
                    progress=False, embedder=counting_embedder)
    ds = registry.load(str(tiny_bench_folder))
    ev = events_of(out.results[0].per_query, ds, metric="recall_any@1")
    # u1::q2's gold is not written when asked: no event
    assert ev["key"].tolist() == ["u1::q1", "u1::q3", "u2::q1"]
    np.testing.assert_allclose(ev["age_days"], [9.0, 7.0, 9.0])
    assert ev["layer"].tolist() == [2, 2, 2] and ev.attrs["dropped"] == 1
    assert set(ev["y"]) <= {0.0, 1.0}
    pq = out.results[0].per_query.assign(frac=[0.5, 0.0, 1.0, 1.0])
    with pytest.raises(InvalidInput, match="0 or 1"):
        events_of(pq, ds, metric="frac")
    with pytest.raises(InvalidInput, match="gold_age_days"):
        events_of(pq.drop(columns="gold_age_days"), ds)


class FakeFit:
    """What held_out_comparison reads of a ForgettingFit: the held-out keys and the config."""

    def __init__(self, keys, config):
        self.test_keys, self.config = keys, config


def test_held_out_comparison_is_a_paired_test_on_the_held_out_questions(
        tiny_bench, hashing_cfg, counting_embedder):
    from memlab.tune.evaluate import per_query

    rep = replay_cached(tiny_bench, hashing_cfg, embedder=counting_embedder, progress=False)
    # a one-hour short-term half-life: every gold (7-9 days old) is forgotten
    fitted = hashing_cfg.replace(**{SHORT: 0.04})
    keys = ["u1::q1", "u1::q3", "u2::q1"]
    got = held_out_comparison(rep, tiny_bench, FakeFit(keys, fitted), cfg=hashing_cfg,
                              metrics=["recall@1"])
    assert got.attrs["questions"] == 3 and got.attrs["baseline"] == "spec"
    want = per_query(rep, fitted).loc[keys, "recall@1"].mean() \
        - per_query(rep, hashing_cfg).loc[keys, "recall@1"].mean()
    assert got.loc[("fitted", "recall@1"), "diff"] == pytest.approx(want)

"""memlab.bench.significance: the paired randomisation (and bootstrap) test against ranx's Fisher
randomisation test, exact p-values enumerated by hand, the edge cases and the errors; and the
test wired into ``memlab bench --compare`` (table, JSON, MLflow)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memlab.bench.significance as S
from memlab.bench import metrics as M
from memlab.bench.significance import compare_presets, paired_p_values, paired_test
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput


def exact_p(d) -> float:
    """The exact two-sided permutation p-value, by enumerating every sign vector in Python."""
    d = np.asarray(d, dtype=float)
    obs = abs(d.sum())
    hits = sum(abs(np.dot(signs, d)) >= obs - 1e-12
               for signs in itertools.product((1.0, -1.0), repeat=len(d)))
    return hits / 2 ** len(d)


def mc_tolerance(p: float, resamples: int, sides: int = 1) -> float:
    """Four standard deviations of a Monte-Carlo p-value (``sides`` independent estimates), plus
    the 1/(N+1) of memlab's convention."""
    return 4 * math.sqrt(sides * max(p * (1 - p), 1e-4) / resamples) + 2 / resamples


# ----------------------------------------------------------------------------- against ranx

def synthetic_rankings(seed: int, n: int, p_top: float, pool: int = 15) -> dict[str, list[str]]:
    """One gold item per question, ranked first with probability ``p_top``, else at a random
    rank 2..pool among distractors."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n):
        pos = 1 if rng.random() < p_top else int(rng.integers(2, pool + 1))
        ranking = [f"x{j}" for j in range(1, pool)]
        ranking.insert(pos - 1, "gold")
        out[f"q{i}"] = ranking
    return out


def test_p_values_agree_with_ranx_fisher_randomisation_test():
    """ranx.compare(stat_test="fisher") permutes each question's two scores (the same as
    flipping the sign of their difference) and reports #{|diff*| >= |diff|} / N; memlab adds
    one to both counts (Phipson & Smyth). Same statistic, same two-sided rule: the p-values
    agree within the Monte-Carlo error of the two estimates."""
    ranx = pytest.importorskip("ranx")
    n, resamples = 80, 20_000
    qrels = {f"q{i}": ["gold"] for i in range(n)}
    a = synthetic_rankings(1, n, 0.40)
    b = synthetic_rankings(2, n, 0.52)
    metrics = ["ndcg@10", "mrr", "recall@3"]
    frames = {"a": M.evaluate(a, qrels, metrics=metrics), "b": M.evaluate(b, qrels, metrics=metrics)}
    ours = compare_presets(frames, resamples=resamples, seed=3)

    def run(rankings, name):
        return ranx.Run({q: {item: float(len(r) - i) for i, item in enumerate(r)}
                         for q, r in rankings.items()}, name=name)

    report = ranx.compare(ranx.Qrels({q: {g[0]: 1} for q, g in qrels.items()}),
                          [run(a, "a"), run(b, "b")], metrics=["ndcg@10", "mrr@15", "recall@3"],
                          stat_test="fisher", n_permutations=resamples, random_seed=11)
    theirs = report.comparisons[("a", "b")]
    for mine, their_name in zip(metrics, ["ndcg@10", "mrr@15", "recall@3"]):
        p_ranx = theirs[their_name]["p_value"]
        p_ours = ours.loc[("b", mine), "p"]
        assert 0.001 < p_ranx < 0.5, (mine, p_ranx)        # a case where the tail matters
        assert abs(p_ours - p_ranx) <= mc_tolerance(p_ranx, resamples, sides=2), (mine, p_ours,
                                                                                   p_ranx)
        assert ours.loc[("b", mine), "diff"] == pytest.approx(
            report.results["b"][their_name] - report.results["a"][their_name], abs=1e-9)


# ----------------------------------------------------------------------------- exact values

def test_exact_p_worked_out_by_hand():
    """d = (1, 2, 3): the 8 sign vectors give sums +-6, +-4, +-2, 0, 0; |sum| >= 6 for 2 of 8."""
    t = paired_test([0, 0, 0], [1, 2, 3])
    assert t.exact and t.n == 3
    assert t.p == 0.25 and t.diff == 2.0 and t.mean_a == 0.0 and t.mean_b == 2.0
    # the sign does not matter (two-sided): b worse than a by the same amounts
    assert paired_test([1, 2, 3], [0, 0, 0]).p == 0.25


@pytest.mark.parametrize("n", [5, 9, 12])
def test_exact_enumeration_equals_brute_force(n):
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.15, 0.5, n), 2)      # ties among |d| happen: the tolerance matters
    assert S.is_exact(n, 10_000)
    assert paired_p_values(d) == pytest.approx(exact_p(d), abs=1e-12)


def test_monte_carlo_p_converges_to_the_exact_one():
    """14 questions: 2^14 = 16384 sign vectors > 10,000 resamples, so memlab samples; the
    sampled p lies within the Monte-Carlo error of the enumerated one."""
    rng = np.random.default_rng(7)
    d = np.round(rng.normal(0.12, 0.4, 14), 2)
    truth = exact_p(d)
    assert 0.02 < truth < 0.5
    assert not S.is_exact(14, 10_000)
    for seed in range(3):
        assert abs(paired_p_values(d, seed=seed) - truth) <= mc_tolerance(truth, 10_000)


def test_under_the_null_p_values_are_uniform():
    """400 null comparisons (symmetric differences) of 50 questions: about 5% of p-values fall
    under 0.05 and about half under 0.5 (binomial bounds, 4 sd)."""
    rng = np.random.default_rng(0)
    d = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(50, 400))
    for method in S.METHODS:
        p = paired_p_values(d, resamples=2000, method=method)
        assert abs((p < 0.05).mean() - 0.05) <= 4 * math.sqrt(0.05 * 0.95 / 400) + 0.01, method
        assert abs((p < 0.5).mean() - 0.5) <= 4 * math.sqrt(0.25 / 400), method


# ----------------------------------------------------------------------------- edge cases

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 1.0]),
                          st.sampled_from([0.0, 0.25, 1 / 3, 0.5, 1.0])), min_size=1, max_size=8),
       st.sampled_from(S.METHODS))
def test_p_is_a_symmetric_probability_and_exact_for_few_questions(pairs, method):
    """Any scores: 0 < p <= 1, the same p with the presets swapped (two-sided), and for up to 8
    questions the enumerated p of the brute force."""
    a, b = np.array(pairs).T
    p = paired_test(a, b, method=method).p
    assert 0 < p <= 1
    assert paired_test(b, a, method=method).p == p
    if method == "randomisation":
        assert p == pytest.approx(exact_p(b - a), abs=1e-12)


@pytest.mark.parametrize("n", [1, 5, 200])
@pytest.mark.parametrize("method", S.METHODS)
def test_identical_presets_give_p_one(n, method):
    scores = np.linspace(0, 1, n)
    t = paired_test(scores, scores, method=method)
    assert t.p == 1.0 and t.diff == 0.0


def test_a_single_question_never_rejects():
    """One question: the two sign vectors give +d and -d, equally extreme: p = 1, whatever d."""
    t = paired_test([0.0], [1.0])
    assert t.exact and t.p == 1.0 and t.diff == 1.0


@pytest.mark.parametrize("method", S.METHODS)
def test_a_clearly_better_or_worse_preset_on_200_questions(method):
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 1, 200)
    b = np.clip(a + rng.normal(0.1, 0.2, 200), 0, 1)
    assert paired_test(a, b, method=method).p < 0.01
    assert paired_test(b, a, method=method).p < 0.01          # two-sided: worse is just as clear
    # and a small noisy difference is not significant
    c = a + rng.normal(0.0, 0.2, 200)
    assert paired_test(a, c, method=method).p > 0.05


def test_a_sampled_p_value_is_never_zero():
    """Phipson & Smyth: the observed sign vector counts as one of the resamples, so the smallest
    Monte-Carlo p is 1/(resamples + 1), not 0 (ranx would report 0 here)."""
    d = np.ones(40)                                 # 2^40 sign vectors: sampled
    assert paired_p_values(d, resamples=99) == 0.01
    assert paired_p_values(d, resamples=99, method="bootstrap") == 0.01


def test_seed_gives_the_same_p_values_and_chunking_does_not_matter(monkeypatch):
    rng = np.random.default_rng(9)
    d = rng.normal(0.03, 0.3, (300, 4))
    first = paired_p_values(d, seed=4)
    assert np.array_equal(first, paired_p_values(d, seed=4))
    assert not np.array_equal(first, paired_p_values(d, seed=5))
    # columns tested together or one by one: the same sign vectors, the same p-values
    assert np.array_equal(first, [paired_p_values(d[:, j], seed=4) for j in range(4)])
    monkeypatch.setattr(S, "CHUNK_ELEMENTS", 1000)          # three rows per chunk
    assert np.array_equal(first, paired_p_values(d, seed=4))
    boot = paired_p_values(d, seed=4, method="bootstrap")
    monkeypatch.setattr(S, "CHUNK_ELEMENTS", 1 << 22)
    assert np.array_equal(boot, paired_p_values(d, seed=4, method="bootstrap"))


# ----------------------------------------------------------------------------- frames

def frames_of(n: int = 30, seed: int = 0) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    keys = [f"c{i % 3}::q{i}" for i in range(n)]
    base = rng.uniform(0, 1, (n, 2))
    return {name: pd.DataFrame(np.clip(base + shift + rng.normal(0, 0.05, (n, 2)), 0, 1),
                               index=keys, columns=["ndcg@10", "mrr"]).assign(category="x")
            for name, shift in (("reverie", 0.0), ("cosine", 0.2), ("bm25", 0.0))}


def test_compare_presets_is_a_long_frame_against_the_first():
    frames = frames_of()
    frames["bm25"] = frames["bm25"].iloc[::-1]                 # another order: aligned by key
    out = compare_presets(frames, resamples=5000, seed=1)
    assert list(out.index.names) == ["preset", "metric"]
    assert list(out.index) == [(p, m) for p in ("reverie", "cosine", "bm25")
                               for m in ("ndcg@10", "mrr")]    # category: not numeric, left out
    assert list(out.columns) == ["mean", "diff", "p"]
    assert out.loc["reverie", "diff"].tolist() == [0.0, 0.0]
    assert out.loc["reverie", "p"].isna().all()
    assert out.attrs == {"baseline": "reverie", "method": "randomisation", "resamples": 5000,
                         "seed": 1, "questions": 30, "exact": False}
    for name in ("cosine", "bm25"):
        keys = frames["reverie"].index                         # the baseline's order
        t = paired_test(frames["reverie"][["ndcg@10", "mrr"]],
                        frames[name].loc[keys, ["ndcg@10", "mrr"]], resamples=5000, seed=1)
        assert out.loc[name, "mean"].tolist() == pytest.approx(list(t.mean_b))
        assert out.loc[name, "diff"].tolist() == pytest.approx(list(t.diff))
        assert out.loc[name, "p"].tolist() == pytest.approx(list(t.p))
    assert out.loc[("cosine", "ndcg@10"), "p"] < 0.01 < out.loc[("bm25", "ndcg@10"), "p"]
    assert out["p"].unstack("metric").shape == (3, 2)


def test_compare_with_config_reads_the_bench_fields():
    frames = {k: v.iloc[:5] for k, v in frames_of().items()}   # 2^5 = 32 sign vectors
    cfg = MemlabConfig().replace(**{"bench.significance_resamples": 31,
                                    "bench.significance_seed": 2})
    assert not S.compare_with_config(frames, cfg).attrs["exact"]
    out = S.compare_with_config(frames, cfg.replace(**{"bench.significance_resamples": 32}))
    assert out.attrs["exact"] and out.attrs["seed"] == 2
    boot = S.compare_with_config(frames, cfg.replace(**{"bench.significance_test": "bootstrap"}))
    assert boot.attrs["method"] == "bootstrap" and not boot.attrs["exact"]
    with pytest.raises(ConfigError, match="significance_resamples"):
        cfg.replace(**{"bench.significance_resamples": 0})
    with pytest.raises(ConfigError, match="significance_test"):
        cfg.replace(**{"bench.significance_test": "t-test"})


# ----------------------------------------------------------------------------- errors

def test_questions_missing_from_one_side_are_named():
    frames = frames_of()
    frames["cosine"] = frames["cosine"].drop(index=["c1::q1", "c2::q2"])
    with pytest.raises(InvalidInput, match=r"frames\['cosine'\].*2 question\(s\) of the "
                       r"baseline 'reverie' missing from 'cosine': c1::q1, c2::q2"):
        compare_presets(frames)
    frames = frames_of()
    frames["bm25"] = pd.concat([frames["bm25"], frames["bm25"].iloc[:1].rename(
        index={"c0::q0": "c9::extra"})])
    with pytest.raises(InvalidInput, match=r"1 question\(s\) of 'bm25' not in the baseline "
                       r"'reverie': c9::extra"):
        compare_presets(frames)


def test_duplicated_questions_nan_and_missing_metrics_are_errors():
    frames = frames_of()
    frames["cosine"] = pd.concat([frames["cosine"], frames["cosine"].iloc[:1]])
    with pytest.raises(InvalidInput, match=r"duplicated question key\(s\) c0::q0"):
        compare_presets(frames)
    frames = frames_of()
    frames["bm25"].loc["c2::q5", "mrr"] = np.nan
    with pytest.raises(InvalidInput, match=r"frames\['bm25'\]\['mrr'\]: NaN for 1 question\(s\) "
                       r"\(c2::q5\)"):
        compare_presets(frames)
    with pytest.raises(InvalidInput, match="NaN"):
        paired_test([0.1, np.nan], [0.2, 0.3])
    with pytest.raises(InvalidInput, match=r"frames\['reverie'\]: has no column recall@7"):
        compare_presets(frames_of(), metrics=["mrr", "recall@7"])
    with pytest.raises(InvalidInput, match="not numeric: category"):
        compare_presets(frames_of(), metrics=["category"])
    with pytest.raises(InvalidInput, match="at least one preset"):
        compare_presets({})
    with pytest.raises(InvalidInput, match="no question"):
        compare_presets({k: v.iloc[:0] for k, v in frames_of().items()})
    with pytest.raises(InvalidInput, match="a's shape"):
        paired_test([1, 2, 3], [1, 2])
    with pytest.raises(InvalidInput, match="method"):
        paired_test([1, 2], [1, 3], method="wilcoxon")
    with pytest.raises(InvalidInput, match="resamples"):
        paired_test([1, 2], [1, 3], resamples=0)


def test_a_single_preset_gets_no_p_value():
    out = compare_presets({"solo": frames_of()["reverie"]})
    assert out["p"].isna().all() and (out["diff"] == 0).all()


def test_format_p():
    assert [S.format_p(p) for p in (float("nan"), 0.0001, 0.001, 0.0456, 1.0)] == \
        ["-", "<0.001", "0.001", "0.046", "1.000"]

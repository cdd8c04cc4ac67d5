"""memlab.bench.metrics: hand-computed cases, ranx equality, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from memlab.bench.metrics import aggregate, evaluate, metric_columns, to_sessions
from memlab.errors import InvalidInput


def _row(df: pd.DataFrame, qid: str) -> dict[str, float]:
    return df.loc[qid].to_dict()


def test_hand_computed_single_query() -> None:
    # gold {a, c, e}; ranking a b c d: hits at ranks 1 and 3; e never ranked.
    df = evaluate({"q": ["a", "b", "c", "d"]}, {"q": {"a", "c", "e"}}, ks=(1, 3, 5))
    r = _row(df, "q")
    assert r["recall@1"] == pytest.approx(1 / 3)
    assert r["recall@3"] == pytest.approx(2 / 3)
    assert r["recall@5"] == pytest.approx(2 / 3)  # ranking shorter than k: no more hits
    assert r["recall_any@1"] == 1.0
    assert r["recall_all@5"] == 0.0
    assert r["precision@3"] == pytest.approx(2 / 3)
    assert r["precision@5"] == pytest.approx(2 / 5)  # divided by k, not by the 4 ranked
    # DCG@3 = 1/log2(2) + 1/log2(4); IDCG@3 over min(3, 3) golds = 1 + 1/log2(3) + 1/log2(4)
    assert r["ndcg@3"] == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3) + 0.5))
    # IDCG@1 = 1 (one slot), DCG@1 = 1
    assert r["ndcg@1"] == pytest.approx(1.0)
    assert r["mrr"] == 1.0


def test_hand_computed_late_and_missing_hits() -> None:
    rankings = {"late": ["x", "y", "g"], "none": ["x"], "empty": [], "all": ["g2", "g1"]}
    qrels = {"late": ["g"], "none": ["g"], "empty": ["g"], "all": ["g1", "g2"]}
    df = evaluate(rankings, qrels, ks=(2, 3), metrics=["recall", "recall_all", "ndcg", "mrr",
                                                        "mrr@2"])
    assert list(df.index) == ["late", "none", "empty", "all"]
    late = _row(df, "late")
    assert late["recall@2"] == 0.0 and late["recall@3"] == 1.0
    assert late["mrr"] == pytest.approx(1 / 3)
    assert late["mrr@2"] == 0.0  # first gold at rank 3 > 2
    assert late["ndcg@3"] == pytest.approx((1 / math.log2(4)) / 1.0)  # IDCG: one gold at rank 1
    for qid in ("none", "empty"):
        assert _row(df, qid) == {c: 0.0 for c in df.columns}
    full = _row(df, "all")
    assert full["recall_all@2"] == 1.0 and full["ndcg@2"] == pytest.approx(1.0)
    assert full["mrr"] == 1.0


def test_duplicate_gold_ids_count_once() -> None:
    df = evaluate({"q": ["a", "z"]}, {"q": ["a", "a", "b"]}, ks=(2,), metrics=["recall"])
    assert df.loc["q", "recall@2"] == pytest.approx(1 / 2)  # gold is {a, b}


def test_metric_specs_expand_and_dedupe() -> None:
    cols = [c for c, _, _ in metric_columns(ks=(1, 5), metrics=["recall", "recall@5", "ndcg@7",
                                                                "mrr"])]
    assert cols == ["recall@1", "recall@5", "ndcg@7", "mrr"]


def test_matches_ranx_on_random_queries() -> None:
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(7)
    pool = [f"d{i}" for i in range(40)]
    rankings, qrels = {}, {}
    for i in range(200):
        qid = f"q{i:03d}"
        n_ranked = int(rng.integers(0, 31))
        rankings[qid] = list(rng.choice(pool, size=n_ranked, replace=False))
        qrels[qid] = list(rng.choice(pool, size=int(rng.integers(1, 6)), replace=False))
    ks = (1, 3, 5, 10, 20)
    ours = evaluate(rankings, qrels, ks=ks, metrics=["recall", "recall_any", "precision", "ndcg",
                                                     "mrr", "mrr@5"])

    # ranx's own array form (one row per query, columns [doc number, score|relevance]), sorted
    # best first as its Run conversion would. Run/Qrels.from_dict build numba typed dicts that are
    # compiled anew in every process (~15 s); the array path is cached by numba after one run.
    # Short rankings are padded with doc -1 and gold sets with relevance-0 rows, which ranx drops
    # (rel < rel_lvl) or never matches, so the padding changes no metric.
    number = {d: float(i) for i, d in enumerate(pool)}
    order = sorted(rankings)
    run = np.zeros((len(order), 30, 2))
    run[:, :, 0] = -1.0
    run[:, :, 1] = np.arange(30, 0, -1)
    gold = np.zeros((len(order), 5, 2))
    gold[:, :, 0] = -2.0
    for row, qid in enumerate(order):
        run[row, : len(rankings[qid]), 0] = [number[d] for d in rankings[qid]]
        gold[row, : len(qrels[qid]), 0] = [number[d] for d in qrels[qid]]
        gold[row, : len(qrels[qid]), 1] = 1.0
    names = {f"recall@{k}": f"recall@{k}" for k in ks}
    names |= {f"recall_any@{k}": f"hit_rate@{k}" for k in ks}
    names |= {f"precision@{k}": f"precision@{k}" for k in ks}
    names |= {f"ndcg@{k}": f"ndcg@{k}" for k in ks}
    names |= {"mrr": "mrr", "mrr@5": "mrr@5"}
    theirs = ranx.evaluate(gold, run, list(names.values()), return_mean=False)
    for ours_name, ranx_name in names.items():
        np.testing.assert_allclose(ours.loc[order, ours_name].to_numpy(), theirs[ranx_name],
                                   rtol=0, atol=1e-9, err_msg=ours_name)
    # the random set exercises both hits and misses, or the comparison proves little
    assert 0.0 < ours["recall@5"].mean() < 1.0


def test_large_input_is_vectorised_shape() -> None:
    # 2,000 queries x 100 items: exercises the flattened path (timing lives in benchmarks/).
    rng = np.random.default_rng(1)
    rankings = {f"q{i}": [f"d{j}" for j in rng.permutation(500)[:100]] for i in range(2000)}
    qrels = {q: [r[0]] for q, r in rankings.items()}  # gold is always ranked first
    df = evaluate(rankings, qrels, ks=(1, 10))
    assert df.shape == (2000, 6 * 2 - 1)  # 5 families x 2 ks + plain mrr
    assert (df["recall@1"] == 1.0).all() and (df["mrr"] == 1.0).all()
    assert (df["precision@10"] == 0.1).all()


def test_aggregate_overall_and_per_category() -> None:
    df = evaluate({"a": ["g"], "b": ["x"], "c": ["g"]}, {"a": ["g"], "b": ["g"], "c": ["g"]},
                  ks=(1,), metrics=["recall"])
    cats = pd.Series({"a": "single", "b": "single", "c": 3})
    agg = aggregate(df, by=cats)
    assert list(agg.index) == ["all", "3", "single"]
    assert agg.loc["all", "recall@1"] == pytest.approx(2 / 3)
    assert agg.loc["single", "recall@1"] == pytest.approx(1 / 2)
    assert agg.loc["3", "recall@1"] == 1.0
    assert agg["n"].tolist() == [3, 1, 2]
    assert aggregate(df)["n"].tolist() == [3]


def test_aggregate_rejects_uncovered_queries_and_reserved_label() -> None:
    df = evaluate({"a": ["g"], "b": ["g"]}, {"a": ["g"], "b": ["g"]}, ks=(1,))
    with pytest.raises(InvalidInput, match="'b'"):
        aggregate(df, by=pd.Series({"a": "x"}))
    with pytest.raises(InvalidInput, match="'all'"):
        aggregate(df, by=pd.Series({"a": "all", "b": "x"}))


def test_session_level_keeps_first_rank() -> None:
    item_to_session = {"t1": "s1", "t2": "s1", "t3": "s2", "t4": "s3"}
    ranked = to_sessions({"q": ["t2", "t3", "t1", "t4"]}, item_to_session)
    assert ranked == {"q": ["s1", "s2", "s3"]}
    gold = to_sessions({"q": {"t4", "t1"}}, item_to_session)
    assert sorted(gold["q"]) == ["s1", "s3"]
    df = evaluate(ranked, gold, ks=(2,), metrics=["recall", "recall_all"])
    assert df.loc["q", "recall@2"] == pytest.approx(1 / 2)  # s1 at rank 1, s3 at rank 3
    assert df.loc["q", "recall_all@2"] == 0.0


def test_to_sessions_names_unknown_item() -> None:
    with pytest.raises(InvalidInput, match="'t9'") as err:
        to_sessions({"q7": ["t9"]}, {"t1": "s1"})
    assert "q7" in str(err.value)


@pytest.mark.parametrize(
    ("rankings", "qrels", "needle"),
    [
        ({"q1": ["a"], "stray": ["a"]}, {"q1": ["a"]}, "stray"),  # ranked, no qrels entry
        ({"q1": ["a"], "q2": []}, {"q1": ["a"], "q2": []}, "q2"),  # empty gold set
        ({"q1": ["a", "b", "a"]}, {"q1": ["a"]}, "q1"),  # repeated item
        ({"q1": ["a"]}, {"q1": "a"}, "q1"),  # a string, not a collection
        ({"q1": {"a", "b"}}, {"q1": ["a"]}, "q1"),  # unordered ranking
        ({"q1": ["a"]}, {"q1": ["a"], "q3": ["b"]}, "q3"),  # gold but no ranking
    ],
)
def test_bad_input_names_the_query(rankings, qrels, needle) -> None:
    with pytest.raises(InvalidInput, match=needle):
        evaluate(rankings, qrels, ks=(1,))


def test_missing_empty_scores_unranked_queries_zero() -> None:
    df = evaluate({"q1": ["a"]}, {"q1": ["a"], "q3": ["b"]}, ks=(1,), metrics=["recall"],
                  missing="empty")
    assert df["recall@1"].to_dict() == {"q1": 1.0, "q3": 0.0}


@pytest.mark.parametrize(("ks", "metrics"), [((), None), ((0,), None), ((1,), ["bogus"]),
                                             ((1,), ["recall@x"]), ((1,), ["recall@0"])])
def test_bad_ks_and_metric_names(ks, metrics) -> None:
    with pytest.raises(InvalidInput):
        evaluate({"q": ["a"]}, {"q": ["a"]}, ks=ks, metrics=metrics)


# -- abstention (issue 7, defect 13) ------------------------------------------------------------
def test_abstention_worked_by_hand() -> None:
    """u1, u2 have no gold (unanswerable), a1, a2 have gold. u1 got nothing (abstained), u2 got a
    memory; a1 got one, a2 nothing: abstention 1/2, answered 1/2."""
    from memlab.bench.metrics import abstention

    rankings = {"u1": [], "u2": ["x"], "a1": ["y", "z"], "a2": []}
    qrels = {"u1": [], "u2": [], "a1": ["y"], "a2": ["w"]}
    out = abstention(rankings, qrels)
    assert list(out.index) == ["all"]
    row = out.loc["all"]
    assert row["abstention"] == 0.5 and row["answered"] == 0.5
    assert row["n_unanswerable"] == 2 and row["n_answerable"] == 2
    by = pd.Series({"u1": "zh", "u2": "en", "a1": "zh", "a2": "en"})
    out = abstention(rankings, qrels, by=by)
    assert list(out.index) == ["all", "en", "zh"]
    assert out.loc["zh", "abstention"] == 1.0 and out.loc["zh", "answered"] == 1.0
    assert out.loc["en", "abstention"] == 0.0 and out.loc["en", "answered"] == 0.0
    assert out["n_unanswerable"].dtype.kind == "i"


def test_abstention_without_unanswerable_questions_is_nan_and_bad_input_is_named() -> None:
    from memlab.bench.metrics import abstention

    out = abstention({"a": ["y"]}, {"a": ["y"]})
    assert math.isnan(out.loc["all", "abstention"]) and out.loc["all", "answered"] == 1.0
    assert out.loc["all", "n_unanswerable"] == 0
    with pytest.raises(InvalidInput, match="qrels"):
        abstention({"a": ["y"], "b": []}, {"a": ["y"]})
    with pytest.raises(InvalidInput, match="by"):
        abstention({"a": ["y"]}, {"a": ["y"]}, by=pd.Series({"b": "zh"}))
    with pytest.raises(InvalidInput, match="rankings"):
        abstention({}, {})

"""Learning to rank (issue 21, item 2): memlab.tune.rank builds query groups over one or several
replays, fits a LightGBM lambdarank model with monotone constraints, and the file it writes is
scored by the ``learned`` scorer with the gates as features; memlab.tune.heldout scores every
question once, by a model that never saw its conversation."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
import skops.io as sio

from fit_synth import CFG, synth_replay
from memlab.bench.replay import ROWS_PER_CONVERSATION, Replayed
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.recall import learned as L
from memlab.recall.features import Features, make_columns
from memlab.recall.score import score
from memlab.tune import heldout as H
from memlab.tune import rank as R
from memlab.tune.evaluate import per_query
from memlab.tune.crossfit import restrict
from memlab.tune.folds import conversation_folds

pytest.importorskip("lightgbm")


def _tiny() -> Replayed:
    """Two questions of one conversation: q0 has rows 0-2 (gold: row 1), q1 rows 3-4 (no
    gold); rows interleaved by qid on purpose."""
    table = make_columns(qid=[0, 1, 0, 1, 0], row=[0, 3, 1, 4, 2],
                         cosine=[0.9, 0.1, 0.5, 0.2, 0.05], lexical=[0.0, 0.0, 0.5, 0.0, 0.0])
    feats = Features(columns=table, terms={r: frozenset({f"t{r}"}) for r in range(5)})
    questions = pd.DataFrame([{"query_id": "a", "conversation_id": "c", "category": "x",
                               "evidence": ["i1"]},
                              {"query_id": "b", "conversation_id": "c", "category": "x",
                               "evidence": []}])
    return Replayed(feats, questions, {r: f"i{r}" for r in range(5)}, {r: "s" for r in range(5)})


ABS = MemlabConfig().replace(**{"recall.floor_mode": "absolute", "recall.relevance_floor": 0.3,
                                "recall.lexical_floor": 1.0})


def test_rows_are_grouped_by_question_and_useless_groups_left_out():
    rows = R.build_rows([R.Part("d", _tiny(), ABS)], kind="lambdarank")
    # q1 has no gold: left out; q0's three rows, in table order within the question
    assert rows.keys == ["d::c::a"] and rows.sizes.tolist() == [3]
    assert rows.y.tolist() == [False, True, False]
    cos = rows.X[:, rows.features.index("cosine")]
    np.testing.assert_allclose(cos, [0.9, 0.5, 0.05], rtol=1e-6)
    assert rows.counts["groups"] == 2 and rows.counts["groups_used"] == 1
    assert set(L.GATE_FEATURES) <= set(rows.features)
    # tree_distance is NaN on every row: not a feature
    assert "tree_distance" in rows.counts["unknown_columns"]


def test_hgb_rows_take_the_floor_as_a_cut_and_no_gate_features():
    rows = R.build_rows([R.Part("d", _tiny(), ABS)], kind="hgb")
    # floor 0.3: rows with cosine 0.9 and 0.5 pass (0.05 does not); q1 (0.1, 0.2) passes nothing
    assert rows.sizes.tolist() == [2] and rows.y.tolist() == [False, True]
    assert not set(L.GATE_FEATURES) & set(rows.features)


def test_two_parts_never_share_a_group():
    rep = _tiny()
    rows = R.build_rows([R.Part("x", rep, ABS), R.Part("y", rep, ABS)])
    assert rows.keys == ["x::c::a", "y::c::a"] and rows.sizes.tolist() == [3, 3]


def test_drop_takes_groups_and_columns_and_names_what_it_does_not_know():
    feats = list(L.FEATURES) + list(L.GATE_FEATURES)
    assert R.resolve_drop(["lexical"], feats) == {"lexical", "bm25", "lexical_rank"}
    assert R.resolve_drop(["gates", "text_len"], feats) == {*L.GATE_FEATURES, "text_len"}
    assert R.groups_of(["cosine", "brand_new_column"])["other"] == ["brand_new_column"]
    with pytest.raises(InvalidInput, match="drop.*nope"):
        R.resolve_drop(["nope"], feats)
    rows = R.build_rows([R.Part("d", _tiny(), ABS)], drop=("dense",))
    assert "cosine" not in rows.features and "dense_rank" not in rows.features
    # not_portable: the raw cosine and the lexical group go, the dense rank and z-scores stay
    gone = R.resolve_drop(["not_portable"], feats)
    assert {"cosine", "lexical", "bm25", "lexical_rank", "importance", "age_days", "text_len",
            "q_bg_mean", "tree_distance", "chunk_max"} <= gone
    assert not gone & {"dense_rank", "dense_z", "bm25_z", "fused_z", "sess_best", "speaker_named",
                       *L.GATE_FEATURES}


def test_gate_features_by_hand():
    table = make_columns(cosine=[0.9, 0.2, np.nan], q_bg_mean=[0.5, 0.5, 0.5],
                         q_bg_std=[0.1, 0.1, 0.1], m_bg_mean=[0.6, 0.3, 0.6],
                         m_bg_std=[0.05, 0.1, 0.05])
    g = L.gate_features(table, ABS)
    np.testing.assert_allclose(g["floor_margin"][:2], [0.9 - 0.3, 0.2 - 0.3], rtol=1e-6)
    assert np.isnan(g["floor_margin"][2])
    z = MemlabConfig().replace(**{"recall.floor_mode": "zscore", "recall.relevance_z": 2.0})
    gz = L.gate_features(table, z)
    # row 0: z_query (0.9-0.5)/0.1 = 4, z_memory (0.9-0.6)/0.05 = 6: min 4, margin 2
    # row 1: z_query -3, z_memory -1: min -3, margin -5
    np.testing.assert_allclose(gz["floor_margin"][:2], [2.0, -5.0], rtol=1e-5)
    ref = score(table, ABS, scorer="reverie")
    np.testing.assert_array_equal(g["retention"], ref.components["retention"])
    np.testing.assert_array_equal(g["eligible"], ref.eligible.astype(float))


def test_route_features_by_hand():
    # two questions; q0: row 0 dense 1 / lexical 3, row 1 dense 2 only, row 2 neither route,
    # row 4 lexical 1 only; q1: row 3 dense 1 / lexical 1
    table = make_columns(qid=[0, 0, 0, 1, 0], dense_rank=[1, 2, 0, 1, 0],
                         lexical_rank=[3, 0, 0, 1, 1])
    cfg = MemlabConfig().replace(**{"baselines.rrf_k": 60})
    r = L.route_features(table, cfg)
    want = [1 / 61 + 1 / 63, 1 / 62, 0.0, 2 / 61, 1 / 61]
    np.testing.assert_allclose(r["rrf"], want, rtol=1e-12)
    # within q0: row 0 (1/61 + 1/63), then row 4 (1/61), then row 1 (1/62); row 2 unranked
    # (0); q1's only row is its first
    assert r["rrf_rank"].tolist() == [1.0, 3.0, 0.0, 1.0, 2.0]
    # the hybrid_rrf scorer's score is the same sum
    np.testing.assert_allclose(score(table, cfg, scorer="rrf").score, want, rtol=1e-12)
    # rrf_k moves the terms: k = 1 gives 1/(1 + rank)
    r1 = L.route_features(table, cfg.replace(**{"baselines.rrf_k": 1}))
    np.testing.assert_allclose(r1["rrf"], [1 / 2 + 1 / 4, 1 / 3, 0.0, 1.0, 1 / 2], rtol=1e-12)


def test_base_score_by_hand():
    # -scale * ln(rank); unranked (0, NaN) counts as rank 1,000
    got = L.base_score(np.array([1.0, 2.0, 0.0, np.nan, 10.0]), 2.0)
    np.testing.assert_allclose(got, [0.0, -2 * np.log(2), -2 * np.log(1000),
                                     -2 * np.log(1000), -2 * np.log(10)], rtol=1e-12)


def _holdout_ndcg(rep, cfg, path, kind, test):
    from memlab.tune.crossfit import restrict

    return per_query(restrict(rep, test), H.model_config(cfg, path, kind)).reindex(test)


def test_the_ranker_learns_the_order_and_the_file_scores_it(tmp_path):
    rep = synth_replay({"cosine": 1.0, "lexical": 2.0}, per_conv=60, seed=1)
    base = per_query(rep, CFG)
    fold = conversation_folds(base["conversation_id"], 3, seed=0)[0]
    booster, feats, counts = R.fit_model([R.Part("s", rep, CFG, fold.train)], seed=0)
    assert counts["groups_used"] == len(fold.train) and counts["best_iteration"] >= 1
    path = L.save_model(booster, tmp_path / "r.skops", features=feats, kind="lambdarank",
                        config=CFG.to_flat(), trained=counts)
    # the archive holds LightGBM's text and builtins only
    assert sio.get_untrusted_types(file=path) == []
    m = L.load_model(path)
    assert m.kind == "lambdarank" and m.manifest["config"]["fusion.relevance"] == 0.62
    assert m.manifest["lightgbm"] and m.manifest["features"] == list(feats)
    held = _holdout_ndcg(rep, CFG, path, "lambdarank", fold.test)["ndcg@10"].mean()
    cosine_only = per_query(rep, CFG.replace(**{"fusion.scorer": "cosine"})).reindex(
        fold.test)["ndcg@10"].mean()
    assert held > cosine_only + 0.05
    # the learned scorer's score is the booster's output on the model's columns
    cfg = H.model_config(CFG, path, "lambdarank")
    table = rep.features.columns
    s = score(table, cfg)
    np.testing.assert_allclose(s.score, booster.predict(m.matrix(table, cfg)))
    assert s.relevant.all() and s.eligible.all()
    # fusion.learned_floor: the floor as a cut again (cosine >= 0.5 or lexical >= 1)
    floored = cfg.replace(**{"recall.relevance_floor": 0.5, "recall.lexical_floor": 1.0})
    np.testing.assert_array_equal(score(table, floored.replace(
        **{"fusion.learned_floor": True})).relevant, np.asarray(table["cosine"]) >= 0.5)
    assert score(table, floored).relevant.all()


def _importance_replay(seed=0):
    """Gold prefers LOW importance (the spec says more is better)."""
    rng = np.random.default_rng(seed)
    cols = {k: [] for k in ("qid", "row", "cosine", "importance")}
    questions, row_item = [], {}
    for q in range(200):
        imp = rng.uniform(0, 1, 20)
        gold = int(np.argmin(imp))
        rows = (q % 4) * ROWS_PER_CONVERSATION + q * 100 + np.arange(20)
        row_item.update({int(r): f"i{r}" for r in rows})
        cols["qid"] += [q] * 20
        cols["row"] += rows.tolist()
        cols["cosine"] += rng.uniform(0.3, 0.9, 20).tolist()
        cols["importance"] += imp.tolist()
        questions.append({"query_id": f"q{q}", "conversation_id": f"c{q % 4}",
                          "category": "x", "evidence": [f"i{rows[gold]}"]})
    table = make_columns(**cols)
    feats = Features(columns=table, terms={int(r): frozenset({f"t{r}"}) for r in table["row"]})
    return Replayed(feats, pd.DataFrame(questions), row_item, {r: "s" for r in row_item})


@pytest.mark.parametrize("monotone", [True, False])
def test_monotone_constraints_hold_where_the_spec_says_more_is_better(monotone):
    rep = _importance_replay()
    booster, feats, _ = R.fit_model([R.Part("m", rep, CFG)], monotone=monotone, seed=0)
    assert R.MONOTONE["importance"] == 1
    X = np.tile(np.nanmedian(R.build_rows([R.Part("m", rep, CFG)]).X, axis=0), (11, 1))
    X[:, feats.index("importance")] = np.linspace(0, 1, 11)
    p = booster.predict(X)
    if monotone:   # the data says lower is better; the constraint forbids learning it
        assert (np.diff(p) >= -1e-12).all()
    else:
        assert p[0] > p[-1]


def test_without_lightgbm_the_error_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "lightgbm", None)   # import lightgbm raises ImportError
    with pytest.raises(ConfigError, match=r"memlab\[rank\]"):
        R.fit_model([R.Part("d", _tiny(), ABS)])


def test_an_unknown_kind_in_a_file_is_refused(tmp_path):
    p = tmp_path / "bad.skops"
    p.write_bytes(sio.dumps({"model": "x", "manifest": {"format": L.FORMAT, "kind": "svm",
                                                         "features": ["cosine"],
                                                         "sklearn": L._sklearn_minor()}}))
    with pytest.raises(ConfigError, match="fusion.learned_model.*kind 'svm'"):
        L.load_model(p)
    p2 = tmp_path / "bad2.skops"
    p2.write_bytes(sio.dumps({"model": "not a model", "manifest": {
        "format": L.FORMAT, "kind": "lambdarank", "features": ["cosine"],
        "sklearn": L._sklearn_minor()}}))
    with pytest.raises(ConfigError, match="fusion.learned_model.*LightGBM cannot read"):
        L.load_model(p2)


def _two_devs(per_conv: int) -> dict[str, H.Dev]:
    """Two synthetic datasets (gold by cosine + 2 * lexical), 4 conversations each, 2 folds."""
    devs = {}
    for name, seed in (("a", 1), ("b", 2)):
        rep = synth_replay({"cosine": 1.0, "lexical": 2.0}, conversations=4, per_conv=per_conv,
                           seed=seed)
        base = per_query(rep, CFG)
        devs[name] = H.Dev(rep, CFG, conversation_folds(base["conversation_id"], 2, seed=0),
                           base.index)
    return devs


def test_kfold_scores_each_question_once_and_never_trains_on_it(tmp_path, monkeypatch):
    devs = _two_devs(per_conv=20)
    seen = []
    real = R.fit_model

    def spy(parts, **kw):
        seen.append({p.name: None if p.questions is None else set(p.questions)
                     for p in parts})
        return real(parts, **kw)

    monkeypatch.setattr(H, "fit_model", spy)
    got = H.kfold(devs, H.Spec("lambdarank", joint=True))
    assert len(seen) == 2    # one joint model per fold index
    for i, trained in enumerate(seen):
        assert set(trained) == {"a", "b"}
        for n, d in devs.items():
            assert trained[n] == set(d.folds[i].train)
            assert not trained[n] & set(d.folds[i].test)
    for n, d in devs.items():
        assert sorted(got[n].index) == sorted(d.questions)
    seen.clear()
    H.leave_one_out(devs, H.Spec("lambdarank"))
    assert seen == [{"b": None}, {"a": None}]   # every question of the other dataset


def test_interval_by_hand():
    assert H.interval(np.full(5, 0.3), np.full(5, 0.1)) == pytest.approx((0.2, 0.2))
    lo, hi = H.interval(np.array([0.0, 1.0]), resamples=4000, seed=0)
    # the mean of two resampled values is 0, 0.5 or 1 (1/4, 1/2, 1/4): 95% interval 0..1
    assert (lo, hi) == (0.0, 1.0)


def test_permutation_importance_finds_the_signal_the_gold_follows(tmp_path):
    rep = synth_replay({"lexical": 1.0}, conversations=4, per_conv=40, seed=3)
    base = per_query(rep, CFG)
    dev = H.Dev(rep, CFG, conversation_folds(base["conversation_id"], 2, seed=0), base.index)
    keep: dict = {}
    H.kfold({"s": dev}, H.Spec("lambdarank", joint=False), keep=keep, workdir=tmp_path)
    assert [i for i, _ in keep["s"]] == [0, 1] and all(p.exists() for _, p in keep["s"])
    imp = H.model_importance(dev, keep["s"], seed=0)
    assert list(imp.columns) == [0, 1]
    # gold follows lexical overlap alone: shuffling it costs most; a constant column nothing
    assert imp.mean(axis=1).idxmax() == "lexical" and imp.loc["lexical"].min() > 0.1
    assert (imp.loc["importance"] == 0).all()


def test_a_plus_spec_fits_reverie_plus_on_the_training_folds_only(monkeypatch):
    """Spec("plus"): reverie_plus's weights fitted (pairwise logistic) on the training folds of
    every dataset together, each question scored once, by weights that never saw it."""
    from memlab.tune import fit as F

    devs = _two_devs(per_conv=60)
    seen, fits = [], []
    real = F.fit_linear

    def spy(design, cfg, **kw):
        seen.append(set(design.qkey))
        fit = real(design, cfg, **kw)
        fits.append(fit)
        return fit

    monkeypatch.setattr(F, "fit_linear", spy)
    got = H.kfold(devs, H.Spec("plus"))
    assert len(seen) == 2   # one joint fit per fold index
    for i, keys in enumerate(seen):
        want = {f"{n}::{q}" for n, d in devs.items() for q in d.folds[i].train}
        assert keys == want and not keys & {f"{n}::{q}" for n, d in devs.items()
                                            for q in d.folds[i].test}
        w = fits[i].weights
        assert w["fusion.lexical"] / w["fusion.relevance"] == pytest.approx(2.0, rel=0.25)
    for n, d in devs.items():
        assert sorted(got[n].index) == sorted(d.questions)
        # fold 0's questions are scored by fold 0's weights, under the reverie_plus scorer
        assert fits[0].config.fusion.scorer == "reverie_plus"
        test = d.folds[0].test
        want = per_query(restrict(d.rep, test), fits[0].config).reindex(test)
        assert got[n].loc[test, "ndcg@10"].tolist() == pytest.approx(want["ndcg@10"].tolist())
    # learned weights beat the defaults on held-out questions (gold follows lexical twice as much)
    default = per_query(devs["a"].rep, CFG)["ndcg@10"].mean()
    assert got["a"]["ndcg@10"].mean() > default
    seen.clear()
    H.leave_one_out(devs, H.Spec("plus"))
    assert seen == [{f"b::{q}" for q in devs["b"].questions},
                    {f"a::{q}" for q in devs["a"].questions}]
    with pytest.raises(InvalidInput, match="spec"):
        H.kfold(devs, H.Spec("plus", drop=("cosine",)))
    with pytest.raises(InvalidInput, match="spec.kind"):
        H.kfold(devs, H.Spec("forest"))

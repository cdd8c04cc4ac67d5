"""Learned fusion (issue 8, item 5): the linear fit recovers known weights, maps them back to the
reverie formula exactly, stays in the config's ranges and round-trips as YAML; folds never train on
held-out questions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fit_synth import CFG, synth_replay, with_evidence
from memlab.config import describe_field, load_config
from memlab.errors import ConfigError, InvalidInput
from memlab.recall.score import score
from memlab.tune import fit as F
from memlab.tune.crossfit import crossfit
from memlab.tune.evaluate import per_query
from memlab.tune.folds import conversation_folds


@pytest.fixture(scope="module")
def rep_12():
    """Gold by relevance + 2 * lexical."""
    return synth_replay({"cosine": 1.0, "lexical": 2.0})


@pytest.mark.parametrize("method", F.METHODS)
@pytest.mark.parametrize("ratio", [2.0, 0.5])
def test_the_fit_recovers_the_ratio_of_two_terms(method, ratio):
    rep = synth_replay({"cosine": 1.0, "lexical": ratio}, per_conv=120, seed=0)   # 720 questions
    fit = F.fit_linear(F.build_design(rep, CFG), CFG, method=method)
    got = fit.weights["fusion.lexical"] / fit.weights["fusion.relevance"]
    assert got == pytest.approx(ratio, rel=0.15)
    # normalised: the six main weights sum to the preset's (those without variation keep theirs)
    assert sum(fit.weights[k] for k in F.MAIN_WEIGHTS) == pytest.approx(
        sum(CFG.to_flat()[k] for k in F.MAIN_WEIGHTS))
    assert "not learned" in fit.notes["importance"] and "relevance" not in fit.notes


def test_the_terms_are_exactly_reveries_additive_terms(rep_12):
    s = score(rep_12.features.columns, CFG, scorer="reverie")
    assert {t.component for t in F.TERMS} == set(s.additive)


def _random_table(rng, n=400):
    from memlab.recall.features import make_columns

    return make_columns(
        qid=np.repeat(np.arange(20), n // 20), cosine=rng.uniform(-0.2, 1, n),
        lexical=rng.uniform(0, 1, n), importance=rng.uniform(0, 1, n),
        access_count=rng.integers(0, 30, n), mention_count=rng.integers(1, 5, n),
        age_days=rng.uniform(0, 400, n), since_access_days=rng.uniform(0, 400, n),
        emotion_max=rng.uniform(0, 100, n), layer=rng.integers(0, 3, n),
        cognitive=rng.integers(0, 3, n), entity_matches=rng.integers(0, 5, n),
        intent=rng.choice([0, 1, 2, 8, 9], n), event_time=rng.uniform(0, 1e9, n))


@pytest.mark.parametrize("governance", [True, False])
def test_weights_from_coefficients_give_the_linear_model_exactly(governance):
    """The config mapped back from coefficients scores every row as scale * (X . coef): the
    learned scorer is the spec's formula with other weights (a swapped or mis-scaled key fails)."""
    rng = np.random.default_rng(3)
    table = _random_table(rng)
    cfg = CFG.replace(**{"governance.enabled": governance, "temporal.first_boost": 0.05})
    X, _ = F.unit_terms(table, cfg)
    coef = {t.feature: float(rng.uniform(0.05, 1.0)) for t in F.TERMS}
    coef["cognitive_episodic"] = -0.3
    weights, scale, _ = F.weights_from(coef, cfg)
    learned = cfg.replace(**weights)
    want = scale * (X.to_numpy() @ np.array([coef[c] for c in X.columns]))
    got = score(table, learned, scorer="reverie").score
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    for key, v in weights.items():    # in every field's range
        lo, hi = F._bounds(key)
        assert lo <= v <= hi, (key, v, describe_field(key)["range"])


def test_a_weight_beyond_its_range_shrinks_the_whole_vector():
    """Gold led by entity matches: entity.boost_each would exceed its range (<= 1) at the preset's
    scale, so every weight is scaled down together and the ratio is kept."""
    rep = synth_replay({"cosine": 1.0, "entity_matches": 3.0}, seed=5)
    fit = F.fit_linear(F.build_design(rep, CFG), CFG)
    w = fit.weights
    assert "(scale)" in fit.notes and "scale-invariant" in fit.notes["(scale)"]
    assert max(w["entity.boost_each"], w["entity.boost_cap"]) == pytest.approx(1.0)
    # unit entity term = min(matches, cap/each = 2): the learned cap keeps the preset's ratio
    assert w["entity.boost_cap"] / w["entity.boost_each"] == pytest.approx(0.08 / 0.04)
    assert sum(w[k] for k in F.MAIN_WEIGHTS) < 1.24


def test_a_term_that_ranks_gold_lower_is_held_at_zero():
    rep = synth_replay({"cosine": 1.0, "lexical": -1.0}, seed=7)
    fit = F.fit_linear(F.build_design(rep, CFG), CFG)
    assert fit.weights["fusion.lexical"] == 0.0 and fit.weights["fusion.relevance"] > 0
    assert "lower bound" in fit.notes["lexical"]


def test_the_yaml_round_trips_and_scores_the_same(rep_12, tmp_path):
    fit = F.fit_linear(F.build_design(rep_12, CFG), CFG)
    path = F.write_yaml(fit, tmp_path / "tuned.yaml", header="memlab fit test\nsecond line")
    assert path.read_text(encoding="utf-8").startswith("# memlab fit test\n# second line\n")
    loaded = load_config(path)
    assert loaded.to_flat() == fit.config.to_flat()
    pd.testing.assert_frame_equal(per_query(rep_12, loaded), per_query(rep_12, fit.config))
    # and the learned weights rank better than the spec's on the data they were learned from
    assert per_query(rep_12, loaded)["ndcg@10"].mean() > per_query(rep_12, CFG)["ndcg@10"].mean()


def test_rows_the_gates_drop_are_not_trained_on(rep_12):
    """A floor that drops some rows (cosine < 0.3): they leave the design; gold among them is
    counted as gated."""
    cfg = CFG.replace(**{"recall.relevance_floor": 0.3, "recall.lexical_floor": 1.0})
    d = F.build_design(rep_12, cfg)
    cos = np.asarray(rep_12.features.columns["cosine"])
    assert d.counts["selectable_rows"] == int((cos >= 0.3).sum()) == len(d.gold)
    assert d.X["relevance"].min() >= 0.3
    gold = F.gold_mask(rep_12)
    assert d.counts["gold_gated"] == int((gold & (cos < 0.3)).sum()) > 0


def test_fit_refuses_another_scorer_and_an_unknown_method(rep_12):
    with pytest.raises(ConfigError, match="fusion.scorer.*reverie"):
        F.build_design(rep_12, CFG.replace(**{"fusion.scorer": "cosine"}))
    with pytest.raises(InvalidInput, match="method"):
        F.fit_linear(F.build_design(rep_12, CFG), CFG, method="listwise")


def test_folds_never_train_on_held_out_questions(rep_12):
    """Each fold's weights are those fitted on its training questions alone: reversing the gold of
    the held-out questions (their worst row becomes gold) changes none of them, nor the
    non-linear model's predictions."""
    cv = crossfit(rep_12, CFG, k=3, importance=False)
    pq = per_query(rep_12, CFG)
    folds = conversation_folds(pq["conversation_id"], 3, seed=0)
    design = F.build_design(rep_12, CFG)
    for fold in folds:
        assert set(pq.loc[fold.train, "conversation_id"]).isdisjoint(
            pq.loc[fold.test, "conversation_id"])
        alone = F.fit_linear(design.restrict(fold.train), CFG)
        pd.testing.assert_series_equal(cv.weights[fold.index], pd.Series(alone.weights),
                                       check_names=False)
        table = rep_12.features.columns
        keys = F.question_keys(rep_12)[np.asarray(table["qid"])]
        flipped = {}
        for k in fold.test:
            rows = np.asarray(table["row"])[keys == k]
            mine = keys == k
            util = np.asarray(table["cosine"])[mine] + 2 * np.asarray(table["lexical"])[mine]
            flipped[k] = [rep_12.row_item[int(rows[np.argmin(util)])]]
        other = with_evidence(rep_12, flipped)
        refit = F.fit_linear(F.build_design(other, CFG), CFG, train=fold.train)
        assert refit.weights == alone.weights
        m1, feats, _ = F.fit_hgb(rep_12, CFG, train=fold.train)
        m2, _, _ = F.fit_hgb(other, CFG, train=fold.train)
        X = np.column_stack([np.asarray(table[c], float) for c in feats])
        np.testing.assert_array_equal(m1.predict_proba(X), m2.predict_proba(X))
        # and the flip is telling: fitted on every question, the weights move
        assert F.fit_linear(F.build_design(other, CFG), CFG).weights != alone.weights
    summary = cv.summary()
    assert list(summary.index) == ["defaults", "linear", "hgb"]
    assert (summary["folds"] == 3).all()
    assert summary.loc["linear", "mean"] > summary.loc["defaults", "mean"]


def test_permutation_importance_names_the_signals_gold_depends_on(rep_12):
    from memlab.tune.crossfit import importance_figure

    cv = crossfit(rep_12, CFG, k=2, importance=True)
    imp = cv.importance_summary()
    assert set(imp.index[:2]) == {"cosine", "lexical"}
    assert imp.loc["lexical", "mean"] > imp.loc["cosine", "mean"] > 0.05
    assert imp.loc["importance", "mean"] == 0.0     # constant: shuffling it changes nothing
    fig = importance_figure(imp, title="synthetic")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][-2:] == ["cosine", "lexical"]


def test_permutation_importance_starts_from_the_benchmark_value(rep_12, tmp_path):
    """Unshuffled, the held-out metric of the importance's own ranking equals per_query's (the
    same as memlab bench); a column the scorer does not read (text_len: only the budget reads it)
    has importance 0 even though shuffling it would change what the budget selects."""
    from memlab.recall.learned import save_model
    from memlab.tune.crossfit import _held_metric, learned_config, permutation_importance, restrict

    pq = per_query(rep_12, CFG)
    test = conversation_folds(pq["conversation_id"], 2, seed=0)[0].test
    from sklearn.ensemble import HistGradientBoostingClassifier

    table = rep_12.features.columns
    feats = ("cosine", "lexical")
    model = HistGradientBoostingClassifier(max_iter=50, random_state=0).fit(
        np.column_stack([np.asarray(table[c], float) for c in feats]), F.gold_mask(rep_12))
    cfg = learned_config(CFG, save_model(model, tmp_path / "m.skops", features=feats)).replace(
        **{"selection.char_budget": 20})       # text_len 5-15: the budget admits 1-4 memories
    held = restrict(rep_12, test)
    base = _held_metric(held, cfg, score(held.features.columns, cfg), test, "ndcg@10")
    assert base == pytest.approx(per_query(held, cfg).reindex(test)["ndcg@10"].mean())
    imp = permutation_importance(rep_12, cfg, test, ("text_len", "cosine"))
    assert imp["text_len"] == 0.0 and imp["cosine"] > 0.05

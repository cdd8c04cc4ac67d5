"""memlab.forgetting against Reverie §9.1, values worked out by hand in each assertion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab import forgetting as fg
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

LN2 = math.log(2)
CFG = MemlabConfig()
LONG, SHORT, PERM = 1, 2, 0


def test_references_are_access_plus_mention_minus_one_never_negative():
    # written once, never recalled: 0 + 1 - 1 = 0; 3 recalls, 2 writes: 3 + 2 - 1 = 4
    np.testing.assert_array_equal(fg.references([0, 3, 0], [1, 2, 0]), [0.0, 4.0, 0.0])


def test_reinforcement_is_one_plus_alpha_log1p():
    # config says: ten references give x1.48 -> 1 + 0.2 * ln(11) = 1.4796
    assert float(fg.reinforcement(10, alpha=0.2)) == pytest.approx(1 + 0.2 * math.log(11))
    assert float(fg.reinforcement(10, alpha=0.2)) == pytest.approx(1.4796, abs=1e-4)
    assert float(fg.reinforcement(0, alpha=0.2)) == 1.0


def test_strength_formula_and_floor():
    # (0.35 + 1.25*0.5 + 0.5*0.4) * 1.2 = (0.35 + 0.625 + 0.2) * 1.2 = 1.41
    assert float(fg.strength(0.5, 0.4, 1.2, CFG.forgetting)) == pytest.approx(1.41)
    # base 0.1, nothing else: 0.1 < floor 0.15 -> 0.15
    cfg = CFG.replace(**{"forgetting.strength_base": 0.1})
    assert float(fg.strength(0.0, 0.0, 1.0, cfg.forgetting)) == pytest.approx(0.15)
    # importance above 1 is clamped: (0.35 + 1.25*1) * 1 = 1.6
    assert float(fg.strength(3.0, 0.0, 1.0, CFG)) == pytest.approx(1.6)


def test_long_term_importance_half_after_90_days():
    # strength = 0.35 + 1.25*0.5 = 0.975; layer_scale = 1/90
    expected = math.exp(-LN2 * (1 / 90) * 90 / 0.975)
    got = fg.retention([LONG], [90.0], [0.5], [0.0], [0.0], [False], CFG)
    assert got[0] == pytest.approx(expected)
    assert got[0] == pytest.approx(0.49119, abs=1e-5)


def test_strength_one_keeps_half_after_one_half_life_in_each_layer():
    # importance 0.52: strength = 0.35 + 1.25*0.52 = 1.0 -> exp(-ln2) = 0.5 at the half-life
    got = fg.retention([LONG, SHORT], [90.0, 7.0], [0.52, 0.52], [0.0, 0.0], [0, 0],
                       [False, False], CFG)
    np.testing.assert_allclose(got, [0.5, 0.5])


def test_short_term_at_seven_days_with_emotion_and_references():
    # emotion 40 of 100 -> 0.4; refs = 2 + 2 - 1 = 3; reinforcement = 1 + 0.2*ln(4)
    reinf = 1 + 0.2 * math.log(4)
    strength = (0.35 + 1.25 * 0.3 + 0.5 * 0.4) * reinf          # 0.925 * 1.27726 = 1.18147
    expected = math.exp(-LN2 * (1 / 7) * 7 / strength)          # exp(-0.58668) ~ 0.5562
    emo = fg.emotion_intensity(40.0, scale=CFG.fusion.emotion_scale)
    refs = fg.references(2, 2)
    got = fg.retention(SHORT, 7.0, 0.3, emo, refs, False, CFG)
    assert float(got) == pytest.approx(expected)
    assert float(got) == pytest.approx(0.55617, abs=1e-4)


def test_floor_applies_in_retention():
    # base 0.1 -> strength floor 0.15; long term 9 days: exp(-ln2 * 9/90 / 0.15)
    cfg = CFG.replace(**{"forgetting.strength_base": 0.1})
    got = fg.retention(LONG, 9.0, 0.0, 0.0, 0, False, cfg)
    assert float(got) == pytest.approx(math.exp(-LN2 * 0.1 / 0.15))


def test_permanent_and_pinned_are_never_forgotten():
    got = fg.retention([PERM, LONG, SHORT], [10_000.0] * 3, [0.0] * 3, [0.0] * 3, [0] * 3,
                       [False, True, True], CFG)
    np.testing.assert_array_equal(got, [1.0, 1.0, 1.0])


def test_layer_scale_multiplies_the_rate():
    # layer_scale_short_term 2 -> short term forgets twice as fast: 7 days at strength 1 -> 1/4
    cfg = CFG.replace(**{"forgetting.layer_scale_short_term": 2.0})
    assert float(fg.retention(SHORT, 7.0, 0.52, 0.0, 0, False, cfg)) == pytest.approx(0.25)


def test_negative_elapsed_days_count_as_zero():
    assert float(fg.retention(SHORT, -3.0, 0.0, 0.0, 0, False, CFG)) == 1.0


def test_emotion_intensity_is_clipped():
    np.testing.assert_allclose(fg.emotion_intensity([0, 50, 150], scale=100.0), [0.0, 0.5, 1.0])
    with pytest.raises(InvalidInput, match="scale"):
        fg.emotion_intensity(1.0, scale=0.0)


def test_unknown_layer_code_is_an_error_naming_layer():
    with pytest.raises(InvalidInput, match="layer.*0 permanent.*got 7"):
        fg.retention([7], [1.0], [0.5], [0.0], [0], [False], CFG)


def test_eligibility_gate():
    # thresholds: retention >= 0.05, or relevance >= 0.85, or permanent
    got = fg.eligible(retention=[0.01, 0.01, 0.01, 0.05, 0.01],
                      relevance=[0.5, 0.85, np.nan, 0.0, 0.0],
                      is_permanent=[False, False, False, False, True], cfg=CFG)
    np.testing.assert_array_equal(got, [False, True, False, True, True])


def test_forgetting_curve_for_plots():
    days = np.array([0.0, 90.0, 180.0])
    got = fg.forgetting_curve(days, importance=0.5, cfg=CFG)
    # strength 0.975: 2^(-d/90/0.975)
    np.testing.assert_allclose(got, [1.0, 2 ** (-1 / 0.975), 2 ** (-2 / 0.975)])
    perm = fg.forgetting_curve(days, importance=0.0, layer="permanent", cfg=CFG)
    np.testing.assert_array_equal(perm, [1.0, 1.0, 1.0])
    # a stronger memory forgets slower, day by day
    strong = fg.forgetting_curve(days, importance=0.5, emotion=1.0, refs=5, cfg=CFG)
    assert np.all(strong[1:] > got[1:])
    with pytest.raises(InvalidInput, match="layer"):
        fg.forgetting_curve(days, importance=0.5, layer="mid_term", cfg=CFG)
    with pytest.raises(InvalidInput, match="days"):
        fg.forgetting_curve([np.nan], importance=0.5, cfg=CFG)


def test_bad_config_type_is_an_error():
    with pytest.raises(InvalidInput, match="cfg"):
        fg.retention(LONG, 1.0, 0.5, 0.0, 0, False, {"decay_lambda": 1.0})


@settings(max_examples=200, deadline=None)
@given(imp=st.floats(0, 1), emo=st.floats(0, 1), refs=st.integers(0, 1000),
       layer=st.sampled_from([LONG, SHORT]), d1=st.floats(0, 1e4), d2=st.floats(0, 1e4))
def test_retention_is_in_unit_interval_and_fades_with_time(imp, emo, refs, layer, d1, d2):
    lo, hi = sorted((d1, d2))
    r_lo, r_hi = fg.retention([layer] * 2, [lo, hi], [imp] * 2, [emo] * 2, [refs] * 2,
                              [False] * 2, CFG)
    assert 0.0 <= r_hi <= r_lo <= 1.0
    # more important -> at least as retained at the same age
    stronger = fg.retention(layer, hi, min(1.0, imp + 0.1), emo, refs, False, CFG)
    assert float(stronger) >= r_hi


# ----------------------------------------------------------------------------- effective half-lives

def test_effective_half_life_is_strength_times_the_layers_half_life():
    # importance 0.5: strength 0.35 + 1.25*0.5 = 0.975 -> 0.975 * 90 = 87.75 days (issue 20: "88")
    assert float(fg.half_life(importance=0.5, cfg=CFG)) == pytest.approx(87.75)
    assert float(fg.half_life(importance=0.5, layer="short_term", cfg=CFG)) == pytest.approx(6.825)
    # vectorised over importance: (0.35 + 1.25*[0.2, 0.9]) * 90 = [54, 132.75]
    np.testing.assert_allclose(fg.half_life(importance=[0.2, 0.9], cfg=CFG), [54.0, 132.75])
    # emotion 0.4, refs 3: (0.35 + 1.25*0.3 + 0.5*0.4) * (1 + 0.2*ln 4) = 1.18147 -> x 7 days
    got = fg.half_life(importance=0.3, emotion=0.4, refs=3, layer=SHORT, cfg=CFG)
    assert float(got) == pytest.approx(7 * 0.925 * (1 + 0.2 * math.log(4)))


def test_half_life_follows_decay_lambda_and_layer_scale():
    # lambda 1: ln2 * strength / (1 * 1/90); layer_scale 2 halves it
    cfg = CFG.replace(**{"forgetting.decay_lambda": 1.0})
    assert float(fg.half_life(importance=0.5, cfg=cfg)) == pytest.approx(LN2 * 0.975 * 90)
    cfg = CFG.replace(**{"forgetting.layer_scale_long_term": 2.0})
    assert float(fg.half_life(importance=0.5, cfg=cfg)) == pytest.approx(0.975 * 45)


@pytest.mark.parametrize("level", [0.5, 0.05, 0.9, 1.0])
@pytest.mark.parametrize("layer", ["long_term", "short_term"])
def test_days_to_retention_inverts_the_curve(level, layer):
    imp = np.array([0.0, 0.5, 1.0])
    days = fg.days_to_retention(level, importance=imp, emotion=0.3, refs=2, layer=layer, cfg=CFG)
    back = [float(fg.forgetting_curve(d, importance=i, emotion=0.3, refs=2, layer=layer, cfg=CFG))
            for d, i in zip(days, imp)]
    np.testing.assert_allclose(back, level)


def test_forgotten_after_is_the_days_to_the_eligibility_threshold():
    # -ln(0.05) * 0.975 * 90 / ln 2 = 379.25 days long term; x 7/90 short term = 29.50
    assert float(fg.forgotten_after(importance=0.5, cfg=CFG)) == pytest.approx(
        -math.log(0.05) * 0.975 * 90 / LN2)
    assert float(fg.forgotten_after(importance=0.5, layer="short_term", cfg=CFG)) == \
        pytest.approx(29.497, abs=1e-3)
    never = CFG.replace(**{"forgetting.eligibility_threshold": 0.0})
    assert float(fg.forgotten_after(importance=0.5, cfg=never)) == math.inf


def test_permanent_and_pinned_never_reach_any_level():
    assert float(fg.half_life(importance=0.0, layer="permanent", cfg=CFG)) == math.inf
    assert float(fg.half_life(importance=0.0, pinned=True, cfg=CFG)) == math.inf
    assert np.all(np.isinf(fg.days_to_retention(0.05, importance=[0.1, 0.2], layer=PERM,
                                                cfg=CFG)))


@pytest.mark.parametrize("level", [0.0, -0.1, 1.5, np.nan])
def test_a_level_outside_the_unit_interval_is_named(level):
    with pytest.raises(InvalidInput, match="level"):
        fg.days_to_retention(level, importance=0.5, cfg=CFG)


@pytest.mark.parametrize("layer", ["mid_term", 7, 1.0, True])
def test_a_bad_layer_is_named(layer):
    with pytest.raises(InvalidInput, match="layer"):
        fg.half_life(importance=0.5, layer=layer, cfg=CFG)


# ----------------------------------------------------------------------------- eligibility, cue

def test_eligibility_over_time_ends_at_forgotten_after_unless_the_cue_is_strong():
    last = float(fg.forgotten_after(importance=0.5, layer="short_term", cfg=CFG))   # 29.50
    days = np.array([0.0, last - 0.01, last + 0.01, 365.0])
    weak = fg.eligibility_curve(days, relevance=0.5, importance=0.5, layer="short_term", cfg=CFG)
    np.testing.assert_array_equal(weak, [True, True, False, False])
    strong = fg.eligibility_curve(days, relevance=0.85, importance=0.5, layer="short_term",
                                  cfg=CFG)
    np.testing.assert_array_equal(strong, [True] * 4)
    perm = fg.eligibility_curve(days, relevance=0.0, importance=0.0, layer="permanent", cfg=CFG)
    np.testing.assert_array_equal(perm, [True] * 4)


def test_cue_reactivation_formula_and_cap():
    # min(rel * (1 - ret) * 0.35, 0.10): 0.8 * 0.5 * 0.35 = 0.14 -> capped at 0.10;
    # 0.4 * 0.5 * 0.35 = 0.07; a memory not faded (retention 1) gets nothing
    got = fg.cue_reactivation([0.8, 0.4, 0.9], [0.5, 0.5, 1.0], CFG)
    np.testing.assert_allclose(got, [0.10, 0.07, 0.0])
    np.testing.assert_allclose(fg.cue_reactivation(0.8, 0.5, CFG.fusion), 0.10)
    with pytest.raises(InvalidInput, match="cfg"):
        fg.cue_reactivation(0.8, 0.5, CFG.forgetting)


def test_cue_reactivation_is_the_scorers_cue_term():
    from memlab.recall.features import make_table
    from memlab.recall.score import score

    rng = np.random.default_rng(3)
    n = 50
    table = make_table(cosine=rng.uniform(0, 1, n), importance=rng.uniform(0, 1, n),
                       age_days=rng.uniform(0, 400, n), since_access_days=rng.uniform(0, 400, n),
                       layer=rng.integers(0, 3, n), emotion_max=rng.uniform(0, 100, n))
    cfg = CFG.replace(**{"recall.floor_mode": "absolute"})
    s = score(table, cfg, scorer="reverie")
    got = fg.cue_reactivation(s.components["relevance"], s.components["retention"], cfg)
    np.testing.assert_allclose(got, s.components["cue_term"])
    assert (got > 0).any() and (got == CFG.fusion.cue_reactivation_cap).any()

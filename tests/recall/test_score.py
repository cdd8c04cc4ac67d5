"""memlab.recall.score against Reverie §8/§9.1/§11, Familiars §5.4.2, Park et al. and RRF.

Every expected value is worked out by hand from the spec in the assertion.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.recall import score as sc
from memlab.recall.features import make_table

LN2 = math.log(2)
CFG = MemlabConfig().replace(**{"recall.floor_mode": "absolute",   # floor off: pure formulas
                                "recall.relevance_floor": 0.0})


def _additive_sum(s: sc.Scored) -> np.ndarray:
    return sum(s.components[k] for k in s.additive)


# -- reverie ---------------------------------------------------------------------------------------
def _hand_row(**over):
    cols = dict(cosine=[0.8], lexical=[0.5], importance=[0.6], access_count=[1],
                mention_count=[2], age_days=[15.0], since_access_days=[10.0], emotion_max=[50.0],
                layer=[1], cognitive=[0], entity_matches=[1], intent=[0])
    cols.update(over)
    n = max(len(v) for v in cols.values())
    return make_table(**{k: list(v) * n if len(v) == 1 else v for k, v in cols.items()})


def test_reverie_fused_score_term_by_term():
    # temporal_mode 'recency': the temporal score is recency for every memory
    s = sc.score(_hand_row(), CFG.replace(**{"fusion.temporal_mode": "recency"}),
                 scorer="reverie")
    refs = 1 + 2 - 1                                      # access + mention - 1 = 2
    frequency = math.log1p(2) / math.log1p(20)            # ln 3 / ln 21 = 0.36085
    temporal = 2 ** (-15 / 30)                            # 0.70711
    emotion = 50 / 100
    reinf = 1 + 0.2 * math.log1p(refs)                    # 1.21972
    strength = (0.35 + 1.25 * 0.6 + 0.5 * 0.5) * reinf    # 1.35 * 1.21972 = 1.64663
    retention = math.exp(-LN2 * (1 / 90) * 10 / strength)  # 0.95431
    cue = min(0.8 * (1 - retention) * 0.35, 0.10)         # 0.01279 (under the cap)
    expected = (0.62 * 0.8 + 0.16 * 0.5 + 0.08 * 0.6 + 0.04 * frequency + 0.0
                + 0.24 * temporal + 0.10 * emotion + 0.15 * retention + cue + 0.04 + 0.0)
    assert s.score[0] == pytest.approx(expected)
    # 0.496 + 0.08 + 0.048 + 0.01443 + 0 + 0.16971 + 0.05 + 0.14315 + 0.01279 + 0.04 + 0
    assert s.score[0] == pytest.approx(1.05408, abs=1e-4)
    c = s.components
    assert c["retention"][0] == pytest.approx(retention)
    assert c["frequency"][0] == pytest.approx(frequency)
    assert c["temporal_term"][0] == pytest.approx(0.24 * temporal)
    assert c["resident_term"][0] == pytest.approx(0.15 * retention)
    assert c["cue_term"][0] == pytest.approx(cue)
    assert c["entity_term"][0] == pytest.approx(0.04)
    assert _additive_sum(s)[0] == pytest.approx(s.score[0])
    assert s.eligible[0] and s.relevant[0]
    assert s.score.dtype == np.float64


def test_reverie_cognitive_weight_comes_from_config():
    cfg = CFG.replace(**{"fusion.cognitive_episodic": 0.05, "fusion.cognitive_procedural": -0.02})
    t = _hand_row(cosine=[0.8] * 3, cognitive=[0, 1, 2])
    base = sc.score(t, CFG).score
    got = sc.score(t, cfg).score
    np.testing.assert_allclose(got - base, [0.05, 0.0, -0.02])


def test_reverie_governance_off_folds_retention_into_relevance():
    # refs 0 -> reinforcement 1; importance 0.52 -> strength 1; long term 90 days -> retention 0.5
    t = _hand_row(access_count=[0], mention_count=[1], importance=[0.52], since_access_days=[90.0],
                  emotion_max=[0.0], entity_matches=[0])
    on = sc.score(t, CFG)
    off = sc.score(t, CFG.replace(**{"governance.enabled": False}))
    # on: 0.62*0.8 + resident 0.15*0.5 ; off: 0.62*0.8*min(1, 0.5*1) + no resident
    assert on.components["relevance_term"][0] == pytest.approx(0.62 * 0.8)
    assert on.components["resident_term"][0] == pytest.approx(0.075)
    assert off.components["relevance_term"][0] == pytest.approx(0.62 * 0.8 * 0.5)
    assert off.components["resident_term"][0] == 0.0
    # the cue stays, from the raw relevance: min(0.8 * 0.5 * 0.35, 0.10) = 0.10 (capped)
    assert off.components["cue_term"][0] == pytest.approx(0.10)
    assert on.score[0] - off.score[0] == pytest.approx(0.62 * 0.8 * 0.5 + 0.075)


def test_reverie_governance_off_caps_reinforcement_at_one():
    # retention * reinforcement > 1 does not amplify relevance: min(1, .) = 1
    t = _hand_row(access_count=[50], since_access_days=[0.0])
    off = sc.score(t, CFG.replace(**{"governance.enabled": False}))
    assert off.components["relevance_term"][0] == pytest.approx(0.62 * 0.8)


def test_cue_reactivation_is_capped():
    # short term, importance 0, 70 days: strength 0.35, retention exp(-ln2*10/0.35) ~ 2.5e-9
    t = _hand_row(cosine=[1.0, 0.5, 0.2], importance=[0.0] * 3, layer=[2] * 3,
                  since_access_days=[70.0] * 3, emotion_max=[0.0] * 3, access_count=[0] * 3,
                  mention_count=[1] * 3)
    s = sc.score(t, CFG)
    # 1.0*~1*0.35 -> cap 0.10; 0.5*0.35 = 0.175 -> cap 0.10; 0.2*0.35 = 0.07 under the cap
    np.testing.assert_allclose(s.components["cue_term"], [0.10, 0.10, 0.07], atol=1e-8)


def test_entity_boost_capped_and_switchable():
    t = _hand_row(cosine=[0.5] * 4, entity_matches=[0, 1, 2, 3])
    s = sc.score(t, CFG)
    # 0.04 each, cap 0.08: 3 matches -> 0.08 not 0.12
    np.testing.assert_allclose(s.components["entity_term"], [0.0, 0.04, 0.08, 0.08])
    off = sc.score(t, CFG.replace(**{"entity.enabled": False}))
    np.testing.assert_allclose(off.components["entity_term"], [0.0] * 4)


def test_temporal_intent_boost():
    # recent (1): new (+0.08) / old (-0.08); historical (2): the opposite; when (4) and none: 0
    t = _hand_row(cosine=[0.5] * 6, age_days=[10.0, 40.0, 10.0, 40.0, 10.0, 10.0],
                  intent=[1, 1, 2, 2, 4, 0])
    s = sc.score(t, CFG)
    np.testing.assert_allclose(s.components["intent_term"], [0.08, -0.08, -0.08, 0.08, 0, 0])
    off = sc.score(t, CFG.replace(**{"temporal.enabled": False}))
    np.testing.assert_allclose(off.components["intent_term"], [0.0] * 6)


def test_first_boost_by_age_rank():
    # first_boost 0.06; a 'first' query (8) with event times 300, 100, 200 and one irrelevant row
    cfg = CFG.replace(**{"temporal.first_boost": 0.06, "recall.relevance_floor": 0.3})
    t = _hand_row(cosine=[0.5, 0.5, 0.5, 0.1], lexical=[0.0] * 4, intent=[8] * 4,
                  event_time=[300.0, 100.0, 200.0, 50.0])
    s = sc.score(t, cfg)
    # relevant rows ranked by age: 100 -> r0: 0.06; 200 -> r1: 0.06*(1-1/3); 300 -> r2: 0.06*(1-2/3)
    np.testing.assert_allclose(s.components["first_term"], [0.02, 0.06, 0.04, 0.0])
    assert np.all(sc.score(t, CFG).components["first_term"] == 0.0)  # default 0: spec only reorders


def test_eligibility_gate_weak_forgotten_strong_cue_and_permanent():
    # short term, importance 0, 70 days: retention ~2.5e-9 < 0.05
    t = _hand_row(cosine=[0.3, 0.9, 0.3], layer=[2, 2, 0], importance=[0.0] * 3,
                  since_access_days=[70.0] * 3, emotion_max=[0.0] * 3)
    s = sc.score(t, CFG)
    np.testing.assert_array_equal(s.eligible, [False, True, True])
    assert s.components["retention"][2] == 1.0   # permanent never forgets


def test_relevance_floor():
    t = _hand_row(cosine=[0.6, 0.4, np.nan, np.nan], lexical=[0.0, 0.0, 0.5, 0.1])
    cfg = CFG.replace(**{"recall.relevance_floor": 0.5})   # lexical_floor 0.34
    np.testing.assert_array_equal(sc.score(t, cfg).relevant, [True, False, True, False])
    # floor 0 disables: every row relevant, NaN cosine included
    assert sc.score(t, CFG).relevant.all()


# -- the zscore relevance floor (issue 7, defect 13) -------------------------------------------------
ZCFG = MemlabConfig()                  # the default: floor_mode zscore, relevance_z 2.0


def test_zscore_floor_is_the_smaller_of_the_two_z_scores_worked_by_hand():
    z = sc.floor_z(np.array([0.86, 0.86, 0.80]), np.array([0.80, 0.80, 0.80]),
                   np.array([0.02, 0.02, 0.02]), np.array([0.78, 0.83, 0.70]),
                   np.array([0.03, 0.03, 0.05]))
    # row 0: z_query = (0.86 - 0.80) / 0.02 = 3.0, z_memory = (0.86 - 0.78) / 0.03 = 2.667
    # row 1: z_query 3.0, z_memory = (0.86 - 0.83) / 0.03 = 1.0      (a hub memory: near everything)
    # row 2: z_query = 0 (as close as a typical unrelated memory), z_memory = 0.10 / 0.05 = 2.0
    np.testing.assert_allclose(z, [0.08 / 0.03, 1.0, 0.0], atol=1e-9)


def test_zscore_floor_is_scale_free_across_embedders():
    """The same rule on an e5-like cosine range (unrelated ~0.80) and a hashing-like one (~0):
    the same standing-out passes, whatever the embedder's offset and spread."""
    e5 = sc.floor_z(np.array([0.85]), np.array([0.80]), np.array([0.02]), np.array([0.79]),
                    np.array([0.02]))                      # min(2.5, 3.0) = 2.5
    hashing = sc.floor_z(np.array([0.25]), np.array([0.0]), np.array([0.1]), np.array([0.01]),
                         np.array([0.08]))                 # min(2.5, 3.0) = 2.5
    np.testing.assert_allclose([e5[0], hashing[0]], [2.5, 2.5])


def test_zscore_floor_edges_zero_spread_and_nan():
    z = sc.floor_z(np.array([0.5, 0.4, 0.4, np.nan]), np.array([0.4] * 4), np.array([0.0] * 4),
                   np.array([0.0] * 4), np.array([0.1] * 4))
    assert z[0] == pytest.approx(5.0)                     # min(0.1 / 0 = +inf, 0.5 / 0.1 = 5)
    assert np.isnan(z[1]) and np.isnan(z[3])              # 0/0 at the mean; NaN cosine


def test_zscore_relevance_mask_with_the_lexical_floor():
    t = _hand_row(cosine=[0.86, 0.86, 0.80, np.nan, 0.70], lexical=[0.0, 0.0, 0.5, 0.5, 0.1],
                  q_bg_mean=[0.80] * 5, q_bg_std=[0.02] * 5, m_bg_mean=[0.78, 0.83, 0.7, 0.7, 0.7],
                  m_bg_std=[0.03] * 5)
    s = sc.score(t, ZCFG)
    # z: 2.667 pass; 1.0 fail; 0 but lexical 0.5 >= 0.34 pass; NaN cosine, lexical pass; both fail
    np.testing.assert_array_equal(s.relevant, [True, False, True, True, False])
    np.testing.assert_allclose(s.components["floor_z"][:3], [0.08 / 0.03, 1.0, 0.0], atol=1e-5)
    assert not sc.score(t, ZCFG.replace(**{"recall.relevance_z": 3.0})).relevant[0]   # 2.667 < 3
    assert sc.score(t, ZCFG.replace(**{"recall.relevance_z": 0.5})).relevant[1]       # 1.0 >= 0.5
    for name in ("cosine", "bm25", "rrf", "generative_agents", "dialog_tree"):
        assert "floor_z" in sc.score(t, ZCFG, scorer=name).components


def test_zscore_floor_refuses_a_table_without_background_statistics():
    t = _hand_row(cosine=[0.9, np.nan])
    with pytest.raises(InvalidInput, match="background") as err:
        sc.score(t, ZCFG)
    assert err.value.field == "table.q_bg_mean"
    only_lexical = _hand_row(cosine=[np.nan], lexical=[0.5])   # no cosine: nothing to calibrate
    assert sc.score(only_lexical, ZCFG).relevant.tolist() == [True]


def test_absolute_mode_keeps_the_fixed_floor_and_no_floor_z():
    t = _hand_row(cosine=[0.81, 0.79], lexical=[0.0, 0.0])
    cfg = ZCFG.replace(**{"recall.floor_mode": "absolute"})      # relevance_floor 0.80
    s = sc.score(t, cfg)
    assert s.relevant.tolist() == [True, False] and "floor_z" not in s.components


def test_nan_cosine_counts_as_zero_relevance_in_reverie():
    t = _hand_row(cosine=[np.nan])
    assert sc.score(t, CFG).components["relevance"][0] == 0.0


# -- baselines -------------------------------------------------------------------------------------
def test_cosine_scorer_nan_rows_are_not_dense_candidates():
    t = make_table(cosine=[0.7, np.nan, -0.2])
    s = sc.score(t, CFG, scorer="cosine")
    np.testing.assert_allclose(s.score, [0.7, -1.0, -0.2], rtol=1e-6)
    np.testing.assert_array_equal(s.relevant, [True, False, True])
    assert s.eligible.all()


def test_bm25_scorer():
    t = make_table(bm25=[3.5, 0.0, 1.25])
    s = sc.score(t, CFG, scorer="bm25")
    np.testing.assert_allclose(s.score, [3.5, 0.0, 1.25])
    np.testing.assert_array_equal(s.relevant, [True, False, True])


def test_rrf_with_k_60():
    t = make_table(dense_rank=[1, 3, 0, 0], lexical_rank=[2, 0, 1, 0])
    s = sc.score(t, CFG, scorer="rrf")
    np.testing.assert_allclose(s.score, [1 / 61 + 1 / 62, 1 / 63, 1 / 61, 0.0])
    np.testing.assert_array_equal(s.relevant, [True, True, True, False])
    np.testing.assert_allclose(_additive_sum(s), s.score)


def test_generative_agents_minmax_per_query_and_hourly_decay():
    # q0 rows at positions 0, 2, 4; q1 (one row) interleaved at 1 and q1 second row at 3
    t = make_table(qid=[0, 1, 0, 1, 0], cosine=[0.2, 0.9, 0.6, 0.9, 1.0],
                   importance=[0.5, 0.1, 0.5, 0.7, 0.5],
                   since_access_days=[0.0, 0.0, 1 / 24, 0.0, 2 / 24])
    s = sc.score(t, CFG, scorer="generative_agents")
    # q0: relevance (0.2, 0.6, 1.0) -> (0, 0.5, 1); importance constant -> 0;
    #     recency 0.995^(0, 1, 2 hours) -> ((x - 0.995^2) / (1 - 0.995^2)) = (1, 0.49875, 0)
    mid = (0.995 - 0.995 ** 2) / (1 - 0.995 ** 2)
    assert mid == pytest.approx(0.49875, abs=1e-5)
    # q1: relevance constant -> 0; importance (0.1, 0.7) -> (0, 1); recency constant -> 0
    expected = [0 + 0 + 1, 0.0, 0.5 + 0 + mid, 1.0, 1 + 0 + 0]
    np.testing.assert_allclose(s.score, expected, rtol=1e-6)
    np.testing.assert_allclose(s.components["recency"][[0, 2, 4]], [1, 0.995, 0.995 ** 2])


def test_generative_agents_weights_and_nan_cosine():
    cfg = CFG.replace(**{"baselines.ga_relevance": 2.0, "baselines.ga_recency": 0.0})
    t = make_table(cosine=[0.1, np.nan, 0.5], importance=[0.2, 0.2, 0.2])
    s = sc.score(t, cfg, scorer="generative_agents")
    # relevance (0.1, NaN, 0.5) -> (0, 0 [NaN sits with the minimum], 1), weight 2
    np.testing.assert_allclose(s.score, [0.0, 0.0, 2.0])


def test_dialog_tree_formula():
    t = make_table(cosine=[0.5, 0.5], age_days=[600 / 86400] * 2, tree_distance=[3.0, np.nan])
    s = sc.score(t, CFG, scorer="dialog_tree")
    # 0.3*0.5 + 0.3*exp(-600/600) + 0.15*exp(-3/3); unknown tree distance contributes 0
    e1 = math.exp(-1)
    np.testing.assert_allclose(s.score, [0.15 + 0.3 * e1 + 0.15 * e1, 0.15 + 0.3 * e1], rtol=1e-6)


# -- registry and input errors ---------------------------------------------------------------------
def test_registry_names_every_config_choice():
    assert set(sc.SCORERS) >= {"reverie", "cosine", "bm25", "rrf", "generative_agents",
                               "dialog_tree"}


def test_unknown_scorer_is_a_config_error():
    with pytest.raises(ConfigError, match="fusion.scorer.*unknown scorer.*nope"):
        sc.score(make_table(cosine=[0.1]), CFG, scorer="nope")


def test_register_a_new_scorer_and_refuse_a_duplicate_name():
    def importance_only(table, cfg):
        imp = np.asarray(table["importance"], dtype=float)
        n = len(imp)
        return sc.Scored(imp, np.ones(n, bool), np.ones(n, bool), {"importance": imp},
                         ("importance",), "importance_only")

    sc.register("importance_only")(importance_only)
    try:
        s = sc.score(make_table(importance=[0.3, 0.9]), CFG, scorer="importance_only")
        np.testing.assert_allclose(s.score, [0.3, 0.9], rtol=1e-6)
        with pytest.raises(InvalidInput, match="already registered"):
            sc.register("importance_only")(lambda t, c: None)
    finally:
        del sc.SCORERS["importance_only"]


def test_default_scorer_comes_from_config():
    t = make_table(bm25=[2.0], cosine=[0.1])
    assert sc.score(t, CFG.replace(**{"fusion.scorer": "bm25"})).score[0] == 2.0


def test_missing_column_and_nan_input_are_errors():
    t = make_table(cosine=[0.5]).drop(columns=["lexical"])
    with pytest.raises(InvalidInput, match="missing feature column 'lexical'"):
        sc.score(t, CFG)
    t = make_table(cosine=[0.5], importance=[np.nan])
    with pytest.raises(InvalidInput, match="table.importance.*NaN"):
        sc.score(t, CFG)


def test_empty_table_scores_to_empty_arrays():
    for name in sc.SCORERS:
        s = sc.score(make_table(cosine=[]), CFG, scorer=name)
        assert len(s) == 0 and s.eligible.shape == (0,)


# -- batch == one query at a time (the live recall and the benchmark agree) ------------------------
def _random_table(rng, n_queries, per_query):
    n = n_queries * per_query
    qid = np.repeat(np.arange(n_queries), per_query)
    rng.shuffle(qid)
    cos = rng.uniform(-0.2, 1.0, n)
    cos[rng.random(n) < 0.2] = np.nan
    return make_table(
        qid=qid, row=np.arange(n), cosine=cos, lexical=rng.random(n), bm25=rng.random(n) * 5,
        dense_rank=rng.integers(0, 20, n), lexical_rank=rng.integers(0, 20, n),
        importance=rng.random(n), access_count=rng.integers(0, 5, n),
        mention_count=rng.integers(1, 4, n), age_days=rng.random(n) * 200,
        since_access_days=rng.random(n) * 100, event_time=rng.random(n) * 1e9,
        emotion_max=rng.random(n) * 100, layer=rng.integers(0, 3, n),
        cognitive=rng.integers(0, 3, n), pinned=rng.random(n) < 0.05,
        entity_matches=rng.integers(0, 3, n), intent=rng.choice([0, 1, 2, 4, 8, 9], n),
        tree_distance=rng.integers(0, 6, n), text_len=rng.integers(10, 400, n))


@pytest.mark.parametrize("name", ["reverie", "generative_agents", "rrf", "dialog_tree"])
def test_batch_scores_equal_per_query_scores(name):
    rng = np.random.default_rng(7)
    t = _random_table(rng, 12, 15)
    cfg = CFG.replace(**{"temporal.first_boost": 0.05, "recall.relevance_floor": 0.2})
    batch = sc.score(t, cfg, scorer=name)
    for q in range(12):
        mask = t["qid"].to_numpy() == q
        one = sc.score(t[mask].reset_index(drop=True), cfg, scorer=name)
        np.testing.assert_allclose(batch.score[mask], one.score)
        np.testing.assert_array_equal(batch.relevant[mask], one.relevant)
    np.testing.assert_allclose(_additive_sum(batch), batch.score)


def test_temporal_score_follows_intent_by_default():
    # 'intent' mode: recency 2^(-15/30) under a recent intent (1), 1 - it under a historical
    # intent (2), 0 without a temporal cue
    recency = 2 ** (-15 / 30)
    s = sc.score(_hand_row(intent=[0, 1, 2]), CFG, scorer="reverie")
    assert s.components["temporal"] == pytest.approx([0.0, recency, 1 - recency])
    # the ±0.08 intent boost is separate: age 15 < 30 days is 'new'
    assert s.components["intent_term"] == pytest.approx([0.0, 0.08, -0.08])


def test_relevance_baseline_rescales_cosine():
    cfg = CFG.replace(**{"fusion.relevance_baseline": 0.7})
    s = sc.score(_hand_row(cosine=[0.85, 0.6, 1.0]), cfg, scorer="reverie")
    # (0.85 - 0.7) / 0.3 = 0.5; below the baseline clips to 0; 1 stays 1
    assert s.components["relevance"] == pytest.approx([0.5, 0.0, 1.0])
    assert s.components["relevance_term"] == pytest.approx([0.31, 0.0, 0.62])

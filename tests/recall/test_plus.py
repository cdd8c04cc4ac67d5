"""memlab.recall.plus: the reverie_plus scorer's terms, each worked out by hand, and memlab fit
learning their weights (issue 21, item 2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from memlab.bench.replay import ROWS_PER_CONVERSATION, Replayed
from memlab.config import MemlabConfig
from memlab.errors import ConfigError
from memlab.recall import score as sc
from memlab.recall.features import Features, make_columns, make_table
from memlab.recall.plus import PLUS_TERMS

BASE = MemlabConfig().replace(**{"recall.floor_mode": "absolute", "recall.relevance_floor": 0.0,
                                 "recall.session_context": True,
                                 "fusion.scorer": "reverie_plus"})
WHO, HOW_MANY, MULTI = 1, 8, 64      # q_type bits (memlab.recall.qtype)


def _table():
    """Four rows of one question; every plus signal worked by hand below."""
    return make_table(
        cosine=[0.8, 0.6, 0.5, 0.7], lexical=[0.5, 0.0, 0.2, 0.1], importance=[0.6] * 4,
        age_days=[3.0, 10.0, 40.0, 1.0], since_access_days=[3.0, 10.0, 40.0, 1.0],
        dense_z=[1.5, -0.5, np.nan, 0.25], bm25_z=[2.0, np.nan, -1.0, 0.0],
        nb1_dense=[1.0, 0.2, np.nan, -0.4], nb1_bm25=[0.5, 0.6, 1.0, np.nan],
        sess_best=[2.5, 0.5, np.nan, 1.0],
        q_window_days=[1.0] * 4, window_dist_days=[0.0, 7.0, 14.0, np.nan],
        speaker_named=[1, -1, 0, 1], q_type=[MULTI, MULTI | WHO, HOW_MANY, WHO])


WEIGHTS = {"fusion.dense_z": 0.2, "fusion.bm25_z": 0.1, "fusion.neighbour": 0.4,
           "fusion.session": 0.05, "fusion.window": 0.3, "fusion.speaker": 0.25,
           "fusion.context_typed": 0.5}


def test_each_term_by_hand():
    s = sc.score(_table(), BASE.replace(**WEIGHTS))
    c = s.components
    # dense_z * 0.2; NaN (no cosine z) adds 0
    assert c["dense_z_term"] == pytest.approx([0.3, -0.1, 0.0, 0.05])
    # bm25_z * 0.1; NaN adds 0
    assert c["bm25_z_term"] == pytest.approx([0.2, 0.0, -0.1, 0.0])
    # neighbour = (nb1_dense + nb1_bm25) / 2: 0.75, 0.4, NaN (no dense neighbour) -> 0, NaN -> 0
    assert c["neighbour_term"] == pytest.approx([0.4 * 0.75, 0.4 * 0.4, 0.0, 0.0])
    assert c["session_term"] == pytest.approx([0.125, 0.025, 0.0, 0.05])
    # 2^(-d / 7): inside the window 1, a week away 1/2, two weeks 1/4, no window (NaN) 0
    assert c["window_term"] == pytest.approx([0.3, 0.15, 0.075, 0.0])
    assert c["speaker_term"] == pytest.approx([0.25, -0.25, 0.0, 0.25])
    # multi or how_many questions only (the default context_types): rows 0, 1 (multi|who), 2
    # (how_many, neighbour unknown -> 0); row 3 is a who question: 0
    assert c["context_typed_term"] == pytest.approx([0.5 * 0.75, 0.5 * 0.4, 0.0, 0.0])


def test_score_is_reverie_plus_the_terms():
    cfg = BASE.replace(**WEIGHTS)
    plus = sc.score(_table(), cfg)
    rev = sc.score(_table(), cfg, scorer="reverie")
    extra = sum(plus.components[t] for t in PLUS_TERMS)
    assert plus.score == pytest.approx(rev.score + extra)
    assert plus.additive == rev.additive + tuple(PLUS_TERMS)
    assert plus.score == pytest.approx(sum(plus.components[t] for t in plus.additive))
    np.testing.assert_array_equal(plus.relevant, rev.relevant)
    np.testing.assert_array_equal(plus.eligible, rev.eligible)


def test_at_the_defaults_reverie_plus_is_reverie():
    plus = sc.score(_table(), BASE)
    rev = sc.score(_table(), BASE, scorer="reverie")
    np.testing.assert_array_equal(plus.score, rev.score)
    assert all(not plus.components[t].any() for t in PLUS_TERMS)


def test_context_types_choose_the_questions():
    cfg = BASE.replace(**{"fusion.context_typed": 1.0, "fusion.context_types": ["who"]})
    c = sc.score(_table(), cfg).components["context_typed_term"]
    assert c == pytest.approx([0.0, 0.4, 0.0, 0.0])       # who: rows 1 and 3 (row 3 unknown)
    with pytest.raises(ConfigError, match="fusion.context_types"):
        BASE.replace(**{"fusion.context_types": ["when"]})


@pytest.mark.parametrize("weight,gate", [("fusion.neighbour", "recall.session_context"),
                                         ("fusion.session", "recall.session_context"),
                                         ("fusion.dense_z", "recall.zscore_signals"),
                                         ("fusion.window", "query.time_expressions"),
                                         ("fusion.speaker", "query.speakers")])
def test_a_weight_on_a_signal_gated_off_is_refused(weight, gate):
    cfg = BASE.replace(**{weight: 0.5, gate: False})
    with pytest.raises(ConfigError) as e:
        sc.score(_table(), cfg)
    assert e.value.key == gate
    sc.score(_table(), cfg.replace(**{weight: 0.0}))       # weight 0: the gate is not needed


def _synth(seed: int = 0) -> Replayed:
    """Questions whose gold row is the argmax of 4 * (cosine + dense_z) + Gumbel noise;
    speaker_named is noise."""
    rng = np.random.default_rng(seed)
    cols = {k: [] for k in ("qid", "row", "cosine", "dense_z", "bm25_z", "speaker_named",
                            "text_len")}
    questions, row_item, qid = [], {}, 0
    for c in range(4):
        for j in range(40):
            n = 20
            cos, dz = rng.uniform(0, 1, n), rng.uniform(-1, 1, n)
            gold = int(np.argmax(4.0 * (cos + dz) + rng.gumbel(size=n)))
            rows = c * ROWS_PER_CONVERSATION + qid * 100 + np.arange(n)
            row_item.update({int(r): f"i{r}" for r in rows})
            cols["qid"] += [qid] * n
            cols["row"] += rows.tolist()
            cols["cosine"] += cos.tolist()
            cols["dense_z"] += dz.tolist()
            cols["bm25_z"] += [0.0] * n
            cols["speaker_named"] += rng.integers(-1, 2, n).tolist()
            cols["text_len"] += [10] * n
            questions.append({"query_id": f"q{j}", "conversation_id": f"c{c}", "category": "x",
                              "evidence": [f"i{rows[gold]}"]})
            qid += 1
    table = make_columns(**cols)
    feats = Features(columns=table, terms={int(r): frozenset({f"t{r}"}) for r in table["row"]})
    return Replayed(feats, pd.DataFrame(questions), row_item, {r: "s" for r in row_item})


def test_memlab_fit_learns_the_plus_weights():
    """The linear fit recovers dense_z's weight relative to relevance's (1:1 in the data), gives
    the noise signal (speaker) little, and learns no term whose signal is gated off."""
    from memlab.tune.fit import build_design, fit_linear, terms_for

    cfg = BASE.replace(**{"recall.session_context": False})
    feats = {t.feature for t in terms_for(cfg)}
    assert {"dense_z", "bm25_z", "window", "speaker"} <= feats
    assert not feats & {"neighbour", "session", "context_typed"}
    lin = fit_linear(build_design(_synth(), cfg), cfg)
    ratio = lin.weights["fusion.dense_z"] / lin.weights["fusion.relevance"]
    assert 0.6 < ratio < 1.6, lin.weights
    assert lin.weights["fusion.speaker"] < 0.2 * lin.weights["fusion.dense_z"]
    assert lin.config.fusion.scorer == "reverie_plus"
    assert math.isclose(sum(lin.weights[k] for k in ("fusion.relevance", "fusion.lexical",
                                                     "fusion.importance", "fusion.frequency",
                                                     "fusion.temporal", "fusion.emotion")),
                        1.24, rel_tol=1e-6)

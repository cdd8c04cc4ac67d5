"""memlab.recall.select against Reverie §8 (budget, dedup, k) and §11.2 (oldest first)."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.features import make_table
from memlab.recall.score import Scored, score
from memlab.recall.select import SelectTrace, explain_frame, select

CFG = MemlabConfig().replace(**{"recall.floor_mode": "absolute",   # floor off: pure formulas
                                "recall.relevance_floor": 0.0})


def _scored(scores, *, eligible=None, relevant=None):
    s = np.asarray(scores, dtype=float)
    n = len(s)
    return Scored(s, np.ones(n, bool) if eligible is None else np.asarray(eligible),
                  np.ones(n, bool) if relevant is None else np.asarray(relevant),
                  {"score_copy": s}, ("score_copy",), "hand")


def _terms(n):
    """Disjoint term sets, one per row (no dedup unless a test says otherwise)."""
    return {r: frozenset({f"m{r}"}) for r in range(n)}


def _sel(table, scored, k=10, cfg=CFG, terms=None):
    return [a.tolist() for a in select(table, scored, terms=terms or _terms(len(table)), k=k,
                                       cfg=cfg)]


def test_orders_by_score_then_importance_stably():
    t = make_table(importance=[0.3, 0.9, 0.5, 0.5], text_len=[10] * 4)
    # rows 0 and 1 tie on score 0.7: importance 0.9 first; rows 2, 3 tie on both: table order
    assert _sel(t, _scored([0.7, 0.7, 0.4, 0.4])) == [[1, 0, 2, 3]]


def test_keeps_only_eligible_and_relevant():
    t = make_table(text_len=[10] * 4)
    s = _scored([0.9, 0.8, 0.7, 0.6], eligible=[True, False, True, True],
                relevant=[True, True, False, True])
    assert _sel(t, s) == [[0, 3]]


def test_k_and_max_one():
    t = make_table(text_len=[10] * 5)
    s = _scored([0.1, 0.5, 0.3, 0.9, 0.2])
    assert _sel(t, s, k=2) == [[3, 1]]
    assert _sel(t, s, k=0) == [[3]]   # max(1, k)
    with pytest.raises(InvalidInput, match="k"):
        select(t, s, terms=_terms(5), k=2.5, cfg=CFG)


def test_dedup_at_jaccard_082_is_duplicate_080_is_not():
    a = frozenset(f"t{i}" for i in range(50))
    b = frozenset(f"t{i}" for i in range(41))   # |a∩b| / |a∪b| = 41/50 = 0.82 -> duplicate
    c = frozenset(f"t{i}" for i in range(40))   # 40/50 = 0.80 < 0.82 -> kept
    assert len(a & b) / len(a | b) == 0.82
    t = make_table(text_len=[10] * 3)
    s = _scored([0.9, 0.8, 0.7])
    assert _sel(t, s, terms={0: a, 1: b, 2: c}) == [[0, 2]]
    # but b and c are 40/41 = 0.976 alike: with b skipped, c only meets a -> kept


def test_char_budget_skips_long_memory_and_keeps_walking():
    # 3000 fits; 3000 + 1000 > 3600 skipped; 3000 + 500 = 3500 fits; + 100 = 3600 fits exactly
    t = make_table(text_len=[3000, 1000, 500, 100, 1])
    assert _sel(t, _scored([0.9, 0.8, 0.7, 0.6, 0.5])) == [[0, 2, 3]]
    # a memory longer than the whole budget never fits
    t = make_table(text_len=[5000, 20])
    assert _sel(t, _scored([0.9, 0.8])) == [[1]]


def test_permanent_limit_keeps_the_best_permanent_rows():
    cfg = CFG.replace(**{"recall.permanent_limit": 1})
    t = make_table(layer=[0, 0, 1, 0], text_len=[10] * 4)
    # permanent rows 0 (0.5), 1 (0.9), 3 (0.7): only row 1 stays; row 2 is long term
    assert _sel(t, _scored([0.5, 0.9, 0.6, 0.7]), cfg=cfg) == [[1, 2]]
    assert _sel(t, _scored([0.5, 0.9, 0.6, 0.7]),
                cfg=CFG.replace(**{"recall.permanent_limit": 0})) == [[2]]


def test_oldest_first_reorders_selected_for_first_questions():
    t = make_table(intent=[8] * 4, event_time=[300.0, 100.0, 200.0, 50.0], text_len=[10] * 4)
    s = _scored([0.9, 0.8, 0.7, 0.1])
    # chosen by score (k=3): rows 0, 1, 2; then oldest first: 100 (row 1), 200 (row 2), 300 (row 0)
    assert _sel(t, s, k=3) == [[1, 2, 0]]
    assert _sel(t, s, k=3, cfg=CFG.replace(**{"temporal.oldest_first": False})) == [[0, 1, 2]]
    assert _sel(t, s, k=3, cfg=CFG.replace(**{"temporal.enabled": False})) == [[0, 1, 2]]
    # intent 9 = recent + first: still a 'first' question
    t9 = make_table(intent=[9] * 4, event_time=[300.0, 100.0, 200.0, 50.0], text_len=[10] * 4)
    assert _sel(t9, s, k=3) == [[1, 2, 0]]
    # no first bit: score order
    t0 = make_table(intent=[4] * 4, event_time=[300.0, 100.0, 200.0, 50.0], text_len=[10] * 4)
    assert _sel(t0, s, k=3) == [[0, 1, 2]]


def test_one_array_per_qid_including_gaps_and_shuffled_rows():
    t = make_table(qid=[2, 0, 2, 0], text_len=[10] * 4)
    out = select(t, _scored([0.1, 0.2, 0.9, 0.8]), terms=_terms(4), k=5, cfg=CFG)
    assert [a.tolist() for a in out] == [[3, 1], [], [2, 0]]
    assert all(a.dtype == np.int64 for a in out)
    assert select(make_table(cosine=[]), _scored([]), terms={}, k=3, cfg=CFG) == []


def test_positions_are_table_positions_and_terms_are_keyed_by_row():
    t = make_table(row=[70, 80], text_len=[10, 10])
    out = select(t, _scored([0.2, 0.9]), terms={70: frozenset("a"), 80: frozenset("b")}, k=5,
                 cfg=CFG)
    assert out[0].tolist() == [1, 0]
    with pytest.raises(InvalidInput, match="terms.*80"):
        select(t, _scored([0.2, 0.9]), terms={70: frozenset("a")}, k=5, cfg=CFG)


def test_mismatched_scored_is_an_error():
    with pytest.raises(InvalidInput, match="scored"):
        select(make_table(text_len=[1, 2]), _scored([0.1]), terms=_terms(2), k=1, cfg=CFG)


def test_end_to_end_forgotten_weak_memory_is_skipped_strong_cue_and_permanent_kept():
    # short term, importance 0, 70 days since access: retention ~2.5e-9
    t = make_table(cosine=[0.3, 0.9, 0.3, 0.6], layer=[2, 2, 0, 1], importance=[0.0, 0.0, 0.0, 0.5],
                   since_access_days=[70.0, 70.0, 70.0, 1.0], text_len=[20] * 4)
    s = score(t, CFG)
    out = select(t, s, terms=_terms(4), k=10, cfg=CFG)
    assert sorted(out[0].tolist()) == [1, 2, 3]     # row 0 forgotten (retention < 0.05, cue 0.3)


def test_explain_frame_lists_every_component():
    t = make_table(cosine=[0.2, 0.9], importance=[0.4, 0.6], text_len=[5, 6], row=[10, 11])
    s = score(t, CFG)
    pos = select(t, s, terms={10: frozenset("x"), 11: frozenset("y")}, k=5, cfg=CFG)[0]
    df = explain_frame(t, s, pos, {10: "m10", 11: "m11"}, {10: "hello", 11: "world!"})
    assert df["rank"].tolist() == [1, 2]
    assert df["id"].tolist() == ["m11", "m10"]
    assert df["text"].tolist() == ["world!", "hello"]
    assert set(s.components) <= set(df.columns)
    np.testing.assert_allclose(df[list(s.additive)].sum(axis=1), df["score"])
    with pytest.raises(InvalidInput, match="ids"):
        explain_frame(t, s, pos, {10: "m10"}, None)
    with pytest.raises(InvalidInput, match="positions"):
        explain_frame(t, s, [5], None, None)


def test_explain_frame_of_an_empty_recall():
    df = explain_frame(make_table(cosine=[]), None, np.zeros(0, int), {}, {})
    assert df.empty and list(df.columns) == ["rank", "qid", "row", "id", "text", "score"]
    with pytest.raises(InvalidInput, match="scored"):
        explain_frame(make_table(cosine=[0.1]), None, [0], None, None)


# ----------------------------------------------------------------------------- the walk's trace

def test_trace_records_budget_and_dedup_skips_with_the_picks_before_them():
    # rows by score: 0 (3000 chars), 1 (1000: 3000 + 1000 > 3600, budget), 2 (duplicate of 0),
    # 3 (kept), 4 (after k = 2 picks: not walked)
    t = make_table(text_len=[3000, 1000, 10, 10, 10])
    s = _scored([0.9, 0.8, 0.7, 0.6, 0.5])
    terms = {0: frozenset("ab"), 1: frozenset("c"), 2: frozenset("ab"), 3: frozenset("d"),
             4: frozenset("e")}
    tr = SelectTrace()
    out = select(t, s, terms=terms, k=2, cfg=CFG, trace=tr)
    assert [a.tolist() for a in out] == [[0, 3]]
    assert tr.skipped == {1: ("budget", 1), 2: ("dedup", 1)}
    assert tr.order.tolist() == [0, 1, 2, 3, 4]


def test_trace_order_is_after_the_gates_and_the_permanent_cap():
    cfg = CFG.replace(**{"recall.permanent_limit": 1})
    t = make_table(qid=[0, 0, 0, 1, 1], layer=[0, 0, 1, 1, 1], text_len=[10] * 5)
    s = _scored([0.9, 0.8, 0.7, 0.2, 0.6], eligible=[True, True, True, False, True])
    tr = SelectTrace()
    select(t, s, terms=_terms(5), k=5, cfg=cfg, trace=tr)
    # row 1: the second permanent row of qid 0 (cap 1); row 3: not eligible
    assert tr.order.tolist() == [0, 2, 4] and tr.skipped == {}


def test_the_trace_does_not_change_the_selection():
    rng = np.random.default_rng(7)
    n = 400
    t = make_table(qid=np.sort(rng.integers(0, 20, n)), layer=rng.integers(0, 3, n),
                   importance=rng.random(n), text_len=rng.integers(50, 900, n))
    s = _scored(rng.random(n), eligible=rng.random(n) > 0.1, relevant=rng.random(n) > 0.1)
    terms = {r: frozenset(rng.choice(list("abcdefg"), 3)) for r in range(n)}
    cfg = CFG.replace(**{"recall.permanent_limit": 2})
    plain = select(t, s, terms=terms, k=8, cfg=cfg)
    tr = SelectTrace()
    traced = select(t, s, terms=terms, k=8, cfg=cfg, trace=tr)
    assert [a.tolist() for a in plain] == [a.tolist() for a in traced]
    assert {why for why, _ in tr.skipped.values()} == {"budget", "dedup"}
    assert all(before < 8 for _, before in tr.skipped.values())

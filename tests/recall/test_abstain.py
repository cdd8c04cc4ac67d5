"""memlab.recall.abstain and memlab.tune.abstainfit: the per-query "nothing relevant" decision
(issue 21, item 3): query features worked by hand, the model file, recall.floor_mode 'learned' in
live recall (zh and en), the abstention table by hand and the k-fold by conversation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.recall import abstain as A
from memlab.tune import abstainfit as F

HASHING = MemlabConfig().replace(**{"embedding.backend": "hashing",
                                    "recall.background_calibration": "same_language"})


def _table(rows):
    cols = ("qid", "cosine", "q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std", "lexical", "bm25",
            "entity_matches", "dense_z", "fused_z", "q_type", "q_lang")
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


NO_TYPE = {f: 0.0 for f in A.TYPE_FEATURES}


def test_query_features_worked_by_hand():
    """Backgrounds: query side 0.5 +- 0.1, memory side 0.4 +- 0.2. qid 0 (q_type 18 = what 2 +
    yes_no 16): cosine 0.8 (z_query 3, z_memory 2: z 2; dense_z 1.2, fused_z 0.9), 0.6 (1, 1: 1;
    -0.3, 0.4) and a lexical-only row (no cosine, dense_z NaN, fused_z 1.1); qid 1: no row; qid 2
    (q_type 1 = who): cosine 0.55 (0.5, 0.75: 0.5; dense_z 0, fused_z NaN) alone."""
    t = _table([(0, 0.8, 0.5, 0.1, 0.4, 0.2, 0.2, 1.0, 0, 1.2, 0.9, 18, 0),
                (0, 0.6, 0.5, 0.1, 0.4, 0.2, 0.0, 0.5, 0, -0.3, 0.4, 18, 0),
                (0, np.nan, np.nan, np.nan, np.nan, np.nan, 0.5, 3.0, 1, np.nan, 1.1, 18, 0),
                (2, 0.55, 0.5, 0.1, 0.4, 0.2, 0.0, 0.0, 0, 0.0, np.nan, 1, 1)])
    f = A.query_features(t)
    assert list(f.columns) == list(A.QUERY_FEATURES) and len(f) == 3
    assert f.loc[0].to_dict() == pytest.approx({"best_z": 2.0, "best_zq": 3.0, "best_zm": 2.0,
                                                "z_gap": 1.0, "best_lexical": 0.5,
                                                "best_bm25": 3.0, "best_entity": 1.0,
                                                "best_dense_z": 1.2, "best_fused_z": 1.1,
                                                **NO_TYPE, "q_what": 1.0, "q_yes_no": 1.0})
    assert f.loc[1].to_dict() == A.NOTHING
    assert f.loc[2].to_dict() == pytest.approx({"best_z": 0.5, "best_zq": 0.5, "best_zm": 0.75,
                                                "z_gap": 0.0, "best_lexical": 0.0,
                                                "best_bm25": 0.0, "best_entity": 0.0,
                                                "best_dense_z": 0.0, "best_fused_z": -10.0,
                                                **NO_TYPE, "q_who": 1.0})
    assert A.TYPE_FEATURES == ("q_who", "q_what", "q_where", "q_how_many", "q_yes_no",
                               "q_why_how", "q_multi")
    # the language per qid (a query without a row: mixed/unknown, BOTH)
    assert A.query_languages(t, 4).tolist() == [0, 2, 1, 2]
    assert len(A.query_features(t, 5)) == 5 and A.query_features(t, 5).loc[4, "best_z"] == -10


def _synthetic_model():
    """P(answerable) rising with best_z: answerable exactly when best_z > 1."""
    rng = np.random.default_rng(0)
    feats = pd.DataFrame({f: rng.normal(size=400) for f in A.QUERY_FEATURES})
    feats["best_z"] = rng.uniform(-2, 4, size=400)
    return A.fit_abstention(feats, feats["best_z"].to_numpy() > 1), feats


def test_the_model_file_round_trips_and_refuses_what_it_is_not(tmp_path):
    model, feats = _synthetic_model()
    path = A.save_abstain_model(model, tmp_path / "a.skops", features=A.QUERY_FEATURES,
                                dataset={"name": "synthetic"}, trained={"questions": 400})
    got = A.load_abstain_model(path)
    assert got.manifest["dataset"] == {"name": "synthetic"} and got.features == A.QUERY_FEATURES
    np.testing.assert_allclose(got.p_answerable(feats), model.predict_proba(
        feats[list(A.QUERY_FEATURES)].to_numpy())[:, 1])
    with pytest.raises(ConfigError, match="recall.abstain_model"):
        A.load_abstain_model(tmp_path / "missing.skops")
    (tmp_path / "bad.skops").write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="not a memlab abstention model"):
        A.load_abstain_model(tmp_path / "bad.skops")
    with pytest.raises(ConfigError, match="query features"):
        A.save_abstain_model(model, tmp_path / "c.skops", features=["cosine"])


ZH_MEMORIES = ["我最喜欢的游戏是星露谷物语", "我对咖啡因过敏", "我女儿叫小雨"]
EN_MEMORIES = ["My favourite game is Stardew Valley", "I am allergic to caffeine",
               "My daughter is called Xiaoyu"]
QUESTIONS = ["我最喜欢什么游戏", "我对什么过敏", "量子物理的最新进展", "明天的天气怎么样",
             "What is my favourite game", "What am I allergic to", "Latest advances in quantum physics",
             "What's the weather like tomorrow"]


@pytest.mark.parametrize("threshold", [0.5, 0.0, 1.0])
def test_learned_floor_answers_a_question_exactly_when_the_model_says_so(tmp_path, threshold):
    """recall.floor_mode 'learned' in live recall, zh and en: a question gets a memory iff the
    model's P(answerable) of its query features >= the threshold; answered, it gets the zscore
    floor's rows and at least its best one; threshold 1 refuses everything, 0 answers
    everything."""
    model, _ = _synthetic_model()
    path = A.save_abstain_model(model, tmp_path / "a.skops", features=A.QUERY_FEATURES)
    cfg = HASHING.replace(**{"recall.floor_mode": "learned", "recall.abstain_model": str(path),
                             "recall.abstain_threshold": threshold})
    z_cfg = HASHING
    clock = FixedClock(1_750_000_000)
    decided = {}
    with memlab.open_store(":memory:", config=cfg, clock=clock) as st, \
            memlab.open_store(":memory:", config=z_cfg, clock=clock) as zst:
        for text in ZH_MEMORIES + EN_MEMORIES:
            st.add(text, importance=0.6)
            zst.add(text, importance=0.6)
        for q in QUESTIONS:
            p = model.predict_proba(A.query_features(st.features([q], k=5, now=clock.now()).table, 1)
                                    [list(A.QUERY_FEATURES)].to_numpy())[0, 1]
            res = st.recall(q, k=5)
            decided[q] = bool(len(res))
            assert decided[q] == (p >= threshold), q
            if decided[q]:   # the zscore floor's rows, or its best one when none passes
                floor_rows = zst.recall(q, k=5).texts
                assert set(floor_rows) <= set(res.texts)
                assert len(res) >= 1 and (floor_rows or len(res) == 1)
            else:
                assert "relevance floor" in res.empty_reason
    if threshold == 0.5:   # the model tells the questions apart, in both languages
        assert decided["我最喜欢什么游戏"] and not decided["量子物理的最新进展"]
        assert decided["What is my favourite game"] and not decided["Latest advances in quantum physics"]
    else:
        assert set(decided.values()) == {threshold == 0.0}


def test_learned_floor_without_a_model_is_named():
    cfg = HASHING.replace(**{"recall.floor_mode": "learned"})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(1_750_000_000)) as st:
        st.add("我最喜欢的游戏是星露谷物语")
        with pytest.raises(ConfigError, match="recall.abstain_model"):
            st.recall("我最喜欢什么游戏")


def test_abstention_table_worked_by_hand():
    """zh: 2 unanswerable (p 0.2, 0.7), 2 answerable (0.9, 0.4); en: 1 unanswerable (0.1),
    1 answerable (0.8). At 0.5: zh refuses 0.2 (unanswerable) and 0.4 (answerable): abstention
    1/2, precision 1/2, answered 1/2; en refuses 0.1: 1, 1, 1."""
    frame = pd.DataFrame({"answerable": [False, False, True, True, False, True],
                          "language": ["zh", "zh", "zh", "zh", "en", "en"]})
    t = F.abstention_table(frame, np.array([0.2, 0.7, 0.9, 0.4, 0.1, 0.8]), 0.5)
    assert t.loc["zh", ["abstention", "precision", "answered"]].tolist() == [0.5, 0.5, 0.5]
    assert t.loc["en", ["abstention", "precision", "answered"]].tolist() == [1.0, 1.0, 1.0]
    assert t.loc["all", ["abstention", "precision", "answered"]].tolist() == \
        pytest.approx([2 / 3, 2 / 3, 2 / 3])
    assert t.loc["all", "n_unanswerable"] == 3


def test_kfold_predicts_each_conversation_from_the_others():
    """Conversation c's questions are scored by a model of the other conversations': the one
    conversation whose labels are flipped relative to the three others is predicted wrong (a
    model that had seen it would get some right), the others right."""
    rng = np.random.default_rng(1)
    n = 200
    frame = pd.DataFrame({f: rng.normal(size=4 * n) for f in A.QUERY_FEATURES})
    frame["conversation"] = np.repeat(["a", "b", "c", "d"], n)
    frame["language"] = "en"
    frame["answerable"] = frame["best_z"] > 0
    flipped = frame["conversation"] == "c"
    frame.loc[flipped, "answerable"] = ~frame.loc[flipped, "answerable"]
    r = F.kfold(frame)
    for c in "abcd":   # each conversation's p: a model of the three others' questions
        test = (frame["conversation"] == c).to_numpy()
        m = A.fit_abstention(frame[~test], frame["answerable"].to_numpy()[~test])
        np.testing.assert_allclose(r.p[test], m.predict_proba(
            frame.loc[test, list(A.QUERY_FEATURES)].to_numpy())[:, 1])
    right = (r.p >= 0.5) == frame["answerable"].to_numpy()
    assert right[~flipped.to_numpy()].mean() > 0.8 and right[flipped.to_numpy()].mean() < 0.2
    with pytest.raises(InvalidInput):
        F.kfold(frame[frame["conversation"] == "a"])


def test_thresholds_of_the_config_per_language():
    rc = MemlabConfig().recall
    assert A.thresholds_of(rc) == {0: 0.5, 1: 0.5, 2: 0.5}
    rc = MemlabConfig().replace(**{"recall.abstain_threshold_zh": 0.3,
                                   "recall.abstain_threshold": 0.6}).recall
    assert A.thresholds_of(rc) == {0: 0.3, 1: 0.6, 2: 0.6}


def test_answer_mask_uses_the_threshold_of_each_querys_language():
    """One model, two queries of identical features, one zh (q_lang 0) and one en (1): P is the
    same for both, so a zh threshold below P and an en threshold above it answer only the zh
    query; a single threshold treats them alike."""
    model, _ = _synthetic_model()
    m = A.AbstainModel(model, {"features": list(A.QUERY_FEATURES)})
    row = (0.8, 0.5, 0.1, 0.4, 0.2, 0.2, 1.0, 0, 1.2, 0.9, 2)
    t = _table([(0, *row, 0), (1, *row, 1)])
    p = m.p_answerable(A.query_features(t))
    assert p[0] == p[1] and 0.01 < p[0] < 0.99
    assert A.answer_mask(t, m, {0: p[0] - 0.01, 1: p[0] + 0.01, 2: 0.5}).tolist() == [True, False]
    assert A.answer_mask(t, m, float(p[0]) + 0.01).tolist() == [False, False]
    # a model reading the z columns refuses a table without them (recall.zscore_signals off)
    off = t.assign(dense_z=np.nan, fused_z=np.nan)
    with pytest.raises(ConfigError, match="recall.zscore_signals"):
        A.answer_mask(off, m, 0.5)


def test_choose_threshold_worked_by_hand():
    """10 answerable P's 0.1 .. 1.0: answering 0.97 of them needs 10 (ceil 9.7): the lowest, 0.1;
    0.9 needs 9: 0.2; 0.75 needs 8 (ceil 7.5): 0.3; none needed: 1.0 (refuse what one can)."""
    p = np.arange(1, 11) / 10
    rng = np.random.default_rng(3)
    shuffled = rng.permutation(p)
    assert F.choose_threshold(shuffled, 0.97) == pytest.approx(0.1)
    assert F.choose_threshold(shuffled, 0.9) == pytest.approx(0.2)
    assert F.choose_threshold(shuffled, 0.75) == pytest.approx(0.3)
    assert F.choose_threshold(shuffled, 0.0) == 1.0
    assert F.choose_threshold(np.zeros(0), 0.97) == 0.0
    assert (p >= F.choose_threshold(p, 0.9)).mean() >= 0.9


def test_kfold_thresholds_come_from_the_training_folds_only():
    """With answered, each conversation's threshold is the one language_thresholds picks from
    the other conversations' own leave-one-out predictions; extra (off-topic) rows train but are
    not counted in the table."""
    rng = np.random.default_rng(2)
    n = 40
    frame = pd.DataFrame({f: rng.normal(size=4 * n) for f in A.QUERY_FEATURES})
    frame["conversation"] = np.repeat(["a", "b", "c", "d"], n)
    frame["language"] = np.tile(["zh", "en"], 2 * n)
    frame["answerable"] = frame["best_z"] + rng.normal(scale=0.5, size=4 * n) > -0.5
    frame["extra"] = False
    frame.loc[frame.index % 10 == 0, ["extra", "answerable"]] = [True, False]
    r = F.kfold(frame, answered=0.9)
    for c in "abcd":
        test = (frame["conversation"] == c).to_numpy()
        train = frame[~test].reset_index(drop=True)
        want = F.language_thresholds(train, F.loco_predictions(train, 1.0, A.QUERY_FEATURES),
                                     0.9)
        got = dict(zip(frame.loc[test, "language"], r.threshold[test]))
        assert got == {"zh": want["zh"], "en": want["en"]}
    t = r.table()
    own = ~frame["extra"]
    assert t.loc["all", "n_unanswerable"] == int((own & ~frame["answerable"]).sum())
    assert t.loc["all", "n_answerable"] == int(frame["answerable"].sum())


def test_the_q_lang_column_of_live_recall_zh_and_en():
    """The candidates stage writes the question's language per row: a Chinese question 0, an
    English one 1, a mixed one (2 CJK characters and 1 Latin word: share 2/3) 2."""
    with memlab.open_store(":memory:", config=HASHING, clock=FixedClock(1_750_000_000)) as st:
        for text in ZH_MEMORIES + EN_MEMORIES:
            st.add(text, importance=0.6)
        t = st.features(["我最喜欢什么游戏", "What is my favourite game", "Stardew 游戏"], k=5,
                        now=1_750_000_000).table
    by_q = t.groupby("qid")["q_lang"].agg(["min", "max"])
    assert by_q["min"].tolist() == [0, 1, 2] and by_q["max"].tolist() == [0, 1, 2]


def test_the_saved_model_records_the_thresholds_that_answer_abstain_answered(tmp_path):
    """fit_and_save with the recall section: the manifest's thresholds per language are the ones
    that answer recall.abstain_answered of that language's answerable questions under the
    training frame's leave-one-conversation-out predictions (ceil(0.75 * 40) = 30 of 40)."""
    rng = np.random.default_rng(3)
    n = 40
    frame = pd.DataFrame({f: rng.normal(size=4 * n) for f in A.QUERY_FEATURES})
    frame["conversation"] = np.repeat(["a", "b", "c", "d"], n)
    frame["language"] = np.tile(["zh", "en"], 2 * n)
    frame["answerable"] = frame["best_z"] > -0.5
    recall = MemlabConfig().replace(**{"recall.abstain_answered": 0.75}).recall
    path = F.fit_and_save(frame, tmp_path / "a.skops", dataset={"name": "synthetic"},
                          config={}, recall=recall)
    trained = A.load_abstain_model(path).manifest["trained"]
    p = F.loco_predictions(frame, 1.0, A.QUERY_FEATURES)
    assert trained["answered"] == 0.75
    for lang in ("zh", "en"):
        sel = (frame["answerable"] & (frame["language"] == lang)).to_numpy()
        thr = trained["thresholds"][lang]
        assert (p[sel] >= thr).sum() >= int(np.ceil(0.75 * sel.sum()))
        assert thr == F.choose_threshold(p[sel], 0.75)
    assert trained["thresholds"]["mixed"] == recall.abstain_threshold   # no mixed question
    no = F.fit_and_save(frame, tmp_path / "b.skops", dataset={}, config={})
    assert "thresholds" not in A.load_abstain_model(no).manifest["trained"]

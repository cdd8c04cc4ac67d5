"""Historical questions see superseded revisions (facts.historical_sees_superseded; reverie §6.1
fact_revision, §11.2 以前/used to): the dense route ranks the owner's old revisions with the
active memories for a question with historical intent only, on every read path (in-process index
or SQL, numpy or sqlite-vec dense index), and the prompt block labels them past."""

from __future__ import annotations

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig

T0 = 1_750_000_000.0
DAY = 86_400.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0, "facts.rule": "subject_attribute"})
LABEL = BASE.facts.past_label
CASES = [  # old statement, new statement, historical question, plain question
    ("我住在北京", "我住在上海", "我以前住在哪里？", "我住在哪里？"),
    ("I live in Boston", "I live in Chicago", "Where did I live before?", "Where do I live?"),
]
PATHS = [{}, {"store.memory_index": "sqlite"},
         {"store.memory_index": "sqlite", "store.read_index": "sqlite-vec"}]


def _revised(st, old: str, new: str):
    a = st.add(old, importance=0.8, clock=FixedClock(T0))
    b = st.add(new, importance=0.8, clock=FixedClock(T0 + DAY))
    assert b.supersedes == a.id and st.get([a.id])[0].lifecycle_state == "superseded"
    return a, b


@pytest.mark.parametrize("paths", PATHS, ids=["memindex", "sql", "sql+sqlite-vec"])
@pytest.mark.parametrize("old,new,historical,plain", CASES, ids=["zh", "en"])
def test_a_historical_question_sees_the_old_revision_labelled_past(tmp_path, paths, old, new,
                                                                   historical, plain):
    cfg = BASE.replace(**paths)
    with memlab.open_store(tmp_path / "s.sqlite", config=cfg, clock=FixedClock(T0 + 2 * DAY)
                           ) as st:
        a, b = _revised(st, old, new)
        for _ in range(2):                     # the second read loads the MemoryIndex
            got = st.recall(historical, k=10)
            assert set(got.ids) == {a.id, b.id}
            assert st.recall(plain, k=10).ids == [b.id]
        block = got.to_prompt()
        assert LABEL + old in block                          # the old revision: labelled past
        assert new in block and LABEL + new not in block     # the current one: not


@pytest.mark.parametrize("old,new,historical,plain", CASES, ids=["zh", "en"])
def test_the_old_revision_has_a_dense_rank_for_historical_questions_only(old, new, historical,
                                                                         plain):
    with memlab.open_store(":memory:", config=BASE, clock=FixedClock(T0)) as st:
        a, b = _revised(st, old, new)
        feats = st.features([historical, plain], k=10, now=T0 + 2 * DAY)
        t = feats.columns
        row_of = {i: r for r, i in feats.ids.items()}
        at = (t["qid"] == 0) & (t["row"] == row_of[a.id])
        assert at.sum() == 1 and t["dense_rank"][at][0] >= 1
        assert t["lexical_rank"][at][0] == 0                 # the lexical index: active only
        assert not ((t["qid"] == 1) & (t["row"] == row_of[a.id])).any()


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_dense_ranks_of_a_historical_question_are_one_ranking_by_cosine(lang):
    """Old revisions of several facts and active memories of graded similarity: the dense ranks
    follow the cosine over both, as one vector search over both would."""
    texts = {"zh": ["我以前住在北京的老胡同里", "我以前住在北京", "我以前养过一只猫", "我喜欢喝茶",
                    "周末去公园跑步", "我以前的工作是老师"],
             "en": ["I used to live in Boston before, in an old flat", "I lived in Boston before",
                    "I had a cat before", "I like tea", "Running in the park on weekends",
                    "Before, I worked as a teacher"]}[lang]
    question = {"zh": "我以前住在哪里？", "en": "Where did I live before?"}[lang]
    with memlab.open_store(":memory:", config=BASE, clock=FixedClock(T0)) as st:
        ids = [st.add(text, fact_key=f"k{i % 3}", importance=0.5, clock=FixedClock(T0 + i)).id
               for i, text in enumerate(texts)]
        assert [m.lifecycle_state for m in st.get(ids)] == ["superseded"] * 3 + ["active"] * 3
        t = st.features([question], k=10, now=T0 + DAY).columns
        ranked = np.flatnonzero(t["dense_rank"] > 0)
        order = ranked[np.argsort(t["dense_rank"][ranked])]
        assert sorted(t["dense_rank"][ranked].tolist()) == list(range(1, len(ranked) + 1))
        assert len(ranked) == len(texts)                     # old and new revisions alike
        cos = t["cosine"][order]
        assert len(set(np.round(cos, 6).tolist())) >= 4      # graded: the order is telling
        assert np.all(np.diff(cos) <= 1e-6)


@pytest.mark.parametrize("old,new,historical,plain", CASES, ids=["zh", "en"])
def test_switched_off_a_historical_question_sees_the_latest_only(old, new, historical, plain):
    cfg = BASE.replace(**{"facts.historical_sees_superseded": False})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0 + 2 * DAY)) as st:
        a, b = _revised(st, old, new)
        assert st.recall(historical, k=10).ids == [b.id]


def test_expired_deprecated_and_other_owners_revisions_stay_hidden():
    with memlab.open_store(":memory:", config=BASE, clock=FixedClock(T0 + 3 * DAY)) as st:
        a, b = _revised(st, "我住在北京", "我住在上海")
        other, _ = st.add("我住在广州", user_id="u2"), st.add("我住在深圳", user_id="u2")
        st._store.repo.update_fields(a.id, deprecated=True)
        got = st.recall("我以前住在哪里？", k=10)
        assert got.ids == [b.id] and other.id not in got.ids
        c = st.add("我住在杭州", importance=0.8, clock=FixedClock(T0 + 2 * DAY))
        assert set(st.recall("我以前住在哪里？", k=10).ids) == {b.id, c.id}


def test_the_pool_takes_the_newest_revisions_first():
    cfg = BASE.replace(**{"facts.historical_pool_max": 1})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0 + 9 * DAY)) as st:
        ids = [st.add(f"我住在{city}", importance=0.8, clock=FixedClock(T0 + i * DAY)).id
               for i, city in enumerate(["北京", "上海", "广州"])]
        assert set(st.recall("我以前住在哪里？", k=10).ids) == {ids[1], ids[2]}


@pytest.mark.parametrize("old,new,historical,plain", CASES, ids=["zh", "en"])
def test_with_temporal_off_the_route_still_reads_the_cues_and_the_intent_column_stays_0(
        old, new, historical, plain):
    """The baselines turn temporal.enabled off: a historical question still reaches the old
    revision (the facts feature), and no intent signal reaches the scorer."""
    cfg = BASE.replace(**{"temporal.enabled": False, "fusion.scorer": "cosine"})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0 + 2 * DAY)) as st:
        a, b = _revised(st, old, new)
        assert set(st.recall(historical, k=10).ids) == {a.id, b.id}
        assert st.recall(plain, k=10).ids == [b.id]
        t = st.features([historical], k=10, now=T0 + 2 * DAY).columns
        assert (t["intent"] == 0).all()

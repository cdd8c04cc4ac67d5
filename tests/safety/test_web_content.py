"""Untrusted web content is stored apart and never becomes truth (issue 9 item 7, Reverie §12):
it lives in ``memory_web_content``, never in ``memory_records``; plain recall never sees it; it is
never a fact revision, a contradiction, a pin or permanent; ``recall(..., include_web=True)``
returns it after the memories, labelled. zh and en."""

from __future__ import annotations

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

T0 = 1_750_000_000.0
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 0.0, "facts.rule": "subject_attribute"})
LABEL = CFG.safety.untrusted_label
WEB = {"source_type": "untrusted_web", "source_uri": "https://example.com/page"}
LANGS = {  # a user's fact, web content stating the same fact otherwise, a question
    "zh": ("我住在北京", "我住在上海", "我住在哪里？"),
    "en": ("I live in Boston", "I live in Chicago", "Where do I live?"),
}


@pytest.fixture
def store():
    st = memlab.open_store(":memory:", config=CFG, clock=FixedClock(T0))
    yield st
    st.close()


def _count(st, table: str) -> int:
    return st._store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.mark.parametrize("lang", LANGS)
def test_web_content_is_stored_apart_and_plain_recall_never_sees_it(store, lang):
    mine, theirs, question = LANGS[lang]
    local = store.add(mine, importance=0.8)
    web = store.add(theirs, importance=0.8, **WEB)
    assert web.id.startswith("web_") and web.source_type == "untrusted_web"
    assert (_count(store, "memory_records"), _count(store, "memory_web_content")) == (1, 1)
    assert len(store) == 1
    for _ in range(2):                          # SQL, then the in-process index
        assert store.recall(question, k=10).ids == [local.id]
        assert store.recall(theirs, k=10).ids == [local.id]
    feats = store.features([question, theirs], k=10, now=T0)
    assert set(feats.ids.values()) == {local.id}          # no route offers it
    with pytest.raises(InvalidInput):
        store.get([web.id])
    assert store.get_web([web.id])[0].text == theirs


@pytest.mark.parametrize("lang", LANGS)
def test_web_content_never_becomes_a_fact_revision_a_contradiction_or_a_pin(store, lang):
    mine, theirs, question = LANGS[lang]
    local = store.add(mine, importance=0.8)
    web = store.add(theirs, importance=0.8, **WEB)
    # the web statement of the same fact supersedes nothing and is superseded by nothing
    assert store.get([local.id])[0].lifecycle_state == "active"
    assert store.get_web([web.id])[0].fact_key == ""
    assert [r.id for r in store.history(local.id)] == [local.id]
    later = store.add(mine.replace("北京", "广州").replace("Boston", "Denver"), importance=0.8)
    assert later.supersedes == local.id and store.get_web([web.id])[0].lifecycle_state == \
        "active"
    assert store.contradictions(check=True) == []
    with pytest.raises(InvalidInput):
        store.pin(web.id)
    with pytest.raises(InvalidInput):
        store.expire([web.id])
    assert store.pinned() == []


@pytest.mark.parametrize("lang", LANGS)
def test_the_explicit_path_returns_web_content_after_the_memories_labelled(store, lang):
    mine, theirs, question = LANGS[lang]
    local = store.add(mine, importance=0.8)
    web = store.add(theirs, importance=0.8, **WEB)
    store.add("这个和问题毫无关系" if lang == "zh" else "totally unrelated words",
              user_id="someone_else", **WEB)
    res = store.recall(question, k=10, include_web=True)
    assert res.ids == [local.id, web.id]                 # another owner's: never
    assert res.to_frame()["web"].tolist() == [False, True]
    block = res.to_prompt()
    assert f"- {LABEL}{theirs}" in block and f"- {mine}" in block
    assert f"{LABEL}{mine}" not in block


def test_web_items_rank_by_cosine_at_most_web_k_and_by_terms_without_vectors():
    cfg = CFG.replace(**{"safety.web_k": 2})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0)) as st:
        ids = [st.add(t, **WEB).id for t in
               ["猫 喜欢 吃鱼", "猫 喜欢 晒太阳 吃鱼", "狗 喜欢 散步", "天气 很好"]]
        res = st.recall("猫 吃鱼", k=5, include_web=True)
        frame = res.to_frame()[res.to_frame()["web"]]
        assert len(frame) == 2 and set(res.ids) <= set(ids)
        assert frame["cosine"].is_monotonic_decreasing and res.ids[0] == ids[0]
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0),
                           load_embedder=False) as st:
        a = st.add("猫 喜欢 吃鱼", **WEB)
        st.add("天气 很好", **WEB)
        res = st.recall("猫 吃鱼", k=5, include_web=True)
        assert res.ids == [a.id] and res.to_frame()["lexical"].tolist() == [1.0]


def test_a_mixed_batch_is_all_or_nothing_across_both_tables():
    cfg = CFG.replace(**{"governance.pins_max": 1})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0)) as store:
        store.add("我最喜欢的颜色是蓝色", pinned=True)
        before = (_count(store, "memory_records"), _count(store, "memory_web_content"))
        with pytest.raises(InvalidInput):   # the refusal comes inside the add's transaction
            store.add_many([{"text": "web says Chicago", **WEB},
                            {"text": "I live in Boston", "pinned": True}])
        assert (_count(store, "memory_records"), _count(store, "memory_web_content")) == before
        with pytest.raises(InvalidInput):   # the screen refuses before anything is written
            store.add_many([{"text": "I live in Boston"}, {"text": "web says Chicago", **WEB},
                            {"text": "web says permanent", "layer": "permanent", **WEB}])
        assert (_count(store, "memory_records"), _count(store, "memory_web_content")) == before
        got = store.add_many([{"text": "I live in Boston"}, {"text": "web says Chicago", **WEB}])
        assert [r.source_type for r in got] == ["local_interaction", "untrusted_web"]
        assert (_count(store, "memory_records"), _count(store, "memory_web_content")) == (2, 1)


def test_include_web_must_be_a_bool(store):
    with pytest.raises(InvalidInput, match="include_web"):
        store.recall("x", include_web="yes")

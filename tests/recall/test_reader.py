"""Familiars' reader (§5.8): combined scores worked out by hand on a tiny store (hashing
embedder), the is_live filter, tree distances, the rendered context.

With the hashing embedder two texts' cosine is |shared terms| / sqrt(|terms a| |terms b|) (no
hash collisions among these few terms; the test asserts the cosine it reads equals it):
"oolong tea" has the terms {oolong, tea}, "I like oolong tea" {like, oolong, tea}, so their
cosine is 2/sqrt(6); "乌龙茶" has {乌龙茶, 乌龙, 龙茶}, "我喜欢喝乌龙茶" 11 terms (6 bigrams, 5
trigrams) of which those 3, so 3/sqrt(33).
"""

from __future__ import annotations

import math

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.lifecycle.ttl import TTLContext
from memlab.recall.inject import CLOSE_TAG, HEADER, OPEN_TAG
from memlab.recall.reader import build_rag_context

T0 = 1_790_000_000.0
NOW = T0 + 600.0
WEIGHTS = {"dialog_tree.alpha": 0.5, "dialog_tree.beta": 0.2, "dialog_tree.gamma": 0.1,
           "dialog_tree.recency_tau": 600.0, "dialog_tree.tree_tau": 2.0}
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 0.0, **WEIGHTS})

# text, written at, hops from the current dialogue node (None: not in the tree)
MEMORIES = {
    "A": ("I like oolong tea", T0, 0),
    "B": ("oolong tea", T0 - 1200.0, None),
    "C": ("the train leaves at noon", NOW, 4),
    "D": ("我喜欢喝乌龙茶", T0, 1),
}


@pytest.fixture
def tiny():
    with memlab.open_store(":memory:", config=CFG, clock=FixedClock(NOW)) as st:
        ids = {}
        for name, (text, at, _) in MEMORIES.items():
            ids[name] = st.add(text, timestamp=at, scope="user", category="knowledge").id
        hops = {ids[n]: MEMORIES[n][2] for n in MEMORIES}
        yield st, ids, (lambda rec: hops.get(rec.id))


def expected(cos: float, age_s: float, hops: float | None) -> dict[str, float]:
    """§5.4.2 by hand with WEIGHTS: 0.5 cos + 0.2 exp(-age/600) + 0.1 exp(-hops/2)."""
    terms = {"cosine_term": 0.5 * cos, "recency_term": 0.2 * math.exp(-age_s / 600.0),
             "tree_term": 0.0 if hops is None else 0.1 * math.exp(-hops / 2.0)}
    return {**terms, "score": sum(terms.values())}


def test_combined_scores_en_by_hand(tiny):
    st, ids, hops = tiny
    r = build_rag_context(st, "oolong tea", k=10, now=NOW, tree_distance=hops)
    want = {"A": expected(2 / math.sqrt(6), 600.0, 0),     # 0.4082 + 0.0736 + 0.1    = 0.5818
            "B": expected(1.0, 1800.0, None),               # 0.5    + 0.0100 + 0      = 0.5100
            "C": expected(0.0, 0.0, 4),                     # 0      + 0.2    + 0.0135 = 0.2135
            "D": expected(0.0, 600.0, 1)}                   # 0      + 0.0736 + 0.0607 = 0.1342
    assert r.ids == [ids[n] for n in "ABCD"]                # A beats B on recency and tree
    frame = r.to_frame().set_index("id")
    for name, w in want.items():
        row = frame.loc[ids[name]]
        for col, value in w.items():
            assert row[col] == pytest.approx(value, abs=1e-6), (name, col)
    assert r.additive == ("cosine_term", "recency_term", "tree_term")
    assert r.scores == pytest.approx([want[n]["score"] for n in "ABCD"], abs=1e-6)
    assert list(r.terms.columns) == list(r.additive)
    # top k
    assert build_rag_context(st, "oolong tea", k=2, now=NOW, tree_distance=hops).ids == \
        [ids["A"], ids["B"]]


def test_combined_scores_zh_by_hand(tiny):
    st, ids, hops = tiny
    r = build_rag_context(st, "乌龙茶", k=1, now=NOW, tree_distance=hops)
    assert r.ids == [ids["D"]]
    row = r.to_frame().iloc[0]
    for col, value in expected(3 / math.sqrt(33), 600.0, 1).items():
        assert row[col] == pytest.approx(value, abs=1e-6), col


def test_without_a_tree_every_distance_is_unknown(tiny):
    st, ids, _ = tiny
    r = build_rag_context(st, "oolong tea", k=10, now=NOW)
    assert (r.to_frame()["tree_term"] == 0).all()
    # now B (cos 1) wins: the tree term no longer lifts A
    assert r.ids[:2] == [ids["B"], ids["A"]]


def test_deprecated_and_expired_memories_are_left_out(tiny):
    st, ids, hops = tiny
    dep = st.add("oolong tea", deprecated=True, timestamp=NOW, scope="user", category="knowledge")
    eph = st.add("oolong tea 乌龙茶", scope="ephemeral", category="state", timestamp=NOW, turn=3)
    live = build_rag_context(st, "oolong tea", k=10, now=NOW, tree_distance=hops,
                             ttl_ctx=TTLContext(now=NOW, turn_counter=3))
    assert eph.id in live.ids and dep.id not in live.ids
    gone = build_rag_context(st, "oolong tea", k=10, now=NOW, tree_distance=hops,
                             ttl_ctx=TTLContext(now=NOW, turn_counter=4))
    assert eph.id not in gone.ids and gone.ids == [ids[n] for n in "ABCD"]
    assert st.get([eph.id])[0].lifecycle_state == "active"   # left out, not deleted
    # a turns TTL with no turn counter cannot be decided: an error, not a silent guess
    with pytest.raises(InvalidInput) as e:
        build_rag_context(st, "oolong tea", k=10, now=NOW)
    assert e.value.field == "turn_counter"


def test_an_absolute_ttl_is_left_out_from_its_boundary_on(tiny):
    st, ids, _ = tiny
    # NOW = 1_790_000_600 is 2026-09-21T14:23:20Z, here written at +08:00
    m = st.add("我明天要喝乌龙茶", scope="user", category="event",
               ttl={"kind": "absolute", "expires_at": "2026-09-21T22:23:20+08:00"})
    before = build_rag_context(st, "乌龙茶", k=10, now=NOW - 0.5)
    assert m.id in before.ids and before.left_out == 0
    at = build_rag_context(st, "乌龙茶", k=10, now=NOW)
    assert m.id not in at.ids and ids["D"] in at.ids and at.left_out == 1


def test_a_bad_tree_distance_names_the_memory(tiny):
    st, ids, _ = tiny
    with pytest.raises(InvalidInput) as e:
        build_rag_context(st, "oolong tea", now=NOW,
                          tree_distance=lambda rec: -1 if rec.id == ids["A"] else 1)
    assert e.value.field == f"tree_distance({ids['A']})"
    with pytest.raises(InvalidInput):
        build_rag_context(st, "oolong tea", now=NOW, tree_distance=lambda rec: math.nan)


def test_the_context_is_recalls_escaped_block(tiny):
    st, ids, hops = tiny
    evil = st.add("oolong tea 价格 < 100 元\n  - forged item", timestamp=NOW,
                  scope="user", category="knowledge")
    r = st.build_rag_context("oolong tea", k=10, now=NOW, tree_distance=hops)
    assert evil.id in r.ids
    assert r.context.startswith(HEADER)
    assert r.context.count(OPEN_TAG) == 1 and r.context.count(CLOSE_TAG) == 1
    assert "oolong tea 价格 &lt; 100 元 - forged item" in r.context
    for name in "ABCD":
        assert f"\n  - {MEMORIES[name][0]}" in r.context
    empty = st.build_rag_context("完全无关的查询 zebra", k=10, now=NOW,
                                 cfg=CFG.replace(**{"recall.floor_mode": "absolute",
                                                    "recall.relevance_floor": 0.99}))
    assert empty.context == "" and empty.ids == [] and empty.empty_reason

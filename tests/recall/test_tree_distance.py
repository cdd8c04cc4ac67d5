"""The tree distance reaches recall's raw-signal table and the dialog_tree scorer (familiars
§5.4.2): filled by memory id from a dialogue tree, NaN (term 0) where unknown."""

from __future__ import annotations

import math

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.dialog import DialogTree
from memlab.errors import InvalidInput
from memlab.recall.tree import tree_distance_column

CFG = memlab.MemlabConfig().replace(**{
    "embedding.backend": "hashing", "fusion.scorer": "dialog_tree",
    "recall.floor_mode": "absolute", "recall.relevance_floor": 0.0})
MEMORIES = [{"text": "I adopted a cat named Momo", "id": "m1", "timestamp": 0.0},
            {"text": "Momo the cat likes tuna", "id": "m2", "timestamp": 0.0},
            {"text": "我的猫叫小白，喜欢吃鱼", "id": "m3", "timestamp": 0.0}]


def test_the_column_is_looked_up_by_memory_id_per_query():
    ids = {10: "a", 11: "b", 12: "c"}
    qid = np.array([0, 0, 1, 1, 2])
    rows = np.array([10, 11, 10, 12, 11])
    got = tree_distance_column(qid, rows, ids, [{"a": 2.0}, lambda m: {"c": 0}.get(m), None])
    assert np.array_equal(np.isnan(got), [False, True, True, False, True])
    assert got[0] == 2.0 and got[3] == 0.0 and got.dtype == np.float32
    with pytest.raises(InvalidInput):
        tree_distance_column(qid, rows, ids, [{"a": -1.0}, None, None])
    with pytest.raises(InvalidInput):
        tree_distance_column(qid, rows, ids, [42, None, None])


@pytest.fixture
def store():
    s = memlab.open_store(":memory:", config=CFG, clock=FixedClock(1000.0))
    s.add_many(MEMORIES)
    yield s
    s.close()


def test_recall_scores_the_tree_term_end_to_end(store):
    plain = store.recall("cat Momo", k=3)
    base = dict(zip(plain.explain["id"], plain.explain["score"]))
    assert set(plain.explain["tree_term"]) == {0.0}
    got = store.recall("cat Momo", k=3, tree={"m2": 0.0, "m3": 1.0})
    ex = got.explain
    term = dict(zip(ex["id"], ex["tree_term"]))
    # gamma * exp(-hops / tree_tau): m2 0.15 * 1, m3 0.15 * exp(-1/3), m1 unknown: 0
    assert term == pytest.approx({"m1": 0.0, "m2": 0.15, "m3": 0.15 * math.exp(-1 / 3)})
    assert dict(zip(ex["id"], ex["score"])) == pytest.approx(
        {m: base[m] + term[m] for m in base})
    assert [m.id for m in plain.memories][:2] == ["m1", "m2"]
    assert [m.id for m in got.memories][:2] == ["m2", "m1"]     # the tree lifts m2


def test_a_dialogue_tree_gives_recall_its_distances(store):
    """A tree whose turns wrote the memories: the query's anchor and the hops from it."""
    emb = store.embedder
    tree = DialogTree(cfg=CFG, embedder=emb)
    q = tree.add_question("我养了一只猫", timestamp=900.0)
    tree.link_memory(q.id, "m3")
    a = tree.add_response("它叫什么名字？", timestamp=905.0)
    q2 = tree.add_question("It is called Momo and likes tuna", timestamp=910.0)
    tree.link_memory(q2.id, "m2")
    anchor = tree.anchor("cat Momo", timestamp=1000.0)
    assert anchor is not None
    hops = tree.memory_distances(anchor)
    assert hops == {"m3": float(tree.tree_distance(anchor, q.id)),
                    "m2": float(tree.tree_distance(anchor, q2.id))}
    got = store.recall("cat Momo", k=3, tree=hops)
    term = dict(zip(got.explain["id"], got.explain["tree_term"]))
    assert term["m1"] == 0.0
    assert term["m2"] == pytest.approx(0.15 * math.exp(-hops["m2"] / 3.0))
    assert a.parent == q.id

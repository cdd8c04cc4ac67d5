"""The dialogue tree's attach and query scores (familiars §5.4), worked out by hand.

Embeddings come from a fake embedder that maps each text to a chosen vector, so every cosine is
exact (1, 0, -0.6, -1); recency is exp(-dt / 600) at the spec's defaults (alpha 0.3, beta 0.3,
gamma 0.15, delta 0.35, tau_attach 0.35, tree_tau 3). The numbers in the assertions are the
formula evaluated by hand (shown beside each).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.dialog import DialogTree, make_title
from memlab.errors import InvalidInput

E = np.eye(4)


class FakeEmbedder:
    """Each text's vector chosen by the test (documents and queries alike)."""

    name, version, dim = "fake", "fake-1", 4

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed_documents(self, texts):
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)

    embed_queries = embed_documents


def r(dt: float) -> float:
    return math.exp(-dt / 600.0)


def test_a_topic_shift_below_tau_attach_starts_a_new_root():
    emb = FakeEmbedder({"我下周去东京出差": E[0], "好的，已记下": E[0],
                        "Recommend a sci-fi novel": np.array([-0.6, 0.8, 0.0, 0.0])})
    tree = DialogTree(embedder=emb)
    tree.add_question("我下周去东京出差", timestamp=0.0)
    tree.add_response("好的，已记下", timestamp=10.0)
    scores = tree.attach_scores("Recommend a sci-fi novel", timestamp=610.0)
    # Q0: 0.3*(-0.6) + 0.3*exp(-610/600) = -0.0714603; A1 (predecessor): 0.3*(-0.6) +
    # 0.3*exp(-600/600) + 0.35 = 0.2803638 < tau_attach 0.35
    assert scores["score"].tolist() == pytest.approx([-0.0714603, 0.2803638], abs=1e-6)
    assert scores["is_predecessor"].tolist() == [0.0, 1.0]
    node = tree.add_question("Recommend a sci-fi novel", timestamp=610.0)
    assert node.parent is None and node.level == 0
    assert tree.roots == [0, 2]
    assert tree.tree_distance(0, 2) is None and tree.tree_distance(1, 0) == 1


def test_a_best_score_exactly_at_tau_attach_attaches():
    """§5.4.1: only a best score *below* tau_attach starts a new root. At the spec's defaults
    delta = tau_attach = 0.35: a turn orthogonal to every node (cosine 0) asked so long after them
    that recency is exactly 0 (exp(-1e6/600) underflows to 0.0) scores exactly 0.35 on the
    predecessor, and attaches to it; a query there has it as its anchor. One float above,
    the same turn starts a new root and the query has no anchor."""
    emb = FakeEmbedder({"q": E[0], "a": E[1], "elsewhere": E[2], "asked elsewhere": E[3]})
    later = 1e6
    assert math.exp(-later / 600.0) == 0.0

    def tree_with(cfg):
        tree = DialogTree(cfg=cfg, embedder=emb)
        tree.add_question("q", timestamp=0.0)
        tree.add_response("a", timestamp=0.0)
        return tree

    cfg = MemlabConfig()
    tau = cfg.dialog_tree.tau_attach
    tree = tree_with(cfg)
    # Q0: 0.3*0 + 0.3*0 + 0 = 0; A1 (predecessor): 0.3*0 + 0.3*0 + 0.35*1 = 0.35, bit for bit
    assert tree.attach_scores("elsewhere", timestamp=later)["score"].tolist() == [0.0, tau]
    assert tree.query("asked elsewhere", k=2, now=later).attrs["anchor"] == 1
    node = tree.add_question("elsewhere", timestamp=later)
    assert node.parent == 1 and tree.roots == [0]
    above = tree_with(cfg.replace(**{"dialog_tree.tau_attach": math.nextafter(tau, 1.0)}))
    assert above.query("asked elsewhere", k=2, now=later).attrs["anchor"] is None
    node = above.add_question("elsewhere", timestamp=later)
    assert node.parent is None and above.roots == [0, 2]


def _climbing_tree(cfg=None) -> DialogTree:
    """Q0 (e0, t 0) <- A1 (e1, t 5) <- Q2 (e2, t 10) <- A3 (-e2, t 15); then Q4 (e2, t 615)."""
    emb = FakeEmbedder({"q0": E[0], "a1": E[1], "q2": E[2], "a3": -E[2], "q4": E[2]})
    tree = DialogTree(cfg=cfg, embedder=emb)
    tree.add_question("q0", timestamp=0.0)
    tree.add_response("a1", timestamp=5.0)
    q2 = tree.add_question("q2", timestamp=10.0)
    # Q2: Q0 0.3*exp(-10/600) = 0.2950414; A1 0.3*exp(-5/600) + 0.35 = 0.6475104 -> under A1
    assert q2.parent == 1 and q2.level == 2
    tree.add_response("a3", timestamp=15.0)
    return tree


def test_a_question_attaches_under_the_parent_answer_of_its_best_question_match():
    tree = _climbing_tree()
    scores = tree.attach_scores("q4", timestamp=615.0)["score"].tolist()
    # Q0: 0 + 0.3*exp(-615/600) = 0.1076389; A1: 0.3*exp(-610/600) = 0.1085397;
    # Q2: 0.3*1 + 0.3*exp(-605/600) = 0.4094480 (best); A3: 0.3*(-1) + 0.3*exp(-1) + 0.35 = 0.1603638
    assert scores == pytest.approx([0.1076389, 0.1085397, 0.4094480, 0.1603638], abs=1e-6)
    assert tree.choose_parent("q4", timestamp=615.0) == 1      # Q2's parent, the answer A1
    q4 = tree.add_question("q4", timestamp=615.0)
    assert q4.parent == 1 and q4.level == 2
    assert tree[1].children == [2, 4] and tree[2].children == [3]
    assert tree.tree_distance(4, 2) == 2 and tree.tree_distance(4, 3) == 3


def test_the_immediate_predecessor_wins_a_tie_by_delta():
    """Two candidates alike in cosine and time: delta decides (without it the first would win)."""
    emb = FakeEmbedder({"q": E[0], "a": E[0], "again": E[0]})
    tree = DialogTree(embedder=emb)
    tree.add_question("q", timestamp=0.0)
    tree.add_response("a", timestamp=0.0)
    scores = tree.attach_scores("again", timestamp=0.0)["score"].tolist()
    assert scores == pytest.approx([0.3 + 0.3, 0.3 + 0.3 + 0.35])     # 0.6, 0.95
    assert tree.add_question("again", timestamp=0.0).parent == 1
    # the same tree without delta: equal scores, the first candidate (a Q root: no climb) wins
    flat = DialogTree(cfg=MemlabConfig().replace(**{"dialog_tree.delta": 0.0}), embedder=emb)
    flat.add_question("q", timestamp=0.0)
    flat.add_response("a", timestamp=0.0)
    assert flat.add_question("again", timestamp=0.0).parent == 0


def test_query_combines_cosine_recency_and_tree_distance_from_the_anchor():
    tree = _climbing_tree()
    tree.add_question("q4", timestamp=615.0)               # under A1 (test above)
    tree.embedder.vectors["where am I going"] = E[0]
    got = tree.query("where am I going", k=5, now=615.0)
    # anchor: attach scores of the query (e0 at 615): Q0 0.3 + 0.3*exp(-615/600) = 0.4076,
    # Q4 (predecessor) 0 + 0.3*1 + 0.35 = 0.65 (best) -> Q4 is a Q with parent A1: anchor A1
    assert got.attrs["anchor"] == 1
    # hops from A1: Q0 1, A1 0, Q2 1, A3 2, Q4 1; final = 0.3 cos + 0.3 rec + 0.15 exp(-hops/3)
    want = {0: 0.3 + 0.3 * r(615) + 0.15 * math.exp(-1 / 3),   # 0.5151186
            4: 0.0 + 0.3 * r(0) + 0.15 * math.exp(-1 / 3),     # 0.4074797
            1: 0.0 + 0.3 * r(610) + 0.15 * 1.0,                # 0.2585397
            2: 0.0 + 0.3 * r(605) + 0.15 * math.exp(-1 / 3),   # 0.2169277
            3: 0.0 + 0.3 * r(600) + 0.15 * math.exp(-2 / 3)}   # 0.1873764
    assert got["id"].tolist() == [0, 4, 1, 2, 3]
    assert got["score"].tolist() == pytest.approx([want[i] for i in got["id"]], abs=1e-9)
    assert got["score"].tolist() == pytest.approx([0.5151186, 0.4074797, 0.2585397, 0.2169277,
                                                   0.1873764], abs=1e-6)
    assert got["tree_distance"].tolist() == [1.0, 1.0, 0.0, 1.0, 2.0]
    terms = got[["cosine_term", "recency_term", "tree_term"]].sum(axis=1)
    assert terms.tolist() == pytest.approx(got["score"].tolist())
    assert len(tree.query("where am I going", k=2, now=615.0)) == 2


def test_a_query_that_starts_a_new_topic_has_no_anchor_and_no_tree_term():
    emb = FakeEmbedder({"q": E[0], "a": E[0], "elsewhere": -E[0]})
    tree = DialogTree(embedder=emb)
    tree.add_question("q", timestamp=0.0)
    tree.add_response("a", timestamp=0.0)
    # attach scores at t 6000: Q0 -0.3 + 0.3*exp(-10) ~ -0.29999; A1 the same + 0.35 ~ 0.05 < 0.35
    got = tree.query("elsewhere", k=2, now=6000.0)
    assert got.attrs["anchor"] is None
    assert got["tree_distance"].isna().all() and (got["tree_term"] == 0).all()
    assert got["score"].tolist() == pytest.approx([-0.3 + 0.3 * math.exp(-10)] * 2)


def test_origins_and_responses():
    emb = FakeEmbedder({"hi": E[0], "hello": E[0], "reminder": E[1]})
    tree = DialogTree(embedder=emb)
    with pytest.raises(InvalidInput) as err:          # nothing to answer yet
        tree.add_response("hello", timestamp=0.0)
    assert err.value.field == "to"
    p = tree.add_proactive("reminder", timestamp=0.0)
    assert (p.node_type, p.origin, p.parent) == ("A", "proactive", None)
    q = tree.add_question("hi", timestamp=1.0)
    a = tree.add_response("hello", timestamp=2.0)
    assert (q.origin, a.origin, a.parent) == ("user", "response", q.id)
    with pytest.raises(InvalidInput) as err:
        tree.add("x", node_type="Q", origin="response", timestamp=3.0, embedding=E[0])
    assert err.value.field == "origin"
    with pytest.raises(InvalidInput):
        tree.add("x", node_type="A", origin="user", timestamp=3.0, embedding=E[0])
    with pytest.raises(InvalidInput) as err:          # another dimension
        tree.add_question("x", timestamp=3.0, embedding=[1.0, 0.0])
    assert err.value.field == "embedding"
    with pytest.raises(InvalidInput) as err:          # no wall clock: a time is required
        tree.add_question("x", timestamp=float("nan"), embedding=E[0])
    assert err.value.field == "timestamp"
    assert len(tree) == 3


def test_titles_are_cut_to_title_max_chars_plus_an_ellipsis():
    zh = "我下周要去东京出差三天，想顺便看看浅草寺和秋叶原，帮我记一下酒店在新宿附近，预算每晚一千五百元左右"
    assert len(zh) > 40
    assert make_title(zh, 40) == zh[:40] + "…"
    assert make_title("short  title\nhere", 40) == "short title here"
    en = "I am flying to Tokyo next week for a three-day business trip"
    assert make_title(en, 10) == "I am flyin…"
    cfg = MemlabConfig().replace(**{"dialog_tree.title_max_chars": 5})
    tree = DialogTree(cfg=cfg)
    assert tree.add_question(zh, timestamp=0.0, embedding=E[0]).title == zh[:5] + "…"


def test_distances_and_memories():
    tree = _climbing_tree()
    tree.link_memory(0, "m_00000000")
    tree.link_memory(3, "m_00000003")
    assert tree[3].metadata["memory_ids"] == ["m_00000003"]
    assert tree.distances_from(2) == {2: 0, 1: 1, 3: 1, 0: 2}
    assert tree.memory_distances(2) == {"m_00000000": 2.0, "m_00000003": 1.0}
    assert tree.memory_distances(None) == {}
    assert tree.node_of_memory("m_00000003") == 3
    f = tree.record_distance(3)
    assert f(type("R", (), {"id": "m_00000000"})()) == 3.0
    assert f(type("R", (), {"id": "m_unknown"})()) is None
    with pytest.raises(InvalidInput):
        tree.link_memory(9, "m_x")

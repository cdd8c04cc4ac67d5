"""AnnIndex (store.dense_index = "usearch"): an HNSW graph over the ExactIndex's rows. Recall@10
against the exact scan, filters never broken, kept in step with writes, the fallback to the exact
scan, the missing extra."""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import pytest

from memlab.api import open_store
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.errors import ConfigError
from memlab.store.ann import AnnIndex
from memlab.store.exact import ExactIndex
from memlab.store.vectors import VectorMeta

pytest.importorskip("usearch")

DIM = 64
T0 = 1_700_000_000


def unit(rng, n, dim=DIM):
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def clustered(rng, n, clusters=40):
    """Unit vectors around ``clusters`` centres (embeddings are clustered, not isotropic)."""
    centres = unit(rng, clusters)
    v = 0.7 * centres[rng.integers(clusters, size=n)] + 0.7 * unit(rng, n)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def noisy(rng, docs, n, keep=0.85):
    base = docs[rng.integers(len(docs), size=n)]
    v = keep * base + np.sqrt(1 - keep ** 2) * unit(rng, n)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def mixed_meta(n):
    """Two agents, two users, three layers, a time per row, every seventh row inactive."""
    layers = ["long_term", "short_term", "permanent"]
    return [VectorMeta(agent_id="ab"[i % 2], user_id="uv"[(i // 2) % 2],
                       retention_layer=layers[i % 3], cognitive_layer="episodic",
                       event_time=T0 + i, active=i % 7 != 0) for i in range(n)]


def pair(mat, meta, **ann_kw):
    exact = ExactIndex(dim=mat.shape[1])
    exact.add(np.arange(1, len(mat) + 1), mat, meta, generation=0)
    return exact, AnnIndex(**{"stats": Counter(), **ann_kw})


def test_recall_at_10_against_exact_is_at_least_0_98():
    rng = np.random.default_rng(3)
    n = 4000
    mat = clustered(rng, n)
    meta = [VectorMeta("a", "u", "long_term", "episodic", T0, True)] * n
    exact, ann = pair(mat, meta)
    hits = []
    for q in noisy(rng, mat, 100):
        want, wc = exact.search(q, 10, agent_id="a", user_id="u")
        got, gc = ann.search(exact, q, 10, agent_id="a", user_id="u")
        hits.append(len(set(got.tolist()) & set(want.tolist())) / 10)
        # the cosines returned are the exact index's own, for the rows returned
        np.testing.assert_allclose(gc, mat[got - 1] @ (q / np.linalg.norm(q)), atol=1e-5)
        assert list(gc) == sorted(gc, reverse=True)
    assert np.mean(hits) >= 0.98
    assert ann.stats["ann_fallback"] == 0 and ann.stats["ann_rebuild"] == 1
    assert ann.stats["ann_search"] == 100 and len(ann) == n


FILTERS = [dict(agent_id="a", user_id="u"),
           dict(agent_id="b", user_id="v", layers=["short_term", "permanent"]),
           dict(agent_id="a", user_id="v", since=T0 + 500, until=T0 + 2500),
           dict(agent_id="b", user_id="u", active_only=False),
           dict(agent_id="a", user_id="u", since=T0 + 100, until=T0 + 160)]   # ~8 rows: fallback


def keeps(m: VectorMeta, f: dict) -> bool:
    return (m.agent_id == f["agent_id"] and m.user_id == f["user_id"]
            and (m.active or not f.get("active_only", True))
            and m.retention_layer in f.get("layers", [m.retention_layer])
            and f.get("since", -1) <= m.event_time < f.get("until", 10 ** 12))


def test_filters_hold_and_a_selective_filter_falls_back_to_the_exact_scan():
    rng = np.random.default_rng(4)
    n = 3000
    mat, meta = clustered(rng, n), mixed_meta(n)
    exact, ann = pair(mat, meta, oversampling=8)
    hits = {i: [] for i in range(len(FILTERS))}
    fell = Counter()
    for q in noisy(rng, mat, 30):
        for i, f in enumerate(FILTERS):
            was = ann.stats["ann_fallback"]
            got, _ = ann.search(exact, q, 10, **f)
            fell[i] += ann.stats["ann_fallback"] - was
            want, _ = exact.search(q, 10, **f)
            assert all(keeps(meta[r - 1], f) for r in got.tolist()), f
            assert len(got) == len(want)
            hits[i].append(len(set(got.tolist()) & set(want.tolist())) / max(1, len(want)))
            if i == len(FILTERS) - 1:   # fewer than k candidates pass: exactly the scan
                assert got.tolist() == want.tolist()
    # the selective filter falls back every time; the scope alone (a quarter of the rows,
    # 6/7 of them active: ~17 of 80 candidates) never does
    assert fell[len(FILTERS) - 1] == 30 and fell[0] == 0
    assert sum(fell.values()) == ann.stats["ann_fallback"]
    # a filter keeping a quarter of the rows (and 6/7 of those active) still finds them
    assert np.mean(hits[0]) >= 0.95


def test_writes_are_mirrored_without_a_rebuild_and_equal_the_exact_top_k():
    rng = np.random.default_rng(5)
    n = 300
    mat = unit(rng, n)
    meta = [VectorMeta("a", "u", "long_term", "episodic", T0, True)] * n
    exact, ann = pair(mat, meta)
    qs = unit(rng, 20)
    ann.search(exact, qs[0], 10, agent_id="a", user_id="u")     # builds the graph
    # an upsert: 50 new rows and 30 existing rowids with new vectors
    new_ids = np.concatenate([np.arange(n + 1, n + 51), np.arange(1, 31)])
    new_vecs = unit(rng, 80)
    before = exact.generation
    exact.add(new_ids, new_vecs, [meta[0]] * 80, generation=before + 1)
    ann.applied(exact, before, new_ids)
    assert ann.in_step(exact) and len(ann) == n + 50
    for q in qs:
        got = ann.search(exact, q, 10, agent_id="a", user_id="u")
        want = exact.search(q, 10, agent_id="a", user_id="u")
        assert got[0].tolist() == want[0].tolist()
        np.testing.assert_allclose(got[1], want[1], atol=1e-6)   # gathered rows vs the full scan
    assert ann.stats["ann_rebuild"] == 1
    # a write the graph was not told of (a removal here) rebuilds it at the next search
    exact.remove(list(range(1, 101)), generation=exact.generation + 1)
    got = ann.search(exact, qs[1], 10, agent_id="a", user_id="u")
    assert ann.stats["ann_rebuild"] == 2 and len(ann) == n - 50
    assert got[0].tolist() == exact.search(qs[1], 10, agent_id="a", user_id="u")[0].tolist()
    assert not set(got[0].tolist()) & set(range(1, 101))


def test_a_removed_row_is_never_returned_even_before_the_graph_follows():
    rng = np.random.default_rng(6)
    mat = unit(rng, 200)
    meta = [VectorMeta("a", "u", "long_term", "episodic", T0, True)] * 200
    exact, ann = pair(mat, meta)
    q = mat[17]
    assert ann.search(exact, q, 5, agent_id="a", user_id="u")[0][0] == 18
    exact.remove([18])              # no generation: the graph still holds row 18
    got = ann.search(exact, q, 5, agent_id="a", user_id="u")[0]
    assert 18 not in got.tolist() and len(got) == 5


ITEMS = ["Alice bought a red kettle at the market", "Bob plays chess with Carol every Sunday",
         "The garden by the river has tall sunflowers", "Carol drinks green tea in the morning",
         "小明在北京的咖啡馆喝咖啡", "小红每周日和奶奶下棋", "花园里的向日葵长得很高",
         "奶奶在厨房里包饺子"]
QUERIES = ["kettle market", "who plays chess on Sunday", "小明 咖啡", "谁喜欢下棋", "向日葵"]


def answers(path, config):
    with open_store(path, config=config, embedder=HashingEmbedder(dim=32),
                    clock=FixedClock(1.8e9)) as st:
        first = [[m.text for m in st.recall(q, k=5).memories] for q in QUERIES]
        st.add_many([{"text": f"{t} 新的 new {i}"} for i, t in enumerate(ITEMS)])
        second = [[m.text for m in st.recall(q, k=5).memories] for q in QUERIES]
        return first, second, Counter(st._store.stats)


def test_a_store_with_dense_index_usearch_recalls_as_the_exact_one(tmp_path):
    base = MemlabConfig().replace(**{"store.persist_index": False, "store.quick_check": False})
    for name in ("exact", "ann"):
        path = tmp_path / f"{name}.sqlite"
        with open_store(path, config=base, embedder=HashingEmbedder(dim=32),
                        clock=FixedClock(1.8e9)) as st:
            st.add_many([{"text": f"{ITEMS[i % 8]} {i}", "importance": (i % 5) / 5}
                         for i in range(400)])
    want = answers(tmp_path / "exact.sqlite", base)
    got = answers(tmp_path / "ann.sqlite", base.replace(**{"store.dense_index": "usearch"}))
    assert got[:2] == want[:2]
    stats = got[2]
    # every dense search went through the graph (a recall may search more than once), and the
    # add_many between the two rounds was mirrored into it, not rebuilt
    assert stats["ann_search"] >= 2 * len(QUERIES) and stats["ann_rebuild"] == 1, stats
    assert want[2]["ann_search"] == 0


def test_without_the_extra_memlab_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "usearch.index", None)    # import fails as if absent
    with pytest.raises(ConfigError) as err:
        AnnIndex()
    assert err.value.key == "store.dense_index" and "memlab[ann]" in str(err.value)


def test_the_tunables_are_validated():
    with pytest.raises(ConfigError):
        MemlabConfig().replace(**{"store.ann_connectivity": 2})
    with pytest.raises(ConfigError):
        MemlabConfig().replace(**{"store.dense_index": "faiss"})
    cfg = MemlabConfig().replace(**{"store.ann_oversampling": 9, "store.ann_scalar": "i8"})
    ann = AnnIndex.from_config(cfg)
    assert (ann.oversampling, ann.scalar, ann.connectivity) == (9, "i8", 32)


def test_resync_and_release_drop_the_graph(tmp_path):
    cfg = MemlabConfig().replace(**{"store.persist_index": False, "store.quick_check": False,
                                    "store.dense_index": "usearch"})
    with open_store(tmp_path / "s.sqlite", config=cfg, embedder=HashingEmbedder(dim=32),
                    clock=FixedClock(1.8e9)) as st:
        st.add_many([{"text": f"{ITEMS[i % 8]} {i}"} for i in range(120)])
        want = [m.text for m in st.recall("kettle market", k=5).memories]
        ann = st._store.dense.ann
        assert st._store.stats["ann_rebuild"] == 1 and len(ann) == 120
        st._store.resync()
        assert len(ann) == 0
        assert [m.text for m in st.recall("kettle market", k=5).memories] == want
        assert st._store.stats["ann_rebuild"] == 2
        assert st._store.release()["dense_index"] == 120 and len(ann) == 0
        assert [m.text for m in st.recall("kettle market", k=5).memories] == want
        assert st._store.stats["ann_rebuild"] == 3 and len(ann) == 120

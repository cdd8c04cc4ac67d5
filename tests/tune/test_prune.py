"""Bound-based pruning (memlab.tune.dense, memlab.tune.prune; issue 8, item 6): the dense blocks
hold the table's rows, the exact tests (relevance floor, forgetting gate) equal the scorer's, the
float32 approximate score stays within its ``eps`` of reverie's exact score, and the pruned
selections equal the row path's on configurations where pruning cuts.

Data: the bilingual parity set of tests/tune/test_parity.py (hashing embedder; near-duplicates,
permanent, long- and short-term memories, entities, temporal cues), once as written (every question
asked at its own time: one block per question) and once with every question of a conversation
asked at the same time (one block per conversation).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from memlab.bench.run import replay_cached
from memlab.embed import HashingEmbedder
from memlab.recall.score import reverie_memory, score
from memlab.tune import prune, rescore
from memlab.tune.dense import ceil32
from memlab.tune.prepared import Prepared, RowSubset
from memlab.tune.sample import random_configs, reverie_keys

sys.path.insert(0, str(Path(__file__).parent))
from memlab.tune import kernels  # noqa: E402
from test_parity import RANGES, SEED, _base, _dataset  # noqa: E402

N = 40


@pytest.fixture(params=["numpy", "numba"])
def path(request, monkeypatch):
    """Selection after pruning through the numpy path or the numba selection kernel (reverie's
    fused kernel, which needs no pruning, off)."""
    if request.param == "numba" and not kernels.AVAILABLE:
        pytest.skip(kernels.WHY)
    monkeypatch.setattr(rescore, "KERNELS", request.param == "numba")
    monkeypatch.setattr(rescore, "_fused", lambda *args: False)
    return request.param


def _same_time(ds):
    """Every question of a conversation asked at its last question's time."""
    last = {}
    for q in ds.questions:
        last[q.conversation_id] = max(last.get(q.conversation_id, q.asked_at), q.asked_at)
    qs = [dataclasses.replace(q, asked_at=last[q.conversation_id]) for q in ds.questions]
    return dataclasses.replace(ds, questions=qs)


@pytest.fixture(scope="module", params=["own-time", "same-time"])
def world(request, tmp_path_factory):
    ds = _dataset()
    if request.param == "same-time":
        ds = _same_time(ds)
    base = _base(tmp_path_factory.mktemp("prune")).replace(**{
        "bench.k": 2, "bench.ks": (1, 2), "recall.lexical_pool_min": 40,
        "recall.dense_pool_min": 40})
    rep = replay_cached(ds, base, embedder=HashingEmbedder(), progress=False)
    return {"rep": rep, "base": base, "kind": request.param}


def _configs(base, seed=SEED):
    return random_configs(base, N, seed=seed, keys=reverie_keys(), ranges=RANGES)


def test_blocks_hold_every_row_once(world):
    prep = Prepared(world["rep"])
    lay = prep.dense
    assert lay is not None
    blocks = lay.blocks
    if world["kind"] == "same-time":
        assert len(blocks) == len(set(prep.convs))       # one per conversation
    else:
        assert len(blocks) == prep.n_q                   # one per question
    assert sorted(np.concatenate([b.q for b in blocks]).tolist()) == list(range(prep.n_q))
    pos = np.concatenate([b.pos[b.present] for b in blocks])
    assert sorted(pos.tolist()) == list(range(prep.n))
    state, _ = prep.memory_states
    for b in blocks:
        qi, cj = np.nonzero(b.present)
        at = b.pos[qi, cj]
        assert np.array_equal(prep.qid[at], b.q[qi])
        assert np.array_equal(state[at], b.state[cj])      # one state per column
        assert np.array_equal(b.lexical[qi, cj], prep.raw["lexical"][at])


def test_ceil32_is_an_exact_threshold():
    rng = np.random.default_rng(SEED)
    values = rng.random(2000).astype(np.float32)
    for x in np.r_[rng.random(200), values[:50].astype(np.float64), 0.0, 1.0]:
        assert np.array_equal(values >= ceil32(x), values.astype(np.float64) >= x)


def test_exact_tests_and_the_approximation_bound(world):
    """On every cell: 'relevant' and 'kept' equal the scorer's relevant and eligible & relevant;
    on every kept cell (but those of 'first' questions under a 'first' boost, never pruned),
    |approximate - exact| <= eps (and eps is small: the bound prunes)."""
    prep = Prepared(world["rep"])
    lay = prep.dense
    state, state_rows = prep.memory_states
    worst = 0.0
    for cfg in _configs(world["base"]):
        exact = score(prep.table, cfg)
        memory = reverie_memory(RowSubset(prep.raw, state_rows), cfg)
        p = prune.params(lay, cfg, memory)
        for b in lay.blocks:
            rel, kept, a, eps = prune.block_scores(b, p)
            at = b.pos[b.present]
            assert np.array_equal(rel[b.present], exact.relevant[at])
            assert np.array_equal(kept[b.present], exact.relevant[at] & exact.eligible[at])
            assert not (rel | kept)[~b.present].any()
            k = kept & b.present
            if p.first_all:                 # 'first' boost: those questions are not pruned
                k &= ~b.first[:, None]
            err = np.abs(a[k].astype(np.float64) - exact.score[b.pos[k]])
            assert (err <= eps).all(), (cfg.to_flat(), err.max(), eps)
            worst = max(worst, float(err.max(initial=0.0)) / eps if eps else 0.0)
            assert eps < 1e-4
    assert 0 < worst < 1                     # the rounding is real, and inside the bound


def test_pruned_selections_equal_the_row_path(world, monkeypatch, path):
    """k = 2 over long candidate lists (~40 rows a question), so that thresholds cut; the budget,
    dedup and permanent cap drawn to bind: the same selections as the row path on the numpy
    path, with either selection path after pruning, and every way past a question's prefix
    taken."""
    seen = {"pruned": 0, "cut": 0, "resumed": 0, "again": 0}
    original, kept_of, pruned = prune.candidates, prune.Candidates.kept_of, rescore._pruned

    def spy(*args):
        got = original(*args)
        seen["cut"] += got is not None and bool(np.isfinite(got.cut).any())
        return got

    def spy_kept_of(self, questions, max_len=None):
        seen["again" if max_len is None else "resumed"] += 1
        return kept_of(self, questions, max_len)

    def spy_pruned(*args):
        ok = pruned(*args)
        seen["pruned"] += ok
        return ok

    monkeypatch.setattr(rescore, "PRUNE_SHARE", -1.0)     # pruning whatever the floor
    monkeypatch.setattr(rescore, "candidates", spy)
    monkeypatch.setattr(prune.Candidates, "kept_of", spy_kept_of)
    monkeypatch.setattr(rescore, "_pruned", spy_pruned)
    loose = {"recall.floor_mode": "absolute", "recall.relevance_floor": 0.0,
             "forgetting.eligibility_threshold": 0.0}
    for i, cfg in enumerate(_configs(world["base"], seed=SEED + 3)):
        if i % 2:
            cfg = cfg.replace(**loose)                   # every candidate kept
        if i % 3 == 0:                                   # the permanent cap cannot bind
            cfg = cfg.replace(**{"recall.permanent_limit": 40})
        prep = Prepared(world["rep"])
        lay = prep.dense
        got = rescore.selections(prep, cfg)
        prep.__dict__["dense"] = None                    # the row path, numpy selection
        monkeypatch.setattr(rescore, "KERNELS", False)
        want = rescore.selections(prep, cfg)
        monkeypatch.setattr(rescore, "KERNELS", path == "numba")
        assert np.array_equal(got, want), cfg.to_flat()
        prep.__dict__["dense"] = lay
    assert seen["pruned"] == N and seen["cut"] > N // 4, seen
    assert seen["resumed"] > 0 and seen["again"] > 0, seen


def test_stored_jaccards_equal_the_computed_ones(world, monkeypatch):
    """prepared.JACCARD_CELLS: the Jaccards looked up equal those computed from the
    intersection counts, bit for bit, for every pair of memories of a conversation."""
    from memlab.tune import prepared as prepared_module

    stored = Prepared(world["rep"]).dedup_arrays()
    monkeypatch.setattr(prepared_module, "JACCARD_CELLS", 0)
    computed = Prepared(world["rep"]).dedup_arrays()
    assert stored.jac is not None and computed.jac is None
    rows = np.flatnonzero(stored.inter_base >= 0)
    conv = stored.inter_base[rows]
    a, b = np.meshgrid(rows, rows, indexing="ij")
    same = conv[:, None] == conv[None, :]
    assert same.sum() > len(rows)
    assert np.array_equal(stored.jaccard(a[same], b[same]), computed.jaccard(a[same], b[same]))


def test_relevant_share_is_an_upper_bound(world):
    """rescore._relevant_share (which picks pruning or the row path) never under-counts the rows
    that pass the relevance floor, and is not trivially 1."""
    prep = Prepared(world["rep"])
    shares = []
    for cfg in _configs(world["base"]):
        exact = score(prep.table, cfg).relevant.mean()
        share = rescore._relevant_share(prep, cfg)
        assert exact <= share <= 1.0
        shares.append(share)
    assert min(shares) < 1.0

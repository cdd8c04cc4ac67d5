"""The exact index's bound scan (store.exact_prefilter): per-row int8 codes with an error bound,
scanned first; the rows that may reach the best k ranked by their cosines (float64 sums). The
codes and the bound by hand; the search returns the rows of an exact float64 ranking (cosine,
then rowid) and the float32 scan's cosines within float32 rounding, on rows built to tie and to
flip the int8 order, after removals, and on an index whose rows arrived without codes (a
persisted state); without numba the float32 scan serves, counted."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memlab.api import open_store
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.store import dots
from memlab.store.exact import ExactIndex
from memlab.store.vectors import VectorMeta

pytest.importorskip("numba")


def meta(n, *, agent="a", user="u", layer="long_term", active=True, t0=1_700_000_000):
    return [VectorMeta(agent_id=agent, user_id=user, retention_layer=layer,
                       cognitive_layer="episodic", event_time=t0 + i, active=active)
            for i in range(n)]


def unit(rng, n, dim):
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def truth(ix: ExactIndex, q, k, **kw):
    """The rowids an exact ranking returns: float64 cosines of the rows the filters keep, best
    first, ties by rowid."""
    idx = ix.select(None, agent_id="a", user_id="u", **kw)
    cos = ix._mat[idx].astype(np.float64) @ ix.query(q, k).astype(np.float64)
    rows = ix._rowid[idx]
    return rows[np.lexsort((rows, -cos))][:k].tolist()


def pair(plain: ExactIndex, fast: ExactIndex, q, k, **kw):
    r0, c0 = plain.search(q, k, agent_id="a", user_id="u", **kw)
    r1, c1 = fast.search(q, k, agent_id="a", user_id="u", **kw)
    assert r1.tolist() == truth(fast, q, k, **kw), kw
    assert sorted(r1.tolist()) == sorted(r0.tolist()), kw
    np.testing.assert_allclose(np.sort(c1), np.sort(c0), rtol=0, atol=4e-7)   # float32 rounding
    return r1


def test_row_codes_by_hand():
    rows = np.array([[0.6, -0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.5, -0.5]],
                    np.float32)
    codes, scale, err = dots.row_codes(rows)
    # row 0: scale 0.8 / 127; 0.6 / scale = 95.25 -> 95; -0.8 -> -127
    assert codes.tolist() == [[95, -127, 0, 0], [0, 0, 0, 0], [127, 127, 127, -127]]
    assert scale[0] == np.float32(np.float32(0.8) / np.float32(127)) and scale[1] == 1.0
    s0 = float(scale[0])
    want = math.hypot(float(np.float32(0.6)) - 95 * s0, float(np.float32(-0.8)) + 127 * s0)
    assert want <= err[0] <= want * (1 + 1e-5)           # 0.00157..., rounded up
    assert err[1] == 0.0 and err[2] <= 1e-7               # exact codes: no error
    # the bound holds for unit queries: |row . q - scale * (codes . q)| <= err
    rng = np.random.default_rng(0)
    for q in unit(rng, 50, 4):
        got = scale.astype(np.float64) * (codes.astype(np.float64) @ q)
        assert (np.abs(rows.astype(np.float64) @ q - got) <= err + 1e-9).all()


def test_scaled_int8_is_scale_times_codes_dot_q():
    rng = np.random.default_rng(1)
    rows = unit(rng, 40, 16)
    codes, scale, _ = dots.row_codes(rows)
    q = unit(rng, 1, 16)[0]
    want = scale.astype(np.float64) * (codes.astype(np.float64) @ q.astype(np.float64))
    np.testing.assert_allclose(dots.scaled_int8(codes, scale, q, None), want, atol=1e-6)
    idx = np.array([39, 0, 7, 7], np.int64)
    np.testing.assert_allclose(dots.scaled_int8(codes, scale, q, idx), want[idx], atol=1e-6)
    assert abs(dots.margin(384) - 4 * 386 * 2.0 ** -24) < 1e-15


def test_the_bound_keeps_a_row_the_codes_rank_lower():
    """Two rows whose int8 approximations rank them the other way round than float32 (the
    coarse code of the small component): k=1 must still return the float32 best. Ranking by the
    codes alone (no error bound) returns the other row."""
    a = np.array([0.3035, math.sqrt(1 - 0.3035 ** 2)], np.float32)
    b = np.array([0.3030, math.sqrt(1 - 0.3030 ** 2)], np.float32)
    rows = np.stack([a, b])
    q = np.array([1.0, 0.0], np.float32)
    codes, scale, _ = dots.row_codes(rows)
    approx = dots.scaled_int8(codes, scale, q, None)
    assert approx[0] < approx[1] and rows[0] @ q > rows[1] @ q    # the codes flip the order
    fast = ExactIndex(dim=2, prefilter=True)
    fast.add([1, 2], rows, meta(2))
    rowids, cos = fast.search(q, 1, agent_id="a", user_id="u")
    assert rowids.tolist() == [1] and cos[0] == pytest.approx(0.3035, abs=1e-6)
    assert fast._coded == 2


def test_search_equals_the_float32_scan():
    rng = np.random.default_rng(3)
    n, dim = 3000, 64
    m = unit(rng, n, dim)
    m[1000:1010] = m[5]                  # exact ties: cut by rowid
    m[2000:2300] = unit(rng, 1, dim)[0] + 0.1 * unit(rng, 300, dim)   # a dense cluster
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    md = meta(n)
    for i in range(0, n, 7):
        md[i] = VectorMeta("a", "u", "permanent", "episodic", md[i].event_time, i % 2 == 0)
    rowids = np.arange(1, n + 1) * 3     # not positions
    plain, fast = ExactIndex(dim=dim), ExactIndex(dim=dim, prefilter=True)
    for ix in (plain, fast):
        ix.add(rowids, m, md)
    queries = np.vstack([m[[5, 2100, 17]], unit(rng, 5, dim)])
    for q in queries:
        for k in (1, 10, 40, 2999, 3000, 4096):
            pair(plain, fast, q, k)
        pair(plain, fast, q, 10, active_only=False)
        pair(plain, fast, q, 10, layers=["permanent"])
        pair(plain, fast, q, 10, since=1_700_000_000 + 1500, until=1_700_000_000 + 2200)
    top = pair(plain, fast, m[5], 5)     # row 5 and its copies (1001, at position 1000; 1002,
    assert top.tolist() == [6 * 3, 1001 * 3, 1003 * 3, 1004 * 3, 1005 * 3]   # inactive)
    # the bound keeps few rows: the codes did the scan
    idx = fast.select(None, agent_id="a", user_id="u")
    kept = fast.bound(idx, fast.query(queries[-1], 10), 10)
    assert 10 <= len(kept) < len(idx) // 10


def test_codes_follow_removals_and_rows_arriving_without_them():
    rng = np.random.default_rng(4)
    n, dim = 1200, 32
    m = unit(rng, n, dim)
    plain, fast = ExactIndex(dim=dim), ExactIndex(dim=dim, prefilter=True)
    for ix in (plain, fast):
        ix.add(np.arange(1, n + 1), m, meta(n))
        ix.remove(list(range(1, n, 3)))
        ix.add([5000, 7], unit(rng, 2, dim), meta(2))    # one new, one replaced
    assert fast._coded == len(fast) == len(plain)
    qs = unit(rng, 6, dim)
    for q in qs:
        pair(plain, fast, q, 10)
    # a state whose rows arrived without codes (as indexio loads a saved one): coded at search
    bare = ExactIndex(dim=dim, prefilter=True)
    for name in ("_rowid", "_agent", "_user", "_layer", "_time", "_active", "_rnorm", "_mat"):
        setattr(bare, name, getattr(plain, name)[:len(plain)].copy())
    bare._n, bare._codes = len(plain), dict(plain._codes)
    bare._pos.set(bare._rowid, np.arange(bare._n))
    assert bare._coded == 0
    for q in qs:
        pair(plain, bare, q, 10)
    assert bare._coded == len(bare)
    bare.remove([7])       # codes valid for every row: compacted with them
    plain.remove([7])
    assert bare._coded == len(bare)
    bare.add([9000], unit(rng, 1, dim), meta(1))    # arrays grown past the saved length
    plain.add([9000], bare._mat[len(bare) - 1:len(bare)], meta(1))
    for q in qs:
        pair(plain, bare, q, 10)


def test_without_numba_the_float32_scan_serves(monkeypatch):
    rng = np.random.default_rng(5)
    m = unit(rng, 500, 16)
    plain, fast = ExactIndex(dim=16), ExactIndex(dim=16, prefilter=True)
    for ix in (plain, fast):
        ix.add(np.arange(1, 501), m, meta(500))
    monkeypatch.setattr(dots, "_kernels", {"none": lambda: None})
    before = dots.stats["bound scan: numpy fallback"]
    for q in unit(rng, 3, 16):
        pair(plain, fast, q, 10)
    assert dots.stats["bound scan: numpy fallback"] == before + 3


@pytest.mark.parametrize("on", [True, False])
def test_the_store_follows_store_exact_prefilter(tmp_path, on):
    c = MemlabConfig().replace(**{"store.exact_prefilter": on, "embedding.backend": "hashing",
                                  "store.persist_min_memories": 0})
    texts = [f"memory {i} about the red kettle" if i % 5 == 0 else f"note {i} on chess {i}"
             for i in range(60)] + ["小明在北京的咖啡馆喝咖啡", "小红每周日和奶奶下棋"]
    path = str(tmp_path / "s.sqlite")
    emb = HashingEmbedder(dim=64)
    with open_store(path, config=c, embedder=emb, clock=FixedClock(1.8e9)) as st:
        st.add_many([{"text": t, "timestamp": 1.7e9 + i} for i, t in enumerate(texts)])
        got = [m.text for m in st.recall("red kettle", k=5)]
        assert st._store.dense.index.prefilter is on
    with open_store(path, config=c, embedder=emb, clock=FixedClock(1.8e9)) as st:  # saved state
        assert st._store.dense.index.prefilter is on
        assert [m.text for m in st.recall("red kettle", k=5)] == got

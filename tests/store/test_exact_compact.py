"""ExactIndex with compact rows (store.exact_dtype float16 / int8): the scan equals the formula
(rows widened to float32, int8 times scale/127), and the ranking stays close to float32's."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.store import dots
from memlab.store.exact import ExactIndex
from memlab.store.vectors import VectorMeta, quantize_int8

DIM = 384   # int8_scale 0.25 is meant for unit vectors of a few hundred dimensions


def unit(rng, n):
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def meta(n, agent="a", user="u"):
    return [VectorMeta(agent_id=agent, user_id=user, retention_layer="long_term", cognitive_layer="episodic",
                       event_time=1_700_000_000 + i, active=True) for i in range(n)]


@pytest.mark.parametrize("dtype", [np.float16, np.int8])
def test_dot_equals_the_widened_rows(dtype):
    rng = np.random.default_rng(1)
    m = unit(rng, 300)
    rows = quantize_int8(m, 0.25) if dtype == np.int8 else m.astype(np.float16)
    q = unit(rng, 1)[0]
    idx = np.array([0, 7, 299, 5, 5], np.int64)
    want = rows[idx].astype(np.float64) @ q.astype(np.float64)
    np.testing.assert_allclose(dots.dot(rows, q, idx), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype,tol", [("float16", 1e-4), ("int8", 4e-3)])
def test_compact_index_ranks_close_to_float32(dtype, tol):
    rng = np.random.default_rng(2)
    n = 2000
    m = unit(rng, n)
    rowids = np.arange(1, n + 1)
    full, small = ExactIndex(dim=DIM), ExactIndex(dim=DIM, exact_dtype=dtype)
    for ix in (full, small):
        ix.add(rowids, m, meta(n))
    assert small._mat.dtype == np.dtype(dtype) and small._mat.nbytes * \
        (2 if dtype == "float16" else 4) == full._mat.nbytes
    overlap, errors = [], []
    for q in unit(rng, 40):
        r32, c32 = full.search(q, 10, agent_id="a", user_id="u")
        r, c = small.search(q, 10, agent_id="a", user_id="u")
        overlap.append(len(set(r.tolist()) & set(r32.tolist())) / 10)
        # the cosine of each returned row is its float32 cosine within the rows' rounding
        exact = dict(zip(rowids.tolist(), (m @ q).tolist()))
        errors.extend(c - np.array([exact[x] for x in r.tolist()]))
    # each cosine within the rows' rounding (int8: 0.25/127 per component), and no bias
    assert np.abs(errors).max() < tol and abs(np.mean(errors)) < tol / 8
    assert np.mean(overlap) >= 0.9
    if dtype == "int8":   # the cosine of the dequantised row, renormalised (float64 formula)
        deq = quantize_int8(m, 0.25).astype(np.float64) * (0.25 / 127)
        deq /= np.linalg.norm(deq, axis=1, keepdims=True)
        r, c = small.search(q, 10, agent_id="a", user_id="u")
        np.testing.assert_allclose(c, deq[r - 1] @ q, atol=1e-5)
    pos, vecs = small.vectors([5, 10**6, 9])
    assert pos.tolist() == [0, 2]
    np.testing.assert_allclose(vecs, m[[4, 8]], atol=tol)


def test_an_unknown_exact_dtype_is_refused():
    from memlab.errors import InvalidInput
    with pytest.raises(InvalidInput, match="exact_dtype"):
        ExactIndex(dim=4, exact_dtype="bfloat16")

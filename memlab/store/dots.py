"""Dot products of a float32 query with compact (float16, int8) rows: the exact index's scan.

numpy has no BLAS for float16 or int8 (``int8 @ int8`` even overflows in int8), and converting a
100k x 384 block to float32 per query costs more than the float32 product itself. With numba
(the ``fast`` extra) one compiled loop reads each compact row once and accumulates in float32:
int8 rows are widened, float16 rows decoded through a 65,536-entry table (float16 bits ->
float32). Without numba the rows are converted in blocks of :data:`BLOCK` (same results, slower),
which is logged once and counted in :data:`stats` (``"compact dot: numpy fallback"``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Callable

import numpy as np

log = logging.getLogger("memlab")

#: Rows converted at a time by the numpy fallback (bounds its scratch memory).
BLOCK = 4096
stats: Counter[str] = Counter()
_HALF = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
_kernels: dict[str, Callable] = {}


def _compile() -> dict[str, Callable]:
    if _kernels:
        return _kernels
    try:
        import numba
    except ImportError as exc:
        _kernels["none"] = lambda: None
        stats["compact dot: numpy fallback"] += 1
        log.warning("memlab: numba does not import (%s): the exact index's float16/int8 scan "
                    "converts rows with numpy (slower)", exc)
        return _kernels

    @numba.njit(nogil=True, fastmath=True, cache=False)
    def int8_rows(mat, q, idx):    # pragma: no cover - compiled
        out = np.empty(len(idx), np.float32)
        d = mat.shape[1]
        for i in range(len(idx)):
            r = idx[i]
            acc = np.float32(0.0)
            for j in range(d):
                acc += np.float32(mat[r, j]) * q[j]
            out[i] = acc
        return out

    @numba.njit(nogil=True, fastmath=True, cache=False)
    def half_rows(bits, q, idx, table):    # pragma: no cover - compiled
        out = np.empty(len(idx), np.float32)
        d = bits.shape[1]
        for i in range(len(idx)):
            r = idx[i]
            acc = np.float32(0.0)
            for j in range(d):
                acc += table[bits[r, j]] * q[j]
            out[i] = acc
        return out

    _kernels.update(int8=int8_rows, float16=half_rows)
    return _kernels


def dot(mat: np.ndarray, q: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``mat[idx] @ q`` in float32 for a float32, float16 or int8 ``mat`` (int8 rows as their
    integer values: the caller applies the scale)."""
    q = np.ascontiguousarray(q, np.float32)
    idx = np.ascontiguousarray(idx, np.int64)
    if mat.dtype == np.float32:
        return mat[idx] @ q
    k = _compile()
    if mat.dtype == np.int8 and "int8" in k:
        return k["int8"](mat, q, idx)
    if mat.dtype == np.float16 and "float16" in k:
        return k["float16"](mat.view(np.uint16), q, idx, _HALF)
    out = np.empty(len(idx), np.float32)
    for s in range(0, len(idx), BLOCK):
        out[s:s + BLOCK] = mat[idx[s:s + BLOCK]].astype(np.float32) @ q
    return out


__all__ = ["BLOCK", "dot", "stats"]

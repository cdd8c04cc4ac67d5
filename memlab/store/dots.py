"""Dot products of a float32 query with compact (float16, int8) rows: the exact index's scan.

numpy has no BLAS for float16 or int8 (``int8 @ int8`` even overflows in int8), and converting a
100k x 384 block to float32 per query costs more than the float32 product itself. With numba
(the ``fast`` extra) one compiled loop reads each compact row once and accumulates in float32:
int8 rows are widened, float16 rows decoded through a 65,536-entry table (float16 bits ->
float32). Without numba the rows are converted in blocks of :data:`BLOCK` (same results, slower),
which is logged once and counted in :data:`stats` (``"compact dot: numpy fallback"``).

The float32 index's bound scan (``store.exact_prefilter``): beside its float32 rows the index
keeps per-row int8 codes (:func:`row_codes`: scale = the row's largest magnitude / 127, and an
upper bound of the row's distance to its codes times scale); :func:`scaled_int8` scans the codes
(a quarter of the float32 rows' memory traffic) and the index rescores, in float32, only the rows
whose bound can still reach the best k (:func:`margin` covers the float32 rounding of both
scans). Without numba it is skipped (the float32 scan serves, same results), counted in
:data:`stats` (``"bound scan: numpy fallback"``).

The kernels are compiled once per process and cached on disk (``cache=True``: this package's
``__pycache__`` or ``NUMBA_CACHE_DIR``; without a writable cache directory, compiled in each
process, logged once).
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


def _int8_rows(mat, q, idx):    # pragma: no cover - compiled
    out = np.empty(len(idx), np.float32)
    d = mat.shape[1]
    for i in range(len(idx)):
        r = idx[i]
        acc = np.float32(0.0)
        for j in range(d):
            acc += np.float32(mat[r, j]) * q[j]
        out[i] = acc
    return out


def _int8_all(mat, q):    # pragma: no cover - compiled
    out = np.empty(mat.shape[0], np.float32)
    d = mat.shape[1]
    for i in range(mat.shape[0]):
        acc = np.float32(0.0)
        for j in range(d):
            acc += np.float32(mat[i, j]) * q[j]
        out[i] = acc
    return out


def _float_rows(mat, q, idx):    # pragma: no cover - compiled
    out = np.empty(len(idx), np.float32)
    d = mat.shape[1]
    for i in range(len(idx)):
        r = idx[i]
        acc = 0.0
        for j in range(d):
            acc += np.float64(mat[r, j]) * np.float64(q[j])
        out[i] = acc
    return out


def _row_codes(rows, codes, scale, err):    # pragma: no cover - compiled
    d = rows.shape[1]
    for i in range(rows.shape[0]):
        peak = np.float32(0.0)
        for j in range(d):
            peak = max(peak, abs(rows[i, j]))
        sc = np.float32(peak / np.float32(127.0)) if peak > 0 else np.float32(1.0)
        inv = np.float32(127.0) / peak if peak > 0 else np.float32(1.0)
        e = 0.0
        for j in range(d):
            c = min(np.float32(127.0), max(np.float32(-127.0), np.rint(rows[i, j] * inv)))
            codes[i, j] = np.int8(c)
            diff = np.float64(rows[i, j]) - np.float64(c) * np.float64(sc)
            e += diff * diff
        scale[i] = sc
        err[i] = np.float32(np.sqrt(e) * (1.0 + 2.0 ** -20))


def _half_rows(bits, q, idx, table):    # pragma: no cover - compiled
    out = np.empty(len(idx), np.float32)
    d = bits.shape[1]
    for i in range(len(idx)):
        r = idx[i]
        acc = np.float32(0.0)
        for j in range(d):
            acc += table[bits[r, j]] * q[j]
        out[i] = acc
    return out


def _jit(numba, fn: Callable, fastmath: bool = True) -> Callable:
    """``numba.njit(cache=True)``, or without the disk cache where no cache directory is
    writable (numba raises RuntimeError when it finds no cache locator)."""
    try:
        return numba.njit(nogil=True, fastmath=fastmath, cache=True)(fn)
    except RuntimeError as exc:
        if not stats["no disk cache"]:
            log.warning("memlab: numba cannot cache the exact index's kernels on disk (%s): "
                        "compiled in each process", exc)
        stats["no disk cache"] += 1
        return numba.njit(nogil=True, fastmath=fastmath)(fn)


def _compile() -> dict[str, Callable]:
    if _kernels:
        return _kernels
    try:
        import numba
    except ImportError as exc:
        _kernels["none"] = lambda: None
        stats["compact dot: numpy fallback"] += 1
        log.warning("memlab: numba does not import (%s): the exact index's float16/int8 scan "
                    "converts rows with numpy (slower), its bound scan is skipped", exc)
        return _kernels
    _kernels.update(int8=_jit(numba, _int8_rows), int8_all=_jit(numba, _int8_all),
                    float16=_jit(numba, _half_rows), rows64=_jit(numba, _float_rows),
                    codes=_jit(numba, _row_codes))
    return _kernels


def dot(mat: np.ndarray, q: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    """``mat[idx] @ q`` in float32 for a float32, float16 or int8 ``mat`` (int8 rows as their
    integer values: the caller applies the scale). ``idx`` None: every row of ``mat``, read in
    order (the same values as ``idx = arange(len(mat))``)."""
    q = np.ascontiguousarray(q, np.float32)
    if idx is None:
        if mat.dtype == np.int8 and "int8_all" in _compile():
            return _kernels["int8_all"](mat, q)
        idx = np.arange(len(mat))
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


def row_codes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row int8 codes of float32 ``rows`` for the bound scan: (codes int8, scale float32,
    err float32) with scale = max |row| / 127 (1 for a zero row), codes = round(row * 127 /
    max |row|), and err >= || row - codes * scale ||_2 (summed in float64 from the float32
    scale, rounded up), so that for any unit query q, | row . q - scale * (codes . q) | <= err.
    One compiled pass over the rows (with numba, see :func:`bound_scan`)."""
    rows = np.ascontiguousarray(rows, np.float32)
    codes = np.empty(rows.shape, np.int8)
    scale = np.empty(len(rows), np.float32)
    err = np.empty(len(rows), np.float32)
    _compile()["codes"](rows, codes, scale, err)
    return codes, scale, err


def margin(dim: int) -> float:
    """What float32 rounding may move a cosine of unit vectors of ``dim`` components by, in
    either scan (float32 sums of ``dim`` products whose magnitudes add up to at most ~1: under
    (dim + 1) * 2^-24 each), doubled for safety: the bound scan widens its window by it."""
    return 4.0 * (dim + 2) * 2.0 ** -24


def exact_rows(mat: np.ndarray, q: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``mat[idx] @ q`` for float32 rows, each summed in float64 then rounded to float32: the
    same value for the same row wherever it sits (BLAS's float32 sums may differ in the last
    bit with the row's place in the block, which would break exact ties by place instead of by
    rowid). Needs numba (the bound scan's caller checked)."""
    return _compile()["rows64"](mat, np.ascontiguousarray(q, np.float32),
                                np.ascontiguousarray(idx, np.int64))


def bound_scan() -> bool:
    """Whether the bound scan's kernels are there (numba); a False is counted in :data:`stats`
    (the caller scans its float32 rows instead: same rows, slower)."""
    if "int8" in _compile():
        return True
    stats["bound scan: numpy fallback"] += 1
    return False


def scaled_int8(codes: np.ndarray, scale: np.ndarray, q: np.ndarray,
                idx: np.ndarray | None) -> np.ndarray:
    """``scale * (codes @ q)`` at rows ``idx`` (None: every row) in float32 (the rows read in
    order; with numba, see :func:`bound_scan`)."""
    sims = dot(codes, q, idx)
    return sims * (scale if idx is None else scale[idx])


__all__ = ["BLOCK", "bound_scan", "dot", "exact_rows", "margin", "row_codes", "scaled_int8", "stats"]

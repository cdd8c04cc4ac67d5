"""ExactIndex: an in-process exact (numpy) copy of one vector table, kept in step with SQLite.

sqlite-vec's vec0 search is a brute-force scan in SQLite; a numpy matrix-vector product over the
same vectors is several times faster. ExactIndex holds the vectors of one :class:`VectorCache`
(unit-normalised float32; int8 rows dequantised exactly as sqlite-vec sees them) with their filter
columns as arrays, and answers the same searches with the filters applied BEFORE ranking (a mask
over agent / user / active / layer / time, then ``argpartition``). Results equal sqlite-vec's:
same rowids, cosines within float32 rounding (parity-tested).

Compact rows (``store.exact_dtype``): the index may hold its unit vectors as float16 (half the
memory) or int8 (a quarter: ``quantize_int8`` of the unit vector at ``store.int8_scale``), scanned
by :func:`memlab.store.dots.dot` against the float32 query. Cosines are then those of the stored
rows (float16 rounding; int8: the dequantised row, renormalised by its stored norm), so the
ranking may differ from float32's near ties: the top-10 overlap is measured by
``benchmarks/recall_latency.py``.

The bound scan (``store.exact_prefilter``, float32 rows only): the index also keeps per-row int8
codes with an error bound (:func:`memlab.store.dots.row_codes`); a search scans the codes (a
quarter of the memory traffic), keeps the rows whose upper bound reaches the k-th best lower
bound, and ranks those by their cosines summed in float64, rounded to float32
(:func:`memlab.store.dots.exact_rows`). Every row at or above the k-th cosine survives, ties
included, so the rows are those of an exact scan; the cosines equal the float32 scan's within
float32 rounding (BLAS's float32 sums may differ in the last bit, even for identical rows at
different places: here identical rows tie exactly and are cut by rowid). The codes are built
with the rows (``add``), or by the first search after rows arrived without them (a persisted
state loaded by :mod:`memlab.store.indexio`).

Keeping in step: load it at open (:meth:`ExactIndex.load`); after each *committed* write apply the
same change (:meth:`add`, :meth:`remove`) passing the generation the write returned; a generation
that does not follow the index's own (another process wrote meanwhile) marks it stale, and
:meth:`sync` reloads it from the table whenever the table's generation differs (the generation,
the vectors and their filter columns read in one snapshot).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from memlab.errors import InvalidInput
from memlab.types import LAYER_CODES

from .dots import bound_scan, dot, exact_rows, margin, row_codes, scaled_int8
from .rowmap import RowMap
from .snapshot import read_snapshot
from .vectors import MAX_K, VectorCache, VectorMeta, clamp_time, quantize_int8


class ExactIndex:
    """Exact cosine search over one model version's vectors, in memory.

    Args:
        dim: vector dimension.
        dtype: the table's element type; ``"int8"`` rows are quantised and dequantised on add so
            the index ranks exactly what sqlite-vec ranks.
        int8_scale: the table's quantisation scale.
        gather_fraction: when the filters keep fewer than this fraction of rows, score only those
            rows (gather); otherwise score all rows and mask. A speed knob, not a result changer.
        exact_dtype: how the index holds its unit vectors: ``"float32"``, ``"float16"`` or
            ``"int8"`` (see the module).
        prefilter: float32 rows only: search through the bound scan (see the module; same
            results, faster with numba).
    """

    def __init__(self, *, dim: int, dtype: str = "float32", int8_scale: float = 0.25,
                 gather_fraction: float = 0.25, exact_dtype: str = "float32",
                 prefilter: bool = False) -> None:
        if exact_dtype not in _ROW_TYPES:
            raise InvalidInput("exact_dtype", "must be float32, float16 or int8", exact_dtype)
        self.dim, self.dtype, self.int8_scale = int(dim), dtype, float(int8_scale)
        self.gather_fraction = float(gather_fraction)
        self.exact_dtype = exact_dtype
        self.prefilter = bool(prefilter)
        self.generation = -1
        self.stale = False
        self._n = 0
        self._mat = np.zeros((0, self.dim), _ROW_TYPES[exact_dtype])
        self._rowid = np.zeros(0, np.int64)
        self._agent = np.zeros(0, np.int32)
        self._user = np.zeros(0, np.int32)
        self._layer = np.zeros(0, np.int8)
        self._time = np.zeros(0, np.int64)
        self._active = np.zeros(0, bool)
        self._rnorm = np.zeros(0, np.float32)   # 1 / |held row| (int8: the dequantised row's)
        self._codes: dict[str, int] = {}
        self._pos = RowMap()
        # the bound scan's int8 codes, their scale and error bound, valid for rows [0, _coded)
        self._code8 = np.zeros((0, self.dim), np.int8)
        self._cscale = np.zeros(0, np.float32)
        self._cerr = np.zeros(0, np.float32)
        self._coded = 0

    @classmethod
    def load(cls, cache: VectorCache, **kwargs: Any) -> "ExactIndex":
        """An index holding every row of ``cache``'s table (empty when the table does not exist)."""
        index = cls(dim=cache.dim, dtype=cache.dtype, int8_scale=cache.int8_scale, **kwargs)
        index._reload(cache)
        return index

    def _reload(self, cache: VectorCache) -> None:
        self.__init__(dim=cache.dim, dtype=cache.dtype, int8_scale=cache.int8_scale,
                      gather_fraction=self.gather_fraction, exact_dtype=self.exact_dtype,
                      prefilter=self.prefilter)
        with read_snapshot(cache.conn):    # the generation and the rows of one state
            if not cache.exists():
                return
            gen = cache.generation()
            rowids, mat, meta = cache.rows()
        self._append(rowids, mat, meta, quantised=True)
        self.generation = gen

    def sync(self, cache: VectorCache) -> bool:
        """Reload from the table when it changed behind this index's back; True if reloaded."""
        if self.stale or cache.generation() != self.generation:
            self._reload(cache)
            return True
        return False

    def __len__(self) -> int:
        return self._n

    # -- changes after a committed write ---------------------------------------------------------
    def add(self, rowids: Sequence[int], vectors: Any, meta: Sequence[VectorMeta], *,
            generation: int | None = None) -> None:
        """Apply a committed upsert (rowids already present are replaced)."""
        rowids = np.asarray(rowids, np.int64).reshape(-1)
        arr = np.asarray(vectors, np.float32)
        if arr.ndim != 2 or arr.shape[1] != self.dim or arr.shape[0] != len(rowids):
            raise InvalidInput("vector", f"must be ({len(rowids)}, {self.dim})", tuple(arr.shape))
        if len(meta) != len(rowids):
            raise InvalidInput("meta", f"needs one per rowid ({len(rowids)})", len(meta))
        self.remove(rowids[self._pos.lookup(rowids) >= 0].tolist())
        self._append(rowids, arr, list(meta), quantised=False)
        self._advance(generation)

    def remove(self, rowids: Sequence[int], *, generation: int | None = None) -> None:
        """Apply a committed delete (absent rowids are ignored)."""
        at = self._pos.lookup(rowids)
        drop = at[at >= 0]
        if len(drop):
            keep = np.ones(self._n, bool)
            keep[drop] = False
            n = int(keep.sum())
            for name in ("_rowid", "_agent", "_user", "_layer", "_time", "_active", "_rnorm",
                         "_mat"):
                arr = getattr(self, name)
                arr[:n] = arr[:self._n][keep]
            if self._coded == self._n:    # every row coded: the codes move with their rows
                for name in ("_code8", "_cscale", "_cerr"):
                    arr = getattr(self, name)
                    arr[:n] = arr[:self._n][keep]
                self._coded = n
            else:                          # built again, whole, when a search needs them
                self._coded = 0
            self._n = n
            self._pos.reset(self._rowid[:n])
        self._advance(generation)

    def _advance(self, generation: int | None) -> None:
        if generation is None:
            return
        if generation != self.generation + 1:
            self.stale = True
        self.generation = generation

    def _code(self, name: str) -> int:
        return self._codes.setdefault(name, len(self._codes))

    def _append(self, rowids: np.ndarray, mat: np.ndarray, meta: list[VectorMeta], *,
                quantised: bool) -> None:
        m = len(rowids)
        if m == 0:
            return
        if self.dtype == "int8" and not quantised:
            mat = quantize_int8(mat, self.int8_scale).astype(np.float32)
        mat = self.encode(mat)
        need = self._n + m
        if need > len(self._rowid):
            cap = max(need, 2 * len(self._rowid), 1024)
            self._mat = _grow(self._mat, cap)
            for name in ("_rowid", "_agent", "_user", "_layer", "_time", "_active", "_rnorm"):
                setattr(self, name, _grow(getattr(self, name), cap))
        s = slice(self._n, need)
        self._mat[s] = mat
        self._rowid[s] = rowids
        self._agent[s] = [self._code(x.agent_id) for x in meta]
        self._user[s] = [self._code(x.user_id) for x in meta]
        self._layer[s] = [LAYER_CODES[x.retention_layer] for x in meta]
        self._time[s] = [x.event_time for x in meta]
        self._active[s] = [x.active for x in meta]
        self._rnorm[s] = self.inverse_norms(mat)
        self._pos.set(rowids, np.arange(self._n, self._n + m))
        coded = self._coded == self._n
        self._n = need
        if coded and self.prefilter:
            self._code_rows()

    def _code_rows(self) -> None:
        """The bound scan's codes of the rows not yet coded (float32 rows; with numba)."""
        if self._coded >= self._n or self.exact_dtype != "float32" or not bound_scan():
            return
        cap = len(self._rowid)
        if len(self._cscale) < cap:
            self._code8 = _grow(self._code8[:self._coded], cap)
            self._cscale = _grow(self._cscale[:self._coded], cap)
            self._cerr = _grow(self._cerr[:self._coded], cap)
        s = slice(self._coded, self._n)
        self._code8[s], self._cscale[s], self._cerr[s] = row_codes(self._mat[s])
        self._coded = self._n

    def encode(self, mat: np.ndarray) -> np.ndarray:
        """Rows as this index holds them: unit-normalised, then in ``exact_dtype``."""
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        unit = (mat / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)
        if self.exact_dtype == "int8":
            return quantize_int8(unit, self.int8_scale)
        return unit.astype(_ROW_TYPES[self.exact_dtype], copy=False)

    def inverse_norms(self, rows: np.ndarray) -> np.ndarray:
        """1 / |row| of held rows (1 for float32 and float16 rows, unit already; int8 rows: of
        the dequantised row, so that its cosine is that of the row as held, renormalised)."""
        if self.exact_dtype != "int8":
            return np.ones(len(rows), np.float32)
        norms = np.linalg.norm(self._unit(rows), axis=1)
        return (1.0 / np.where(norms == 0, 1.0, norms)).astype(np.float32)

    def _unit(self, rows: np.ndarray) -> np.ndarray:
        """Held rows back as float32 vectors (int8: dequantised)."""
        out = rows.astype(np.float32)
        return out * (self.int8_scale / 127.0) if self.exact_dtype == "int8" else out

    def vectors(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``rowids`` held by the index, their unit vectors as ranked)."""
        at = self._pos.lookup(rowids)
        pos = np.flatnonzero(at >= 0)
        if not len(pos):
            return pos, np.zeros((0, self.dim), np.float32)
        if self.exact_dtype == "float32":    # unit already (inverse norm 1): no copies
            return pos, self._mat[at[pos]]
        return pos, self._unit(self._mat[at[pos]]) * self._rnorm[at[pos], None]

    # -- search ----------------------------------------------------------------------------------
    def search(self, query_vec: Any, k: int, *, agent_id: str, user_id: str,
               layers: Sequence[str] | None = None, since: float | None = None,
               until: float | None = None, active_only: bool = True
               ) -> tuple[np.ndarray, np.ndarray]:
        """Same contract as :meth:`VectorCache.search`: (rowids int64, cosine float32), best first."""
        q = self.query(query_vec, k)
        idx = self.select(None, agent_id=agent_id, user_id=user_id, layers=layers, since=since,
                          until=until, active_only=active_only)
        if k == 0 or len(idx) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        every = len(idx) == self._n      # select kept every row: idx is 0 .. n - 1
        if self.prefilter and self.exact_dtype == "float32" and bound_scan():
            kept = idx if k >= len(idx) else self.bound(idx, q, k, every=every)
            return self.rank(kept, exact_rows(self._mat, q, kept), k)
        return self.rank(idx, self.score(idx, q, every=every), k)

    def bound(self, idx: np.ndarray, q: np.ndarray, k: int, *, every: bool = False
              ) -> np.ndarray:
        """The positions of ``idx`` (``k`` < their number) whose float32 cosine with ``q`` may
        be among their best ``k``: the bound scan over the int8 codes (module docstring; needs
        numba: :func:`memlab.store.dots.bound_scan`). ``every``: ``idx`` is every position in
        order (read the codes in order)."""
        self._code_rows()
        n = self._n
        sims = scaled_int8(self._code8[:n], self._cscale[:n], q, None if every else idx)
        err = self._cerr[:n] if every else self._cerr[idx]
        low = sims - err
        kth = np.partition(low, len(low) - k)[len(low) - k]
        return idx[sims + err >= kth - np.float32(2 * margin(self.dim))]

    def query(self, query_vec: Any, k: int) -> np.ndarray:
        """The query as this index scores it (validated; int8 tables: quantised; unit)."""
        q = np.asarray(query_vec, np.float32).reshape(-1)
        if q.shape[0] != self.dim or not np.isfinite(q).all() or not q.any():
            raise InvalidInput("vector", f"must be a finite, non-zero vector of dimension "
                               f"{self.dim}", tuple(np.shape(query_vec)))
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
            raise InvalidInput("k", f"must be an integer in [0, {MAX_K}]", k)
        if self.dtype == "int8":
            q = quantize_int8(q, self.int8_scale).astype(np.float32)
        return q / np.linalg.norm(q)

    def positions(self, rowids: Sequence[int]) -> np.ndarray:
        """Each rowid's position in the index (-1 when absent)."""
        return self._pos.lookup(rowids)

    def rowids(self) -> np.ndarray:
        """The rowids held, in position order."""
        return self._rowid[:self._n]

    def select(self, at: np.ndarray | None, *, agent_id: str, user_id: str,
               layers: Sequence[str] | None = None, since: float | None = None,
               until: float | None = None, active_only: bool = True) -> np.ndarray:
        """The positions (of ``at``, or of every row when None) whose row the filters keep."""
        a, u = self._codes.get(agent_id), self._codes.get(user_id)
        if a is None or u is None or self._n == 0:
            return np.zeros(0, np.int64)
        sel: Any = slice(0, self._n) if at is None else np.asarray(at, np.int64)
        mask = (self._agent[sel] == a) & (self._user[sel] == u)
        if active_only:
            mask &= self._active[sel]
        if layers is not None:
            codes = [LAYER_CODES[x] for x in layers if x in LAYER_CODES]
            mask &= np.isin(self._layer[sel], codes)
        if since is not None:
            mask &= self._time[sel] >= math.floor(clamp_time(since, "since"))
        if until is not None:
            mask &= self._time[sel] < math.floor(clamp_time(until, "until"))
        return np.flatnonzero(mask) if at is None else sel[mask]

    def score(self, idx: np.ndarray, q: np.ndarray, *, every: bool = False) -> np.ndarray:
        """Cosines of the rows at positions ``idx`` with the prepared query ``q``. ``every``:
        ``idx`` is every position in order (compact rows are then read in order)."""
        n = self._n
        if self.exact_dtype != "float32":
            sims = dot(self._mat[:n], q, None) if every else dot(self._mat, q, idx)
            if self.exact_dtype == "int8":
                sims = sims * np.float32(self.int8_scale / 127.0) * \
                    (self._rnorm[:n] if every else self._rnorm[idx])
            return sims
        if every:
            return self._mat[:n] @ q
        if len(idx) < self.gather_fraction * n:
            return self._mat[idx] @ q
        return (self._mat[:n] @ q)[idx]

    def rank(self, idx: np.ndarray, sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The first ``k`` of the rows at ``idx`` by (cosine desc, rowid asc)."""
        kk = min(k, len(idx))
        top = self._top(sims, self._rowid[idx], kk)
        rows = self._rowid[idx[top]]
        order = np.lexsort((rows, -sims[top]))
        return rows[order], sims[top][order].astype(np.float32)

    @staticmethod
    def _top(sims: np.ndarray, rowids: np.ndarray, kk: int) -> np.ndarray:
        """Positions of the first ``kk`` of (cosine desc, rowid asc): cosines equal to the
        ``kk``-th are cut by rowid, never by position in the index (which depends on the order
        the rows were added in)."""
        if kk >= len(sims):
            return np.arange(len(sims))
        kth = sims[np.argpartition(-sims, kk - 1)[kk - 1]]
        above = np.flatnonzero(sims > kth)
        tied = np.flatnonzero(sims == kth)
        tied = tied[np.argsort(rowids[tied], kind="stable")[:kk - len(above)]]
        return np.concatenate([above, tied])


_ROW_TYPES = {"float32": np.float32, "float16": np.float16, "int8": np.int8}


def _grow(arr: np.ndarray, cap: int) -> np.ndarray:
    out = np.zeros((cap,) + arr.shape[1:], arr.dtype)
    out[:len(arr)] = arr
    return out

"""RowMap: rowid -> position in an in-process index, as one array (vectorised lookups).

Rowids are the store's ``INTEGER PRIMARY KEY AUTOINCREMENT`` values (small, dense, never reused),
so an int64 array indexed by rowid, -1 where absent, answers a lookup of hundreds of rowids in one
numpy gather. Shared by :class:`~memlab.store.exact.ExactIndex` and
:class:`~memlab.store.memindex.MemoryIndex`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


class RowMap:
    """rowid -> position (-1: absent)."""

    def __init__(self) -> None:
        self._at = np.full(0, -1, np.int64)

    def set(self, rowids: np.ndarray, positions: np.ndarray) -> None:
        """Map ``rowids[i]`` to ``positions[i]`` (grows as needed)."""
        rowids = np.asarray(rowids, np.int64)
        if not len(rowids):
            return
        top = int(rowids.max()) + 1
        if top > len(self._at):
            at = np.full(max(top, 2 * len(self._at), 1024), -1, np.int64)
            at[:len(self._at)] = self._at
            self._at = at
        self._at[rowids] = positions

    def reset(self, rowids: np.ndarray) -> None:
        """Forget every mapping, then map ``rowids[i]`` to position i."""
        self._at[:] = -1
        self.set(rowids, np.arange(len(rowids)))

    def get(self, rowid: int) -> int:
        """The position of one rowid, -1 when absent."""
        return int(self._at[rowid]) if 0 <= rowid < len(self._at) else -1

    def lookup(self, rowids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Positions of ``rowids`` (int64, -1 where absent), aligned with them."""
        r = np.asarray(rowids, np.int64).reshape(-1)
        out = np.full(len(r), -1, np.int64)
        inside = (r >= 0) & (r < len(self._at))
        out[inside] = self._at[r[inside]]
        return out

    def clear(self, rowid: int, position: int) -> None:
        """Forget ``rowid`` if it still maps to ``position``."""
        if self.get(rowid) == position:
            self._at[rowid] = -1

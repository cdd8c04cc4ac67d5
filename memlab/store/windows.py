"""The window vectors of long memories (issue 21, ``chunk.*``; :mod:`memlab.windows`).

One row per window of a memory under one model version: its memory (``row``, the memory's rowid,
``ON DELETE CASCADE``: deleting the memory deletes its windows), its position and its vector
(float32 bytes, unit length as the embedder gives it). Written in the transaction that writes the
memory (:meth:`memlab.store.facade.Store.add`), so a refused write leaves none; a change of the
memory's text deletes them (:meth:`memlab.store.repository.Repository.update`: they described the
old text). A memory without rows here is not split (or was written without its windows: stored
pending, or before the migration): recall reads its whole-text cosine instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memlab.errors import InvalidInput

from .connect import Connection, transaction
from .records import ids_json

#: Steps of the migration that creates the table (memlab.store.migrations).
WINDOW_TABLE_SQL: tuple[str, ...] = (
    """CREATE TABLE memory_windows (
        id INTEGER PRIMARY KEY,
        row INTEGER NOT NULL REFERENCES memory_records(rowid) ON DELETE CASCADE,
        model_version TEXT NOT NULL,
        pos INTEGER NOT NULL CHECK (pos >= 0),
        dim INTEGER NOT NULL CHECK (dim > 0),
        vector BLOB NOT NULL CHECK (length(vector) = 4 * dim),
        UNIQUE (row, model_version, pos))""",
)


class WindowVectors:
    """Read and write ``memory_windows`` (one model version)."""

    def __init__(self, conn: Connection, model_version: str) -> None:
        self.conn, self.model_version = conn, model_version

    def put(self, rowids: Sequence[int], windows: Sequence[np.ndarray]) -> int:
        """Store each memory's window vectors (``windows[i]``: shape (m, dim), m >= 0), replacing
        any it had under this model version; returns the windows written."""
        if len(windows) != len(rowids):
            raise InvalidInput("windows", f"one array per memory ({len(rowids)})", len(windows))
        rows = []
        for r, w in zip(rowids, windows):
            arr = np.asarray(w, np.float32)
            if arr.ndim != 2 or (len(arr) and arr.shape[1] == 0):
                raise InvalidInput("windows", "each must have shape (windows, dim)",
                                   tuple(arr.shape))
            if not np.isfinite(arr).all():
                raise InvalidInput("windows", "must be finite (no NaN or inf)", "non-finite")
            rows += [(int(r), self.model_version, i, int(arr.shape[1]),
                      np.ascontiguousarray(v).tobytes()) for i, v in enumerate(arr)]
        with transaction(self.conn):
            self.delete(rowids)
            self.conn.executemany("INSERT INTO memory_windows (row, model_version, pos, dim, "
                                  "vector) VALUES (?, ?, ?, ?, ?)", rows)
        return len(rows)

    def delete(self, rowids: Sequence[int]) -> None:
        self.conn.execute("DELETE FROM memory_windows WHERE model_version = ? AND row IN "
                          "(SELECT value FROM json_each(?))",
                          (self.model_version, ids_json(rowids)))

    def of(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(the position in ``rowids`` of each window's memory, the windows' unit vectors):
        the windows of these memories, a memory's in order."""
        rowids = [int(r) for r in rowids]
        at = {r: i for i, r in enumerate(rowids)}
        owner, blobs = [], []
        for r, blob in self.conn.execute(
                "SELECT row, vector FROM memory_windows WHERE model_version = ? AND row IN "
                "(SELECT value FROM json_each(?)) ORDER BY row, pos",
                (self.model_version, ids_json(rowids))):
            owner.append(at[r])
            blobs.append(blob)
        if not blobs:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
        vecs = np.stack([np.frombuffer(b, np.float32) for b in blobs])
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return np.array(owner, np.int64), vecs / np.where(norms > 0, norms, 1.0)

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM memory_windows WHERE model_version = ?",
                                     (self.model_version,)).fetchone()[0])

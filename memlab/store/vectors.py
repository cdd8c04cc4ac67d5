"""The vector cache (Reverie §7.2): one sqlite-vec ``vec0`` table per embedder version, rebuildable.

SQLite's ``memory_records`` is the truth; a vector table is a cache of the memories' vectors under
one model version (``memory_vec_<slug>``), so changing the model never mixes vectors. Each table::

    embedding float[dim] | int8[dim]  distance_metric=cosine
    agent_id text, user_id text, retention_layer text, cognitive_layer text,
    event_time integer                 -- floor(event_time or timestamp), Unix seconds
    active boolean                     -- lifecycle_state == 'active' and not deprecated
    event_bucket text [partition key]  -- UTC quarter, '2026-Q2'; a partition key only when
                                       -- store.partition_by_quarter

int8 vectors are scaled before quantising: ``q = clip(round(v / int8_scale * 127), -127, 127)``
(sqlite-vec's ``'unit'`` quantiser maps [-1, 1] and wastes most of the 8 bits on unit vectors of
384 dimensions, whose components rarely exceed 0.25). Cosine is scale-free, so the query is
quantised the same way.

Filters (agent, user, active, layers, time) run inside the KNN query. A time-bounded search on a
partitioned table runs one KNN per quarter the range spans (the partition fast path) and merges:
``event_bucket IN (...)`` would return k rows *per partition*, unmerged. Times are compared in whole
seconds: ``since <= t < until`` on floor(t), floor(since), floor(until).

:class:`ExactIndex` (memlab.store.exact) keeps an in-process numpy copy of a table for fast search.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from numbers import Real
from typing import Any, Sequence

import numpy as np

from memlab.errors import CorruptStore, InvalidInput, StoreError, StoreInconsistent
from memlab.inputs import MAX_TIME, MIN_TIME, TIME_RANGE, check_time

from .connect import Connection, db_path, transaction
from .records import TIME_OUT_OF_RANGE_SQL
from .snapshot import read_snapshot

MAX_K = 4096  # sqlite-vec's limit on k


def table_name(model_version: str) -> str:
    """``memory_vec_<slug>_<hash8>``: readable, and distinct for distinct model versions."""
    if not isinstance(model_version, str) or not model_version.strip():
        raise InvalidInput("model_version", "must be a non-empty string", model_version)
    slug = re.sub(r"[^a-z0-9]+", "_", model_version.lower()).strip("_")[:40]
    return f"memory_vec_{slug}_{hashlib.sha1(model_version.encode()).hexdigest()[:8]}"


def quarter(seconds: float) -> str:
    """The UTC quarter of a Unix time, e.g. ``'2026-Q2'``; InvalidInput for a time outside
    :func:`memlab.inputs.check_time`'s range (every stored time is inside it)."""
    d = datetime.fromtimestamp(math.floor(check_time(seconds, "event_time")), tz=timezone.utc)
    return f"{d.year:04d}-Q{(d.month - 1) // 3 + 1}"


def clamp_time(seconds: float, field: str) -> float:
    """A search bound clipped to the stored times' range [MIN_TIME, MAX_TIME + 1] (no stored time
    lies outside it, so the search finds the same rows); InvalidInput for NaN or a non-number."""
    if isinstance(seconds, bool) or not isinstance(seconds, Real) or math.isnan(seconds):
        raise InvalidInput(field, "must be a number of Unix seconds", seconds)
    return min(max(float(seconds), MIN_TIME), MAX_TIME + 1)


def quarters_between(since: float, until: float) -> list[str]:
    """Quarters holding any whole second s with floor(since) <= s < floor(until), in order (the
    bounds clipped to the stored times' range: :func:`clamp_time`)."""
    since, until = clamp_time(since, "since"), clamp_time(until, "until")
    lo, hi = math.floor(since), math.floor(until) - 1
    if hi < lo:
        return []
    a = datetime.fromtimestamp(lo, tz=timezone.utc)
    b = datetime.fromtimestamp(hi, tz=timezone.utc)
    out, y, q = [], a.year, (a.month - 1) // 3
    while (y, q) <= (b.year, (b.month - 1) // 3):
        out.append(f"{y:04d}-Q{q + 1}")
        y, q = (y + 1, 0) if q == 3 else (y, q + 1)
    return out


@dataclass(frozen=True, slots=True)
class VectorMeta:
    """The filter columns of one vector row."""

    agent_id: str
    user_id: str
    retention_layer: str
    cognitive_layer: str
    event_time: int
    active: bool

    @property
    def bucket(self) -> str:
        return quarter(self.event_time)


def _meta(conn: Connection, rowids: list[int]) -> dict[int, VectorMeta]:
    out = {}
    for r in conn.execute(
            "SELECT rowid, agent_id, user_id, retention_layer, cognitive_layer, "
            "coalesce(event_time, timestamp), lifecycle_state = 'active' AND deprecated = 0 "
            "FROM memory_records WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(rowids),)):
        t = r[5]
        if not (isinstance(t, (int, float)) and MIN_TIME <= t <= MAX_TIME):
            raise StoreInconsistent(
                f"memory rowid {r[0]} has a vector but its time {t!r} is outside {TIME_RANGE} "
                f"or not a number (changed behind memlab's back): rebuild the vector table "
                f"(`memlab store rebuild {db_path(conn)}`, which leaves such memories out) and "
                f"see `memlab store check`")
        out[r[0]] = VectorMeta(r[1], r[2], r[3], r[4], math.floor(t), bool(r[6]))
    return out


def record_meta(records: Sequence[Any]) -> list[VectorMeta]:
    """The filter columns of these records as :func:`load_meta` reads them from their rows
    (event_time, else timestamp, floored; active: lifecycle 'active' and not deprecated), from
    the records in hand: a write that has just inserted them need not read them back."""
    return [VectorMeta(r.agent_id, r.user_id, r.retention_layer, r.cognitive_layer,
                       math.floor(r.timestamp if r.event_time is None else r.event_time),
                       r.lifecycle_state == "active" and not r.deprecated) for r in records]


def load_meta(conn: Connection, rowids: Sequence[int]) -> list[VectorMeta]:
    """Filter columns of these memories from ``memory_records``, in input order."""
    rowids = [int(r) for r in rowids]
    found = _meta(conn, rowids)
    missing = [r for r in rowids if r not in found]
    if missing:   # rowids come from the store itself: an internal fault, not the caller's input
        raise StoreInconsistent(f"rowid {missing[0]} has no record in memory_records "
                                f"({len(missing)} of {len(rowids)} missing)")
    return [found[r] for r in rowids]


def registered_tables(conn: Connection) -> list[str]:
    """Model versions that have a vector table."""
    return [r[0] for r in conn.execute("SELECT model_version FROM vector_tables ORDER BY 1")]


def quantize_int8(vectors: np.ndarray, scale: float) -> np.ndarray:
    """``clip(round(v / scale * 127), -127, 127)`` as int8."""
    return np.clip(np.rint(np.asarray(vectors, np.float32) / scale * 127.0), -127, 127
                   ).astype(np.int8)


class VectorCache:
    """The sqlite-vec table of one model version.

    Args:
        conn: store connection (sqlite-vec loaded, schema migrated).
        model_version: the embedder version whose vectors this table holds.
        dim: vector dimension.
        dtype: ``"float32"`` or ``"int8"`` (``store.vector_dtype``).
        int8_scale: int8 quantisation scale (``store.int8_scale``).
        partitioned: declare ``event_bucket`` a partition key (``store.partition_by_quarter``).
    """

    def __init__(self, conn: Connection, *, model_version: str, dim: int, dtype: str = "float32",
                 int8_scale: float = 0.25, partitioned: bool = False) -> None:
        if dtype not in ("float32", "int8"):
            raise InvalidInput("dtype", "must be 'float32' or 'int8'", dtype)
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise InvalidInput("dim", "must be a positive integer", dim)
        if not (isinstance(int8_scale, (int, float)) and 0 < int8_scale <= 1):
            raise InvalidInput("int8_scale", "must be in (0, 1]", int8_scale)
        self.conn, self.model_version, self.dim = conn, model_version, dim
        self.dtype, self.int8_scale, self.partitioned = dtype, float(int8_scale), bool(partitioned)
        self.table = table_name(model_version)

    @classmethod
    def from_registry(cls, conn: Connection, *, model_version: str) -> "VectorCache":
        """The cache of a model version as registered in ``vector_tables``."""
        row = conn.execute("SELECT dim, dtype, int8_scale, partitioned FROM vector_tables "
                           "WHERE model_version = ?", (model_version,)).fetchone()
        if row is None:
            raise StoreError(f"no vector table registered for model version {model_version!r}")
        return cls(conn, model_version=model_version, dim=row[0], dtype=row[1],
                   int8_scale=row[2], partitioned=bool(row[3]))

    # -- table -----------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.conn.execute("SELECT 1 FROM vector_tables WHERE model_version = ?",
                                 (self.model_version,)).fetchone() is not None

    def ensure(self) -> None:
        """Create the table (and its registry row) if absent; a registered table with another
        dim, dtype, scale or partitioning raises StoreError (``rebuild()`` changes the layout).

        Absent is checked again under the write lock that creates it: several processes opening
        a brand-new store at once each see no table, and only the first to lock creates it."""
        row = self._layout()
        want = (self.dim, self.dtype, self.int8_scale, int(self.partitioned))
        if row is None:
            with transaction(self.conn):
                row = self._layout()
                if row is None:
                    self._create(want)
                    return
        if tuple(row) != want:
            raise StoreError(f"vector table of {self.model_version!r} has (dim, dtype, "
                             f"int8_scale, partitioned) = {tuple(row)}, not {want}: "
                             f"rebuild() it to change")

    def _layout(self) -> tuple | None:
        return self.conn.execute("SELECT dim, dtype, int8_scale, partitioned FROM vector_tables "
                                 "WHERE model_version = ?", (self.model_version,)).fetchone()

    def _create(self, want: tuple) -> None:
        part = " partition key" if self.partitioned else ""
        self.conn.execute(
            f"CREATE VIRTUAL TABLE {self.table} USING vec0("
            f"embedding {self.dtype}[{self.dim}] distance_metric=cosine, "
            f"agent_id text, user_id text, retention_layer text, cognitive_layer text, "
            f"event_time integer, active boolean, event_bucket text{part})")
        self.conn.execute(
            "INSERT INTO vector_tables (model_version, table_name, dim, dtype, int8_scale, "
            "partitioned) VALUES (?, ?, ?, ?, ?, ?)", (self.model_version, self.table, *want))

    def drop(self) -> None:
        """Drop the table and its registry row (the records and the embedding cache stay)."""
        with transaction(self.conn):
            self.conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            self.conn.execute("DELETE FROM vector_tables WHERE model_version = ?",
                              (self.model_version,))

    def count(self) -> int:
        return int(self.conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0])

    def generation(self) -> int:
        """A counter bumped by every write to the table (ExactIndex uses it to stay in step)."""
        row = self.conn.execute("SELECT generation FROM vector_tables WHERE model_version = ?",
                                (self.model_version,)).fetchone()
        return -1 if row is None else int(row[0])

    def _bump(self) -> int:
        self.conn.execute("UPDATE vector_tables SET generation = generation + 1 "
                          "WHERE model_version = ?", (self.model_version,))
        return self.generation()

    # -- writes (inside the caller's transaction, or their own) ----------------------------------
    def check_vectors(self, vectors: Any, n: int) -> np.ndarray:
        """float32 (n, dim) array, or InvalidInput('vector', ...) naming what is wrong."""
        arr = np.asarray(vectors, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != self.dim:
            raise InvalidInput("vector", f"must have dimension {self.dim} for model "
                               f"{self.model_version!r}", tuple(arr.shape))
        if arr.shape[0] != n:
            raise InvalidInput("vector", f"needs one vector per rowid ({n})", arr.shape[0])
        if not np.isfinite(arr).all():
            raise InvalidInput("vector", "must be finite (no NaN or inf)", "non-finite values")
        if n and (np.linalg.norm(arr, axis=1) == 0).any():
            raise InvalidInput("vector", "must not be all zeros (cosine undefined)", "zero vector")
        return arr

    def _blob(self, vec: np.ndarray) -> bytes:
        if self.dtype == "int8":
            return quantize_int8(vec, self.int8_scale).tobytes()
        return np.ascontiguousarray(vec, np.float32).tobytes()

    def _vec_sql(self) -> str:
        return "vec_int8(?)" if self.dtype == "int8" else "?"

    def upsert(self, rowids: Sequence[int], vectors: Any,
               meta: Sequence[VectorMeta] | None = None, *, new: bool = False) -> int:
        """Write (or replace) these rowids' vectors; ``meta`` defaults to the records' columns.

        Validated first (dimension, finiteness, non-zero); returns the new generation. ``new``:
        the rowids were allocated by the write in progress (never used before: the records'
        rowids are AUTOINCREMENT), so there is nothing to replace and no delete runs; a row the
        table holds all the same (written behind memlab's back) fails the insert, and with it
        the caller's transaction.
        """
        rowids = [int(r) for r in rowids]
        arr = self.check_vectors(vectors, len(rowids))
        self.ensure()
        with transaction(self.conn):
            meta = list(meta) if meta is not None else load_meta(self.conn, rowids)
            if len(meta) != len(rowids):
                raise InvalidInput("meta", f"needs one per rowid ({len(rowids)})", len(meta))
            if not new:
                self._delete(rowids)
            self.conn.executemany(
                f"INSERT INTO {self.table} (rowid, embedding, agent_id, user_id, retention_layer, "
                f"cognitive_layer, event_time, active, event_bucket) VALUES "
                f"(?, {self._vec_sql()}, ?, ?, ?, ?, ?, ?, ?)",
                [(r, self._blob(v), m.agent_id, m.user_id, m.retention_layer, m.cognitive_layer,
                  int(m.event_time), int(m.active), m.bucket)
                 for r, v, m in zip(rowids, arr, meta)])
            return self._bump()

    def _delete(self, rowids: list[int]) -> None:
        self.conn.execute(f"DELETE FROM {self.table} WHERE rowid IN "
                          f"(SELECT value FROM json_each(?))", (json.dumps(rowids),))

    def delete(self, rowids: Sequence[int]) -> int:
        """Remove these rowids' vectors (absent ones are ignored); returns the new generation."""
        with transaction(self.conn):
            self._delete([int(r) for r in rowids])
            return self._bump()

    def refresh_meta(self, rowids: Sequence[int]) -> int:
        """Rewrite the filter columns of these rowids from the records (keeps their vectors)."""
        rowids = [int(r) for r in rowids]
        with transaction(self.conn):
            present = [r for r in rowids if r in set(self._present(rowids))]
            if not present:
                return self.generation()
            return self.upsert(present, self.vectors(present))

    def _present(self, rowids: list[int]) -> list[int]:
        return [r[0] for r in self.conn.execute(
            f"SELECT rowid FROM {self.table} WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(rowids),))]

    # -- reads -----------------------------------------------------------------------------------
    def decode(self, blob: bytes) -> np.ndarray:
        """A stored blob as float32 (int8 rows dequantised: q * int8_scale / 127)."""
        if self.dtype == "int8":
            return np.frombuffer(blob, np.int8).astype(np.float32) * (self.int8_scale / 127.0)
        return np.frombuffer(blob, np.float32)

    def vectors(self, rowids: Sequence[int]) -> np.ndarray:
        """Stored vectors (float32, int8 dequantised) in input order. Callers ask for rowids the
        table holds (:meth:`_present`, in the same transaction); a missing one is an internal
        fault: :class:`StoreInconsistent`."""
        rowids = [int(r) for r in rowids]
        found = dict(self.conn.execute(
            f"SELECT rowid, embedding FROM {self.table} WHERE rowid IN "
            f"(SELECT value FROM json_each(?))", (json.dumps(rowids),)))
        missing = [r for r in rowids if r not in found]
        if missing:
            raise StoreInconsistent(f"rowid {missing[0]} has no vector in {self.table} (model "
                                    f"{self.model_version!r})")
        out = np.empty((len(rowids), self.dim), np.float32)
        for i, r in enumerate(rowids):
            out[i] = self.decode(found[r])
        return self._finite(rowids, out)

    def _finite(self, rowids: Sequence[int], mat: np.ndarray) -> np.ndarray:
        """``mat``, or CorruptStore when a stored vector is not finite: memlab never writes one
        (check_vectors), so NaN or inf bytes are damage, not a vector to rank by."""
        ok = np.isfinite(mat).all(axis=1)
        if not ok.all():
            path = db_path(self.conn)
            raise CorruptStore(f"{path}: the vector table {self.table} is damaged: the vector of "
                               f"rowid {int(np.asarray(rowids)[~ok][0])} is not finite "
                               f"({int((~ok).sum())} such); run `memlab store check {path}`, and "
                               f"`memlab store rebuild {path}` to rebuild the vector table from "
                               f"the records", path=path)
        return mat

    def rows(self) -> tuple[np.ndarray, np.ndarray, list[VectorMeta]]:
        """Every row: (rowids int64, vectors float32 (n, dim), meta), by rowid.

        The vectors come from the table; the filter columns from ``memory_records`` (kept equal
        to the table's by every write, and several times faster to read than vec0's columns),
        both in one read snapshot (:mod:`memlab.store.snapshot`: a memory deleted meanwhile by another process
        is in neither). A vector whose memory is not there, or that is not finite, is damage:
        CorruptStore.
        """
        with read_snapshot(self.conn):
            return self._rows()

    def _rows(self) -> tuple[np.ndarray, np.ndarray, list[VectorMeta]]:
        rows = self.conn.execute(f"SELECT rowid, embedding FROM {self.table}").fetchall()
        rows.sort(key=lambda r: r[0])
        rowids = np.array([r[0] for r in rows], np.int64)
        raw = b"".join(r[1] for r in rows)
        if self.dtype == "int8":
            mat = np.frombuffer(raw, np.int8).astype(np.float32) * (self.int8_scale / 127.0)
        else:
            mat = np.frombuffer(raw, np.float32).copy()
        mat = self._finite(rowids, mat.reshape(len(rows), self.dim))
        meta = _meta(self.conn, rowids.tolist())
        if len(meta) != len(rowids):
            path = db_path(self.conn)
            lost = [r for r in rowids.tolist() if r not in meta]
            marked = self.conn.execute(
                "SELECT count(*) FROM memory_embeddings WHERE model_version = ? AND rowid IN "
                "(SELECT value FROM json_each(?))", (self.model_version, json.dumps(lost))
            ).fetchone()[0]
            if marked:   # marked embedded, yet no record: memory_records itself is damaged
                raise CorruptStore(f"{path}: the vector table {self.table} holds vectors of "
                                   f"memories with no memory record ({len(lost)}, e.g. rowid "
                                   f"{lost[0]}) while they are marked embedded: the records are "
                                   f"damaged; run `memlab store check {path}`", path=path)
            raise StoreInconsistent(
                f"{path}: the vector table {self.table} holds vectors of memories with no memory "
                f"record ({len(lost)}, e.g. rowid {lost[0]}): the vector cache is out of step with "
                f"the truth; rebuild it (`memlab store rebuild {path}`, or "
                f"MemoryStore.rebuild_vectors()) and run `memlab store check {path}`", path=path)
        return rowids, mat, [meta[r] for r in rowids.tolist()]

    def search(self, query_vec: Any, k: int, *, agent_id: str, user_id: str,
               layers: Sequence[str] | None = None, since: float | None = None,
               until: float | None = None, active_only: bool = True
               ) -> tuple[np.ndarray, np.ndarray]:
        """Exact KNN by cosine with the filters inside the query: (rowids int64, cosine float32).

        Best first. ``layers`` restricts retention layers; ``since``/``until`` bound
        floor(event_time or timestamp) to [since, until) in whole seconds. On a partitioned table
        a range with both bounds searches only the quarters it spans.
        """
        q = self.check_vectors(np.asarray(query_vec, np.float32).reshape(1, -1), 1)[0]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
            raise InvalidInput("k", f"must be an integer in [0, {MAX_K}]", k)
        empty = np.zeros(0, np.int64), np.zeros(0, np.float32)
        if k == 0 or not self.exists():
            return empty
        where, args = ["agent_id = ?", "user_id = ?"], [agent_id, user_id]
        if active_only:
            where.append("active = 1")
        if layers is not None:
            layers = list(layers)
            if not layers:
                return empty
            where.append(f"retention_layer IN ({', '.join('?' * len(layers))})")
            args += layers
        if since is not None:
            where.append("event_time >= ?")
            args.append(math.floor(clamp_time(since, "since")))
        if until is not None:
            where.append("event_time < ?")
            args.append(math.floor(clamp_time(until, "until")))
        sql = (f"SELECT rowid, distance FROM {self.table} WHERE embedding MATCH "
               f"{self._vec_sql()} AND k = ? AND {' AND '.join(where)}")
        blob = self._blob(q)
        if self.partitioned and since is not None and until is not None:
            rows = []
            for bucket in quarters_between(since, until):
                rows += self.conn.execute(sql + " AND event_bucket = ?",
                                          [blob, k, *args, bucket]).fetchall()
            rows.sort(key=lambda r: (r[1], r[0]))
            rows = rows[:k]
        else:
            rows = self.conn.execute(sql + " ORDER BY distance", [blob, k, *args]).fetchall()
        if not rows:
            return empty
        rid, dist = zip(*rows)
        return np.array(rid, np.int64), (1.0 - np.array(dist, np.float64)).astype(np.float32)

    # -- rebuild ---------------------------------------------------------------------------------
    def rebuild(self, *, batch_size: int = 4096) -> dict[str, Any]:
        """Drop this model's table and rebuild it from the embedding cache and the records.

        A memory's vector is found in ``embedding_cache`` under the text hash recorded by
        ``Repository.mark_embedded``. Memories whose vector is not in the cache are marked pending
        again (their ``memory_embeddings`` row removed) and listed under ``missing``: never a
        fabricated vector. So are memories whose time is outside the range memlab stores (changed
        behind its back: no partition key; :func:`memlab.store.health.bad_times` reports them).
        Returns ``{"written": n, "missing": [rowids]}``.
        """
        conn, written, missing = self.conn, 0, []
        with transaction(conn):
            gen = max(self.generation(), 0)
            conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            conn.execute("DELETE FROM vector_tables WHERE model_version = ?", (self.model_version,))
            self.ensure()
            conn.execute("UPDATE vector_tables SET generation = ? WHERE model_version = ?",
                         (gen + 1, self.model_version))
            rows = conn.execute(
                "SELECT e.rowid, c.vector FROM memory_embeddings e LEFT JOIN embedding_cache c "
                "ON c.model_version = e.model_version AND c.text_hash = e.text_hash AND c.dim = ? "
                "WHERE e.model_version = ? ORDER BY e.rowid",
                (self.dim, self.model_version)).fetchall()
            bad = {r[0] for r in conn.execute(
                f"SELECT rowid FROM memory_records WHERE {TIME_OUT_OF_RANGE_SQL}",
                (MIN_TIME, MAX_TIME))}
            good = [(r, v) for r, v in rows if v is not None and r not in bad]
            missing = [r for r, v in rows if v is None or r in bad]
            for i in range(0, len(good), batch_size):
                chunk = good[i:i + batch_size]
                self.upsert([r for r, _ in chunk],
                            np.stack([np.frombuffer(v, np.float32) for _, v in chunk]))
                written += len(chunk)
            if missing:
                conn.execute("DELETE FROM memory_embeddings WHERE model_version = ? AND rowid IN "
                             "(SELECT value FROM json_each(?))",
                             (self.model_version, json.dumps(missing)))
                conn.execute("UPDATE memory_records SET embedding_status = 'pending' WHERE rowid IN "
                             "(SELECT value FROM json_each(?))", (json.dumps(missing),))
        return {"written": written, "missing": missing}

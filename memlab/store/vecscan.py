"""The contents of a vector table checked: a fixed-size sample at open, every vector on demand.

The count check of :mod:`memlab.store.health` finds vectors that are missing; this module finds
vectors that are there but wrong. memlab never stores a vector that is not finite or all zero
(:meth:`VectorCache.check_vectors <memlab.store.vectors.VectorCache.check_vectors>` refuses
them), and every vector it stores is the embedding cache's vector of the text the memory was
embedded from (``memory_embeddings.text_hash``), encoded as the table stores it (float32 bytes, or
:func:`~memlab.store.vectors.quantize_int8`). So a stored vector is damaged when it is

- not finite (NaN or infinite components),
- all zero, or
- not the bytes memlab writes for the cached vector of its text (zeroed, scaled, swapped with
  another memory's, copied from another table), when the cache holds that vector.

A vector whose text the cache does not hold (written before the cache, or the cache's row lost)
is checked for the first two only. A cached vector that is itself not finite, all zero or of
another dimension is no reference: it is counted (``bad_reference``) and the stored vector is
checked for the first two only.

:func:`sample` checks ``store.vector_sample`` vectors evenly spaced over the table's rowids (index
seeks, no scan: a bounded cost at any size); :func:`scan` checks every vector, reading the table
once in batches (``memlab store check --full``, a rebuild, and the repair at open once the sample
found damage). Both only read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from .connect import Connection
from .snapshot import read_snapshot
from .vectors import VectorCache, quantize_int8

#: Rows read per statement by :func:`scan` (bounds its memory: about 1.5 MB of 384-d float32).
SCAN_BATCH = 1024


@dataclass(frozen=True)
class Damage:
    """What a check of a vector table's contents found.

    ``checked``: vectors read; ``total``: vectors in the table; ``not_finite``, ``zero``,
    ``mismatched`` (not the cached vector of the memory's text): rowids of damaged vectors;
    ``compared``: vectors compared with the embedding cache; ``bad_reference``: memories whose
    cached vector is itself unusable (not finite, zero, another dimension).
    """

    checked: int
    total: int
    not_finite: tuple[int, ...] = ()
    zero: tuple[int, ...] = ()
    mismatched: tuple[int, ...] = ()
    compared: int = 0
    bad_reference: tuple[int, ...] = ()

    @property
    def rowids(self) -> list[int]:
        """The damaged vectors' rowids, ascending."""
        return sorted({*self.not_finite, *self.zero, *self.mismatched})

    def __bool__(self) -> bool:
        return bool(self.not_finite or self.zero or self.mismatched)

    def kinds(self) -> str:
        """``"3 not finite, 60 all zero, 2 not the cached vector of their text"`` ("" if none)."""
        parts = [(self.not_finite, "not finite"), (self.zero, "all zero"),
                 (self.mismatched, "not the embedding cache's vector of their text")]
        return ", ".join(f"{len(r)} {what}" for r, what in parts if r)

    def scope(self) -> str:
        """Which vectors were read: ``"all 60"`` or ``"a sample of 256 of 100000"``."""
        if self.checked >= self.total:
            return f"all {self.total}"
        return f"a sample of {self.checked} of {self.total}"


def _expected(cache: VectorCache, blob: bytes | None, dim: int | None) -> bytes | None:
    """The bytes memlab stores for a cached vector (None when there is no usable one)."""
    if blob is None or dim != cache.dim or len(blob) != 4 * cache.dim:
        return None
    vec = np.frombuffer(blob, np.float32)
    if not np.isfinite(vec).all() or not vec.any():
        return None
    return quantize_int8(vec, cache.int8_scale).tobytes() if cache.dtype == "int8" else blob


def _references(conn: Connection, cache: VectorCache, rowids: Sequence[int]
                ) -> dict[int, tuple[bytes | None, int | None]]:
    """{rowid: (cached vector blob, its dim)} of these rowids' embedded texts (marked ones only;
    a blob of None when the cache lacks the text)."""
    return {r: (blob, dim) for r, blob, dim in conn.execute(
        "SELECT e.rowid, c.vector, c.dim FROM memory_embeddings e LEFT JOIN embedding_cache c "
        "ON c.model_version = e.model_version AND c.text_hash = e.text_hash "
        "WHERE e.model_version = ? AND e.rowid IN (SELECT value FROM json_each(?))",
        (cache.model_version, json.dumps([int(r) for r in rowids])))}


def check_rows(conn: Connection, cache: VectorCache, rows: Sequence[tuple[int, bytes]],
            total: int) -> Damage:
    """Check these stored ``(rowid, blob)`` rows of ``cache``'s table (see the module)."""
    if not rows:
        return Damage(0, total)
    refs = _references(conn, cache, [r for r, _ in rows])
    width = cache.dim if cache.dtype == "int8" else 4 * cache.dim
    not_finite, zero, mismatched, bad_ref, compared = [], [], [], [], 0
    for rowid, blob in rows:
        ref_blob, ref_dim = refs.get(rowid, (None, None))
        want = _expected(cache, ref_blob, ref_dim)
        if ref_blob is not None and want is None:
            bad_ref.append(rowid)
        if want is not None:
            compared += 1
            if blob == want:
                continue
        if not isinstance(blob, bytes) or len(blob) != width:
            mismatched.append(rowid)
            continue
        vec = cache.decode(blob)
        if not np.isfinite(vec).all():
            not_finite.append(rowid)
        elif not vec.any():
            zero.append(rowid)
        elif want is not None:
            mismatched.append(rowid)
    return Damage(len(rows), total, tuple(not_finite), tuple(zero), tuple(mismatched), compared,
                  tuple(bad_ref))


def _merge(total: int, parts: Iterable[Damage]) -> Damage:
    parts = list(parts)
    return Damage(sum(p.checked for p in parts), total,
                  tuple(r for p in parts for r in p.not_finite),
                  tuple(r for p in parts for r in p.zero),
                  tuple(r for p in parts for r in p.mismatched),
                  sum(p.compared for p in parts),
                  tuple(r for p in parts for r in p.bad_reference))


def _rowid_table(conn: Connection, table: str) -> str:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                         (f"{table}_rowids",)).fetchone()
    return f'"{table}_rowids"' if found else f'"{table}"'


def sample_rowids(conn: Connection, table: str, size: int) -> list[int]:
    """At most ``size`` rowids of ``table`` evenly spaced over its rowid range (the first row
    always; one index seek each): which rows :func:`sample` reads."""
    if size <= 0:
        return []
    src = _rowid_table(conn, table)
    lo, hi = conn.execute(f"SELECT min(rowid), max(rowid) FROM {src}").fetchone()
    if lo is None:
        return []
    span = hi - lo + 1
    n = min(size, span)
    targets = [lo + (i * span) // n for i in range(n)]
    found = conn.execute(
        f"SELECT DISTINCT (SELECT rowid FROM {src} WHERE rowid >= t.value ORDER BY rowid "
        f"LIMIT 1) AS r FROM json_each(?) t WHERE r IS NOT NULL ORDER BY r",
        (json.dumps(targets),)).fetchall()
    return [r[0] for r in found]


def _read(conn: Connection, cache: VectorCache, rowids: Sequence[int]) -> list[tuple[int, bytes]]:
    return conn.execute(f'SELECT rowid, embedding FROM "{cache.table}" WHERE rowid IN '
                        f"(SELECT value FROM json_each(?))", (json.dumps(list(rowids)),)).fetchall()


def sample(conn: Connection, cache: VectorCache, size: int, total: int) -> Damage:
    """Check ``size`` vectors evenly spaced over ``cache``'s table (``total`` rows)."""
    with read_snapshot(conn):
        return check_rows(conn, cache, _read(conn, cache, sample_rowids(conn, cache.table, size)),
                       total)


def scan(conn: Connection, cache: VectorCache, total: int, *, batch: int = SCAN_BATCH) -> Damage:
    """Check every vector of ``cache``'s table (``total`` rows), :data:`SCAN_BATCH` at a time."""
    parts = []
    with read_snapshot(conn):
        cur = conn.execute(f'SELECT rowid, embedding FROM "{cache.table}"')
        while True:
            rows = cur.fetchmany(batch)
            if not rows:
                break
            parts.append(check_rows(conn, cache, rows, total))
    return _merge(total, parts)


__all__ = ["Damage", "SCAN_BATCH", "check_rows", "sample", "sample_rowids", "scan"]

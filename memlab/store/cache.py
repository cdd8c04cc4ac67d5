"""The embedding cache: vectors keyed by (model version, sha256 of the exact text embedded).

Re-running a benchmark or rebuilding the vector cache never re-embeds a text this model version has
already embedded. Vectors are stored as float32 blobs. The key is the *exact* text handed to the
embedder (after any rendering template or document prefix), so two renderings never share a vector.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from memlab.errors import InvalidInput

from .connect import Connection, transaction


def text_hash(text: str) -> str:
    """sha256 (hex) of a text's UTF-8 bytes: the key of embedded texts."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The embedding cache table (a store migration and EmbeddingCacheFile create it). A rowid
#: table: WITHOUT ROWID packs 1.5 KB rows badly (3x the file size at 384 dimensions).
CACHE_TABLE_SQL = """CREATE TABLE IF NOT EXISTS embedding_cache (
    id INTEGER PRIMARY KEY,
    model_version TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dim INTEGER NOT NULL CHECK (dim > 0),
    vector BLOB NOT NULL CHECK (length(vector) = 4 * dim),
    UNIQUE (model_version, text_hash))"""


class EmbeddingCache:
    """Read and write cached embeddings in the store's ``embedding_cache`` table.

    Args:
        conn: store connection (schema migrated).
        chunk: texts looked up per query.
    """

    def __init__(self, conn: Connection, *, chunk: int = 2048) -> None:
        self.conn, self.chunk = conn, int(chunk)

    def get_many(self, model_version: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """Cached vectors of these texts: {index in ``texts``: float32 vector} (hits only)."""
        _check_model(model_version)
        hashes = [text_hash(_check_text(t)) for t in texts]
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for i in range(0, len(unique), self.chunk):
            part = unique[i:i + self.chunk]
            for h, blob in self.conn.execute(
                    "SELECT text_hash, vector FROM embedding_cache WHERE model_version = ? AND "
                    "text_hash IN (SELECT value FROM json_each(?))", (model_version, json.dumps(part))):
                found[h] = np.frombuffer(blob, np.float32).copy()
        return {i: found[h] for i, h in enumerate(hashes) if h in found}

    def put_many(self, model_version: str, texts: Sequence[str], vectors: Any) -> None:
        """Store vectors of these texts (replacing any cached ones), in one transaction."""
        _check_model(model_version)
        texts = [_check_text(t) for t in texts]
        arr = np.asarray(vectors, np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] == 0:
            raise InvalidInput("vector", f"needs shape ({len(texts)}, dim)", tuple(arr.shape))
        self._put(model_version, [text_hash(t) for t in texts], arr)

    def put_own(self, model_version: str, texts: Sequence[str], vectors: Any) -> list[str]:
        """Store the vectors memories are given (one per text) and return the key each is stored
        under: the text's hash, or, when the cache holds another vector of that text (a caller's
        own vectors, two of one text), ``"<text hash>:<sha256 of the vector's bytes>"``. Every
        memory keeps the key of its own vector (``memory_embeddings``), so a rebuild restores
        each one's vector and a check of the vector table compares each with its own; the text's
        hash keeps the vector first cached for it."""
        _check_model(model_version)
        texts = [_check_text(t) for t in texts]
        arr = np.asarray(vectors, np.float32)
        if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] == 0:
            raise InvalidInput("vector", f"needs shape ({len(texts)}, dim)", tuple(arr.shape))
        hashes = [text_hash(t) for t in texts]
        held = {h: blob for h, blob in self.conn.execute(
            "SELECT text_hash, vector FROM embedding_cache WHERE model_version = ? AND text_hash "
            "IN (SELECT value FROM json_each(?))", (model_version, json.dumps(hashes)))}
        keys, rows = [], {}
        for h, v in zip(hashes, arr):
            blob = np.ascontiguousarray(v).tobytes()
            key = h if held.setdefault(h, blob) == blob else \
                f"{h}:{hashlib.sha256(blob).hexdigest()}"
            keys.append(key)
            rows[key] = blob
        self._put(model_version, list(rows), np.stack([np.frombuffer(b, np.float32)
                                                       for b in rows.values()]))
        return keys

    def _put(self, model_version: str, keys: Sequence[str], arr: np.ndarray) -> None:
        if not np.isfinite(arr).all():
            raise InvalidInput("vector", "must be finite (no NaN or inf)", "non-finite values")
        dim = int(arr.shape[1])
        with transaction(self.conn):
            self.conn.executemany(
                "INSERT OR REPLACE INTO embedding_cache (model_version, text_hash, dim, vector) "
                "VALUES (?, ?, ?, ?)",
                [(model_version, k, dim, np.ascontiguousarray(v).tobytes())
                 for k, v in zip(keys, arr)])

    def embed(self, model_version: str, texts: Sequence[str],
              embed_fn: Callable[[list[str]], Any]) -> np.ndarray:
        """Vectors of ``texts``: cached ones read, the others embedded by ``embed_fn`` (called once,
        with the distinct missing texts, or not at all) and cached. Returns (len(texts), dim)."""
        out, fresh = self.lookup(model_version, texts, embed_fn)
        fresh.write(self)
        return out

    def lookup(self, model_version: str, texts: Sequence[str],
               embed_fn: Callable[[list[str]], Any]) -> tuple[np.ndarray, "FreshVectors"]:
        """As :meth:`embed`, but nothing is written: returns the vectors and the newly embedded
        ones, which the caller writes (``fresh.write(cache)``) inside the transaction that uses
        them, so that a refused write leaves the cache as it was too."""
        texts = list(texts)
        hits = self.get_many(model_version, texts)
        todo = list(dict.fromkeys(t for i, t in enumerate(texts) if i not in hits))
        fresh: dict[str, np.ndarray] = {}
        new = np.zeros((0, 0), np.float32)
        if todo:
            new = np.asarray(embed_fn(todo), np.float32)
            if new.ndim != 2 or new.shape[0] != len(todo):
                raise InvalidInput("vector", f"embed_fn must return ({len(todo)}, dim)",
                                   tuple(new.shape))
            fresh = dict(zip(todo, new))
        rows = [hits[i] if i in hits else fresh[t] for i, t in enumerate(texts)]
        if not rows:
            return np.zeros((0, 0), np.float32), FreshVectors(model_version, (), new)
        dims = {len(r) for r in rows}
        if len(dims) != 1:
            raise InvalidInput("vector", f"cached and new vectors of {model_version!r} differ in "
                               f"dimension", sorted(dims))
        return np.stack(rows), FreshVectors(model_version, tuple(todo), new)

    def count(self, model_version: str | None = None) -> int:
        if model_version is None:
            return int(self.conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0])
        return int(self.conn.execute("SELECT count(*) FROM embedding_cache WHERE model_version = ?",
                                     (model_version,)).fetchone()[0])


def _check_model(model_version: str) -> None:
    if not isinstance(model_version, str) or not model_version.strip():
        raise InvalidInput("model_version", "must be a non-empty string", model_version)


def _check_text(text: str) -> str:
    if not isinstance(text, str):
        raise InvalidInput("text", "must be a string", type(text).__name__)
    return text


@dataclass(frozen=True)
class FreshVectors:
    """Vectors :meth:`EmbeddingCache.lookup` embedded and has not cached yet."""

    model_version: str
    texts: tuple[str, ...]
    vectors: np.ndarray

    def write(self, cache: EmbeddingCache) -> None:
        """Cache them (inside the caller's transaction when one is open)."""
        if self.texts:
            cache.put_many(self.model_version, self.texts, self.vectors)


class EmbeddingCacheFile(EmbeddingCache):
    """An embedding cache in a file of its own (benchmarks share it across stores and runs).

    The file holds only the ``embedding_cache`` table; opened with the store's pragmas (WAL, busy
    timeout) so several benchmark processes can share it.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 10_000, chunk: int = 2048
                 ) -> None:
        from .connect import connect  # local: keeps this module's import light
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = connect(self.path, busy_timeout_ms=busy_timeout_ms, load_vec=False,
                       quick_check=False)
        with transaction(conn):
            conn.execute(CACHE_TABLE_SQL)
        super().__init__(conn, chunk=chunk)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "EmbeddingCacheFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


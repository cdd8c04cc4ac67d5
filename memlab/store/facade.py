"""Store: one opened memory database — repository, embedding cache, vector cache and dense index.

A thin composition of the store's parts for the public API and the benchmarks; every SQL statement
stays in the parts. The vector table is named by the embedder's ``version`` (one table per model),
laid out as ``config.store`` says; the dense route reads through :class:`DenseView`, which is an
:class:`ExactIndex` kept in step with the table (``store.read_index = "numpy"``) or sqlite-vec
itself (``"sqlite-vec"``). All of one recall's reads run in one read snapshot (:meth:`Store.read`).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, StoreError, StoreInconsistent
from memlab.types import MemoryRecord

from .cache import EmbeddingCache
from .connect import Connection, connect, transaction
from .exact import ExactIndex
from .memindex import MemoryIndex
from .migrations import migrate
from .repository import Repository
from .snapshot import in_write_transaction, read_snapshot
from .vectors import VectorCache, load_meta

log = logging.getLogger("memlab")
T = TypeVar("T")


class _Embedder(Protocol):
    version: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class DenseView:
    """The dense recall route over one vector table: ``search`` and ``vectors``.

    Args:
        cache: the model version's vector table.
        read_index: ``"numpy"`` (an ExactIndex, re-synced when another writer changed the table)
            or ``"sqlite-vec"``.
    """

    def __init__(self, cache: VectorCache, *, read_index: str = "numpy") -> None:
        if read_index not in ("numpy", "sqlite-vec"):
            raise InvalidInput("read_index", "must be 'numpy' or 'sqlite-vec'", read_index)
        self.cache = cache
        self.index = ExactIndex.load(cache) if read_index == "numpy" else None

    def search(self, query_vec: Any, k: int, *, agent_id: str, user_id: str,
               **filters: Any) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, cosine), best first; filters as :meth:`VectorCache.search`."""
        if self.index is not None:
            self.index.sync(self.cache)
            return self.index.search(query_vec, k, agent_id=agent_id, user_id=user_id, **filters)
        return self.cache.search(query_vec, k, agent_id=agent_id, user_id=user_id, **filters)

    def vectors(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``rowids`` that have a vector, their unit vectors): cosine = vecs @ q."""
        rowids = [int(r) for r in rowids]
        if self.index is not None:
            self.index.sync(self.cache)
            return self.index.vectors(rowids)
        if not self.cache.exists():
            return np.zeros(0, np.int64), np.zeros((0, self.cache.dim), np.float32)
        present = set(self.cache._present(rowids))
        pos = np.array([i for i, r in enumerate(rowids) if r in present], np.int64)
        vecs = self.cache.vectors([rowids[i] for i in pos])
        if len(vecs):
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return pos, vecs

    def applied(self, rowids: Sequence[int], vectors: Any, meta: Sequence[Any], *,
                generation: int) -> None:
        """Tell the in-process index about a committed write."""
        if self.index is not None:
            self.index.add(rowids, vectors, meta, generation=generation)


class Store:
    """An opened store. Use :meth:`Store.open`.

    Attributes: ``conn``, ``repo`` (:class:`Repository`), ``embeddings`` (:class:`EmbeddingCache`),
    ``vectors`` (:class:`VectorCache` of the embedder's version, or None without an embedder),
    ``dense`` (:class:`DenseView`, or None). Recall reads candidates and signals from
    :meth:`signals`, all of its reads inside :meth:`read` (one snapshot).
    """

    def __init__(self, conn: Connection, *, path: str, config: MemlabConfig,
                 embedder: _Embedder | None = None) -> None:
        self.conn, self.path, self.config = conn, path, config
        self.repo = Repository(conn, config=config)
        self.embeddings = EmbeddingCache(conn)
        self.vectors: VectorCache | None = None
        self.dense: DenseView | None = None
        self._memory_index: MemoryIndex | None = None
        self._read_once = False   # a first read went through SQL (see signals)
        self.stats: Counter[str] = Counter()   # documented degradations (see read)
        if embedder is not None:
            s = config.store
            self.vectors = VectorCache(conn, model_version=embedder.version, dim=int(embedder.dim),
                                       dtype=s.vector_dtype, int8_scale=s.int8_scale,
                                       partitioned=s.partition_by_quarter)
            self.vectors.ensure()
            self.dense = DenseView(self.vectors, read_index=s.read_index)

    @classmethod
    def open(cls, path: str | Path = ":memory:", *, config: MemlabConfig | None = None,
             embedder: _Embedder | None = None, quick_check: bool | None = None) -> "Store":
        """Connect, migrate and open (``config.store`` pragmas and vector layout)."""
        cfg = config if config is not None else MemlabConfig()
        conn = connect(path, busy_timeout_ms=cfg.store.busy_timeout_ms,
                       journal_mode=cfg.store.journal_mode,
                       quick_check=cfg.store.quick_check if quick_check is None else quick_check)
        try:
            migrate(conn)
            return cls(conn, path=str(path), config=cfg, embedder=embedder)
        except BaseException:
            conn.close()
            raise

    def signals(self, *, load: bool = False) -> Repository | MemoryIndex:
        """Where recall reads candidates and stored signals (``store.memory_index``): the
        in-process :class:`MemoryIndex`, synced with the change log, or the :class:`Repository`'s
        SQL. The index is loaded at the second read of an opened store (or now, with ``load``):
        a one-off recall (the CLI) is faster through SQL than through loading every memory.
        Inside a write transaction always the SQL: the index never reads writes that could still
        roll back. Inside a read snapshot (:meth:`read`) the index is synced to that snapshot, so
        it answers for the same state as every other read of the snapshot."""
        if self.config.store.memory_index == "sqlite" or in_write_transaction(self.conn):
            return self.repo
        if self._memory_index is None:
            if not load and not self._read_once:
                self._read_once = True
                return self.repo
            self._memory_index = MemoryIndex.load(self.conn, config=self.config)
        else:
            self._memory_index.sync(self.conn)
        return self._memory_index

    def read(self, fn: Callable[[], T]) -> T:
        """``fn()`` — a recall's reads — inside one read snapshot of the store.

        Recall reads through several parts: the MemoryIndex (or SQL) for the permanent, lexical
        and entity routes and the stored signals, the dense view for the vector route and the
        candidates' vectors, SQL for the selected records. Each in-process index syncs itself
        with the store when it is read; without a snapshot another process's commit between two
        of those reads made them describe two different stores (a rowid found by the dense route
        and unknown to the MemoryIndex: issue 7, defect 1). Inside one read transaction
        (:func:`~memlab.store.snapshot.read_snapshot`) every read, and every index sync, sees the
        same committed state, so the parts always agree; writers are not blocked (WAL).

        If a part still disagrees (:class:`StoreInconsistent`: an in-process index out of step
        with the truth, a fault this design rules out but a damaged change log could cause), the
        in-process indexes are reloaded from the store, which is logged once and counted in
        ``stats``, and ``fn`` runs once more in a fresh snapshot; a second disagreement is raised
        (the vector cache itself is out of step: rebuild it). Inside the caller's own write
        transaction ``fn`` runs in it (its reads are already one state) and reads SQL.
        """
        try:
            with read_snapshot(self.conn):
                return fn()
        except StoreInconsistent as exc:
            if in_write_transaction(self.conn):
                raise
            self.stats["index resync"] += 1
            if self.stats["index resync"] == 1:
                log.warning("memlab: %s: in-process read indexes out of step (%s); reloaded",
                            self.path, exc)
            self.resync()
        try:
            with read_snapshot(self.conn):
                return fn()
        except StoreInconsistent as exc:
            raise StoreInconsistent(f"{self.path}: {exc}; still so after reloading the in-process "
                                    f"indexes: rebuild the vector cache from the truth "
                                    f"(MemoryStore.rebuild_vectors())") from exc

    def resync(self) -> None:
        """Drop what the in-process indexes hold: the next read reloads them from the store."""
        self._memory_index = None
        self._read_once = True
        if self.dense is not None and self.dense.index is not None:
            self.dense.index.stale = True

    def warm(self) -> None:
        """Load (or bring up to date) the in-process read indexes now, from one snapshot."""
        def load() -> None:
            self.signals(load=True)
            if self.dense is not None and self.dense.index is not None:
                self.dense.index.sync(self.vectors)
        self.read(load)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, records: Sequence[MemoryRecord], *, terms: Sequence[Sequence[str]],
            entities: Sequence[Sequence[str]], vectors: Any = None) -> list[MemoryRecord]:
        """Add records (and, when given, the vectors of their texts) in one transaction.

        Without vectors the records are pending for the embedder's version. Returns the records.
        """
        records = list(records)
        arr = None
        if vectors is not None:
            if self.vectors is None:
                raise InvalidInput("vectors", "given, but the store has no embedder (its version "
                                   "names the vector table)", "vectors without embedder")
            arr = self.vectors.check_vectors(vectors, len(records))
        with transaction(self.conn):
            rowids = self.repo.add(records, terms=terms, entities=entities)
            if arr is not None:
                generation = self.repo.put_vectors(self.vectors, rowids, arr)
                meta = load_meta(self.conn, rowids)
        if arr is not None and self.dense is not None:
            self.dense.applied(rowids, arr, meta, generation=generation)
        return records

    def embed_cached(self, embedder: _Embedder, texts: Sequence[str], *, query: bool = False
                     ) -> np.ndarray:
        """Vectors of ``texts`` through the embedding cache (documents keyed by the embedder's
        version, queries by ``version + '|query'``): a text is never embedded twice."""
        key = embedder.version + ("|query" if query else "")
        fn = embedder.embed_queries if query else embedder.embed_documents
        out = self.embeddings.embed(key, list(texts), lambda t: fn(t))
        return out if len(out) else np.zeros((0, int(embedder.dim)), np.float32)

    def embed_pending(self, embedder: _Embedder, *, batch: int = 256) -> int:
        """Embed (through the cache) and store the vectors of every pending memory; the count."""
        self._check_embedder(embedder)
        done = 0
        while True:
            rowids = self.repo.pending(embedder.version, limit=batch)
            if not rowids:
                return done
            texts = [r.text for r in self.repo.get_rows(rowids)]
            vecs = self.embed_cached(embedder, texts)
            with transaction(self.conn):
                generation = self.repo.put_vectors(self.vectors, rowids, vecs)
                meta = load_meta(self.conn, rowids)
            self.dense.applied(rowids, vecs, meta, generation=generation)
            done += len(rowids)

    def rebuild_vectors(self, embedder: _Embedder) -> int:
        """Drop the embedder's vector table, rebuild it from the embedding cache, embed what the
        cache lacks; returns the number of vectors in the rebuilt table."""
        self._check_embedder(embedder)
        self.vectors.rebuild()
        self.embed_pending(embedder)
        self.dense = DenseView(self.vectors, read_index=self.config.store.read_index)
        return self.vectors.count()

    def _check_embedder(self, embedder: _Embedder) -> None:
        if self.vectors is None or embedder.version != self.vectors.model_version:
            raise StoreError(f"this store was opened for embedder "
                             f"{getattr(self.vectors, 'model_version', None)!r}, not "
                             f"{embedder.version!r}: open it with that embedder")

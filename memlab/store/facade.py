"""Store: one opened memory database — repository, embedding cache, vector cache and dense index.

A thin composition of the store's parts for the public API and the benchmarks; every SQL statement
stays in the parts. The vector table is named by the embedder's ``version`` (one table per model),
laid out as ``config.store`` says; the dense route reads through :class:`DenseView`, which is an
:class:`ExactIndex` kept in step with the table (``store.read_index = "numpy"``) or sqlite-vec
itself (``"sqlite-vec"``). All of one recall's reads run in one read snapshot (:meth:`Store.read`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, TypeVar

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import CorruptStore, InvalidInput, StoreError, StoreInconsistent
from memlab.types import MemoryRecord

from .audit import AuditLog
from .cache import EmbeddingCache, FreshVectors
from .connect import Connection, connect, transaction
from .ann import AnnIndex
from .exact import ExactIndex
from . import persist
from .health import (RebuildReport, VectorState, bad_times, measure_vectors, reconcile_vectors,
                     table_exists)
from .indexio import (GraphFile, open_exact_index, open_memory_index, save_exact_index,
                      save_memory_index)
from .memindex import MemoryIndex
from .migrations import check_openable, migrate
from .recall_log import RecallEvents
from .repository import Repository
from .snapshot import in_write_transaction, read_snapshot
from .vecscan import Damage, scan
from .vectors import VectorCache, load_meta, record_meta
from .windows import WindowVectors

log = logging.getLogger("memlab")
T = TypeVar("T")


class _Embedder(Protocol):
    version: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray: ...


class DenseView:
    """The dense recall route over one vector table: ``search`` and ``vectors``. With
    ``store.dense_index = "usearch"`` searches go through an :class:`AnnIndex` (an HNSW graph
    over the ExactIndex's rows, :mod:`memlab.store.ann`).

    Args:
        cache: the model version's vector table.
        read_index: ``"numpy"`` (an ExactIndex, re-synced when another writer changed the table)
            or ``"sqlite-vec"``.
    """

    def __init__(self, cache: VectorCache, *, read_index: str = "numpy",
                 config: MemlabConfig | None = None, path: str | None = None,
                 stats: Counter[str] | None = None) -> None:
        if read_index not in ("numpy", "sqlite-vec"):
            raise InvalidInput("read_index", "must be 'numpy' or 'sqlite-vec'", read_index)
        self.cache = cache
        self.index: ExactIndex | None = None
        self.ann: AnnIndex | None = None    # store.dense_index "usearch": a graph over index
        self.opened = ""      # how the index was opened (persisted state loaded, or rebuilt)
        self.saved = -1       # the generation of its state saved beside the store
        if read_index != "numpy":
            return
        cfg = config if config is not None else MemlabConfig()
        stats = stats if stats is not None else Counter()
        keeper = None
        if path is not None and cfg.store.persist_index and persist.folder_of(path):
            self.index, self.opened, self.saved = open_exact_index(path, cache, cfg, stats)
            keeper = GraphFile(path, cache, cfg, stats)
        else:
            self.index = ExactIndex.load(cache, exact_dtype=cfg.store.exact_dtype,
                                         prefilter=cfg.store.exact_prefilter)
        self.index.prefilter = cfg.store.exact_prefilter   # a saved state's index too
        if cfg.store.dense_index == "usearch":    # its graph is saved beside the store too
            self.ann = AnnIndex.from_config(cfg, stats, keeper)

    def search(self, query_vec: Any, k: int, *, agent_id: str, user_id: str,
               **filters: Any) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, cosine), best first; filters as :meth:`VectorCache.search`."""
        if self.index is not None:
            if self.index.sync(self.cache) and self.ann is not None:
                self.ann.drop()      # reloaded: the graph is rebuilt from the rows now held
            if self.ann is not None:
                return self.ann.search(self.index, query_vec, k, agent_id=agent_id,
                                       user_id=user_id, **filters)
            return self.index.search(query_vec, k, agent_id=agent_id, user_id=user_id, **filters)
        return self.cache.search(query_vec, k, agent_id=agent_id, user_id=user_id, **filters)

    def vectors(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``rowids`` that have a vector, their unit vectors): cosine = vecs @ q."""
        if self.index is not None:
            self.index.sync(self.cache)
            return self.index.vectors(rowids)
        rowids = [int(r) for r in rowids]
        if not self.cache.exists():
            return np.zeros(0, np.int64), np.zeros((0, self.cache.dim), np.float32)
        present = set(self.cache._present(rowids))
        pos = np.array([i for i, r in enumerate(rowids) if r in present], np.int64)
        vecs = self.cache.vectors([rowids[i] for i in pos])
        if len(vecs):
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return pos, vecs

    def windows(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(the position in ``rowids`` of each stored window's memory, the windows' unit
        vectors) under this table's model version (:mod:`memlab.store.windows`)."""
        return WindowVectors(self.cache.conn, self.cache.model_version).of(rowids)

    def applied(self, rowids: Sequence[int], vectors: Any, meta: Sequence[Any], *,
                generation: int) -> None:
        """Tell the in-process index about a committed write."""
        if self.index is not None:
            before = self.index.generation
            self.index.add(rowids, vectors, meta, generation=generation)
            if self.ann is not None:
                self.ann.applied(self.index, before, rowids)


class Store:
    """An opened store. Use :meth:`Store.open`.

    Attributes: ``conn``, ``repo`` (:class:`Repository`), ``embeddings`` (:class:`EmbeddingCache`),
    ``audit`` (:class:`AuditLog`, the ``memory_audit`` rows), ``events``
    (:class:`~memlab.store.recall_log.RecallEvents`, the recall audit log), ``vectors``
    (:class:`VectorCache` of the embedder's version, or None without an embedder),
    ``dense`` (:class:`DenseView`, or None), ``vector_check`` (the :class:`VectorState` found
    when the vector table was checked at open: lost vectors are found and their memories marked
    pending; or None). Recall reads candidates and signals from :meth:`signals`, all of its reads
    inside :meth:`read` (one snapshot).
    """

    def __init__(self, conn: Connection, *, path: str, config: MemlabConfig,
                 embedder: _Embedder | None = None) -> None:
        self.conn, self.path, self.config = conn, path, config
        self.repo = Repository(conn, config=config)
        self.embeddings = EmbeddingCache(conn)
        self.audit = AuditLog(conn)
        self.events = RecallEvents(conn)
        self.vectors: VectorCache | None = None
        self.dense: DenseView | None = None
        self.vector_check: VectorState | None = None
        self._restored = False    # the memories whose vectors were lost at open are re-embedded
        self._memory_index: MemoryIndex | None = None
        self._read_once = False   # a first read went through SQL (see signals)
        self.stats: Counter[str] = Counter()   # documented degradations (see read)
        #: how each in-process index was opened ("loaded", "rebuilt: <why>"; store.persist_index)
        self.index_opened: dict[str, str] = {}
        self._saved = {"memory": -1, "dense": -1}   # generations saved beside the store
        self._distrust = False    # after an inconsistency: reload from SQLite, not saved states
        if embedder is not None:
            s = config.store
            self.vectors = VectorCache(conn, model_version=embedder.version, dim=int(embedder.dim),
                                       dtype=s.vector_dtype, int8_scale=s.int8_scale,
                                       partitioned=s.partition_by_quarter)
            self.vector_check = reconcile_vectors(   # lost or damaged vectors: pending
                conn, self.vectors, sample_size=s.vector_sample)
            self.vectors.ensure()
            self.dense = self._dense_view()

    def _persisting(self) -> bool:
        return self.config.store.persist_index and persist.folder_of(self.path) is not None

    def _dense_view(self) -> DenseView:
        view = DenseView(self.vectors, read_index=self.config.store.read_index,
                         config=self.config, path=self.path if self._persisting() else None,
                         stats=self.stats)
        if view.opened:
            self.index_opened["dense"], self._saved["dense"] = view.opened, view.saved
        return view

    def _load_memory_index(self) -> MemoryIndex:
        if not self._persisting() or self._distrust:
            return MemoryIndex.load(self.conn, config=self.config)
        index, self.index_opened["memory"], self._saved["memory"] = open_memory_index(
            self.path, self.conn, self.config, self.stats)
        return index

    def save_indexes(self) -> dict[str, bool]:
        """Save the in-process indexes beside the store when they changed since they were
        loaded or saved (``store.persist_index``; :mod:`memlab.store.persist`); what was saved.
        Called by :meth:`close`."""
        done = {"memory": False, "dense": False}
        if not self._persisting() or in_write_transaction(self.conn):
            return done
        mi = self._memory_index
        if mi is not None and mi.generation != self._saved["memory"] and \
                len(mi) >= self.config.store.persist_min_memories:
            done["memory"] = save_memory_index(self.path, mi, self.conn, self.stats)
            self._saved["memory"] = mi.generation
        ex = self.dense.index if self.dense is not None else None
        if ex is not None and ex.generation != self._saved["dense"] and \
                len(ex) >= self.config.store.persist_min_memories:
            done["dense"] = save_exact_index(self.path, ex, self.vectors, self.stats)
            self._saved["dense"] = ex.generation
        if ex is not None and self.dense.ann is not None:    # the usearch graph, when changed
            done["ann"] = self.dense.ann.save(ex)
        return done

    @classmethod
    def open(cls, path: str | Path = ":memory:", *, config: MemlabConfig | None = None,
             embedder: _Embedder | None = None, quick_check: bool | None = None) -> "Store":
        """Connect, migrate and open (``config.store`` pragmas and vector layout)."""
        cfg = config if config is not None else MemlabConfig()
        conn = connect(path, busy_timeout_ms=cfg.store.busy_timeout_ms,
                       journal_mode=cfg.store.journal_mode,
                       quick_check=cfg.store.quick_check if quick_check is None else quick_check,
                       wal_autocheckpoint=cfg.store.wal_autocheckpoint_pages,
                       preflight=check_openable)
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
        a one-off recall (the CLI) is faster through SQL than through loading every memory;
        when a saved state lies beside the store (``store.persist_index``) it is mapped at the
        first read instead (:func:`~memlab.store.indexio.open_memory_index`).
        Inside a write transaction always the SQL: the index never reads writes that could still
        roll back. Inside a read snapshot (:meth:`read`) the index is synced to that snapshot, so
        it answers for the same state as every other read of the snapshot."""
        if self.config.store.memory_index == "sqlite" or in_write_transaction(self.conn):
            return self.repo
        if self._memory_index is None:
            if not load and not self._read_once and not self._saved_state():
                self._read_once = True
                return self.repo
            self._memory_index = self._load_memory_index()
        else:
            self._memory_index.sync(self.conn)
        return self._memory_index

    def _saved_state(self) -> bool:
        """A saved MemoryIndex lies beside the store (loading it beats a first read via SQL)."""
        return self._persisting() and \
            (persist.folder_of(self.path) / f"{persist.MEMORY}.json").exists()

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
        """Drop what the in-process indexes hold: the next read reloads them from the store
        (from SQLite itself, not from a state saved beside it, which is replaced at close)."""
        self._memory_index = None
        self._read_once = True
        self._distrust = True
        self._saved = {"memory": -1, "dense": -1}
        if self.dense is not None and self.dense.index is not None:
            self.dense.index.stale = True
        if self.dense is not None and self.dense.ann is not None:
            self.dense.ann.drop(distrust=True)

    def release(self) -> dict[str, int]:
        """Free the in-process read indexes (the MemoryIndex and the dense ExactIndex; they hold
        every agent and user of the store in one array): the next read reloads them from the
        store, as after :meth:`resync`. Returns the rows each held. Nothing stored changes."""
        held = {"memory_index": 0 if self._memory_index is None else len(self._memory_index),
                "dense_index": 0}
        self._memory_index = None
        self._read_once = True
        if self.dense is not None and self.dense.index is not None:
            old = self.dense.index
            held["dense_index"] = len(old)
            fresh = ExactIndex(dim=old.dim, dtype=old.dtype, int8_scale=old.int8_scale,
                               gather_fraction=old.gather_fraction,
                               exact_dtype=old.exact_dtype, prefilter=old.prefilter)
            fresh.stale = True   # empty: the next sync reloads it
            self.dense.index = fresh
            if self.dense.ann is not None:
                self.dense.ann.drop()
        return held

    def warm(self) -> None:
        """Load (or bring up to date) the in-process read indexes now, from one snapshot."""
        def load() -> None:
            self.signals(load=True)
            if self.dense is not None and self.dense.index is not None:
                self.dense.index.sync(self.vectors)
        self.read(load)

    def close(self) -> None:
        """Save the in-process indexes when they changed (:meth:`save_indexes`), then close."""
        try:
            self.save_indexes()
        finally:
            self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, records: Sequence[MemoryRecord] | Callable[[], Sequence[MemoryRecord | None]],
            *, terms: Sequence[Sequence[str]], entities: Sequence[Sequence[str]],
            keys: Sequence[Sequence[str]] | None = None,
            vectors: Any = None, fresh: Sequence[FreshVectors] = (),
            replacing: Sequence[str] = (),
            prepare: Callable[[Repository, list[MemoryRecord]], list[MemoryRecord]] | None = None,
            windows: Sequence[np.ndarray] | None = None) -> list[MemoryRecord]:
        """Add records (and, when given, the vectors of their texts) in one transaction.

        ``records``: the records, or a function called inside the transaction that returns them,
        one per text (the write pipeline chooses layers there: its budget reads and the insert
        see one state); a None there is a text not stored after all: its terms, entities and
        vector are dropped, and when none is stored nothing is written. ``keys``: each text's
        expanded keys (:mod:`memlab.write.keys`; None: none).
        ``replacing``: ids of memories deleted in the same transaction (a character card's
        re-sync: the old anchors go as the new ones come, or neither).

        ``fresh``: vectors embedded and not cached yet (these records' texts, :meth:`lookup_cached`;
        the background sample), written to the embedding cache in the same transaction: a refused
        add caches nothing.

        Without vectors the records are pending for the embedder's version. An all-zero vector
        means the embedder gives that text none: the record is stored with embedding_status
        'none' (lexical routes only). Returns the records as stored (status and model version).

        ``windows``: with ``vectors``, the window vectors of each text (shape (m, dim), m = 0 for
        a text not split; :mod:`memlab.windows`), stored in the same transaction for the records
        given a vector (:mod:`memlab.store.windows`).

        ``prepare(repo, records) -> records``: a step run inside the transaction before the insert
        (the write side's lifecycle governance: fact supersession, the pin cap); what it changes
        is undone with the add when the add is refused. It must keep the records' order and ids.
        """
        if vectors is not None and self.vectors is None:
            raise InvalidInput("vectors", "given, but the store has no embedder (its version "
                               "names the vector table)", "vectors without embedder")
        applied = None
        with transaction(self.conn):
            if callable(records):
                built = list(records())
                if len(built) != len(terms):
                    raise InvalidInput("records", f"one per text ({len(terms)})", len(built))
                keep = [i for i, r in enumerate(built) if r is not None]
                if not keep and not replacing:
                    return []
                records = [built[i] for i in keep]
                terms = [terms[i] for i in keep]
                entities = [entities[i] for i in keep]
                keys = None if keys is None else [keys[i] for i in keep]
                if vectors is not None:
                    vectors = np.asarray(vectors)[keep]
                if windows is not None:
                    windows = [windows[i] for i in keep]
            else:
                records = list(records)
            self.repo.delete(replacing)
            if not records:
                return []
            records = self._prepare(prepare, records)
            rowids = self.repo.add(records, terms=terms, entities=entities, keys=keys)
            if vectors is not None:
                none, arr = self._split_empty(vectors, len(records))
                applied = self._put(rowids, none, arr, records=records)
                if windows is not None:
                    if len(windows) != len(records):
                        raise InvalidInput("windows", f"one array per record ({len(records)})",
                                           len(windows))
                    WindowVectors(self.conn, self.vectors.model_version).put(
                        [r for r, e in zip(rowids, none) if not e],
                        [w for w, e in zip(windows, none) if not e])
                for f in fresh:
                    f.write(self.embeddings)
        if applied is None:
            return records
        self._applied(*applied)
        version = self.vectors.model_version
        return [dataclasses.replace(r, embedding_status="none" if empty else "ready",
                                    embedding_model_version=version)
                for r, empty in zip(records, none)]

    def _prepare(self, prepare, records: list[MemoryRecord]) -> list[MemoryRecord]:
        if prepare is None:
            return records
        out = list(prepare(self.repo, records))
        if [r.id for r in out] != [r.id for r in records]:
            raise StoreError("Store.add: the prepare step must keep the records and their order")
        return out

    def _split_empty(self, vectors: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(mask of the all-zero rows: the embedder gives those texts no vector, the other rows
        checked by the vector table)."""
        arr = np.asarray(vectors, dtype=np.float32)
        none = np.zeros(n, bool)
        if arr.ndim == 2 and arr.shape[0] == n:
            none = ~arr.any(axis=1)
        return none, self.vectors.check_vectors(arr[~none], int((~none).sum()))

    def _put(self, rowids: Sequence[int], none: np.ndarray, arr: np.ndarray, *,
             records: Sequence[MemoryRecord] | None = None) -> tuple:
        """Inside a transaction: the vectors of the rows that have one, the 'none' mark of the
        others; returns what :meth:`_applied` tells the dense index after the commit.
        ``records``: the records just inserted under ``rowids`` (:meth:`add`): their texts and
        filter columns are taken from them, not read back, and their new rowids need no delete
        in the vector table."""
        rows = [r for r, e in zip(rowids, none) if not e]
        self.repo.mark_no_vector([r for r, e in zip(rowids, none) if e], self.vectors.model_version)
        if not rows:
            return (), None, (), -1
        if records is None:
            generation = self.repo.put_vectors(self.vectors, rows, arr)
            return rows, arr, load_meta(self.conn, rows), generation
        kept = [r for r, e in zip(records, none) if not e]
        meta = record_meta(kept)
        generation = self.repo.put_vectors(self.vectors, rows, arr, texts=[r.text for r in kept],
                                           meta=meta, new=True)
        return rows, arr, meta, generation

    def _applied(self, rows: Sequence[int], arr: Any, meta: Sequence[Any], generation: int) -> None:
        if len(rows) and self.dense is not None:
            self.dense.applied(rows, arr, meta, generation=generation)

    def embed_cached(self, embedder: _Embedder, texts: Sequence[str], *, query: bool = False
                     ) -> np.ndarray:
        """Vectors of ``texts`` through the embedding cache (documents keyed by the embedder's
        version, queries by ``version + '|query'``): a text is never embedded twice."""
        key = embedder.version + ("|query" if query else "")
        fn = embedder.embed_queries if query else embedder.embed_documents
        out = self.embeddings.embed(key, list(texts), lambda t: fn(t))
        return out if len(out) else np.zeros((0, int(embedder.dim)), np.float32)

    def lookup_cached(self, embedder: _Embedder, texts: Sequence[str]
                      ) -> tuple[np.ndarray, FreshVectors]:
        """Document vectors of ``texts`` as :meth:`embed_cached`, but the newly embedded ones
        are returned, not cached: :meth:`add` caches them with the records it writes."""
        out, fresh = self.embeddings.lookup(embedder.version, list(texts), embedder.embed_documents)
        return (out if len(out) else np.zeros((0, int(embedder.dim)), np.float32)), fresh

    def embed_pending(self, embedder: _Embedder, *, batch: int = 256,
                      on_batch: Callable[[int], None] | None = None) -> int:
        """Embed (through the cache) and store the vectors of every pending memory; the count
        (memories given an all-zero vector are marked 'none' and counted too). ``on_batch(done)``
        is called after each committed batch (a fold job extends its lease there).

        Memories stored with a time outside the range memlab stores (before it checked times, or
        behind its back: :class:`~memlab.store.health.BadTimes`) cannot be given a vector row:
        they are skipped and stay pending, logged as a warning naming them and counted in
        ``stats["memories with bad times"]``; ``memlab store check`` reports them."""
        self._check_embedder(embedder)
        done = 0
        while True:
            rowids = self.repo.pending(embedder.version, limit=batch)
            if not rowids:
                self._restored = True
                found = bad_times(self.conn)
                if found:
                    self.stats["memories with bad times"] = found.count
                    log.warning("memlab: %s: %s", self.path, found.problem())
                return done
            texts = [r.text for r in self.repo.get_rows(rowids)]
            none, vecs = self._split_empty(self.embed_cached(embedder, texts), len(rowids))
            with transaction(self.conn):
                applied = self._put(rowids, none, vecs)
            self._applied(*applied)
            done += len(rowids)
            if on_batch is not None:
                on_batch(done)

    def rebuild_vectors(self, embedder: _Embedder) -> int:
        """Drop the embedder's vector table, rebuild it from the embedding cache, embed what the
        cache lacks; returns the number of vectors in the rebuilt table."""
        return self.rebuild(embedder).vectors

    def rebuild(self, embedder: _Embedder) -> RebuildReport:
        """:meth:`rebuild_vectors`, returning what it did (``memlab store rebuild``): what the
        check at open found, and what a check of every vector's contents found before the table
        was dropped (``before``: what the rebuild replaced)."""
        self._check_embedder(embedder)
        cached = self.embeddings.count(embedder.version)
        before, unreadable = self._contents()
        self.vectors.rebuild()
        self.embed_pending(embedder)
        self.dense = self._dense_view()
        state, found = self.vector_state(), self.vector_check
        embedded = self.embeddings.count(embedder.version) - cached   # texts the model embedded
        return RebuildReport(model_version=state.model_version, table=state.table,
                             records=state.records, from_cache=state.vectors - embedded,
                             embedded=embedded, vectors=state.vectors, pending=state.pending,
                             problem_at_open=found.problem, lost_at_open=found.lost,
                             bad_times=bad_times(self.conn) or None,
                             checked_at_open=found.checked, checked_before=before.checked,
                             damaged_before=len(before.rowids), damage_before=before.kinds(),
                             unreadable_before=unreadable)

    def _contents(self) -> tuple[Damage, str]:
        """Every vector of the table checked before a rebuild replaces it, and what made it
        unreadable ("" when it was read): a table sqlite-vec cannot read is what a rebuild is
        for, so that is reported (RebuildReport.unreadable_before), not raised."""
        if not table_exists(self.conn, self.vectors.table):
            return Damage(0, 0), ""
        try:
            return scan(self.conn, self.vectors, self.vectors.count()), ""
        except CorruptStore as exc:
            return Damage(0, 0), str(exc.__cause__ or exc)

    def vector_state(self) -> VectorState | None:
        """The vector table now (counts), with what was lost at open until it is re-embedded and
        how many vectors' contents the open checked."""
        if self.vectors is None:
            return None
        now = dataclasses.replace(measure_vectors(self.conn, self.vectors),
                                  checked=self.vector_check.checked)
        if self._lost_pending():
            return dataclasses.replace(now, lost=self.vector_check.lost,
                                       problem=self.vector_check.problem)
        return now

    def notes(self) -> list[str]:
        """What recall tells the user about this store: vectors lost at open and not yet
        re-embedded (a lookup, no query)."""
        return [self.vector_check.note(self.path)] if self._lost_pending() else []

    def _lost_pending(self) -> bool:
        found = self.vector_check
        return found is not None and found.lost > 0 and not self._restored

    def _check_embedder(self, embedder: _Embedder) -> None:
        if self.vectors is None or embedder.version != self.vectors.model_version:
            raise StoreError(f"this store was opened for embedder "
                             f"{getattr(self.vectors, 'model_version', None)!r}, not "
                             f"{embedder.version!r}: open it with that embedder")

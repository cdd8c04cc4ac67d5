"""The SQLite truth source: connection, migrations, repository, vector cache, embedding cache.

Typical use::

    conn, repo = open_store("memories.sqlite", config=cfg)
    rowids = repo.add(records, terms=[memory_terms(r.text) for r in records],
                      entities=[extract_entities(r.text) for r in records])
    vecs = VectorCache(conn, model_version="e5-small-q4", dim=384,
                       dtype=cfg.store.vector_dtype, int8_scale=cfg.store.int8_scale,
                       partitioned=cfg.store.partition_by_quarter)
    generation = repo.put_vectors(vecs, rowids, embeddings)
    index = ExactIndex.load(vecs)        # or index.add(rowids, embeddings, meta, generation=...)
    signals = MemoryIndex.load(conn)     # recall's other reads in memory; signals.sync(conn) later
    report = check_store("memories.sqlite")   # read-only: integrity, counts, vectors, change log

Every driver error comes out as memlab's (CorruptStore, ReadOnlyStore, StoreLocked, StoreError:
``connect.store_error``); ``Store.open`` checks the vector table against the embedded memories
(``health.reconcile_vectors``).
"""

from __future__ import annotations

from pathlib import Path

from memlab.config import MemlabConfig

from .cache import EmbeddingCache, EmbeddingCacheFile, text_hash
from .connect import Connection, connect, db_path, driver, store_error, transaction
from .exact import ExactIndex
from .facade import DenseView, Store
from .checkup import StoreReport, check_store
from .health import RebuildReport, VectorState, reconcile_vectors
from .memindex import MemoryIndex
from .migrations import LATEST, MIGRATIONS, check_openable, migrate, schema_version
from .repository import Repository, validate_record
from .snapshot import in_read_snapshot, in_write_transaction, read_snapshot
from .vectors import (VectorCache, VectorMeta, load_meta, quantize_int8, quarter, quarters_between,
                      registered_tables, table_name)


def open_store(path: str | Path, *, config: MemlabConfig | None = None,
               quick_check: bool | None = None) -> tuple[Connection, Repository]:
    """Connect (``store.busy_timeout_ms``, ``store.journal_mode``,
    ``store.wal_autocheckpoint_pages``, ``store.quick_check`` unless
    ``quick_check`` is given), migrate, and return ``(connection, Repository)``."""
    config = config if config is not None else MemlabConfig()
    quick_check = config.store.quick_check if quick_check is None else quick_check
    conn = connect(path, busy_timeout_ms=config.store.busy_timeout_ms,
                   journal_mode=config.store.journal_mode, quick_check=quick_check,
                   wal_autocheckpoint=config.store.wal_autocheckpoint_pages,
                   preflight=check_openable)
    try:
        migrate(conn)
        return conn, Repository(conn, config=config)
    except BaseException:
        conn.close()
        raise


def vector_cache(conn: Connection, *, model_version: str, dim: int,
                 config: MemlabConfig | None = None) -> VectorCache:
    """A :class:`VectorCache` laid out as ``config.store`` says (dtype, int8 scale, partitions)."""
    s = (config if config is not None else MemlabConfig()).store
    return VectorCache(conn, model_version=model_version, dim=dim, dtype=s.vector_dtype,
                       int8_scale=s.int8_scale, partitioned=s.partition_by_quarter)


__all__ = ["Connection", "DenseView", "EmbeddingCache", "EmbeddingCacheFile", "ExactIndex", "LATEST",
           "MIGRATIONS", "MemoryIndex", "RebuildReport", "Repository", "Store", "StoreReport",
           "VectorCache", "VectorMeta", "VectorState", "check_openable", "check_store", "connect",
           "db_path", "driver", "in_read_snapshot", "in_write_transaction", "load_meta", "migrate",
           "open_store", "quantize_int8", "quarter", "quarters_between", "read_snapshot",
           "reconcile_vectors", "registered_tables", "schema_version",
           "store_error", "table_name", "text_hash", "transaction", "validate_record",
           "vector_cache"]

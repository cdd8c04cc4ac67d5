"""Store health: the vector cache checked (and repaired) at every open, and `memlab store check`.

The vector table of a model version is a cache of the truth (``memory_records``), but a lost or
short table must not go unnoticed: recall would silently rank the memories without a vector by
their lexical signals only. Every :meth:`Store.open <memlab.store.facade.Store.open>` with an
embedder compares two counts (cheap: no vector is read): the rows of the vector table and the
memories marked embedded under that model (``memory_embeddings``). When they differ, or the table
or its registry row is gone, :func:`reconcile_vectors` finds the memories whose vector is missing,
marks them pending again (their ``memory_embeddings`` row removed, ``embedding_status =
'pending'``), recreates a missing table, logs a warning naming the store, and the returned
:class:`VectorState` says what happened (``MemoryStore.health``; recall adds a note while memories
are pending). ``embed_pending()`` (or ``rebuild_vectors()``, ``memlab store rebuild PATH``)
re-embeds them through the embedding cache: the same vectors, so the same rankings, without
calling the model again. memlab's choice: mark pending at open rather than re-embed there, so that
opening stays cheap and never calls an embedder.

:func:`check_store` is the full report behind ``memlab store check PATH``: SQLite's integrity check,
schema version, records by layer and status, pending embeddings and vector rows against embedded
memories per model version, and the change log that keeps the in-process MemoryIndex fresh. It
opens the file read-only and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memlab.errors import CorruptStore
from memlab.inputs import MAX_TIME, MIN_TIME, TIME_RANGE

from .connect import Connection, connect, db_path, transaction
from .migrations import LATEST, schema_version
from .records import TIME_OUT_OF_RANGE_SQL
from .vectors import VectorCache, table_name

log = logging.getLogger("memlab")

_TRIGGERS = ("memory_records_log_insert", "memory_records_log_update", "memory_records_log_delete")


# ----------------------------------------------------------------------------- vector cache

@dataclass(frozen=True)
class VectorState:
    """The vector cache of one model version, as counted at open (and after a re-embedding).

    ``records``: memories stored; ``embedded``: memories marked embedded under the model;
    ``vectors``: rows in its table; ``lost``: memories whose vector was found missing at open and
    that were marked pending again; ``problem``: what was wrong at open ("" when whole).
    """

    model_version: str
    table: str
    records: int
    embedded: int
    vectors: int
    lost: int = 0
    problem: str = ""
    no_vector: int = 0

    @property
    def pending(self) -> int:
        """Memories with no vector under this model yet (recall ranks them lexically); not those
        the model gives no vector (``no_vector``: embedding_status 'none')."""
        return max(self.records - self.embedded - self.no_vector, 0)

    @property
    def ok(self) -> bool:
        return not self.problem and self.pending == 0

    def note(self, path: str) -> str:
        """What recall tells the user while the memories lost at open are pending ("" if none)."""
        if not self.problem:
            return ""
        if not self.lost:
            return (f"the vector table of {self.model_version!r} in {path} was {self.problem} at "
                    f"open: those vectors were dropped")
        return (f"the vector table of {self.model_version!r} in {path} was {self.problem} at "
                f"open: {self.lost} memories lost their vectors and were marked pending; they are "
                f"ranked without their vector until embed_pending() (or `memlab store rebuild "
                f"{path}`) re-embeds them through the embedding cache")


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild of a vector table did: ``vectors`` in the rebuilt table, ``from_cache`` of
    them read back from the embedding cache, ``embedded`` texts the model embedded anew (not in
    the cache), ``pending`` memories still without a vector; what the check at open had found
    (``problem_at_open``, ``lost_at_open``)."""

    model_version: str
    table: str
    records: int
    from_cache: int
    embedded: int
    vectors: int
    pending: int
    problem_at_open: str = ""
    lost_at_open: int = 0
    bad_times: "BadTimes | None" = None

    def lines(self) -> list[str]:
        """The human report of ``memlab store rebuild``."""
        found = (f"at open    the table was {self.problem_at_open}: {self.lost_at_open} "
                 f"memories had lost their vectors" if self.problem_at_open else
                 "at open    the table was whole")
        out = [f"model     {self.model_version} (table {self.table})", found,
               f"rebuilt   {self.vectors} vectors for {self.records} memories: {self.from_cache} "
               f"from the embedding cache, {self.embedded} embedded anew, {self.pending} pending"]
        if self.bad_times:
            out.append(f"skipped   {self.bad_times.problem()}")
        return out


@dataclass(frozen=True)
class BadTimes:
    """Memories stored with a time memlab does not store (outside
    :data:`memlab.inputs.TIME_RANGE`, or not a number: written before memlab checked times, or
    behind its back). They cannot be given a vector row (its partition key is the time's
    quarter), so embedding skips them and they stay pending; ``memlab store check`` reports them
    as a problem. ``count``: how many; ``examples``: (id, field, value) of the first few."""

    count: int
    examples: tuple[tuple[str, str, Any], ...] = ()

    def __bool__(self) -> bool:
        return self.count > 0

    def problem(self) -> str:
        shown = ", ".join(f"{i!r} ({f}={v!r})" for i, f, v in self.examples)
        more = f" and {self.count - len(self.examples)} more" if self.count > len(self.examples) \
            else ""
        return (f"{self.count} memories have a time outside {TIME_RANGE} or not a number: "
                f"{shown}{more}; they cannot be embedded (they stay pending): correct or delete "
                f"them")


def bad_times(conn: Connection, *, examples: int = 5) -> BadTimes:
    """The memories whose times break :func:`memlab.inputs.check_time`: none in a store that only
    memlab wrote (one scan of ``memory_records``)."""
    where = f"WHERE {TIME_OUT_OF_RANGE_SQL}"
    n = int(conn.execute(f"SELECT count(*) FROM memory_records {where}",
                         (MIN_TIME, MAX_TIME)).fetchone()[0])
    if not n:
        return BadTimes(0)
    shown = []
    for row in conn.execute(f"SELECT id, timestamp, event_time, last_accessed FROM "
                            f"memory_records {where} ORDER BY rowid LIMIT ?3",
                            (MIN_TIME, MAX_TIME, examples)):
        for name, v in zip(("timestamp", "event_time", "last_accessed"), row[1:]):
            if (v is not None or name == "timestamp") and not (
                    isinstance(v, (int, float)) and MIN_TIME <= v <= MAX_TIME):
                shown.append((row[0], name, v))
                break
    return BadTimes(n, tuple(shown))


def table_exists(conn: Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


def _rowid_source(conn: Connection, table: str) -> str:
    """Where the rowids of a vec0 table are read from: sqlite-vec's ``<table>_rowids`` shadow
    table (a plain b-tree: counting it reads no vector) when present, else the table itself."""
    return f'"{table}_rowids"' if table_exists(conn, f"{table}_rowids") else f'"{table}"'


def vector_count(conn: Connection, table: str) -> int:
    """Rows of a vec0 table (0 when the table does not exist)."""
    if not table_exists(conn, table):
        return 0
    return int(conn.execute(f"SELECT count(*) FROM {_rowid_source(conn, table)}").fetchone()[0])


def no_vector_count(conn: Connection, model_version: str) -> int:
    """Memories ``model_version`` gives no vector (embedding_status 'none': lexical only, not
    pending for it)."""
    return int(conn.execute("SELECT count(*) FROM memory_records WHERE embedding_status = 'none' "
                            "AND embedding_model_version = ?", (model_version,)).fetchone()[0])


def embedded_count(conn: Connection, model_version: str) -> int:
    """Memories marked embedded under ``model_version``."""
    return int(conn.execute("SELECT count(*) FROM memory_embeddings WHERE model_version = ?",
                            (model_version,)).fetchone()[0])


def missing_vectors(conn: Connection, model_version: str, table: str) -> list[int]:
    """Rowids marked embedded under ``model_version`` whose vector is not in ``table``."""
    if not table_exists(conn, table):
        return [r[0] for r in conn.execute(
            "SELECT rowid FROM memory_embeddings WHERE model_version = ? ORDER BY rowid",
            (model_version,))]
    return [r[0] for r in conn.execute(
        f"SELECT rowid FROM memory_embeddings WHERE model_version = ? AND rowid NOT IN "
        f"(SELECT rowid FROM {_rowid_source(conn, table)}) ORDER BY rowid", (model_version,))]


def orphan_vectors(conn: Connection, table: str) -> list[int]:
    """Rowids in ``table`` whose memory is no longer stored (deleted behind memlab's back)."""
    if not table_exists(conn, table):
        return []
    return [r[0] for r in conn.execute(
        f"SELECT rowid FROM {_rowid_source(conn, table)} WHERE rowid NOT IN "
        f"(SELECT rowid FROM memory_records) ORDER BY rowid")]


def measure_vectors(conn: Connection, cache: VectorCache) -> VectorState:
    """The counts of :class:`VectorState` (no repair, no problem recorded)."""
    records = int(conn.execute("SELECT count(*) FROM memory_records").fetchone()[0])
    return VectorState(cache.model_version, cache.table, records,
                       embedded_count(conn, cache.model_version), vector_count(conn, cache.table),
                       no_vector=no_vector_count(conn, cache.model_version))


def _problem(conn: Connection, cache: VectorCache, state: VectorState) -> str:
    """What is wrong with the table of ``cache`` ("" when its rows are the embedded memories)."""
    registered, exists = cache.exists(), table_exists(conn, cache.table)
    if registered and not exists:
        return "missing (its registry row was left)"
    if exists and not registered:
        return "unregistered (its registry row is missing)"
    if not exists:
        return "missing" if state.embedded else ""
    if state.vectors == state.embedded:
        return ""
    found = []
    if missing_vectors(conn, cache.model_version, cache.table):
        found.append("short")
    if orphan_vectors(conn, cache.table):
        found.append("holding vectors of deleted memories")
    return " and ".join(found)


def reconcile_vectors(conn: Connection, cache: VectorCache) -> VectorState:
    """Check the vector table of ``cache`` against the memories marked embedded; when vectors are
    missing, mark those memories pending, recreate a missing table, and log it (once, naming the
    store). Three counts when the table is whole (the embedded marks: one pass over
    ``memory_embeddings``, ~10 ms at 50k memories; no vector is read); the repair is one
    transaction.

    Returns the state found (``lost``, ``problem``). Raises ReadOnlyStore when a repair is needed
    but the store cannot be written.
    """
    state = measure_vectors(conn, cache)
    if not _problem(conn, cache, state):
        return state
    with transaction(conn):
        state = measure_vectors(conn, cache)       # again, under the write lock: another
        problem = _problem(conn, cache, state)     # process may have repaired it meanwhile
        if not problem:
            return state
        if problem.startswith("missing"):
            conn.execute("DELETE FROM vector_tables WHERE model_version = ?",
                         (cache.model_version,))
        elif problem.startswith("unregistered"):
            conn.execute(f'DROP TABLE "{cache.table}"')   # layout unknown: rebuilt empty
        orphans = orphan_vectors(conn, cache.table)
        if orphans:                          # rowids are never reused: these are garbage
            cache.delete(orphans)
        lost = missing_vectors(conn, cache.model_version, cache.table)
        if lost:
            ids = json.dumps(lost)
            conn.execute("DELETE FROM memory_embeddings WHERE model_version = ? AND rowid IN "
                         "(SELECT value FROM json_each(?))", (cache.model_version, ids))
            conn.execute("UPDATE memory_records SET embedding_status = 'pending' WHERE rowid IN "
                         "(SELECT value FROM json_each(?))", (ids,))
        cache.ensure()
    state = dataclasses.replace(measure_vectors(conn, cache), lost=len(lost), problem=problem)
    log.warning("memlab: %s", state.note(db_path(conn)))
    return state


def rebuild_store(path: str | Path, *, config: Any, embedder: Any) -> RebuildReport:
    """Open the store at ``path`` and rebuild ``embedder``'s vector table (``memlab store
    rebuild``). The store is opened with ``store.read_index = "sqlite-vec"`` so that the table
    being rebuilt is never loaded first (a damaged one could not be)."""
    from .facade import Store   # the facade checks the vector table at open: imports this module

    cfg = config.replace(**{"store.read_index": "sqlite-vec"})
    with Store.open(path, config=cfg, embedder=embedder) as store:
        return store.rebuild(embedder)


# ----------------------------------------------------------------------------- memlab store check

@dataclass
class StoreReport:
    """What ``memlab store check`` found. ``problems`` make it unhealthy (exit code 1);
    ``warnings`` do not (pending embeddings, an older schema that opening will migrate)."""

    path: str
    integrity_check: str = "quick_check"
    integrity: list[str] = field(default_factory=list)
    schema_version: int | None = None
    latest_schema_version: int = LATEST
    records: dict[str, dict[str, int]] = field(default_factory=dict)
    vectors: list[dict[str, Any]] = field(default_factory=list)
    change_log: dict[str, Any] = field(default_factory=dict)
    lexical_index: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"healthy": self.healthy, **asdict(self)}

    def lines(self) -> list[str]:
        """The human report of ``memlab store check``: one line per section."""
        def counts(d: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"

        out = [f"store        {self.path}",
               f"integrity    {'; '.join(self.integrity[:5]) or 'not checked'} "
               f"(PRAGMA {self.integrity_check})"]
        if self.schema_version is not None:
            out.append(f"schema       version {self.schema_version} (this memlab: "
                       f"{self.latest_schema_version})")
        if self.records:
            total = sum(self.records["retention_layer"].values())
            out += [f"records      {total}: {counts(self.records['retention_layer'])}",
                    f"lifecycle    {counts(self.records['lifecycle_state'])}",
                    f"embedding    {counts(self.records['embedding_status'])}"]
        for v in self.vectors:
            out.append(f"vectors      {v['model_version']}: {v['vectors']} vectors, "
                       f"{v['embedded']} embedded, {v['pending']} pending, "
                       f"{v['missing_vectors']} missing (table {v['table']}"
                       f"{'' if v['table_exists'] else ': absent'})")
        if self.lexical_index:
            out.append(f"lexical      {self.lexical_index['searchable_records']} searchable "
                       f"memories, {self.lexical_index['indexed_documents']} indexed")
        if self.change_log:
            c = self.change_log
            triggers = f"missing {c['triggers_missing']}" if c["triggers_missing"] else "ok"
            out.append(f"change log   generation {c['generation']}, {c['logged_rows']} rows "
                       f"logged, triggers {triggers}")
        out += [f"warning      {w}" for w in self.warnings]
        out += [f"problem      {p}" for p in self.problems]
        out.append("healthy" if self.healthy else f"UNHEALTHY: {len(self.problems)} problem(s)")
        return out


def check_store(path: str | Path, *, full: bool = False, busy_timeout_ms: int = 10_000
                ) -> StoreReport:
    """Check a store file without writing to it (opened read-only).

    Args:
        path: the store file (it must exist).
        full: ``PRAGMA integrity_check`` (every index against its table) instead of the faster
            ``PRAGMA quick_check``.
        busy_timeout_ms: how long to wait for a writer's lock.

    Raises:
        StoreError: the file cannot be opened at all (missing, a folder, no access). A damaged
            file is not raised: it is reported (``integrity``, ``problems``).
    """
    report = StoreReport(str(path), "integrity_check" if full else "quick_check")
    try:
        conn = connect(path, busy_timeout_ms=busy_timeout_ms, read_only=True)
    except CorruptStore as exc:
        report.integrity = [str(exc)]
        report.problems.append(f"not a readable SQLite database: {exc}")
        return report
    try:
        _check(conn, report, full=full)
    except CorruptStore as exc:     # a damaged page met by one of the counts
        report.problems.append(f"damaged: {exc}")
    finally:
        conn.close()
    return report


def _check(conn: Connection, report: StoreReport, *, full: bool) -> None:
    pragma = report.integrity_check
    try:
        report.integrity = [str(r[0]) for r in conn.execute(f"PRAGMA {pragma}(20)").fetchall()]
    except CorruptStore as exc:
        report.integrity = [str(exc)]
    if report.integrity != ["ok"]:
        report.problems.append(f"PRAGMA {pragma}: " + "; ".join(report.integrity[:5]))
    broken = conn.execute("PRAGMA foreign_key_check").fetchall()
    if broken:
        tables = sorted({f"{r[0]} -> {r[2]}" for r in broken})
        report.problems.append(f"{len(broken)} foreign key violations ({', '.join(tables[:5])}): "
                               f"rows refer to memories that are not stored")
    version = report.schema_version = schema_version(conn)
    if version > LATEST:
        report.problems.append(f"schema version {version} is newer than this memlab's {LATEST}")
        return
    if version == 0:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'table' AND name NOT LIKE 'sqlite_%'")]
        if tables:
            report.problems.append(f"not a memlab store (schema version 0, tables "
                                   f"{sorted(tables)[:5]})")
        else:
            report.warnings.append("an empty database: opening it creates a memlab store")
        return
    if version < LATEST:
        report.warnings.append(f"schema version {version}: opening the store writable migrates it "
                               f"to {LATEST}")
    for column in ("retention_layer", "lifecycle_state", "embedding_status"):
        report.records[column] = dict(conn.execute(
            f"SELECT {column}, count(*) FROM memory_records GROUP BY {column} ORDER BY {column}"
        ).fetchall())
    n_records = sum(report.records["retention_layer"].values())
    found = bad_times(conn)
    if found:
        report.problems.append(found.problem())
    _check_vectors(conn, report, n_records)
    _check_lexical(conn, report)
    if version >= 2:
        _check_change_log(conn, report)


def _check_vectors(conn: Connection, report: StoreReport, n_records: int) -> None:
    registry = {r[0]: r[1] for r in conn.execute("SELECT model_version, table_name FROM "
                                                 "vector_tables")}
    marked = [r[0] for r in conn.execute("SELECT DISTINCT model_version FROM memory_embeddings")]
    for model in sorted(set(registry) | set(marked)):
        table = registry.get(model, table_name(model))
        exists = table_exists(conn, table)
        embedded = embedded_count(conn, model)
        missing = len(missing_vectors(conn, model, table))
        orphans = len(orphan_vectors(conn, table))
        uncached = int(conn.execute(
            "SELECT count(*) FROM memory_embeddings e WHERE e.model_version = ? AND NOT EXISTS "
            "(SELECT 1 FROM embedding_cache c WHERE c.model_version = e.model_version AND "
            "c.text_hash = e.text_hash)", (model,)).fetchone()[0])
        row = {"model_version": model, "table": table, "registered": model in registry,
               "table_exists": exists, "vectors": vector_count(conn, table),
               "embedded": embedded, "no_vector": no_vector_count(conn, model),
               "pending": max(n_records - embedded - no_vector_count(conn, model), 0),
               "missing_vectors": missing, "orphan_vectors": orphans,
               "not_in_embedding_cache": uncached}
        report.vectors.append(row)
        if model in registry and not exists:
            report.problems.append(f"vector table {table} of {model!r} is missing (registered)")
        elif exists and model not in registry:
            report.problems.append(f"vector table {table} of {model!r} is not registered")
        elif missing:
            report.problems.append(f"{missing} of {embedded} memories embedded under {model!r} "
                                   f"have no vector in {table}")
        if orphans:
            report.problems.append(f"{orphans} vectors in {table} belong to no stored memory")
        if row["pending"]:
            report.warnings.append(f"{row['pending']} memories await embedding under {model!r}")
        if uncached:
            report.warnings.append(f"{uncached} vectors of {model!r} are not in the embedding "
                                   f"cache: a rebuild embeds those texts again")


def _check_lexical(conn: Connection, report: StoreReport) -> None:
    searchable = int(conn.execute("SELECT count(*) FROM memory_records WHERE lifecycle_state = "
                                  "'active' AND deprecated = 0").fetchone()[0])
    indexed = int(conn.execute("SELECT coalesce(sum(n_docs), 0) FROM memory_owners").fetchone()[0])
    report.lexical_index = {"searchable_records": searchable, "indexed_documents": indexed}
    if searchable != indexed:
        report.problems.append(f"lexical index counts {indexed} searchable memories, the records "
                               f"{searchable}")


def _check_change_log(conn: Connection, report: StoreReport) -> None:
    """The change log that keeps the in-process MemoryIndex fresh: its triggers, its generation,
    and no logged change ahead of the generation."""
    gen = conn.execute("SELECT gen FROM memory_generation WHERE id = 1").fetchone()
    logged, newest = conn.execute("SELECT count(*), max(seq) FROM memory_changes").fetchone()
    triggers = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                           "'trigger'")}
    absent = [t for t in _TRIGGERS if t not in triggers]
    report.change_log = {"generation": None if gen is None else int(gen[0]),
                         "logged_rows": int(logged), "newest_change": newest,
                         "triggers_missing": absent}
    if gen is None:
        report.problems.append("change log: memory_generation has no row")
    elif newest is not None and newest > gen[0]:
        report.problems.append(f"change log: a change at generation {newest} is ahead of the "
                               f"store's generation {gen[0]}")
    if absent:
        report.problems.append(f"change log: triggers {absent} are missing: the in-process "
                               f"MemoryIndex would miss writes")

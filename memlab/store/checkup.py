"""``memlab store check PATH``: a store file checked without writing to it.

:func:`check_store` is the full report: SQLite's integrity check, schema version, records by
layer and status, memories with times memlab does not store, pending embeddings and vector rows
against embedded memories per model version, the contents of a sample of each vector table's
vectors (every vector with ``full``: :mod:`memlab.store.vecscan`), the lexical index's counts,
and the change log that keeps the in-process MemoryIndex fresh. It opens the file read-only and
writes nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memlab.errors import CorruptStore, InvalidInput

from .connect import Connection, connect
from .health import (bad_times, embedded_count, missing_vectors, no_vector_count,
                     orphan_vectors, table_exists, vector_count)
from .migrations import LATEST, invalid_version, schema_version
from .vecscan import Damage, sample, scan
from .vectors import VectorCache, table_name

_TRIGGERS = ("memory_records_log_insert", "memory_records_log_update", "memory_records_log_delete")


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
                       f"{'' if v['table_exists'] else ': absent'}); contents of "
                       f"{v['contents_checked']} checked, {v['damaged_vectors']} damaged")
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


def check_store(path: str | Path, *, full: bool = False, busy_timeout_ms: int = 10_000,
                vector_sample: int = 256) -> StoreReport:
    """Check a store file without writing to it (opened read-only).

    Args:
        path: the store file (it must exist).
        full: ``PRAGMA integrity_check`` (every index against its table) instead of the faster
            ``PRAGMA quick_check``, and the contents of every vector instead of a sample.
        busy_timeout_ms: how long to wait for a writer's lock.
        vector_sample: vectors per table whose contents are checked without ``full``
            (``store.vector_sample``).

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
        _check(conn, report, full=full, vector_sample=vector_sample)
    except CorruptStore as exc:     # a damaged page met by one of the counts
        report.problems.append(f"damaged: {exc}")
    finally:
        conn.close()
    return report


def _check(conn: Connection, report: StoreReport, *, full: bool, vector_sample: int) -> None:
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
    if invalid_version(version):
        report.problems.append(f"not a valid memlab store: {invalid_version(version)}")
        return
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
    _check_vectors(conn, report, n_records, sample_size=None if full else vector_sample)
    _check_lexical(conn, report)
    if version >= 2:
        _check_change_log(conn, report)


def _check_vectors(conn: Connection, report: StoreReport, n_records: int, *,
                   sample_size: int | None) -> None:
    """Counts per model version, and the contents of ``sample_size`` vectors (None: all)."""
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
        damage = _contents(conn, model, registry, row, sample_size)
        row.update(contents_checked=damage.checked, damaged_vectors=len(damage.rowids),
                   damaged_kinds=damage.kinds(), bad_cache_vectors=len(damage.bad_reference))
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
        if damage:
            report.problems.append(
                f"{len(damage.rowids)} vectors in {table} of {model!r} are damaged "
                f"({damage.kinds()}; {damage.scope()} vectors checked): `memlab store rebuild "
                f"{report.path}` rebuilds the table from the embedding cache")
        if damage.bad_reference:
            report.problems.append(
                f"{len(damage.bad_reference)} vectors of {model!r} in the embedding cache are "
                f"not finite, all zero or of another dimension: no reference for those memories")
        if row["pending"]:
            report.warnings.append(f"{row['pending']} memories await embedding under {model!r}")
        if uncached:
            report.warnings.append(f"{uncached} vectors of {model!r} are not in the embedding "
                                   f"cache: a rebuild embeds those texts again")


def _contents(conn: Connection, model: str, registry: dict[str, str], row: dict[str, Any],
              sample_size: int | None) -> Damage:
    """The contents of a registered, present table's vectors (a sample, or all with None)."""
    if model not in registry or not row["table_exists"] or not row["vectors"]:
        return Damage(0, row["vectors"])
    try:
        cache = VectorCache.from_registry(conn, model_version=model)
    except InvalidInput as exc:             # a registry row memlab did not write
        raise CorruptStore(f"the registry row of {model!r} is invalid: {exc}") from exc
    if sample_size is None:
        return scan(conn, cache, row["vectors"])
    return sample(conn, cache, sample_size, row["vectors"])


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

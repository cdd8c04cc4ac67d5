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

The counts cannot see a vector that is there but wrong (zeroed, NaN, scaled, swapped with another
memory's). So every open also checks the contents of ``store.vector_sample`` vectors evenly spaced
over the table (:func:`memlab.store.vecscan.sample`: finite, not all zero, the embedding cache's
vector of the memory's text); when one is damaged, every vector is checked
(:func:`~memlab.store.vecscan.scan`) and the damaged ones are dropped and their memories marked
pending, said as a lost table is (``problem`` "damaged (...)").

The full report of a store file, ``memlab store check PATH``, is :mod:`memlab.store.checkup`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memlab.inputs import MAX_TIME, MIN_TIME, TIME_RANGE

from .connect import Connection, db_path, transaction
from .records import TIME_OUT_OF_RANGE_SQL
from .vecscan import Damage, sample, scan
from .vectors import VectorCache

log = logging.getLogger("memlab")


# ----------------------------------------------------------------------------- vector cache

@dataclass(frozen=True)
class VectorState:
    """The vector cache of one model version, as counted at open (and after a re-embedding).

    ``records``: memories stored; ``embedded``: memories marked embedded under the model;
    ``vectors``: rows in its table; ``lost``: memories whose vector was found missing (or
    damaged) at open and that were marked pending again; ``problem``: what was wrong at open (""
    when whole); ``checked``: vectors whose contents were checked at open.
    """

    model_version: str
    table: str
    records: int
    embedded: int
    vectors: int
    lost: int = 0
    problem: str = ""
    no_vector: int = 0
    checked: int = 0

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
    (``problem_at_open``, ``lost_at_open``, ``checked_at_open`` vectors' contents); what the
    check of every vector found before the table was replaced (``checked_before``,
    ``damaged_before`` of them, ``damage_before`` what kind; ``unreadable_before``: why
    sqlite-vec could not read the table, when it could not)."""

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
    checked_at_open: int = 0
    checked_before: int = 0
    damaged_before: int = 0
    damage_before: str = ""
    unreadable_before: str = ""

    def lines(self) -> list[str]:
        """The human report of ``memlab store rebuild``."""
        whole = f"its counts, and the contents of {self.checked_at_open} vectors" \
            if self.checked_at_open else "its counts"
        found = (f"at open    the table was {self.problem_at_open}: {self.lost_at_open} "
                 f"memories had lost their vectors" if self.problem_at_open else
                 f"at open    the table was whole ({whole})")
        out = [f"model     {self.model_version} (table {self.table})", found]
        if self.unreadable_before:
            out.append(f"before    the table could not be read ({self.unreadable_before}), "
                       f"replaced")
        elif self.checked_before:
            out.append(f"before    the contents of all {self.checked_before} vectors checked: " + (
                f"{self.damaged_before} damaged ({self.damage_before}), replaced"
                if self.damaged_before else "none damaged"))
        out.append(f"rebuilt   {self.vectors} vectors for {self.records} memories: "
                   f"{self.from_cache} from the embedding cache, {self.embedded} embedded anew, "
                   f"{self.pending} pending")
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


def _sampled(conn: Connection, cache: VectorCache, state: VectorState, size: int) -> Damage:
    """The contents of ``size`` vectors of the table (none when it is absent or ``size`` is 0)."""
    if size <= 0 or not state.vectors or not table_exists(conn, cache.table):
        return Damage(0, state.vectors)
    return sample(conn, cache, size, state.vectors)


def _damaged(conn: Connection, cache: VectorCache, state: VectorState, size: int
             ) -> tuple[list[int], str]:
    """Inside the repair's transaction: (rowids of damaged vectors, what was found) when the
    sample finds damage (then every vector is checked); ([], "") otherwise."""
    sampled = _sampled(conn, cache, state, size)
    if not sampled:
        return [], ""
    found = sampled if sampled.checked >= state.vectors else scan(conn, cache, state.vectors)
    head = "" if found is sampled else f"found in {sampled.scope()} vectors; "
    return found.rowids, f"damaged ({head}{found.scope()} vectors checked: {found.kinds()})"


def reconcile_vectors(conn: Connection, cache: VectorCache, *, sample_size: int = 0
                      ) -> VectorState:
    """Check the vector table of ``cache`` against the memories marked embedded, and the contents
    of ``sample_size`` of its vectors (``store.vector_sample``); when vectors are missing or
    damaged, drop the damaged ones, mark those memories pending, recreate a missing table, and
    log it (once, naming the store). Three counts and the sample when the table is whole (the
    embedded marks: one pass over ``memory_embeddings``, ~10 ms at 50k memories; the sample: an
    index seek per vector); the repair is one transaction.

    Returns the state found (``lost``, ``problem``, ``checked``). Raises ReadOnlyStore when a
    repair is needed but the store cannot be written.
    """
    state = measure_vectors(conn, cache)
    sampled = _sampled(conn, cache, state, sample_size)
    if not _problem(conn, cache, state) and not sampled:
        return dataclasses.replace(state, checked=sampled.checked)
    with transaction(conn):
        state = measure_vectors(conn, cache)       # again, under the write lock: another
        problem = _problem(conn, cache, state)     # process may have repaired it meanwhile
        damaged, said = _damaged(conn, cache, state, sample_size) if not problem.startswith(
            ("missing", "unregistered")) else ([], "")
        if not problem and not damaged:
            return dataclasses.replace(state, checked=sampled.checked)
        if problem.startswith("missing"):
            conn.execute("DELETE FROM vector_tables WHERE model_version = ?",
                         (cache.model_version,))
        elif problem.startswith("unregistered"):
            conn.execute(f'DROP TABLE "{cache.table}"')   # layout unknown: rebuilt empty
        orphans = orphan_vectors(conn, cache.table)
        if orphans or damaged:               # rowids are never reused: orphans are garbage
            cache.delete(orphans + damaged)
        lost = missing_vectors(conn, cache.model_version, cache.table)
        if lost:
            ids = json.dumps(lost)
            conn.execute("DELETE FROM memory_embeddings WHERE model_version = ? AND rowid IN "
                         "(SELECT value FROM json_each(?))", (cache.model_version, ids))
            conn.execute("UPDATE memory_records SET embedding_status = 'pending' WHERE rowid IN "
                         "(SELECT value FROM json_each(?))", (ids,))
        cache.ensure()
    state = dataclasses.replace(measure_vectors(conn, cache), lost=len(lost),
                                problem=" and ".join(p for p in (problem, said) if p),
                                checked=sampled.checked)
    log.warning("memlab: %s", state.note(db_path(conn)))
    return state


def rebuild_store(path: str | Path, *, config: Any, embedder: Any) -> RebuildReport:
    """Open the store at ``path`` and rebuild ``embedder``'s vector table (``memlab store
    rebuild``). The store is opened with ``store.read_index = "sqlite-vec"`` and
    ``store.vector_sample = 0`` so that the table being rebuilt is never read at open (a damaged
    one could not be); the rebuild checks every vector itself before replacing the table."""
    from .facade import Store   # the facade checks the vector table at open: imports this module

    cfg = config.replace(**{"store.read_index": "sqlite-vec", "store.vector_sample": 0})
    with Store.open(path, config=cfg, embedder=embedder) as store:
        return store.rebuild(embedder)

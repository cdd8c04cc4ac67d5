"""What the status view and the HTTP API read (familiars §5.11): counts of memories by a column,
pending embeddings, jobs by state, usage and recall-log events by kind, and pages of an owner's
memories (``GET /api/memory``). Read only; every SQL statement of those views is here."""

from __future__ import annotations

from numbers import Integral
from typing import Any

from memlab.errors import InvalidInput

from .connect import Connection

#: the memory_records columns memories are counted by (a fixed list: names go into the SQL)
COUNTED_COLUMNS = ("scope", "category", "retention_layer", "cognitive_layer", "lifecycle_state",
                   "deprecated", "pinned", "embedding_status", "agent_id")
#: how a NULL of a counted column is shown (a Reverie memory has no Familiars scope or category)
NONE = "(none)"
#: SQLite's INTEGER range: the one bound on an integer handed to SQL from a request (a page's
#: limit and offset here; the HTTP API bounds every integer of a request by it, memlab.serve)
INT_MIN, INT_MAX = -2**63, 2**63 - 1


def by_column(conn: Connection, column: str) -> dict[str, int]:
    """{value: memories} over every memory (NULL as ``(none)``; booleans as 'true'/'false')."""
    if column not in COUNTED_COLUMNS:
        raise ValueError(f"not a counted column: {column!r}")
    out = {}
    for value, n in conn.execute(f"SELECT {column}, count(*) FROM memory_records "
                                 f"GROUP BY {column} ORDER BY {column}"):
        if column in ("deprecated", "pinned"):
            value = "true" if value else "false"
        out[NONE if value is None else str(value)] = int(n)
    return out


def total(conn: Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM memory_records").fetchone()[0])


def pending(conn: Connection, model_version: str | None) -> int:
    """Memories with no vector for ``model_version`` yet (not those it gives none); without a
    version, the memories whose embedding_status is 'pending'."""
    if model_version is None:
        return int(conn.execute("SELECT count(*) FROM memory_records WHERE embedding_status = "
                                "'pending'").fetchone()[0])
    return int(conn.execute(
        "SELECT count(*) FROM memory_records r WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings "
        "e WHERE e.rowid = r.rowid AND e.model_version = ?) AND NOT (r.embedding_status = 'none' "
        "AND r.embedding_model_version = ?)", (model_version, model_version)).fetchone()[0])


def jobs_by_state(conn: Connection) -> dict[str, int]:
    return {s: int(n) for s, n in conn.execute(
        "SELECT state, count(*) FROM memory_jobs GROUP BY state ORDER BY state")}


def usage_by_kind(conn: Connection) -> dict[str, dict[str, float]]:
    """{kind: {"events": n, "weight": total weight}} of memory_usage_events."""
    return {k: {"events": int(n), "weight": float(w or 0.0)} for k, n, w in conn.execute(
        "SELECT kind, count(*), sum(weight) FROM memory_usage_events GROUP BY kind ORDER BY kind")}


def recall_events_by_kind(conn: Connection) -> dict[str, dict[str, int]]:
    """{kind: {"events": n, "resolved": n}} of memory_recall_events (the recall audit log)."""
    return {k: {"events": int(n), "resolved": int(r)} for k, n, r in conn.execute(
        "SELECT kind, count(*), count(resolved_at) FROM memory_recall_events GROUP BY kind "
        "ORDER BY kind")}


def list_rowids(conn: Connection, *, agent_id: str, user_id: str, scope: str | None = None,
                category: str | None = None, q: str | None = None, include_deprecated: bool = True,
                limit: int, offset: int) -> tuple[int, list[int]]:
    """One page of an owner's memories, newest first (time, then rowid): (how many match in
    all, the page's rowids). ``q``: the text contains it (case-insensitive for ASCII, as SQLite's
    ``like``; the exact characters otherwise); ``scope``/``category``: equal."""
    where, args = ["agent_id = ?", "user_id = ?"], [agent_id, user_id]
    for col, value in (("scope", scope), ("category", category)):
        if value is not None:
            where.append(f"{col} = ?")
            args.append(value)
    if q:
        where.append("instr(lower(text), lower(?)) > 0")
        args.append(q)
    if not include_deprecated:
        where.append("deprecated = 0")
    limit = _check_count(limit, "limit", 1)
    offset = _check_count(offset, "offset", 0)
    sql = " AND ".join(where)
    n = int(conn.execute(f"SELECT count(*) FROM memory_records WHERE {sql}", args).fetchone()[0])
    rows = [r[0] for r in conn.execute(
        f"SELECT rowid FROM memory_records WHERE {sql} ORDER BY timestamp DESC, rowid DESC "
        "LIMIT ? OFFSET ?", args + [limit, offset])]
    return n, rows


def _check_count(value: Any, field: str, low: int) -> int:
    """A whole number in [low, INT_MAX] (bool and floats refused), as an int; InvalidInput
    naming ``field`` otherwise (an integer too long to print is shown by its size)."""
    if isinstance(value, bool) or not isinstance(value, Integral) or not low <= value <= INT_MAX:
        shown = f"an integer of {int(value).bit_length()} bits" \
            if isinstance(value, Integral) and abs(value) > 10**30 else value
        raise InvalidInput(field, f"must be a whole number in [{low}, {INT_MAX}] (SQLite's "
                           "INTEGER range)", shown)
    return int(value)

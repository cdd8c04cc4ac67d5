"""The recall audit log: ``memory_recall_events`` (schema v1, ``kind``/``resolved_at`` since v4).

Fuzzy recall (Reverie §9.2) writes one row per misremembered entity (kind ``fuzzy_swap``): who
(agent, user), the query, when, the recalled memory ids and, in ``meta``, the swapped memory, the
true and the projected entity; a user's correction marks its swaps resolved. Every SQL statement
of the log is here.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from memlab.errors import InvalidInput

from .connect import Connection, transaction

FUZZY_SWAP = "fuzzy_swap"
_COLS = "id, agent_id, user_id, query, at, memory_ids_json, kind, meta_json, resolved_at"


@dataclass(frozen=True)
class RecallEvent:
    """One row of ``memory_recall_events``."""

    id: int
    agent_id: str
    user_id: str
    query: str
    at: float
    memory_ids: tuple[str, ...]
    kind: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    resolved_at: float | None = None


def _event(row: tuple) -> RecallEvent:
    return RecallEvent(id=row[0], agent_id=row[1], user_id=row[2], query=row[3], at=row[4],
                       memory_ids=tuple(json.loads(row[5])), kind=row[6],
                       meta=json.loads(row[7]), resolved_at=row[8])


def _time(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(name, "must be a finite number (Unix seconds)", value)
    return float(value)


class RecallEvents:
    """Read and write the recall audit log of one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def log(self, *, kind: str, agent_id: str, user_id: str, query: str, at: float,
            memory_ids: Sequence[str], metas: Sequence[Mapping[str, Any]]) -> list[int]:
        """One row per ``metas`` entry (same owner, query, time and recalled ids), in one
        transaction; returns their ids."""
        at = _time(at, "at")
        ids_json = json.dumps(list(memory_ids), ensure_ascii=False)
        out = []
        with transaction(self.conn):
            for meta in metas:
                cur = self.conn.execute(
                    "INSERT INTO memory_recall_events (agent_id, user_id, query, at, "
                    "memory_ids_json, kind, meta_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (agent_id, user_id, query, at, ids_json, kind,
                     json.dumps(dict(meta), ensure_ascii=False, sort_keys=True)))
                out.append(int(cur.lastrowid))
        return out

    def recent(self, *, kind: str, agent_id: str, user_id: str, since: float,
               unresolved: bool = True, limit: int = 100) -> list[RecallEvent]:
        """Events of one owner and kind at or after ``since``, newest first (ties: last logged
        first); only unresolved ones unless ``unresolved`` is False."""
        sql = (f"SELECT {_COLS} FROM memory_recall_events WHERE agent_id = ? AND user_id = ? "
               "AND kind = ? AND at >= ?" + (" AND resolved_at IS NULL" if unresolved else "")
               + " ORDER BY at DESC, id DESC LIMIT ?")
        return [_event(r) for r in self.conn.execute(
            sql, (agent_id, user_id, kind, _time(since, "since"), int(limit)))]

    def get(self, ids: Sequence[int]) -> list[RecallEvent]:
        """Events by id, in id order (unknown ids are left out)."""
        return [_event(r) for r in self.conn.execute(
            f"SELECT {_COLS} FROM memory_recall_events WHERE id IN (SELECT value FROM "
            "json_each(?)) ORDER BY id", (json.dumps([int(i) for i in ids]),))]

    def resolve(self, ids: Sequence[int], *, at: float, note: Mapping[str, Any]) -> int:
        """Mark unresolved events resolved at ``at``, merging ``note`` into their meta (inside
        the caller's transaction, if any). Returns how many were resolved."""
        at = _time(at, "at")
        with transaction(self.conn):
            cur = self.conn.execute(
                "UPDATE memory_recall_events SET resolved_at = ?, meta_json = json_patch("
                "meta_json, ?) WHERE resolved_at IS NULL AND id IN (SELECT value FROM "
                "json_each(?))", (at, json.dumps(dict(note), ensure_ascii=False),
                                  json.dumps([int(i) for i in ids])))
        return int(cur.rowcount)

    def resolved_memory_ids(self, *, kind: str, agent_id: str, user_id: str) -> set[str]:
        """``meta.memory_id`` of the owner's resolved events of this kind."""
        return {r[0] for r in self.conn.execute(
            "SELECT DISTINCT json_extract(meta_json, '$.memory_id') FROM memory_recall_events "
            "WHERE agent_id = ? AND user_id = ? AND kind = ? AND resolved_at IS NOT NULL",
            (agent_id, user_id, kind)) if r[0] is not None}

    def counts(self, *, kind: str) -> list[tuple[str, str, int, int]]:
        """(agent_id, user_id, events, resolved events) of this kind, per owner."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT agent_id, user_id, count(*), count(resolved_at) FROM memory_recall_events "
            "WHERE kind = ? GROUP BY agent_id, user_id ORDER BY agent_id, user_id", (kind,))]

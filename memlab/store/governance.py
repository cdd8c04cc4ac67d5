"""The SQL of lifecycle governance (Reverie §6.1, §11.3): fact revisions, pins, usage signals,
contradictions (schema version 4). The rules live in ``memlab/write/facts.py``, ``pins.py`` and
``feedback.py``; this module only reads and writes rows, inside the caller's transaction where it
writes (every write below runs in :func:`~memlab.store.connect.transaction`, which nests).

Records themselves change through :meth:`Repository.update_fields`, which keeps the lexical
index, the entity links, the vector metadata and the change log of the in-process MemoryIndex in
step (a superseded memory leaves every recall route in the same transaction).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

from memlab.errors import InvalidInput

from .connect import Connection, transaction

#: usage-event kinds (memory_usage_events.kind): automatic ones count against the daily cap
AUTOMATIC_KINDS = ("injected", "used")
EXPLICIT_KINDS = ("confirmed", "rejected")


@dataclass(frozen=True, slots=True)
class Head:
    """An active memory holding a fact key (a candidate for supersession)."""

    rowid: int
    id: str
    fact_revision: int
    timestamp: float
    pinned: bool
    mention_count: int


@dataclass(frozen=True, slots=True)
class ContradictionRow:
    """One recorded contradiction (``memory_contradictions``)."""

    id: int
    agent_id: str
    user_id: str
    fact_key: str
    memory_ids: tuple[str, ...]
    values: tuple[str, ...]
    found_at: float
    resolved_at: float | None
    resolution: str


class Governance:
    """Governance reads and writes of one store connection (schema version >= 4)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    # -- facts -----------------------------------------------------------------------------------
    def active_heads(self, agent_id: str, user_id: str, fact_key: str, *, permanent: bool
                     ) -> list[Head]:
        """Active memories of the owner holding ``fact_key``, in the permanent layer or out of
        it, newest revision first (then newest write)."""
        rows = self.conn.execute(
            "SELECT rowid, id, fact_revision, timestamp, pinned, mention_count FROM memory_records "
            "WHERE agent_id = ? AND user_id = ? AND fact_key = ? AND lifecycle_state = 'active' "
            "AND (retention_layer = 'permanent') = ? "
            "ORDER BY fact_revision DESC, timestamp DESC, rowid DESC",
            (agent_id, user_id, fact_key, int(permanent))).fetchall()
        return [Head(r[0], r[1], r[2], r[3], bool(r[4]), r[5]) for r in rows]

    def successors(self, memory_id: str) -> list[str]:
        """Ids of the memories that name ``memory_id`` in ``supersedes``, oldest first."""
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM memory_records WHERE supersedes = ? ORDER BY timestamp, rowid",
            (memory_id,))]

    def predecessor(self, memory_id: str) -> str | None:
        row = self.conn.execute("SELECT supersedes FROM memory_records WHERE id = ?",
                                (memory_id,)).fetchone()
        return None if row is None else row[0]

    def shared_fact_keys(self, agent_id: str, user_id: str) -> list[tuple[str, list[int]]]:
        """(fact key, rowids) of the owner's keys held by two or more active memories."""
        rows = self.conn.execute(
            "SELECT fact_key, json_group_array(rowid) FROM memory_records WHERE agent_id = ? AND "
            "user_id = ? AND fact_key != '' AND lifecycle_state = 'active' GROUP BY fact_key "
            "HAVING count(*) > 1 ORDER BY fact_key", (agent_id, user_id)).fetchall()
        return [(k, sorted(json.loads(r))) for k, r in rows]

    def fact_owners(self) -> list[tuple[str, str]]:
        """(agent_id, user_id) of every owner with an active memory holding a fact key."""
        return [(a, u) for a, u in self.conn.execute(
            "SELECT DISTINCT agent_id, user_id FROM memory_records WHERE fact_key != '' AND "
            "lifecycle_state = 'active' ORDER BY agent_id, user_id")]

    # -- pins ------------------------------------------------------------------------------------
    def pinned_count(self, agent_id: str, user_id: str) -> int:
        return int(self.conn.execute(
            "SELECT count(*) FROM memory_records WHERE agent_id = ? AND user_id = ? AND pinned = 1",
            (agent_id, user_id)).fetchone()[0])

    # -- usage -----------------------------------------------------------------------------------
    def automatic_counted(self, memory_id: str, start: float, end: float) -> int:
        """Automatic usage signals of a memory counted (weight > 0) in ``[start, end)``."""
        return int(self.conn.execute(
            "SELECT count(*) FROM memory_usage_events WHERE memory_id = ? AND at >= ? AND at < ? "
            "AND weight > 0 AND kind IN (SELECT value FROM json_each(?))",
            (memory_id, start, end, json.dumps(AUTOMATIC_KINDS))).fetchone()[0])

    def log_events(self, events: Sequence[tuple[str, str, float, float, dict]]) -> None:
        """Insert (memory_id, kind, weight, at, meta) rows into memory_usage_events."""
        with transaction(self.conn):
            self.conn.executemany(
                "INSERT INTO memory_usage_events (memory_id, kind, weight, at, meta_json) "
                "VALUES (?, ?, ?, ?, ?)",
                [(m, k, float(w), float(a), json.dumps(meta, ensure_ascii=False, sort_keys=True))
                 for m, k, w, a, meta in events])

    def usage_total(self, rowid: int) -> tuple[float, int]:
        """(usage weight received, whole references credited) of a memory; (0, 0) before any."""
        row = self.conn.execute("SELECT weight, credited FROM memory_usage_totals WHERE row = ?",
                                (int(rowid),)).fetchone()
        return (0.0, 0) if row is None else (float(row[0]), int(row[1]))

    def credit(self, rowid: int, *, weight: float, credited: int, add_access: int,
               now: float) -> None:
        """Store the new totals; ``access_count += add_access`` and last_accessed moves to
        ``now`` (never back) — the reinforcement columns §9.1 reads."""
        if add_access < 0:
            raise InvalidInput("add_access", "must be >= 0", add_access)
        with transaction(self.conn):
            self.conn.execute(
                "INSERT INTO memory_usage_totals (row, weight, credited) VALUES (?, ?, ?) "
                "ON CONFLICT (row) DO UPDATE SET weight = excluded.weight, "
                "credited = excluded.credited", (int(rowid), float(weight), int(credited)))
            self.conn.execute(
                "UPDATE memory_records SET access_count = access_count + ?, last_accessed = "
                "max(coalesce(last_accessed, ?), ?) WHERE rowid = ?",
                (int(add_access), float(now), float(now), int(rowid)))

    # -- contradictions --------------------------------------------------------------------------
    def record_contradiction(self, agent_id: str, user_id: str, fact_key: str,
                             memory_ids: Sequence[str], values: Sequence[str], *, at: float
                             ) -> tuple[int, bool]:
        """(id, True if new) of the contradiction between these memories (ids sorted): recorded
        once, however often it is found."""
        ids = json.dumps(sorted(memory_ids), ensure_ascii=False)
        with transaction(self.conn):
            cur = self.conn.execute(
                "INSERT OR IGNORE INTO memory_contradictions (agent_id, user_id, fact_key, "
                "memory_ids_json, values_json, found_at) VALUES (?, ?, ?, ?, ?, ?)",
                (agent_id, user_id, fact_key, ids, json.dumps(list(values), ensure_ascii=False),
                 float(at)))
            new = cur.rowcount == 1
            row = self.conn.execute(
                "SELECT id FROM memory_contradictions WHERE agent_id = ? AND user_id = ? AND "
                "fact_key = ? AND memory_ids_json = ?", (agent_id, user_id, fact_key, ids)
            ).fetchone()
        return int(row[0]), new

    def contradictions(self, agent_id: str | None, user_id: str | None, *, open_only: bool
                       ) -> list[ContradictionRow]:
        sql = "SELECT * FROM memory_contradictions WHERE 1"
        args: list = []
        for col, v in (("agent_id", agent_id), ("user_id", user_id)):
            if v is not None:
                sql, args = sql + f" AND {col} = ?", args + [v]
        if open_only:
            sql += " AND resolved_at IS NULL"
        return [ContradictionRow(r[0], r[1], r[2], r[3], tuple(json.loads(r[4])),
                                 tuple(json.loads(r[5])), r[6], r[7], r[8])
                for r in self.conn.execute(sql + " ORDER BY id", args)]

    def resolve_contradiction(self, contradiction_id: int, *, at: float, resolution: str) -> None:
        with transaction(self.conn):
            cur = self.conn.execute(
                "UPDATE memory_contradictions SET resolved_at = ?, resolution = ? WHERE id = ? "
                "AND resolved_at IS NULL", (float(at), resolution, int(contradiction_id)))
            if cur.rowcount != 1:
                raise InvalidInput("contradiction_id", "no open contradiction with this id",
                                   contradiction_id)


__all__ = ["AUTOMATIC_KINDS", "EXPLICIT_KINDS", "ContradictionRow", "Governance", "Head"]

"""The ``memory_audit`` table: what the safety checks refused (Reverie §12), one row per refusal.

A row: ``at`` (Unix seconds, the caller's clock), ``agent_id``, ``user_id``, ``action``
(:data:`AUDIT_ACTIONS`: ``refused_write`` — a write refused as a hijack, nothing of it stored;
``recall_skipped`` — the injection guard kept recall from running for a user message), ``rule``
(the safety rule's name), ``field`` (the refused field, e.g. ``items[0].text``; empty for a user
message), ``pattern`` (the configured pattern that matched) and ``excerpt`` (the normalised text
around the match, at most ``safety.audit_excerpt_chars`` characters). Each row is written in its
own transaction: the refused write itself never is.
"""

from __future__ import annotations

import logging
from typing import Any

from memlab.errors import InvalidInput, StoreError

from .connect import Connection, transaction

AUDIT_ACTIONS = ("refused_write", "recall_skipped")
COLUMNS = ("id", "at", "agent_id", "user_id", "action", "rule", "field", "pattern", "excerpt")

#: schema of the table (a migration of memlab.store.migrations)
AUDIT_TABLE_SQL: tuple[str, ...] = (
    """CREATE TABLE memory_audit (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        action TEXT NOT NULL,
        rule TEXT NOT NULL,
        field TEXT NOT NULL DEFAULT '',
        pattern TEXT NOT NULL DEFAULT '',
        excerpt TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX memory_audit_owner ON memory_audit (agent_id, user_id, at)",
)


class AuditLog:
    """Reads and appends ``memory_audit`` rows of one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def record(self, *, at: float, agent_id: str, user_id: str, action: str, rule: str,
               field: str = "", pattern: str = "", excerpt: str = "") -> int:
        """Append one row in its own transaction; returns its id."""
        if action not in AUDIT_ACTIONS:
            raise InvalidInput("action", f"one of {AUDIT_ACTIONS}", action)
        with transaction(self.conn):
            cur = self.conn.execute(
                "INSERT INTO memory_audit (at, agent_id, user_id, action, rule, field, pattern, "
                "excerpt) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (float(at), agent_id, user_id, action, rule, field, pattern, excerpt))
            return int(cur.lastrowid)

    def rows(self, *, agent_id: str | None = None, user_id: str | None = None
             ) -> list[dict[str, Any]]:
        """The rows of one agent and user (None: every one), oldest first."""
        where, args = [], []
        for name, value in (("agent_id", agent_id), ("user_id", user_id)):
            if value is not None:
                where.append(f"{name} = ?")
                args.append(value)
        sql = f"SELECT {', '.join(COLUMNS)} FROM memory_audit" + (
            f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id"
        return [dict(zip(COLUMNS, r)) for r in self.conn.execute(sql, args)]


def record_refusal(audit: Any, *, degraded: Any, at: float, agent_id: str, user_id: str,
                   action: str, **row: str) -> None:
    """Record a refusal in ``audit`` (an :class:`AuditLog`); a store that cannot write it is a
    documented degradation (``degraded(what)``: logged once, counted): the refusal itself still
    stands."""
    try:
        audit.record(at=at, agent_id=agent_id, user_id=user_id, action=action, **row)
    except StoreError as exc:
        degraded(f"audit row not written ({type(exc).__name__})")
        logging.getLogger("memlab").debug("memlab: audit row not written: %s", exc)

"""Every record of a store, in rowid order and in batches (the workspace export, consolidation).

A read-only scan: one query per batch, ``rowid > last`` (keyset paging), so a large store is never
held in memory at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from memlab.errors import InvalidInput
from memlab.types import MemoryRecord

from .connect import Connection
from .records import COLUMNS, from_row


def iter_records(conn: Connection, *, agent_id: str | None = None, user_id: str | None = None,
                 scoped_only: bool = False, batch: int = 1000) -> Iterator[MemoryRecord]:
    """Records of the store (every lifecycle state, deprecated ones too), oldest rowid first.

    ``agent_id`` / ``user_id``: only that owner's (None: every one); ``scoped_only``: only the
    records in a Familiars cell (scope not null)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InvalidInput("batch", "must be an integer >= 1", batch)
    where, args = ["rowid > ?"], []
    for col, v in (("agent_id", agent_id), ("user_id", user_id)):
        if v is not None:
            where.append(f"{col} = ?")
            args.append(v)
    if scoped_only:
        where.append("scope IS NOT NULL")
    sql = (f"SELECT rowid, {', '.join(COLUMNS)} FROM memory_records WHERE {' AND '.join(where)} "
           "ORDER BY rowid LIMIT ?")
    last = 0
    while True:
        rows = conn.execute(sql, [last, *args, batch]).fetchall()
        for r in rows:
            yield from_row(r)
        if len(rows) < batch:
            return
        last = rows[-1][0]


def records_by_id(conn: Connection, ids: list[str]) -> list[MemoryRecord]:
    """The stored records among ``ids`` (in rowid order; unknown ids are left out)."""
    if not ids:
        return []
    return [from_row(r) for r in conn.execute(
        f"SELECT rowid, {', '.join(COLUMNS)} FROM memory_records WHERE id IN "
        "(SELECT value FROM json_each(?)) ORDER BY rowid", (json.dumps(list(ids)),))]

"""Helpers of the safety tests."""

from __future__ import annotations


def rows(st) -> list:
    """Every row of every table of store ``st`` but memory_audit and the vec0 tables: what a
    refusal must not change."""
    conn = st._store.conn
    out = []
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT "
                                "LIKE 'CREATE VIRTUAL%' AND name != 'memory_audit' ORDER BY name"):
        out.append((name, sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))))
    return out

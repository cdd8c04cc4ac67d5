"""Read snapshots: several reads of one connection that all see one committed state of the store.

SQLite runs each statement outside a transaction in its own implicit read transaction, so two
consecutive reads can straddle another process's commit: recall's routes and its in-process indexes
would then describe two different stores (a rowid found by one route, unknown to the next). A read
transaction (``BEGIN`` ... ``COMMIT``) pins one state: in WAL mode it reads the last commit as of
its first statement and ignores later commits by other connections (writers go on writing; the
snapshot only holds back the checkpoint of the frames committed after it); in rollback-journal
mode it holds a shared lock, so writers wait (up to their busy timeout) until it ends.

A read snapshot is also *read-only*: ``PRAGMA query_only`` is on while it lasts, so a write started
inside it fails (``attempt to write a readonly database``) instead of silently joining it. That is
what tells it apart from a write transaction (:func:`memlab.store.connect.transaction`, ``BEGIN
IMMEDIATE``), whose uncommitted writes could still roll back: :func:`in_write_transaction`. An
in-process index may be brought up to date inside a read snapshot (it sees only committed data),
never inside a write transaction.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .connect import Connection


def _query_only(conn: Connection) -> bool:
    return bool(conn.execute("PRAGMA query_only").fetchone()[0])


def in_read_snapshot(conn: Connection) -> bool:
    """True inside :func:`read_snapshot` (an open, read-only transaction)."""
    return bool(conn.in_transaction) and _query_only(conn)


def in_write_transaction(conn: Connection) -> bool:
    """True inside a transaction that may hold uncommitted writes (anything but a read snapshot)."""
    return bool(conn.in_transaction) and not _query_only(conn)


@contextmanager
def read_snapshot(conn: Connection) -> Iterator[Connection]:
    """Every read of ``conn`` inside sees one committed state (one read transaction).

    Re-entrant: inside an open transaction (a read snapshot, or the caller's write transaction,
    whose reads are already one state plus its own writes) it opens nothing and changes nothing.
    """
    if conn.in_transaction:
        yield conn
        return
    conn.execute("PRAGMA query_only = 1")
    try:
        conn.execute("BEGIN DEFERRED")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")   # read-only: ends the snapshot, writes nothing
    finally:
        conn.execute("PRAGMA query_only = 0")


__all__ = ["in_read_snapshot", "in_write_transaction", "read_snapshot"]

"""Opening the SQLite truth source: driver choice, sqlite-vec, pragmas, corruption check, transactions.

Python builds often lack ``enable_load_extension``; :func:`driver` returns the standard ``sqlite3``
module where its connections can load extensions and ``sqlean`` (the sqlean-py package, a drop-in
``sqlite3`` with extension loading) otherwise. Connections are opened with ``isolation_level=None``:
transactions are explicit (:func:`transaction`), never implicit.

Opening checks the file before anything can write to it: a file that is not a SQLite database (bad
header, random bytes, truncated) raises :class:`~memlab.errors.CorruptStore` naming the path and what
failed, and the file is left byte-identical (the journal mode, which writes the header, is set only
after the checks pass).
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from memlab.errors import CorruptStore, StoreError

_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100
_SAVEPOINT = "memlab_nested"

Connection = Any  # a DB-API connection of the module :func:`driver` returns


def driver() -> ModuleType:
    """The ``sqlite3``-compatible module whose connections can load extensions."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        import sqlean
    except ImportError as exc:  # pragma: no cover - sqlean-py is a dependency
        raise StoreError("this Python's sqlite3 cannot load extensions and the sqlean-py package "
                         "(a sqlite3 that can) is not installed: pip install sqlean-py") from exc
    return sqlean


def db_errors() -> tuple[type[BaseException], ...]:
    """The driver's error base class (sqlite3.Error or sqlean.Error), for ``except`` clauses."""
    return (driver().Error,)


def _check_header(path: Path) -> None:
    """Raise CorruptStore when a non-empty file does not start like a SQLite database."""
    size = path.stat().st_size
    if size == 0:
        return  # an empty file is a valid, empty database
    with path.open("rb") as fh:
        head = fh.read(_HEADER_BYTES)
    if len(head) < _HEADER_BYTES or not head.startswith(_MAGIC):
        raise CorruptStore(f"{path}: not a SQLite database: the header does not start with "
                           f"'SQLite format 3' (file of {size} bytes)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise CorruptStore(f"{path}: not a SQLite database: header page size {page_size} is not a "
                           f"power of two in [512, 65536]")
    n_pages = int.from_bytes(head[28:32], "big")
    valid = head[92:96] == head[24:28]  # the in-header size is trusted only when current
    if valid and n_pages and size < n_pages * page_size and not path.with_name(path.name + "-wal").exists():
        raise CorruptStore(f"{path}: truncated: the header counts {n_pages} pages of {page_size} "
                           f"bytes ({n_pages * page_size} bytes) but the file has {size}")


def _load_vec(conn: Connection, path: str) -> None:
    try:
        import sqlite_vec
    except ImportError as exc:  # pragma: no cover - sqlite-vec is a dependency
        raise StoreError("the sqlite-vec package is not installed: pip install sqlite-vec") from exc
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
    except db_errors() as exc:
        raise StoreError(f"{path}: cannot load the sqlite-vec extension: {exc}") from exc


def _set_journal_mode(conn: Connection, name: str, journal_mode: str, busy_timeout_ms: int
                      ) -> None:
    """Switch the database to ``journal_mode`` (nothing to do when it is in it already).

    Several processes opening a brand-new store at once all try to switch it to WAL. The switch
    upgrades the pragma's own read lock to a write lock, and SQLite answers "database is locked"
    at once, without waiting (its busy handler is skipped when a read lock is held), to the
    processes that lose. A loser waits for the winner's lock as a writer would (``BEGIN
    IMMEDIATE``: the busy timeout applies), then looks again: the winner has switched the file,
    or the loser tries again. It gives up after ``busy_timeout_ms`` like any other wait for a lock.
    """
    mod = driver()
    deadline = time.monotonic() + busy_timeout_ms / 1000.0
    while True:
        got = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
        if got == journal_mode:
            return
        try:
            got = str(conn.execute(f"PRAGMA journal_mode = {journal_mode}").fetchone()[0]).lower()
        except (mod.OperationalError, StoreError) as exc:
            if "locked" in str(exc) and time.monotonic() < deadline:
                try:
                    conn.execute("BEGIN IMMEDIATE")   # waits (busy timeout) for the lock holder
                    conn.execute("ROLLBACK")
                    continue
                except (mod.OperationalError, StoreError) as wait_exc:
                    exc = wait_exc
            raise StoreError(f"{name}: cannot switch to journal_mode {journal_mode!r} "
                             f"(busy_timeout_ms={busy_timeout_ms}): {exc}") from exc
        if got != journal_mode:
            raise StoreError(f"{name}: journal_mode {journal_mode!r} refused (SQLite kept "
                             f"{got!r})")
        return


def connect(path: str | Path, *, busy_timeout_ms: int, journal_mode: str = "wal",
            quick_check: bool = False, cache_size_kib: int = 65_536, synchronous: str = "normal",
            load_vec: bool = True) -> Connection:
    """Open (creating if absent) a memlab SQLite database and return its connection.

    Args:
        path: a file path, or ``":memory:"``.
        busy_timeout_ms: how long a writer waits for another process's lock before failing.
        journal_mode: ``"wal"`` (readers read while one process writes) or ``"delete"``. In-memory
            databases keep SQLite's ``memory`` journal.
        quick_check: also run ``PRAGMA quick_check`` on open. Off by default: it reads every
            page (about 2 s for a 750 MB store of 100k memories with 384-d vectors); the header
            (magic, page size, size against the page count) and ``sqlite_master`` are always
            checked, which catches non-databases, foreign files and truncation.
        cache_size_kib: SQLite page cache per connection (KiB); bulk adds into the term index need
            more than SQLite's 2 MiB default.
        synchronous: ``"normal"`` (WAL: atomic and consistent after a crash; the last commits can
            be lost on power failure) or ``"full"``.
        load_vec: load the sqlite-vec extension (needed for the vector cache).

    Raises:
        CorruptStore: the file is not a readable SQLite database (the file is left unchanged).
        StoreError: sqlite-vec cannot be loaded, or a pragma is refused.
    """
    if journal_mode not in ("wal", "delete"):
        raise StoreError(f"journal_mode: must be 'wal' or 'delete' (got {journal_mode!r})")
    if synchronous not in ("normal", "full"):
        raise StoreError(f"synchronous: must be 'normal' or 'full' (got {synchronous!r})")
    mod = driver()
    name = str(path)
    memory = name == ":memory:" or name.startswith("file::memory:")
    if not memory:
        p = Path(name)
        if p.is_dir():
            raise StoreError(f"{p}: is a folder, not a database file")
        if p.exists():
            _check_header(p)
    try:
        conn = mod.connect(name, isolation_level=None, check_same_thread=False)
    except mod.Error as exc:
        raise StoreError(f"{name}: cannot open: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            if quick_check:
                rows = conn.execute("PRAGMA quick_check").fetchall()
                if rows != [("ok",)]:
                    detail = "; ".join(str(r[0]) for r in rows[:5])
                    raise CorruptStore(f"{name}: PRAGMA quick_check failed: {detail}")
        except mod.DatabaseError as exc:
            if isinstance(exc, mod.OperationalError) and "locked" in str(exc):
                raise StoreError(f"{name}: database is locked (busy_timeout_ms="
                                 f"{busy_timeout_ms}): {exc}") from exc
            raise CorruptStore(f"{name}: cannot read the schema (sqlite_master): {exc}") from exc
        if load_vec:
            _load_vec(conn, name)
        conn.execute(f"PRAGMA cache_size = {-int(cache_size_kib)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if not memory:
            _set_journal_mode(conn, name, journal_mode, busy_timeout_ms)
            conn.execute(f"PRAGMA synchronous = {synchronous}")
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` on any exception, which is re-raised.

    Re-entrant: inside an open transaction it uses a SAVEPOINT, so a store method that writes in a
    transaction can be composed into a caller's larger one (all or nothing for the whole). A lock
    held by another process past the busy timeout raises :class:`StoreError`.
    """
    mod = driver()
    if conn.in_transaction:
        conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
            conn.execute(f"RELEASE {_SAVEPOINT}")
            raise
        conn.execute(f"RELEASE {_SAVEPOINT}")
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
    except mod.OperationalError as exc:
        raise StoreError(f"cannot start a write transaction: {exc}") from exc
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except mod.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StoreError(f"commit failed: {exc}") from exc

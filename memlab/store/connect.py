"""Opening the SQLite truth source: driver choice, sqlite-vec, pragmas, corruption check, transactions.

Python builds often lack ``enable_load_extension``; :func:`driver` returns the standard ``sqlite3``
module where its connections can load extensions and ``sqlean`` (the sqlean-py package, a drop-in
``sqlite3`` with extension loading) otherwise. Connections are opened with ``isolation_level=None``:
transactions are explicit (:func:`transaction`), never implicit.

Opening checks the file before anything can write to it: a file that is not a SQLite database (bad
header, random bytes, truncated) raises :class:`~memlab.errors.CorruptStore` naming the path and what
failed, and the file is left byte-identical (the journal mode, which writes the header, is set only
after the checks pass).

Driver errors never leave the store: the connections :func:`connect` returns (and their cursors)
turn every error of the driver, on any statement or fetch, into memlab's own (:func:`store_error`,
the one place that maps them): damage SQLite (or sqlite-vec, or the UTF-8 decoder) reports becomes
:class:`~memlab.errors.CorruptStore` with the advice to run ``memlab store check PATH``; a refused
write :class:`~memlab.errors.ReadOnlyStore`, saying whether the file is read-only, immutable or
append-only (``chattr``, which root's privileges do not override) or on a read-only file system,
or its folder is read-only; a lock held past ``store.busy_timeout_ms``
:class:`~memlab.errors.StoreLocked`; anything else :class:`~memlab.errors.StoreError`. Each
names the store's path and the driver's message.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import stat
import struct
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator
from urllib.parse import quote

from memlab.errors import CorruptStore, ReadOnlyStore, StoreError, StoreLocked

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


# SQLite's primary result codes (https://sqlite.org/rescode.html) that store_error tells apart
_BUSY, _LOCKED, _READONLY, _IOERR, _CORRUPT, _FULL, _CANTOPEN, _CONSTRAINT, _NOTADB = \
    5, 6, 8, 10, 11, 13, 14, 19, 26
#: Damage reported with a generic code: sqlite-vec failing to read its own shadow tables, and
#: text that is not UTF-8 (memlab writes only valid UTF-8, so such bytes are damage).
_DAMAGE = re.compile(r"malformed|not a database|could not decode to utf-8|sqlite-vec error|"
                     r"could not fetch vector data|vectors blob|validity (blob|bitmap)|"
                     r"could not extract metadata value|could not find a row with rowid", re.I)


def store_error(exc: BaseException, conn: Any = None) -> StoreError:
    """memlab's error for a driver error ``exc`` raised on ``conn`` (the one place they are
    mapped): names the store's path and the driver's message, and says what to do."""
    path = str(getattr(conn, "memlab_path", None) or "the store")
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    cause = f"{exc}" + (f" [{exc.sqlite_errorname}]" if getattr(exc, "sqlite_errorname", None)
                        else "")
    if primary in (_CORRUPT, _NOTADB) or _DAMAGE.search(str(exc)):
        return CorruptStore(f"{path}: the store is damaged: {cause}. Nothing more was written; "
                            f"run `memlab store check {path}` to see what is damaged", path=path)
    if primary == _READONLY:
        return ReadOnlyStore(f"{path}: cannot write: {_read_only_reason(conn, path)} ({cause}); "
                             f"the store is unchanged", path=path)
    if primary in (_BUSY, _LOCKED) and "locked" in str(exc):
        return StoreLocked(locked_message(conn, exc), path=path)
    what = {_FULL: "the disk is full: free space, then retry",
            _CANTOPEN: "cannot open the file or its -wal/-shm files (missing folder or no access)",
            _IOERR: f"an I/O error reading or writing the file: run `memlab store check {path}`",
            _CONSTRAINT: "a write broke a rule of the schema and was rolled back",
            }.get(primary, "SQLite refused the statement")
    return StoreError(f"{path}: {what}: {cause}", path=path)


def _read_only_reason(conn: Any, path: str) -> str:
    """Why SQLite could not write: a read-only connection, file, folder or -wal/-shm file."""
    if getattr(conn, "memlab_read_only", False):
        return "it was opened read-only"
    p = Path(path)
    if p.exists() and (not os.access(p, os.W_OK) or any(_inode_flags(p))):
        return _unwritable(p, "the file")      # access() passes an append-only file
    side = [p.with_name(p.name + s) for s in ("-wal", "-shm")]
    if not os.access(p.parent, os.W_OK) and not all(f.exists() for f in side):
        return (f"its folder {p.parent} is not writable, and SQLite's WAL mode needs to create "
                f"{side[0].name} and {side[1].name} beside the file (even to read): make the "
                f"folder writable, or copy the store into a writable folder")
    locked = [f for f in side if f.exists() and not os.access(f, os.W_OK)]
    if locked:
        return "; ".join(_unwritable(f, f"{f.name} beside it") for f in locked)
    return ("SQLite refused to write (a read-only file system, or the file, its folder or its "
            "-wal/-shm files are read-only for this process)")


#: Linux inode flags (``FS_IOC_GETFLAGS``; ``chattr +i`` and ``chattr +a``), from linux/fs.h
_FS_IMMUTABLE_FL, _FS_APPEND_FL = 0x10, 0x20


def _inode_flags(p: Path) -> tuple[bool, bool]:
    """(immutable, append-only) as the file system says (False, False when it cannot say): Linux's
    ``FS_IOC_GETFLAGS`` ioctl, the BSDs' and macOS's ``st_flags``."""
    st_flags = getattr(os.stat(p), "st_flags", None)
    if st_flags is not None:
        return (bool(st_flags & (stat.UF_IMMUTABLE | stat.SF_IMMUTABLE)),
                bool(st_flags & (stat.UF_APPEND | stat.SF_APPEND)))
    try:
        import fcntl
    except ImportError:   # pragma: no cover - Windows
        return False, False
    size = struct.calcsize("l")
    request = (2 << 30) | (size << 16) | (ord("f") << 8) | 1     # _IOR('f', 1, long)
    buf = bytearray(size)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False, False
    try:
        fcntl.ioctl(fd, request, buf)
    except OSError:       # a file system without inode flags (ENOTTY), or no such ioctl
        return False, False
    finally:
        os.close(fd)
    flags = int.from_bytes(buf[:4], sys.byteorder)
    return bool(flags & _FS_IMMUTABLE_FL), bool(flags & _FS_APPEND_FL)


def _unwritable(p: Path, what: str) -> str:
    """Why this process may not write the file ``p`` (``what`` names it): an immutable or
    append-only attribute (which root's privileges do not override), a read-only file system, or
    its permissions; and what to do."""
    immutable, append = _inode_flags(p)
    if immutable:
        return (f"{what} is immutable (chattr +i; lsattr {p} shows 'i'): remove the attribute "
                f"(chattr -i {p}, as root) to write into it; chmod cannot")
    if append:
        return (f"{what} is append-only (chattr +a; lsattr {p} shows 'a'), which SQLite cannot "
                f"write: remove the attribute (chattr -a {p}, as root)")
    if hasattr(os, "statvfs") and os.statvfs(p).f_flag & os.ST_RDONLY:
        return f"{what} is on a read-only file system: copy the store to a writable one"
    return f"{what} is read-only: make it writable (chmod u+w {p}) to write into it"


#: The cursor calls that can raise a driver error (statements and fetches).
_CURSOR_CALLS = ("execute", "executemany", "fetchone", "fetchmany", "fetchall", "__next__")


@functools.cache
def _classes(mod: ModuleType) -> tuple[type, type]:
    """A Connection and a Cursor class of ``mod`` whose every statement and fetch maps the
    driver's errors through :func:`store_error`. (``Connection.execute`` and ``executemany`` go
    through ``cursor()``, so they are covered too.)"""

    def mapped(name: str) -> Any:
        call = getattr(mod.Cursor, name)

        def method(self: Any, *args: Any) -> Any:
            try:
                return call(self, *args)
            except mod.Error as exc:
                raise store_error(exc, self.connection) from exc

        method.__name__ = name
        return method

    cursor_cls = type("StoreCursor", (mod.Cursor,), {n: mapped(n) for n in _CURSOR_CALLS})

    class StoreConnection(mod.Connection):
        memlab_path: str = ""
        memlab_read_only: bool = False
        memlab_busy_timeout_ms: int | None = None

        def cursor(self, factory: Any = cursor_cls) -> Any:
            return super().cursor(factory)

    return StoreConnection, cursor_cls


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
            wal_autocheckpoint: int = 1000, load_vec: bool = True, read_only: bool = False,
            preflight: Callable[[Any], None] | None = None) -> Connection:
    """Open (creating if absent) a memlab SQLite database and return its connection.

    Args:
        path: a file path, or ``":memory:"``.
        busy_timeout_ms: how long a writer waits for another process's lock before failing.
        journal_mode: ``"wal"`` (readers read while one process writes) or ``"delete"``. In-memory
            databases keep SQLite's ``memory`` journal.
        quick_check: also run ``PRAGMA quick_check`` on open, before anything can write: a file
            whose pages SQLite finds damaged is refused (CorruptStore), unchanged. It reads every
            page (2.8 s for a 511 MB store of 100k memories with 384-d vectors on 2 cores:
            ``benchmarks/store_open.py``). Off in this function; :meth:`Store.open
            <memlab.store.facade.Store.open>` passes ``store.quick_check``, on by default. The
            header (magic, page size, size against the page count) and ``sqlite_master`` are
            always checked, which catches non-databases, foreign files and truncation.
        cache_size_kib: SQLite page cache per connection (KiB); bulk adds into the term index need
            more than SQLite's 2 MiB default.
        synchronous: ``"normal"`` (WAL: atomic and consistent after a crash; the last commits can
            be lost on power failure) or ``"full"``.
        wal_autocheckpoint: WAL pages after which a commit checkpoints (``PRAGMA
            wal_autocheckpoint``; SQLite's default 1000): how often the WAL is copied into the
            database file, not whether a commit is atomic or durable (that is the journal mode's
            and ``synchronous``'s).
        load_vec: load the sqlite-vec extension (needed for the vector cache).
        read_only: open with SQLite's ``mode=ro`` (an existing file only; the journal mode is left
            as it is): nothing can be written through this connection (``memlab store check``).
        preflight: called with the connection after the schema was read and before anything
            can write (the journal mode changes the file's header): raise to refuse the file
            (``migrations.check_openable`` refuses foreign and newer databases unchanged).

    Raises:
        CorruptStore: the file is not a readable SQLite database (the file is left unchanged).
        ReadOnlyStore: the file, its folder or its -wal/-shm files cannot be written.
        StoreLocked: another connection holds a lock past ``busy_timeout_ms``.
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
            raise StoreError(f"{p}: is a folder, not a database file", path=name)
        if p.exists():
            _check_header(p)
        elif read_only:
            raise StoreError(f"{p}: no such store file (opening read-only creates nothing)",
                             path=name)
    target, uri = name, False
    if read_only and not memory:
        target, uri = f"file:{quote(str(Path(name).resolve()))}?mode=ro", True
    factory = _classes(mod)[0]
    try:
        conn = mod.connect(target, isolation_level=None, check_same_thread=False, uri=uri,
                           factory=factory)
    except mod.Error as exc:
        raise StoreError(f"{name}: cannot open: {exc}", path=name) from exc
    conn.memlab_path, conn.memlab_read_only = name, bool(read_only)
    conn.memlab_busy_timeout_ms = int(busy_timeout_ms)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()   # the schema is readable
        if quick_check:
            try:
                rows = conn.execute("PRAGMA quick_check").fetchall()
            except CorruptStore as exc:          # a page the check itself cannot read
                rows = [(str(exc.__cause__ or exc),)]
            if rows != [("ok",)]:
                detail = "; ".join(str(r[0]) for r in rows[:5])
                raise CorruptStore(f"{name}: PRAGMA quick_check failed: {detail}. Run `memlab "
                                   f"store check {name}` to see what is damaged", path=name)
        if preflight is not None:
            preflight(conn)
        if load_vec:
            _load_vec(conn, name)
        conn.execute(f"PRAGMA cache_size = {-int(cache_size_kib)}")
        conn.execute("PRAGMA foreign_keys = ON")
        if not memory and not read_only:
            _set_journal_mode(conn, name, journal_mode, busy_timeout_ms)
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute(f"PRAGMA wal_autocheckpoint = {int(wal_autocheckpoint)}")
    except BaseException:
        conn.close()
        raise
    return conn


def db_path(conn: Connection) -> str:
    """The file of the connection's main database (``":memory:"`` for an in-memory one)."""
    if getattr(conn, "memlab_path", ""):
        return conn.memlab_path
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return file or ":memory:"
    return ":memory:"  # pragma: no cover - every connection has a main database


def locked_message(conn: Connection, exc: BaseException) -> str:
    """What a lock timeout means and what to do, naming the store and ``store.busy_timeout_ms``."""
    timeout = getattr(conn, "memlab_busy_timeout_ms", None)
    if timeout is None:
        timeout = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    return (f"{db_path(conn)}: another connection holds the store's write lock and it was not "
            f"released within store.busy_timeout_ms = {timeout} ms ({exc}); nothing was written: "
            f"retry later, stop the other writer, or raise store.busy_timeout_ms")


@contextmanager
def transaction(conn: Connection) -> Iterator[Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` on any exception, which is re-raised.

    Re-entrant: inside an open transaction it uses a SAVEPOINT, so a store method that writes in a
    transaction can be composed into a caller's larger one (all or nothing for the whole). A lock
    held by another process past the busy timeout raises :class:`StoreLocked`. When undoing
    fails too (a damaged file), the original error is raised with the failure as a note.
    """
    if conn.in_transaction:
        conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
            yield conn
        except BaseException as exc:
            _undo(conn, exc, f"ROLLBACK TO {_SAVEPOINT}", f"RELEASE {_SAVEPOINT}")
            raise
        conn.execute(f"RELEASE {_SAVEPOINT}")
        return
    conn.execute("BEGIN IMMEDIATE")     # a lock past the busy timeout: StoreLocked (store_error)
    try:
        yield conn
    except BaseException as exc:
        if conn.in_transaction:
            _undo(conn, exc, "ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except StoreError as exc:
        if conn.in_transaction:
            _undo(conn, exc, "ROLLBACK")
        raise


def _undo(conn: Connection, exc: BaseException, *statements: str) -> None:
    """Run the undo statements after ``exc``; if one fails, note it on ``exc`` (which the caller
    re-raises) instead of hiding ``exc`` behind it, and stop."""
    for sql in statements:
        try:
            conn.execute(sql)
        except StoreError as undo_exc:
            exc.add_note(f"memlab: then {sql} failed: {undo_exc}")
            return

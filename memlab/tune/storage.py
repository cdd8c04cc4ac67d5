"""Where a sweep's study lives: a journal file, or an Optuna RDB URL; each refusal a named error.

A journal file (``JournalStorage(JournalFileBackend(path))``) by default: several processes on
one machine append to it under an OS file lock (:class:`JournalLock`, ``fcntl.flock`` through the
``filelock`` library, ``<journal>.flock`` beside it). The kernel drops that lock when its holder
dies, so a worker killed while appending leaves no stale lock: the next open proceeds at once
(Optuna's own symlink lock, ``<journal>.lock``, outlived a SIGKILL and made the next open wait its
30 s grace period; a leftover one is ignored). Other Optuna tools that open the journal with their
own default lock (optuna-dashboard) do not exclude memlab's writers; they only read in practice.

Any Optuna RDB URL (anything with ``://``: ``sqlite:///...``, ``postgresql://...``) holds the
study in a database, so that workers on several machines join one study.

Refusals, each an :class:`~memlab.errors.InvalidInput` on ``storage`` naming the path (a URL
with its password hidden), the rule and what the system said, the file unchanged: a folder; a
folder that cannot be made; a file or folder memlab may not write (a sweep appends every trial);
a file that is not an Optuna journal (its first record must start ``{"op_code":``; a torn last
record is dropped only when it looks like one); an unknown URL scheme; a database driver not
installed; a database that cannot be opened.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from memlab.errors import InvalidInput

__all__ = ["open_storage", "check_storage", "repair_journal", "JournalLock", "RECORD_START"]

log = logging.getLogger(__name__)

#: how Optuna writes every journal record (``json.dumps`` of a dict whose first key is op_code)
RECORD_START = b'{"op_code":'

#: drivers to install for the URL schemes users ask for (the package SQLAlchemy imports)
DRIVERS = {"postgresql": "psycopg (pip install 'memlab[distributed]')",
           "mysql": "pymysql (and a mysql+pymysql:// URL)"}


def _optuna():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def open_storage(storage: str | Path):
    """A journal file path, or an Optuna RDB URL (anything with ``://``). InvalidInput on
    ``storage`` when it cannot hold a study (see the module's docstring)."""
    text = str(storage)
    if "://" in text:
        return _open_rdb(text)
    return _open_journal(Path(text))


def check_storage(storage: str | Path) -> None:
    """Refuse now what :func:`open_storage` would refuse (a sweep checks before its replay): a
    journal file is not created yet (its folders are); an RDB URL is opened."""
    text = str(storage)
    if "://" in text:
        _open_rdb(text)
    else:
        _check_journal_file(Path(text))


# -- RDB URLs --------------------------------------------------------------------------------------
def _shown(url: str) -> str:
    """The URL as a message may show it: its password hidden."""
    import sqlalchemy.exc as sa_exc
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (sa_exc.ArgumentError, ValueError):   # unparsable: its scheme only (a password?)
        return url.split("://", 1)[0] + "://..."


def _open_rdb(url: str):
    import sqlalchemy.exc as sa_exc
    from sqlalchemy.engine import make_url

    optuna = _optuna()
    shown = _shown(url)
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError as exc:
        raise InvalidInput("storage", f"not a database URL SQLAlchemy can read ({exc}); give a "
                           "journal file path or an RDB URL such as sqlite:///study.db",
                           shown) from None
    scheme = parsed.get_backend_name()
    try:
        parsed.get_dialect()
    except sa_exc.NoSuchModuleError:
        raise InvalidInput("storage", f"unknown database scheme {parsed.drivername!r}: give a "
                           "journal file path or an Optuna RDB URL (sqlite:///..., "
                           "postgresql://..., mysql+pymysql://...)", shown) from None
    try:
        return optuna.storages.RDBStorage(url)
    except ImportError:
        need = DRIVERS.get(scheme, f"the driver SQLAlchemy uses for {parsed.drivername}")
        raise InvalidInput("storage", f"the database driver for {scheme} is not installed: "
                           f"install {need}", shown) from None
    except sa_exc.SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise InvalidInput("storage", f"the study database cannot be opened: {reason}",
                           shown) from None


# -- journal files ---------------------------------------------------------------------------------
class JournalLock:
    """The journal's write lock: an OS lock on ``<journal>.flock`` (``filelock.FileLock``:
    ``fcntl.flock`` on Unix, ``msvcrt`` on Windows), released by the kernel when its holder dies.
    Optuna's journal backend calls ``acquire``/``release`` around every append."""

    def __init__(self, journal: str | Path) -> None:
        from filelock import FileLock

        self.path = self.path_of(journal)
        self._lock = FileLock(str(self.path))

    @staticmethod
    def path_of(journal: str | Path) -> Path:
        return Path(str(journal) + ".flock")

    def acquire(self, timeout: float | None = None) -> bool:
        """Block until held (``timeout`` seconds at most: False when another process holds it
        longer; 0: try once)."""
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=-1 if timeout is None else timeout)
        except Timeout:
            return False
        return True

    def release(self) -> None:
        self._lock.release()


def _refuse(path: Path, rule: str) -> InvalidInput:
    return InvalidInput("storage", rule, str(path))


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _check_journal_file(path: Path) -> None:
    """Refuse what cannot be a journal before anything is read into Optuna or written (only
    the journal's missing folders are made)."""
    if path.is_dir():
        raise _refuse(path, "is a folder: give a journal file path (e.g. "
                      f"{path / 'study.journal'}) or an RDB URL")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(path, f"the journal's folder {path.parent} cannot be made: "
                      f"{_why(exc)}") from None
    try:
        with open(path, "rb") as f:
            head = f.read(len(RECORD_START))
    except FileNotFoundError:
        head = b""
    except OSError as exc:
        raise _refuse(path, f"the journal cannot be read: {_why(exc)}") from None
    if head and not (head.startswith(RECORD_START) or RECORD_START.startswith(head)):
        raise _refuse(path, "is not an Optuna journal (its first record does not start with "
                      f"{RECORD_START.decode()}): give a new path or the journal of a study; "
                      "the file was left unchanged")
    lock = JournalLock.path_of(path)
    try:   # a sweep appends every trial under the lock: refuse now, not mid-study; create nothing
        for f in (path, lock):
            if f.exists():
                with open(f, "ab"):
                    pass
        if not (path.exists() and lock.exists()):
            with tempfile.TemporaryFile(dir=path.parent):
                pass
    except OSError as exc:
        raise _refuse(path, "the journal or its lock file beside it cannot be written (a sweep "
                      f"appends every trial under that lock): {_why(exc)}") from None


def _open_journal(path: Path):
    from optuna.storages.journal import JournalFileBackend

    optuna = _optuna()
    _check_journal_file(path)
    lock = JournalLock(path)   # Optuna's backend calls acquire() and release(), no more
    try:
        storage = optuna.storages.JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    except (ValueError, KeyError, TypeError) as exc:   # a line that is not a journal record
        raise _refuse(path, f"is not a readable Optuna journal ({type(exc).__name__}: "
                      f"{str(exc)[:200]}); the file was left unchanged") from None
    try:
        lock.acquire()
    except OSError as exc:
        raise _refuse(path, f"the journal's lock file {lock.path} cannot be made: "
                      f"{_why(exc)}") from None
    try:
        repair_journal(path)
    finally:
        lock.release()
    return storage


def repair_journal(path: Path) -> int:
    """Drop a torn last record (a process killed while appending leaves a line without its
    newline; Optuna skips it on reading, but the next append would glue a valid record to it and
    make the file unreadable). Only a tail that starts like a record is dropped (anything else:
    InvalidInput, the file unchanged). Call under the journal's lock. Returns the bytes dropped."""
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        keep = 0
        pos = size
        while pos > 0 and not keep:
            step = min(pos, 1 << 16)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = pos + cut + 1
        f.seek(keep)
        tail = f.read(len(RECORD_START))
        if not (tail.startswith(RECORD_START) or RECORD_START.startswith(tail)):
            raise _refuse(path, f"its last line (offset {keep}) is neither a record nor a torn "
                          "one: not an Optuna journal? The file was left unchanged")
        f.truncate(keep)
    log.warning("%s: dropped a torn last record (%d bytes) left by a killed process",
                path, size - keep)
    return size - keep

"""The files an import reads: regular ``*.md`` files inside the workspace, never through a link.

:func:`workspace_files` walks the workspace folder and reads its files without ever opening a path
that resolves outside it: every folder and file is opened relative to its parent's open folder
(``dir_fd``) with ``O_NOFOLLOW``, so a symbolic link is never followed, even one swapped in while
the import runs. What it finds and does not read is reported by name, never skipped silently:

- a symbolic link named ``*.md``, or a link to a folder: refused (an import reads regular files
  inside the workspace only, wherever the link points, inside or out);
- a ``*.md`` that is not a regular file (a FIFO, a socket, a device): refused unread (opened
  non-blocking, so a FIFO cannot stall the import);
- a folder deeper than any workspace path (:data:`MAX_FOLDER_DEPTH`) or one that cannot be
  listed or opened: refused.

Hidden names (starting with ``.``: editors' folders, the export's temporary files) are skipped,
files and folders alike: no workspace path has a hidden part (:func:`memlab.workspace.paths.segment`
encodes a leading ``.``). Other files (not ``*.md``) are not workspace files and are left alone.
Files come in path order (sorted part by part), each with its bytes or the error that refused it.

Hard links cannot be told from regular files: a hard link made inside the workspace to a file
elsewhere is read as a workspace file (only its owner, or root, can make one).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator

from memlab.errors import WorkspaceError

from .paths import SUFFIX

#: the folders of the deepest workspace path, users/<user>/agents/<agent>/<dialogue>/<scope>/
MAX_FOLDER_DEPTH = 6

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)
_LINK_RULE = ("a symbolic link (to {target!r}): an import reads only regular files inside the "
              "workspace, never through a link; copy the file in instead")


def _target(name: str, dir_fd: int) -> str:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def _read(name: str, dir_fd: int, rel: str) -> bytes:
    """The bytes of regular file ``name`` in the open folder ``dir_fd``; WorkspaceError when it
    is (or became) a link or anything but a regular file, or cannot be read."""
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:     # ELOOP: a link swapped in after the folder was listed
        if stat.S_ISLNK(_lstat_mode(name, dir_fd)):
            raise WorkspaceError(rel, _LINK_RULE.format(target=_target(name, dir_fd))) from None
        raise WorkspaceError(rel, f"cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise WorkspaceError(rel, "not a regular file (a FIFO, socket or device): not read")
        try:
            return fh.read()
        except OSError as exc:
            raise WorkspaceError(rel, f"cannot be read ({exc.strerror})") from None


def _lstat_mode(name: str, dir_fd: int) -> int:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return 0


def workspace_files(root: Path) -> Iterator[tuple[str, bytes | WorkspaceError]]:
    """(workspace-relative POSIX path, its bytes or the WorkspaceError that refused it) of every
    ``*.md`` file and refused entry under ``root``, in path order (module docstring)."""
    top = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                  | getattr(os, "O_CLOEXEC", 0))
    try:
        yield from _walk(top, "", 0)
    finally:
        os.close(top)


def _walk(dir_fd: int, prefix: str, depth: int) -> Iterator[tuple[str, bytes | WorkspaceError]]:
    with os.scandir(dir_fd) as it:
        entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
    for e in entries:
        rel = prefix + e.name
        if e.is_symlink():
            if e.name.endswith(SUFFIX) or _is_dir_link(e.name, dir_fd):
                yield rel, WorkspaceError(rel, _LINK_RULE.format(target=_target(e.name, dir_fd)))
        elif e.is_dir(follow_symlinks=False):
            if depth >= MAX_FOLDER_DEPTH:
                yield rel, WorkspaceError(rel, f"a folder deeper than any workspace path "
                                          f"({MAX_FOLDER_DEPTH} folders): not read")
                continue
            try:
                sub = os.open(e.name, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                yield rel, WorkspaceError(rel, f"the folder cannot be opened ({exc.strerror})")
                continue
            try:
                yield from _walk(sub, rel + "/", depth + 1)
            except OSError as exc:
                yield rel, WorkspaceError(rel, f"the folder cannot be listed ({exc.strerror})")
            finally:
                os.close(sub)
        elif e.name.endswith(SUFFIX):
            try:
                yield rel, _read(e.name, dir_fd, rel)
            except WorkspaceError as exc:
                yield rel, exc


def _is_dir_link(name: str, dir_fd: int) -> bool:
    """A link to a folder (its target stat'ed, never opened)."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False

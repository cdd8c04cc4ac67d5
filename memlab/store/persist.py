"""Persisted in-process indexes: arrays beside the store, memory-mapped at open, checked first.

Opening a store used to rebuild the :class:`~memlab.store.memindex.MemoryIndex` and the dense
:class:`~memlab.store.exact.ExactIndex` from SQLite (4.8 s and 4.1 s at 100k memories). Each index
now writes its arrays to ``<store>.idx/`` (``store.persist_index``): one folder of ``.npy`` files
per saved state (``memory-<token>/``, ``exact-<model>-<token>/``) and a small manifest naming it
(``memory.json``, ``exact-<model>.json``), replaced atomically (written under a temporary name,
then ``os.replace``) after the folder is complete, so a reader sees the old state or the new one.

A saved state is used only when all of these hold, else the index is rebuilt from SQLite and
saved again (logged, counted in ``Store.stats``: ``"persisted index rebuilt: <why>"``):

- its **key** matches: memlab's index format (:data:`FORMAT`), the store's schema version
  (``PRAGMA user_version``), and for the dense index the vector table's generation, model
  version, dimension, element types and quantisation scale. The MemoryIndex may be *behind*
  (another process wrote since it was saved): it is loaded and the logged changes since its
  generation are applied through :meth:`MemoryIndex.sync` (the change log keeps every changed
  row); a generation *ahead* of the store's (a restored file) means rebuild;
- every array file is there, with the shape and dtype the manifest records (a truncated ``.npy``
  does not map), and, with ``store.index_checksum``, the CRC-32 the manifest records;
- the arrays are consistent with each other (lengths, offsets inside their buffers);
- a probe of ``store.index_probe`` rows evenly spaced over the store reads the same from SQLite
  as from the loaded index (a memory's id, text, owner and searchability; a vector's bytes): the
  state describes *this* store (not a file once at the same path) as it is now.

A state may also hold opaque files written by a library (the usearch HNSW graph of
:mod:`memlab.store.ann`, ``ann-<model>-<token>/graph.usearch``): the manifest records each one's
size and CRC-32, checked like an array's before the library reads it.

Arrays are mapped copy-on-write (``mmap_mode="c"``): an index changes its copy in memory, never
the files; a later save writes a new folder. Old folders are removed after the manifest moved on
(a process that mapped them keeps its pages: POSIX keeps an unlinked file's data while it is open).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import shutil
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

log = logging.getLogger("memlab")

#: memlab's index file format: bump when what an index saves, or how, changes.
FORMAT = 2
#: The MemoryIndex's name in the folder (the dense indexes': :func:`model_name`).
MEMORY = "memory"


@dataclass
class Saved:
    """A loaded state: its arrays (memory-mapped, copy-on-write), the manifest's ``meta`` and
    the paths of its opaque files (size and CRC-32 checked)."""

    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]
    key: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)


class Unusable(Exception):
    """Why a saved state cannot be used (internal: always caught, logged and counted)."""


def folder_of(path: str | os.PathLike | None) -> Path | None:
    """``<store>.idx`` beside a store file; None for an in-memory store."""
    if path is None or str(path) in ("", ":memory:") or str(path).startswith("file::memory:"):
        return None
    return Path(str(path) + ".idx")


def model_name(model_version: str) -> str:
    """A file-name-safe name for a vector table's model version."""
    return "exact-" + hashlib.sha1(model_version.encode("utf-8")).hexdigest()[:12]


def _crc(arr: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))


def _file_crc(path: Path, block: int = 1 << 24) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(block):
            crc = zlib.crc32(chunk, crc)
    return crc


def save(folder: Path, name: str, key: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
         meta: Mapping[str, Any],
         writers: Mapping[str, Callable[[Path], None]] | None = None) -> Path:
    """Write one state: a new folder of ``.npy`` files (and of the opaque files ``writers``
    write: name -> a function writing that path), then the manifest, atomically; older
    folders of ``name`` are removed. Returns the new folder."""
    folder.mkdir(exist_ok=True)
    token = f"{os.getpid()}-{uuid.uuid4().hex[:10]}"
    data = folder / f"{name}-{token}"
    data.mkdir()
    files = {}
    for k, arr in arrays.items():
        arr = np.ascontiguousarray(arr)
        np.save(data / f"{k}.npy", arr, allow_pickle=False)
        files[k] = {"shape": list(arr.shape), "dtype": arr.dtype.str, "crc32": _crc(arr)}
    opaque = {}
    for k, write in (writers or {}).items():
        f = data / k
        write(f)
        opaque[k] = {"size": f.stat().st_size, "crc32": _file_crc(f)}
    manifest = {"format": FORMAT, "key": dict(key), "dir": data.name, "arrays": files,
                "files": opaque, "meta": dict(meta)}
    tmp = folder / f".{name}.{token}.json"
    tmp.write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, folder / f"{name}.json")
    for old in folder.glob(f"{name}-*"):
        if old.is_dir() and old.name != data.name:
            shutil.rmtree(old, ignore_errors=True)   # another process may be removing it too
    return data


def load(folder: Path, name: str, key: Mapping[str, Any], *, checksum: bool,
         allow_behind: str | None = None) -> Saved:
    """The saved state ``name`` whose key equals ``key`` (``allow_behind``: a key entry that may
    be lower than ``key``'s, e.g. the MemoryIndex's generation); raises :class:`Unusable`."""
    mpath = folder / f"{name}.json"
    if not mpath.exists():
        raise Unusable("none saved")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        saved_key, files, meta = dict(manifest["key"]), manifest["arrays"], manifest["meta"]
        opaque = dict(manifest.get("files", {}))
        data = folder / manifest["dir"]
        fmt = manifest["format"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Unusable(f"corrupt: manifest {mpath.name} unreadable ({exc})") from exc
    if fmt != FORMAT:
        raise Unusable(f"index format {fmt}, this memlab writes {FORMAT}")
    for k, want in key.items():
        got = saved_key.get(k)
        if k == allow_behind and isinstance(got, int) and isinstance(want, int) and got <= want:
            continue
        if got != want:
            raise Unusable(f"stale: {k} {got!r}, the store's is {want!r}")
    arrays = {}
    for k, spec in files.items():
        f = data / f"{k}.npy"
        try:
            arr = np.load(f, mmap_mode="c", allow_pickle=False).view(np.ndarray)
        except (OSError, ValueError, EOFError) as exc:
            raise Unusable(f"corrupt: {f.name}: {exc}") from exc
        if list(arr.shape) != spec["shape"] or arr.dtype.str != spec["dtype"]:
            raise Unusable(f"corrupt: {f.name} holds {arr.dtype.str} {list(arr.shape)}, the "
                           f"manifest says {spec['dtype']} {spec['shape']}")
        if checksum and _crc(arr) != spec["crc32"]:
            raise Unusable(f"corrupt: {f.name}: CRC-32 differs from the manifest's")
        arrays[k] = arr
    paths = {}
    for k, spec in opaque.items():
        f = data / k
        try:
            size = f.stat().st_size
            if size != spec["size"]:
                raise Unusable(f"corrupt: {f.name} holds {size} bytes, the manifest says "
                               f"{spec['size']}")
            if checksum and _file_crc(f) != spec["crc32"]:
                raise Unusable(f"corrupt: {f.name}: CRC-32 differs from the manifest's")
        except OSError as exc:
            raise Unusable(f"corrupt: {f.name}: {exc}") from exc
        paths[k] = f
    return Saved(arrays, meta, saved_key, paths)


def strings_to_arrays(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes back to back, uint8; the strings' lengths in characters, int64)."""
    blob = "".join(strings).encode("utf-8", "surrogatepass")
    return np.frombuffer(blob, np.uint8), np.fromiter(map(len, strings), np.int64,
                                                      count=len(strings))


class LazyStrings:
    """A list of strings saved back to back (:func:`strings_to_arrays`), each sliced out of the
    decoded text when read; strings appended later are kept as a list. Supports ``len``,
    indexing, iteration and ``extend`` (what the indexes use of a list)."""

    def __init__(self, text: str, lens: np.ndarray) -> None:
        self._text = text
        self._ends = np.cumsum(lens)
        self._starts = self._ends - lens
        self._n = len(lens)
        self._tail: list[str] = []

    def __len__(self) -> int:
        return self._n + len(self._tail)

    def __getitem__(self, p: int) -> str:
        if 0 <= p < self._n:
            return self._text[self._starts[p]:self._ends[p]]
        return self._tail[p - self._n]

    def __iter__(self):
        return itertools.chain((self[p] for p in range(self._n)), self._tail)

    def extend(self, strings) -> None:
        self._tail.extend(strings)


def strings_from_arrays(blob: np.ndarray, lens: np.ndarray, *, lazy: bool = False
                        ) -> list[str] | LazyStrings:
    """Inverse of :func:`strings_to_arrays` (``lazy``: a :class:`LazyStrings`); ValueError when
    they disagree."""
    text = bytes(blob).decode("utf-8", "surrogatepass")
    if int(lens.sum()) != len(text) or (len(lens) and int(lens.min()) < 0):
        raise ValueError(f"string lengths sum to {int(lens.sum())}, the text holds {len(text)}")
    if lazy:
        return LazyStrings(text, lens)
    ends = np.cumsum(lens).tolist()
    starts = [0] + ends[:-1]
    return [text[a:b] for a, b in zip(starts, ends)]


def probe_positions(n: int, size: int) -> np.ndarray:
    """At most ``size`` indices evenly spaced over ``range(n)`` (the first and the last)."""
    if n <= 0 or size <= 0:
        return np.zeros(0, np.int64)
    return np.unique(np.linspace(0, n - 1, min(n, size)).round().astype(np.int64))


__all__ = ["FORMAT", "LazyStrings", "MEMORY", "Saved", "Unusable", "folder_of", "load",
           "model_name", "probe_positions", "save", "strings_from_arrays", "strings_to_arrays"]

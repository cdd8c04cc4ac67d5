"""Files written whole or not at all, under names that every file system takes."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import unicodedata
from pathlib import Path
from typing import Iterable


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8, line ends as given) to ``path`` through a hidden temporary file in the
    same folder, then rename it over ``path``: a crash leaves the old file or the new one, never a
    part, and no temporary file behind on an error. OSError propagates for the caller to name."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


#: characters no file or folder name may hold on Linux, macOS or Windows ('/' and NUL anywhere;
#: the rest on Windows), control characters included; a run of them becomes one '-'
_UNSAFE = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]+')
#: Windows' device names: not usable as a file name with any extension
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
             *(f"LPT{i}" for i in range(1, 10))}
#: longest name kept whole (characters; file systems allow 255 bytes, and UTF-8 takes up to 4)
MAX_NAME = 60


def safe_name(name: str) -> str:
    """``name`` as one file or folder name valid on Linux, macOS and Windows, as close to it as
    can be: every run of characters that no name may hold (``/ \\ : * ? " < > |``, control
    characters) becomes ``-`` (``tuned/locomo`` -> ``tuned-locomo``); leading and trailing dots,
    dashes and spaces are dropped (``..`` is no name); Windows' device names (``CON``, ``nul.txt``)
    get a trailing ``_``; a name longer than :data:`MAX_NAME` characters keeps its start and 8 hex
    digits of its sha256. Nothing left is ``_``. Unicode letters (Chinese too) are kept."""
    out = _UNSAFE.sub("-", unicodedata.normalize("NFC", name)).strip(" .-")
    if out.split(".")[0].upper() in _RESERVED:
        out += "_"
    if len(out) > MAX_NAME:
        out = f"{out[:MAX_NAME - 9].rstrip(' .-')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return out or "_"


def unique_names(names: Iterable[str], *, reserved: Iterable[str] = ()) -> dict[str, str]:
    """Each of ``names`` -> its :func:`safe_name`, all distinct from each other and from
    ``reserved`` ignoring case (macOS and Windows file systems do): in order, a name whose safe
    form is taken gets ``-2``, ``-3``, ... (``a/b`` and ``a-b`` -> ``a-b`` and ``a-b-2``).
    A name given twice maps to one name."""
    taken = {r.casefold() for r in reserved}
    out: dict[str, str] = {}
    for name in names:
        if name in out:
            continue
        base = candidate = safe_name(name)
        n = 1
        while candidate.casefold() in taken:
            n += 1
            candidate = f"{base}-{n}"
        taken.add(candidate.casefold())
        out[name] = candidate
    return out

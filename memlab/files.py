"""Files written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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

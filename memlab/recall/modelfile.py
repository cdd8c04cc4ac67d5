"""A model file: one skops archive holding ``{"model": ..., "manifest": {...}}``.

Shared by the learned scorer (:mod:`memlab.recall.learned`) and the abstention decision
(:mod:`memlab.recall.abstain`): the file is written beside its path and renamed into place (a
reader never sees half a file), found by path, size and modification time (a reader's cache key),
and read with skops refusing every type beyond scikit-learn's own and the ones a caller trusts.
Each caller checks its manifest itself.

A model packaged with memlab is named ``memlab:NAME`` (:data:`PACKAGED`): the file ``NAME`` of
``memlab/data/models/``, found through :mod:`importlib.resources` (so a preset that names it works
from a wheel as from a checkout); any other value is a filesystem path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from memlab.errors import ConfigError

__all__ = ["PACKAGED", "resolve", "write_archive", "file_key", "read_archive"]

#: the prefix of a model packaged in memlab/data/models/
PACKAGED = "memlab:"


def resolve(path: str | Path, key: str = "fusion.learned_model") -> Path:
    """The file ``path`` names: ``memlab:NAME`` -> memlab/data/models/NAME (importlib.resources;
    NAME a plain file name, else ConfigError naming the config field ``key``); anything else: the
    path itself (``~`` expanded)."""
    text = str(path)
    if text.startswith(PACKAGED):
        from importlib import resources

        name = text[len(PACKAGED):]
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            raise ConfigError(key, "a packaged model is memlab:NAME, NAME a file name of "
                              "memlab/data/models/", text)
        return Path(str(resources.files("memlab").joinpath("data", "models", name)))
    return Path(text).expanduser()


def write_archive(path: str | Path, model: Any, manifest: Mapping[str, Any]) -> Path:
    """Write ``model`` and ``manifest`` as one skops file at ``path`` (beside, then renamed)."""
    import skops.io as sio

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_bytes(sio.dumps({"model": model, "manifest": dict(manifest)}))
    os.replace(tmp, p)
    return p


def file_key(path: str | Path, key: str) -> tuple[str, int, int]:
    """(resolved path, size, modification time in ns): the cache key of a reader; ConfigError
    naming the config field ``key`` and the path when the file cannot be read."""
    p = resolve(path, key)
    try:
        st = p.stat()
    except OSError as exc:
        raise ConfigError(key, f"cannot read the model file ({exc.strerror})", str(p)) from None
    return str(p.resolve()), st.st_size, st.st_mtime_ns


def read_archive(path: str, key: str, *, what: str, trusted: Sequence[str] = ()) -> Any:
    """The object of the skops file ``path``. A type beyond scikit-learn's own and ``trusted``
    is refused before anything is loaded; a file skops cannot read is refused: ConfigError
    naming ``key``, the path and what the file should be (``what``)."""
    import skops.io as sio

    try:
        data = Path(path).read_bytes()
        found = sio.get_untrusted_types(data=data)
        extra = sorted(set(found) - set(trusted))
        if extra:
            raise ConfigError(key, f"the model file holds types memlab does not load: "
                              f"{', '.join(extra)}", path)
        return sio.loads(data, trusted=list(found))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt archive fails in zipfile, json or
        # skops with many types; each becomes the one named refusal, nothing is loaded
        raise ConfigError(key, f"not a memlab {what} (skops): {type(exc).__name__}: {exc}",
                          path) from None

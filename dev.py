#!/usr/bin/env python3
"""Set up and run memlab with nothing but Python 3.11+ and pip.

    python3 dev.py bench [memlab bench args...]   # the main job: benchmark on memlab-lifelog
    python3 dev.py test [pytest args...]          # the test suite
    python3 dev.py notebooks [--size full] [NAME...]   # run notebooks/ into results/notebooks/
    python3 dev.py setup [--st]                   # only create/refresh .venv

Each command creates ``.venv`` when it is missing and reinstalls when pyproject.toml changed.
torch is installed as torch==2.13.0 (the CPU build) before anything that depends on it: a bare
``torch`` would pull gigabytes of CUDA.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
TORCH = "torch==2.13.0"


def _run(*cmd: str, **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def setup(extras: tuple[str, ...]) -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"memlab needs Python >= 3.11 (this is {sys.version.split()[0]})")
    if not PY.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    key = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + ",".join(extras).encode())
    stamp = VENV / f".memlab-{key.hexdigest()[:16]}"
    if stamp.exists():
        return
    pip = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if "st" in extras:
        _run(*pip, TORCH)
    spec = f".[{','.join(extras)}]" if extras else "."
    _run(*pip, "-e", spec)
    for old in VENV.glob(".memlab-*"):
        old.unlink()
    stamp.touch()


NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "results" / "notebooks"     # git-ignored (/results/): outputs never committed


def execute_notebooks(paths: list[Path], out_dir: Path, *, timeout: int = 3600,
                      kernel_name: str = "python3") -> dict[str, dict]:
    """Run each notebook top to bottom in a fresh kernel (nbclient), in its own folder as
    ``pytest --nbmake`` does, and write it with its outputs to ``out_dir`` (a notebook that
    fails is written up to the failing cell, with the error). Returns name -> {"seconds",
    "error"}. Runs inside the venv (nbclient and nbformat come with the dev extra)."""
    import time

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, dict] = {}
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name,
                                resources={"metadata": {"path": str(path.parent)}})
        started, error = time.perf_counter(), None
        try:
            client.execute()
        except CellExecutionError as exc:
            error = str(exc).strip().splitlines()[-1] if str(exc).strip() else "failed"
        seconds = time.perf_counter() - started
        nbformat.write(nb, out_dir / path.name)
        report[path.name] = {"seconds": round(seconds, 1), "error": error}
        print(f"{path.name}: {seconds:.1f} s" + (f", FAILED: {error}" if error else ""),
              flush=True)
    return report


def _notebooks(names: list[str]) -> list[Path]:
    every = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return every
    chosen = []
    for name in names:
        hits = [p for p in every if p.name == name or p.stem == name or p.name.startswith(name)]
        if not hits:
            sys.exit(f"no notebook matches {name!r} in {NOTEBOOKS}: "
                     f"{', '.join(p.name for p in every)}")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def notebooks(rest: list[str], env: dict[str, str]) -> int:
    """``dev.py notebooks [--size small|full] [NAME...]``: the notebooks executed, with their
    outputs, into results/notebooks/ (the committed ones stay without outputs)."""
    size = env.get("MEMLAB_NOTEBOOK_SIZE", "small")
    names = []
    it = iter(rest)
    for arg in it:
        if arg == "--size":
            size = next(it, "")
        elif arg.startswith("--size="):
            size = arg.split("=", 1)[1]
        else:
            names.append(arg)
    if size not in ("small", "full"):
        sys.exit(f"--size must be small or full, not {size!r}")
    paths = _notebooks(names)
    setup(("dev", "st"))       # the test command's environment (the same .venv stamp)
    code = ("import sys, json; sys.path.insert(0, sys.argv[1]); import dev; "
            "r = dev.execute_notebooks([dev.Path(p) for p in json.loads(sys.argv[2])], "
            "dev.EXECUTED); sys.exit(1 if any(v['error'] for v in r.values()) else 0)")
    print(f"executing {len(paths)} notebook(s), MEMLAB_NOTEBOOK_SIZE={size}, into {EXECUTED}",
          flush=True)
    return subprocess.run([str(PY), "-c", code, str(ROOT), json.dumps([str(p) for p in paths])],
                          cwd=ROOT, env={**env, "MEMLAB_NOTEBOOK_SIZE": size}).returncode


def main(argv: list[str]) -> int:
    cmd, rest = (argv[0], argv[1:]) if argv else ("help", [])
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    if cmd == "setup":
        setup(("dev", "st") if "--st" in rest else ("dev",))
        return 0
    if cmd == "bench":
        setup(())
        args = rest or ["--dataset", "memlab-lifelog", "--compare",
                        "reverie,cosine,bm25,generative_agents,hybrid_rrf",
                        "--json", "results/memlab-lifelog.json"]
        return subprocess.run([str(BIN / "memlab"), "bench", *args], cwd=ROOT, env=env).returncode
    if cmd == "notebooks":
        return notebooks(rest, env)
    if cmd == "test":
        setup(("dev", "st"))
        args = rest or ["tests", "notebooks", "--nbmake", "-p", "no:cacheprovider"]
        return subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT, env=env).returncode
    print(__doc__)
    return 0 if cmd in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

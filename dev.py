#!/usr/bin/env python3
"""Set up and run memlab with nothing but Python 3.11+ and pip.

    python3 dev.py bench [memlab bench args...]   # the main job: benchmark on memlab-lifelog
    python3 dev.py test [pytest args...]          # the test suite
    python3 dev.py setup [--st]                   # only create/refresh .venv

Each command creates ``.venv`` when it is missing and reinstalls when pyproject.toml changed.
torch is installed as torch==2.13.0 (the CPU build) before anything that depends on it: a bare
``torch`` would pull gigabytes of CUDA.
"""

from __future__ import annotations

import hashlib
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
    if cmd == "test":
        setup(("dev", "st"))
        args = rest or ["tests", "notebooks", "--nbmake", "-p", "no:cacheprovider"]
        return subprocess.run([str(PY), "-m", "pytest", *args], cwd=ROOT, env=env).returncode
    print(__doc__)
    return 0 if cmd in ("help", "-h", "--help") else 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

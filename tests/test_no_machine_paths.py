"""No machine paths in the repository (issue 18, item 3): no tracked file under memlab/, tests/,
benchmarks/, notebooks/ or the README (notebook outputs included) holds an absolute path into a
home or a checkout, which a user's clone does not have. Paths are relative to the checkout
(``../shared/datasets``, ``.cache/memlab``), found from the running interpreter
(``sys.executable``, ``shutil.which``), or given by the user."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCOPE = ("memlab", "tests", "benchmarks", "notebooks", "README.md")

#: where an absolute path starts: not inside a word, a relative path, a URL or ``~/``/``$HOME/``
#: (``sqlite:////...`` still counts: a slash may come before)
_START = r"(?<![\w.~$-])"
_SEP = r"(?:\\\\|\\|/)"                    # '/', '\' or, inside JSON, an escaped '\\'
#: each folder name has one letter in brackets, so that this file's own text does not match
PATTERNS = {
    "root's home": re.compile(_START + r"/r[o]ot/"),
    "a home on Linux": re.compile(_START + r"/h[o]me/[^/\s'\"`]+/"),
    "a home on macOS": re.compile(_START + r"/U[s]ers/[^/\s'\"`]+/"),
    "a checkout in this workplace": re.compile(_START + r"/w[o]rk/"),
    "a home on Windows": re.compile(r"(?<![\w])[A-Za-z]:" + _SEP + r"U[s]ers" + _SEP),
}


def tracked_files() -> list[Path]:
    """The files git tracks in :data:`SCOPE`; outside a git checkout (an unpacked archive), every
    file there but caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *SCOPE], cwd=ROOT, check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        found = [ROOT / "README.md"]
        for top in SCOPE[:-1]:
            for folder, dirs, files in os.walk(ROOT / top):
                dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
                found += [Path(folder) / f for f in files]
        return found
    return [ROOT / name for name in out.decode().split("\0") if name]


def machine_paths(text: str) -> list[tuple[int, str, str]]:
    """(line number, the path's start, which kind) of every machine path in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(0), kind)
            for kind, pattern in PATTERNS.items() for m in pattern.finditer(text)]


def test_no_tracked_file_holds_a_machine_path():
    files = tracked_files()
    assert ROOT / "README.md" in files and ROOT / "memlab" / "__init__.py" in files
    assert any(f.suffix == ".ipynb" for f in files)
    hits = []
    for path in files:
        data = path.read_bytes() if path.is_file() else b""
        if b"\0" in data:                                       # binary (npz): no text paths
            continue
        hits += [f"{path.relative_to(ROOT)}:{line}: {found!r} ({kind})"
                 for line, found, kind in machine_paths(data.decode("utf-8", errors="replace"))]
    assert not hits, "absolute paths of one machine:\n" + "\n".join(hits)


@pytest.mark.parametrize("text", [
    "MLFLOW = Path('/" + "work/main/.venv/bin/mlflow')",
    "--path /" + "work/shared/datasets/locomo/locomo10.json",
    "mkdir -p /" + "home/memlabpg/cache",
    '"sqlite:////' + 'root/x/mlflow.db"',
    '  "text": "/' + 'Users/lin/memlab/notebooks"',
    r'"C:\\' + r'Users\\lin\\memlab"',                       # a notebook output, JSON-escaped
    r"C:\\" + "Users" + r"\lin", "D:/" + "Users/lin/",
])
def test_machine_paths_are_found(text):
    assert machine_paths(text)


@pytest.mark.parametrize("text", [
    "--path ../shared/datasets/locomo/locomo10.json", "--cache-dir .cache/memlab",
    "results/work/x", "tests/root/a", "~/work/notes", "$HOME/work", "https://example.com/home/a/",
    "/tmp/pytest-of-" + "root/x", "/usr/lib/postgresql/15/bin", "/nonexistent/memlab-test-model",
    "/home", "tree.root/x",
])
def test_relative_and_system_paths_pass(text):
    assert machine_paths(text) == []

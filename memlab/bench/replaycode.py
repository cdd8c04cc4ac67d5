"""The memlab source files a benchmark replay can execute, read from the import graph (issue 18).

The feature cache (:mod:`memlab.bench.featcache`) must not reuse a raw-signal table that other code
computed, so its key holds a digest of the code a replay runs. Which modules that is comes from
the code itself, not from a list kept by hand: starting at the replay's entry points
(:data:`ENTRY`: ``bench/replay.py``, which both write modes run, and ``bench/featcache.py``, which
stores its result), every memlab module they import, by any ``import`` statement (one inside a
function too: ``replay`` opens its store through a lazy import of ``memlab.api``), is followed in
turn. A package that is only the parent of an imported module runs its top level, not its
functions (``memlab/__init__.py``'s facades ``memlab.sweep`` and ``memlab.open_store`` import
lazily, and a replay calls neither), so only the imports at its top level are followed;
``from memlab import forgetting`` imports the module ``memlab.forgetting``.

The graph over-approximates what runs: ``bench/replay.py`` opens its store through ``memlab.api``,
the store facade, which imports recall (scoring, selection, the prompt block) and the write
pipeline, so a raw replay's digest covers ``recall/score.py`` too, although only a writer replay
calls its relevance floor (``recall/associate.py``). Both write modes therefore reach the same
files, and the digest is one for both. A module no import reaches (tuning, tracking, the command
line, the VRAM gate, serving, jobs and the workspace) can be edited without dropping a cache.
``tests/bench/test_featcache.py`` runs a replay in each mode in a fresh interpreter and checks that
every memlab module it loaded is in :func:`replay_files`.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]          # the memlab package folder
#: The modules a replay starts from (both write modes).
ENTRY = ("memlab.bench.replay", "memlab.bench.featcache")
#: Data files under memlab/ (read by modules, not imported): all of them count as replay input.
DATA_SUFFIXES = (".txt", ".npz", ".json", ".yaml")


def _modules(root: Path) -> dict[str, Path]:
    """Every memlab module by dotted name (a package by its own name) -> its file."""
    out = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("").as_posix().replace("/", ".")
        out[rel.removesuffix(".__init__")] = path
    return out


def _nodes(tree: ast.AST, *, skip_functions: bool):
    """Every node of ``tree``; ``skip_functions``: not those inside a function's body (which runs
    only when called), as importing a module runs its top level and its class bodies."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if skip_functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imported(name: str, path: Path, modules: dict[str, Path], *, top_level_only: bool
              ) -> set[str]:
    """The memlab modules the file of module ``name`` imports (``top_level_only``: only by the
    statements at its top level, not inside its functions or classes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _nodes(tree, skip_functions=top_level_only):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:                                  # from . import x, from ..y import z
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in modules else base)    # a submodule, or a name of base
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in modules}


def reachable(entry: tuple[str, ...] = ENTRY, *, root: Path = ROOT) -> frozenset[str]:
    """The dotted names of the memlab modules that running ``entry`` can execute (module
    docstring): each entry's imports followed transitively, a parent package by its top level."""
    modules = _modules(root)
    whole: set[str] = set()           # imported by name: any of its functions may run
    top: set[str] = set()             # only a parent package of one: its top level runs
    todo = [(m, True) for m in entry]
    while todo:
        name, by_name = todo.pop()
        if name not in modules or name in whole or (not by_name and name in top):
            continue
        (whole if by_name else top).add(name)
        parts = name.split(".")
        todo.extend((".".join(parts[:i]), False) for i in range(1, len(parts)))
        todo.extend((m, True) for m in _imported(name, modules[name], modules,
                                                 top_level_only=not by_name))
    return frozenset(whole | top)


@lru_cache(maxsize=1)
def replay_files() -> tuple[str, ...]:
    """The files a replay's raw signals depend on, relative to the memlab package (sorted): the
    modules :func:`reachable` from :data:`ENTRY` and every data file."""
    modules = _modules(ROOT)
    files = {modules[m].relative_to(ROOT).as_posix() for m in reachable()}
    files |= {p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*")
              if p.is_file() and p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts}
    return tuple(sorted(files))

"""Dependencies run one way (DESIGN.md, Layout): a module imports only from its own layer or the
layers below it. Read from the source with ``ast`` (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import memlab

PACKAGE = Path(memlab.__file__).resolve().parent

#: bottom to top; a layer may import from itself and from every layer with a smaller rank
RANK = {
    "errors": 0, "types": 0, "clock": 0, "version": 0, "files": 0,
    "numerals": 0,       # numbers and calendar words in zh and en (tables and one reader)
    "yamlfile": 0.5,     # YAML files read strictly (duplicate keys, depth): config and spaces
    "frames": 0.5,       # .to_frame() of results and list reads (pandas, errors only)
    "home": 0.5,         # where caches, results and mlflow.db live (MEMLAB_HOME)
    "notebook": 0.5,     # figures shown inline in a Jupyter kernel (IPython's printer)
    "config": 1, "inputs": 1, "text": 1,
    "windows": 1,        # a long text's windows and their best cosine (pure: config, numpy)
    "safety": 1.5,       # pure checks of what is written and recalled (config, errors, types only)
    "cliutil": 1.5,      # what the command modules share (fail, option declarations, config of
                         # --config/--set): below every package that has a cli.py (vram is 2.5)
    "embed": 2, "llm": 2,
    "vram": 2.5,         # the VRAM gate over the models memlab runs (embedders, LLM clients)
    "store": 3,
    "forgetting": 4, "write": 4, "jobs": 4,
    "lifecycle": 4,      # Familiars TTL and consolidation over the store
    "workspace": 4,      # Familiars' markdown workspace: export/import of the SQLite truth
    "dialog": 4,         # Familiars' dialogue tree (recall fills tree_distance from it)
    "recall": 5,
    "status": 5.5,       # counts and statistics of a store (memlab status, /api/memory_status)
    "api": 6,            # the facade over store, write and recall
    "chat": 6.5,         # one chat turn over the api (ChatSession)
    "serve": 6.6,        # the HTTP API over the api (memlab serve)
    "bench": 7,          # replays datasets through the api
    "tune": 7.5,         # sweeps, fits and folds over bench's cached replays
    "cli": 8, "__init__": 8,
    "workbench": 8,      # memlab.bench(...) and memlab.sweep(...): the commands' Python twins
    "plots": 8,          # memlab.plots: one namespace over every layer's figures
    "lab": 8,            # memlab lab: JupyterLab on the notebooks (home, errors)
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "memlab":
            if node.module == "memlab":        # from memlab import forgetting
                out += [(node.lineno, f"memlab.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "memlab"]
    return out


def test_every_module_has_a_layer():
    layers = {p.relative_to(PACKAGE).with_suffix("").parts[0] for p in PACKAGE.rglob("*.py")}
    assert layers - {"__main__"} <= set(RANK), sorted(layers - set(RANK))


def test_dependencies_run_one_way():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = path.relative_to(PACKAGE).with_suffix("").parts[0]
        for line, module in _imports(path):
            if RANK.get(_layer(module), 99) > RANK[me]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert wrong == [], "\n".join(wrong)

"""The dialogue tree's JSON file (§5.6) and where it lives.

The document has exactly the keys ``nodes``, ``roots``, ``_last_id`` (in that order) and each node
the keys of §5.6 in its order (``id, title, content, node_type, parent, children, embedding,
timestamp, origin, metadata``). memlab writes it as the spec shows it: the three keys indented by
two spaces, one node object per line, ``", "`` and ``": "`` separators, non-ASCII text as itself
(UTF-8), numbers as Python's shortest repr (a timestamp is a float: ``1724860800.0``). A file in
this layout is read and written back byte for byte (the spec's own example wraps each node over
three lines for the page; read and written back it gives the same JSON value, each node on one
line). Node ``level`` is not stored: it is derived from the parents on load.

Loading checks the document whole (every error names the file and ``nodes[i].key``): ids equal
list positions, parents and children agree, ``roots`` lists exactly the nodes without a parent,
no cycle, all embeddings of one dimension, ``_last_id`` a node id (or null for an empty tree).

Path: ``workspace/agents/<agent_id>/dialogue_<n>/dialogue.json`` (:func:`dialogue_path`; agent
ids are used as given, ``agent_0`` by default, as the workspace paths of §5.2.4 do).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlab.config import DialogTreeConfig, MemlabConfig
from memlab.dialog.node import JSON_KEYS, node_from_dict
from memlab.dialog.tree import DialogTree
from memlab.errors import InvalidInput, StoreError
from memlab.files import write_atomic

__all__ = ["to_json", "from_json", "save", "load", "dialogue_path", "DOC_KEYS"]

DOC_KEYS = ("nodes", "roots", "_last_id")
FILE_NAME = "dialogue.json"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def to_json(tree: DialogTree) -> str:
    """The tree as the §5.6 document (layout in the module docstring), ending in a newline."""
    nodes = [n.to_dict() for n in tree.nodes]
    try:
        lines = [_dumps(n) for n in nodes]
    except (TypeError, ValueError) as exc:   # NaN, inf or a non-JSON value in a node
        raise InvalidInput("nodes", f"not storable as JSON ({exc})", None) from None
    body = ",\n".join("    " + line for line in lines)
    nodes_text = "[\n" + body + "\n  ]" if lines else "[]"
    return ("{\n"
            f'  "nodes": {nodes_text},\n'
            f'  "roots": {_dumps(list(tree.roots))},\n'
            f'  "_last_id": {_dumps(tree.last_id)}\n'
            "}\n")


def from_json(text: str, *, cfg: MemlabConfig | DialogTreeConfig | None = None,
              embedder: Any = None, where: str = "") -> DialogTree:
    """A tree from its §5.6 document. InvalidInput (naming ``where`` and the key) when the
    document is not one."""
    try:
        doc = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(where or "json", f"not a JSON document ({exc})", None) from None
    if not isinstance(doc, dict) or tuple(doc) != DOC_KEYS:
        raise InvalidInput(where or "json", f"must be an object with the keys "
                           f"{', '.join(DOC_KEYS)} in that order",
                           list(doc) if isinstance(doc, dict) else type(doc).__name__)
    raw = doc["nodes"]
    if not isinstance(raw, list):
        raise InvalidInput(f"{where}nodes", "must be a list", type(raw).__name__)
    nodes = [node_from_dict(d, index=i, n=len(raw), where=where) for i, d in enumerate(raw)]
    dims = {len(n.embedding) for n in nodes}
    if len(dims) > 1 or 0 in dims:
        raise InvalidInput(f"{where}nodes", "every node needs an embedding, all of one dimension",
                           sorted(dims))
    for n in nodes:
        if n.parent is not None and n.id not in nodes[n.parent].children:
            raise InvalidInput(f"{where}nodes[{n.id}].parent", f"node {n.parent} does not list "
                               f"{n.id} among its children", n.parent)
        for c in n.children:
            if nodes[c].parent != n.id:
                raise InvalidInput(f"{where}nodes[{n.id}].children", f"node {c}'s parent is "
                                   f"{nodes[c].parent}, not {n.id}", n.children)
        if len(set(n.children)) != len(n.children):
            raise InvalidInput(f"{where}nodes[{n.id}].children", "lists a node twice", n.children)
    roots = doc["roots"]
    want = [n.id for n in nodes if n.parent is None]
    if not isinstance(roots, list) or sorted(r for r in roots if isinstance(r, int)) != want \
            or len(roots) != len(want) or any(isinstance(r, bool) for r in roots):
        raise InvalidInput(f"{where}roots", f"must list exactly the nodes without a parent "
                           f"({want})", roots)
    for n in _depth_first(nodes, roots, where):
        n.level = 0 if n.parent is None else nodes[n.parent].level + 1
    last = doc["_last_id"]
    if last is None and nodes or last is not None and (
            isinstance(last, bool) or not isinstance(last, int) or not 0 <= last < len(nodes)):
        raise InvalidInput(f"{where}_last_id", "must be a node id (null only for an empty tree)",
                           last)
    tree = DialogTree(cfg=cfg, embedder=embedder)
    tree._restore(nodes, roots, last)
    return tree


def _depth_first(nodes, roots, where):
    """The nodes from the roots down (parents before children); every node exactly once, or the
    parent links hold a cycle (InvalidInput)."""
    seen, order, todo = set(), [], list(reversed(roots))
    while todo:
        i = todo.pop()
        if i in seen:
            raise InvalidInput(f"{where}nodes[{i}]", "reached twice from the roots", i)
        seen.add(i)
        order.append(nodes[i])
        todo.extend(reversed(nodes[i].children))
    if len(order) != len(nodes):
        lost = sorted(set(range(len(nodes))) - seen)
        raise InvalidInput(f"{where}nodes[{lost[0]}].parent", "not reachable from a root "
                           "(a cycle of parents)", lost)
    return order


def save(tree: DialogTree, path: str | Path) -> Path:
    """Write the tree to ``path`` whole or not at all (a file beside it, then renamed)."""
    path = Path(path)
    text = to_json(tree)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as exc:
        raise StoreError(f"{path}: cannot write the dialogue tree ({exc})", path=str(path)) \
            from None
    return path


def load(path: str | Path, *, cfg: MemlabConfig | DialogTreeConfig | None = None,
         embedder: Any = None) -> DialogTree:
    """The tree stored at ``path`` (errors name the file)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: cannot read the dialogue tree ({exc})", path=str(path)) \
            from None
    return from_json(text, cfg=cfg, embedder=embedder, where=f"{path}: ")


def _component(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or value in (".", "..") \
            or any(c in value for c in "/\\\0"):
        raise InvalidInput(what, "must be a non-empty name without path separators", value)
    return value


def dialogue_path(workspace: str | Path, *, agent_id: str = "agent_0",
                  dialogue: int | str = 0) -> Path:
    """``workspace/agents/<agent_id>/dialogue_<n>/dialogue.json`` (§5.6). ``dialogue``: the
    number n, or the folder's whole name (``"dialogue_3"``)."""
    if isinstance(dialogue, bool) or not isinstance(dialogue, (int, str)) \
            or isinstance(dialogue, int) and dialogue < 0:
        raise InvalidInput("dialogue", "a dialogue number >= 0 or a folder name", dialogue)
    folder = f"dialogue_{dialogue}" if isinstance(dialogue, int) else dialogue
    return (Path(workspace) / "agents" / _component(agent_id, "agent_id")
            / _component(folder, "dialogue") / FILE_NAME)


# the order of a stored node's keys, re-exported for the format's readers
NODE_KEYS = JSON_KEYS

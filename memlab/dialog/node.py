"""A node of Familiars' dialogue tree (§5.5) and its JSON form (§5.6).

A node is one dialogue turn: a user's question (``Q``, origin ``user``), the model's answer to it
(``A``, origin ``response``) or an answer the agent starts on its own (``A``, origin ``proactive``:
no preceding Q, §5.5.1). ``id`` is the node's index in the tree's list; ``level`` its depth (a root
is 0). ``level`` is not part of the stored JSON (§5.6 lists the keys): it is derived from the
parents when a tree is loaded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from memlab.errors import InvalidInput

NODE_TYPES = ("Q", "A")
ORIGINS = ("user", "response", "proactive")
#: the origins each node type may have (§5.5.1): Q nodes are the user's, A nodes the model's
ORIGINS_OF = {"Q": ("user",), "A": ("response", "proactive")}
#: the keys of a stored node, in the order of §5.6
JSON_KEYS = ("id", "title", "content", "node_type", "parent", "children", "embedding",
             "timestamp", "origin", "metadata")
ELLIPSIS = "…"


@dataclass
class Node:
    """One turn (§5.5). ``timestamp`` is Unix seconds, always passed in (memlab reads no wall
    clock: the 0.0 default is only for a hand-made node)."""

    title: str
    content: str = ""
    id: int = -1
    level: int = 0
    parent: int | None = None
    node_type: str = "Q"
    embedding: list[float] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    timestamp: float = 0.0
    origin: str = "response"
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The stored form: the keys of §5.6 in its order (``level`` is derived, not stored)."""
        return {"id": self.id, "title": self.title, "content": self.content,
                "node_type": self.node_type, "parent": self.parent,
                "children": list(self.children), "embedding": list(self.embedding),
                "timestamp": self.timestamp, "origin": self.origin, "metadata": self.metadata}


def make_title(content: str, max_chars: int) -> str:
    """The node's title: ``content`` with its whitespace runs folded to one space, cut to
    ``max_chars`` characters plus ``…`` when longer (§5.5: ≤40 characters + "…")."""
    flat = " ".join(content.split())
    return flat if len(flat) <= max_chars else flat[:max_chars] + ELLIPSIS


def check_kind(node_type: Any, origin: Any, *, where: str = "") -> None:
    """InvalidInput unless ``node_type`` is Q or A and ``origin`` one of that type's origins."""
    if node_type not in NODE_TYPES:
        raise InvalidInput(f"{where}node_type", "must be 'Q' or 'A'", node_type)
    if origin not in ORIGINS_OF[node_type]:
        raise InvalidInput(f"{where}origin", f"a {node_type} node's origin is one of "
                           f"{', '.join(ORIGINS_OF[node_type])} (§5.5.1)", origin)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(where, "must be a finite number", value)
    return float(value)


def _node_id(value: Any, n: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n:
        raise InvalidInput(where, f"must be a node id (an int in [0, {n - 1}])", value)
    return value


def node_from_dict(data: Any, *, index: int, n: int, where: str = "") -> Node:
    """A stored node (§5.6) back as a :class:`Node` (``level`` 0 until the tree sets it).
    InvalidInput naming ``nodes[index].<key>`` for a missing, unknown or malformed key."""
    at = f"{where}nodes[{index}]"
    if not isinstance(data, Mapping):
        raise InvalidInput(at, "must be a JSON object", type(data).__name__)
    keys = tuple(data)
    if set(keys) != set(JSON_KEYS):
        missing = [k for k in JSON_KEYS if k not in data]
        extra = [k for k in keys if k not in JSON_KEYS]
        raise InvalidInput(at, f"keys must be {', '.join(JSON_KEYS)}"
                           + (f"; missing {missing}" if missing else "")
                           + (f"; unknown {extra}" if extra else ""), sorted(map(str, keys)))
    if data["id"] != index or isinstance(data["id"], bool):
        raise InvalidInput(f"{at}.id", f"must equal the node's index in the list ({index})",
                           data["id"])
    for key in ("title", "content"):
        if not isinstance(data[key], str):
            raise InvalidInput(f"{at}.{key}", "must be a string", type(data[key]).__name__)
    check_kind(data["node_type"], data["origin"], where=f"{at}.")
    parent = None if data["parent"] is None else _node_id(data["parent"], n, f"{at}.parent")
    if not isinstance(data["children"], list):
        raise InvalidInput(f"{at}.children", "must be a list of node ids", data["children"])
    children = [_node_id(c, n, f"{at}.children[{j}]") for j, c in enumerate(data["children"])]
    if not isinstance(data["embedding"], list):
        raise InvalidInput(f"{at}.embedding", "must be a list of numbers",
                           type(data["embedding"]).__name__)
    embedding = [_number(x, f"{at}.embedding[{j}]") for j, x in enumerate(data["embedding"])]
    if not isinstance(data["metadata"], dict):
        raise InvalidInput(f"{at}.metadata", "must be a JSON object",
                           type(data["metadata"]).__name__)
    return Node(title=data["title"], content=data["content"], id=index, parent=parent,
                node_type=data["node_type"], embedding=embedding, children=children,
                timestamp=_number(data["timestamp"], f"{at}.timestamp"), origin=data["origin"],
                metadata=data["metadata"])

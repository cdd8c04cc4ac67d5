"""Familiars' dialogue tree (§5.4): Q/A nodes attached by score, queried by score.

**Attach** (§5.4.1). A new user question (and a proactive answer, which has no question before it)
chooses its parent among *all* nodes by

    score = alpha * cos(new, cand) + beta * exp(-max(0, t_new - t_cand) / recency_tau)
            + delta * [cand is the immediate predecessor (the node added last)]

The best candidate (the first one on a tie, as the spec's strict ``>``) wins; a best score below
``tau_attach`` makes the node a new root (a topic shift: the tree is a forest); a best candidate
that is a Q node with a parent hands the new node to that parent (sub-topics hang under the common
answer). A response answers a question: it is that Q node's child (by default the node added last,
which must be a Q).

**Query** (§5.4.2). ``final = alpha * cos + beta * recency + gamma * exp(-tree_distance /
tree_tau)``. memlab's choice of the distance's origin, the query's *anchor*: the node the query
would attach to by the attach rule above (delta included: a question asked now follows the last
turn), so a memory in the query's own topic counts more. A query below ``tau_attach`` starts a new
topic and has no anchor: every tree distance is unknown and its term is 0. Two nodes of different
trees have no path: :meth:`DialogTree.tree_distance` gives None (not infinity), which the raw-signal
table stores as NaN (unknown), whose term is 0 — the value exp(-inf) would give.

Embeddings come from the :class:`~memlab.embed.Embedder` passed in (``embed_documents`` for turns,
``embed_queries`` for queries), or are passed with each turn; timestamps are always passed in.

Memories written from a turn are linked to its node (:meth:`DialogTree.link_memory`, stored in the
node's ``metadata["memory_ids"]``), so recall can look up each memory's distance from the anchor
(:meth:`DialogTree.memory_distances`).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.config import DialogTreeConfig, MemlabConfig
from memlab.dialog.node import Node, check_kind, make_title
from memlab.errors import InvalidInput

__all__ = ["DialogTree", "MEMORY_IDS"]

#: the node metadata key listing the ids of the memories written from the turn
MEMORY_IDS = "memory_ids"


def _section(cfg: MemlabConfig | DialogTreeConfig | None) -> DialogTreeConfig:
    if cfg is None:
        return DialogTreeConfig()
    if isinstance(cfg, MemlabConfig):
        return cfg.dialog_tree
    if isinstance(cfg, DialogTreeConfig):
        return cfg
    raise InvalidInput("cfg", "must be a MemlabConfig or a DialogTreeConfig", type(cfg).__name__)


def _time(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidInput(where, "must be a finite Unix time in seconds", value)
    return float(value)


class DialogTree:
    """A forest of Q/A nodes (§5.4-§5.6). ``cfg``: a :class:`MemlabConfig` (its ``dialog_tree``
    section) or the section itself; ``embedder``: embeds turns and queries given as text only."""

    def __init__(self, *, cfg: MemlabConfig | DialogTreeConfig | None = None,
                 embedder: Any = None) -> None:
        self.cfg = _section(cfg)
        self.embedder = embedder
        self.nodes: list[Node] = []
        self.roots: list[int] = []
        self._last_id: int | None = None
        self._vectors: list[np.ndarray] = []       # unit rows, one per node
        self._matrix: np.ndarray | None = None     # stacked lazily (rows _filled)
        self._filled = 0
        self._times: list[float] = []
        self._memory_node: dict[str, int] = {}
        #: documented degradations, counted (redaction replay falls back to the raw content)
        self.stats: Counter[str] = Counter()

    # -- size and access ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, node_id: int) -> Node:
        return self.nodes[self._id(node_id, "node_id")]

    @property
    def last_id(self) -> int | None:
        """The node added last (the immediate predecessor of the next one), None when empty."""
        return self._last_id

    def _id(self, node_id: Any, where: str) -> int:
        if isinstance(node_id, bool) or not isinstance(node_id, (int, np.integer)) \
                or not 0 <= int(node_id) < len(self.nodes):
            raise InvalidInput(where, f"not a node id of this tree (0..{len(self.nodes) - 1})",
                               node_id)
        return int(node_id)

    # -- vectors -----------------------------------------------------------------------------
    def _vector(self, text: str, embedding: Any, *, query: bool, where: str) -> np.ndarray:
        if embedding is None:
            if self.embedder is None:
                raise InvalidInput(where, "no embedding given and the tree has no embedder", None)
            fn = self.embedder.embed_queries if query else self.embedder.embed_documents
            embedding = np.asarray(fn([text]), dtype=np.float64)[0]
        vec = np.asarray(embedding, dtype=np.float64)
        if vec.ndim != 1 or not len(vec) or not np.all(np.isfinite(vec)):
            raise InvalidInput(where, "must be a non-empty 1-d vector of finite numbers",
                               getattr(vec, "shape", None))
        if self._vectors and len(vec) != len(self._vectors[0]):
            raise InvalidInput(where, f"has {len(vec)} dimensions; the tree's nodes have "
                               f"{len(self._vectors[0])}", len(vec))
        return vec

    @staticmethod
    def _unit(vec: np.ndarray) -> np.ndarray:
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm > 0 else np.zeros_like(vec)

    def _stack(self) -> np.ndarray:
        """The unit vectors as one (n, dim) matrix (a buffer grown by doubling)."""
        n = len(self._vectors)
        if not n:
            return np.zeros((0, 0))
        if self._matrix is None or len(self._matrix) < n:
            buf = np.zeros((max(16, 2 * n), len(self._vectors[0])))
            if self._matrix is not None:
                buf[:self._filled] = self._matrix[:self._filled]
            self._matrix = buf
        if self._filled < n:
            self._matrix[self._filled:n] = np.vstack(self._vectors[self._filled:n])
            self._filled = n
        return self._matrix[:n]

    def _time_array(self) -> np.ndarray:
        return np.asarray(self._times, dtype=np.float64)

    # -- attach (§5.4.1) ---------------------------------------------------------------------
    def attach_scores(self, text: str = "", *, timestamp: float, embedding: Any = None,
                      query: bool = False) -> pd.DataFrame:
        """The attach score of every node for a new turn (or a query, ``query=True``) at
        ``timestamp``: columns id, node_type, cosine, recency, is_predecessor and score
        (alpha*cosine + beta*recency + delta*is_predecessor), in node order."""
        t = _time(timestamp, "timestamp")
        vec = self._unit(self._vector(text, embedding, query=query, where="embedding"))
        return self._scores(vec, t)

    def _scores(self, unit: np.ndarray, t: float) -> pd.DataFrame:
        cos, recency, pred, score = self._terms(unit, t)
        return pd.DataFrame({"id": np.arange(len(self.nodes)),
                             "node_type": [x.node_type for x in self.nodes],
                             "cosine": cos, "recency": recency, "is_predecessor": pred,
                             "score": score})

    def _terms(self, unit: np.ndarray, t: float) -> tuple[np.ndarray, ...]:
        """cosine, recency, is_predecessor and the attach score of every node (arrays)."""
        c = self.cfg
        n = len(self.nodes)
        cos = self._stack() @ unit if n else np.zeros(0)
        dt = np.maximum(0.0, t - self._time_array())
        recency = np.exp(-dt / c.recency_tau)
        pred = (np.arange(n) == self._last_id).astype(np.float64)
        return cos, recency, pred, c.alpha * cos + c.beta * recency + c.delta * pred

    def _choose_parent(self, unit: np.ndarray, t: float) -> int | None:
        if not self.nodes:
            return None
        scores = self._terms(unit, t)[3]
        best = int(np.argmax(scores))            # the first of equal maxima
        if scores[best] < self.cfg.tau_attach:
            return None                          # a new root: a topic shift
        cand = self.nodes[best]
        if cand.node_type == "Q" and cand.parent is not None:
            return cand.parent                   # climb to the Q's parent (its A)
        return best

    def choose_parent(self, text: str = "", *, timestamp: float,
                      embedding: Any = None) -> int | None:
        """The node a new turn at ``timestamp`` would attach to (None: a new root), §5.4.1."""
        t = _time(timestamp, "timestamp")
        unit = self._unit(self._vector(text, embedding, query=False, where="embedding"))
        return self._choose_parent(unit, t)

    def anchor(self, text: str = "", *, timestamp: float, embedding: Any = None) -> int | None:
        """The query's anchor: the node a query asked at ``timestamp`` would attach to, by the
        attach rule (query embedding); None when it would start a new root."""
        t = _time(timestamp, "timestamp")
        unit = self._unit(self._vector(text, embedding, query=True, where="embedding"))
        return self._choose_parent(unit, t)

    # -- adding turns ------------------------------------------------------------------------
    def add(self, content: str, *, node_type: str, origin: str, timestamp: float,
            embedding: Any = None, parent: int | None | str = "attach",
            metadata: Mapping[str, Any] | None = None) -> Node:
        """Add one turn. ``parent``: ``"attach"`` chooses it by §5.4.1; None makes a root; an id
        hangs the node there. Returns the new node (its id is its index)."""
        if not isinstance(content, str):
            raise InvalidInput("content", "must be a string", type(content).__name__)
        check_kind(node_type, origin)
        t = _time(timestamp, "timestamp")
        vec = self._vector(content, embedding, query=False, where="embedding")
        unit = self._unit(vec)
        if isinstance(parent, str):
            if parent != "attach":
                raise InvalidInput("parent", "'attach', None or a node id", parent)
            parent_id = self._choose_parent(unit, t)
        else:
            parent_id = None if parent is None else self._id(parent, "parent")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput("metadata", "must be a mapping", type(metadata).__name__)
        node = Node(title=make_title(content, self.cfg.title_max_chars), content=content,
                    id=len(self.nodes), parent=parent_id, node_type=node_type,
                    embedding=[float(x) for x in vec], timestamp=t, origin=origin,
                    metadata=dict(metadata or {}))
        self._append(node, unit)
        return node

    def _append(self, node: Node, unit: np.ndarray) -> None:
        if node.parent is None:
            node.level = 0
            self.roots.append(node.id)
        else:
            parent = self.nodes[node.parent]
            node.level = parent.level + 1
            parent.children.append(node.id)
        self.nodes.append(node)
        self._vectors.append(unit)
        self._times.append(node.timestamp)
        for mid in node.metadata.get(MEMORY_IDS, ()) or ():
            self._memory_node.setdefault(str(mid), node.id)
        self._last_id = node.id

    def add_question(self, content: str, *, timestamp: float, embedding: Any = None,
                     metadata: Mapping[str, Any] | None = None) -> Node:
        """A user's turn: a Q node (origin user) attached by §5.4.1."""
        return self.add(content, node_type="Q", origin="user", timestamp=timestamp,
                        embedding=embedding, metadata=metadata)

    def add_response(self, content: str, *, timestamp: float, to: int | None = None,
                     embedding: Any = None, metadata: Mapping[str, Any] | None = None) -> Node:
        """The model's answer to the Q node ``to`` (default: the node added last, which must be a
        Q node): an A node (origin response), that Q's child."""
        q = self._last_id if to is None else self._id(to, "to")
        if q is None or self.nodes[q].node_type != "Q":
            raise InvalidInput("to", "a response answers a Q node (the last node is not one: "
                               "use add_proactive for an answer without a question)", q)
        return self.add(content, node_type="A", origin="response", timestamp=timestamp,
                        embedding=embedding, parent=q, metadata=metadata)

    def add_proactive(self, content: str, *, timestamp: float, embedding: Any = None,
                      metadata: Mapping[str, Any] | None = None) -> Node:
        """An answer the agent starts on its own (no preceding Q): an A node (origin proactive)
        attached by §5.4.1 like a question."""
        return self.add(content, node_type="A", origin="proactive", timestamp=timestamp,
                        embedding=embedding, metadata=metadata)

    # -- distances ---------------------------------------------------------------------------
    def tree_distance(self, a: int, b: int) -> int | None:
        """Hops between nodes ``a`` and ``b`` (0 for the same node); None when they lie in
        different trees of the forest (no path)."""
        a, b = self._id(a, "a"), self._id(b, "b")
        depth_of_a = {}
        x, d = a, 0
        while x is not None:
            depth_of_a[x] = d
            x, d = self.nodes[x].parent, d + 1
        x, d = b, 0
        while x is not None:
            if x in depth_of_a:
                return d + depth_of_a[x]
            x, d = self.nodes[x].parent, d + 1
        return None

    def distances_from(self, node_id: int) -> dict[int, int]:
        """Hops from ``node_id`` to every node of its tree (breadth first); nodes of other trees
        are absent."""
        start = self._id(node_id, "node_id")
        out = {start: 0}
        todo = deque([start])
        while todo:
            x = todo.popleft()
            node = self.nodes[x]
            for y in ([node.parent] if node.parent is not None else []) + node.children:
                if y not in out:
                    out[y] = out[x] + 1
                    todo.append(y)
        return out

    # -- memories written from turns ---------------------------------------------------------
    def link_memory(self, node_id: int, memory_id: str) -> None:
        """Record that memory ``memory_id`` was written from node ``node_id``'s turn (kept in the
        node's ``metadata["memory_ids"]``, so it is saved with the tree)."""
        nid = self._id(node_id, "node_id")
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidInput("memory_id", "must be a non-empty string", memory_id)
        ids = self.nodes[nid].metadata.setdefault(MEMORY_IDS, [])
        if memory_id not in ids:
            ids.append(memory_id)
        self._memory_node.setdefault(memory_id, nid)

    def node_of_memory(self, memory_id: str) -> int | None:
        """The node memory ``memory_id`` was written from (None: not linked)."""
        return self._memory_node.get(memory_id)

    def memory_distances(self, anchor: int | None) -> dict[str, float]:
        """Hops from ``anchor`` to the node of every linked memory of its tree (memories of other
        trees, and every memory when ``anchor`` is None, are absent: unknown)."""
        if anchor is None:
            return {}
        hops = self.distances_from(anchor)
        return {m: float(hops[n]) for m, n in self._memory_node.items() if n in hops}

    def record_distance(self, anchor: int | None) -> Callable[[Any], float | None]:
        """A ``(MemoryRecord) -> hops | None`` callable for the Familiars reader: the record's
        distance from ``anchor`` (None: unknown)."""
        table = self.memory_distances(anchor)
        return lambda record: table.get(getattr(record, "id", None))

    # -- query (§5.4.2) ----------------------------------------------------------------------
    def query(self, text: str = "", k: int = 5, *, now: float, embedding: Any = None
              ) -> pd.DataFrame:
        """The ``k`` best nodes for a query asked at ``now``: one row per node with id, title,
        node_type, origin, cosine, recency, tree_distance (hops from the anchor; NaN: unknown),
        tree (exp(-tree_distance/tree_tau), 0 when unknown), the three terms (cosine_term,
        recency_term, tree_term) and score = their sum; best first (ties: node order).
        ``attrs["anchor"]``: the anchor node (None: the query starts a new topic)."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInput("k", "must be an int >= 1", k)
        t = _time(now, "now")
        unit = self._unit(self._vector(text, embedding, query=True, where="embedding"))
        c = self.cfg
        anchor = self._choose_parent(unit, t)
        n = len(self.nodes)
        hops = self.distances_from(anchor) if anchor is not None else {}
        dist = np.array([hops.get(i, np.nan) for i in range(n)], dtype=np.float64)
        cos = self._stack() @ unit if n else np.zeros(0)
        recency = np.exp(-np.maximum(0.0, t - self._time_array()) / c.recency_tau)
        tree = np.where(np.isnan(dist), 0.0, np.exp(-np.nan_to_num(dist) / c.tree_tau))
        frame = pd.DataFrame({
            "id": np.arange(n), "title": [x.title for x in self.nodes],
            "node_type": [x.node_type for x in self.nodes],
            "origin": [x.origin for x in self.nodes], "cosine": cos, "recency": recency,
            "tree_distance": dist, "tree": tree, "cosine_term": c.alpha * cos,
            "recency_term": c.beta * recency, "tree_term": c.gamma * tree})
        frame["score"] = frame["cosine_term"] + frame["recency_term"] + frame["tree_term"]
        frame = frame.sort_values("score", ascending=False, kind="stable").head(k)
        frame = frame.reset_index(drop=True)
        frame.attrs["anchor"] = anchor
        return frame

    # -- storage (§5.6): memlab.dialog.storage -----------------------------------------------
    def to_json(self) -> str:
        from memlab.dialog.storage import to_json

        return to_json(self)

    @classmethod
    def from_json(cls, text: str, *, cfg: MemlabConfig | DialogTreeConfig | None = None,
                  embedder: Any = None) -> "DialogTree":
        from memlab.dialog.storage import from_json

        return from_json(text, cfg=cfg, embedder=embedder)

    def save(self, path) -> None:
        from memlab.dialog.storage import save

        save(self, path)

    @classmethod
    def load(cls, path, *, cfg: MemlabConfig | DialogTreeConfig | None = None,
             embedder: Any = None) -> "DialogTree":
        from memlab.dialog.storage import load

        return load(path, cfg=cfg, embedder=embedder)

    def _restore(self, nodes: Sequence[Node], roots: Sequence[int], last_id: int | None) -> None:
        """Install loaded nodes as they are (checked by storage.from_json)."""
        self.nodes = list(nodes)
        self.roots = list(roots)
        self._last_id = last_id
        self._vectors = [self._unit(np.asarray(x.embedding, dtype=np.float64)) for x in nodes]
        self._matrix, self._filled = None, 0
        self._times = [x.timestamp for x in nodes]
        self._memory_node = {}
        for x in nodes:
            for mid in x.metadata.get(MEMORY_IDS, ()) or ():
                self._memory_node.setdefault(str(mid), x.id)

    # -- redaction replay (§5.5.2) -----------------------------------------------------------
    def content_for_llm(self, node_id: int) -> str:
        """:func:`memlab.dialog.redact.node_content_for_llm` of a node, counted in ``stats``."""
        from memlab.dialog.redact import node_content_for_llm

        return node_content_for_llm(self[node_id], stats=self.stats)

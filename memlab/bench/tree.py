"""A conversation replayed into a Familiars dialogue tree (``bench.dialog_tree``, the familiars
preset): the tree's distances become the raw-signal table's ``tree_distance``.

Turns are added as they arrive (in timestamp order, in the batches replay writes them), one tree
per conversation, each item one node linked to its memory (the item id). Roles (memlab's choice,
as datasets name speakers, not roles): the conversation's user is the speaker named ``user``
(any case) when there is one (LongMemEval, MemDaily), else the speaker of its first item (LoCoMo's
``speaker_a``, the owner of a memlab-lifelog or MADial archive). The user's turns are Q nodes
(origin user), attached by the attach score (§5.4.1); another speaker's turn is an A node: a
response (the child of the Q node it follows) when the turn before it is a Q node, else proactive
(attached by score, as the agent starting a topic). A node's embedding is its item's document
vector (the rendered text replay indexes).

A question is not added to the tree: it is asked of the tree as it stands at ``asked_at``. Its
anchor is the node it would attach to (query vector, its time, the last turn as predecessor); its
distances are the hops from there to each turn's node (:meth:`DialogTree.memory_distances`), and
unknown without an anchor (a new topic) or across trees.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from memlab.bench.datasets.canonical import Item
from memlab.config import MemlabConfig
from memlab.dialog import DialogTree

__all__ = ["ConversationTree", "user_speaker"]


def user_speaker(items: Sequence[Item]) -> str | None:
    """The speaker whose turns are Q nodes: ``user`` (any case) if present, else the first
    item's speaker (None for no items)."""
    for it in items:
        if (it.speaker or "").lower() == "user":
            return it.speaker
    return items[0].speaker if items else None


class ConversationTree:
    """One conversation's tree during a replay."""

    def __init__(self, items: Sequence[Item], cfg: MemlabConfig) -> None:
        self.tree = DialogTree(cfg=cfg)
        self.user = user_speaker(items)
        self.counts: Counter[str] = Counter()

    def add(self, items: Sequence[Item], vectors: np.ndarray) -> None:
        """Add ``items`` (the next turns, in order) with their document vectors."""
        tree = self.tree
        for item, vec in zip(items, vectors):
            ts = item.timestamp.timestamp()
            meta = {"memory_ids": [item.item_id]}
            last = tree.last_id
            if item.speaker == self.user:
                tree.add_question(item.text, timestamp=ts, embedding=vec, metadata=meta)
            elif last is not None and tree.nodes[last].node_type == "Q":
                tree.add_response(item.text, timestamp=ts, embedding=vec, metadata=meta)
            else:
                tree.add_proactive(item.text, timestamp=ts, embedding=vec, metadata=meta)
            self.counts[f"dialog tree: {tree.nodes[-1].origin} nodes"] += 1

    def distances(self, query_vector: np.ndarray, asked_at: float) -> dict[str, float] | None:
        """Hops from the question's anchor to each turn's memory id; None (unknown) when the
        tree is empty or the question starts a new topic."""
        if not len(self.tree):
            self.counts["dialog tree: questions without an anchor"] += 1
            return None
        anchor = self.tree.anchor(timestamp=asked_at, embedding=query_vector)
        if anchor is None:
            self.counts["dialog tree: questions without an anchor"] += 1
            return None
        self.counts["dialog tree: questions with an anchor"] += 1
        return self.tree.memory_distances(anchor)

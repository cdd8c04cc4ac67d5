"""Familiars' dialogue tree (§5.4-§5.6): Q/A nodes, attach and query scoring, the JSON file,
redaction replay and a picture of the forest.

>>> tree = DialogTree(cfg=cfg, embedder=embedder)
>>> q = tree.add_question("我下周去东京出差", timestamp=t)
>>> a = tree.add_response("需要我帮你订酒店吗？", timestamp=t + 5)
>>> tree.query("东京的酒店", k=3, now=t + 60)      # a DataFrame, best first, with its terms
"""

from memlab.dialog.node import NODE_TYPES, ORIGINS, Node, make_title
from memlab.dialog.redact import content_hash, node_content_for_llm
from memlab.dialog.storage import dialogue_path, from_json, load, save, to_json
from memlab.dialog.tree import MEMORY_IDS, DialogTree

__all__ = ["Node", "DialogTree", "NODE_TYPES", "ORIGINS", "MEMORY_IDS", "make_title",
           "content_hash", "node_content_for_llm", "dialogue_path", "to_json", "from_json",
           "save", "load", "plot_forest"]


def plot_forest(tree, ax=None, **kwargs):
    """:func:`memlab.dialog.plot.plot_forest` (matplotlib and networkx imported when called)."""
    from memlab.dialog.plot import plot_forest as _plot

    return _plot(tree, ax, **kwargs)

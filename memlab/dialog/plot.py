"""A picture of the dialogue forest for notebooks: one layered tree per root, side by side.

Layout (computed here, no graphviz): a node's depth is its row (roots on top); leaves take the
next free column from left to right, a parent sits above the middle of its children, and each tree
starts right of the previous one. Q nodes and A nodes have their own colours; roots are drawn as
squares with a thick border; proactive answers are outlined dashed. Drawn with networkx.
"""

from __future__ import annotations

from typing import Any

from memlab.dialog.tree import DialogTree

__all__ = ["forest_layout", "plot_forest", "COLOURS"]

#: node colours by node type
COLOURS = {"Q": "#4C72B0", "A": "#DD8452"}


def forest_layout(tree: DialogTree) -> dict[int, tuple[float, float]]:
    """(x, y) of every node: y = -level, x from the leaves' order (module docstring)."""
    pos: dict[int, tuple[float, float]] = {}
    next_x = 0.0
    for root in tree.roots:
        order: list[tuple[int, bool]] = [(root, False)]
        while order:                              # post-order without recursion
            nid, done = order.pop()
            node = tree.nodes[nid]
            if not done and node.children:
                order.append((nid, True))
                order.extend((c, False) for c in reversed(node.children))
                continue
            if node.children:
                xs = [pos[c][0] for c in node.children]
                pos[nid] = ((min(xs) + max(xs)) / 2, -float(node.level))
            else:
                pos[nid] = (next_x, -float(node.level))
                next_x += 1.0
        next_x += 1.0                             # a gap between trees
    return pos


def plot_forest(tree: DialogTree, ax: Any = None, *, labels: str = "id") -> Any:
    """Draw the forest on ``ax`` (a new figure when None) and return the Figure. ``labels``:
    ``"id"`` (node ids), ``"title"`` (titles) or ``"none"``."""
    import matplotlib.pyplot as plt
    import networkx as nx

    from memlab.errors import InvalidInput

    if labels not in ("id", "title", "none"):
        raise InvalidInput("labels", "one of id, title, none", labels)
    if ax is None:
        width = max(4.0, min(24.0, 0.6 * max(1, len(tree))))
        depth = max((n.level for n in tree.nodes), default=0)
        fig, ax = plt.subplots(figsize=(width + 1.4, max(3.0, 0.9 * (depth + 1))),
                               layout="constrained")
    else:
        fig = ax.figure
    graph = nx.DiGraph()
    graph.add_nodes_from(n.id for n in tree.nodes)
    graph.add_edges_from((n.parent, n.id) for n in tree.nodes if n.parent is not None)
    pos = forest_layout(tree)
    roots = set(tree.roots)
    for shape, members in (("s", [n for n in tree.nodes if n.id in roots]),
                           ("o", [n for n in tree.nodes if n.id not in roots])):
        if not members:
            continue
        nx.draw_networkx_nodes(
            graph, pos, nodelist=[n.id for n in members], ax=ax, node_shape=shape,
            node_color=[COLOURS[n.node_type] for n in members], node_size=360,
            edgecolors="black", linewidths=[2.5 if n.id in roots else 0.8 for n in members])
    proactive = [n.id for n in tree.nodes if n.origin == "proactive"]
    if proactive:
        coll = nx.draw_networkx_nodes(graph, pos, nodelist=proactive, ax=ax, node_size=560,
                                      node_color="none", edgecolors="black", linewidths=1.0)
        coll.set_linestyle("--")
    nx.draw_networkx_edges(graph, pos, ax=ax, arrows=True, arrowsize=8, node_size=360)
    if labels != "none":
        text = {n.id: (str(n.id) if labels == "id" else n.title) for n in tree.nodes}
        nx.draw_networkx_labels(graph, pos, labels=text, ax=ax, font_size=8,
                                font_color="white" if labels == "id" else "black")
    handles = [plt.Line2D([], [], marker="o", ls="", color=COLOURS["Q"], label="Q (user)"),
               plt.Line2D([], [], marker="o", ls="", color=COLOURS["A"], label="A (response)"),
               plt.Line2D([], [], marker="s", ls="", color="grey", markeredgecolor="black",
                          markeredgewidth=2, label="root")]
    # beside the forest, not on it (upper right sat on a root there)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)
    ax.set_title(f"dialogue forest: {len(tree)} nodes, {len(tree.roots)} trees")
    ax.set_axis_off()
    return fig

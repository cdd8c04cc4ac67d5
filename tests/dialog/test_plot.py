"""The forest picture: a layered layout (depth = row, parents above their children's middle, one
tree after another) drawn with networkx."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from memlab.dialog import DialogTree, plot_forest  # noqa: E402
from memlab.dialog.plot import forest_layout  # noqa: E402
from memlab.errors import InvalidInput  # noqa: E402

E = np.eye(3)


def _forest() -> DialogTree:
    """Q0 -> A1 -> {Q2 -> A3, Q4}; a second root Q5 (a topic shift) with a proactive child."""
    tree = DialogTree()
    tree.add_question("我下周去东京出差", timestamp=0.0, embedding=E[0])
    tree.add_response("需要订酒店吗？", timestamp=1.0, embedding=E[0], to=0)
    tree.add("酒店在新宿", node_type="Q", origin="user", timestamp=2.0, embedding=E[0], parent=1)
    tree.add_response("Booked", timestamp=3.0, embedding=E[0], to=2)
    tree.add("And the flight?", node_type="Q", origin="user", timestamp=4.0, embedding=E[1],
             parent=1)
    tree.add("Recommend a novel", node_type="Q", origin="user", timestamp=5.0, embedding=E[2],
             parent=None)
    tree.add("Your passport expires soon", node_type="A", origin="proactive", timestamp=6.0,
             embedding=E[2], parent=5)
    return tree


def test_the_layout_is_layered():
    pos = forest_layout(_forest())
    assert {i: y for i, (x, y) in pos.items()} == {0: 0, 1: -1, 2: -2, 3: -3, 4: -2, 5: 0, 6: -1}
    # leaves left to right: A3 at 0, Q4 at 1; Q2 above A3; A1 over the middle of Q2 and Q4;
    # the second tree after a gap: A6 at 3
    assert pos[3][0] == 0 and pos[4][0] == 1 and pos[2][0] == 0 and pos[1][0] == 0.5
    assert pos[0][0] == 0.5 and pos[6][0] == 3 and pos[5][0] == 3


def test_plot_forest_returns_a_figure_with_every_node(tmp_path):
    import matplotlib.pyplot as plt

    tree = _forest()
    fig = plot_forest(tree)
    assert fig.axes[0].get_title() == "dialogue forest: 7 nodes, 2 trees"
    fig.savefig(tmp_path / "forest.png")
    assert (tmp_path / "forest.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt.close(fig)
    fig, ax = plt.subplots()
    assert plot_forest(tree, ax, labels="title") is fig
    texts = {t.get_text() for t in ax.texts}
    assert "我下周去东京出差" in texts and "Booked" in texts
    plt.close(fig)
    with pytest.raises(InvalidInput):
        plot_forest(tree, labels="bogus")
    empty = plot_forest(DialogTree())
    assert empty.axes[0].get_title() == "dialogue forest: 0 nodes, 0 trees"
    plt.close("all")

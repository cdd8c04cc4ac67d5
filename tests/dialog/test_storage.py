"""The dialogue tree's JSON file (familiars §5.6): the spec's example round-trips unchanged."""

from __future__ import annotations

import json

import pytest

from memlab.dialog import DialogTree, dialogue_path, load, save
from memlab.errors import InvalidInput, StoreError

# §5.6's example with its "..." made concrete (titles, contents, 4-d embeddings), in memlab's
# layout: each node on one line (the spec wraps them for the page).
SPEC_EXAMPLE = """{
  "nodes": [
    {"id": 0, "title": "我下周去东京出差", "content": "我下周去东京出差，帮我记一下", "node_type": "Q", "parent": null, "children": [1], "embedding": [0.1, 0.2, -0.3, 0.4], "timestamp": 1724860800.0, "origin": "user", "metadata": {}},
    {"id": 1, "title": "好的，已记下：下周东京出差", "content": "好的，已记下：下周东京出差", "node_type": "A", "parent": 0, "children": [], "embedding": [0.2, 0.1, 0.0, -0.05], "timestamp": 1724860801.0, "origin": "response", "metadata": {}}
  ],
  "roots": [0],
  "_last_id": 1
}
"""

# the same value wrapped over three lines per node, as the spec prints it
SPEC_WRAPPED = """{
  "nodes": [
    {"id": 0, "title": "我下周去东京出差", "content": "我下周去东京出差，帮我记一下", "node_type": "Q", 
     "parent": null, "children": [1], "embedding": [0.1, 0.2, -0.3, 0.4],
     "timestamp": 1724860800.0, "origin": "user", "metadata": {}},
    {"id": 1, "title": "好的，已记下：下周东京出差", "content": "好的，已记下：下周东京出差", "node_type": "A",
     "parent": 0, "children": [], "embedding": [0.2, 0.1, 0.0, -0.05],
     "timestamp": 1724860801.0, "origin": "response", "metadata": {}}
  ],
  "roots": [0],
  "_last_id": 1
}"""


def test_the_spec_example_round_trips_byte_for_byte(tmp_path):
    tree = DialogTree.from_json(SPEC_EXAMPLE)
    assert tree.to_json() == SPEC_EXAMPLE
    path = save(tree, tmp_path / "dialogue.json")
    assert path.read_bytes() == SPEC_EXAMPLE.encode("utf-8")
    assert load(path).to_json() == SPEC_EXAMPLE
    assert [n.level for n in tree.nodes] == [0, 1] and tree.last_id == 1
    assert tree[1].origin == "response" and tree[0].children == [1]


def test_the_spec_wrapped_layout_reads_as_the_same_value_with_its_key_order():
    back = DialogTree.from_json(SPEC_WRAPPED).to_json()
    assert back == SPEC_EXAMPLE
    doc = json.loads(back)
    assert list(doc) == ["nodes", "roots", "_last_id"]
    assert [list(n) for n in doc["nodes"]] == [list(n) for n in json.loads(SPEC_WRAPPED)["nodes"]]
    assert list(doc["nodes"][0]) == ["id", "title", "content", "node_type", "parent", "children",
                                     "embedding", "timestamp", "origin", "metadata"]


def test_a_built_tree_round_trips_with_metadata_and_a_forest():
    tree = DialogTree()
    tree.add_question("我想学做红烧肉", timestamp=100.0, embedding=[1.0, 0.0, 0.0])
    tree.add_response("先焯水，再炒糖色", timestamp=101.0, embedding=[0.9, 0.1, 0.0],
                      metadata={"decision_id": "d1"})
    tree.add_question("Any sci-fi novel?", timestamp=9000.0, embedding=[-1.0, 0.0, 0.0])
    tree.link_memory(0, "m_0a1b2c3d")
    text = tree.to_json()
    back = DialogTree.from_json(text)
    assert back.to_json() == text
    assert back.roots == [0, 2] and back.node_of_memory("m_0a1b2c3d") == 0
    assert back.choose_parent(timestamp=101.5, embedding=[1.0, 0.0, 0.0]) == \
        tree.choose_parent(timestamp=101.5, embedding=[1.0, 0.0, 0.0])
    tree[0].metadata["when"] = object()          # not JSON: refused by name, nothing written
    with pytest.raises(InvalidInput) as err:
        tree.to_json()
    assert err.value.field == "nodes"
    assert DialogTree().to_json() == '{\n  "nodes": [],\n  "roots": [],\n  "_last_id": null\n}\n'
    assert len(DialogTree.from_json(DialogTree().to_json())) == 0


@pytest.mark.parametrize("edit,field", [
    (lambda d: d.pop("roots"), "json"),
    (lambda d: d["nodes"][1].pop("origin"), "nodes[1]"),
    (lambda d: d["nodes"][1].update(id=5), "nodes[1].id"),
    (lambda d: d["nodes"][1].update(parent=7), "nodes[1].parent"),
    (lambda d: d["nodes"][0].update(children=[]), "nodes[1].parent"),
    (lambda d: d["nodes"][1].update(origin="user"), "nodes[1].origin"),
    (lambda d: d["nodes"][1].update(embedding=[0.1]), "nodes"),
    (lambda d: d.update(roots=[1]), "roots"),
    (lambda d: d.update(_last_id=2), "_last_id"),
    (lambda d: d["nodes"][0].update(timestamp="yesterday"), "nodes[0].timestamp"),
])
def test_a_malformed_document_is_refused_naming_the_key(edit, field):
    doc = json.loads(SPEC_EXAMPLE)
    edit(doc)
    with pytest.raises(InvalidInput) as err:
        DialogTree.from_json(json.dumps(doc))
    assert err.value.field == field


def test_a_cycle_of_parents_is_refused():
    doc = json.loads(SPEC_EXAMPLE)
    doc["nodes"][0].update(parent=1)
    doc["nodes"][1]["children"] = [0]
    doc["roots"] = []
    with pytest.raises(InvalidInput) as err:
        DialogTree.from_json(json.dumps(doc))
    assert "roots" in err.value.field or "parent" in err.value.field


def test_load_names_the_file(tmp_path):
    path = tmp_path / "dialogue.json"
    path.write_text('{"nodes": [}', encoding="utf-8")
    with pytest.raises(InvalidInput) as err:
        load(path)
    assert str(path) in err.value.field
    with pytest.raises(StoreError):
        load(tmp_path / "missing.json")


def test_dialogue_path_follows_the_spec(tmp_path):
    assert dialogue_path(tmp_path, agent_id="agent_3", dialogue=2) == \
        tmp_path / "agents" / "agent_3" / "dialogue_2" / "dialogue.json"
    assert dialogue_path("ws").as_posix() == "ws/agents/agent_0/dialogue_0/dialogue.json"
    assert dialogue_path("ws", dialogue="dialogue_x").parent.name == "dialogue_x"
    for bad in ("../x", "a/b", ""):
        with pytest.raises(InvalidInput):
            dialogue_path("ws", agent_id=bad)
    with pytest.raises(InvalidInput):
        dialogue_path("ws", dialogue=-1)

"""Redaction replay (familiars §5.5.2): masked spans replaced in reverse order; a stale hash falls
back to the raw content (logged once, counted)."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter

import pytest

from memlab.dialog import DialogTree, Node, content_hash, node_content_for_llm
from memlab.errors import InvalidInput


def _node(content: str, redactions: list, *, stale: bool = False) -> Node:
    h = content_hash(content + ("!" if stale else ""))
    return Node(title=content[:5], content=content, id=7, node_type="Q", origin="user",
                metadata={"redactions": redactions, "redactions_content_hash": h})


def test_the_hash_is_the_sha256_of_the_utf8_content():
    assert content_hash("我叫小林") == hashlib.sha256("我叫小林".encode("utf-8")).hexdigest()


def test_masked_spans_are_replaced_zh():
    text = "我叫小林，电话13812345678，住在北京朝阳区"
    name = (text.index("小林"), text.index("小林") + 2)
    phone = (text.index("138"), text.index("138") + 11)
    place = (text.index("北京"), text.index("北京") + 5)
    node = _node(text, [
        {"span": list(name), "decision": "mask", "token": "[姓名]"},
        {"span": list(phone), "decision": "mask", "token": "[电话]"},
        {"span": list(place), "decision": "ignore", "token": "[地址]"},   # kept as is
    ])
    assert node_content_for_llm(node) == "我叫[姓名]，电话[电话]，住在北京朝阳区"


def test_masked_spans_are_replaced_en_and_record_keeps_the_text():
    text = "Call Alice at 555-0100 tomorrow"
    node = _node(text, [
        {"span": [5, 10], "decision": "record", "token": "<NAME>"},
        {"span": [14, 22], "decision": "mask", "token": "<PHONE>"},
    ])
    assert node_content_for_llm(node) == "Call Alice at <PHONE> tomorrow"


def test_adjacent_spans_are_both_replaced():
    text = "AliceSmith123"
    node = _node(text, [{"span": [0, 5], "decision": "mask", "token": "<FIRST>"},
                        {"span": [5, 10], "decision": "mask", "token": "<LAST>"}])
    assert node_content_for_llm(node) == "<FIRST><LAST>123"


def test_overlapping_spans_are_masked_as_one_region_with_the_first_token():
    text = "身份证号110101199003071234结束"
    start = text.index("1101")
    # [start, start+10) and [start+6, start+18) overlap: one region, the first span's token
    node = _node(text, [{"span": [start + 6, start + 18], "decision": "mask", "token": "[生日]"},
                        {"span": [start, start + 10], "decision": "mask", "token": "[证件]"}])
    assert node_content_for_llm(node) == "身份证号[证件]结束"
    # a span nested in another: nothing of the outer one leaks either
    nested = _node("key=abcdefgh;", [{"span": [4, 12], "decision": "mask", "token": "<K>"},
                                     {"span": [6, 8], "decision": "mask", "token": "<x>"}])
    assert node_content_for_llm(nested) == "key=<K>;"


def test_a_stale_hash_falls_back_to_the_raw_content_logged_once_and_counted(caplog):
    text = "我叫小林"
    node = _node(text, [{"span": [2, 4], "decision": "mask", "token": "[姓名]"}], stale=True)
    stats: Counter = Counter()
    with caplog.at_level(logging.WARNING, logger="memlab"):
        assert node_content_for_llm(node, stats=stats) == text
        assert node_content_for_llm(node, stats=stats) == text
    assert stats["redaction: hash mismatch, raw content"] == 2
    assert sum("redactions_content_hash" in r.getMessage() for r in caplog.records) == 1
    no_hash = Node(title="x", content=text, metadata={"redactions": node.metadata["redactions"]})
    assert node_content_for_llm(no_hash, stats=stats) == text
    assert stats["redaction: hash mismatch, raw content"] == 3


def test_no_redactions_and_malformed_ones():
    assert node_content_for_llm(Node(title="t", content="plain")) == "plain"
    for bad, field in ((({"span": [3, 1], "decision": "mask", "token": "x"}), "span"),
                       (({"span": [0, 99], "decision": "mask", "token": "x"}), "span"),
                       (({"span": [0, 1], "decision": "hide", "token": "x"}), "decision"),
                       (({"span": [0, 1], "decision": "mask", "token": 3}), "token")):
        with pytest.raises(InvalidInput) as err:
            node_content_for_llm(_node("abcdef", [bad]))
        assert err.value.field.endswith(field) and "nodes[7]" in err.value.field


def test_the_tree_counts_its_own_fallbacks():
    tree = DialogTree()
    text = "my email is a@b.c"
    meta = {"redactions": [{"span": [12, 17], "decision": "mask", "token": "<EMAIL>"}],
            "redactions_content_hash": content_hash(text)}
    tree.add_question(text, timestamp=0.0, embedding=[1.0], metadata=meta)
    assert tree.content_for_llm(0) == "my email is <EMAIL>"
    tree[0].content = "my email is x@y.z"      # edited after the decisions
    assert tree.content_for_llm(0) == "my email is x@y.z"
    assert tree.stats["redaction: hash mismatch, raw content"] == 1

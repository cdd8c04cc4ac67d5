"""Question types by rules (memlab.recall.qtype), zh and en; the config's rules validated."""

from __future__ import annotations

import pytest

from memlab.config import MemlabConfig, QUESTION_TYPES
from memlab.errors import ConfigError
from memlab.recall.qtype import BITS, type_code, type_names

Q = MemlabConfig().query


def _types(question: str) -> tuple[str, ...]:
    return type_names(type_code(question, en=Q.type_rules_en, zh=Q.type_rules_zh))


@pytest.mark.parametrize("question,types", [
    ("Who did Maria have dinner with on May 3, 2023?", ("who",)),
    ("谁送了我一束花？", ("who",)),
    ("What is my cat called?", ("what",)),
    ("我的猫叫什么名字？", ("what",)),
    ("Where does Grace live?", ("where",)),
    ("我以前住在哪里？", ("where",)),
    ("How many cats do I have?", ("how_many",)),
    ("我养了几只猫？", ("how_many",)),
    ("Did I ever go skiing?", ("yes_no",)),
    ("我是不是对咖啡过敏？", ("yes_no",)),
    ("我对咖啡过敏吗？", ("yes_no",)),
    ("Why did Maria sit with the girl?", ("why_how",)),
    ("How did Joanna feel about the movie?", ("why_how",)),
    ("我为什么换了工作？", ("why_how",)),
    ("What do Melanie and Caroline both like?", ("what", "multi")),
    ("我和老王分别去过哪些城市？", ("what", "where", "multi")),
    ("How many times has Melanie gone to the beach in 2023?", ("how_many", "multi")),
    # when and first are the intent column's, not types here
    ("When did I go skiing?", ()),
    ("我什么时候去的北京？", ()),
])
def test_types_by_rules(question, types):
    assert _types(question) == types


def test_bits_are_the_place_in_the_table():
    assert [BITS[t] for t in QUESTION_TYPES] == [1, 2, 4, 8, 16, 32, 64]
    assert type_code("Who and where?", en=Q.type_rules_en, zh=()) == 1 | 4
    assert type_names(1 | 64) == ("who", "multi")


def test_rules_come_from_the_config():
    """A rule set by the config is what classifies: an empty rule list classifies nothing."""
    assert type_code("Who is she?", en=(), zh=Q.type_rules_zh) == 0
    assert type_code("Who is she?", en=("what: \\bis\\b",), zh=()) == BITS["what"]


@pytest.mark.parametrize("rules,problem", [(["whom: x"], "is not one of"),
                                           (["who x"], "type_name|rule_name"),
                                           (["who: ("], "regular expression")])
def test_bad_rules_are_named(rules, problem):
    with pytest.raises(ConfigError, match="query.type_rules_en") as err:
        MemlabConfig().replace(**{"query.type_rules_en": rules})
    assert err.match(problem)

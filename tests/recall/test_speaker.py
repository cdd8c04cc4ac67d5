"""Whether the question names a turn's speaker (memlab.recall.speaker), zh and en."""

from __future__ import annotations

import pytest

from memlab.recall.speaker import name_forms, names_speaker, speaker_column


@pytest.mark.parametrize("question,speaker,named", [
    ("When did Caroline go to the support group?", "Caroline", True),
    ("What is Caroline's job?", "Caroline", True),
    ("what did caroline say?", "Caroline", True),          # any case
    ("What did Carol say?", "Caroline", True),               # a capitalised prefix of 3+ letters
    ("What did Ca say?", "Caroline", False),                 # too short a prefix
    ("What did Caroline say?", "Melanie", False),
    ("Where does Smith work?", "Caroline Smith", True),      # any word of the name
    ("What did Carolines say?", "Caroline", False),          # not a whole word, not a prefix
    ("刘思远最近在忙什么？", "刘思远", True),
    ("思远最近在忙什么？", "刘思远", True),                     # the given name of a 3-character name
    ("远远最近在忙什么？", "刘思远", False),
    ("小林喜欢什么？", "小林", True),
    ("小明喜欢什么？", "小林", False),
    ("What did I do?", "", False),
])
def test_names_speaker(question, speaker, named):
    assert names_speaker(question, speaker, prefix_min=3) is named


def test_prefix_off_whole_words_only():
    assert not names_speaker("What did Mel paint?", "Melanie", prefix_min=0)
    assert names_speaker("What did Mel paint?", "Melanie", prefix_min=3)


def test_name_forms():
    assert name_forms("刘思远") == ("刘思远", "思远")
    assert name_forms("Caroline Smith") == ("Caroline Smith", "Caroline", "Smith")
    assert name_forms("  ") == ()


def test_column_one_this_speaker_minus_one_another_zero_none():
    """Caroline named: her turns 1, Melanie's -1, a turn without a speaker 0; nobody named: 0."""
    speakers = ["Caroline", "Melanie", "", "Caroline"]
    assert speaker_column("What did Caroline paint?", speakers).tolist() == [1, -1, 0, 1]
    assert speaker_column("What did we paint?", speakers).tolist() == [0, 0, 0, 0]
    assert speaker_column("老王和小林去了哪里？", ["小林", "老王", "小明"]).tolist() == [1, 1, -1]
    assert speaker_column("x", []).tolist() == []

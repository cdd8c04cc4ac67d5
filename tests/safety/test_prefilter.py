"""The hijack screen's prefilter (memlab.safety.prefilter): a pattern is searched only in a text
holding one of the strings every match of it needs, so it may skip only searches that could not
have matched. Checked on strings generated from every default pattern (zh, en, pinyin, the
despaced forms), on every attack and benign text of the corpora (the screen's verdict equals the
unfiltered screen's), and on hand-worked sets."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlab.config import SafetyConfig
from memlab.safety import rules as R
from memlab.safety.prefilter import may_match, needed

HERE = Path(__file__).parent
CFG = SafetyConfig()
COMPILED = R._compiled(CFG)
#: (name, pattern, its needed strings) of every default pattern and despaced form
PATTERNS = ([(f"{r.name}:{i}", r.regex, r.needs) for i, r in enumerate(COMPILED.rules)]
            + [(f"{r.name}:despaced:{i}", r.despaced, r.despaced_needs)
               for i, r in enumerate(COMPILED.rules) if r.despaced is not None]
            + [(f"{r.name}:pinyin:{i}", r.regex, r.needs) for i, r in enumerate(COMPILED.pinyin)])
CORPUS = [json.loads(line)["text"] for f in (HERE / "attacks.jsonl", HERE / "benign.jsonl",
                                             HERE.parent / "data" / "hijack_screen.jsonl")
          for line in f.read_text("utf-8").splitlines() if line.strip()]


def test_every_default_pattern_has_a_filter():
    # the point of the prefilter: no default pattern is searched in every text
    assert [name for name, _, needs in PATTERNS if needs is None] == []
    assert len(COMPILED.rules) >= 60 and len(COMPILED.pinyin) >= 10


@pytest.mark.parametrize("name,regex,needs", PATTERNS, ids=[p[0] for p in PATTERNS])
@settings(max_examples=40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_a_text_the_pattern_matches_passes_the_prefilter(name, regex, needs, data):
    # a whole match (what surrounds a match in a text can only add strings)
    text = data.draw(st.from_regex(regex, fullmatch=True))
    assert regex.fullmatch(text) is not None
    assert may_match(needs, text), (name, text, needs)


@pytest.mark.parametrize("text", CORPUS)
def test_the_screen_gives_the_unfiltered_verdict_on_the_corpora(text):
    bare = dataclasses.replace(
        COMPILED,
        rules=tuple(dataclasses.replace(r, needs=None, despaced_needs=None)
                    for r in COMPILED.rules),
        pinyin=tuple(dataclasses.replace(r, needs=None) for r in COMPILED.pinyin))
    assert R._screen(text, CFG, COMPILED, 0) == R._screen(text, CFG, bare, 0)


def test_hand_worked_sets_en():
    # {"you are now", "you're now"}: both hold "re now" (the longest shared substring)
    assert needed(r"\byou(?: are|'re) now\b") == ("re now",)
    # a 0-or-more repetition needs nothing and cuts the concatenation in two: {"ignore",
    # "forget"} and {" instructions", " rules"}, shortest string 6 and two strings each: the first
    assert needed(r"\b(?:ignore|forget)(?: (?:all|the))* (?:instructions|rules)\b") == \
        ("forget", "ignore")
    assert needed(r"\b(?:ignore|forget)(?: (?:all|the))* (?:instructions|orders)\b") == \
        (" instructions", " orders")   # shortest 7: this set
    # an optional exact part is multiplied in: "ab" or "abc", both hold "ab" (too short to
    # cover with: each stands for itself, and "abc" holds "ab")
    assert may_match(needed("ab(?:c)?"), "xxabxx") and not may_match(needed("ab(?:c)?"), "a b")


def test_hand_worked_sets_zh():
    assert needed("忽略(?:之前|以前)的指令") == ("前的指令",)
    assert needed("你(?:现在|此刻)是") == ("你此刻是", "你现在是")
    assert may_match(needed("你(?:现在|此刻)是"), "他说你现在是助手")
    assert not may_match(needed("你(?:现在|此刻)是"), "你现在不是")


@pytest.mark.parametrize("pattern", [r"\w+", "(?i)ignore", "a*", "(?i:ignore)", r"[^x]{3}",
                                     "x?", r"(?:ignore|\w)"])
def test_no_filter_where_nothing_is_needed(pattern):
    assert needed(pattern) is None
    assert may_match(None, "")

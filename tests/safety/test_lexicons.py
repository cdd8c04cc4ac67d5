"""The safety lexicons are data files (memlab/data/safety/): the pattern lists and the folding
tables that memlab.config and memlab.safety read, in a format a person can edit."""

from __future__ import annotations

import json

import pytest

from memlab.config import SAFETY_DATA, SafetyConfig, parse_patterns, read_lexicon
from memlab.safety.canonical import HOMOGLYPHS, TRADITIONAL
from memlab.safety.views import LEET


def test_a_lexicon_file_joins_continuations_and_skips_comments(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("# a comment\n\nrule_a: (?:one|two\n    |three) four\n#\nrule_b: \\bfive\\b\n"
                 "\trule_c_is_a_continuation\n", "utf-8")
    assert read_lexicon(p) == ("rule_a: (?:one|two|three) four",
                               "rule_b: \\bfive\\brule_c_is_a_continuation")


def test_a_continuation_before_any_entry_is_named(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("# header\n    |orphan\n", "utf-8")
    with pytest.raises(ValueError, match="bad.txt, line 2: a continuation line before any entry"):
        read_lexicon(p)


@pytest.mark.parametrize("name, field", [("hijack_en.txt", "hijack_patterns_en"),
                                         ("hijack_zh.txt", "hijack_patterns_zh"),
                                         ("hijack_pinyin.txt", "hijack_patterns_pinyin"),
                                         ("reported_speech_en.txt", "reported_speech_en"),
                                         ("reported_speech_zh.txt", "reported_speech_zh")])
def test_the_packaged_pattern_files_are_the_defaults(name, field):
    entries = read_lexicon(SAFETY_DATA / name)
    assert getattr(SafetyConfig(), field) == entries
    assert len(parse_patterns(entries)) == len(entries) >= 4
    assert all(" \n" not in e and not e.endswith(" ") for e in entries)


def test_the_packaged_tables_are_the_folding_tables():
    for name, key, table in (("homoglyphs.json", "fold", HOMOGLYPHS),
                             ("traditional.json", "fold", TRADITIONAL),
                             ("leetspeak.json", "read", LEET)):
        data = json.loads((SAFETY_DATA / name).read_text("utf-8"))
        assert data[key] == table and data["_about"]

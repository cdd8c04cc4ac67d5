"""Expanded keys (issue 21, memlab.write.keys): what the rules read from a sentence, zh and en,
written out by hand; dates in one canonical form whatever the language or spelling."""

from __future__ import annotations

import pytest

from memlab.config import MemlabConfig
from memlab.write.keys import date_keys, expand_keys, query_keys

CFG = MemlabConfig()


@pytest.mark.parametrize("text,want", [
    ("我4月27日去了公园", ["date:04-27"]),
    ("四月二十七号见", ["date:04-27"]),
    ("April 27th", ["date:04-27"]),
    ("on 27 April, 2023 we met", ["date:04-27", "date:2023-04-27", "month:2023-04"]),
    ("2023-04-27", ["date:04-27", "date:2023-04-27", "month:2023-04"]),
    ("2023年4月27日", ["date:04-27", "date:2023-04-27", "month:2023-04"]),
    ("二〇二三年五月搬家", ["month:2023-05"]),
    ("in May 2023", ["month:2023-05"]),
    ("Sept. 3rd, 2021", ["date:09-03", "date:2021-09-03", "month:2021-09"]),
    ("I may 5 times", []),                     # the verb, not the month
    ("2月30日", []),                            # no such day
    ("2月29日", ["date:02-29"]),                 # a day some year has
    ("昨天和上周六", []),                         # relative: not a date of the text
], ids=lambda v: v if isinstance(v, str) else None)
def test_date_keys(text, want):
    assert date_keys(text) == want


def test_one_date_in_both_languages_gives_one_key():
    assert set(date_keys("我4月27号去了公园")) & set(date_keys("On April 27th I went hiking")) \
        == {"date:04-27"}


@pytest.mark.parametrize("text,want", [
    # a date and an event atom (去了)
    ("我4月27日去了公园", ["date:04-27", "atom:event"]),
    # a fact (favourite:水果 = 芒果: attribute and value terms) and a preference atom
    ("我最喜欢的水果是芒果", ["favourite", "水果", "芒果", "atom:preference"]),
    ("My favourite food is dumplings", ["favourite", "food", "dumplings", "atom:preference"]),
    # names (《title》, a nickname), a month of a year, an event atom (搬到)
    ("小林2023年5月搬到了《三体》书店旁边", ["三体", "小林", "month:2023-05", "atom:event"]),
    # a name and a date (extract_entities reads "On" as a name word: the rules as they are)
    ("On April 27th I went hiking with Caroline", ["on", "caroline", "date:04-27"]),
    ("我对青霉素过敏", ["atom:constraint"]),
    ("the weather is nice", []),
])
def test_expand_keys_by_hand(text, want):
    assert expand_keys(text, CFG) == want


def test_query_keys_are_the_lexical_terms_then_dates_then_atom_kinds():
    assert query_keys("What did I do on April 27th?", CFG) == [
        "what", "did", "do", "on", "april", "27th", "date:04-27"]
    got = query_keys("我对什么过敏？", CFG)
    assert got[-1] == "atom:constraint" and "过敏" in got and not any(
        k.startswith("date:") for k in got)


def test_keys_follow_the_rules_in_the_config():
    no_facts = CFG.replace(**{"facts.patterns": ("x|zzz(?P<value>q)",)})
    assert expand_keys("My favourite food is dumplings", no_facts) == ["atom:preference"]
    no_atoms = CFG.replace(**{"jobs.atom_preference": ("zzz",)})
    assert expand_keys("My favourite food is dumplings", no_atoms) == [
        "favourite", "food", "dumplings"]


def test_keys_are_capped_by_term_cap():
    cfg = CFG.replace(**{"recall.term_cap": 2})
    assert expand_keys("我最喜欢的水果是芒果", cfg) == ["favourite", "水果"]

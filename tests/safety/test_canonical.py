"""The canonical spelling the safety rules match (memlab.safety.canonical), step by step."""

from __future__ import annotations

import string
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlab.safety.canonical import HOMOGLYPHS, TRADITIONAL, normalize

WORDS = st.text(alphabet=string.ascii_lowercase + " ", min_size=1, max_size=40)
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060", "\ufeff", "\u00ad",
             "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068",
             "\u2069", "\ufe0f", "\u034f", "\U000e0001"]


def full_width(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else "\u3000" if c == " " else c
                   for c in s)


@given(WORDS, st.lists(st.tuples(st.integers(0, 40), st.sampled_from(INVISIBLE)), max_size=8))
def test_invisible_characters_change_nothing(text, inserts):
    t = text
    for pos, ch in inserts:
        t = t[:pos] + ch + t[pos:]
    assert normalize(t) == normalize(text)


@given(WORDS)
def test_full_width_is_its_ascii(text):
    assert normalize(full_width(text)) == normalize(text)
    assert normalize(text.upper()) == normalize(text)


@given(WORDS, st.randoms(use_true_random=False))
def test_latin_look_alikes_fold_to_latin(text, rnd):
    lookalike = {v: [k for k, w in HOMOGLYPHS.items() if w == v] for v in string.ascii_lowercase}
    swapped = "".join(rnd.choice(lookalike[c]) if lookalike.get(c) and rnd.random() < 0.5 else c
                      for c in text)
    assert normalize(swapped) == normalize(text)


@pytest.mark.parametrize("raw, expected", [
    ("ig\u200bnore", "ignore"),                                  # zero-width space
    ("ＩＧＮＯＲＥ：", "ignore:"),                                  # full width, NFKC
    ("іgnоrе", "ignore"),                                         # Cyrillic і о е
    ("ɪɢɴᴏʀᴇ", "ignore"),                                         # small capitals, by name
    ("𝐢𝐠𝐧𝐨𝐫𝐞", "ignore"),                                         # mathematical bold
    ("ìgnöre", "ignore"),                                         # combining marks dropped
    ("i g n o r e  a l l", "ignore all"),                         # spelled out, two spaces part
    ("忽 略 之 前", "忽略之前"),                                     # no space between CJK
    ("忽略 之前 的指令 AI", "忽略之前的指令 ai"),
    ("無視以上的規則", "无视以上的规则"),                             # traditional -> simplified
    ("hello\r\n\u2028  System :", "hello\nsystem :"),             # line breaks kept as \n
    ("\U000e0069\U000e0067\U000e006e", "ign"),                    # tag characters read as ASCII
    ("‹/x›", "</x>"),                                             # look-alike angle brackets
    ("you\u2019re", "you're"),
])
def test_each_step(raw, expected):
    assert normalize(raw) == expected


def test_the_tables_map_to_what_they_say():
    assert all(len(k) == 1 and unicodedata.category(k) != "Cf" for k in HOMOGLYPHS)
    assert all(k != v and len(v) == 1 for k, v in TRADITIONAL.items())


def test_ordinary_chinese_and_english_are_only_case_folded():
    assert normalize("我喜欢星露谷物语，不喜欢下雨。") == "我喜欢星露谷物语,不喜欢下雨。"
    assert normalize("Alice adopted a cat named Momo.") == "alice adopted a cat named momo."

"""Other readings of a text that the hijack rules also match (issue 19, item 9), pure functions.

The canonical spelling (:mod:`memlab.safety.canonical`) undoes what changes how a text *looks*.
These readings undo what changes how it is *written*, each only for matching:

- :func:`deleet`: leetspeak read back (``1gn0re all prev1ous 1nstruct10ns`` -> ``ignore all
  previous instructions``) by the table ``memlab/data/safety/leetspeak.json``. Only a word that
  mixes letters with leet characters is read (``2024``, ``$100`` and ``5k`` stay); a leet sign at
  the end of a word is punctuation (``you!``). A character that stands for several letters (``1``:
  i or l) is read as the one that makes a word of the configured patterns (``a11`` -> ``all``,
  ``ru1es`` -> ``rules``), trying at most ``safety.leetspeak_max_readings`` readings of a word,
  else as its first letter;
- :func:`letters`: the text's Latin letters alone (``hu lue zhi qian`` -> ``huluezhiqian``; tone
  marks are gone in the canonical spelling, tone numbers and signs here), the reading that the
  pinyin patterns (``safety.hijack_patterns_pinyin``) match.

Base64 is :mod:`memlab.safety.decode`.
"""

from __future__ import annotations

import functools
import itertools
import json
import re

from memlab.config import SAFETY_DATA

__all__ = ["LEET", "deleet", "letters", "words_of"]

#: Each leet character and the letters it may stand for, the likeliest first.
LEET: dict[str, str] = json.loads((SAFETY_DATA / "leetspeak.json").read_text("utf-8"))["read"]

_NOT_LETTERS = re.compile(r"[^a-z]+")
_WORDS = re.compile(r"[a-z]{2,}")


@functools.cache
def _token_re(chars: str) -> re.Pattern[str]:
    """A run of letters and leet characters holding at least one leet character."""
    leet = re.escape(chars)
    return re.compile(f"[a-z{leet}]*[{leet}][a-z{leet}]*")


def words_of(patterns: tuple[str, ...]) -> frozenset[str]:
    """The words (two Latin letters or more) written in ``patterns``: what a leet word may read as."""
    return frozenset(w for p in patterns for w in _WORDS.findall(p))


def _read(word: str, vocabulary: frozenset[str], max_readings: int) -> str:
    """One leet word read back (``word`` holds a letter and a leet character)."""
    options = [LEET.get(c, c) for c in word]
    first = "".join(o[0] for o in options)
    if first in vocabulary or all(len(o) == 1 for o in options):
        return first
    for reading in itertools.islice(itertools.product(*options), max_readings):
        candidate = "".join(reading)
        if candidate in vocabulary:
            return candidate
    return first


def deleet(text: str, vocabulary: frozenset[str], *, max_readings: int) -> str | None:
    """``text`` (canonical) with its leet words read back, or None when it has none."""
    signs = "".join(c for c in LEET if not c.isalnum())   # a leet sign ending a word is punctuation
    changed = False

    def one(m: re.Match[str]) -> str:
        nonlocal changed
        token = m.group(0)
        word = token.rstrip(signs)
        if not any("a" <= c <= "z" for c in word) or not any(c in LEET for c in word):
            return token
        changed = True
        return _read(word, vocabulary, max_readings) + token[len(word):]

    out = _token_re("".join(LEET)).sub(one, text)
    return out if changed else None


def letters(text: str) -> str:
    """The Latin letters of ``text`` (canonical: lower case, no tone marks), nothing else."""
    return _NOT_LETTERS.sub("", text)

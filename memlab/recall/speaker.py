"""Whether a question names the speaker of a turn (issue 21): the ``speaker_named`` column.

A speaker is named when the question holds one of its forms:

- a Chinese (CJK) name: the whole name, or, for a three-character name, its last two characters
  (the given name: 思远 for 刘思远);
- a Latin name: any of its words (Caroline, or Smith of "Caroline Smith"), as a whole word in any
  case; and, with ``prefix_min`` > 0, a capitalised word of the question of at least
  ``prefix_min`` letters that begins one of them ("Mel" for Melanie).

Per question, the column says for each candidate: 1 the question names this memory's speaker;
-1 it names the speaker of another of its candidates and not this one; 0 it names none of them,
or the memory has no speaker stored.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

import numpy as np

from memlab.text import alias_pattern, has_cjk

__all__ = ["name_forms", "names_speaker", "speaker_column"]

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")


def name_forms(speaker: str) -> tuple[str, ...]:
    """The forms of a speaker's name that name it (see the module docstring)."""
    name = speaker.strip()
    if not name:
        return ()
    if has_cjk(name):
        forms = [name]
        if len(name) == 3:
            forms.append(name[1:])
        return tuple(forms)
    words = [w for w in _WORD.findall(name) if len(w) >= 2]
    return tuple(dict.fromkeys([name, *words]))


@lru_cache(maxsize=4096)
def _pattern(speaker: str) -> re.Pattern[str] | None:
    forms = name_forms(speaker)
    return alias_pattern(forms) if forms else None


def names_speaker(query: str, speaker: str, *, prefix_min: int = 3) -> bool:
    """Whether ``query`` names ``speaker``."""
    pattern = _pattern(speaker)
    if pattern is None:
        return False
    if pattern.search(query):
        return True
    if prefix_min <= 0 or has_cjk(speaker):
        return False
    words = [w.lower() for w in _WORD.findall(speaker) if len(w) >= 2]
    return any(len(q) >= prefix_min and any(w.startswith(q.lower()) for w in words)
               for q in _CAPITALISED.findall(query))


def speaker_column(query: str, speakers: Sequence[str], *, prefix_min: int = 3) -> np.ndarray:
    """The ``speaker_named`` values (int8) of one question's candidates, whose stored speakers
    are ``speakers`` (in row order)."""
    named = {s: names_speaker(query, s, prefix_min=prefix_min) for s in dict.fromkeys(speakers)}
    if not any(named.values()):
        return np.zeros(len(speakers), np.int8)
    return np.array([1 if named[s] else (0 if not s.strip() else -1) for s in speakers], np.int8)

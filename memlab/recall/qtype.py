"""The question's type, by rules (issue 21): a query-level column a learned ranker crosses with
the signals.

Types (:data:`memlab.config.QUESTION_TYPES`): who, what, where, how_many, yes_no, why_how, multi
(several things to gather or compare: "both", "in common", "Caroline and Melanie", 分别, 一共).
A question may have several; the ``q_type`` column holds them as bit flags, bit ``i`` for
``QUESTION_TYPES[i]`` (who 1, what 2, where 4, how_many 8, yes_no 16, why_how 32, multi 64).
"when" and "first" are not types here: the ``intent`` column carries them, from
:func:`memlab.text.temporal_intent`'s cues (temporal.when_cues, temporal.first_cues).

The rules are the config's ``query.type_rules_en`` and ``query.type_rules_zh`` ("type: regex";
English ones case-insensitive), both applied to every question: a Chinese question matches no
English rule and the reverse, and a mixed one may match both.
"""

from __future__ import annotations

import re
from functools import lru_cache

from memlab.config import QUESTION_TYPES, parse_patterns

__all__ = ["BITS", "type_code", "type_names"]

#: type name -> its bit in the q_type column
BITS: dict[str, int] = {name: 1 << i for i, name in enumerate(QUESTION_TYPES)}


@lru_cache(maxsize=16)
def _compiled(en: tuple[str, ...], zh: tuple[str, ...]) -> tuple[tuple[int, re.Pattern[str]], ...]:
    out = [(BITS[name], re.compile(rx, re.IGNORECASE)) for name, rx in parse_patterns(en)]
    out += [(BITS[name], re.compile(rx)) for name, rx in parse_patterns(zh)]
    return tuple(out)


def type_code(query: str, *, en: tuple[str, ...], zh: tuple[str, ...]) -> int:
    """The question's types as bit flags (0: no rule matched)."""
    code = 0
    for bit, pattern in _compiled(tuple(en), tuple(zh)):
        if not code & bit and pattern.search(query):
            code |= bit
    return code


def type_names(code: int) -> tuple[str, ...]:
    """The type names of a q_type code, in QUESTION_TYPES order."""
    return tuple(name for name, bit in BITS.items() if code & bit)

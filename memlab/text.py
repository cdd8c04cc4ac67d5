"""Text signals: memory terms (§6.2), entities (§11.1) and temporal-intent cues (§11.2).

Pure functions; the caps and cue lists come from the config and are passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

_EN = re.compile(r"[a-z0-9_]{2,}")
_ZH = re.compile(r"[\u3400-\u9fff]+")  # 㐀-鿿, as §6.2


def memory_terms(text: str, *, term_cap: int = 80, text_cap: int = 8192) -> list[str]:
    """Lexical terms of a text, exactly as Reverie's §6.2.

    English/digit tokens of >= 2 characters; for each run of CJK characters, the run itself when it
    is <= 4 characters, then its 2-grams and 3-grams; deduplicated in first-seen order; at most
    ``term_cap`` terms from the first ``text_cap`` characters.
    """
    lowered = text[:text_cap].lower()
    terms = _EN.findall(lowered)
    for run in _ZH.findall(lowered):
        if len(run) <= 4:
            terms.append(run)
        for width in (2, 3):
            terms.extend(run[i:i + width] for i in range(max(0, len(run) - width + 1)))
    return list(dict.fromkeys(terms))[:term_cap]


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """|a ∩ b| / |a ∪ b| (0 for two empty sets)."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# -- entities ------------------------------------------------------------------------------------
_EN_NAME = re.compile(r"\b[A-Z][a-z]+(?:[ -][A-Z][a-z]+)*\b")
_ZH_TITLE = re.compile(r"《([^》]{1,40})》")
_ZH_QUOTE = re.compile(r"[“「]([^”」]{2,20})[”」]")
_ZH_NICK = re.compile(r"(?<![\u4e00-\u9fff])([小老阿][\u4e00-\u9fff])(?![\u4e00-\u9fff]{2})")
_EN_STOP = frozenset("""I Im Ive Id Ill The A An And But Or So If When What Where Who Whom Whose Why
How Which Did Do Does Is Are Was Were Be Been Have Has Had My Me We Our You Your He She It They Them
This That These Those There Here Then Today Yesterday Tomorrow Yes No Not Oh Ok Okay Hi Hello Hey
Thanks Thank Please Also Just Well Maybe Sure Lately Recently Monday Tuesday Wednesday Thursday
Friday Saturday Sunday January February March April May June July August September October
November December User Assistant Can Could Would Should Will Let Lets Tell Remember Any Some Last
First Next After Before Since""".split())


def extract_entities(text: str, *, min_chars: int = 2) -> list[str]:
    """Named things in a text, found by rules (no model), lower-cased, first-seen order.

    English capitalised names (sentence-initial function words excluded), Chinese titles in 《》,
    quoted terms in “” or 「」, and nicknames such as 小林 / 老王 / 阿明.
    """
    found: list[str] = []
    for m in _EN_NAME.finditer(text):
        words = [w for w in re.split(r"[ -]", m.group(0)) if w.replace("'", "") not in _EN_STOP]
        if words:
            found.append(" ".join(words))
    found += _ZH_TITLE.findall(text)
    found += _ZH_QUOTE.findall(text)
    found += _ZH_NICK.findall(text)
    out = [e.strip().lower() for e in found if len(e.strip()) >= min_chars]
    return list(dict.fromkeys(out))


# -- temporal intent -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class TemporalIntent:
    """Which temporal cues a question carries (§11.2). Several may hold at once."""

    recent: bool = False
    historical: bool = False
    when: bool = False
    first: bool = False

    @property
    def kind(self) -> str:
        for name in ("first", "recent", "historical", "when"):
            if getattr(self, name):
                return name
        return "none"

    @property
    def code(self) -> int:
        """Bit flags: 1 recent, 2 historical, 4 when, 8 first."""
        return self.recent | self.historical << 1 | self.when << 2 | self.first << 3

    @classmethod
    def from_code(cls, code: int) -> "TemporalIntent":
        return cls(bool(code & 1), bool(code & 2), bool(code & 4), bool(code & 8))


def _has_cue(lowered: str, cues: Iterable[str]) -> bool:
    for cue in cues:
        c = cue.lower()
        if c.isascii():
            if re.search(rf"\b{re.escape(c)}\b", lowered):
                return True
        elif c in lowered:
            return True
    return False


def temporal_intent(query: str, *, recent: Sequence[str], historical: Sequence[str],
                    when: Sequence[str], first: Sequence[str]) -> TemporalIntent:
    """Classify a question's temporal intent by keyword cues (the lists come from the config)."""
    lowered = query.lower()
    is_first = _has_cue(lowered, first)
    is_recent = _has_cue(lowered, recent)
    is_hist = _has_cue(lowered, historical)
    if is_recent and is_hist:  # "我以前...现在..." -- contradictory cues cancel
        is_recent = is_hist = False
    return TemporalIntent(recent=is_recent, historical=is_hist, when=_has_cue(lowered, when),
                          first=is_first)

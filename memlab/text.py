"""Text signals: memory terms (§6.2), entities (§11.1) and temporal-intent cues (§11.2).

Pure functions; the caps and cue lists come from the config and are passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from memlab.numerals import EN_NUMBER, zh_int

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


def title_spans(text: str) -> list[tuple[str, int, int]]:
    """The titles in 《》 (the extractor's title rule) with the start and end of each inside the
    text: ``[("星露谷物语", 1, 6)]`` for "《星露谷物语》"."""
    return [(m.group(1), m.start(1), m.end(1)) for m in _ZH_TITLE.finditer(text)]


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


# -- typed entities (fuzzy recall, reverie §9.2) --------------------------------------------------
_CJK_CHAR = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True, slots=True)
class EntityMatch:
    """One occurrence of a typed entity in a text: its type, group (index into
    :attr:`EntityLexicon.groups`) and the text's own spelling of it."""

    type: str
    group: int
    surface: str
    start: int
    end: int


def alias_pattern(aliases: Iterable[str]) -> re.Pattern[str]:
    """A case-insensitive pattern of any alias, longest first; an alias ending (starting) with a
    letter or digit must not continue a Latin word there (Chinese aliases match inside text)."""
    parts = []
    for a in sorted(dict.fromkeys(a for a in aliases if a), key=lambda a: (-len(a), a)):
        left = r"(?<![A-Za-z0-9])" if a[0].isascii() and a[0].isalnum() else ""
        right = r"(?![A-Za-z0-9])" if a[-1].isascii() and a[-1].isalnum() else ""
        parts.append(left + re.escape(a) + right)
    return re.compile("|".join(parts) or r"(?!)", re.IGNORECASE)


def mentions(text: str, aliases: Iterable[str]) -> bool:
    """Whether ``text`` names any of ``aliases`` (as :func:`alias_pattern` matches)."""
    return alias_pattern(aliases).search(text) is not None


def has_cjk(text: str) -> bool:
    return _CJK_CHAR.search(text) is not None


class EntityLexicon:
    """Typed entity groups parsed from lines ``"type: a / alias | b | ..."`` (``fuzzy.entity_types``):
    each group is one thing under its aliases (星露谷物语 / Stardew Valley), zh and en.

    :meth:`find` lists the non-overlapping occurrences in a text, longest alias first."""

    def __init__(self, lines: Sequence[str]) -> None:
        groups: list[tuple[str, tuple[str, ...]]] = []
        for line in lines:
            name, _, body = line.partition(":")
            for g in body.split("|"):
                groups.append((name.strip(), tuple(a.strip() for a in g.split("/"))))
        self.groups = tuple(groups)
        self._group_of = {a.lower(): i for i, (_, aliases) in enumerate(groups) for a in aliases}
        self._pattern = alias_pattern(a for _, aliases in groups for a in aliases)

    def find(self, text: str) -> list[EntityMatch]:
        out = []
        for m in self._pattern.finditer(text):
            g = self._group_of[m.group(0).lower()]
            out.append(EntityMatch(self.groups[g][0], g, m.group(0), m.start(), m.end()))
        return out

    def of_type(self, type_: str) -> list[int]:
        """Group indices of one type, in lexicon order."""
        return [i for i, (t, _) in enumerate(self.groups) if t == type_]

    def spelling(self, group: int, *, like: str) -> str:
        """:func:`spelling` of one group."""
        return spelling(self.groups[group][1], like=like)


def spelling(aliases: Sequence[str], *, like: str) -> str:
    """The first alias in the script of ``like`` (Chinese or not), else the first."""
    want = has_cjk(like)
    return next((a for a in aliases if has_cjk(a) == want), aliases[0])


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


# -- explicit time windows ("最近三个月", "in the last 2 weeks") ------------------------------------
# calendar facts, not tunables
_UNIT_DAYS = {"天": 1.0, "日": 1.0, "周": 7.0, "星期": 7.0, "礼拜": 7.0, "月": 30.44, "年": 365.25,
              "day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
_ZH_WINDOW = re.compile(r"(?:最近|过去|近|这)([0-9]+|[零一二两三四五六七八九十半]+)个?(天|日|周|星期|礼拜|月|年)")
_EN_WINDOW = re.compile(r"\b(?:last|past|previous)\s+(?:(\d+|a|an|one|two|three|four|five|six|"
                        r"seven|eight|nine|ten|twelve|few|couple)\s+(?:of\s+)?)?(day|week|month|year)s?\b")
_EN_THIS = re.compile(r"\bthis\s+(week|month|year)\b")


def _zh_number(text: str) -> float | None:
    """A look-back's count: :func:`memlab.numerals.zh_int`, and 半 (half) as 0.5."""
    if text == "半":
        return 0.5
    n = zh_int(text)
    return None if n is None else float(n)


def time_window_days(query: str) -> float | None:
    """The explicit look-back window a question names, in days, or None.

    "最近三个月" -> 91.3, "过去两周" -> 14, "近十天" -> 10, "in the last 2 weeks" -> 14,
    "past month" -> 30.44, "this year" -> 365.25. Bare "最近"/"lately" carry no window (that is
    the recent *intent*, §11.2).
    """
    m = _ZH_WINDOW.search(query)
    if m:
        n = _zh_number(m.group(1))
        if n:
            return n * _UNIT_DAYS[m.group(2)]
    lowered = query.lower()
    m = _EN_WINDOW.search(lowered)
    if m:
        word = m.group(1)
        n = 1.0 if word is None else (float(word) if word.isdigit() else float(EN_NUMBER[word]))
        return n * _UNIT_DAYS[m.group(2)] if n else None
    m = _EN_THIS.search(lowered)
    if m:
        return _UNIT_DAYS[m.group(1)]
    return None

"""The text the safety rules match: one canonical spelling of what a reader sees (issue 9, item 7).

An attack hides from a plain pattern by spelling the same words differently: ``ｉｇｎｏｒｅ``
(full width), ``іgnоrе`` (Cyrillic і and о), ``ig\u200bnore`` (a zero-width space), ``IGNORE``,
``忽 略 之 前 的 指 令`` or ``忽略之前的指令`` in traditional characters. :func:`normalize` maps all
of them to ``ignore`` / ``忽略之前的指令``; the patterns of :mod:`memlab.safety.rules` are written
for its output. It is used for matching only: a memory is stored verbatim (escaping is the
prompt's job, :mod:`memlab.recall.inject`).

Steps, in order (each a memlab choice, documented here and tested in ``tests/safety``):

1. invisible characters are removed: format characters (Unicode category Cf: zero-width space,
   non-joiner and joiner U+200B-U+200D, LRM/RLM U+200E/U+200F, word joiner U+2060, BOM U+FEFF,
   soft hyphen, the bidi embeddings, overrides and isolates U+202A-U+202E, U+2066-U+2069),
   control characters other than line breaks, tab and space, variation selectors, the combining
   grapheme joiner and the Hangul fillers. The tag characters U+E0020-U+E007E, invisible to a
   person but read by some models as the ASCII they shadow ("ASCII smuggling"), become that ASCII,
   so a hidden instruction is matched like a visible one; the other tag characters are removed;
2. NFKC, with the combining marks dropped in between (NFKD, remove category Mn/Me, NFC):
   full-width and other compatibility forms become their plain letters (``ｉ`` -> ``i``,
   ``𝐢`` -> ``i``, ``：`` -> ``:``, ``＜`` -> ``<``), accents go (``ìgnöre`` -> ``ignore``);
3. look-alikes are folded by an explicit table (:data:`HOMOGLYPHS`, the data file
   ``memlab/data/safety/homoglyphs.json``): Cyrillic, Greek and Armenian letters that look like
   Latin ones, Latin small capitals and IPA letters (derived from their Unicode names), look-alike
   colons, vertical bars and single angle brackets, curly and angle double quotes. No well-kept
   confusables library is a dependency of memlab (``confusable_homoglyphs`` is not installed), so
   the table is small and written out; it covers the letters of the configured patterns. It is
   applied before step 2 as well (NFKD would turn the Greek ``ϲ`` into ``σ``). A homoglyph that
   is not in the table is not folded (leetspeak such as ``1gn0re`` is read back by
   :mod:`memlab.safety.views`, another reading of the text);
4. the traditional Chinese characters of the default patterns are folded to simplified ones
   (:data:`TRADITIONAL`, a small table, ``memlab/data/safety/traditional.json``: ``無視之前的
   指令`` -> ``无视之前的指令``);
5. case folding (``str.casefold``);
6. whitespace: every line break becomes ``\\n`` (a role marker such as ``system:`` is matched at
   the start of a line); a run of three or more single letters or digits joined by one repeated
   sign (``.``, ``-``, ``_``, ``*``, ``/``, ``~``, ``+``) is joined (``i.g.n.o.r.e`` -> ``ignore``,
   ``I-G-N-O-R-E`` -> ``ignore``); a run of three or more single characters separated by single
   spaces is joined (``i g n o r e  a l l`` -> ``ignore all``: two spaces still part words); other
   runs of
   whitespace become one space, spaces around a line break are dropped, and a space between two
   CJK characters is removed (``忽 略`` -> ``忽略``).

:func:`despace` removes every space and line break as well: a text that spelled words out letter
by letter (``safety.match_despaced``) is also matched in that form, by the patterns that hold no
open-ended wildcard (``\\w``, ``.``, ``[^...]``) with their spaces taken out, which catches
``i g n o r e a l l p r e v i o u s i n s t r u c t i o n s`` spaced evenly.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata

from memlab.config import SAFETY_DATA

__all__ = ["normalize", "normalize_spelled", "despace", "invisible", "HOMOGLYPHS", "TRADITIONAL"]

def _table(name: str) -> dict[str, str]:
    """The ``fold`` mapping of a packaged table (``memlab/data/safety/NAME``)."""
    return json.loads((SAFETY_DATA / name).read_text("utf-8"))["fold"]


#: Look-alikes folded to the Latin letter or ASCII sign they pass for (step 3), from
#: ``memlab/data/safety/homoglyphs.json``.
HOMOGLYPHS: dict[str, str] = _table("homoglyphs.json")

#: Traditional characters of the default zh patterns and their simplified forms (step 4), from
#: ``memlab/data/safety/traditional.json``.
TRADITIONAL: dict[str, str] = _table("traditional.json")

_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")
_SPACES = re.compile(r"[^\S\n]+")
_SPACED_LETTERS = re.compile(r"(?<!\S)\S(?: \S){2,}(?!\S)")
# three or more single letters or digits joined by one repeated sign: i.g.n.o.r.e, I-G-N-O-R-E
_SIGNED_LETTERS = re.compile(r"(?<![^\W_])([^\W_])([._*/~+-])[^\W_](?:\2[^\W_])+(?![^\W_])")
_AROUND_NL = re.compile(r" ?\n[\n ]*")
_MARKS = frozenset(("Mn", "Me"))


def _small_capitals() -> dict[str, str]:
    """``ɪɢɴᴏʀᴇ`` -> ``ignore``: every 'LATIN LETTER SMALL CAPITAL X' (and the modifier and
    superscript forms NFKC leaves alone) to its letter, from the Unicode names."""
    out = {}
    # the blocks that hold them: IPA Extensions, Phonetic Extensions, Latin Extended-D
    for cp in [*range(0x0250, 0x02B0), *range(0x1D00, 0x1D80), *range(0xA720, 0xA800)]:
        name = unicodedata.name(chr(cp), "")
        m = re.fullmatch(r"LATIN LETTER SMALL CAPITAL ([A-Z])", name)
        if m:
            out[chr(cp)] = m.group(1).lower()
    return out


@functools.cache
def _tables() -> tuple[dict[int, str | None], dict[int, str]]:
    """(what step 1 removes, steps 3-4 as one ``str.translate`` table), built once."""
    # format and control characters: none is assigned above plane 1 but in plane 14 (below)
    chars = "".join(map(chr, range(0x20000)))
    cats = map(unicodedata.category, chars)
    drop: dict[int, str | None] = {
        ord(ch): None for ch, cat in zip(chars, cats)
        if cat == "Cf" or (cat == "Cc" and ch not in "\t\n\r\x0b\x0c\x1c\x1d\x1e\x85")}
    for lo, hi in ((0xFE00, 0xFE0F), (0xE0100, 0xE01EF), (0xE0000, 0xE007F)):
        drop.update(dict.fromkeys(range(lo, hi + 1)))
    drop.update({cp: chr(cp - 0xE0000) for cp in range(0xE0020, 0xE007F)})   # tag ASCII
    drop.update(dict.fromkeys(map(ord, "\u034f\u115f\u1160\u3164\uffa0\u180b\u180c\u180d")))
    fold = {ord(k): v for k, v in {**_small_capitals(), **HOMOGLYPHS, **TRADITIONAL}.items()}
    return drop, fold


def invisible() -> dict[int, str | None]:
    """Step 1 as a ``str.translate`` table: the invisible characters removed (tag characters
    to the ASCII they shadow)."""
    return _tables()[0]


def normalize(text: str) -> str:
    """The canonical spelling of ``text`` that the safety rules match (steps in the module
    docstring)."""
    return normalize_spelled(text)[0]


def normalize_spelled(text: str) -> tuple[str, bool]:
    """(:func:`normalize` of ``text``, whether it spelled something out letter by letter: a run
    of three or more single characters between single spaces was joined)."""
    drop, fold = _tables()
    t = text.translate(drop)
    if not t.isascii():   # ASCII is its own NFKC and holds no mark, look-alike or CJK character
        t = unicodedata.normalize("NFKD", t.translate(fold))   # fold first: NFKD makes ϲ σ
        t = "".join(c for c in t if unicodedata.category(c) not in _MARKS)
        t = unicodedata.normalize("NFC", t).translate(fold).translate(drop)
    t = t.casefold()
    t = "\n".join(t.splitlines())
    t, signed = _SIGNED_LETTERS.subn(lambda m: m.group(0).replace(m.group(2), ""), t)
    t, spelled = _SPACED_LETTERS.subn(lambda m: m.group(0).replace(" ", ""), t)
    t = _AROUND_NL.sub("\n", _SPACES.sub(" ", t)).strip()
    return _CJK_SPACE.sub("", t), spelled + signed > 0


def despace(normalized: str) -> str:
    """``normalized`` without its spaces and line breaks."""
    return normalized.replace(" ", "").replace("\n", "")

"""The characters that prompt escaping neutralises, computed from :mod:`unicodedata` (issue 7.5).

A pipeline may apply NFC, NFD, NFKC or NFKD to the whole prompt, so every class here is closed
under normalisation: a code point belongs to a class when it is a member or when *any* of its four
normal forms contains a member (``＜`` folds to ``<`` under NFKC, ``≮`` to ``<`` + U+0338 under
NFD, ``⩶`` to ``===`` under NFKC). The classes are computed over all of Unicode
(``sys.maxunicode``), not listed by hand, once and lazily (about a second), then cached, and
become one ``str.translate`` table plus two patterns:

- angle brackets, made ``&lt;`` / ``&gt;``: ``<`` ``>``, the single angle brackets a reader could
  take for a tag delimiter (by Unicode name: ``‹ › 〈 〉 ⟨ ⟩ ˂ ˃ ❬ ❭ ⧼ ⧽`` ...; double ones such as
  ``《》 «»`` are ordinary punctuation and stay), and everything that normalises to contain one;
- spaces: whitespace (``str.isspace``) and everything that normalises to a line boundary
  (``str.splitlines``);
- removed, because a reader cannot see them: controls (Cc) other than whitespace, lone surrogates
  (Cs), format characters (Cf: zero-width characters, bidi controls, soft hyphen, BOM, word
  joiner, invisible operators), all of plane 14 (tag characters U+E0000-U+E007F, the
  variation-selector supplement, reserved default-ignorables), variation selectors other than the
  emoji/text presentation selectors U+FE0E/U+FE0F, Hangul fillers and the combining grapheme
  joiner, and everything that normalises to contain one of them;
- ``=``-like: everything that normalises to contain ``=`` (runs of them are counted by inject).

The classes hold for the Unicode version of the running Python (``unicodedata.unidata_version``); a
normaliser built on a newer version could fold code points that are unassigned here.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
LT, GT = "&lt;", "&gt;"   # what a left / right angle bracket becomes (memlab's choice: see inject)
PRESENTATION_SELECTORS = "\ufe0e\ufe0f"   # text / emoji presentation: kept once after a character
PLANE_14 = (0xE0000, 0xEFFFF)

# single angle brackets by name; names with DOUBLE (《 》 « » ⟪ ⟫) are ordinary punctuation
_ANGLE_NAME = re.compile(
    r"^(?:(?:SMALL |FULLWIDTH )?(?P<cmp>LESS|GREATER)-THAN SIGN"
    r"|MODIFIER LETTER (?:LOW )?(?P<head>LEFT|RIGHT) ARROWHEAD"
    r"|(?!.*DOUBLE).*\b(?P<side>LEFT|RIGHT)(?:-POINTING)? (?:CURVED )?ANGLE"
    r" (?:BRACKET|QUOTATION MARK)\b.*)$")
_INVISIBLE_NAME = re.compile(r"VARIATION SELECTOR|^COMBINING GRAPHEME JOINER$")
# invisible letters (Lo) that no category tells apart; U+3164 and U+FFA0 normalise to U+1160
FILLERS = ("HANGUL CHOSEONG FILLER", "HANGUL JUNGSEONG FILLER")


@dataclass(frozen=True)
class Charsets:
    """Translate table and patterns for :func:`memlab.recall.inject.escape_memory`."""

    table: Mapping[int, str | None]   # str.translate: brackets, spaces, dropped characters
    plane_14: re.Pattern[str]          # removed by pattern rather than 65,536 table entries
    equals: frozenset[str]
    equals_run: re.Pattern[str]
    brackets: frozenset[str]


def char_class(chars: Iterable[str]) -> str:
    """A regular-expression character class of ``chars``, as code-point ranges."""
    cps = sorted({ord(c) for c in chars})
    parts = []
    for _, run in itertools.groupby(enumerate(cps), lambda p: p[1] - p[0]):
        run = [cp for _, cp in run]
        lo, hi = run[0], run[-1]
        parts.append(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}")
    return "[" + "".join(parts) + "]"


def _utf32(cps: np.ndarray) -> str:
    return cps.astype("<u4").tobytes().decode("utf-32-le")


def _code_points() -> str:
    """Every code point except NUL (the separator below) and the surrogates."""
    return _utf32(np.r_[np.arange(1, 0xD800), np.arange(0xE000, sys.maxunicode + 1)])


def _folding_into(chars: str, targets: Iterable[str]) -> dict[str, set[str]]:
    """For each target, the code points with the target in at least one of their normal forms.

    A code point that NFKD leaves alone has no decomposition at all, so every form leaves it
    alone; the others (about 17,000) are found by normalising all code points at once, joined by
    NUL: NUL is a starter that neither decomposes nor composes, so the n-th NUL-separated part of
    the output is the n-th code point's normal form.
    """
    cps = np.frombuffer(chars.encode("utf-32-le"), dtype="<u4")
    spaced = np.zeros(2 * len(cps) - 1, dtype="<u4")
    spaced[::2] = cps
    nfkd = unicodedata.normalize("NFKD", _utf32(spaced)).split("\x00")
    movers = list(itertools.compress(chars, map(str.__ne__, nfkd, chars)))
    found: dict[str, set[str]] = {t: {t} for t in targets}
    pattern = re.compile(char_class(found))
    for form in FORMS:
        normals = unicodedata.normalize(form, "\x00".join(movers)).split("\x00")
        for ch, normal in zip(movers, normals):
            for t in set(pattern.findall(normal)):
                found[t].add(ch)
    return found


def _side(name: str) -> str | None:
    m = _ANGLE_NAME.match(name)
    if not m:
        return None
    word = m.group("cmp") or m.group("head") or m.group("side")
    return LT if word in ("LESS", "LEFT") else GT


@functools.cache
def charsets() -> Charsets:
    """The classes of the module docstring, computed once per process."""
    chars = _code_points()
    side: dict[str, str] = {"<": LT, ">": GT}
    wanted = frozenset(("Cc", "Cf", "Sm", "Ps", "Pe", "Pi", "Pf", "Sk", "Mn"))
    # one C-level pass over 1.1 M code points keeps the few thousand worth a look
    picked = "".join(itertools.compress(chars, map(wanted.__contains__,
                                                   map(unicodedata.category, chars))))
    space = set(re.findall(r"\s", chars))   # str.isspace
    drop = {chr(cp) for cp in range(0xD800, 0xE000)}
    for ch in picked:
        cat, name = unicodedata.category(ch), unicodedata.name(ch, "")
        if cat in ("Cc", "Cf"):
            if ch not in space:
                drop.add(ch)
        elif cat == "Mn":
            if _INVISIBLE_NAME.search(name):   # variation selectors, the grapheme joiner
                drop.add(ch)
        elif (s := _side(name)) is not None:
            side[ch] = s
    drop.update(map(unicodedata.lookup, FILLERS))
    drop.add("\x00")
    drop -= set(PRESENTATION_SELECTORS)
    drop = {ch for ch in drop if not PLANE_14[0] <= ord(ch) <= PLANE_14[1]}
    lines = {line[-1] for line in (chars + "x").splitlines(keepends=True)[:-1]}
    found = _folding_into(chars, [*side, "=", *lines, *(c for c in drop if ord(c) > 0)])

    table: dict[int, str | None] = {}
    for ch in drop:
        for c in found.get(ch, {ch}):
            table[ord(c)] = None
    for ch in [*space, *(c for line in lines for c in found[line])]:
        table[ord(ch)] = " "
    brackets = set().union(*(found[ch] for ch in side))
    for ch in brackets:
        table[ord(ch)] = "".join(side.get(c, c) for c in unicodedata.normalize("NFKD", ch))
    equals = frozenset(found["="])
    return Charsets(table=table,
                    plane_14=re.compile(f"[\\U{PLANE_14[0]:08x}-\\U{PLANE_14[1]:08x}]+"),
                    equals=equals, equals_run=re.compile(char_class(equals) + "+"),
                    brackets=frozenset(brackets))

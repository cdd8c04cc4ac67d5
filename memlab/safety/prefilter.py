"""What a text must contain for a hijack pattern to match it: the screen's cheap first step.

Screening a text ran every configured pattern over every reading of it (67 regular expression
searches for the default zh and en rules, most of the hijack screen's ~90 µs per write on this
project's 2-core machine). Most of them cannot match: ``\\byou(?: are|'re) now ...`` needs
``re now `` somewhere in the text. :func:`needed` works out, from a pattern's parse tree, a small
set of strings of which every match holds at least one (a *necessary* condition); the screen
(:mod:`memlab.safety.rules`) searches a pattern only in a text holding one of them, which skips
only searches that could not have matched: the verdict, the rule and the match are those of the
unfiltered screen (``tests/safety/test_prefilter.py`` checks every default pattern on strings
generated from it, and every attack of the corpora).

How (the "required factors" of a regular expression, as RE2's and trigram indexes' prefilters
compute them; here over Python's own parse tree, ``re._parser``, so the syntax is exactly that
of :mod:`re`): each node is either *exact* (a finite set of the strings it can match, kept while
it has at most ``_MAX_SET`` strings), *required* (a set of which every match contains one) or
unknown. A literal is exact; a character class of at most ``_MAX_CLASS`` characters is exact,
a larger one unknown; anchors, ``\\b`` and lookarounds match the empty string (exact ``{""}``);
an alternation is the union of its branches' sets (unknown if one branch is); a concatenation
multiplies adjacent exact sets and keeps the most selective set of its parts (longest shortest
string, then fewest strings); a repetition of at least one keeps its body's set, an optional
exact body adds ``""``, other repetitions that may match nothing are unknown; a backreference, a
case-insensitive group or an unknown node is unknown. A pattern whose set holds ``""`` or is
unknown has no filter: it is searched in every text. The set is then shrunk to a few substrings
(:func:`_cover`): every string of it contains one of them, so they are necessary too.
"""

from __future__ import annotations

import functools
import re
from re import _constants as K   # the parse tree's opcodes (stdlib, Python >= 3.11)
from re import _parser

__all__ = ["needed", "may_match"]

_MAX_SET = 64      # an exact set larger than this stops being multiplied
_MAX_CLASS = 8     # a character class of more characters is no literal
_MIN_ASCII = 4     # the shortest substring _cover picks: ASCII, other (CJK)
_MIN_OTHER = 2
_MAX_SUB = 16      # ... and the longest (a longer one is no more use, and costs time to find)
_REPEATS = (K.MAX_REPEAT, K.MIN_REPEAT, K.POSSESSIVE_REPEAT)
_EXACT, _REQUIRED = 0, 1
_Info = tuple[int, frozenset[str]] | None   # None: unknown (no string is required)
_EMPTY: _Info = (_EXACT, frozenset({""}))


def _seq(items) -> _Info:
    """A concatenation: adjacent exact sets multiplied while small, then its best set."""
    runs: list[frozenset[str]] = []
    cur: frozenset[str] = frozenset({""})
    exact = True
    for op, av in items:
        info = _node(op, av)
        if info is not None and info[0] == _EXACT:
            product = frozenset(a + b for a in cur for b in info[1])
            if len(product) <= _MAX_SET:
                cur = product
                continue
            runs.append(cur)
            cur, exact = info[1], False
            continue
        exact = False
        runs.append(cur)
        cur = frozenset({""})
        if info is not None:
            runs.append(info[1])
    if exact:
        return (_EXACT, cur)
    runs.append(cur)
    best = max(runs, key=lambda s: (min(map(len, s)), -len(s)))
    return (_REQUIRED, best) if min(map(len, best)) > 0 else None


def _node(op, av) -> _Info:
    if op is K.LITERAL:
        return (_EXACT, frozenset({chr(av)}))
    if op in (K.AT, K.ASSERT, K.ASSERT_NOT):
        return _EMPTY
    if op is K.IN:
        chars: set[str] = set()
        for o, a in av:
            if o is K.LITERAL:
                chars.add(chr(a))
            elif o is K.RANGE and a[1] - a[0] < _MAX_CLASS:
                chars.update(map(chr, range(a[0], a[1] + 1)))
            else:        # NEGATE, CATEGORY (\w, \s, \d), a wide range
                return None
            if len(chars) > _MAX_CLASS:
                return None
        return (_EXACT, frozenset(chars))
    if op is K.SUBPATTERN:
        _group, add_flags, _del_flags, body = av
        return None if add_flags & re.IGNORECASE else _seq(body)
    if op is K.ATOMIC_GROUP:
        return _seq(av)
    if op is K.BRANCH:
        infos = [_seq(body) for body in av[1]]
        if any(i is None for i in infos):
            return None
        union = frozenset().union(*(i[1] for i in infos))
        if all(i[0] == _EXACT for i in infos) and len(union) <= _MAX_SET:
            return (_EXACT, union)
        return None if "" in union else (_REQUIRED, union)
    if op in _REPEATS:
        lo, hi, body = av
        info = _seq(body)
        if info is None:
            return None
        if lo == hi == 1:
            return info
        if lo == 0:
            return (_EXACT, info[1] | {""}) if hi == 1 and info[0] == _EXACT else None
        return None if "" in info[1] else (_REQUIRED, info[1])
    return None          # ANY, NOT_LITERAL, CATEGORY, GROUPREF, GROUPREF_EXISTS, ...


def _cover(strings: frozenset[str]) -> frozenset[str]:
    """A few substrings such that each of ``strings`` contains one, greedily: of the shortest
    string not yet covered, the substring (at least ``_MIN_ASCII`` ASCII or ``_MIN_OTHER`` other
    characters, at most ``_MAX_SUB``) held by most of the strings not yet covered, the longest of
    those; a string with no such substring stands for itself."""
    left, out = set(strings), set()
    while left:
        first = min(left, key=lambda s: (len(s), s))
        subs = {first[i:j] for i in range(len(first))
                for j in range(i + _MIN_OTHER, min(len(first), i + _MAX_SUB) + 1)
                if j - i >= _MIN_ASCII or not first[i:j].isascii()}
        pick = max(subs, key=lambda sub: (sum(sub in s for s in left), len(sub), sub),
                   default=first)
        out.add(pick)
        left = {s for s in left if pick not in s}
    return frozenset(out)


@functools.lru_cache(maxsize=4096)
def needed(pattern: str) -> tuple[str, ...] | None:
    """Strings of which every match of ``pattern`` (a :mod:`re` pattern, compiled without
    flags) contains at least one, or None when none is known (the pattern must always be
    searched). Sorted, for a stable order."""
    try:
        tree = _parser.parse(pattern)
    except re.error:
        return None
    if tree.state.flags & re.IGNORECASE:
        return None
    info = _seq(list(tree))
    if info is None or "" in info[1]:
        return None
    return tuple(sorted(_cover(info[1])))


def may_match(needs: tuple[str, ...] | None, text: str) -> bool:
    """False only when no match of the pattern whose :func:`needed` strings are ``needs`` can
    be found in ``text``."""
    if needs is None:
        return True
    for s in needs:
        if s in text:
            return True
    return False

"""Hijack rules (Reverie §10, §12): does a text try to take over the assistant's identity or
instructions?

The rules are the configured ``safety.hijack_patterns_zh`` and ``safety.hijack_patterns_en``
(``"rule: regex"`` entries; the defaults and their rule names are described in
:class:`memlab.config.SafetyConfig`). A text matches when some pattern finds it in the text's
normalised form (:func:`memlab.safety.canonical.normalize`): a pattern that anchors on a line
(``^`` or ``\\n``: role markers such as ``system:``) on the text with its line breaks, every other
pattern on the text with line breaks as spaces (``ignore\\nprevious instructions`` is one phrase).
With ``safety.match_despaced``, a text that spells words out letter by letter is also matched with
every space removed, by the patterns without open-ended wildcards (their spaces and ``\\b``
removed). Pure functions: no store, no clock.

What is *not* a hijack (memlab's choices, tested by the benign corpus ``tests/safety``): a user
speaking of themselves (``I am now a student``, ``我现在是学生``), a wish about how to be addressed
(``from now on call me Mike``), talk about rules, systems or developer mode that does not address
the assistant (``my brother ignores the rules``, ``solar system: eight planets``, ``我手机开了
开发者模式``) and questions (``你现在是不是很累？``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memlab.config import SafetyConfig, parse_patterns
from memlab.safety.canonical import despace, normalize_spelled

__all__ = ["Rule", "Hit", "Verdict", "rules_of", "find_hijack", "guard_user_message", "excerpt"]

# a pattern with one of these can match across words once the spaces are gone: not despaced
_OPEN_ENDED = re.compile(r"\\[wWS]|\[\^|(?<!\\)\.")
_CLASS = re.compile(r"\[(?!\^)(?:\\.|[^\]])*\]")   # a character class such as [.!?;]


@dataclass(frozen=True)
class Rule:
    """One configured pattern: the rule it belongs to, its source and its compiled forms."""

    name: str
    pattern: str
    regex: re.Pattern[str]
    despaced: re.Pattern[str] | None   # None: not matched on the despaced text
    lines: bool                        # anchored on line starts: matched with the line breaks


@dataclass(frozen=True)
class Hit:
    """Where a rule matched: on the normalised text (``despaced`` False) or its despaced form."""

    rule: str
    pattern: str
    start: int
    end: int
    despaced: bool
    text: str   # the normalised (or despaced) text the positions refer to


@dataclass(frozen=True)
class Verdict:
    """The injection guard's decision on a user message: ``allowed`` (recall runs) and, when
    not, the ``rule`` and ``pattern`` that matched and an ``excerpt`` of the normalised message."""

    allowed: bool
    rule: str | None = None
    pattern: str | None = None
    excerpt: str = ""


def _despaced(pattern: str) -> re.Pattern[str] | None:
    if _OPEN_ENDED.search(_CLASS.sub("", pattern)):
        return None
    # an optional space (" ?", " *") goes with its quantifier, then every other space
    flat = re.sub(r" [?*+]\??", "", pattern)
    return re.compile(flat.replace(" ", "").replace(r"\b", ""))


@functools.lru_cache(maxsize=16)
def _compile(entries: tuple[str, ...]) -> tuple[Rule, ...]:
    return tuple(Rule(name, pattern, re.compile(pattern), _despaced(pattern),
                      "^" in pattern or "\\n" in pattern or "\n" in pattern)
                 for name, pattern in parse_patterns(entries))


def rules_of(cfg: SafetyConfig) -> tuple[Rule, ...]:
    """The compiled rules of ``cfg`` (zh first, then en), compiled once per pattern list."""
    return _compile(tuple(cfg.hijack_patterns_zh) + tuple(cfg.hijack_patterns_en))


def find_hijack(text: str, cfg: SafetyConfig) -> Hit | None:
    """The first rule (in configured order) that matches ``text``, or None."""
    norm, spelled = normalize_spelled(text)
    one_line = norm.replace("\n", " ")
    rules = rules_of(cfg)
    for r in rules:
        target = norm if r.lines else one_line
        m = r.regex.search(target)
        if m:
            return Hit(r.name, r.pattern, m.start(), m.end(), False, target)
    if cfg.match_despaced and spelled:
        flat = despace(norm)
        for r in rules:
            m = r.despaced.search(flat) if r.despaced is not None else None
            if m:
                return Hit(r.name, r.pattern, m.start(), m.end(), True, flat)
    return None


def excerpt(hit: Hit, chars: int) -> str:
    """At most ``chars`` characters of the matched text, the match centred in its context."""
    span = hit.end - hit.start
    if span >= chars:
        return hit.text[hit.start:hit.start + chars]
    before = (chars - span) // 2
    lo = max(0, hit.start - before)
    hi = min(len(hit.text), lo + chars)
    lo = max(0, hi - chars)
    return hit.text[lo:hi]


def guard_user_message(text: str, cfg: SafetyConfig) -> Verdict:
    """The injection guard (§10 ``guard.memory_safe``): recall runs for this user message unless
    it matches a hijack rule. With ``safety.guard_user_message`` off every message is allowed."""
    if not cfg.guard_user_message:
        return Verdict(True)
    hit = find_hijack(text, cfg)
    if hit is None:
        return Verdict(True)
    return Verdict(False, hit.rule, hit.pattern, excerpt(hit, cfg.audit_excerpt_chars))

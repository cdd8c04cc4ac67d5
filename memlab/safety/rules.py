"""Hijack rules (Reverie §10, §12): does a text try to take over the assistant's identity or
instructions?

The rules are the configured ``safety.hijack_patterns_zh`` and ``safety.hijack_patterns_en``
(``"rule: regex"`` entries; the defaults, in ``memlab/data/safety/``, and their rule names are
described in :class:`memlab.config.SafetyConfig`). A text matches when some pattern finds it in
one of its readings, tried in this order (each named in :attr:`Hit.view`):

1. ``text``: the normalised form (:func:`memlab.safety.canonical.normalize`): a pattern that
   anchors on a line (``^`` or ``\\n``: role markers such as ``system:``, markdown headers) on the
   text with its line breaks, every other pattern on the text with line breaks as spaces
   (``ignore\\nprevious instructions`` is one phrase);
2. ``despaced``: with ``safety.match_despaced``, a text that spells words out letter by letter is
   also matched with every space removed, by the patterns without open-ended wildcards (their
   spaces and ``\\b`` removed);
3. ``leetspeak``: with ``safety.match_leetspeak``, the text with its leet words read back
   (:func:`memlab.safety.views.deleet`), like 1 and 2;
4. ``pinyin``: the text's Latin letters alone (:func:`memlab.safety.views.letters`) against
   ``safety.hijack_patterns_pinyin``;
5. ``base64/...``: with ``safety.decode_base64``, what the base64-looking spans decode to
   (:func:`memlab.safety.decode.decoded_spans`), screened like a text of its own, down to
   ``safety.base64_max_depth`` levels of encoding.

Reported speech about someone else is not a hijack: a match of a rule named in
``safety.reported_speech_rules`` is passed over when a reported-speech frame of
``safety.reported_speech_en``/``_zh`` ends right before it in its sentence and the rest of that
sentence does not address the assistant ("Alice said her boss told her to ignore previous
instructions from the old manager", "小王说他老板让他忽略之前的指令"; not "she told him to ignore
your rules"). Pure functions: no store, no clock.

What is *not* a hijack (memlab's choices, tested by the benign corpora ``tests/safety`` and
``tests/data/hijack_screen.jsonl``): a user speaking of themselves (``I am now a student``,
``我现在是学生``), a wish about how to be addressed (``from now on call me Mike``), talk about
rules, systems, roles or developer mode that does not address the assistant (``my brother ignores
the rules``, ``solar system: eight planets``, ``my role: system architect``, ``我手机开了开发者模式``),
reported speech about a third party, base64 data that decodes to something else (a token, an
image) and questions (``你现在是不是很累？``).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass

from memlab.config import SafetyConfig, parse_patterns
from memlab.safety.canonical import despace, invisible, normalize_spelled
from memlab.safety.decode import decoded_spans
from memlab.safety.prefilter import may_match, needed
from memlab.safety.views import deleet, letters, words_of

__all__ = ["Rule", "Hit", "Verdict", "rules_of", "find_hijack", "guard_user_message", "excerpt"]

# a pattern with one of these can match across words once the spaces are gone: not despaced
_OPEN_ENDED = re.compile(r"\\[wWS]|\[\^|(?<!\\)\.")
_CLASS = re.compile(r"\[(?!\^)(?:\\.|[^\]])*\]")   # a character class such as [.!?;]
_SENTENCE_END = ".!?;。\n"


@dataclass(frozen=True)
class Rule:
    """One configured pattern: the rule it belongs to, its source and its compiled forms."""

    name: str
    pattern: str
    regex: re.Pattern[str]
    despaced: re.Pattern[str] | None   # None: not matched on the despaced text
    lines: bool                        # anchored on line starts: matched with the line breaks
    needs: tuple[str, ...] | None = None            # a match holds one (prefilter.needed)
    despaced_needs: tuple[str, ...] | None = None   # the same for the despaced pattern


@dataclass(frozen=True)
class Hit:
    """Where a rule matched: ``view`` names the reading of the text (``text``, ``despaced``,
    ``leetspeak``, ``leetspeak despaced``, ``pinyin``; ``base64/`` before the reading of a
    decoded span); ``text`` is that reading, the positions refer to it."""

    rule: str
    pattern: str
    start: int
    end: int
    despaced: bool
    text: str
    view: str = "text"


@dataclass(frozen=True)
class Verdict:
    """The injection guard's decision on a user message: ``allowed`` (recall runs) and, when
    not, the ``rule`` and ``pattern`` that matched and an ``excerpt`` of the normalised message."""

    allowed: bool
    rule: str | None = None
    pattern: str | None = None
    excerpt: str = ""


@dataclass(frozen=True)
class _Compiled:
    rules: tuple[Rule, ...]                  # zh, then en
    pinyin: tuple[Rule, ...]
    frames: tuple[re.Pattern[str], ...]      # each anchored at the end: (?:frame)$
    addressee: re.Pattern[str] | None
    exempt: frozenset[str]                   # rules that reported speech exempts
    vocabulary: frozenset[str]               # what a leet word may read as


def _despaced(pattern: str) -> re.Pattern[str] | None:
    if _OPEN_ENDED.search(_CLASS.sub("", pattern)):
        return None
    # an optional space (" ?", " *") goes with its quantifier, then every other space
    flat = re.sub(r" [?*+]\??", "", pattern)
    return re.compile(flat.replace(" ", "").replace(r"\b", ""))


def _rule(name: str, pattern: str) -> Rule:
    flat = _despaced(pattern)
    return Rule(name, pattern, re.compile(pattern), flat,
                "^" in pattern or "\\n" in pattern or "\n" in pattern, needed(pattern),
                None if flat is None else needed(flat.pattern))


@functools.lru_cache(maxsize=16)
def _compile(entries: tuple[str, ...]) -> tuple[Rule, ...]:
    return tuple(_rule(name, pattern) for name, pattern in parse_patterns(entries))


@functools.lru_cache(maxsize=16)
def _compile_all(zh: tuple[str, ...], en: tuple[str, ...], pinyin: tuple[str, ...],
                 speech: tuple[str, ...], exempt: tuple[str, ...]) -> _Compiled:
    parsed = parse_patterns(speech)
    frames = tuple(re.compile(f"(?:{p})$") for name, p in parsed if name == "frame")
    addressee = [p for name, p in parsed if name == "addressee"]
    return _Compiled(_compile(zh + en), _compile(pinyin), frames,
                     re.compile("|".join(f"(?:{p})" for p in addressee)) if addressee else None,
                     frozenset(exempt), words_of(en))


def _compiled(cfg: SafetyConfig) -> _Compiled:
    return _compile_all(tuple(cfg.hijack_patterns_zh), tuple(cfg.hijack_patterns_en),
                        tuple(cfg.hijack_patterns_pinyin),
                        tuple(cfg.reported_speech_zh) + tuple(cfg.reported_speech_en),
                        tuple(cfg.reported_speech_rules))


def rules_of(cfg: SafetyConfig) -> tuple[Rule, ...]:
    """The compiled rules of ``cfg`` (zh first, then en), compiled once per pattern list."""
    return _compiled(cfg).rules


def _reported(target: str, m: re.Match[str], c: _Compiled, reach: int) -> bool:
    """Whether the match ``m`` of ``target`` is reported speech about someone else: a frame
    ends right before it in its sentence (within ``reach`` characters), and from the frame to the
    sentence's end nothing addresses the assistant."""
    lo = max(target.rfind(ch, 0, m.start()) for ch in _SENTENCE_END) + 1
    lo = max(lo, m.start() - reach)
    ends = [i for i in (target.find(ch, m.end()) for ch in _SENTENCE_END) if i >= 0]
    hi = min(ends, default=len(target))
    prefix = target[lo:m.start()].rstrip()
    for frame in c.frames:
        f = frame.search(prefix)
        if f is not None:
            return c.addressee is None or c.addressee.search(target, lo + f.start(), hi) is None
    return False


def _match(rules: tuple[Rule, ...], norm: str, c: _Compiled, view: str, reach: int
           ) -> Hit | None:
    """The first rule that matches ``norm`` (a canonical reading with its line breaks), reported
    speech passed over."""
    one_line = norm.replace("\n", " ")
    for r in rules:
        target = norm if r.lines else one_line
        if r.needs is not None:   # the prefilter: no string a match needs, no search
            for s in r.needs:
                if s in target:
                    break
            else:
                continue
        m = r.regex.search(target)
        if m is None:
            continue
        if r.name in c.exempt and c.frames:   # every match of it, until one is not reported
            m = next((x for x in r.regex.finditer(target) if not _reported(target, x, c, reach)),
                     None)
            if m is None:
                continue
        return Hit(r.name, r.pattern, m.start(), m.end(), False, target, view)
    return None


def _match_despaced(rules: tuple[Rule, ...], norm: str, view: str) -> Hit | None:
    flat = despace(norm)
    for r in rules:
        if r.despaced is None or not may_match(r.despaced_needs, flat):
            continue
        m = r.despaced.search(flat)
        if m:
            return Hit(r.name, r.pattern, m.start(), m.end(), True, flat, view)
    return None


def _screen(text: str, cfg: SafetyConfig, c: _Compiled, depth: int) -> Hit | None:
    norm, spelled = normalize_spelled(text)
    readings = [(norm, "text")]
    if cfg.match_leetspeak:
        leet = deleet(norm, c.vocabulary, max_readings=cfg.leetspeak_max_readings)
        if leet is not None:
            readings.append((leet, "leetspeak"))
    for reading, view in readings:
        hit = _match(c.rules, reading, c, view, cfg.reported_speech_chars)
        if hit is None and cfg.match_despaced and spelled:
            hit = _match_despaced(c.rules, reading, "despaced" if view == "text"
                                  else f"{view} despaced")
        if hit is not None:
            return hit
    if c.pinyin:
        flat = letters(norm)
        for r in c.pinyin if flat else ():
            m = r.regex.search(flat) if may_match(r.needs, flat) else None
            if m:
                return Hit(r.name, r.pattern, m.start(), m.end(), True, flat, "pinyin")
    if cfg.decode_base64 and depth < cfg.base64_max_depth:
        decoded = decoded_spans(text, min_chars=cfg.base64_min_chars, drop=invisible())
        hit = None if decoded is None else _screen(decoded, cfg, c, depth + 1)
        if hit is not None:
            return dataclasses.replace(hit, view=f"base64/{hit.view}")
    return None


def find_hijack(text: str, cfg: SafetyConfig) -> Hit | None:
    """The first rule (in configured order, reading by reading) that matches ``text``, or None."""
    return _screen(text, cfg, _compiled(cfg), 0)


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

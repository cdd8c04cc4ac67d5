"""Expanded keys: a second lexical field written with every memory (issue 21, ``recall.expanded_keys``).

What the rules already in memlab read from a memory's text, as terms of their own field, so that
BM25 over that field (the ``key_bm25`` column, :mod:`memlab.recall.candidates`) weighs what a
memory *states* over every word it happens to contain (keys expanded with extracted facts: the
LongMemEval paper, +9.4% recall):

- facts: the first of ``facts.patterns`` the text matches (:func:`memlab.write.facts.match_fact`):
  the terms of its attribute and value ("my favourite food is dumplings" -> favourite, food,
  dumplings);
- names: :func:`memlab.text.extract_entities` (capitalised names, 《titles》, quoted terms,
  nicknames), as terms;
- dates: each calendar date the text writes, in one canonical form whatever the language
  (:func:`date_keys`: 4月27日, April 27th, 27 April, 2023-04-27 -> ``date:04-27``; with a year also
  ``date:2023-04-27`` and ``month:2023-05``; a month with its year, 2023年5月 / May 2023 ->
  ``month:2023-05``), so that a question's date finds the memory that names it in the other
  language or spelling;
- atoms: ``atom:<kind>`` for each kind of typed atom (:mod:`memlab.write.atoms`: preference,
  constraint, promise, event, lesson) a clause of the text gives.

Terms are :func:`memlab.text.memory_terms` (the lexical route's tokenisation: English words,
Chinese runs with their 2- and 3-grams), so a question is read over this field with its own
lexical terms plus its dates and atom kinds (:func:`query_keys`). Pure: text in, strings out.
"""

from __future__ import annotations

import re
from datetime import date

from memlab.config import MemlabConfig
from memlab.numerals import MONTHS, ZH_SMALL, ZH_YEAR, zh_int
from memlab.text import extract_entities, memory_terms

from .atoms import extract_atoms
from .facts import match_fact

__all__ = ["date_keys", "expand_keys", "query_keys"]

# -- dates (calendar facts: tables, not tunables) --------------------------------------------------
_MONTHS = {name.lower(): i for name, i in MONTHS.items()}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ZN = ZH_SMALL
_ZY = ZH_YEAR
_NOT_DIGIT_AFTER = r"(?![0-9])"
#: (regex, reader) in the order tried; the text a rule matched is masked before the next one runs
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"(?:({_ZY})\s*年\s*)?({_ZN})\s*月\s*({_ZN})\s*[日号]"), "zh_ymd"),
    (re.compile(rf"({_ZY})\s*年\s*({_ZN})\s*月"), "zh_ym"),
    (re.compile(r"(?<![0-9])([0-9]{4})[-/.]([0-9]{1,2})[-/.]([0-9]{1,2})" + _NOT_DIGIT_AFTER),
     "iso"),
    (re.compile(rf"(?i)\b{_MONTH}\s+([0-9]{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+([0-9]{{4}})\b)?"),
     "en_md"),
    (re.compile(rf"(?i)\b([0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?![a-z])"
                rf"(?:,?\s+([0-9]{{4}})\b)?"), "en_dm"),
    (re.compile(rf"(?i)\b{_MONTH}\s+(?:of\s+)?([0-9]{{4}})\b"), "en_my"),
)


def _day_keys(y: int | None, m: int | None, d: int | None) -> list[str]:
    """The keys of a date (``date:MM-DD``, and with a year ``date:YYYY-MM-DD`` and
    ``month:YYYY-MM``), or of a month of a year (``month:YYYY-MM``); none for an impossible one."""
    if m is None or not 1 <= m <= 12 or (y is not None and not 1000 <= y <= 9999):
        return []
    if d is None:
        return [f"month:{y:04d}-{m:02d}"] if y is not None else []
    try:
        date(2000 if y is None else y, m, d)   # 2000: a leap year admits 02-29 without a year
    except ValueError:
        return []
    out = [f"date:{m:02d}-{d:02d}"]
    if y is not None:
        out += [f"date:{y:04d}-{m:02d}-{d:02d}", f"month:{y:04d}-{m:02d}"]
    return out


def _read(kind: str, g: tuple[str | None, ...]) -> list[str]:
    num = zh_int
    if kind == "zh_ymd":
        return _day_keys(num(g[0]) if g[0] else None, num(g[1]), num(g[2]))
    if kind == "zh_ym":
        return _day_keys(num(g[0]), num(g[1]), None)
    if kind == "iso":
        return _day_keys(int(g[0]), int(g[1]), int(g[2]))
    if kind == "en_md":
        return _day_keys(int(g[2]) if g[2] else None, _MONTHS[g[0].lower()], int(g[1]))
    if kind == "en_dm":
        return _day_keys(int(g[2]) if g[2] else None, _MONTHS[g[1].lower()], int(g[0]))
    return _day_keys(int(g[1]), _MONTHS[g[0].lower()], None)   # en_my


def date_keys(text: str) -> list[str]:
    """The canonical keys of the calendar dates ``text`` writes, first-seen order, each once:
    ``date:MM-DD`` for a day (4月27日, 四月二十七号, April 27th, 27 April, 2023-04-27, 2023/4/27),
    with a year also ``date:YYYY-MM-DD`` and ``month:YYYY-MM``; ``month:YYYY-MM`` for a month of
    a year (2023年5月, May 2023). English month names in any case, but the month May only as
    "May" (lower-case "may" is the verb). Relative expressions (昨天, last Saturday) are not dates of the
    text (the question's are resolved by :mod:`memlab.recall.timeexpr`)."""
    out: list[str] = []
    for rx, kind in _RULES:
        def take(m: re.Match[str]) -> str:
            if kind.startswith("en_") and "may" in (g.lower() for g in m.groups() if g) \
                    and "May" not in m.group(0):
                return m.group(0)   # "I may 5 ...": the verb, not the month
            out.extend(_read(kind, m.groups()))
            return " " * len(m.group(0))
        text = rx.sub(take, text)
    return list(dict.fromkeys(out))


def _terms(text: str, cfg: MemlabConfig) -> list[str]:
    rc = cfg.recall
    return memory_terms(text, term_cap=rc.term_cap, text_cap=rc.text_cap)


def _atom_keys(text: str, cfg: MemlabConfig) -> list[str]:
    return [f"atom:{a.kind}" for a in extract_atoms(text[:cfg.recall.text_cap], cfg.jobs)]


def expand_keys(text: str, cfg: MemlabConfig) -> list[str]:
    """The expanded keys of a memory's text (distinct, first-seen order, at most
    ``recall.term_cap``): its fact's attribute and value terms, its names' terms, its date keys,
    its atom kinds."""
    keys: list[str] = []
    fact = match_fact(text[:cfg.recall.text_cap], cfg.facts)
    if fact is not None:
        keys += _terms(fact.attribute.replace(":", " ") + " " + fact.value, cfg)
    for name in extract_entities(text[:cfg.recall.text_cap], min_chars=cfg.entity.min_chars):
        keys += _terms(name, cfg)
    keys += date_keys(text[:cfg.recall.text_cap])
    keys += _atom_keys(text, cfg)
    return list(dict.fromkeys(keys))[:cfg.recall.term_cap]


def query_keys(question: str, cfg: MemlabConfig) -> list[str]:
    """A question's terms over the expanded-key field: its lexical terms (as the lexical route
    reads it, ``recall.query_term_cap``), its date keys and its atom kinds."""
    rc = cfg.recall
    terms = memory_terms(question, term_cap=rc.query_term_cap, text_cap=rc.text_cap)
    return list(dict.fromkeys(terms + date_keys(question[:rc.text_cap])
                              + _atom_keys(question, cfg)))

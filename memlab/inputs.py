"""Validation of what callers hand to the public API: tenants, memory ids, texts, k.

One validator per kind of value, used by every public call that takes it, so that the same value is
accepted or refused the same way everywhere. Each raises :class:`~memlab.errors.InvalidInput` naming
the field, the rule and the value, before anything is read or written.

Text policy (memories and queries): a text must be a non-blank ``str`` of valid Unicode — a lone
surrogate (U+D800-U+DFFF) cannot be stored as UTF-8 and is refused — without control characters
(Unicode category Cc: C0, DEL and C1) other than tab, newline and carriage return. memlab's choice:
refuse rather than strip, because a memory is stored verbatim (escaping is the prompt's job) and a
control character in a memory is almost always a decoding or injection accident the caller should
see; the error names the character and its position. A text with nothing visible in it is blank
and refused like an empty one: only whitespace, format characters (Unicode category Cf:
zero-width spaces and joiners, bidi marks, the BOM, soft hyphens) and the other code points
Unicode calls ``Default_Ignorable`` (variation selectors, Hangul fillers, tag characters): what
the prompt block removes (:mod:`memlab.recall.inject`), so a blank memory would show as nothing.
Ids (memory, agent and user ids) follow the same rule with no control character at all. Every
other string stored with a memory (speaker, tags, meta, ...) must be valid Unicode, and a
structured value (meta, ttl, evidence, emotions) may nest at most :data:`MAX_NESTING` levels deep.

Times and counts (the limits of what memlab stores; memlab's choice, documented in the README):

- a time (``timestamp``, ``event_time``, ``last_accessed``, ...) is Unix seconds (UTC) from
  0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z inclusive (:data:`MIN_TIME`, :data:`MAX_TIME`):
  what Python's ``datetime`` can represent, so every time memlab stores can be shown as a date,
  put in its calendar quarter (the vector table's partition key) and exported as ISO 8601. NaN,
  infinities and anything outside are refused (:func:`check_time`);
- a count (``access_count``, ``mention_count``, ``fact_revision``, ``schema_version``) is a whole
  number up to :data:`MAX_INT` = 2**53 - 1: exact as a float64 (the raw-signal tables, JSON
  readers such as JavaScript) and far inside SQLite's 64-bit INTEGER, so an increment never
  overflows it (:func:`check_int`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from numbers import Integral, Real
from typing import Any, Iterator

from memlab.errors import InvalidInput

#: the earliest and latest time memlab stores, Unix seconds: 0001-01-01T00:00:00Z and
#: 9999-12-31T23:59:59Z (Python's datetime range, in UTC)
MIN_TIME = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()
MAX_TIME = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
TIME_RANGE = "0001-01-01T00:00:00Z..9999-12-31T23:59:59Z"
#: the largest count memlab stores: 2**53 - 1, exact as a float64 and inside SQLite's INTEGER
MAX_INT = 2**53 - 1
#: how deep a structured value (meta, ttl, evidence, emotions; a JSON header) may nest
MAX_NESTING = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_ID_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
#: Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, Unicode 15): with whitespace
#: and the format characters (Cf), what shows nothing (and what the prompt block removes)
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
#: a JSON string (skipped) or a bracket (counted) of a JSON text
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _refuse_char(field: str, text: str, m: re.Match[str], rule: str) -> InvalidInput:
    """InvalidInput naming the character, its position and the rule (``rule`` for a control
    character; a lone surrogate is never valid Unicode)."""
    ch = m.group()
    if "\ud800" <= ch <= "\udfff":
        what = f"lone surrogate U+{ord(ch):04X} at position {m.start()}: not valid Unicode " \
            "(cannot be stored as UTF-8)"
    else:
        what = f"control character U+{ord(ch):04X} at position {m.start()}: {rule}"
    return InvalidInput(field, what, text[max(0, m.start() - 20):m.start() + 20])


def _blank(text: str) -> bool:
    """Nothing visible: only whitespace, format characters (Cf) and default-ignorable code points
    (stops at the first visible character: one or two look-ups for an ordinary text)."""
    for c in text:
        if not (c.isspace() or unicodedata.category(c) == "Cf" or _IGNORABLE.match(c)):
            return False
    return True


def check_text(text: Any, field: str, *, max_chars: int | None, limit_name: str) -> str:
    """A memory text or a query: a non-blank str (something visible in it) of at most
    ``max_chars`` characters (the config field ``limit_name``; None: no limit), valid Unicode, no
    control character but tab, newline, carriage return."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(field, "must be a non-empty string", text)
    if _blank(text):
        raise InvalidInput(field, "must hold a visible character (only whitespace and "
                           "zero-width or other default-ignorable characters)",
                           " ".join(f"U+{ord(c):04X}" for c in text[:20]))
    if max_chars is not None and len(text) > max_chars:
        raise InvalidInput(field, f"longer than {limit_name} ({max_chars})", len(text))
    m = _TEXT_CONTROL.search(text)
    if m:
        raise _refuse_char(field, text, m, "texts may hold no control character but tab, "
                           "newline and carriage return")
    return text


def check_id(value: Any, field: str) -> str:
    """A memory, agent or user id: a non-blank str, valid Unicode, no control character."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, "must be a non-empty string", value)
    m = _ID_CONTROL.search(value)
    if m:
        raise _refuse_char(field, value, m, "ids may hold no control character")
    return value


def check_ids(ids: Any, field: str = "ids") -> list[str]:
    """A list, tuple or other sequence of memory ids (not one bare string)."""
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise InvalidInput(field, "must be a list of memory ids (strings)",
                           ids if isinstance(ids, (str, bytes)) else type(ids).__name__)
    return [check_id(v, f"{field}[{i}]") for i, v in enumerate(ids)]


def check_tenant(agent_id: Any, user_id: Any, *, default_agent_id: str, default_user_id: str,
                 where: str = "") -> tuple[str, str]:
    """(agent_id, user_id): ``None`` alone means the default (``writer.default_agent_id`` /
    ``writer.default_user_id``); anything else must be a valid id ('', 0, False are refused).
    ``where`` prefixes the field names (``items[3].``)."""
    a = check_id(default_agent_id, "writer.default_agent_id") if agent_id is None \
        else check_id(agent_id, f"{where}agent_id")
    u = check_id(default_user_id, "writer.default_user_id") if user_id is None \
        else check_id(user_id, f"{where}user_id")
    return a, u


def _walk(value: Any, field: str) -> Iterator[tuple[str, str]]:
    """(field path, string) of every string inside ``value`` (nested mappings and sequences, keys
    too), depth first without recursion; InvalidInput naming the path where ``value`` nests deeper
    than :data:`MAX_NESTING`."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        v, path, depth = stack.pop()
        if isinstance(v, str):
            yield path, v
            continue
        if isinstance(v, dict) or isinstance(v, Mapping):
            children = [(k, f"{path} key") for k in v] + \
                [(x, f"{path}[{k!r}]") for k, x in v.items()]
        elif isinstance(v, (list, tuple, set, frozenset)):
            children = [(x, f"{path}[{i}]") for i, x in enumerate(v)]
        else:
            continue
        if depth >= MAX_NESTING and children:
            raise InvalidInput(field, f"nests deeper than {MAX_NESTING} levels (a mapping or "
                               f"list inside another)", f"depth {depth + 1} at {path}")
        stack.extend((x, p, depth + 1) for x, p in reversed(children))


def check_unicode(value: Any, field: str) -> None:
    """Every string inside ``value`` (nested mappings and sequences, keys too) is valid Unicode
    (a lone surrogate cannot be stored as UTF-8), and ``value`` nests at most
    :data:`MAX_NESTING` levels deep."""
    if isinstance(value, str):              # the common cases first: no walk
        m = _SURROGATE.search(value)
        if m:
            raise _refuse_char(field, value, m, "")
        return
    if value is None or isinstance(value, (int, float)) or (
            isinstance(value, (dict, list, tuple)) and not value):
        return
    for path, s in _walk(value, field):
        m = _SURROGATE.search(s)
        if m:
            raise _refuse_char(path, s, m, "")


def check_json_depth(text: str, field: str, *, max_depth: int = MAX_NESTING) -> None:
    """A JSON text nests at most ``max_depth`` levels deep, checked before it is parsed (Python's
    parser recurses once per level). InvalidInput naming ``field`` (``<field>.<key>`` when the
    deep part is under a key of a top-level object), the depth and the character."""
    depth, key = 0, None
    for m in _JSON_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                raise InvalidInput(field if key is None else f"{field}.{key}",
                                   f"nests deeper than {max_depth} levels (a JSON object or "
                                   f"array inside another)", f"depth {depth} at character "
                                   f"{m.start()}")
        elif c in "]}":
            depth -= 1
        elif depth == 1:    # a top-level key, or a value: the key of a deep value comes before it
            key = c[1:-1]


def check_time(value: Any, field: str, *, optional: bool = False) -> float | None:
    """A time: Unix seconds (an int or float, not bool) or a timezone-aware datetime, from
    :data:`MIN_TIME` to :data:`MAX_TIME` (0001-01-01T00:00:00Z..9999-12-31T23:59:59Z) inclusive;
    returned as float seconds. ``optional``: None is allowed (and returned)."""
    if value is None and optional:
        return None
    if isinstance(value, datetime):
        if value.utcoffset() is None:
            raise InvalidInput(field, "a datetime must be timezone-aware (a naive time is "
                               "ambiguous)", value.isoformat())
        seconds = (value - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds()
    elif isinstance(value, Real) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise InvalidInput(field, "must be a time: Unix seconds (a number) or a timezone-aware "
                           "datetime" + (", or None" if optional else ""),
                           value if isinstance(value, (str, bytes)) else type(value).__name__)
    if not math.isfinite(seconds) or not MIN_TIME <= seconds <= MAX_TIME:
        raise InvalidInput(field, f"must be a finite time in {TIME_RANGE} (Unix seconds "
                           f"{MIN_TIME:.0f}..{MAX_TIME:.0f})", value)
    return seconds


def time_problem(seconds: Any) -> str | None:
    """Why ``seconds`` is not a time memlab stores, or None (the rule of :func:`check_time`, for
    callers that name the field their own way)."""
    try:
        check_time(seconds, "time")
    except InvalidInput as exc:
        return exc.rule
    return None


def check_int(value: Any, field: str, *, lo: int = 0) -> int:
    """A count: an int (not bool) in [``lo``, :data:`MAX_INT`]."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= MAX_INT:
        raise InvalidInput(field, f"must be a whole number in [{lo}, {MAX_INT}] (2**53 - 1: "
                           "memlab's bound on a stored count)",
                           value if isinstance(value, (int, float, str)) and
                           (not isinstance(value, int) or abs(value) < 10**40)
                           else _short(value))
    return value


def _short(value: Any) -> str:
    """A huge or foreign value, shown short in an error."""
    if isinstance(value, int):
        return f"an integer of {len(str(abs(value)))} digits"
    return type(value).__name__


def check_k(k: Any, *, field: str, max_k: int, why: str) -> int:
    """A number of memories: a whole number in [1, max_k] (``why`` says where max_k comes from).
    bool is refused, and so is a float with a fractional part (2.9 is not silently 2)."""
    if isinstance(k, bool) or not (isinstance(k, Integral)
                                   or (isinstance(k, float) and k.is_integer())):
        raise InvalidInput(field, "must be a whole number (an int)", k)
    k = int(k)
    if not 1 <= k <= max_k:
        raise InvalidInput(field, f"must be in [1, {max_k}] ({why})", k)
    return k

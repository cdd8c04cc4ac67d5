"""Validation of what callers hand to the public API: tenants, memory ids, texts, k.

One validator per kind of value, used by every public call that takes it, so that the same value is
accepted or refused the same way everywhere. Each raises :class:`~memlab.errors.InvalidInput` naming
the field, the rule and the value, before anything is read or written.

Text policy (memories and queries): a text must be a non-blank ``str`` of valid Unicode — a lone
surrogate (U+D800-U+DFFF) cannot be stored as UTF-8 and is refused — without control characters
(Unicode category Cc: C0, DEL and C1) other than tab, newline and carriage return. memlab's choice:
refuse rather than strip, because a memory is stored verbatim (escaping is the prompt's job) and a
control character in a memory is almost always a decoding or injection accident the caller should
see; the error names the character and its position. Ids (memory, agent and user ids) follow the
same rule with no control character at all. Every other string stored with a memory (speaker,
tags, meta, ...) must be valid Unicode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

from memlab.errors import InvalidInput

_SURROGATE = re.compile("[\ud800-\udfff]")
_TEXT_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_ID_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


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


def check_text(text: Any, field: str, *, max_chars: int | None, limit_name: str) -> str:
    """A memory text or a query: a non-blank str of at most ``max_chars`` characters (the config
    field ``limit_name``; None: no limit), valid Unicode, no control character but tab, newline,
    carriage return."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(field, "must be a non-empty string", text)
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


def check_unicode(value: Any, field: str) -> None:
    """Every string inside ``value`` (nested mappings and sequences, keys too) is valid Unicode:
    a lone surrogate cannot be stored as UTF-8."""
    if isinstance(value, str):
        m = _SURROGATE.search(value)
        if m:
            raise _refuse_char(field, value, m, "")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            check_unicode(k, f"{field} key")
            check_unicode(v, f"{field}[{k!r}]")
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, v in enumerate(value):
            check_unicode(v, f"{field}[{i}]")


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

"""Familiars TTL (§5.3.3, §5.8.2): when a memory stops being live, and the sweep that expires it.

A record's ``ttl`` is None (never expires) or one of::

    {"kind": "absolute", "expires_at": "2026-09-01T00:00:00Z"}   expired when now >= expires_at
    {"kind": "turns", "turns": 5, "created_turn": 10}            expired when turn - 10 >= 5
    {"kind": "scope", "scope": "session" | "dialogue"}           expired when that scope ended

No hidden state: the caller passes the time (``now``, Unix seconds UTC, as everywhere in memlab;
an aware ``datetime`` is accepted too), the dialogue's turn counter and whether the session and
the dialogue are still active, each call (or once, as a :class:`TTLContext`).

:func:`check_ttl` is the one validator: the write path (:mod:`memlab.write.records`) refuses a
malformed ttl with it (``items[i].ttl.<field>``), and :func:`is_expired` raises the same errors
naming the memory (``memory <id>: ttl.<field>``) for a malformed ttl already stored.

:func:`expire_due` marks the records whose TTL has run out ``lifecycle_state = 'expired'``: kept on
disk (``store.get`` returns them), never recalled again (recall reads active, not deprecated
records only). The Familiars reader (:mod:`memlab.recall.reader`) also filters its candidates
with :func:`is_live`, so a record that is due but not swept yet is never read either.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from numbers import Real
from typing import Any, Mapping

from memlab.clock import to_unix
from memlab.errors import InvalidInput
from memlab.store import Repository, transaction
from memlab.types import MemoryRecord

TTL_KINDS = ("absolute", "turns", "scope")
TTL_SCOPES = ("session", "dialogue")
#: the keys each kind takes (all required)
_KEYS = {"absolute": ("kind", "expires_at"), "turns": ("kind", "turns", "created_turn"),
         "scope": ("kind", "scope")}

__all__ = ["TTL_KINDS", "TTL_SCOPES", "TTLContext", "check_ttl", "check_turn", "expires_at",
           "is_expired", "is_live", "expire_due"]


@dataclass(frozen=True, slots=True)
class TTLContext:
    """What TTL decisions depend on, passed in explicitly: the time (Unix seconds UTC), the
    dialogue's turn counter (None: unknown; a turns TTL then cannot be decided and is an error)
    and whether the session and the dialogue are still active. ``is_live(rec, **ctx.kwargs())``.
    """

    now: float
    turn_counter: int | None = None
    session_active: bool = True
    dialogue_active: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "now", _now(self.now))
        check_turn(self.turn_counter)
        for name in ("session_active", "dialogue_active"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidInput(name, "must be a bool", getattr(self, name))

    def kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _now(now: Any) -> float:
    if isinstance(now, datetime):
        return to_unix(now)   # a naive datetime: InvalidInput
    if isinstance(now, bool) or not isinstance(now, Real) or not math.isfinite(now):
        raise InvalidInput("now", "must be Unix seconds (a finite number) or an aware datetime",
                           now)
    return float(now)


def check_turn(turn: Any, field: str = "turn_counter") -> int | None:
    """A turn counter: a whole number >= 0, or None (unknown)."""
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 0):
        raise InvalidInput(field, "must be a whole number >= 0 (or None: unknown)", turn)
    return turn


def expires_at(value: Any, field: str) -> float:
    """Unix seconds of an ISO 8601 timestamp with a time zone (``Z`` or an offset); a naive or
    malformed one is an InvalidInput naming ``field``."""
    if not isinstance(value, str):
        raise InvalidInput(field, "must be an ISO 8601 timestamp string with a time zone",
                           value)
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(field, "not an ISO 8601 timestamp", value) from None
    if t.tzinfo is None or t.utcoffset() is None:
        raise InvalidInput(field, "must carry a time zone (Z or +hh:mm): a naive time is "
                           "ambiguous", value)
    return t.timestamp()


def check_ttl(ttl: Any, where: str = "ttl", *, turn: int | None = None
              ) -> dict[str, Any] | None:
    """The validated ttl (a new dict) or None. ``where`` prefixes every error's field
    (``items[3].ttl``). A turns TTL without ``created_turn`` gets ``turn`` when it is known
    (the write's turn counter); without either it is refused."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidInput(where, "must be None or a mapping with a 'kind'",
                           type(ttl).__name__)
    out = dict(ttl)
    kind = out.get("kind")
    if kind not in TTL_KINDS:
        raise InvalidInput(f"{where}.kind", f"must be one of {TTL_KINDS}", kind)
    if kind == "turns" and "created_turn" not in out and turn is not None:
        out["created_turn"] = check_turn(turn, "turn")
    unknown = sorted(set(out) - set(_KEYS[kind]), key=str)
    if unknown:
        raise InvalidInput(f"{where}.{unknown[0]}", f"not a key of a {kind} TTL (keys: "
                           f"{', '.join(_KEYS[kind])})", out[unknown[0]])
    missing = [k for k in _KEYS[kind] if k not in out]
    if missing:
        raise InvalidInput(f"{where}.{missing[0]}", f"required by a {kind} TTL"
                           + (" (or write with a known turn)" if missing[0] == "created_turn"
                              else ""), None)
    if kind == "absolute":
        expires_at(out["expires_at"], f"{where}.expires_at")
    elif kind == "turns":
        n = out["turns"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidInput(f"{where}.turns", "must be a whole number >= 1", n)
        check_turn(out["created_turn"], f"{where}.created_turn")
    elif out["scope"] not in TTL_SCOPES:
        raise InvalidInput(f"{where}.scope", f"must be one of {TTL_SCOPES}", out["scope"])
    return out


def is_expired(rec: MemoryRecord, *, now: Any, turn_counter: int | None = None,
               session_active: bool = True, dialogue_active: bool = True) -> bool:
    """§5.3.3, exactly: no ttl never expires; absolute: ``now >= expires_at``; turns:
    ``turn_counter - created_turn >= turns``; scope: the session (or dialogue) is no longer
    active. A turns TTL with ``turn_counter`` None and a malformed stored ttl raise InvalidInput
    naming the memory and the field (never a silent False)."""
    if rec.ttl is None:
        return False
    where = f"memory {rec.id}: ttl"
    ttl = check_ttl(rec.ttl, where)
    kind = ttl["kind"]
    if kind == "absolute":
        return _now(now) >= expires_at(ttl["expires_at"], f"{where}.expires_at")
    if kind == "turns":
        if check_turn(turn_counter) is None:
            raise InvalidInput("turn_counter", f"{where} is a turns TTL: the turn counter must "
                               "be given to decide it", None)
        return turn_counter - ttl["created_turn"] >= ttl["turns"]
    if ttl["scope"] == "session":
        return not session_active
    return not dialogue_active


def is_live(rec: MemoryRecord, **ctx: Any) -> bool:
    """§5.8.2, exactly: ``not rec.deprecated and not is_expired(rec, **ctx)``. (Records the
    store holds expired or superseded are never candidates: recall reads active ones only.)"""
    return not rec.deprecated and not is_expired(rec, **ctx)


def _repo(store: Any) -> Repository:
    if isinstance(store, Repository):
        return store
    repo = getattr(store, "repo", None)
    if not isinstance(repo, Repository):
        raise InvalidInput("store", "must be a memlab Store or Repository",
                           type(store).__name__)
    return repo


def expire_due(store: Any, ctx: TTLContext, *, agent_id: str | None = None,
               user_id: str | None = None) -> list[str]:
    """Mark every active, not deprecated record whose TTL has run out at ``ctx`` expired (kept on
    disk, never recalled again), in one transaction; optionally only one agent's/user's. Returns
    their ids, oldest first. ``store``: a :class:`~memlab.store.Store` or its Repository. A
    malformed stored ttl raises InvalidInput naming the memory, and nothing is changed."""
    if not isinstance(ctx, TTLContext):
        raise InvalidInput("ctx", "must be a TTLContext", type(ctx).__name__)
    repo = _repo(store)
    kw = ctx.kwargs()
    with transaction(repo.conn):
        due = [r for r in repo.with_ttl(agent_id=agent_id, user_id=user_id)
               if is_expired(r, **kw)]
        for r in due:
            repo.update_fields(r.id, lifecycle_state="expired")
    return [r.id for r in due]

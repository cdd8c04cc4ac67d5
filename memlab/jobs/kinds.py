"""The registry of fold-job kinds, what a handler gets and returns, and :func:`enqueue`.

A kind is a name, a handler and a payload check. The handler runs outside any transaction (it may
read the store, embed, call a model) and returns an :class:`Outcome`: the result to record and,
optionally, ``write(conn)``, the job's writes to the store, which the worker runs in the
transaction that completes the job after checking its lease is still held (exactly once; see
:mod:`memlab.jobs.queue`). A kind that memlab cannot run yet is registered with the reason
(``unavailable``): enqueuing or running it raises :class:`~memlab.errors.JobError` saying why.

Built-in kinds (registered when :mod:`memlab.jobs` is imported): ``extract_atoms``
(:mod:`~memlab.jobs.atoms`), ``evidence_check`` (:mod:`~memlab.jobs.evidence`), ``cleanup_usage``,
``reembed`` and ``consolidate`` (:mod:`~memlab.jobs.maintenance`). :func:`register` adds others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, JobError
from memlab.inputs import check_id
from memlab.store import Connection, Store

from . import queue


@dataclass
class JobContext:
    """What a handler gets: the leased job, the store, the config, the time (the worker's clock
    when the job was leased), an embedder on demand, and ``heartbeat()`` to extend the lease."""

    job: queue.Job
    store: Store
    config: MemlabConfig
    now: float
    embedder: Callable[[], Any]
    heartbeat: Callable[[], None]


@dataclass(frozen=True)
class Outcome:
    """A handler's result: ``result`` (JSON) and the job's store writes, ``write(conn)`` (run in
    the completing transaction; what it returns is merged into the result)."""

    result: Mapping[str, Any] = field(default_factory=dict)
    write: Callable[[Connection], Mapping[str, Any] | None] | None = None


Handler = Callable[[JobContext], Outcome]


@dataclass(frozen=True)
class JobKind:
    name: str
    handler: Handler
    description: str
    check_payload: Callable[[Mapping[str, Any]], None] = lambda payload: None
    unavailable: str = ""      # why memlab cannot run this kind yet ("" when it can)


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind, *, replace: bool = False) -> JobKind:
    """Add a job kind (``replace``: swap an existing one, e.g. for a better evidence check)."""
    if kind.name in _KINDS and not replace:
        raise JobError(f"job kind {kind.name!r} is registered already (replace=True swaps it)")
    _KINDS[kind.name] = kind
    return kind


def kinds() -> dict[str, JobKind]:
    """The registered kinds by name."""
    return dict(_KINDS)


def get_kind(name: str) -> JobKind:
    """The kind ``name``; JobError naming the known kinds when there is none, or the reason when
    memlab cannot run it yet."""
    kind = _KINDS.get(name)
    if kind is None:
        raise JobError(f"job kind {name!r}: unknown; known kinds: {', '.join(sorted(_KINDS))}")
    if kind.unavailable:
        raise JobError(f"job kind {name!r} cannot run: {kind.unavailable}")
    return kind


def enqueue(store: Store, kind: str, payload: Mapping[str, Any] | None = None, *, now: float,
            agent_id: str | None = None, user_id: str | None = None,
            dedup_key: str | None = None, max_attempts: int | None = None) -> queue.Job:
    """Queue a job of ``kind`` and return it (the job already queued or running under the same
    ``dedup_key``, when there is one: nothing is written).

    ``agent_id``/``user_id``: the owner the job works on (both or neither; None: every owner);
    given, they are put in the payload too. ``max_attempts``: default ``jobs.max_attempts``.

    Raises:
        JobError: unknown kind, or one memlab cannot run yet (nothing is queued).
        InvalidInput: a payload or owner that breaks the kind's rules (nothing is queued).
    """
    spec = get_kind(kind)
    payload = dict(payload or {})
    if (agent_id is None) != (user_id is None):
        raise JobError(f"job {kind!r}: give both agent_id and user_id, or neither (got "
                       f"agent_id={agent_id!r}, user_id={user_id!r})")
    if agent_id is not None:
        agent_id, user_id = check_id(agent_id, "agent_id"), check_id(user_id, "user_id")
        payload.update(agent_id=agent_id, user_id=user_id)
    spec.check_payload(payload)
    attempts = store.config.jobs.max_attempts if max_attempts is None else max_attempts
    return queue.insert(store.conn, kind, payload, now=now, max_attempts=attempts,
                        dedup_key=dedup_key, agent_id=agent_id, user_id=user_id)[0]


def owner_of(payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """The (agent_id, user_id) a payload names, or None for every owner."""
    if payload.get("agent_id") is None and payload.get("user_id") is None:
        return None
    return str(payload["agent_id"]), str(payload["user_id"])


def check_owner_payload(payload: Mapping[str, Any], *, allowed: tuple[str, ...] = ()) -> None:
    """A payload of ``agent_id``/``user_id`` (both or neither) and the ``allowed`` keys only."""
    unknown = sorted(set(payload) - {"agent_id", "user_id", *allowed})
    if unknown:
        raise InvalidInput(f"payload.{unknown[0]}", "unknown key; allowed: "
                           f"{', '.join(['agent_id', 'user_id', *allowed])}", payload[unknown[0]])
    if ("agent_id" in payload) != ("user_id" in payload):
        raise InvalidInput("payload", "give both agent_id and user_id, or neither", dict(payload))
    for name in ("agent_id", "user_id"):
        if name in payload:
            check_id(payload[name], f"payload.{name}")

"""Contradictions by fact key (reverie §11.4 ``evidence_check``).

Two memories contradict when they are active (not expired, superseded or deprecated), belong to one
owner (agent, user), carry the same non-empty ``fact_key`` and say different things: their texts
differ once whitespace is collapsed and case folded (the same text twice is a repetition, not a
contradiction). Every such pair is recorded once in ``memory_contradictions`` (``memory_a <
memory_b``); a recorded pair whose memories are no longer both active (one was superseded by a newer
revision, expired or deleted) is marked resolved. Once facts over time land (a newer revision
supersedes the older), a contradiction is what is left when two statements of one fact are active
at once.

The three functions — :func:`find_contradictions` (read only), :func:`record_contradictions` and
:func:`contradictions` — are the whole interface: a richer check (values parsed from the texts)
replaces them by registering another ``evidence_check`` kind (``register(..., replace=True)``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memlab.store import Connection

from .kinds import JobContext, JobKind, Outcome, check_owner_payload, owner_of, register

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Contradiction:
    """Two active memories of one owner and one fact key with different texts."""

    agent_id: str
    user_id: str
    fact_key: str
    memory_a: str
    memory_b: str
    text_a: str = ""
    text_b: str = ""
    found_at: float | None = None
    resolved_at: float | None = None
    resolution: str | None = None


def _norm(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def find_contradictions(conn: Connection, *, agent_id: str | None = None,
                        user_id: str | None = None) -> list[Contradiction]:
    """Every contradicting pair among the active memories (of one owner, or of all), ordered by
    owner, fact key and ids. Reads only."""
    sql, args = ("SELECT agent_id, user_id, fact_key, id, text FROM memory_records WHERE "
                 "fact_key != '' AND lifecycle_state = 'active' AND deprecated = 0", [])
    if agent_id is not None or user_id is not None:
        sql, args = sql + " AND agent_id = ? AND user_id = ?", [agent_id, user_id]
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for a, u, key, mid, text in conn.execute(sql + " ORDER BY agent_id, user_id, fact_key, id",
                                             args):
        groups.setdefault((a, u, key), []).append((mid, text))
    out = []
    for (a, u, key), members in groups.items():
        for (ia, ta), (ib, tb) in itertools.combinations(sorted(members), 2):
            if _norm(ta) != _norm(tb):
                out.append(Contradiction(a, u, key, ia, ib, ta, tb))
    return out


def record_contradictions(conn: Connection, found: Sequence[Contradiction], *, now: float,
                          job_id: int | None = None, agent_id: str | None = None,
                          user_id: str | None = None) -> dict[str, int]:
    """Record the pairs not recorded yet and resolve the recorded open pairs (of the owner, or of
    all) that are not in ``found`` any more, in one transaction; ``{"new": n, "resolved": m}``.
    Pairs whose memories were deleted meanwhile are skipped (their rows go with the memories)."""
    from memlab.store import transaction

    new = resolved = 0
    keep = {(c.memory_a, c.memory_b) for c in found}
    with transaction(conn):
        for c in found:
            cur = conn.execute(
                "INSERT OR IGNORE INTO memory_contradictions (agent_id, user_id, fact_key, "
                "memory_a, memory_b, found_at, job_id) SELECT ?, ?, ?, ?, ?, ?, ? WHERE "
                "(SELECT count(*) FROM memory_records WHERE id IN (?, ?)) = 2",
                (c.agent_id, c.user_id, c.fact_key, c.memory_a, c.memory_b, now, job_id,
                 c.memory_a, c.memory_b))
            new += cur.rowcount
        sql, args = ("SELECT id, memory_a, memory_b FROM memory_contradictions WHERE "
                     "resolved_at IS NULL", [])
        if agent_id is not None or user_id is not None:
            sql, args = sql + " AND agent_id = ? AND user_id = ?", [agent_id, user_id]
        for row_id, ma, mb in conn.execute(sql, args).fetchall():
            if (ma, mb) not in keep:
                conn.execute("UPDATE memory_contradictions SET resolved_at = ?, resolution = ? "
                             "WHERE id = ?", (now, "no longer two active memories with one fact "
                                              "key and different texts", row_id))
                resolved += 1
    return {"new": new, "resolved": resolved}


def contradictions(conn: Connection, *, agent_id: str | None = None, user_id: str | None = None,
                   include_resolved: bool = False) -> list[Contradiction]:
    """The recorded contradictions (open ones, or all), with the two texts, oldest first."""
    sql = ("SELECT c.agent_id, c.user_id, c.fact_key, c.memory_a, c.memory_b, ra.text, rb.text, "
           "c.found_at, c.resolved_at, c.resolution FROM memory_contradictions c "
           "JOIN memory_records ra ON ra.id = c.memory_a "
           "JOIN memory_records rb ON rb.id = c.memory_b WHERE 1")
    args: list[Any] = []
    if not include_resolved:
        sql += " AND c.resolved_at IS NULL"
    if agent_id is not None or user_id is not None:
        sql, args = sql + " AND c.agent_id = ? AND c.user_id = ?", [agent_id, user_id]
    return [Contradiction(*r) for r in conn.execute(sql + " ORDER BY c.id", args)]


def _check_payload(payload: Mapping[str, Any]) -> None:
    check_owner_payload(payload)


def run_evidence_check(ctx: JobContext) -> Outcome:
    """The ``evidence_check`` handler: find and record in the completing transaction (one state
    of the store: a memory superseded meanwhile is not recorded)."""
    owner = owner_of(ctx.job.payload)
    agent_id, user_id = owner if owner is not None else (None, None)

    def write(conn: Connection) -> dict[str, int]:
        found = find_contradictions(conn, agent_id=agent_id, user_id=user_id)
        done = record_contradictions(conn, found, now=ctx.now, job_id=ctx.job.id,
                                     agent_id=agent_id, user_id=user_id)
        return {"found": len(found), **done}

    return Outcome({}, write)


register(JobKind("evidence_check", run_evidence_check,
                 "contradictions by fact key: two active memories of one owner, one fact key, "
                 "different texts (payload: agent_id/user_id; default every owner)",
                 _check_payload))

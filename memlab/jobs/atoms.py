"""Typed atoms (reverie §11.4 ``extract_atoms``): preference, constraint, promise, event, lesson.

A memory's text is cut into clauses (``jobs.atom_clause_split``); a clause matching any rule of a
kind (``jobs.atom_<kind>``, regular expressions, Chinese and English by default) is one atom of
that kind, so one clause can give atoms of several kinds and a memory several atoms.

Atoms are stored in their own table, ``memory_atoms`` (kind, the clause, the rule that matched,
the source memory's id and owner, the job that wrote them), not as memories: an atom is a view of
its source memory, and as a memory of its own it would compete with its source in recall and be
injected twice. Each atom links to its source memory (``memory_id``) and is deleted with it. The
job is idempotent: the atoms of each memory it reads are replaced by what the rules give its
current text, in the transaction that completes the job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memlab.errors import InvalidInput
from memlab.inputs import check_ids
from memlab.store import Connection
from memlab.store.migrations import ATOM_KINDS
from memlab.write.atoms import Atom, clauses, extract_atoms  # noqa: F401 (the rules, re-exported)

from .kinds import JobContext, JobKind, Outcome, check_owner_payload, owner_of, register


@dataclass(frozen=True)
class StoredAtom:
    """An atom as stored, with its source memory and owner."""

    id: int
    memory_id: str
    agent_id: str
    user_id: str
    kind: str
    text: str
    rule: str
    job_id: int | None
    created_at: float


def _check_payload(payload: Mapping[str, Any]) -> None:
    check_owner_payload(payload, allowed=("memory_ids",))
    if "memory_ids" in payload:
        ids = payload["memory_ids"]
        if isinstance(ids, str) or not isinstance(ids, Sequence) or not ids:
            raise InvalidInput("payload.memory_ids", "must be a non-empty list of memory ids", ids)
        check_ids(list(ids))


def _sources(conn: Connection, payload: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(id, agent_id, user_id, text, text_hash) of the active memories the job reads."""
    sql, args = ("SELECT id, agent_id, user_id, text, text_hash FROM memory_records WHERE "
                 "lifecycle_state = 'active' AND deprecated = 0", [])
    owner = owner_of(payload)
    if owner is not None:
        sql, args = sql + " AND agent_id = ? AND user_id = ?", args + list(owner)
    if "memory_ids" in payload:
        import json

        sql, args = sql + " AND id IN (SELECT value FROM json_each(?))", \
            args + [json.dumps(list(payload["memory_ids"]))]
    return conn.execute(sql + " ORDER BY rowid", args).fetchall()


def run_extract_atoms(ctx: JobContext) -> Outcome:
    """The ``extract_atoms`` handler: read the memories, apply the rules; the write replaces the
    atoms of each memory whose text is unchanged since it was read."""
    cfg = ctx.config.jobs
    found = [(mid, agent, user, h, extract_atoms(text, cfg))
             for mid, agent, user, text, h in _sources(ctx.store.conn, ctx.job.payload)]
    job_id, now = ctx.job.id, ctx.now

    def write(conn: Connection) -> dict[str, Any]:
        by_kind: Counter[str] = Counter()
        kept = 0
        for mid, agent, user, h, atoms in found:
            if conn.execute("SELECT 1 FROM memory_records WHERE id = ? AND text_hash = ?",
                            (mid, h)).fetchone() is None:
                continue      # deleted or rewritten since it was read: its next job does it
            kept += 1
            conn.execute("DELETE FROM memory_atoms WHERE memory_id = ?", (mid,))
            conn.executemany(
                "INSERT INTO memory_atoms (memory_id, agent_id, user_id, kind, text, rule, job_id, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(mid, agent, user, a.kind, a.text, a.rule, job_id, now) for a in atoms])
            by_kind.update(a.kind for a in atoms)
        return {"memories": kept, "atoms": sum(by_kind.values()),
                "by_kind": {k: by_kind[k] for k in ATOM_KINDS if by_kind[k]}}

    return Outcome({"read": len(found)}, write)


def stored_atoms(conn: Connection, *, agent_id: str | None = None, user_id: str | None = None,
                 kind: str | None = None, memory_id: str | None = None) -> list[StoredAtom]:
    """The stored atoms, oldest first, optionally of one owner, kind or source memory."""
    if kind is not None and kind not in ATOM_KINDS:
        raise InvalidInput("kind", f"one of {ATOM_KINDS}", kind)
    sql, args = ("SELECT id, memory_id, agent_id, user_id, kind, text, rule, job_id, created_at "
                 "FROM memory_atoms WHERE 1", [])
    for col, v in (("agent_id", agent_id), ("user_id", user_id), ("kind", kind),
                   ("memory_id", memory_id)):
        if v is not None:
            sql, args = sql + f" AND {col} = ?", args + [v]
    return [StoredAtom(*r) for r in conn.execute(sql + " ORDER BY id", args)]


register(JobKind("extract_atoms", run_extract_atoms,
                 "typed atoms (preference, constraint, promise, event, lesson) of the active "
                 "memories (payload: agent_id/user_id, memory_ids; default every memory)",
                 _check_payload))

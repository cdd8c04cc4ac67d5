"""The fold worker's ``evidence_check`` job (reverie §11.4): contradictions by fact key.

One implementation of contradictions, facts over time's (:mod:`memlab.write.facts`): active memories
of one owner holding one fact key with different values are recorded once in
``memory_contradictions``, listed until resolved (:func:`memlab.write.facts.resolve_contradiction`
keeps one revision and supersedes the others). This module runs that check as a job, in the job's
completing transaction (one state of the store: a memory superseded meanwhile is not recorded),
for one owner (payload ``agent_id``/``user_id``) or every owner holding fact keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlab.store import Connection, Repository
from memlab.write.facts import Contradiction, evidence_check, list_contradictions

from .kinds import JobContext, JobKind, Outcome, check_owner_payload, owner_of, register

__all__ = ["Contradiction", "contradictions", "run_evidence_check"]


def contradictions(conn: Connection, *, agent_id: str | None = None, user_id: str | None = None,
                   include_resolved: bool = False) -> list[Contradiction]:
    """The recorded contradictions (open ones, or all; of one owner, or of every one)."""
    return list_contradictions(Repository(conn), agent_id=agent_id, user_id=user_id,
                               open_only=not include_resolved)


def _check_payload(payload: Mapping[str, Any]) -> None:
    check_owner_payload(payload)


def run_evidence_check(ctx: JobContext) -> Outcome:
    """The ``evidence_check`` handler: :func:`memlab.write.facts.evidence_check` in the
    completing transaction; the result counts what was found and what was new."""
    owner = owner_of(ctx.job.payload)
    agent_id, user_id = owner if owner is not None else (None, None)

    def write(conn: Connection) -> dict[str, int]:
        repo = Repository(conn, config=ctx.config)
        before = {c.id for c in list_contradictions(repo, agent_id=agent_id, user_id=user_id,
                                                    open_only=False)}
        found = evidence_check(repo, cfg=ctx.config, at=ctx.now, agent_id=agent_id,
                               user_id=user_id)
        return {"found": len(found), "new": sum(c.id not in before for c in found)}

    return Outcome({}, write)


register(JobKind("evidence_check", run_evidence_check,
                 "contradictions by fact key: active memories of one owner, one fact key, "
                 "different values (payload: agent_id/user_id; default every owner)",
                 _check_payload))

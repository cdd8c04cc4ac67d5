"""Maintenance jobs (reverie §11.4): ``cleanup_usage``, ``reembed``, and ``consolidate``.

- ``cleanup_usage``: usage signals (``memory_usage_events``) older than
  ``governance.usage_cleanup_days`` (90) before the job's time are deleted, in the transaction that
  completes the job.
- ``reembed``: after an embedder change, every memory without a vector of the worker's embedder
  (its ``embedding_model_version`` is another model's, or it was never embedded) is embedded
  through the embedding cache and stored in that embedder's vector table
  (:meth:`memlab.store.Store.embed_pending`, batch by batch, the lease extended after each batch).
  Each batch commits on its own: the job is idempotent (a re-run embeds what is still missing), so
  it needs no exactly-once write.
- ``consolidate``: the Familiars consolidator (familiars §5.9, :mod:`memlab.lifecycle.consolidate`)
  over one owner's cells (payload ``agent_id``/``user_id``) or every owner's: the plan is made by
  the handler with the worker's embedder (no lock held while it embeds), and applied in the
  transaction that completes the job; a plan made stale by a write in between fails the job,
  which is retried (the retry plans again). The LLM synthesis needs an LLM the worker does not
  have: with ``consolidation.synthesis = "llm"`` the job fails saying so (use ``memlab
  consolidate`` or :func:`~memlab.lifecycle.consolidate.consolidate` with an LLM).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlab.errors import InvalidInput, JobError
from memlab.store import Connection, Store

from .kinds import JobContext, JobKind, Outcome, check_owner_payload, owner_of, register

DAY = 86_400.0


def _no_payload(kind: str):
    def check(payload: Mapping[str, Any]) -> None:
        if payload:
            raise InvalidInput(f"payload.{next(iter(payload))}", f"{kind} takes no payload",
                               dict(payload))
    return check


def run_cleanup_usage(ctx: JobContext) -> Outcome:
    """Delete the usage signals older than ``governance.usage_cleanup_days`` before ``ctx.now``."""
    cutoff = ctx.now - ctx.config.governance.usage_cleanup_days * DAY

    def write(conn: Connection) -> dict[str, int]:
        return {"deleted": conn.execute("DELETE FROM memory_usage_events WHERE at < ?",
                                        (cutoff,)).rowcount}

    return Outcome({"cutoff": cutoff}, write)


def run_reembed(ctx: JobContext) -> Outcome:
    """Embed every memory that has no vector of the worker's embedder (see the module doc)."""
    embedder = ctx.embedder()
    store = ctx.store
    if store.vectors is None or store.vectors.model_version != embedder.version:
        store = Store(store.conn, path=store.path, config=ctx.config, embedder=embedder)
    stale = int(store.conn.execute(
        "SELECT count(*) FROM memory_records WHERE embedding_model_version != ?",
        (embedder.version,)).fetchone()[0])
    done = store.embed_pending(embedder, on_batch=lambda n: ctx.heartbeat())
    return Outcome({"model_version": embedder.version, "other_version_before": stale,
                    "embedded": done})


def run_consolidate(ctx: JobContext) -> Outcome:
    """Plan the consolidation now, apply it in the completing transaction (module docstring)."""
    from memlab.lifecycle.consolidate import apply_plan, plan_consolidation

    if ctx.config.consolidation.synthesis == "llm":
        raise JobError("job kind 'consolidate': consolidation.synthesis is 'llm' and a worker "
                       "has no LLM; run `memlab consolidate` or lifecycle.consolidate with one")
    owner = owner_of(ctx.job.payload)
    agent_id, user_id = owner if owner is not None else (None, None)
    embedder = ctx.embedder()
    plan = plan_consolidation(ctx.store, embedder=embedder, agent_id=agent_id, user_id=user_id,
                              config=ctx.config)

    def write(conn: Connection) -> dict[str, Any]:
        added = apply_plan(ctx.store, plan, embedder=embedder)
        return {"added": [r.id for r in added]}

    return Outcome({"clusters": len(plan.clusters),
                    "deprecated": sum(len(c.sources) for c in plan.clusters),
                    "pinned_left": plan.pinned}, write)


register(JobKind("cleanup_usage", run_cleanup_usage,
                 "delete usage signals older than governance.usage_cleanup_days (no payload)",
                 _no_payload("cleanup_usage")))
register(JobKind("reembed", run_reembed,
                 "embed the memories that have no vector of the worker's embedder (after an "
                 "embedder change; no payload)", _no_payload("reembed")))
register(JobKind("consolidate", run_consolidate,
                 "merge near-duplicate entries of each Familiars cell (consolidation.*; payload: "
                 "agent_id/user_id, default every owner)", check_owner_payload))

"""Pins (Reverie §11.3: 手动 pin，最多钉 20 条，钉住就不受压力和遗忘影响).

- :func:`pin` / :func:`unpin` set ``memory_records.pinned`` of one active memory. An owner (agent,
  user) holds at most ``governance.pins_max`` pinned memories: the pin that would exceed it raises
  :class:`~memlab.errors.PinLimitExceeded` naming the owner, the cap and the count, and changes
  nothing. Pinning a pinned memory, or unpinning an unpinned one, changes nothing.
- Memories added with ``pinned=True`` count too: :func:`check_pin_cap` runs inside the add's
  transaction (after supersession, which moves a pin to the new revision and so never adds one).
- Never decay: :func:`memlab.forgetting.retention` is 1 for a pinned memory, as for the permanent
  layer (§9.1's "永久层直接返回 1.0"): no exponential, no strength floor, and it is always
  eligible. Recall reads ``pinned`` into the raw-signal table.
- Never consolidated: a consolidator (Familiars §5.9, not built yet) must leave out every memory
  for which :func:`consolidatable` is False — pinned, permanent or not active.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, PinLimitExceeded
from memlab.store.connect import transaction
from memlab.store.governance import Governance
from memlab.store.repository import Repository
from memlab.types import MemoryRecord


def consolidatable(rec: MemoryRecord) -> bool:
    """May a consolidator merge or rewrite this memory? Never a pinned or permanent one, nor one
    that is not active (superseded, expired) or deprecated."""
    return not (rec.pinned or rec.is_permanent or rec.lifecycle_state != "active"
                or rec.deprecated)


def pin(repo: Repository, memory_id: str, *, agent_id: str, user_id: str, cfg: MemlabConfig
        ) -> MemoryRecord:
    """Pin an active memory of the owner; returns the record. One transaction: the count and the
    change see one state, so two writers cannot both take the last place."""
    with transaction(repo.conn):
        rec = repo.get([memory_id], agent_id=agent_id, user_id=user_id)[0]
        if rec.pinned:
            return rec
        if rec.lifecycle_state != "active":
            raise InvalidInput("pin", f"only an active memory can be pinned; this one is "
                               f"{rec.lifecycle_state} (memlab history shows its latest "
                               f"revision)", memory_id)
        count = Governance(repo.conn).pinned_count(agent_id, user_id)
        cap = cfg.governance.pins_max
        if count + 1 > cap:
            raise PinLimitExceeded(memory_id, agent_id=agent_id, user_id=user_id, cap=cap,
                                   count=count + 1)
        return repo.update_fields(memory_id, pinned=True)


def unpin(repo: Repository, memory_id: str, *, agent_id: str, user_id: str) -> MemoryRecord:
    """Unpin a memory of the owner; returns the record."""
    with transaction(repo.conn):
        rec = repo.get([memory_id], agent_id=agent_id, user_id=user_id)[0]
        return repo.update_fields(memory_id, pinned=False) if rec.pinned else rec


def pinned(repo: Repository, *, agent_id: str, user_id: str) -> list[MemoryRecord]:
    """The owner's pinned memories, oldest first."""
    rows = [r[0] for r in repo.conn.execute(
        "SELECT rowid FROM memory_records WHERE agent_id = ? AND user_id = ? AND pinned = 1 "
        "ORDER BY timestamp, rowid", (agent_id, user_id))]
    return repo.get_rows(rows)


def check_pin_cap(repo: Repository, records: Sequence[MemoryRecord], cfg: MemlabConfig) -> None:
    """Inside an add's transaction, before the insert: refuse the batch when its pinned records
    would give an owner more than ``governance.pins_max`` pins."""
    new = Counter((r.agent_id, r.user_id) for r in records if r.pinned)
    if not new:
        return
    gov, cap = Governance(repo.conn), cfg.governance.pins_max
    for (agent_id, user_id), n in sorted(new.items()):
        count = gov.pinned_count(agent_id, user_id) + n
        if count > cap:
            first = next(r.id for r in records if r.pinned and (r.agent_id, r.user_id)
                         == (agent_id, user_id))
            raise PinLimitExceeded(first, agent_id=agent_id, user_id=user_id, cap=cap,
                                   count=count)


__all__ = ["check_pin_cap", "consolidatable", "pin", "pinned", "unpin"]

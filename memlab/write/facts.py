"""Facts over time (Reverie §6.1: ``fact_key`` 事实键 for dedup and revision, ``fact_revision``,
``lifecycle_state`` active / expired / superseded; the evidence check of §11.4).

A memory may state a fact: a subject and an attribute ("user:birthday", "Caroline:residence")
with a value. Its ``fact_key`` comes from the rule ``facts.rule``:

- ``none``: fact keys are stored as given and never compared (no supersession);
- ``explicit``: only a key the caller (or the atom extractor) gives;
- ``subject_attribute``: a memory without a key of a layer in ``facts.derive_layers`` gets one
  from the first of ``facts.patterns`` its text matches (zh and en: 我的生日是…, 我住在…,
  我最喜欢的X是…, 我喜欢/讨厌X, my birthday is …, I live in …, my favourite X is …, I like X):
  the speaker (else ``facts.default_subject``), a colon, the attribute.

Supersession (:func:`supersede_step`, run inside the add's transaction): a new *active* memory
whose key an active memory of the same owner (agent, user) already holds supersedes it — the old
one becomes ``superseded`` (it leaves the lexical, entity, dense and permanent routes in the same
transaction), the new one gets ``fact_revision`` = old + 1 and ``supersedes`` = the old id. A pin
moves to the new revision (the user pinned the fact, not its wording); a restatement of the same
value carries the old ``mention_count`` + 1 (a fact written twice is reinforced, §9.1). The
permanent layer and the others never supersede each other (the card's anchors are the
character's). Several active holders (a contradiction) are all superseded by the new statement.
Within one batch, later items supersede earlier ones (write order is time order).

Contradictions: two or more active memories of one owner with one key and different values
(:func:`fact_value`): found by :func:`find_contradictions`, recorded once by
:func:`record_contradiction` (``memory_contradictions``), listed by :func:`list_contradictions`;
:func:`evidence_check` does both (the fold worker's ``evidence_check`` job calls it).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Sequence

from memlab.config import FactsConfig, MemlabConfig
from memlab.errors import InvalidInput
from memlab.store.connect import transaction
from memlab.store.governance import Governance
from memlab.store.repository import Repository
from memlab.types import MemoryRecord

_STRIP = " \t\"'“”‘’「」『』《》.。!！?？,，;；:：、"


@dataclass(frozen=True, slots=True)
class Fact:
    """What a pattern read from a text: the attribute and the value (both normalised)."""

    attribute: str
    value: str


@dataclass(frozen=True, slots=True)
class Contradiction:
    """Active memories of one owner holding one fact key with different values."""

    agent_id: str
    user_id: str
    fact_key: str
    memory_ids: tuple[str, ...]
    values: tuple[str, ...]
    id: int | None = None          # once recorded
    found_at: float | None = None
    resolved_at: float | None = None
    resolution: str = ""


def normalise(text: str) -> str:
    """NFKC, lower case, one space between words, no surrounding quotes or punctuation."""
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"\s+", " ", text).strip(_STRIP)


@functools.lru_cache(maxsize=16)
def _compiled(patterns: tuple[str, ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    out = []
    for p in patterns:
        attr, _, regex = p.partition("|")
        out.append((attr, re.compile(regex, re.IGNORECASE)))
    return tuple(out)


def match_fact(text: str, cfg: FactsConfig) -> Fact | None:
    """The fact the first matching pattern of ``cfg.patterns`` reads from ``text``, or None."""
    for template, rx in _compiled(tuple(cfg.patterns)):
        m = rx.search(text)
        if m is None:
            continue
        groups = {k: normalise(v or "") for k, v in m.groupdict().items()}
        attribute = normalise(template.format(**groups))
        value = groups["value"] if "value" in groups else normalise(m.group(0))
        if attribute:
            return Fact(attribute, value)
    return None


def derive_fact_key(rec: MemoryRecord, cfg: FactsConfig) -> str:
    """``rec.fact_key``, or under the ``subject_attribute`` rule for a memory without one (of a
    layer in ``derive_layers``) ``SUBJECT:ATTRIBUTE`` from its text ('' when no pattern matches)."""
    if rec.fact_key or cfg.rule != "subject_attribute" \
            or rec.retention_layer not in cfg.derive_layers:
        return rec.fact_key
    fact = match_fact(rec.text, cfg)
    if fact is None:
        return ""
    return f"{normalise(rec.speaker) or cfg.default_subject}:{fact.attribute}"


def fact_value(rec: MemoryRecord, cfg: FactsConfig) -> str:
    """The value a memory gives its fact: the pattern's ``value`` when a pattern reads the key's
    attribute from the text, else the whole text (normalised)."""
    fact = match_fact(rec.text, cfg)
    if fact is not None and (rec.fact_key == fact.attribute
                             or rec.fact_key.endswith(":" + fact.attribute)):
        return fact.value
    return normalise(rec.text)


def supersede_step(repo: Repository, records: Sequence[MemoryRecord], cfg: MemlabConfig
                   ) -> list[MemoryRecord]:
    """The records to insert, with derived fact keys, revisions and ``supersedes`` set; the
    active memories they supersede are marked superseded (and unpinned when the pin moves).
    Runs inside the caller's write transaction: a refused add undoes it too."""
    fc = cfg.facts
    if fc.rule == "none":
        return list(records)
    gov = Governance(repo.conn)
    out: list[MemoryRecord] = []
    batch_head: dict[tuple[str, str, str, bool], int] = {}   # group -> position in out
    for rec in records:
        key = derive_fact_key(rec, fc)
        if key != rec.fact_key:
            rec = dataclasses.replace(rec, fact_key=key)
        if not key or rec.lifecycle_state != "active":
            out.append(rec)
            continue
        group = (rec.agent_id, rec.user_id, key, rec.is_permanent)
        at = batch_head.get(group)
        if at is not None:
            old = out[at]
            out[at] = dataclasses.replace(old, lifecycle_state="superseded", pinned=False)
            rec = _next_revision(rec, old, pinned=old.pinned, cfg=fc)
        else:
            heads = gov.active_heads(rec.agent_id, rec.user_id, key, permanent=rec.is_permanent)
            if heads:
                for h in heads:
                    repo.update_fields(h.id, lifecycle_state="superseded", pinned=False)
                newest = repo.get([heads[0].id])[0]
                rec = _next_revision(rec, newest, pinned=any(h.pinned for h in heads), cfg=fc)
        batch_head[group] = len(out)
        out.append(rec)
    return out


def _next_revision(rec: MemoryRecord, old: MemoryRecord, *, pinned: bool, cfg: FactsConfig
                   ) -> MemoryRecord:
    same = fact_value(rec, cfg) == fact_value(old, cfg)
    return dataclasses.replace(
        rec, fact_revision=old.fact_revision + 1, supersedes=old.id, pinned=rec.pinned or pinned,
        mention_count=max(rec.mention_count, old.mention_count + 1) if same else rec.mention_count)


def history(repo: Repository, memory_id: str, *, agent_id: str, user_id: str
            ) -> list[MemoryRecord]:
    """Every revision of the fact ``memory_id`` belongs to, oldest first (the chain of
    ``supersedes``); a memory outside any chain is its own history. The id must belong to the
    agent and user (InvalidInput otherwise, like an unknown id)."""
    repo.get([memory_id], agent_id=agent_id, user_id=user_id)
    gov = Governance(repo.conn)
    chain, seen = [memory_id], {memory_id}
    prev = gov.predecessor(memory_id)
    while prev is not None and prev not in seen:
        chain.insert(0, prev)
        seen.add(prev)
        prev = gov.predecessor(prev)
    nxt = gov.successors(memory_id)
    while nxt and nxt[-1] not in seen:
        chain.append(nxt[-1])
        seen.add(nxt[-1])
        nxt = gov.successors(nxt[-1])
    known = {r[0] for r in repo.conn.execute(   # a revision deleted since: the chain skips it
        "SELECT id FROM memory_records WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(chain, ensure_ascii=False),))}
    return repo.get([i for i in chain if i in known], agent_id=agent_id, user_id=user_id)


def expire(repo: Repository, ids: Sequence[str], *, agent_id: str, user_id: str) -> int:
    """Mark active memories expired (kept, never recalled again); returns how many changed."""
    recs = repo.get(list(dict.fromkeys(ids)), agent_id=agent_id, user_id=user_id)
    n = 0
    with transaction(repo.conn):
        for r in recs:
            if r.lifecycle_state == "active":
                repo.update_fields(r.id, lifecycle_state="expired")
                n += 1
    return n


# -- contradictions --------------------------------------------------------------------------------
def find_contradictions(repo: Repository, *, agent_id: str, user_id: str, cfg: MemlabConfig
                        ) -> list[Contradiction]:
    """Fact keys of the owner held by two or more active memories whose values differ."""
    out = []
    for key, rowids in Governance(repo.conn).shared_fact_keys(agent_id, user_id):
        recs = sorted(repo.get_rows(rowids), key=lambda r: r.id)
        values = [fact_value(r, cfg.facts) for r in recs]
        if len(set(values)) > 1:
            out.append(Contradiction(agent_id, user_id, key, tuple(r.id for r in recs),
                                     tuple(values)))
    return out


def record_contradiction(repo: Repository, found: Contradiction, *, at: float) -> Contradiction:
    """Record a contradiction once (the same memories and key found again keep their row);
    returns it with its id."""
    if len(found.memory_ids) < 2 or len(found.values) != len(found.memory_ids):
        raise InvalidInput("contradiction", "needs two or more memory ids, one value each",
                           found.memory_ids)
    repo.get(list(found.memory_ids), agent_id=found.agent_id, user_id=found.user_id)
    cid, _ = Governance(repo.conn).record_contradiction(
        found.agent_id, found.user_id, found.fact_key, found.memory_ids, found.values, at=at)
    return dataclasses.replace(found, id=cid, found_at=at)


def list_contradictions(repo: Repository, *, agent_id: str | None, user_id: str | None,
                        open_only: bool = True) -> list[Contradiction]:
    """Recorded contradictions (of one owner, or every one with None), oldest first."""
    return [Contradiction(r.agent_id, r.user_id, r.fact_key, r.memory_ids, r.values, id=r.id,
                          found_at=r.found_at, resolved_at=r.resolved_at,
                          resolution=r.resolution)
            for r in Governance(repo.conn).contradictions(agent_id, user_id,
                                                          open_only=open_only)]


def evidence_check(repo: Repository, *, cfg: MemlabConfig, at: float,
                   agent_id: str | None = None, user_id: str | None = None
                   ) -> list[Contradiction]:
    """Find contradictions and record them (§11.4 evidence_check, by fact key): of one owner, or
    (both None) of every owner holding fact keys; one transaction. Returns them as recorded
    (with ids; one found again keeps its id). The fold worker's ``evidence_check`` job calls it."""
    if (agent_id is None) != (user_id is None):
        raise InvalidInput("agent_id/user_id", "give both (one owner) or neither (every owner)",
                           (agent_id, user_id))
    with transaction(repo.conn):
        owners = [(agent_id, user_id)] if agent_id is not None else \
            Governance(repo.conn).fact_owners()
        return [record_contradiction(repo, c, at=at) for a, u in owners
                for c in find_contradictions(repo, agent_id=a, user_id=u, cfg=cfg)]


def resolve_contradiction(repo: Repository, contradiction_id: int, *, keep: str, at: float,
                          agent_id: str, user_id: str) -> list[str]:
    """Resolve a recorded contradiction by keeping one of its memories: the others still active
    become superseded; returns their ids."""
    rows = [c for c in list_contradictions(repo, agent_id=agent_id, user_id=user_id)
            if c.id == contradiction_id]
    if not rows:
        raise InvalidInput("contradiction_id", f"no open contradiction of agent_id={agent_id!r}, "
                           f"user_id={user_id!r} with this id", contradiction_id)
    c = rows[0]
    if keep not in c.memory_ids:
        raise InvalidInput("keep", f"must be one of the contradiction's memories "
                           f"{list(c.memory_ids)}", keep)
    dropped = []
    with transaction(repo.conn):
        for r in repo.get([i for i in c.memory_ids if i != keep]):
            if r.lifecycle_state == "active":
                repo.update_fields(r.id, lifecycle_state="superseded")
                dropped.append(r.id)
        Governance(repo.conn).resolve_contradiction(contradiction_id, at=at,
                                                    resolution=f"kept {keep}")
    return dropped


__all__ = ["Contradiction", "Fact", "derive_fact_key", "evidence_check", "expire", "fact_value",
           "find_contradictions", "history", "list_contradictions", "match_fact", "normalise",
           "record_contradiction", "resolve_contradiction", "supersede_step"]

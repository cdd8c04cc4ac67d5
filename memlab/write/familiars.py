"""Familiars' MemoryWriter output and ``apply_writes`` (familiars §5.7.2, §5.7.3).

A writer (the rule writer or the LLM writer of :mod:`memlab.write.familiars_rules`) decides what a
turn is worth remembering and says so as WriterOutput JSON::

    {"writes": [{"op": "add" | "update" | "skip", "scope": "user", "category": "profile",
                 "entry": {"content": "用户名字是 Alice", "tags": ["name"], "salience": 0.8,
                           "ttl": null, "supersedes_id": null, "epistemic_status": "asserted",
                           "pinned": false, "source_quote": ["用户消息: '我叫Alice'"]}}]}

:func:`parse_writer_output` validates it (pydantic models below); every refusal is an
:class:`~memlab.errors.InvalidInput` naming the write's index and field (``writes[2].entry.
salience``), the rule and the value; a (scope, category) pair outside VALID_CELLS is an
:class:`~memlab.errors.InvalidCell` naming both and the valid categories of that scope.

:func:`apply_writes` stores the accepted writes through memlab's one write path
(``MemoryStore.add_many``: validation, the safety screen, layer routing, one transaction), as
memories with ids ``m_`` + 8 hex digits, ``evidence`` {dialogue_id, turn_id}, the clock's time,
and these mappings:

- ``entry.content`` -> the memory's text; ``entry.salience`` -> its ``importance`` (Familiars'
  salience and Reverie's importance are the one [0, 1] weight recall reads); no salience:
  ``writer.default_salience``; no category: ``writer.default_category``; ``schema_version``:
  ``writer.schema_version``;
- ``entry.ttl`` is kept as given; a ``{"kind": "turns"}`` TTL without ``created_turn`` gets the
  call's ``turn_counter`` (§5.3.3 counts turns from there);
- ``op: update`` (or an ``add`` with ``supersedes_id``): the new memory's ``supersedes`` is the old
  id and the old memory is marked ``deprecated`` in the same transaction; the chain stays
  queryable (:func:`supersede_chain`). Superseding an unknown id, another owner's memory, one
  already deprecated, or one id twice in a turn is refused;
- ``op: skip``: the writer's "nothing to remember"; nothing written, listed in ``skipped``.

The budget (§5.7.3, greedy): writes (skips aside) are accepted in order while the accepted
contents total at most ``writer.max_chars_total`` characters (``len`` of the content: code points,
one per Chinese character). The first write is always accepted, even alone over the budget. The
first write that would take the total over the budget stops the turn: it and every later write are
dropped (listed in ``dropped``), even a later one that would still fit — the writer orders its
writes by priority, and the budget keeps a prefix of them.

All or nothing: every write is validated before anything is written (dropped ones too), and the
accepted ones are written in one transaction; a refusal leaves the store unchanged.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Iterator, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memlab.config import MemlabConfig
from memlab.errors import InvalidCell, InvalidInput
from memlab.inputs import check_id, check_text
from memlab.types import SCOPES, VALID_CELLS, MemoryRecord

#: id of a Familiars memory: "m_" + token_hex(ID_BYTES) (§5.3.2: 8 hex digits)
ID_PREFIX, ID_BYTES = "m_", 4
#: scopes whose memories live under a dialogue (§5.2.4 path: agents/<agent>/<dialogue>/...)
DIALOGUE_SCOPES = ("dialogue", "ephemeral")
#: how a write's field is named in a refusal, by the MemoryRecord field the pipeline names
_FIELD_NAMES = {"text": "entry.content", "importance": "entry.salience", "tags": "entry.tags",
                "ttl": "entry.ttl", "supersedes": "entry.supersedes_id", "pinned": "entry.pinned",
                "epistemic_status": "entry.epistemic_status",
                "source_quote": "entry.source_quote"}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class AbsoluteTTL(_Model):
    kind: Literal["absolute"]
    expires_at: str

    @model_validator(mode="after")
    def _iso(self) -> "AbsoluteTTL":
        try:
            datetime.fromisoformat(self.expires_at.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("expires_at must be an ISO 8601 time") from None
        return self


class TurnsTTL(_Model):
    kind: Literal["turns"]
    turns: int = Field(ge=1)
    created_turn: int | None = Field(None, ge=0)


class ScopeTTL(_Model):
    kind: Literal["scope"]
    scope: Literal["session", "dialogue"]


class Entry(_Model):
    """One entry to write (§5.7.2 ``entry``)."""

    content: str = Field(min_length=1)
    tags: tuple[str, ...] = ()
    salience: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False)
    ttl: Annotated[AbsoluteTTL | TurnsTTL | ScopeTTL, Field(discriminator="kind")] | None = None
    supersedes_id: str | None = Field(None, min_length=1)
    epistemic_status: Literal["asserted", "inferred", "speculative"] = "asserted"
    pinned: bool = False
    source_quote: tuple[str, ...] = ()


class Write(_Model):
    """One write (§5.7.2): ``op`` add / update / skip. Add and update need a scope and an entry;
    update needs ``entry.supersedes_id``; a skip needs nothing."""

    op: Literal["add", "update", "skip"]
    scope: str | None = None       # checked with the category: parse_writer_output
    category: str | None = None
    entry: Entry | None = None

    @model_validator(mode="after")
    def _needs(self) -> "Write":
        if self.op == "skip":
            return self
        if self.scope is None:
            raise ValueError(f"op {self.op!r} needs a scope")
        if self.entry is None:
            raise ValueError(f"op {self.op!r} needs an entry")
        return self


class WriterOutput(_Model):
    """A writer's answer for one turn (§5.7.2)."""

    writes: tuple[Write, ...] = ()


@dataclass(frozen=True)
class Dropped:
    """A write the budget dropped: its index in ``writes``, its content's characters and the
    total the accepted ones had reached."""

    index: int
    chars: int
    total_before: int


@dataclass(frozen=True)
class AppliedWrites:
    """What :func:`apply_writes` did: ``records`` (stored, in write order), ``indices`` (their
    indices in ``writes``), ``dropped`` (over the budget), ``skipped`` (op skip). Iterating or
    indexing gives the records."""

    records: tuple[MemoryRecord, ...]
    indices: tuple[int, ...]
    dropped: tuple[Dropped, ...] = ()
    skipped: tuple[int, ...] = ()
    chars: int = 0
    budget: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[MemoryRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> MemoryRecord:
        return self.records[i]

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.records]


# -- validation ------------------------------------------------------------------------------------
def _where(loc: Sequence[Any]) -> str:
    """pydantic's error location as a path: ('writes', 2, 'entry', 'salience') ->
    writes[2].entry.salience (a discriminated union's tag left out)."""
    out, prev = "", None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (prev == "ttl" and part in ("absolute", "turns", "scope")):
            out += ("." if out else "") + str(part)
        prev = part
    return out or "writer_output"


def cell_error(where: str, scope: Any, category: Any) -> InvalidCell:
    """The refusal of a (scope, category) pair outside VALID_CELLS (familiars §5.2.3), naming
    both and what the scope allows."""
    if scope in SCOPES:
        valid = sorted(c for s, c in VALID_CELLS if s == scope)
        rule = (f"({scope!r}, {category!r}) is not a valid Familiars cell (familiars §5.2.3 "
                f"VALID_CELLS); the valid categories of scope {scope!r} are {valid}")
    else:
        rule = f"scope {scope!r} is not one of {list(SCOPES)} (familiars §5.2.1)"
    return InvalidCell(where, rule, (scope, category))


def parse_writer_output(data: Any, *, cfg: MemlabConfig | None = None) -> WriterOutput:
    """Validate WriterOutput JSON (a mapping, a JSON string or a :class:`WriterOutput`): pydantic's
    rules, then per write the (scope, category) cell (``writer.default_category`` for a write that
    gives none), the content (``recall.max_text_chars``, no control characters) and the id of
    ``supersedes_id``; an update without ``supersedes_id`` is refused. The first refusal raises
    InvalidInput (InvalidCell for a cell) naming ``writes[i].<field>``."""
    cfg = cfg or MemlabConfig()
    if isinstance(data, WriterOutput):
        out = data
    else:
        if isinstance(data, Mapping):
            try:
                data = json.dumps(data, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise InvalidInput("writer_output", f"must be JSON data ({exc})",
                                   type(data).__name__) from None
        elif not isinstance(data, (str, bytes)):
            raise InvalidInput("writer_output", "must be WriterOutput JSON: a mapping "
                               "{\"writes\": [...]} or its JSON text", type(data).__name__)
        try:
            out = WriterOutput.model_validate_json(data)
        except ValidationError as exc:
            errs = exc.errors(include_url=False)
            first = errs[0]
            more = f" ({len(errs) - 1} more problem(s))" if len(errs) > 1 else ""
            raise InvalidInput(_where(first["loc"]), first["msg"] + more,
                               first.get("input")) from None
    for i, w in enumerate(out.writes):
        if w.op == "skip":
            continue
        category = w.category or cfg.writer.default_category
        if (w.scope, category) not in VALID_CELLS:
            raise cell_error(f"writes[{i}].(scope, category)", w.scope, category)
        check_text(w.entry.content, f"writes[{i}].entry.content",
                   max_chars=cfg.recall.max_text_chars, limit_name="recall.max_text_chars")
        if w.entry.supersedes_id is not None:
            check_id(w.entry.supersedes_id, f"writes[{i}].entry.supersedes_id")
        elif w.op == "update":
            raise InvalidInput(f"writes[{i}].entry.supersedes_id", "op 'update' needs the id of "
                               "the memory it replaces", None)
    return out


# -- the supersede step (run by the write pipeline inside the write's transaction) ---------------
def deprecate_superseded(repo, records: Sequence[MemoryRecord]) -> None:
    """Mark the memories that ``records`` supersede deprecated (inside the caller's transaction).
    Each ``supersedes`` must name a memory of the same agent and user that is not deprecated yet,
    once per batch; InvalidInput naming ``items[j].supersedes`` otherwise (the write is refused
    with everything it did)."""
    seen: dict[str, int] = {}
    for j, rec in enumerate(records):
        old_id = rec.supersedes
        if old_id is None:
            continue
        where = f"items[{j}].supersedes"
        if old_id in seen:
            raise InvalidInput(where, f"items[{seen[old_id]}] supersedes this memory already: a "
                               "memory is superseded once (its chain stays one line)", old_id)
        seen[old_id] = j
        try:
            old = repo.get([old_id], agent_id=rec.agent_id, user_id=rec.user_id)[0]
        except InvalidInput:
            raise InvalidInput(where, f"no memory with this id for agent_id={rec.agent_id!r}, "
                               f"user_id={rec.user_id!r}", old_id) from None
        if old.deprecated:
            raise InvalidInput(where, "this memory is deprecated already (superseded or "
                               "consolidated): supersede the newest of its chain", old_id)
        repo.update_fields(old_id, deprecated=True)


# -- apply_writes ----------------------------------------------------------------------------------
def budget(contents: Sequence[str], max_chars_total: int) -> tuple[list[int], list[Dropped]]:
    """The greedy budget of §5.7.3 over the contents of the non-skip writes, in order: (accepted
    positions, dropped). The first is always accepted; accepting stops at the first content that
    would take the total over ``max_chars_total``."""
    accepted: list[int] = []
    dropped: list[Dropped] = []
    total = 0
    for j, text in enumerate(contents):
        n = len(text)
        if not dropped and (not accepted or total + n <= max_chars_total):
            accepted.append(j)
            total += n
        else:
            dropped.append(Dropped(j, n, total))
    return accepted, dropped


def new_ids(n: int, *, taken: set[str] = frozenset()) -> list[str]:
    """``n`` distinct ids ``m_`` + 8 hex digits, none in ``taken``."""
    out: list[str] = []
    while len(out) < n:
        i = ID_PREFIX + secrets.token_hex(ID_BYTES)
        if i not in taken and i not in out:
            out.append(i)
    return out


def apply_writes(store, writer_output: Any, *, agent_id: str | None = None,
                 user_id: str | None = None, dialogue_id: str | None = None,
                 turn_counter: int | None = None, turn_id: str | None = None,
                 cfg: MemlabConfig | None = None, clock=None) -> AppliedWrites:
    """Apply WriterOutput JSON to ``store`` (a :class:`memlab.api.MemoryStore`); see the module
    docstring for the rules. ``cfg``: default the store's config. ``clock``: default the store's
    (the memories' time). Returns :class:`AppliedWrites` (the stored records, dropped and skipped
    writes). Raises InvalidInput / InvalidCell naming ``writes[i].<field>``; nothing is written
    then."""
    cfg = cfg or store.config
    out = parse_writer_output(writer_output, cfg=cfg)
    if dialogue_id is not None:
        dialogue_id = check_id(dialogue_id, "dialogue_id")
    if turn_id is not None:
        turn_id = check_id(turn_id, "turn_id")
    if turn_counter is not None and (isinstance(turn_counter, bool)
                                     or not isinstance(turn_counter, int) or turn_counter < 0):
        raise InvalidInput("turn_counter", "must be a whole number >= 0", turn_counter)
    skipped = [i for i, w in enumerate(out.writes) if w.op == "skip"]
    live = [i for i, w in enumerate(out.writes) if w.op != "skip"]
    items = [_item(i, out.writes[i], cfg=cfg, agent_id=agent_id, user_id=user_id,
                   dialogue_id=dialogue_id, turn_counter=turn_counter, turn_id=turn_id)
             for i in live]
    accepted, dropped = budget([it["text"] for it in items], cfg.writer.max_chars_total)
    kept = [items[j] for j in accepted]
    taken: set[str] = set()
    while True:   # ids are collision-checked by the insert itself (the store refuses a stored id)
        ids = new_ids(len(kept), taken=taken)
        for it, mem_id in zip(kept, ids):
            it["id"] = mem_id
        try:
            records = store.add_many(kept, clock=clock, supersede=True) if kept else []
            break
        except InvalidInput as exc:
            if exc.field == "id" and exc.rule == "already stored" and exc.value in ids:
                taken.add(exc.value)   # nothing was written: try again with another id
                continue
            raise _renamed(exc, [live[j] for j in accepted]) from None
    return AppliedWrites(records=tuple(records), indices=tuple(live[j] for j in accepted),
                         dropped=tuple(Dropped(live[d.index], d.chars, d.total_before)
                                       for d in dropped),
                         skipped=tuple(skipped), chars=sum(len(it["text"]) for it in kept),
                         budget=cfg.writer.max_chars_total)


def _item(i: int, w: Write, *, cfg: MemlabConfig, agent_id, user_id, dialogue_id, turn_counter,
          turn_id) -> dict[str, Any]:
    """The add_many item of write ``i``."""
    e = w.entry
    if w.scope in DIALOGUE_SCOPES and dialogue_id is None:
        raise InvalidInput(f"writes[{i}].scope", f"scope {w.scope!r} lives under a dialogue "
                           "(familiars §5.2.4): give apply_writes a dialogue_id", w.scope)
    ttl = None if e.ttl is None else e.ttl.model_dump()
    if ttl is not None and ttl["kind"] == "turns" and ttl["created_turn"] is None:
        if turn_counter is None:
            raise InvalidInput(f"writes[{i}].entry.ttl.created_turn", "a turns TTL counts from "
                               "the turn it was written in: give it, or apply_writes a "
                               "turn_counter", None)
        ttl["created_turn"] = turn_counter
    item = {"text": e.content, "scope": w.scope,
            "category": w.category or cfg.writer.default_category, "tags": e.tags,
            "importance": cfg.writer.default_salience if e.salience is None else e.salience,
            "ttl": ttl, "supersedes": e.supersedes_id, "epistemic_status": e.epistemic_status,
            "pinned": e.pinned, "source_quote": e.source_quote, "dialogue_id": dialogue_id,
            "evidence": {"dialogue_id": dialogue_id, "turn_id": turn_id},
            "schema_version": cfg.writer.schema_version}
    if agent_id is not None:
        item["agent_id"] = agent_id
    if user_id is not None:
        item["user_id"] = user_id
    return item


def _renamed(exc: InvalidInput, indices: Sequence[int]) -> InvalidInput:
    """``exc`` with ``items[j].<record field>`` renamed ``writes[i].<writer field>``."""
    f = exc.field
    if not f.startswith("items["):
        return exc
    j_text, _, rest = f[len("items["):].partition("]")
    try:
        i = indices[int(j_text)]
    except (ValueError, IndexError):
        return exc
    head, dot, tail = rest.lstrip(".").partition(".")
    name = _FIELD_NAMES.get(head, head)
    new = f"writes[{i}]" + (f".{name}" if name else "") + (f".{tail}" if dot else "")
    exc.field = new
    exc.args = (str(exc).replace(f, new, 1),)
    return exc


def supersede_chain(store, memory_id: str, *, agent_id: str | None = None,
                    user_id: str | None = None) -> list[MemoryRecord]:
    """Every memory of the supersede chain ``memory_id`` belongs to, oldest first (the old
    versions deprecated, the newest live); ``store`` a :class:`memlab.api.MemoryStore`. An id of
    another agent or user is refused like an unknown one."""
    return store.history(memory_id, agent_id=agent_id, user_id=user_id)


__all__ = ["AppliedWrites", "Dropped", "Entry", "WriterOutput", "Write", "apply_writes", "budget",
           "cell_error", "deprecate_superseded", "new_ids", "parse_writer_output",
           "supersede_chain"]

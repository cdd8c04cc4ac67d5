"""From what a caller hands in to a :class:`~memlab.types.MemoryRecord`: validation and defaults.

The write pipeline (:mod:`memlab.write.pipeline`) works in two steps so that nothing is embedded or
written before the input is known to be valid, and the layer is chosen inside the write's
transaction (budget pressure reads the owner's long-term usage there):

1. :func:`prepare` validates one item into a :class:`Draft` (text, emotions, importance if given,
   layer if given, cognitive layer, owner, times, the other record fields). Every refusal is an
   :class:`~memlab.errors.InvalidInput` naming ``items[i].<field>``, before anything is read or
   written.
2. :func:`finish` turns a draft with its importance and layer into the record: an id
   ``lt_``/``st_``/``pm_`` + uuid4 hex when it has none (§4.1).
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from memlab.config import LayersConfig, MemlabConfig
from memlab.errors import InvalidCell, InvalidInput
from memlab.inputs import check_id, check_text, check_time, check_unicode
from memlab.lifecycle.ttl import check_ttl
from memlab.safety import screen_write
from memlab.types import COGNITIVE_LAYERS, RETENTION_LAYERS, VALID_CELLS, MemoryRecord

#: id prefix of a memory by retention layer (§4.1: lt_/st_ + uuid4 hex; pm_ for the card's)
ID_PREFIX = {"permanent": "pm", "long_term": "lt", "short_term": "st"}
#: the MemoryRecord fields an item may give besides the ones prepare handles itself
_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(MemoryRecord))
_TUPLE_FIELDS = ("tags", "derived_from", "source_quote")

#: (agent_id, user_id, where) -> the validated (agent_id, user_id)
TenantFn = Callable[[Any, Any, str], "tuple[str, str]"]


@dataclass(slots=True)
class Draft:
    """One validated item on its way to the store. ``importance`` None: the pipeline scores it;
    ``layer`` None: the pipeline routes it; ``keep_short`` False: a memory that does not reach the
    long-term threshold is not stored (store_interaction's draw, §5), True: it goes short term."""

    where: str
    text: str
    emotions: dict[str, float]
    intensity: float
    importance: float | None
    layer: str | None
    cognitive_layer: str
    timestamp: float
    event_time: float | None
    id: str | None
    fields: dict[str, Any]
    associated: int = 0
    keep_short: bool = True

    @property
    def owner(self) -> tuple[str, str]:
        return self.fields["agent_id"], self.fields["user_id"]


def emotion_intensity(emotions: Mapping[str, float], *, scale: float) -> float:
    """§9.1: max |emotion| / scale (``fusion.emotion_scale``), at most 1."""
    return min(1.0, max((abs(v) for v in emotions.values()), default=0.0) / scale)


def check_emotions(emotions: Any, where: str) -> dict[str, float]:
    """{name: finite number} (None: no emotions)."""
    if emotions is None:
        return {}
    if not isinstance(emotions, Mapping):
        raise InvalidInput(f"{where}.emotions", "must be a mapping {name: intensity}",
                           type(emotions).__name__)
    for k, v in emotions.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise InvalidInput(f"{where}.emotions[{k!r}]", "must be a finite number", v)
    return dict(emotions)


def check_importance(importance: Any, field: str) -> float:
    """A finite number in [0, 1]."""
    if isinstance(importance, bool) or not isinstance(importance, (int, float)) \
            or not math.isfinite(importance) or not 0.0 <= importance <= 1.0:
        raise InvalidInput(field, "must be a finite number in [0, 1]", importance)
    return float(importance)


def cognitive_layer_of(text: str, *, layers: LayersConfig) -> str:
    """§4.1: a text starting with an episodic prefix (事件记忆：, Event memory:) is episodic; one
    starting with a procedural prefix is procedural (memlab's rule, see
    ``layers.procedural_prefixes``); else semantic."""
    if text.startswith(tuple(layers.episodic_prefixes)):
        return "episodic"
    if text.startswith(tuple(layers.procedural_prefixes)):
        return "procedural"
    return "semantic"


def prepare(item: Mapping[str, Any], *, index: int, now: float, cfg: MemlabConfig,
            tenant: TenantFn, turn: int | None = None, where: str | None = None) -> Draft:
    """Validate one item (see :meth:`memlab.api.MemoryStore.add_many` for its fields). Errors
    name ``items[<index>].<field>``, or ``<where>.<field>`` when ``where`` is given (a workspace
    import validates each entry here, as the API does).

    ``turn``: the dialogue's turn counter at this write, when known (Familiars): a ``ttl`` is
    validated by :func:`memlab.lifecycle.ttl.check_ttl` (a turns TTL without ``created_turn``
    gets ``turn``), and an ephemeral-scope item without a ttl gets ``{"kind": "turns", "turns":
    ttl.ephemeral_turns, "created_turn": turn}`` (§5.2.1: cleared when the turn ends)."""
    it = dict(item)
    where = f"items[{index}]" if where is None else where
    text = check_text(it.pop("text", None), f"{where}.text",
                      max_chars=cfg.recall.max_text_chars, limit_name="recall.max_text_chars")
    for name, value in it.items():
        check_unicode(value, f"{where}.{name}")
    it["agent_id"], it["user_id"] = tenant(it.get("agent_id"), it.get("user_id"), f"{where}.")
    it = screen_write(text, it, cfg.safety, where=where)   # UnsafeWrite: a hijack (§12)
    emotions = check_emotions(it.pop("emotions", None), where)
    layer = it.pop("layer", None) or it.pop("retention_layer", None)
    it.pop("retention_layer", None)
    importance = it.pop("importance", None)
    if importance is None and layer == "permanent":
        importance = cfg.layers.permanent_importance
    if importance is not None:
        importance = check_importance(importance, f"{where}.importance")
    if layer is not None and layer not in RETENTION_LAYERS:
        raise InvalidInput(f"{where}.layer", f"one of {RETENTION_LAYERS}", layer)
    cognitive = it.pop("cognitive_layer", None) or cognitive_layer_of(text, layers=cfg.layers)
    if cognitive not in COGNITIVE_LAYERS:
        raise InvalidInput(f"{where}.cognitive_layer", f"one of {COGNITIVE_LAYERS}", cognitive)
    scope, category = it.get("scope"), it.get("category")
    if (scope is not None or category is not None) and (scope, category) not in VALID_CELLS:
        raise InvalidCell(f"{where}.(scope, category)", "not a valid Familiars cell "
                          "(familiars §5.2.3 VALID_CELLS)", (scope, category))
    ttl = it.get("ttl")
    if ttl is None and scope == "ephemeral" and turn is not None:
        ttl = {"kind": "turns", "turns": cfg.ttl.ephemeral_turns}
    if ttl is not None:
        it["ttl"] = check_ttl(ttl, f"{where}.ttl", turn=turn)
    ts = it.pop("timestamp", None)
    ev = it.pop("event_time", None)
    mem_id = it.pop("id", None)
    if mem_id is not None:
        mem_id = check_id(mem_id, f"{where}.id")
    for name in _TUPLE_FIELDS:
        if name in it:
            it[name] = tuple(it[name])
    unknown = sorted(set(it) - _RECORD_FIELDS)
    if unknown:
        raise InvalidInput(where, f"unknown field ({unknown[0]!r} is not a MemoryRecord field)",
                           sorted(it))
    return Draft(where=where, text=text, emotions=emotions,
                 intensity=emotion_intensity(emotions, scale=cfg.fusion.emotion_scale),
                 importance=importance, layer=layer, cognitive_layer=cognitive,
                 timestamp=check_time(now if ts is None else ts, f"{where}.timestamp"),
                 event_time=check_time(ev, f"{where}.event_time", optional=True), id=mem_id,
                 fields=it)


def finish(draft: Draft, *, layer: str) -> MemoryRecord:
    """The record of a scored and routed draft; a new id ``<prefix>_<uuid4 hex>`` if it has none."""
    if draft.importance is None:   # the pipeline scores every draft before it routes it
        raise RuntimeError(f"{draft.where}: routed before its importance was scored")
    mem_id = draft.id or f"{ID_PREFIX[layer]}_{uuid.uuid4().hex}"
    return MemoryRecord(id=mem_id, text=draft.text, retention_layer=layer,
                        cognitive_layer=draft.cognitive_layer, timestamp=draft.timestamp,
                        event_time=draft.event_time, importance=draft.importance,
                        emotions=draft.emotions, **draft.fields)

"""``store_interaction`` (§5): one exchange of a conversation, remembered or not, and why.

The steps, in the spec's order (``MemoryManager.store_interaction``):

1. user corrections first: the ``corrections`` hook (e.g. fuzzy recall's
   ``resolve_user_correction``, which rolls a misremembering back) sees the user's message before
   anything is scored; default: none. Its result is reported, never interpreted here;
2. importance (§5 ①-⑥, :func:`memlab.write.importance.score_importance`): emotion intensity,
   markers, repeated terms, an 80+ character user message, association with the owner's stored
   memories (⑤, counted through recall: :mod:`memlab.recall.associate`), clamped to
   [``importance.floor``, 1];
3. the autonomy gate (:mod:`memlab.write.gate`, rule or LLM);
4. layer routing (:mod:`memlab.write.layers`): above the owner's long-term threshold (budget
   pressure, §11.3) -> long term; otherwise short term when the store's seeded generator draws
   below ``layers.short_term_probability``, else not stored. Exactly one draw per exchange the gate
   lets through, made before the write (so the draw never depends on the store's state);
5. the write (:class:`memlab.write.pipeline.WritePipeline`): id ``lt_``/``st_`` + uuid4 hex,
   cognitive layer by prefix (``layers.episodic_prefixes``, ``layers.procedural_prefixes``), one
   transaction.

The text stored is ``layers.interaction_template`` filled with both messages (the user's alone when
the reply is empty). The result (:class:`InteractionResult`) says what was stored, or why not.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from memlab.errors import InvalidInput
from memlab.inputs import check_text, check_unicode
from memlab.llm import LLM
from memlab.types import MemoryRecord
from memlab.write.gate import Degraded, GateDecision, decide
from memlab.write.importance import score_importance
from memlab.write.pipeline import WritePipeline
from memlab.write.records import Draft


class CorrectionHook(Protocol):
    """Step ① of §5: handles a user's correction of a misremembering before the exchange is
    scored. Returns what it did (None: the message corrected nothing)."""

    def __call__(self, user_message: str, *, agent_id: str, user_id: str, now: float) -> Any: ...


@dataclass(frozen=True)
class InteractionResult:
    """What ``store_interaction`` did with one exchange.

    ``stored``: whether a memory was written (``memory``: the record as stored, its ``id``);
    ``reason``: why, in words; ``importance`` and ``associated`` (§5 ⑤ count) as scored;
    ``gate``: the gate's decision; ``layer``: where it went (None: not stored); ``threshold``: the
    owner's long-term threshold it met (budget pressure; None when it was not routed);
    ``kept_short``: the short-term draw (None when not drawn); ``correction``: what the
    corrections hook returned."""

    stored: bool
    reason: str
    importance: float
    associated: int
    gate: GateDecision
    layer: str | None = None
    threshold: float | None = None
    kept_short: bool | None = None
    memory: MemoryRecord | None = None
    correction: Any = None

    @property
    def id(self) -> str | None:
        return None if self.memory is None else self.memory.id

    def to_dict(self) -> dict[str, Any]:
        """Plain fields (the memory as its id and text) for a table or JSON."""
        out = {k: v for k, v in asdict(self).items() if k not in ("memory", "gate")}
        out.update(id=self.id, text=None if self.memory is None else self.memory.text,
                   gate=self.gate.remember, gate_by=self.gate.by, gate_reason=self.gate.reason)
        return out

    def __str__(self) -> str:
        head = (f"stored {self.id} ({self.layer})" if self.stored else "not stored")
        return f"{head}: {self.reason} [importance {self.importance:.3f}, gate {self.gate.by}]"


def emotions_of(emotion: Any, *, scale: float) -> dict[str, float]:
    """``emotion`` as a record's emotions: a number is an intensity in [0, 1] (stored as
    ``{"intensity": emotion * scale}``, as benchmark replay does), a mapping is the emotion vector
    ({name: 0..scale}), None is none."""
    if emotion is None:
        return {}
    if isinstance(emotion, Mapping):
        return dict(emotion)   # checked by the pipeline (finite numbers)
    if isinstance(emotion, bool) or not isinstance(emotion, (int, float)) \
            or not math.isfinite(emotion) or not 0.0 <= emotion <= 1.0:
        raise InvalidInput("emotion", "an intensity in [0, 1] or a mapping {name: 0..100}",
                           emotion)
    return {"intensity": float(emotion) * scale}


def store_interaction(pipeline: WritePipeline, user_message: str, assistant_reply: str = "", *,
                      emotion: Any = None, agent_id: Any = None, user_id: Any = None,
                      now: float, rng: np.random.Generator, llm: LLM | None = None,
                      corrections: CorrectionHook | None = None, degraded: Degraded
                      ) -> InteractionResult:
    """Steps 1-5 of the module docstring for one exchange."""
    cfg = pipeline.config
    user_message = check_text(user_message, "user_message", max_chars=cfg.recall.max_text_chars,
                              limit_name="recall.max_text_chars")
    if not isinstance(assistant_reply, str):
        raise InvalidInput("assistant_reply", "must be a string ('' for none)",
                           type(assistant_reply).__name__)
    check_unicode(assistant_reply, "assistant_reply")
    emotions = emotions_of(emotion, scale=cfg.fusion.emotion_scale)
    text = (cfg.layers.interaction_template.format(user_message=user_message,
                                                   assistant_reply=assistant_reply)
            if assistant_reply.strip() else user_message)
    draft = pipeline.prepare([{"text": text, "emotions": emotions, "agent_id": agent_id,
                               "user_id": user_id}], now=now)[0]
    # ① corrections first
    correction = None if corrections is None else corrections(
        user_message, agent_id=draft.owner[0], user_id=draft.owner[1], now=now)
    result = remember(pipeline, [draft], messages=[user_message], replies=[assistant_reply],
                      now=now, rng=rng, llm=llm, degraded=degraded)[0]
    return dataclasses.replace(result, correction=correction)


def remember_items(pipeline: WritePipeline, items: Sequence[Mapping[str, Any]], *, now: float,
                   rng: np.random.Generator, llm: LLM | None, degraded: Degraded,
                   vectors: np.ndarray | None = None,
                   message_vectors: np.ndarray | None = None,
                   windows: Sequence[np.ndarray] | None = None) -> list[InteractionResult]:
    """``MemoryStore.remember_many``: validate add_many items that may carry ``message`` and
    ``reply`` (what the scorer and the gate read; default their text and ''), then
    :func:`remember` them."""
    items = [dict(it) for it in items]
    messages = [it.pop("message", None) for it in items]
    replies = [it.pop("reply", None) or "" for it in items]
    drafts = pipeline.prepare(items, now=now)
    cfg = pipeline.config
    for i, (m, r) in enumerate(zip(messages, replies)):
        if m is not None:
            check_text(m, f"items[{i}].message", max_chars=cfg.recall.max_text_chars,
                       limit_name="recall.max_text_chars")
        if not isinstance(r, str):
            raise InvalidInput(f"items[{i}].reply", "must be a string", type(r).__name__)
    for name, arr in (("vectors", vectors), ("message_vectors", message_vectors),
                      ("windows", windows)):
        if arr is not None and len(arr) != len(drafts):
            raise InvalidInput(name, f"one vector per item ({len(drafts)})", len(arr))
    return remember(pipeline, drafts, messages=[m or d.text for m, d in zip(messages, drafts)],
                    replies=replies, now=now, rng=rng, llm=llm, degraded=degraded,
                    vectors=vectors, message_vectors=message_vectors, windows=windows)


def remember(pipeline: WritePipeline, drafts: Sequence[Draft], *, messages: Sequence[str],
             replies: Sequence[str], now: float, rng: np.random.Generator, llm: LLM | None,
             degraded: Degraded, vectors: np.ndarray | None = None,
             message_vectors: np.ndarray | None = None,
             windows: Sequence[np.ndarray] | None = None) -> list[InteractionResult]:
    """Steps 2-5 for drafts already validated (store_interaction: one; benchmark writer mode: a
    batch), all written in one transaction. ``messages``/``replies``: what the §5 scorer and the
    gate read for each draft. A draft with an explicit layer (a card's permanent memory) is
    written as given, never gated or drawn; one with an explicit importance is not re-scored.
    ``vectors``: precomputed vectors of the drafts' texts, ``message_vectors`` of the messages
    embedded as queries (benchmarks: embedded once through their cache), ``windows`` the
    window vectors of the texts (:meth:`WritePipeline.commit`)."""
    cfg = pipeline.config
    counters = pipeline.counters
    # ② importance (⑤: each message against its owner's memories, as §5 searches user_message)
    by_owner: dict[tuple[str, str], list[int]] = {}
    for j, d in enumerate(drafts):
        if d.layer is None and d.importance is None:
            by_owner.setdefault(d.owner, []).append(j)
    for owner, js in by_owner.items():
        assoc = pipeline.associations(
            [messages[j][:cfg.recall.max_query_chars] for j in js], owner, now,
            None if message_vectors is None else np.asarray(message_vectors)[js])
        for j, a in zip(js, assoc):
            d = drafts[j]
            d.associated = a
            d.importance = score_importance(messages[j], replies[j], emotion_intensity=d.intensity,
                                            associated=a, cfg=cfg.importance,
                                            term_cap=cfg.recall.term_cap,
                                            text_cap=cfg.recall.text_cap)
    pipeline.score(drafts, now=now)   # explicit layers without importance (none in practice)
    results: list[InteractionResult | None] = [None] * len(drafts)
    write: list[int] = []
    lt = cfg.layers.long_term_threshold
    for j, d in enumerate(drafts):
        counters["interactions"] += 1
        if d.layer is not None:
            write.append(j)
            results[j] = InteractionResult(True, "", d.importance, d.associated,
                                           GateDecision(True, "given", "explicit layer"))
            continue
        # ③ the gate
        gate = decide(messages[j], replies[j], importance=d.importance, cfg=cfg, llm=llm,
                      degraded=degraded)
        base = dict(importance=d.importance, associated=d.associated, gate=gate)
        if not gate.remember:
            counters["interactions not stored: gate"] += 1
            results[j] = InteractionResult(False, f"the gate ({gate.by}) said no: {gate.reason}",
                                           **base)
            continue
        # ④ one draw per exchange the gate lets through; the write routes under budget pressure
        d.keep_short = bool(rng.random() < cfg.layers.short_term_probability)
        results[j] = InteractionResult(False, "", kept_short=d.keep_short, **base)
        if d.importance <= lt and not d.keep_short:   # cannot reach the long-term layer
            counters["interactions not stored: short-term draw"] += 1
            results[j] = dataclasses.replace(
                results[j], threshold=lt,
                reason=_dropped(d.importance, lt, cfg.layers.short_term_probability))
            continue
        write.append(j)
    routed = pipeline.commit([drafts[j] for j in write],
                             vectors=None if vectors is None else np.asarray(vectors)[write],
                             windows=None if windows is None else [windows[j] for j in write])
    for j, r in zip(write, routed):
        res = results[j]
        if r.record is None:
            counters["interactions not stored: short-term draw"] += 1
            results[j] = dataclasses.replace(res, threshold=r.threshold, reason=_dropped(
                res.importance, r.threshold, cfg.layers.short_term_probability))
            continue
        counters[f"interactions stored: {r.layer}"] += 1
        if r.threshold is None:
            why = f"written as given ({r.layer})"
        elif r.layer == "long_term":
            why = f"importance {res.importance:.3f} > long-term threshold {r.threshold:.3f}"
        else:
            why = (f"importance {res.importance:.3f} <= long-term threshold {r.threshold:.3f}; "
                   f"kept short term (draw < layers.short_term_probability = "
                   f"{cfg.layers.short_term_probability})")
        results[j] = dataclasses.replace(res, stored=True, reason=why, layer=r.layer,
                                         threshold=r.threshold, memory=r.record)
    return results


def _dropped(importance: float, threshold: float, p: float) -> str:
    return (f"importance {importance:.3f} <= long-term threshold {threshold:.3f} and the "
            f"short-term draw missed (layers.short_term_probability = {p})")

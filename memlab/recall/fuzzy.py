"""Fuzzy recall (Reverie §9.2): misremembering as an auditable projection.

"开启后，检索时小概率把一条记忆里的实体替换成另一条同类型记忆的实体（比如把《星露谷》记成《泰拉瑞亚》，
都是游戏）：替换结果是当轮投影，SQLite 里的原文本一字不动；每次记错都写入 memory_recall_events 审计表"

After selection (the ranking is untouched), each recalled memory is, with probability
``fuzzy.probability``, misremembered: one of its typed entities is replaced, in the text recall
returns and the prompt block only, by an entity of the same type that another memory of the same
agent and user names (``fuzzy.pool = "store"``; or any other of the type: ``"lexicon"``). Types:
the groups of ``fuzzy.entity_types`` (:class:`memlab.text.EntityLexicon`, zh and en aliases of one
thing: 星露谷物语 / Stardew Valley), and (``fuzzy.titles``) the titles memlab's entity extractor
finds in 《》, one type ``title`` (the spec's own example: 《星露谷》 -> 《泰拉瑞亚》), always
replaced by a title another memory names. Never fuzzed (§9.2:
身份、生日、承诺、重要度≥0.9): permanent memories, importance >= ``fuzzy.protected_importance``,
texts holding a ``fuzzy.protected_markers`` word, and (``fuzzy.corrected_stay_true``) memories
whose swap the user already corrected.

Seeded: the draw of a memory depends only on (``fuzzy.seed``, agent, user, query, recall time,
memory id), so the same inputs give the same swaps whatever was recalled before. Each swap is
a row of ``memory_recall_events`` (kind ``fuzzy_swap``); :mod:`memlab.write.correction` rolls it
back when the user corrects it. A swap is of one turn: the next recall draws afresh.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from memlab.config import FuzzyConfig
from memlab.store.recall_log import FUZZY_SWAP
from memlab.text import EntityLexicon, alias_pattern, mentions, spelling, title_spans
from memlab.types import MemoryRecord

from .result import RecallResult


@dataclass(frozen=True)
class Swap:
    """One misremembered entity: in memory ``memory_id``, ``original`` (as the text spells it)
    was shown as ``replacement``; both with their group's aliases. ``event_id``: its audit row."""

    memory_id: str
    type: str
    original: str
    replacement: str
    original_aliases: tuple[str, ...]
    replacement_aliases: tuple[str, ...]
    event_id: int | None = None

    def meta(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "type": self.type, "original": self.original,
                "replacement": self.replacement, "original_aliases": list(self.original_aliases),
                "replacement_aliases": list(self.replacement_aliases)}


@lru_cache(maxsize=8)
def lexicon_of(lines: tuple[str, ...]) -> EntityLexicon:
    return EntityLexicon(lines)


def protected_reason(memory: MemoryRecord, *, cfg: FuzzyConfig,
                     corrected: frozenset[str] | set[str] = frozenset()) -> str:
    """Why a memory is never misremembered ('' when it may be): permanent, importance,
    marker (a birthday, a promise), corrected."""
    if memory.retention_layer == "permanent":
        return "permanent"
    if memory.importance >= cfg.protected_importance:
        return "importance"
    if mentions(memory.text, cfg.protected_markers):
        return "marker"
    if memory.id in corrected:
        return "corrected"
    return ""


def draw(seed: int, *, agent_id: str, user_id: str, query: str, at: float,
         memory_id: str) -> random.Random:
    """The random stream of one memory in one recall (sha256 of the inputs: platform-stable)."""
    key = json.dumps([seed, agent_id, user_id, query, repr(float(at)), memory_id],
                     ensure_ascii=False)
    return random.Random(int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big"))


TITLE = "title"


@dataclass(frozen=True, order=True)
class Entity:
    """A typed entity: its type and its aliases (a lexicon group; a 《title》 has one)."""

    type: str
    aliases: tuple[str, ...]


def entities_in(text: str, *, lexicon: EntityLexicon, titles: bool
                ) -> list[tuple[Entity, str]]:
    """(entity, the text's spelling) of each typed entity in ``text``: lexicon groups, then
    (``titles``) the extractor's 《》 titles that hold no lexicon entity, typed ``title``."""
    found = [(Entity(m.type, lexicon.groups[m.group][1]), m.surface, m.start, m.end)
             for m in lexicon.find(text)]
    if titles:
        for title, a, b in title_spans(text):
            if not any(s < b and a < e for _, _, s, e in found):
                found.append((Entity(TITLE, (title,)), title, a, b))
    return [(e, surface) for e, surface, _, _ in found]


Pool = Callable[[Entity, MemoryRecord, set[Entity]], list[Entity]]


def choose_swaps(memories: Sequence[MemoryRecord], *, query: str, agent_id: str, user_id: str,
                 at: float, cfg: FuzzyConfig, pool: Pool,
                 corrected: frozenset[str] | set[str] = frozenset()) -> list[Swap]:
    """The swaps of one recall (pure given ``pool``: (entity, memory, entities the memory names)
    -> candidate replacements of the entity's type)."""
    lexicon = lexicon_of(tuple(cfg.entity_types))
    out = []
    for m in memories:
        if protected_reason(m, cfg=cfg, corrected=corrected):
            continue
        rng = draw(cfg.seed, agent_id=agent_id, user_id=user_id, query=query, at=at,
                   memory_id=m.id)
        if rng.random() >= cfg.probability:
            continue
        found = entities_in(m.text, lexicon=lexicon, titles=cfg.titles)
        if not found:
            continue
        present = {e for e, _ in found}
        target = rng.choice(sorted(present))
        candidates = sorted(set(pool(target, m, present)) - present)
        if not candidates:
            continue
        repl = rng.choice(candidates)
        surface = next(s for e, s in found if e == target)
        out.append(Swap(m.id, target.type, surface, spelling(repl.aliases, like=surface),
                        target.aliases, repl.aliases))
    return out


def swapped_text(text: str, swap: Swap) -> str:
    """``text`` with every spelling of the swapped entity replaced by the replacement's spelling in
    the same script (星露谷物语 -> 泰拉瑞亚, Stardew -> Terraria)."""
    return alias_pattern(swap.original_aliases).sub(
        lambda m: spelling(swap.replacement_aliases, like=m.group(0)), text)


def project(result: RecallResult, swaps: Sequence[Swap]) -> RecallResult:
    """The result with the swapped texts (memories, explain frame, prompt) and ``swaps``."""
    if not swaps:
        return result
    by_id = {s.memory_id: s for s in swaps}
    memories = tuple(dataclasses.replace(m, text=swapped_text(m.text, by_id[m.id]))
                     if m.id in by_id else m for m in result.memories)
    texts = [m.text for m in memories]
    explain = result.explain
    if isinstance(explain, pd.DataFrame):
        explain = explain.copy()
        explain["text"] = texts
    elif "text" in explain:
        explain = {**explain, "text": texts}
    return dataclasses.replace(result, memories=memories, explain=explain, swaps=tuple(swaps))


def fuzz_recall(result: RecallResult, *, store: Any, agent_id: str, user_id: str, at: float,
                cfg: FuzzyConfig) -> RecallResult:
    """Choose this recall's swaps, log each in ``memory_recall_events`` and return the projected
    result. ``store``: the :class:`memlab.store.Store` (its repository's texts are the 'store'
    pool; its audit log records the swaps). Reads the memories, never writes them."""
    if not len(result):
        return result
    lexicon = lexicon_of(tuple(cfg.entity_types))
    corrected = (store.events.resolved_memory_ids(kind=FUZZY_SWAP, agent_id=agent_id,
                                                  user_id=user_id)
                 if cfg.corrected_stay_true else set())

    def pool(target: Entity, memory: MemoryRecord, present: set[Entity]) -> list[Entity]:
        if target.type == TITLE:       # no list of titles: those other memories name
            texts = store.repo.texts_containing(["《"], agent_id=agent_id, user_id=user_id,
                                                exclude=[memory.id])
            return [e for t in texts for e, _ in entities_in(t, lexicon=lexicon, titles=True)
                    if e.type == TITLE]
        groups = [Entity(target.type, lexicon.groups[g][1])
                  for g in lexicon.of_type(target.type)]
        groups = [e for e in groups if e not in present]
        if cfg.pool == "lexicon" or not groups:
            return groups
        texts = store.repo.texts_containing([a for e in groups for a in e.aliases],
                                            agent_id=agent_id, user_id=user_id,
                                            exclude=[memory.id])
        named = {e for t in texts for e, _ in entities_in(t, lexicon=lexicon, titles=False)}
        return [e for e in groups if e in named]

    swaps = choose_swaps(result.memories, query=result.query, agent_id=agent_id,
                         user_id=user_id, at=at, cfg=cfg, pool=pool, corrected=corrected)
    if swaps:
        ids = store.events.log(kind=FUZZY_SWAP, agent_id=agent_id, user_id=user_id,
                               query=result.query, at=at, memory_ids=result.ids,
                               metas=[s.meta() for s in swaps])
        swaps = [dataclasses.replace(s, event_id=i) for s, i in zip(swaps, ids)]
    return project(result, swaps)


def fuzzy_rates(stats: Mapping[str, int]) -> dict[str, float]:
    """A store object's fuzzy recall counters (``MemoryStore.stats``): memories projected,
    swaps, corrections, fuzz rate (swaps / projected) and correction rate (corrections /
    swaps); NaN for 0/0."""
    projected = stats.get("fuzzy: memories projected", 0)
    swaps, fixed = stats.get("fuzzy: swaps", 0), stats.get("fuzzy: corrections", 0)
    return {"projected": projected, "swaps": swaps, "corrections": fixed,
            "fuzz_rate": swaps / projected if projected else math.nan,
            "correction_rate": fixed / swaps if swaps else math.nan}


def fuzzy_report(store: Any) -> pd.DataFrame:
    """Per agent and user, from the audit log: swaps logged, swaps corrected and the correction
    rate (corrected / swaps). The fuzz rate (swaps per projected memory) needs the projections
    too: :meth:`memlab.api.MemoryStore.fuzzy_rates` counts them in-process."""
    rows = store.events.counts(kind=FUZZY_SWAP)
    frame = pd.DataFrame(rows, columns=["agent_id", "user_id", "swaps", "corrected"])
    frame["correction_rate"] = (frame["corrected"] / frame["swaps"]).astype(float)
    return frame

"""A user's correction of a misremembered entity (Reverie §9.2, ``resolve_user_correction``).

"如果用户纠正（「不是泰拉瑞亚！」），系统能匹配到这次记错、回滚并给真记忆 +0.03 重要度"

A message corrects one of the user's unresolved swaps logged in the last
``fuzzy.correction_window_seconds`` when it names the swapped entity — the wrong one shown or the
true one, under any alias (泰拉瑞亚 / Terraria, 星露谷 / Stardew) — as a correction: a negation
right before the shown one ('不是泰拉瑞亚！', 'not Terraria') or an affirmation right before the
true one ('不对，是星露谷', 'no, it was Stardew') picks that swap; otherwise a correction cue or
negation anywhere (``fuzzy.correction_cues``: 不对, 记错, wrong, ...) with a mention of either
entity picks the most recent swap it names. zh and en cue lists are configuration. Rolling
it back marks every unresolved swap of that memory resolved (the audit rows keep what was shown
and now the correcting message) and adds ``fuzzy.correction_bonus`` to the true memory's
importance, clamped at 1, in one transaction. The stored text was never changed, so the next
recall shows the true text (and, with ``fuzzy.corrected_stay_true``, never fuzzes it again).

The write pipeline calls :func:`resolve_user_correction` first in ``store_interaction`` (§5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from memlab.clock import Clock, to_unix
from memlab.config import FuzzyConfig, MemlabConfig
from memlab.errors import InvalidInput
from memlab.store.connect import transaction
from memlab.store.recall_log import FUZZY_SWAP, RecallEvent, RecallEvents
from memlab.text import alias_pattern, mentions


@dataclass(frozen=True)
class CorrectionResult:
    """What a correction rolled back: the memory, the true and the wrongly shown entity, the
    resolved audit rows and the memory's importance before and after the bonus (None when the
    memory was deleted since the swap: the swap is still resolved)."""

    memory_id: str
    original: str
    replacement: str
    event_ids: tuple[int, ...]
    importance_before: float | None
    importance_after: float | None
    message: str


def _cue(cue: str) -> str:
    c = re.escape(cue.lower())
    return rf"(?<![a-z0-9]){c}(?![a-z0-9])" if cue.isascii() else c


def is_correction(message: str, cues: Sequence[str]) -> bool:
    """Whether ``message`` holds one of ``cues`` (Latin cues as whole words, case-insensitive)."""
    lowered = message.lower()
    return any(re.search(_cue(c), lowered) for c in cues if c)


def _right_before(cues: Sequence[str], aliases: Sequence[str], message: str) -> bool:
    """A cue directly followed by one of the aliases (spaces, commas, colons and opening quotes
    or 《 between)."""
    cue = "|".join(_cue(c) for c in cues if c)
    if not cue or not aliases:
        return False
    entity = alias_pattern(aliases).pattern
    return re.search(rf"(?:{cue})[\s,，:：《“「\"']*(?:{entity})", message,
                     re.IGNORECASE) is not None


def match_swap(message: str, events: Sequence[RecallEvent], *, cfg: FuzzyConfig
               ) -> RecallEvent | None:
    """The swap ``message`` corrects, of ``events`` (newest first), or None.

    Strongest first: a negation right before the shown entity ('不是泰拉瑞亚', 'not Terraria') or
    an affirmation right before the true one ('是星露谷', 'it was Stardew'); then, when the message
    holds a correction cue or a negation, any mention of either entity. Ties: the newest."""
    def aliases(ev: RecallEvent, key: str) -> list[str]:
        return list(ev.meta.get(key, ()))

    for ev in events:
        if _right_before(cfg.correction_negations, aliases(ev, "replacement_aliases"), message):
            return ev
    # '是' ends '不是': affirmations are looked for with the negations blanked out
    plain = message
    for neg in sorted(cfg.correction_negations, key=len, reverse=True):
        plain = re.sub(_cue(neg), " ", plain, flags=re.IGNORECASE)
    for ev in events:
        if _right_before(cfg.correction_affirmations, aliases(ev, "original_aliases"), plain):
            return ev
    if not is_correction(message, tuple(cfg.correction_cues) + tuple(cfg.correction_negations)):
        return None
    return next((ev for ev in events if mentions(
        message, aliases(ev, "original_aliases") + aliases(ev, "replacement_aliases"))), None)


def resolve_user_correction(store_or_repo: Any, message: str, *, agent_id: str, user_id: str,
                            clock: Clock, cfg: MemlabConfig | FuzzyConfig
                            ) -> CorrectionResult | None:
    """Match ``message`` to the user's latest unresolved swap it corrects and roll it back.

    ``store_or_repo``: a :class:`memlab.store.Store` or its :class:`Repository`. Returns None
    when the message corrects no logged swap (nothing is written).

    Raises:
        InvalidInput: ``message`` is not a string.
    """
    if not isinstance(message, str):
        raise InvalidInput("message", "must be a string", type(message).__name__)
    fz = cfg.fuzzy if isinstance(cfg, MemlabConfig) else cfg
    if not message.strip():
        return None
    repo = getattr(store_or_repo, "repo", store_or_repo)
    events = RecallEvents(repo.conn)
    now = to_unix(clock.now())

    def find() -> tuple[list[RecallEvent], RecallEvent | None]:
        recent = events.recent(kind=FUZZY_SWAP, agent_id=agent_id, user_id=user_id,
                               since=now - fz.correction_window_seconds)
        return recent, match_swap(message, recent, cfg=fz)

    if find()[1] is None:      # most messages correct nothing: no write lock for them
        return None
    with transaction(repo.conn):
        recent, hit = find()   # again under the lock: another writer may have resolved it
        if hit is None:
            return None
        memory_id = hit.meta["memory_id"]
        same = [e.id for e in recent if e.meta.get("memory_id") == memory_id]
        events.resolve(same, at=now, note={"corrected_by": message})
        before = after = None
        if repo.count_ids([memory_id], agent_id=agent_id, user_id=user_id):
            before = repo.get([memory_id], agent_id=agent_id, user_id=user_id)[0].importance
            after = min(1.0, before + fz.correction_bonus)
            if after != before:
                repo.update_fields(memory_id, importance=after)
    return CorrectionResult(memory_id=memory_id, original=hit.meta["original"],
                            replacement=hit.meta["replacement"], event_ids=tuple(same),
                            importance_before=before, importance_after=after, message=message)

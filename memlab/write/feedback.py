"""Usage feedback after a turn (Reverie §8 end, §11.3 引用反馈闭环).

At the end of a turn each memory injected into the prompt gets ONE automatic usage signal
(§8: "记录一条 usage 信号"): ``used`` (``governance.usage_weight_used``, 1.0) when the reply
shares at least ``governance.used_overlap`` (25%) of the memory's terms, else ``injected``
(``usage_weight_injected``, 0.2). The user's explicit confirm or reject of a memory is a strong
signal (``usage_weight_explicit``, 2.0). Terms are :func:`memlab.text.memory_terms` (zh 2/3-grams
and en tokens): the memory's as indexed (``recall.term_cap``), the reply's all of them::

    overlap(memory, reply) = |terms(memory) ∩ terms(reply)| / |terms(memory)|     (0: no terms)

Daily cap (每日自动强化上限 6 次): at most ``governance.daily_reinforcement_cap`` automatic
signals are counted per memory per day (the day starts at 00:00 UTC +
``governance.usage_day_offset_hours``); a signal over the cap is logged with weight 0 and
``{"capped": true}`` and changes nothing. Explicit signals are never capped.

Into retention (memlab's choice; the spec gives the weights, not how they enter §9.1): a usage
weight w is w *references* of §9.1 (``references = access_count + mention_count - 1``). The
columns are integers, so each memory keeps its running weight total (``memory_usage_totals``) and
``access_count`` gains a whole reference each time the total crosses a whole number (five
injections = one reference; a confirmation = two); ``last_accessed`` moves to the turn's time for
every counted signal (the memory was just recalled). Both only ever increase, so more feedback
never speeds forgetting. Every signal is logged in ``memory_usage_events`` (kind, weight, time,
meta: overlap, capped). :meth:`MemoryStore.feedback` replaces :meth:`MemoryStore.reinforce` for a
turn: calling both counts the injection twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.store.connect import transaction
from memlab.store.governance import Governance
from memlab.store.repository import Repository
from memlab.text import memory_terms

SECONDS_PER_DAY = 86_400.0


def term_overlap(memory_terms_: Sequence[str], reply_terms: Sequence[str]) -> float:
    """The share of the memory's distinct terms found in the reply (0 for a memory without)."""
    mem = set(memory_terms_)
    return len(mem & set(reply_terms)) / len(mem) if mem else 0.0


def day_start(now: float, *, offset_hours: float) -> float:
    """Start (Unix seconds) of the day holding ``now``, days starting at 00:00 UTC + offset."""
    shift = offset_hours * 3600.0
    return math.floor((now + shift) / SECONDS_PER_DAY) * SECONDS_PER_DAY - shift


def credit(total: float, credited: int, weight: float) -> tuple[float, int, int]:
    """(new weight total, new whole references credited, references added now) after a signal of
    ``weight``: the whole part of the total, never less than what was already credited."""
    new_total = total + weight
    whole = math.floor(round(new_total, 9))   # 5 x 0.2 is 1 reference, not 0.99999...
    add = max(0, whole - credited)
    return new_total, credited + add, add


@dataclass(frozen=True, slots=True)
class Signal:
    """One usage signal of a turn: the memory, its kind (injected, used, confirmed, rejected),
    the configured weight, whether it counted (False: over the daily cap) and the overlap (the
    automatic ones)."""

    memory_id: str
    kind: str
    weight: float
    counted: bool
    overlap: float | None = None


@dataclass(frozen=True)
class FeedbackReport:
    """What :meth:`MemoryStore.feedback` counted: every signal, and per memory the references
    credited to ``access_count`` now."""

    at: float
    signals: tuple[Signal, ...]
    credited: Mapping[str, int] = field(default_factory=dict)

    @property
    def counted(self) -> list[Signal]:
        return [s for s in self.signals if s.counted]

    @property
    def capped(self) -> list[Signal]:
        return [s for s in self.signals if not s.counted]

    def to_frame(self):
        """One row per signal: memory_id, kind, weight, counted, overlap, credited."""
        import pandas as pd

        return pd.DataFrame([{"memory_id": s.memory_id, "kind": s.kind, "weight": s.weight,
                              "counted": s.counted, "overlap": s.overlap,
                              "credited": self.credited.get(s.memory_id, 0)}
                             for s in self.signals],
                            columns=["memory_id", "kind", "weight", "counted", "overlap",
                                     "credited"])


def automatic_signal(text: str, reply: str | None, cfg: MemlabConfig) -> tuple[str, float, float]:
    """(kind, weight, overlap) of an injected memory's automatic signal for a reply (None: no
    reply to compare, an injection only)."""
    g, rc = cfg.governance, cfg.recall
    if reply is None:
        return "injected", g.usage_weight_injected, 0.0
    ov = term_overlap(memory_terms(text, term_cap=rc.term_cap, text_cap=rc.text_cap),
                      memory_terms(reply, term_cap=len(reply) * 4 + 1, text_cap=rc.text_cap))
    if ov >= g.used_overlap and ov > 0:
        return "used", g.usage_weight_used, ov
    return "injected", g.usage_weight_injected, ov


def apply_feedback(repo: Repository, injected: Sequence[str], *, reply: str | None,
                   confirmed: Sequence[str], rejected: Sequence[str], now: float,
                   cfg: MemlabConfig, agent_id: str, user_id: str) -> FeedbackReport:
    """Count a turn's usage signals (see the module) in one transaction; every id must belong
    to the agent and user (InvalidInput naming it otherwise, nothing changed)."""
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise InvalidInput("clock", "must give a finite time", now)
    injected = list(dict.fromkeys(injected))
    confirmed, rejected = list(dict.fromkeys(confirmed)), list(dict.fromkeys(rejected))
    both = set(confirmed) & set(rejected)
    if both:
        raise InvalidInput("confirmed/rejected", "a memory cannot be both confirmed and "
                           "rejected in one turn", sorted(both)[0])
    g = cfg.governance
    gov = Governance(repo.conn)
    start = day_start(float(now), offset_hours=g.usage_day_offset_hours)
    signals: list[Signal] = []
    events: list[tuple[str, str, float, float, dict[str, Any]]] = []
    credited: dict[str, int] = {}
    with transaction(repo.conn):
        ids = list(dict.fromkeys(injected + confirmed + rejected))
        records = {r.id: r for r in repo.get(ids, agent_id=agent_id, user_id=user_id)}
        rows = dict(zip(ids, repo.ids_to_rows(ids)))
        weight: dict[str, float] = {}
        for mid in injected:
            kind, w, ov = automatic_signal(records[mid].text, reply, cfg)
            ok = gov.automatic_counted(mid, start, start + SECONDS_PER_DAY) \
                < g.daily_reinforcement_cap
            signals.append(Signal(mid, kind, w, ok, round(ov, 6)))
            events.append((mid, kind, w if ok else 0.0, now,
                           {"overlap": round(ov, 6)} | ({} if ok else {"capped": True,
                                                                        "weight": w})))
            if ok:
                weight[mid] = weight.get(mid, 0.0) + w
        for kind, group in (("confirmed", confirmed), ("rejected", rejected)):
            for mid in group:
                w = g.usage_weight_explicit
                signals.append(Signal(mid, kind, w, True))
                events.append((mid, kind, w, now, {}))
                weight[mid] = weight.get(mid, 0.0) + w
        gov.log_events(events)
        for mid, w in weight.items():
            total, done = gov.usage_total(rows[mid])
            total, done, add = credit(total, done, w)
            gov.credit(rows[mid], weight=total, credited=done, add_access=add, now=now)
            credited[mid] = add
    return FeedbackReport(float(now), tuple(signals), credited)


__all__ = ["FeedbackReport", "Signal", "apply_feedback", "automatic_signal", "credit",
           "day_start", "term_overlap"]

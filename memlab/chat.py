"""One chat turn, end to end (Reverie §10): memlab as an agent's memory in a few lines.

:class:`ChatSession` runs :meth:`~ChatSession.send` for each user message:

1. the injection guard and recall (:meth:`MemoryStore.guarded_recall`): a message that matches a
   hijack rule does not recall (the store audits and counts the skip);
2. if recall fails with memlab's own error (:class:`~memlab.errors.StoreError`,
   :class:`~memlab.errors.EmbeddingUnavailable`), the turn uses the last safe memories: those of
   the last successful recall that fuzzy recall did not alter (§10 keeps the snapshot free of
   fuzzed memories). The degradation is logged once per session and counted in ``stats``;
3. the prompt: ``chat.prompt_template`` (system prompt, the §10 memory block, the user message) or
   ``chat.prompt_template_no_memories`` when there is no block;
4. the reply from the injected LLM (an :class:`~memlab.llm.LLM` or a plain ``(prompt) -> str``);
   an LLM error propagates: no reply is invented;
5. :meth:`MemoryStore.store_interaction` (corrections hook, importance, gate, routing); a write
   refused by the safety rules (:class:`~memlab.errors.UnsafeWrite`, audited by the store) is
   recorded on the turn and counted, the reply still stands;
6. usage feedback (:meth:`MemoryStore.feedback`) on the memories injected, with the reply.

Each turn returns a :class:`Turn` (``to_dict()``); :meth:`ChatSession.to_frame` is the transcript.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pandas as pd

from memlab.api import MemoryStore
from memlab.clock import Clock
from memlab.errors import EmbeddingUnavailable, InvalidInput, StoreError, UnsafeWrite
from memlab.llm import LLM, as_llm
from memlab.recall.result import RecallResult
from memlab.safety import guard_user_message
from memlab.types import MemoryRecord
from memlab.write.feedback import FeedbackReport
from memlab.write.interaction import InteractionResult

__all__ = ["ChatSession", "Turn", "RECALL_ERRORS", "STEPS", "turns_plot"]

log = logging.getLogger(__name__)

#: what a failed recall may raise for the turn to fall back on the last safe memories
RECALL_ERRORS = (StoreError, EmbeddingUnavailable)

#: how the turn's memories were obtained
RECALLED, GUARDED, FALLBACK = "recall", "guard", "fallback"


@dataclass(frozen=True)
class Turn:
    """One turn: the message, the prompt the LLM saw, its reply, and what memlab did.

    ``source``: ``recall`` (memories recalled now), ``guard`` (the injection guard skipped
    recall) or ``fallback`` (recall failed: ``recall_error``; the last safe memories were used).
    ``recall``: the memories in the prompt (for a fallback, the last safe ones), ``None`` never.
    ``interaction``: what store_interaction did (None when the write was refused:
    ``write_refused`` says why). ``feedback``: the usage signals. ``timings``: seconds per step."""

    index: int
    user_message: str
    prompt: str
    reply: str
    source: str
    recall: RecallResult
    interaction: InteractionResult | None
    feedback: FeedbackReport | None
    recall_error: str = ""
    write_refused: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def memories(self) -> list[str]:
        """The texts of the memories in the prompt."""
        return self.recall.texts

    def to_dict(self) -> dict[str, Any]:
        """Plain fields for a table or JSON (one transcript row)."""
        out: dict[str, Any] = {
            "turn": self.index, "user_message": self.user_message, "reply": self.reply,
            "source": self.source, "memories": self.memories,
            "memory_ids": self.recall.ids, "why_none": self.recall.empty_reason,
            "recall_error": self.recall_error, "write_refused": self.write_refused,
            "stored": None if self.interaction is None else self.interaction.stored,
            "stored_id": None if self.interaction is None else self.interaction.id,
            "layer": None if self.interaction is None else self.interaction.layer,
            "importance": None if self.interaction is None else self.interaction.importance,
            "feedback": [] if self.feedback is None else
            [(s.memory_id, s.kind, s.weight, s.counted) for s in self.feedback.signals],
            "prompt_chars": len(self.prompt)}
        out.update({f"{k}_s": v for k, v in self.timings.items()})
        return out


class ChatSession:
    """A conversation over a :class:`MemoryStore` with an injected LLM (see the module docstring).

    ``agent_id`` / ``user_id``: the owner of the memories (None: the store's defaults).
    ``turns``: every turn so far; ``stats``: turns, guard skips, recall fallbacks, refused
    writes."""

    def __init__(self, store: MemoryStore, *, llm: LLM | Callable[[str], str],
                 agent_id: str | None = None, user_id: str | None = None) -> None:
        if not isinstance(store, MemoryStore):
            raise InvalidInput("store", "must be a MemoryStore (memlab.open_store)",
                               type(store).__name__)
        self.store = store
        self.llm = as_llm(llm)
        self.agent_id = agent_id
        self.user_id = user_id
        self.turns: list[Turn] = []
        self.stats: Counter[str] = Counter()
        self._last_safe: tuple[MemoryRecord, ...] = ()
        self._fallback_logged = False

    @property
    def last_safe_memories(self) -> list[str]:
        """The texts a failed recall falls back on (the last recall's, fuzzed ones left out)."""
        return [m.text for m in self._last_safe]

    def send(self, user_message: str, *, emotion: Any = None, confirmed=(), rejected=(),
             clock: Clock | None = None) -> Turn:
        """Run one turn for ``user_message`` and return it (see the module docstring).
        ``emotion``: passed to store_interaction (an intensity in [0, 1] or an emotion vector).
        ``confirmed`` / ``rejected``: memory ids the user confirmed or rejected this turn.
        ``clock``: the time of the turn (default: the store's clock)."""
        st, cfg = self.store, self.store.config.chat
        owner = {"agent_id": self.agent_id, "user_id": self.user_id}
        timings: dict[str, float] = {}
        t = time.perf_counter()
        source, error = RECALLED, ""
        try:
            result = st.guarded_recall(user_message, clock=clock, **owner)
        except RECALL_ERRORS as exc:
            result, source, error = self._fallback(user_message, exc), FALLBACK, \
                f"{type(exc).__name__}: {exc}"
        else:
            if not guard_user_message(user_message, st.config.safety).allowed:
                source = GUARDED
                self.stats["recall skipped: injection guard"] += 1
            else:
                fuzzed = {s.memory_id for s in result.swaps}
                self._last_safe = tuple(m for m in result.memories if m.id not in fuzzed)
        timings["recall"] = time.perf_counter() - t

        block = result.to_prompt()
        prompt = (cfg.prompt_template.format(system_prompt=cfg.system_prompt, memories=block,
                                             user_message=user_message) if block else
                  cfg.prompt_template_no_memories.format(system_prompt=cfg.system_prompt,
                                                         user_message=user_message))
        t = time.perf_counter()
        reply = self.llm.complete(prompt)
        timings["llm"] = time.perf_counter() - t

        t = time.perf_counter()
        interaction, refused = None, ""
        try:
            interaction = st.store_interaction(user_message, reply, emotion=emotion, clock=clock,
                                               **owner)
        except UnsafeWrite as exc:     # audited by the store; the reply still stands
            refused = str(exc)
            self.stats["write refused: safety"] += 1
        timings["store"] = time.perf_counter() - t

        t = time.perf_counter()
        report = None
        if result.ids or confirmed or rejected:
            report = st.feedback(result, reply=reply, confirmed=confirmed, rejected=rejected,
                                 clock=clock, **owner)
        timings["feedback"] = time.perf_counter() - t

        turn = Turn(len(self.turns), user_message, prompt, reply, source, result, interaction,
                    report, recall_error=error, write_refused=refused, timings=timings)
        self.turns.append(turn)
        self.stats["turns"] += 1
        return turn

    def _fallback(self, user_message: str, exc: Exception) -> RecallResult:
        """The last safe memories as this turn's recall result; logged once, counted."""
        self.stats["recall failed: last safe memories"] += 1
        if not self._fallback_logged:
            log.warning("memlab chat: recall failed (%s: %s); using the last %d safe memories",
                        type(exc).__name__, exc, len(self._last_safe))
            self._fallback_logged = True
        c = self.store.config
        return RecallResult(user_message, self._last_safe, {},
                            c.selection.prompt_max_items,
                            "" if self._last_safe else
                            f"recall failed ({type(exc).__name__}) and no safe memories yet",
                            notes=(f"recall failed: {type(exc).__name__}: {exc}; "
                                   "the last safe memories",),
                            untrusted_label=c.safety.untrusted_label,
                            past_label=c.facts.past_label)

    def to_frame(self) -> pd.DataFrame:
        """The transcript: one row per turn (:meth:`Turn.to_dict`)."""
        rows = [t.to_dict() for t in self.turns]
        return pd.DataFrame(rows) if rows else pd.DataFrame(
            columns=["turn", "user_message", "reply", "source", "memories"])

    def frame(self) -> pd.DataFrame:
        """Retired: :meth:`to_frame`."""
        from memlab.frames import renamed

        renamed("ChatSession.frame()", "ChatSession.to_frame()")
        return self.to_frame()


#: the steps of a turn timed in ``Turn.timings``, in the order a turn runs them
STEPS = ("recall", "llm", "store", "feedback")


def turns_plot(session: "ChatSession | pd.DataFrame", *, ax=None):
    """Where each turn's time went: one bar per turn (first at the top), stacked by step
    (recall, llm, store, feedback; milliseconds), labelled with its number and how its memories
    were obtained, and at its end how many memories were injected and what was stored (or that
    the write was refused). Messages are not drawn (the transcript has them; a Chinese message
    needs a CJK font that matplotlib may not have). ``session``: a :class:`ChatSession` or its :meth:`~ChatSession.to_frame`.
    Returns the matplotlib Figure (``ax=``: drawn there); re-exported as
    ``memlab.plots.chat_turns``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    frame = session.to_frame() if isinstance(session, ChatSession) else session
    if not isinstance(frame, pd.DataFrame) or "turn" not in frame.columns:
        raise InvalidInput("session", "a ChatSession or its to_frame()", type(session).__name__)
    if ax is None:
        fig = Figure(figsize=(8.0, max(2.2, 0.55 * len(frame) + 1.2)), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    fig = ax.figure
    y = list(range(len(frame)))[::-1]
    left = [0.0] * len(frame)
    for step in STEPS:
        col = f"{step}_s"
        if col not in frame.columns:
            continue
        ms = [1000.0 * float(v) if pd.notna(v) else 0.0 for v in frame[col]]
        ax.barh(y, ms, left=left, height=0.6, label=step)
        left = [a + b for a, b in zip(left, ms)]
    for yi, total, (_, row) in zip(y, left, frame.iterrows()):
        if row.get("write_refused"):
            what = "write refused"
        elif row.get("stored"):
            what = f"stored ({row.get('layer')})"
        else:
            what = "not stored"
        n = len(row["memories"])
        ax.text(total, yi, f"  {n} {'memory' if n == 1 else 'memories'}; {what}", va="center",
                fontsize="small")
    labels = [f"turn {int(r['turn'])}: {r['source']}" for _, r in frame.iterrows()]
    ax.set_yticks(y, labels, fontsize="small")
    ax.set_xlim(0, max(left + [1e-3]) * 1.6)
    ax.set_xlabel("milliseconds")
    ax.set_title(f"chat session ({len(frame)} turns): milliseconds per step")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), fontsize="small",
              ncol=len(STEPS), frameon=False)
    return fig

"""The autonomy gate of ``store_interaction`` (§5 ``_should_remember``): is this exchange worth
remembering at all? A rule version and an LLM version, chosen by ``gate.mode``; the switch
``gate.autonomous`` turns autonomous memory off altogether.

The gate decides *whether*; importance and layer routing (:mod:`memlab.write.layers`) decide *where*.

Rule gate (memlab's rule; §5 names the gate without its rules): an exchange is not remembered when
the user's message, without whitespace and punctuation, is shorter than ``gate.min_chars``, or is
only an acknowledgement from ``gate.trivial_messages`` ("ok", "好的", "谢谢", ...) and the exchange
did not score above ``layers.long_term_threshold`` (a strongly felt "好" is kept).

LLM gate: ``gate.llm_prompt`` is sent to the LLM (:mod:`memlab.llm`); its reply is read as JSON
``{"remember": true|false, "reason": ...}`` (also inside a ```json fence) or as a leading yes/no
(是/否, 要/不). A reply that says neither, or an LLM that fails (:class:`~memlab.errors.LLMError`),
falls back to the rule gate: a documented degradation, logged once and counted by the store
(``stats``), and the decision says ``by="rule (llm fallback)"``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

from memlab.config import MemlabConfig
from memlab.errors import ConfigError, LLMError
from memlab.llm import LLM

#: what the store does with a degradation: (what happened) -> the message (logged once, counted)
Degraded = Callable[[str], str]

#: the degradations the LLM gate reports (keys of the store's stats, after "degraded: ")
LLM_MALFORMED = "LLM gate reply unreadable; the rule gate decided"
LLM_FAILED = "LLM gate failed (LLMError); the rule gate decided"

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_YES = re.compile(r"^(?:(?:yes|y|true|remember)(?![a-z])|是|要|对|值得|需要|记)", re.I)
_NO = re.compile(r"^(?:(?:no|n|false|not|don't|do not)(?![a-z])|不|否|无需|别)", re.I)


@dataclass(frozen=True)
class GateDecision:
    """``remember``; ``by``: "rule", "llm", "rule (llm fallback)" or "switch" (autonomy off);
    ``reason``: why, in words (the LLM's own reason when it gave one)."""

    remember: bool
    by: str
    reason: str


def _bare(text: str) -> str:
    """Lower-cased, without whitespace, punctuation and symbols (Unicode categories Z*, P*, S*)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text).lower()
                   if unicodedata.category(ch)[0] not in "ZPS" and not ch.isspace())


def rule_gate(user_message: str, assistant_reply: str, *, importance: float,
              cfg: MemlabConfig) -> GateDecision:
    """The rule gate (module docstring)."""
    g = cfg.gate
    bare = _bare(user_message)
    if len(bare) < g.min_chars:
        return GateDecision(False, "rule", f"user message has {len(bare)} characters without "
                            f"whitespace and punctuation (< gate.min_chars = {g.min_chars})")
    trivial = {_bare(t) for t in g.trivial_messages}
    if bare in trivial and importance <= cfg.layers.long_term_threshold:
        return GateDecision(False, "rule", "an acknowledgement (gate.trivial_messages) that does "
                            f"not score above layers.long_term_threshold "
                            f"({importance:.3g} <= {cfg.layers.long_term_threshold})")
    return GateDecision(True, "rule", "has content (gate.min_chars, not a trivial message)")


def parse_remember(reply: str) -> tuple[bool, str] | None:
    """(remember, reason) from an LLM gate reply, or None when it says neither."""
    text = reply.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return None
        value = data.get("remember") if isinstance(data, dict) else None
        if isinstance(value, bool):
            reason = data.get("reason")
            return value, reason if isinstance(reason, str) and reason else "the LLM said so"
        return None
    if _YES.match(text):
        return True, text[:200]
    if _NO.match(text):
        return False, text[:200]
    return None


def llm_gate(user_message: str, assistant_reply: str, *, importance: float, cfg: MemlabConfig,
             llm: LLM, degraded: Degraded) -> GateDecision:
    """The LLM gate (module docstring); falls back to :func:`rule_gate`."""
    prompt = cfg.gate.llm_prompt.format(user_message=user_message,
                                        assistant_reply=assistant_reply)
    try:
        reply = llm.complete(prompt)
    except LLMError as exc:
        degraded(LLM_FAILED)
        note = str(exc)
    else:
        parsed = parse_remember(reply)
        if parsed is not None:
            return GateDecision(parsed[0], "llm", parsed[1])
        degraded(LLM_MALFORMED)
        note = f"reply neither JSON {{\"remember\": bool}} nor yes/no: {reply[:120]!r}"
    rule = rule_gate(user_message, assistant_reply, importance=importance, cfg=cfg)
    return GateDecision(rule.remember, "rule (llm fallback)", f"{rule.reason}; LLM: {note}")


def decide(user_message: str, assistant_reply: str, *, importance: float, cfg: MemlabConfig,
           llm: LLM | None, degraded: Degraded) -> GateDecision:
    """The gate of ``cfg.gate``: the autonomy switch, then the rule or LLM version. ``llm`` is
    required in llm mode (ConfigError naming gate.mode otherwise)."""
    if not cfg.gate.autonomous:
        return GateDecision(False, "switch", "autonomous memory is off (gate.autonomous)")
    if cfg.gate.mode == "llm":
        if llm is None:
            raise ConfigError("gate.mode", "llm needs an LLM: open_store(..., llm=...) or "
                              "store_interaction(..., llm=...)", "llm")
        return llm_gate(user_message, assistant_reply, importance=importance, cfg=cfg, llm=llm,
                        degraded=degraded)
    return rule_gate(user_message, assistant_reply, importance=importance, cfg=cfg)

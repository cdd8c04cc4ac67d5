"""Familiars' MemoryWriter deciders (§5.7.1): a rule writer (the default) and an LLM writer.

Both turn a user message (and the conversation so far) into :class:`~memlab.write.familiars.
WriterOutput`, which :func:`~memlab.write.familiars.apply_writes` stores.

- :func:`rule_writer`: the patterns of ``writer.rules`` (zh and en: 我叫X / my name is X ->
  user/profile; 我喜欢/讨厌X, I like/hate X -> user/preference; 记得X / remember to X ->
  dialogue/directive), tried in order on the user message; each matching rule gives one ``add``
  with the rule's content template filled from the match, its tag and salience, and the message
  as ``source_quote``. The same (cell, content) twice is written once. No match: no writes. The
  history is not read (a rule sees one message).
- :class:`LLMWriter`: ``writer.llm_prompt`` filled with the message, the history and the valid
  cells, sent through :class:`memlab.llm.LLM`; the reply must be WriterOutput JSON (optionally in
  a ```json fence). A reply that is not is an error (:class:`~memlab.errors.LLMError` naming what
  was wrong, with the reply's start), counted in ``stats``; nothing is made up in its place.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any, Sequence

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, LLMError
from memlab.llm import LLM, as_llm
from memlab.types import VALID_CELLS
from memlab.write.familiars import WriterOutput, parse_writer_output

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S | re.I)
_STRIP = " \t\r\n\"'“”‘’「」『』《》.。!！?？,，;；:：、"
#: the LLMWriter stats keys
CALLS, UNREADABLE, FAILED = "writer: llm calls", "writer: unreadable replies", "writer: llm errors"


@functools.lru_cache(maxsize=16)
def _compiled(rules: tuple[str, ...]) -> tuple[tuple[str, str, str, float, str, re.Pattern], ...]:
    out = []
    for rule in rules:
        cell, tag, salience, template, regex = rule.split("|", 4)
        scope, category = cell.split("/", 1)
        out.append((scope, category, tag, float(salience), template,
                    re.compile(regex, re.IGNORECASE)))
    return tuple(out)


def rule_writer(user_message: str, *, history: Sequence[str] = (),
                cfg: MemlabConfig | None = None) -> WriterOutput:
    """The rule writer (module docstring): WriterOutput of the rules of ``writer.rules`` that
    match ``user_message``."""
    cfg = cfg or MemlabConfig()
    if not isinstance(user_message, str):
        raise InvalidInput("user_message", "must be a string", type(user_message).__name__)
    writes, seen = [], set()
    for scope, category, tag, salience, template, rx in _compiled(tuple(cfg.writer.rules)):
        for m in rx.finditer(user_message):
            groups = {k: (v or "").strip(_STRIP) for k, v in m.groupdict().items()}
            if not all(groups.values()):
                continue
            content = template.format(**groups)
            if (scope, category, content) in seen:
                continue
            seen.add((scope, category, content))
            writes.append({"op": "add", "scope": scope, "category": category,
                           "entry": {"content": content, "tags": [tag], "salience": salience,
                                     "epistemic_status": "asserted",
                                     "source_quote": [m.group(0).strip()]}})
    return parse_writer_output({"writes": writes}, cfg=cfg)


def writer_prompt(user_message: str, history: Sequence[str], cfg: MemlabConfig) -> str:
    """``writer.llm_prompt`` filled in (history one line per turn, '(none)' when empty)."""
    cells = ", ".join(f"{s}/{c}" for s, c in sorted(VALID_CELLS))
    return cfg.writer.llm_prompt.format(user_message=user_message,
                                        history="\n".join(history) or "(none)",
                                        valid_cells=cells)


def parse_reply(reply: str, *, cfg: MemlabConfig) -> WriterOutput:
    """WriterOutput from an LLM reply (a ```json fence allowed); LLMError naming what is wrong
    (not JSON, or the first rule it breaks) otherwise."""
    text = reply.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1)
    try:
        return parse_writer_output(text, cfg=cfg)
    except InvalidInput as exc:
        raise LLMError(f"the writer LLM's reply is not valid WriterOutput JSON (familiars "
                       f"§5.7.2): {exc}; reply: {reply[:200]!r}") from None


class LLMWriter:
    """The LLM writer (module docstring). ``stats`` counts calls, errors and unreadable replies.

    ``LLMWriter(llm, cfg=cfg)(user_message, history=[...]) -> WriterOutput``."""

    def __init__(self, llm: LLM | Any, *, cfg: MemlabConfig | None = None) -> None:
        self.llm = as_llm(llm)
        self.cfg = cfg or MemlabConfig()
        self.stats: Counter[str] = Counter()

    def __call__(self, user_message: str, *, history: Sequence[str] = ()) -> WriterOutput:
        if not isinstance(user_message, str) or not user_message.strip():
            raise InvalidInput("user_message", "must be a non-empty string", user_message)
        self.stats[CALLS] += 1
        try:
            reply = self.llm.complete(writer_prompt(user_message, list(history), self.cfg))
        except LLMError:
            self.stats[FAILED] += 1
            raise
        try:
            return parse_reply(reply, cfg=self.cfg)
        except LLMError:
            self.stats[UNREADABLE] += 1
            raise


def make_writer(cfg: MemlabConfig, *, llm: LLM | Any = None):
    """The writer ``writer.mode`` names: ``(user_message, *, history=()) -> WriterOutput``.
    llm mode needs an ``llm`` (InvalidInput naming writer.mode otherwise)."""
    if cfg.writer.mode == "llm":
        if llm is None:
            raise InvalidInput("writer.mode", "'llm' needs an LLM (memlab.llm)", "llm")
        return LLMWriter(llm, cfg=cfg)
    return functools.partial(rule_writer, cfg=cfg)


__all__ = ["LLMWriter", "make_writer", "parse_reply", "rule_writer", "writer_prompt"]

"""What recall() returns: the selected memories, why they won, and the prompt block."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence

import pandas as pd

from memlab.frames import renamed
from memlab.recall.inject import render_prompt_block
from memlab.types import UNTRUSTED_WEB, MemoryRecord


@dataclass(frozen=True)
class RecallResult:
    """Selected memories, best first, with their score components.

    ``to_frame()`` has one row per memory: rank, id, text, score and every component of the
    formula (``explain``: the same columns as arrays). ``frame`` is its retired spelling (a
    DeprecationWarning).
    ``empty_reason`` says why nothing came back (nothing stored, nothing relevant, the injection
    guard). ``notes`` lists degradations (e.g. the embedder was unavailable: lexical recall only).
    ``untrusted_label`` (``safety.untrusted_label``) prefixes the memories whose ``source_type``
    is ``untrusted_web`` in the prompt block: web content is never one of its facts (§12).
    ``past_label`` (``facts.past_label``) prefixes a superseded fact revision (a historical
    question sees them, ``facts.historical_sees_superseded``): a past state, not the current one.
    ``swaps``: the entities fuzzy recall misremembered in these texts (:mod:`memlab.recall.fuzzy`;
    the store holds the true texts).
    """

    query: str
    memories: tuple[MemoryRecord, ...]
    explain: Mapping[str, Any] | pd.DataFrame
    prompt_max_items: int = 20
    empty_reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    untrusted_label: str = ""
    swaps: tuple[Any, ...] = field(default_factory=tuple)
    past_label: str = ""

    def __len__(self) -> int:
        return len(self.memories)

    @cached_property
    def _table(self) -> pd.DataFrame:
        if isinstance(self.explain, pd.DataFrame):
            return self.explain
        return pd.DataFrame(self.explain)

    @property
    def frame(self) -> pd.DataFrame:
        """Retired: :meth:`to_frame`."""
        renamed("RecallResult.frame", "RecallResult.to_frame()")
        return self._table

    def __iter__(self):
        return iter(self.memories)

    def __getitem__(self, i: int) -> MemoryRecord:
        return self.memories[i]

    @property
    def texts(self) -> list[str]:
        return [m.text for m in self.memories]

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.memories]

    def to_frame(self) -> pd.DataFrame:
        """One row per memory: rank, id, text, score and every component (a copy)."""
        return self._table.copy()

    def to_prompt(self) -> str:
        """The §10 block (empty string when nothing was recalled)."""
        texts = [(self.untrusted_label if m.source_type == UNTRUSTED_WEB else "")
                 + (self.past_label if m.lifecycle_state == "superseded" else "") + m.text
                 for m in self.memories]
        return render_prompt_block(texts, max_items=self.prompt_max_items)

    def _repr_html_(self) -> str:  # Jupyter
        if not self.memories:
            return f"<p>no memories: {self.empty_reason}</p>"
        return self._table._repr_html_()

    def __str__(self) -> str:
        if not self.memories:
            return f"(no memories: {self.empty_reason})"
        lines = [f"{r.rank:>2}. [{r.score:.3f}] {r.text}" for r in self._table.itertuples()]
        return "\n".join(lines)


def explain_columns(components: Sequence[str]) -> list[str]:
    return ["rank", "id", "text", "score", *components]

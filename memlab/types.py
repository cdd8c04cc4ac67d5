"""Frozen records that flow through memlab: memories, queries and scored results."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

import numpy as np

RETENTION_LAYERS = ("permanent", "long_term", "short_term")
COGNITIVE_LAYERS = ("episodic", "semantic", "procedural")
LIFECYCLE_STATES = ("active", "expired", "superseded")
#: pending: no vector yet for the store's embedder; ready: embedded (embedding_model_version);
#: none: that embedder gives this text no vector (e.g. the hashing embedder on a text without
#: terms: only emoji, punctuation or an unindexed script) - lexical routes only, not pending for
#: that version (another embedder version embeds it).
EMBEDDING_STATUSES = ("pending", "ready", "none")
EPISTEMIC_STATUSES = ("asserted", "inferred", "speculative")
#: source_type of content from the web: stored as speculative, never permanent, pinned or a fact
#: revision, and labelled unverified in the prompt block (memlab.safety.screen, Reverie §12)
UNTRUSTED_WEB = "untrusted_web"

#: integer codes of the layers in the raw-signal table and the in-process indexes
LAYER_CODES = {"permanent": 0, "long_term": 1, "short_term": 2}
COGNITIVE_CODES = {"episodic": 0, "semantic": 1, "procedural": 2}

# Familiars' scope x category matrix (familiars §5.2).
SCOPES = ("user", "identity", "dialogue", "ephemeral")
CATEGORIES = ("profile", "preference", "relation", "knowledge", "event", "state", "procedure",
              "directive")
VALID_CELLS = frozenset({
    ("user", "profile"), ("user", "preference"), ("user", "relation"), ("user", "knowledge"),
    ("user", "event"),
    ("identity", "preference"), ("identity", "procedure"), ("identity", "directive"),
    ("dialogue", "preference"), ("dialogue", "relation"), ("dialogue", "knowledge"),
    ("dialogue", "event"), ("dialogue", "state"), ("dialogue", "directive"),
    ("ephemeral", "state"), ("ephemeral", "directive"),
})


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One memory: every Reverie column (§6.1) and every Familiars field (§5.3.2), one truth.

    Times are Unix seconds (UTC). ``emotions`` maps an emotion name to an intensity on
    [0, fusion.emotion_scale] (Reverie's 8-dimensional vector; §9.1 divides by 100).
    """

    id: str
    text: str
    agent_id: str = "agent_0"
    user_id: str = "user_0"
    retention_layer: str = "short_term"
    cognitive_layer: str = "semantic"
    timestamp: float = 0.0
    event_time: float | None = None
    importance: float = 0.5
    emotions: Mapping[str, float] = field(default_factory=dict)
    keywords: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    embedding_model_version: str = ""
    embedding_status: str = "pending"
    last_accessed: float | None = None
    access_count: int = 0
    mention_count: int = 1
    fact_key: str = ""
    fact_revision: int = 1
    lifecycle_state: str = "active"
    source_type: str = "local_interaction"
    source_uri: str = ""
    source_hash: str = ""
    # Familiars
    scope: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    ttl: Mapping[str, Any] | None = None
    supersedes: str | None = None
    deprecated: bool = False
    evidence: Mapping[str, Any] | None = None
    epistemic_status: str = "asserted"
    pinned: bool = False
    derived_from: tuple[str, ...] = ()
    source_quote: tuple[str, ...] = ()
    dialogue_id: str | None = None
    schema_version: int = 2
    # replay provenance
    speaker: str = ""
    session_id: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_permanent(self) -> bool:
        return self.retention_layer == "permanent"


class TermSets(Protocol):
    """The term sets (``memory_terms``) of the candidates whose signals were fetched, by position.

    ``overlap(query_terms, idx)`` counts the distinct query terms in each set ``idx`` points at
    (the ``lexical`` signal's numerator); ``ts[i]`` is one set (dedup in selection).
    """

    def __len__(self) -> int: ...

    def __getitem__(self, i: int) -> frozenset[str]: ...

    def overlap(self, query_terms: Collection[str], idx: np.ndarray) -> np.ndarray: ...


class ListTermSets:
    """:class:`TermSets` from lists of terms (what the SQL path reads): frozensets built once."""

    def __init__(self, lists: Sequence[Sequence[str]]) -> None:
        self._sets = [frozenset(t) for t in lists]

    def __len__(self) -> int:
        return len(self._sets)

    def __getitem__(self, i: int) -> frozenset[str]:
        return self._sets[i]

    def __iter__(self) -> Iterator[frozenset[str]]:
        return iter(self._sets)

    def overlap(self, query_terms: Collection[str], idx: np.ndarray) -> np.ndarray:
        q = frozenset(query_terms)
        sets = self._sets
        return np.fromiter((len(q & sets[i]) for i in np.asarray(idx).tolist()), np.int64,
                           count=len(idx))

"""Conversation compression (reverie §11.5, after HypaMemory V3): old chat turns summarised chunk by
chunk, stored as memories of their own kind, recalled by importance filter + similarity + recency.

- **Chunks**: of a conversation's turns (oldest first), the newest ``compression.keep_recent_turns``
  stay verbatim; the older ones are cut into chunks of ``compression.chunk_turns`` consecutive
  turns, and only full chunks are compressed (a partial one waits for more turns). A chunk is known
  by the hash of its turns (``source_hash``): compressing the same history again adds nothing.
- **Summariser**: any ``(turns) -> str``. The default, :func:`extractive_summary`, keeps the
  ``compression.summary_sentences`` most central sentences of the chunk (those whose terms recur
  most across it, plus one point per importance marker, §5) in their original order, within
  ``compression.summary_max_chars``; it works on Chinese and English alike (the terms are
  :func:`~memlab.text.memory_terms`). :func:`llm_summariser` wraps a plain ``(prompt) -> str``
  callable (an LLM; memlab's LLM protocol is being built, any callable works) with the
  ``compression.prompt`` template; an empty answer is an error, never replaced by a made-up one.
- **Stored** as memories through the store's write path (``MemoryStore.add_many``): ``source_type``
  ``"conversation_summary"`` (the kind), tag ``summary``, episodic, importance scored by §5 over
  the chunk's text (the write path routes it to a layer by that importance), ``timestamp`` the chunk's last turn, ``event_time`` its first, ``meta`` the
  chunk's turn range and count, ``derived_from`` the turns' ids when they have them. They are
  memories: the ordinary ``recall`` finds them too (as it finds any memory).
- **Recall** (:func:`recall_summaries`): the owner's active summaries with importance >=
  ``compression.min_importance``, scored ``similarity_weight * cosine(query, summary) +
  recency_weight * 0.5 ** (age / recency_half_life_days)``, the best ``compression.k``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memlab.clock import to_unix
from memlab.config import MemlabConfig
from memlab.errors import EmbeddingUnavailable, InvalidInput
from memlab.inputs import check_text
from memlab.store import Store
from memlab.text import memory_terms
from memlab.write.importance import score_importance

KIND = "conversation_summary"
DAY = 86_400.0
_ENDS = re.compile(r"(?<=[。！？!?；;\n])|(?<=\.)\s+")


@dataclass(frozen=True)
class ChatTurn:
    """One turn of a conversation: who spoke, what, when (Unix seconds), and its id if any."""

    speaker: str
    text: str
    timestamp: float
    id: str | None = None


@dataclass(frozen=True)
class SummaryHit:
    """A recalled summary with its score's parts."""

    id: str
    text: str
    importance: float
    timestamp: float
    similarity: float
    recency: float
    score: float


Summariser = Callable[[Sequence[ChatTurn]], str]


def as_turns(turns: Sequence[Any]) -> list[ChatTurn]:
    """Turns from ChatTurn objects or mappings ``{"speaker", "text", "timestamp", "id"?}``
    (timestamp: Unix seconds or an aware datetime), checked: InvalidInput names the turn."""
    out = []
    for i, t in enumerate(turns):
        if isinstance(t, ChatTurn):
            t = {"speaker": t.speaker, "text": t.text, "timestamp": t.timestamp, "id": t.id}
        if not isinstance(t, Mapping):
            raise InvalidInput(f"turns[{i}]", "must be a ChatTurn or a mapping with speaker, "
                               "text, timestamp", t)
        unknown = sorted(set(t) - {"speaker", "text", "timestamp", "id"})
        if unknown:
            raise InvalidInput(f"turns[{i}].{unknown[0]}", "unknown field", t[unknown[0]])
        text = check_text(t.get("text"), f"turns[{i}].text", max_chars=None, limit_name="")
        speaker = t.get("speaker")
        if not isinstance(speaker, str):
            raise InvalidInput(f"turns[{i}].speaker", "must be a string", speaker)
        ts = t.get("timestamp")
        if ts is None or isinstance(ts, bool):
            raise InvalidInput(f"turns[{i}].timestamp", "required: Unix seconds or an aware "
                               "datetime", ts)
        ts = to_unix(ts)
        if not math.isfinite(ts) or (out and ts < out[-1].timestamp):
            raise InvalidInput(f"turns[{i}].timestamp", "must be finite and not earlier than the "
                               "turn before (turns oldest first)", ts)
        out.append(ChatTurn(speaker, text, ts, t.get("id")))
    return out


def old_chunks(turns: Sequence[ChatTurn], *, keep_recent: int, chunk_turns: int
               ) -> list[list[ChatTurn]]:
    """The full chunks of ``chunk_turns`` turns among all but the newest ``keep_recent``."""
    old = list(turns[:max(0, len(turns) - keep_recent)])
    return [old[i:i + chunk_turns] for i in range(0, len(old) - chunk_turns + 1, chunk_turns)]


def render(chunk: Sequence[ChatTurn]) -> str:
    """The chunk as ``speaker: text`` lines."""
    return "\n".join(f"{t.speaker}: {t.text}" if t.speaker else t.text for t in chunk)


def _sentences(chunk: Sequence[ChatTurn]) -> list[tuple[str, str]]:
    out = []
    for t in chunk:
        for s in _ENDS.split(t.text):
            if s and s.strip():
                out.append((t.speaker, s.strip()))
    return out


def extractive_summary(chunk: Sequence[ChatTurn], *, cfg: MemlabConfig) -> str:
    """The ``compression.summary_sentences`` most central sentences of the chunk, in order.

    A sentence's score is the mean, over its distinct terms, of how many of the chunk's sentences
    hold that term (terms that recur across the chunk are what it is about), plus 1 per importance
    marker (``importance.markers``) in it; ties go to the earlier sentence. The kept sentences are
    written ``speaker: sentence``, one per line, cut to ``compression.summary_max_chars``."""
    c, rc = cfg.compression, cfg.recall
    sents = _sentences(chunk)
    if not sents:
        raise InvalidInput("chunk", "has no sentence to summarise", render(chunk))
    terms = [set(memory_terms(s, term_cap=rc.term_cap, text_cap=rc.text_cap)) for _, s in sents]
    df = Counter(t for ts in terms for t in ts)
    markers = [m.lower() for m in cfg.importance.markers]

    def score(i: int) -> float:
        central = sum(df[t] for t in terms[i]) / len(terms[i]) if terms[i] else 0.0
        return central + sum(1 for m in markers if m in sents[i][1].lower())

    best = sorted(range(len(sents)), key=lambda i: (-score(i), i))[:c.summary_sentences]
    text = "\n".join(f"{sp}: {s}" if sp else s for sp, s in (sents[i] for i in sorted(best)))
    return text[:c.summary_max_chars]


def llm_summariser(llm: Callable[[str], str], *, cfg: MemlabConfig) -> Summariser:
    """A summariser that asks ``llm`` (a plain ``(prompt) -> str``) with ``compression.prompt``.
    An empty or non-text answer raises InvalidInput (nothing is stored); a longer one is cut to
    ``compression.summary_max_chars``."""
    c = cfg.compression

    def summarise(chunk: Sequence[ChatTurn]) -> str:
        answer = llm(c.prompt.format(conversation=render(chunk), max_chars=c.summary_max_chars))
        if not isinstance(answer, str) or not answer.strip():
            raise InvalidInput("llm answer", "the summariser must answer a non-empty text",
                               answer)
        return answer.strip()[:c.summary_max_chars]

    return summarise


def chunk_hash(chunk: Sequence[ChatTurn]) -> str:
    data = [[t.speaker, t.text, t.timestamp] for t in chunk]
    return hashlib.sha256(json.dumps(data, ensure_ascii=False).encode("utf-8")).hexdigest()


def summary_items(store: Store, turns: Sequence[Any], *, summarise: Summariser | None = None,
                  agent_id: str, user_id: str, session_id: str = "") -> list[dict[str, Any]]:
    """The memories (``add_many`` items) summarising the chunks of ``turns`` not summarised yet
    for this owner. Reads the store (which chunks are there), writes nothing."""
    cfg = store.config
    c = cfg.compression
    summarise = summarise or (lambda chunk: extractive_summary(chunk, cfg=cfg))
    chunks = old_chunks(as_turns(turns), keep_recent=c.keep_recent_turns,
                        chunk_turns=c.chunk_turns)
    done = {r[0] for r in store.conn.execute(
        "SELECT source_hash FROM memory_records WHERE source_type = ? AND agent_id = ? AND "
        "user_id = ?", (KIND, agent_id, user_id))}
    items = []
    for chunk in chunks:
        h = chunk_hash(chunk)
        if h in done:
            continue
        text = summarise(chunk)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("summary", "the summariser must return a non-empty text", text)
        importance = score_importance(render(chunk), cfg=cfg.importance,
                                      term_cap=cfg.recall.term_cap, text_cap=cfg.recall.text_cap)
        items.append({
            "text": text, "agent_id": agent_id, "user_id": user_id, "importance": importance,
            "cognitive_layer": "episodic", "timestamp": chunk[-1].timestamp,
            "event_time": chunk[0].timestamp, "source_type": KIND, "source_hash": h,
            "tags": ("summary",), "session_id": session_id,
            "derived_from": tuple(t.id for t in chunk if t.id),
            "meta": {"turns": len(chunk), "first_turn_at": chunk[0].timestamp,
                     "last_turn_at": chunk[-1].timestamp}})
    return items


def recall_summaries(store: Store, embedder: Any, query: str, *, now: float, agent_id: str,
                     user_id: str, k: int | None = None) -> list[SummaryHit]:
    """The owner's best summaries for ``query`` at ``now`` (see the module doc), best first.

    Raises:
        EmbeddingUnavailable: no embedder (similarity needs vectors; the summaries' own vectors
            come from the embedding cache the write filled).
    """
    c = store.config.compression
    query = check_text(query, "query", max_chars=store.config.recall.max_query_chars,
                       limit_name="recall.max_query_chars")
    if embedder is None:
        raise EmbeddingUnavailable("recall_summaries needs an embedder: summaries are found by "
                                   "similarity")
    k = c.k if k is None else k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInput("k", "must be a whole number >= 1", k)
    rows = store.conn.execute(
        "SELECT id, text, importance, timestamp FROM memory_records WHERE source_type = ? AND "
        "agent_id = ? AND user_id = ? AND lifecycle_state = 'active' AND deprecated = 0 AND "
        "importance >= ? ORDER BY rowid", (KIND, agent_id, user_id, c.min_importance)).fetchall()
    if not rows:
        return []
    qv = _unit(store.embed_cached(embedder, [query], query=True))[0]
    dv = _unit(store.embed_cached(embedder, [r[1] for r in rows]))
    sim = dv @ qv
    age = np.maximum(0.0, now - np.array([r[3] for r in rows], dtype=float))
    recency = 0.5 ** (age / (c.recency_half_life_days * DAY))
    score = c.similarity_weight * sim + c.recency_weight * recency
    order = sorted(range(len(rows)), key=lambda i: (-score[i], -rows[i][3]))[:k]
    return [SummaryHit(rows[i][0], rows[i][1], float(rows[i][2]), float(rows[i][3]),
                       float(sim[i]), float(recency[i]), float(score[i])) for i in order]


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    norm = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norm, out=np.zeros_like(v), where=norm > 0)

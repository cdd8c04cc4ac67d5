"""Reverie's model-free importance scorer (§5, ``_score_importance``).

A pure function: the association count (how many existing memories resemble the message, ⑤) is an
input, looked up by the write pipeline through the store's recall; nothing here touches I/O. Layer
routing and budget pressure: :mod:`memlab.write.layers`.
"""

from __future__ import annotations

from collections import Counter

from memlab.config import ImportanceConfig
from memlab.text import memory_terms


def score_importance(user_message: str, assistant_reply: str = "", *, emotion_intensity: float = 0.0,
                     associated: int = 0, cfg: ImportanceConfig, term_cap: int = 80,
                     text_cap: int = 8192) -> float:
    """Importance in [floor, 1] from emotion, markers, repetition, length and association (§5 ①-⑥)."""
    combined = f"{user_message}\n{assistant_reply}"
    lowered = combined.lower()
    score = min(max(float(emotion_intensity), 0.0), 1.0)                               # ①
    hits = sum(1 for m in cfg.markers if m.lower() in lowered or m in combined)
    if hits:
        score = max(score, min(cfg.marker_cap, cfg.marker_base + hits * cfg.marker_step))  # ②
    # ③ repeated terms: §5 splits the text into terms (with repeats) and keeps those of >= 2 chars
    tokens = [t for t in _terms_with_repeats(combined, text_cap) if len(t) >= 2]
    repeated = [t for t, c in Counter(tokens).items() if c >= 2]
    if repeated:
        score = max(score, min(cfg.repeat_cap, cfg.repeat_base + cfg.repeat_step * len(repeated)))
    if len(user_message.strip()) >= cfg.long_message_chars:                           # ④
        score = max(score, cfg.long_message_score)
    if associated > 0:                                                                # ⑤
        score = max(score, min(cfg.association_cap,
                               cfg.association_base + cfg.association_step * associated))
    return max(cfg.floor, min(score, 1.0))                                            # ⑥


def _terms_with_repeats(text: str, text_cap: int) -> list[str]:
    """memory_terms without the dedup, one call per line/sentence, so repeats across them count."""
    import re

    out: list[str] = []
    for part in re.split(r"[\n。！？!?.;；,，]", text[:text_cap]):
        out.extend(memory_terms(part, term_cap=10**6, text_cap=text_cap))
    return out

"""Windows of a long text (issue 21, ``chunk.*``): pure functions, no model.

A memory whose text is long is split into overlapping windows, each embedded on its own at write
time; recall's ``chunk_max`` column is the query's best cosine over them (a turn's max similarity
over its parts, beside the whole text's: one matching passage of a long turn is not diluted by the
rest of it).

Units: a CJK character (Han, kana, Hangul) is one unit, a run of other non-space characters (an
English word with its punctuation) another. A text whose units are at least half CJK is sized in
characters (``chunk.chars``, ``chunk.min_chars``), else in words (``chunk.words``,
``chunk.min_words``). A text with more units than its minimum is split into windows of ``size``
units starting every ``stride = max(1, round(size * (1 - overlap)))`` units, the last window
ending at the text's last unit; more than ``chunk.max_windows`` windows become that many, their
starts spread evenly (rounded) from the first unit to ``units - size``. A window's text is the
original text from its first unit's start to its last unit's end (spaces and punctuation kept).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from memlab.config import ChunkConfig

__all__ = ["unit_spans", "sized_in_chars", "window_starts", "split", "split_many",
           "window_max"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_UNIT = re.compile(f"[{_CJK}]|[^\\s{_CJK}]+")
_CJK_ONE = re.compile(f"[{_CJK}]")


def unit_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the text's units, in order."""
    return [m.span() for m in _UNIT.finditer(text)]


def sized_in_chars(text: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether at least half of the units are CJK characters (the text is sized in
    characters)."""
    if not spans:
        return False
    cjk = sum(1 for a, b in spans if b - a == 1 and _CJK_ONE.match(text, a))
    return 2 * cjk >= len(spans)


def window_starts(n: int, size: int, overlap: float, max_windows: int) -> list[int]:
    """First units of the windows of a text of ``n`` units (see the module docstring); [] when
    the text fits one window."""
    if n <= size:
        return []
    stride = max(1, round(size * (1.0 - overlap)))
    last = n - size
    starts = list(range(0, last + 1, stride))
    if starts[-1] != last:
        starts.append(last)
    if len(starts) > max_windows:
        starts = sorted({int(round(x)) for x in np.linspace(0, last, max_windows)})
    return starts


def split(text: str, cfg: ChunkConfig) -> list[str]:
    """The windows of ``text`` under ``cfg`` ([]: not split, too short)."""
    spans = unit_spans(text)
    zh = sized_in_chars(text, spans)
    size, least = (cfg.chars, cfg.min_chars) if zh else (cfg.words, cfg.min_words)
    if len(spans) <= least:
        return []
    return [text[spans[s][0]:spans[s + size - 1][1]]
            for s in window_starts(len(spans), size, cfg.overlap, cfg.max_windows)]


def split_many(texts: Sequence[str], cfg: ChunkConfig) -> tuple[list[str], np.ndarray]:
    """(every window of every text, in order; the windows each text has) — the flat list a
    writer embeds in one batch."""
    parts = [split(t, cfg) for t in texts]
    return [w for p in parts for w in p], np.array([len(p) for p in parts], np.int64)


def window_max(query: np.ndarray, owner: np.ndarray, vectors: np.ndarray, n: int) -> np.ndarray:
    """Per owner 0..n-1: the largest ``vectors @ query`` over the windows it owns (``owner``:
    each window's owner), NaN for an owner without a window. ``vectors``: unit rows."""
    out = np.full(n, -np.inf)
    if len(owner):
        np.maximum.at(out, np.asarray(owner, np.int64),
                      np.asarray(vectors, np.float32) @ np.asarray(query, np.float32))
    out[np.isneginf(out)] = np.nan
    return out

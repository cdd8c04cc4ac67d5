"""The embedder protocol: documents and queries are embedded separately; texts are cut to the
model's maximum tokens (:class:`TokenBudget`)."""

from __future__ import annotations

import hashlib
import logging
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from memlab.errors import InvalidInput


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``version`` names the model exactly (backend, model, variant, and how long texts are cut):
    vectors of two versions never mix in one index, and the embedding cache is keyed by it.

    Model embedders also expose ``max_tokens`` and ``truncated`` (texts cut to fit so far; see
    :class:`TokenBudget`); a text with no vector comes back as an all-zero row.
    """

    name: str
    version: str
    dim: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, one row per text, for memories."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, one row per text, for questions (query prefix or instruction)."""


def normalise(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInput("texts", "pass a sequence of strings, not one string", texts)
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InvalidInput(f"texts[{i}]", "must be a string", type(t).__name__)
    return out


def text_hash(text: str) -> str:
    """sha256 of the exact text embedded (the embedding-cache key)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


log = logging.getLogger("memlab")

#: A token is at least one UTF-8 byte: a text of at most max_tokens - this many bytes fits
#: whatever the prefix or instruction (<= 14 bytes' worth of tokens) and special tokens add.
_FITS_MARGIN = 16


def longest_prefix(text: str, max_tokens: int, count: Callable[[str], int]) -> str | None:
    """None when ``text`` fits (``count(text) <= max_tokens``); else a prefix that fits.

    Exponential probing, then bisection over character prefixes: O(log n) calls of ``count`` on
    prefixes at most twice as long as the answer, never on the whole of a long text. The answer
    is the longest fitting prefix whenever token counts grow with the prefix (they do, up to the
    last word); it always fits, because only prefixes that were counted are returned.
    """
    if len(text.encode("utf-8", "surrogatepass")) + _FITS_MARGIN <= max_tokens:
        return None
    lo, hi = 0, min(len(text), max_tokens)
    while count(text[:hi]) <= max_tokens:
        if hi == len(text):
            return None
        lo, hi = hi, min(len(text), 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid
    return text[:lo]


class TokenBudget:
    """Cuts texts to at most ``max_tokens`` tokens as the model counts them (special tokens and
    any prefix included): the longest prefix that fits (:func:`longest_prefix`). The first cut is
    logged (once per embedder), every cut is counted in ``truncated``.

    Args:
        name: the embedder, for the log line.
        max_tokens: ``embedding.max_tokens`` or the model's own maximum.
        count: ``(text, is_query) -> tokens`` the model would read.
    """

    def __init__(self, name: str, max_tokens: int, count: Callable[[str, bool], int]) -> None:
        self.name, self.max_tokens, self._count = name, int(max_tokens), count
        self.truncated = 0

    def fit(self, texts: Sequence[str], is_query: bool) -> list[str]:
        out = []
        for text in texts:
            cut = longest_prefix(text, self.max_tokens, lambda s: self._count(s, is_query))
            if cut is not None:
                self.truncated += 1
                if self.truncated == 1:
                    log.warning("memlab: %s reads at most %d tokens (embedding.max_tokens): a "
                                "text of %d characters was cut to its first %d (logged once; "
                                "counted in MemoryStore.stats)", self.name, self.max_tokens,
                                len(text), len(cut))
                text = cut
            out.append(text)
        return out


EmbedderFactory = Callable[..., Embedder]

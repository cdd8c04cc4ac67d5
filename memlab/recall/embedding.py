"""The store's embedder as recall and the write pipeline use it (moved out of ``memlab.api``):
document and query vectors through the store's embedding cache, the background sample of the
zscore relevance floor, and the documented degradations (logged once per kind, counted).

:class:`EmbeddingAccess` holds one opened store's embedder (None: lexical recall only, writes
stored pending) and its counters (``MemoryStore.stats``).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Sequence

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import EmbeddingUnavailable
from memlab.recall.background import (REPLACED, Background, background_for, load_questions,
                                      load_texts, missing_cache_rows)
from memlab.store import Store
from memlab.store.cache import FreshVectors

log = logging.getLogger("memlab")

NO_QUERY_VECTOR = "lexical recall only: the embedder gives this query no vector"
#: The ``MemoryStore.stats`` key counting texts the embedder cut to ``embedding.max_tokens``.
TRUNCATED = "truncated: texts cut to embedding.max_tokens"


class EmbeddingAccess:
    """One store's embedder, its background sample and its degradations."""

    def __init__(self, store: Store, *, config: MemlabConfig, embedder: Any,
                 embedder_error: str, stats: Counter[str]) -> None:
        self.store, self.config = store, config
        self.embedder, self.embedder_error, self.stats = embedder, embedder_error, stats
        self.bg: Background | None = None
        self.bg_cached = False   # the store's cache holds the background sample (see add)
        self.bg_pending = False  # the last write carried the sample's missing rows

    def degraded(self, what: str, *, n: int = 1) -> str:
        """Log a documented degradation once per kind and count every occurrence (``n`` here)."""
        self.stats[f"degraded: {what}"] += n
        if self.stats[f"degraded: {what}"] == n:
            log.warning("memlab degraded: %s%s", what,
                        f" ({self.embedder_error})" if self.embedder_error else "")
        return what

    def embed(self, fn, *args: Any, **kwargs: Any) -> Any:
        """Call the embedder (directly or through the store's cache); count the texts it cut to
        ``embedding.max_tokens`` (the embedder logs the first) in ``stats``."""
        before = getattr(self.embedder, "truncated", 0)
        try:
            return fn(*args, **kwargs)
        finally:
            cut = getattr(self.embedder, "truncated", 0) - before
            if cut:
                self.stats[TRUNCATED] += cut

    # -- the write side ------------------------------------------------------------------------
    def for_write(self, texts: list[str]):
        """The write pipeline's embed step: (vectors or None, vectors the cache lacks)."""
        self.bg_pending = False
        vectors, new = self.documents(texts)
        if vectors is None:
            return None, []
        bg = self.background_rows()
        self.bg_pending = bool(bg)
        return vectors, ([new] if new is not None else []) + bg

    def written(self) -> None:
        """After a committed write: the background rows it carried are cached now."""
        self.bg_cached = self.bg_cached or self.bg_pending

    def documents(self, texts: Sequence[str]):
        """(vectors, the newly embedded ones the add caches in its transaction), or (None, None):
        stored as pending."""
        if self.embedder is None:
            self.degraded("documents stored without vectors (pending)")
            return None, None
        try:
            return self.embed(self.store.lookup_cached, self.embedder, texts)
        except EmbeddingUnavailable as exc:
            self.degraded(f"embedding failed ({exc}); documents stored as pending")
            return None, None

    # -- the read side -------------------------------------------------------------------------
    def query(self, query: str, notes: list[str]) -> np.ndarray | None:
        """The query's vector (1, dim), or None (a degradation noted in ``notes``)."""
        if self.embedder is None or not self.config.recall.use_dense:
            if self.embedder is None:
                notes.append(self.degraded("lexical recall only: embedder unavailable"))
            return None
        try:
            qv = self.embed(self.embedder.embed_queries, [query])
        except EmbeddingUnavailable as exc:
            notes.append(self.degraded(f"lexical recall only: {exc}"))
            return None
        if not np.asarray(qv).any():
            notes.append(self.degraded(NO_QUERY_VECTOR))
            return None
        return qv

    def queries(self, queries: list[str], query_vectors: np.ndarray | None,
                background: Background | None) -> tuple[np.ndarray | None, Background | None]:
        """(query vectors, background) of a batch of queries (``MemoryStore.features``)."""
        if query_vectors is None and self.embedder is not None and self.config.recall.use_dense:
            try:
                query_vectors = self.embed(self.embedder.embed_queries, queries)
            except EmbeddingUnavailable as exc:
                self.degraded(f"lexical recall only: {exc}")
        if not self.config.recall.use_dense:
            query_vectors = None
        if query_vectors is not None and not np.asarray(query_vectors).any(axis=1).all():
            # build_features skips the dense route of a query without a vector
            self.degraded(NO_QUERY_VECTOR, n=int((~np.asarray(query_vectors).any(axis=1)).sum()))
        if query_vectors is not None and background is None:
            background = self.background([])
            query_vectors = None if background is None else query_vectors
        return query_vectors, background

    def background(self, notes: list[str] | None = None) -> Background | None:
        """The background sample embedded by this store's embedder (the zscore relevance floor's
        calibration, :mod:`memlab.recall.background`), kept in memory once embedded. Read through
        the store's embedding cache, never written to it here (a recall does not write): the
        store's next add caches what it lacks. None when the embedder cannot embed it: recall
        then degrades to lexical (logged once, counted, noted)."""
        if self.bg is None and self.embedder is not None:
            try:
                self._load_background()
            except EmbeddingUnavailable as exc:
                what = self.degraded(f"lexical recall only: background sample not embedded "
                                     f"({exc})")
                if notes is not None:
                    notes.append(what)
        return self.bg

    def background_rows(self) -> list[FreshVectors]:
        """The background sample's vectors the store's embedding cache lacks, for the add that
        embeds its own texts to cache in its transaction (checked once per opened store). An
        embedder that cannot embed the sample leaves it uncached: recall says so (see
        :meth:`background`), the add goes on."""
        if self.bg_cached or self.embedder is None:
            return []
        if self.bg is None:
            try:
                self._load_background()
            except EmbeddingUnavailable:
                self.bg_cached = True   # not retried at every add; recall notes it
                return []
        rc = self.config.recall
        questions = None if rc.background_calibration == "none" else load_questions(rc)
        return missing_cache_rows(self.bg, load_texts(rc), self.store.embeddings, questions)

    def _load_background(self) -> None:
        """:func:`background_for` through the store's cache, packaged vectors probed by the
        embedder itself (never the cache: it may hold another machine's vectors); a replaced
        packaged sample counted in ``stats`` (:data:`REPLACED`)."""
        self.bg = background_for(self.config.recall, version=self.embedder.version,
                                 embed=self.lookup, live=self.live)
        if self.bg.replaced:
            self.stats[REPLACED] += 1

    def live(self, texts: list[str], query: bool) -> np.ndarray:
        """The embedder's vectors of ``texts``, not through any cache."""
        fn = self.embedder.embed_queries if query else self.embedder.embed_documents
        return self.embed(fn, texts)

    def lookup(self, texts: list[str], query: bool) -> np.ndarray:
        """The embedder's vectors of ``texts`` through the store's cache, read only."""
        embedder = self.embedder
        key = embedder.version + ("|query" if query else "")
        fn = embedder.embed_queries if query else embedder.embed_documents
        return self.store.embeddings.lookup(key, texts, fn)[0]


__all__ = ["EmbeddingAccess", "NO_QUERY_VECTOR", "TRUNCATED"]

"""Untrusted web content on the write side (Reverie §12): stored apart, never a memory record.

An item whose ``source_type`` is ``untrusted_web`` passes the same validation as any other
(:func:`memlab.safety.screen_write` refuses it as permanent, pinned, with a fact key, superseding a
memory, or asserted), is scored like any other, and is then written to ``memory_web_content``
(:mod:`memlab.store.web`) in the add's transaction instead of ``memory_records``: no recall
route, layer budget, fact supersession, contradiction or pin ever sees it. Its id is
``web_<uuid4 hex>``; its layer in the pipeline's result is ``"web"``.
"""

from __future__ import annotations

import uuid
from typing import Sequence

import numpy as np

from memlab.store.cache import FreshVectors
from memlab.store.web import WebContent
from memlab.types import UNTRUSTED_WEB, MemoryRecord
from memlab.write.records import Draft

#: the layer a web item is routed to in the pipeline's result (not a retention layer)
WEB_LAYER = "web"
ID_PREFIX = "web"


def is_web(draft: Draft) -> bool:
    return draft.fields.get("source_type") == UNTRUSTED_WEB


def web_record(draft: Draft) -> MemoryRecord:
    """The record of a web item: short term (never a retention layer of its own), speculative
    (the screen set it), its given id or ``web_<uuid4 hex>``."""
    if draft.importance is None:   # the pipeline scores every draft before it routes it
        raise RuntimeError(f"{draft.where}: stored before its importance was scored")
    return MemoryRecord(id=draft.id or f"{ID_PREFIX}_{uuid.uuid4().hex}", text=draft.text,
                        retention_layer="short_term", cognitive_layer=draft.cognitive_layer,
                        timestamp=draft.timestamp, event_time=draft.event_time,
                        importance=draft.importance, emotions=draft.emotions, **draft.fields)


def store_web(store, records: Sequence[MemoryRecord], *, terms: Sequence[Sequence[str]],
              vectors: np.ndarray | None, fresh: Sequence[FreshVectors]) -> None:
    """Insert web records (inside the caller's transaction), with the newly embedded vectors
    the embedding cache lacks (``fresh``) when no memory record of the add caches them."""
    version = store.vectors.model_version if store.vectors is not None else ""
    WebContent(store.conn).add(records, terms=terms, vectors=vectors if version else None,
                               model_version=version)
    for f in fresh:
        f.write(store.embeddings)


__all__ = ["WEB_LAYER", "is_web", "store_web", "web_record"]

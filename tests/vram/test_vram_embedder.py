"""memlab's embedder as a gate client (memlab.vram.embedder): built by the gate, freed by its
unload (nothing else holds it), rebuilt at the next encode with the same vectors; what
release_models reports."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from memlab.embed import HashingEmbedder
from memlab.errors import DeviceUnavailable
from memlab.vram import embedder as vram_embedder
from memlab.vram.detect import detect_device
from memlab.vram.embedder import GatedEmbedder, default_gate, gate_embedder, release_models

TEXTS = ["我昨天去了北京", "I went to Beijing yesterday"]


def _no_gpu(index: int):
    raise DeviceUnavailable("nvml", "no GPU in this test")


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    monkeypatch.setattr(vram_embedder, "detect_device",
                        lambda cfg: detect_device(cfg, nvml_factory=_no_gpu))


def _handle(gate, model_id):
    with gate.acquire(model_id) as h:
        return weakref.ref(h)


def test_a_built_embedder_is_freed_by_release_and_rebuilt(hashing_cfg):
    gate = default_gate(hashing_cfg)
    models = gate_embedder(hashing_cfg, gate)
    emb = models.embedder
    (model_id,) = models.clients
    assert model_id == "embedder:hashing" and isinstance(emb, GatedEmbedder)
    first = emb.embed_documents(TEXTS)
    assert np.array_equal(first, HashingEmbedder().embed_documents(TEXTS))
    ref = _handle(gate, model_id)
    assert ref() is not None
    out = release_models(gate)
    assert out["unloaded"] == [model_id] and out["deferred"] == []
    gc.collect()
    assert ref() is None                    # nothing but the gate held the model
    assert not gate.snapshot()[0].resident
    assert np.array_equal(emb.embed_documents(TEXTS), first)   # rebuilt, same vectors
    assert _handle(gate, model_id)() is not None
    s = gate.trace.summary()
    assert s["loads"] == 2 and s["evictions_release"] == 1
    assert release_models(gate, ["other"])["unloaded"] == []   # only the ids asked for


def test_a_caller_held_embedder_is_not_rebuilt(hashing_cfg):
    gate = default_gate(hashing_cfg)
    inner = HashingEmbedder()
    emb = gate_embedder(hashing_cfg, gate, inner).embedder
    emb.embed_queries(TEXTS)
    release_models(gate)
    emb.embed_queries(TEXTS)
    with gate.acquire("embedder:hashing") as h:
        assert h is inner
    assert emb.version == inner.version and emb.dim == inner.dim and emb.name == "hashing"


def test_release_of_a_model_in_use_is_deferred_until_its_user_leaves(hashing_cfg):
    gate = default_gate(hashing_cfg)
    gate_embedder(hashing_cfg, gate, HashingEmbedder())
    with gate.acquire("embedder:hashing"):
        out = release_models(gate)
        assert out == {"unloaded": [], "deferred": ["embedder:hashing"],
                       "resident_mb_before": 0.0, "resident_mb_after": 0.0}
        assert gate.snapshot()[0].resident
    assert not gate.snapshot()[0].resident


def test_truncated_counts_across_reloads(hashing_cfg):
    class Cutting(HashingEmbedder):
        def __init__(self):
            super().__init__()
            self.truncated = 0

        def embed_documents(self, texts):
            self.truncated += len(texts)
            return super().embed_documents(texts)

    gate = default_gate(hashing_cfg)
    built = []

    def make(cfg):
        built.append(Cutting())
        return built[-1]

    import memlab.embed as embed_pkg
    mp = pytest.MonkeyPatch()
    mp.setattr(embed_pkg, "make_embedder", make)
    try:
        emb = gate_embedder(hashing_cfg, gate).embedder
        emb.embed_documents(TEXTS)
        release_models(gate)
        emb.embed_documents(TEXTS[:1])
    finally:
        mp.undo()
    assert len(built) == 2 and emb.truncated == 3

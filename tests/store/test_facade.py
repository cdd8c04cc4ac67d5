"""Store facade: add with vectors, pending embedding, rebuild, dense view parity, file cache."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, StoreError
from memlab.store import EmbeddingCacheFile, Store
from memlab.text import extract_entities, memory_terms
from store_helpers import CountingEmbedder, fake_embed, rec


class FakeEmbedder:
    name, version, dim = "fake", "fake-v1", 16

    def __init__(self) -> None:
        self.docs = CountingEmbedder(self.dim)

    def embed_documents(self, texts):
        return self.docs(list(texts))

    def embed_queries(self, texts):
        return fake_embed(["query: " + t for t in texts], self.dim)


def _add(store, records, vectors=None):
    return store.add(records, terms=[memory_terms(r.text) for r in records],
                     entities=[extract_entities(r.text) for r in records], vectors=vectors)


@pytest.mark.parametrize("read_index", ["numpy", "sqlite-vec"])
def test_add_search_pending_rebuild(tmp_path, read_index):
    cfg = MemlabConfig().replace(**{"store.read_index": read_index})
    emb = FakeEmbedder()
    store = Store.open(tmp_path / "s.sqlite", config=cfg, embedder=emb)
    recs = [rec(f"m{i}", f"memory {i}") for i in range(20)]
    texts = [r.text for r in recs]
    _add(store, recs[:10], vectors=store.embed_cached(emb, texts[:10]))
    _add(store, recs[10:])                                   # no vectors: pending
    rows = store.repo.ids_to_rows([r.id for r in recs])
    assert store.repo.pending("fake-v1", limit=50) == rows[10:]
    assert store.embed_pending(emb) == 10 and store.repo.pending("fake-v1", limit=50) == []
    assert emb.docs.texts == 20                               # each text embedded once
    q = emb.embed_queries(["memory 13"])[0]
    expect = np.argsort(-(fake_embed(texts) @ q))[:5]
    got, cos = store.dense.search(q, 5, agent_id="agent_0", user_id="user_0")
    assert got.tolist() == [rows[i] for i in expect]
    pos, vecs = store.dense.vectors([rows[3], 99999, rows[15]])
    assert pos.tolist() == [0, 2]
    np.testing.assert_allclose(vecs, fake_embed([texts[3], texts[15]]), atol=1e-6)
    assert store.rebuild_vectors(emb) == 20 and emb.docs.texts == 20   # from the cache
    got2, cos2 = store.dense.search(q, 5, agent_id="agent_0", user_id="user_0")
    assert got2.tolist() == got.tolist()
    np.testing.assert_allclose(cos2, cos, atol=1e-6)
    store.close()


def test_add_rejects_bad_vectors_before_writing():
    store = Store.open(":memory:", embedder=FakeEmbedder())
    with pytest.raises(InvalidInput) as err:
        _add(store, [rec("a")], vectors=np.ones((1, 3)))
    assert err.value.field == "vector" and store.repo.count() == 0
    with pytest.raises(StoreError):
        store.embed_pending(type("Other", (FakeEmbedder,), {"version": "other"})())
    plain = Store.open(":memory:")
    assert plain.dense is None
    with pytest.raises(InvalidInput):
        _add(plain, [rec("a")], vectors=np.ones((1, 16)))


def test_embedding_cache_file(tmp_path):
    path = tmp_path / "cache" / "emb.sqlite"
    with EmbeddingCacheFile(path) as cache:
        cache.put_many("m|doc", ["a", "b"], fake_embed(["a", "b"]))
    with EmbeddingCacheFile(path) as cache:
        got = cache.get_many("m|doc", ["b", "c"])
        assert list(got) == [0]
        np.testing.assert_array_equal(got[0], fake_embed(["b"])[0])

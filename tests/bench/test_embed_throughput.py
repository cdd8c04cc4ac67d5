"""Embedding throughput leftovers (issue 22, item 4): the dataset card's length cap and the
embedding cache's hit rate in the replay's counts and in `memlab bench`'s output."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import numpy as np
import pytest

from memlab.bench.datasets.canonical import (Card, Dataset, read_card, read_dataset,
                                             write_dataset)
from memlab.bench.replay import CACHE_HITS, CACHE_MISSES, card_config, embed_all, replay
from memlab.bench.run import cache_lines, format_table, open_cache, run_bench
from memlab.errors import DatasetError, InvalidInput


def _card_file(tmp_path, **extra):
    card = {"name": "capped", "version": "1", "language": "mixed", "license": "CC0-1.0",
            "source": "memlab tests", "granularity": "turn", "description": "长文本 and long texts",
            **extra}
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card, ensure_ascii=False), encoding="utf-8")
    return path


def test_a_card_may_set_a_length_cap_and_a_card_without_one_hashes_as_before(tmp_path, tiny_bench):
    assert read_card(_card_file(tmp_path, embed_max_tokens=256)).embed_max_tokens == 256
    assert read_card(_card_file(tmp_path)).embed_max_tokens is None
    capped = dataclasses.replace(tiny_bench.card, embed_max_tokens=128)
    ds = Dataset(capped, tiny_bench.items, tiny_bench.questions)
    assert ds.content_hash() != tiny_bench.content_hash()   # the cap is part of the dataset
    folder = write_dataset(ds, tmp_path / "capped")
    assert json.loads((folder / "card.json").read_text())["embed_max_tokens"] == 128
    assert read_dataset(folder).card.embed_max_tokens == 128
    plain = write_dataset(tiny_bench, tmp_path / "plain")
    assert "embed_max_tokens" not in json.loads((plain / "card.json").read_text())
    assert read_dataset(plain).content_hash() == tiny_bench.content_hash()


@pytest.mark.parametrize("bad", [0, 15, 131_073, "512", True, 256.0])
def test_a_bad_length_cap_names_the_card_field(tmp_path, bad):
    with pytest.raises(DatasetError, match="embed_max_tokens") as err:
        read_card(_card_file(tmp_path, embed_max_tokens=bad))
    assert "[16, 131072]" in str(err.value)
    with pytest.raises(InvalidInput, match="card.embed_max_tokens"):
        Card("x", "1", "en", "", "", "", "", embed_max_tokens=bad)


def test_the_card_cap_applies_unless_the_config_sets_one(hashing_cfg, tiny_bench):
    capped = dataclasses.replace(tiny_bench.card, embed_max_tokens=64)
    assert hashing_cfg.embedding.max_tokens is None
    assert card_config(hashing_cfg, capped).embedding.max_tokens == 64
    own = hashing_cfg.replace(**{"embedding.max_tokens": 300})
    assert card_config(own, capped).embedding.max_tokens == 300
    assert card_config(hashing_cfg, tiny_bench.card) is hashing_cfg


def test_bench_runs_a_capped_dataset_with_the_cap(tmp_path, hashing_cfg, tiny_bench):
    capped = dataclasses.replace(tiny_bench.card, embed_max_tokens=48)
    folder = write_dataset(Dataset(capped, tiny_bench.items, tiny_bench.questions),
                           tmp_path / "capped")
    out = run_bench(dataset=str(folder), presets=[("p", hashing_cfg)], progress=False)
    assert out.results[0].config.embedding.max_tokens == 48


class _Cache:
    """An in-memory embedding cache (get_many / put_many) that counts lookups."""

    def __init__(self):
        self.held: dict[tuple[str, str], np.ndarray] = {}

    def get_many(self, key, texts):
        return {i: self.held[key, t] for i, t in enumerate(texts) if (key, t) in self.held}

    def put_many(self, key, texts, vecs):
        for t, v in zip(texts, vecs):
            self.held[key, t] = np.asarray(v, np.float32)


def test_embed_all_counts_distinct_texts_found_and_embedded(counting_embedder):
    cache, stats = _Cache(), Counter()
    texts = ["我养了一只猫", "I adopted a cat", "我养了一只猫", "green tea"]
    first = embed_all(texts, embedder=counting_embedder, cache=cache, query=False, batch_size=2,
                      desc="t", progress=False, stats=stats)
    assert stats == {CACHE_HITS: 0, CACHE_MISSES: 3}          # 3 distinct texts
    again = embed_all(texts + ["新的一句"], embedder=counting_embedder, cache=cache,
                      query=False, batch_size=2, desc="t", progress=False, stats=stats)
    assert stats == {CACHE_HITS: 3, CACHE_MISSES: 4}
    np.testing.assert_array_equal(again[:4], first)
    assert counting_embedder.documents == ["我养了一只猫", "I adopted a cat", "green tea",
                                           "新的一句"]


def test_a_second_replay_of_another_dataset_finds_the_shared_texts(hashing_cfg, tiny_bench,
                                                                   counting_embedder):
    cache = open_cache(hashing_cfg)
    try:
        first = replay(tiny_bench, cfg=hashing_cfg, embedder=counting_embedder, cache=cache,
                       progress=False)
        # another dataset (another name) holding the same rendered texts: the cache is keyed by
        # the text alone, so every one of them is found
        other = Dataset(dataclasses.replace(tiny_bench.card, name="other"), tiny_bench.items,
                        tiny_bench.questions)
        second = replay(other, cfg=hashing_cfg, embedder=counting_embedder, cache=cache,
                        progress=False)
    finally:
        cache.close()
    # 6 items + 4 questions, all distinct; the background sample is counted too
    assert first.counts[CACHE_MISSES] >= 10
    bg = first.counts[CACHE_MISSES] + first.counts.get(CACHE_HITS, 0) - 10
    assert second.counts.get(CACHE_MISSES, 0) == 0
    assert second.counts[CACHE_HITS] == 10 + bg
    line = cache_lines(first.counts)[0]
    assert line.startswith(f"embedding cache: {first.counts.get(CACHE_HITS, 0):,} of "
                           f"{first.counts[CACHE_MISSES] + first.counts.get(CACHE_HITS, 0):,}")
    assert "100.0%" in cache_lines(second.counts)[0]


def test_bench_output_prints_the_hit_rate(tiny_bench_folder, hashing_cfg):
    run_bench(dataset=str(tiny_bench_folder), presets=[("p", hashing_cfg)], progress=False)
    # a second run with another preset replays again (other candidates): every text is cached
    cfg = hashing_cfg.replace(**{"recall.use_lexical": False})
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("q", cfg)], progress=False)
    text = format_table(out)
    hits = out.counts[CACHE_HITS]
    assert out.counts.get(CACHE_MISSES, 0) == 0 and hits >= 10
    assert f"embedding cache: {hits:,} of {hits:,} distinct texts found (100.0%), 0 embedded" \
        in text
    assert cache_lines({}) == []

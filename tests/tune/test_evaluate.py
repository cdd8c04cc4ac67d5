"""tune.evaluate.per_query is the contract of every sweep and fit: the same per-query metrics as
``memlab bench`` for the same config on the same replay."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memlab.bench.datasets import registry
from memlab.bench.run import replay_cached, run_bench
from memlab.errors import InvalidInput
from memlab.tune.evaluate import item_sessions, per_query

PRESETS = {"reverie": {}, "cosine": {"fusion.scorer": "cosine"}, "bm25": {"fusion.scorer": "bm25"},
           "rrf": {"fusion.scorer": "rrf"},
           "ga": {"fusion.scorer": "generative_agents"},
           "tight": {"selection.char_budget": 120, "selection.dedup_jaccard": 0.3}}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_per_query_equals_the_benchmark(name, tiny_bench_folder, hashing_cfg, counting_embedder):
    cfg = hashing_cfg.replace(**PRESETS[name])
    out = run_bench(dataset=str(tiny_bench_folder), presets=[(name, cfg)], progress=False,
                    embedder=counting_embedder)
    ds = registry.load(str(tiny_bench_folder))
    rep = replay_cached(ds, cfg, embedder=counting_embedder, progress=False)
    got = per_query(rep, cfg, dataset=ds)    # with the gold memory's columns, as bench has them
    want = out.results[0].per_query
    metrics = [c for c in want.columns if c not in ("category", "ranked")]
    pd.testing.assert_frame_equal(got[metrics], want[metrics])
    assert (got["category"] == want["category"].astype(str)).all()
    # prompt_chars: the selected memories' characters, from the rankings
    texts = {f"{c}::{it.item_id}": it for c in ds.conversations() for it in ds.items_of(c)}
    assert (got["prompt_chars"] >= 0).all() and got["prompt_chars"].dtype == np.int64
    assert ((got["prompt_chars"] > 0) == (want["ranked"] > 0)).all()
    assert set(out.results[0].rankings[got.index[0]]) <= set(texts)
    if out.results[0].session_aggregate is not None:
        sess = per_query(rep, cfg, level="session", sessions=item_sessions(ds))
        agg = out.results[0].session_aggregate.loc["all"]
        for m in ("recall@5", "ndcg@10"):
            assert sess[m].mean() == pytest.approx(agg[m])


def test_level_is_checked(tiny_bench_folder, hashing_cfg, counting_embedder):
    ds = registry.load(str(tiny_bench_folder))
    rep = replay_cached(ds, hashing_cfg, embedder=counting_embedder, progress=False)
    with pytest.raises(InvalidInput, match="level"):
        per_query(rep, hashing_cfg, level="turn")
    with pytest.raises(InvalidInput, match="sessions"):
        per_query(rep, hashing_cfg, level="session")


def test_per_query_scores_names_an_unknown_column(tiny_bench_folder, hashing_cfg,
                                                  counting_embedder):
    """Only per_query's numeric columns can be asked for; the frame of a subset holds it."""
    from memlab.tune.evaluate import per_query_scores

    ds = registry.load(str(tiny_bench_folder))
    rep = replay_cached(ds, hashing_cfg, embedder=counting_embedder, progress=False)
    with pytest.raises(InvalidInput) as err:
        per_query_scores(rep, hashing_cfg, columns=["ndcg@7"])
    assert err.value.field == "columns" and err.value.value == "ndcg@7"
    got = per_query_scores(rep, hashing_cfg, columns=["ndcg@10", "prompt_chars"]).to_frame()
    full = per_query(rep, hashing_cfg)
    assert list(got.columns) == ["ndcg@10", "category", "conversation_id", "prompt_chars"]
    pd.testing.assert_frame_equal(got, full[got.columns])

"""Parity (issue 8, done-when): what a sweep computes equals what live ``recall()`` returns, and
the fast per-query path equals the reference path (``bench.run.rank`` + ``metrics.evaluate``).

Data: a small bilingual (zh, en) set written by the test, with near-duplicate memories (dedup
binds), permanent, long- and short-term memories, emotions, importances, named entities and
temporal cues ('first', recent, historical), replayed with the hashing embedder and written into
real SQLite store files. Configurations: 50 seeded draws of :func:`memlab.tune.sample.random_configs`
over every score-stage field the reverie scorer reads (from ``memlab.config.describe()``) and, in
some, the candidate-stage keys of :data:`memlab.tune.sample.CANDIDATE_KEYS` (their own replay).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memlab.api import open_store
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.featcache import features_key
from memlab.bench.replay import ranked_per_question
from memlab.bench.run import rank, replay_cached
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.recall.score import score
from memlab.recall.select import select
from memlab.tune import kernels, reference, rescore
from memlab.tune.evaluate import (item_sessions, per_query, per_query_reference,
                                   per_query_scores, rankings)
from memlab.tune import prepared as prepared_module
from memlab.tune.prepared import Prepared, RowSubset, prepared
from memlab.tune.sample import CANDIDATE_KEYS, random_configs, reverie_keys

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
N_CONFIGS = 50
SEED = 8

EN = [
    ("Ann", "I adopted a cat named Momo"), ("Ann", "I adopted a cat named Momo last week"),
    ("Ann", "Momo the cat likes tuna and naps on the sofa"), ("Ann", "my red bicycle is fast"),
    ("Ann", "red bicycle"), ("Ann", "we booked a flight to Lisbon"),
    ("Ann", "we booked a flight to Lisbon for May"), ("Ann", "Caroline visited the museum with Melanie"),
    ("Ann", "Melanie paints landscapes by the lake"), ("Ann", "the first time I went skiing was in Austria"),
    ("Ann", "lately I have been running every morning"), ("Ann", "I used to play the violin"),
    ("Ann", "I used to play the violin at school"), ("Ann", "my sister Grace lives in Berlin"),
    ("Ann", "Grace sent me a postcard from Berlin"), ("Ann", "I started learning Japanese recently"),
]
ZH = [
    ("小明", "我养了一只叫小白的猫"), ("小明", "我养了一只猫叫小白"), ("小明", "小白喜欢吃鱼"),
    ("小明", "我最近在学游泳"), ("小明", "以前我住在上海"), ("小明", "以前我住在上海的浦东"),
    ("小明", "第一次去北京是在二零一九年"), ("小明", "老王推荐了一本书《三体》"),
    ("小明", "我的红色自行车很快"), ("小明", "我喜欢喝绿茶"), ("小明", "每天早上喝绿茶"),
    ("小明", "老王最近在学吉他"), ("小明", "我曾经在杭州工作过三年"), ("小明", "周末和老王去爬山"),
]
QUESTIONS = {
    "en": [("What is my cat called?", ["0", "1"]), ("When did I go skiing for the first time?", ["9"]),
           ("What have I been doing lately?", ["10", "15"]),
           ("Did I use to play an instrument?", ["11", "12"]), ("Where did we fly to?", ["5", "6"]),
           ("What does Melanie paint?", ["8"]), ("Where does Grace live?", ["13", "14"]),
           ("Tell me about the red bicycle", ["3"])],
    "zh": [("我的猫叫什么名字？", ["0", "1"]), ("我最近在学什么？", ["3"]), ("我以前住在哪里？", ["4", "5"]),
           ("我第一次去北京是什么时候？", ["6"]), ("老王推荐了什么书？", ["7"]), ("我喜欢喝什么茶？", ["9", "10"]),
           ("老王最近在学什么？", ["11"])],
}


def _dataset(importances: tuple[float, ...] | None = None, asked_together: bool = False
             ) -> Dataset:
    """Two users (en, zh) and a mixed one; items over 200 days, questions asked after them.
    ``importances``: the values importance is drawn from (default: uniform in [0.1, 1]);
    ``asked_together``: every question of a conversation asked at one time (as LoCoMo's: the
    fused kernel then lays a conversation out as one block of questions x memories)."""
    rng = random.Random(SEED)
    items, questions = [], []
    convs = {"en": EN, "zh": ZH, "mix": EN[:8] + ZH[:7]}
    for conv, texts in convs.items():
        day = 0.0
        for i, (speaker, text) in enumerate(texts):
            day += rng.uniform(1, 14)
            layer = rng.choice(["long_term", "long_term", "short_term", "permanent"])
            importance = (round(rng.uniform(0.1, 1.0), 3) if importances is None
                          else rng.choice(importances))
            meta = {"importance": importance, "layer": layer}
            if rng.random() < 0.4:
                meta["emotion"] = round(rng.uniform(0.0, 1.0), 3)
            items.append(Item(conv, str(i), f"s{i // 4}", speaker, text, T0 + timedelta(days=day),
                              meta))
        asked = T0 + timedelta(days=day)
        qs = QUESTIONS["zh" if conv == "zh" else "en"]
        if conv == "mix":
            qs = [q for q in QUESTIONS["en"] if max(map(int, q[1])) < 8] \
                + [(t, [str(int(e) + 8) for e in ev]) for t, ev in QUESTIONS["zh"]
                   if max(map(int, ev)) < 7]
        for j, (text, evidence) in enumerate(qs):
            gap = timedelta(days=rng.choice([0.5, 3, 40, 200]))
            asked += timedelta(0) if asked_together and j else gap
            questions.append(Question(conv, f"q{j}", text, asked, "c" + str(j % 3),
                                      tuple(evidence)))
    card = Card(name="parity-mini", version="1", language="mixed", license="CC0-1.0",
                source="memlab tests", granularity="turn", description="parity set")
    return Dataset(card, items, questions)


def _base(tmp_path: Path) -> MemlabConfig:
    """Hashing embedder, short rankings (k = 5), pools small enough to bind on this data."""
    return MemlabConfig().replace(**{
        "embedding.backend": "hashing", "bench.cache_dir": str(tmp_path / "cache"),
        "bench.k": 5, "bench.ks": (1, 3, 5), "recall.lexical_pool_min": 6,
        "recall.lexical_pool_per_k": 1, "recall.dense_pool_min": 4, "recall.dense_pool_per_k": 1,
        "recall.permanent_pool_min": 3, "recall.permanent_pool_per_k": 1,
        "recall.session_context": True,       # off by default: its columns checked here
        "recall.expanded_keys": True})        # off by default: its columns checked here


#: Intervals that make the budget, dedup, permanent cap and pool sizes bind on this small data.
RANGES = {"selection.char_budget": (20, 200), "selection.dedup_jaccard": (0.2, 1.0),
          "recall.permanent_limit": (0, 4), "recall.lexical_pool_min": (1, 12),
          "recall.lexical_pool_per_k": (0, 3), "recall.dense_pool_min": (1, 10),
          "recall.dense_pool_per_k": (0, 2)}


def _configs(base: MemlabConfig, *, scorers=("reverie",), extra=(),
             candidate_share: float = 0.25) -> list[MemlabConfig]:
    return random_configs(base, N_CONFIGS, seed=SEED, keys=(*reverie_keys(), *extra),
                          candidate_keys=CANDIDATE_KEYS, candidate_share=candidate_share,
                          scorers=scorers, ranges=RANGES)


def _feature_cfg(cfg: MemlabConfig, base: MemlabConfig) -> MemlabConfig:
    """``base`` with ``cfg``'s candidate-stage keys: what a sweep replays ``cfg``'s group with."""
    flat = cfg.to_flat()
    return base.replace(**{k: flat[k] for k in CANDIDATE_KEYS})


@pytest.fixture(autouse=True)
def fast_paths_serve(monkeypatch):
    """The fast paths serve whatever memlab.tune.reference's record says: these tests are the
    re-check of the fast paths against the reference code, before its hashes are recorded again
    (tests/tune/test_reference.py fails until then)."""
    monkeypatch.setattr(reference, "stats", {**reference.stats, "checked": True, "changed": ()})


@pytest.fixture(params=["numpy", "numba", "fused"])
def path(request, monkeypatch):
    """Selection through the numpy path, the numba selection kernel after numpy scoring
    (memlab.tune.kernels.select_runs), or reverie's fused kernel (kernels.reverie_select)."""
    if request.param != "numpy" and not kernels.AVAILABLE:
        pytest.skip(kernels.WHY)
    monkeypatch.setattr(rescore, "KERNELS", request.param != "numpy")
    if request.param == "numba":
        monkeypatch.setattr(rescore, "_fused", lambda *args: False)
    return request.param


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parity")
    ds, base = _dataset(), _base(tmp)
    return {"ds": ds, "base": base, "tmp": tmp, "replays": {}, "stores": {}}


def _replay(world, cfg: MemlabConfig):
    fcfg = _feature_cfg(cfg, world["base"])
    key = features_key(fcfg)
    if key not in world["replays"]:
        world["replays"][key] = replay_cached(world["ds"], fcfg, embedder=HashingEmbedder(),
                                              progress=False)
    return world["replays"][key]


def _store_files(world) -> dict[str, Path]:
    """One SQLite file per conversation holding all its items, written through the facade."""
    if not world["stores"]:
        ds = world["ds"]
        for conv in ds.conversations():
            path = world["tmp"] / f"{conv}.sqlite"
            store = open_store(path, config=world["base"], embedder=HashingEmbedder())
            try:
                store.add_many([_fields(it) for it in ds.items_of(conv)])
            finally:
                store.close()
            world["stores"][conv] = path
    return world["stores"]


def _fields(it: Item) -> dict:
    """An item as a user writes it (text as replay renders it: "{speaker}: {text}")."""
    meta = it.meta or {}
    out = {"text": f"{it.speaker}: {it.text}", "id": it.item_id, "timestamp": it.timestamp,
           "importance": meta["importance"], "layer": meta["layer"],
           "session_id": it.session_id}
    if "emotion" in meta:   # replay stores meta.emotion * fusion.emotion_scale (default 100)
        out["emotions"] = {"intensity": meta["emotion"] * 100.0}
    return out


def test_sweep_rankings_equal_live_recall(world):
    """For 50 random reverie configurations (candidate-stage keys included), the rankings of the
    sweep path equal live MemoryStore.recall() at each question's time with the same k."""
    ds, files = world["ds"], _store_files(world)
    configs = _configs(world["base"])
    assert len({features_key(_feature_cfg(c, world["base"])) for c in configs}) > 5
    compared = nonempty = differs_from_default = 0
    default_rank = rankings(_replay(world, world["base"]), world["base"])
    for cfg in configs:
        rep = _replay(world, cfg)
        swept = rankings(rep, cfg)
        live_cfg = cfg.replace(**{"bench.cache_dir": str(world["tmp"] / "cache")})
        for conv in ds.conversations():
            store = open_store(files[conv], config=live_cfg, embedder=HashingEmbedder())
            try:
                for q in ds.questions_of(conv):
                    got = store.recall(q.text, k=ranked_per_question(cfg),
                                       clock=FixedClock(q.asked_at.timestamp()))
                    key = f"{conv}::{q.query_id}"
                    want = [f"{conv}::{m.id}" for m in got.memories]
                    assert swept[key] == want, (key, cfg.to_flat())
                    compared += 1
                    nonempty += bool(want)
                    differs_from_default += swept[key] != default_rank[key]
            finally:
                store.close()
    assert compared == N_CONFIGS * len(ds.questions)
    assert nonempty > compared // 2 and differs_from_default > compared // 10


def _live_and_replayed(ds, files: dict[str, Path], cfg: MemlabConfig, rep
                       ) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """Per question, in the replay's qid order: (live ``features()`` of the store file, the
    replay's rows of that question), each indexed by item id and sorted; the two hold the same
    memories (asserted)."""
    table = rep.features.table
    qid = 0
    for conv in ds.conversations():
        store = open_store(files[conv], config=cfg, embedder=HashingEmbedder())
        try:
            for q in sorted(ds.questions_of(conv), key=lambda q: q.asked_at):
                live = store.features([q.text], k=ranked_per_question(cfg),
                                      now=q.asked_at.timestamp())
                lt = live.table.assign(item=[live.ids[int(r)] for r in live.table["row"]])
                st = table[table["qid"] == qid]
                st = st.assign(item=[rep.row_item[int(r)] for r in st["row"]])
                lt, st = lt.set_index("item").sort_index(), st.set_index("item").sort_index()
                assert list(lt.index) == list(st.index), (conv, q.query_id)
                yield lt, st
                qid += 1
        finally:
            store.close()


def test_context_columns_equal_live_features(world):
    """The ranking-context columns (issue 21: z-scores, session neighbours, session, position)
    and the expanded-key columns (key_bm25, key_bm25_z) of the sweep's replay equal those of live
    ``features()`` on the stores written through the facade, question by question and memory by
    memory; the sessions bind (several turns each) and keys match (names, atom kinds)."""
    from memlab.recall.candidates import KEY_COLUMNS
    from memlab.recall.features import CONTEXT_COLUMNS

    ds, base = world["ds"], world["base"]
    rep = _replay(world, base)
    compared = with_neighbours = with_keys = questions = 0
    cols = [*CONTEXT_COLUMNS, *KEY_COLUMNS]
    for lt, st in _live_and_replayed(ds, _store_files(world), base, rep):
        pd.testing.assert_frame_equal(lt[cols], st[cols])
        compared += len(lt)
        with_neighbours += int(lt["nb2_dense"].notna().sum())
        with_keys += int((lt["key_bm25"] > 0).sum())
        questions += 1
    assert questions == len(ds.questions) and with_neighbours > compared // 2
    assert with_keys >= 5      # rows whose keys the question matches (names, atom kinds): 6 here


def test_learned_rankings_over_context_columns_equal_live_recall(world, tmp_path):
    """A learned model that reads the ranking-context columns ranks the sweep's replay as live
    ``recall()`` ranks the stores (fusion.scorer 'learned'): the columns agree where they count."""
    from memlab.recall.features import CONTEXT_COLUMNS
    from memlab.recall.learned import save_model
    from memlab.tune.fit import fit_hgb

    ds, files, base = world["ds"], _store_files(world), world["base"]
    rep = _replay(world, base)
    model, feats, _ = fit_hgb(rep, base, min_samples_leaf=2, early_stopping=False, max_iter=30)
    assert set(CONTEXT_COLUMNS) | {"key_bm25", "key_bm25_z"} <= set(feats)
    path = save_model(model, tmp_path / "ctx.skops", features=feats)
    cfg = base.replace(**{"fusion.scorer": "learned", "fusion.learned_model": str(path)})
    swept = rankings(rep, cfg)
    compared = 0
    for conv in ds.conversations():
        store = open_store(files[conv], config=cfg, embedder=HashingEmbedder())
        try:
            for q in ds.questions_of(conv):
                got = store.recall(q.text, k=ranked_per_question(cfg),
                                   clock=FixedClock(q.asked_at.timestamp()))
                assert swept[f"{conv}::{q.query_id}"] == [f"{conv}::{m.id}" for m in got.memories]
                compared += bool(got.memories)
        finally:
            store.close()
    assert compared > len(ds.questions) // 2


@pytest.mark.parametrize("scorers,extra", [
    (("reverie",), ()),   # the configurations of the live test (same draws, same replays)
    (("generative_agents", "cosine", "bm25", "rrf", "dialog_tree"),
     ("baselines.rrf_k", "baselines.ga_relevance", "baselines.ga_importance",
      "baselines.ga_recency", "baselines.ga_recency_decay", "dialog_tree.alpha",
      "dialog_tree.beta", "dialog_tree.gamma", "dialog_tree.recency_tau", "dialog_tree.tree_tau")),
], ids=["reverie", "baselines"])
def test_fast_per_query_equals_the_reference(world, scorers, extra):
    """per_query (fast) == per_query_reference (rank + metrics.evaluate) exactly, item and session
    level, for 50 random configurations; the walk (budget or dedup binding) runs in most."""
    sessions = item_sessions(world["ds"])
    walked = 0
    share = 0.25 if scorers == ("reverie",) else 0.0
    for cfg in _configs(world["base"], scorers=scorers, extra=extra, candidate_share=share):
        rep = _replay(world, cfg)
        pd.testing.assert_frame_equal(per_query(rep, cfg), per_query_reference(rep, cfg))
        pd.testing.assert_frame_equal(per_query(rep, cfg, level="session", sessions=sessions),
                                      per_query_reference(rep, cfg, level="session",
                                                          sessions=sessions))
        assert rankings(rep, cfg) == rank(rep, cfg)
        walked += _walks(rep, cfg)
    assert walked > N_CONFIGS // 2


def _walks(rep, cfg) -> bool:
    """Whether some question of ``cfg`` took the walk (its budget or dedup could bind; asked of
    the numpy path, which walks only those)."""
    seen = []
    original, fast = rescore._walk, rescore.KERNELS

    def spy(*args):
        seen.append(True)
        return original(*args)

    rescore._walk, rescore.KERNELS = spy, False
    try:
        rescore.selections(prepared(rep), cfg)
    finally:
        rescore._walk, rescore.KERNELS = original, fast
    return bool(seen)


@pytest.mark.skipif(not kernels.AVAILABLE, reason=kernels.WHY)
@pytest.mark.parametrize("scorers,extra", [
    (("reverie",), ()),
    (("generative_agents", "cosine", "bm25", "rrf", "dialog_tree"), ("baselines.rrf_k",)),
], ids=["reverie", "baselines"])
def test_kernel_path_equals_the_numpy_path(world, scorers, extra, monkeypatch):
    """The numba kernels (the selection kernel after numpy scoring, and reverie's fused kernel)
    and the numpy path select the same positions and give the same per-query frames (item and
    session level) on the same 50 random configurations; the kernels equal the reference through
    test_fast_per_query_equals_the_reference (the default path where numba imports)."""
    sessions = item_sessions(world["ds"])
    share = 0.25 if scorers == ("reverie",) else 0.0
    nonempty = 0
    fused, fused_served = rescore._fused, []

    def spy(*args):
        fused_served.append(fused(*args))
        return fused_served[-1]

    monkeypatch.setattr(rescore, "_fused", spy)
    for cfg in _configs(world["base"], scorers=scorers, extra=extra, candidate_share=share):
        rep = _replay(world, cfg)
        prep = prepared(rep)
        got = {}
        for mode in ("numpy", "numba", "fused"):
            monkeypatch.setattr(rescore, "KERNELS", mode != "numpy")
            monkeypatch.setattr(rescore, "_fused", spy if mode == "fused" else
                                (lambda *args: False))
            got[mode] = (rescore.selections(prep, cfg), per_query(rep, cfg),
                         per_query(rep, cfg, level="session", sessions=sessions))
        for mode in ("numba", "fused"):
            assert np.array_equal(got[mode][0], got["numpy"][0]), (mode, cfg.to_flat())
            pd.testing.assert_frame_equal(got[mode][1], got["numpy"][1])
            pd.testing.assert_frame_equal(got[mode][2], got["numpy"][2])
        nonempty += int((got["numpy"][0] >= 0).sum())
    assert nonempty > N_CONFIGS * len(world["ds"].questions) // 2
    if scorers == ("reverie",):                 # the fused kernel served every configuration
        assert len(fused_served) == 3 * N_CONFIGS and all(fused_served)


def test_long_lists_short_rankings_blocks(world, monkeypatch, path):
    """The paths for long candidate lists: rankings of k = 2 (each question sorts only a prefix
    of its kept rows (numpy path; the kernels order lazily); one that runs out of it with budget
    left walks on past the cut, or is picked again from all of them), the whole table scored in
    blocks of a few rows: the reference's rankings, on both selection paths."""
    monkeypatch.setattr(prepared_module, "BLOCK_ROWS", 7)
    # every candidate relevant and eligible: long kept lists
    loose = {"recall.floor_mode": "absolute", "recall.relevance_floor": 0.0,
             "forgetting.eligibility_threshold": 0.0}
    base = world["base"].replace(**{"bench.k": 2, "bench.ks": (1, 2),
                                    "recall.lexical_pool_min": 40, "recall.dense_pool_min": 40,
                                    **loose})
    keys = [k for k in reverie_keys() if k not in loose]
    seen = {"prefix": 0, "again": 0, "blocks": 0, "picks": 0, "resumed": 0}
    prefix, pick, walk = rescore._prefix, rescore._pick, rescore._walk_vectorised
    kernel = rescore._pick_kernel

    def spy_prefix(*args):
        got = prefix(*args)
        seen["prefix"] += got is not None
        return got

    def spy_pick(*args):
        seen["picks"] += 1
        return pick(*args)

    def spy_walk(*args, resume=False):
        seen["resumed"] += resume
        return walk(*args, resume=resume)

    def spy_kernel(*args, resume=False):
        seen["resumed"] += resume
        return kernel(*args, resume=resume)

    monkeypatch.setattr(rescore, "_pick_kernel", spy_kernel)
    monkeypatch.setattr(rescore, "_prefix", spy_prefix)
    monkeypatch.setattr(rescore, "_pick", spy_pick)
    monkeypatch.setattr(rescore, "_walk_vectorised", spy_walk)
    # draws until every path past the prefix has run, three rounds at most (the draws move when a
    # score-stage field is added or retagged; the assertions below say when none covered both)
    for round_ in range(3):
        for cfg in random_configs(base, N_CONFIGS, seed=SEED + 4 + 1000 * round_, keys=keys,
                                  ranges=RANGES):
            rep = _replay(world, cfg)
            prep = Prepared(rep)                      # fresh: blocks of BLOCK_ROWS rows
            seen["blocks"] += len(prep.blocks) > 1
            seen["picks"] = 0
            picks = rescore.selections(prep, cfg)
            seen["again"] += seen["picks"] > 1           # picked again past the prefix
            got = {k: [prep.item_keys[p] for p in row[row >= 0].tolist()]
                   for k, row in zip(prep.keys, picks)}
            assert got == rank(rep, cfg), cfg.to_flat()
        if path == "fused" or (seen["again"] > 0 and seen["resumed"] > 0):
            break
    assert seen["blocks"] > 5
    if path != "fused":                                  # the fused kernel needs none of them
        assert seen["prefix"] > 5 or path == "numba"     # the kernel orders lazily
        assert seen["again"] > 0 and seen["resumed"] > 0     # both ways past the prefix ran


def test_row_wise_scorers_score_a_subset_as_the_whole(world):
    """The premise of scoring the relevant rows alone: on any rows, the scorers of
    rescore.ROW_WISE give the values (score, eligible, relevant) they give those rows in the
    whole table, bit for bit (reverie's 'first' boost: on rows that hold every relevant one)."""
    base = world["base"]
    rep = _replay(world, base)
    prep = prepared(rep)
    rng = np.random.default_rng(SEED)
    for cfg in _configs(base, scorers=sorted(rescore.ROW_WISE)):
        whole = score(prep.table, cfg)
        keep = whole.relevant | (rng.random(prep.n) < 0.3)
        idx = np.flatnonzero(keep)
        part = score(RowSubset(prep.table, idx), cfg)
        assert np.array_equal(part.score, whole.score[idx])
        assert np.array_equal(part.eligible, whole.eligible[idx])
        assert np.array_equal(part.relevant, whole.relevant[idx])


def _reduce_frame(frame: pd.DataFrame, cols, questions=None, macro=False) -> dict[str, float]:
    """Evaluator.reduce's pandas reduction (mean, or the mean of per-category means)."""
    sub = frame if questions is None else frame.loc[frame.index.intersection(
        pd.Index(list(questions)))]
    if macro:
        means = sub.groupby("category", observed=True)[list(cols)].mean()
        return {c: float(means[c].mean()) for c in cols}
    return {c: float(sub[c].mean()) for c in cols}


@pytest.mark.parametrize("scorers,extra", [
    (("reverie",), ()),
    (("generative_agents", "cosine", "bm25", "rrf", "dialog_tree"), ("baselines.rrf_k",)),
], ids=["reverie", "baselines"])
def test_array_metrics_equal_evaluate(world, scorers, extra):
    """The sweep's per-trial path (per_query_scores: metric arrays from the selected positions,
    no DataFrame) gives metrics.evaluate's values on the rankings the sweep selects, to 1e-12,
    item and session level, for the 50 random configurations; a subset of columns gives the same
    values as all of them; its means (all questions, a subset, per-category macro) equal the
    pandas reduction of per_query's frame (Evaluator.reduce) to 1e-12."""
    from memlab.bench import metrics as M
    from memlab.bench.run import qrels_of

    sessions = item_sessions(world["ds"])
    share = 0.25 if scorers == ("reverie",) else 0.0
    hits = 0
    for cfg in _configs(world["base"], scorers=scorers, extra=extra, candidate_share=share):
        rep = _replay(world, cfg)
        qrels = {k: v for k, v in qrels_of(rep).items() if v}
        ranked = rankings(rep, cfg)
        ranked = {k: ranked[k] for k in qrels}
        for level in ("item", "session"):
            r, g = ranked, qrels
            if level == "session":
                r, g = M.to_sessions(ranked, sessions), M.to_sessions(qrels, sessions)
            want = M.evaluate(r, g, ks=cfg.bench.ks)
            got = per_query_scores(rep, cfg, level=level, sessions=sessions)
            assert list(got.index) == list(want.index)
            assert set(got.values) == {*want.columns, "prompt_chars"}
            for c in want.columns:
                np.testing.assert_allclose(got.values[c], want[c].to_numpy(), rtol=0,
                                           atol=1e-12, err_msg=f"{level} {c} {cfg.to_flat()}")
            some = per_query_scores(rep, cfg, level=level, sessions=sessions,
                                    columns=["ndcg@3", "mrr", "prompt_chars"])
            assert set(some.values) == {"ndcg@3", "mrr", "prompt_chars"}
            for c in some.values:
                assert np.array_equal(some.values[c], got.values[c])
            frame = per_query(rep, cfg, level=level, sessions=sessions)
            cols = ["ndcg@3", "recall@5", "mrr", "prompt_chars"]
            subset = list(frame.index[::2]) + ["not::a question"]
            for questions in (None, subset):
                for macro in (False, True):
                    mine = got.reduce(cols, questions, macro=macro)
                    theirs = _reduce_frame(frame, cols, questions, macro)
                    for c in cols:
                        assert mine[c] == pytest.approx(theirs[c], rel=1e-12, abs=1e-12), (
                            c, questions is None, macro)
            hits += int((want["recall@5"] > 0).sum())
    assert hits > N_CONFIGS                     # the gold is found often: the values are not all 0


@pytest.mark.skipif(not kernels.AVAILABLE, reason=kernels.WHY)
def test_compacted_floor_rows_select_the_same(world, monkeypatch):
    """A floor asked for again is served from its rows compacted (Prepared.relevant_rows: the
    fused kernel reads them without a floor pass): the same selections as the kernel applying
    the floor itself, for the 50 random configurations (and with a memo of one floor, evicted
    as configurations alternate)."""
    monkeypatch.setattr(rescore, "KERNELS", True)
    served = 0
    for memo in (2, 1):
        monkeypatch.setattr(prepared_module, "RELEVANT_MEMO", memo)
        for cfg in _configs(world["base"]):
            prep = prepared(_replay(world, cfg))
            prep.__dict__.pop("_relevant_rows", None)
            prep.__dict__.pop("_floors_seen", None)
            first = rescore.selections(prep, cfg)          # the kernel's own floor
            again = rescore.selections(prep, cfg)          # the compacted rows
            assert np.array_equal(first, again), cfg.to_flat()
            served += bool(prep.__dict__.get("_relevant_rows"))
            other = world["base"]                          # another floor in between
            rescore.selections(prep, other)
            rescore.selections(prep, other)
            assert np.array_equal(rescore.selections(prep, cfg), first), cfg.to_flat()
    assert served > N_CONFIGS                  # most draws have a floor (absolute 0 has none)


def _fused_equals_numpy(prep, cfg, monkeypatch) -> np.ndarray:
    """Asserts that the fused kernel's picks, twice (its own floor pass, then the floor's rows
    compacted), equal the numpy path's; returns those."""
    monkeypatch.setattr(rescore, "KERNELS", True)
    got = [rescore.selections(prep, cfg), rescore.selections(prep, cfg)]
    monkeypatch.setattr(rescore, "KERNELS", False)
    want = rescore.selections(prep, cfg)
    for g in got:
        assert np.array_equal(g, want), cfg.to_flat()
    return want


#: Score terms zeroed so that kept rows tie: every score 0 (importance, then table position
#: order them), or only importance weighed (table position orders equal importances).
_TIES = ({"fusion.relevance": 0.0, "fusion.lexical": 0.0, "fusion.importance": 0.0,
          "fusion.frequency": 0.0, "fusion.temporal": 0.0, "fusion.emotion": 0.0,
          "fusion.resident_boost_cap": 0.0, "fusion.cue_reactivation_factor": 0.0,
          "fusion.cognitive_episodic": 0.0, "fusion.cognitive_semantic": 0.0,
          "fusion.cognitive_procedural": 0.0, "entity.boost_each": 0.0,
          "temporal.intent_boost": 0.0, "temporal.first_boost": 0.0},)
_TIES += ({**_TIES[0], "fusion.importance": 0.3},)


@pytest.mark.skipif(not kernels.AVAILABLE, reason=kernels.WHY)
def test_fused_kernel_breaks_ties_as_selection(tmp_path, monkeypatch):
    """On data whose importances take two values and configurations whose scores tie (all 0,
    or importance alone), and dedup thresholds drawn from the data's own Jaccards, the fused
    kernel's picks equal the numpy path's, on its blocks and on the floor's rows compacted (the
    second call): selection's order (score, importance, table position) and the dedup rule at
    exactly its threshold (>=) decide, and each decided picks here."""
    ds, base = _dataset(importances=(0.5, 1.0)), _base(tmp_path)
    tie_world = {"ds": ds, "base": base, "tmp": tmp_path, "replays": {}, "stores": {}}
    decided = {"importance": 0, "position": 0, "dedup at the threshold": 0}
    fused, served = rescore._fused, []
    monkeypatch.setattr(rescore, "_fused", lambda *a: served.append(fused(*a)) or served[-1])
    rng = random.Random(SEED)
    for i, cfg in enumerate(_configs(base, candidate_share=0.0)):
        prep = prepared(_replay(tie_world, cfg)).dedup_arrays()
        jaccards = np.unique(prep.jac[(prep.jac > 0.2) & (prep.jac < 1.0)])
        cfg = cfg.replace(**_TIES[i % 2],
                          **{"selection.dedup_jaccard": float(rng.choice(jaccards))})
        want = _fused_equals_numpy(prep, cfg, monkeypatch)
        above = cfg.replace(**{"selection.dedup_jaccard": float(np.nextafter(
            cfg.selection.dedup_jaccard, 2.0))})
        decided["dedup at the threshold"] += int(
            not np.array_equal(rescore.selections(prep, above), want))
        for row in want:
            row = row[row >= 0]
            imp = prep.importance[row]
            decided["importance"] += int((imp[1:] != imp[:-1]).sum())
            decided["position"] += int(((imp[1:] == imp[:-1]) & (row[1:] > row[:-1])).sum())
    assert served and all(served)
    assert all(v > 0 for v in decided.values()), decided


@pytest.mark.skipif(not kernels.AVAILABLE, reason=kernels.WHY)
def test_fused_kernel_on_blocks_of_questions(tmp_path, monkeypatch):
    """Questions of a conversation asked at one time share their memories' states: the fused
    kernel lays each conversation out as one block of questions x memories (memories that are
    no candidate of a question are empty cells). Its picks equal the numpy path's for the 50
    random configurations, on the blocks and on the floor's rows compacted."""
    ds, base = _dataset(asked_together=True), _base(tmp_path)
    shared = {"ds": ds, "base": base, "tmp": tmp_path, "replays": {}, "stores": {}}
    fused, served = rescore._fused, []
    monkeypatch.setattr(rescore, "_fused", lambda *a: served.append(fused(*a)) or served[-1])
    nonempty = 0
    for cfg in _configs(base):
        prep = prepared(_replay(shared, cfg))
        layout = prep.kernel_layout
        assert len(np.unique(layout["q_col"])) < prep.n_q       # blocks of several questions
        assert layout["cells"] > prep.n                         # with empty cells
        want = _fused_equals_numpy(prep, cfg, monkeypatch)
        nonempty += int((want >= 0).sum())
    assert served and all(served)
    assert nonempty > N_CONFIGS * len(ds.questions) // 2


# -- boundary fixtures: a threshold's exact value on every path (issue 18, item 6) ---------------
#: The paths a sweep's selection takes: rescore's numpy path, the numba selection kernel after
#: numpy scoring (each without and after pruning, memlab.tune.prune), reverie's fused kernel (its
#: own floor pass, then the floor's rows compacted).
PATHS = ("numpy", "numpy, pruned", "numba", "numba, pruned", "fused")
N_BOUNDARY = 12


def _on_every_path(rep, cfg, monkeypatch) -> dict[str, list[str]]:
    """Asserts that every path of :data:`PATHS` (the numba ones where numba imports) ranks as the
    reference (bench.run.rank: score, then select) for ``cfg``, each path the one that served;
    returns the reference's rankings."""
    want = rank(rep, cfg)
    prep = prepared(rep)
    fused, pruned = rescore._fused, rescore._pruned
    for mode in PATHS:
        if not (mode.startswith("numpy") or kernels.AVAILABLE):
            continue
        served = []
        monkeypatch.setattr(rescore, "KERNELS", not mode.startswith("numpy"))
        monkeypatch.setattr(rescore, "PRUNE_SHARE", -1.0 if "pruned" in mode else 2.0)
        monkeypatch.setattr(rescore, "_fused", (lambda *a: served.append(fused(*a)) or served[-1])
                            if mode == "fused" else (lambda *a: False))
        monkeypatch.setattr(rescore, "_pruned", lambda *a: served.append(pruned(*a)) or served[-1])
        prep.__dict__.pop("_relevant_rows", None)
        prep.__dict__.pop("_floors_seen", None)
        for _ in range(2 if mode == "fused" else 1):      # fused: again, from compacted rows
            assert rankings(rep, cfg) == want, (mode, cfg.to_flat())
        assert served == [True] * (2 if mode == "fused" else "pruned" in mode), mode
    return want


def _reference_picks(prep, cfg) -> list[np.ndarray]:
    """Table positions select() picks per question, after the reference scorer."""
    return select(prep.table, score(prep.table, cfg), terms=prep.terms,
                  k=ranked_per_question(cfg), cfg=cfg)


@pytest.mark.parametrize("mode", ["absolute", "zscore"])
def test_a_score_exactly_at_the_relevance_floor(world, monkeypatch, mode):
    """The relevance floor set to exactly the cosine (absolute) or floor z-score (zscore) of a
    row the reference picks under a loose floor: every path ranks as the reference (the row
    passes: >=); one float above, the rankings differ (the row at the floor decides)."""
    rep = _replay(world, world["base"])
    prep = prepared(rep)
    key, loose = (("recall.relevance_floor", -1.0) if mode == "absolute"
                  else ("recall.relevance_z", -10.0))
    signal = prep.cosine if mode == "absolute" else prep.z
    rng = random.Random(SEED)
    decided = 0
    for cfg in _configs(world["base"], candidate_share=0.0)[:N_BOUNDARY]:
        cfg = cfg.replace(**{"recall.floor_mode": mode, "recall.lexical_floor": 1.0, key: loose})
        rows = [p for p in np.concatenate(_reference_picks(prep, cfg)).tolist()
                if np.isfinite(signal[p]) and signal[p] != 0]     # a floor of 0: no floor
        at = float(signal[rng.choice(rows)])
        want = _on_every_path(rep, cfg.replace(**{key: at}), monkeypatch)
        decided += want != rank(rep, cfg.replace(**{key: float(np.nextafter(at, np.inf))}))
    assert decided > N_BOUNDARY // 2


def test_a_jaccard_exactly_at_the_dedup_threshold(world, monkeypatch):
    """The dedup threshold set to exactly the Jaccard of two memories the reference picks for one
    question (with no dedup, then a budget that does not bind): every path ranks as the
    reference (the later one is a duplicate: >=); one float above, the rankings differ."""
    rep = _replay(world, world["base"])
    prep = prepared(rep)
    rows = prep.table["row"]
    rng = random.Random(SEED)
    tried = decided = 0
    for cfg in _configs(world["base"], candidate_share=0.0):
        cfg = cfg.replace(**{"selection.dedup_jaccard": 1.0, "selection.char_budget": 10_000})
        pairs = []
        for picks in _reference_picks(prep, cfg):
            terms = [prep.terms[int(rows[p])] for p in picks]
            pairs += [len(a & b) / len(a | b) for i, a in enumerate(terms)
                      for b in terms[i + 1:] if 0 < len(a & b) < len(a | b)]
        if not pairs:                       # the floor or the gate left no two picks
            continue
        at = rng.choice(pairs)
        want = _on_every_path(rep, cfg.replace(**{"selection.dedup_jaccard": at}), monkeypatch)
        above = float(np.nextafter(at, 2.0))
        decided += want != rank(rep, cfg.replace(**{"selection.dedup_jaccard": above}))
        tried += 1
        if tried == N_BOUNDARY:
            break
    assert tried == N_BOUNDARY and decided > N_BOUNDARY // 2


def test_a_row_exactly_at_the_char_budget(world, monkeypatch):
    """The char budget set to exactly the characters of the first m picks of a question (a
    budget that does not bind before): its m-th pick fits exactly (used + length == budget) on
    every path as in the reference; one character less, the rankings differ."""
    rep = _replay(world, world["base"])
    prep = prepared(rep)
    rng = random.Random(SEED)
    tried = decided = 0
    for cfg in _configs(world["base"], candidate_share=0.0):
        cfg = cfg.replace(**{"selection.char_budget": 10_000})
        picked = [p for p in _reference_picks(prep, cfg) if p.size]
        if not picked:                      # the floor or the gate left nothing
            continue
        picks = rng.choice(picked)
        budget = int(prep.text_len[picks[:rng.randint(1, picks.size)]].sum())
        want = _on_every_path(rep, cfg.replace(**{"selection.char_budget": budget}), monkeypatch)
        decided += want != rank(rep, cfg.replace(**{"selection.char_budget": budget - 1}))
        tried += 1
        if tried == N_BOUNDARY:
            break
    assert tried == N_BOUNDARY and decided > N_BOUNDARY // 2


def test_permanent_cap_ties(tmp_path, monkeypatch):
    """Scores that tie (all 0, or importance alone; importances of two values) and a permanent
    cap of 1-3: the permanent rows kept are the first in selection's order, ties broken by
    importance, then table position. Every path ranks as the reference, and ties at the cap
    are decided both ways (by importance, by position), the cap binding."""
    ds, base = _dataset(importances=(0.5, 1.0)), _base(tmp_path)
    rep = _replay({"ds": ds, "base": base, "replays": {}}, base)
    prep = prepared(rep)
    permanent = prep.table["layer"] == 0
    decided = {"importance": 0, "position": 0, "cap binds": 0}
    for i, cfg in enumerate(_configs(base, candidate_share=0.0)[:N_BOUNDARY]):
        cap = 1 + i % 3
        cfg = cfg.replace(**_TIES[i % 2], **{"recall.permanent_limit": cap,
                                              "selection.char_budget": 10_000})
        want = _on_every_path(rep, cfg, monkeypatch)
        s = score(prep.table, cfg)
        kept = np.flatnonzero(s.eligible & s.relevant & permanent)
        for q in np.unique(prep.qid[kept]):
            rows = kept[prep.qid[kept] == q]
            rows = rows[np.lexsort((rows, -prep.importance[rows], -s.score[rows]))]
            if rows.size > cap and s.score[rows[cap - 1]] == s.score[rows[cap]]:
                tie = prep.importance[rows[cap - 1]] != prep.importance[rows[cap]]
                decided["importance" if tie else "position"] += 1
        more = cfg.replace(**{"recall.permanent_limit": cap + 1})
        decided["cap binds"] += want != rank(rep, more)
    assert all(v > 0 for v in decided.values()), decided


# -- the query-understanding columns (issue 21) ----------------------------------------------------
_QUERY_COLUMNS = ("q_window_days", "window_dist_days", "q_type", "speaker_named")


def test_query_columns_a_sweep_reads_equal_live_features(tmp_path):
    """The query-understanding columns a replay caches (and a sweep reads, here loaded back from
    the feature cache) equal those live recall computes from a store file written through the
    facade, speakers included, at each question's time: dated turns of two speakers, questions
    naming a date, a weekday, a month, a relative week and a speaker, in zh and en."""
    t = datetime(2024, 5, 15, 12, tzinfo=timezone.utc)          # a Wednesday
    turns = [("Ann", "I hiked up the hill with Bob", -4), ("Bob", "I painted the lake", -11),
             ("Ann", "we booked a flight to Lisbon", -40), ("Bob", "my sister lives in Berlin", -400),
             ("小明", "我上周六去爬山了", -4), ("老王", "我在深圳做软件工程师", -20),
             ("小明", "四月二十七日我搬了家", -18)]
    items = [Item("c", str(i), "s0", s, x, t + timedelta(days=d, hours=i),
                  {"importance": 0.5, "layer": "long_term"}) for i, (s, x, d) in enumerate(turns)]
    asked = [("What did Ann do last Saturday?", 0), ("What did Bob paint two weeks ago?", 1),
             ("小明上周六做了什么？", 2), ("小明4月27日搬家了吗？", 3), ("老王在哪里工作？", 4),
             ("Where does Bob's sister live in 2023?", 5), ("What did I book in April?", 6)]
    questions = [Question("c", f"q{j}", text, t + timedelta(hours=j), "x", ("0",))
                 for text, j in asked]
    card = Card(name="parity-query", version="1", language="mixed", license="CC0-1.0",
                source="memlab tests", granularity="turn", description="query columns")
    ds = Dataset(card, items, questions)
    base = _base(tmp_path).replace(**{"recall.dense_pool_min": 50})   # every turn a candidate
    replay_cached(ds, base, embedder=HashingEmbedder(), progress=False)
    rep = replay_cached(ds, base, embedder=HashingEmbedder(), progress=False)   # from the cache
    assert "feature_cache_load" in rep.timings
    table = rep.features.columns
    keys = [f"c::{q}" for q in rep.questions["query_id"]]
    swept = {(keys[q], rep.row_item[int(r)]): tuple(float(table[c][i]) for c in _QUERY_COLUMNS)
             for i, (q, r) in enumerate(zip(table["qid"], table["row"]))}
    live = {}
    store = open_store(tmp_path / "c.sqlite", config=base, embedder=HashingEmbedder())
    try:
        store.add_many([{**_fields(it), "speaker": it.speaker}
                        for it in sorted(items, key=lambda it: it.timestamp)])
        for q in questions:
            f = store.features([q.text], k=ranked_per_question(base), now=q.asked_at.timestamp())
            for i, r in enumerate(f.columns["row"]):
                live[f"c::{q.query_id}", f.ids[int(r)]] = tuple(
                    float(f.columns[c][i]) for c in _QUERY_COLUMNS)
    finally:
        store.close()
    assert swept.keys() == live.keys() and len(swept) == len(items) * len(questions)
    same = {k: np.array_equal(swept[k], live[k], equal_nan=True) for k in swept}
    assert all(same.values()), [(k, swept[k], live[k]) for k, ok in same.items() if not ok][:3]
    values = np.array(list(swept.values()))
    assert (values[:, 0] > 0).any() and (values[:, 1] == 0).any() and (values[:, 1] > 0).any()
    assert np.isnan(values[:, 1]).any() and (values[:, 2] > 0).any()
    assert (values[:, 3] == 1).any() and (values[:, 3] == -1).any()


# -- the window-max columns (issue 21, chunk.*) ---------------------------------------------------
#: windows small enough that most of the parity set's turns ("{speaker}: {text}") are split
_CHUNK = {"chunk.enabled": True, "chunk.words": 3, "chunk.min_words": 4, "chunk.chars": 4,
          "chunk.min_chars": 6, "chunk.overlap": 0.5}


@pytest.fixture(scope="module")
def chunk_world(tmp_path_factory):
    """The parity set replayed with windows (through the feature cache, as a sweep reads it) and
    written into store files through the facade with the same config."""
    tmp = tmp_path_factory.mktemp("parity-chunk")
    ds, base = _dataset(), _base(tmp).replace(**_CHUNK)
    replay_cached(ds, base, embedder=HashingEmbedder(), progress=False)
    rep = replay_cached(ds, base, embedder=HashingEmbedder(), progress=False)
    assert "feature_cache_load" in rep.timings and rep.counts["feature_cache_hit"] == 1
    files = {}
    for conv in ds.conversations():
        files[conv] = tmp / f"{conv}.sqlite"
        store = open_store(files[conv], config=base, embedder=HashingEmbedder())
        try:
            store.add_many([_fields(it) for it in ds.items_of(conv)])
        finally:
            store.close()
    return {"ds": ds, "base": base, "rep": rep, "files": files}


def test_chunk_columns_equal_live_features(chunk_world):
    """chunk_max and chunk_gain of the cached replay equal those of live ``features()`` memory by
    memory; most candidates are split, and the window max differs from the cosine in many."""
    from memlab.recall.features import CHUNK_COLUMNS

    ds, base, rep = chunk_world["ds"], chunk_world["base"], chunk_world["rep"]
    compared = gained = questions = 0
    for lt, st in _live_and_replayed(ds, chunk_world["files"], base, rep):
        pd.testing.assert_frame_equal(lt[list(CHUNK_COLUMNS)], st[list(CHUNK_COLUMNS)])
        compared += len(lt)
        gained += int((lt["chunk_gain"].abs() > 1e-6).sum())
        questions += 1
    assert questions == len(ds.questions) and rep.counts["items split"] > len(ds.items) // 2
    assert gained > compared // 4


def test_learned_rankings_over_chunk_columns_equal_live_recall(chunk_world, tmp_path):
    """A learned model that reads chunk_max and chunk_gain ranks the cached replay as live
    ``recall()`` ranks the stores."""
    from memlab.recall.features import CHUNK_COLUMNS
    from memlab.recall.learned import save_model
    from memlab.tune.fit import fit_hgb

    ds, base, rep = chunk_world["ds"], chunk_world["base"], chunk_world["rep"]
    model, feats, _ = fit_hgb(rep, base, min_samples_leaf=2, early_stopping=False, max_iter=30)
    assert set(CHUNK_COLUMNS) <= set(feats)
    path = save_model(model, tmp_path / "chunk.skops", features=feats)
    cfg = base.replace(**{"fusion.scorer": "learned", "fusion.learned_model": str(path)})
    swept = rankings(rep, cfg)
    compared = 0
    for conv in ds.conversations():
        store = open_store(chunk_world["files"][conv], config=cfg, embedder=HashingEmbedder())
        try:
            for q in ds.questions_of(conv):
                got = store.recall(q.text, k=ranked_per_question(cfg),
                                   clock=FixedClock(q.asked_at.timestamp()))
                assert swept[f"{conv}::{q.query_id}"] == [f"{conv}::{m.id}" for m in got.memories]
                compared += bool(got.memories)
        finally:
            store.close()
    assert compared > len(ds.questions) // 2


# -- the presets of issue 21: learned and reverie_plus ------------------------------------------
def _preset_on_world(world, name: str) -> MemlabConfig:
    """The preset ``name``'s own settings (its YAML) on the parity world's base."""
    from memlab.bench.run import resolve_preset
    from memlab.yamlfile import read_yaml

    data = read_yaml(resolve_preset(name)[1]) or {}
    flat = {f"{sec}.{k}": v for sec, fields in data.items() for k, v in fields.items()}
    return world["base"].replace(**flat)


def _live_equals_swept(world, cfg: MemlabConfig) -> int:
    """Assert the sweep's rankings of ``cfg`` equal live recall() question by question; returns
    how many were non-empty."""
    ds, files = world["ds"], _store_files(world)
    swept = rankings(_replay(world, cfg), cfg)
    nonempty = 0
    for conv in ds.conversations():
        store = open_store(files[conv], config=cfg, embedder=HashingEmbedder())
        try:
            for q in ds.questions_of(conv):
                got = store.recall(q.text, k=ranked_per_question(cfg),
                                   clock=FixedClock(q.asked_at.timestamp()))
                want = [f"{conv}::{m.id}" for m in got.memories]
                assert swept[f"{conv}::{q.query_id}"] == want, (q.query_id, cfg.to_flat())
                nonempty += bool(want)
        finally:
            store.close()
    return nonempty


@pytest.mark.parametrize("name", ["learned", "reverie_plus"])
def test_issue21_presets_rank_as_live_recall(world, name):
    """The presets as shipped (their YAML on this world's base: the packaged ranker and
    abstention model, the fitted reverie_plus weights) rank the sweep's replay as live recall()."""
    if name == "learned":
        pytest.importorskip("lightgbm")
    cfg = _preset_on_world(world, name)
    assert cfg.fusion.scorer == name if name == "reverie_plus" else cfg.fusion.scorer == "learned"
    assert _live_equals_swept(world, cfg) > 0


def test_reverie_plus_draws_rank_as_live_recall(world):
    """12 random reverie_plus configurations (every plus weight and reverie's drawn) rank the
    sweep's replay as live recall(); the plus terms move the rankings in some."""
    from memlab.tune.sample import plus_keys

    configs = random_configs(world["base"], 12, seed=SEED + 1,
                             keys=(*reverie_keys(), *plus_keys()), scorers=("reverie_plus",),
                             ranges={**RANGES, **{k: (0.0, 2.0) for k in plus_keys()
                                                  if k != "fusion.window_half_life_days"}})
    moved = 0
    for cfg in configs:
        assert cfg.fusion.scorer == "reverie_plus"
        _live_equals_swept(world, cfg)
        plain = cfg.replace(**{k: 0.0 for k in plus_keys()
                               if k != "fusion.window_half_life_days"})
        rep = _replay(world, cfg)
        moved += rankings(rep, cfg) != rankings(rep, plain)
    assert moved >= 3

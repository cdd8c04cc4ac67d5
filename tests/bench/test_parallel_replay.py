"""memlab.bench.parallel: conversations replayed in worker processes (``n_jobs``) or on a local
Dask cluster give the serial replay's raw signals and per-question metrics, bit for bit; a killed
worker stops the replay with ReplayWorkerLost and keeps every finished conversation, which a
rerun reads instead of replaying. Hashing embedder, zh and en conversations made here; real
processes (spawn) and a real 2-worker cluster on 127.0.0.1."""

from __future__ import annotations

import pickle
import sys
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from memlab.bench.datasets.canonical import Card, Dataset, Item, Question, write_dataset
from memlab.bench.featcache import partial_dir
from memlab.bench.parallel import replay_parallel
from memlab.bench.replay import ROWS_PER_CONVERSATION, replay
from memlab.bench.run import open_cache, replay_cached, run_bench
from memlab.embed import HashingEmbedder
from memlab.errors import DatasetError, ReplayError, ReplayWorkerLost

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
CARD = Card("parallel-test", "1", "mixed", "CC0-1.0", "memlab tests", "turn", "made by the test")


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


EN = ["I adopted a cat named Momo", "my red bicycle is fast", "we booked a flight to Lisbon",
      "I play the violin every evening", "green tea every morning", "the cat sleeps on the bicycle"]
ZH = ["我养了一只叫墨墨的猫", "我的红色自行车很快", "我们订了去里斯本的机票",
      "我每天晚上拉小提琴", "每天早上喝绿茶", "猫睡在自行车上"]


def dataset(conversations=("en1", "zh1", "en2", "zh2")) -> Dataset:
    """Conversations of 6 items over 6 days; questions on days 0 (nothing written yet), 3 and 9
    (two asked at once), each with its gold item; ``dies`` and others take the English texts."""
    items, questions = [], []
    for c in conversations:
        texts = ZH if c.startswith("zh") else EN
        for j, t in enumerate(texts):
            items.append(Item(c, f"i{j}", f"s{j // 3}", "Ann", t, day(j + 0.5)))
        questions += [Question(c, "q0", texts[0][:6] if c.startswith("zh") else "cat named Momo",
                               day(0), "early", ("i0",)),
                      Question(c, "q1", texts[1], day(3), "bike", ("i1",)),
                      Question(c, "q2", texts[3], day(9), "music", ("i3",)),
                      Question(c, "q3", texts[5], day(9), "cat", ("i5", "i0"))]
    return Dataset(CARD, items, questions)


def serial(ds, cfg, emb):
    cache = open_cache(cfg)
    try:
        return replay(ds, cfg=cfg, embedder=emb, cache=cache, progress=False)
    finally:
        cache.close()


def parallel(ds, cfg, emb, **kw):
    cache = open_cache(cfg)
    try:
        return replay_parallel(ds, cfg=cfg, embedder=emb, cache=cache, progress=False, **kw)
    finally:
        cache.close()


def assert_same_replay(a, b) -> None:
    """Every raw-signal column, question, row map, term set, text and id equal."""
    ta, tb = a.features.table, b.features.table   # (a cache entry's columns come back sorted)
    assert sorted(ta.columns) == sorted(tb.columns)
    ta, tb = ta[sorted(ta.columns)], tb[sorted(tb.columns)]
    pd.testing.assert_frame_equal(ta.reset_index(drop=True), tb.reset_index(drop=True),
                                  check_exact=True)
    pd.testing.assert_frame_equal(a.questions, b.questions)
    assert a.row_item == b.row_item and a.row_session == b.row_session
    assert a.features.terms == b.features.terms and a.features.texts == b.features.texts
    assert a.features.ids == b.features.ids
    assert a.features.query_texts == b.features.query_texts
    for k in ("questions", "conversations", "candidates", "items", "items_written"):
        assert a.counts[k] == b.counts[k], k


@pytest.mark.parametrize("mode", ["raw", "writer"])
def test_two_worker_processes_give_the_serial_replay(hashing_cfg, mode):
    cfg = hashing_cfg.replace(**{"bench.write_mode": mode, "bench.feature_cache": False})
    ds, emb = dataset(), HashingEmbedder()
    one = serial(ds, cfg, emb)
    two = parallel(ds, cfg, emb, n_jobs=2)
    assert_same_replay(one, two)
    # conversation i's rows live in [i * ROWS_PER_CONVERSATION, (i+1) * ...), zh and en alike
    convs = one.questions["conversation_id"].tolist()
    t = two.features.table
    for qid, row in zip(t["qid"], t["row"]):
        assert row // ROWS_PER_CONVERSATION == ds.conversations().index(convs[qid])
    assert len(t) > 0 and two.counts["questions"] == 16


def test_bench_metrics_with_n_jobs_2_equal_n_jobs_1(tmp_path, hashing_cfg):
    """The full per-question output (every metric, category, ranked count, gold columns) and the
    rankings of `memlab bench`'s run, serial and in two processes (each its own feature cache)."""
    folder = write_dataset(dataset(), tmp_path / "ds")
    outs = {}
    for j in (1, 2):
        cfg = hashing_cfg.replace(**{"bench.cache_dir": str(tmp_path / f"cache{j}"),
                                     "vram.enabled": False})
        outs[j] = run_bench(dataset=str(folder), presets=[("p", cfg)], progress=False,
                            embedder=HashingEmbedder(), n_jobs=j)
    a, b = outs[1].results[0], outs[2].results[0]
    pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True)
    assert a.rankings == b.rankings
    assert outs[1].to_json()["metrics"] == outs[2].to_json()["metrics"]
    assert outs[2].timings["peak_rss_workers_mb"] > 0
    assert "peak_rss_workers_mb" not in outs[1].timings
    # the entry is written whole and the per-conversation folder is gone
    entries = list((tmp_path / "cache2" / "features").iterdir())
    assert len(entries) == 1 and not entries[0].name.endswith(".partial")


def test_a_killed_worker_fails_by_name_and_keeps_the_finished_conversations(tmp_path, hashing_cfg):
    """One process takes the conversations in order: a and b finish, the worker dies on ``dies``
    (os._exit), c never runs. The finished two are on disk; the rerun replays only the others
    and gives the serial replay."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from replay_faults import die_on_dies

    cfg = hashing_cfg.replace(**{"bench.feature_cache": False})
    ds, emb = dataset(("a", "b", "dies", "c")), HashingEmbedder()
    folder, key = tmp_path / "entry.partial", {"test": 1}
    with pytest.raises(ReplayWorkerLost) as err:
        parallel(ds, cfg, emb, n_jobs=1, folder=folder, key=key, task=die_on_dies)
    e = err.value
    assert (e.kept, e.missing, e.folder) == (2, ["dies", "c"], str(folder))
    assert "a rerun replays only the 2 others" in str(e)
    assert sorted(p.name for p in folder.iterdir()) == ["000000", "000001"]
    again = parallel(ds, cfg, emb, n_jobs=2, folder=folder, key=key)
    assert again.counts["replay: conversations kept"] == 2
    assert_same_replay(serial(ds, cfg, emb), again)


def test_a_corrupt_kept_conversation_is_replayed(tmp_path, hashing_cfg):
    cfg = hashing_cfg.replace(**{"bench.feature_cache": False})
    ds, emb = dataset(("a", "b")), HashingEmbedder()
    folder, key = tmp_path / "entry.partial", {"test": 2}
    parallel(ds, cfg, emb, n_jobs=2, folder=folder, key=key)
    col = next((folder / "000001" / "columns").glob("*.npy"))
    col.write_bytes(col.read_bytes()[:-8])          # truncated
    again = parallel(ds, cfg, emb, n_jobs=2, folder=folder, key=key)
    assert again.counts["replay: conversations kept"] == 1
    assert_same_replay(serial(ds, cfg, emb), again)


def test_replay_cached_with_n_jobs_writes_the_entry_and_reads_it_back(hashing_cfg):
    ds, emb = dataset(("en1", "zh1")), HashingEmbedder()
    first = replay_cached(ds, hashing_cfg, embedder=emb, progress=False, n_jobs=2)
    assert first.counts["feature_cache_hit"] == 0
    second = replay_cached(ds, hashing_cfg, embedder=emb, progress=False)
    assert second.counts["feature_cache_hit"] == 1
    assert_same_replay(first, second)
    assert not any(p.name.endswith(".partial")
                   for p in (__import__("pathlib").Path(hashing_cfg.bench.cache_dir)
                             / "features").iterdir())


def test_a_workers_dataset_error_reaches_the_caller_as_itself(hashing_cfg):
    """An item the store refuses, in a worker: the same DatasetError as the serial replay."""
    cfg = hashing_cfg.replace(**{"bench.feature_cache": False})
    ds = dataset(("a",))
    bad = Dataset(CARD, [*ds.items, Item("a", "high", "s9", "Ann", "x", day(2),
                                         meta={"importance": 1.5})], ds.questions)
    cfg = cfg.replace(**{"bench.importance_policy": "meta"})
    with pytest.raises(DatasetError) as one:
        serial(bad, cfg, HashingEmbedder())
    with pytest.raises(DatasetError) as two:
        parallel(bad, cfg, HashingEmbedder(), n_jobs=2)
    assert str(one.value) == str(two.value)
    assert (two.value.field, two.value.value) == (one.value.field, one.value.value) \
        == ("a/high.meta.importance", 1.5)


def test_memlab_errors_pickle_with_their_fields():
    e = DatasetError("f.jsonl", "bad", line=3, field="text", value="x")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is DatasetError and str(back) == str(e)
    assert (back.file, back.line, back.field, back.value) == ("f.jsonl", 3, "text", "x")
    lost = ReplayWorkerLost("d", kept=1, missing=["c"], folder=None, cause="x")
    assert pickle.loads(pickle.dumps(lost)).missing == ["c"]


def test_scheduler_without_the_extra_names_it(hashing_cfg, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)     # import distributed fails
    with pytest.raises(ReplayError, match=r"optional extra 'distributed'.*memlab\[distributed\]"):
        parallel(dataset(("a",)), hashing_cfg.replace(**{"bench.feature_cache": False}),
                 HashingEmbedder(), scheduler="tcp://127.0.0.1:1")


def test_a_local_dask_cluster_gives_the_serial_replay(hashing_cfg):
    distributed = pytest.importorskip(
        "distributed", reason="Dask distributed is not installed (pip install "
        "'memlab[distributed]')")
    import logging

    cfg = hashing_cfg.replace(**{"bench.feature_cache": False})
    ds, emb = dataset(), HashingEmbedder()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster:
        got = parallel(ds, cfg, emb, scheduler=cluster.scheduler_address)
    assert_same_replay(serial(ds, cfg, emb), got)
    assert np.array_equal(np.asarray(got.features.columns["cosine"]),
                          np.asarray(serial(ds, cfg, emb).features.columns["cosine"]),
                          equal_nan=True)


def test_bench_cli_n_jobs_2_reports_the_metrics_of_n_jobs_1(tmp_path, hashing_yaml):
    """`memlab bench -j 2` and `-j 1` on the zh/en set (each its own caches): the same JSON
    metrics, per category and abstention; -j 2 replayed in processes (its counts say so)."""
    import json

    from typer.testing import CliRunner

    from memlab.cli import app

    folder = write_dataset(dataset(), tmp_path / "ds")
    reports = {}
    for j in ("1", "2"):
        out = tmp_path / f"r{j}.json"
        res = CliRunner().invoke(app, ["bench", "--dataset", str(folder), "--config",
                                       str(hashing_yaml), "--set",
                                       f"bench.cache_dir={tmp_path / ('c' + j)}", "--json",
                                       str(out), "--no-track", "--out-dir", str(tmp_path / "res"),
                                       "-q", "-j", j], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        reports[j] = json.loads(out.read_text(encoding="utf-8"))
    for part in ("metrics", "per_category", "ranking", "abstention"):
        assert reports["1"][part] == reports["2"][part], part
    assert reports["2"]["counts"]["replay: conversations kept"] == 0
    assert "replay: conversations kept" not in reports["1"]["counts"]
    assert reports["2"]["timings"]["peak_rss_workers_mb"] > 0


def test_sweep_n_jobs_2_replays_in_processes_and_scores_as_n_jobs_1(tmp_path, hashing_cfg):
    """memlab.sweep(n_jobs=2): the feature cache is filled by a replay in two processes (the
    entry's counts say so) and the default configuration scores as with n_jobs=1."""
    import json

    from memlab.tune.space import Space
    from memlab.tune.sweep import sweep

    folder = write_dataset(dataset(), tmp_path / "ds")
    space = Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 0.62],
                                                             "grid": [0.0, 0.62]}}}, name="g")
    got = {}
    for j in (1, 2):
        over = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                "recall.relevance_floor": 0.0, "bench.cache_dir": str(tmp_path / f"c{j}"),
                "vram.enabled": False}
        got[j] = sweep(dataset=str(folder), preset="reverie", overrides=over, space=space,
                       trials=2, n_jobs=j, out_dir=tmp_path / f"s{j}", progress=False)
        (entry,) = [p for p in (tmp_path / f"c{j}" / "features").iterdir()]
        counts = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))["counts"]
        assert ("replay: conversations kept" in counts) == (j == 2)
    assert got[1].default == got[2].default
    assert got[1].best == got[2].best

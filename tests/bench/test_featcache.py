"""The feature cache (issue 8, item 2): a second bench with the same key does no replay, gets the
same metrics from memory-mapped columns, and an entry that is corrupt or stale is never used."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest

from memlab.bench import featcache as FC
from memlab.bench.run import run_bench


def _run(folder, cfg, embedder, **kw):
    return run_bench(dataset=str(folder), presets=[("x", cfg)], progress=False,
                     embedder=embedder, **kw)


def _entries(cfg):
    root = FC.Path(cfg.bench.cache_dir) / "features"
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


def test_a_second_bench_with_the_same_key_does_no_replay(tiny_bench_folder, hashing_cfg,
                                                         counting_embedder):
    first = _run(tiny_bench_folder, hashing_cfg, counting_embedder)
    assert first.counts["feature_cache_hit"] == 0 and len(_entries(hashing_cfg)) == 1
    counting_embedder.documents.clear(), counting_embedder.queries.clear()
    # a score-stage change (another scorer) shares the key: read back, nothing embedded or replayed
    second = _run(tiny_bench_folder, hashing_cfg.replace(**{"fusion.scorer": "rrf"}),
                  counting_embedder)
    third = _run(tiny_bench_folder, hashing_cfg, counting_embedder)
    assert second.counts["feature_cache_hit"] == third.counts["feature_cache_hit"] == 1
    assert counting_embedder.documents == [] and counting_embedder.queries == []
    assert "feature_cache_load" in third.timings and "recall" not in third.timings
    assert third.to_json()["metrics"] == first.to_json()["metrics"]
    pd.testing.assert_frame_equal(third.results[0].per_query, first.results[0].per_query)
    assert third.results[0].rankings == first.results[0].rankings
    # a candidates-stage change has another key: replayed, a second entry
    fourth = _run(tiny_bench_folder, hashing_cfg.replace(**{"recall.lexical_pool_min": 50}),
                  counting_embedder)
    assert fourth.counts["feature_cache_hit"] == 0 and len(_entries(hashing_cfg)) == 2


def test_an_entry_round_trips_and_is_memory_mapped(tiny_bench, hashing_cfg, counting_embedder,
                                                    tmp_path):
    from memlab.bench.replay import replay
    from memlab.store.cache import EmbeddingCacheFile

    with EmbeddingCacheFile(tmp_path / "emb.sqlite") as cache:
        rep = replay(tiny_bench, cfg=hashing_cfg, embedder=counting_embedder, cache=cache,
                     progress=False)
    key = FC.cache_key(tiny_bench, hashing_cfg, counting_embedder.version)
    folder = FC.save(rep, FC.entry_dir(tmp_path, key), key)
    back = FC.load(folder, key)
    for name, col in rep.features.columns.items():
        assert isinstance(back.features.columns[name], np.memmap), name
        np.testing.assert_array_equal(back.features.columns[name], col)
        assert back.features.columns[name].dtype == col.dtype
    pd.testing.assert_frame_equal(back.questions, rep.questions)
    assert back.row_item == rep.row_item and back.row_session == rep.row_session
    assert dict(back.features.terms) == dict(rep.features.terms)
    assert back.features.texts == rep.features.texts and back.features.ids == rep.features.ids
    assert back.features.query_texts == rep.features.query_texts


@pytest.mark.parametrize("damage", ["column bytes", "missing file", "extra file", "stale key",
                                    "manifest"])
def test_a_corrupt_or_stale_entry_is_replayed_never_used(tiny_bench_folder, hashing_cfg,
                                                         counting_embedder, caplog, damage):
    first = _run(tiny_bench_folder, hashing_cfg, counting_embedder)
    [entry] = _entries(hashing_cfg)
    column = entry / "columns" / "cosine.npy"
    if damage == "column bytes":          # a value changed in place: same size, another sha256
        blob = bytearray(column.read_bytes())
        blob[-1] ^= 0xFF
        column.write_bytes(bytes(blob))
    elif damage == "missing file":
        column.unlink()
    elif damage == "extra file":
        (entry / "columns" / "planted.npy").write_bytes(b"x")
    elif damage == "stale key":           # a folder copied from another key
        m = json.loads((entry / "manifest.json").read_text())
        m["key"]["code"] = "an older memlab"
        (entry / "manifest.json").write_text(json.dumps(m))
    else:
        (entry / "manifest.json").write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="memlab"):
        again = _run(tiny_bench_folder, hashing_cfg, counting_embedder)
    assert again.counts["feature_cache_hit"] == 0 and again.counts["feature_cache_rebuilt"] == 1
    assert any("feature cache" in r.message and "replaying" in r.message for r in caplog.records)
    assert again.to_json()["metrics"] == first.to_json()["metrics"]
    assert FC.load(entry, json.loads((entry / "manifest.json").read_text())["key"])   # rebuilt whole


def test_the_cache_can_be_turned_off(tiny_bench_folder, hashing_cfg, counting_embedder):
    out = _run(tiny_bench_folder, hashing_cfg.replace(**{"bench.feature_cache": False}),
               counting_embedder)
    assert "feature_cache_hit" not in out.counts and _entries(hashing_cfg) == []


def test_the_key_covers_dataset_embedder_config_and_code(tiny_bench, hashing_cfg):
    key = FC.cache_key(tiny_bench, hashing_cfg, "emb-v1")
    assert FC.cache_key(tiny_bench, hashing_cfg, "emb-v1") == key
    other = [FC.cache_key(tiny_bench.subset(limit_questions=2), hashing_cfg, "emb-v1"),
             FC.cache_key(tiny_bench, hashing_cfg, "emb-v2"),
             FC.cache_key(tiny_bench, hashing_cfg.replace(**{"recall.bm25_k1": 1.0}), "emb-v1")]
    assert all(FC.entry_dir("c", k) != FC.entry_dir("c", key) for k in other)
    # score-stage and runtime fields are not part of it
    assert FC.cache_key(tiny_bench, hashing_cfg.replace(**{"fusion.relevance": 0.1,
                                                           "embedding.batch_size": 7}),
                        "emb-v1") == key
    assert key["code"] == FC.code_digest() and len(key["code"]) == 64


def test_cli_cache_dir_sets_where_both_caches_live(tiny_bench_folder, hashing_yaml, tmp_path):
    from typer.testing import CliRunner

    from memlab.cli import app

    where = tmp_path / "elsewhere"
    args = ["bench", "--dataset", str(tiny_bench_folder), "--config", str(hashing_yaml),
            "--cache-dir", str(where), "--no-track", "-q", "--out-dir", str(tmp_path / "out")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert (where / "embeddings.sqlite").exists() and len(list((where / "features").iterdir())) == 1
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0 and "feature_cache_load" in second.output


def test_the_writer_modes_floor_is_in_its_key_not_in_raw_modes(tiny_bench_folder, hashing_cfg,
                                                               counting_embedder):
    """Issue 18: a writer replay's association step reads the relevance floor, so another
    relevance_z is another entry in writer mode, while raw mode rescores its one entry."""
    writer = hashing_cfg.replace(**{"bench.write_mode": "writer"})
    for cfg, hit in ((hashing_cfg, 1), (writer, 0)):
        _run(tiny_bench_folder, cfg, counting_embedder)
        again = _run(tiny_bench_folder, cfg.replace(**{"recall.relevance_z": 0.5}),
                     counting_embedder)
        assert again.counts["feature_cache_hit"] == hit, cfg.bench.write_mode
    assert len(_entries(hashing_cfg)) == 3      # raw; writer at two relevance_z
    assert FC.features_key(writer) != FC.features_key(writer.replace(**{"recall.lexical_floor":
                                                                         0.5}))


def _module_imports(path, *, top_level_only=False):
    """memlab modules ``path`` imports; ``top_level_only``: not those inside functions."""
    import ast
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] \
        if top_level_only else [tree]
    out = set()
    for node in (n for root in roots for n in ast.walk(root)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.startswith("memlab"):
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("memlab"))
    return out


def test_code_outside_the_digest_is_not_reached_by_a_replay():
    """The modules left out of code_digest must be ones a replay never runs: the transitive
    imports of bench/replay.py (and the dataset loaders) reach none of them except the ones
    that replay reaches only through api.recall (score/select/inject and the learned scorer
    that score.py registers: unused by replay's raw-signal path) -- listed here so that a new
    edge is a decision, not an accident."""
    from pathlib import Path

    import memlab
    root = Path(memlab.__file__).resolve().parent
    files = {p.relative_to(root).with_suffix("").as_posix().replace("/", "."): p
             for p in root.rglob("*.py")}
    files = {("memlab." + k).removesuffix(".__init__"): v for k, v in files.items()}
    seen, todo = set(), ["memlab.bench.replay", "memlab.bench.featcache"]
    while todo:
        mod = todo.pop()
        if mod in seen or mod not in files:
            continue
        seen.add(mod)
        # importing the package runs its top level only: its facades (memlab.open_store,
        # memlab.sweep) import lazily, and a replay never calls them
        todo.extend(m for m in _module_imports(files[mod], top_level_only=mod == "memlab")
                    if m in files)
    reached = {files[m].relative_to(root).as_posix() for m in seen}
    excluded = {r for r in reached if not FC._replay_code(r)}
    assert excluded <= {"recall/score.py", "recall/select.py", "recall/inject.py",
                        "recall/result.py", "config.py",
                        "recall/learned.py"}, excluded   # a scorer: score.py imports it
    assert FC._replay_code("recall/candidates.py") and not FC._replay_code("tune/sweep.py")

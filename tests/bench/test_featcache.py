"""The feature cache (issue 8, item 2): a second bench with the same key does no replay, gets the
same metrics from memory-mapped columns, and an entry that is corrupt or stale is never used."""

from __future__ import annotations

import hashlib
import json
import logging

import numpy as np
import pandas as pd
import pytest

from memlab.bench import featcache as FC
from memlab.bench.run import run_bench
from memlab.embed.numerics import PROBE


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
    # a score-stage change (another scorer) shares the key: read back, nothing of the dataset
    # embedded, no replay; only the numerics probe (memlab.embed.numerics: the key holds this
    # machine's fingerprint, checked by every run)
    second = _run(tiny_bench_folder, hashing_cfg.replace(**{"fusion.scorer": "rrf"}),
                  counting_embedder)
    third = _run(tiny_bench_folder, hashing_cfg, counting_embedder)
    assert second.counts["feature_cache_hit"] == third.counts["feature_cache_hit"] == 1
    assert counting_embedder.documents == [] and counting_embedder.queries == []
    assert set(counting_embedder.probes) == set(PROBE)
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


def test_the_digest_covers_the_modules_a_writer_replay_runs():
    """The code digest's files come from the import graph: the writer replay's association step
    (recall/associate.py -> recall/score.py's relevance_mask) is in it, as are the write
    pipeline, the config and the data files; tuning, tracking, the CLI and the VRAM gate are not
    (a replay never imports them: editing them keeps every cached table)."""
    from memlab.bench.replaycode import replay_files

    files = set(replay_files())
    assert {"recall/score.py", "recall/associate.py", "write/interaction.py", "bench/replay.py",
            "recall/candidates.py", "config.py", "api.py", "data/background_zh.txt"} <= files
    assert not files & {"tune/sweep.py", "tune/kernels.py", "bench/cli.py", "bench/run.py",
                        "bench/tracking.py", "cli.py", "vram/gate.py", "serve/app.py"}
    assert FC.code_digest() != hashlib.sha256(b"").hexdigest()


def test_the_import_graph_follows_lazy_relative_and_parent_imports(tmp_path):
    """The rules of memlab.bench.replaycode.reachable on a package made here: an import inside a
    function of an imported module is followed (it runs when the replay calls it); a package
    that is only a parent runs its top level, so its lazy facades are not followed; relative
    imports and ``from package import module`` name modules."""
    from memlab.bench.replaycode import reachable

    pkg = tmp_path / "memlab"
    files = {
        "__init__.py": "from memlab.a import x\n\ndef facade():\n    from memlab.lazy import y\n",
        "a.py": "x = 1\n\ndef g():\n    from memlab.b import z\n",
        "b.py": "from . import c\nz = 2\n",
        "c.py": "", "lazy.py": "", "unreached.py": "import memlab.c\n", "e.py": "",
        "sub/__init__.py": "import memlab.d\n\nclass K:\n    from memlab.k import w\n",
        "sub/entry.py": "from memlab import e\n", "d.py": "", "k.py": "w = 0\n",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text, encoding="utf-8")
    got = reachable(("memlab.sub.entry",), root=pkg)
    assert got == {"memlab", "memlab.sub", "memlab.sub.entry", "memlab.e", "memlab.a",
                   "memlab.b", "memlab.c", "memlab.d", "memlab.k"}


_LOADED = """
import sys
from datetime import datetime, timedelta, timezone
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.replay import replay
from memlab.config import MemlabConfig
from memlab.embed import make_embedder

class NoCache:
    def get_many(self, key, texts):
        return {}
    def put_many(self, key, texts, vecs):
        pass

t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
texts = ["用户喜欢爬山，周末常去香山", "用户周末又去香山爬山了",
         "The user likes hiking on weekends", "The user went hiking again last weekend"]
items = [Item("c", f"i{i}", "s", "user", t, t0 + timedelta(days=i), {}) for i, t in
         enumerate(texts)]
# a question between the items: they are written in two batches, the second's association
# lookup finds the first's memories
qs = [Question("c", f"q{d}", "爬山", t0 + timedelta(days=d, hours=12), "x", ("i0",))
      for d in (1, 3)]
ds = Dataset(Card("loaded", "1", "mixed", "CC0-1.0", "tests", "turn", "d"), items, qs)
cfg = MemlabConfig().replace(**{"embedding.backend": "hashing", "bench.write_mode": sys.argv[1]})
rep = replay(ds, cfg=cfg, embedder=make_embedder(cfg), cache=NoCache(), progress=False)
assert rep.counts["items_written"] == 4, rep.counts
# modules with code (memlab.recall is a namespace package: no file)
print(" ".join(sorted(m for m, mod in list(sys.modules.items())
                      if (m == "memlab" or m.startswith("memlab."))
                      and getattr(mod, "__file__", None))))
"""


@pytest.mark.parametrize("mode", ["raw", "writer"])
def test_every_module_a_replay_loads_is_in_the_digest(mode, tmp_path):
    """A replay run in a fresh interpreter loads only modules of the digest (the static graph
    over-approximates what runs); the writer replay does load recall/score.py."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import memlab
    from memlab.bench.replaycode import reachable

    repo = str(Path(memlab.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [repo, *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, "-c", _LOADED, mode], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert "memlab.bench.replay" in loaded and "memlab.write.interaction" in loaded
    assert loaded - reachable() == set()
    if mode == "writer":
        assert {"memlab.recall.associate", "memlab.recall.score"} <= loaded

"""Persisted in-process indexes (store.persist_index): loaded when keyed and checked, rebuilt
when another process wrote, when the schema changed, when a file is truncated or damaged; recall
always equals the SQL path. Real files, a real second process."""

from __future__ import annotations

import logging
import multiprocessing as mp
from collections import Counter

import numpy as np
import pytest

from memlab.api import open_store
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.store import connect
from memlab.store import persist
from memlab.store.indexio import save_memory_index
from memlab.store.memindex import MemoryIndex
from memlab.store.migrations import LATEST, MIGRATIONS, migrate
from test_memindex import all_rowids, assert_same_reads

NOW = 1.8e9
DIM = 32
EN = ["Alice bought a red kettle at the market", "Bob plays chess with Carol every Sunday",
      "The garden by the river has tall sunflowers", "Carol drinks green tea in the morning",
      "Dave repaired the old bicycle in the garage", "Alice and Bob walked the dog in the park"]
ZH = ["小明在北京的咖啡馆喝咖啡", "小红每周日和奶奶下棋", "花园里的向日葵长得很高",
      "小明周末去上海看音乐会", "奶奶在厨房里包饺子", "小红的猫喜欢睡在窗台上"]
QUERIES = ["kettle market", "who plays chess on Sunday", "sunflowers garden", "小明 咖啡",
           "谁喜欢下棋", "猫 窗台", "bicycle garage repaired"]
PERSIST = {"store.persist_min_memories": 0, "store.quick_check": False}
SQL = {"store.memory_index": "sqlite", "store.read_index": "sqlite-vec",
       "store.persist_index": False}


def cfg(**kw) -> MemlabConfig:
    return MemlabConfig().replace(**{**PERSIST, **kw})


def items(n: int, tag: str = "") -> list[dict]:
    texts = EN + ZH
    return [{"text": f"{texts[i % len(texts)]} {tag}{i}", "importance": (i % 5) / 5}
            for i in range(n)]


def opened(path, config: MemlabConfig):
    return open_store(path, config=config, embedder=HashingEmbedder(dim=DIM),
                      clock=FixedClock(NOW))


def build(path, n: int = 48) -> None:
    """A store of ``n`` memories whose indexes are saved beside it (loaded, then closed)."""
    with opened(path, cfg()) as st:
        st.add_many(items(n))
        st.warm()


def answers(path, config: MemlabConfig, queries=QUERIES) -> tuple[list, dict[str, str]]:
    """Each query's (ids, scores) and how the store's indexes were opened."""
    with opened(path, config) as st:
        out = []
        for q in queries:
            r = st.recall(q, k=5)
            out.append(([m.id for m in r.memories], [round(s, 6) for s in r.explain["score"]]))
        return out, dict(st._store.index_opened)


def assert_like_sql(path, config: MemlabConfig, queries=QUERIES) -> dict[str, str]:
    got, how = answers(path, config, queries)
    want, _ = answers(path, MemlabConfig().replace(**{**PERSIST, **SQL}), queries)
    assert got == want
    return how


def test_saved_indexes_are_loaded_and_recall_equals_sql(tmp_path):
    path = tmp_path / "s.sqlite"
    build(path)
    folder = persist.folder_of(path)
    assert (folder / "memory.json").exists() and len(list(folder.glob("exact-*.json"))) == 1
    how = assert_like_sql(path, cfg())
    assert how == {"dense": "loaded", "memory": "loaded"}


def _other_process_writes(path: str, texts: list[str], forget: int) -> None:
    """Runs in a spawned process: add memories, delete one, keep nothing saved."""
    c = MemlabConfig().replace(**{**PERSIST, "store.persist_index": False})
    with opened(path, c) as st:
        st.add_many([{"text": t} for t in texts])
        first = st._store.conn.execute("SELECT id FROM memory_records ORDER BY rowid LIMIT 1 "
                                       "OFFSET ?", (forget,)).fetchone()[0]
        st._store.repo.delete([first])


@pytest.mark.parametrize("probe", [0, 32])
def test_a_write_by_another_process_is_applied_or_rebuilt(tmp_path, probe):
    """The generations alone must catch it (probe 0): the dense index is rebuilt, the
    MemoryIndex applies the logged changes; new memories are found in zh and en."""
    path = tmp_path / "s.sqlite"
    build(path)
    new = ["Zebulon tuned the harpsichord before the concert", "小明在杭州西湖边放风筝"]
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_other_process_writes, args=(str(path), new, 3))
    p.start()
    p.join(120)
    assert p.exitcode == 0
    c = cfg(**{"store.index_probe": probe})
    how = assert_like_sql(path, c, QUERIES + ["harpsichord concert", "西湖 风筝"])
    assert how["dense"].startswith("rebuilt: stale: generation")
    assert how["memory"] == "loaded, 3 logged changes applied"
    got, _ = answers(path, c, ["harpsichord concert", "西湖 风筝"])
    assert [ids[0].split("_")[0] for ids, _ in got]                    # found at all
    with opened(path, c) as st:
        top = [st.recall(q, k=1).memories[0].text for q in ("harpsichord", "西湖 风筝")]
    assert top == new


def test_a_schema_change_rebuilds(tmp_path):
    """A MemoryIndex saved while the store was at the previous schema version is not used
    once the store migrated (a real migration in between), and recall equals SQL."""
    path = tmp_path / "s.sqlite"
    conn = connect(path, busy_timeout_ms=10_000)
    assert migrate(conn, migrations=MIGRATIONS[:-1]) == LATEST - 1
    assert save_memory_index(str(path), MemoryIndex.load(conn), conn, Counter())
    conn.close()
    with opened(path, cfg()) as st:                 # migrates to LATEST
        st.add_many(items(30))
        st.recall("kettle")
        assert st._store.index_opened["memory"] == \
            f"rebuilt: stale: schema {LATEST - 1}, the store's is {LATEST}"
        assert st._store.stats["persisted index rebuilt: stale"] == 1
        assert_same_reads(st._store.repo, st._store.signals(), all_rowids(st._store.conn))
    assert assert_like_sql(path, cfg())["memory"] == "loaded"     # the rebuilt one, saved


def _truncate(f) -> None:
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("which", ["memory", "exact"])
def test_a_truncated_array_file_rebuilds(tmp_path, caplog, which):
    path = tmp_path / "s.sqlite"
    build(path)
    folder = persist.folder_of(path)
    data = next(d for d in folder.iterdir() if d.is_dir() and d.name.startswith(which))
    _truncate(data / ("col_rowid.npy" if which == "memory" else "_mat.npy"))
    with caplog.at_level(logging.WARNING, logger="memlab"):
        how = assert_like_sql(path, cfg())
    kind = "memory" if which == "memory" else "dense"
    assert how[kind].startswith("rebuilt: corrupt: ")
    assert f"persisted {kind} index not used (corrupt" in caplog.text
    assert assert_like_sql(path, cfg())[kind] == "loaded"        # saved again, whole


def test_damaged_bytes_are_caught_by_the_checksum(tmp_path):
    path = tmp_path / "s.sqlite"
    build(path)
    folder = persist.folder_of(path)
    data = next(d for d in folder.iterdir() if d.is_dir() and d.name.startswith("exact"))
    f = data / "_mat.npy"
    raw = bytearray(f.read_bytes())
    raw[-64:] = bytes(64)                     # the last vector's tail zeroed: same size
    f.write_bytes(bytes(raw))
    how = assert_like_sql(path, cfg(**{"store.index_probe": 0}))
    assert how["dense"] == "rebuilt: corrupt: _mat.npy: CRC-32 differs from the manifest's"


def test_the_probe_catches_a_state_of_another_store(tmp_path):
    """Another store's saved state under this store's name, same generations: the probe
    compares rows with SQLite and refuses it."""
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    build(a)
    build(b)
    fa, fb = persist.folder_of(a), persist.folder_of(b)
    for f in fb.iterdir():
        if f.is_dir():
            import shutil
            shutil.rmtree(f)
        else:
            f.unlink()
    for f in fa.iterdir():
        import shutil
        (shutil.copytree if f.is_dir() else shutil.copy)(f, fb / f.name)
    how = assert_like_sql(b, cfg(**{"store.index_checksum": False}))
    assert how["memory"] == "rebuilt: corrupt: rowid 1 differs from the store (probe)"
    assert how["dense"] == "loaded"      # synthetic vectors of identical texts: the same


def test_small_stores_save_nothing(tmp_path):
    path = tmp_path / "s.sqlite"
    with opened(path, MemlabConfig().replace(**{"store.quick_check": False})) as st:
        st.add_many(items(20))
        st.warm()
    assert not persist.folder_of(path).exists()          # below persist_min_memories


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_a_compact_exact_index_is_saved_and_keyed_by_its_dtype(tmp_path, dtype):
    path = tmp_path / "s.sqlite"
    build(path)
    c = cfg(**{"store.exact_dtype": dtype})
    with opened(path, c) as st:
        assert st._store.index_opened["dense"] == \
            f"rebuilt: stale: exact_dtype 'float32', the store's is '{dtype}'"
        assert st._store.dense.index._mat.dtype == np.dtype(dtype)
    with opened(path, c) as st:
        assert st._store.index_opened["dense"] == "loaded"
        assert st._store.dense.index._mat.dtype == np.dtype(dtype)


@pytest.mark.parametrize("lazy", [False, True])
def test_strings_round_trip_zh_and_en(lazy):
    strings = ["", "Alice", "小明在北京", "emoji 🎉 and 汉字", "", "x" * 5]
    blob, lens = persist.strings_to_arrays(strings)
    got = persist.strings_from_arrays(blob, lens, lazy=lazy)
    assert len(got) == 6 and [got[i] for i in range(6)] == strings and list(got) == strings
    got.extend(["新的"])
    assert got[6] == "新的" and list(got)[-1] == "新的"
    with pytest.raises(ValueError, match="lengths sum to"):
        persist.strings_from_arrays(blob[:-3], lens, lazy=lazy)

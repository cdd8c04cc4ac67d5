"""The usearch graph of store.dense_index usearch persisted beside the store (store.persist_index):
mapped at the next open instead of rebuilt; copied into memory at the first write and saved at
close; rebuilt (logged, counted, saved again) after a write by another process, a truncated or
damaged file and other graph parameters. Dense results always equal the exact scan's top k.
Real files, a real second process."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
from collections import Counter

import numpy as np
import pytest

from memlab.api import open_store
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.store import persist
from memlab.store.indexio import GRAPH, graph_name

pytest.importorskip("usearch")

NOW = 1.8e9
DIM = 32
N = 1200
EN = ["Alice bought a red kettle at the market", "Bob plays chess with Carol every Sunday",
      "The garden by the river has tall sunflowers", "Carol drinks green tea in the morning"]
ZH = ["小明在北京的咖啡馆喝咖啡", "小红每周日和奶奶下棋", "花园里的向日葵长得很高",
      "奶奶在厨房里包饺子"]
QUERIES = ["kettle market", "who plays chess on Sunday", "sunflowers garden", "小明 咖啡",
           "谁喜欢下棋", "奶奶 饺子"]
BASE = {"store.persist_min_memories": 0, "store.quick_check": False}


def cfg(**kw) -> MemlabConfig:
    return MemlabConfig().replace(**{**BASE, "store.dense_index": "usearch", **kw})


def opened(path, config: MemlabConfig):
    return open_store(path, config=config, embedder=HashingEmbedder(dim=DIM),
                      clock=FixedClock(NOW))


def items(n: int, tag: str = "") -> list[dict]:
    texts = EN + ZH
    return [{"text": f"{texts[i % len(texts)]} {tag}{i} n{i * 7919 % 1013}"} for i in range(n)]


def build(path) -> None:
    """A store of N memories whose graph is built at its first recall and saved then."""
    with opened(path, cfg()) as st:
        st.add_many(items(N))
        st.recall("kettle")
        assert st._store.dense.ann.keeper.opened == "rebuilt: none saved"


def dense_vs_exact(st) -> list[list[int]]:
    """Each query's dense top 10 through the graph; asserts it equals the exact scan's."""
    s = st._store
    agent, user = s.conn.execute("SELECT agent_id, user_id FROM memory_records LIMIT 1").fetchone()
    emb = HashingEmbedder(dim=DIM)
    out = []
    for q in emb.embed_queries(QUERIES + EN + ZH):
        got = s.read(lambda: s.dense.search(q, 10, agent_id=agent, user_id=user))
        want = s.dense.index.search(q, 10, agent_id=agent, user_id=user)
        assert got[0].tolist() == want[0].tolist()
        np.testing.assert_allclose(got[1], want[1], atol=1e-6)
        out.append(got[0].tolist())
    return out


def recalled(st) -> list[list[str]]:
    return [[m.id for m in st.recall(q, k=5).memories] for q in QUERIES]


def exact_answers(path) -> list[list[str]]:
    """The same store read through the exact scan, nothing persisted or saved."""
    with opened(path, cfg(**{"store.dense_index": "exact", "store.persist_index": False})) as st:
        return recalled(st)


def graph_file(path):
    folder = persist.folder_of(path)
    manifest = folder / f"{graph_name(HashingEmbedder(dim=DIM).version)}.json"
    return manifest, folder / json.loads(manifest.read_text())["dir"] / GRAPH


def test_the_saved_graph_is_mapped_at_the_next_open_and_searches_as_a_fresh_one(tmp_path):
    path = tmp_path / "s.sqlite"
    build(path)
    manifest, f = graph_file(path)
    assert f.stat().st_size > 0
    key = json.loads(manifest.read_text())["key"]
    assert (key["rows"], key["connectivity"], key["scalar"], key["metric"]) == (N, 32, "f16", "ip")
    with opened(path, cfg()) as st:
        got = recalled(st)
        ann = st._store.dense.ann
        assert ann.keeper.opened == "loaded" and ann.viewed and len(ann) == N
        assert st._store.stats["ann_rebuild"] == 0 and st._store.stats["ann_search"] >= 1
        assert st._store.stats["persisted index loaded"] == 3    # memory, dense, graph
        dense = dense_vs_exact(st)
    assert got == exact_answers(path)
    # a graph built afresh (nothing persisted) answers the same
    with opened(path, cfg(**{"store.persist_index": False})) as st:
        assert recalled(st) == got and dense_vs_exact(st) == dense
        assert st._store.stats["ann_rebuild"] == 1
    assert graph_file(path)[1] == f        # nothing changed: nothing saved again


def test_a_write_copies_the_mapped_graph_and_close_saves_it(tmp_path):
    path = tmp_path / "s.sqlite"
    build(path)
    _, before = graph_file(path)
    new = ["Zebulon tuned the harpsichord before the concert", "小明在杭州西湖边放风筝"]
    with opened(path, cfg()) as st:
        st.recall("kettle")                         # maps the graph
        st.add_many([{"text": t} for t in new])     # first write: copied, then mirrored
        ann = st._store.dense.ann
        assert not ann.viewed and len(ann) == N + 2
        assert st._store.stats["ann_copy"] == 1 and st._store.stats["ann_rebuild"] == 0
        dense_vs_exact(st)
        top = [st.recall(q, k=1).memories[0].text for q in ("harpsichord concert", "西湖 风筝")]
        assert top == new
    manifest, after = graph_file(path)
    assert after != before and not before.exists()
    assert json.loads(manifest.read_text())["key"]["rows"] == N + 2
    with opened(path, cfg()) as st:
        assert [st.recall(q, k=1).memories[0].text
                for q in ("harpsichord concert", "西湖 风筝")] == new
        assert st._store.dense.ann.keeper.opened == "loaded"
        assert st._store.stats["ann_rebuild"] == 0
        dense_vs_exact(st)


def _other_process_writes(path: str, texts: list[str], dense_index: str) -> None:
    """Runs in a spawned process: add memories (the write path searches the dense route: with
    usearch the graph is mapped, copied, mirrored and saved at close); with the exact scan also
    delete one (the graph there untouched)."""
    with opened(path, cfg(**{"store.dense_index": dense_index})) as st:
        st.add_many([{"text": t} for t in texts])
        if dense_index == "exact":
            first = st._store.conn.execute("SELECT id FROM memory_records ORDER BY rowid LIMIT 1 "
                                           "OFFSET 5").fetchone()[0]
            st._store.repo.delete([first])


@pytest.mark.parametrize("writer", ["exact", "usearch"])
def test_a_write_by_another_process_brings_the_graph_up_to_date(tmp_path, writer):
    """A writer without the graph (exact): the key's generation alone (no probe) tells the
    reader that the saved graph is behind; it is mapped and brought up to date (every vector
    compared), not rebuilt, and saved at close. A writer with it: the writer saves the graph it
    mirrored its writes into and the reader maps that one. Either way the dense top 10 equals
    the exact scan's."""
    path = tmp_path / "s.sqlite"
    build(path)
    _, before = graph_file(path)
    new = ["Zebulon tuned the harpsichord before the concert", "小明在杭州西湖边放风筝"]
    p = mp.get_context("spawn").Process(target=_other_process_writes,
                                        args=(str(path), new, writer))
    p.start()
    p.join(120)
    assert p.exitcode == 0
    rows = N + 1 if writer == "exact" else N + 2
    assert (graph_file(path)[1] == before) == (writer == "exact")
    c = cfg(**{"store.index_probe": 0})
    with opened(path, c) as st:
        got = recalled(st)
        how = st._store.dense.ann.keeper.opened
        if writer == "exact":
            assert how.startswith("loaded, generation ") and \
                how.endswith(" 2 rows added, 1 removed, 0 replaced"), how
            assert st._store.stats["ann_catch_up"] == 1 and st._store.stats["ann_copy"] == 1
        else:
            assert how == "loaded" and st._store.stats["ann_catch_up"] == 0
        assert st._store.stats["ann_rebuild"] == 0
        assert len(st._store.dense.ann) == rows
        dense_vs_exact(st)
        assert [st.recall(q, k=1).memories[0].text
                for q in ("harpsichord concert", "西湖 风筝")] == new
    assert got == exact_answers(path)
    assert json.loads(graph_file(path)[0].read_text())["key"]["rows"] == rows   # saved
    with opened(path, c) as st:
        assert recalled(st) == got and st._store.dense.ann.keeper.opened == "loaded"


def test_a_graph_ahead_of_the_store_is_rebuilt(tmp_path):
    """The store file restored from a copy taken before later writes: the saved graph (of the
    later state) is ahead of it and never used."""
    path = tmp_path / "s.sqlite"
    build(path)
    backup = tmp_path / "backup.sqlite"
    backup.write_bytes(path.read_bytes())
    with opened(path, cfg()) as st:
        st.add_many(items(3, tag="later "))
    assert json.loads(graph_file(path)[0].read_text())["key"]["rows"] == N + 3
    path.write_bytes(backup.read_bytes())
    with opened(path, cfg()) as st:
        got = recalled(st)
        how = st._store.dense.ann.keeper.opened
        assert how.startswith("rebuilt: stale: generation ") and st._store.stats["ann_rebuild"] == 1
        dense_vs_exact(st)
    assert got == exact_answers(path)


def test_catch_up_adds_removes_and_replaces_moved_rows():
    """An ExactIndex changed after its graph was taken: 50 new rows, 20 removed, 30 upserted
    with new vectors, 10 upserted with the same vector (not moved). The graph brought up to date
    holds exactly the rows and vectors of a graph built afresh, and searches as it does."""
    from memlab.store.ann import AnnIndex
    from memlab.store.exact import ExactIndex
    from memlab.store.vectors import VectorMeta
    rng = np.random.default_rng(9)
    n, dim = 500, 24

    def unit(m):
        v = rng.standard_normal((m, dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    meta = [VectorMeta("a", "u", "long_term", "episodic", 0, True)] * (n + 50)
    mat = unit(n)
    exact = ExactIndex(dim=dim)
    exact.add(np.arange(1, n + 1), mat, meta[:n], generation=0)
    old = AnnIndex(stats=Counter())
    old.follow(exact)
    saved = old.graph.copy()
    exact.add(np.arange(n + 1, n + 51), unit(50), meta[:50], generation=1)
    exact.remove(list(range(1, 21)), generation=2)
    exact.add(np.arange(21, 51), unit(30), meta[:30], generation=3)            # moved
    exact.add(np.arange(51, 61), mat[50:60], meta[:10], generation=4)          # same vectors
    ann = AnnIndex(stats=Counter())
    assert ann.catch_up(saved, exact) == (50, 20, 30)
    assert ann.in_step(exact) and ann.stats["ann_catch_up"] == 1 and ann.stats["ann_copy"] == 1
    fresh = AnnIndex(stats=Counter())
    fresh.follow(exact)
    keys = np.sort(np.asarray(fresh.graph.keys, np.int64))
    assert np.array_equal(np.sort(np.asarray(ann.graph.keys, np.int64)), keys)
    np.testing.assert_allclose(np.stack(ann.graph.get(keys, dtype=np.float32)),
                               np.stack(fresh.graph.get(keys, dtype=np.float32)), atol=1e-3)
    for q in unit(20):
        got = ann.search(exact, q, 10, agent_id="a", user_id="u")
        assert got[0].tolist() == exact.search(q, 10, agent_id="a", user_id="u")[0].tolist()
        assert got[0].tolist() == fresh.search(exact, q, 10, agent_id="a", user_id="u")[0].tolist()
    assert ann.stats["ann_rebuild"] == 0


def _truncate(f) -> None:
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", ["truncated", "zeroed", "truncated, size rewritten"])
def test_a_damaged_graph_file_is_rebuilt_counted_and_saved_again(tmp_path, caplog, damage):
    path = tmp_path / "s.sqlite"
    build(path)
    manifest, f = graph_file(path)
    c = cfg()
    if damage == "truncated":
        _truncate(f)
        why = f"corrupt: {GRAPH} holds {f.stat().st_size} bytes, the manifest says "
    elif damage == "zeroed":
        raw = bytearray(f.read_bytes())
        raw[len(raw) // 2:len(raw) // 2 + 64] = bytes(64)      # same size: the CRC-32 sees it
        f.write_bytes(bytes(raw))
        why = f"corrupt: {GRAPH}: CRC-32 differs from the manifest's"
    else:   # the manifest agrees with the cut file and no CRC: usearch's own error is caught
        _truncate(f)
        m = json.loads(manifest.read_text())
        m["files"][GRAPH]["size"] = f.stat().st_size
        manifest.write_text(json.dumps(m))
        c = cfg(**{"store.index_checksum": False})
        why = f"corrupt: {GRAPH}: usearch: "
    with caplog.at_level(logging.WARNING, logger="memlab"), opened(path, c) as st:
        got = recalled(st)
        how = st._store.dense.ann.keeper.opened
        assert how.startswith(f"rebuilt: {why}"), how
        assert st._store.stats["persisted index rebuilt: corrupt"] == 1
        assert st._store.stats["ann_rebuild"] == 1
        dense_vs_exact(st)
    assert "persisted ann index not used (corrupt" in caplog.text
    assert got == exact_answers(path)
    with opened(path, c) as st:                     # saved again, whole
        assert recalled(st) == got and st._store.dense.ann.keeper.opened == "loaded"
        assert st._store.stats["ann_rebuild"] == 0


def test_other_graph_parameters_rebuild(tmp_path):
    path = tmp_path / "s.sqlite"
    build(path)
    for field, value, was in (("ann_connectivity", 16, 32), ("ann_scalar", "f32", "'f16'"),
                              ("ann_expansion_add", 64, 128)):
        c = cfg(**{f"store.{field}": value})
        with opened(path, c) as st:
            got = recalled(st)
            name = field.removeprefix("ann_")
            shown = repr(value) if isinstance(value, str) else value
            assert st._store.dense.ann.keeper.opened == \
                f"rebuilt: stale: {name} {was}, the store's is {shown}"
            assert st._store.stats["ann_rebuild"] == 1
            dense_vs_exact(st)
        assert got == exact_answers(path)
        with opened(path, c) as st:                 # the rebuilt one, saved under its key
            assert recalled(st) == got and st._store.dense.ann.keeper.opened == "loaded"
        build_back = cfg()                          # restore the default graph for the next
        with opened(path, build_back) as st:
            st.recall("kettle")
            assert st._store.dense.ann.keeper.opened.startswith("rebuilt: stale: ")


def test_after_resync_the_graph_is_rebuilt_from_the_rows_not_loaded(tmp_path):
    path = tmp_path / "s.sqlite"
    build(path)
    with opened(path, cfg()) as st:
        want = recalled(st)
        assert st._store.stats["ann_rebuild"] == 0
        st._store.resync()
        assert recalled(st) == want
        assert st._store.stats["ann_rebuild"] == 1 and not st._store.dense.ann.viewed


def test_without_persist_index_nothing_is_saved(tmp_path):
    path = tmp_path / "s.sqlite"
    with opened(path, cfg(**{"store.persist_index": False})) as st:
        st.add_many(items(200))
        st.recall("kettle")
        assert st._store.dense.ann.keeper is None
    assert not persist.folder_of(path).exists()

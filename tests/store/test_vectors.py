"""VectorCache (sqlite-vec) and ExactIndex: parity, filters, partitions, int8, rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.errors import InvalidInput, StoreError
from memlab.store import (ExactIndex, VectorCache, load_meta, quantize_int8, quarter,
                          quarters_between, table_name, vector_cache)
from memlab.config import MemlabConfig
from store_helpers import add, dump, fake_embed, rec

DAY = 86400.0
T0 = 1767225600.0  # 2026-01-01T00:00:00Z
LAYERS = ("permanent", "long_term", "short_term")


def _fill(conn, repo, n=300, users=3, dim=16, **cache_kw):
    records = [rec(f"m{i}", f"memory {i} about thing {i % 17}", user_id=f"u{i % users}",
                   retention_layer=LAYERS[(i // 3) % 3], timestamp=T0 + i * 2 * DAY,
                   event_time=(T0 + i * 1.5 * DAY if i % 4 == 0 else None),
                   lifecycle_state="superseded" if i % 10 == 7 else "active")
               for i in range(n)]
    rows = add(repo, records)
    cache = VectorCache(conn, model_version="fake-v1", dim=dim, **cache_kw)
    gen = repo.put_vectors(cache, rows, fake_embed([r.text for r in records], dim))
    return rows, records, cache, gen


def test_quarters():
    assert quarter(T0) == "2026-Q1" and quarter(T0 - 1) == "2025-Q4"
    assert quarter(T0 + 95 * DAY) == "2026-Q2"
    assert quarters_between(T0 - 10 * DAY, T0 + 100 * DAY) == ["2025-Q4", "2026-Q1", "2026-Q2"]
    assert quarters_between(T0, T0 + 1) == ["2026-Q1"] and quarters_between(T0, T0) == []
    assert table_name("e5 small/q4") != table_name("e5_small_q4")
    assert table_name("e5 small/q4").startswith("memory_vec_e5_small_q4_")


FILTERS = [
    {},
    {"layers": ["long_term"]},
    {"layers": ["permanent", "short_term"]},
    {"since": T0 + 100 * DAY},
    {"until": T0 + 200 * DAY},
    {"since": T0 + 50 * DAY, "until": T0 + 400 * DAY},
    {"since": T0 + 50 * DAY, "until": T0 + 400 * DAY, "layers": ["short_term"]},
    {"active_only": False},
]


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("filt", FILTERS, ids=[str(sorted(f)) for f in FILTERS])
def test_exact_index_matches_sqlite_vec(store, filt, partitioned):
    conn, repo = store
    rows, records, cache, _ = _fill(conn, repo, partitioned=partitioned)
    index = ExactIndex.load(cache)
    assert len(index) == len(rows) == cache.count()
    for qi, user in enumerate(["u0", "u1", "u2"]):
        q = fake_embed([f"query {qi}"])[0]
        r1, c1 = cache.search(q, 10, agent_id="agent_0", user_id=user, **filt)
        r2, c2 = index.search(q, 10, agent_id="agent_0", user_id=user, **filt)
        assert len(r1) > 0
        assert r1.tolist() == r2.tolist()
        np.testing.assert_allclose(c1, c2, atol=1e-5)
        # brute force over the records with the same filters, written out
        by_row = dict(zip(rows, records))
        ok = []
        for r, m in by_row.items():
            t = int(np.floor(m.event_time if m.event_time is not None else m.timestamp))
            if m.user_id != user or (filt.get("active_only", True) and m.lifecycle_state != "active"):
                continue
            if "layers" in filt and m.retention_layer not in filt["layers"]:
                continue
            if "since" in filt and t < filt["since"] or "until" in filt and t >= filt["until"]:
                continue
            ok.append(r)
        V = fake_embed([by_row[r].text for r in ok])
        sims = V @ q
        expect = [ok[i] for i in np.argsort(-sims)[:10]]
        assert r1.tolist() == expect


def test_dense_user_filter_before_ranking(store):
    conn, repo = store
    others = [rec(f"o{i}", f"other {i}", user_id=f"user{i}") for i in range(1000)]
    rows = add(repo, others)
    cache = VectorCache(conn, model_version="fake", dim=16)
    q = fake_embed(["the query"])[0]
    vecs = np.tile(q, (1000, 1))          # every other user's memory IS the query
    repo.put_vectors(cache, rows, vecs)
    [mine] = add(repo, [rec("mine", "my only memory", user_id="me")])
    repo.put_vectors(cache, [mine], -q[None, :])   # and mine is its opposite
    for search in (cache.search, ExactIndex.load(cache).search):
        got, cos = search(q, 10, agent_id="agent_0", user_id="me")
        assert got.tolist() == [mine]
        assert cos[0] == pytest.approx(-1.0, abs=1e-5)


def test_wrong_dimension_raises_before_writing(store):
    conn, repo = store
    rows = add(repo, [rec("a"), rec("b")])
    cache = VectorCache(conn, model_version="fake", dim=16)
    before = dump(conn)
    for bad in (np.ones((2, 8)), np.ones((1, 16)), np.full((2, 16), np.nan), np.zeros((2, 16))):
        with pytest.raises(InvalidInput) as err:
            repo.put_vectors(cache, rows, bad)
        assert err.value.field == "vector"
        with pytest.raises(InvalidInput):
            cache.upsert(rows, bad)
    assert dump(conn) == before
    assert not cache.exists()
    with pytest.raises(InvalidInput):
        cache.search(np.ones(8), 3, agent_id="agent_0", user_id="user_0")


def test_layout_mismatch_is_refused(store):
    conn, repo = store
    _fill(conn, repo, n=10)
    with pytest.raises(StoreError, match="rebuild"):
        VectorCache(conn, model_version="fake-v1", dim=16, dtype="int8").ensure()


def test_rebuild_gives_identical_results(store):
    conn, repo = store
    rows, records, cache, _ = _fill(conn, repo)
    q = fake_embed(["rebuild query"])[0]
    before = [cache.search(q, 15, agent_id="agent_0", user_id=u, layers=["long_term", "short_term"])
              for u in ("u0", "u1")]
    cache.drop()
    assert not cache.exists()
    report = cache.rebuild()
    assert report == {"written": len(rows), "missing": []}
    after = [cache.search(q, 15, agent_id="agent_0", user_id=u, layers=["long_term", "short_term"])
             for u in ("u0", "u1")]
    for (r1, c1), (r2, c2) in zip(before, after):
        assert r1.tolist() == r2.tolist()
        np.testing.assert_array_equal(c1, c2)


def test_rebuild_marks_uncached_vectors_pending(store):
    conn, repo = store
    rows, records, cache, _ = _fill(conn, repo, n=6)
    conn.execute("DELETE FROM embedding_cache WHERE text_hash = (SELECT text_hash FROM "
                 "memory_records WHERE rowid = ?)", (rows[2],))
    report = cache.rebuild()
    assert report == {"written": 5, "missing": [rows[2]]}
    assert repo.pending("fake-v1", limit=10) == [rows[2]]
    assert repo.get_rows([rows[2]])[0].embedding_status == "pending"


def test_int8_scaled_and_parity(store):
    conn, repo = store
    rows, records, cache, _ = _fill(conn, repo, n=120, dtype="int8", int8_scale=0.5)
    v = fake_embed([records[0].text])[0]
    expect = np.clip(np.rint(v / 0.5 * 127), -127, 127).astype(np.int8)
    np.testing.assert_array_equal(quantize_int8(v, 0.5), expect)
    np.testing.assert_allclose(cache.vectors([rows[0]])[0], expect * 0.5 / 127, atol=1e-7)
    index = ExactIndex.load(cache)
    fresh = ExactIndex(dim=16, dtype="int8", int8_scale=0.5)
    fresh.add(rows, fake_embed([r.text for r in records]), load_meta(conn, rows))
    q = fake_embed(["int8 query"])[0]
    r1, c1 = cache.search(q, 10, agent_id="agent_0", user_id="u1")
    for idx in (index, fresh):
        r2, c2 = idx.search(q, 10, agent_id="agent_0", user_id="u1")
        assert r1.tolist() == r2.tolist()
        np.testing.assert_allclose(c1, c2, atol=1e-5)


def test_exact_index_stays_in_step(store):
    conn, repo = store
    rows, records, cache, gen = _fill(conn, repo, n=30)
    index = ExactIndex.load(cache)
    assert index.generation == gen
    [new] = add(repo, [rec("new", "fresh memory", user_id="u0")])
    v = fake_embed(["fresh memory"])
    gen2 = repo.put_vectors(cache, [new], v)
    index.add([new], v, load_meta(conn, [new]), generation=gen2)
    assert not index.stale and not index.sync(cache)
    got, _ = index.search(v[0], 1, agent_id="agent_0", user_id="u0")
    assert got.tolist() == [new]
    repo.delete(["new"])            # written behind the index's back
    assert index.sync(cache)        # generation moved: reloaded
    got, _ = index.search(v[0], 1, agent_id="agent_0", user_id="u0")
    assert got.tolist() != [new] and len(index) == 30
    gen3 = cache.delete([rows[0]])
    index.remove([rows[0]], generation=gen3)
    assert len(index) == 29 and not index.stale


def test_update_fields_moves_vector_metadata(store):
    conn, repo = store
    rows, records, cache, _ = _fill(conn, repo, n=9, partitioned=True)
    q = cache.vectors([rows[0]])[0]
    assert cache.search(q, 1, agent_id="agent_0", user_id="u0")[0].tolist() == [rows[0]]
    repo.update_fields("m0", lifecycle_state="expired")
    assert rows[0] not in cache.search(q, 5, agent_id="agent_0", user_id="u0")[0].tolist()
    repo.update_fields("m0", lifecycle_state="active", user_id="u9", event_time=T0 + 400 * DAY)
    got, _ = cache.search(q, 1, agent_id="agent_0", user_id="u9", since=T0 + 399 * DAY,
                          until=T0 + 401 * DAY)
    assert got.tolist() == [rows[0]]
    repo.update_fields("m0", text="a new text", terms=["new", "text"])
    assert cache.count() == 8 and repo.pending("fake-v1", limit=5) == [rows[0]]


def test_vector_cache_from_config(store):
    conn, _ = store
    cfg = MemlabConfig().replace(**{"store.vector_dtype": "int8",
                                    "store.partition_by_quarter": True})
    c = vector_cache(conn, model_version="x", dim=8, config=cfg)
    assert (c.dtype, c.partitioned, c.int8_scale) == ("int8", True, 0.25)


def test_exact_index_breaks_ties_at_the_kth_cosine_by_rowid_not_by_position():
    """Equal cosines at the cut-off: the top k are the first k of (cosine desc, rowid asc),
    whatever order the rows were added in (a re-embedded memory is appended at the end)."""
    from memlab.store import VectorMeta

    vecs = np.zeros((12, 4), np.float32)
    vecs[:, 0] = 1.0                                # all twelve tie with the query
    vecs[0] = [0.0, 1.0, 0.0, 0.0]                  # rowid 1: orthogonal, ranks last
    meta = [VectorMeta("agent_0", "user_0", "long_term", "semantic", 0, True)] * 12
    rowids = np.arange(1, 13)
    q = np.array([1.0, 0.0, 0.0, 0.0], np.float32)
    results = []
    for order in (np.arange(12), np.arange(12)[::-1], np.r_[5:12, 0:5]):
        index = ExactIndex(dim=4)
        index.add(rowids[order], vecs[order], [meta[i] for i in order])
        got, cos = index.search(q, 4, agent_id="agent_0", user_id="user_0")
        results.append(got.tolist())
    assert results == [[2, 3, 4, 5]] * 3

"""The bulk write path (issue 22, item 2): a batch of many records with their vectors.

A batch stores exactly what the same items added one by one store (rows, postings, term and owner
statistics, entity links, vectors, layers routed under budget pressure, recall); it is all or
nothing, also when the vector insert (no delete for new rowids) is what fails; and the change log
it leaves lets a loaded MemoryIndex sync to the state a fresh load reads.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import StoreError
from memlab.store.memindex import MemoryIndex
from memlab.store.vectors import load_meta
from memlab.write.layers import Budget

T0 = 1_750_000_000.0
DIM = 16
TEXTS = ["Caroline bought a red bicycle in Shenzhen last spring, it cost 420 dollars.",
         "小明昨天在北京买了一辆红色的自行车，花了三百元。",
         "Mia and Caroline went hiking near the river on Sunday.",
         "我和妹妹一起在上海看了一场演唱会，感觉很开心。",
         "Caroline's new job at the bakery starts in March.",
         "小明的生日是三月五日，他最喜欢吃蛋糕。",
         "The blue guitar Mia bought second-hand was broken.",
         "周末我们在杭州的咖啡馆讨论了新的项目计划。"]
QUERIES = ["What did Caroline buy?", "小明买了什么？", "Where did Mia go hiking?",
           "演唱会在哪里？"]


class KeyedEmbedder:
    """Deterministic unit vectors keyed by the text (a fake: no model)."""

    version, dim = "test-keyed-16", DIM

    def _vec(self, text: str) -> np.ndarray:
        seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
        v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        return v / np.linalg.norm(v)

    def embed_documents(self, texts):
        return np.stack([self._vec(t) for t in texts])

    def embed_queries(self, texts):
        return np.stack([self._vec("q:" + t) for t in texts])


def _items(n: int) -> list[dict]:
    """n items over two owners; a third have no layer (routed under budget pressure), the rest
    alternate long and short term; ids given so two stores are comparable."""
    out = []
    for i in range(n):
        item = {"text": f"{TEXTS[i % len(TEXTS)]} ({i})", "id": f"m{i:04d}",
                "timestamp": T0 - 3600.0 * (n - i), "importance": round(0.3 + 0.6 * (i % 7) / 6, 3),
                "user_id": "u1" if i % 5 else "u2"}
        if i % 3:
            item["layer"] = "long_term" if i % 2 else "short_term"
        if i % 4 == 0:
            item["emotions"] = {"joy": 10 + i % 80}
        if i % 6 == 1:
            item["event_time"] = T0 - 86400.0 * 200 - 0.5 * i
        out.append(item)
    return out


def _cfg() -> MemlabConfig:
    # a small long-term budget: the items routed by importance meet rising thresholds
    # (floor 0: every candidate relevant, so that each query ranks memories to compare)
    return MemlabConfig().replace(**{"governance.long_term_char_budget": 600,
                                     "recall.expanded_keys": True,
                                     "recall.floor_mode": "absolute",
                                     "recall.relevance_floor": 0.0})


def _open(path, cfg=None):
    return memlab.open_store(path, config=cfg or _cfg(), embedder=KeyedEmbedder(),
                             clock=FixedClock(T0), load_embedder=False)


def _contents(conn) -> dict[str, list]:
    """Every table the write path fills, by memory id (rowids, generations aside)."""
    q = lambda sql: [tuple(r) for r in conn.execute(sql)]   # noqa: E731
    return {
        "records": q("SELECT id, text, agent_id, user_id, retention_layer, cognitive_layer, "
                     "timestamp, importance, emotions_json, emotion_max, terms_json, n_terms, "
                     "keys_json, embedding_status, embedding_model_version, text_hash "
                     "FROM memory_records ORDER BY id"),
        "postings": q("SELECT o.user_id, t.term, r.id, t.dl FROM memory_terms t JOIN memory_owners o "
                      "ON o.id = t.owner JOIN memory_records r ON r.rowid = t.rowid ORDER BY 1, 2, 3"),
        "term_stats": q("SELECT o.user_id, s.term, s.df FROM term_stats s JOIN memory_owners o "
                        "ON o.id = s.owner ORDER BY 1, 2"),
        "key_stats": q("SELECT o.user_id, s.term, s.df FROM key_stats s JOIN memory_owners o "
                       "ON o.id = s.owner ORDER BY 1, 2"),
        "owners": q("SELECT agent_id, user_id, n_docs, total_terms FROM memory_owners ORDER BY 1, 2"),
        "entities": q("SELECT e.name, r.id FROM memory_entity_links l JOIN memory_entities e "
                      "ON e.id = l.entity_id JOIN memory_records r ON r.rowid = l.rowid "
                      "ORDER BY 1, 2"),
        "embedded": q("SELECT r.id, e.model_version, e.text_hash FROM memory_embeddings e "
                      "JOIN memory_records r ON r.rowid = e.rowid ORDER BY 1"),
        "cache": q("SELECT model_version, text_hash, vector FROM embedding_cache ORDER BY 1, 2"),
    }


def _vectors(st) -> dict[str, bytes]:
    s = st._store
    rows = s.conn.execute(f"SELECT r.id, v.embedding FROM {s.vectors.table} v "
                          "JOIN memory_records r ON r.rowid = v.rowid").fetchall()
    meta = s.conn.execute(f"SELECT r.id, v.agent_id, v.user_id, v.retention_layer, "
                          f"v.cognitive_layer, v.event_time, v.active, v.event_bucket FROM "
                          f"{s.vectors.table} v JOIN memory_records r ON r.rowid = v.rowid "
                          "ORDER BY 1").fetchall()
    return {"blobs": dict(rows), "meta": [tuple(m) for m in meta]}


def test_a_batch_stores_what_the_items_one_by_one_store(tmp_path):
    items = _items(60)
    vecs = KeyedEmbedder().embed_documents([it["text"] for it in items])
    with _open(tmp_path / "bulk.sqlite") as bulk, _open(tmp_path / "one.sqlite") as one:
        bulk.add_many(items, vectors=vecs)
        for j, it in enumerate(items):
            one.add_many([it], vectors=vecs[j:j + 1])
        a, b = _contents(bulk._store.conn), _contents(one._store.conn)
        assert a == b
        layers = {r[4] for r in a["records"]}
        assert layers == {"long_term", "short_term"}
        # the budget pressure rose during the write: some items without a layer, importance
        # above the 0.6 base threshold, went short term
        routed_short = [r for r, it in zip(a["records"], items)
                        if "layer" not in it and r[7] > 0.6 and r[4] == "short_term"]
        assert routed_short
        assert _vectors(bulk) == _vectors(one)
        # the filter columns written from the records in hand are those the rows hold
        s = bulk._store
        rows = s.conn.execute(f"SELECT rowid, agent_id, user_id, retention_layer, "
                              f"cognitive_layer, event_time, active FROM {s.vectors.table} "
                              "ORDER BY rowid").fetchall()
        assert len(rows) == 60
        truth = load_meta(s.conn, [r[0] for r in rows])
        assert [tuple(r[1:]) for r in rows] == [
            (m.agent_id, m.user_id, m.retention_layer, m.cognitive_layer, m.event_time,
             int(m.active)) for m in truth]
        for q in QUERIES:
            for user in ("u1", "u2"):
                ra = bulk.recall(q, k=5, user_id=user)
                rb = one.recall(q, k=5, user_id=user)
                assert [m.id for m in ra.memories] == [m.id for m in rb.memories]
                assert ra.memories, q


def test_a_batch_with_one_invalid_record_stores_nothing(tmp_path):
    with _open(tmp_path / "s.sqlite") as st:
        items = _items(20)
        vecs = KeyedEmbedder().embed_documents([it["text"] for it in items])
        st.add_many(items[:10], vectors=vecs[:10])
        before = _contents(st._store.conn)
        gen = st._store.conn.execute("SELECT gen FROM memory_generation").fetchone()[0]
        vec_gen = st._store.vectors.generation()
        bad = [dict(it) for it in items[10:]]
        bad[7]["importance"] = 1.5
        with pytest.raises(memlab.errors.InvalidInput, match=r"items\[7\]\.importance"):
            st.add_many(bad, vectors=vecs[10:])
        # a failure inside the transaction, after the records and postings were inserted: the
        # vector table already holds the rowid the next record gets (written behind memlab's
        # back); the insert of new rows does not replace it, it fails, and the batch with it
        s = st._store
        nxt = s.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'memory_records'"
                             ).fetchone()[0] + 5
        s.conn.execute(f"INSERT INTO {s.vectors.table} (rowid, embedding, agent_id, user_id, "
                       "retention_layer, cognitive_layer, event_time, active, event_bucket) "
                       "VALUES (?, ?, 'a', 'u', 'long_term', 'semantic', 0, 1, '1970-Q1')",
                       (nxt, np.ones(DIM, np.float32).tobytes()))
        with pytest.raises(StoreError):
            st.add_many(items[10:], vectors=vecs[10:])
        assert _contents(s.conn) == before
        assert s.conn.execute("SELECT gen FROM memory_generation").fetchone()[0] == gen
        assert s.vectors.generation() == vec_gen
        assert s.conn.execute("SELECT count(*) FROM memory_changes WHERE row > ?",
                              (nxt - 5,)).fetchone()[0] == 0
        assert len(st) == 10


def _answers(ix, conn, rowids):
    """What recall asks of the MemoryIndex, for every owner: routes and stored signals."""
    out = {}
    for user in ("u1", "u2"):
        kw = dict(agent_id="agent_0", user_id=user)
        out[user, "lex"] = [a.tolist() for a in ix.lexical_candidates(
            ["caroline", "bicycle", "小明", "自行车", "演唱会", "mia"], limit=50, **kw)]
        out[user, "ent"] = [a.tolist() for a in ix.entity_candidates(
            ["Caroline", "Mia", "小明"], limit=50, **kw)]
        out[user, "perm"] = ix.permanent_candidates(limit=50, **kw).tolist()
    cols = ix.feature_columns(rowids)
    out["cols"] = {k: (repr(v.tolist()) if isinstance(v, np.ndarray) else   # repr: NaN == NaN
                       [sorted(t) for t in v] if k == "terms" else list(v))
                   for k, v in cols.items()}
    out["layout"] = [a.tolist() for a in ix.session_layout(rowids)]
    return out


def test_after_a_batch_a_loaded_memory_index_syncs_to_a_fresh_load(tmp_path):
    path = tmp_path / "s.sqlite"
    items = _items(80)
    for it in items:
        it["session_id"] = f"s{int(it['id'][1:]) // 10}"
    vecs = KeyedEmbedder().embed_documents([it["text"] for it in items])
    cfg = _cfg()
    with _open(path) as st:
        st.add_many(items[:20], vectors=vecs[:20])
        conn = st._store.conn
        ix = MemoryIndex.load(conn, config=cfg)
        with _open(path) as other:      # another connection writes the bulk batch
            other.add_many(items[20:], vectors=vecs[20:])
        assert ix.sync(conn) > 0
        rowids = [r[0] for r in conn.execute("SELECT rowid FROM memory_records ORDER BY rowid")]
        assert len(rowids) == 80
        fresh = MemoryIndex.load(conn, config=cfg)
        synced, loaded = _answers(ix, conn, rowids), _answers(fresh, conn, rowids)
        assert synced == loaded
        sql = st._store.repo
        lex = sql.lexical_candidates(["caroline", "自行车"], agent_id="agent_0", user_id="u1",
                                     limit=50)
        got = ix.lexical_candidates(["caroline", "自行车"], agent_id="agent_0", user_id="u1",
                                    limit=50)
        assert lex[0].tolist() == got[0].tolist()
        np.testing.assert_allclose(lex[2], got[2], rtol=1e-9)


def test_the_budget_reads_an_owner_usage_only_when_a_layer_is_routed():
    calls = []

    def layer_chars(layer, *, agent_id, user_id):
        calls.append((layer, agent_id, user_id))
        return 150_000

    cfg = MemlabConfig()
    b = Budget(layer_chars, layers=cfg.layers, gov=cfg.governance)
    owner = ("a", "u")
    b.charge(owner, "long_term", 20_000)     # an explicit layer: nothing read
    b.charge(owner, "short_term", 5_000)
    assert calls == []
    # usage (150,000 + 20,000) / 200,000 = 0.85: 0.6 + (0.85 - 0.7) / 0.3 * (0.95 - 0.6) = 0.775
    assert b.threshold(owner) == pytest.approx(0.6 + (0.85 - 0.7) / 0.3 * 0.35)
    assert calls == [("long_term", "a", "u")]
    b.charge(owner, "long_term", 10_000)     # (180,000 / 200,000 = 0.9) -> 0.6 + 0.2/0.3*0.35
    assert b.threshold(owner) == pytest.approx(0.6 + (0.9 - 0.7) / 0.3 * 0.35)
    assert len(calls) == 1

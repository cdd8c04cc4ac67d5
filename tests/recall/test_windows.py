"""The window max of long memories (issue 21, ``chunk.*``): windows split by hand in en and zh,
a fake embedder with known vectors (the chunk max of a 3-window memory worked out by hand), the
window vectors stored with their memory (all or nothing, deleted with it, dropped with its old
text) and a store written before the migration still opening."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import ConfigError
from memlab.store import Store
from memlab.store.windows import WindowVectors
from memlab.text import extract_entities, memory_terms
from memlab.types import MemoryRecord
from memlab.windows import sized_in_chars, split, unit_spans, window_max, window_starts

NOW = datetime(2025, 6, 1, tzinfo=timezone.utc).timestamp()
SMALL = {"chunk.enabled": True, "chunk.words": 4, "chunk.min_words": 6, "chunk.chars": 4,
         "chunk.min_chars": 6, "chunk.overlap": 0.5}


def _chunk(**over):
    return MemlabConfig().replace(**{**SMALL, **over}).chunk


# -- splitting --------------------------------------------------------------------------------
def test_english_is_split_in_words_with_overlap():
    """8 words, windows of 4, overlap 0.5 (stride 2): starts 0, 2, 4 -> three windows, the
    text's own spacing and punctuation kept."""
    assert split("a b c d e f g h", _chunk()) == ["a b c d", "c d e f", "e f g h"]
    assert split("One two, three  four five six seven", _chunk()) == [
        "One two, three  four", "three  four five six", "four five six seven"]


def test_chinese_is_split_in_characters():
    """8 characters, no spaces: windows of 4 characters every 2."""
    assert split("我今天去了北京城", _chunk()) == ["我今天去", "天去了北", "了北京城"]


def test_a_text_up_to_the_minimum_is_not_split():
    """min_words 6: 6 words stay whole, 7 are split (the last window ends at the last word:
    starts 0, 2 and 3)."""
    assert split("a b c d e f", _chunk()) == []
    assert split("a b c d e f g", _chunk()) == ["a b c d", "c d e f", "d e f g"]
    assert split("一二三四五六", _chunk()) == []
    assert len(split("一二三四五六七", _chunk())) == 3


def test_units_and_the_language_of_a_mixed_text():
    """A CJK character is one unit, a Latin word another: 我在 Google 工作了三年 has 8 units, 7 of
    them CJK, so it is sized in characters; an English sentence with one Chinese name is not."""
    text = "我在 Google 工作了三年"
    spans = unit_spans(text)
    assert [text[a:b] for a, b in spans] == ["我", "在", "Google", "工", "作", "了", "三", "年"]
    assert sized_in_chars(text, spans)
    en = "I met 小林 at the cafe"
    assert not sized_in_chars(en, unit_spans(en))


def test_window_starts_and_the_cap():
    """20 units, size 4, stride 2: starts 0, 2, ..., 16 (9 windows); capped at 3 they spread
    evenly: 0, 8, 16. Overlap 0: stride 4, and 10 units end with a window at 6."""
    assert window_starts(20, 4, 0.5, 16) == list(range(0, 17, 2))
    assert window_starts(20, 4, 0.5, 3) == [0, 8, 16]
    assert window_starts(10, 4, 0.0, 16) == [0, 4, 6]
    assert window_starts(4, 4, 0.5, 16) == []


def test_window_max_per_owner():
    """Owner 0 has windows of cosine 0, 0.8 and 0.28 with the query: max 0.8; owner 1 has none:
    NaN; owner 2 one window of cosine -0.5."""
    q = np.array([1.0, 0.0])
    vecs = np.array([[0.0, 1.0], [0.8, 0.6], [0.28, 0.96], [-0.5, np.sqrt(0.75)]])
    got = window_max(q, np.array([0, 0, 0, 2]), vecs, 3)
    assert got[0] == pytest.approx(0.8) and np.isnan(got[1]) and got[2] == pytest.approx(-0.5)


def test_the_minimum_must_reach_the_window():
    with pytest.raises(ConfigError, match="chunk.min_words"):
        MemlabConfig().replace(**{"chunk.words": 10, "chunk.min_words": 9})
    with pytest.raises(ConfigError, match="chunk.min_chars"):
        MemlabConfig().replace(**{"chunk.chars": 10, "chunk.min_chars": 9})


# -- a fake embedder with known vectors -----------------------------------------------------------
LONG_EN = "w1 w2 w3 w4 w5 w6 w7 w8"
LONG_ZH = "一二三四五六七八"
QUERY = "which one"
VECTORS = {   # unit vectors in 4 dimensions; the query is e0
    LONG_EN: [0.6, 0.8, 0, 0], "w1 w2 w3 w4": [0, 1, 0, 0], "w3 w4 w5 w6": [0.8, 0.6, 0, 0],
    "w5 w6 w7 w8": [0.28, 0.96, 0, 0],
    LONG_ZH: [0.5, 0, np.sqrt(0.75), 0], "一二三四": [0.9, 0, np.sqrt(0.19), 0],
    "三四五六": [0.1, 0, np.sqrt(0.99), 0], "五六七八": [0, 0, 1, 0],
    "w1 w9": [0.6, 0, 0.8, 0],
}


class KnownEmbedder:
    """Known vectors for the texts above; the query e0; any other text (the background sample)
    e3. Records the documents it embeds."""

    name, version, dim = "known", "known-v1", 4

    def __init__(self) -> None:
        self.documents: list[str] = []

    def embed_documents(self, texts):
        self.documents.extend(texts)
        return np.array([VECTORS.get(t, [0, 0, 0, 1]) for t in texts], np.float32)

    def embed_queries(self, texts):
        return np.array([[1, 0, 0, 0] if t == QUERY else [0, 0, 0, 1] for t in texts],
                        np.float32)


def _open(path=":memory:", **over):
    cfg = MemlabConfig().replace(**{"recall.floor_mode": "absolute", **SMALL, **over})
    return memlab.open_store(path, config=cfg, embedder=KnownEmbedder(), clock=FixedClock(NOW))


def _columns(store):
    t = store.features([QUERY], k=5, now=NOW + 10).table
    ids = store.features([QUERY], k=5, now=NOW + 10).ids
    return {ids[int(r)]: (c, m, g) for r, c, m, g in
            zip(t["row"], t["cosine"], t["chunk_max"], t["chunk_gain"])}


def test_chunk_max_of_a_three_window_memory_en_and_zh():
    """en: whole cosine 0.6, windows 0, 0.8, 0.28 -> chunk_max 0.8, gain 0.2. zh: whole 0.5,
    windows 0.9, 0.1, 0 -> 0.9, gain 0.4. A short memory (not split): chunk_max = its cosine 0.6,
    gain 0. The windows embedded are exactly the hand-split ones."""
    store = _open()
    store.add_many([{"text": LONG_EN, "id": "en"}, {"text": LONG_ZH, "id": "zh"},
                    {"text": "w1 w9", "id": "short"}])
    assert [t for t in store.embedder.documents if t in VECTORS] == [
        LONG_EN, LONG_ZH, "w1 w9", "w1 w2 w3 w4", "w3 w4 w5 w6", "w5 w6 w7 w8", "一二三四",
        "三四五六", "五六七八"]
    got = _columns(store)
    assert got["en"] == pytest.approx((0.6, 0.8, 0.2), abs=1e-6)
    assert got["zh"] == pytest.approx((0.5, 0.9, 0.4), abs=1e-6)
    assert got["short"] == pytest.approx((0.6, 0.6, 0.0), abs=1e-6)


def test_off_the_columns_are_nan_and_no_window_is_written():
    store = _open(**{"chunk.enabled": False})
    store.add_many([{"text": LONG_EN, "id": "en"}])
    _, m, g = _columns(store)["en"]
    assert np.isnan(m) and np.isnan(g)
    assert [t for t in store.embedder.documents if t in VECTORS] == [LONG_EN]


# -- storage ------------------------------------------------------------------------------------
def _windows(path):
    with sqlite3.connect(path) as c:
        return c.execute("SELECT m.id, w.pos FROM memory_windows w JOIN memory_records m "
                         "ON m.rowid = w.row ORDER BY m.id, w.pos").fetchall()


def test_a_refused_write_leaves_no_window(tmp_path):
    """The second batch repeats the id 'en': the whole batch is refused, the new long memory's
    windows with it."""
    path = tmp_path / "s.sqlite"
    store = _open(path)
    store.add_many([{"text": LONG_EN, "id": "en"}])
    with pytest.raises(Exception):
        store.add_many([{"text": LONG_ZH, "id": "zh"}, {"text": "w1 w9", "id": "en"}])
    store.close()
    assert _windows(path) == [("en", 0), ("en", 1), ("en", 2)]


def _rec(i: str, text: str) -> MemoryRecord:
    return MemoryRecord(id=i, text=text, agent_id="a", user_id="u", retention_layer="long_term",
                        cognitive_layer="episodic", timestamp=NOW, importance=0.5,
                        embedding_status="pending", lifecycle_state="active",
                        epistemic_status="asserted")


def _store_add(store, recs, windows):
    emb = store.vectors.model_version
    vecs = np.array([VECTORS.get(r.text, [0, 0, 0, 1]) for r in recs], np.float32)
    return store.add(recs, terms=[memory_terms(r.text) for r in recs],
                     entities=[extract_entities(r.text) for r in recs], vectors=vecs,
                     windows=windows), emb


def test_deleting_a_memory_deletes_its_windows_and_a_new_text_drops_them(tmp_path):
    path = tmp_path / "s.sqlite"
    store = Store.open(path, config=MemlabConfig(), embedder=KnownEmbedder())
    w = np.eye(4, dtype=np.float32)[:3]
    _store_add(store, [_rec("a", LONG_EN), _rec("b", LONG_ZH), _rec("c", "w1 w9")],
               [w, w[:2], np.zeros((0, 4), np.float32)])
    assert _windows(path) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    store.repo.delete(["a"])
    assert _windows(path) == [("b", 0), ("b", 1)]
    store.repo.update_fields("b", terms=["x"], text="another text")
    assert _windows(path) == []
    rows, vecs = WindowVectors(store.conn, "known-v1").of(store.repo.ids_to_rows(["c"]))
    assert len(rows) == 0 and vecs.shape == (0, 0)
    store.close()


def test_a_store_of_schema_10_opens_and_reads_as_not_split(tmp_path):
    """A store as written before the windows' migration (version 10: no memory_windows table)
    migrates on open; its long memory has no window, so chunk_max is its whole-text cosine; a
    memory written now gets its windows."""
    path = tmp_path / "old.sqlite"
    old = _open(path, **{"chunk.enabled": False})
    old.add_many([{"text": LONG_EN, "id": "en"}])
    old.close()
    with sqlite3.connect(path) as c:     # back to version 10, as an older memlab left it
        c.execute("DROP TABLE memory_windows")
        c.execute("DELETE FROM schema_migrations WHERE version = 11")
        c.execute("PRAGMA user_version = 10")
    store = _open(path)
    with sqlite3.connect(path) as c:
        assert c.execute("PRAGMA user_version").fetchone()[0] == 11
    assert store.count() == 1
    assert _columns(store)["en"] == pytest.approx((0.6, 0.6, 0.0), abs=1e-6)
    store.add_many([{"text": LONG_ZH, "id": "zh"}])
    assert _columns(store)["zh"] == pytest.approx((0.5, 0.9, 0.4), abs=1e-6)
    store.close()

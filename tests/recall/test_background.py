"""memlab.recall.background: the sample that calibrates the zscore relevance floor (issue 7,
defect 13): language of a text, the shipped sample, the statistics worked out by hand, the
feature-table columns, and 'embedded once per embedder version' through the store's cache."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.errors import ConfigError, EmbeddingUnavailable, InvalidInput
from memlab.recall import background as B

CJK = re.compile(r"[\u3400-\u9fff]")
#: the question calibration (an option: the default is none) is what most tests here check
CALIBRATED = MemlabConfig().replace(**{"recall.background_calibration": "same_language"})
HASHING = CALIBRATED.replace(**{"embedding.backend": "hashing"})   # default floor: zscore


@pytest.mark.parametrize("text, share, code", [
    ("用户最喜欢玩星露谷物语", 1.0, B.ZH),
    ("I like green tea", 0.0, B.EN),
    ("Lim Jia Hui: 我今天去爬山了，好累", 9 / (9 + 3), B.ZH),   # 9 characters, 3 Latin words
    ("The user likes 星露谷物语", 5 / (5 + 3), B.BOTH),        # mixed: both samples pooled
    ("🙂🙂 123 !!", math.nan, B.BOTH),                          # neither: both
])
def test_language_is_the_share_of_cjk_characters_against_latin_words(text, share, code):
    got = B.cjk_share(text)
    assert (math.isnan(got) and math.isnan(share)) or got == pytest.approx(share)
    assert B.language_codes([text], MemlabConfig().recall).tolist() == [code]


@given(st.lists(st.text(alphabet=st.sampled_from("ab Zé×你好\U00020001 1!\n🙂"), max_size=12),
                max_size=6))
def test_batch_language_codes_agree_with_the_share_of_each_text(texts):
    rc = MemlabConfig().recall
    expected = [B.BOTH if math.isnan(s := B.cjk_share(t)) else
                B.ZH if s >= rc.background_zh_share else B.EN if s <= rc.background_en_share
                else B.BOTH for t in texts]
    assert B.language_codes(texts, rc).tolist() == expected


def test_language_thresholds_come_from_config():
    rc = MemlabConfig().replace(**{"recall.background_zh_share": 0.6}).recall
    assert B.language_codes(["The user likes 星露谷物语"], rc).tolist() == [B.ZH]   # 0.625
    with pytest.raises(ConfigError, match="background_en_share"):
        MemlabConfig().replace(**{"recall.background_en_share": 0.8})


def test_the_shipped_sample_has_300_sentences_per_language():
    texts = B.load_texts(MemlabConfig().recall)
    assert set(texts) == {"zh", "en"}
    for lang, lines in texts.items():
        assert len(lines) == 300 == len(set(lines))
        assert not any(t.startswith("#") for t in lines)
        assert all(bool(CJK.search(t)) == (lang == "zh") for t in lines), lang
    short = B.load_texts(MemlabConfig().replace(**{"recall.background_max": 10}).recall)
    assert short["zh"] == texts["zh"][:10] and short["en"] == texts["en"][:10]


def test_a_sample_of_ones_own_and_its_errors(tmp_path):
    (tmp_path / "background_zh.txt").write_text("# 注释\n今天下雨了。\n\n我去上班了。\n", "utf-8")
    (tmp_path / "background_en.txt").write_text("It rained.\nI went to work.\n", "utf-8")
    rc = MemlabConfig().replace(**{"recall.background_dir": str(tmp_path)}).recall
    assert B.load_texts(rc) == {"zh": ["今天下雨了。", "我去上班了。"],
                                "en": ["It rained.", "I went to work."]}
    (tmp_path / "background_en.txt").write_text("It rained.\n", "utf-8")
    with pytest.raises(ConfigError, match="at least 2") as err:
        B.load_texts(rc)
    assert err.value.key == "recall.background_dir"
    (tmp_path / "background_en.txt").unlink()
    with pytest.raises(ConfigError, match="background_en.txt"):
        B.load_texts(rc)


def _tiny() -> B.Background:
    docs = {"zh": np.array([[1, 0], [0, 1]], np.float32), "en": np.array([[1, 0], [1, 0]],
                                                                         np.float32)}
    queries = {"zh": np.array([[0, 1], [0, 1]], np.float32), "en": np.array([[1, 0], [0, 1]],
                                                                            np.float32)}
    return B.Background.from_vectors("tiny", docs, queries)


def test_statistics_worked_by_hand():
    bg = _tiny()
    mean, std = bg.query_stats(np.array([1.0, 0.0]))
    # zh docs: cosines (1, 0): mean 0.5, std 0.5; en (1, 1): 1, 0; both (1, 0, 1, 1): 0.75, sqrt(3)/4
    np.testing.assert_allclose(mean, [0.5, 1.0, 0.75])
    np.testing.assert_allclose(std, [0.5, 0.0, math.sqrt(3) / 4])
    m = np.array([[1.0, 0.0], [0.6, 0.8]])
    mean, std = bg.memory_stats(m, B.EN)     # against en queries (1,0), (0,1)
    np.testing.assert_allclose(mean, [0.5, 0.7])
    np.testing.assert_allclose(std, [0.5, 0.1])
    mean, std = bg.memory_stats(m, B.ZH)     # against zh queries (0,1), (0,1)
    np.testing.assert_allclose(mean, [0.0, 0.8])
    np.testing.assert_allclose(std, [0.0, 0.0])
    assert bg.memory_stats(np.zeros((0, 2)), B.BOTH)[0].shape == (0,)


def test_calibration_against_real_questions_worked_by_hand():
    """zh statements as memories d1 (1,0), d2 (0,1); zh statements as questions s1 (1,0),
    s2 (0.6,0.8): d1's cosines 1, 0.6 (mean 0.8, std 0.2), d2's 0, 0.8 (0.4, 0.4). zh questions
    q1 (0.8,0.6), q2 (0,1): z_memory (q1,d1) 0, (q2,d1) -4, (q1,d2) 0.5, (q2,d2) 1.5; median
    0.25, absolute deviations 0.25, 4.25, 0.25, 1.25: MAD 0.75, scale 1.4826 * 0.75."""
    eye = np.array([[1, 0], [0, 1]], np.float32)
    bg = B.Background.from_vectors("tiny", {"zh": eye, "en": eye},
                                   {"zh": np.array([[1, 0], [0.6, 0.8]], np.float32),
                                    "en": eye})
    bg = bg.with_questions({"zh": np.array([[0.8, 0.6], [0, 1]], np.float32), "en": eye})
    np.testing.assert_allclose(bg.calibration[B.ZH, B.ZH], [0.25, 1.4826 * 0.75], rtol=1e-6)
    assert bg.calibration.shape == (3, 3, 2)
    # folded into the memory side: (cos - mean') / std' = ((cos - 0.8) / 0.2 - 0.25) / scale
    mean, std = B.calibrate_memory_side(np.array([0.8]), np.array([0.2]),
                                        *bg.calibration[B.ZH, B.ZH])
    np.testing.assert_allclose((1.0 - mean) / std, (1.0 - 0.25) / (1.4826 * 0.75), rtol=1e-6)
    np.testing.assert_allclose(mean, [0.8 + 0.25 * 0.2], rtol=1e-6)
    # which pairs: same_language calibrates zh-zh only; all every pair; none no pair
    mlang = np.array([B.ZH, B.EN, B.BOTH])
    loc, scale = B.pair_calibration(bg, B.ZH, mlang, "same_language")
    np.testing.assert_allclose(loc, [0.25, 0.0, 0.0], rtol=1e-6)
    np.testing.assert_allclose(scale, [1.4826 * 0.75, 1.0, 1.0], rtol=1e-6)
    loc, scale = B.pair_calibration(bg, B.ZH, mlang, "all")
    np.testing.assert_allclose(loc, bg.calibration[B.ZH, :, 0])
    loc, scale = B.pair_calibration(bg, B.ZH, mlang, "none")
    assert loc.tolist() == [0, 0, 0] and scale.tolist() == [1, 1, 1]


def test_the_question_sample_is_memlabs_unless_the_folder_holds_one(tmp_path):
    own = B.load_questions(MemlabConfig().recall)
    assert len(own["zh"]) >= 100 and len(own["en"]) >= 100
    assert all(CJK.search(q) and q.endswith("？") for q in own["zh"])
    assert all(not CJK.search(q) and q.endswith("?") for q in own["en"])
    rc = MemlabConfig().replace(**{"recall.background_dir": str(tmp_path)}).recall
    assert B.load_questions(rc) == own                      # statements only: memlab's questions
    (tmp_path / "background_questions_zh.txt").write_text("# c\n今天下雨吗？\n你去上班吗？\n", "utf-8")
    (tmp_path / "background_questions_en.txt").write_text("Is it raining?\nAre you at work?\n",
                                                          "utf-8")
    assert B.load_questions(rc) == {"zh": ["今天下雨吗？", "你去上班吗？"],
                                    "en": ["Is it raining?", "Are you at work?"]}
    (tmp_path / "background_questions_en.txt").write_text("Only one?\n", "utf-8")
    with pytest.raises(ConfigError, match="background_questions_en.txt needs at least 2"):
        B.load_questions(rc)


def test_the_sample_is_embedded_once_per_embedder_version_and_sample(monkeypatch):
    monkeypatch.setattr(B, "_MEMO", {})
    calls = []

    def embed(texts, query):
        calls.append((len(texts), query))
        return np.ones((len(texts), 2), np.float32) / math.sqrt(2)

    rc = CALIBRATED.replace(**{"recall.background_max": 5}).recall
    first = B.background_for(rc, version="v1", embed=embed)
    assert B.background_for(rc, version="v1", embed=embed) is first
    # zh, en docs; zh, en statements as queries; zh, en questions (the calibration's sample)
    assert calls == [(5, False), (5, False), (5, True), (5, True), (5, True), (5, True)]
    B.background_for(rc, version="v2", embed=embed)                       # another embedder
    B.background_for(CALIBRATED.recall, version="v1", embed=embed)      # another sample
    assert len(calls) == 18


def test_feature_columns_hold_the_statistics_of_each_side():
    """A zh query and a zh / an en memory: q_bg_* against the sample in the memory's language,
    m_bg_* against the sample (as questions) in the query's language, calibrated against real
    questions for a pair of one language (recall.background_calibration 'same_language'):
    mean + location * std, std * scale; a pair of two languages uncalibrated."""
    clock = FixedClock(1_750_000_000)
    with memlab.open_store(":memory:", config=HASHING, clock=clock) as st:
        st.add("我最喜欢的游戏是星露谷物语", importance=0.9)
        st.add("My favourite game is Stardew Valley", importance=0.9)
        bg = st.background()
        query = "我最喜欢什么游戏"
        feats = st.features([query, "favourite game"], k=5, now=clock.now())
        t = feats.table
        for qid, q in enumerate([query, "favourite game"]):
            qvec = st.embedder.embed_queries([q])[0]
            qlang = "zh" if qid == 0 else "en"
            for _, row in t[t["qid"] == qid].iterrows():
                text = feats.texts[int(row["row"])]
                mlang = "zh" if CJK.search(text) else "en"
                qcos = bg.docs[{"zh": B.ZH, "en": B.EN}[mlang]] @ qvec
                mvec = st.embedder.embed_documents([text])[0]
                mcos = bg.queries[{"zh": B.ZH, "en": B.EN}[qlang]] @ mvec
                code = {"zh": B.ZH, "en": B.EN}
                loc, scale = bg.calibration[code[qlang], code[mlang]] if qlang == mlang \
                    else (0.0, 1.0)
                assert qlang != mlang or (loc, scale) != (0.0, 1.0)
                assert row["q_bg_mean"] == pytest.approx(qcos.mean(), abs=1e-6)
                assert row["q_bg_std"] == pytest.approx(qcos.std(), abs=1e-6)
                assert row["m_bg_mean"] == pytest.approx(mcos.mean() + loc * mcos.std(),
                                                         abs=1e-6)
                assert row["m_bg_std"] == pytest.approx(mcos.std() * scale, abs=1e-6)
        assert len(t) >= 3


def test_the_sample_goes_through_the_stores_embedding_cache(tmp_path, monkeypatch,
                                                            counting_embedder):
    """Embedded once, cached by the store's first add (in the add's transaction), then read from
    the store's cache: reopening the store (in a fresh process: the in-memory copy dropped)
    embeds none of it again."""
    sample = B.load_texts(HASHING.recall)
    texts = set(sample["zh"]) | set(sample["en"])
    path = tmp_path / "m.sqlite"
    clock = FixedClock(1_750_000_000)
    monkeypatch.setattr(B, "_MEMO", {})
    with memlab.open_store(path, config=HASHING, clock=clock, embedder=counting_embedder) as st:
        st.add("我最喜欢的游戏是星露谷物语", importance=0.9)
        assert texts <= set(counting_embedder.documents) and texts <= set(counting_embedder.queries)
        st.recall("我最喜欢什么游戏", k=3)
    monkeypatch.setattr(B, "_MEMO", {})
    counting_embedder.documents.clear(), counting_embedder.queries.clear()
    with memlab.open_store(path, config=HASHING, clock=clock, embedder=counting_embedder) as st:
        assert st.recall("我最喜欢什么游戏", k=3).texts == ["我最喜欢的游戏是星露谷物语"]
    assert counting_embedder.documents == [] and counting_embedder.queries == ["我最喜欢什么游戏"]


def _cached(st) -> int:
    return st._store.embeddings.count()


def test_a_recall_never_writes_the_sample_the_next_add_does(tmp_path, monkeypatch):
    """A store whose cache lacks the sample (written with precomputed vectors, as benchmarks
    write): recall embeds it in memory and writes nothing (reads never write); the next add that
    embeds its own text caches it, in its transaction; a refused add caches none of it."""
    monkeypatch.setattr(B, "_MEMO", {})
    clock = FixedClock(1_750_000_000)
    n = 2 * sum(len(v) for v in B.load_texts(HASHING.recall).values())   # as memories, as questions
    n += sum(len(v) for v in B.load_questions(HASHING.recall).values())  # the question sample
    with memlab.open_store(tmp_path / "m.sqlite", config=HASHING, clock=clock) as st:
        st.add_many([{"text": "我最喜欢的游戏是星露谷物语", "importance": 0.9}],
                    vectors=st.embedder.embed_documents(["我最喜欢的游戏是星露谷物语"]))
        assert _cached(st) == 1                      # the memory's own vector, not the sample
        res = st.recall("我最喜欢什么游戏", k=3)
        assert res.texts == ["我最喜欢的游戏是星露谷物语"] and res.to_frame().loc[0, "floor_z"] > 2
        assert _cached(st) == 1
        with pytest.raises(InvalidInput):
            st.add_many([{"text": "今天午饭吃了牛肉面"}, {"text": "a", "id": ""}])
        assert _cached(st) == 1
        st.add("今天午饭吃了牛肉面", importance=0.3)
        assert _cached(st) == n + 2
        st.add("明天去爬山")
        assert _cached(st) == n + 3


class _SampleRefusingEmbedder(HashingEmbedder):
    """Embeds memories and questions, but fails on the background sample (a model that breaks
    mid-session): recall must degrade to lexical, say so and count it, not fabricate a floor."""

    def __init__(self) -> None:
        super().__init__()
        sample = B.load_texts(MemlabConfig().recall)
        self.refuse = set(sample["zh"]) | set(sample["en"])

    def embed_documents(self, texts):
        if any(t in self.refuse for t in texts):
            raise EmbeddingUnavailable("model file vanished")
        return super().embed_documents(texts)


def test_a_sample_that_cannot_be_embedded_degrades_recall_to_lexical(monkeypatch):
    monkeypatch.setattr(B, "_MEMO", {})
    clock = FixedClock(1_750_000_000)
    with memlab.open_store(":memory:", config=HASHING, clock=clock,
                           embedder=_SampleRefusingEmbedder()) as st:
        st.add("我最喜欢的游戏是星露谷物语", importance=0.9)
        st.add("今天午饭吃了牛肉面", importance=0.3)
        res = st.recall("星露谷物语", k=3)
        assert res.texts == ["我最喜欢的游戏是星露谷物语"]            # lexical: 3 of 3 terms shared
        assert np.isnan(res.to_frame()["relevance"]).all() or (res.to_frame()["relevance"] == 0).all()
        assert any("background sample not embedded" in n for n in res.notes)
        st.recall("牛肉面", k=3)
        key = [k for k in st.stats if "background sample not embedded" in k]
        assert len(key) == 1 and st.stats[key[0]] == 2


# -- the packaged vectors of the default embedder ---------------------------------------------------
def test_the_packaged_vectors_are_of_the_shipped_sample_and_the_default_embedder():
    """memlab ships the default embedder's vectors of its own sample: a change of either makes
    them stale (re-package: python -m memlab.recall.background)."""
    from memlab.embed import make_embedder

    rc = MemlabConfig().recall
    version = make_embedder(MemlabConfig()).version
    bg = B.packaged(version, B.sample_digest(B.load_texts(rc)))
    assert bg is not None and bg.packaged
    n = {lang: len(v) for lang, v in B.load_texts(rc).items()}
    assert [len(m) for m in bg.docs] == [n["zh"], n["en"], n["zh"] + n["en"]]
    assert [len(m) for m in bg.queries] == [n["zh"], n["en"], n["zh"] + n["en"]]
    assert B.packaged(version + "-other", B.sample_digest(B.load_texts(rc))) is None
    assert B.packaged(version, "another sample") is None


@pytest.mark.slow
def test_this_machines_embedder_agrees_with_the_packaged_vectors_within_the_tolerance():
    """The promise across CPUs: the default embedder on this machine is within
    recall.background_tolerance of the packaged vectors (made on another CPU family: 0.0030 apart
    at most on the whole sample between AMD EPYC and Intel Xeon), so they are used as they are."""
    from memlab.embed import make_embedder

    monkey_memo = dict(B._MEMO)
    B._MEMO.clear()
    try:
        rc = MemlabConfig().recall
        emb = make_embedder(MemlabConfig())
        live = lambda t, q: emb.embed_queries(t) if q else emb.embed_documents(t)   # noqa: E731
        bg = B.background_for(rc, version=emb.version, embed=live, live=live)
        assert bg.packaged and not bg.replaced
        assert 0.0 <= bg.probe_diff <= rc.background_tolerance
    finally:
        B._MEMO.clear()
        B._MEMO.update(monkey_memo)


# -- the probe: packaged vectors are used only when this machine's embedder agrees with them ------
SMALL = {"zh": ["今天下雨了，我在家看书。", "我们周末去公园散步。", "早饭吃了包子和豆浆。",
                "他下班以后去健身房。", "晚上和朋友一起吃火锅。"],
         "en": ["It rained all day and I read at home.", "We walked in the park on Sunday.",
                "I had toast and tea for breakfast.", "She went to the gym after work.",
                "We had dinner with friends downtown."]}


def _sample_dir(tmp_path, *, shift: float | None = None, rows: str = "all"):
    """A background_dir with SMALL and its hashing-embedder vectors packaged; ``shift`` added to
    every element of the chosen rows of every matrix (a different build moves all of them)."""
    from memlab.embed import make_embedder

    for lang, lines in SMALL.items():
        (tmp_path / f"background_{lang}.txt").write_text("\n".join(lines) + "\n", "utf-8")
    cfg = HASHING.replace(**{"recall.background_dir": str(tmp_path)})
    emb = make_embedder(cfg)
    out = B.write_packaged(tmp_path / B.PACKAGED, cfg.recall, version=emb.version,
                           embed=lambda t, q: emb.embed_queries(t) if q else emb.embed_documents(t))
    if shift is not None:
        with np.load(out) as z:
            arrays = {k: z[k] for k in z.files}
        for k in arrays:
            if k.startswith(("docs_", "queries_")):
                pick = slice(None) if rows == "all" else B.probe_rows(cfg.recall.background_probe,
                                                                      len(arrays[k]))
                arrays[k] = arrays[k].copy()
                arrays[k][pick] += np.float32(shift)
        np.savez_compressed(out, **arrays)
    return cfg, emb


def _live(emb):
    return lambda t, q: emb.embed_queries(t) if q else emb.embed_documents(t)


def test_the_probe_takes_evenly_spaced_sentences():
    assert B.probe_rows(3, 300) == [0, 150, 299]      # round(149.5) is 150 (even)
    assert B.probe_rows(1, 300) == [0]
    assert B.probe_rows(3, 2) == [0, 1]
    assert B.probe_rows(5, 5) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("shift", [None, 0.004, 0.0099])
def test_agreeing_packaged_vectors_are_used_as_they_are(tmp_path, monkeypatch, shift):
    """Within the tolerance (0.01 per element) the packaged vectors are used, even when they are
    not bit-identical to this machine's (shifted by 0.004 or 0.0099): not re-embedded, not
    cached by a store."""
    monkeypatch.setattr(B, "_MEMO", {})
    cfg, emb = _sample_dir(tmp_path, shift=shift)
    calls = []

    def embed(texts, query):
        calls.append(len(texts))
        return _live(emb)(texts, query)

    bg = B.background_for(cfg.recall, version=emb.version, embed=embed, live=_live(emb))
    assert bg.packaged and not bg.replaced and calls == []
    assert bg.probe_diff == pytest.approx(shift or 0.0, abs=1e-6)
    if shift:   # the packaged rows, not this machine's
        assert np.abs(bg.docs[B.ZH] - emb.embed_documents(SMALL["zh"])).max() == \
            pytest.approx(shift, abs=1e-6)
    with memlab.open_store(tmp_path / "m.sqlite", config=cfg, embedder=emb) as st:
        st.add("我最喜欢的游戏是星露谷物语", importance=0.9)
        assert st.background().packaged and st._store.embeddings.count() == 1
        assert B.REPLACED not in st.stats


@pytest.mark.parametrize("rows", ["all", "probed"])
def test_packaged_vectors_beyond_the_tolerance_are_replaced_by_this_machines(tmp_path,
                                                                             monkeypatch, caplog,
                                                                             rows):
    """Shifted by 0.02 (> 0.01): the sample is embedded here, logged once, counted; the store
    caches it like any sample that was not packaged, and recall's floor statistics are those of
    this machine's vectors, not the packaged ones."""
    monkeypatch.setattr(B, "_MEMO", {})
    cfg, emb = _sample_dir(tmp_path, shift=0.02, rows=rows)
    clock = FixedClock(1_750_000_000)
    with caplog.at_level("WARNING", logger="memlab"):
        with memlab.open_store(tmp_path / "m.sqlite", config=cfg, embedder=emb,
                               clock=clock) as st:
            st.add("我最喜欢的游戏是星露谷物语", importance=0.9)
            bg = st.background()
            assert not bg.packaged and bg.replaced
            assert bg.probe_diff == pytest.approx(0.02, abs=1e-6)
            assert st.stats[B.REPLACED] == 1
            nq = sum(map(len, B.load_questions(cfg.recall).values()))   # memlab's questions
            assert st._store.embeddings.count() == 1 + 2 * 10 + nq     # the samples cached
            np.testing.assert_array_equal(bg.docs[B.ZH], emb.embed_documents(SMALL["zh"]))
            np.testing.assert_array_equal(bg.queries[B.EN], emb.embed_queries(SMALL["en"]))
            query = "我最喜欢什么游戏"
            row = st.features([query], k=3, now=clock.now()).table.iloc[0]
            qcos = emb.embed_documents(SMALL["zh"]) @ emb.embed_queries([query])[0]
            assert row["q_bg_mean"] == pytest.approx(qcos.mean(), abs=1e-6)
            assert row["q_bg_std"] == pytest.approx(qcos.std(), abs=1e-6)
        with memlab.open_store(tmp_path / "m.sqlite", config=cfg, embedder=emb,
                               clock=clock) as st:   # the same process: remembered, not redone
            assert st.background().replaced and st.stats[B.REPLACED] == 1
    assert sum("differ from this machine's" in r.getMessage() for r in caplog.records) == 1


def test_a_replay_counts_a_replaced_sample(tmp_path, monkeypatch):
    from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
    from memlab.bench.replay import replay
    from datetime import datetime, timezone

    monkeypatch.setattr(B, "_MEMO", {})
    cfg, emb = _sample_dir(tmp_path, shift=0.5)
    at = datetime(2025, 1, 1, tzinfo=timezone.utc)
    card = Card(name="t", version="1", language="zh", license="CC0-1.0", source="tests",
                granularity="turn", description="a replaced background sample")
    ds = Dataset(card, [Item("c", "i1", "s", "user", "我喜欢星露谷物语", at, {})],
                 [Question("c", "q1", "我喜欢什么游戏", at, "x", ("i1",))])

    class Cache:
        def get_many(self, key, texts):
            return {}

        def put_many(self, key, texts, vecs):
            pass

    rep = replay(ds, cfg=cfg, embedder=emb, cache=Cache(), progress=False)
    assert rep.counts[B.REPLACED] == 1


def test_an_unreadable_packaged_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(B, "_MEMO", {})
    cfg, emb = _sample_dir(tmp_path)
    (tmp_path / B.PACKAGED).write_bytes(b"not an npz")
    with pytest.raises(ConfigError, match="background_vectors.npz") as err:
        B.background_for(cfg.recall, version=emb.version, embed=_live(emb))
    assert err.value.key == "recall.background_dir"


def test_a_packaged_sample_is_not_copied_into_stores(tmp_path):
    from memlab.embed import make_embedder

    cfg = MemlabConfig()
    emb = make_embedder(cfg)
    with memlab.open_store(tmp_path / "m.sqlite", config=cfg, embedder=emb) as st:
        st.add("用户最喜欢玩星露谷物语", importance=0.9)
        assert st.background().packaged
        assert st._store.embeddings.count() == 1                 # the memory's vector only
        assert st.recall("她爱玩什么游戏？", k=3).texts == ["用户最喜欢玩星露谷物语"]

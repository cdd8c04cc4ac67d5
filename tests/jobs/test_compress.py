"""Conversation compression (reverie §11.5): chunks of old turns, the extractive summariser (values
worked out by hand, zh and en), the LLM summariser as a plain callable, storage as their own memory
kind, recall by importance filter + similarity + recency."""

from __future__ import annotations

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.jobs.compress import (KIND, ChatTurn, as_turns, extractive_summary, llm_summariser,
                                  old_chunks)
from memlab.write.importance import score_importance

T0 = 1_700_000_000.0
DAY = 86_400.0
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing"})


def _turns(texts, start=T0, speakers=("A", "B")):
    return [ChatTurn(speakers[i % 2], t, start + 60 * i, f"t{i}") for i, t in enumerate(texts)]


def test_only_full_chunks_older_than_the_recent_window_are_compressed():
    turns = _turns([f"turn {i}" for i in range(30)])
    chunks = old_chunks(turns, keep_recent=20, chunk_turns=8)
    assert [[t.id for t in c] for c in chunks] == [[f"t{i}" for i in range(8)]]   # t8, t9 wait
    chunks = old_chunks(turns + _turns(["more"] * 6, start=T0 + 1e5), keep_recent=20,
                        chunk_turns=8)
    assert [c[0].id for c in chunks] == ["t0", "t8"]
    assert old_chunks(turns[:20], keep_recent=20, chunk_turns=8) == []


def test_extractive_summary_keeps_the_most_central_sentences_en():
    """Terms per sentence (memory_terms) and how many sentences hold each:
    s1 {we should go hiking on saturday}: (1+1+1+3+2+3)/6 = 1.833
    s2 {saturday hiking sounds great}:     (3+3+1+1)/4   = 2.0
    s3 {bring water}:                      (1+2)/2       = 1.5
    s4 {hiking with water on saturday then}: (3+1+2+2+3+1)/6 = 2.0  (tie with s2: earlier wins)"""
    chunk = _turns(["We should go hiking on Saturday.", "Saturday hiking sounds great.",
                    "Bring water.", "Hiking with water on Saturday then."])
    one = CFG.replace(**{"compression.summary_sentences": 1})
    assert extractive_summary(chunk, cfg=one) == "B: Saturday hiking sounds great."
    two = CFG.replace(**{"compression.summary_sentences": 2})
    assert extractive_summary(chunk, cfg=two) == ("B: Saturday hiking sounds great.\n"
                                                  "B: Hiking with water on Saturday then.")
    short = two.replace(**{"compression.summary_max_chars": 20})
    assert extractive_summary(chunk, cfg=short) == "B: Saturday hiking s"


def test_extractive_summary_zh_counts_markers():
    """s1 我下周三过生日: 11 terms (6 bigrams, 5 trigrams), only 生日 in 2 sentences:
    (10 + 2)/11 + 1 marker (生日) = 2.0909; s2 生日快乐提前祝你: (12 + 2)/13 + 1 = 2.0769;
    s3 谢谢: 1 term -> 1.0."""
    chunk = _turns(["我下周三过生日。", "生日快乐提前祝你！", "谢谢。"], speakers=("用户", "助手"))
    one = CFG.replace(**{"compression.summary_sentences": 1})
    assert extractive_summary(chunk, cfg=one) == "用户: 我下周三过生日。"
    # 今天天气不错 (9 terms, 6 shared with the next): (6*2 + 3)/9 = 1.667; 今天天气真的不错
    # (13 terms): (6*2 + 7)/13 = 1.462; 我对花生过敏 (9 terms, none shared): 1.0, + 1 for the
    # marker 过敏 = 2.0, so the allergy wins; without markers the weather does
    allergy = _turns(["今天天气不错。", "今天天气真的不错。", "我对花生过敏。"])
    assert extractive_summary(allergy, cfg=one) == "A: 我对花生过敏。"
    no_markers = one.replace(**{"importance.markers": []})
    assert extractive_summary(allergy, cfg=no_markers) == "A: 今天天气不错。"
    three = CFG.replace(**{"compression.summary_sentences": 2})
    assert extractive_summary(chunk, cfg=three) == "用户: 我下周三过生日。\n助手: 生日快乐提前祝你！"


def test_llm_summariser_is_a_plain_callable_and_an_empty_answer_is_an_error():
    prompts = []

    def llm(prompt: str) -> str:
        prompts.append(prompt)
        return "  A and B plan a Saturday hike.  "

    chunk = _turns(["We should go hiking on Saturday.", "Sounds great."])
    assert llm_summariser(llm, cfg=CFG)(chunk) == "A and B plan a Saturday hike."
    assert "A: We should go hiking on Saturday.\nB: Sounds great." in prompts[0]
    assert "at most 400 characters" in prompts[0]
    with pytest.raises(InvalidInput, match="non-empty"):
        llm_summariser(lambda p: "   ", cfg=CFG)(chunk)
    with pytest.raises(ConfigError, match="compression.prompt.*conversation"):
        MemlabConfig().replace(**{"compression.prompt": "Summarise: {text}"})


@pytest.fixture
def store(tmp_path):
    cfg = CFG.replace(**{"compression.keep_recent_turns": 2, "compression.chunk_turns": 3})
    st = memlab.open_store(tmp_path / "s.sqlite", config=cfg, clock=FixedClock(T0 + 30 * DAY))
    yield st
    st.close()


def test_summaries_are_stored_as_their_own_kind_once(store):
    texts = ["我答应周六陪你去爬香山。", "好呀，我最喜欢爬山了！", "记得带水和雨伞。",
             "I promise to bring the map.", "Great, thanks.", "See you then.", "Bye!", "Bye."]
    turns = _turns(texts)
    stored = store.compress_history(turns)
    assert len(stored) == 2        # 8 turns, 2 kept verbatim: chunks t0-t2 and t3-t5
    first = stored[0]
    assert first.source_type == KIND and first.tags == ("summary",)
    assert first.cognitive_layer == "episodic" and first.derived_from == ("t0", "t1", "t2")
    assert (first.event_time, first.timestamp) == (T0, T0 + 120)
    assert first.meta == {"turns": 3, "first_turn_at": T0, "last_turn_at": T0 + 120}
    rendered = "A: 我答应周六陪你去爬香山。\nB: 好呀，我最喜欢爬山了！\nA: 记得带水和雨伞。"
    assert first.importance == score_importance(rendered, cfg=store.config.importance)
    assert store.compress_history(turns) == []               # the same history again: nothing
    assert store.count() == 2


def test_nothing_is_stored_when_the_summariser_fails(store):
    with pytest.raises(InvalidInput, match="non-empty"):
        store.compress_history(_turns(["a b c"] * 8), summarise=lambda chunk: "")
    assert store.count() == 0
    with pytest.raises(InvalidInput, match=r"turns\[1\].timestamp"):
        as_turns([{"speaker": "A", "text": "x", "timestamp": T0},
                  {"speaker": "B", "text": "y", "timestamp": T0 - 1}])


def test_recall_filters_by_importance_then_scores_similarity_and_recency(store):
    now = T0 + 30 * DAY
    hike = _turns(["We should go hiking on Saturday.", "Saturday hiking sounds great.",
                   "Bring water for the hike."], start=T0)
    # an important chunk (markers: birthday, promise, important) ten days later
    bday = _turns(["My birthday is important to me.", "I promise to remember your birthday.",
                   "Birthday cake then, a promise."], start=T0 + 10 * DAY)
    tail = _turns(["ok", "bye"], start=T0 + 11 * DAY)
    stored = store.compress_history(hike + bday + tail)
    imp = [r.importance for r in stored]
    assert imp[1] > imp[0]
    hits = store.recall_summaries("hiking on Saturday", k=5)
    assert [h.id for h in hits] and {h.id for h in hits} == {r.id for r in stored}
    emb = store.embedder
    q = emb.embed_queries(["hiking on Saturday"])[0]
    for h in hits:
        d = emb.embed_documents([h.text])[0]
        cos = float(d @ q / (np.linalg.norm(d) * np.linalg.norm(q)))
        rec = 0.5 ** ((now - h.timestamp) / (7 * DAY))
        assert h.similarity == pytest.approx(cos) and h.recency == pytest.approx(rec)
        assert h.score == pytest.approx(0.7 * cos + 0.3 * rec)
    assert hits[0].id == stored[0].id                  # the hike summary is the similar one
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # the importance filter: only the important chunk is left
    cut = {"compression.min_importance": (imp[0] + imp[1]) / 2}
    with memlab.open_store(store.path, config=store.config.replace(**cut),
                           embedder=store.embedder, clock=FixedClock(now)) as other:
        assert [h.id for h in other.recall_summaries("hiking on Saturday")] == [stored[1].id]
    # recency: with the similarity weight at 0, the newer summary comes first
    with memlab.open_store(store.path, config=store.config.replace(
            **{"compression.similarity_weight": 0.0}), embedder=store.embedder,
            clock=FixedClock(now)) as other:
        assert [h.id for h in other.recall_summaries("hiking on Saturday")] == [
            stored[1].id, stored[0].id]
    assert store.recall_summaries("hiking", user_id="someone_else") == []

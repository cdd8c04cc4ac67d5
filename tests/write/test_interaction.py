"""MemoryStore.store_interaction (reverie §5): corrections first, importance (association
through recall), the autonomy gate (rule and LLM), routing with the seeded short-term draw,
ids and cognitive layer; the result says what was stored or why not."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.llm import RecordedLLM
from memlab.write.gate import LLM_FAILED, LLM_MALFORMED, parse_remember

T0 = 1_750_000_000.0
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 1.0})


def _open(cfg=CFG, **kw):
    return memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0), **kw)


def test_the_spec_example_goes_short_term():
    with _open() as st:
        res = st.store_interaction("我的生日是三月五日", "好的，我记住了！")
        # ② one marker (生日) in user + reply: min(0.85, 0.25 + 0.12) = 0.37; no term repeats
        # across 我的生日是三月五日 / 好的 / 我记住了; not 80 chars; nothing to associate with
        assert res.stored and res.importance == pytest.approx(0.37) and res.associated == 0
        assert res.layer == "short_term" and res.threshold == 0.6 and res.kept_short is True
        assert res.id.startswith("st_") and len(res.id) == 35
        assert res.memory.text == "我的生日是三月五日\n好的，我记住了！"
        assert res.gate.remember and res.gate.by == "rule"
        assert st.get([res.id])[0].importance == pytest.approx(0.37)
        assert "short term" in res.reason and str(res).startswith(f"stored {res.id}")


def test_emotion_above_the_threshold_goes_long_term():
    with _open() as st:
        res = st.store_interaction("今天考试通过了", "太好了，恭喜你！", emotion=0.9)
        # ① the emotion intensity is the base: 0.9 > 0.6 -> long term, lt_ id
        assert res.importance == pytest.approx(0.9) and res.layer == "long_term"
        assert res.id.startswith("lt_") and res.memory.emotions == {"intensity": 90.0}
        vec = st.store_interaction("I passed the exam", emotion={"joy": 70, "fear": -80})
        # an emotion vector: intensity max|v| / 100 = 0.8
        assert vec.importance == pytest.approx(0.8) and vec.layer == "long_term"
        assert vec.memory.text == "I passed the exam"   # no reply: the user's message alone


def test_long_message_and_repeated_terms_in_english():
    with _open() as st:
        msg = "I think I will start running every morning before work, because it keeps me calm."
        assert len(msg) >= 80
        # ④ 80+ characters: 0.45 beats ③ ('running' in message and reply: 0.35 + 0.08 = 0.43)
        res = st.store_interaction(msg, "Running is a good habit.")
        assert res.importance == pytest.approx(0.45)
        # ③ alone: 'running' and 'morning' repeat: min(0.8, 0.35 + 0.08 * 2) = 0.51
        res = st.store_interaction("running in the morning", "Morning running, nice.")
        assert res.importance == pytest.approx(0.51)


def test_association_through_recall_raises_importance():
    with _open() as st:
        st.add("用户对咖啡因过敏", importance=0.8)
        res = st.store_interaction("用户对咖啡因过敏吗", "是的，你说过。")
        # ⑤ one memory shares >= 34% of the message's terms: min(0.9, 0.4 + 0.1) = 0.5 > ② 0.37
        assert res.associated == 1 and res.importance == pytest.approx(0.5)


def test_corrections_run_first():
    calls = []
    with _open() as st:
        def hook(message, *, agent_id, user_id, now):
            calls.append((message, agent_id, user_id, now, len(st)))
            st.add("用户对咖啡因过敏", importance=0.8, user_id=user_id)   # what a rollback might do
            return {"rolled_back": "fz_1"}

        res = st.store_interaction("用户对咖啡因过敏吗", user_id="u1", corrections=hook)
        # the hook saw the message before anything was scored: its memory is associated
        assert calls == [("用户对咖啡因过敏吗", "agent_0", "u1", T0, 0)]
        assert res.associated == 1 and res.correction == {"rolled_back": "fz_1"}
        st.corrections = hook                    # the store's hook, wired once
        st.store_interaction("another message")
        assert len(calls) == 2


@pytest.mark.parametrize("message,why", [
    ("好的", "trivial"), ("OK!", "trivial"), ("  谢谢～ ", "trivial"), ("?", "min_chars"),
    ("嗯", "min_chars"),
])
def test_rule_gate_refuses_acknowledgements(message, why):
    with _open() as st:
        res = st.store_interaction(message, "好的")
        assert not res.stored and res.memory is None and res.layer is None
        assert res.gate.by == "rule" and why in res.reason and len(st) == 0
        assert st.stats["interactions not stored: gate"] == 1


def test_a_strongly_felt_acknowledgement_is_kept():
    with _open() as st:
        assert st.store_interaction("好的", emotion=0.9).layer == "long_term"


def test_autonomy_switch_off_stores_nothing():
    with _open(CFG.replace(**{"gate.autonomous": False})) as st:
        res = st.store_interaction("我的生日是三月五日", emotion=1.0)
        assert not res.stored and res.gate.by == "switch" and "gate.autonomous" in res.reason
        assert len(st) == 0


def test_short_term_draw_is_seeded_and_nested():
    messages = [f"今天记录第{i}件事：去了第{i}个地方" for i in range(40)]

    def kept(p, seed):
        cfg = CFG.replace(**{"layers.short_term_probability": p, "layers.short_term_seed": seed,
                             "importance.association_k": 0})
        with _open(cfg) as st:
            res = [st.store_interaction(m) for m in messages]
        assert all(r.importance <= 0.6 and r.gate.remember for r in res)
        return [r.stored for r in res]

    # one draw per interaction the gate lets through, from default_rng(seed): kept iff draw < p
    draws = np.random.default_rng(7).random(len(messages))
    assert kept(0.5, 7) == list(draws < 0.5)
    assert kept(0.5, 7) == kept(0.5, 7) and kept(0.5, 8) != kept(0.5, 7)
    low, high = kept(0.3, 7), kept(0.6, 7)
    assert all(h for lo, h in zip(low, high) if lo) and sum(low) < sum(high)
    assert not any(kept(0.0, 7)) and all(kept(1.0, 7))


def test_not_kept_says_why_and_writes_nothing():
    with _open(CFG.replace(**{"layers.short_term_probability": 0.0})) as st:
        res = st.store_interaction("我的生日是三月五日")
        assert not res.stored and res.kept_short is False and res.threshold == 0.6
        assert "short-term draw missed" in res.reason and len(st) == 0
        assert st.stats["interactions not stored: short-term draw"] == 1
        assert st.store_interaction("我的生日是三月五日", emotion=0.7).layer == "long_term"


def test_under_budget_pressure_a_long_term_candidate_may_be_dropped():
    cfg = CFG.replace(**{"layers.short_term_probability": 0.0,
                         "governance.long_term_char_budget": 100})
    with _open(cfg) as st:
        st.add("x" * 100, importance=0.9, layer="long_term")   # 100%: threshold 0.95
        res = st.store_interaction("今天考试通过了", emotion=0.9)
        assert not res.stored and res.threshold == pytest.approx(0.95) and len(st) == 1


@pytest.mark.parametrize("message,layer", [
    ("事件记忆：第一次见面在车站", "episodic"), ("Event memory: we first met at the station", "episodic"),
    ("步骤：先烧水，再下面条", "procedural"), ("Steps: boil water, then add noodles", "procedural"),
    ("我喜欢下雨天", "semantic"), ("I like rainy days", "semantic"),
])
def test_cognitive_layer(message, layer):
    with _open() as st:
        assert st.store_interaction(message, "嗯嗯").memory.cognitive_layer == layer


def test_owner_and_to_dict():
    with _open() as st:
        res = st.store_interaction("我的生日是三月五日", agent_id="a1", user_id="u1")
        assert (res.memory.agent_id, res.memory.user_id) == ("a1", "u1")
        assert st.count(agent_id="a1", user_id="u1") == 1 and st.count() == 0
        d = res.to_dict()
        assert d["id"] == res.id and d["gate"] is True and d["layer"] == "short_term"
        assert d["text"] == "我的生日是三月五日"


@pytest.mark.parametrize("kwargs,field", [
    ({"user_message": ""}, "user_message"),
    ({"user_message": "hi there", "assistant_reply": 3}, "assistant_reply"),
    ({"user_message": "hi there", "emotion": 1.5}, "emotion"),
    ({"user_message": "hi there", "emotion": True}, "emotion"),
    ({"user_message": "hi there", "emotion": {"joy": float("nan")}}, "emotions"),
    ({"user_message": "hi there", "user_id": ""}, "user_id"),
])
def test_bad_input_is_named_and_changes_nothing(kwargs, field):
    with _open() as st:
        with pytest.raises(InvalidInput, match=field):
            st.store_interaction(**kwargs)
        assert len(st) == 0 and st.stats["interactions"] == 0


# -- the LLM gate ------------------------------------------------------------------------------
LLM_CFG = CFG.replace(**{"gate.mode": "llm"})


def test_llm_gate_decides_with_the_prompt():
    fake = RecordedLLM(['{"remember": false, "reason": "small talk"}',
                        '```json\n{"remember": true, "reason": "a birthday"}\n```'])
    with _open(LLM_CFG, llm=fake) as st:
        no = st.store_interaction("今天天气不错", "是啊")
        assert not no.stored and no.gate.by == "llm" and no.gate.reason == "small talk"
        yes = st.store_interaction("我的生日是三月五日", "记住了")
        assert yes.stored and yes.gate.reason == "a birthday"
    assert "User: 今天天气不错\nAssistant: 是啊" in fake.prompts[0]


@pytest.mark.parametrize("reply,expected", [
    ("yes", True), ("Yes, it is a fact about the user.", True), ("是的，值得记住", True),
    ("no", False), ("No.", False), ("不需要", False), ("否", False), ("not really", False),
    ('{"remember": true}', True), ('{"remember": "yes"}', None), ("maybe", None),
    ("{broken json", None), ("nothing", None), ("yesterday", None),
])
def test_parse_remember(reply, expected):
    parsed = parse_remember(reply)
    assert (None if parsed is None else parsed[0]) == expected


def test_llm_gate_falls_back_to_the_rule_gate_logged_once_and_counted(caplog):
    fake = RecordedLLM(["maybe", "I cannot tell", "no"])
    with _open(LLM_CFG, llm=fake) as st, caplog.at_level(logging.WARNING, logger="memlab"):
        a = st.store_interaction("我的生日是三月五日")
        b = st.store_interaction("好的")
        c = st.store_interaction("我喜欢下雨天")
    assert a.stored and a.gate.by == "rule (llm fallback)" and "maybe" in a.gate.reason
    assert not b.stored and b.gate.by == "rule (llm fallback)"   # the rule gate's answer
    assert not c.stored and c.gate.by == "llm"
    assert st.stats[f"degraded: {LLM_MALFORMED}"] == 2
    assert sum(LLM_MALFORMED in r.getMessage() for r in caplog.records) == 1


def test_llm_gate_falls_back_when_the_llm_fails():
    with _open(LLM_CFG, llm=RecordedLLM()) as st:   # no replies: every call raises LLMError
        res = st.store_interaction("我的生日是三月五日")
        assert res.stored and res.gate.by == "rule (llm fallback)"
        assert st.stats[f"degraded: {LLM_FAILED}"] == 1


def test_llm_gate_needs_an_llm_and_takes_a_callable():
    with _open(LLM_CFG) as st:
        with pytest.raises(ConfigError, match="gate.mode"):
            st.store_interaction("我的生日是三月五日")
        res = st.store_interaction("我的生日是三月五日", llm=lambda prompt: "yes")
        assert res.stored and res.gate.by == "llm"


def test_remember_many_batch_with_given_query_vectors_matches_the_lookup():
    items = [{"text": "用户对咖啡因过敏吗", "id": "a"}, {"text": "我喜欢下雨天", "id": "b"},
             {"text": "好的", "id": "c"}, {"text": "我叫小林", "id": "d", "layer": "permanent"}]
    out = []
    for given in (False, True):
        with _open() as st:
            st.add("用户对咖啡因过敏", importance=0.8)
            mv = st.embedder.embed_queries([it["text"] for it in items]) if given else None
            out.append(st.remember_many(items, message_vectors=mv))
    for res in out:
        assert [r.stored for r in res] == [True, True, False, True]
        assert [r.associated for r in res] == [1, 0, 0, 0]
        assert res[3].layer == "permanent" and res[3].gate.by == "given"
        assert [r.id for r in res if r.stored] == ["a", "b", "d"]
    with _open() as st, pytest.raises(InvalidInput, match="message_vectors"):
        st.remember_many(items, message_vectors=np.zeros((2, 8)))

"""The one write pipeline (memlab.write.pipeline) under add/add_many: routing by importance, §11.3
budget pressure per (agent, user), §5 ⑤ association through recall, one transaction.
Values worked out by hand from reverie §5 and §11.3."""

from __future__ import annotations

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.write.layers import Budget, long_term_threshold

T0 = 1_750_000_000.0
# hashing embedder; the cosine floor out of reach, so association is by lexical overlap
# (recall.lexical_floor 0.34 of the message's terms) - deterministic for a hand count
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 1.0})
# a 100-character long-term budget per owner: pressure from 70 characters on
SMALL = CFG.replace(**{"governance.long_term_char_budget": 100})


def _open(cfg=CFG):
    return memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0))


def test_spec_example_importance_and_layer():
    with _open() as st:
        rec = st.add("我的生日是三月五日")
    # §5 ②: one marker (生日): min(0.85, 0.25 + 0.12 * 1) = 0.37; no repeat, short, nothing
    # stored to associate with -> 0.37, not > 0.6 -> short term, id st_ + 32 hex digits
    assert rec.importance == pytest.approx(0.37)
    assert rec.retention_layer == "short_term"
    assert rec.id.startswith("st_") and len(rec.id) == 3 + 32
    with _open() as st:
        rec = st.add("My birthday is March 5")   # the English marker 'birthday'
    assert rec.importance == pytest.approx(0.37) and rec.retention_layer == "short_term"


def test_association_is_counted_through_recall():
    with _open() as st:
        st.add("用户对咖啡因过敏", importance=0.8)
        st.add("今天午饭吃了牛肉面", importance=0.3)
        # 用户对咖啡因过敏吗 shares 14 of its 15 terms with the first memory (>= 0.34): one
        # association. ② 过敏: 0.37; ⑤ min(0.9, 0.4 + 0.1 * 1) = 0.5
        assert st.add("用户对咖啡因过敏吗").importance == pytest.approx(0.5)
        # nothing in common with either: ② alone (喜欢): 0.37
        assert st.add("我喜欢下雨天").importance == pytest.approx(0.37)


def test_association_k_zero_turns_the_lookup_off():
    with _open(CFG.replace(**{"importance.association_k": 0})) as st:
        st.add("用户对咖啡因过敏", importance=0.8)
        assert st.add("用户对咖啡因过敏吗").importance == pytest.approx(0.37)


def test_association_is_the_owners_only():
    with _open() as st:
        st.add("用户对咖啡因过敏", importance=0.8, user_id="u1")
        assert st.add("用户对咖啡因过敏吗", user_id="u2").importance == pytest.approx(0.37)
        assert st.add("用户对咖啡因过敏吗", user_id="u1").importance == pytest.approx(0.5)


def test_budget_pressure_raises_the_threshold_per_owner():
    with _open(SMALL) as st:
        # owner u1: 85 long-term characters = 85% of the budget: threshold
        # 0.6 + (0.85 - 0.70) / 0.30 * (0.95 - 0.6) = 0.775
        st.add("x" * 85, importance=0.9, layer="long_term", user_id="u1")
        assert st.add("a new memory", importance=0.7, user_id="u1").retention_layer == "short_term"
        assert st.add("another memory", importance=0.78, user_id="u1").retention_layer \
            == "long_term"
        # another user of the same agent: their memories do not raise u2's threshold (0.6)
        assert st.add("a new memory", importance=0.7, user_id="u2").retention_layer == "long_term"
        # another agent with the same user id: its own budget too
        assert st.add("a new memory", importance=0.7, user_id="u1",
                      agent_id="agent_9").retention_layer == "long_term"


def test_a_batch_routes_as_the_same_items_added_one_by_one():
    items = [{"text": "y" * 20, "importance": 0.7} for _ in range(6)]
    with _open(SMALL) as st:
        batch = [r.retention_layer for r in st.add_many(items)]
    with _open(SMALL) as st:
        single = [st.add(**it).retention_layer for it in items]
    # usage before each: 0, 20, 40, 60 (<= 70%: threshold 0.6, 0.7 goes long term), then 80:
    # 0.6 + (0.8 - 0.7) / 0.3 * 0.35 = 0.7167 >= 0.7 -> short term (usage stays 80)
    assert batch == single == ["long_term"] * 4 + ["short_term"] * 2


def test_pressure_ignores_short_term_and_inactive_memories():
    with _open(SMALL) as st:
        st.add("s" * 95, importance=0.3, layer="short_term")
        st.add("e" * 95, importance=0.9, layer="long_term", lifecycle_state="expired")
        assert st.add("fresh", importance=0.61).retention_layer == "long_term"


def test_explicit_layer_and_importance_are_kept_as_given():
    with _open(SMALL) as st:
        st.add("x" * 100, importance=0.9, layer="long_term")   # 100%: threshold 0.95
        rec = st.add("given", importance=0.2, layer="long_term")
        assert (rec.retention_layer, rec.importance) == ("long_term", 0.2)
        assert st.add("routed", importance=0.9).retention_layer == "short_term"


def test_budget_reads_each_owner_once_and_charges_long_term_only():
    calls = []

    def layer_chars(layer, *, agent_id, user_id):
        calls.append((layer, agent_id, user_id))
        return 75

    b = Budget(layer_chars, layers=SMALL.layers, gov=SMALL.governance)
    owner = ("a", "u")
    assert b.threshold(owner) == pytest.approx(0.6 + (0.75 - 0.7) / 0.3 * 0.35)
    b.charge(owner, "short_term", 20)
    b.charge(owner, None, 20)
    assert b.used(owner) == 75
    b.charge(owner, "long_term", 25)
    assert b.threshold(owner) == pytest.approx(0.95)
    assert calls == [("long_term", "a", "u")]


def test_full_pressure_start_is_refused():
    # pressure starting at 100% would divide by zero in the linear rise (§11.3)
    with pytest.raises(ConfigError, match="budget_pressure_start"):
        CFG.replace(**{"governance.budget_pressure_start": 1.0})
    gov = CFG.replace(**{"governance.budget_pressure_start": 0.0,
                         "governance.long_term_char_budget": 10}).governance
    assert long_term_threshold(5, layers=CFG.layers, gov=gov) == pytest.approx(0.6 + 0.5 * 0.35)


def test_a_refused_batch_writes_nothing_and_routes_nothing():
    with _open(SMALL) as st:
        st.add("x" * 60, importance=0.9, layer="long_term")
        with pytest.raises(InvalidInput, match=r"items\[1\]\.importance"):
            st.add_many([{"text": "y" * 30, "importance": 0.7},
                         {"text": "bad", "importance": 2.0}])
        # a duplicate id is refused inside the transaction, after routing: nothing stays
        first = st.add("z", importance=0.7, id="m1")
        with pytest.raises(InvalidInput, match="already stored"):
            st.add_many([{"text": "y" * 30, "importance": 0.7}, {"text": "w", "id": "m1"}])
        assert len(st) == 2 and first.id == "m1"
        # the refused items left no trace in the budget: usage 61 -> threshold 0.6
        assert st.add("q" * 8, importance=0.61).retention_layer == "long_term"


@pytest.mark.parametrize("text,layer", [
    ("事件记忆：第一次见面", "episodic"), ("Event memory: we met at the station", "episodic"),
    ("步骤：先烧水，再放面", "procedural"), ("Steps: boil water, add noodles", "procedural"),
    ("程序记忆：备份数据库的方法", "procedural"), ("用户喜欢海边", "semantic"),
    ("The user likes the sea. Steps: none", "semantic"),
])
def test_cognitive_layer_by_prefix(text, layer):
    with _open() as st:
        assert st.add(text, importance=0.5).cognitive_layer == layer

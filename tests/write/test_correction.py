"""A user's correction of a misremembered entity (reverie §9.2; memlab.write.correction): matched to
the user's logged swap, rolled back (event resolved, next recall true), +fuzzy.correction_bonus
importance to the true memory, clamped at 1; zh and en."""

from __future__ import annotations

import json

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.write.correction import resolve_user_correction

T = 1_700_000_000.0
ON = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                               "recall.relevance_floor": 0.0, "fuzzy.enabled": True,
                               "fuzzy.probability": 1.0})
# m_terraria is protected (importance >= 0.9): only m_stardew is misremembered, as Terraria
MEMS = [("m_stardew", "用户最喜欢玩星露谷物语", 0.7), ("m_terraria", "用户上周买了泰拉瑞亚", 0.95)]
EN = [("m_stardew", "The user loves Stardew Valley", 0.7), ("m_terraria", "Bob bought Terraria", 0.95)]


def _store(cfg=ON, mems=MEMS, clock=None):
    st_ = memlab.open_store(":memory:", config=cfg, clock=clock or FixedClock(T))
    st_.add_many([{"id": i, "text": t, "importance": imp} for i, t, imp in mems])
    return st_


def _importance(st_, id_="m_stardew"):
    return st_.get([id_])[0].importance


def _swapped(st_, query="用户喜欢玩什么游戏 星露谷物语"):
    res = st_.recall(query, k=2)
    assert [s.memory_id for s in res.swaps] == ["m_stardew"]
    return res


@pytest.mark.parametrize("message", ["不是泰拉瑞亚！", "不对，是星露谷", "你记错了，我喜欢的是星露谷物语"])
def test_zh_correction_rolls_back_and_adds_the_bonus(message):
    with _store() as st_:
        res = _swapped(st_)
        assert "用户最喜欢玩泰拉瑞亚" in res.texts
        got = st_.resolve_user_correction(message, clock=FixedClock(T + 60))
        assert (got.memory_id, got.original, got.replacement) == ("m_stardew", "星露谷物语", "泰拉瑞亚")
        assert got.importance_before == 0.7
        assert got.importance_after == pytest.approx(0.73)          # 0.7 + 0.03
        assert _importance(st_) == pytest.approx(0.73)
        (resolved_at, meta), = st_._store.conn.execute(
            "SELECT resolved_at, meta_json FROM memory_recall_events").fetchall()
        assert resolved_at == T + 60 and json.loads(meta)["corrected_by"] == message
        after = st_.recall("用户喜欢玩什么游戏 星露谷物语", k=2)   # corrected: stays true
        assert after.swaps == () and "用户最喜欢玩星露谷物语" in after.texts
        assert st_.get(["m_stardew"])[0].text == "用户最喜欢玩星露谷物语"


@pytest.mark.parametrize("message", ["no, it was Stardew", "that's wrong, it was Stardew Valley",
                                     "Not Terraria!", "You're mistaken about Terraria"])
def test_en_correction(message):
    with _store(mems=EN) as st_:
        res = _swapped(st_, "what game does the user love Stardew")
        assert "The user loves Terraria" in res.texts
        got = st_.resolve_user_correction(message)
        assert (got.original, got.replacement) == ("Stardew Valley", "Terraria")
        assert _importance(st_) == pytest.approx(0.73)


@pytest.mark.parametrize("message", ["我也喜欢泰拉瑞亚", "泰拉瑞亚是好游戏", "不对，我说的是明天",
                                     "I bought Terraria too", "no thanks", ""])
def test_a_message_that_corrects_no_swap_changes_nothing(message):
    with _store() as st_:
        _swapped(st_)
        before = st_._store.conn.execute("SELECT * FROM memory_records").fetchall()
        assert st_.resolve_user_correction(message) is None
        assert st_._store.conn.execute("SELECT * FROM memory_records").fetchall() == before
        assert st_._store.conn.execute("SELECT count(*) FROM memory_recall_events WHERE "
                                       "resolved_at IS NOT NULL").fetchone() == (0,)


def test_importance_is_clamped_at_one():
    cfg = ON.replace(**{"fuzzy.protected_importance": 1.0})   # 0.99 may be misremembered
    with _store(cfg, [("m_stardew", "用户最喜欢玩星露谷物语", 0.99),
                      ("m_terraria", "用户上周买了泰拉瑞亚", 1.0)]) as st_:
        _swapped(st_)
        got = st_.resolve_user_correction("不是泰拉瑞亚")
        assert (got.importance_before, got.importance_after) == (0.99, 1.0)   # not 1.02
        assert _importance(st_) == 1.0


def test_bonus_comes_from_the_config():
    with _store(ON.replace(**{"fuzzy.correction_bonus": 0.25})) as st_:
        _swapped(st_)
        st_.resolve_user_correction("不是泰拉瑞亚")
        assert _importance(st_) == pytest.approx(0.95)              # 0.7 + 0.25


def test_every_unresolved_swap_of_the_memory_is_resolved_bonus_once():
    clock = FixedClock(T)
    with _store(clock=clock) as st_:
        _swapped(st_)
        clock.advance(30)
        _swapped(st_, "星露谷物语 好玩吗")
        got = st_.resolve_user_correction("不是泰拉瑞亚！")
        assert got.event_ids == (2, 1)
        assert _importance(st_) == pytest.approx(0.73)
        assert st_.resolve_user_correction("不是泰拉瑞亚！") is None


def test_the_most_recent_matching_swap_of_that_user_only():
    clock = FixedClock(T)
    mems = MEMS + [("u1_stardew", "用户最喜欢玩星露谷物语", 0.6)]
    with memlab.open_store(":memory:", config=ON, clock=clock) as st_:
        st_.add_many([{"id": i, "text": t, "importance": imp} for i, t, imp in MEMS])
        st_.add_many([{"id": "u1_stardew", "text": mems[2][1], "importance": 0.6,
                       "user_id": "user_1"}, {"id": "u1_terraria", "text": MEMS[1][1],
                                              "importance": 0.95, "user_id": "user_1"}])
        _swapped(st_)
        clock.advance(10)
        assert len(st_.recall("星露谷物语", k=2, user_id="user_1").swaps) == 1
        got = st_.resolve_user_correction("不是泰拉瑞亚！")             # user_0's, not user_1's
        assert got.memory_id == "m_stardew"
        assert st_.get(["u1_stardew"], user_id="user_1")[0].importance == 0.6
        other = st_.resolve_user_correction("不是泰拉瑞亚！", user_id="user_1")
        assert other.memory_id == "u1_stardew"


def test_swaps_older_than_the_window_are_not_corrected():
    with _store() as st_:
        _swapped(st_)
        late = FixedClock(T + ON.fuzzy.correction_window_seconds + 1)
        assert st_.resolve_user_correction("不是泰拉瑞亚！", clock=late) is None
        assert _importance(st_) == 0.7


def test_the_write_pipeline_signature_takes_a_store_or_a_repository():
    with _store() as st_:
        _swapped(st_)
        got = resolve_user_correction(st_._store.repo, "不是泰拉瑞亚！", agent_id="agent_0",
                                      user_id="user_0", clock=FixedClock(T), cfg=ON)
        assert got.memory_id == "m_stardew" and _importance(st_) == pytest.approx(0.73)
        with pytest.raises(InvalidInput, match="message"):
            resolve_user_correction(st_._store, None, agent_id="agent_0", user_id="user_0",
                                    clock=FixedClock(T), cfg=ON.fuzzy)


def test_a_deleted_memory_still_resolves_without_a_bonus():
    with _store() as st_:
        _swapped(st_)
        st_._store.repo.delete(["m_stardew"])
        got = st_.resolve_user_correction("不是泰拉瑞亚！")
        assert got.memory_id == "m_stardew" and got.importance_after is None


def test_a_title_swap_is_corrected_by_name():
    mems = [("m_santi", "用户最近在读《三体》", 0.5), ("m_xiyou", "用户小时候看过《西游记》", 0.95)]
    with _store(mems=mems) as st_:
        res = st_.recall("三体 西游记", k=2)
        assert "用户最近在读《西游记》" in res.texts
        got = st_.resolve_user_correction("不是《西游记》，是《三体》")
        assert (got.memory_id, got.original, got.replacement) == ("m_santi", "三体", "西游记")
        assert st_.get(["m_santi"])[0].importance == pytest.approx(0.53)


@pytest.mark.parametrize("message, memory_id", [
    ("不是泰拉瑞亚！", "m_stardew"),          # negated: the swap that showed 泰拉瑞亚
    ("不对，是泰拉瑞亚", "m_terraria"),        # affirmed: the swap whose true entity is 泰拉瑞亚
    ("not Stardew!", "m_terraria"),
    ("no, it was Stardew", "m_stardew"),
])
def test_negation_and_affirmation_pick_the_swap_they_name(message, memory_id):
    """Both memories misremembered in one recall (each shown as the other game): a negation
    before an entity names the shown one, an affirmation the true one, whichever swap is newer."""
    both = [("m_stardew", "用户最喜欢玩星露谷物语", 0.7), ("m_terraria", "用户上周买了泰拉瑞亚", 0.5)]
    with _store(mems=both) as st_:
        assert len(st_.recall("用户喜欢玩什么游戏", k=2).swaps) == 2
        assert st_.resolve_user_correction(message).memory_id == memory_id


def test_store_interaction_resolves_the_correction_first():
    """§5 ①: store_interaction's default corrections hook is resolve_user_correction: the swap
    is rolled back and the true memory gains the bonus before the exchange is scored."""
    with _store() as st_:
        _swapped(st_)
        got = st_.store_interaction("不是泰拉瑞亚！是星露谷物语", "抱歉，我记错了，是星露谷物语。",
                                    clock=FixedClock(T + 60))
        assert got.correction is not None and got.correction.memory_id == "m_stardew"
        assert _importance(st_) == pytest.approx(0.73)
        assert st_.recall("用户喜欢玩什么游戏 星露谷物语", k=2).swaps == ()

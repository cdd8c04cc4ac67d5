"""Usage feedback after a turn (issue 9 item 5; reverie §8 end, §11.3): injected 0.2, used 1.0 at
>= 25% shared terms (zh and en), confirm / reject 2.0, at most 6 automatic reinforcements per memory
per day, all through the §9.1 reinforcement columns."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st_

import memlab
from memlab import forgetting
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.text import memory_terms
from memlab.write.feedback import credit, day_start, term_overlap

T0 = 1_750_032_000.0          # 2025-06-16 00:00 UTC
DAY = 86_400.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})


def _store(cfg=BASE):
    return memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0))


def _events(st, mid):
    return st._store.conn.execute(
        "SELECT kind, weight, meta_json FROM memory_usage_events WHERE memory_id = ? ORDER BY id",
        (mid,)).fetchall()


def test_used_overlap_by_hand_in_chinese():
    # 用户对咖啡因过敏: 7 2-grams + 6 3-grams = 13 terms; the reply shares 对咖 咖啡 啡因 因过 过敏
    # and 对咖啡 咖啡因 啡因过 因过敏: 9 of 13
    mem = memory_terms("用户对咖啡因过敏")
    assert len(mem) == 13
    assert term_overlap(mem, memory_terms("你对咖啡因过敏，所以我点了果汁")) == pytest.approx(9 / 13)
    with _store() as st:
        a = st.add("用户对咖啡因过敏")
        rep = st.feedback([a.id], reply="你对咖啡因过敏，所以我点了果汁")
        assert [(s.kind, s.weight, s.counted) for s in rep.signals] == [("used", 1.0, True)]
        assert rep.signals[0].overlap == pytest.approx(9 / 13, abs=1e-6)
        rep = st.feedback([a.id], reply="今天想吃点什么？")
        assert [(s.kind, s.weight) for s in rep.signals] == [("injected", 0.2)]


def test_used_overlap_by_hand_in_english_and_the_25_percent_boundary():
    # "Alice plays the violin": 4 terms; "The concert was long" shares "the": exactly 1/4
    with _store() as st:
        a = st.add("Alice plays the violin")
        assert st.feedback([a.id], reply="The concert was long").signals[0].kind == "used"
        assert st.feedback([a.id], reply="Nice weather").signals[0].kind == "injected"
    with _store(BASE.replace(**{"governance.used_overlap": 0.26})) as st:
        a = st.add("Alice plays the violin")
        assert st.feedback([a.id], reply="The concert was long").signals[0].kind == "injected"
    with _store() as st:   # no reply: an injection only
        a = st.add("Alice plays the violin")
        assert st.feedback([a.id]).signals[0].kind == "injected"


def test_weights_become_whole_references_of_access_count():
    """Five injections (5 x 0.2) are one reference; a used signal one; a confirm or a reject
    two; the remainder carries over."""
    with _store() as st:
        a = st.add("Alice plays the violin")
        got = [st.feedback([a.id], clock=FixedClock(T0 + i)).credited[a.id] for i in range(5)]
        assert got == [0, 0, 0, 0, 1] and st.get([a.id])[0].access_count == 1
        assert st.feedback([a.id], reply="violin", clock=FixedClock(T0 + 9)).credited[a.id] == 1
        assert st.feedback(confirmed=[a.id]).credited[a.id] == 2
        assert st.feedback(rejected=[a.id]).credited[a.id] == 2
        rec = st.get([a.id])[0]
        assert rec.access_count == 6 and rec.last_accessed == T0 + 9
        assert [k for k, _, _ in _events(st, a.id)] == ["injected"] * 5 + ["used", "confirmed",
                                                                            "rejected"]


def test_credit_by_hand():
    assert credit(0.0, 0, 0.2) == (0.2, 0, 0)
    total, done, add = credit(0.8000000000000002, 0, 0.2)
    assert (done, add) == (1, 1) and total == pytest.approx(1.0)
    assert credit(1.9, 1, 2.0) == (pytest.approx(3.9), 3, 2)
    assert 0.7 + 0.1 + 0.1 + 0.1 < 1.0                    # floating point: 0.9999999999999999
    assert credit(0.7 + 0.1 + 0.1, 0, 0.1)[1:] == (1, 1)    # is one whole reference all the same


def test_the_daily_cap_counts_six_automatic_signals_then_logs_the_rest_with_weight_0():
    with _store() as st:
        a = st.add("Alice plays the violin")
        counted = [st.feedback([a.id], reply="violin", clock=FixedClock(T0 + 60 * i)).signals[0]
                   .counted for i in range(8)]
        assert counted == [True] * 6 + [False] * 2
        assert st.get([a.id])[0].access_count == 6
        capped = _events(st, a.id)[6:]
        assert all(w == 0.0 and '"capped": true' in m for _, w, m in capped)
        assert st.feedback(confirmed=[a.id]).signals[0].counted     # explicit: never capped
        nxt = st.feedback([a.id], reply="violin", clock=FixedClock(T0 + DAY))   # the next day
        assert nxt.signals[0].counted and st.get([a.id])[0].access_count == 6 + 2 + 1


def test_the_day_starts_at_the_configured_offset():
    assert day_start(T0 + 3600, offset_hours=0) == T0
    assert day_start(T0 + 3600, offset_hours=8) == T0 - 8 * 3600   # 16:00 UTC the day before
    cfg = BASE.replace(**{"governance.daily_reinforcement_cap": 1,
                          "governance.usage_day_offset_hours": 8.0})
    with _store(cfg) as st:
        a = st.add("Alice plays the violin")
        at = T0 - 8 * 3600          # 16:00 UTC = 00:00 in Beijing: a new day there
        assert st.feedback([a.id], clock=FixedClock(at - 1)).signals[0].counted
        assert st.feedback([a.id], clock=FixedClock(at)).signals[0].counted
        assert not st.feedback([a.id], clock=FixedClock(at + 3600)).signals[0].counted


def test_bad_feedback_is_refused_by_name_and_logs_nothing():
    with _store() as st:
        a = st.add("Alice plays the violin")
        with pytest.raises(InvalidInput, match="both confirmed and rejected"):
            st.feedback(confirmed=[a.id], rejected=[a.id])
        with pytest.raises(InvalidInput, match="no memory with this id.*'nope'"):
            st.feedback([a.id, "nope"], reply="violin")
        with pytest.raises(InvalidInput, match="no memory with this id"):
            st.feedback([a.id], user_id="intruder")
        with pytest.raises(InvalidInput, match="confirmed"):
            st.feedback(confirmed="abc")
        assert _events(st, a.id) == [] and st.get([a.id])[0].access_count == 0


def test_a_recall_result_feeds_back_its_memories():
    with _store() as st:
        ids = [st.add(t).id for t in ("用户对咖啡因过敏", "用户最喜欢玩星露谷物语")]
        res = st.recall("咖啡因过敏", k=5)
        rep = st.feedback(res, reply="记得你对咖啡因过敏")
        assert {s.memory_id for s in rep.signals} == set(res.ids) and ids[0] in res.ids
        frame = rep.to_frame()
        assert list(frame.columns) == ["memory_id", "kind", "weight", "counted", "overlap",
                                       "credited"]


def test_reinforcement_through_feedback_slows_forgetting_by_the_spec_formula():
    """§9.1 by hand: importance 0.5, long term, one credited reference: strength
    (0.35 + 0.625) * (1 + 0.2 ln 2) = 1.11016; 90 days later retention 2^(-1/1.11016) = 0.5354
    instead of 2^(-1/0.975) = 0.4911."""
    with _store() as st:
        a = st.add("Alice plays the violin", importance=0.5, layer="long_term")
        st.feedback([a.id], reply="violin")                  # +1 reference, last_accessed = T0
        later = st.recall("violin", k=3, clock=FixedClock(T0 + 90 * DAY))
        assert later.to_frame().loc[0, "retention"] == pytest.approx(
            2 ** (-1 / (0.975 * (1 + 0.2 * math.log(2)))), abs=1e-6)
        assert 2 ** (-1 / 0.975) == pytest.approx(0.4911, abs=1e-4)


# -- properties ------------------------------------------------------------------------------------
_CALL = st_.tuples(st_.integers(0, 2),                       # the memory
                   st_.floats(0, 3 * DAY - 1),               # when
                   st_.sampled_from(["auto", "used", "confirm", "reject"]))


@settings(max_examples=40)
@given(calls=st_.lists(_CALL, max_size=25), cap=st_.integers(0, 4))
def test_the_daily_cap_is_never_exceeded_and_reinforcement_never_speeds_forgetting(calls, cap):
    cfg = BASE.replace(**{"governance.daily_reinforcement_cap": cap})
    with _store(cfg) as st:
        ids = [st.add(f"memory {i} about the violin and the lake", importance=0.4).id
               for i in range(3)]
        counts: dict[tuple[str, int], int] = {}
        before = {i: st.get([i])[0] for i in ids}
        for which, at, what in sorted(calls, key=lambda c: c[1]):
            mid = ids[which]
            kw = ({"confirmed": [mid]} if what == "confirm" else {"rejected": [mid]}
                  if what == "reject" else {"result": [mid],
                                            "reply": "violin lake" if what == "used" else "hi"})
            rep = st.feedback(clock=FixedClock(T0 + at), **kw)
            for s in rep.signals:
                if s.counted and s.kind in ("injected", "used"):
                    key = (mid, int(at // DAY))
                    counts[key] = counts.get(key, 0) + 1
            after = st.get([mid])[0]
            b = before[mid]
            assert after.access_count >= b.access_count
            assert (after.last_accessed or 0) >= (b.last_accessed or 0)
            for days in (1.0, 30.0, 400.0):     # retention at a later time never falls
                t = T0 + 4 * DAY + days * DAY
                def ret(r):
                    anchor = r.last_accessed if r.last_accessed is not None else r.timestamp
                    return float(forgetting.retention(
                        1, (t - anchor) / DAY, r.importance, 0.0,
                        forgetting.references(r.access_count, r.mention_count), False, cfg))
                assert ret(after) >= ret(b) - 1e-12
            before[mid] = after
        assert all(n <= cap for n in counts.values())


@given(imp=st_.floats(0, 1), emo=st_.floats(0, 1), refs=st_.floats(0, 100),
       more=st_.floats(0, 100), days=st_.floats(0, 1e4), layer=st_.sampled_from([1, 2]))
def test_more_references_never_speed_forgetting(imp, emo, refs, more, days, layer):
    cfg = MemlabConfig()
    lo = forgetting.retention(layer, days, imp, emo, refs, False, cfg)
    hi = forgetting.retention(layer, days, imp, emo, refs + more, False, cfg)
    assert float(hi) >= float(lo)

"""Familiars TTL (§5.3.3, §5.8.2): is_expired / is_live at the boundaries, validation at write
time, ephemeral defaults, and the expire_due sweep (kept on disk, never recalled again)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.lifecycle.ttl import TTLContext, check_ttl, is_expired, is_live
from memlab.types import MemoryRecord

HCFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})
# 2026-09-01T00:00:00Z, worked out: 2026-01-01 is 1767225600; +243 days (Jan..Aug) * 86400
EXPIRES = "2026-09-01T00:00:00Z"
T_EXPIRES = 1767225600.0 + 243 * 86400.0


def rec(ttl, *, deprecated=False, id="m_0000abcd") -> MemoryRecord:
    return MemoryRecord(id=id, text="用户明天出差 / the user travels tomorrow", ttl=ttl,
                        deprecated=deprecated)


def test_expires_constant_is_the_spec_example():
    assert datetime.fromisoformat(EXPIRES).timestamp() == T_EXPIRES


# -- is_expired: each kind at its boundary ------------------------------------------------------
def test_no_ttl_never_expires():
    assert not is_expired(rec(None), now=1e12, turn_counter=None, session_active=False,
                          dialogue_active=False)


def test_absolute_expires_at_exactly_expires_at():
    r = rec({"kind": "absolute", "expires_at": EXPIRES})
    assert is_expired(r, now=T_EXPIRES)                    # now == expires_at: expired
    assert not is_expired(r, now=T_EXPIRES - 0.001)
    assert is_expired(r, now=T_EXPIRES + 1)
    # the same instant written with an offset, and now as an aware datetime
    r8 = rec({"kind": "absolute", "expires_at": "2026-09-01T08:00:00+08:00"})
    assert is_expired(r8, now=datetime(2026, 9, 1, tzinfo=timezone.utc))
    assert not is_expired(r8, now=datetime(2026, 9, 1, tzinfo=timezone.utc)
                          - timedelta(microseconds=1))


def test_turns_expire_after_exactly_n_turns():
    r = rec({"kind": "turns", "turns": 5, "created_turn": 10})
    assert is_expired(r, now=0, turn_counter=15)           # 15 - 10 == 5: expired
    assert not is_expired(r, now=0, turn_counter=14)       # n - 1 turns: live
    assert not is_expired(r, now=0, turn_counter=10)


def test_scope_ttl_follows_the_session_or_dialogue():
    s = rec({"kind": "scope", "scope": "session"})
    d = rec({"kind": "scope", "scope": "dialogue"})
    assert not is_expired(s, now=0) and not is_expired(d, now=0)
    assert is_expired(s, now=0, session_active=False)
    assert not is_expired(s, now=0, dialogue_active=False)
    assert is_expired(d, now=0, dialogue_active=False)
    assert not is_expired(d, now=0, session_active=False)


@pytest.mark.parametrize("ttl, field", [
    ({"kind": "absolute", "expires_at": "2026-09-01T00:00:00"}, "ttl.expires_at"),  # naive
    ({"kind": "absolute", "expires_at": "next tuesday"}, "ttl.expires_at"),
    ({"kind": "absolute", "expires_at": 1788220800}, "ttl.expires_at"),
    ({"kind": "weekly"}, "ttl.kind"),
    ({"expires_at": EXPIRES}, "ttl.kind"),
    ({"kind": "turns", "turns": 5}, "ttl.created_turn"),
    ({"kind": "turns", "turns": 0, "created_turn": 1}, "ttl.turns"),
    ({"kind": "turns", "turns": True, "created_turn": 1}, "ttl.turns"),
    ({"kind": "scope", "scope": "week"}, "ttl.scope"),
    ({"kind": "scope", "scope": "session", "until": 3}, "ttl.until"),
])
def test_a_malformed_stored_ttl_names_the_record_and_field(ttl, field):
    with pytest.raises(InvalidInput) as e:
        is_expired(rec(ttl, id="m_deadbeef"), now=T_EXPIRES, turn_counter=3)
    assert e.value.field == f"memory m_deadbeef: {field}"


def test_a_turns_ttl_without_a_turn_counter_is_an_error_not_false():
    with pytest.raises(InvalidInput) as e:
        is_expired(rec({"kind": "turns", "turns": 1, "created_turn": 0}), now=0)
    assert e.value.field == "turn_counter" and "m_0000abcd" in e.value.rule


def test_context_is_explicit_and_validated():
    ctx = TTLContext(now=datetime(2026, 9, 1, tzinfo=timezone.utc), turn_counter=2)
    assert ctx.now == T_EXPIRES
    assert is_live(rec({"kind": "turns", "turns": 3, "created_turn": 0}), **ctx.kwargs())
    with pytest.raises(InvalidInput):
        TTLContext(now=datetime(2026, 9, 1))                # naive
    with pytest.raises(InvalidInput):
        TTLContext(now=0, turn_counter=-1)
    with pytest.raises(InvalidInput):
        TTLContext(now=0, session_active=0)


# -- is_live: a property against the spec's formulas, computed independently ---------------------
BASE = datetime(2026, 9, 1, tzinfo=timezone.utc)

ttls = st.one_of(
    st.none(),
    st.builds(lambda m, tz: {"kind": "absolute",
                             "expires_at": (BASE + timedelta(minutes=m)).astimezone(
                                 timezone(timedelta(hours=tz))).isoformat()},
              st.integers(-120, 120), st.integers(-12, 14)),
    st.builds(lambda n, c: {"kind": "turns", "turns": n, "created_turn": c},
              st.integers(1, 6), st.integers(0, 20)),
    st.builds(lambda s: {"kind": "scope", "scope": s}, st.sampled_from(["session", "dialogue"])),
)


def spec_expired(ttl, now_minutes, turn, session, dialogue) -> bool:
    if ttl is None:
        return False
    if ttl["kind"] == "absolute":
        return BASE + timedelta(minutes=now_minutes) >= datetime.fromisoformat(ttl["expires_at"])
    if ttl["kind"] == "turns":
        return turn - ttl["created_turn"] >= ttl["turns"]
    return not (session if ttl["scope"] == "session" else dialogue)


@settings(max_examples=400, deadline=None)
@given(ttl=ttls, deprecated=st.booleans(), now_minutes=st.integers(-130, 130),
       turn=st.integers(0, 30), session=st.booleans(), dialogue=st.booleans())
def test_is_live_is_not_deprecated_and_not_expired(ttl, deprecated, now_minutes, turn, session,
                                                   dialogue):
    ctx = TTLContext(now=(BASE + timedelta(minutes=now_minutes)).timestamp(), turn_counter=turn,
                     session_active=session, dialogue_active=dialogue)
    r = rec(ttl, deprecated=deprecated)
    expected = not deprecated and not spec_expired(ttl, now_minutes, turn, session, dialogue)
    assert is_live(r, **ctx.kwargs()) == expected
    assert is_expired(r, **ctx.kwargs()) == spec_expired(ttl, now_minutes, turn, session,
                                                         dialogue)


# -- validation at write time --------------------------------------------------------------------
def store(**over):
    cfg = HCFG.replace(**over) if over else HCFG
    return memlab.open_store(":memory:", config=cfg, clock=FixedClock(T_EXPIRES - 3600))


@pytest.mark.parametrize("ttl, field", [
    ({"kind": "absolute", "expires_at": "2026-09-01T00:00:00"}, "items[0].ttl.expires_at"),
    ({"kind": "absolute", "expires_at": "2026-13-01T00:00:00Z"}, "items[0].ttl.expires_at"),
    ({"kind": "turns", "turns": 2}, "items[0].ttl.created_turn"),
    ({"kind": "turns", "turns": -1, "created_turn": 0}, "items[0].ttl.turns"),
    ({"kind": "turns", "turns": 1, "created_turn": 1.5}, "items[0].ttl.created_turn"),
    ({"kind": "scope", "scope": "forever"}, "items[0].ttl.scope"),
    ({"kind": "soon"}, "items[0].ttl.kind"),
    ("1d", "items[0].ttl"),
])
def test_a_malformed_ttl_is_refused_at_write_naming_the_field(ttl, field):
    with store() as s:
        with pytest.raises(InvalidInput) as e:
            s.add("明天下午三点开会 / meeting at 3pm tomorrow", scope="dialogue",
                  category="event", ttl=ttl)
        assert e.value.field == field
        assert len(s) == 0


def test_a_turns_ttl_takes_the_write_turn_and_ephemeral_gets_the_default():
    with store(**{"ttl.ephemeral_turns": 3}) as s:
        a = s.add("remind me in two turns", scope="dialogue", category="directive",
                  ttl={"kind": "turns", "turns": 2}, turn=7)
        assert a.ttl == {"kind": "turns", "turns": 2, "created_turn": 7}
        e = s.add("用户现在有点困", scope="ephemeral", category="state", turn=4)
        assert e.ttl == {"kind": "turns", "turns": 3, "created_turn": 4}
        assert s.get([e.id])[0].ttl == e.ttl                  # stored as written
        given_ttl = {"kind": "scope", "scope": "dialogue"}
        g = s.add("用户此刻在地铁上", scope="ephemeral", category="state", turn=4, ttl=given_ttl)
        assert g.ttl == given_ttl                              # an explicit ttl wins
        assert s.add("no turn known", scope="ephemeral", category="state").ttl is None
        assert s.add("a user fact", scope="user", category="profile", turn=4).ttl is None


def test_the_default_ephemeral_ttl_ends_with_the_turn():
    with store() as s:   # ttl.ephemeral_turns = 1: expired when the next turn starts
        e = s.add("the user is typing on a phone", scope="ephemeral", category="state", turn=9)
        assert is_live(e, now=0, turn_counter=9)
        assert not is_live(e, now=0, turn_counter=10)


# -- expire_due: kept on disk, never recalled ----------------------------------------------------
def test_expire_due_marks_due_records_expired_and_recall_skips_them():
    with store() as s:
        abs_zh = s.add("用户九月一日前在上海出差", scope="user", category="event",
                       ttl={"kind": "absolute", "expires_at": EXPIRES})
        turns_en = s.add("the user is in Shanghai on a trip this turn", scope="dialogue",
                         category="state", ttl={"kind": "turns", "turns": 2}, turn=5)
        sess = s.add("用户这次会话在上海", scope="dialogue", category="state",
                     ttl={"kind": "scope", "scope": "session"})
        keep = s.add("the user lives in Shanghai 上海", scope="user", category="profile")
        ids = {r.id for r in (abs_zh, turns_en, sess, keep)}
        assert set(s.recall("上海 Shanghai", k=10).ids) == ids

        # before every boundary: nothing is due
        before = TTLContext(now=T_EXPIRES - 1, turn_counter=6, session_active=True)
        assert s.expire_due(before) == []
        # exactly at each boundary: all three are due; the record without a TTL stays
        at = TTLContext(now=T_EXPIRES, turn_counter=7, session_active=False)
        assert s.expire_due(at) == [abs_zh.id, turns_en.id, sess.id]
        assert s.expire_due(at) == []                          # already expired: idempotent
        assert s.recall("上海 Shanghai", k=10).ids == [keep.id]
        kept = s.get([abs_zh.id, turns_en.id, sess.id])        # still on disk
        assert [r.lifecycle_state for r in kept] == ["expired"] * 3
        assert [r.text for r in kept] == [abs_zh.text, turns_en.text, sess.text]
        assert len(s) == 4


def test_expire_due_leaves_other_tenants_and_refuses_a_malformed_stored_ttl():
    with store() as s:
        mine = s.add("我的临时状态", scope="ephemeral", category="state", turn=1)
        other = s.add("their state", scope="ephemeral", category="state", turn=1,
                      user_id="u_other")
        assert s.expire_due(TTLContext(now=0, turn_counter=2)) == [mine.id]
        assert s.get([other.id], user_id="u_other")[0].lifecycle_state == "active"
        # a ttl written around the validation (straight into the repository) is reported
        s._store.repo.update_fields(other.id, ttl={"kind": "turns", "turns": 1})
        with pytest.raises(InvalidInput) as e:
            s.expire_due(TTLContext(now=0, turn_counter=2), user_id="u_other")
        assert e.value.field == f"memory {other.id}: ttl.created_turn"
        assert s.get([other.id], user_id="u_other")[0].lifecycle_state == "active"


def test_check_ttl_returns_a_new_dict():
    src = {"kind": "turns", "turns": 1}
    out = check_ttl(src, turn=3)
    assert out == {"kind": "turns", "turns": 1, "created_turn": 3} and src == {"kind": "turns",
                                                                               "turns": 1}


@pytest.mark.parametrize("turn", [-1, "3", 2.0, True])
def test_a_bad_write_turn_is_refused_even_when_unused(turn):
    with store() as s:
        with pytest.raises(InvalidInput) as e:
            s.add("a user fact", scope="user", category="profile", turn=turn)
        assert e.value.field == "turn" and len(s) == 0

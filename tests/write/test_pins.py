"""Pins (issue 9 item 5; reverie §11.3: at most 20 per owner, never forgotten, never consolidated)
and the forgetting properties of pinned and permanent memories (§9.1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st_

import memlab
from memlab import forgetting
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, PinLimitExceeded
from memlab.types import MemoryRecord
from memlab.write.pins import consolidatable

T0 = 1_750_000_000.0
DAY = 86_400.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})


def _store(cfg=BASE):
    return memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0))


def _pinned_ids(st, **who):
    return {r.id for r in st.pinned(**who)}


def test_the_21st_pin_is_refused_naming_owner_cap_and_count_and_nothing_changes():
    with _store() as st:
        recs = st.add_many([{"text": f"memory number {i} about topic{i}"} for i in range(21)])
        for r in recs[:20]:
            st.pin(r.id)
        st.pin(recs[0].id)                                # already pinned: no change, no refusal
        with pytest.raises(PinLimitExceeded) as exc:
            st.pin(recs[20].id)
        e = exc.value
        assert (e.agent_id, e.user_id, e.cap, e.count) == ("agent_0", "user_0", 20, 21)
        assert all(s in str(e) for s in ("agent_0", "user_0", "governance.pins_max = 20", "21"))
        assert not st.get([recs[20].id])[0].pinned and len(st.pinned()) == 20
        st.pin(st.add("another user's memory", user_id="u2").id, user_id="u2")   # per owner
        st.unpin(recs[3].id)
        assert st.pin(recs[20].id).pinned and len(st.pinned()) == 20


def test_the_cap_is_the_config_field_and_binds_adds_with_pinned_too():
    cfg = BASE.replace(**{"governance.pins_max": 2})
    with _store(cfg) as st:
        st.add("one", pinned=True)
        with pytest.raises(PinLimitExceeded, match="would have 3 pinned"):
            st.add_many([{"text": "two", "pinned": True}, {"text": "three", "pinned": True}])
        assert len(st) == 1                                # the whole batch refused
        st.add("two", pinned=True)
        with pytest.raises(PinLimitExceeded):
            st.pin(st.add("three").id)


def test_a_superseding_revision_keeps_the_pin_count_at_the_cap():
    cfg = BASE.replace(**{"governance.pins_max": 1, "facts.rule": "subject_attribute"})
    with _store(cfg) as st:
        a = st.add("我住在北京")
        st.pin(a.id)
        b = st.add("我住在上海")                          # the pin moves: still 1 of 1
        assert _pinned_ids(st) == {b.id}


def test_only_an_active_memory_of_the_owner_can_be_pinned():
    with _store(BASE.replace(**{"facts.rule": "subject_attribute"})) as st:
        a = st.add("I live in Paris")
        st.add("I live in Rome")
        with pytest.raises(InvalidInput, match="superseded"):
            st.pin(a.id)
        with pytest.raises(InvalidInput, match="no memory with this id"):
            st.pin(a.id, user_id="intruder")
        assert _pinned_ids(st) == set()


def test_a_pinned_memory_keeps_retention_1_in_recall_while_its_twin_fades():
    with _store() as st:
        a = st.add("the red kite festival on the hill", importance=0.3, layer="short_term")
        b = st.add("the red kite festival on the beach", importance=0.3, layer="short_term")
        st.pin(a.id)
        res = st.recall("red kite festival", k=5, clock=FixedClock(T0 + 7 * DAY))
        ret = dict(zip(res.to_frame()["id"], res.to_frame()["retention"]))
        assert ret[a.id] == 1.0
        # §9.1 by hand: strength 0.35 + 1.25 * 0.3 = 0.725; short term: 7 days, one half-life
        assert ret[b.id] == pytest.approx(2 ** (-1 / 0.725), abs=1e-6)   # 0.3845
        later = st.recall("red kite festival", k=5, clock=FixedClock(T0 + 60 * DAY))
        assert later.ids == [a.id]          # the twin is forgotten (2^(-60/7/0.725) < 0.05)


@given(days=st_.floats(0, 1e5), importance=st_.floats(0, 1), emotion=st_.floats(0, 1),
       refs=st_.floats(0, 1e3), layer=st_.sampled_from([1, 2]))
def test_pinned_and_permanent_memories_never_decay(days, importance, emotion, refs, layer):
    cfg = MemlabConfig()
    pinned = forgetting.retention(layer, days, importance, emotion, refs, True, cfg)
    permanent = forgetting.retention(0, days, importance, emotion, refs, False, cfg)
    assert float(pinned) == 1.0 == float(permanent)
    assert forgetting.eligible(pinned, -1.0, False, cfg)


@pytest.mark.parametrize("fields,ok", [
    ({}, True), ({"pinned": True}, False), ({"retention_layer": "permanent"}, False),
    ({"lifecycle_state": "superseded"}, False), ({"lifecycle_state": "expired"}, False),
    ({"deprecated": True}, False),
])
def test_the_consolidator_may_never_touch_a_pinned_or_permanent_memory(fields, ok):
    assert consolidatable(MemoryRecord(id="x", text="t", **fields)) is ok


def test_cli_pin_and_unpin(tmp_path):
    from typer.testing import CliRunner

    from memlab.cli import app
    path = tmp_path / "p.sqlite"
    with memlab.open_store(path, config=BASE.replace(**{"governance.pins_max": 1})) as st:
        a, b = st.add("first memory"), st.add("second memory")
    runner = CliRunner()
    sets = ["--set", "embedding.backend=hashing", "--set", "governance.pins_max=1"]
    out = runner.invoke(app, ["pin", str(path), a.id, *sets])
    assert out.exit_code == 0 and "1 of 1 pins" in out.output
    out = runner.invoke(app, ["pin", str(path), b.id, *sets])
    assert out.exit_code == 2 and "governance.pins_max = 1" in out.output
    assert runner.invoke(app, ["unpin", str(path), a.id, *sets]).exit_code == 0
    assert runner.invoke(app, ["pin", str(path), b.id, *sets]).exit_code == 0
    with memlab.open_store(path, config=BASE) as st:
        assert [r.id for r in st.pinned()] == [b.id]

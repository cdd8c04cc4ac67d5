"""The gate (familiars §5.10.2-§5.10.4) on a simulated device with a fake clock; no sleeps."""

from __future__ import annotations

import threading

import pytest

from memlab.config import VRAMConfig
from memlab.errors import InvalidInput, MemlabError
from memlab.vram import (ModelBudgetExceeded, SimulatedDevice, VRAMGate, boost_thread_priority)


class FakeClock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(capacity=3000.0, **cfg):
    clock = FakeClock()
    gate = VRAMGate(SimulatedDevice(capacity), VRAMConfig(reserve_mb=0.0, **cfg), clock=clock)
    return gate, clock


def evictions(gate):
    return [(e.model, e.reason) for e in gate.trace.events if e.event == "evict"]


def test_capacity_is_total_minus_reserve():
    gate = VRAMGate(SimulatedDevice(8192), VRAMConfig(reserve_mb=512.0))
    assert gate.capacity_mb == 7680.0
    with pytest.raises(InvalidInput) as err:
        VRAMGate(SimulatedDevice(500), VRAMConfig(reserve_mb=512.0))
    assert err.value.field == "vram.reserve_mb"


def test_acquire_loads_on_demand_yields_the_handle_and_hits_after():
    gate, clock = make()
    loaded, freed = [], []
    gate.register("emb", priority=1, estimated_mb=700, load=lambda: loaded.append(1) or "H",
                  on_evict=lambda: freed.append(1))
    with gate.acquire("emb") as h:
        assert h == "H" and gate.device.free_mb() == 2300
    with gate.acquire("emb") as h:
        assert h == "H"
    assert loaded == [1] and freed == []
    assert [e.event for e in gate.trace.events] == ["register", "acquire", "load", "acquire",
                                                    "hit"]
    gate.release("emb")
    assert freed == [1] and gate.device.free_mb() == 3000
    assert evictions(gate) == [("emb", "release")]


def test_sync_evicts_lowest_priority_first_then_least_recently_active():
    gate, clock = make(3000)
    for m, p in [("a", 2), ("b", 3), ("c", 3)]:
        gate.register(m, priority=p, estimated_mb=1000)
    for m in ("c", "b", "a"):            # c is the least recently active of the two NICE ones
        clock.t += 1
        with gate.acquire(m):
            pass
    gate.register("new", priority=2, estimated_mb=1000)
    with gate.acquire("new"):
        pass
    assert evictions(gate) == [("c", "priority")]
    gate.register("big", priority=2, estimated_mb=2000)
    with gate.acquire("big"):
        pass
    # b (NICE) first, then the older of the IMPORTANT ones (a, used at t=3; new at t=3 too,
    # but registered later)
    assert evictions(gate)[1:] == [("b", "priority"), ("a", "priority")]


def test_an_idle_more_urgent_resident_stays_unless_the_thread_is_boosted():
    gate, clock = make(2000)
    gate.register("tts", priority=1, estimated_mb=1500)
    gate.register("decider", priority=2, estimated_mb=1000)
    with gate.acquire("tts"):
        pass
    with pytest.raises(ModelBudgetExceeded) as err:
        with gate.acquire("decider", timeout_s=0):
            pass
    assert err.value.need_mb == 1000 and err.value.free_mb == 500
    assert err.value.holders == [("tts", "sync", 1, 1500.0, False)]
    assert "'decider' needs 1000 MB; 500 MB free of 2000 MB capacity; held by tts (sync, " \
           "priority 1, 1500 MB, idle)" in str(err.value)
    with boost_thread_priority(1):
        with gate.acquire("decider"):
            pass
    assert evictions(gate) == [("tts", "priority")]
    acquires = [e.priority for e in gate.trace.events if e.event == "acquire"]
    assert acquires == [1, 2, 1]


def test_sync_never_evicts_a_working_sync_resident():
    gate, clock = make(2000)
    gate.register("asr", priority=2, estimated_mb=1500)
    gate.register("tts", priority=1, estimated_mb=1000)
    with gate.acquire("asr"):
        with pytest.raises(ModelBudgetExceeded) as err:
            with gate.acquire("tts", timeout_s=0):
                pass
        assert err.value.holders == [("asr", "sync", 2, 1500.0, True)]
        assert "working" in str(err.value)
    assert evictions(gate) == []
    assert [e.event for e in gate.trace.events][-2:] == ["wait", "denied"]


def test_larger_than_capacity_is_denied_at_once():
    gate, clock = make(1000)
    gate.register("huge", priority=1, estimated_mb=4000)
    with pytest.raises(ModelBudgetExceeded) as err:
        with gate.acquire("huge"):
            pass
    assert (err.value.need_mb, err.value.capacity_mb) == (4000, 1000)
    assert "larger than the capacity" in str(err.value)
    assert isinstance(err.value, MemlabError)


def test_queue_never_evicts_sync_and_evicts_idle_queue_of_lower_or_equal_priority():
    gate, clock = make(3000)
    gate.register("emb", priority=1, estimated_mb=1000)
    gate.register("idx", priority=4, estimated_mb=1000, category="queue")
    gate.register("mem", priority=3, estimated_mb=1000, category="queue")
    gate.register("ocr", priority=3, estimated_mb=2000, category="queue")
    for m in ("emb", "idx", "mem"):
        with gate.acquire(m):
            pass
    with gate.acquire("ocr"):           # evicts idx (4), then mem (3 = its own), never emb
        pass
    assert evictions(gate) == [("idx", "priority"), ("mem", "priority")]
    gate.release("emb")
    gate.register("sbg", priority=4, estimated_mb=1000)     # an idle sync model of priority 4
    with gate.acquire("sbg"):
        pass
    gate.register("bg", priority=3, estimated_mb=1000, category="queue")
    with pytest.raises(ModelBudgetExceeded) as err:  # only ocr (working) and sbg (sync) hold it
        with gate.acquire("ocr"):
            with gate.acquire("bg", timeout_s=0):
                pass
    assert evictions(gate)[2:] == [("emb", "release")]
    assert [h[0] for h in err.value.holders] == ["ocr", "sbg"]


def test_a_preempted_queue_job_resumes_where_it_stopped_exactly_once():
    gate, clock = make(2000)
    saved, resumed = [], []
    state = {"page": 7}
    gate.register("ocr", priority=3, estimated_mb=1500, category="queue",
                  on_checkpoint=lambda: saved.append(state) or state, on_resume=resumed.append)
    gate.register("tts", priority=1, estimated_mb=1000)
    with gate.acquire("ocr"):
        with gate.acquire("tts"):
            assert saved == [state] and resumed == []
    assert evictions(gate) == [("ocr", "sync-preempt")]
    gate.release("tts")
    with gate.acquire("ocr"):
        assert resumed == [state] and resumed[0] is state
    gate.release("ocr")
    with gate.acquire("ocr"):
        pass
    assert resumed == [state]
    events = [(e.event, e.model) for e in gate.trace.events
              if e.event in ("checkpoint", "evict", "resume")]
    assert events == [("checkpoint", "ocr"), ("evict", "ocr"), ("evict", "tts"),
                      ("resume", "ocr"), ("evict", "ocr")]


def test_an_idle_queue_resident_is_evicted_without_a_checkpoint():
    gate, clock = make(2000)
    calls = []
    gate.register("ocr", priority=3, estimated_mb=1500, category="queue",
                  on_checkpoint=lambda: calls.append("cp"), on_resume=calls.append)
    gate.register("tts", priority=1, estimated_mb=1000)
    with gate.acquire("ocr"):
        pass
    with gate.acquire("tts"):
        pass
    assert calls == [] and evictions(gate) == [("ocr", "priority")]


def test_reap_idle_with_a_fake_clock():
    gate, clock = make(3000, idle_evict_seconds=100.0)
    gate.register("a", priority=1, estimated_mb=500)
    gate.register("b", priority=3, estimated_mb=500, idle_ttl_sec=10.0)
    gate.register("c", priority=2, estimated_mb=500)
    for m in ("a", "b"):
        with gate.acquire(m):
            pass
    clock.t = 9.9
    assert gate.reap_idle() == []
    clock.t = 10.0
    assert gate.reap_idle() == ["b"]
    with gate.acquire("c"):
        clock.t = 500.0
        assert gate.reap_idle() == ["a"]          # c is working: kept
    assert evictions(gate) == [("b", "idle"), ("a", "idle")]
    assert [e.reason for e in gate.trace.events if e.event == "idle_reclaim"] == ["b", "a"]
    clock.t = 600.0
    assert gate.reap_idle() == ["c"]


def test_release_of_a_working_model_waits_for_its_last_user_and_release_all():
    gate, clock = make()
    gate.register("a", priority=1, estimated_mb=500)
    gate.register("b", priority=1, estimated_mb=500)
    with gate.acquire("b"):
        pass
    with gate.acquire("a"):
        gate.release_all()
        assert [m for m, _ in evictions(gate)] == ["b"]
    assert evictions(gate) == [("b", "release"), ("a", "release")]
    assert gate.resident_mb() == 0


def test_register_refuses_bad_entries_and_register_client():
    gate, clock = make()
    for kw, field in [({"priority": 5}, "priority"), ({"priority": True}, "priority"),
                      ({"category": "batch"}, "category"), ({"estimated_mb": -1}, "estimated_mb"),
                      ({"estimated_mb": float("nan")}, "estimated_mb"),
                      ({"estimated_mb": float("inf")}, "estimated_mb"),
                      ({"idle_ttl_sec": 0.0}, "idle_ttl_sec")]:
        args = dict(priority=1, estimated_mb=100.0) | kw
        with pytest.raises(InvalidInput) as err:
            gate.register("x", **args)
        assert err.value.field == field
    gate.register("x", priority=1, estimated_mb=100)
    with pytest.raises(InvalidInput):
        gate.register("x", priority=1, estimated_mb=100)
    with pytest.raises(InvalidInput) as err:
        with gate.acquire("nope"):
            pass
    assert "not registered" in str(err.value)

    class Client:
        model_id, priority, category = "writer", 3, "queue"

        def __init__(self):
            self.log = []

        def estimated_mb(self):
            return 900.0

        def load(self):
            self.log.append("load")
            return self

        def unload(self):
            self.log.append("unload")

        def checkpoint(self):
            return "state"

        def resume(self, state):
            self.log.append(("resume", state))

    c = Client()
    gate.register_client(c)
    gate.register("tts", priority=1, estimated_mb=2500)
    with gate.acquire("writer") as h:
        assert h is c
        with gate.acquire("tts"):
            pass
    gate.release("tts")
    with gate.acquire("writer"):
        pass
    assert c.log == ["load", "unload", "load", ("resume", "state")]


def test_a_waiting_queue_acquire_wakes_when_memory_is_released():
    """Two threads, one condition variable: the job waits (a 'wait' event tells the test), the
    user's model is released, the job loads."""
    gate, clock = make(2000)
    gate.register("tts", priority=1, estimated_mb=1500)
    gate.register("ocr", priority=3, estimated_mb=1000, category="queue")
    waiting, done = threading.Event(), []
    gate.trace.listeners.append(lambda e: e.event == "wait" and waiting.set())

    def job():
        with gate.acquire("ocr", timeout_s=60) as _:
            done.append(threading.current_thread().name)

    with gate.acquire("tts"):
        pass
    t = threading.Thread(target=job, name="job")
    t.start()
    assert waiting.wait(30)
    assert done == []
    gate.release("tts")
    t.join(30)
    assert done == ["job"]
    ev = [(e.event, e.model, e.thread) for e in gate.trace.events if e.model == "ocr"]
    assert ev[1:] == [("acquire", "ocr", "job"), ("wait", "ocr", "job"), ("load", "ocr", "job")]


def test_the_reaper_thread_calls_reap_idle():
    gate, clock = make(idle_evict_seconds=5.0)
    gate.register("a", priority=1, estimated_mb=500)
    with gate.acquire("a"):
        pass
    clock.t = 100.0
    reclaimed = threading.Event()
    gate.trace.listeners.append(lambda e: e.event == "idle_reclaim" and reclaimed.set())
    gate.start_reaper(interval_s=0.01)
    try:
        assert reclaimed.wait(30)
    finally:
        gate.stop_reaper()
    assert evictions(gate) == [("a", "idle")]


def test_a_client_that_holds_no_vram_registers_and_is_traced():
    """An HTTP LLM (memlab.vram.clients.remote_llm_client) holds 0 MB: the gate admits it without
    evicting anything, and its loads are in the trace like any model's."""
    from memlab.vram.clients import remote_llm_client

    gate, clock = make()
    gate.register("big", priority=4, estimated_mb=gate.capacity_mb, category="queue")
    with gate.acquire("big"):
        pass
    llm = object()
    gate.register_client(remote_llm_client(llm, model_id="decider"))
    with gate.acquire("decider") as handle:
        assert handle is llm
    assert {r.model_id for r in gate.snapshot() if r.resident} == {"big", "decider"}
    assert evictions(gate) == []
    assert "load" in [e.event for e in gate.trace.events if e.model == "decider"]

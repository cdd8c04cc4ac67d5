"""Replay a workload through the gate in simulated time (issue 11, item 5).

A workload (YAML) names the models and the timed events::

    models:
      asr:       {mb: 1500, priority: critical, category: sync}
      memorizer: {mb: 3000, priority: nice, category: queue}
    events:
      - {at: 0, every: 60, count: 10, boost: critical,        # a user turn, ten times
         turn: [{model: asr, s: 1.5}, {model: tts, s: 2.0}]}  # sync steps, one after another
      - {at: 5, job: memorizer, s: 40}                        # a queue job of 40 s of work

``priority`` is 1..4 or a level name (critical, important, nice, background: ``vram.priority_*``);
a turn may run boosted (§5.10.4: its acquires run at ``boost``). A turn's steps must be sync
models, a job's model a queue model; ``idle_ttl_s`` on a model overrides the idle limit;
``load_s`` (default 0) is the simulated time a load takes: a step that had to load its model
holds it ``load_s`` longer, and the user's latency of a sync step is its wait plus that load.

The loop is a discrete-event simulation on one thread: the gate's clock is the simulated clock,
its device a :class:`SimulatedDevice`, and requests go through :class:`memlab.vram.gate.Request`
(``try_admit`` without blocking). A request that cannot be admitted waits (sync requests first,
then by priority and arrival) until memory frees, at most ``vram.sync_wait_s`` or
``vram.queue_wait_s`` simulated seconds, then is denied (the turn is cut short, the job dropped).
A job preempted by a sync request (``sync-preempt``) is checkpointed with the work it has left,
asks again at once, and resumes that work when admitted. Idle reclaim runs at the exact moment a
resident reaches its policy's idle limit.

The scripted workload :data:`SCRIPTED` (device 3000 MB, ``reserve_mb`` 0,
``idle_evict_seconds`` 20; ``asr`` and ``tts`` 1000 MB sync CRITICAL, ``ocr`` 1500 MB queue NICE,
``indexer`` 1000 MB queue BACKGROUND; an indexer job of 3 s at t=0, an OCR job of 10 s at t=1, a
user turn at t=4: asr 2 s then tts 1 s) gives under the gate's priority policy exactly this
sequence (:data:`SCRIPTED_EVENTS`, asserted by ``tests/vram/test_vram_simulate.py``)::

    t     event        model    reason
       0  register     asr
       0  register     tts
       0  register     ocr
       0  register     indexer
       0  acquire      indexer
       0  load         indexer
       1  acquire      ocr
       1  load         ocr
       4  acquire      asr
       4  evict        indexer  priority
       4  load         asr
       6  acquire      tts
       6  checkpoint   ocr      sync-preempt
       6  evict        ocr      sync-preempt
       6  load         tts
       6  acquire      ocr
       6  wait         ocr
      26  evict        asr      idle
      26  idle_reclaim -        asr
      26  load         ocr
      26  resume       ocr
      27  evict        tts      idle
      27  idle_reclaim -        tts
      51  evict        ocr      idle
      51  idle_reclaim -        ocr

Read it: the turn's asr evicts the idle indexer (lowest priority); its tts preempts the working
OCR job (checkpointed with 5 s of work left), which asks again and waits - a queue request never
evicts a sync model - until the idle reclaim of asr at 6 + 20 s; it then resumes its 5 s and is
itself reclaimed 20 s after it finishes.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from memlab.config import VRAMConfig
from memlab.errors import ConfigError, DatasetError
from memlab.vram.devices import SimulatedDevice
from memlab.vram.gate import ModelBudgetExceeded, Request, VRAMGate
from memlab.vram.policy import KeepAlivePolicy, LRUPolicy, Policy, PriorityPolicy
from memlab.vram.priority import boost_thread_priority
from memlab.vram.trace import Trace

LEVELS = ("critical", "important", "nice", "background")

#: the documented scripted workload (module docstring): device MB, config overrides, workload
SCRIPTED = {
    "capacity_mb": 3000.0,
    "config": {"reserve_mb": 0.0, "idle_evict_seconds": 20.0},
    "workload": {
        "name": "scripted",
        "models": {"asr": {"mb": 1000, "priority": "critical", "category": "sync"},
                   "tts": {"mb": 1000, "priority": "critical", "category": "sync"},
                   "ocr": {"mb": 1500, "priority": "nice", "category": "queue"},
                   "indexer": {"mb": 1000, "priority": "background", "category": "queue"}},
        "events": [{"at": 0, "job": "indexer", "s": 3}, {"at": 1, "job": "ocr", "s": 10},
                   {"at": 4, "turn": [{"model": "asr", "s": 2}, {"model": "tts", "s": 1}]}]},
}

#: (t, event, model, reason) of SCRIPTED under the priority policy, as in the module docstring
SCRIPTED_EVENTS = [
    (0.0, 'register', 'asr', None),
    (0.0, 'register', 'tts', None),
    (0.0, 'register', 'ocr', None),
    (0.0, 'register', 'indexer', None),
    (0.0, 'acquire', 'indexer', None),
    (0.0, 'load', 'indexer', None),
    (1.0, 'acquire', 'ocr', None),
    (1.0, 'load', 'ocr', None),
    (4.0, 'acquire', 'asr', None),
    (4.0, 'evict', 'indexer', 'priority'),
    (4.0, 'load', 'asr', None),
    (6.0, 'acquire', 'tts', None),
    (6.0, 'checkpoint', 'ocr', 'sync-preempt'),
    (6.0, 'evict', 'ocr', 'sync-preempt'),
    (6.0, 'load', 'tts', None),
    (6.0, 'acquire', 'ocr', None),
    (6.0, 'wait', 'ocr', None),
    (26.0, 'evict', 'asr', 'idle'),
    (26.0, 'idle_reclaim', None, 'asr'),
    (26.0, 'load', 'ocr', None),
    (26.0, 'resume', 'ocr', None),
    (27.0, 'evict', 'tts', 'idle'),
    (27.0, 'idle_reclaim', None, 'tts'),
    (51.0, 'evict', 'ocr', 'idle'),
    (51.0, 'idle_reclaim', None, 'ocr'),
]


# ---- the workload --------------------------------------------------------------------------
@dataclass(frozen=True)
class Model:
    name: str
    mb: float
    priority: int
    category: str
    idle_ttl_s: float | None = None
    load_s: float = 0.0


@dataclass(frozen=True)
class Turn:
    at: float
    steps: tuple[tuple[str, float], ...]
    boost: int | None = None


@dataclass(frozen=True)
class Job:
    at: float
    model: str
    s: float


@dataclass(frozen=True)
class Workload:
    name: str
    models: tuple[Model, ...]
    turns: tuple[Turn, ...]
    jobs: tuple[Job, ...]
    capacity_mb: float | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], cfg: VRAMConfig, *, source: str = "<workload>",
                  ) -> "Workload":
        def bad(rule: str, field_: str | None = None, value: Any = None) -> DatasetError:
            return DatasetError(source, rule, field=field_, value=value)

        def level(v: Any, where: str) -> int:
            if isinstance(v, str) and v.lower() in LEVELS:
                return getattr(cfg, f"priority_{v.lower()}")
            if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 4:
                return v
            raise bad(f"a priority is 1..4 or one of {LEVELS}", where, v)

        def seconds(v: Any, where: str, *, positive: bool = True) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 \
                    or (positive and v == 0):
                raise bad("must be a number of seconds " + ("> 0" if positive else ">= 0"),
                          where, v)
            return float(v)

        if not isinstance(data, Mapping) or not isinstance(data.get("models"), Mapping) \
                or not isinstance(data.get("events"), list):
            raise bad("a workload is a mapping with 'models' (a mapping) and 'events' (a list)")
        models = []
        for name, m in data["models"].items():
            if not isinstance(m, Mapping) or m.get("category") not in ("sync", "queue"):
                raise bad("a model has mb, priority and category (sync or queue)",
                          f"models.{name}", m)
            ttl = m.get("idle_ttl_s")
            models.append(Model(str(name), seconds(m.get("mb"), f"models.{name}.mb"),
                                level(m.get("priority"), f"models.{name}.priority"),
                                m["category"], None if ttl is None else
                                seconds(ttl, f"models.{name}.idle_ttl_s"),
                                seconds(m.get("load_s", 0), f"models.{name}.load_s",
                                        positive=False)))
        cat = {m.name: m.category for m in models}
        turns, jobs = [], []
        for i, ev in enumerate(data["events"]):
            where = f"events[{i}]"
            if not isinstance(ev, Mapping) or ("turn" in ev) == ("job" in ev):
                raise bad("an event has either 'turn' (a list of steps) or 'job'", where, ev)
            at = seconds(ev.get("at", 0), f"{where}.at", positive=False)
            count = ev.get("count", 1)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise bad("count must be an int >= 1", f"{where}.count", count)
            every = seconds(ev["every"], f"{where}.every") if "every" in ev else 0.0
            if count > 1 and not every:
                raise bad("a repeated event (count > 1) needs 'every'", where, ev)
            for k in range(count):
                t = at + k * every
                if "turn" in ev:
                    steps = []
                    for j, st in enumerate(ev["turn"] or []):
                        w = f"{where}.turn[{j}]"
                        if not isinstance(st, Mapping) or cat.get(st.get("model")) != "sync":
                            raise bad("a turn step names a sync model", w, st)
                        steps.append((st["model"], seconds(st.get("s"), f"{w}.s")))
                    if not steps:
                        raise bad("a turn has at least one step", where, ev)
                    boost = None if ev.get("boost") is None else level(ev["boost"],
                                                                       f"{where}.boost")
                    turns.append(Turn(t, tuple(steps), boost))
                else:
                    if cat.get(ev["job"]) != "queue":
                        raise bad("a job names a queue model", f"{where}.job", ev["job"])
                    jobs.append(Job(t, ev["job"], seconds(ev.get("s"), f"{where}.s")))
        cap = data.get("capacity_mb")
        return cls(str(data.get("name", Path(source).stem)), tuple(models), tuple(turns),
                   tuple(jobs), None if cap is None else seconds(cap, "capacity_mb"))

    def to_dict(self) -> dict[str, Any]:
        """The workload as :meth:`from_dict` reads it, each repeated event written out and
        priorities as numbers: ``Workload.from_dict(wl.to_dict(), cfg) == wl``."""
        models = {m.name: {"mb": m.mb, "priority": m.priority, "category": m.category,
                           "load_s": m.load_s,
                           **({} if m.idle_ttl_s is None else {"idle_ttl_s": m.idle_ttl_s})}
                  for m in self.models}
        events: list[dict[str, Any]] = [
            {"at": t.at, "turn": [{"model": m, "s": s} for m, s in t.steps],
             **({} if t.boost is None else {"boost": t.boost})} for t in self.turns]
        events += [{"at": j.at, "job": j.model, "s": j.s} for j in self.jobs]
        return {"name": self.name, "models": models, "events": events,
                **({} if self.capacity_mb is None else {"capacity_mb": self.capacity_mb})}

    @classmethod
    def from_yaml(cls, path: str | Path, cfg: VRAMConfig) -> "Workload":
        from memlab.yamlfile import read_yaml

        path = Path(path)
        try:   # memlab's strict reader: UTF-8, no key twice, bounded depth, file:line:column
            data = read_yaml(path, "workload file")
        except ConfigError as exc:
            raise DatasetError(exc.key, f"cannot read the workload: {exc.rule}", value=exc.value)\
                from None
        return cls.from_dict(data, cfg, source=str(path))


# ---- the simulation ------------------------------------------------------------------------
@dataclass(eq=False)
class _Actor:
    name: str
    kind: str                      # "turn" | "job"
    steps: list                    # [(model, seconds)]; a job: one step, its work left
    boost: int | None = None
    step: int = 0
    token: int = 0                 # bumped when a job is preempted: its done event is stale
    end: float = 0.0
    request: Request | None = None
    waiting_since: float = 0.0
    asks: int = 0                  # requests made: a deadline event is for one of them


@dataclass
class SimResult:
    """One simulation: the policy, the trace (each load with its ``load_s``), the gate's
    capacity, the summary, and what it ran (workload, device MB, VRAM config, keep-alive)."""

    policy: str
    trace: Trace
    capacity_mb: float
    summary: dict[str, float] = field(default_factory=dict)
    workload: Workload | None = None
    device_mb: float | None = None
    config: VRAMConfig | None = None
    keepalive_s: float | None = None

    def to_frame(self):
        """The trace's events, one row each (:meth:`Trace.to_frame`)."""
        return self.trace.to_frame()


class _Sim:
    def __init__(self, wl: Workload, capacity_mb: float, cfg: VRAMConfig, policy: Policy):
        self.now = 0.0
        self.cfg = cfg
        self.device = SimulatedDevice(capacity_mb)
        self.gate = VRAMGate(self.device, cfg, clock=lambda: self.now, policy=policy)
        self.actor = "sim"
        self.gate.trace.thread_name = lambda: self.actor
        self.heap: list = []
        self.seq = itertools.count()
        self.pending: list[_Actor] = []
        self.running: dict[str, list[_Actor]] = {m.name: [] for m in wl.models}
        self.preempted: list[_Actor] = []
        self.counts = dict(turns=len(wl.turns), turns_done=0, turns_denied=0, jobs=len(wl.jobs),
                           jobs_done=0, jobs_denied=0, resumed_jobs=0)
        self.last_done = 0.0
        self.load_s = {m.name: m.load_s for m in wl.models}
        self.sync_latency: list[float] = []
        self.load_time = 0.0
        for m in wl.models:
            self.gate.register(m.name, priority=m.priority, estimated_mb=m.mb,
                               category=m.category, idle_ttl_sec=m.idle_ttl_s,
                               on_checkpoint=self._checkpointer(m.name),
                               on_resume=self._resume)
        for i, t in enumerate(wl.turns):
            self._at(t.at, "start", _Actor(f"turn-{i}", "turn", list(t.steps), t.boost))
        for i, j in enumerate(wl.jobs):
            self._at(j.at, "start", _Actor(f"job-{i}-{j.model}", "job", [(j.model, j.s)]))

    def _at(self, t: float, kind: str, actor: _Actor, token: int = 0) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), kind, actor, token))

    def _checkpointer(self, model: str):
        def checkpoint() -> dict[str, float]:
            state = {}
            for a in self.running[model]:
                if a.kind == "job":
                    left = a.end - self.now
                    a.steps[0] = (model, left)
                    a.token += 1
                    self.preempted.append(a)
                    state[a.name] = left
            return state
        return checkpoint

    def _resume(self, state: dict[str, float]) -> None:
        self.counts["resumed_jobs"] += len(state)

    # -- requests ------------------------------------------------------------------------------
    def _ask(self, a: _Actor) -> None:
        model = a.steps[a.step][0]
        try:
            if a.boost is not None:
                with boost_thread_priority(a.boost):
                    a.request = self.gate.request(model)
            else:
                a.request = self.gate.request(model)
        except ModelBudgetExceeded:
            self._denied(a)
            return
        a.waiting_since = self.now
        a.asks += 1
        self.pending.append(a)
        wait = self.cfg.sync_wait_s if a.request.entry.category == "sync" \
            else self.cfg.queue_wait_s
        self._at(self.now + wait, "deadline", a, a.asks)

    def _denied(self, a: _Actor) -> None:
        self.counts["turns_denied" if a.kind == "turn" else "jobs_denied"] += 1

    def _drain(self) -> None:
        progress = True
        while progress and self.pending:
            progress = False
            order = sorted(self.pending, key=lambda a: (a.request.entry.category != "sync",
                                                        a.request.priority, a.waiting_since))
            for a in order:
                self.actor = a.name
                loaded = not a.request.entry.resident
                if a.request.try_admit():
                    self.pending.remove(a)
                    model, s = a.steps[a.step]
                    load = self.load_s[model] if loaded else 0.0
                    self.load_time += load
                    if a.request.entry.category == "sync":
                        self.sync_latency.append(self.now - a.waiting_since + load)
                    a.end = self.now + load + s
                    self.running[model].append(a)
                    self._at(a.end, "done", a, a.token)
                    self._handle_preempted()
                    progress = True
                    break

    def _handle_preempted(self) -> None:
        while self.preempted:
            a = self.preempted.pop(0)
            self.actor = a.name
            model = a.steps[0][0]
            self.running[model].remove(a)
            self.gate.leave(model)
            self._ask(a)

    def run(self) -> None:
        while self.heap:
            t, _, kind, a, token = heapq.heappop(self.heap)
            self.now = t
            self.actor = a.name if kind != "reap" else "reaper"
            if kind == "start":
                self._ask(a)
            elif kind == "done" and token == a.token:
                model = a.steps[a.step][0]
                self.running[model].remove(a)
                self.gate.leave(model)
                self.last_done = self.now
                entry = next(r for r in self.gate.snapshot() if r.model_id == model)
                limit = self.gate.policy.idle_limit(entry)
                if limit is not None:
                    self._at(self.now + limit, "reap", a)
                a.step += 1
                if a.step < len(a.steps):
                    self._ask(a)
                else:
                    self.counts["turns_done" if a.kind == "turn" else "jobs_done"] += 1
            elif kind == "deadline" and token == a.asks and a in self.pending:
                self.pending.remove(a)
                a.request.deny("waited the longest a simulated request may")
                self._denied(a)
            elif kind == "reap":
                self.gate.reap_idle()
            self._drain()


def format_events(events: list[tuple]) -> str:
    """(t, event, model, reason) tuples as the module docstring's table rows."""
    return "\n".join(f"    {t:>4g}  {e:<12} {m or '-':<8} {r or ''}".rstrip()
                     for t, e, m, r in events)


def policy_for(name: str, cfg: VRAMConfig, keepalive_s: float | None = None) -> Policy:
    if name == "priority":
        return PriorityPolicy(cfg.idle_evict_seconds)
    if name == "lru":
        return LRUPolicy()
    if name == "keepalive":
        return KeepAlivePolicy(cfg.keepalive_s if keepalive_s is None else keepalive_s)
    raise ValueError(f"unknown policy {name!r}: priority, lru or keepalive")


def simulate(wl: Workload, capacity_mb: float, cfg: VRAMConfig, *, policy: str = "priority",
             keepalive_s: float | None = None) -> SimResult:
    """Run ``wl`` on a simulated device of ``capacity_mb`` (the gate's capacity is that minus
    ``vram.reserve_mb``) under ``policy``; the summary adds to :meth:`Trace.summary` the turns
    and jobs done and denied, the checkpointed jobs resumed, the simulated makespan, the p50/p95
    latency of the sync steps (wait + the load they had to do) and the total load time."""
    sim = _Sim(wl, capacity_mb, cfg, policy_for(policy, cfg, keepalive_s))
    sim.run()
    # the gate's clock stands still during a simulated load: each load event gets its model's
    # load_s here (the time the step that loaded it spends loading)
    trace = Trace(dataclasses.replace(e, load_s=sim.load_s[e.model]) if e.event == "load" else e
                  for e in sim.gate.trace.events)
    summary = trace.summary(capacity_mb=sim.gate.capacity_mb)
    summary.update({k: float(v) for k, v in sim.counts.items()})
    summary["makespan_s"] = sim.last_done
    lat = sim.sync_latency or [0.0]
    summary["sync_latency_p50_s"] = float(np.percentile(lat, 50))
    summary["sync_latency_p95_s"] = float(np.percentile(lat, 95))
    summary["load_time_s"] = sim.load_time
    return SimResult(policy, trace, sim.gate.capacity_mb, summary, wl, float(capacity_mb), cfg,
                     (cfg.keepalive_s if keepalive_s is None else float(keepalive_s))
                     if policy == "keepalive" else None)


COMPARED = ("turns_done", "turns_denied", "jobs_done", "jobs_denied", "sync_wait_p50_s",
            "sync_wait_p95_s", "sync_wait_max_s", "sync_latency_p50_s", "sync_latency_p95_s",
            "load_time_s", "loads", "hits", "evictions", "checkpoints",
            "resumes", "waits", "denied", "time_over_capacity_s", "makespan_s")


def compare_policies(wl: Workload, capacity_mb: float, cfg: VRAMConfig, *,
                     keepalive_s: float | None = None):
    """The same workload under the gate (``priority``), ``lru`` and ``keepalive``: a DataFrame
    of the :data:`COMPARED` metrics, one row per policy."""
    import pandas as pd

    rows = {}
    for name in ("priority", "lru", "keepalive"):
        res = simulate(wl, capacity_mb, cfg, policy=name, keepalive_s=keepalive_s)
        rows[name] = {k: res.summary[k] for k in COMPARED}
    return pd.DataFrame.from_dict(rows, orient="index")

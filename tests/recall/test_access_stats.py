"""The reader's access statistics (§5.3.2 last_accessed_ts, access_count): buffered, written in
batches when ``reader.flush_size`` accesses are buffered or the oldest is
``reader.flush_interval_s`` old (a fake clock, no sleeps), on ``flush()`` and on ``close()``; a
worker process killed with SIGKILL loses at most one unflushed batch and never a record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, StoreLocked
from memlab.recall.access import AccessBuffer
from memlab.store.checkup import check_store

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_790_000_000.0
BASE = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
        "recall.relevance_floor": 0.0}
TEXTS = ["I like oolong tea", "oolong tea with milk", "我喜欢喝乌龙茶", "乌龙茶和牛奶",
         "the train leaves at noon", "火车中午出发"]


def cfg(**over) -> MemlabConfig:
    return MemlabConfig().replace(**{**BASE, **over})


def fill(st) -> list[str]:
    return [st.add(t, timestamp=T0, scope="user", category="knowledge").id for t in TEXTS]


def counts(st, ids) -> dict[str, tuple[int, float | None]]:
    return {r.id: (r.access_count, r.last_accessed) for r in st.get(ids)}


def test_flush_when_flush_size_accesses_are_buffered():
    clock = FixedClock(T0)
    with memlab.open_store(":memory:", config=cfg(**{"reader.flush_size": 6,
                                                      "reader.flush_interval_s": 100.0}),
                           clock=clock) as st:
        ids = fill(st)
        got = [st.build_rag_context("oolong tea", k=2, now=T0 + i).ids for i in range(2)]
        assert got[0] == got[1] and len(got[0]) == 2
        assert st.access_stats.pending == 4                  # 4 < 6: nothing written yet
        assert all(c == (0, None) for c in counts(st, ids).values())
        st.build_rag_context("oolong tea", k=2, now=T0 + 2)  # 6 >= 6: one batch
        assert st.access_stats.pending == 0 and st.access_stats.batches == 1
        c = counts(st, ids)
        assert [c[i] for i in got[0]] == [(3, T0 + 2)] * 2   # last_accessed = the read's now
        assert sum(n for n, _ in c.values()) == 6


def test_flush_when_the_oldest_access_is_flush_interval_old_by_the_clock():
    clock = FixedClock(T0)
    with memlab.open_store(":memory:", config=cfg(**{"reader.flush_size": 1000,
                                                      "reader.flush_interval_s": 100.0}),
                           clock=clock) as st:
        ids = fill(st)
        st.build_rag_context("乌龙茶", k=1, now=T0)
        clock.advance(99.5)
        st.build_rag_context("乌龙茶", k=1, now=T0)
        assert st.access_stats.pending == 2 and sum(c for c, _ in counts(st, ids).values()) == 0
        clock.advance(0.5)                                    # the oldest is exactly 100 s old
        r = st.build_rag_context("乌龙茶", k=1, now=T0 + 7)
        assert st.access_stats.pending == 0
        assert counts(st, r.ids)[r.ids[0]] == (3, T0 + 7)
        # the interval restarts with the next buffered access
        clock.advance(1000)
        st.build_rag_context("乌龙茶", k=1, now=T0 + 8)
        clock.advance(99)
        st.build_rag_context("乌龙茶", k=1, now=T0 + 9)
        assert st.access_stats.pending == 2


def test_flush_and_close_write_the_buffer(tmp_path):
    path = str(tmp_path / "m.sqlite")
    c = cfg(**{"reader.flush_size": 1000})
    with memlab.open_store(path, config=c, clock=FixedClock(T0)) as st:
        ids = fill(st)
        a = st.build_rag_context("oolong tea", k=2, now=T0 + 1).ids
        assert st.access_stats.flush() == 2 and st.access_stats.flush() == 0
        b = st.build_rag_context("火车", k=1, now=T0 + 2).ids
        st.build_rag_context("火车", k=1, now=T0 + 3, record_access=False)
        assert st.access_stats.pending == 1
    with memlab.open_store(path, config=c, clock=FixedClock(T0)) as st:   # closed: flushed
        got = counts(st, ids)
        assert {i: got[i] for i in a} == {i: (1, T0 + 1) for i in a}
        assert got[b[0]] == (1, T0 + 2)
        assert sum(n for n, _ in got.values()) == 3


def test_a_record_deleted_before_the_flush_is_skipped_not_an_error():
    with memlab.open_store(":memory:", config=cfg(**{"reader.flush_size": 1000}),
                           clock=FixedClock(T0)) as st:
        fill(st)
        r = st.build_rag_context("oolong tea", k=2, now=T0).ids
        st._store.repo.delete([r[0]])
        assert st.access_stats.flush() == 2
        assert counts(st, [r[1]])[r[1]] == (1, T0)


def test_reinforce_times_is_validated():
    with memlab.open_store(":memory:", config=cfg(), clock=FixedClock(T0)) as st:
        fill(st)
        for bad in (0, -1, True, 1.5):
            with pytest.raises(InvalidInput):
                st._store.repo.reinforce([1], now=T0, times=bad)


# -- a real worker process killed with SIGKILL ---------------------------------------------------
WORKER = r"""
import json, os, signal, sys
sys.path.insert(0, {root!r})
import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig

CFG = MemlabConfig().replace(**{config!r})
QUERIES = ["oolong tea", "乌龙茶", "train noon", "火车", "tea 茶"]
path, log, calls, kill_tick = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
clock = FixedClock({t0!r})
st = memlab.open_store(path, config=CFG, clock=clock)
fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
# instrumentation: which progress ticks fall inside a flush of the access statistics
flushing, flush_ticks, ticks = [0], [], [0]
inner = st.access_stats._write
def write(batch):
    flushing[0] = 1
    try:
        return inner(batch)
    finally:
        flushing[0] = 0
st.access_stats._write = write
def tick():
    ticks[0] += 1
    if flushing[0]:
        flush_ticks.append(ticks[0])
    if ticks[0] == kill_tick:
        os.write(fd, b"killed %d\n" % flushing[0])
        os.kill(os.getpid(), signal.SIGKILL)
    return 0
st._store.conn.set_progress_handler(tick, 20)
for i in range(calls):
    clock.advance(1.0)
    os.write(fd, (json.dumps({{"start": i}}) + "\n").encode())
    r = st.build_rag_context(QUERIES[i % len(QUERIES)], k=2, now=clock.now())
    os.write(fd, (json.dumps({{"done": i, "ids": r.ids}}) + "\n").encode())
os.write(fd, (json.dumps({{"flush_ticks": flush_ticks}}) + "\n").encode())
os.kill(os.getpid(), signal.SIGKILL)   # never closed: the last batch is lost
"""

FLUSH_SIZE = 5


def _run_worker(tmp_path: Path, calls: int, kill_tick: int) -> tuple[str, list[str], list[str]]:
    path = str(tmp_path / f"w{calls}_{kill_tick}.sqlite")
    log = tmp_path / f"w{calls}_{kill_tick}.log"
    over = {"reader.flush_size": FLUSH_SIZE, "reader.flush_interval_s": 3.0}
    with memlab.open_store(path, config=cfg(**over), clock=FixedClock(T0)) as st:
        ids = fill(st)
    script = WORKER.format(root=str(ROOT), config={**BASE, **over}, t0=T0)
    proc = subprocess.run([sys.executable, "-c", script, path, str(log), str(calls),
                           str(kill_tick)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    return path, ids, log.read_text(encoding="utf-8").splitlines()


def _outcome(path: str, ids: list[str], lines: list[str]) -> tuple[int, int]:
    """Check a killed worker's store against its log: (lost accesses, calls finished)."""
    done, in_flight = [], None
    for line in lines:
        ev = json.loads(line) if line.startswith("{") else {}
        if "start" in ev:
            in_flight = ev["start"]
        elif "done" in ev:
            done.append(ev["ids"])
            in_flight = None
    true = {i: 0 for i in ids}
    for got in done:
        for i in got:
            true[i] += 1
    assert sum(true.values()) == 2 * len(done)
    assert check_store(path).healthy
    with memlab.open_store(path, config=cfg(), clock=FixedClock(T0)) as st:
        assert len(st) == len(TEXTS)                              # every record is present
        recorded = {i: c for i, (c, _) in counts(st, ids).items()}
    # the call killed in flight may have flushed (its 2 accesses included) before the kill
    slack = 2 if in_flight is not None else 0
    for i in ids:
        assert true[i] - FLUSH_SIZE <= recorded[i] <= true[i] + slack, (i, true[i], recorded[i])
    lost = sum(true.values()) - sum(recorded.values())
    assert -slack <= lost < FLUSH_SIZE
    return lost, len(done)


def test_sigkill_loses_at_most_one_batch_of_access_stats_and_no_record(tmp_path):
    # an unkilled run of 14 calls, then SIGKILL without close: 2 accesses a call, a flush at
    # every third call (6 >= 5), so the last (14 % 3) * 2 = 4 accesses are lost, exactly
    path, ids, lines = _run_worker(tmp_path, 14, 0)
    assert _outcome(path, ids, lines) == (4, 14)
    flush_ticks = json.loads(lines[-1])["flush_ticks"]
    assert len(flush_ticks) > 4
    # killed inside a flush's transaction (the middle of the 2nd flush), and between flushes
    second = [t for t in flush_ticks if t > flush_ticks[0] + 1]
    inside = second[len(second) // 4]
    for kill_tick, flushing in ((inside, "1"), (flush_ticks[0] - 3, "0")):
        path, ids, lines = _run_worker(tmp_path, 14, kill_tick)
        assert lines[-1] == f"killed {flushing}", (kill_tick, lines[-3:])
        lost, finished = _outcome(path, ids, lines)
        assert finished < 14


class LockedOnce:
    """A fake write path: the first call fails as a locked store does, later calls write."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def __call__(self, batch):
        self.calls.append(dict(batch))
        if len(self.calls) == 1:
            raise StoreLocked("database is locked (busy past store.busy_timeout_ms)")
        return len(batch)


def test_a_refused_flush_keeps_the_batch_and_is_retried(caplog):
    write = LockedOnce()
    buf = AccessBuffer(write, cfg=cfg(**{"reader.flush_size": 2}).reader, clock=FixedClock(T0))
    assert buf.record(["m_1", "m_2"], at=T0) == 0            # refused: kept, counted
    assert buf.failed == 1 and buf.pending == 2 and "not flushed" in caplog.text
    assert buf.record(["m_1"], at=T0 + 5) == 3               # retried with the new access
    assert write.calls[-1] == {"m_1": (2, T0 + 5), "m_2": (1, T0)}
    assert buf.pending == 0 and buf.written == 3 and buf.batches == 1
    # an explicit flush raises the store's error and keeps the batch
    write2 = LockedOnce()
    buf2 = AccessBuffer(write2, cfg=cfg().reader, clock=FixedClock(T0))
    buf2.record(["m_9"], at=T0)
    with pytest.raises(StoreLocked):
        buf2.flush()
    assert buf2.pending == 1 and buf2.flush() == 1

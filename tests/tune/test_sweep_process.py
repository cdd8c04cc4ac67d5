"""Sweeps in real processes on a journal file: a sweep killed with SIGKILL and rerun loses no
finished trial and reaches N; two worker processes on one study run no trial twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memlab.tune.space import Space
from memlab.tune.study import open_storage
from memlab.tune.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
SPACE = ("params:\n"
         "  fusion.relevance: {float: [0.0, 1.0]}\n"
         "  fusion.temporal: {float: [0.0, 1.0]}\n"
         "  selection.char_budget: {int: [10, 400], log: true}\n")


def hashing_sets(cache_dir: Path) -> list[str]:
    pairs = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
             "recall.relevance_floor": "0.0"}
    return [a for k, v in pairs.items() for a in ("--set", f"{k}={v}")] + ["--cache-dir",
                                                                             str(cache_dir)]


def load(journal: Path, name: str):
    import optuna

    return optuna.load_study(study_name=name, storage=open_storage(journal))


def finished(journal: Path, name: str) -> list:
    import optuna

    if not journal.exists():
        return []
    try:
        study = load(journal, name)
    except KeyError:            # the study is not created yet
        return []
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


@pytest.mark.slow
def test_a_killed_sweep_resumes_and_loses_no_finished_trial(tiny_bench_folder, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    journal, name, n = tmp_path / "s.journal", "killed", 120   # enough not to end first
    cmd = [sys.executable, "-m", "memlab.cli", "sweep", "-d", str(tiny_bench_folder), "--space",
           str(space), "--preset", "reverie", "--sampler", "random", "--trials", str(n), "-q",
           "--no-track", "--storage", str(journal), "--study", name, "--out-dir",
           str(tmp_path / "o"), *hashing_sets(tmp_path / "cache")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    seen = []
    for _ in range(3000):   # bounded: at most 3,000 polls (a loaded machine starts slowly)
        seen = finished(journal, name)
        if len(seen) >= 3 or proc.poll() is not None:
            break
        try:
            proc.wait(timeout=0.2)   # returns at once when the sweep exits
        except subprocess.TimeoutExpired:
            pass
    assert proc.poll() is None, f"the sweep ended before it was killed: {proc.stdout.read()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {t.number: (t.params, t.values) for t in finished(journal, name)}
    assert 3 <= len(before) < n
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    study = load(journal, name)
    after = {t.number: (t.params, t.values) for t in study.trials if t.state.name == "COMPLETE"}
    assert len(after) == n
    assert all(after[k] == v for k, v in before.items())      # no finished trial lost or redone
    states = {t.state.name for t in study.trials}
    assert states <= {"COMPLETE", "FAIL"}                     # the killed trial: FAIL, not RUNNING
    params = [tuple(sorted(p.items())) for p, _ in after.values()]
    assert len(set(params)) == n


@pytest.mark.slow
def test_two_worker_processes_run_no_trial_twice(tiny_bench_folder, cache_dir, tmp_path):
    import yaml

    space = Space.from_dict(yaml.safe_load(SPACE), name="two")
    hashing = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
               "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)}
    n = 24
    res = sweep(dataset=str(tiny_bench_folder), preset="reverie", space=space, trials=n,
                sampler="random", n_jobs=2, overrides=hashing, storage=tmp_path / "two.journal",
                study="two", out_dir=tmp_path, progress=False)
    trials = res.study.trials
    assert [t.number for t in trials] == list(range(n))       # distinct numbers, none lost
    assert all(t.state.name == "COMPLETE" for t in trials)    # exactly N, no surplus trial
    params = {tuple(sorted(t.params.items())) for t in trials}
    assert len(params) == n                                    # no parameter set twice
    workers = {t.user_attrs["memlab.worker"] for t in trials}
    assert len(workers) == 2 and str(os.getpid()) not in {w.split(":")[-1] for w in workers}


def test_only_trials_of_dead_local_workers_are_failed(tmp_path):
    import socket

    from memlab.tune.objective import Objective
    from memlab.tune.study import WORKER_ATTR, fail_orphans, open_study

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    study = open_study(open_storage(tmp_path / "o.journal"), "o", Objective.parse("mrr"), {})
    host = socket.gethostname()
    owners = [f"{host}:{dead.pid}", f"{host}:{os.getpid()}", f"elsewhere:{dead.pid}"]
    for who in owners:
        study.ask().set_user_attr(WORKER_ATTR, who)
    assert fail_orphans(study) == [0]
    assert [t.state.name for t in study.trials] == ["FAIL", "RUNNING", "RUNNING"]


def test_a_torn_last_journal_record_is_dropped_before_appending(tmp_path, caplog):
    from memlab.tune.objective import Objective
    from memlab.tune.study import open_study

    journal = tmp_path / "t.journal"
    study = open_study(open_storage(journal), "t", Objective.parse("mrr"), {})
    study.tell(study.ask(), 0.5)
    whole = journal.read_bytes()
    with open(journal, "ab") as f:
        f.write(b'{"op_code": 4, "worker_id": "x", "study_id": 0, "dat')   # killed mid-write
    study = open_study(open_storage(journal), "t", Objective.parse("mrr"), {})
    assert "torn last record (52 bytes)" in caplog.text
    text = journal.read_bytes()
    assert text.startswith(whole) and all(json.loads(line) for line in text.splitlines())
    study.tell(study.ask(), 0.7)                  # appends cleanly after the repair
    again = load(journal, "t")
    assert [t.values for t in again.trials] == [[0.5], [0.7]]


def test_only_the_command_that_created_a_study_enqueues_the_default(tmp_path):
    """Two commands started together on a new study both find it empty; Optuna's
    skip_if_exists is not atomic across processes, so both queued the preset's default (seen with
    two workers on PostgreSQL). Only the creator enqueues now."""
    from memlab.config import MemlabConfig
    from memlab.tune.objective import Objective
    from memlab.tune.study import enqueue_default, open_study

    import yaml

    space = Space.from_dict(yaml.safe_load(SPACE.split("  selection.")[0]))   # holds the defaults
    journal = tmp_path / "d.journal"
    a = open_study(open_storage(journal), "d", Objective.parse("mrr"), {})
    b = open_study(open_storage(journal), "d", Objective.parse("mrr"), {})   # before a enqueues
    assert (a.memlab_created, b.memlab_created) == (True, False)
    base = MemlabConfig()
    assert enqueue_default(b, space, base, created=b.memlab_created) is False
    assert enqueue_default(a, space, base, created=a.memlab_created) is True
    assert len(load(journal, "d").trials) == 1


def test_a_trial_killed_before_its_worker_attribute_is_failed_when_its_workers_are_gone(tmp_path):
    """A SIGKILL between Optuna creating a trial and the worker recording itself on it leaves a
    RUNNING trial without a worker: failed when every worker registered on the study is of this
    host and gone; left alone while one is alive (it may be about to record itself)."""
    import socket

    from memlab.tune.objective import Objective
    from memlab.tune.study import WORKERS_PREFIX, fail_orphans, open_study

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = socket.gethostname()
    study = open_study(open_storage(tmp_path / "w.journal"), "w", Objective.parse("mrr"), {})
    study.set_user_attr(WORKERS_PREFIX + f"{host}:{dead.pid}", True)
    study.ask()                                           # created; its worker never recorded
    study.set_user_attr(WORKERS_PREFIX + f"{host}:{os.getppid()}", True)   # alive
    assert fail_orphans(study) == []
    other = open_study(open_storage(tmp_path / "w2.journal"), "w", Objective.parse("mrr"), {})
    other.set_user_attr(WORKERS_PREFIX + f"{host}:{dead.pid}", True)
    other.ask()
    assert fail_orphans(other) == [0]
    assert [t.state.name for t in other.trials] == ["FAIL"]


def test_the_journal_lock_of_a_killed_holder_is_free_at_once(tmp_path):
    """Issue 19, item 12: Optuna's symlink lock outlived a SIGKILLed holder, and the next open
    of the journal waited its 30 s grace period (2 of 4 resumes). memlab's lock is an OS lock
    the kernel drops with its holder: taken again at once, without waiting."""
    from memlab.tune.objective import Objective
    from memlab.tune.storage import JournalLock
    from memlab.tune.study import open_study

    journal = tmp_path / "l.journal"
    open_study(open_storage(journal), "l", Objective.parse("mrr"), {})
    code = ("import sys; from memlab.tune.storage import JournalLock; "
            "lock = JournalLock(sys.argv[1]); lock.acquire(); print('held', flush=True); "
            "sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, str(journal)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == b"held"
        lock = JournalLock(journal)
        assert lock.acquire(timeout=0) is False          # a live holder: others wait
        holder.kill()
        holder.wait()
        assert lock.acquire(timeout=0) is True           # killed: free at once
        lock.release()
    finally:
        holder.kill()
        holder.wait()
    study = open_study(open_storage(journal), "l", Objective.parse("mrr"), {})
    study.tell(study.ask(), 0.5)                         # a resume writes at once
    assert [t.values for t in load(journal, "l").trials] == [[0.5]]


def _states(gone: dict[int, bool]) -> str:
    """What the kernel says of the workers still running (state and wait channel), for a failure's
    message."""
    out = []
    for pid in (p for p, ok in gone.items() if not ok):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            wchan = Path(f"/proc/{pid}/wchan").read_text()
        except OSError as exc:
            out.append(f"{pid}: {exc.strerror}")
            continue
        state = next((ln for ln in status.splitlines() if ln.startswith("State:")), "?")
        out.append(f"{pid}: {state}, wchan {wchan}")
    return "\n".join(out) + "\n"


def _wait_exit(pidfd: int, seconds: float) -> bool:
    """Whether the process of ``pidfd`` ends within ``seconds`` (its pidfd turns readable)."""
    import select

    return bool(select.select([pidfd], [], [], seconds)[0])


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs os.pidfd_open (Linux >= 5.3)")
def test_sweep_workers_exit_when_their_parent_is_killed(tiny_bench_folder, tmp_path):
    """Issue 19, item 6: `memlab sweep --n-jobs 2` SIGKILLed, its two workers ran trials until
    the budget was spent. Now they finish the trial they run and exit: within 120 s (the wait is
    on their pidfds, no sleep), and no trial is left RUNNING."""
    import optuna

    space = tmp_path / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")
    journal, name = tmp_path / "p.journal", "orphans"
    cmd = [sys.executable, "-m", "memlab.cli", "sweep", "-d", str(tiny_bench_folder), "--space",
           str(space), "--preset", "reverie", "--sampler", "random", "--trials", "100000",
           "--n-jobs", "2", "-q", "--no-track", "--storage", str(journal), "--study", name,
           "--out-dir", str(tmp_path / "o"), *hashing_sets(tmp_path / "cache")]
    log = open(tmp_path / "sweep.log", "wb")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=log, stderr=subprocess.STDOUT)
    pids: set[int] = set()
    pidfds: dict[int, int] = {}
    try:
        for _ in range(3000):   # bounded: until both workers have finished a trial
            pids = {int(t.user_attrs["memlab.worker"].rsplit(":", 1)[1])
                    for t in finished(journal, name)}
            if len(pids) >= 2 or proc.poll() is not None:
                break
            try:
                proc.wait(timeout=0.2)   # returns at once when the sweep exits
            except subprocess.TimeoutExpired:
                pass
        assert proc.poll() is None and len(pids) == 2 and proc.pid not in pids, (
            (tmp_path / "sweep.log").read_text(errors="replace"))
        pidfds = {pid: os.pidfd_open(pid) for pid in pids}
        proc.kill()
        proc.wait()
        gone = {pid: _wait_exit(fd, 120) for pid, fd in pidfds.items()}
        assert all(gone.values()), (f"workers still running after their parent died: {gone}\n"
                                    + _states(gone) + (tmp_path / "sweep.log").read_text(
                                        errors="replace")[-4000:])
    finally:
        proc.kill()
        proc.wait()
        for pid, fd in pidfds.items():
            if not _wait_exit(fd, 0):
                os.kill(pid, signal.SIGKILL)   # a worker this test started (the bug's case)
            os.close(fd)
        log.close()
    study = load(journal, name)
    states = {t.state.name for t in study.trials}
    assert states == {"COMPLETE"}, states              # each finished its trial, none RUNNING
    assert 2 <= len(study.trials) < 100000
    assert "finishing the running trial and exiting" in (tmp_path / "sweep.log").read_text(
        errors="replace")



WATCHED = '''
import logging, multiprocessing as mp, sys, threading

def child(how, behave):
    from memlab.tune.workers import exit_now, watch_parent
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    stop = threading.Event()
    watch_parent(stop)
    # the main thread holds the log handler's lock while it waits (as when the parent dies while a
    # trial logs); "stuck": it runs no bytecode again (a C call that does not return: SIGTERM
    # blocked in it, so the kernel hands the signal to another thread)
    if behave == "stuck":
        import signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    with logging.getLogger().handlers[0].lock:
        print("ready", flush=True)
        if behave == "stuck":
            threading.Event().wait()
        while not stop.wait(0.05):
            pass
    exit_now(0)

if __name__ == "__main__":
    proc = mp.get_context("spawn").Process(target=child, args=sys.argv[1:3])
    proc.start()
    print(proc.pid, flush=True)
    if sys.argv[1] == "sigterm":
        proc.join()
        print("exit", proc.exitcode, flush=True)
    else:
        sys.stdin.read()
'''


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"),
                    reason="PR_SET_PDEATHSIG and pidfd_open are Linux's")
@pytest.mark.parametrize("behave", ["cooperative", "stuck"])
@pytest.mark.parametrize("how", ["sigterm", "parent_killed"])
def test_a_worker_ends_even_when_its_main_thread_holds_the_log_lock(how, behave, tmp_path):
    """A CI run saw a sweep worker outlive its killed parent by more than two minutes. Whatever
    the main thread is doing when the parent dies (or SIGTERM comes), the watcher thread stops
    the worker without the main thread and without a lock it may hold: a cooperative worker
    finishes and exits with 0; one stuck (no bytecode runs, the log handler's lock held) is ended
    ORPHAN_GRACE_S later with EXIT_ORPHANED. The old watcher needed the main thread for SIGTERM
    and logged through that lock before it armed its grace timer: the stuck worker never ended
    (both stuck cases failed)."""
    from memlab.tune.workers import EXIT_ORPHANED

    script = tmp_path / "watched.py"
    script.write_text(WATCHED, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(script), how, behave], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    fd = None
    code = 0 if behave == "cooperative" else EXIT_ORPHANED
    try:
        pid = int(proc.stdout.readline())
        assert proc.stdout.readline().strip() == b"ready"   # the child's own print (fd 1)
        fd = os.pidfd_open(pid)
        if how == "sigterm":
            os.kill(pid, signal.SIGTERM)
            assert _wait_exit(fd, 60), "the worker outlived SIGTERM"
            assert proc.stdout.readline().strip() == f"exit {code}".encode()
        else:
            proc.kill()
            assert _wait_exit(fd, 60), "the worker outlived its killed parent"
    finally:
        proc.kill()
        out, err = proc.communicate(timeout=60)
        if fd is not None:
            if not _wait_exit(fd, 0):
                os.kill(pid, signal.SIGKILL)
            os.close(fd)
    err = err.decode()
    assert ("SIGTERM" if how == "sigterm" else "is gone") in err
    assert "finishing the running trial and exiting" in err
    assert (f"ended (exit status {EXIT_ORPHANED})" in err) == (behave == "stuck")

"""Sweep worker processes end when the process that started them dies.

``memlab sweep --n-jobs N`` runs trials in N spawned worker processes (:mod:`memlab.tune.sweep`).
Killed with SIGKILL, the parent used to leave them running trials until the budget was spent. Now
each worker, first thing, calls :func:`watch_parent`, which starts one daemon thread, the
watcher. It waits on two things at once:

- the parent's sentinel (``multiprocessing.parent_process().sentinel``: a pipe the parent holds
  open, readable once it is gone, SIGKILL included), on every platform;
- on Linux, SIGTERM: the kernel sends it when the parent dies (``prctl(PR_SET_PDEATHSIG)``
  through ctypes), and a user may send it. Its Python handler does nothing; the watcher reads
  the signal's number from the wakeup fd (:func:`signal.set_wakeup_fd`), which the interpreter's
  C handler writes at once. A Python handler runs only when the main thread next executes a
  bytecode, wherever that is: one that logs or takes a lock there can wait on the very code it
  interrupted, and a main thread stuck in a C call never runs it.

A CI run once saw a worker outlive its killed parent by more than two minutes (its cause was not
seen; the old watcher logged through a lock the main thread may hold before it armed its grace
timer, its SIGTERM handler needed the main thread, and a worker left through the interpreter's
shutdown). Every such wait is gone: the watcher sets the worker's stop event and says why on
standard error (a plain write to fd 2, no logging lock); the worker finishes the trial it is
running (no torn journal record, no trial left RUNNING), starts no other
(:class:`memlab.tune.study.Budget` claims nothing once it is set) and leaves with
:func:`exit_now` (``os._exit`` after flushing its logs: nothing of a worker needs the
interpreter's shutdown). A worker still running :data:`ORPHAN_GRACE_S` seconds later (a long
replay, or stuck) is ended by the watcher with ``os._exit(EXIT_ORPHANED)``; the next run marks
its trial FAIL (:func:`memlab.tune.study.fail_orphans`).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading

__all__ = ["watch_parent", "exit_now", "ORPHAN_GRACE_S", "EXIT_ORPHANED"]

log = logging.getLogger(__name__)

#: seconds an orphaned worker may take to finish its trial before it is ended
ORPHAN_GRACE_S = 10.0
#: the exit status of a worker ended that way
EXIT_ORPHANED = 3
PR_SET_PDEATHSIG = 1   # <linux/prctl.h>

#: set by the watcher when it fires, and once it has logged why (exit_now waits for the line)
_fired, _said = threading.Event(), threading.Event()


def watch_parent(stop: threading.Event) -> bool:
    """Set ``stop`` when this process's multiprocessing parent dies or SIGTERM comes (see the
    module). False when this process is no multiprocessing child (nothing to watch)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return False
    waits = [parent.sentinel]
    if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.signal(signal.SIGTERM, _ignore)       # Python's part does nothing (see the module)
        signal.set_wakeup_fd(w)                      # the C part writes the signal's number to w
        _death_signal(signal.SIGTERM)
        waits.append(r)
    threading.Thread(target=_watch, args=(parent.pid, parent.sentinel, waits, stop), daemon=True,
                     name="memlab-parent-watch").start()
    return True


def exit_now(code: int = 0) -> None:
    """Leave this worker process at once: logs and standard streams flushed, no interpreter
    shutdown (see the module)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # closed or gone: nothing left to flush
            pass
    if _fired.is_set():
        _said.wait(5.0)                 # the watcher's line first
    logging.shutdown()
    os._exit(code)


def _ignore(signum, frame) -> None:
    """SIGTERM's Python handler: nothing. The signal's C handler has already written its number
    to the wakeup fd the watcher reads (:func:`signal.set_wakeup_fd`), from whatever thread the
    kernel chose and without the main thread running a bytecode."""


def _death_signal(sig: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, sig)``: the kernel sends ``sig`` when the parent exits. A
    libc without prctl leaves the sentinel alone to watch (logged)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        log.info("prctl(PR_SET_PDEATHSIG) unavailable (%s): the parent is watched by a thread",
                 exc)


def _watch(parent_pid: int, sentinel: int, waits: list[int], stop: threading.Event) -> None:
    why = None
    while why is None:
        ready = multiprocessing.connection.wait(waits)
        if sentinel in ready:
            why = f"parent process {parent_pid} is gone"
        elif signal.SIGTERM in os.read(waits[1], 64):   # other signals' numbers: not ours
            why = "SIGTERM"
    _fired.set()
    stop.set()
    _say(f"sweep worker {os.getpid()}: {why}; finishing the running trial and exiting")
    _said.set()
    if not threading.Event().wait(ORPHAN_GRACE_S):     # the grace period: no one sets it
        _say(f"sweep worker {os.getpid()}: still running after {ORPHAN_GRACE_S:.0f} s; ended "
             f"(exit status {EXIT_ORPHANED})")
        os._exit(EXIT_ORPHANED)


def _say(line: str) -> None:
    """One line straight to standard error (fd 2), not through logging: the main thread may
    hold a log handler's lock, or be stuck inside a write, when the watcher speaks."""
    try:
        os.write(2, (line + "\n").encode("utf-8", "replace"))
    except OSError:                     # no stderr left: the exit still happens
        pass

"""Sweep worker processes end when the process that started them dies.

``memlab sweep --n-jobs N`` runs trials in N spawned worker processes (:mod:`memlab.tune.sweep`).
Killed with SIGKILL, the parent used to leave them running trials until the budget was spent. Now
each worker, first thing, calls :func:`watch_parent`:

- on Linux it asks the kernel for SIGTERM when its parent dies (``prctl(PR_SET_PDEATHSIG)``
  through ctypes), and a SIGTERM stops it;
- on every platform a daemon thread waits on the parent's sentinel
  (``multiprocessing.parent_process().sentinel``: a pipe the parent holds open, readable once it
  is gone, SIGKILL included).

Either sets the worker's stop event: the worker finishes the trial it is running (no torn journal
record, no trial left RUNNING) and starts no other (:class:`memlab.tune.study.Budget` claims
nothing once it is set). A worker still alive :data:`ORPHAN_GRACE_S` seconds later (a long replay)
ends with ``os._exit(EXIT_ORPHANED)``; the next run marks its trial FAIL
(:func:`memlab.tune.study.fail_orphans`).
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

__all__ = ["watch_parent", "ORPHAN_GRACE_S", "EXIT_ORPHANED"]

log = logging.getLogger(__name__)

#: seconds an orphaned worker may take to finish its trial before it is ended
ORPHAN_GRACE_S = 10.0
#: the exit status of a worker ended that way
EXIT_ORPHANED = 3
PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


def watch_parent(stop: threading.Event) -> bool:
    """Set ``stop`` when this process's multiprocessing parent dies (see the module). False
    when this process is no multiprocessing child (nothing to watch)."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return False
    if sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: _orphaned(stop, "SIGTERM"))
        _death_signal(signal.SIGTERM)
    threading.Thread(target=_wait_for, args=(parent, stop), daemon=True,
                     name="memlab-parent-watch").start()
    return True


def _death_signal(sig: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, sig)``: the kernel sends ``sig`` when the parent exits. A
    libc without prctl leaves the sentinel thread alone to watch (logged)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except (OSError, AttributeError) as exc:
        log.info("prctl(PR_SET_PDEATHSIG) unavailable (%s): the parent is watched by a thread",
                 exc)


def _wait_for(parent, stop: threading.Event) -> None:
    multiprocessing.connection.wait([parent.sentinel])
    _orphaned(stop, f"parent process {parent.pid} is gone")


def _orphaned(stop: threading.Event, why: str) -> None:
    if stop.is_set():
        return
    stop.set()
    log.warning("sweep worker %d: %s; finishing the running trial and exiting", os.getpid(), why)
    timer = threading.Timer(ORPHAN_GRACE_S, os._exit, args=(EXIT_ORPHANED,))
    timer.daemon = True
    timer.start()

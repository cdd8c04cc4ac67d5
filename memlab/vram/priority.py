"""Per-thread priority boosts (familiars §5.10.4).

A thread that serves a user (it blocks the user's answer) raises its priority for a while::

    with boost_thread_priority(cfg.vram.priority_critical):
        with gate.acquire("decider") as decider:   # acquired with CRITICAL rights
            ...

Boosts nest and the most urgent wins (the smallest number): an inner CRITICAL (1) inside an outer
NICE (3) is CRITICAL, and an inner NICE inside an outer CRITICAL stays CRITICAL. Leaving a block
restores what was there before. Boosts belong to the thread that made them (``threading.local``):
another thread, or a worker the boosted thread starts, is not boosted.

What a boost does is the gate's business (:mod:`memlab.vram.gate`): an acquire runs at the
smaller of the model's registered priority and :func:`current_priority`.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from memlab.errors import InvalidInput

_local = threading.local()


def _stack() -> list[int]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextmanager
def boost_thread_priority(priority: int) -> Iterator[int]:
    """Boost this thread to ``priority`` (1 most urgent) for the block; yields the priority in
    force inside it (the minimum over the nested boosts)."""
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 1:
        raise InvalidInput("priority", "must be a positive int (1 is the most urgent)", priority)
    stack = _stack()
    stack.append(priority)
    try:
        yield min(stack)
    finally:
        stack.pop()


def current_priority() -> int | None:
    """The priority in force for this thread: the minimum of its open boosts, None when none."""
    stack = _stack()
    return min(stack) if stack else None

"""Eviction policies of the gate: which residents a request may evict, in which order, and when an
idle resident is reclaimed. The gate's own is :class:`PriorityPolicy` (familiars §5.10.2-§5.10.3);
:class:`LRUPolicy` and :class:`KeepAlivePolicy` are the baselines ``memlab vram simulate
--compare-policy`` measures it against (the same gate, another strategy).

A policy sees the gate's entries (``model_id``, ``priority``, ``category``, ``estimated_mb``,
``is_working``, ``last_active_at``, ``idle_ttl_sec``, ``order``: registration order) and never
changes them.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence


class Policy(Protocol):
    name: str

    def victims(self, request: Any, priority: int, residents: Sequence[Any]) -> list[Any]:
        """The residents ``request`` (acquired at ``priority``) may evict, first victim first.
        The gate evicts a prefix of this list, only when the whole prefix makes enough room."""

    def idle_limit(self, entry: Any) -> float | None:
        """Seconds idle after which the reaper reclaims ``entry``; None: never."""


class PriorityPolicy:
    """The gate's policy (§5.10.2), with ``p`` the request's priority (1 most urgent; the
    smaller of the model's and the thread's boost, :mod:`memlab.vram.priority`):

    - a **sync** request may evict every **queue** resident, working or idle (a working one is
      checkpointed first: ``sync-preempt``), and every **idle sync** resident of priority ``>= p``
      (as urgent or less). It never evicts a working sync resident, and an idle resident more
      urgent than the request stays: that is what "CRITICAL: never evicted" (§5.10.1) means
      here, and why a user-serving thread boosts itself to CRITICAL (§5.10.4): its acquires then
      may evict any idle model.
    - a **queue** request may evict only **idle queue** residents of priority ``>= p`` (lower or
      equal priority: a job may displace an idle job of its own rank, e.g. OCR after the
      memorizer). It never evicts a sync resident nor a working job; otherwise it waits.

    Order: lowest priority first (highest number), then least recently active, then
    registration order. Idle reclaim: a resident idle ``idle_ttl_sec`` (its own) or
    ``vram.idle_evict_seconds`` is reclaimed (§5.10.3).
    """

    name = "priority"

    def __init__(self, idle_evict_seconds: float) -> None:
        self.idle_evict_seconds = idle_evict_seconds

    @staticmethod
    def may_evict(request: Any, priority: int, r: Any) -> bool:
        if r is request:
            return False
        if request.category == "sync":
            return r.category == "queue" or (not r.is_working and r.priority >= priority)
        return r.category == "queue" and not r.is_working and r.priority >= priority

    def victims(self, request: Any, priority: int, residents: Sequence[Any]) -> list[Any]:
        allowed = [r for r in residents if self.may_evict(request, priority, r)]
        return sorted(allowed, key=lambda r: (-r.priority, r.last_active_at, r.order))

    def idle_limit(self, entry: Any) -> float | None:
        return entry.idle_ttl_sec if entry.idle_ttl_sec is not None else self.idle_evict_seconds


class LRUPolicy:
    """A plain LRU cache: evict the least recently used idle resident, whatever its priority or
    category; never a working one (no checkpoints: a request waits for it); no idle reclaim."""

    name = "lru"

    def victims(self, request: Any, priority: int, residents: Sequence[Any]) -> list[Any]:
        allowed = [r for r in residents if r is not request and not r.is_working]
        return sorted(allowed, key=lambda r: (r.last_active_at, r.order))

    def idle_limit(self, entry: Any) -> float | None:
        return None


class KeepAlivePolicy(LRUPolicy):
    """ollama's keep_alive: every model idle ``keepalive_s`` is unloaded; a request that does not
    fit unloads idle models least recently used first (as ollama's scheduler does) and waits for
    working ones; no priorities, no checkpoints."""

    name = "keepalive"

    def __init__(self, keepalive_s: float) -> None:
        self.keepalive_s = keepalive_s

    def idle_limit(self, entry: Any) -> float | None:
        return self.keepalive_s

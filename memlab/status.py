"""The state of one store at a glance (familiars §5.11 ``memory writer-status`` and
``GET /api/memory_status``): ``memlab status STORE [--json]``, ``MemoryStore.status()``.

:func:`store_status` reads, in one read snapshot of the store:

- memories: the total and counts by Familiars scope and category, retention layer, cognitive
  layer, lifecycle state, deprecated, pinned, embedding status and agent (``(none)``: a memory
  without that field, e.g. a Reverie memory has no scope);
- pending embeddings: memories without a vector for the store's embedder (or, without one,
  whose status is pending);
- jobs (``memory_jobs``) by state; usage signals (``memory_usage_events``) by kind, with their
  weight; recall-log events (``memory_recall_events``, e.g. fuzzy swaps) by kind, with how many
  were resolved;
- recall hit statistics: recalls, recalls that returned at least one memory, the hit rate and
  the mean number returned. Recall never writes (a read does not mutate the store), so these are
  the counts of the :class:`~memlab.api.MemoryStore` object asked (``MemoryStore.stats``: this
  process since the store was opened, e.g. a running ``memlab serve``); a fresh process reports
  zero recalls and a NaN rate. The persistent usage of memories is in the usage signals above.

:class:`StoreStatus` gives the numbers as a dict (``to_dict``, JSON-ready), as a tidy DataFrame
(``to_frame``: section, key, value) and as text (``str``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from memlab.store import Store
from memlab.store import browse as counts
from memlab.store.snapshot import read_snapshot

#: MemoryStore.stats keys of recall's hit statistics (counted by MemoryStore.recall)
RECALLS, HITS, RETURNED = "recall: queries", "recall: hits", "recall: returned"


@dataclass(frozen=True)
class StoreStatus:
    """One store's counts (see the module docstring). ``counts[dimension][value]`` = memories."""

    path: str
    memories: int
    counts: Mapping[str, Mapping[str, int]]
    pending_embeddings: int
    embedder: str | None
    jobs: Mapping[str, int]
    usage: Mapping[str, Mapping[str, float]]
    recall_events: Mapping[str, Mapping[str, int]]
    recall: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-ready (a NaN hit rate is None)."""
        out = asdict(self)
        out["recall"] = {k: (None if isinstance(v, float) and math.isnan(v) else v)
                         for k, v in self.recall.items()}
        return out

    def to_frame(self):
        """A tidy pandas DataFrame: one row per number, columns section, key, value."""
        import pandas as pd

        rows = [("memories", "total", self.memories),
                ("memories", "pending_embeddings", self.pending_embeddings)]
        rows += [(f"by_{dim}", value, n) for dim, by in self.counts.items()
                 for value, n in by.items()]
        rows += [("jobs", state, n) for state, n in self.jobs.items()]
        rows += [("usage", f"{kind}.{what}", v) for kind, d in self.usage.items()
                 for what, v in d.items()]
        rows += [("recall_events", f"{kind}.{what}", v) for kind, d in self.recall_events.items()
                 for what, v in d.items()]
        rows += [("recall", k, v) for k, v in self.recall.items()]
        return pd.DataFrame(rows, columns=["section", "key", "value"])

    def __str__(self) -> str:
        lines = [f"store {self.path}: {self.memories} memories, {self.pending_embeddings} "
                 f"pending embeddings" + (f" ({self.embedder})" if self.embedder else "")]
        for dim, by in self.counts.items():
            lines.append(f"  by {dim}: " + (", ".join(f"{k} {n}" for k, n in by.items())
                                             or "-"))
        lines.append("  jobs: " + (", ".join(f"{k} {n}" for k, n in self.jobs.items()) or "none"))
        lines.append("  usage signals: " + (", ".join(
            f"{k} {d['events']} (weight {d['weight']:g})" for k, d in self.usage.items())
            or "none"))
        lines.append("  recall log: " + (", ".join(
            f"{k} {d['events']} ({d['resolved']} resolved)"
            for k, d in self.recall_events.items()) or "none"))
        r = self.recall
        rate = "n/a" if math.isnan(r["hit_rate"]) else f"{r['hit_rate']:.3f}"
        mean = "n/a" if math.isnan(r["mean_returned"]) else f"{r['mean_returned']:.2f}"
        lines.append(f"  recall (this process): {r['recalls']} recalls, {r['hits']} with a "
                     f"memory, hit rate {rate}, mean returned {mean}")
        return "\n".join(lines)


def recall_stats(stats: Mapping[str, int] | None) -> dict[str, float]:
    """recalls, hits (at least one memory returned), hit_rate = hits / recalls and
    mean_returned = memories returned / recalls (NaN without recalls)."""
    stats = stats or {}
    n, hits, returned = stats.get(RECALLS, 0), stats.get(HITS, 0), stats.get(RETURNED, 0)
    return {"recalls": n, "hits": hits, "hit_rate": hits / n if n else math.nan,
            "mean_returned": returned / n if n else math.nan}


def store_status(store: Any, *, stats: Mapping[str, int] | None = None) -> StoreStatus:
    """The status of ``store``: a :class:`memlab.api.MemoryStore` (its ``status()``, with its
    recall statistics) or a :class:`memlab.store.Store` (``stats``: the counters to read recall
    statistics from; default none)."""
    if not isinstance(store, Store):
        return store.status()
    conn = store.conn
    version = store.vectors.model_version if store.vectors is not None else None
    with read_snapshot(conn):
        by = {col: counts.by_column(conn, col) for col in counts.COUNTED_COLUMNS}
        return StoreStatus(
            path=store.path, memories=counts.total(conn),
            counts={("layer" if c == "retention_layer" else c): v for c, v in by.items()},
            pending_embeddings=counts.pending(conn, version), embedder=version,
            jobs=counts.jobs_by_state(conn), usage=counts.usage_by_kind(conn),
            recall_events=counts.recall_events_by_kind(conn), recall=recall_stats(stats))


__all__ = ["StoreStatus", "recall_stats", "store_status"]

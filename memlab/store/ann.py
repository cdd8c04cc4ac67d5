"""AnnIndex: an approximate (HNSW, usearch) index over an ExactIndex's rows, for the dense route.

``store.dense_index = "usearch"`` (the optional extra ``ann``: ``pip install 'memlab[ann]'``).
The :class:`~memlab.store.exact.ExactIndex` stays the truth of the in-process dense route: it
holds the rows, their filter columns and the change-log generation, is persisted beside the store
and kept in step with writes as before. The AnnIndex is an accelerator derived from it: a usearch
HNSW graph (inner product on the unit rows the ExactIndex ranks) keyed by rowid.

Search (same contract as :meth:`ExactIndex.search`): ask the graph for ``k * oversampling``
nearest rows (at least ``min_candidates``), keep those the filters (agent, user, active, layer,
time) keep — evaluated by the ExactIndex on its own filter columns, so a row the filters exclude
is never returned — then score the survivors with the ExactIndex's own cosines and order them as
it does (cosine desc, rowid asc). When fewer than ``k`` survive (selective filters, or a scope
with fewer than ``k`` rows), the search falls back to the exact scan: logged at debug level and
counted (``stats["ann_fallback"]``, beside ``stats["ann_search"]``). Results are therefore the
exact cosines of a subset of the true candidates: recall@10 against the exact scan is measured
(tests/store/test_ann.py, benchmarks/ann_latency.py), not guaranteed; a filter that keeps a
small fraction of a scope's rows but at least ``k`` of the graph's candidates may miss rows.

Keeping in step: :meth:`follow` is called before each search with the ExactIndex; the graph
mirrors one ExactIndex object at one generation. After a committed write, :meth:`applied` adds
the rows to the graph too (upserted rowids replaced) when the graph was in step with the
ExactIndex before the write; otherwise (the ExactIndex was reloaded, another process wrote, the
indexes were released) the graph is rebuilt from the ExactIndex's rows at the next search
(``stats["ann_rebuild"]``): at a million rows a rebuild takes minutes (README, Scale).

Persisted (``store.persist_index``, a store file): the graph is saved beside the ExactIndex's
state in ``<store>.idx/`` (``ann-<model>.json`` naming ``ann-<model>-<token>/graph.usearch``,
written by usearch and replaced atomically as the other indexes are, :mod:`memlab.store.persist`)
and, when the graph must be built, the saved one is tried first through the :class:`Keeper` that
:class:`memlab.store.indexio.GraphFile` implements. It is used only when its key matches the
ExactIndex it would mirror (the vector table's schema, generation, model, dimension, element
types, the exact rows' dtype, the row count) and the graph's own parameters (ndim, metric ip,
``ann_scalar``, ``ann_connectivity``, ``ann_expansion_add``), when the file has the size and
(``store.index_checksum``) the CRC-32 its manifest records, when usearch reads it (its own load
errors caught by type) and when ``store.index_probe`` rows evenly spaced over the ExactIndex are in
the graph with the same vectors (within the scalar's rounding). A graph keyed to an *earlier*
generation of the same table, with the same parameters (another process wrote and did not save
the graph), is mapped and brought up to date instead of rebuilt (:meth:`AnnIndex.catch_up`:
every held vector compared with the ExactIndex's, rows gone removed, new and moved rows added;
``stats["ann_catch_up"]``; seconds where a rebuild takes minutes). Otherwise (a graph ahead of
the store, other parameters, a damaged file, a failed probe) the graph is rebuilt, logged and
counted (``stats["persisted index rebuilt: <why>"]``, as the other indexes) and saved again
right after the rebuild. A graph changed since it was loaded or saved (writes, a catch-up) is
saved at ``Store.close()``.

A saved graph is memory-mapped (usearch ``view``: the open costs milliseconds, pages are read as
searches touch them and shared with other processes that map the same file). A viewed graph is
read-only in usearch (an add raises, a remove crashes the process), so the first write after the
open copies it into memory (usearch ``copy``; ``stats["ann_copy"]``) and mirrors the write there:
copy-on-first-write, so a store that is only read never pays for a copy and a store that is
written pays it once, instead of at every open (``restore(view=False)`` would read the whole file
at the open). The open-time figures: ``benchmarks/ann_latency.py --open``, README (Scale).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Protocol, Sequence

import numpy as np

from memlab.errors import ConfigError

from .exact import ExactIndex

log = logging.getLogger("memlab")
EXTRA = "ann"
_BUILD_BATCH = 50_000   # rows converted to float32 at a time when the graph is (re)built
#: how far a vector read back from the graph may be from the ExactIndex's: the rounding of the
#: graph's scalar (``ann_scalar``) on unit vectors; beyond it the row changed
SCALAR_TOL = {"f32": 1e-6, "f16": 1e-3, "i8": 2.0 / 127}


def moved(graph: Any, exact: ExactIndex, keys: np.ndarray, scalar: str) -> np.ndarray:
    """Which of ``keys`` (rowids both hold) ``graph`` holds with a vector farther from
    ``exact``'s than the rounding of the graph's ``scalar`` (:data:`SCALAR_TOL`), or not a
    number."""
    was = np.stack(graph.get(keys, dtype=np.float32))
    _, now = exact.vectors(keys)
    return ~(np.abs(was - now).max(axis=1) <= SCALAR_TOL[scalar])


def load_usearch() -> Any:
    """usearch's Index class, or memlab's error naming the extra that installs it."""
    try:
        from usearch.index import Index
    except ImportError:
        raise ConfigError("store.dense_index", f"'usearch' needs the optional extra {EXTRA!r}: "
                          f"pip install 'memlab[{EXTRA}]'", "usearch") from None
    return Index


class Keeper(Protocol):
    """Where a graph is saved beside the store (:class:`memlab.store.indexio.GraphFile`)."""

    def restore(self, ann: "AnnIndex", exact: ExactIndex) -> bool:
        """Give ``ann`` the saved graph (:meth:`AnnIndex.adopt`, or :meth:`AnnIndex.catch_up`
        for a graph of an earlier state of the same rows) when its checks pass; whether it did
        (why not: logged and counted)."""

    def save(self, ann: "AnnIndex", exact: ExactIndex) -> bool:
        """Save ``ann``'s graph (in step with ``exact``); False when not saved."""


class AnnIndex:
    """An HNSW graph over one ExactIndex's rows (see the module).

    Args:
        connectivity, expansion_add, expansion_search: usearch's HNSW parameters.
        oversampling: graph candidates asked per result wanted (``k * oversampling``).
        min_candidates: the fewest graph candidates asked for.
        scalar: how the graph holds its vectors (``f32``, ``f16``, ``i8``).
        threads: threads adding rows to the graph (1: the same graph every time).
        stats: the counter of searches, fallbacks and rebuilds (the store's ``stats``).
        keeper: where the graph is saved beside the store (None: never saved).
    """

    @classmethod
    def from_config(cls, config: Any, stats: Counter[str] | None = None,
                    keeper: Keeper | None = None) -> "AnnIndex":
        """An empty AnnIndex tuned by a MemlabConfig (its ``store.ann_*`` fields)."""
        return cls(connectivity=config.store.ann_connectivity,
                   expansion_add=config.store.ann_expansion_add,
                   expansion_search=config.store.ann_expansion_search,
                   oversampling=config.store.ann_oversampling,
                   min_candidates=config.store.ann_min_candidates,
                   scalar=config.store.ann_scalar, threads=config.store.ann_threads, stats=stats,
                   keeper=keeper)

    def __init__(self, *, connectivity: int = 32, expansion_add: int = 128,
                 expansion_search: int = 2048, oversampling: int = 4, min_candidates: int = 64,
                 scalar: str = "f16", threads: int = 1,
                 stats: Counter[str] | None = None, keeper: Keeper | None = None) -> None:
        self._Index = load_usearch()
        self.connectivity, self.expansion_add = int(connectivity), int(expansion_add)
        self.expansion_search, self.oversampling = int(expansion_search), int(oversampling)
        self.min_candidates, self.scalar, self.threads = int(min_candidates), scalar, int(threads)
        self.stats: Counter[str] = stats if stats is not None else Counter()
        self._graph: Any = None
        self._source: ExactIndex | None = None   # the ExactIndex object mirrored ...
        self.generation = -1                     # ... at this generation of it
        self.keeper = keeper
        self.saved = -1          # the generation of the graph saved beside the store (or loaded)
        self.viewed = False      # the graph is a read-only map of the saved file
        self.trust_saved = True  # False after Store.resync: rebuilt from the rows, never loaded

    def __len__(self) -> int:
        return 0 if self._graph is None else len(self._graph)

    def in_step(self, exact: ExactIndex) -> bool:
        """Whether the graph mirrors ``exact`` as it is now."""
        return (self._graph is not None and self._source is exact
                and self.generation == exact.generation and not exact.stale)

    def follow(self, exact: ExactIndex) -> None:
        """Mirror ``exact`` unless in step already: the saved graph when the keeper has a usable
        one, else a graph rebuilt from ``exact``'s rows (then saved by the keeper)."""
        if self.in_step(exact):
            return
        if self.keeper is not None and self.trust_saved and self.keeper.restore(self, exact):
            return
        self.build(exact)
        if self.keeper is not None and self.keeper.save(self, exact):
            self.saved = self.generation

    def new_graph(self, ndim: int) -> Any:
        """An empty usearch graph with this index's parameters."""
        return self._Index(ndim=ndim, metric="ip", dtype=self.scalar,
                           connectivity=self.connectivity, expansion_add=self.expansion_add,
                           expansion_search=self.expansion_search)

    def build(self, exact: ExactIndex) -> None:
        """Rebuild the graph from ``exact``'s rows (``stats["ann_rebuild"]``)."""
        self.stats["ann_rebuild"] += 1
        log.debug("ann: rebuilding the HNSW graph from %d rows", len(exact))
        graph = self.new_graph(exact.dim)
        self._add(graph, exact, exact.rowids())
        self.adopt(graph, exact, viewed=False)

    def _add(self, graph: Any, exact: ExactIndex, rowids: np.ndarray) -> None:
        """Add ``exact``'s rows ``rowids`` to ``graph``, converted to float32 in batches."""
        for lo in range(0, len(rowids), _BUILD_BATCH):
            keys = rowids[lo:lo + _BUILD_BATCH]
            _, vecs = exact.vectors(keys)
            graph.add(keys, vecs, threads=self.threads)

    def adopt(self, graph: Any, exact: ExactIndex, *, viewed: bool) -> None:
        """Hold ``graph`` as the mirror of ``exact`` at its current generation."""
        graph.expansion_search = self.expansion_search    # a saved graph does not keep it
        self._graph, self.viewed = graph, viewed
        self._source, self.generation = exact, exact.generation

    def catch_up(self, graph: Any, exact: ExactIndex) -> tuple[int, int, int]:
        """Adopt ``graph`` (viewed), a graph of an earlier state of ``exact``'s rows (another
        process wrote since it was saved), and bring it up to date: rows ``exact`` no longer
        holds removed, new rows added, rows whose vector moved beyond the scalar's rounding
        (:data:`SCALAR_TOL`) replaced; every held vector is compared, in batches. Counted
        (``stats["ann_catch_up"]``). Returns (rows added, removed, replaced)."""
        self.adopt(graph, exact, viewed=True)
        held = np.asarray(graph.keys, np.int64)
        rows = exact.rowids()
        gone, new = np.setdiff1d(held, rows), np.setdiff1d(rows, held)
        common = np.intersect1d(held, rows)
        parts = [np.zeros(0, np.int64)]
        for lo in range(0, len(common), _BUILD_BATCH):
            keys = common[lo:lo + _BUILD_BATCH]
            parts.append(keys[moved(graph, exact, keys, self.scalar)])
        changed = np.concatenate(parts)
        self.stats["ann_catch_up"] += 1
        if len(gone) or len(changed):
            self._writable()
            self._graph.remove(np.concatenate([gone, changed]))
        add = np.concatenate([new, changed])
        if len(add):
            self._writable()
            self._add(self._graph, exact, add)
        return len(new), len(gone), len(changed)

    @property
    def graph(self) -> Any:
        """The usearch graph held (None before the first search or after :meth:`drop`)."""
        return self._graph

    def _writable(self) -> None:
        """A viewed (read-only) graph copied into memory before its first change."""
        if self.viewed:
            self.stats["ann_copy"] += 1
            log.debug("ann: copying the mapped HNSW graph (%d rows) before a write", len(self))
            self._graph = self._graph.copy()
            self._graph.expansion_search = self.expansion_search
            self.viewed = False

    def save(self, exact: ExactIndex) -> bool:
        """Save the graph beside the store when it changed since it was loaded or saved and it
        mirrors ``exact`` (Store.close); whether it was saved."""
        if self.keeper is None or not self.in_step(exact) or self.generation == self.saved:
            return False
        done = self.keeper.save(self, exact)
        if done:
            self.saved = self.generation
        return done

    def applied(self, exact: ExactIndex, before: int, rowids: Sequence[int]) -> None:
        """Mirror a committed upsert that took ``exact`` from generation ``before`` to its
        current one; a graph that was not in step then is left to rebuild at the next search."""
        if self._graph is None or self._source is not exact or self.generation != before \
                or exact.stale:
            return
        keys = np.asarray(rowids, np.int64).reshape(-1)
        if len(keys):
            self._writable()
        there = keys[self._graph.contains(keys)] if len(keys) else keys
        if len(there):
            self._graph.remove(there)
        _, vecs = exact.vectors(keys)
        if len(keys):
            self._graph.add(keys, vecs, threads=self.threads)
        self.generation = exact.generation

    def drop(self, *, distrust: bool = False) -> None:
        """Free the graph (rebuilt at the next search; ``distrust``: from the rows, never from
        the saved graph, as after Store.resync)."""
        self._graph, self._source, self.generation, self.viewed = None, None, -1, False
        self.trust_saved = self.trust_saved and not distrust

    def search(self, exact: ExactIndex, query_vec: Any, k: int, *, agent_id: str, user_id: str,
               **filters: Any) -> tuple[np.ndarray, np.ndarray]:
        """Same contract as :meth:`ExactIndex.search` (see the module for how it may differ)."""
        q = exact.query(query_vec, k)
        self.follow(exact)
        self.stats["ann_search"] += 1
        if k == 0 or len(exact) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        count = min(len(exact), max(k * self.oversampling, self.min_candidates))
        found = self._graph.search(q, count, threads=1)
        at = exact.positions(np.asarray(found.keys, np.int64))
        idx = exact.select(at[at >= 0], agent_id=agent_id, user_id=user_id, **filters)
        if len(idx) < k:
            self.stats["ann_fallback"] += 1
            log.debug("ann: %d of %d graph candidates pass the filters (k=%d): exact scan",
                      len(idx), count, k)
            return exact.search(query_vec, k, agent_id=agent_id, user_id=user_id, **filters)
        return exact.rank(idx, exact.score(idx, q), k)

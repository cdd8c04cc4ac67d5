"""The in-process indexes as arrays and back, and their open: load the saved state or rebuild.

:func:`open_memory_index` and :func:`open_exact_index` are what :class:`~memlab.store.facade.Store`
calls instead of ``MemoryIndex.load`` / ``ExactIndex.load`` when ``store.persist_index`` is on and
the store is a file: the saved state of :mod:`memlab.store.persist` when it is usable, else a
rebuild from SQLite, saved for the next open. Each returns the index and what happened
(``"loaded"``, ``"loaded, N logged changes applied"``, ``"rebuilt: <why>"``). This module reads
and sets the indexes' private arrays: it is their serialisation, kept apart from their logic.
:class:`GraphFile` does the same for the usearch graph of :mod:`memlab.store.ann` (its keeper).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np

from memlab.config import MemlabConfig

from . import persist
from .ann import AnnIndex, load_usearch, moved
from .connect import Connection
from .exact import ExactIndex
from .memindex import _ARRAYS, MemoryIndex, _Postings, _generation
from .migrations import schema_version
from .snapshot import read_snapshot
from .vectors import VectorCache

log = logging.getLogger("memlab")
MEMORY = persist.MEMORY


# -- MemoryIndex -------------------------------------------------------------------------------
def _postings(table: dict[int, _Postings], live: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
    keys = np.array(sorted(table), np.int64)
    lists = [table[k].get(live) for k in keys.tolist()]
    return {f"{prefix}_keys": keys,
            f"{prefix}_lens": np.fromiter(map(len, lists), np.int64, count=len(lists)),
            f"{prefix}_pos": np.concatenate(lists) if lists else np.zeros(0, np.int64)}


def memory_arrays(ix: MemoryIndex) -> dict[str, np.ndarray]:
    """Everything a MemoryIndex holds, as arrays (dead positions kept: positions stay)."""
    n = ix._n
    live = ix._a["live"][:n]
    out = {f"col_{k}": ix._a[k][:n] for k in _ARRAYS}
    for name, strings in (("ids", ix._ids), ("texts", ix._texts), ("speakers", ix._speakers),
                          ("words", ix._words), ("kwords", list(ix._kvocab)),
                          ("entities", list(ix._entity_ids)),
                          ("session_ids", [s for _, s in ix._sessions])):
        out[f"{name}_blob"], out[f"{name}_lens"] = persist.strings_to_arrays(strings)
    out["flat"], out["eflat"], out["kflat"] = (ix._flat[:ix._flat_n], ix._eflat[:ix._eflat_n],
                                               ix._kflat[:ix._kflat_n])
    out["session_owner"] = np.array([o for o, _ in ix._sessions], np.int64)
    out["kdf_keys"] = np.array(list(ix._kdf), np.int64)
    out["kdf_n"] = np.array(list(ix._kdf.values()), np.int64)
    owners = sorted(set(ix._n_docs) | set(ix._ktotal))
    out["owner_ids"] = np.array(owners, np.int64)
    out["owner_docs"] = np.array([ix._n_docs.get(o, 0) for o in owners], np.int64)
    out["owner_total"] = np.array([ix._total.get(o, 0) for o in owners], np.int64)
    out["owner_keys"] = np.array([ix._ktotal.get(o, 0) for o in owners], np.int64)
    for table, prefix in ((ix._post, "post"), (ix._epost, "epost"), (ix._spost, "spost")):
        out.update(_postings(table, live, prefix))
    return out


def _require(ok: bool, what: str) -> None:
    if not ok:
        raise persist.Unusable(f"corrupt: {what}")


def memory_from_arrays(a: dict[str, np.ndarray], generation: int,
                       config: MemlabConfig | None) -> MemoryIndex:
    """The MemoryIndex of :func:`memory_arrays`; :class:`persist.Unusable` when inconsistent."""
    ix = MemoryIndex(config=config)
    n = len(a["col_rowid"])
    _require(all(len(a[f"col_{k}"]) == n for k in _ARRAYS), "column lengths differ")
    ix._a = {k: a[f"col_{k}"] for k in _ARRAYS}
    ix._n = ix._cap = n

    def strings(name: str, lazy: bool = False) -> list[str]:
        try:
            return persist.strings_from_arrays(a[f"{name}_blob"], a[f"{name}_lens"], lazy=lazy)
        except (ValueError, UnicodeDecodeError) as exc:
            raise persist.Unusable(f"corrupt: {name}: {exc}") from exc

    ix._ids, ix._texts, ix._speakers = (strings(k, lazy=True) for k in ("ids", "texts",
                                                                         "speakers"))
    _require(len(ix._ids) == len(ix._texts) == len(ix._speakers) == n, "string columns' lengths")
    ix._words = strings("words")
    ix._vocab = dict(zip(ix._words, range(len(ix._words))))
    ix._kvocab = dict(zip(kw := strings("kwords"), range(len(kw))))
    ix._entity_ids = dict(zip(en := strings("entities"), range(len(en))))
    for name, vocab in (("flat", ix._words), ("kflat", ix._kvocab), ("eflat", ix._entity_ids)):
        flat = a[name]
        _require(not len(flat) or (int(flat.min()) >= 0 and int(flat.max()) < len(vocab)),
                 f"{name} ids outside the vocabulary")
        setattr(ix, f"_{name}", flat)
        setattr(ix, f"_{name}_n", len(flat))
    cols = ix._a
    for s, l, flat in (("t_start", "t_len", "flat"), ("e_start", "e_len", "eflat"),
                       ("k_start", "k_len", "kflat")):
        _require(not n or (int(cols[s].min()) >= 0 and int(cols[l].min()) >= 0
                           and int((cols[s] + cols[l]).max()) <= len(a[flat])),
                 f"{s}/{l} outside {flat}")
    sids = strings("session_ids")
    _require(len(sids) == len(a["session_owner"]), "session lengths")
    ix._sessions = dict(zip(zip(a["session_owner"].tolist(), sids), range(len(sids))))
    _require(len(a["kdf_keys"]) == len(a["kdf_n"]), "kdf lengths")
    ix._kdf = dict(zip(a["kdf_keys"].tolist(), a["kdf_n"].tolist()))
    owners = a["owner_ids"].tolist()
    ix._n_docs = dict(zip(owners, a["owner_docs"].tolist()))
    ix._total = dict(zip(owners, a["owner_total"].tolist()))
    ix._ktotal = dict(zip(owners, a["owner_keys"].tolist()))
    for prefix in ("post", "epost", "spost"):
        keys, lens, pos = a[f"{prefix}_keys"], a[f"{prefix}_lens"], a[f"{prefix}_pos"]
        _require(len(keys) == len(lens) and int(lens.sum()) == len(pos)
                 and (not len(pos) or (int(pos.min()) >= 0 and int(pos.max()) < n)),
                 f"{prefix} postings")
        ends = np.cumsum(lens).tolist()
        table = {k: _Postings(pos[s:e]) for k, s, e in
                 zip(keys.tolist(), [0] + ends[:-1], ends)}
        setattr(ix, f"_{prefix}", table)
    live = cols["live"]
    ix._where.set(cols["rowid"][live], np.flatnonzero(live))
    ix._dead = n - int(live.sum())
    ix.generation = int(generation)
    return ix


def _probe_memory(conn: Connection, ix: MemoryIndex, size: int) -> None:
    """Sampled live rows read alike from SQLite and from the index, and as many rows (nothing
    compared when ``size`` is 0)."""
    if size <= 0:
        return
    live = np.flatnonzero(ix._a["live"][:ix._n])
    count = conn.execute("SELECT count(*) FROM memory_records").fetchone()[0]
    _require(count == len(live), f"the index holds {len(live)} memories, the store {count}")
    pos = live[persist.probe_positions(len(live), size)]
    if not len(pos):
        return
    rowids = ix._a["rowid"][pos].tolist()
    got = {r: (i, t, o, bool(s)) for r, i, t, o, s in conn.execute(
        "SELECT rowid, id, text, owner, lifecycle_state = 'active' AND deprecated = 0 FROM "
        "memory_records WHERE rowid IN (SELECT value FROM json_each(?))", (json.dumps(rowids),))}
    for p, r in zip(pos.tolist(), rowids):
        want = (ix._ids[p], ix._texts[p], int(ix._a["owner"][p]), bool(ix._a["searchable"][p]))
        _require(got.get(r) == want, f"rowid {r} differs from the store (probe)")


def memory_key(conn: Connection) -> dict[str, int]:
    return {"schema": schema_version(conn), "generation": _generation(conn)}


def open_memory_index(path: str, conn: Connection, config: MemlabConfig,
                      stats: Counter[str]) -> tuple[MemoryIndex, str, int]:
    """The MemoryIndex of the store at ``path``: its saved state brought up to date through the
    change log when usable, else rebuilt from SQLite and saved (see :mod:`memlab.store.persist`).
    Outside any write transaction (as :meth:`MemoryIndex.load`). Returns (the index, what
    happened, the generation of the state now saved beside the store: -1 when none)."""
    folder = persist.folder_of(path)
    s = config.store
    with read_snapshot(conn):
        key = memory_key(conn)
        try:
            saved = persist.load(folder, MEMORY, key, checksum=s.index_checksum,
                                 allow_behind="generation")
            ix = memory_from_arrays(saved.arrays, saved.key["generation"], config)
            ix._read_owners(conn)
            applied = ix.sync(conn)
            if applied < 0:
                raise persist.Unusable("stale: the change log asked for a reload")
            _probe_memory(conn, ix, s.index_probe)
            outcome = "loaded" if not applied else f"loaded, {applied} logged changes applied"
            stats["persisted index loaded"] += 1
            return ix, outcome, int(saved.key["generation"])
        except persist.Unusable as why:
            reason = str(why)
    _rebuilt(MEMORY, path, reason, stats)
    ix = MemoryIndex.load(conn, config=config)
    done = (len(ix) >= s.persist_min_memories or reason != "none saved") and \
        save_memory_index(path, ix, conn, stats)
    return ix, f"rebuilt: {reason}", ix.generation if done else -1


def save_memory_index(path: str, ix: MemoryIndex, conn: Connection,
                      stats: Counter[str]) -> bool:
    """Save ``ix`` beside the store; False (logged, counted) when the folder cannot be written."""
    key = {"schema": schema_version(conn), "generation": ix.generation}
    return _save(path, MEMORY, key, lambda: memory_arrays(ix), {"memories": len(ix)}, stats)


def _save(path: str, name: str, key: dict, arrays, meta: dict, stats: Counter[str],
          writers: dict[str, Callable[[Path], None]] | None = None) -> bool:
    try:
        persist.save(persist.folder_of(path), name, key, arrays(), meta, writers)
        return True
    except OSError as exc:    # a read-only folder, a full disk: the next open rebuilds
        stats["persisted index not saved"] += 1
        log.warning("memlab: %s: the in-process index could not be saved beside the store "
                    "(%s); the next open rebuilds it", path, exc)
        return False


def _rebuilt(name: str, path: str, why: str, stats: Counter[str]) -> None:
    kind = why.split(":")[0]
    stats[f"persisted index rebuilt: {kind}"] += 1
    level = logging.WARNING if kind == "corrupt" else logging.INFO
    log.log(level, "memlab: %s: persisted %s index not used (%s); rebuilt from the store",
            path, name, why)


# -- ExactIndex --------------------------------------------------------------------------------
_EXACT = ("_rowid", "_agent", "_user", "_layer", "_time", "_active", "_rnorm", "_mat")


def exact_key(cache: VectorCache, exact_dtype: str) -> dict:
    return {"schema": schema_version(cache.conn), "generation": cache.generation(),
            "model_version": cache.model_version, "dim": cache.dim, "dtype": cache.dtype,
            "int8_scale": cache.int8_scale, "exact_dtype": exact_dtype}


def exact_from_arrays(a: dict[str, np.ndarray], meta: dict, cache: VectorCache,
                      exact_dtype: str, generation: int) -> ExactIndex:
    ix = ExactIndex(dim=cache.dim, dtype=cache.dtype, int8_scale=cache.int8_scale,
                    exact_dtype=exact_dtype)
    n = len(a["_rowid"])
    _require(all(len(a[k]) == n for k in _EXACT), "column lengths differ")
    _require(a["_mat"].ndim == 2 and a["_mat"].shape[1] == cache.dim, "vector dimension")
    for k in _EXACT:
        setattr(ix, k, a[k])
    ix._n = n
    ix._codes = {str(k): int(v) for k, v in meta["codes"].items()}
    ix._pos.set(a["_rowid"], np.arange(n))
    ix.generation = int(generation)
    return ix


def _probe_exact(cache: VectorCache, ix: ExactIndex, size: int) -> None:
    """Sampled vectors read alike from the table and from the index (the generation, checked
    before, already says the table has not changed since the state was saved)."""
    if size <= 0:
        return
    pos = persist.probe_positions(len(ix), size)
    if not len(pos):
        return
    rowids = ix._rowid[pos]
    _require(bool((np.diff(rowids) > 0).all()) if len(rowids) > 1 else True, "rowid order")
    want = ix._unit(ix.encode(cache.vectors(rowids.tolist())))
    got = ix._unit(ix._mat[pos])
    tol = {"float32": 1e-6, "float16": 1e-3}.get(ix.exact_dtype, 1.01 * ix.int8_scale / 127)
    _require(bool(np.abs(want - got).max() <= tol),
             "a vector differs from the table's (probe)")


def open_exact_index(path: str, cache: VectorCache, config: MemlabConfig,
                     stats: Counter[str]) -> tuple[ExactIndex, str, int]:
    """The ExactIndex of ``cache``'s table: its saved state when usable (same table generation),
    else rebuilt from the table and saved; returned as :func:`open_memory_index` does."""
    folder = persist.folder_of(path)
    s = config.store
    name = persist.model_name(cache.model_version)
    with read_snapshot(cache.conn):
        key = exact_key(cache, s.exact_dtype)
        try:
            if not cache.exists():
                raise persist.Unusable("none saved")
            saved = persist.load(folder, name, key, checksum=s.index_checksum)
            ix = exact_from_arrays(saved.arrays, saved.meta, cache, s.exact_dtype,
                                   key["generation"])
            _probe_exact(cache, ix, s.index_probe)
            stats["persisted index loaded"] += 1
            return ix, "loaded", ix.generation
        except persist.Unusable as why:
            reason = str(why)
    _rebuilt("dense", path, reason, stats)
    ix = ExactIndex.load(cache, exact_dtype=s.exact_dtype)
    done = (len(ix) >= s.persist_min_memories or reason != "none saved") and \
        save_exact_index(path, ix, cache, stats)
    return ix, f"rebuilt: {reason}", ix.generation if done else -1


def save_exact_index(path: str, ix: ExactIndex, cache: VectorCache, stats: Counter[str]) -> bool:
    """Save ``ix`` beside the store (not when it is stale or never loaded)."""
    if ix.stale or ix.generation < 0:
        return False
    n = len(ix)
    key = {"schema": schema_version(cache.conn), "generation": ix.generation,
           "model_version": cache.model_version, "dim": cache.dim, "dtype": cache.dtype,
           "int8_scale": cache.int8_scale, "exact_dtype": ix.exact_dtype}
    return _save(path, persist.model_name(cache.model_version), key,
                 lambda: {k: getattr(ix, k)[:n] for k in _EXACT},
                 {"codes": ix._codes, "vectors": n}, stats)


# -- the usearch graph (store.dense_index usearch) ------------------------------------------------
GRAPH = "graph.usearch"


def graph_name(model_version: str) -> str:
    """The graph's name in the folder (beside the ExactIndex's ``exact-<hash>``)."""
    return "ann-" + persist.model_name(model_version).removeprefix("exact-")


def graph_key(ann: AnnIndex, exact: ExactIndex, cache: VectorCache) -> dict:
    """What a saved graph must match: the ExactIndex it mirrors (the vector table's identity at
    the ExactIndex's generation, its rows' dtype and count) and the graph's own parameters."""
    return {"schema": schema_version(cache.conn), "generation": exact.generation,
            "model_version": cache.model_version, "dim": cache.dim, "dtype": cache.dtype,
            "int8_scale": cache.int8_scale, "exact_dtype": exact.exact_dtype, "rows": len(exact),
            "ndim": exact.dim, "metric": "ip", "scalar": ann.scalar,
            "connectivity": ann.connectivity, "expansion_add": ann.expansion_add}


def _view_graph(f: Path) -> Any:
    """The usearch graph in ``f``, memory-mapped; :class:`persist.Unusable` when usearch cannot
    read it (its errors for a damaged file: RuntimeError, ValueError)."""
    Index = load_usearch()
    try:
        graph = Index.restore(str(f), view=True)
    except (RuntimeError, ValueError, OSError) as exc:
        raise persist.Unusable(f"corrupt: {f.name}: usearch: {exc}") from exc
    _require(graph is not None, f"{f.name}: usearch finds no index in it")
    return graph


def _check_graph(graph: Any, ann: AnnIndex, exact: ExactIndex, size: int, *,
                 rows: bool = True) -> None:
    """The graph's header (and with ``rows`` its row count) and ``size`` probed rows agree with
    the key and with ``exact``."""
    got = (graph.ndim, graph.metric.name.lower(), graph.dtype.name.lower(), graph.connectivity,
           len(graph) if rows else 0)
    want = (exact.dim, "ip", ann.scalar, ann.connectivity, len(exact) if rows else 0)
    _require(got == want, f"the graph holds (ndim, metric, scalar, connectivity, rows) {got}, "
                          f"its manifest says {want}")
    pos = persist.probe_positions(len(exact), size)
    if not len(pos):
        return
    rowids = exact.rowids()[pos]
    _require(bool(graph.contains(rowids).all()), "a probed row is not in the graph")
    _require(not moved(graph, exact, rowids, ann.scalar).any(),
             "a vector differs from the exact index's (probe)")


class GraphFile:
    """The keeper (:class:`memlab.store.ann.Keeper`) of an AnnIndex's graph beside the store at
    ``path``: :meth:`restore` maps the saved graph when usable, :meth:`save` writes one (both as
    :mod:`memlab.store.persist` does for the arrays). ``opened``: what the last restore did
    (``"loaded"``, ``"rebuilt: <why>"``; "" before)."""

    def __init__(self, path: str, cache: VectorCache, config: MemlabConfig,
                 stats: Counter[str]) -> None:
        self.path, self.cache, self.config, self.stats = path, cache, config, stats
        self.folder = persist.folder_of(path)
        self.name = graph_name(cache.model_version)
        self.opened = ""

    def restore(self, ann: AnnIndex, exact: ExactIndex) -> bool:
        """Give ``ann`` the saved graph when usable: keyed to ``exact`` as it is now (mapped
        as saved), or to an earlier generation of the same table with the same graph parameters
        (mapped, then brought up to date: :meth:`AnnIndex.catch_up`); whether it did."""
        s = self.config.store
        key = graph_key(ann, exact, self.cache)
        try:
            if exact.stale or exact.generation < 0:
                raise persist.Unusable("stale: the exact index is not loaded")
            saved = persist.load(self.folder, self.name,
                                 {k: v for k, v in key.items() if k != "rows"},
                                 checksum=s.index_checksum, allow_behind="generation")
            _require(GRAPH in saved.files, f"the manifest names no {GRAPH}")
            graph = _view_graph(saved.files[GRAPH])
            _require(len(graph) == saved.key.get("rows"),
                     f"{GRAPH} holds {len(graph)} rows, its manifest says {saved.key.get('rows')}")
            if saved.key["generation"] == key["generation"]:
                _check_graph(graph, ann, exact, s.index_probe)
                ann.adopt(graph, exact, viewed=True)
                ann.saved = ann.generation
                self.opened = "loaded"
            else:
                _check_graph(graph, ann, exact, 0, rows=False)
                added, removed, moved = ann.catch_up(graph, exact)
                _check_graph(ann.graph, ann, exact, s.index_probe)
                ann.saved = -1      # saved again at close, keyed to this generation
                self.opened = (f"loaded, generation {saved.key['generation']} brought up to "
                               f"{key['generation']}: {added} rows added, {removed} removed, "
                               f"{moved} replaced")
        except persist.Unusable as why:
            ann.drop()
            self.opened = f"rebuilt: {why}"
            _rebuilt("ann", self.path, str(why), self.stats)
            return False
        self.stats["persisted index loaded"] += 1
        return True

    def save(self, ann: AnnIndex, exact: ExactIndex) -> bool:
        """Save ``ann``'s graph, keyed to ``exact`` (not when stale, or for a store under
        ``store.persist_min_memories`` without a saved graph yet)."""
        graph = ann.graph
        if graph is None or exact.stale or exact.generation < 0:
            return False
        if len(exact) < self.config.store.persist_min_memories and \
                not (self.folder / f"{self.name}.json").exists():
            return False

        def write(f: Path) -> None:
            try:
                graph.save(str(f))
            except (RuntimeError, ValueError) as exc:   # usearch's own write errors
                raise OSError(f"usearch could not write {f}: {exc}") from exc

        return _save(self.path, self.name, graph_key(ann, exact, self.cache), dict,
                     {"rows": len(exact)}, self.stats, {GRAPH: write})


__all__ = ["GRAPH", "GraphFile", "exact_from_arrays", "graph_key", "graph_name", "memory_arrays",
           "memory_from_arrays", "open_exact_index", "open_memory_index", "save_exact_index",
           "save_memory_index"]

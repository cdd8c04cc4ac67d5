"""The dense stage at 100k and 1,000,000 memories: exact float32 scan vs the usearch HNSW graph
(``store.dense_index = "usearch"``, memlab/store/ann.py), side by side in one process.

No store: seeded vectors (``recall_latency.VectorModel``: clustered, 384 dims) go straight into an
ExactIndex (float32 rows, the default), then an AnnIndex is built over it, as the store does at
the first search. Queries are noisy copies of stored rows (``recall_latency.noisy_copies``, as
``recall_latency.py --exact-sizes``). Per size: the graph's build time, search p50/p95 at the dense
pool's k (40) for both, recall@10 of the graph against the exact float32 top 10 (k=10 and the
first 10 of k=40), fallbacks to the exact scan, the graph's memory, the process's peak RSS
(exact rows + graph + the build's batches) and the load average.

``--open`` (the graph persisted beside a store, issue 22): the built graph is saved by the store's
own keeper (:class:`memlab.store.indexio.GraphFile`, into a temporary ``<store>.idx/``; its
key's vector-table fields come from a stand-in table), then "open + first dense search" is timed
``--open-repeats`` times, variants side by side in rotating order, medians: a fresh AnnIndex
mapping the saved graph (usearch ``view``; with and without the CRC-32 of the file), a fresh
AnnIndex reading it into memory (usearch ``restore(view=False)``, the alternative not taken) and
the first write's copy of a mapped graph (copy-on-first-write); against the rebuild (the build
time above + the first search). The file is in the OS page cache (just written): warm.

    PYTHONPATH=$PWD nice -n 10 python benchmarks/ann_latency.py --sizes 100000,1000000
    PYTHONPATH=$PWD nice -n 10 python benchmarks/ann_latency.py --sizes 100000 --open

Prints a table; writes results/ann_latency.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from recall_latency import (VectorModel, load, machine, noisy_copies, overlap,  # noqa: E402
                            repeat_latency)
from memlab.store import ExactIndex, VectorMeta  # noqa: E402
from memlab.config import MemlabConfig  # noqa: E402
from memlab.store.ann import AnnIndex, load_usearch  # noqa: E402
from memlab.store.indexio import GraphFile  # noqa: E402

POOL_K = 40   # the dense pool's k (recall_latency.py --exact-sizes uses the same)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class StandInTable:
    """What GraphFile reads of a VectorCache for the key: no store is built here."""

    def __init__(self, dim: int) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.model_version, self.dim, self.dtype, self.int8_scale = "bench", dim, "float32", 0.25


def open_times(exact: ExactIndex, ann: AnnIndex, q: np.ndarray, opt: argparse.Namespace
               ) -> dict[str, Any]:
    """Open + first dense search with the graph saved beside a store, by variant (see the
    module); medians of ``--open-repeats``, ms."""
    who = dict(agent_id="a", user_id="u")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(dir=opt.tmp) as tmp:
        path = str(Path(tmp) / "s.sqlite")
        table = StandInTable(exact.dim)

        def keeper(checksum: bool) -> GraphFile:
            cfg = MemlabConfig().replace(**{"store.index_checksum": checksum,
                                            "store.persist_min_memories": 0})
            return GraphFile(path, table, cfg, Counter())   # type: ignore[arg-type]

        t0 = time.perf_counter()
        assert keeper(True).save(ann, exact)
        out["save_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
        f = next(Path(tmp).glob("s.sqlite.idx/ann-*/graph.usearch"))
        out["file_mb"] = round(f.stat().st_size / 2 ** 20, 1)
        Index = load_usearch()

        def fresh(checksum: bool) -> AnnIndex:
            return AnnIndex(connectivity=ann.connectivity, expansion_add=ann.expansion_add,
                            expansion_search=ann.expansion_search, oversampling=ann.oversampling,
                            min_candidates=ann.min_candidates, scalar=ann.scalar,
                            threads=ann.threads, stats=Counter(), keeper=keeper(checksum))

        def mapped(checksum: bool) -> None:
            a = fresh(checksum)
            a.search(exact, q, POOL_K, **who)
            assert a.stats["ann_rebuild"] == 0 and a.viewed, a.stats

        def in_memory() -> None:
            g = Index.restore(str(f), view=False)
            g.expansion_search = ann.expansion_search
            a = fresh(False)
            a.adopt(g, exact, viewed=False)
            a.search(exact, q, POOL_K, **who)

        copies: list[float] = []

        def copy() -> None:
            a = fresh(False)
            a.follow(exact)
            t = time.perf_counter()
            a._writable()
            copies.append((time.perf_counter() - t) * 1e3)

        variants = {"view + CRC-32": lambda: mapped(True), "view": lambda: mapped(False),
                    "restore (read into memory)": in_memory, "view, then first write": copy}
        times: dict[str, list[float]] = {k: [] for k in variants}
        names = list(variants)
        for r in range(opt.open_repeats):
            for name in names[r % len(names):] + names[:r % len(names)]:
                gc.collect()
                t = time.perf_counter()
                variants[name]()
                times[name].append((time.perf_counter() - t) * 1e3)
        out["ms"] = {k: round(statistics.median(v), 1) for k, v in times.items()}
        out["copy_ms"] = round(statistics.median(copies), 1)
        # another process added rows without saving the graph: the saved one is behind
        m = opt.behind
        vm = VectorModel()
        n = len(exact)
        exact.add(np.arange(n + 1, n + m + 1), vm.documents(m, batch_seed=10 ** 6),
                  [VectorMeta("a", "u", "long_term", "semantic", 0, True)] * m,
                  generation=exact.generation + 1)
        behind = []
        for _ in range(opt.open_repeats):
            gc.collect()
            a = fresh(True)
            t = time.perf_counter()
            a.search(exact, q, POOL_K, **who)
            behind.append((time.perf_counter() - t) * 1e3)
            assert a.stats["ann_catch_up"] == 1 and a.stats["ann_rebuild"] == 0, a.stats
        out["ms"][f"view + CRC-32, {m} rows behind (catch-up)"] = \
            round(statistics.median(behind), 1)
    return out


def one_size(n: int, opt: argparse.Namespace) -> dict[str, Any]:
    vm = VectorModel()
    meta = [VectorMeta("a", "u", "long_term", "semantic", 0, True)] * n
    exact = ExactIndex(dim=vm.dim)
    batch = 10_000
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        exact.add(np.arange(lo + 1, hi + 1), vm.documents(hi - lo, batch_seed=lo // batch),
                  meta[lo:hi])
    exact.generation = 0   # as loaded from a table at generation 0 (the graph's key names it)
    qvecs = noisy_copies(exact._unit(exact._mat[:n:max(1, n // 997)]), opt.queries, seed=7)
    who = dict(agent_id="a", user_id="u")
    truth = [exact.search(q, 10, **who)[0] for q in qvecs]
    row: dict[str, Any] = {"memories": n, "queries": len(qvecs), "k": POOL_K,
                           "exact_f32": repeat_latency(
                               lambda i: exact.search(qvecs[i], POOL_K, **who), len(qvecs),
                               opt.repeats),
                           "exact_rows_mb": round(exact._mat[:n].nbytes / 2 ** 20, 1),
                           "rss_before_graph_mb": peak_rss_mb()}
    stats: Counter[str] = Counter()
    ann = AnnIndex(connectivity=opt.connectivity, expansion_add=opt.expansion_add,
                   expansion_search=opt.expansion_search, oversampling=opt.oversampling,
                   min_candidates=opt.min_candidates, scalar=opt.scalar, threads=opt.threads,
                   stats=stats)
    load_before = load()
    t0 = time.perf_counter()
    ann.follow(exact)
    row["build_s"] = round(time.perf_counter() - t0, 1)
    row["build_load"] = [load_before, load()]
    t0 = time.perf_counter()
    ann.search(exact, qvecs[0], POOL_K, **who)
    row["first_search_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
    got10 = [ann.search(exact, q, 10, **who)[0] for q in qvecs]
    got40: list[Any] = []
    row["usearch"] = repeat_latency(lambda i: ann.search(exact, qvecs[i], POOL_K, **who),
                                    len(qvecs), opt.repeats, got40)
    row["recall10_k10"] = round(overlap(got10, truth), 4)
    row["recall10_k40"] = round(overlap([g[0] for g in got40], truth), 4)
    row["fallbacks"] = stats["ann_fallback"]
    row["graph_mb"] = round(ann._graph.memory_usage / 2 ** 20, 1)
    row["expansion_sweep"] = []
    for ef in [int(x) for x in opt.expansion_sweep.split(",") if x.strip()]:
        ann._graph.expansion_search = ann.expansion_search = ef   # the same graph, searched wider
        got = [ann.search(exact, q, 10, **who)[0] for q in qvecs]
        lat = repeat_latency(lambda i: ann.search(exact, qvecs[i], POOL_K, **who), len(qvecs), 1)
        row["expansion_sweep"].append({"expansion_search": ef, **lat,
                                       "recall10_k10": round(overlap(got, truth), 4)})
        print(f"[{n}] expansion_search {ef}: p50 {lat['p50_ms']} ms, recall@10 "
              f"{row['expansion_sweep'][-1]['recall10_k10']}", flush=True)
    if opt.open:     # last: its catch-up case adds --behind rows to the exact index
        row["open"] = open_times(exact, ann, qvecs[0], opt)
        row["open"]["load"] = load()
        print(f"[{n}] open + first dense search, ms: {row['open']['ms']}; rebuilt: "
              f"{row['build_s'] * 1e3 + row['first_search_ms']:.0f}; copy of a mapped graph "
              f"{row['open']['copy_ms']} ms; file {row['open']['file_mb']} MB, saved in "
              f"{row['open']['save_ms']} ms; load {row['open']['load']}", flush=True)
    row["peak_rss_mb"] = peak_rss_mb()
    row["load"] = load()
    print(f"[{n}] build {row['build_s']} s; exact p50 {row['exact_f32']['p50_ms']} ms, "
          f"usearch p50 {row['usearch']['p50_ms']} ms; recall@10 {row['recall10_k10']}; "
          f"peak RSS {row['peak_rss_mb']} MB; load {row['load']}", flush=True)
    del ann, exact
    gc.collect()
    return row


def table(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{
        "memories": r["memories"], "graph build s": r["build_s"],
        "exact f32 p50/p95 ms": f"{r['exact_f32']['p50_ms']:.1f} / {r['exact_f32']['p95_ms']:.1f}",
        "usearch p50/p95 ms": f"{r['usearch']['p50_ms']:.2f} / {r['usearch']['p95_ms']:.2f}",
        "recall@10 (k=10 / k=40)": f"{r['recall10_k10']:.4f} / {r['recall10_k40']:.4f}",
        "fallbacks": r["fallbacks"], "graph MB": r["graph_mb"],
        "peak RSS MB": r["peak_rss_mb"], "load": r["load"][0]} for r in rows])


def open_table(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Open + first dense search (ms) by how the graph comes back, against the rebuild."""
    out = []
    for r in rows:
        rebuilt = r["build_s"] * 1e3 + r["first_search_ms"]
        for name, ms in [*r["open"]["ms"].items(), ("rebuilt (build + first search)", rebuilt)]:
            out.append({"memories": r["memories"], "graph": name, "ms": round(ms, 1),
                        "vs rebuilt": round(ms / rebuilt, 4)})
    return pd.DataFrame(out)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--connectivity", type=int, default=32)
    p.add_argument("--expansion-add", type=int, default=128)
    p.add_argument("--expansion-search", type=int, default=2048)
    p.add_argument("--oversampling", type=int, default=4)
    p.add_argument("--expansion-sweep", default="",
                   help="after the main figures, search the same graph at these expansion_search "
                        "values (comma-separated): recall@10 and p50/p95 at k = 40 for each")
    p.add_argument("--min-candidates", type=int, default=64)
    p.add_argument("--scalar", default="f16", choices=["f32", "f16", "i8"])
    p.add_argument("--threads", type=int, default=2, help="threads building the graph")
    p.add_argument("--open", action="store_true",
                   help="time open + first dense search with the graph saved beside a store "
                        "(mapped, read into memory) against the rebuild")
    p.add_argument("--open-repeats", type=int, default=5)
    p.add_argument("--behind", type=int, default=1000,
                   help="rows another process adds before the saved graph is opened (--open)")
    p.add_argument("--tmp", default=None, help="folder for the saved graph (default: the OS's)")
    p.add_argument("--out", default=str(ROOT / "results" / "ann_latency.json"))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    opt = parse(argv)
    t0 = time.perf_counter()
    rows = [one_size(int(x), opt) for x in opt.sizes.split(",") if x.strip()]
    import usearch
    report = {"machine": {**machine(), "usearch": usearch.__version__}, "options": vars(opt),
              "rows": rows,
              "wall_s": round(time.perf_counter() - t0, 1)}
    print(table(rows).to_string(index=False))
    if opt.open:
        print(open_table(rows).to_string(index=False))
    print(f"wall {report['wall_s']} s")
    out = Path(opt.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The dense stage at 100k and 1,000,000 memories: exact float32 scan vs the usearch HNSW graph
(``store.dense_index = "usearch"``, memlab/store/ann.py), side by side in one process.

No store: seeded vectors (``recall_latency.VectorModel``: clustered, 384 dims) go straight into an
ExactIndex (float32 rows, the default), then an AnnIndex is built over it, as the store does at
the first search. Queries are noisy copies of stored rows (``recall_latency.noisy_copies``, as
``recall_latency.py --exact-sizes``). Per size: the graph's build time, search p50/p95 at the dense
pool's k (40) for both, recall@10 of the graph against the exact float32 top 10 (k=10 and the
first 10 of k=40), fallbacks to the exact scan, the graph's memory, the process's peak RSS
(exact rows + graph + the build's batches) and the load average.

    PYTHONPATH=$PWD nice -n 10 python benchmarks/ann_latency.py --sizes 100000,1000000

Prints a table; writes results/ann_latency.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
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
from memlab.store.ann import AnnIndex  # noqa: E402

POOL_K = 40   # the dense pool's k (recall_latency.py --exact-sizes uses the same)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def one_size(n: int, opt: argparse.Namespace) -> dict[str, Any]:
    vm = VectorModel()
    meta = [VectorMeta("a", "u", "long_term", "semantic", 0, True)] * n
    exact = ExactIndex(dim=vm.dim)
    batch = 10_000
    for lo in range(0, n, batch):
        hi = min(n, lo + batch)
        exact.add(np.arange(lo + 1, hi + 1), vm.documents(hi - lo, batch_seed=lo // batch),
                  meta[lo:hi])
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
    print(f"wall {report['wall_s']} s")
    out = Path(opt.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""What opening a store costs, with and without its checks; what the checks catch.

Run from the repository root::

    python benchmarks/store_open.py                       # 100k memories, 5 repeats
    python benchmarks/store_open.py --memories 10000 --repeats 3
    python benchmarks/store_open.py --store /tmp/s.sqlite # build once, reuse the file

Prints tables and writes JSON (``--json``, default ``results/store_open.json``).

* **open**: ``memlab.open_store(path, embedder=...)`` then ``close()``, side by side in one run,
  the variants in a rotating order within each repeat, medians over ``--repeats``: the default
  (``store.quick_check`` as this memlab sets it, ``store.vector_sample`` 256), ``quick_check``
  on and off, ``vector_sample`` 0, and the same with ``store.read_index = "sqlite-vec"`` (no
  in-process vector index loaded at open, so the checks' share shows). The file is in the OS page
  cache (warm) after the build: a cold open reads the file from disk first.
* **open + first recall** (issue 22, item 1): ``open_store`` then one ``recall(query, k=10)``,
  the in-process indexes persisted beside the store (``store.persist_index``, the state saved by
  an earlier open: memory-mapped and checked) against rebuilt from SQLite (``persist_index``
  off: today's open), with the open-time checks off and on, side by side in rotating order,
  medians of ``--repeats``; how each index was opened is recorded (``index_opened``).
* **checks alone**: ``PRAGMA quick_check``, ``PRAGMA integrity_check``, the vector contents
  sample (``memlab.store.vecscan.sample``) and every vector (``vecscan.scan``), and ``memlab
  store check`` without and with ``--full``.
* **damage**: ``--damage-memories`` memories (small: the file is copied per case), 4 KiB of seeded
  random bytes written at 25 % and 50 % of the file (issue 19, item 11): with ``quick_check`` off
  and on, does ``open_store`` + ``add`` succeed, and does ``PRAGMA integrity_check`` pass after.

The store is built as ``benchmarks/recall_latency.py`` builds it: seeded bilingual texts through
the real write path (terms, entities, BM25 index), seeded synthetic unit vectors, float32.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from recall_latency import NOW, BenchEmbedder, Corpus, VectorModel, load, machine  # noqa: E402

from memlab.api import open_store  # noqa: E402
from memlab.clock import FixedClock  # noqa: E402
from memlab.config import MemlabConfig  # noqa: E402
from memlab.embed import HashingEmbedder  # noqa: E402
from memlab.errors import MemlabError  # noqa: E402
from memlab.recall.background import load_texts  # noqa: E402
from memlab.store import VectorCache, check_store, connect  # noqa: E402
from memlab.store.vecscan import sample, scan  # noqa: E402

PAGE = 4096


def embedder(cfg: MemlabConfig, vm: VectorModel) -> BenchEmbedder:
    """Documents come with their vectors; queries (an add's association lookup) are embedded by
    the hashing embedder, which has the vectors' dimension."""
    texts = [t for group in load_texts(cfg.recall).values() for t in group]
    emb = BenchEmbedder(dim=vm.dim, model=HashingEmbedder(dim=vm.dim), background=dict(zip(
        texts, vm.documents(len(texts), batch_seed=99))))
    emb.mode = "model"
    return emb


def build(path: Path, n: int, cfg: MemlabConfig, emb: BenchEmbedder, vm: VectorModel, *,
          batch: int = 1000) -> float:
    """A store of ``n`` memories at ``path``; seconds it took."""
    corpus = Corpus(vectors=vm, zh_fraction=0.5, span_days=730.0, permanent=100, batch=batch)
    corpus.grow(n)
    t0 = time.perf_counter()
    with open_store(path, config=cfg, embedder=emb, clock=FixedClock(NOW)) as st:
        for lo in range(0, n, batch):
            hi = min(n, lo + batch)
            st.add_many(corpus.items(lo, hi), vectors=corpus.matrix(hi)[lo:hi])
    conn = connect(path, busy_timeout_ms=10_000)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - t0


def ms(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def open_variants(base: MemlabConfig) -> dict[str, MemlabConfig]:
    on, off = {"store.quick_check": True}, {"store.quick_check": False}
    vec = {"store.read_index": "sqlite-vec"}
    return {"default": base,
            "quick_check off": base.replace(**off),
            "quick_check on": base.replace(**on),
            "quick_check off, vector_sample 0": base.replace(**off, **{"store.vector_sample": 0}),
            "sqlite-vec reads, quick_check off, vector_sample 0":
                base.replace(**off, **vec, **{"store.vector_sample": 0}),
            "sqlite-vec reads, quick_check off": base.replace(**off, **vec),
            "sqlite-vec reads, quick_check on": base.replace(**on, **vec)}


def time_opens(path: Path, variants: dict[str, MemlabConfig], emb: BenchEmbedder,
               repeats: int) -> list[dict[str, Any]]:
    names = list(variants)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:   # rotate the order
            cfg = variants[name]
            samples[name].append(ms(lambda: open_store(path, config=cfg, embedder=emb,
                                                       clock=FixedClock(NOW)).close()))
    base = statistics.median(samples[names[0]])
    return [{"variant": n, "quick_check": variants[n].store.quick_check,
             "vector_sample": variants[n].store.vector_sample,
             "read_index": variants[n].store.read_index,
             "median_ms": round(statistics.median(s), 1), "min_ms": round(min(s), 1),
             "max_ms": round(max(s), 1), "vs_default": round(statistics.median(s) / base, 2),
             "runs_ms": [round(x, 1) for x in s]} for n, s in samples.items()]


QUERIES = ["who bought a new kettle at the market", "小明 周末 咖啡", "what did Caroline say about chess"]


def recall_variants(base: MemlabConfig) -> dict[str, MemlabConfig]:
    fast = {"store.quick_check": False, "store.vector_sample": 0}
    on = {"store.persist_index": True}
    off = {"store.persist_index": False}
    return {"persisted, checks off": base.replace(**fast, **on),
            "persisted, checks off, no CRC-32": base.replace(
                **fast, **on, **{"store.index_checksum": False}),
            "rebuilt, checks off": base.replace(**fast, **off),
            "persisted, default checks": base.replace(**on),
            "rebuilt, default checks": base.replace(**off)}


def time_first_recalls(path: Path, variants: dict[str, MemlabConfig], emb: BenchEmbedder,
                       repeats: int) -> list[dict[str, Any]]:
    """open_store + the first recall, per variant (rotating order); the saved state is made
    first by one open with persist_index on (its indexes loaded, then saved at close)."""
    with open_store(path, config=variants["persisted, checks off"], embedder=emb,
                    clock=FixedClock(NOW)) as st:
        st.warm()
    names = list(variants)
    samples: dict[str, list[float]] = {n: [] for n in names}
    opened: dict[str, dict[str, str]] = {}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            st = open_store(path, config=variants[name], embedder=emb, clock=FixedClock(NOW))
            t1 = time.perf_counter()
            st.recall(QUERIES[r % len(QUERIES)], k=10)
            t2 = time.perf_counter()
            opened[name] = dict(st._store.index_opened)
            st.close()
            samples[name].append(((t1 - t0) * 1000, (t2 - t1) * 1000))
    base = statistics.median(a + b for a, b in samples["rebuilt, checks off"])
    out = []
    for n, s in samples.items():
        tot = [a + b for a, b in s]
        cfg = variants[n].store
        out.append({"variant": n, "persist_index": cfg.persist_index,
                    "quick_check": cfg.quick_check, "vector_sample": cfg.vector_sample,
                    "open_ms": round(statistics.median(a for a, _ in s), 1),
                    "first_recall_ms": round(statistics.median(b for _, b in s), 1),
                    "total_ms": round(statistics.median(tot), 1),
                    "max_total_ms": round(max(tot), 1),
                    "vs_rebuilt": round(statistics.median(tot) / base, 3),
                    "index_opened": opened[n], "runs_ms": [round(x, 1) for x in tot]})
    return out


def time_checks(path: Path, version: str, repeats: int, vector_sample: int
                ) -> list[dict[str, Any]]:
    conn = connect(path, busy_timeout_ms=10_000, read_only=True)
    cache = VectorCache.from_registry(conn, model_version=version)
    total = cache.count()
    jobs: dict[str, Callable[[], Any]] = {
        "PRAGMA quick_check": lambda: conn.execute("PRAGMA quick_check").fetchall(),
        "PRAGMA integrity_check": lambda: conn.execute("PRAGMA integrity_check").fetchall(),
        f"vector contents, sample of {vector_sample}":
            lambda: sample(conn, cache, vector_sample, total),
        f"vector contents, all {total}": lambda: scan(conn, cache, total),
        "memlab store check": lambda: check_store(path, vector_sample=vector_sample),
        "memlab store check --full": lambda: check_store(path, full=True,
                                                         vector_sample=vector_sample)}
    rows = []
    for name, fn in jobs.items():
        s = [ms(fn) for _ in range(repeats)]
        rows.append({"check": name, "median_ms": round(statistics.median(s), 1),
                     "min_ms": round(min(s), 1), "max_ms": round(max(s), 1)})
    conn.close()
    return rows


def damage_cases(folder: Path, n: int, base: MemlabConfig, emb: BenchEmbedder, vm: VectorModel,
                 seeds: int) -> list[dict[str, Any]]:
    good = folder / "small.sqlite"
    build(good, n, base, emb, vm)
    rows = []
    for where in (0.25, 0.5):
        for seed in range(seeds):
            junk = random.Random(seed).randbytes(PAGE)
            offset = int(good.stat().st_size * where) // PAGE * PAGE
            for qc in (False, True):
                path = folder / "damaged.sqlite"
                for f in folder.glob("damaged.sqlite*"):
                    f.unlink()
                shutil.copy(good, path)
                with path.open("r+b") as fh:
                    fh.seek(offset)
                    fh.write(junk)          # the same bytes with the check off and on
                cfg = base.replace(**{"store.quick_check": qc})
                try:
                    with open_store(path, config=cfg, embedder=emb, clock=FixedClock(NOW)) as st:
                        st.add_many([{"text": "Alice bought a new kettle at the market."}],
                                    vectors=vm.documents(1, batch_seed=seed + 1000))
                    outcome = "open and add succeeded"
                except MemlabError as exc:
                    outcome = f"refused: {type(exc).__name__}"
                conn = connect(path, busy_timeout_ms=10_000, read_only=True, load_vec=False)
                try:
                    ic = conn.execute("PRAGMA integrity_check(1)").fetchone()[0]
                except MemlabError as exc:
                    ic = type(exc).__name__
                finally:
                    conn.close()
                rows.append({"at": f"{int(where * 100)} %", "seed": seed, "quick_check": qc,
                             "outcome": outcome, "integrity_check after": str(ic)[:40]})
    return rows


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memories", type=int, default=100_000, help="store size (100000)")
    p.add_argument("--repeats", type=int, default=5, help="opens per variant; medians (5)")
    p.add_argument("--check-repeats", type=int, default=3, help="runs per check alone (3)")
    p.add_argument("--store", type=Path, default=None,
                   help="the store file: built when absent, reused when present")
    p.add_argument("--damage-memories", type=int, default=2000,
                   help="size of the store the damage cases copy (2000; 0: skip them)")
    p.add_argument("--damage-seeds", type=int, default=4, help="random-byte seeds per offset (4)")
    p.add_argument("--first-only", action="store_true",
                   help="only the open + first recall table (persisted vs rebuilt)")
    p.add_argument("--json", type=Path, default=ROOT / "results" / "store_open.json")
    a = p.parse_args(argv)
    if a.memories < 1000 or a.memories % 1000 or a.repeats < 1 or a.check_repeats < 1:
        p.error("--memories: a positive multiple of 1000; --repeats, --check-repeats >= 1")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    a = parse(argv)
    base = MemlabConfig()
    vm = VectorModel()
    emb = embedder(base, vm)
    tmp = Path(tempfile.mkdtemp(prefix="memlab-open-"))
    started, load_before = datetime.now(timezone.utc), load()
    try:
        path = a.store or tmp / "store.sqlite"
        built_s = None
        if not path.exists():
            built_s = round(build(path, a.memories, base, emb, vm), 1)
            print(f"built {a.memories} memories in {built_s} s", flush=True)
        size_mb = round(path.stat().st_size / 2 ** 20, 1)
        first = time_first_recalls(path, recall_variants(base), emb, a.repeats)
        opens = time_opens(path, open_variants(base), emb, a.repeats) if not a.first_only \
            else []
        checks = time_checks(path, emb.version, a.check_repeats, base.store.vector_sample) \
            if not a.first_only else []
        damage = damage_cases(tmp, a.damage_memories, base, emb, vm, a.damage_seeds) \
            if a.damage_memories and not a.first_only else []
    finally:
        shutil.rmtree(tmp)
    report = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
              "memories": a.memories, "store_mb": size_mb, "build_s": built_s,
              "repeats": a.repeats, "defaults": {"quick_check": base.store.quick_check,
                                                 "vector_sample": base.store.vector_sample},
              "open_first_recall": first, "open": opens, "checks": checks, "damage": damage,
              "load_before": load_before, "load_after": load()}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(report, indent=1, ensure_ascii=False))
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.max_colwidth", 60):
        print(f"\n== open_store + first recall (k=10), {a.memories} memories, medians of "
              f"{a.repeats}: persisted indexes vs rebuilt from SQLite")
        print(pd.DataFrame(first).drop(columns=["runs_ms", "index_opened"]).to_string(
            index=False))
        print("index_opened:", {r["variant"]: r["index_opened"] for r in first})
        if not opens:
            print("(--first-only: the other tables skipped)")
        if opens:
            print(f"\n== open_store + close, {a.memories} memories ({size_mb} MB, warm page "
                  f"cache), medians of {a.repeats}")
            print(pd.DataFrame(opens).drop(columns=["runs_ms"]).to_string(index=False))
            print(f"\n== the checks alone, medians of {a.check_repeats}")
            print(pd.DataFrame(checks).to_string(index=False))
        if damage:
            print(f"\n== 4 KiB of random bytes in a store of {a.damage_memories} memories")
            print(pd.DataFrame(damage).to_string(index=False))
    m = report["machine"]
    print(f"\n{report['date']}; {m['platform']}, {m['cpu_count']} CPUs, {m['processor']}, "
          f"SQLite {m['sqlite']} ({m['sqlite_driver']}); load {load_before} -> "
          f"{report['load_after']}; JSON: {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

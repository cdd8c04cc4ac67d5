#!/usr/bin/env python
"""The quality picture (issues 8 and 21): held-out scores of every way memlab ranks memories,
beside the plain retrievers, with paired p-values and 95% intervals, on every development dataset.

Run from the repository root (D = the public datasets' folder)::

    python benchmarks/quality.py --datasets lifelog,locomo,madial-zh,madial-en,lme-oracle \
        --data $D --cache-dir .cache/memlab --folds 5 [--trials 40] [--ablate all]
    python benchmarks/quality.py --report results/quality.json        # reprint the tables

Per dataset the replays come from the feature cache (each preset replayed once, then cached):

* references ``cosine``, ``bm25``, ``hybrid_rrf``: the presets as shipped (nothing is learned:
  every question counts); ``reverie``: the spec's defaults;
* k-fold by conversation (``memlab.tune.folds``, seeded; never a study's tuned folds): ``optuna``
  (``--trials`` > 0: a TPE study over ``experiments/sweeps/reverie_score.yaml`` per fold; the
  configuration tuned on all of a dataset is written to ``--tuned-dir``, by default the shipped
  presets ``experiments/configs/tuned/<label>.yaml``: pass a folder of your own to keep them),
  ``linear`` (reverie's weights by pairwise logistic regression, ``memlab.tune.crossfit``), and
  the learned models of ``memlab.tune.heldout``: ``reverie_plus`` (the spec's formula with issue
  21's additive terms, weights fitted on every dataset's training folds together: the preset
  ``reverie_plus`` held out), ``hgb`` (the pointwise classifier of ``memlab
  fit --model hgb``, fitted on this dataset's other folds), ``hgb_all`` (the same rows of every
  dataset's fold-i training questions together), ``ranker`` and ``ranker_all`` (LightGBM
  lambdarank over every raw signal and the gates, ``memlab.tune.rank``, per dataset / joint);
  ``ranker_portable`` (joint, without ``memlab.tune.rank.NOT_PORTABLE``: the ``learned``
  preset's columns);
* leave one dataset out: ``plus_lodo``, ``hgb_lodo``, ``ranker_lodo``, ``portable_lodo``, trained
  on every question of the other
  datasets and scored on this one;

so every learned figure is a held-out one. ``--learned-set KEY=VALUE`` (repeatable) replays the
learned methods' candidates and columns with those overrides of reverie's config (e.g.
``recall.session_context=true``, which the ``learned`` preset turns on); the other rows are the
presets as shipped. Each table row: the mean, its 95% bootstrap interval
over questions, and against the dataset's best reference (by ``--metric``) the paired difference,
its 95% interval and the paired randomisation p (``memlab.bench.significance``); the p against the
spec's defaults too. ``--ablate GROUP,...`` (``memlab.tune.rank.GROUPS`` or column names; ``all``)
reruns ``ranker_all`` k-fold with each group removed; the permutation importance of
``ranker_all`` (drop of held-out nDCG@10 when a column is shuffled in the model's input) is
printed per dataset.

``--transfer SRC`` / ``--joint``: the Optuna-tuned configuration of SRC on the other datasets, and
one study over all of them (issue 8's tables).

A ``--datasets`` entry is a label above or a canonical dataset folder (``card.json``,
``items.jsonl``, ``queries.jsonl``: your own labelled set). ``--set KEY=VALUE`` (repeatable)
overrides every compared preset and the embedder, e.g. ``embedding.backend=hashing`` for a
quick run of the script itself (tests/bench/test_quality_script.py does that on two small
subsets of memlab-lifelog).

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
from typing import Any, Mapping

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
BASELINES = ("cosine", "bm25", "hybrid_rrf")
REFERENCES = BASELINES
METRICS = ("ndcg@10", "recall@10", "recall@5", "mrr")
#: learned methods: name -> (kind, trained on every dataset together, columns dropped); held out
#: k-fold
LEARNED = {"reverie_plus": ("plus", True, ()), "hgb": ("hgb", False, ()),
           "hgb_all": ("hgb", True, ()), "ranker": ("lambdarank", False, ()),
           "ranker_all": ("lambdarank", True, ()),
           "ranker_portable": ("lambdarank", True, ("not_portable",))}
#: leave one dataset out: name -> (kind, columns dropped) (trained on every other dataset)
TRANSFER = {"plus_lodo": ("plus", ()), "hgb_lodo": ("hgb", ()), "ranker_lodo": ("lambdarank", ()),
            "portable_lodo": ("lambdarank", ("not_portable",))}


def _source(label: str, data: Path) -> tuple[str, str | None, dict[str, Any]]:
    """(registered name or canonical folder, native path or None, loader options) of a
    ``--datasets`` entry: a label of :data:`DATASETS` or a canonical dataset folder."""
    if label not in DATASETS:
        return str(Path(label).resolve()), None, {}
    name, rel, opts = DATASETS[label]
    return (name, str(data / rel) if rel else None,
            {k: (str(data / v) if k.endswith("_path") else v) for k, v in opts.items()})


def _load(label: str, data: Path):
    from memlab.bench.datasets import registry

    name, path, opts = _source(label, data)
    return registry.load(name, path=path, **opts)


def _presets(cache_dir: str, sets: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The compared presets, each with ``bench.cache_dir`` and ``sets`` (the ``--set``
    overrides, parsed)."""
    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    over = {"bench.cache_dir": cache_dir, **(sets or {})}
    return {p: load_config(resolve_preset(p)[1], overrides=over) for p in ("reverie", *BASELINES)}


def load_dev(label: str, args, embedder, log) -> dict[str, Any]:
    """One dataset's replays (feature cache: each replayed once), the presets' per-query frames
    and its folds by conversation."""
    from memlab.bench.run import replay_cached
    from memlab.tune.evaluate import per_query
    from memlab.tune.folds import conversation_folds

    t0 = time.perf_counter()
    ds = _load(label, args.data)
    cfgs = _presets(args.cache_dir, args.overrides)
    reps = {p: replay_cached(ds, c, embedder=embedder if c.recall.use_dense else None,
                             progress=not args.quiet) for p, c in cfgs.items()}
    t_replay = time.perf_counter() - t0
    frames = {p: per_query(reps[p], cfgs[p]) for p in ("reverie", *BASELINES)}
    learned_base = reps["reverie"], cfgs["reverie"]
    if args.learned_set:   # the learned methods' candidates and columns (e.g. session context)
        from memlab.config import parse_assignments

        lcfg = cfgs["reverie"].replace(**parse_assignments(args.learned_set,
                                                           what="--learned-set"))
        learned_base = replay_cached(ds, lcfg, embedder=embedder, progress=not args.quiet), lcfg
        t_replay = time.perf_counter() - t0
    base = frames["reverie"]
    k = min(args.folds, int(base["conversation_id"].nunique()))   # a fold holds conversations
    folds = conversation_folds(base["conversation_id"], k, seed=args.seed)
    log(f"{label}: {len(base)} questions, {base['conversation_id'].nunique()} conversations, "
        f"{k} folds; replays {t_replay:.1f} s")
    return {"ds": ds, "cfgs": cfgs, "reps": reps, "frames": frames, "folds": folds, "k": k,
            "learned_base": learned_base, "seconds": {"replays": round(t_replay, 1)}}


def tuned_methods(label: str, dev: dict[str, Any], args, embedder, log) -> dict[str, Any]:
    """Optuna (``--trials`` > 0) and the linear weights (crossfit), k-fold on ``dev``'s folds:
    adds their held-out frames to ``dev['frames']``; returns what the report keeps."""
    import memlab
    from memlab.tune.crossfit import crossfit
    from memlab.tune.evaluate import per_query

    cfgs, reps, frames, folds, k = (dev[x] for x in ("cfgs", "reps", "frames", "folds", "k"))
    base = frames["reverie"]
    out: dict[str, Any] = {}
    if args.trials > 0:
        t1 = time.perf_counter()
        out_dir = Path(args.out_dir) / "sweeps"
        name, path, opts = _source(label, args.data)
        res = memlab.sweep(dataset=name, path=path, options=opts,
                           space="reverie_score", preset="reverie", objective=args.metric,
                           trials=args.trials, sampler="tpe", folds=k, seed=args.seed,
                           overrides={"bench.cache_dir": args.cache_dir, **args.overrides},
                           out_dir=out_dir,
                           study=f"quality-{Path(label).name}-{args.metric}-t{args.trials}-k{k}",
                           progress=not args.quiet, embedder=embedder)
        held = []
        for f, info in zip(folds, res.folds["per_fold"]):
            if info["fold"] != f.index or info["test"] != len(f.test):
                raise RuntimeError(f"{label}: the study's folds differ from this script's")
            held.append(per_query(reps["reverie"], cfgs["reverie"].replace(**info["params"]))
                        .reindex(f.test))
        frames["optuna"] = pd.concat(held).reindex(base.index)
        ds = dev["ds"]
        tuned_dir = Path(args.tuned_dir)
        tuned_dir.mkdir(parents=True, exist_ok=True)
        _write_tuned(res.best_config.replace(**{"bench.cache_dir": ".cache/memlab"}),
                     tuned_dir / f"{Path(label).name}.yaml",
                     f"reverie tuned on all of {ds.card.name} {ds.card.version} ({len(base)} "
                     f"questions), {args.trials} TPE trials over "
                     f"experiments/sweeps/reverie_score.yaml, objective {args.metric}; its "
                     "held-out (k-fold) score is in benchmarks/quality.py's report")
        out.update(optuna_folds=res.folds["summary"],
                   tuned_params=dict((res.best or {}).get("params", {})))
        dev["seconds"]["optuna"] = round(time.perf_counter() - t1, 1)
    t2 = time.perf_counter()
    cf = crossfit(reps["reverie"], cfgs["reverie"], k=k, seed=args.seed, metric=args.metric,
                  hgb=False, importance=False)
    frames["linear"] = cf.per_query["linear"].reindex(base.index)
    out["linear_weights"] = cf.weights.mean(axis=1).round(5).to_dict()
    dev["seconds"]["linear"] = round(time.perf_counter() - t2, 1)
    return out


def _p(v: float) -> float | None:
    return None if v is None or np.isnan(v) else float(v)


def dataset_table(frames: dict[str, pd.DataFrame], order: list[str], args) -> dict[str, Any]:
    """Mean, 95% interval, and against the best reference (by ``args.metric``) the paired
    difference, its 95% interval and p (randomisation); p against the spec's defaults too."""
    from memlab.bench.significance import compare_presets
    from memlab.tune.heldout import interval

    refs = [r for r in REFERENCES if r in frames]
    best = max(refs, key=lambda r: frames[r][args.metric].mean())
    index = frames[order[0]].index
    aligned = {m: frames[m].reindex(index) for m in order}
    vs_best = compare_presets({best: aligned[best], **{m: aligned[m] for m in order
                               if m != best}}, metrics=list(METRICS),
                              resamples=args.resamples, seed=args.seed)
    vs_def = compare_presets({"reverie": aligned["reverie"], **{m: aligned[m] for m in order
                              if m != "reverie"}}, metrics=[args.metric],
                             resamples=args.resamples, seed=args.seed)
    rows = {}
    for m in order:
        a = aligned[m][args.metric].to_numpy()
        rows[m] = {"mean": {k: float(aligned[m][k].mean()) for k in METRICS},
                   "ci": interval(a, resamples=args.resamples, seed=args.seed),
                   "diff_best": float(vs_best.loc[(m, args.metric), "diff"]),
                   "ci_diff_best": (None if m == best else interval(
                       a, aligned[best][args.metric].to_numpy(), resamples=args.resamples,
                       seed=args.seed)),
                   "p_best": _p(vs_best.loc[(m, args.metric), "p"]),
                   "p_defaults": _p(vs_def.loc[(m, args.metric), "p"])}
    return {"best_reference": best, "questions": int(len(index)), "methods": rows}


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
        cfgs = _presets(args.cache_dir, args.overrides)
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
    cfg = _presets(args.cache_dir, args.overrides)["reverie"]
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


def learned_methods(devs: dict[str, Any], dev_info: dict[str, dict], args, log
                    ) -> dict[str, Any]:
    """The learned methods k-fold (:data:`LEARNED`) and leave one dataset out
    (:data:`TRANSFER`); the ablation (``--ablate``) and the joint ranker's permutation
    importance. Adds the frames to each dataset's ``frames``; returns what the report keeps."""
    from memlab.tune.heldout import Spec, kfold, leave_one_out, model_importance

    out: dict[str, Any] = {"seconds": {}}
    work = Path(args.out_dir) / "quality_models"
    for name, (kind, joint_, drop) in LEARNED.items():
        if kind == "hgb" and args.no_hgb:
            continue
        t = time.perf_counter()
        keep: dict[str, list] | None = {} if name == "ranker_all" and args.importance else None
        got = kfold(devs, Spec(kind, joint_, drop=drop), seed=args.seed, keep=keep,
                    workdir=work / name if keep is not None else None)
        for label, frame in got.items():
            dev_info[label]["frames"][name] = frame.reindex(dev_info[label]["frames"]
                                                            ["reverie"].index)
        out["seconds"][name] = round(time.perf_counter() - t, 1)
        log(f"{name}: k-fold {out['seconds'][name]} s")
        if keep is not None:
            t = time.perf_counter()
            out["importance"] = {}
            for label, folds in keep.items():
                imp = model_importance(devs[label], folds, metric=args.metric, seed=args.seed)
                summ = pd.DataFrame({"mean": imp.mean(axis=1), "sd": imp.std(axis=1)}
                                    ).sort_values("mean", ascending=False)
                out["importance"][label] = summ.round(5).reset_index(names="signal").to_dict(
                    "records")
            out["seconds"]["importance"] = round(time.perf_counter() - t, 1)
    if len(devs) > 1:
        out["lodo"] = {label: {} for label in devs}
        for name, (kind, drop) in TRANSFER.items():
            if kind == "hgb" and args.no_hgb:
                continue
            t = time.perf_counter()
            got = leave_one_out(devs, Spec(kind, True, drop=drop), seed=args.seed)
            for label, frame in got.items():
                dev_info[label]["lodo_frames"][name] = frame
            out["seconds"][name] = round(time.perf_counter() - t, 1)
            log(f"{name}: leave-one-dataset-out {out['seconds'][name]} s")
    if args.ablate:
        from memlab.tune.rank import GROUPS

        groups = list(GROUPS) if args.ablate == "all" else args.ablate.split(",")
        out["ablation"] = {}
        for g in groups:
            t = time.perf_counter()
            got = kfold(devs, Spec("lambdarank", True, drop=(g,)), seed=args.seed)
            out["ablation"][g] = {label: float(f[args.metric].mean()) for label, f in got.items()}
            log(f"ablation -{g}: {round(time.perf_counter() - t, 1)} s")
    return out


def print_tables(res: dict[str, Any], metric: str) -> None:
    def fmt_p(p):
        return "-" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001")

    for section, title in (("kfold", "k-fold by conversation"),
                           ("lodo", "leave one dataset out (trained on the others)")):
        for label, r in res.get("datasets", {}).items():
            t = r.get(section)
            if not t:
                continue
            print(f"\n{label} ({title}): {r['dataset']} {r['version']}, {t['questions']} "
                  f"questions, {r['conversations']} conversations, {r['folds']} folds; best "
                  f"reference {t['best_reference']}")
            rows = []
            for m, v in t["methods"].items():
                cd = v["ci_diff_best"]
                rows.append({"method": m, metric: v["mean"][metric],
                             "95% CI": f"{v['ci'][0]:.3f}-{v['ci'][1]:.3f}",
                             **{k: v["mean"][k] for k in METRICS if k != metric},
                             "diff best ref": v["diff_best"],
                             "diff 95% CI": "-" if cd is None else f"{cd[0]:+.3f}..{cd[1]:+.3f}",
                             "p best ref": fmt_p(v["p_best"]),
                             "p defaults": fmt_p(v["p_defaults"])})
            print(pd.DataFrame(rows).set_index("method").to_string(
                float_format=lambda x: f"{x:.3f}"))
    sets = res.get("datasets", {})
    if sets:
        print(f"\nsummary, {metric} (k-fold; lodo: trained on the other datasets)")
        rows = {}
        for label, r in sets.items():
            row = {m: v["mean"][metric] for m, v in r["kfold"]["methods"].items()}
            row.update({m: v["mean"][metric] for m, v in (r.get("lodo") or {}).get(
                "methods", {}).items() if m not in row})
            ours = {m: x for m, x in row.items() if m not in REFERENCES}
            best_ours = max(ours, key=ours.get)
            ref = r["kfold"]["best_reference"]
            row["best memlab - best ref"] = ours[best_ours] - row[ref]
            row["best memlab"] = best_ours
            rows[label] = row
        print(pd.DataFrame(rows).T.to_string(float_format=lambda x: f"{x:.3f}"))
    for label, imp in (res.get("importance") or {}).items():
        print(f"{label}: ranker_all permutation importance (drop of held-out {metric}): " +
              ", ".join(f"{i['signal']} {i['mean']:.3f}" for i in imp[:8]))
    if res.get("ablation"):
        print(f"\nablation: ranker_all k-fold {metric} with a column group removed "
              "(row 'none': all columns)")
        base = {label: r["kfold"]["methods"]["ranker_all"]["mean"][metric]
                for label, r in sets.items() if "ranker_all" in r["kfold"]["methods"]}
        table = {"none": base, **res["ablation"]}
        print(pd.DataFrame(table).T.to_string(float_format=lambda x: f"{x:.3f}"))
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
    ap.add_argument("--trials", type=int, default=0, help="Optuna trials per fold (0: no study)")
    ap.add_argument("--no-hgb", action="store_true", help="skip the HGB models")
    ap.add_argument("--no-importance", dest="importance", action="store_false")
    ap.add_argument("--ablate", default="", help="column groups (memlab.tune.rank.GROUPS) or "
                    "columns, comma-separated, each dropped from ranker_all in turn; 'all'")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--transfer", default=None, help="a dataset label: its tuned YAML on the others")
    ap.add_argument("--joint", action="store_true")
    ap.add_argument("--out-dir", default="results")
    ap.add_argument("--tuned-dir", default=str(ROOT / "experiments" / "configs" / "tuned"),
                    help="where --trials writes each dataset's tuned preset (default: the "
                         "shipped presets tuned/<label>, which the README's figures name)")
    ap.add_argument("--json", type=Path, default=Path("results/quality.json"))
    ap.add_argument("--report", type=Path, default=None, help="reprint a JSON written before")
    ap.add_argument("--learned-set", action="append", default=[], metavar="KEY=VALUE",
                    help="config overrides of the replay the learned methods read (their "
                         "candidates and columns), e.g. recall.session_context=true; the "
                         "presets' rows are unchanged")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config overrides of every compared preset and the embedder (e.g. "
                         "embedding.backend=hashing for a quick check of the script)")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.report:
        res = json.loads(args.report.read_text(encoding="utf-8"))
        print_tables(res, res.get("metric", args.metric))
        return 0
    from memlab.config import MemlabConfig
    from memlab.embed import make_embedder
    from memlab.tune.heldout import Dev

    labels = [d.strip() for d in args.datasets.split(",") if d.strip()]
    unknown = [d for d in labels if d not in DATASETS and not Path(d).is_dir()]
    if unknown:
        ap.error(f"unknown datasets {unknown}; known: {', '.join(DATASETS)}, or a canonical "
                 "dataset folder")
    from memlab.config import parse_assignments

    args.overrides = parse_assignments(args.set, what="--set")
    started = time.perf_counter()
    embedder = make_embedder(MemlabConfig().replace(**args.overrides))
    res: dict[str, Any] = {"metric": args.metric, "datasets": {},
                           "command": " ".join(["python", "benchmarks/quality.py",
                                                *(argv if argv is not None else sys.argv[1:])]),
                           "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                       "python": sys.version.split()[0],
                                       "load": os.getloadavg()},
                           "embedder": embedder.version,
                           "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.transfer or args.joint:
        if args.json.exists():
            res["datasets"] = json.loads(args.json.read_text(encoding="utf-8")).get("datasets", {})
        if args.transfer:
            src = ROOT / "experiments" / "configs" / "tuned" / f"{args.transfer}.yaml"
            res["transfer_source"] = args.transfer
            res["transfer"] = transfer(src, [d for d in labels if d != args.transfer], args,
                                       embedder)
        if args.joint:
            res["joint"] = joint(labels, args, embedder, log)
    else:
        info: dict[str, dict] = {}
        for label in labels:
            dev = load_dev(label, args, embedder, log)
            dev["extra"] = tuned_methods(label, dev, args, embedder, log)
            dev["lodo_frames"] = {}
            info[label] = dev
        devs = {label: Dev(*d["learned_base"], d["folds"], d["frames"]["reverie"].index)
                for label, d in info.items()}
        learned = learned_methods(devs, info, args, log)
        for label, d in info.items():
            frames = d["frames"]
            order = ["reverie"] + [m for m in ("optuna", "linear", *LEARNED) if m in frames] + \
                [r for r in REFERENCES]
            base = frames["reverie"]
            fold_means = {m: [float(frames[m].reindex(f.test)[args.metric].mean())
                              for f in d["folds"]] for m in order}
            kf = dataset_table(frames, order, args)
            for m in order:
                kf["methods"][m]["fold_sd"] = float(np.std(fold_means[m], ddof=1))
            entry = {"dataset": d["ds"].card.name, "version": d["ds"].card.version,
                     "questions": int(len(base)),
                     "conversations": int(base["conversation_id"].nunique()), "folds": d["k"],
                     "kfold": kf, "seconds": d["seconds"], **d["extra"]}
            if d["lodo_frames"]:
                lf = {"reverie": frames["reverie"], **d["lodo_frames"],
                      **{r: frames[r] for r in REFERENCES}}
                entry["lodo"] = dataset_table(lf, list(lf), args)
            res["datasets"][label] = entry
        res.update({k: v for k, v in learned.items() if k in ("importance", "ablation")})
        res["learned_seconds"] = learned["seconds"]
    res["wall_seconds"] = round(time.perf_counter() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=1, ensure_ascii=False, default=float),
                         encoding="utf-8")
    print_tables(res, args.metric)
    print(f"\nwrote {args.json}; wall time {res['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

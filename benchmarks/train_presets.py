#!/usr/bin/env python
"""Train the presets ``learned`` and ``reverie_plus`` (issue 21, item 2) on the development sets
together, from their cached features, and write what ships:

* ``memlab/data/models/learned.skops``: the LightGBM lambdarank ranker (:mod:`memlab.tune.rank`)
  over the raw signals and the gates as features, without those bound to one dataset's genre or
  language (``--drop``, default ``not_portable``: :data:`memlab.tune.rank.NOT_PORTABLE`; without
  them the ranker scores 0.03 lower within the sets and 0.01-0.12 higher on a set left out),
  fitted on every question of every dataset named, under the candidate config of
  ``experiments/configs/learned.yaml``; its manifest records the datasets (name, version,
  content hash, questions), the columns, the lightgbm and scikit-learn versions, the git commit
  and this command;
* ``experiments/configs/reverie_plus.yaml``: reverie's weights and the new terms' weights
  (:mod:`memlab.recall.plus`) fitted by pairwise logistic regression on the datasets' questions
  together (:func:`memlab.tune.fit.fit_linear`, the ``memlab fit`` model), written as the changes
  to the preset reverie with a comment saying on what they were fitted.

Run from the repository root (D = the public datasets' folder)::

    python benchmarks/train_presets.py --datasets lifelog,locomo,madial-zh,madial-en,lme-oracle \
        --data $D --cache-dir .cache/memlab [--folds 5] [--only learned|reverie_plus]

Seeded and deterministic (LightGBM deterministic, one thread, row-wise; the pair sampling
seeded): the same features give the same files. ``--folds K``: also print the k-fold held-out
nDCG@10 (folds by conversation, the models trained on the other folds of every dataset
together) of reverie, reverie_plus and learned, and the abstention of a learned floor (the query
features alone, leave one conversation out) beside the zscore floor's, per language.

The ``learned`` preset's abstention model (``memlab/data/models/learned_abstain.skops``, memlab's
one) is made by ``benchmarks/abstention.py`` (question types and off-topic rows, thresholds per
language): see ``experiments/configs/learned.yaml``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from quality import DATASETS, _load  # noqa: E402

MODELS = ROOT / "memlab" / "data" / "models"
#: the base of the reverie_plus fit: reverie's defaults, the plus scorer, its signals computed
#: and BM25 over the whole question, as the learned preset and hybrid_rrf read it
PLUS_BASE = {"fusion.scorer": "reverie_plus", "recall.session_context": True,
             "recall.query_term_cap": 4000}


def _configs(cache_dir: str):
    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    over = {"bench.cache_dir": cache_dir}
    learned = load_config(resolve_preset("learned")[1], overrides=over)
    plus = load_config(None, overrides={**over, **PLUS_BASE})
    return learned, plus


def _git_commit() -> str:
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _dataset_record(label: str, ds, rep) -> dict:
    q = rep.questions
    return {"label": label, "name": ds.card.name, "version": ds.card.version,
            "content_hash": ds.content_hash(), "questions": int(len(q)),
            "answerable": int(sum(len(e) > 0 for e in q["evidence"]))}


def train_learned(reps: dict, records: list[dict], cfg, args, env, command: str, log) -> dict:
    from memlab.recall.learned import save_model
    from memlab.tune.abstainfit import questions_frame
    from memlab.tune.rank import Part, fit_model

    import lightgbm
    import sklearn

    t0 = time.perf_counter()
    parts = [Part(label, rep, cfg) for label, rep in reps.items()]
    booster, feats, counts = fit_model(parts, seed=args.seed, threads=1, drop=args.drop)
    trained = {**counts, "seed": args.seed, "drop": list(args.drop), "command": command,
               "git_commit": _git_commit(),
               "lightgbm": lightgbm.__version__, "sklearn": sklearn.__version__,
               "seconds": round(time.perf_counter() - t0, 1)}
    out = save_model(booster, Path(args.out_dir) / "learned.skops", features=feats,
                     kind="lambdarank", trained=trained, config=cfg.to_flat(),
                     dataset={"parts": records}, environment=env)
    log(f"learned: {counts['groups_used']} questions, {counts['rows_used']} rows, "
        f"{len(feats)} columns, {counts['best_iteration']} trees -> {out}")
    frames = []
    for label, rep in reps.items():
        f = questions_frame(rep)
        if (~f["answerable"]).any():
            frames.append(f.assign(conversation=label + "::" + f["conversation"].astype(str)))
    frame = pd.concat(frames, ignore_index=True) if frames else None
    return {"ranker": str(out), "abstain_frame": frame}


def _joint_design(reps: dict, cfg, questions: dict | None = None):
    from memlab.tune.fit import joint_design

    return joint_design([(label, rep, None if questions is None else questions[label])
                         for label, rep in reps.items()], cfg)


def plus_yaml_text(fit, records: list[dict], command: str) -> str:
    """The changes to the preset reverie, with a header saying on what they were fitted."""
    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    base = load_config(resolve_preset("reverie")[1]).to_flat()
    new = fit.config.to_flat()
    changed = {k: v for k, v in new.items() if base.get(k) != v}
    sets = ", ".join(f"{r['name']} {r['version']} ({r['questions']} questions, "
                     f"{r['content_hash'][:12]})" for r in records)
    head = [
        "reverie_plus: reverie's formula (memlab.recall.score) plus issue 21's signals as",
        "additive terms (memlab.recall.plus: z-scored dense and BM25, the neighbours' and the",
        "session's evidence, the date window, the speaker named, the neighbours crossed with",
        "multi/how-many questions). Weights fitted by pairwise logistic regression (memlab fit's",
        f"linear model) on every question of: {sets}; together. BM25 reads the whole",
        "question (query_term_cap 4000, as the learned preset and hybrid_rrf do).",
        f"Made by: {command}",
        f"git commit {_git_commit()}. Fitted on these questions: its scores on them are not held",
        "out (benchmarks/train_presets.py --folds K prints held-out ones).",
        "The preset reverie with these changes:"]
    lines = []
    for line in head:
        lines.append("# " + line)
    nested: dict[str, dict] = {}
    for k, v in sorted(changed.items()):
        sec, _, name = k.partition(".")
        nested.setdefault(sec, {})[name] = list(v) if isinstance(v, tuple) else v
    import yaml

    return "\n".join(lines) + "\n" + yaml.safe_dump(nested, sort_keys=True, allow_unicode=True)


def train_plus(reps: dict, records: list[dict], cfg, args, command: str, log) -> dict:
    from memlab.tune.fit import fit_linear

    fit = fit_linear(_joint_design(reps, cfg), cfg, seed=args.seed)
    text = plus_yaml_text(fit, records, command)
    Path(args.plus_yaml).write_text(text, encoding="utf-8")
    log(f"reverie_plus: {fit.counts.get('questions')} questions, "
        f"{fit.counts.get('pairs')} pairs -> {args.plus_yaml}")
    for feat, note in fit.notes.items():
        log(f"  {feat}: {note}")
    return {"weights": fit.weights, "notes": fit.notes}


def held_out(reps: dict, learned_cfg, plus_cfg, args, log) -> dict:
    """k-fold by conversation, every model trained on the other folds of all datasets."""
    from memlab.tune.evaluate import per_query
    from memlab.tune.folds import conversation_folds
    from memlab.tune.heldout import Dev, Spec, kfold

    rank_cfg = learned_cfg.replace(**{"recall.floor_mode": "zscore"})   # the ranking alone
    base = {label: per_query(rep, plus_cfg.replace(**{"fusion.scorer": "reverie"}))
            for label, rep in reps.items()}
    folds = {label: conversation_folds(b["conversation_id"], min(args.folds,
             int(b["conversation_id"].nunique())), seed=args.seed) for label, b in base.items()}
    plus = kfold({label: Dev(rep, plus_cfg, folds[label], base[label].index)
                  for label, rep in reps.items()}, Spec("plus"), seed=args.seed)
    devs = {label: Dev(rep, rank_cfg, folds[label], base[label].index)
            for label, rep in reps.items()}
    ranked = kfold(devs, Spec("lambdarank", joint=True, drop=args.drop), seed=args.seed)
    out = {}
    for label in reps:
        row = {"reverie": base[label]["ndcg@10"].mean(),
               "reverie_plus": plus[label]["ndcg@10"].mean(),
               "learned": ranked[label]["ndcg@10"].mean(), "questions": len(base[label])}
        out[label] = row
        log(f"{label}: {len(folds[label])}-fold held-out nDCG@10 " +
            ", ".join(f"{m} {row[m]:.4f}" for m in ("reverie", "reverie_plus", "learned")))
    return out


def abstention_compare(reps: dict, frame: pd.DataFrame, cfg, log) -> dict:
    """The learned floor (leave one conversation out) beside the zscore floor (a question
    refused when no row passes it), per language, at each floor's own threshold."""
    from memlab.recall.features import column
    from memlab.recall.score import relevance_mask
    from memlab.tune.abstainfit import abstention_table, kfold, questions_frame

    rep_learned = kfold(frame, threshold=cfg.recall.abstain_threshold)
    z_frames, z_p = [], []
    zcfg = cfg.replace(**{"recall.floor_mode": "zscore"})
    for label, rep in reps.items():
        f = questions_frame(rep)
        if not (~f["answerable"]).any():
            continue
        table = rep.features.columns
        ok, _ = relevance_mask(table, zcfg)
        qid = column(table, "qid", np.int64)
        answered = np.zeros(len(f), bool)
        answered[np.unique(qid[np.asarray(ok, bool)])] = True
        z_frames.append(f)
        z_p.append(answered.astype(float))
    zt = abstention_table(pd.concat(z_frames, ignore_index=True), np.concatenate(z_p), 0.5)
    lt = rep_learned.table()
    log("abstention, learned floor (leave one conversation out):\n" + lt.round(3).to_string())
    log("abstention, zscore floor (relevance_z "
        f"{cfg.recall.relevance_z}):\n" + zt.round(3).to_string())
    return {"learned": lt.round(4).to_dict(orient="index"),
            "zscore": zt.round(4).to_dict(orient="index")}


def _portable_arg(arg: str) -> str:
    """``arg`` with an absolute path made relative to the repository, or reduced to ``.../name``
    outside it: what a shipped file records says nothing about the machine that made it."""
    head, eq, tail = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if not tail.startswith("/"):
        return arg
    p = Path(tail)
    try:
        short = str(p.resolve().relative_to(ROOT))
    except ValueError:
        short = ".../" + p.name
    return f"{head}{eq}{short}"


def recorded_command(argv: list[str]) -> str:
    """The command line recorded in the files this script writes (paths made portable)."""
    return "python benchmarks/train_presets.py " + " ".join(
        shlex.quote(_portable_arg(a)) for a in argv)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="lifelog,locomo,madial-zh,madial-en,lme-oracle",
                    help=f"comma-separated labels of benchmarks/quality.py: {', '.join(DATASETS)}")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "datasets")
    ap.add_argument("--cache-dir", default=".cache/memlab")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=("learned", "reverie_plus"), default=None)
    ap.add_argument("--out-dir", default=str(MODELS))
    ap.add_argument("--plus-yaml", default=str(ROOT / "experiments" / "configs" /
                                               "reverie_plus.yaml"))
    ap.add_argument("--folds", type=int, default=0, help="also print k-fold held-out figures")
    ap.add_argument("--drop", default="not_portable",
                    help="columns or groups the learned ranker leaves out (memlab.tune.rank."
                         "GROUPS, 'not_portable': NOT_PORTABLE, the default; '' for none)")
    ap.add_argument("--json", default=None, help="write the figures here")
    args = ap.parse_args(argv)
    args.drop = tuple(d.strip() for d in args.drop.split(",") if d.strip())
    labels = [s.strip() for s in args.datasets.split(",") if s.strip()]
    unknown = [s for s in labels if s not in DATASETS]
    if unknown:
        ap.error(f"unknown dataset {unknown[0]!r}; known: {', '.join(DATASETS)}")

    from memlab.bench.environment import environment
    from memlab.bench.run import replay_cached
    from memlab.embed import make_embedder

    def log(msg: str) -> None:
        print(msg, flush=True)

    command = recorded_command(argv if argv is not None else sys.argv[1:])
    t0 = time.perf_counter()
    learned_cfg, plus_cfg = _configs(args.cache_dir)
    embedder = make_embedder(learned_cfg)
    env = environment(embedder=embedder, threads=learned_cfg.embedding.threads)
    reps, records = {}, []
    for label in labels:
        ds = _load(label, args.data)
        reps[label] = replay_cached(ds, learned_cfg, embedder=embedder, progress=False)
        records.append(_dataset_record(label, ds, reps[label]))
        log(f"{label}: {records[-1]['questions']} questions ({time.perf_counter() - t0:.0f} s)")
    report: dict = {"datasets": records, "command": command}
    if args.only in (None, "learned"):
        got = train_learned(reps, records, learned_cfg, args, env, command, log)
        frame = got.pop("abstain_frame", None)
        report["learned"] = got
        if args.folds and frame is not None:
            report["abstention"] = abstention_compare(reps, frame, learned_cfg, log)
    if args.only in (None, "reverie_plus"):
        report["reverie_plus"] = train_plus(reps, records, plus_cfg, args, command, log)
    if args.folds:
        report["held_out"] = held_out(reps, learned_cfg, plus_cfg, args, log)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    log(f"done in {report['seconds']} s")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Log a sweep to MLflow: one parent run for the study, the best trials as child runs.

Parent run: params = the sweep's settings (dataset, preset, space, objective, sampler, ...);
metrics = the best and the default values (``best_<col>``, ``default_<col>``), with folds the
tuned-fold and held-out-fold means and sds, with a test dataset its best and default values;
artifacts = the trial table (CSV), the best config (YAML), the optimisation-history,
parameter-importance and best-config plots (PNG), the Pareto plot (several objectives) and the
study's JSON. Child runs (``top`` best finished trials, default 5): params = the trial's full flat
configuration (``MemlabConfig.to_flat()``, as ``memlab bench`` logs a run), metrics = its values,
tags = its trial number, the keys the space searched (``memlab.swept_keys``, and ``swept.<key>`` =
the trial's applied value of each) and, apart from those, the change from the preset
(``changed.<key>`` = ``"<preset value> -> <trial value>"`` for each key whose value differs, and
``memlab.changed_keys``); start and end are the trial's own. With a VRAM gate (``result.vram``) the parent run also gets its trace
and timeline (``vram/trace.jsonl``, ``vram/timeline.png``), its summary (``vram.*`` metrics), the
device tags and ``vram.scope``: the trace is the replay's (the trials rescore cached raw signals
and run no model). Runs go through :func:`memlab.bench.tracking.log_run` (batched, names
mapped, validated before anything is created).

Reruns. The parent run's key (``memlab.run_key``) is made from the sweep's outcome (its settings:
dataset hash, preset config digest, space, objective, sampler, seed, study; the finished trials, best
and default values, folds and test) and memlab's code; a child's from its parent's and its trial
number. Tracking a sweep whose key a finished run already holds logs nothing new: re-running a
notebook cell that continues a study with no trial left to run adds no run.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from memlab.bench.run import REPO_ROOT
from memlab.bench.environment import environment_tags
from memlab.bench.tracking import (find_run, log_run, provenance_tags, resolve_tracking_uri,
                                   run_key, source_digest)
from memlab.home import find_home
from memlab.tune import plots
from memlab.tune.report import SweepResult

__all__ = ["track_sweep", "sweep_key", "trial_tags", "tracked_line"]

#: the parent run's ``vram.scope`` tag
VRAM_SCOPE = ("replay and cache build only: the trials rescore cached raw signals and run no "
              "model")


def _flat_metrics(prefix: str, values: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}{k}": float(v) for k, v in values.items()}


def sweep_key(result: SweepResult, *, top: int, code: str) -> str:
    """The parent run's stable key: the sweep's outcome (:meth:`SweepResult.to_json` without
    where it ran and the files it wrote), ``top`` and memlab's code (``code``)."""
    outcome = {k: v for k, v in result.to_json().items() if k not in ("environment", "paths")}
    return run_key("sweep", outcome, top, code)


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value


def trial_tags(result: SweepResult, applied: dict[str, Any]) -> dict[str, str]:
    """A trial's marks: the searched keys and their applied values, and the change from the
    preset (see the module doc)."""
    base = result.base.to_flat()
    keys = list(result.space.keys)
    changed = [k for k in keys if applied.get(k, base[k]) != base[k]]
    return {"memlab.swept_keys": ",".join(keys),
            **{f"swept.{k}": _text(applied.get(k, base[k])) for k in keys},
            "memlab.changed_keys": ",".join(changed),
            **{f"changed.{k}": f"{_text(base[k])} -> {_text(applied[k])}" for k in changed}}


def _trial_times(trial) -> dict[str, float | None]:
    """An Optuna trial's start and end as unix seconds (None where unknown)."""
    def unix(t):
        return t.timestamp() if t is not None else None
    return {"start_time": unix(trial.datetime_start), "end_time": unix(trial.datetime_complete)}


def track_sweep(result: SweepResult, *, tracking_uri: str | None,
                experiment: str = "memlab-sweep", top: int = 5, started: float | None = None,
                ended: float | None = None) -> dict[str, object]:
    """Log ``result``; returns ``{"parent": run_id, "children": {trial number: run_id},
    "tracking_uri": uri, "logged": bool}`` (``logged`` False: the parent run was already
    there, see the module doc's "Reruns", and its existing runs are returned).

    ``started``, ``ended``: the sweep's own start and end (unix seconds), the parent run's in
    MLflow; default: the first trial's start and the last trial's end."""
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd(), home=find_home().root)
    code = source_digest()
    parent_key = sweep_key(result, top=top, code=code)
    trials = result.study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    spans = [_trial_times(t) for t in trials]
    if started is None:
        started = min((t["start_time"] for t in spans if t["start_time"] is not None),
                      default=None)
    if ended is None:
        ended = max((t["end_time"] for t in spans if t["end_time"] is not None),
                    default=time.time())
    existing = find_run(tracking_uri=uri, experiment=experiment, key=parent_key)
    if existing is not None:
        children = {int(row["number"]): find_run(
            tracking_uri=uri, experiment=experiment, key=run_key(parent_key, int(row["number"])),
            parent_run_id=existing) for _, row in result.top(top).iterrows()}
        if all(children.values()):
            return {"parent": existing, "children": children, "tracking_uri": uri,
                    "logged": False}
    s = result.settings
    tags = {"memlab.dataset.name": s["dataset"], "memlab.dataset.hash": s["dataset_hash"],
            "memlab.kind": "sweep", "memlab.study": result.study.study_name,
            "memlab.swept_keys": ",".join(result.space.keys),
            **provenance_tags(repo_dir=REPO_ROOT),
            **(environment_tags(result.environment) if result.environment else {})}
    metrics = {**_flat_metrics("default_", result.default)}
    if result.best is not None:
        metrics.update(_flat_metrics("best_", result.best["values"]))
    metrics["trials_finished"] = float((result.trials["state"] == "COMPLETE").sum())
    if result.folds:
        for part, ms in result.folds["summary"].items():
            metrics[f"folds_{part}_mean"] = ms["mean"]
            metrics[f"folds_{part}_sd"] = ms["sd"]
    if result.test:
        metrics.update(_flat_metrics("test_best_", result.test["best"]))
        metrics.update(_flat_metrics("test_default_", result.test["default"]))
    with tempfile.TemporaryDirectory(prefix="memlab-sweep-") as tmp:
        d = Path(tmp)
        vram_files: dict[str, Path] = {}
        if result.vram is not None:
            vram_files = result.vram.write(d / "vram")
            metrics.update(result.vram.metrics())
            tags = {**tags, **result.vram.tags(), "vram.scope": VRAM_SCOPE}
        result.trials.to_csv(d / "trials.csv", index=False)
        result.best_config.to_yaml(d / "best_config.yaml")
        (d / "sweep.json").write_text(json.dumps(result.to_json(), ensure_ascii=False,
                                                 indent=1, default=str), encoding="utf-8")
        figs = {"history.png": plots.history, "importance.png": plots.importance,
                "best_config.png": plots.best_config}
        if result.objective.multi:
            figs["pareto.png"] = plots.pareto
        for name, fn in figs.items():
            plots.save(fn(result), d / name)
        artifacts = {p.name: p for p in sorted(d.iterdir()) if p.is_file()} | vram_files
        params = {k: v for k, v in s.items()}
        parent = existing or log_run(
            experiment=experiment, run_name=f"sweep {result.study.study_name}", params=params,
            metrics=metrics, tags=tags, artifacts=artifacts, tracking_uri=uri,
            start_time=started, end_time=ended, run_key=parent_key)
        children: dict[int, str] = {}
        for _, row in result.top(top).iterrows():
            n = int(row["number"])
            key = run_key(parent_key, n)
            found = existing and find_run(tracking_uri=uri, experiment=experiment, key=key,
                                          parent_run_id=parent)
            if found:
                children[n] = found
                continue
            applied = result.space.apply(by_number[n].params)
            cfg = result.base.replace(**applied)
            cfg.to_yaml(d / f"trial_{n}.yaml")
            children[n] = log_run(
                experiment=experiment, run_name=f"{result.study.study_name} #{n}",
                params=cfg.to_flat(),
                metrics={c: float(row[c]) for c in result.objective.columns},
                tags={**tags, "memlab.kind": "sweep-trial", "memlab.trial": str(n),
                      **trial_tags(result, applied)},
                artifacts={"config.yaml": d / f"trial_{n}.yaml"}, tracking_uri=uri,
                parent_run_id=parent, run_key=key, **_trial_times(by_number[n]))
    return {"parent": parent, "children": children, "tracking_uri": uri,
            "logged": existing is None}


def tracked_line(runs: dict[str, Any], *, experiment: str) -> str:
    """What a sweep says after logging: the runs logged, or the runs a rerun found there."""
    n = len(runs["children"])
    if not runs["logged"]:
        return (f"MLflow: this sweep is already logged with the same outcome and code (parent run "
                f"{runs['parent']}, {n} child run(s), experiment {experiment!r}, "
                f"{runs['tracking_uri']}): not logged again")
    return (f"MLflow: parent run {runs['parent']} with {n} child run(s) in experiment "
            f"{experiment!r} ({runs['tracking_uri']})")

"""Log a sweep to MLflow: one parent run for the study, the best trials as child runs.

Parent run: params = the sweep's settings (dataset, preset, space, objective, sampler, ...);
metrics = the best and the default values (``best_<col>``, ``default_<col>``), with folds the
tuned-fold and held-out-fold means and sds, with a test dataset its best and default values;
artifacts = the trial table (CSV), the best config (YAML), the optimisation-history,
parameter-importance and best-config plots (PNG), the Pareto plot (several objectives) and the
study's JSON. Child runs (``top`` best finished trials, default 5): params = the trial's full flat
configuration (``MemlabConfig.to_flat()``, as ``memlab bench`` logs a run), metrics = its values,
tags = its trial number. With a VRAM gate (``result.vram``) the parent run also gets its trace
and timeline (``vram/trace.jsonl``, ``vram/timeline.png``), its summary (``vram.*`` metrics), the
device tags and ``vram.scope``: the trace is the replay's (the trials rescore cached raw signals
and run no model). Runs go through :func:`memlab.bench.tracking.log_run` (batched, names
mapped, validated before anything is created).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path

from memlab.bench.run import REPO_ROOT
from memlab.bench.environment import environment_tags
from memlab.bench.tracking import log_run, provenance_tags, resolve_tracking_uri
from memlab.tune import plots
from memlab.tune.report import SweepResult

__all__ = ["track_sweep"]

#: the parent run's ``vram.scope`` tag
VRAM_SCOPE = ("replay and cache build only: the trials rescore cached raw signals and run no "
              "model")


def _flat_metrics(prefix: str, values: dict[str, float]) -> dict[str, float]:
    return {f"{prefix}{k}": float(v) for k, v in values.items()}


def track_sweep(result: SweepResult, *, tracking_uri: str | None,
                experiment: str = "memlab-sweep", top: int = 5) -> dict[str, object]:
    """Log ``result``; returns ``{"parent": run_id, "children": {trial number: run_id},
    "tracking_uri": uri}``."""
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd())
    s = result.settings
    tags = {"memlab.dataset.name": s["dataset"], "memlab.dataset.hash": s["dataset_hash"],
            "memlab.kind": "sweep", "memlab.study": result.study.study_name,
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
        parent = log_run(experiment=experiment, run_name=f"sweep {result.study.study_name}",
                         params=params, metrics=metrics, tags=tags, artifacts=artifacts,
                         tracking_uri=uri)
        children: dict[int, str] = {}
        by_number = {t.number: t for t in result.study.get_trials(deepcopy=False)}
        for _, row in result.top(top).iterrows():
            n = int(row["number"])
            cfg = result.base.replace(**result.space.apply(by_number[n].params))
            cfg.to_yaml(d / f"trial_{n}.yaml")
            children[n] = log_run(
                experiment=experiment, run_name=f"{result.study.study_name} #{n}",
                params=cfg.to_flat(),
                metrics={c: float(row[c]) for c in result.objective.columns},
                tags={**tags, "memlab.kind": "sweep-trial", "memlab.trial": str(n)},
                artifacts={"config.yaml": d / f"trial_{n}.yaml"}, tracking_uri=uri,
                parent_run_id=parent)
    return {"parent": parent, "children": children, "tracking_uri": uri}

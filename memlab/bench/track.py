"""Log a benchmark outcome to MLflow: one run per preset (a parent run when several are compared)."""

from __future__ import annotations

import logging
import math
from pathlib import Path

from memlab.bench.artifacts import preset_folders
from memlab.bench.environment import environment_tags
from memlab.bench.run import REPO_ROOT, BenchOutcome
from memlab.bench.tracking import (dataset_tags, log_run, metrics_from_aggregate,
                                   provenance_tags, resolve_tracking_uri)


def track_outcome(out: BenchOutcome, *, run_dir: Path, tracking_uri: str | None,
                  experiment: str) -> dict[str, dict[str, str]]:
    """params = the flat config; metrics overall and per category (and session level, and
    abstention overall and per question language); tags =
    dataset name, version and content hash, memlab version, git commit, embedder, and the
    environment block as ``memlab.env.*`` (:mod:`memlab.bench.environment`); artifacts = the
    config YAML, per-query rankings, the recall@k curve and the per-category bars.

    Compared presets: every run but the first preset's also gets the paired test against the
    first (``out.significance``) as metrics ``p.<metric>`` and ``diff.<metric>`` (``p.ndcg@10``
    is logged as ``p.ndcg_at_10``) and the tag ``memlab.significance_baseline``.

    With a VRAM gate (``out.vram``), every run (the parent too) gets the gate's trace and
    timeline (artifacts ``vram/trace.jsonl``, ``vram/timeline.png``, written to
    ``run_dir/vram``), its summary as ``vram.*`` metrics and the device tags
    (``vram.simulated``, ``vram.device``): the replay the presets share ran through one gate."""
    logging.getLogger("mlflow").setLevel(logging.WARNING)  # no migration chatter on first use
    uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd())
    ds = out.dataset
    tags = {**dataset_tags(name=ds.card.name, version=ds.card.version,
                           content_hash=ds.content_hash()),
            **provenance_tags(repo_dir=REPO_ROOT), "memlab.embedder": out.embedder_version,
            **(environment_tags(out.environment) if out.environment else {})}
    timing_metrics = {f"time_{k}": float(v) for k, v in out.timings.items()}
    vram_files: dict[str, Path] = {}
    vram_metrics: dict[str, float] = {}
    if out.vram is not None:
        vram_files = out.vram.write(run_dir / "vram")
        vram_metrics = out.vram.metrics()
        tags.update(out.vram.tags())
    parent = None
    if len(out.results) > 1:
        parent = log_run(experiment=experiment, run_name=f"{ds.card.name}: compare",
                         params={"presets": ",".join(r.name for r in out.results)},
                         metrics={**timing_metrics, **vram_metrics},
                         tags={**tags, "memlab.kind": "compare"},
                         artifacts={p.name: p for p in sorted(run_dir.glob("*.png"))}
                         | {"report.json": run_dir / "report.json"} | vram_files,
                         tracking_uri=uri)
    ids: dict[str, dict[str, str]] = {}
    folders = preset_folders(r.name for r in out.results)
    for r in out.results:
        d = run_dir / folders[r.name]
        metrics = metrics_from_aggregate(r.aggregate)
        if r.session_aggregate is not None:
            metrics.update({f"session_{k}": v for k, v in
                            metrics_from_aggregate(r.session_aggregate).items()})
        metrics.update({f"ranked_{k}": float(v) for k, v in r.ranking_counts().items()})
        if r.abstention is not None:   # "abstention", "answered", "abstention/zh", ...; NaN: none
            metrics.update({k: v for k, v in metrics_from_aggregate(r.abstention).items()
                            if not math.isnan(v)})
        if parent is None:
            metrics.update(timing_metrics)
        metrics.update(vram_metrics)
        run_tags = {**tags, "memlab.preset": r.name}
        sig = out.significance
        if sig is not None and r.name != sig.attrs["baseline"]:   # vs the first preset
            for metric, row in sig.loc[r.name].iterrows():
                metrics[f"p.{metric}"] = float(row["p"])
                metrics[f"diff.{metric}"] = float(row["diff"])
            run_tags["memlab.significance_baseline"] = sig.attrs["baseline"]
        run_id = log_run(experiment=experiment, run_name=f"{ds.card.name}: {r.name}",
                         params=r.config.to_flat(), metrics=metrics, tags=run_tags,
                         artifacts={f.name: f for f in sorted(d.iterdir()) if f.is_file()}
                         | vram_files,
                         tracking_uri=uri, parent_run_id=parent)
        ids[r.name] = {"run_id": run_id, "tracking_uri": uri}
    return ids

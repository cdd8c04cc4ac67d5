"""Log a benchmark outcome to MLflow: one run per preset (a parent run when several are compared)."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from memlab.bench.artifacts import preset_folders, write_artifacts
from memlab.bench.environment import environment_tags
from memlab.bench.run import REPO_ROOT, BenchOutcome, PresetResult
from memlab.bench.tracking import (dataset_tags, find_run, log_run, metrics_from_aggregate,
                                   provenance_tags, resolve_tracking_uri, run_key, source_digest)
from memlab.config import describe
from memlab.home import find_home


def preset_key(out: BenchOutcome, r: PresetResult, *, code: str,
               dataset_hash: str | None = None) -> str:
    """The stable key of one preset's run: the dataset (name, version, content hash of the
    questions and items run), the preset's name and result-deciding config (every field but the
    runtime ones: a cache folder or a batch size changes no metric), the embedder and memlab's
    code (``code``: :func:`memlab.bench.tracking.source_digest`)."""
    ds = out.dataset
    flat = r.config.to_flat()
    config = {row["key"]: flat[row["key"]] for row in describe() if row["stage"] != "runtime"}
    return run_key("bench", ds.card.name, ds.card.version, dataset_hash or ds.content_hash(),
                   r.name, config, out.embedder_version, code)


def track_outcome(out: BenchOutcome, *, run_dir: Path, tracking_uri: str | None,
                  experiment: str, started: float | None = None, ended: float | None = None
                  ) -> dict[str, dict[str, Any]]:
    """Log ``out`` to MLflow; returns ``{preset: {"run_id", "tracking_uri", "logged"}}`` (and
    ``"parent"`` with the compare run's when several presets ran).

    Reruns. Each run carries a stable key (:func:`preset_key`; a compare's parent the keys of
    its presets, a compared preset its own and its parent's) as the tag ``memlab.run_key``. A run
    whose key a finished run of ``experiment`` already holds is not logged again (``logged``
    False, ``run_id`` the existing run's): re-running a notebook cell, or the same command, with
    the same config, data and code adds no run. A change of any of them is a new run.

    Times. ``started`` and ``ended`` (unix seconds) are the run's own, MLflow's start and end
    time; default: ended now, started ``out.timings["total"]`` seconds before.

    ``run_dir``: the run folder (:func:`memlab.bench.artifacts.write_artifacts`); written here
    first when it holds no ``report.json``.

    params = the flat config; metrics overall and per category (and session level, and
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
    uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd(), home=find_home().root)
    run_dir = Path(run_dir)
    if not (run_dir / "report.json").exists():
        write_artifacts(out, run_dir)
    if ended is None:
        ended = time.time()
    if started is None:
        started = ended - float(out.timings.get("total", 0.0))
    times = {"start_time": started, "end_time": ended}
    ds = out.dataset
    ds_hash = ds.content_hash()
    code = source_digest()
    keys = {r.name: preset_key(out, r, code=code, dataset_hash=ds_hash) for r in out.results}
    tags = {**dataset_tags(name=ds.card.name, version=ds.card.version, content_hash=ds_hash),
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
        parent_key = run_key("bench-compare", [keys[r.name] for r in out.results])
        keys = {name: run_key(k, parent_key) for name, k in keys.items()}
        parent = find_run(tracking_uri=uri, experiment=experiment, key=parent_key)
        if parent is None:
            parent = log_run(experiment=experiment, run_name=f"{ds.card.name}: compare",
                             params={"presets": ",".join(r.name for r in out.results)},
                             metrics={**timing_metrics, **vram_metrics},
                             tags={**tags, "memlab.kind": "compare"},
                             artifacts={p.name: p for p in sorted(run_dir.glob("*.png"))}
                             | {"report.json": run_dir / "report.json"} | vram_files,
                             tracking_uri=uri, run_key=parent_key, **times)
    ids: dict[str, dict[str, Any]] = {}
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
        run_id = find_run(tracking_uri=uri, experiment=experiment, key=keys[r.name],
                          parent_run_id=parent)
        logged = run_id is None
        if logged:
            run_id = log_run(experiment=experiment, run_name=f"{ds.card.name}: {r.name}",
                             params=r.config.to_flat(), metrics=metrics, tags=run_tags,
                             artifacts={f.name: f for f in sorted(d.iterdir()) if f.is_file()}
                             | vram_files,
                             tracking_uri=uri, parent_run_id=parent, run_key=keys[r.name],
                             **times)
        ids[r.name] = {"run_id": run_id, "tracking_uri": uri, "logged": logged}
        if parent is not None:
            ids[r.name]["parent"] = parent
    return ids


def tracked_line(ids: dict[str, dict[str, Any]], *, experiment: str) -> str:
    """What a bench says after logging: the runs logged, and those a rerun found already there."""
    first = next(iter(ids.values()))
    uri = first["tracking_uri"]
    new = [n for n, v in ids.items() if v["logged"]]
    old = [n for n, v in ids.items() if not v["logged"]]
    under = f" under compare run {first['parent']}" if "parent" in first else ""
    text = f"MLflow: {len(new)} run(s) logged{under} in experiment {experiment!r} ({uri})"
    if old:
        text += (f"; {len(old)} already there with the same config, data and code, not logged "
                 f"again ({', '.join(old)}: run {ids[old[0]]['run_id']}"
                 + (", ..." if len(old) > 1 else "") + ")")
    return text

"""``memlab bench``: run presets on a dataset, print a table, write JSON, log to MLflow."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, List, Optional

import typer

from memlab.bench.artifacts import preset_folders, run_folder, write_artifacts
from memlab.bench.presets import DEFAULT_COMPARE, build_presets, with_modes  # noqa: F401
from memlab.bench.run import check_metrics, format_table, run_bench
from memlab.cliutil import (run_overrides, cache_dir_option, config_option, dataset_option, experiment_option,
                            failing, json_out_option, limit_option, loader_option, loader_options,
                            no_track_option, no_vram_gate_option, path_option, quiet_option,
                            set_option, tracking_uri_option)
from memlab.errors import InvalidInput, MemlabError
from memlab.files import write_atomic
from memlab.home import find_home, under_home


def bench(
    dataset: str = dataset_option("A registered name (memlab datasets list) or a canonical "
                                  "folder."),
    path: Optional[str] = path_option(),
    option: Optional[List[str]] = loader_option("Dataset loader option key=value (e.g. "
                                                "noise=99, granularity=session)."),
    config: Optional[Path] = config_option("A YAML config (one run)."),
    set_: Optional[List[str]] = set_option("key=value config overrides (applied to every "
                                           "preset)."),
    compare: Optional[str] = typer.Option(None, "--compare", help="Comma-separated presets (or "
                                          f"YAML paths) run side by side, e.g. {DEFAULT_COMPARE}"),
    mode: Optional[str] = typer.Option(
        None, "--mode", help="How items are written (bench.write_mode): raw (add_many with the "
        "importance and layer policies, every item stored; the default) or writer (the write "
        "pipeline decides importance, gate and layer, as store_interaction does). "
        "'raw,writer' runs every preset both ways ('PRESET+writer')."),
    limit: Optional[int] = limit_option(),
    json_out: Optional[Path] = json_out_option(
        "Write the report as JSON, right after the table (before the optional artifacts; "
        "rewritten with their outcome)."),
    out_dir: Optional[Path] = typer.Option(
        None, "--out-dir", help="Per-query results and plots: a folder per run, in it "
        "one per preset (its name made a safe folder name: tuned/locomo -> tuned-locomo). "
        "Default: results/ under the memlab home (memlab where)."),
    tracking_uri: Optional[str] = tracking_uri_option("MLflow tracking URI (default "
                                                      "sqlite:///<memlab home>/mlflow.db: "
                                                      "memlab where)."),
    no_track: bool = no_track_option(),
    experiment: str = experiment_option("memlab-bench"),
    quiet: bool = quiet_option(),
    cache_dir: Optional[Path] = cache_dir_option(
        "Folder of the embedding and feature caches (bench.cache_dir; default .cache/memlab "
        "under the memlab home: memlab where). A "
        "second run with the same dataset, embedder and candidates/ingest config reads its raw "
        "signals from there: no replay."),
    lexical_only: bool = typer.Option(
        False, "--lexical-only", help="Rank with the lexical routes only: no embedder is loaded "
        "and every preset runs with recall.use_dense false. Without it an embedder that cannot "
        "load stops the run (unless no preset uses the dense route)."),
    lenient: bool = typer.Option(
        False, "--lenient", help="Drop and count the dataset's bad records (lines) instead of "
        "stopping at the first; each is listed with file:line and why (table and JSON)."),
    no_vram_gate: bool = no_vram_gate_option(
        "Run the embedder without the VRAM gate (vram.enabled false): no trace in the results "
        "folder or MLflow. Metrics are the same either way."),
    metric: Optional[List[str]] = typer.Option(
        None, "--metric", help="Metric(s) of the per-category tables, repeatable or a comma "
        "list, e.g. ndcg@10,mrr (default recall@10; cut-offs from bench.ks)."),
    n_jobs: int = typer.Option(
        1, "--n-jobs", "-j", min=1, help="Replay the dataset's conversations in J worker "
        "processes (each conversation is its own store; the metrics are those of -j 1). "
        "Finished conversations are kept beside the feature cache entry: a rerun after a "
        "killed worker replays only the others."),
    scheduler: Optional[str] = typer.Option(
        None, "--scheduler", help="Replay the conversations on a Dask cluster, e.g. "
        "tcp://host:8786 (the optional extra 'distributed'; -j is then unused)."),
    per_query: Optional[Path] = typer.Option(
        None, "--per-query", help="Write the presets question by question (.parquet or .csv): "
        "category, language, gold age, each preset's best gold rank and recall@bench.k, and "
        "win/tie/loss against the first preset (memlab.bench.compare.per_question)."),
) -> None:
    """Benchmark recall on a labelled dataset: recall@k, nDCG@k, MRR overall and per category.

    When the presets have run, the table is printed and the JSON report (--json) written first;
    then the optional artifacts: the run folder (--out-dir: CSV, plots, the VRAM trace) and the
    MLflow runs. One that cannot be written is named on stderr (file and reason) and listed in
    the JSON's artifact_errors (null while they are being written); the rest are still written
    and the exit code stays 0. A --json file that cannot be written: exit 1, after the artifacts.

    A run already in MLflow (the same config, data and code) is not logged again: the output
    says so and names it. memlab.bench(...) is this command in Python.
    """
    with failing():
        home = find_home()
        overrides = run_overrides(set_, cache_dir, no_vram_gate)
        presets = build_presets(presets=compare or None, config=config, overrides=overrides,
                                mode=mode)
        per_category = None
        if metric:
            per_category = check_metrics([m.strip() for ms in metric for m in ms.split(",")
                                          if m.strip()], [cfg for _, cfg in presets])
        uri = None
        if per_query is not None and per_query.suffix not in (".parquet", ".csv"):
            raise InvalidInput("--per-query", "a .parquet or .csv file name", str(per_query))
        if not no_track:          # a bad URI stops here, not after the run
            from memlab.bench.tracking import resolve_tracking_uri

            uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd(), home=home.root)
        out_dir = out_dir if out_dir is not None else home.results_dir
        typer.echo(home.header(cache_dir=under_home(presets[0][1].bench.cache_dir, home),
                               tracking_uri=uri, results=out_dir))
        started = time.time()
        out = run_bench(dataset=dataset, presets=presets, path=path,
                        dataset_options=loader_options(option), limit=limit,
                        progress=not quiet, lexical_only=lexical_only, lenient=lenient,
                        n_jobs=n_jobs, scheduler=scheduler)
        ended = time.time()
    typer.echo(format_table(out, per_category=per_category))
    run_dir = run_folder(out_dir, out.dataset.card.name)
    report = {**out.to_json(), "artifacts": str(run_dir), "artifact_errors": None,
              "artifact_folders": preset_folders(r.name for r in out.results)}
    report_ok = json_out is None or write_report(report, json_out)
    if json_out is not None and report_ok:
        typer.echo(f"wrote {json_out}")
    errors = write_artifacts(out, run_dir).errors
    if per_query is not None:
        errors += _write_per_query(out, per_query)
    if not no_track:
        from mlflow.exceptions import MlflowException

        from memlab.bench.track import track_outcome, tracked_line

        try:
            run_ids = track_outcome(out, run_dir=run_dir, tracking_uri=uri,
                                    experiment=experiment, started=started, ended=ended)
        except (OSError, MemlabError, MlflowException) as exc:
            errors.append({"path": f"MLflow runs ({uri})",
                           "error": f"{type(exc).__name__}: {exc}"})
        else:
            report["mlflow_runs"] = run_ids
            typer.echo("\n" + tracked_line(run_ids, experiment=experiment))
    for e in errors:
        typer.echo(f"artifact not written: {e['path']}: {e['error']}", err=True)
    report["artifact_errors"] = errors
    if json_out is not None and report_ok:
        report_ok = write_report(report, json_out)
    if not report_ok:
        raise typer.Exit(1)


def _write_per_query(out: BenchOutcome, path: Path) -> list[dict[str, str]]:
    """--per-query: the per-question frame, and a line per preset of its wins, ties and losses
    against the first; a file that cannot be written is an artifact error (returned)."""
    from memlab.bench.compare import per_question, write_per_question

    frame = per_question(out)
    base, metric = frame.attrs["baseline"], frame.attrs["metric"]
    typer.echo("")
    for r in out.results[1:]:
        n = frame[f"outcome:{r.name}"].value_counts()
        typer.echo(f"{r.name} vs {base}, {metric} per question: {n.get('win', 0)} wins, "
                   f"{n.get('tie', 0)} ties, {n.get('loss', 0)} losses")
    try:
        write_per_question(frame, path, where="--per-query")
    except (OSError, MemlabError) as exc:
        return [{"path": str(path), "error": f"{type(exc).__name__}: {exc}"}]
    typer.echo(f"wrote {path} ({len(frame)} questions)")
    return []


def write_report(report: dict[str, Any], path: Path) -> bool:
    """Write ``report`` as JSON to ``path`` whole or not at all; False (and one line on stderr
    naming the file and why) when it cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(report, ensure_ascii=False, indent=1))
    except OSError as exc:
        typer.echo(f"report not written: {path}: {type(exc).__name__}: {exc}", err=True)
        return False
    return True

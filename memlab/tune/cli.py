"""``memlab sweep``: a thin command over :func:`memlab.tune.sweep.sweep` (mounted by memlab.cli)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (loader_options, run_overrides, cache_dir_option, dataset_option, experiment_option, failing,
                            json_out_option, limit_option, loader_option, no_track_option,
                            no_vram_gate_option, path_option, quiet_option, set_option,
                            tracking_uri_option)


def sweep_cmd(
    dataset: str = dataset_option("A registered name (memlab datasets list) or a canonical "
                                  "folder."),
    path: Optional[str] = path_option(),
    option: Optional[List[str]] = loader_option("Dataset loader option key=value (e.g. "
                                                "granularity=session)."),
    preset: Optional[str] = typer.Option(None, "--preset", "-p", help="The preset to tune (name "
                                         "or YAML path; default: the space's preset)."),
    space: str = typer.Option(..., "--space", help="Search space: experiments/sweeps/NAME.yaml "
                              "or a shipped name (reverie, reverie_score, generative_agents, hybrid_rrf)."),
    sampler: str = typer.Option("auto", "--sampler", help="auto | grid | random | tpe | cmaes | "
                                "nsga2 (auto: tpe, nsga2 for several objectives)."),
    trials: int = typer.Option(50, "--trials", "-n", help="Run until the study holds N finished "
                               "trials (a resumed study runs only the rest)."),
    objective: str = typer.Option("ndcg@10", "--objective", help="Per-query column(s) to "
                                  "maximise; a leading minus minimises, e.g. ndcg@10,-prompt_chars "
                                  "(Pareto front)."),
    level: str = typer.Option("item", "--level", help="item | session (gold and rankings mapped "
                              "to sessions)."),
    macro: bool = typer.Option(False, "--macro-categories", help="Mean of the per-category means "
                               "(each category counts once)."),
    folds: Optional[int] = typer.Option(None, "--folds", help="K folds by conversation: tune on "
                                        "K-1, score the best on the held-out fold."),
    test_dataset: Optional[str] = typer.Option(None, "--test-dataset", help="Also score the best "
                                               "and the default config on this dataset."),
    test_path: Optional[str] = typer.Option(None, "--test-path", help="Where the test dataset's "
                                            "files are."),
    n_jobs: int = typer.Option(1, "--n-jobs", "-j", help="Worker processes on one study; the "
                               "replay that fills the feature cache (when it is not there yet) "
                               "also runs its conversations in J processes."),
    scheduler: Optional[str] = typer.Option(
        None, "--scheduler", help="Replay the conversations on a Dask cluster, e.g. "
        "tcp://host:8786 (the optional extra 'distributed'); trials still run here."),
    storage: Optional[str] = typer.Option(None, "--storage", help="Optuna storage: a journal file "
                                          "(default OUT_DIR/STUDY.journal) or an RDB URL "
                                          "(postgresql://..., sqlite:///...)."),
    study: Optional[str] = typer.Option(None, "--study", help="Study name (default from space, "
                                        "dataset, preset and objective); rerun to continue it."),
    seed: int = typer.Option(0, "--seed", help="Sampler and fold seed."),
    start_from_default: bool = typer.Option(
        True, "--start-from-default/--no-start-from-default", help="A new study's first trial "
        "is the preset's own configuration (when the space holds it; not with --sampler grid)."),
    limit: Optional[int] = limit_option(),
    set_: Optional[List[str]] = set_option("key=value overrides of the preset, e.g. "
                                           "embedding.backend=hashing."),
    cache_dir: Optional[Path] = cache_dir_option(),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Journal, best config YAML, "
                                           "trial table and plots (default results/sweeps under "
                                           "the memlab home: memlab where)."),
    json_out: Optional[Path] = json_out_option("Write the study as JSON (best, default, folds, "
                                               "test)."),
    top: int = typer.Option(5, "--top", help="Best trials shown and logged as child runs."),
    tracking_uri: Optional[str] = tracking_uri_option("MLflow tracking URI: sqlite:///path.db "
                                                      "or a server URL (default "
                                                      "sqlite:///<memlab home>/mlflow.db: "
                                                      "memlab where)."),
    no_track: bool = no_track_option(),
    experiment: str = experiment_option("memlab-sweep"),
    quiet: bool = quiet_option(),
    no_vram_gate: bool = no_vram_gate_option(
        "Replay without the VRAM gate (vram.enabled false): no trace on the parent run. Scores "
        "are the same either way."),
) -> None:
    """Tune a preset's weights on a labelled dataset (Optuna over cached raw signals).

    A sweep already in MLflow (the same outcome and code: a rerun that finds no trial left to
    run) is not logged again: the output says so. memlab.sweep(...) is this command in Python."""
    import time

    from memlab.home import find_home
    from memlab.tune.sweep import sweep, sweep_header

    with failing():
        home = find_home()
        overrides = run_overrides(set_, cache_dir, no_vram_gate)
        out_dir = out_dir if out_dir is not None else home.sweeps_dir
        uri = None
        if not no_track:          # a bad URI stops here, not after the sweep
            from memlab.bench.tracking import resolve_tracking_uri

            uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd(), home=home.root)
        writable_folder(out_dir, "--out-dir")   # before the sweep: its results are written after
        if json_out is not None:
            writable_folder(json_out.parent, "--json")
        typer.echo(sweep_header(home, overrides, tracking_uri=uri, out_dir=out_dir))
        started = time.time()
        result = sweep(dataset=dataset, path=path, dataset_options=loader_options(option),
                       preset=preset, space=space, sampler=sampler, trials=trials,
                       objective=objective, level=level, macro_categories=macro, folds=folds,
                       test_dataset=test_dataset, test_path=test_path, n_jobs=n_jobs,
                       scheduler=scheduler,
                       storage=storage, study=study, seed=seed, limit=limit, overrides=overrides,
                       out_dir=out_dir, progress=not quiet,
                       start_from_default=start_from_default)
        ended = time.time()
    typer.echo(result.format(top))
    paths = result.write(out_dir)
    typer.echo(f"\nbest config: {paths['best_config']} (memlab bench --config)")
    report = result.to_json()
    if not no_track:
        from memlab.tune.track import track_sweep

        from memlab.tune.track import tracked_line

        with failing():
            runs = track_sweep(result, tracking_uri=uri, experiment=experiment, top=top,
                               started=started, ended=ended)
        report["mlflow"] = {"parent": runs["parent"], "tracking_uri": runs["tracking_uri"],
                            "logged": runs["logged"],
                            "children": {str(k): v for k, v in runs["children"].items()}}
        typer.echo(tracked_line(runs, experiment=experiment))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, ensure_ascii=False, indent=1, default=str),
                            encoding="utf-8")
        typer.echo(f"wrote {json_out}")


def writable_folder(path: Path, option: str) -> None:
    """Make ``path`` (and its parents) and check that a file can be written in it; InvalidInput
    naming ``option``, the folder and the system's reason otherwise."""
    from memlab.errors import InvalidInput

    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise InvalidInput(option, f"cannot write into this folder: {exc.strerror or exc}",
                           str(path)) from None

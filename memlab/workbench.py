"""``memlab.sweep(...)``: the Python twin of ``memlab sweep``, for notebooks (and ``bench``, the
twin of ``memlab bench``, from :mod:`memlab.bench.workbench`).

Each runs what its command runs, with the same defaults, and logs to MLflow the same way
(:func:`memlab.bench.track.track_outcome`, :func:`memlab.tune.track.track_sweep`): the run's own
start and end times, a stable run key (a rerun with the same config, data and code logs nothing
new, and says so), caches, results and ``mlflow.db`` under the memlab home (:mod:`memlab.home`,
printed in the header). Tunables are keyword-only; every parameter is in the signature.

Imports are lazy: ``import memlab`` stays fast.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from memlab.bench.workbench import _overrides, _tracking, bench

if TYPE_CHECKING:
    from memlab.config import MemlabConfig
    from memlab.tune.report import SweepResult
    from memlab.tune.space import Space

__all__ = ["bench", "sweep"]


def sweep(dataset: str = "memlab-lifelog", path: str | Path | None = None, *,
          space: str | Path | Space,
          preset: str | None = None,
          objective: str = "ndcg@10",
          trials: int = 50,
          sampler: str = "auto",
          level: str = "item",
          macro_categories: bool = False,
          folds: int | None = None,
          test_dataset: str | None = None,
          test_path: str | None = None,
          n_jobs: int = 1,
          scheduler: str | None = None,
          storage: str | Path | None = None,
          study: str | None = None,
          seed: int | None = 0,
          start_from_default: bool = True,
          options: Mapping[str, Any] | None = None,
          limit: int | None = None,
          overrides: Mapping[str, Any] | None = None,
          cache_dir: str | Path | None = None,
          vram_gate: bool = True,
          out_dir: str | Path | None = None,
          top: int = 5,
          track: bool = True,
          tracking_uri: str | None = None,
          experiment: str = "memlab-sweep",
          progress: bool = True,
          verbose: bool = True,
          embedder: Any = None) -> SweepResult:
    """Tune a preset's weights on a labelled dataset (Optuna over cached raw signals):
    ``memlab sweep`` in Python.

    Args:
        dataset, path: as :func:`memlab.bench`.
        space: the search space: ``experiments/sweeps/NAME.yaml``, a shipped name (``reverie``,
            ``reverie_score``, ``generative_agents``, ``hybrid_rrf``) or a
            :class:`~memlab.tune.space.Space`.
        preset: the preset tuned (name or YAML path; default: the space's).
        objective: per-query column(s) maximised; a leading minus minimises
            (``"ndcg@10,-prompt_chars"``: a Pareto front).
        trials: run until the study holds this many finished trials (a rerun continues it).
        sampler: ``auto``, ``grid``, ``random``, ``tpe``, ``cmaes`` or ``nsga2``.
        level: ``item`` or ``session``.
        macro_categories: the mean of the per-category means.
        folds: K folds by conversation: tune on K-1, score the best on the held-out fold.
        test_dataset, test_path: also score the best and the default config on this dataset.
        n_jobs: worker processes on one study; the replay that fills the feature cache also
            runs its conversations in this many processes.
        scheduler: a Dask scheduler address (``tcp://host:8786``) that replays the
            conversations instead (the optional extra ``distributed``).
        storage: Optuna storage (default ``<out_dir>/<study>.journal``) or an RDB URL.
        study: the study's name (default from space, dataset, preset and objective).
        seed: sampler and fold seed.
        start_from_default: a new study's first trial is the preset's own configuration.
        options, limit, overrides, cache_dir, vram_gate: as :func:`memlab.bench`.
        out_dir: journal, best config YAML, trial table and plots (default ``results/sweeps``
            under the memlab home).
        top: best trials shown and logged as child runs.
        track, tracking_uri, experiment: MLflow, as ``memlab sweep`` logs (default experiment
            ``memlab-sweep``): a parent run and the ``top`` trials as child runs marking the
            swept keys (tags ``swept.<key>``) and the change from the preset
            (``changed.<key>``).
        progress: progress bars. verbose: print the header, the table and the MLflow line.
        embedder: an embedder object instead of the preset's (``n_jobs=1`` only).

    Returns the :class:`~memlab.tune.report.SweepResult`: ``.to_frame()`` (one row per trial),
    ``.study``, ``.best``, ``.default``, ``.best_config``, ``.folds``, ``.test``, ``.paths`` and
    ``.mlflow`` (``{"parent", "children", "tracking_uri", "logged"}``; ``logged`` False: this
    outcome was already logged, that run is named instead of a new one).
    """
    from memlab.home import find_home
    from memlab.tune.sweep import sweep as run_sweep, sweep_header

    home = find_home()
    over = _overrides(overrides, cache_dir, vram_gate)
    folder = Path(out_dir).expanduser().absolute() if out_dir is not None else home.sweeps_dir
    uri = _tracking(track, tracking_uri, home)
    if verbose:
        print(sweep_header(home, over, tracking_uri=uri, out_dir=folder))
    started = time.time()
    result = run_sweep(dataset=dataset, space=space, preset=preset, objective=objective,
                       trials=trials, sampler=sampler, level=level,
                       macro_categories=macro_categories, folds=folds, n_jobs=n_jobs,
                       storage=storage, study=study, seed=seed,
                       path=None if path is None else str(path), dataset_options=options,
                       limit=limit, overrides=over, test_dataset=test_dataset,
                       test_path=test_path, out_dir=folder, progress=progress,
                       start_from_default=start_from_default, embedder=embedder,
                       scheduler=scheduler)
    ended = time.time()
    if verbose:
        print(result.format(top))
    result.write(folder)
    if uri is not None:
        from memlab.tune.track import track_sweep, tracked_line

        result.mlflow = track_sweep(result, tracking_uri=uri, experiment=experiment, top=top,
                                    started=started, ended=ended)
        if verbose:
            print(tracked_line(result.mlflow, experiment=experiment))
    return result

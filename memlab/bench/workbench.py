"""``memlab.bench(...)``: the Python twin of ``memlab bench``, for notebooks (``memlab.bench`` is a
package you can call: :mod:`memlab.bench`).

It runs what the command runs, with the same defaults, and logs to MLflow the same way
(:func:`memlab.bench.track.track_outcome`): the run's own start and end times, a stable run key
(a rerun with the same config, data and code logs nothing new, and says so), caches, results and
``mlflow.db`` under the memlab home (:mod:`memlab.home`, printed in the header). Tunables are
keyword-only; every parameter is in the signature. ``memlab.sweep(...)`` is in
:mod:`memlab.workbench` (it needs memlab.tune, above this package).

Imports are lazy: ``import memlab`` stays fast.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    from memlab.bench.run import BenchOutcome
    from memlab.config import MemlabConfig

__all__ = ["bench"]

log = logging.getLogger("memlab")


def _overrides(overrides: Mapping[str, Any] | None, cache_dir: str | Path | None,
               vram_gate: bool) -> dict[str, Any]:
    """``overrides`` with ``cache_dir`` (absolute against the working folder, as a path a user
    types means) and ``vram_gate`` False as config keys: what ``--set``, ``--cache-dir`` and
    ``--no-vram-gate`` give on the command line."""
    from memlab.errors import InvalidInput

    if overrides is not None and not isinstance(overrides, Mapping):
        raise InvalidInput("overrides", "a mapping of config keys to values, e.g. "
                           "{'fusion.relevance': 0.5}", type(overrides).__name__)
    out = dict(overrides or {})
    if cache_dir is not None:
        out["bench.cache_dir"] = str(Path(cache_dir).expanduser().absolute())
    if not isinstance(vram_gate, bool):
        raise InvalidInput("vram_gate", "must be True or False", vram_gate)
    if not vram_gate:
        out["vram.enabled"] = False
    return out


def _tracking(track: bool, tracking_uri: str | None, home) -> str | None:
    """The resolved tracking URI (None: not tracking); a bad one stops before the run."""
    from memlab.bench.tracking import resolve_tracking_uri
    from memlab.errors import InvalidInput

    if not isinstance(track, bool):
        raise InvalidInput("track", "must be True or False", track)
    if not track:
        return None
    return resolve_tracking_uri(tracking_uri, workdir=Path.cwd(), home=home.root)


def bench(dataset: str = "memlab-lifelog", path: str | Path | None = None, *,
          presets: str | Sequence[str] | Mapping[str, Any] | None = None,
          config: MemlabConfig | str | Path | None = None,
          overrides: Mapping[str, Any] | None = None,
          mode: str | Sequence[str] | None = None,
          options: Mapping[str, Any] | None = None,
          limit: int | None = None,
          metric: str | Sequence[str] | None = None,
          cache_dir: str | Path | None = None,
          lexical_only: bool = False,
          lenient: bool = False,
          n_jobs: int = 1,
          scheduler: str | None = None,
          vram_gate: bool = True,
          out_dir: str | Path | None = None,
          track: bool = True,
          tracking_uri: str | None = None,
          experiment: str = "memlab-bench",
          progress: bool = True,
          verbose: bool = True,
          embedder: Any = None) -> BenchOutcome:
    """Benchmark recall on a labelled dataset: ``memlab bench`` in Python.

    Args:
        dataset: a registered name (``memlab datasets list``) or a canonical folder.
        path: where the named dataset's files are.
        presets: presets run side by side (``--compare``): names or YAML paths
            (``"reverie,cosine"`` or a list), or ``{name: MemlabConfig or YAML path}``.
        config: one config instead (``--config``): a YAML path or a MemlabConfig. Neither: the
            default config, named ``reverie``.
        overrides: config values applied to every preset (``--set``), e.g.
            ``{"embedding.backend": "hashing"}``.
        mode: write mode(s) (``--mode``): ``"raw"``, ``"writer"`` or ``"raw,writer"``.
        options: the dataset loader's options (``--option``), e.g. ``{"granularity": "session"}``.
        limit: only the first ``limit`` questions.
        metric: the metric(s) of the printed per-category tables (default ``recall@10``).
        cache_dir: the embedding and feature caches (``bench.cache_dir``; default
            ``.cache/memlab`` under the memlab home). A relative path is against the working
            folder.
        lexical_only: rank with the lexical routes only; no embedder is loaded.
        lenient: drop and list the dataset's bad records instead of stopping at the first.
        n_jobs: replay the conversations in this many worker processes (``--n-jobs``; the
            metrics are those of 1).
        scheduler: replay them on this Dask cluster instead (``--scheduler``, e.g.
            ``tcp://host:8786``; the optional extra ``distributed``).
        vram_gate: run the embedder through the VRAM gate (False: ``vram.enabled`` false).
        out_dir: where the run folder goes (default ``results/`` under the memlab home).
        track: log to MLflow (one run per preset, a parent run when several), as the command
            does unless ``--no-track``.
        tracking_uri: MLflow's tracking URI (default ``sqlite:///<memlab home>/mlflow.db``).
        experiment: the MLflow experiment.
        progress: progress bars.
        verbose: print the header (the memlab home), the table and where things went.
        embedder: an embedder object instead of the one the config names.

    Returns the :class:`~memlab.bench.run.BenchOutcome`: ``.to_frame()`` (one row per preset
    and question), ``.results`` (per preset: ``per_query``, ``aggregate``, ``rankings``),
    ``.significance``, ``.run_dir``, ``.artifact_errors`` and ``.mlflow_runs`` (``{preset:
    {"run_id", "tracking_uri", "logged"}}``; ``logged`` False: the same config, data and code
    were already logged, and that run is named instead of a new one).
    """
    from memlab.bench.artifacts import run_folder, write_artifacts
    from memlab.bench.presets import build_presets, split_names
    from memlab.bench.run import check_metrics, format_table, run_bench
    from memlab.home import find_home, under_home

    home = find_home()
    cfgs = build_presets(presets=presets, config=config,
                         overrides=_overrides(overrides, cache_dir, vram_gate), mode=mode)
    per_category = check_metrics(split_names(metric, field="metric"),
                                 [c for _, c in cfgs]) if metric is not None else None
    uri = _tracking(track, tracking_uri, home)
    folder = Path(out_dir).expanduser().absolute() if out_dir is not None else home.results_dir
    if verbose:
        print(home.header(cache_dir=under_home(cfgs[0][1].bench.cache_dir, home),
                          tracking_uri=uri, results=folder))
    started = time.time()
    out = run_bench(dataset=dataset, presets=cfgs, path=None if path is None else str(path),
                    dataset_options=options, limit=limit, progress=progress, embedder=embedder,
                    lexical_only=lexical_only, lenient=lenient, n_jobs=n_jobs,
                    scheduler=scheduler)
    ended = time.time()
    if verbose:
        print(format_table(out, per_category=per_category))
    out.run_dir = run_folder(folder, out.dataset.card.name)
    errors = write_artifacts(out, out.run_dir).errors
    if uri is not None:
        errors += _track_bench(out, uri=uri, experiment=experiment, started=started,
                               ended=ended, verbose=verbose)
    for e in errors:
        log.warning("memlab.bench: not written: %s: %s", e["path"], e["error"])
    out.artifact_errors = errors
    if verbose:
        print(f"run folder: {out.run_dir}")
    return out


def _track_bench(out, *, uri: str, experiment: str, started: float, ended: float,
                 verbose: bool) -> list[dict[str, str]]:
    """Log ``out`` as ``memlab bench`` does; what could not be logged, as an artifact error."""
    from mlflow.exceptions import MlflowException

    from memlab.bench.track import track_outcome, tracked_line
    from memlab.errors import MemlabError

    try:
        out.mlflow_runs = track_outcome(out, run_dir=out.run_dir, tracking_uri=uri,
                                        experiment=experiment, started=started, ended=ended)
    except (OSError, MemlabError, MlflowException) as exc:
        return [{"path": f"MLflow runs ({uri})", "error": f"{type(exc).__name__}: {exc}"}]
    if verbose:
        print(tracked_line(out.mlflow_runs, experiment=experiment))
    return []

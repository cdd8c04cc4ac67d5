"""``memlab.sweep(...)`` and ``memlab sweep``: search a space of configurations of one preset on a
labelled dataset, scoring each from cached raw signals (issue 8, item 3).

One dataset is loaded once; the preset's default configuration is scored first (and its replay
written to the feature cache, which every worker then reads). Trials run in this process
(``n_jobs=1``) or in ``n_jobs`` worker processes (spawn) on one study (:mod:`memlab.tune.study`).
With ``folds=K`` each fold gets its own study (``<study>.fold<i>``) tuned on the other folds'
questions and scored on its own (:mod:`memlab.tune.folds`); ``test_dataset`` scores the best and
the default configuration on another dataset.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing as mp
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from memlab.bench.datasets import registry
from memlab.bench.datasets.canonical import Dataset
from memlab.bench.environment import environment
from memlab.bench.run import resolve_preset
from memlab.config import MemlabConfig, describe, load_config
from memlab.errors import DatasetError, InvalidInput, MemlabError
from memlab.tune import reference
from memlab.tune.objective import Evaluator, Objective
from memlab.tune.report import SweepResult, best_trial, summarise_folds
from memlab.tune.space import Space, resolve_space
from memlab.tune.storage import check_storage
from memlab.tune.study import (Budget, TrialLoop, check_settings, enqueue_default, fail_orphans,
                               make_sampler, n_complete, open_storage, open_study,
                               resolve_sampler, run_trials, sampler_seed)
from memlab.tune.workers import exit_now, watch_parent

__all__ = ["sweep", "SweepSpec", "sweep_header"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepSpec:
    """Everything a worker process needs to rebuild the sweep (picklable)."""

    dataset: str
    path: str | None
    dataset_options: Mapping[str, Any]
    limit: int | None
    preset: str
    preset_path: str
    overrides: Mapping[str, Any]
    space: Space
    objective: str
    level: str
    macro: bool
    sampler: str
    seed: int | None
    storage: str
    study: str
    start_from_default: bool = True

    def base_config(self) -> MemlabConfig:
        return load_config(self.preset_path, overrides=dict(self.overrides))

    def load(self) -> Dataset:
        """The dataset (its first ``limit`` questions); DatasetError when it leaves no question
        with gold evidence to score."""
        ds = registry.load(self.dataset, path=self.path, **dict(self.dataset_options))
        loaded = len(ds.questions)
        if self.limit is not None:
            ds = ds.subset(limit_questions=self.limit)
        if not any(q.evidence for q in ds.questions):
            why = (f"--limit {self.limit} leaves no question of {loaded}"
                   if loaded and not ds.questions else
                   "has no question with gold evidence: nothing to tune on")
            raise DatasetError(ds.report.questions_file or self.dataset, why)
        return ds

    def settings(self, ds: Dataset) -> dict[str, Any]:
        """What a study is bound to: a rerun with other settings needs another study name."""
        return {"dataset": ds.card.name, "dataset_hash": ds.content_hash(), "preset": self.preset,
                "base_config": _result_digest(self.base_config()), "space": self.space.name,
                "space_digest": self.space.digest(), "objective": self.objective,
                "level": self.level, "macro_categories": self.macro,
                "sampler": resolve_sampler(self.sampler, Objective.parse(self.objective)),
                "seed": self.seed}

    def study_settings(self, ds: Dataset, questions: list[str] | None) -> dict[str, Any]:
        """:meth:`settings` and the questions a study tunes on (a fold's; None: all)."""
        qs = "all" if questions is None else hashlib.sha256(
            "\n".join(sorted(questions)).encode()).hexdigest()[:12]
        return {**self.settings(ds), "questions": qs}


def _result_digest(cfg: MemlabConfig) -> str:
    """A hash of the fields that can change a score (every stage but runtime: a cache folder or
    a batch size does not bind a study). Render-stage fields (the prompt block's item cap and
    labels) change no score either, but stay in: leaving them out would change the hash of every
    study made before that stage existed, and a resumed study would be refused."""
    flat = cfg.to_flat()
    keep = {r["key"]: flat[r["key"]] for r in describe() if r["stage"] != "runtime"}
    blob = json.dumps(keep, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def sweep_header(home, overrides: Mapping[str, Any], *, tracking_uri: str | None,
                 out_dir: str | Path) -> str:
    """The memlab home line a sweep prints first (:meth:`memlab.home.Home.header`): its caches
    (the ``bench.cache_dir`` of the overrides, else the default), its results and MLflow."""
    from memlab.home import under_home

    cache = overrides.get("bench.cache_dir") or MemlabConfig().bench.cache_dir
    return home.header(cache_dir=under_home(cache, home), tracking_uri=tracking_uri,
                       results=Path(out_dir))


def _embedder(cfg: MemlabConfig):
    if not cfg.recall.use_dense:
        return None
    from memlab.embed import make_embedder

    return make_embedder(cfg)


def _safe(text: str) -> str:
    return re.sub(r"[^\w.@-]+", "_", text).strip("_") or "study"


def _loop(spec: SweepSpec, ds: Dataset, evaluator: Evaluator, name: str,
          questions: list[str] | None, worker: int, parallel: bool, stream: int = 0
          ) -> TrialLoop:
    """The trial loop of study ``name``; ``stream``: 0 for the sweep's own study, fold ``i``'s
    is ``i + 1``, so that each fold's sampler draws its own configurations (with one seed for
    all, folds with few trials tried the same ones)."""
    objective = evaluator.objective
    storage = open_storage(spec.storage)
    settings = spec.study_settings(ds, questions)
    first = open_study(storage, name, objective, settings)
    sampler = make_sampler(spec.sampler, objective=objective, space=spec.space,
                           seed=sampler_seed(spec.seed, worker, len(first.trials), stream),
                           parallel=parallel)
    study = open_study(storage, name, objective, settings, sampler=sampler)
    study.memlab_created = first.memlab_created
    return TrialLoop(study, spec.base_config(), spec.space, evaluator, questions)


def _worker(spec: SweepSpec, name: str, questions: list[str] | None, worker: int,
            budget_value, stream: int = 0) -> None:
    """A spawned worker process: rebuild the evaluator (the replay comes from the feature
    cache) and run trials until the shared budget is spent, or until the parent process dies
    (:mod:`memlab.tune.workers`: the running trial is finished, no other started)."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    stop = threading.Event()
    watch_parent(stop)
    reference.silence()         # the parent compared the fast paths' references and warned
    ds = spec.load()
    base = spec.base_config()
    evaluator = Evaluator(ds, Objective.parse(spec.objective), embedder=_embedder(base),
                          level=spec.level, macro=spec.macro)
    run_trials(_loop(spec, ds, evaluator, name, questions, worker, True, stream),
               Budget(budget_value, stop=stop))
    if stop.is_set():
        exit_now(0)             # orphaned: the trial is finished; no shutdown (see workers)


def _run_study(spec: SweepSpec, ds: Dataset, evaluator: Evaluator, name: str, trials: int,
               n_jobs: int, questions: list[str] | None, progress: bool, stream: int = 0):
    """Run study ``name`` until it holds ``trials`` finished trials; return it (``stream``: as
    :func:`_loop`)."""
    ctx = mp.get_context("spawn")
    loop = _loop(spec, ds, evaluator, name, questions, 0, n_jobs > 1, stream)
    fail_orphans(loop.study)
    if spec.start_from_default and spec.sampler != "grid":
        enqueue_default(loop.study, spec.space, loop.base, created=loop.study.memlab_created)
    todo = trials
    if spec.sampler == "grid":
        size = spec.space.check_grid()   # an exact int; over grid_max refused (make_sampler)
        if trials > size:
            log.warning("grid of %d points: %d trials asked, %d run", size, trials, size)
            todo = size
    todo = max(0, todo - n_complete(loop.study))
    budget = Budget(ctx.Value("i", todo))
    bar = _bar(loop.study, trials, evaluator.objective, progress, name)
    if n_jobs <= 1:
        run_trials(loop, budget, on_done=bar.tick if bar else None)
    else:
        reference.changed()     # warns here, once, if the fast paths' references changed
        procs = [ctx.Process(target=_worker,
                             args=(spec, name, questions, w, budget.value, stream),
                             name=f"memlab-sweep-{w}") for w in range(1, n_jobs + 1)]
        for p in procs:
            p.start()
        for p in procs:
            while p.is_alive():
                p.join(timeout=1.0)
                if bar:
                    bar.poll()
        bad = [p.exitcode for p in procs if p.exitcode != 0]
        if bad:
            raise MemlabError(f"{len(bad)} sweep worker process(es) of study {name!r} failed "
                              f"(exit codes {bad}); their errors are above. The study keeps "
                              "every finished trial: rerun to continue it")
    if bar:
        bar.close()
    return loop.study


class _Bar:
    """tqdm over finished trials with the best value so far."""

    def __init__(self, study, total: int, objective: Objective, desc: str) -> None:
        from tqdm.auto import tqdm

        self.study, self.objective = study, objective
        self.bar = tqdm(total=total, desc=desc, unit="trial", initial=n_complete(study))
        self._best()

    def _best(self) -> None:
        if not self.objective.multi:
            t = best_trial(self.study)
            if t is not None:
                self.bar.set_postfix_str(f"best {self.objective.columns[0]}={t.values[0]:.4f} "
                                         f"(#{t.number})")

    def tick(self) -> None:
        self.bar.update(1)
        self._best()

    def poll(self) -> None:
        n = n_complete(self.study)
        if n > self.bar.n:
            self.bar.update(n - self.bar.n)
            self._best()

    def close(self) -> None:
        self.bar.close()


def _bar(study, total, objective, progress, desc):
    return _Bar(study, total, objective, desc) if progress else None


def _significance(result: SweepResult, evaluator: Evaluator, default_frame, n: int = 5
                  ) -> dict[str, dict[str, float]] | None:
    """Each of the ``n`` best trials against the preset's defaults, per question: the two-sided
    p of the paired test (``bench.significance_*`` of the preset) for every objective column."""
    from memlab.bench.significance import compare_with_config

    top = result.top(n)
    if top.empty:
        return None
    frames = {"default": default_frame}
    by_number = {t.number: t for t in result.study.trials}
    for number in top["number"].astype(int):
        cfg = result.base.replace(**result.space.apply(by_number[number].params))
        frames[f"#{number}"] = evaluator.per_query(cfg)
    cols = list(result.objective.columns)
    sig = compare_with_config(frames, result.base, metrics=cols)
    return {label: {c: float(sig.loc[(label, c), "p"]) for c in cols}
            for label in frames if label != "default"}


def _named(frame: pd.DataFrame, ds: Dataset) -> pd.DataFrame:
    """``frame`` with its categories by name where the dataset numbers them (LoCoMo: ``"4"`` ->
    ``"single-hop"``; :meth:`Dataset.category_names`): the held-out and transfer frames are
    read and compared by people."""
    names = ds.category_names()
    if not names or "category" not in frame.columns:
        return frame
    return frame.assign(category=frame["category"].astype(str).map(lambda c: names.get(c, c)))


def sweep(*, dataset: str, space: str | Path | Space, preset: str | None = None,
          objective: str = "ndcg@10", trials: int = 50, sampler: str = "auto",
          level: str = "item", macro_categories: bool = False, folds: int | None = None,
          n_jobs: int = 1, storage: str | Path | None = None, study: str | None = None,
          seed: int | None = 0, path: str | None = None,
          dataset_options: Mapping[str, Any] | None = None, limit: int | None = None,
          overrides: Mapping[str, Any] | None = None, test_dataset: str | None = None,
          test_path: str | None = None, out_dir: str | Path = "results/sweeps",
          progress: bool = True, start_from_default: bool = True,
          embedder=None, gate=None, scheduler=None) -> SweepResult:
    """Search ``space`` for the configuration of ``preset`` that does best on ``objective``.

    Returns a :class:`~memlab.tune.report.SweepResult`: ``.trials`` (a DataFrame, one row per
    trial: number, state, each objective column, the sampled and the applied values), ``.study``
    (the Optuna study), ``.best`` / ``.default`` (values of the best trial and of the preset's own
    configuration scored the same way), ``.best_config`` (the preset's full config with the best
    values), ``.folds`` and ``.test`` when asked. See ``memlab sweep --help`` for the arguments;
    ``embedder`` replaces the one the preset names (in-process trials only: worker processes
    build the preset's own). ``storage``: a journal file (default
    ``<out_dir>/<study>.journal``) or an Optuna RDB URL; rerunning continues the study (other
    settings, sampler and seed included, are refused); one that cannot hold a study is refused
    before anything runs (:mod:`memlab.tune.storage`).
    ``start_from_default``: a new study's first trial is the preset's own configuration, when
    the space holds it (not with the grid sampler).
    ``gate``: the VRAM gate the replay's embedder runs through (:mod:`memlab.bench.vramgate`;
    ``result.vram``); None: a default one unless the preset has ``vram.enabled`` false. Only the
    replay (the default configuration's, which fills the feature cache) and a test dataset's
    embed: trials rescore cached raw signals and run no model.
    ``n_jobs`` also runs that replay's conversations in ``n_jobs`` processes, and
    ``scheduler`` (a Dask scheduler address) on a cluster (:mod:`memlab.bench.parallel`; the
    raw signals are the same); trials that replay again (another candidates config) do it in
    their own process.
    """
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidInput("trials", "must be an integer >= 1", trials)
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InvalidInput("n_jobs", "must be an integer >= 1", n_jobs)
    if n_jobs > 1 and embedder is not None:
        raise InvalidInput("embedder", "worker processes build the preset's own embedder; pass "
                           "embedder only with n_jobs=1", type(embedder).__name__)
    obj = Objective.parse(objective)
    if folds is not None and obj.multi:
        raise InvalidInput("folds", "k-fold scores one objective; give one column", objective)
    sp = resolve_space(space)
    pname, ppath = resolve_preset(preset or sp.preset or "reverie")
    if resolve_sampler(sampler, obj) == "grid":   # the name checked early, and the grid's size
        sp.check_grid()
    ds_options = dict(dataset_options or {})
    name = _safe(study or f"{sp.name}-{Path(str(dataset)).name}-{pname}-{obj.label}")
    out = Path(out_dir)
    store = str(storage) if storage is not None else str(out / f"{name}.journal")
    check_storage(store)   # a path or URL that cannot hold the study: refused before the replay
    spec = SweepSpec(str(dataset), path, ds_options, limit, pname, str(ppath),
                     dict(overrides or {}), sp, obj.label, level, macro_categories, sampler,
                     seed, store, name, start_from_default)
    ds = spec.load()
    base = spec.base_config()
    if "://" in store or Path(store).exists():   # an existing study: its settings, pre-replay
        check_settings(open_storage(store), name, spec.study_settings(ds, None))
    vram = None
    if gate is None and base.vram.enabled:
        from memlab.bench.vramgate import default_gate

        gate = default_gate(base)
    if gate is not None:
        from memlab.bench.vramgate import open_bench_gate

        vram = open_bench_gate(base, embedder, gate=gate,
                               build_embedder=embedder is None and base.recall.use_dense)
        emb = vram.embedder
    else:
        emb = embedder if embedder is not None else _embedder(base)
    evaluator = Evaluator(ds, obj, embedder=emb, level=level, macro=macro_categories,
                          progress=progress, n_jobs=n_jobs, scheduler=scheduler)
    default_frame = evaluator.per_query(base)   # writes the feature cache the workers read
    evaluator.n_jobs, evaluator.scheduler = 1, None   # trials' own replays: in this process
    if vram is not None:
        vram.features_cached = all(r.counts.get("feature_cache_hit") == 1
                                   for r in evaluator.replays.values())
    obj.check(default_frame)
    evaluator.progress = False   # trials replay quietly under the sweep's own bar
    result_folds = None
    held: dict[str, list] = {"default": [], "tuned": []}
    if folds is not None:
        from memlab.tune.folds import conversation_folds

        per_fold = []
        for f in conversation_folds(default_frame["conversation_id"], folds, seed=seed):
            st = _run_study(spec, ds, evaluator, f"{name}.fold{f.index}", trials, n_jobs,
                            list(f.train), progress, stream=f.index + 1)
            t = best_trial(st)
            cfg = base.replace(**sp.apply(t.params))
            frame = evaluator.per_query(cfg)
            held["default"].append(default_frame.loc[f.test].assign(fold=f.index))
            held["tuned"].append(frame.loc[f.test].assign(fold=f.index))
            per_fold.append({"fold": f.index, "train": len(f.train), "test": len(f.test),
                             "tuned": evaluator.reduce(frame, f.train),
                             "held_out": evaluator.reduce(frame, f.test),
                             "default_tuned": evaluator.reduce(default_frame, f.train),
                             "default_held_out": evaluator.reduce(default_frame, f.test),
                             "best_trial": t.number, "params": sp.apply(t.params)})
        result_folds = summarise_folds(per_fold, obj)
    st = _run_study(spec, ds, evaluator, name, trials, n_jobs, None, progress)
    result = SweepResult.build(st, spec=spec, space=sp, objective=obj, base=base,
                               default=evaluator.reduce(default_frame), dataset=ds,
                               storage=store, folds=result_folds)
    result.significance = _significance(result, evaluator, default_frame)
    if folds is not None:
        result.held_out = {who: _named(pd.concat(frames), ds) for who, frames in held.items()}
        result.folds["paired"] = result.paired_json(result.held_out_test(), "tuned")
    result.vram = vram
    result.environment = environment(embedder=emb, threads=base.embedding.threads)
    if test_dataset is not None:
        ds_b = registry.load(test_dataset, path=test_path)
        ev_b = Evaluator(ds_b, obj, embedder=emb, level=level, macro=macro_categories,
                         progress=progress)
        result.test_frames = {"default": _named(ev_b.per_query(base), ds_b),
                              "best": _named(ev_b.per_query(result.best_config), ds_b)}
        result.test = {"dataset": ds_b.card.name, "questions": len(ds_b.questions),
                       "best": ev_b.reduce(result.test_frames["best"]),
                       "default": ev_b.reduce(result.test_frames["default"])}
        result.test["paired"] = result.paired_json(result.transfer_test(), "best")
    return result

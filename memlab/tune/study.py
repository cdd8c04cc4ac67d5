"""The Optuna side of a sweep: storage, samplers and the trial loop that one or several worker
processes run on one study.

Storage (:mod:`memlab.tune.storage`). A journal file by default (several processes on one
machine append to it under an OS file lock that dies with its holder), or any Optuna RDB URL
(``sqlite:///...``, ``postgresql://...``) so that workers on several machines join one study.
Rerunning a sweep loads its study and continues it; a rerun with other settings (the dataset, the
preset, the space, the objective, the sampler, the seed, ...: :func:`open_study`) is refused.

Trial budget. ``trials=N`` means "until the study holds N finished (COMPLETE) trials". The
worker processes of one command share a counter of the trials still to start (claimed before a
trial is asked for, handed back when a trial fails on a configuration rule), so together they
finish exactly N. Commands on several machines each aim at N and may overshoot by the trials
running elsewhere when N is reached (as Optuna's ``MaxTrialsCallback``).

Killed workers. A record torn by a kill mid-append is dropped when the journal is next opened
(:func:`~memlab.tune.storage.repair_journal`, under the journal's lock). A journal has no
heartbeat: a trial whose process was killed stays RUNNING.
Each trial records ``memlab.worker`` = ``host:pid``; :func:`fail_orphans` marks FAIL the RUNNING
trials of this host whose process no longer exists (run before a sweep starts), so that the
trial table does not show them running forever. A kill between Optuna creating a trial and the
worker recording itself on it (two journal writes) leaves a RUNNING trial without a worker: each
worker process also registers itself on the study (``memlab.workers.host:pid``) before its first
trial, and such a trial is failed when every registered worker is of this host and gone.

Killed parent. Worker processes end when the command that started them dies: they finish the
trial they are running and claim no other (:mod:`memlab.tune.workers`).

Grid. The grid sampler's grid is checked against the space's ``grid_max`` before Optuna builds
it (:meth:`~memlab.tune.space.Space.check_grid`).

Default first. A new study's first trial is the preset's own configuration when the space holds
it (not with the grid sampler, which visits its grid): the best is never worse than the preset.

Seeds. Each worker's sampler is seeded from (``seed``, worker index, trials already in the
study): two workers, or a resumed run, never replay the same random draws.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.tune.objective import Evaluator, Objective
from memlab.tune.space import Space
from memlab.tune.storage import open_storage, repair_journal  # noqa: F401 - re-exported

__all__ = ["SAMPLERS", "open_storage", "resolve_sampler", "make_sampler", "open_study",
           "check_settings", "run_trials", "fail_orphans", "enqueue_default", "default_params",
           "Budget", "WORKER_ATTR", "CONFIG_ATTR", "ERROR_ATTR"]

log = logging.getLogger(__name__)

SAMPLERS = ("auto", "grid", "random", "tpe", "cmaes", "nsga2")
WORKER_ATTR = "memlab.worker"
WORKERS_PREFIX = "memlab.workers."
CONFIG_ATTR = "memlab.config"
ERROR_ATTR = "memlab.error"
SETTINGS_ATTR = "memlab.settings"
#: settings a study made by an older memlab may not have recorded: recorded on its next run
LATER_SETTINGS = ("sampler", "seed")


def _optuna():
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def sampler_seed(seed: int | None, worker: int, existing: int, stream: int = 0) -> int | None:
    """The sampler's seed for ``worker`` of a study holding ``existing`` trials; ``stream`` > 0
    (a fold's study) draws from its own sequence (0 keeps the seeds studies had before)."""
    if seed is None:
        return None
    entropy = [int(seed), worker, existing] + ([int(stream)] if stream else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])


def resolve_sampler(name: str, objective: Objective) -> str:
    """The sampler ``name`` stands for (``auto``: ``tpe`` for one objective, ``nsga2`` for
    several); InvalidInput for an unknown one or CMA-ES on several objectives."""
    if name not in SAMPLERS:
        raise InvalidInput("sampler", f"must be one of {', '.join(SAMPLERS)}", name)
    if name == "auto":
        name = "nsga2" if objective.multi else "tpe"
    if name == "cmaes" and objective.multi:
        raise InvalidInput("sampler", "CMA-ES optimises one objective; use nsga2, tpe or random "
                           "for several", name)
    return name


def make_sampler(name: str, *, objective: Objective, space: Space, seed: int | None,
                 parallel: bool = False):
    """An Optuna sampler by name (:func:`resolve_sampler`); the grid's size is checked
    (ConfigError over the space's ``grid_max``) before Optuna builds it."""
    optuna = _optuna()
    name = resolve_sampler(name, objective)
    if name == "grid":
        space.check_grid()
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "tpe":
        with warnings.catch_warnings():   # multivariate and constant_liar are "experimental"
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True,
                                              constant_liar=parallel)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    return optuna.samplers.NSGAIISampler(seed=seed)


def open_study(storage, name: str, objective: Objective, settings: dict[str, Any], *,
               sampler=None):
    """Create or load study ``name``; a loaded study must have been made with the same
    ``settings`` (dataset, preset, space, objective, sampler, seed, ...): ConfigError naming the
    difference. A setting of :data:`LATER_SETTINGS` that a study made by an older memlab lacks
    is recorded now (logged), not refused."""
    optuna = _optuna()
    try:   # not load_if_exists: who created the study must be known (see enqueue_default)
        study = optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                    directions=list(objective.directions))
        created = True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(storage=storage, study_name=name, sampler=sampler)
        created = False
    study.memlab_created = created
    if list(study.directions) != [optuna.study.StudyDirection.MAXIMIZE if d == "maximize"
                                  else optuna.study.StudyDirection.MINIMIZE
                                  for d in objective.directions]:
        raise ConfigError("study", f"study {name!r} exists with other directions; choose "
                          "another --study", [d.name for d in study.directions])
    have = study.user_attrs.get(SETTINGS_ATTR)
    if have is None:
        study.set_user_attr(SETTINGS_ATTR, settings)
        return study
    new = _compare(name, have, settings)
    if new:
        log.info("study %s predates recording %s: recorded now as %s", name, ", ".join(new),
                 {k: settings[k] for k in new})
        study.set_user_attr(SETTINGS_ATTR, {**have, **{k: settings[k] for k in new}})
    return study


def check_settings(storage, name: str, settings: dict[str, Any]) -> None:
    """:func:`open_study`'s rule on study ``name`` when it exists, creating and writing nothing
    (a sweep checks before its replay): ConfigError naming the first setting that differs."""
    optuna = _optuna()
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:   # no such study yet
        return
    have = study.user_attrs.get(SETTINGS_ATTR)
    if have is not None:
        _compare(name, have, settings)


def _compare(name: str, have: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """ConfigError on the first key whose recorded value differs from ``settings``; the keys of
    :data:`LATER_SETTINGS` the study has not recorded yet."""
    for key in sorted(set(have) | set(settings)):
        if key not in have and key in LATER_SETTINGS:
            continue
        if have.get(key) != settings.get(key):
            raise ConfigError("study", f"study {name!r} was made with {key} = "
                              f"{have.get(key)!r}; this run asks {settings.get(key)!r}: "
                              "choose another --study (or the same settings)", name)
    return [k for k in LATER_SETTINGS if k in settings and k not in have]


def default_params(space: Space, base: MemlabConfig) -> dict[str, Any] | None:
    """The preset's own values of the space's keys as Optuna params, or None (logged) when one
    lies outside its range (off a step, not among the choices)."""
    flat = base.to_flat()
    out: dict[str, Any] = {}
    for p in space.params:
        v = flat[p.key]
        if p.kind == "categorical":
            ok = v in p.choices
        else:
            ok = p.low <= v <= p.high and (p.step is None or math.isclose(
                round((v - p.low) / p.step) * p.step + p.low, v))
        if not ok:
            log.info("the preset's %s = %r is outside the space: no default trial", p.key, v)
            return None
        out[p.key] = v
    return out


def enqueue_default(study, space: Space, base: MemlabConfig, *, created: bool = True) -> bool:
    """A new study's first trial is the preset's own configuration (when the space holds it):
    the best trial is then never worse than the preset. True when enqueued.

    ``created``: whether this process created the study (``open_study`` sets
    ``study.memlab_created``). Only the creator enqueues: two commands started together on a new
    study both see it empty, and Optuna's ``skip_if_exists`` is not atomic across processes, so
    both would queue (and run) the default."""
    if not created or study.trials:
        return False
    params = default_params(space, base)
    if params is None:
        return False
    study.enqueue_trial(params, skip_if_exists=True)
    return True


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def register_worker(study) -> None:
    """Record this process on the study (before its first trial; see :func:`fail_orphans`)."""
    study.set_user_attr(WORKERS_PREFIX + worker_id(), True)


def _gone_here(who: str, host: str) -> bool:
    h, _, pid = who.rpartition(":")
    return h == host and pid.isdigit() and not _alive(int(pid))


def fail_orphans(study) -> list[int]:
    """Mark FAIL the RUNNING trials of this host whose worker process is gone, and those
    without a worker when every worker registered on the study is of this host and gone (a
    kill between the trial's creation and its worker attribute); their numbers."""
    optuna = _optuna()
    host = socket.gethostname()
    me = worker_id()
    workers = [k[len(WORKERS_PREFIX):] for k in study.user_attrs if k.startswith(WORKERS_PREFIX)]
    all_gone = all(_gone_here(w, host) for w in workers if w != me)
    out = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        who = str(t.user_attrs.get(WORKER_ATTR, ""))
        if _gone_here(who, host) or (not who and all_gone):
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
            out.append(t.number)
    if out:
        log.warning("study %s: trial(s) %s were left RUNNING by a stopped process: marked FAIL",
                    study.study_name, out)
    return out


def n_complete(study) -> int:
    optuna = _optuna()
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


class Budget:
    """Trials still to start, shared by the worker processes of one command (a
    ``multiprocessing`` Value with a lock, or a plain counter in one process). ``stop``: an
    event that, once set, makes every claim fail (a worker whose parent died:
    :mod:`memlab.tune.workers`)."""

    def __init__(self, value, stop=None) -> None:
        self.value = value
        self.stop = stop

    def claim(self) -> bool:
        if self.stop is not None and self.stop.is_set():
            return False
        with self.value.get_lock():
            if self.value.value <= 0:
                return False
            self.value.value -= 1
            return True

    def give_back(self) -> None:
        with self.value.get_lock():
            self.value.value += 1


@dataclass
class TrialLoop:
    """What a worker needs to run trials: the study, the base config, the space and the
    evaluator; ``questions`` the question keys scored (a fold's training set; None: all)."""

    study: Any
    base: MemlabConfig
    space: Space
    evaluator: Evaluator
    questions: list[str] | None = None
    max_failures: int = 20


def run_trials(loop: TrialLoop, budget: Budget,
               on_done: Callable[[], None] | None = None) -> int:
    """Run trials until ``budget`` is spent; the number this worker finished.

    Each trial runs through ``study.optimize(n_trials=1)`` (samplers such as the grid's stop the
    study from inside it). A configuration the config schema refuses (a cross-field rule) is
    FAIL with the reason in ``memlab.error`` and its slot handed back; more than
    ``max_failures`` such in a row is a ConfigError. Any other error marks the trial FAIL and
    propagates."""
    done = failures = 0
    me = worker_id()
    refused: list[ConfigError] = []
    columns = loop.evaluator.objective.columns

    def objective(trial):
        trial.set_user_attr(WORKER_ATTR, me)
        overrides = loop.space.suggest(trial)
        try:
            cfg = loop.base.replace(**overrides)
        except ConfigError as exc:
            trial.set_user_attr(ERROR_ATTR, str(exc))
            refused.append(exc)
            raise
        values = loop.evaluator.values(cfg, loop.questions)
        trial.set_user_attr(CONFIG_ATTR, overrides)
        out = [values[c] for c in columns]
        return out[0] if len(out) == 1 else out

    register_worker(loop.study)
    while budget.claim():
        refused.clear()
        loop.study.optimize(objective, n_trials=1, catch=(ConfigError,), gc_after_trial=False)
        if refused:
            budget.give_back()
            failures += 1
            if failures > loop.max_failures:
                exc = refused[-1]
                raise ConfigError(exc.key, f"{failures} trials in a row drew configurations the "
                                  f"schema refuses; last: {exc.rule}", exc.value) from exc
            continue
        failures = 0
        done += 1
        if on_done is not None:
            on_done()
    return done

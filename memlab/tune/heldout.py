"""Held-out evaluation of learned rankers over several datasets (issue 21, item 4): k folds by
conversation and leave-one-dataset-out transfer, per-question frames, intervals, ablation and
permutation importance. :mod:`benchmarks/quality.py` prints and writes what these return.

**Models** (:class:`Spec`): a kind (``lambdarank`` or ``hgb``, :func:`memlab.tune.rank.fit_model`;
or ``plus``: the ``reverie_plus`` scorer's weights, reverie's and the additive terms', fitted by
:func:`memlab.tune.fit.fit_linear` on the training questions, the preset ``reverie_plus`` as
``benchmarks/train_presets.py`` makes it) trained either on each dataset alone (``joint`` false) or on every dataset's training questions
together (``joint`` true), with columns dropped (``drop``: the ablation hook).

**k-fold** (:func:`kfold`): each dataset's questions split into folds by conversation
(:func:`memlab.tune.folds.conversation_folds`, never the tuned folds of a study); fold ``i``'s
model is trained on the other folds' questions (of this dataset, or of every dataset with a fold
``i``: joint) and scores this dataset's fold ``i``. Each question is scored once, by a model that
never saw its conversation. **Leave one dataset out** (:func:`leave_one_out`): a model trained on
every question of the other datasets scores every question of this one.

Every score is :func:`memlab.tune.evaluate.per_query` of the replay restricted to the held-out
questions under the ``learned`` scorer with the fitted file (``fusion.learned_floor`` false for
a lambdarank model, whose gates are features): the values ``memlab bench`` reports.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.bench.replay import Replayed
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.learned import load_model, save_model
from memlab.recall.score import Scored, relevance_mask
from memlab.tune.crossfit import _held_metric, learned_config, restrict
from memlab.tune.evaluate import per_query
from memlab.tune.folds import Fold
from memlab.tune.rank import Part, fit_model

__all__ = ["Spec", "Dev", "model_config", "kfold", "leave_one_out", "interval",
           "model_importance"]


@dataclass(frozen=True)
class Spec:
    """A learned method: ``kind``, trained per dataset or on all together (``joint``), with
    ``drop`` columns or groups left out."""

    kind: str = "lambdarank"
    joint: bool = True
    drop: tuple[str, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()


@dataclass
class Dev:
    """One development dataset: its replay under the preset ``cfg``, its folds."""

    rep: Replayed
    cfg: MemlabConfig
    folds: list[Fold]
    questions: pd.Index = field(default_factory=lambda: pd.Index([]))


#: the scorer a ``plus`` spec fits and scores with
PLUS = {"fusion.scorer": "reverie_plus"}
KINDS = ("lambdarank", "hgb", "plus")


def _check_spec(spec: Spec, keep: dict | None) -> None:
    if spec.kind not in KINDS:
        raise InvalidInput("spec.kind", f"one of {', '.join(KINDS)}", spec.kind)
    if spec.kind == "plus" and (spec.drop or spec.params or keep is not None):
        raise InvalidInput("spec", "a plus fit takes no dropped columns, parameters or kept "
                           "model files (it has no model file)",
                           {"drop": spec.drop, "params": spec.params})


def model_config(cfg: MemlabConfig, path: str | Path, kind: str) -> MemlabConfig:
    """``cfg`` scored by the model file ``path`` (no floor for a lambdarank model)."""
    return learned_config(cfg, path).replace(**{"fusion.learned_floor": kind != "lambdarank"})


def _fit_save(parts: list[Part], spec: Spec, path: Path, seed: int) -> tuple[Path, dict]:
    model, feats, counts = fit_model(parts, kind=spec.kind, drop=spec.drop, seed=seed,
                                     params=dict(spec.params) or None)
    save_model(model, path, features=feats, kind=spec.kind, trained=counts, base=counts.get("base"),
               config=parts[0].cfg.to_flat(),
               dataset={"parts": [{"name": p.name, "questions": None if p.questions is None
                                   else len(p.questions)} for p in parts]})
    return path, counts


def _fit_plus(parts: list[Part], seed: int) -> dict[str, Any]:
    """The weights of ``reverie_plus`` fitted on ``parts`` together: the config changes."""
    from memlab.tune.fit import fit_linear, joint_design

    cfg = parts[0].cfg.replace(**PLUS)
    fit = fit_linear(joint_design([(p.name, p.rep, p.questions) for p in parts], cfg), cfg,
                     seed=seed)
    base, new = cfg.to_flat(), fit.config.to_flat()
    return {**PLUS, **{k: v for k, v in new.items() if base.get(k) != v}}


def _fit(parts: list[Part], spec: Spec, path: Path, seed: int) -> Path | dict[str, Any]:
    """A model file (lambdarank, hgb) or the fitted weights (plus)."""
    if spec.kind == "plus":
        return _fit_plus(parts, seed)
    return _fit_save(parts, spec, path, seed)[0]


def _score(dev: Dev, fitted: Path | dict[str, Any], kind: str, questions: pd.Index
           ) -> pd.DataFrame:
    cfg = dev.cfg.replace(**fitted) if isinstance(fitted, dict) else \
        model_config(dev.cfg, fitted, kind)
    return per_query(restrict(dev.rep, questions), cfg).reindex(questions)


def kfold(devs: Mapping[str, Dev], spec: Spec, *, seed: int = 0,
          workdir: str | Path | None = None, keep: dict[str, list] | None = None
          ) -> dict[str, pd.DataFrame]:
    """Dataset -> every question's held-out per-query frame under ``spec`` (see the module doc).
    ``keep``: a dict to which (fold index, model path) pairs are appended per dataset; the files
    are then written into ``workdir`` (required) and left there for :func:`model_importance`;
    without ``keep`` they live in a temporary folder, removed at the end."""
    if not devs:
        raise InvalidInput("devs", "at least one dataset", 0)
    _check_spec(spec, keep)
    if keep is not None and workdir is None:
        raise InvalidInput("workdir", "a folder for the model files that keep lists", None)
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="memlab-rank-", dir=workdir) as tmp:
            return _kfold(devs, spec, seed, Path(tmp), None)
    Path(workdir).mkdir(parents=True, exist_ok=True)
    return _kfold(devs, spec, seed, Path(workdir), keep)


def _kfold(devs: Mapping[str, Dev], spec: Spec, seed: int, folder: Path,
           keep: dict[str, list] | None) -> dict[str, pd.DataFrame]:
    k = max(len(d.folds) for d in devs.values())
    held: dict[str, list[pd.DataFrame]] = {n: [] for n in devs}
    for i in range(k):
        if spec.joint:
            parts = [Part(n, d.rep, d.cfg, d.folds[i].train if i < len(d.folds)
                          else d.questions) for n, d in devs.items()]
            path = _fit(parts, spec, folder / f"joint{i}.skops", seed + i)
            paths = {n: path for n in devs}
        else:
            paths = {}
            for n, d in devs.items():
                if i < len(d.folds):
                    paths[n] = _fit([Part(n, d.rep, d.cfg, d.folds[i].train)], spec,
                                    folder / f"{n}{i}.skops", seed + i)
        for n, d in devs.items():
            if i < len(d.folds):
                held[n].append(_score(d, paths[n], spec.kind, d.folds[i].test))
                if keep is not None:
                    keep.setdefault(n, []).append((i, paths[n]))
    return {n: pd.concat(v) for n, v in held.items()}


def leave_one_out(devs: Mapping[str, Dev], spec: Spec, *, seed: int = 0,
                  workdir: str | Path | None = None) -> dict[str, pd.DataFrame]:
    """Dataset -> its per-query frame under ``spec`` trained on every other dataset."""
    if len(devs) < 2:
        raise InvalidInput("devs", "leave-one-dataset-out needs at least two datasets", len(devs))
    _check_spec(spec, None)
    out = {}
    with tempfile.TemporaryDirectory(prefix="memlab-lodo-", dir=workdir) as tmp:
        for n, d in devs.items():
            parts = [Part(o, e.rep, e.cfg) for o, e in devs.items() if o != n]
            path = _fit(parts, spec, Path(tmp) / f"without-{n}.skops", seed)
            out[n] = _score(d, path, spec.kind, d.questions)
    return out


def interval(a: np.ndarray, b: np.ndarray | None = None, *, level: float = 0.95,
             resamples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) (``b`` None) or of the paired mean(a - b),
    resampling questions with replacement (seeded; chunks of 1,000 resamples)."""
    d = np.asarray(a, np.float64) - (0.0 if b is None else np.asarray(b, np.float64))
    n = d.size
    if n == 0:
        raise InvalidInput("a", "no question", 0)
    rng = np.random.default_rng(seed)
    means = []
    for start in range(0, resamples, 1000):
        m = min(1000, resamples - start)
        idx = rng.integers(0, n, size=(m, n))
        means.append(d[idx].mean(axis=1))
    means = np.concatenate(means)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def model_importance(dev: Dev, folds: Sequence[tuple[int, Path]], *, metric: str = "ndcg@10",
                     seed: int = 0) -> pd.DataFrame:
    """Permutation importance of fitted models on their held-out folds of ``dev``: per model
    column (raw signal or gate feature), the drop of the held-out mean of ``metric`` when that
    column is shuffled across the fold's rows in the model's input only (selection reads the
    unshuffled table, as :func:`memlab.tune.crossfit.permutation_importance`). Index: columns;
    one column per fold."""
    out = {}
    rng = np.random.default_rng(seed)
    for i, path in folds:
        test = dev.folds[i].test
        held = restrict(dev.rep, test)
        table = held.features.columns
        model = load_model(path)
        cfg = model_config(dev.cfg, path, model.kind)
        X = model.matrix(table, cfg)
        n = X.shape[0]
        relevant = np.ones(n, bool) if not cfg.fusion.learned_floor else \
            np.asarray(relevance_mask(table, cfg)[0], bool)

        def scored(M: np.ndarray) -> Scored:
            p = np.asarray(model.model.predict(M), np.float64) if model.kind == "lambdarank" \
                else model.model.predict_proba(M)[:, 1]
            return Scored(p, np.ones(n, bool), relevant, {"learned_term": p},
                          ("learned_term",), "learned")

        base = _held_metric(held, cfg, scored(X), test, metric)
        drops = {}
        for j, f in enumerate(model.features):
            M = X.copy()
            M[:, j] = rng.permutation(M[:, j])
            drops[f] = base - _held_metric(held, cfg, scored(M), test, metric)
        out[i] = pd.Series(drops)
    return pd.DataFrame(out)

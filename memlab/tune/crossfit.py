"""Learned fusion held out (issue 8, items 5 and 7): k folds by conversation
(:func:`memlab.tune.folds.conversation_folds`); on each, the linear weights and the non-linear
model are fitted on the other folds' questions and every method is scored on the held-out ones
with :func:`memlab.tune.evaluate.per_query` (the same values as ``memlab bench``). The preset's
defaults are scored on the same held-out questions. Nothing is replayed per fold.

**Permutation importance** of the non-linear model, per fold, on the held-out questions and on
the metric itself (default nDCG@10), not on the classifier's log-loss: a column's values are
shuffled across the held-out rows (seeded) in the model's input only, the rows re-scored and
re-selected as ``memlab bench`` does (gates and selection on the unshuffled columns), and the
drop of the held-out mean is the column's importance. It answers
"which raw signals does the ranking lean on", which is what the next signal to build should be
chosen from.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from memlab.bench import metrics as M
from memlab.bench.replay import Replayed, ranked_per_question
from memlab.bench.run import qrels_of
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.features import Features, column
from memlab.recall.learned import save_model
from memlab.recall.score import Scored, score as score_table
from memlab.recall.select import select
from memlab.tune.evaluate import per_query
from memlab.tune.fit import build_design, fit_hgb, fit_linear, question_keys
from memlab.tune.folds import conversation_folds

__all__ = ["CrossFit", "crossfit", "restrict", "permutation_importance", "importance_figure",
           "learned_config"]

METHODS = ("defaults", "linear", "hgb")


def restrict(rep: Replayed, questions: pd.Index, *, columns: dict[str, np.ndarray] | None = None
             ) -> Replayed:
    """``rep`` with only the table rows of ``questions`` (the others rank nothing); ``columns``
    replaces some columns of the kept rows (same length)."""
    table = rep.features.columns
    keys = question_keys(rep)[column(table, "qid", np.int64)]
    keep = pd.Series(keys).isin(pd.Index(questions)).to_numpy()
    cols = {c: np.asarray(v)[keep] for c, v in table.items()}
    cols.update(columns or {})
    feats = Features(columns=cols, terms=rep.features.terms, texts=rep.features.texts,
                     ids=rep.features.ids)
    return Replayed(feats, rep.questions, rep.row_item, rep.row_session, rep.timings, rep.counts)


def learned_config(cfg: MemlabConfig, model_path: str | Path) -> MemlabConfig:
    """``cfg`` scored by the ``learned`` scorer with the model file ``model_path``."""
    return cfg.replace(**{"fusion.scorer": "learned", "fusion.learned_model": str(model_path)})


def _held_metric(held: Replayed, cfg: MemlabConfig, scored: Scored, questions: pd.Index,
                 metric: str) -> float:
    """Mean ``metric`` over ``questions`` of ``held`` ranked by ``scored`` (selection as
    ``bench.run.rank``: the gates, budget and dedup read ``held``'s own columns)."""
    table = held.features.columns
    picks = select(table, scored, terms=held.features.terms, k=ranked_per_question(cfg), cfg=cfg)
    rows = np.asarray(table["row"])
    keys = question_keys(held)
    convs = held.questions["conversation_id"].astype(str).tolist()
    wanted = set(questions)
    qrels = {k: v for k, v in qrels_of(held).items() if k in wanted and v}
    rankings = {key: [f"{convs[q]}::{held.row_item[int(r)]}"
                      for r in rows[picks[q] if q < len(picks) else np.zeros(0, int)]]
                for q, key in enumerate(keys) if key in qrels}
    return float(M.evaluate(rankings, qrels, ks=cfg.bench.ks)[metric].mean())


def permutation_importance(rep: Replayed, cfg: MemlabConfig, questions: pd.Index,
                           features: tuple[str, ...], *, metric: str = "ndcg@10",
                           repeats: int = 1, seed: int = 0) -> pd.Series:
    """Drop of the mean ``metric`` over ``questions`` when each of ``features`` is shuffled across
    their rows (mean over ``repeats``), scoring with ``cfg``. Only the scorer sees the shuffled
    column: the gates (eligible, relevant) and the selection (budget, dedup, permanent cap,
    oldest-first) read the original table, so that a column selection also reads (text_len,
    intent, layer) measures what the model leans on, not what the budget does."""
    held = restrict(rep, questions)
    table = held.features.columns
    s0 = score_table(table, cfg)
    base = _held_metric(held, cfg, s0, questions, metric)
    rng = np.random.default_rng(seed)
    out = {}
    for f in features:
        drops = []
        for _ in range(repeats):
            shuffled = {**table, f: rng.permutation(np.asarray(table[f]))}
            sp = score_table(shuffled, cfg)
            scored = Scored(sp.score, s0.eligible, s0.relevant, sp.components, sp.additive,
                            sp.scorer)
            drops.append(base - _held_metric(held, cfg, scored, questions, metric))
        out[f] = float(np.mean(drops))
    return pd.Series(out, name=metric)


@dataclass
class CrossFit:
    """Per fold and method, the held-out mean of ``metric``; the per-query held-out frames;
    the learned weights per fold; the permutation importance per fold (columns: folds)."""

    metric: str
    scores: pd.DataFrame                      # index method, columns fold 0..k-1
    per_query: dict[str, pd.DataFrame]        # method -> held-out per-query metrics, all folds
    weights: pd.DataFrame                     # index config key, columns fold
    importance: pd.DataFrame | None           # index raw signal, columns fold
    counts: dict[str, Any] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """The held-out per-query metrics of every method stacked: one row per (method,
        question), each question held out once."""
        return pd.concat(self.per_query, names=["method", "question"])

    def summary(self) -> pd.DataFrame:
        """Held-out mean and sd over folds per method, and the pooled mean over all held-out
        questions (each question held out once)."""
        out = pd.DataFrame({"mean": self.scores.mean(axis=1), "sd": self.scores.std(axis=1),
                            "folds": self.scores.shape[1]})
        out["pooled"] = [self.per_query[m][self.metric].mean() for m in out.index]
        return out

    def importance_summary(self) -> pd.DataFrame | None:
        if self.importance is None:
            return None
        imp = self.importance
        return pd.DataFrame({"mean": imp.mean(axis=1), "sd": imp.std(axis=1)}).sort_values(
            "mean", ascending=False)


def crossfit(rep: Replayed, cfg: MemlabConfig, *, k: int = 5, seed: int = 0,
             method: Literal["pairwise", "pointwise"] = "pairwise", metric: str = "ndcg@10",
             hgb: bool = True, importance: bool = True, repeats: int = 1,
             workdir: str | Path | None = None, **fit_options: Any) -> CrossFit:
    """k-fold held-out scores of the preset ``cfg`` (defaults), its linear-learned weights and
    the non-linear model; permutation importance of the latter (``importance``)."""
    default_pq = per_query(rep, cfg)
    if metric not in default_pq.columns:
        raise InvalidInput("metric", "not a metric per_query computes", metric)
    folds = conversation_folds(default_pq["conversation_id"], k, seed=seed)
    design = build_design(rep, cfg)
    scores: dict[str, dict[int, float]] = {m: {} for m in METHODS}
    held: dict[str, list[pd.DataFrame]] = {m: [] for m in METHODS}
    weights, imps, counts = {}, {}, {"design": design.counts, "folds": []}
    tmp = tempfile.TemporaryDirectory(prefix="memlab-fit-", dir=workdir)
    try:
        for fold in folds:
            test = fold.test
            per = {"defaults": default_pq.reindex(test)}
            lin = fit_linear(design, cfg, train=fold.train, method=method, **fit_options)
            weights[fold.index] = pd.Series(lin.weights)
            per["linear"] = per_query(restrict(rep, test), lin.config).reindex(test)
            fc = {"fold": fold.index, "train": len(fold.train), "test": len(test),
                  "linear": lin.counts}
            if hgb:
                model, feats, hc = fit_hgb(rep, cfg, train=fold.train, seed=seed)
                path = save_model(model, Path(tmp.name) / f"fold{fold.index}.skops",
                                  features=feats, trained={"fold": fold.index, **hc})
                hcfg = learned_config(cfg, path)
                per["hgb"] = per_query(restrict(rep, test), hcfg).reindex(test)
                fc["hgb"] = hc
                if importance:
                    imps[fold.index] = permutation_importance(rep, hcfg, test, feats,
                                                              metric=metric, repeats=repeats,
                                                              seed=seed + fold.index)
            for m, pq in per.items():
                scores[m][fold.index] = float(pq[metric].mean())
                held[m].append(pq)
            counts["folds"].append(fc)
    finally:
        tmp.cleanup()
    used = [m for m in METHODS if held[m]]
    return CrossFit(metric, pd.DataFrame({m: scores[m] for m in used}).T,
                    {m: pd.concat(held[m]) for m in used}, pd.DataFrame(weights),
                    pd.DataFrame(imps) if imps else None, counts)


def importance_figure(imp: pd.DataFrame, *, title: str = "", top: int | None = None,
                      ax=None, dataset: str | None = None, metric: str | None = None):
    """A horizontal bar chart (matplotlib Figure) of the mean drop per raw signal with its sd
    over folds as error bars; ``imp`` is :meth:`CrossFit.importance_summary` (``mean``, ``sd``)
    or a per-fold frame (index signal, columns folds). ``ax``: draw there (its figure is
    returned). The title names ``dataset`` and ``metric`` (``title`` replaces it). Save it with
    :func:`memlab.bench.plots.save`; :mod:`memlab.plots` re-exports it as ``fit_importance``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not {"mean", "sd"} <= set(imp.columns):
        imp = pd.DataFrame({"mean": imp.mean(axis=1), "sd": imp.std(axis=1)})
    imp = imp.sort_values("mean", ascending=True)
    if top is not None:
        imp = imp.iloc[-top:]
    if ax is None:
        fig = Figure(figsize=(6, 0.28 * len(imp) + 1.2), layout="tight")   # no pyplot
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    ax.barh(imp.index.astype(str), imp["mean"], xerr=imp["sd"].fillna(0.0), color="#4c72b0")
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(f"drop of held-out {metric or 'mean'} when shuffled")
    what = "permutation importance" + (f" of {metric}" if metric else "")
    ax.set_title(title or (f"{dataset}: {what}" if dataset else what))
    return fig

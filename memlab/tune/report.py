"""A finished sweep: the trial table, the best trials beside the preset's defaults, the Pareto
front (several objectives), k-fold summaries, and what is written (YAML, CSV, JSON)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memlab.config import MemlabConfig
from memlab.tune.objective import Objective
from memlab.tune.space import Space

__all__ = ["SweepResult", "best_trial", "trials_frame", "summarise_folds"]


def _complete(study) -> list:
    import optuna

    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def best_trial(study, objective: Objective | None = None):
    """The best finished trial (several objectives: the Pareto trial best on the first column);
    None when no trial has finished."""
    done = _complete(study)
    if not done:
        return None
    if len(study.directions) == 1:
        return study.best_trial
    front = study.best_trials
    sign = 1.0 if study.directions[0].name == "MAXIMIZE" else -1.0
    return max(front, key=lambda t: (sign * t.values[0], -t.number))


def trials_frame(study, objective: Objective, space: Space) -> pd.DataFrame:
    """One row per trial: number, state, each objective column, seconds, worker, error, the
    sampled values (``params.<key>``) and the applied ones after constraints (``<key>``)."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {"number": t.number, "state": t.state.name}
        for i, c in enumerate(objective.columns):
            row[c] = t.values[i] if t.values is not None else math.nan
        row["seconds"] = (t.duration.total_seconds() if t.duration is not None else math.nan)
        row["worker"] = t.user_attrs.get("memlab.worker", "")
        row["error"] = t.user_attrs.get("memlab.error", "")
        row.update({f"params.{k}": v for k, v in t.params.items()})
        row.update(space.apply(t.params))
        rows.append(row)
    cols = (["number", "state", *objective.columns, "seconds", "worker", "error"]
            + [f"params.{k}" for k in space.keys] + space.keys)
    frame = pd.DataFrame(rows, columns=cols)
    return frame.set_index("number", drop=False).rename_axis(None)


def _sd(values: list[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def summarise_folds(per_fold: list[dict[str, Any]], objective: Objective) -> dict[str, Any]:
    """Mean and sd over folds of the tuned-fold and held-out-fold values (best and default)."""
    col = objective.columns[0]
    summary = {}
    for part in ("tuned", "held_out", "default_tuned", "default_held_out"):
        vals = [f[part][col] for f in per_fold]
        summary[part] = {"mean": float(np.mean(vals)), "sd": _sd(vals)}
    return {"k": len(per_fold), "metric": col, "per_fold": per_fold, "summary": summary}


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _round(d: dict[str, float]) -> dict[str, float]:
    return {k: round(float(v), 6) for k, v in d.items()}


@dataclass
class SweepResult:
    """What :func:`memlab.sweep` returns. ``trials`` is the trial table (a DataFrame)."""

    study: Any
    trials: pd.DataFrame
    objective: Objective
    space: Space
    base: MemlabConfig
    best: dict[str, Any] | None
    default: dict[str, float]
    best_config: MemlabConfig
    settings: dict[str, Any]
    storage: str
    pareto: list[dict[str, Any]] | None = None
    folds: dict[str, Any] | None = None
    test: dict[str, Any] | None = None
    paths: dict[str, str] = field(default_factory=dict)
    #: trial label ("#12") -> objective column -> two-sided p of the paired test per question
    #: against the preset's defaults (``memlab.bench.significance``; set by the sweep)
    significance: dict[str, dict[str, float]] | None = None
    #: the VRAM gate of the replay (memlab.bench.vramgate.BenchVRAM; set by the sweep; None: off)
    vram: Any = None
    #: where it ran (memlab.bench.environment; set by the sweep)
    environment: dict[str, Any] | None = None
    #: the MLflow runs it was logged as (memlab.tune.track.track_sweep's answer; set by
    #: memlab.sweep with track=True; None: not logged)
    mlflow: dict[str, Any] | None = None
    #: with folds: every held-out question's per-query metrics under the preset's defaults and
    #: under the configuration tuned on the other folds (``{"default": frame, "tuned": frame}``,
    #: the same questions in the same order, column ``fold``, categories by name where the
    #: dataset numbers them; set by the sweep)
    held_out: dict[str, pd.DataFrame] | None = None
    #: with a test dataset: its per-query metrics under the defaults and the best configuration
    #: (``{"default": frame, "best": frame}``; set by the sweep)
    test_frames: dict[str, pd.DataFrame] | None = None

    @classmethod
    def build(cls, study, *, spec, space: Space, objective: Objective, base: MemlabConfig,
              default: dict[str, float], dataset, storage: str,
              folds: dict[str, Any] | None) -> "SweepResult":
        t = best_trial(study)

        def entry(tr) -> dict[str, Any]:
            return {"number": tr.number, "values": dict(zip(objective.columns, tr.values)),
                    "params": space.apply(tr.params)}

        best = entry(t) if t is not None else None
        best_config = base.replace(**best["params"]) if best else base
        pareto = ([entry(tr) for tr in sorted(study.best_trials, key=lambda x: x.number)]
                  if objective.multi and t is not None else None)
        settings = {**spec.settings(dataset), "study": study.study_name, "sampler": spec.sampler,
                    "seed": spec.seed}
        return cls(study, trials_frame(study, objective, space), objective, space, base, best,
                   default, best_config, settings, storage, pareto, folds)

    # -- held out and transfer, question by question ---------------------------------------
    def _paired(self, frames: dict[str, pd.DataFrame] | None, what: str,
                metrics: list[str] | None) -> pd.DataFrame:
        from memlab.bench.significance import compare_with_config
        from memlab.errors import InvalidInput

        if frames is None:
            raise InvalidInput("result", f"has no {what}: run the sweep with "
                               f"{'folds' if what == 'held-out folds' else 'test_dataset'}=...",
                               None)
        first = next(iter(frames.values()))
        cols = metrics or [c for c in dict.fromkeys([*self.objective.columns, "recall@10",
                                                     "ndcg@10", "mrr"]) if c in first.columns]
        return compare_with_config(frames, self.base, metrics=cols)

    def held_out_test(self, metrics: list[str] | None = None, *, by_fold: bool = False
                      ) -> pd.DataFrame:
        """Best vs defaults on the held-out folds, question by question: each held-out question
        scored by the configuration tuned on the other folds against the preset's defaults, the
        paired test of :func:`memlab.bench.significance.compare_presets` (with the preset's
        ``bench.significance_*``). Rows ``(default|tuned, metric)``: ``mean``, ``diff``, ``p``
        (metrics default: the objective, recall@10, ndcg@10, mrr). ``by_fold``: the same test
        within each fold (a ``fold`` level first)."""
        if not by_fold or self.held_out is None:
            return self._paired(self.held_out, "held-out folds", metrics)
        parts = {}
        for fold in sorted(self.held_out["tuned"]["fold"].unique()):
            frames = {who: f[f["fold"] == fold] for who, f in self.held_out.items()}
            parts[int(fold)] = self._paired(frames, "held-out folds", metrics)
        return pd.concat(parts, names=["fold"])

    def transfer_test(self, metrics: list[str] | None = None) -> pd.DataFrame:
        """The best configuration against the defaults on the test dataset (``test_dataset``),
        question by question: as :meth:`held_out_test`, rows ``(default|best, metric)``."""
        return self._paired(self.test_frames, "test dataset", metrics)

    def held_out_frame(self) -> pd.DataFrame:
        """One row per held-out question: its fold, conversation and category, and each metric
        of :meth:`held_out_test` under the defaults and tuned (``<metric>`` columns of a
        two-level header ``default`` / ``tuned``), with ``tuned - default``."""
        test = self.held_out_test()
        cols = list(test.index.unique("metric"))
        d, t = self.held_out["default"], self.held_out["tuned"]
        keep = [c for c in ("fold", "conversation_id", "category") if c in d.columns]
        out = pd.concat({"question": d[keep], "default": d[cols], "tuned": t.loc[d.index, cols],
                         "tuned - default": t.loc[d.index, cols] - d[cols]}, axis=1)
        return out

    @staticmethod
    def paired_json(test: pd.DataFrame, who: str) -> dict[str, dict[str, float]]:
        """``{metric: {"default", <who>, "diff", "p"}}`` of a paired test's frame."""
        base = test.attrs.get("baseline", "default")
        return {str(m): {"default": round(float(test.loc[(base, m), "mean"]), 6),
                         who: round(float(test.loc[(who, m), "mean"]), 6),
                         "diff": round(float(test.loc[(who, m), "diff"]), 6),
                         "p": round(float(test.loc[(who, m), "p"]), 6),
                         "questions": int(test.attrs.get("questions", 0))}
                for m in test.index.unique("metric")}

    # -- views -----------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """The trial table (:attr:`trials`, a copy): one row per trial."""
        return self.trials.copy()

    def top(self, n: int = 5) -> pd.DataFrame:
        """The ``n`` best finished trials (first objective), best first."""
        done = self.trials[self.trials["state"] == "COMPLETE"]
        col = self.objective.columns[0]
        asc = self.objective.directions[0] == "minimize"
        return done.sort_values([col, "number"], ascending=[asc, True]).head(n)

    def table(self, n: int = 5) -> pd.DataFrame:
        """The preset's defaults, then the ``n`` best trials: objective values and every key of
        the space (applied values)."""
        flat = self.base.to_flat()
        sig = self.significance or {}
        pcols = [f"p({c})" for c in self.objective.columns] if sig else []
        rows = [{"trial": "default", **self.default, **{p: float("nan") for p in pcols},
                 **{k: flat[k] for k in self.space.keys}}]
        for _, r in self.top(n).iterrows():
            label = f"#{int(r['number'])}"
            rows.append({"trial": label, **{c: r[c] for c in self.objective.columns},
                         **{f"p({c})": sig.get(label, {}).get(c, float("nan"))
                            for c in self.objective.columns if sig},
                         **{k: r[k] for k in self.space.keys}})
        return pd.DataFrame(rows).set_index("trial")

    def format(self, n: int = 5) -> str:
        lines = [f"study {self.study.study_name!r} ({self.storage}): "
                 f"{int((self.trials['state'] == 'COMPLETE').sum())} finished trials, "
                 f"objective {self.objective.label}"]
        with pd.option_context("display.max_columns", None, "display.width", 160,
                               "display.float_format", "{:.4g}".format):
            lines.append(self.table(n).T.to_string())
        if self.pareto:
            points: dict[tuple, list[int]] = {}
            for p in self.pareto:
                points.setdefault(tuple(p["values"].items()), []).append(p["number"])
            lines.append(f"Pareto front ({len(self.pareto)} trials, {len(points)} points):")
            for vals, numbers in sorted(points.items(), key=lambda kv: kv[0][0][1]):
                text = ", ".join(f"{k}={v:.4g}" for k, v in vals)
                more = f" (+{len(numbers) - 3} more)" if len(numbers) > 3 else ""
                lines.append(f"  {text}: trial(s) {', '.join(f'#{n}' for n in numbers[:3])}"
                             + more)
        if self.folds:
            s, col = self.folds["summary"], self.folds["metric"]
            lines.append(f"{self.folds['k']}-fold by conversation, {col} (mean ± sd over folds):")
            lines.append(f"  {'':<10} {'tuned folds':>18} {'held-out fold':>18}")
            for who, a, b in (("tuned", "tuned", "held_out"),
                              ("default", "default_tuned", "default_held_out")):
                lines.append(f"  {who:<10} {s[a]['mean']:>10.4f} ± {s[a]['sd']:<5.3f} "
                             f"{s[b]['mean']:>10.4f} ± {s[b]['sd']:<5.3f}")
            for m, v in (self.folds.get("paired") or {}).items():
                lines.append(f"  held out, question by question ({v['questions']}): {m} tuned "
                             f"{v['tuned']:.4f} vs default {v['default']:.4f}, diff "
                             f"{v['diff']:+.4f}, p {_p(v['p'])}")
        if self.test:
            paired = self.test.get("paired") or {}
            lines.append(f"on {self.test['dataset']} ({self.test['questions']} questions): "
                         + "; ".join(f"{c}: best {self.test['best'][c]:.4f}, default "
                                     f"{self.test['default'][c]:.4f}"
                                     + (f" (p {_p(paired[c]['p'])})" if c in paired else "")
                                     for c in self.objective.columns))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "study": self.study.study_name, "storage": self.storage, "settings": self.settings,
            "objective": {"columns": list(self.objective.columns),
                          "directions": list(self.objective.directions)},
            "trials": {"finished": int((self.trials["state"] == "COMPLETE").sum()),
                       "total": len(self.trials)},
            "best": (None if self.best is None else
                     {**self.best, "values": _round(self.best["values"])}),
            "default": {"values": _round(self.default),
                        "params": {k: self.base.to_flat()[k] for k in self.space.keys}},
        }
        if self.pareto is not None:
            out["pareto"] = [{**p, "values": _round(p["values"])} for p in self.pareto]
        if self.folds is not None:
            out["folds"] = json.loads(json.dumps(self.folds, default=float))
        if self.test is not None:
            out["test"] = json.loads(json.dumps({**self.test, "best": _round(self.test["best"]),
                                                 "default": _round(self.test["default"])},
                                                default=float))
        if self.significance is not None:
            out["significance"] = {t: _round(v) for t, v in self.significance.items()}
        if self.paths:
            out["paths"] = dict(self.paths)
        out["environment"] = self.environment
        return out

    def write(self, out_dir: str | Path) -> dict[str, str]:
        """The best config as YAML (``memlab bench --config`` reads it), the trial table as CSV,
        the Pareto plot (several objectives): ``<out_dir>/<study>.*``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / self.study.study_name
        paths = {"best_config": f"{stem}.best.yaml", "trials": f"{stem}.trials.csv"}
        self.best_config.to_yaml(paths["best_config"])
        self.trials.to_csv(paths["trials"], index=False)
        if self.objective.multi:
            from memlab.tune import plots

            paths["pareto_plot"] = f"{stem}.pareto.png"
            plots.save(plots.pareto(self), paths["pareto_plot"])
        self.paths.update(paths)
        return paths

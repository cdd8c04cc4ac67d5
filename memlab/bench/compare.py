"""Two benchmark runs side by side, question by question (``memlab.compare``; issue 20, item 4).

A *run* is one preset's per-query results on one dataset. :func:`compare` takes two, each given
as one of:

- a :class:`memlab.bench.run.PresetResult` (``run_bench(...).results[i]``);
- a :class:`memlab.bench.run.BenchOutcome` holding one preset, or ``(outcome, "preset")``;
- a per-query DataFrame: index the question keys (``conversation::query``), one column per metric
  (:func:`memlab.bench.metrics.evaluate`), ``mrr`` or ``best_rank`` for the gold's best rank, and
  optionally ``category``, ``language`` and ``gold_age_days``; ``(frame, "name")`` names it;
- a path: a preset's folder of ``memlab bench --out-dir`` (its ``per_query.csv``), that file or a
  ``.parquet``/``.csv`` per-query file, or a run folder (``report.json`` beside the preset folders)
  or a ``memlab bench --json`` report holding one preset; ``(path, "preset")`` picks one of
  several.

Run ``a`` is the baseline: ``diff`` is b minus a, and a question is a ``win`` (b scores higher on
the metric), a ``tie`` or a ``loss``. The paired test is :func:`memlab.bench.significance.
compare_presets` (randomisation by default; the settings of ``bench.significance_*``), run again
on every subset a summary or filter makes. The two runs must hold the same questions (the error
names those in one only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from memlab.bench.significance import METHODS, compare_presets
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

__all__ = ["Run", "Comparison", "compare", "load_run", "per_question", "write_per_question",
           "OUTCOMES", "AGE_BINS", "NO_AGE"]

OUTCOMES = ("win", "tie", "loss")
#: gold-age bins in days of :meth:`Comparison.summary` ``by="gold_age"``
AGE_BINS: tuple[float, ...] = (0.0, 7.0, 14.0, 30.0, 90.0, float("inf"))
#: the gold-age group of a question whose gold has no age in the bins (none written by asked_at)
NO_AGE = "no gold yet / outside the bins"
_INFO = ("category", "language", "gold_age_days")


@dataclass(frozen=True)
class Run:
    """One preset's per-query results: ``per_query`` indexed by question key, with ``best_rank``
    (NA: no gold ranked) and whatever of category, language, gold_age_days the source had."""

    name: str
    per_query: pd.DataFrame
    dataset: str | None = None
    config: MemlabConfig | None = None


def _best_rank(frame: pd.DataFrame, where: str) -> pd.Series:
    if "best_rank" in frame.columns:
        return frame["best_rank"].astype("Int64")
    if "mrr" not in frame.columns:
        raise InvalidInput(where, "a per-query frame needs a 'best_rank' or an 'mrr' column (the "
                           "gold's best rank is 1/mrr)", list(map(str, frame.columns)))
    mrr = pd.to_numeric(frame["mrr"], errors="coerce").to_numpy(dtype=float)
    with np.errstate(divide="ignore"):
        rank = np.where(mrr > 0, np.rint(1.0 / mrr), np.nan)
    return pd.Series(pd.array(np.where(np.isnan(rank), None, rank), dtype="Int64"),
                     index=frame.index, name="best_rank")


def _from_frame(frame: pd.DataFrame, name: str, where: str, *, dataset: str | None = None,
                config: MemlabConfig | None = None, extra: dict[str, pd.Series] | None = None
                ) -> Run:
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInput(where, "a per-query DataFrame", type(frame).__name__)
    if frame.index.has_duplicates:
        raise InvalidInput(where, "one row per question: duplicated question keys",
                           list(frame.index[frame.index.duplicated()][:3]))
    pq = frame.copy()
    for col, values in (extra or {}).items():
        if col not in pq.columns:
            pq[col] = values.reindex(pq.index)
    pq["best_rank"] = _best_rank(pq, where)
    return Run(name, pq, dataset, config)


def _outcome_info(outcome) -> dict[str, pd.Series]:
    from memlab.bench.trace import gold_ages, question_languages

    return {"language": question_languages(outcome.dataset),
            "gold_age_days": gold_ages(outcome.dataset)}


def _pick(outcome, preset: str | None, where: str):
    names = [r.name for r in outcome.results]
    if preset is None:
        if len(names) != 1:
            raise InvalidInput(where, "this benchmark holds several presets; pass (outcome, "
                               "'<preset>') to pick one: " + ", ".join(names), names)
        return outcome.results[0]
    if preset not in names:
        raise InvalidInput(where, "no such preset in this benchmark; it holds "
                           + ", ".join(names), preset)
    return outcome.results[names.index(preset)]


def _read_frame(path: Path, where: str) -> pd.DataFrame:
    try:
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, index_col=0)
    except (OSError, ValueError) as exc:
        raise InvalidInput(where, f"cannot read the per-query file {path} ({exc})",
                           str(path)) from None


def _report(path: Path, where: str) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(where, f"cannot read the bench report {path} ({exc})",
                           str(path)) from None


def _from_report(report: dict[str, Any], run_dir: Path, preset: str | None, where: str) -> Run:
    names = list(report.get("presets") or [])
    folders = report.get("artifact_folders") or {n: n for n in names}
    if preset is None:
        if len(names) != 1:
            raise InvalidInput(where, "this run holds several presets; pass (path, '<preset>') "
                               "to pick one: " + ", ".join(names), str(run_dir))
        preset = names[0]
    if preset not in names:
        raise InvalidInput(where, "no such preset in this run; it holds " + ", ".join(names),
                           preset)
    return _from_path(run_dir / folders[preset], None, where, name=preset,
                      dataset=(report.get("dataset") or {}).get("name"))


def _from_path(path: Path, preset: str | None, where: str, *, name: str | None = None,
               dataset: str | None = None) -> Run:
    if path.is_file() and path.suffix == ".json":
        report = _report(path, where)
        if "artifacts" not in report:
            raise InvalidInput(where, "a bench JSON report (memlab bench --json) names its run "
                               "folder under 'artifacts'; this one does not", str(path))
        return _from_report(report, Path(report["artifacts"]), preset, where)
    if path.is_dir() and (path / "report.json").is_file():
        return _from_report(_report(path / "report.json", where), path, preset, where)
    if path.is_dir() and (path / "per_query.csv").is_file():
        parent = path.parent / "report.json"
        if dataset is None and parent.is_file():
            dataset = (_report(parent, where).get("dataset") or {}).get("name")
        path = path / "per_query.csv"
        name = name or path.parent.name
    elif not (path.is_file() and path.suffix in (".csv", ".parquet")):
        raise InvalidInput(where, "a preset folder (with per_query.csv), a run folder (with "
                           "report.json), a bench JSON report, or a .csv/.parquet per-query file",
                           str(path))
    frame = _read_frame(path, where)
    return _from_frame(frame, preset or name or path.stem, where, dataset=dataset)


def load_run(run: Any, *, where: str = "run") -> Run:
    """Any of the run forms of the module doc as a :class:`Run`; errors name ``where``."""
    from memlab.bench.run import BenchOutcome, PresetResult

    if isinstance(run, Run):
        return run
    preset = None
    if isinstance(run, tuple):
        if len(run) != 2 or not isinstance(run[1], str):
            raise InvalidInput(where, "a (run, 'preset name') pair", run)
        run, preset = run
    if isinstance(run, PresetResult):
        return _from_frame(run.per_query, preset or run.name, where, config=run.config)
    if isinstance(run, BenchOutcome):
        r = _pick(run, preset, where)
        return _from_frame(r.per_query, r.name, where, dataset=run.dataset.card.name,
                           config=r.config, extra=_outcome_info(run))
    if isinstance(run, pd.DataFrame):
        return _from_frame(run, preset or where, where)
    if isinstance(run, (str, Path)):
        return _from_path(Path(run), preset, where)
    raise InvalidInput(where, "a PresetResult, a BenchOutcome, a per-query DataFrame, a path "
                       "(preset folder, run folder, bench JSON, per-query file) or a "
                       "(run, 'preset') pair", type(run).__name__)


@dataclass
class Comparison:
    """Run ``b`` against run ``a`` question by question (:func:`compare`)."""

    a: str
    b: str
    metric: str
    dataset: str | None
    frame: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """One row per question: category, language, gold_age_days (those the runs have),
        ``best_rank_a``, ``best_rank_b`` (NA: no gold ranked), ``<metric>_a``, ``<metric>_b``,
        ``diff`` (b - a) and ``outcome`` (win, tie or loss for b)."""
        return self.frame

    @property
    def test(self) -> pd.Series:
        """The paired test over every question: n, mean_a, mean_b, diff, p, wins, ties, losses."""
        return self._row(self.frame)

    def _row(self, frame: pd.DataFrame) -> pd.Series:
        ma, mb = f"{self.metric}_a", f"{self.metric}_b"
        sig = compare_presets({"a": frame[[ma]].rename(columns={ma: "m"}),
                               "b": frame[[mb]].rename(columns={mb: "m"})},
                              metrics=["m"], **self.settings)
        counts = frame["outcome"].value_counts().reindex(list(OUTCOMES), fill_value=0)
        return pd.Series({"n": len(frame), "mean_a": sig.loc[("a", "m"), "mean"],
                          "mean_b": sig.loc[("b", "m"), "mean"],
                          "diff": sig.loc[("b", "m"), "diff"], "p": sig.loc[("b", "m"), "p"],
                          "wins": counts["win"], "ties": counts["tie"],
                          "losses": counts["loss"]})

    def summary(self, by: str | None = None, *,
                bins: Sequence[float] = AGE_BINS) -> pd.DataFrame:
        """The paired test and win/tie/loss counts overall (row ``all``) and, with ``by``
        (``category``, ``language``, ``gold_age``: binned by ``bins`` days, or another column of
        ``to_frame()``), per group in sorted order; each group's p-value from its own
        questions."""
        rows = {"all": self._row(self.frame)}
        if by is not None:
            for group, sub in self._groups(by, bins):
                rows[group] = self._row(sub)
        out = pd.DataFrame(rows).T
        for c in ("n", "wins", "ties", "losses"):
            out[c] = out[c].astype(int)
        out.index.name = by or "questions"
        return out

    def _groups(self, by: str, bins: Sequence[float]):
        if by == "gold_age":
            ages = self._column("gold_age_days")
            cut = pd.cut(ages, bins=list(bins), right=False)
            groups = [(f"{iv.left:g}-{iv.right:g} d", self.frame[cut == iv])
                      for iv in cut.cat.categories if (cut == iv).any()]
            return groups + ([(NO_AGE, self.frame[cut.isna()])] if cut.isna().any() else [])
        values = self._column(by)
        return [(str(g), self.frame[values == g])
                for g in sorted(pd.unique(values.dropna()), key=str)]

    def _column(self, name: str) -> pd.Series:
        if name not in self.frame.columns or self.frame[name].isna().all():
            have = [c for c in _INFO if c in self.frame.columns
                    and not self.frame[c].isna().all()]
            raise InvalidInput("by" if name != "gold_age_days" else "gold_age",
                               f"the runs carry no {name!r} per question; they have: "
                               + (", ".join(have) or "none of category, language, gold_age_days"),
                               name)
        return self.frame[name]

    def filter(self, *, category: str | Sequence[str] | None = None,
               language: str | Sequence[str] | None = None,
               min_age_days: float | None = None,
               max_age_days: float | None = None) -> Comparison:
        """The comparison on the questions of these categories and languages whose gold is at
        least ``min_age_days`` and under ``max_age_days`` old."""
        keep = pd.Series(True, index=self.frame.index)
        for name, want in (("category", category), ("language", language)):
            if want is not None:
                values = [want] if isinstance(want, str) else list(want)
                keep &= self._column(name).astype(str).isin([str(v) for v in values])
        if min_age_days is not None:
            keep &= self._column("gold_age_days") >= min_age_days
        if max_age_days is not None:
            keep &= self._column("gold_age_days") < max_age_days
        if not keep.any():
            raise InvalidInput("filter", "leaves no question", {
                "category": category, "language": language, "min_age_days": min_age_days,
                "max_age_days": max_age_days})
        return replace(self, frame=self.frame[keep])

    def plot(self, *, by: str | None = "category", ax=None, **kwargs):
        """:func:`memlab.bench.missplots.win_tie_loss_bars` of this comparison."""
        from memlab.bench.missplots import win_tie_loss_bars

        return win_tie_loss_bars(self, by=by, ax=ax, **kwargs)

    def __str__(self) -> str:
        t = self.test
        return (f"{self.b} vs {self.a} on {self.dataset or 'a dataset'}, {self.metric} per "
                f"question ({int(t['n'])}): {int(t['wins'])} wins, {int(t['ties'])} ties, "
                f"{int(t['losses'])} losses; mean {t['mean_b']:.3f} vs {t['mean_a']:.3f} "
                f"(diff {t['diff']:+.3f}, paired {self.settings['method']} p = {t['p']:.4f})")


def _settings(cfg: MemlabConfig | None, method, resamples, seed) -> dict[str, Any]:
    b = (cfg or MemlabConfig()).bench
    out = {"method": b.significance_test if method is None else method,
           "resamples": b.significance_resamples if resamples is None else resamples,
           "seed": b.significance_seed if seed is None else seed}
    if out["method"] not in METHODS:
        raise InvalidInput("method", "one of " + ", ".join(METHODS), out["method"])
    return out


def compare(run_a: Any, run_b: Any, *, metric: str = "recall@10", dataset: str | None = None,
            method: str | None = None, resamples: int | None = None,
            seed: int | None = None) -> Comparison:
    """Compare ``run_b`` with the baseline ``run_a`` question by question.

    Args:
        run_a, run_b: runs in any form of the module doc (a PresetResult, a BenchOutcome or
            ``(outcome, "preset")``, a per-query DataFrame, a results path).
        metric: the per-query column compared (higher is better): win, tie, loss and the test.
        dataset: the dataset's name for titles (default: what the runs say).
        method, resamples, seed: the paired test's settings (default: ``bench.significance_*``
            of run_a's config, or of the defaults).

    Returns a :class:`Comparison`: ``to_frame()`` one row per question, ``summary(by=...)``,
    ``filter(...)``, ``test``, ``plot(ax=...)``.
    """
    a, b = load_run(run_a, where="run_a"), load_run(run_b, where="run_b")
    for run, where in ((a, "run_a"), (b, "run_b")):
        if metric not in run.per_query.columns:
            numeric = [c for c in run.per_query.columns
                       if pd.api.types.is_float_dtype(run.per_query[c])]
            raise InvalidInput("metric", f"not a per-query column of {where} ({run.name}); it "
                               "has " + ", ".join(map(str, numeric)), metric)
    settings = _settings(a.config, method, resamples, seed)
    # the test validates the pairing: the same questions, no NaN (the error names them)
    compare_presets({f"run_a ({a.name})": a.per_query, f"run_b ({b.name})": b.per_query},
                    metrics=[metric], **settings)
    qa, qb = a.per_query, b.per_query.loc[a.per_query.index]
    frame = pd.DataFrame(index=qa.index)
    for col in _INFO:
        if col in qa.columns or col in qb.columns:
            va = qa[col] if col in qa.columns else pd.Series(np.nan, index=qa.index)
            vb = qb[col] if col in qb.columns else pd.Series(np.nan, index=qa.index)
            frame[col] = va.where(va.notna(), vb)
    frame["best_rank_a"], frame["best_rank_b"] = qa["best_rank"], qb["best_rank"]
    va, vb = qa[metric].astype(float), qb[metric].astype(float)
    frame[f"{metric}_a"], frame[f"{metric}_b"] = va, vb
    frame["diff"] = vb - va
    frame["outcome"] = pd.Categorical(np.select([vb > va, vb < va], ["win", "loss"], "tie"),
                                      categories=list(OUTCOMES))
    frame.index.name = "question"
    frame.attrs = {"a": a.name, "b": b.name, "metric": metric}
    return Comparison(a.name, b.name, metric, dataset or a.dataset or b.dataset, frame, settings)


def per_question(outcome, *, metric: str | None = None) -> pd.DataFrame:
    """Every preset of a bench run question by question (what ``memlab bench --per-query``
    writes): category, language, gold_age_days, then per preset ``best_rank:<preset>`` and
    ``<metric>:<preset>``, and for each preset after the first ``outcome:<preset>`` (win, tie or
    loss against the first). ``metric`` default: ``recall@<bench.k>`` of the first preset
    (``recall@<max(bench.ks)>`` when bench.k is not one of bench.ks)."""
    first = outcome.results[0]
    if metric is None:
        b = first.config.bench
        metric = f"recall@{b.k if b.k in b.ks else max(b.ks)}"
    base = load_run((outcome, first.name))
    frame = base.per_query[[c for c in _INFO if c in base.per_query.columns]].copy()
    for r in outcome.results:
        if r is not first:
            c = compare((outcome, first.name), (outcome, r.name), metric=metric, resamples=1)
            frame[f"best_rank:{r.name}"] = c.frame["best_rank_b"]
            frame[f"{metric}:{r.name}"] = c.frame[f"{metric}_b"]
            frame[f"outcome:{r.name}"] = c.frame["outcome"].astype(str)
        else:
            frame[f"best_rank:{r.name}"] = base.per_query["best_rank"]
            if metric not in base.per_query.columns:
                raise InvalidInput("metric", "not a per-query column of the benchmark", metric)
            frame[f"{metric}:{r.name}"] = base.per_query[metric]
    frame.index.name = "question"
    frame.attrs = {"dataset": outcome.dataset.card.name, "metric": metric,
                   "baseline": first.name}
    return frame


def write_per_question(frame: pd.DataFrame, path: str | Path, *,
                       where: str = "per_query") -> Path:
    """Write :func:`per_question`'s frame (or another per-question frame) as Parquet
    (``.parquet``) or CSV (``.csv``), whole or not at all; ``where`` names the option in
    errors."""
    from memlab.files import write_atomic

    out = Path(path)
    if out.suffix not in (".parquet", ".csv"):
        raise InvalidInput(where, "a .parquet or .csv file name", str(path))
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        write_atomic(out, frame.to_csv())
    else:
        tmp = out.with_name(f".{out.name}.tmp")
        try:
            frame.to_parquet(tmp)
            tmp.replace(out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return out

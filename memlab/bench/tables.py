"""The README's benchmark tables, regenerated from the bench reports' JSON.

``memlab bench --json FILE`` (and every run folder's ``report.json``, and
``BenchOutcome.to_json()``) holds each preset's overall metrics and per-category metrics. These
functions turn one report into the tables the README prints:

- :func:`overall_table`: one row per preset (``reverie``, ``cosine``, ...), one column per metric
  (``R@5``, ``R@10``, ``nDCG@10``, ``MRR``, session metrics when present), the anchors of the
  dataset below (:mod:`memlab.bench.anchors`);
- :func:`per_category_table`: one row per category (named where the source numbers them:
  LoCoMo's ``1`` is ``multi-hop``), one column per preset and ``n``;
- :func:`to_markdown`: a table as the README's pipe table, three decimals, the best preset of
  each column in bold.

Nothing here runs a benchmark: a table is as old as its JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from memlab.errors import InvalidInput

__all__ = ["HEADERS", "read_report", "overall_table", "per_category_table", "to_markdown"]

#: metric -> the README's column header
HEADERS = {"recall@1": "R@1", "recall@5": "R@5", "recall@10": "R@10", "recall@20": "R@20",
           "ndcg@10": "nDCG@10", "mrr": "MRR", "session_recall@5": "session R@5",
           "session_recall@10": "session R@10"}


def read_report(report: Any) -> dict[str, Any]:
    """A bench report as a dict: from a dict, a :class:`~memlab.bench.run.BenchOutcome`, a
    ``--json`` file or a run folder (its ``report.json``)."""
    if isinstance(report, Mapping):
        out = dict(report)
    elif hasattr(report, "to_json") and hasattr(report, "results"):
        out = report.to_json()
    elif isinstance(report, (str, Path)):
        p = Path(report)
        if p.is_dir():
            p = p / "report.json"
        try:
            out = json.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InvalidInput("report", f"cannot be read: {exc.strerror or exc}", str(p)) \
                from None
        except json.JSONDecodeError as exc:
            raise InvalidInput("report", f"is not JSON ({exc.msg}, line {exc.lineno})",
                               str(p)) from None
    else:
        raise InvalidInput("report", "a bench report: a dict, a BenchOutcome, a JSON file or a "
                           "run folder", type(report).__name__)
    for key in ("dataset", "presets", "metrics"):
        if key not in out:
            raise InvalidInput("report", f"is not a bench report: no {key!r} key",
                               sorted(out)[:8])
    return out


def _by_preset(report: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``report[key]`` per preset (a single-preset report stores it unnested)."""
    presets = list(report["presets"])
    value = report.get(key) or {}
    if len(presets) == 1 and not (isinstance(value, Mapping) and presets[0] in value
                                  and isinstance(value[presets[0]], Mapping)):
        return {presets[0]: value}
    return {p: value.get(p, {}) for p in presets}


def overall_table(report: Any, *, metrics: Sequence[str] = ("recall@5", "recall@10", "ndcg@10",
                                                            "mrr"),
                  anchors: Any = None, categories: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per preset of ``report`` (:func:`read_report`), one column per metric; with
    ``anchors`` (:class:`~memlab.bench.anchors.Anchors`), the dataset's anchors as rows below
    (``anchor: <method> (<source>)``; NaN where the source reports no such metric).
    ``categories``: the report's question categories, to pick the anchors that cover exactly
    them (default: the report's per-category keys)."""
    rep = read_report(report)
    rows = {}
    for preset, values in _by_preset(rep, "metrics").items():
        rows[preset] = {m: float(values[m]) if m in values else math.nan for m in metrics}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=list(metrics))
    frame["kind"] = "memlab"
    if anchors is not None:
        if categories is None:
            cats = set()
            for per in _by_preset(rep, "per_category").values():
                cats |= set(per)
            categories = sorted(cats) or None
        for a in anchors.for_dataset(rep["dataset"]["name"], categories):
            frame.loc[a.label] = {**{m: a.metrics.get(m, math.nan) for m in metrics},
                                  "kind": a.kind + ("" if a.comparable else ", not comparable")}
    frame.attrs = {"dataset": rep["dataset"]["name"], "version": rep["dataset"].get("version"),
                   "questions": rep["dataset"].get("questions")}
    return frame


def per_category_table(report: Any, *, metric: str = "recall@10",
                       names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per category of ``report``, one column per preset (``metric``), then ``n``;
    categories in sorted order, labelled ``names[c]`` where given (e.g.
    ``Dataset.category_names()`` or :data:`memlab.bench.datasets.locomo.CATEGORY_NAMES`)."""
    rep = read_report(report)
    per = _by_preset(rep, "per_category")
    cats = sorted({c for values in per.values() for c in values})
    if not cats:
        raise InvalidInput("report", "has no per-category metrics", rep["dataset"]["name"])
    frame = pd.DataFrame(index=cats)
    n = {}
    for preset, values in per.items():
        frame[preset] = [float(values[c][metric]) if c in values and metric in values[c]
                         else math.nan for c in cats]
        for c in cats:
            if c in values and "n" in values[c]:
                n.setdefault(c, int(values[c]["n"]))
    frame["n"] = [n.get(c, 0) for c in cats]
    labels = {str(k): str(v) for k, v in (names or {}).items()}
    frame.index = [labels.get(str(c), str(c)) for c in cats]
    frame.attrs = {"dataset": rep["dataset"]["name"], "metric": metric}
    return frame


def _cell(value: Any, digits: int, bold: bool, *, whole: bool = False) -> str:
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        if math.isnan(value):
            return ""
        text = f"{int(value)}" if whole else f"{value:.{digits}f}"
    else:
        text = str(value)
    return f"**{text}**" if bold else text


def _best(values: pd.Series, digits: int) -> set:
    """The labels of ``values`` (numbers) equal to their maximum at ``digits`` decimals; none
    when every value is the same (nothing stands out) or none is a number."""
    col = pd.to_numeric(values, errors="coerce").dropna().round(digits)
    if col.empty or col.nunique() < 2:
        return set()
    return set(col.index[col == col.max()])


def to_markdown(frame: pd.DataFrame, *, digits: int = 3, first: str = "preset",
                bold: str | None = "column", headers: Mapping[str, str] | None = None) -> str:
    """``frame`` as a pipe table (the README's style): the index as the first column (headed
    ``first``), numbers with ``digits`` decimals (the ``n`` column as whole numbers), NaN blank,
    a ``kind`` column not shown. ``bold``: ``"column"`` marks the highest value of each column
    among the rows of kind ``memlab`` (every row without a ``kind`` column): the best preset per
    metric (:func:`overall_table`); ``"row"``: the highest of each row (not ``n``): the best
    preset per category (:func:`per_category_table`); None: nothing."""
    if bold not in ("column", "row", None):
        raise InvalidInput("bold", "column, row or None", bold)
    heads = {**HEADERS, **(headers or {})}
    shown = [c for c in frame.columns if c != "kind"]
    numeric = [c for c in shown if c != "n"]
    mine = (frame["kind"] == "memlab") if "kind" in frame.columns \
        else pd.Series(True, index=frame.index)
    marked: set[tuple[Any, Any]] = set()
    if bold == "column":
        for c in numeric:
            marked |= {(r, c) for r in _best(frame.loc[mine, c], digits)}
    elif bold == "row":
        for r in frame.index[mine.to_numpy()]:
            marked |= {(r, c) for c in _best(frame.loc[r, numeric], digits)}
    lines = ["| " + " | ".join([first, *(heads.get(str(c), str(c)) for c in shown)]) + " |",
             "|" + "---|" * (len(shown) + 1)]
    for label in frame.index:
        cells = [str(label)] + [_cell(frame.at[label, c], digits, (label, c) in marked,
                                      whole=c == "n") for c in shown]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

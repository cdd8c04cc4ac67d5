"""Published and reference figures to read memlab's benchmarks beside: the anchors.

They are data, not code: ``memlab/data/anchors.yaml`` (one entry per source, method and dataset,
each with its level, the memlab preset that runs the same method, whether the setting is
comparable, and its metrics). :func:`load_anchors` reads and checks the file and returns
:class:`Anchors`: ``.to_frame()`` has one row per (anchor, metric); ``.beside(outcome)`` puts a
benchmark's presets and the anchors of its dataset in one table.

    >>> from memlab.bench.anchors import load_anchors
    >>> load_anchors().for_dataset("locomo", categories=["1", "2", "3", "4"])   # doctest: +SKIP

An anchor covers a dataset as memlab's loader names it (the card name: ``locomo``,
``madial-zh``, ...) and, optionally, a set of question categories (LoCoMo's figures are for
categories 1-4): it matches a run whose questions' categories are exactly those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from memlab.errors import DatasetError, InvalidInput

__all__ = ["Anchor", "Anchors", "ANCHORS_FILE", "KINDS", "LEVELS", "load_anchors"]

#: the anchors shipped with memlab
ANCHORS_FILE = Path(__file__).resolve().parents[1] / "data" / "anchors.yaml"
#: published: a paper's figure; design: measured and recorded in memlab's DESIGN.md
KINDS = ("published", "design")
#: what the anchor's method ranked
LEVELS = ("turn", "round", "session", "entry", "message")
_FIELDS = {"dataset", "categories", "level", "method", "preset", "kind", "comparable", "source",
           "note", "metrics"}
_REQUIRED = ("dataset", "level", "method", "kind", "comparable", "source", "metrics")


@dataclass(frozen=True)
class Anchor:
    """One source's figures for one method on one dataset."""

    dataset: str
    level: str
    method: str
    kind: str
    comparable: bool
    source: str
    metrics: Mapping[str, float]
    categories: tuple[str, ...] | None = None
    preset: str | None = None
    note: str = ""

    @property
    def label(self) -> str:
        """A table's row label: ``anchor: <method> (<source up to its first comma>)``."""
        return f"anchor: {self.method} ({self.source.split(',')[0].split(' (')[0]})"

    def covers(self, dataset: str, categories: Iterable[str] | None = None) -> bool:
        """Whether this anchor is for ``dataset`` with exactly ``categories`` (None: any)."""
        if dataset != self.dataset:
            return False
        if self.categories is None or categories is None:
            return True
        return set(map(str, categories)) == set(self.categories)


def _fail(file: Path, where: str, rule: str, value: Any = None) -> DatasetError:
    return DatasetError(str(file), rule, field=where, value=value)


def _check(entry: Any, i: int, file: Path) -> Anchor:
    where = f"anchors[{i}]"
    if not isinstance(entry, Mapping):
        raise _fail(file, where, "must be a mapping of the anchor's fields", type(entry).__name__)
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise _fail(file, f"{where}.{unknown[0]}", f"unknown field; the fields are "
                    f"{', '.join(sorted(_FIELDS))}", unknown[0])
    for key in _REQUIRED:
        if key not in entry or entry[key] is None:
            raise _fail(file, f"{where}.{key}", "is required")
    for key in ("dataset", "method", "source"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise _fail(file, f"{where}.{key}", "must be a non-empty string", entry[key])
    if entry["level"] not in LEVELS:
        raise _fail(file, f"{where}.level", f"must be one of {', '.join(LEVELS)}", entry["level"])
    if entry["kind"] not in KINDS:
        raise _fail(file, f"{where}.kind", f"must be one of {', '.join(KINDS)}", entry["kind"])
    if not isinstance(entry["comparable"], bool):
        raise _fail(file, f"{where}.comparable", "must be true or false", entry["comparable"])
    metrics = entry["metrics"]
    if not isinstance(metrics, Mapping) or not metrics:
        raise _fail(file, f"{where}.metrics", "must map at least one metric name to its value",
                    metrics)
    for name, value in metrics.items():
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and 0.0 <= value <= 1.0)
        if not ok:
            raise _fail(file, f"{where}.metrics.{name}", "must be a number in [0, 1] (a "
                        "fraction, not a percentage)", value)
    cats = entry.get("categories")
    if cats is not None and (not isinstance(cats, list) or not cats
                             or any(isinstance(c, bool) for c in cats)):
        raise _fail(file, f"{where}.categories", "must be a non-empty list of the question "
                    "categories the figures cover, or null", cats)
    preset = entry.get("preset")
    if preset is not None and (not isinstance(preset, str) or not preset.strip()):
        raise _fail(file, f"{where}.preset", "must be a preset's name or null", preset)
    return Anchor(dataset=entry["dataset"], level=entry["level"], method=entry["method"],
                  kind=entry["kind"], comparable=entry["comparable"], source=entry["source"],
                  metrics={str(k): float(v) for k, v in metrics.items()},
                  categories=None if cats is None else tuple(str(c) for c in cats),
                  preset=preset, note=str(entry.get("note") or ""))


@dataclass(frozen=True)
class Anchors:
    """The anchors of one file."""

    anchors: tuple[Anchor, ...]
    file: str = field(default=str(ANCHORS_FILE))

    def __len__(self) -> int:
        return len(self.anchors)

    def __iter__(self):
        return iter(self.anchors)

    def to_frame(self) -> pd.DataFrame:
        """One row per (anchor, metric): dataset, categories, level, method, preset, kind,
        comparable, metric, value, source, note."""
        rows = [{"dataset": a.dataset,
                 "categories": None if a.categories is None else ",".join(a.categories),
                 "level": a.level, "method": a.method, "preset": a.preset, "kind": a.kind,
                 "comparable": a.comparable, "metric": m, "value": v, "source": a.source,
                 "note": a.note}
                for a in self.anchors for m, v in a.metrics.items()]
        return pd.DataFrame(rows, columns=["dataset", "categories", "level", "method", "preset",
                                           "kind", "comparable", "metric", "value", "source",
                                           "note"])

    def for_dataset(self, dataset: str, categories: Iterable[str] | None = None) -> "Anchors":
        """The anchors of ``dataset`` (a card name) whose categories are ``categories``."""
        cats = None if categories is None else list(categories)
        return Anchors(tuple(a for a in self.anchors if a.covers(dataset, cats)), self.file)

    def beside(self, outcome, *, metrics: Sequence[str] | None = None,
               comparable_only: bool = False) -> pd.DataFrame:
        """A benchmark's presets (overall row of each aggregate) and the anchors of its dataset,
        one row each, one column per metric; an anchor leaves blank (NaN) what its source does
        not report. Columns ``kind`` (``memlab``, ``published``, ``design``), ``preset`` (the
        preset an anchor runs the same method as) and ``comparable``.

        ``outcome``: a :class:`memlab.bench.run.BenchOutcome`. ``metrics``: the columns (default:
        every metric an anchor of the dataset reports, then recall@10 and ndcg@10).
        ``comparable_only``: leave out anchors marked not comparable."""
        if not (hasattr(outcome, "results") and hasattr(outcome, "dataset")):
            raise InvalidInput("outcome", "a benchmark outcome (memlab.bench(...) or run_bench)",
                               type(outcome).__name__)
        ds = outcome.dataset
        mine = self.for_dataset(ds.card.name, {q.category for q in ds.questions if q.evidence})
        chosen = [a for a in mine if a.comparable or not comparable_only]
        if metrics is None:
            metrics = list(dict.fromkeys([m for a in chosen for m in a.metrics]
                                         + ["recall@10", "ndcg@10"]))
        rows = []
        for r in outcome.results:
            overall = r.aggregate.loc["all"]
            if r.session_aggregate is not None:
                overall = pd.concat([overall, r.session_aggregate.loc["all"].add_prefix(
                    "session_")])
            rows.append({"row": r.name, "kind": "memlab", "preset": r.name, "comparable": True,
                         **{m: float(overall[m]) if m in overall.index else math.nan
                            for m in metrics}})
        for a in chosen:
            rows.append({"row": a.label, "kind": a.kind, "preset": a.preset,
                         "comparable": a.comparable,
                         **{m: a.metrics.get(m, math.nan) for m in metrics}})
        frame = pd.DataFrame(rows).set_index("row").rename_axis(None)
        frame.attrs = {"dataset": ds.card.name, "anchors": len(chosen)}
        return frame


def load_anchors(path: str | Path | None = None) -> Anchors:
    """The anchors of ``path`` (default: memlab's :data:`ANCHORS_FILE`), checked: a malformed
    entry is a :class:`~memlab.errors.DatasetError` naming the file, the entry's field
    (``anchors[2].metrics.recall@10``) and the rule."""
    from memlab.yamlfile import read_yaml

    file = Path(path) if path is not None else ANCHORS_FILE
    doc = read_yaml(file, "anchors file")
    if not isinstance(doc, Mapping) or not isinstance(doc.get("anchors"), list):
        raise _fail(file, "anchors", "the file must hold a mapping with a list 'anchors'",
                    type(doc).__name__)
    if doc.get("version") != 1:
        raise _fail(file, "version", "must be 1", doc.get("version"))
    return Anchors(tuple(_check(e, i, file) for i, e in enumerate(doc["anchors"])), str(file))

"""Where the gold is lost, over a whole dataset and several presets (``memlab explain-misses``).

:func:`explain_misses` loads a dataset, replays it once per candidate configuration (through the
feature cache, as ``memlab bench`` does) and traces every question under every preset
(:func:`memlab.bench.trace.trace_replay`). The :class:`MissReport` it returns has one row per
(preset, question) (``to_frame()``), a table of questions per stage and preset (``summary()``,
optionally per category or language), one question's trace (``question()``) and a bar chart
(``plot()``: :func:`memlab.bench.missplots.where_lost_bars`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from memlab.bench.compare import AGE_BINS, NO_AGE
from memlab.bench.datasets import registry
from memlab.bench.featcache import features_key
from memlab.bench.replay import Replayed
from memlab.bench.trace import MISS_STAGES, STAGES, QuestionTrace, StageTrace, trace_replay
from memlab.config import MemlabConfig, load_config
from memlab.errors import ConfigError, DatasetError, InvalidInput

__all__ = ["MissReport", "explain_misses", "resolve_presets"]

PresetSpec = str | tuple[str, MemlabConfig]


def resolve_presets(presets: Sequence[PresetSpec], *,
                    overrides: Mapping[str, Any] | None = None) -> list[tuple[str, MemlabConfig]]:
    """Preset names or YAML paths (loaded with ``overrides``) and ``(name, config)`` pairs (kept
    as given) -> ``(name, config)`` pairs; names must be distinct."""
    from memlab.bench.run import resolve_preset

    if isinstance(presets, (str, bytes)) or not len(presets):
        raise InvalidInput("presets", "a non-empty list of preset names, YAML paths or "
                           "(name, MemlabConfig) pairs", presets)
    out = []
    for p in presets:
        if isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], MemlabConfig):
            out.append((str(p[0]), p[1]))
        elif isinstance(p, str):
            name, path = resolve_preset(p)
            out.append((name, load_config(path, overrides=dict(overrides or {}))))
        else:
            raise InvalidInput("presets", "each a preset name, a YAML path or a (name, "
                               "MemlabConfig) pair", p)
    names = [n for n, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidInput("presets", "preset names must be distinct", dup)
    return out


@dataclass
class MissReport:
    """The stage traces of one dataset under several presets (:func:`explain_misses`)."""

    dataset: str
    traces: dict[str, StageTrace]

    @property
    def presets(self) -> list[str]:
        return list(self.traces)

    def to_frame(self) -> pd.DataFrame:
        """One row per (preset, question): stage, best_rank, category, language,
        gold_age_days, ... (:attr:`StageTrace.questions`), indexed by (preset, question)."""
        return pd.concat({p: t.questions for p, t in self.traces.items()},
                         names=["preset", "question"])

    def summary(self, *, by: str | None = None, share: bool = False,
                misses_only: bool = False, bins: Sequence[float] = AGE_BINS) -> pd.DataFrame:
        """Questions per stage (columns, :data:`STAGES` order) for each preset (rows); ``by``
        (``category``, ``language``, ``gold_age``: the gold's age binned by ``bins`` days, the
        questions without an age in the bins under :data:`NO_AGE`; or
        another column of ``to_frame()``) adds a row level; ``misses_only`` drops the ``found``
        column; ``share`` divides each row by its total (with ``misses_only``: the share of the
        misses)."""
        frame = self.to_frame().reset_index()
        if by == "gold_age":
            if "gold_age_days" not in frame.columns:
                raise InvalidInput("by", "gold_age needs the dataset's gold ages", by)
            cut = pd.cut(frame["gold_age_days"], bins=list(bins), right=False)
            cut = cut.cat.rename_categories(
                [f"{iv.left:g}-{iv.right:g} d" for iv in cut.cat.categories])
            # no age: no gold written by asked_at (or an age outside the bins), said by name
            frame["gold_age"] = cut.cat.add_categories([NO_AGE]).fillna(NO_AGE)
        if by is not None and by not in frame.columns:
            raise InvalidInput("by", "a column of the report's frame: "
                               + ", ".join(c for c in frame.columns if c != "stage"), by)
        keys = ["preset"] + ([by] if by else [])
        stages = list(MISS_STAGES if misses_only else STAGES)
        frame = frame[frame["stage"].isin(stages)]
        groups = frame.groupby(keys, sort=True, observed=True, dropna=False)   # groups in order
        table = (groups["stage"].value_counts().unstack("stage").reindex(columns=stages)
                 .fillna(0).astype(int))
        table.columns.name = "stage"
        order = [p for p in self.presets if p in table.index.get_level_values("preset")]
        table = table.reindex(order, level="preset") if by else table.reindex(order)
        if share:
            total = table.sum(axis=1).replace(0, pd.NA)
            table = table.div(total, axis=0).astype(float)
        return table

    def question(self, key: str, preset: str | None = None) -> QuestionTrace | dict[str,
                                                                                   QuestionTrace]:
        """One question's trace under ``preset``, or under every preset (a dict)."""
        if preset is not None:
            if preset not in self.traces:
                raise InvalidInput("preset", "one of " + ", ".join(self.presets), preset)
            return self.traces[preset].question(key)
        return {p: t.question(key) for p, t in self.traces.items()}

    def plot(self, *, ax=None, **kwargs):
        """:func:`memlab.bench.missplots.where_lost_bars` of this report."""
        from memlab.bench.missplots import where_lost_bars

        return where_lost_bars(self, ax=ax, **kwargs)


def explain_misses(*, dataset: str, presets: Sequence[PresetSpec], path: str | None = None,
                   dataset_options: Mapping[str, Any] | None = None, limit: int | None = None,
                   k: int | None = None, overrides: Mapping[str, Any] | None = None,
                   embedder=None, lexical_only: bool = False,
                   progress: bool = False) -> MissReport:
    """Trace every question of ``dataset`` under each of ``presets``.

    Args:
        dataset: a registered name (``memlab datasets list``) or a canonical folder.
        presets: preset names, YAML paths or ``(name, MemlabConfig)`` pairs; they must share the
            embedder. Presets that share candidate settings share one replay.
        path, dataset_options: where the named dataset's files are and its loader's options
            (e.g. ``{"categories": [1, 2, 3, 4]}`` for LoCoMo).
        limit: only the first ``limit`` questions (and the conversations they need).
        k: the cut-off (default each preset's ``bench.k``).
        overrides: ``{"key": value}`` config overrides applied to presets given by name.
        embedder: the embedder (default: made from the first preset; none when no preset uses
            the dense route or with ``lexical_only``).
        lexical_only: every preset runs with ``recall.use_dense`` false (no embedder).
        progress: progress bars of the replay.
    """
    from memlab.bench.run import open_cache, replay_cached
    from memlab.embed import make_embedder

    pairs = resolve_presets(presets, overrides=overrides)
    if lexical_only:
        pairs = [(n, c.replace(**{"recall.use_dense": False})) for n, c in pairs]
    versions = {c.embedding.model_dump_json() for _, c in pairs}
    if len(versions) > 1:
        raise ConfigError("embedding", "presets traced together must share the embedder",
                          sorted(versions))
    ds = registry.load(dataset, path=path, **dict(dataset_options or {}))
    if limit is not None:
        ds = ds.subset(limit_questions=limit)
    if not any(q.evidence for q in ds.questions):
        raise DatasetError(ds.report.questions_file or str(dataset),
                           "has no question with gold evidence: nothing to trace")
    base = pairs[0][1]
    if embedder is None and any(c.recall.use_dense for _, c in pairs):
        embedder = make_embedder(base)
    cache = open_cache(base)
    replays: dict[str, Replayed] = {}
    traces: dict[str, StageTrace] = {}
    try:
        for name, cfg in pairs:
            key = features_key(cfg)
            if key not in replays:
                replays[key] = replay_cached(ds, cfg, embedder=embedder, cache=cache,
                                             progress=progress)
            traces[name] = trace_replay(replays[key], cfg, k=k, ds=ds, preset=name)
    finally:
        cache.close()
    return MissReport(ds.card.name, traces)

"""What a sweep optimises: one or more columns of :func:`memlab.tune.evaluate.per_query`, reduced
over a set of questions, and the evaluator that scores a configuration on one dataset.

An objective spec is a comma list of per-query columns, each maximised, or minimised with a
leading minus: ``ndcg@10``, ``recall@5,-prompt_chars``. The value of a column is its mean over the
questions, or with ``macro`` the mean of its per-category means (each category counts once).

:class:`Evaluator` keeps one replay per features key (:func:`memlab.bench.run.features_key`) in a
small in-process dict (the ``max_replays`` most recently used): a trial whose candidate-stage keys
match an earlier one re-scores that replay; a new key reads the feature cache on disk (memory-
mapped), or replays once and writes it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Sequence

import pandas as pd

from memlab.bench.datasets.canonical import Dataset
from memlab.bench.replay import Replayed
from memlab.bench.run import features_key, replay_cached
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.tune.evaluate import LEVELS, QueryScores, item_sessions, per_query_scores

__all__ = ["Objective", "Evaluator", "NOT_OBJECTIVES"]

#: per_query columns that are not numbers to optimise
NOT_OBJECTIVES = ("category", "conversation_id")


@dataclass(frozen=True)
class Objective:
    """Columns of ``per_query`` and their directions (``maximize``/``minimize``)."""

    columns: tuple[str, ...]
    directions: tuple[str, ...]

    @classmethod
    def parse(cls, spec: str | Sequence[str]) -> "Objective":
        parts = spec.split(",") if isinstance(spec, str) else list(spec)
        parts = [p.strip() for p in parts if p and p.strip()]
        if not parts:
            raise InvalidInput("objective", "name at least one per-query column, e.g. ndcg@10 "
                               "or ndcg@10,-prompt_chars", spec)
        cols = tuple(p.lstrip("-+").strip() for p in parts)
        if len(set(cols)) != len(cols):
            raise InvalidInput("objective", "a column appears twice", spec)
        dirs = tuple("minimize" if p.startswith("-") else "maximize" for p in parts)
        return cls(cols, dirs)

    @property
    def multi(self) -> bool:
        return len(self.columns) > 1

    @property
    def label(self) -> str:
        return ",".join(("-" if d == "minimize" else "") + c
                        for c, d in zip(self.columns, self.directions))

    def check(self, frame: pd.DataFrame) -> None:
        """Every column must be a numeric column of ``frame`` (a per_query result)."""
        known = [c for c in frame.columns if c not in NOT_OBJECTIVES]
        for c in self.columns:
            if c not in known:
                raise InvalidInput("objective", f"{c!r} is not a per-query column; known: "
                                   f"{', '.join(known)} (cut-offs come from bench.ks)", c)


class Evaluator:
    """Scores configurations on one dataset: per-query frames and objective values.

    ``level``: item or session (``per_query``'s); ``macro``: mean of per-category means;
    ``embedder``: the replay's embedder (None: lexical routes only); ``max_replays``: replays
    kept in memory (least recently used dropped first; a dropped one comes back from the
    feature cache); ``n_jobs``, ``scheduler``: where a replay runs its conversations
    (:func:`memlab.bench.run.replay_cached`).
    """

    def __init__(self, ds: Dataset, objective: Objective, *, embedder, level: str = "item",
                 macro: bool = False, progress: bool = False, max_replays: int = 8,
                 n_jobs: int = 1, scheduler=None) -> None:
        if level not in LEVELS:
            raise InvalidInput("level", f"must be one of {', '.join(LEVELS)}", level)
        if isinstance(max_replays, bool) or not isinstance(max_replays, int) or max_replays < 1:
            raise InvalidInput("max_replays", "must be an integer >= 1", max_replays)
        self.max_replays = max_replays
        self.ds, self.objective, self.embedder = ds, objective, embedder
        self.level, self.macro, self.progress = level, macro, progress
        self.sessions = item_sessions(ds) if level == "session" else None
        self.replays: OrderedDict[str, Replayed] = OrderedDict()
        self.replayed = 0   # replays fetched (from the feature cache or replayed)
        self.n_jobs, self.scheduler = n_jobs, scheduler

    def replay(self, cfg: MemlabConfig) -> Replayed:
        key = features_key(cfg)
        rep = self.replays.get(key)
        if rep is None:
            rep = replay_cached(self.ds, cfg, embedder=self.embedder, progress=self.progress,
                                n_jobs=self.n_jobs, scheduler=self.scheduler)
            self.replayed += 1
            self.replays[key] = rep
            while len(self.replays) > self.max_replays:
                self.replays.popitem(last=False)
        self.replays.move_to_end(key)
        return rep

    def per_query(self, cfg: MemlabConfig) -> pd.DataFrame:
        """``per_query`` of ``cfg`` (answerable questions)."""
        return self.scores(cfg).to_frame()

    def frame(self, cfg: MemlabConfig) -> pd.DataFrame:
        """Retired: :meth:`per_query`."""
        from memlab.frames import renamed

        renamed("Evaluator.frame(cfg)", "Evaluator.per_query(cfg)")
        return self.per_query(cfg)

    def scores(self, cfg: MemlabConfig, columns: Sequence[str] | None = None) -> QueryScores:
        """``per_query_scores`` of ``cfg``: the per-query arrays of ``columns`` (None: all)."""
        return per_query_scores(self.replay(cfg), cfg, level=self.level, sessions=self.sessions,
                                columns=columns)

    def reduce(self, frame: pd.DataFrame, questions: Iterable[str] | None = None,
               columns: Sequence[str] | None = None) -> dict[str, float]:
        """Column -> mean over ``questions`` (all when None), or the macro mean."""
        cols = list(columns or self.objective.columns)
        sub = frame if questions is None else frame.loc[frame.index.intersection(
            pd.Index(list(questions)))]
        if not len(sub):
            raise InvalidInput("questions", "no answerable question to score", 0)
        if self.macro:
            means = sub.groupby("category", observed=True)[cols].mean()
            return {c: float(means[c].mean()) for c in cols}
        return {c: float(sub[c].mean()) for c in cols}

    def values(self, cfg: MemlabConfig, questions: Iterable[str] | None = None
               ) -> dict[str, float]:
        """The objective's values of ``cfg`` over ``questions`` (all when None): what
        :meth:`reduce` gives on :meth:`frame`, from the per-query arrays of the objective's
        columns alone (no DataFrame: a sweep trial's cost)."""
        cols = self.objective.columns
        return self.scores(cfg, cols).reduce(cols, questions, macro=self.macro)

"""One configuration on one replay: per-query metrics, the quantity every sweep, fit and fold
reduces (issue 8).

:func:`per_query` is the contract: the same per-query values as ``memlab bench`` computes for the
same config on the same replay (``bench.run.rank`` + ``metrics.evaluate``), one row per answerable
question, plus ``prompt_chars`` (characters of the memories selected for the prompt) for
multi-objective sweeps.

It is fast (item 6; measured in benchmarks/README.md, sweep_throughput.py): what no
configuration changes is prepared once per replay (:mod:`memlab.tune.prepared`), the selections
come from :func:`memlab.tune.rescore.selections` as table positions, and the hit matrix from the
positions' gold flags straight into :func:`memlab.bench.metrics.evaluate_hits` (no string ids).
Where most rows pass reverie's relevance floor, only the rows a bound lets reach each question's
top are scored exactly (:mod:`memlab.tune.prune`).
:func:`per_query_reference` is the old path (rank with string ids, then evaluate); the fast one
equals it exactly (tests/tune/test_parity.py) and falls back to it for data it does not
reproduce (:attr:`Prepared.why <memlab.tune.prepared.Prepared>`) and for a scorer whose reference
functions changed since the fast path was checked against them (:mod:`memlab.tune.reference`:
one warning per process).
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.bench import metrics as M
from memlab.bench.datasets.canonical import Dataset
from memlab.bench.goldage import gold_columns, with_gold_columns
from memlab.bench.replay import Replayed
from memlab.bench.run import item_sessions, qrels_of, question_keys, rank  # noqa: F401 (item_sessions: public here too)
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.tune.prepared import Prepared, prepared
from memlab.tune.rescore import selections, supported

__all__ = ["per_query", "per_query_scores", "QueryScores", "per_query_reference", "rankings",
           "item_sessions", "LEVELS"]

LEVELS = ("item", "session")


def per_query(rep: Replayed, cfg: MemlabConfig, *, level: Literal["item", "session"] = "item",
              sessions: Mapping[str, str] | None = None,
              dataset: Dataset | None = None) -> pd.DataFrame:
    """Metrics of ``cfg`` per answerable question of ``rep``.

    Index ``conversation_id::query_id`` (qid order); columns: every metric of
    ``metrics.evaluate`` over ``cfg.bench.ks``, then ``category``, ``conversation_id`` and
    ``prompt_chars``. ``level="session"``: ranked items and gold map to their sessions first
    (LongMemEval's convention), as ``memlab bench``'s session table; ``sessions`` is
    :func:`item_sessions` of the replayed dataset. ``dataset``: the replayed dataset; given, the
    gold memory's columns are appended (:data:`memlab.bench.goldage.GOLD_COLUMNS`: its age at
    ``asked_at``, stored layer, importance, ...), as in ``memlab bench``'s per-query frame.
    """
    frame = per_query_scores(rep, cfg, level=level, sessions=sessions).to_frame()
    if dataset is None:
        return frame
    return with_gold_columns(frame, gold_columns(dataset, rep, cfg=cfg))


def per_query_scores(rep: Replayed, cfg: MemlabConfig, *,
                     level: Literal["item", "session"] = "item",
                     sessions: Mapping[str, str] | None = None,
                     columns: Sequence[str] | None = None) -> "QueryScores":
    """:func:`per_query`'s values as arrays (no DataFrame): what a sweep trial reduces.

    ``columns``: the numeric columns to compute (metric names of ``cfg.bench.ks`` and
    ``prompt_chars``; None: all of them). :meth:`QueryScores.to_frame` builds per_query's frame
    (of the columns computed) where a caller wants one.
    """
    _check_level(level, sessions)
    prep = prepared(rep)
    if not supported(prep, cfg):
        return QueryScores.of_frame(per_query_reference(rep, cfg, level=level,
                                                        sessions=sessions), columns)
    sess = None
    if level == "session":
        sess = prep.session_arrays(sessions)
        if sess is None:                       # an item without session: the reference raises
            return QueryScores.of_frame(per_query_reference(rep, cfg, level=level,
                                                            sessions=sessions), columns)
    return _scores(prep, selections(prep, cfg), cfg, sess, columns)


def rankings(rep: Replayed, cfg: MemlabConfig) -> dict[str, list[str]]:
    """What the sweep path ranks: ``conversation_id::query_id`` -> ``conversation_id::item_id``
    of the selected memories, best first, for every question (``bench.run.rank``'s values)."""
    prep = prepared(rep)
    if not supported(prep, cfg):
        return rank(rep, cfg)
    picks = selections(prep, cfg)
    keys = prep.item_keys
    return {key: [keys[p] for p in row[row >= 0].tolist()]
            for key, row in zip(prep.keys, picks)}


def _check_level(level: str, sessions: Mapping[str, str] | None) -> None:
    if level not in LEVELS:
        raise InvalidInput("level", f"must be one of {', '.join(LEVELS)}", level)
    if level == "session" and sessions is None:
        raise InvalidInput("sessions", "level 'session' needs item_sessions(dataset)", None)


def _wanted(cfg: MemlabConfig, columns: Sequence[str] | None
            ) -> tuple[list[tuple[str, str, int | None]], list[tuple[str, str, int | None]], bool]:
    """(every metric column of ``cfg.bench.ks``, those to compute, whether prompt_chars is
    wanted); an unknown name is an InvalidInput naming it."""
    every = M.metric_columns(ks=cfg.bench.ks)
    if columns is None:
        return every, every, True
    names = {c for c, _, _ in every}
    for c in columns:
        if c != "prompt_chars" and c not in names:
            raise InvalidInput("columns", "not a per-query column (cut-offs come from "
                               f"bench.ks); known: {', '.join([*names, 'prompt_chars'])}", c)
    return every, [m for m in every if m[0] in set(columns)], "prompt_chars" in columns


def _scores(prep: Prepared, picks: np.ndarray, cfg: MemlabConfig, sess: dict | None,
            columns: Sequence[str] | None) -> "QueryScores":
    """The per-query values from the selected positions (answerable questions, qid order):
    the hit matrix from the positions' gold flags, then :func:`memlab.bench.metrics.hit_metrics`
    on it (the values :func:`memlab.bench.metrics.evaluate` gives the same rankings)."""
    parts = prep.frame_parts
    every, todo, chars_wanted = _wanted(cfg, columns)
    picks = picks[parts["rows"]]
    valid = picks >= 0
    at = np.maximum(picks, 0)
    data: dict[str, np.ndarray] = {}
    if todo:
        if sess is None:
            hit = prep.gold[at] & valid
            gold = prep.gold_count[parts["rows"]]
        else:
            code = np.where(valid, sess["code"][at], -1)
            j = np.arange(code.shape[1])
            earlier = ((code[:, :, None] == code[:, None, :])
                       & (j[None, None, :] < j[None, :, None]))
            first = valid & ~earlier.any(axis=2)        # a session ranks where its best item did
            moved = np.argsort(~first, axis=1, kind="stable")
            hit = np.take_along_axis(sess["gold"][at] & first, moved, axis=1)
            gold = sess["gold_count"][parts["rows"]]
        width = M.hits_width(every)
        matrix = np.zeros((hit.shape[0], width), dtype=bool)
        matrix[:, :min(width, hit.shape[1])] = hit[:, :width]
        first_rank = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.inf)
        # the full-width matrix sliced: each metric reads the very array it reads for all columns
        data = M.hit_metrics(matrix[:, :M.hits_width(todo)], gold, first_rank, columns=todo)
    if chars_wanted:
        data["prompt_chars"] = np.where(valid, prep.chars[at], 0).sum(axis=1).astype(np.int64)
    return QueryScores(data, parts)


class QueryScores:
    """One configuration's per-query values (answerable questions, qid order) as numpy arrays:
    ``values`` column -> array; :meth:`reduce` gives a sweep's objective values without a
    DataFrame, :meth:`frame` per_query's frame."""

    def __init__(self, values: dict[str, np.ndarray], parts: dict[str, Any],
                 frame: pd.DataFrame | None = None) -> None:
        self.values, self._parts, self._frame = values, parts, frame

    @classmethod
    def of_frame(cls, frame: pd.DataFrame, columns: Sequence[str] | None) -> "QueryScores":
        """The values of a per_query frame (the reference path's)."""
        names = [c for c in frame.columns if c not in ("category", "conversation_id")]
        for c in columns or ():
            if c not in names:
                raise InvalidInput("columns", f"not a per-query column; known: "
                                   f"{', '.join(names)}", c)
        codes, cats = pd.factorize(frame["category"], sort=True)
        parts = {"index": frame.index, "cats": frame["category"],
                 "convs": frame["conversation_id"], "cat_codes": codes.astype(np.int64),
                 "n_cats": len(cats), "positions": {}}
        keep = names if columns is None else [c for c in names if c in set(columns)]
        return cls({c: frame[c].to_numpy() for c in keep}, parts, frame)

    @property
    def index(self) -> pd.Index:
        return self._parts["index"]

    def frame(self) -> pd.DataFrame:
        """Retired: :meth:`to_frame`."""
        from memlab.frames import renamed

        renamed("QueryScores.frame()", "QueryScores.to_frame()")
        return self.to_frame()

    def to_frame(self) -> pd.DataFrame:
        """per_query's frame (of the columns computed; all of them by default)."""
        if self._frame is not None:
            cols = [c for c in self._frame.columns
                    if c in self.values or c in ("category", "conversation_id")]
            return self._frame[cols] if len(cols) < self._frame.shape[1] else self._frame
        p = self._parts
        metrics = {c: v for c, v in self.values.items() if c != "prompt_chars"}
        extra = {"prompt_chars": self.values["prompt_chars"]} if "prompt_chars" in self.values \
            else {}
        return pd.DataFrame({**metrics, "category": p["cats"], "conversation_id": p["convs"],
                             **extra}, index=p["index"])

    def positions(self, questions: Iterable[str] | None) -> np.ndarray | None:
        """The rows of ``questions`` (answerable ones among them, index order; None: all),
        memoised by the object's identity (a sweep passes one list per fold, unchanged)."""
        if questions is None:
            return None
        memo = self._parts["positions"]
        got = memo.get(id(questions))
        if got is not None and got[0] is questions:
            return got[1]
        pos = np.flatnonzero(self.index.isin(list(questions)))
        memo[id(questions)] = (questions, pos)
        return pos

    def reduce(self, columns: Sequence[str], questions: Iterable[str] | None = None, *,
               macro: bool = False) -> dict[str, float]:
        """Column -> mean over ``questions`` (all when None), or with ``macro`` the mean of the
        per-category means: the values of :meth:`memlab.tune.objective.Evaluator.reduce` on
        :meth:`frame` (to rounding: sums in another order)."""
        at = self.positions(questions)
        n = len(self.index) if at is None else at.size
        if not n:
            raise InvalidInput("questions", "no answerable question to score", 0)
        out = {}
        codes = self._parts["cat_codes"] if at is None else self._parts["cat_codes"][at]
        for c in columns:
            v = self.values[c] if at is None else self.values[c][at]
            if macro:
                k = self._parts["n_cats"]
                sums = np.bincount(codes, weights=v.astype(np.float64), minlength=k)
                counts = np.bincount(codes, minlength=k)
                seen = counts > 0
                out[c] = float(np.mean(sums[seen] / counts[seen]))
            else:
                out[c] = float(np.mean(v, dtype=np.float64))
        return out


def per_query_reference(rep: Replayed, cfg: MemlabConfig, *,
                        level: Literal["item", "session"] = "item",
                        sessions: Mapping[str, str] | None = None) -> pd.DataFrame:
    """:func:`per_query` by the reference path: ``bench.run.rank`` (string ids) and
    ``metrics.evaluate``, as ``memlab bench`` computes it. Slow; the fast path equals it."""
    _check_level(level, sessions)
    rankings = rank(rep, cfg)
    qrels = {k: v for k, v in qrels_of(rep).items() if v}
    ranked = {k: rankings[k] for k in qrels}
    if level == "session":
        item_sess = dict(sessions)
        ranked, qrels = M.to_sessions(ranked, item_sess), M.to_sessions(qrels, item_sess)
    out = M.evaluate(ranked, qrels, ks=cfg.bench.ks)
    q = rep.questions
    keys = question_keys(rep)
    cats = pd.Series(q["category"].astype(str).to_numpy(), index=keys)
    convs = pd.Series(q["conversation_id"].astype(str).to_numpy(), index=keys)
    chars = _prompt_chars(rep, rankings, keys)
    return out.assign(category=cats.reindex(out.index), conversation_id=convs.reindex(out.index),
                      prompt_chars=chars.reindex(out.index))


def _prompt_chars(rep: Replayed, rankings: dict[str, list[str]], keys: list[str]) -> pd.Series:
    """Characters of the selected memories per question (from the table's text_len)."""
    cols = rep.features.columns
    if not len(cols) or not len(cols.get("row", [])):
        return pd.Series(0, index=keys, dtype=np.int64)
    rows = np.asarray(cols["row"])
    qids = np.asarray(cols["qid"])
    lens = np.asarray(cols["text_len"])
    convs = rep.questions["conversation_id"].astype(str).to_numpy()
    length = {}
    for r, qi, n in zip(rows.tolist(), qids.tolist(), lens.tolist()):
        length[f"{convs[qi]}::{rep.row_item[r]}"] = n
    return pd.Series([sum(length[i] for i in rankings[k]) for k in keys], index=keys,
                     dtype=np.int64)

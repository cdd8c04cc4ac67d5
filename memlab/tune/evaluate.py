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
reproduce (:attr:`Prepared.why <memlab.tune.prepared.Prepared>`).
"""

from __future__ import annotations

from typing import Literal, Mapping

import numpy as np
import pandas as pd

from memlab.bench import metrics as M
from memlab.bench.replay import Replayed
from memlab.bench.run import item_sessions, qrels_of, question_keys, rank  # noqa: F401 (item_sessions: public here too)
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.tune.prepared import Prepared, prepared
from memlab.tune.rescore import selections, supported

__all__ = ["per_query", "per_query_reference", "rankings", "item_sessions", "LEVELS"]

LEVELS = ("item", "session")


def per_query(rep: Replayed, cfg: MemlabConfig, *, level: Literal["item", "session"] = "item",
              sessions: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Metrics of ``cfg`` per answerable question of ``rep``.

    Index ``conversation_id::query_id`` (qid order); columns: every metric of
    ``metrics.evaluate`` over ``cfg.bench.ks``, then ``category``, ``conversation_id`` and
    ``prompt_chars``. ``level="session"``: ranked items and gold map to their sessions first
    (LongMemEval's convention), as ``memlab bench``'s session table; ``sessions`` is
    :func:`item_sessions` of the replayed dataset.
    """
    _check_level(level, sessions)
    prep = prepared(rep)
    if not supported(prep, cfg):
        return per_query_reference(rep, cfg, level=level, sessions=sessions)
    sess = None
    if level == "session":
        sess = prep.session_arrays(sessions)
        if sess is None:                       # an item without session: the reference raises
            return per_query_reference(rep, cfg, level=level, sessions=sessions)
    return _frame(prep, selections(prep, cfg), cfg, sess)


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


def _frame(prep: Prepared, picks: np.ndarray, cfg: MemlabConfig,
           sess: dict | None) -> pd.DataFrame:
    """per_query's frame from the selected positions (answerable questions, qid order)."""
    parts = prep.frame_parts
    picks = picks[parts["rows"]]
    valid = picks >= 0
    at = np.maximum(picks, 0)
    if sess is None:
        hit = prep.gold[at] & valid
        gold = prep.gold_count[parts["rows"]]
    else:
        code = np.where(valid, sess["code"][at], -1)
        j = np.arange(code.shape[1])
        earlier = (code[:, :, None] == code[:, None, :]) & (j[None, None, :] < j[None, :, None])
        first = valid & ~earlier.any(axis=2)            # a session ranks where its best item did
        moved = np.argsort(~first, axis=1, kind="stable")
        hit = np.take_along_axis(sess["gold"][at] & first, moved, axis=1)
        gold = sess["gold_count"][parts["rows"]]
    columns = M.metric_columns(ks=cfg.bench.ks)
    width = M.hits_width(columns)
    matrix = np.zeros((hit.shape[0], width), dtype=bool)
    matrix[:, :min(width, hit.shape[1])] = hit[:, :width]
    first_rank = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.inf)
    data = M.hit_metrics(matrix, gold, first_rank, columns=columns)
    chars = np.where(valid, prep.chars[at], 0).sum(axis=1).astype(np.int64)
    return pd.DataFrame({**data, "category": parts["cats"], "conversation_id": parts["convs"],
                         "prompt_chars": chars}, index=parts["index"])


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

"""One configuration on one replay: per-query metrics, the quantity every sweep, fit and fold
reduces (issue 8).

:func:`per_query` is the contract: the same per-query values as ``memlab bench`` computes for the
same config on the same replay (``bench.run.rank`` + ``metrics.evaluate``), one row per answerable
question, plus ``prompt_chars`` (characters of the memories selected for the prompt) for
multi-objective sweeps.
"""

from __future__ import annotations

from typing import Literal, Mapping

import numpy as np
import pandas as pd

from memlab.bench import metrics as M
from memlab.bench.datasets.canonical import Dataset
from memlab.bench.replay import Replayed
from memlab.bench.run import qrels_of, rank
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

__all__ = ["per_query", "item_sessions", "LEVELS"]

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
    if level not in LEVELS:
        raise InvalidInput("level", f"must be one of {', '.join(LEVELS)}", level)
    rankings = rank(rep, cfg)
    qrels = {k: v for k, v in qrels_of(rep).items() if v}
    ranked = {k: rankings[k] for k in qrels}
    if level == "session":
        if sessions is None:
            raise InvalidInput("sessions", "level 'session' needs item_sessions(dataset)", None)
        item_sess = dict(sessions)
        ranked, qrels = M.to_sessions(ranked, item_sess), M.to_sessions(qrels, item_sess)
    out = M.evaluate(ranked, qrels, ks=cfg.bench.ks)
    q = rep.questions
    keys = [f"{c}::{i}" for c, i in zip(q["conversation_id"], q["query_id"])]
    cats = pd.Series(q["category"].astype(str).to_numpy(), index=keys)
    convs = pd.Series(q["conversation_id"].astype(str).to_numpy(), index=keys)
    chars = _prompt_chars(rep, rankings, keys)
    return out.assign(category=cats.reindex(out.index), conversation_id=convs.reindex(out.index),
                      prompt_chars=chars.reindex(out.index))


def item_sessions(ds: Dataset) -> dict[str, str]:
    """``conversation::item`` -> ``conversation::session`` for every item of ``ds`` (gold items a
    replay never retrieved included): what ``level="session"`` needs."""
    return {f"{c}::{it.item_id}": f"{c}::{it.session_id}"
            for c in ds.conversations() for it in ds.items_of(c)}


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

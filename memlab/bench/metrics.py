"""Item-level retrieval metrics, vectorised with numpy and checked against ranx.

Input is plain data: ``rankings`` maps a query id to its ranked item ids (best first, possibly
empty) and ``qrels`` maps a query id to its gold item ids (non-empty). ``evaluate`` turns them into
one row per query and one column per metric; ``aggregate`` averages those rows overall and per
category.

How it works: every (query, ranked item) pair is flattened into integer keys, membership in the
gold set is one ``np.isin``, and the hits land in a ``(Q, K)`` 0/1 matrix (``K`` = the largest
cut-off asked for). Every metric is then a handful of numpy operations on that matrix and on the
per-query gold counts; no Python loop runs per query except to flatten the input.

Metrics (binary relevance; ``g`` = number of distinct gold items, ``h@k`` = gold items among the
top ``k``; a ranking shorter than ``k`` simply has no hits past its end):

============== ===================================================================
``recall@k``     ``h@k / g``
``recall_any@k`` ``1 if h@k > 0 else 0`` (LongMemEval's name; the same number as ranx's
                 ``hit_rate@k``, often called hit@k. memlab keeps only this name, so that
                 ``recall_any``/``recall_all`` read as the pair LongMemEval reports.)
``recall_all@k`` ``1 if h@k == g else 0`` (LongMemEval)
``precision@k``  ``h@k / k`` (divided by ``k`` even when fewer than ``k`` items were ranked,
                 as ranx and trec_eval do)
``ndcg@k``       ``sum_{i<=k} hit_i / log2(i + 1)`` divided by the ideal
                 ``sum_{i<=min(k, g)} 1 / log2(i + 1)`` (Järvelin & Kekäläinen, ranks from 1)
``mrr``          ``1 / rank of the first gold item``, 0 when none is ranked
``mrr@k``        the same, 0 when the first gold item is ranked below ``k``
============== ===================================================================

Abstention (:func:`abstention`): a question without gold items is *unanswerable* (nothing stored
answers it); the right outcome is an empty ranking. ``abstention`` is the share of unanswerable
questions that got no item, ``answered`` the share of answerable ones that got at least one.

Session level (LongMemEval's convention): ``to_sessions`` maps ranked items to their sessions,
keeping the first (best) rank of each session, and maps the qrels the same way; ``evaluate`` on
the results gives session metrics.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import pandas as pd

from memlab.errors import InvalidInput

__all__ = [
    "ABSTENTION_COLUMNS",
    "AT_K_METRICS",
    "DEFAULT_KS",
    "DEFAULT_METRICS",
    "PLAIN_METRICS",
    "abstention",
    "aggregate",
    "evaluate",
    "hit_metrics",
    "hits_width",
    "metric_columns",
    "to_sessions",
]

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20)
"""Cut-offs used when the caller does not name any."""


@dataclass(frozen=True)
class _Hits:
    """What every metric is computed from: hit matrix, gold counts and first-hit ranks."""

    matrix: np.ndarray  # (Q, K) bool: the item at rank i+1 of query q is gold
    gold: np.ndarray  # (Q,) int: distinct gold items per query (>= 1)
    first_rank: np.ndarray  # (Q,) float: rank (from 1) of the first gold item, inf when none

    def hits_at(self, k: int) -> np.ndarray:
        if self.matrix.shape[1] == 0:
            return self.matrix[:, :k].sum(axis=1)
        return self._running[:, min(k, self.matrix.shape[1]) - 1]

    @cached_property
    def _running(self) -> np.ndarray:
        """Gold items among the top 1, 2, ... (one cumulative sum for every cut-off)."""
        return self.matrix.cumsum(axis=1)


def _discounts(k: int) -> np.ndarray:
    """``1 / log2(rank + 1)`` for ranks 1..k."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def _recall(h: _Hits, k: int) -> np.ndarray:
    return h.hits_at(k) / h.gold


def _recall_any(h: _Hits, k: int) -> np.ndarray:
    return (h.hits_at(k) > 0).astype(np.float64)


def _recall_all(h: _Hits, k: int) -> np.ndarray:
    return (h.hits_at(k) >= h.gold).astype(np.float64)


def _precision(h: _Hits, k: int) -> np.ndarray:
    return h.hits_at(k) / float(k)


def _ndcg(h: _Hits, k: int) -> np.ndarray:
    disc = _discounts(k)
    dcg = h.matrix[:, :k] @ disc
    ideal_prefix = np.concatenate(([0.0], np.cumsum(disc)))  # ideal_prefix[j] = IDCG with j golds
    return dcg / ideal_prefix[np.minimum(h.gold, k)]


def _mrr_at(h: _Hits, k: int) -> np.ndarray:
    return np.where(h.first_rank <= k, 1.0 / h.first_rank, 0.0)


def _mrr(h: _Hits) -> np.ndarray:
    return 1.0 / h.first_rank  # 1 / inf == 0 when no gold item is ranked


AT_K_METRICS: dict[str, Callable[[_Hits, int], np.ndarray]] = {
    "recall": _recall,
    "recall_any": _recall_any,
    "recall_all": _recall_all,
    "precision": _precision,
    "ndcg": _ndcg,
    "mrr": _mrr_at,
}
"""Metric families with a cut-off: ``"<family>@<k>"``."""

PLAIN_METRICS: dict[str, Callable[[_Hits], np.ndarray]] = {"mrr": _mrr}
"""Metrics without a cut-off (``"mrr"`` is uncut; ``"mrr@k"`` is the cut family)."""

DEFAULT_METRICS: tuple[str, ...] = (
    "recall", "recall_any", "recall_all", "precision", "ndcg", "mrr",
)
"""Families evaluated when ``metrics`` is None; a bare ``"mrr"`` means the uncut MRR."""


def _check_k(k: object, *, field: str) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InvalidInput(field, "must be an integer >= 1", k)
    return int(k)


def metric_columns(*, ks: Sequence[int] = DEFAULT_KS,
                   metrics: Sequence[str] | None = None) -> list[tuple[str, str, int | None]]:
    """Expand metric specs into ``(column, family, k)`` triples, in order, without duplicates.

    A spec is ``"family@k"`` (any k >= 1, e.g. ``"recall@7"``), a bare cut-off family
    (``"recall"``, ``"ndcg"``, ...) expanded over ``ks``, or a plain metric (``"mrr"``).
    """
    if isinstance(ks, (str, bytes)) or len(ks) == 0:
        raise InvalidInput("ks", "must be a non-empty sequence of integers >= 1", ks)
    checked_ks = [_check_k(k, field="ks") for k in ks]
    specs = DEFAULT_METRICS if metrics is None else metrics
    if isinstance(specs, str) or len(specs) == 0:
        raise InvalidInput("metrics", "must be a non-empty sequence of metric names", specs)
    out: dict[str, tuple[str, str, int | None]] = {}
    for spec in specs:
        family, at, k_text = str(spec).partition("@")
        if at:
            if family not in AT_K_METRICS or not k_text.isdigit():
                raise InvalidInput("metrics", f"unknown metric; use one of {sorted(AT_K_METRICS)} "
                                   "followed by @k, or " f"{sorted(PLAIN_METRICS)}", spec)
            k = _check_k(int(k_text), field="metrics")
            out.setdefault(f"{family}@{k}", (f"{family}@{k}", family, k))
        elif family in PLAIN_METRICS:
            out.setdefault(family, (family, family, None))
        elif family in AT_K_METRICS:
            for k in checked_ks:
                out.setdefault(f"{family}@{k}", (f"{family}@{k}", family, k))
        else:
            raise InvalidInput("metrics", f"unknown metric; known: {sorted(AT_K_METRICS)} "
                               f"(with @k) and {sorted(PLAIN_METRICS)}", spec)
    return list(out.values())


def _as_id_list(value: object, *, field: str, query_id: Hashable,
                ordered: bool = False) -> Sequence[Hashable]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidInput(f"{field}[{query_id!r}]", "must be a collection of item ids, not a "
                           "single string or scalar", value)
    if ordered and isinstance(value, (set, frozenset)):
        raise InvalidInput(f"{field}[{query_id!r}]", "a ranking must be ordered (list or tuple), "
                           "not a set", value)
    return value if isinstance(value, Sequence) else list(value)


def _flatten(lists: Sequence[Sequence[Hashable]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query index, position, item) for every element of every list, in order."""
    lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
    total = int(lengths.sum())
    qidx = np.repeat(np.arange(len(lists), dtype=np.int64), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    pos = np.arange(total, dtype=np.int64) - starts
    items = np.fromiter(itertools.chain.from_iterable(lists), dtype=object, count=total)
    return qidx, pos, items


def _hits(query_ids: list[Hashable], ranked: list[Sequence[Hashable]],
          gold: list[Sequence[Hashable]], width: int) -> _Hits:
    r_q, r_pos, r_items = _flatten(ranked)
    g_q, _, g_items = _flatten(gold)
    codes, uniques = pd.factorize(np.concatenate([r_items, g_items]), use_na_sentinel=False)
    n_codes = max(len(uniques), 1)
    r_keys = r_q * n_codes + codes[: len(r_items)]
    g_keys = np.unique(g_q * n_codes + codes[len(r_items):])  # duplicate gold ids count once

    sorted_keys = np.sort(r_keys)
    dup = sorted_keys[1:] == sorted_keys[:-1]
    if dup.any():
        key = int(sorted_keys[1:][dup][0])
        qi, code = divmod(key, n_codes)
        raise InvalidInput(f"rankings[{query_ids[qi]!r}]", "ranks the same item more than once",
                           uniques[code])

    is_hit = np.isin(r_keys, g_keys, assume_unique=False)
    n_q = len(query_ids)
    matrix = np.zeros((n_q, width), dtype=bool)
    keep = is_hit & (r_pos < width)
    matrix[r_q[keep], r_pos[keep]] = True

    first_rank = np.full(n_q, np.inf)
    hit_q, first_idx = np.unique(r_q[is_hit], return_index=True)  # r_q is sorted by position
    first_rank[hit_q] = r_pos[is_hit][first_idx] + 1.0
    gold_counts = np.bincount(g_keys // n_codes, minlength=n_q)
    return _Hits(matrix=matrix, gold=gold_counts, first_rank=first_rank)


def evaluate(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Collection[str]], *,
             ks: Sequence[int] = DEFAULT_KS, metrics: Sequence[str] | None = None,
             missing: Literal["error", "empty"] = "error") -> pd.DataFrame:
    """Per-query retrieval metrics: one row per query (index ``query_id``), one column per metric.

    Args:
        rankings: query id -> ranked item ids, best first; may be empty; no item twice.
        qrels: query id -> gold item ids (non-empty; duplicates count once).
        ks: cut-offs for the families named without ``@k``. Default ``(1, 3, 5, 10, 20)``.
        metrics: specs as in :func:`metric_columns`; default :data:`DEFAULT_METRICS` over ``ks``.
        missing: what to do with a query in ``qrels`` that has no ranking: ``"error"`` (default:
            a retriever that skipped a query must not raise the average) or ``"empty"`` (score it
            as an empty ranking, i.e. zero). Rows follow ``rankings``' order, then such queries.

    Raises:
        InvalidInput: a ranked query without a qrels entry, an empty gold set, a ranking with a
            repeated item, a string where a collection belongs, bad ``ks``/``metrics``/``missing``.
    """
    columns = metric_columns(ks=ks, metrics=metrics)
    if missing not in ("error", "empty"):
        raise InvalidInput("missing", "must be 'error' or 'empty'", missing)
    query_ids = list(rankings)
    for qid in query_ids:
        if qid not in qrels:
            raise InvalidInput(f"qrels[{qid!r}]", "query is ranked but has no gold entry", qid)
    unranked = [qid for qid in qrels if qid not in rankings]
    if unranked and missing == "error":
        raise InvalidInput(f"rankings[{unranked[0]!r}]", f"query has gold items but no ranking "
                           f"({len(unranked)} such queries); pass missing='empty' to score them 0",
                           unranked[0])
    query_ids += unranked
    ranked = [_as_id_list(rankings.get(q, ()), field="rankings", query_id=q, ordered=True)
              for q in query_ids]
    gold = [_as_id_list(qrels[q], field="qrels", query_id=q) for q in query_ids]
    for qid, g in zip(query_ids, gold):
        if len(g) == 0:
            raise InvalidInput(f"qrels[{qid!r}]", "gold set must not be empty", list(g))

    hits = _hits(query_ids, ranked, gold, hits_width(columns))
    return _frame(hits, query_ids, columns)


def hits_width(columns: Sequence[tuple[str, str, int | None]]) -> int:
    """Columns of the hit matrix the metrics of ``columns`` (:func:`metric_columns`) read."""
    return max((k for _, _, k in columns if k is not None), default=1)


def _frame(hits: _Hits, query_ids: Sequence[Hashable],
           columns: Sequence[tuple[str, str, int | None]]) -> pd.DataFrame:
    index = pd.Index(query_ids, name="query_id")
    return pd.DataFrame(_metric_arrays(hits, columns), index=index, dtype=np.float64)


def _metric_arrays(hits: _Hits, columns: Sequence[tuple[str, str, int | None]]
                   ) -> dict[str, np.ndarray]:
    return {col: (AT_K_METRICS[fam](hits, k) if k is not None else PLAIN_METRICS[fam](hits))
            for col, fam, k in columns}


def hit_metrics(matrix: np.ndarray, gold: np.ndarray, first_rank: np.ndarray, *,
                columns: Sequence[tuple[str, str, int | None]]) -> dict[str, np.ndarray]:
    """Every metric of ``columns`` (:func:`metric_columns`) per query, as float64 arrays, from a
    hit matrix already made (sweeps: no string ids); :func:`evaluate`'s columns for the rankings
    behind it.

    ``matrix`` (Q, :func:`hits_width` of ``columns``) bool: the item at rank i+1 of query q is
    gold; ``gold`` (Q,) distinct gold items per query (>= 1); ``first_rank`` (Q,) rank from 1 of
    the first gold item anywhere in the ranking (inf when none).
    """
    width = hits_width(columns)
    q = len(gold)
    if matrix.shape != (q, width) or first_rank.shape != (q,):
        raise InvalidInput("matrix", f"must be ({q}, {width}) with gold and first_rank of "
                           f"length {q}", (matrix.shape, gold.shape, first_rank.shape))
    data = _metric_arrays(_Hits(matrix=matrix, gold=gold, first_rank=first_rank), columns)
    return {c: np.asarray(v, dtype=np.float64) for c, v in data.items()}


def aggregate(per_query: pd.DataFrame, *, by: pd.Series | None = None,
              overall_label: str = "all") -> pd.DataFrame:
    """Mean of every metric column, overall and per category, with a count column ``n``.

    Args:
        per_query: the output of :func:`evaluate` (index: query ids).
        by: category of each query, indexed by query id; must cover every query and hold no
            missing value. Categories become row labels as strings, in sorted order.
        overall_label: the label of the overall row (first). A category may not use it.

    Returns:
        A frame indexed by ``category``: the ``overall_label`` row, then one row per category.
    """
    if per_query.empty:
        raise InvalidInput("per_query", "must hold at least one query", len(per_query))
    means = per_query.mean(axis=0).to_frame(overall_label).T
    means["n"] = len(per_query)
    if by is None:
        out = means
    else:
        cats = by.reindex(per_query.index)
        if cats.isna().any():
            lost = cats[cats.isna()].index[0]
            raise InvalidInput(f"by[{lost!r}]", "every query needs a category (missing or NaN)",
                               lost)
        labels = cats.astype(str)
        if (labels == overall_label).any():
            raise InvalidInput("by", f"a category may not be named {overall_label!r} "
                               "(the overall row); pass another overall_label", overall_label)
        grouped = per_query.groupby(labels.to_numpy(), sort=True)
        per_cat = grouped.mean()
        per_cat["n"] = grouped.size()
        out = pd.concat([means, per_cat])
    out.index.name = "category"
    out["n"] = out["n"].astype(np.int64)
    return out


def to_sessions(rankings: Mapping[str, Iterable[str]],
                item_to_session: Mapping[str, str]) -> dict[str, list[str]]:
    """Map each query's item ids to session ids, keeping each session's first occurrence.

    For a ranking this is the session ranking (a session ranks where its best item ranked); for
    qrels the same call gives the gold sessions, so ``evaluate(to_sessions(run, m),
    to_sessions(qrels, m))`` yields LongMemEval's session-level metrics.

    Raises:
        InvalidInput: an item id missing from ``item_to_session`` (names the query and item).
    """
    out: dict[str, list[str]] = {}
    for qid, items in rankings.items():
        ids = _as_id_list(items, field="rankings", query_id=qid)  # sets allowed: qrels
        try:
            out[qid] = list(dict.fromkeys(item_to_session[i] for i in ids))
        except KeyError as err:
            raise InvalidInput(f"item_to_session (query {qid!r})", "item has no session",
                               err.args[0]) from None
    return out


ABSTENTION_COLUMNS = ("abstention", "answered", "n_unanswerable", "n_answerable")


def abstention(rankings: Mapping[str, Sequence[str]], qrels: Mapping[str, Collection[str]], *,
               by: pd.Series | None = None, overall_label: str = "all") -> pd.DataFrame:
    """Abstention overall and per group: one row per label, columns :data:`ABSTENTION_COLUMNS`.

    Args:
        rankings: query id -> ranked item ids (empty: the retriever returned nothing).
        qrels: query id -> gold item ids for every ranked query; an empty collection marks an
            unanswerable question.
        by: a group label per query id (e.g. the question's language), covering every query.

    ``abstention`` = unanswerable questions with an empty ranking / unanswerable questions (NaN
    when there are none); ``answered`` = answerable questions with a non-empty ranking /
    answerable questions (NaN when there are none); ``n_*`` the counts (int).
    """
    if not rankings:
        raise InvalidInput("rankings", "must hold at least one query", len(rankings))
    ids = list(rankings)
    missing = [q for q in ids if q not in qrels]
    if missing:
        raise InvalidInput(f"qrels[{missing[0]!r}]", "every ranked query needs a gold entry (empty "
                           "for an unanswerable question)", missing[0])
    empty = np.array([len(_as_id_list(rankings[q], field="rankings", query_id=q)) == 0
                      for q in ids])
    unanswerable = np.array([len(_as_id_list(qrels[q], field="qrels", query_id=q)) == 0
                             for q in ids])
    frame = pd.DataFrame({"refused": empty & unanswerable, "answered": ~empty & ~unanswerable,
                          "unanswerable": unanswerable}, index=pd.Index(ids, name="query_id"))
    groups = [(overall_label, frame)]
    if by is not None:
        labels = by.reindex(frame.index)
        if labels.isna().any():
            lost = labels[labels.isna()].index[0]
            raise InvalidInput(f"by[{lost!r}]", "every query needs a group (missing or NaN)", lost)
        labels = labels.astype(str)
        if (labels == overall_label).any():
            raise InvalidInput("by", f"a group may not be named {overall_label!r}", overall_label)
        groups += [(g, frame[labels.to_numpy() == g]) for g in sorted(labels.unique())]
    rows = {}
    for label, f in groups:
        n_un = int(f["unanswerable"].sum())
        n_an = len(f) - n_un
        rows[label] = {"abstention": f["refused"].sum() / n_un if n_un else np.nan,
                       "answered": f["answered"].sum() / n_an if n_an else np.nan,
                       "n_unanswerable": n_un, "n_answerable": n_an}
    out = pd.DataFrame.from_dict(rows, orient="index")[list(ABSTENTION_COLUMNS)]
    out.index.name = "group"
    return out.astype({"n_unanswerable": np.int64, "n_answerable": np.int64})

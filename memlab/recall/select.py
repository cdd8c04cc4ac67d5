"""Selection: from scored rows to at most k memories per query, under budget and dedup (Reverie §8).

Per query, after :func:`memlab.recall.score.score`:

1. keep the rows that are ``eligible`` (the forgetting gate) and ``relevant`` (the relevance floor);
   permanent rows (layer 0) are never suppressed by forgetting, but at most
   ``recall.permanent_limit`` of them, the best-scoring, are considered. memlab's choice: the
   relevance floor applies to permanent rows too (a question about nothing stored returns nothing;
   with the default floor 0 every row passes it);
2. sort by (score desc, importance desc), stable (ties keep table order);
3. walk: skip a memory whose term-set Jaccard with an already selected one is >=
   ``selection.dedup_jaccard``; skip (and keep walking) a memory that would push the used characters
   over ``selection.char_budget``; stop at ``max(1, k)``;
4. for a 'first' question (intent bit 8) when ``temporal.enabled`` and ``temporal.oldest_first``,
   reorder the *selected* memories oldest first by ``event_time`` (§11.2: the choice of memories
   stays by score; their order answers "the first time ...", so the oldest relevant memory ranks 1).

Steps 1, 2 and the permanent cap are vectorised over all queries at once; the walk is a Python loop
per query that stops as soon as k memories are chosen.

What the walk did can be recorded: pass a :class:`SelectTrace` as ``trace=`` and it receives the
order the walk reads (after the gates and the permanent cap) and, for every memory the walk passed
over, why (budget or dedup) and how many memories were chosen before it. Stage traces
(:mod:`memlab.bench.trace`) read it; the selection is the same with or without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.features import LAYER_CODES, Table, column, n_rows
from memlab.recall.score import INTENT_FIRST, Scored

__all__ = ["select", "SelectTrace", "explain_columns", "explain_frame"]

#: why the walk passed over a memory (:attr:`SelectTrace.skipped`)
SKIP_BUDGET, SKIP_DEDUP = "budget", "dedup"


@dataclass
class SelectTrace:
    """What one :func:`select` call did, filled in when it is passed as ``trace=``.

    ``order``: the table positions that passed the gates (eligible and relevant) and the
    permanent cap, grouped by qid and best first: the order the walk reads them (a position of a
    gated row that is missing here was cut by the permanent cap). ``skipped``: position ->
    (``"budget"`` or ``"dedup"``, memories chosen for its query before it) for every memory the
    walk passed over; the walk of a query stops at k chosen, so a row after that is in neither.
    """

    order: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    skipped: dict[int, tuple[str, int]] = field(default_factory=dict)


def _candidates(table: Table, scored: Scored, cfg: MemlabConfig
                ) -> tuple[np.ndarray, np.ndarray]:
    """Sorted candidate positions of all queries and their qids (grouped by qid, best first)."""
    qid = column(table, "qid", np.int64)
    importance = column(table, "importance", np.float64)
    permanent = column(table, "layer") == LAYER_CODES["permanent"]
    keep = np.asarray(scored.eligible, dtype=bool) & np.asarray(scored.relevant, dtype=bool)
    idx = np.flatnonzero(keep)
    order = idx[np.lexsort((-importance[idx], -scored.score[idx], qid[idx]))]
    q = qid[order]
    # permanent cap: running count of permanent rows within each query, in score order
    perm = permanent[order].astype(np.int64)
    if order.size:
        starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        sizes = np.diff(np.r_[starts, order.size])
        running = np.cumsum(perm)
        before = np.repeat(running[starts] - perm[starts], sizes)
        within = running - before
        ok = (perm == 0) | (within <= cfg.recall.permanent_limit)
        order, q = order[ok], q[ok]
    return order, q


def select(table: Table, scored: Scored, *, terms: Mapping[int, frozenset[str]], k: int,
           cfg: MemlabConfig, trace: SelectTrace | None = None) -> list[np.ndarray]:
    """Selected table positions (``iloc``), one int64 array per qid 0..max(qid), best first.

    ``terms`` maps a memory's ``row`` to its term set (``memory_terms``), used for dedup; a row that
    reaches the walk without a term set raises :class:`InvalidInput`. A qid without rows gets an
    empty array. ``k`` below 1 selects 1, as the spec's ``max(1, k)``. ``trace``: a
    :class:`SelectTrace` that receives the walk's order and what it skipped (the result is the
    same without it).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise InvalidInput("k", "must be an integer", k)
    n = n_rows(table)
    if len(scored.score) != n:
        raise InvalidInput("scored", f"has {len(scored.score)} rows but the table has {n}",
                           len(scored.score))
    if n == 0:
        return []
    sel = cfg.selection
    limit = max(1, int(k))
    budget, dedup = sel.char_budget, sel.dedup_jaccard
    oldest_first = cfg.temporal.enabled and cfg.temporal.oldest_first

    qid_all = column(table, "qid", np.int64)
    if qid_all.min() < 0:
        raise InvalidInput("table.qid", "must be >= 0", int(qid_all.min()))
    rows = column(table, "row", np.int64)
    text_len = column(table, "text_len", np.int64)
    intent = column(table, "intent", np.int64)
    event_time = column(table, "event_time", np.float64)

    order, q = _candidates(table, scored, cfg)
    skipped = None
    if trace is not None:
        trace.order, skipped = order, trace.skipped
    out: list[np.ndarray] = [np.zeros(0, dtype=np.int64) for _ in range(int(qid_all.max()) + 1)]
    if order.size == 0:
        return out
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    ends = np.r_[starts[1:], order.size]
    lengths, row_ids = text_len.tolist(), rows.tolist()   # Python ints: the walk is a hot loop
    for s, e in zip(starts.tolist(), ends.tolist()):
        chosen: list[int] = []
        chosen_terms: list[tuple[frozenset[str], int]] = []
        used = 0
        for pos in order[s:e].tolist():
            length = lengths[pos]
            if used + length > budget:
                if skipped is not None:
                    skipped[pos] = (SKIP_BUDGET, len(chosen))
                continue
            row = row_ids[pos]
            try:
                t = terms[row]
            except KeyError:
                raise InvalidInput("terms", "no term set for this row", row) from None
            nt = len(t)
            duplicate = False
            for prior, n_prior in chosen_terms:   # memlab.text.jaccard, inlined (hot loop)
                inter = len(t & prior)
                union = nt + n_prior - inter
                if (inter / union if union else 0.0) >= dedup:
                    duplicate = True
                    break
            if duplicate:
                if skipped is not None:
                    skipped[pos] = (SKIP_DEDUP, len(chosen))
                continue
            chosen.append(pos)
            chosen_terms.append((t, nt))
            used += length
            if len(chosen) >= limit:
                break
        picked = np.asarray(chosen, dtype=np.int64)
        if oldest_first and picked.size and (intent[picked[0]] & INTENT_FIRST):
            picked = picked[np.argsort(event_time[picked], kind="stable")]
        out[int(q[s])] = picked
    return out


def explain_columns(table: Table, scored: Scored | None, positions: Sequence[int] | np.ndarray,
                    ids: Mapping[int, str] | None = None, texts: Mapping[int, str] | None = None
                    ) -> dict[str, object]:
    """The columns of :func:`explain_frame` (a dict of arrays and lists; same checks)."""
    pos = np.asarray(positions, dtype=np.int64)
    n = n_rows(table)
    if scored is None and pos.size:
        raise InvalidInput("scored", "is required to explain selected positions", None)
    if pos.size and (pos.min() < 0 or pos.max() >= n):
        raise InvalidInput("positions", f"must be table positions in [0, {n})",
                           int(pos.min() if pos.min() < 0 else pos.max()))
    rows = column(table, "row", np.int64)[pos]
    data: dict[str, object] = {
        "rank": np.arange(1, pos.size + 1),
        "qid": column(table, "qid", np.int64)[pos],
        "row": rows,
    }
    for name, mapping in (("id", ids), ("text", texts)):
        if mapping is None:
            continue
        missing = [r for r in rows.tolist() if r not in mapping]
        if missing:
            raise InvalidInput(name + "s", "no entry for this row", missing[0])
        data[name] = [mapping[r] for r in rows.tolist()]
    data["score"] = np.zeros(0) if scored is None else scored.score[pos]
    for name, values in ({} if scored is None else scored.components).items():
        data[name] = np.asarray(values)[pos]
    return data


def explain_frame(table: Table, scored: Scored | None, positions: Sequence[int] | np.ndarray,
                  ids: Mapping[int, str] | None = None, texts: Mapping[int, str] | None = None
                  ) -> pd.DataFrame:
    """One row per selected memory: rank (1-based), qid, row, id, text, score, every component.

    ``positions`` are table positions (one query's array from :func:`select`); ``ids`` and
    ``texts`` map a memory's ``row`` to its id and text (omitted columns when not given).
    ``scored`` may be None only with no positions (an empty recall): the frame then has no
    component columns.
    """
    return pd.DataFrame(explain_columns(table, scored, positions, ids, texts))

"""The layout the fused reverie kernel reads (:func:`memlab.tune.kernels.reverie_select`): the
raw-signal table as blocks of questions x memories, each question's memories in text-length
order (issue 8, item 6).

A **block** is a set of questions that share their memories' states (the values of
:data:`~memlab.recall.score.REVERIE_MEMORY_COLUMNS`: one memory asked about at one time): the
questions of one conversation when every memory of it has one state across them (LoCoMo: a
block per conversation), else each question alone. Its **columns** are its memories, sorted by
text length (ascending), so that

* reverie's memory-level factors of a configuration are gathered once per block and read by
  every question of it at the same index as its cells (contiguous arrays: the kernel's scoring
  loop has no gather and the compiler vectorises it), and
* the rows that fit a char budget are a prefix of each question's cells (the walk's prefix
  query).

A **cell** is (question, column): the table position of the row (-1 where the memory is no
candidate of that question) and the row's per-question raw signals in their stored dtypes:
cosine, the floor z-score's rank among the table's distinct z-scores (-1: NaN; ``z >= t``
exactly where the rank is at least ``searchsorted(z_sorted, t)``), lexical overlap, entity
matches and intent (-1 where the cell holds no row); and two orders of each question's cells,
config-independent: ``rank``, the cell's place in (importance desc, table position asc), the
tie order of selection (unique per question), and ``by_time``, the cells by (event time, table
position), the order of reverie's 'first' boost. ``q_intent``: per question, the intent of its
rows (the kernel serves only data where a question's rows share one, as the features give it).
Per column: the memory state, importance, text length, permanence, the largest Jaccard in its
conversation and where its intersection counts are (every row of a memory holds the same values
of these). A block of one conversation whose cells would be more than :data:`MAX_FILL` times its
rows (memories asked about by few of its questions) is split into its questions.
``rows_layout`` lays out any set of rows question by question (each question its own block: the
relevance floor's rows, compacted).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["block_layout", "rows_layout", "MAX_FILL"]

#: A conversation whose questions x memories would hold more than this many cells per row is
#: laid out question by question. Speed only; results are the same either way.
MAX_FILL = 2.0

_CELL = ("cosine", "zrank", "lexical", "entity_matches", "intent")
_COLUMN = ("state", "importance", "text_len", "permanent", "max_jaccard", "inter_row",
           "mem_local", "n_terms")


def block_layout(prep) -> dict[str, Any]:
    """The blocks of a qid-sorted :class:`~memlab.tune.prepared.Prepared` (module docstring)."""
    rows = prep.table["row"]
    state = prep.memory_states[0]
    conv, _ = pd.factorize(pd.Series(prep.convs, dtype=object))
    conv = conv.astype(np.int64)
    row_conv = conv[prep.qid]
    mem, _ = pd.factorize(row_conv * (int(rows.max()) + 1) + rows)
    mem = mem.astype(np.int64)
    n_mem = int(mem.max()) + 1
    pairs = np.unique(mem * (int(state.max()) + 1) + state)
    one_state = np.bincount(pairs // (int(state.max()) + 1), minlength=n_mem) == 1
    n_conv = int(conv.max()) + 1
    bad = np.zeros(n_conv, dtype=bool)
    np.logical_or.at(bad, row_conv, ~one_state[mem])
    q_per = np.bincount(conv, minlength=n_conv)
    rows_per = np.bincount(row_conv, minlength=n_conv)
    mems_per = np.bincount(row_conv[np.unique(mem, return_index=True)[1]], minlength=n_conv)
    shared = ~bad & (q_per * mems_per <= MAX_FILL * np.maximum(rows_per, 1))
    together = shared[row_conv]
    block = np.where(together, row_conv, n_conv + prep.qid)
    column = np.where(together, mem, n_mem + np.arange(prep.n, dtype=np.int64))
    return _layout(prep, np.arange(prep.n, dtype=np.int64), block, column)


def rows_layout(prep, at: np.ndarray) -> dict[str, Any]:
    """The rows ``at`` (table positions, ascending) laid out question by question."""
    return _layout(prep, at, prep.qid[at], np.arange(at.size, dtype=np.int64))


def _slot_of(lq: np.ndarray, qid: np.ndarray) -> np.ndarray:
    """Each of ``qid``'s place in the layout's questions ``lq``."""
    slot = np.empty(int(max(lq.max(initial=-1), qid.max(initial=-1))) + 1, dtype=np.int64)
    slot[lq] = np.arange(lq.size)
    return slot[qid]


def _layout(prep, at: np.ndarray, block: np.ndarray, column: np.ndarray) -> dict[str, Any]:
    """The layout of the rows ``at`` given each one's block and column key (one question in
    one block; one row per (question, column))."""
    k = prep.kernel_values
    text_len = k["text_len"][at]
    col_key, first, row_col = np.unique(column, return_index=True, return_inverse=True)
    col_block = block[first]
    # columns by block, then text length (then key): each block's columns contiguous
    order = np.lexsort((col_key, text_len[first], col_block))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    row_colpos = rank[row_col]                          # the row's column, global index
    blocks, col_start = np.unique(col_block[order], return_index=True)
    width = np.diff(np.r_[col_start, order.size])
    b_of_row = np.searchsorted(blocks, block)
    within = row_colpos - col_start[b_of_row]
    # questions by block, then qid
    qid = prep.qid[at]
    qs, q_first = np.unique(qid, return_index=True)
    q_block = b_of_row[q_first]
    q_order = np.lexsort((qs, q_block))
    lq, lq_block = qs[q_order], q_block[q_order]
    lq_width = width[lq_block]
    lq_cell = np.r_[0, np.cumsum(lq_width)[:-1]].astype(np.int64)
    slot = _slot_of(lq, qid)
    cell = lq_cell[slot] + within
    n_cells = int(lq_width.sum())
    intent = k["intent"][at]
    q_intent = intent[q_first][q_order]
    out: dict[str, Any] = {"q": lq.astype(np.int64), "q_cell": lq_cell, "q_intent": q_intent,
                           "intent_per_question": bool((intent == q_intent[slot]).all()),
                           "q_col": col_start[lq_block].astype(np.int64),
                           "q_width": lq_width.astype(np.int64), "cells": n_cells,
                           "columns": int(order.size)}
    pos = np.full(n_cells, -1, dtype=np.int64)
    pos[cell] = at
    out["pos"] = pos
    # each cell's place in (importance desc, table position asc) within its question, absent
    # cells after the rest: selection's tie order, unique per question
    cq = np.repeat(np.arange(lq.size), lq_width)
    cell_imp = np.zeros(n_cells, dtype=np.float64)
    cell_imp[cell] = k["importance"][at]
    o = np.lexsort((pos, -cell_imp, pos < 0, cq))
    rank = np.empty(n_cells, dtype=np.int32 if n_cells < 2 ** 31 else np.int64)
    rank[o] = (np.arange(n_cells) - lq_cell[cq[o]]).astype(rank.dtype)
    out["rank"] = rank
    # each question's cells by (event time, table position), empty cells last: the order of
    # reverie's 'first' boost (score._first_boost's stable sort of the table's rows)
    etime = np.full(n_cells, np.inf)
    etime[cell] = k["event_time"][at]
    o = np.lexsort((pos, etime, pos < 0, cq))
    out["by_time"] = (np.arange(n_cells) - lq_cell[cq])[o].astype(rank.dtype)
    for c in _CELL:
        v = k[c]
        fill = np.nan if v.dtype.kind == "f" else -1   # intent -1: no row
        arr = np.full(n_cells, fill, dtype=v.dtype)
        arr[cell] = v[at]
        out[c] = arr
    src = at[first[order]]                              # a row of each column
    for c in _COLUMN:
        out[c] = np.ascontiguousarray(k[c][src])
    return out

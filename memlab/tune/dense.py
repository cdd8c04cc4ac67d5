"""The raw-signal table as dense blocks of questions x memories: what pruning reads (issue 8,
item 6; :mod:`memlab.tune.prune`).

A **block** is a set of questions whose rows give every memory one memory state (the values of
:data:`~memlab.recall.score.REVERIE_MEMORY_COLUMNS`: one memory asked about at one time): the
questions of one conversation asked at one time (LoCoMo: a block per conversation). Its
**columns** are the block's memories, so reverie's memory-level quantities of a configuration are
one vector per block, broadcast over its questions instead of gathered per row. Blocks are the
connected components of questions linked by a shared (memory, state) pair; a component in which
a memory takes two states (questions asked at different times that share nothing at one of them
but do at another) makes the layout unusable and the caller keeps the row path.

Per cell (question, memory), config-independent: the table position (-1: the memory is no
candidate of that question), the cosine (NaN as 0, as reverie's relevance reads it), the lexical
overlap, the entity matches, and the rank of the floor's z-score among all of the table's values
(so that ``z >= relevance_z`` is an exact integer comparison). Per question: its intent class
(recent and historical bits) and 'first' flag. Everything is float32 or smaller: the bounds of
:mod:`memlab.tune.prune` allow for float32 rounding; exact comparisons go through thresholds
rounded to float32 (:func:`ceil32`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from memlab.recall.features import LAYER_CODES
from memlab.recall.score import INTENT_FIRST, INTENT_HISTORICAL, INTENT_RECENT

__all__ = ["Block", "Layout", "layout", "ceil32", "MAX_BLOCKS", "MAX_FILL"]

#: More blocks than this (e.g. every question asked at its own time): no dense layout; the row
#: path serves. Speed only; results are the same either way.
MAX_BLOCKS = 64
#: Cells per table row above this (blocks mostly empty): no dense layout. Speed only.
MAX_FILL = 3.0


@dataclass
class Block:
    """One block: ``q`` its questions (ascending), arrays of shape (len(q), width)."""

    q: np.ndarray             # int64 question ids
    pos: np.ndarray           # int64 table position of each cell, -1 where absent
    present: np.ndarray       # bool
    state: np.ndarray         # int64 memory state of each column
    permanent: np.ndarray     # bool per column: permanent layer
    cos0: np.ndarray          # float32 cosine, NaN as 0 (absent: 0)
    cos_nan: np.ndarray | None  # bool where the cosine is NaN (None: nowhere)
    lexical: np.ndarray       # float32
    entity: np.ndarray        # float32 entity matches
    zrank: np.ndarray         # int32 rank of z among the table's sorted distinct z; -1 NaN
    intent_class: np.ndarray  # int64 per question: 1 recent bit, 2 historical bit
    first: np.ndarray         # bool per question: a 'first' intent
    min_len: np.ndarray       # int64 per question: its shortest candidate text
    text_len: np.ndarray      # int32 per cell (absent: 0)
    cos_lo: float             # smallest / largest cos0 over present cells
    cos_hi: float
    lex_hi: float
    ent_hi: float


@dataclass
class Layout:
    blocks: list[Block]
    z_sorted: np.ndarray      # distinct non-NaN z values of the table, ascending
    cos_sorted: np.ndarray    # distinct cos0 values (float32), ascending


def ceil32(x: float) -> np.float32:
    """The smallest float32 >= ``x``: for float32 ``v``, ``v >= x`` exactly when
    ``v >= ceil32(x)`` (a float32 comparison)."""
    f = np.float32(x)
    if np.isnan(f) or float(f) >= x:
        return f
    return np.nextafter(f, np.float32(np.inf))


def layout(prep) -> Layout | None:
    """The dense blocks of a :class:`~memlab.tune.prepared.Prepared` (None: not usable, see the
    module docstring)."""
    if not prep.qid_sorted:       # selection's prefix and walk read questions as runs of rows
        return None
    t = prep.table
    n, n_q = prep.n, prep.n_q
    qid = prep.qid
    state, _ = prep.memory_states
    conv_codes, _ = pd.factorize(pd.Series(prep.convs, dtype=object))
    rows = t["row"]
    mem, _ = pd.factorize(pd.Series(conv_codes[qid].astype(np.int64) * (int(rows.max()) + 1)
                                    + rows))
    mem = mem.astype(np.int64)
    pair, _ = pd.factorize(pd.Series(mem * (int(state.max()) + 1) + state))
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n_pair = int(pair.max()) + 1
    graph = coo_matrix((np.ones(n, dtype=np.int8), (qid, n_q + pair)),
                       shape=(n_q + n_pair, n_q + n_pair))
    _, label = connected_components(graph, directed=False)
    comp, qlabel = np.unique(label[:n_q], return_inverse=True)
    if len(comp) > MAX_BLOCKS:
        return None
    z = prep.z
    known = ~np.isnan(z)
    z_sorted, inverse = np.unique(z[known], return_inverse=True)
    zrank = np.full(n, -1, dtype=np.int64)
    zrank[known] = inverse.reshape(-1)
    cos = t["cosine"]
    cos0 = np.nan_to_num(cos, nan=0.0).astype(np.float32)
    nan = np.isnan(cos)
    row_block = qlabel[qid]
    order = np.argsort(row_block, kind="stable")            # qid order within each block
    cuts = np.flatnonzero(np.diff(row_block[order])) + 1
    intent = t["intent"]
    layer = t["layer"]
    text_len = t["text_len"]
    blocks, cells = [], 0
    for at in np.split(order, cuts):
        qs, qloc = np.unique(qid[at], return_inverse=True)
        cols, cloc = np.unique(mem[at], return_inverse=True)
        cells += len(qs) * len(cols)
        if cells > MAX_FILL * n:
            return None
        col_state = np.full(len(cols), -1, dtype=np.int64)
        col_state[cloc] = state[at]
        if not np.array_equal(col_state[cloc], state[at]):
            return None                                       # a memory with two states
        shape = (len(qs), len(cols))
        pos = np.full(shape, -1, dtype=np.int64)
        pos[qloc, cloc] = at

        def cell(values, fill, dtype):
            out = np.full(shape, fill, dtype=dtype)
            out[qloc, cloc] = values[at]
            return out

        perm = np.zeros(len(cols), dtype=bool)
        perm[cloc] = layer[at] == LAYER_CODES["permanent"]
        q_intent = np.zeros(len(qs), dtype=np.int64)
        q_intent[qloc] = intent[at]
        min_len = np.full(len(qs), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(min_len, qloc, text_len[at])
        c0 = cos0[at]
        blocks.append(Block(
            q=qs.astype(np.int64), pos=pos, present=pos >= 0, state=col_state, permanent=perm,
            cos0=cell(cos0, 0.0, np.float32),
            cos_nan=cell(nan, False, bool) if nan[at].any() else None,
            lexical=cell(t["lexical"].astype(np.float32), 0.0, np.float32),
            entity=cell(t["entity_matches"].astype(np.float32), 0.0, np.float32),
            zrank=cell(zrank.astype(np.int32), -1, np.int32),
            intent_class=(((q_intent & INTENT_RECENT) != 0).astype(np.int64)
                          + 2 * ((q_intent & INTENT_HISTORICAL) != 0)),
            first=(q_intent & INTENT_FIRST) != 0, min_len=min_len,
            text_len=cell(text_len.astype(np.int32), 0, np.int32),
            cos_lo=float(c0.min()), cos_hi=float(c0.max()),
            lex_hi=float(np.abs(t["lexical"][at]).max()),
            ent_hi=float(np.abs(t["entity_matches"][at]).max())))
    return Layout(blocks=blocks, z_sorted=z_sorted, cos_sorted=np.unique(cos0))

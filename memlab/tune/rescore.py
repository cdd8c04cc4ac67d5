"""One configuration's selections on a prepared replay, fast: the same positions as
``select(table, score(table, cfg), ...)`` (what ``bench.run.rank`` and live ``recall()`` do), in a
few vectorised passes (issue 8, item 6).

1. **Relevant rows first.** Selection keeps only rows that pass the relevance floor; the floor's
   test is a comparison on config-independent arrays (the z-score is computed once per replay). A
   scorer that works row by row (:data:`ROW_WISE`: reverie, cosine, bm25, rrf, dialog_tree) is then
   called, unchanged, on those rows alone (:class:`~memlab.tune.prepared.RowSubset`): its values
   there are those it gives the same rows in the whole table. Reverie's 'first' boost ranks a
   question's relevant rows, all of which are in the subset. Other scorers (generative_agents
   normalises over all rows of a question) score the whole table.
2. **Sort and cap** as selection does: (qid, score desc, importance desc, table order), at most
   ``recall.permanent_limit`` permanent rows per question.
3. **The walk, only where it can matter.** A question's pick is its top ``max(1, k)`` unless the
   char budget or dedup binds among them: when their characters fit the budget and each of them
   has a Jaccard below ``selection.dedup_jaccard`` with every other memory of its conversation
   (a bound computed once), no skip can happen. The other questions walk exactly as selection
   does, vectorised over questions (one step per candidate rank: budget, then Jaccard against the
   picks from the conversation's intersection counts); a question whose conversation has no
   intersection matrix (too many memories, or a memory without term set) goes through
   :func:`memlab.recall.select.select` itself.
4. 'First' questions (``temporal.enabled`` and ``temporal.oldest_first``) reorder their picks
   oldest first.

Results are positions of the replay's table, one row per question (``-1`` pads).
"""

from __future__ import annotations

import numpy as np

from memlab.bench.replay import ranked_per_question
from memlab.config import MemlabConfig
from memlab.recall.features import LAYER_CODES
from memlab.recall.score import INTENT_FIRST, SCORERS, Scored, score
from memlab.recall.select import select
from memlab.tune.prepared import Prepared, RowSubset

__all__ = ["ROW_WISE", "selections", "supported"]

#: Scorers whose score, eligibility and relevance of a row depend on that row's raw signals only
#: (and reverie's 'first' boost on the question's relevant rows): scored on the relevant rows.
ROW_WISE = frozenset({"reverie", "cosine", "bm25", "rrf", "dialog_tree"})
_FLOOR_MODES = ("absolute", "zscore")
_PERMANENT = LAYER_CODES["permanent"]


def supported(prep: Prepared, cfg: MemlabConfig) -> bool:
    """Whether :func:`selections` reproduces the reference for ``cfg`` on ``prep``."""
    rc = cfg.recall
    return (prep.usable and cfg.fusion.scorer in SCORERS and rc.floor_mode in _FLOOR_MODES
            and not (rc.floor_mode == "zscore" and prep.z_unknown))


def _relevant(prep: Prepared, cfg: MemlabConfig) -> np.ndarray | None:
    """The rows that pass ``recall.floor_mode``'s floor (None: all), as relevance_mask says."""
    rc = cfg.recall
    if rc.floor_mode == "absolute":
        if rc.relevance_floor == 0:
            return None
        cos_ok = prep.cosine >= rc.relevance_floor
    else:
        cos_ok = prep.z >= rc.relevance_z
    return cos_ok | (prep.lexical >= rc.lexical_floor)


def _scored(prep: Prepared, cfg: MemlabConfig) -> tuple[np.ndarray, np.ndarray]:
    """(positions that selection keeps: eligible and relevant, their scores), positions sorted."""
    name = cfg.fusion.scorer
    mask = _relevant(prep, cfg) if name in ROW_WISE else None
    if mask is None:
        s = score(prep.table, cfg)
        keep = np.asarray(s.eligible, dtype=bool) & np.asarray(s.relevant, dtype=bool)
        return np.flatnonzero(keep), s.score[keep]
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return idx, np.zeros(0)
    s = score(RowSubset(prep.table, idx), cfg)
    keep = np.asarray(s.eligible, dtype=bool) & np.asarray(s.relevant, dtype=bool)
    return idx[keep], s.score[keep]


def _sorted(prep: Prepared, pos: np.ndarray, sc: np.ndarray, cfg: MemlabConfig
            ) -> tuple[np.ndarray, np.ndarray]:
    """Selection's candidate order and permanent cap (select._candidates on the kept rows)."""
    q = prep.qid[pos]
    o = np.lexsort((-prep.importance[pos], -sc, q))
    order, q = pos[o], q[o]
    perm = (prep.table["layer"][order] == _PERMANENT).astype(np.int64)
    if perm.any():
        starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        sizes = np.diff(np.r_[starts, order.size])
        running = np.cumsum(perm)
        within = running - np.repeat(running[starts] - perm[starts], sizes)
        ok = (perm == 0) | (within <= cfg.recall.permanent_limit)
        order, q = order[ok], q[ok]
    return order, q


def selections(prep: Prepared, cfg: MemlabConfig) -> np.ndarray:
    """Selected table positions per question: an (n_questions, max(1, k)) int64 matrix, best
    first, -1 after the last pick; k = ``ranked_per_question(cfg)``. Needs :func:`supported`."""
    limit = max(1, int(ranked_per_question(cfg)))
    out = np.full((prep.n_q, limit), -1, dtype=np.int64)
    pos, sc = _scored(prep, cfg)
    if pos.size == 0:
        return out
    order, q = _sorted(prep, pos, sc, cfg)
    if order.size == 0:
        return out
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    sizes = np.diff(np.r_[starts, order.size])
    rank = np.arange(order.size) - np.repeat(starts, sizes)
    top = rank < limit
    sel = cfg.selection
    chars = np.add.reduceat(np.where(top, prep.text_len[order], 0), starts)
    clear = chars <= sel.char_budget
    if limit > 1:               # one pick has nothing to be a duplicate of
        clear &= _no_duplicates(prep, order, top, starts, sizes, limit, sel.dedup_jaccard)
    fast = np.repeat(clear, sizes) & top
    out[q[fast], rank[fast]] = order[fast]
    walk = np.flatnonzero(~clear)
    if walk.size:
        _walk(prep, cfg, order, starts[walk], sizes[walk], q[starts[walk]], limit, out)
    if cfg.temporal.enabled and cfg.temporal.oldest_first:
        _oldest_first(prep, out)
    return out


def _padded(order: np.ndarray, starts: np.ndarray, sizes: np.ndarray, width: int) -> np.ndarray:
    """The first ``width`` positions of each group of ``order`` as rows, -1 padded."""
    col = np.arange(width)
    at = np.minimum(starts[:, None] + col[None, :], order.size - 1)
    return np.where(col[None, :] < sizes[:, None], order[at], -1)


def _no_duplicates(prep: Prepared, order: np.ndarray, top: np.ndarray, starts: np.ndarray,
                   sizes: np.ndarray, limit: int, dedup: float) -> np.ndarray:
    """Per question: no two of its top ``limit`` candidates have Jaccard >= ``dedup``. First the
    conversation-wide bound; the questions it does not clear, pair by pair."""
    prep.dedup_arrays()
    worst = np.maximum.reduceat(np.where(top, prep.max_jaccard[order], -np.inf), starts)
    ok = worst < dedup
    check = np.flatnonzero(~ok & np.isfinite(worst))
    if check.size:
        heads = _padded(order, starts[check], sizes[check], min(limit, int(sizes.max())))
        a, b = heads[:, :, None], heads[:, None, :]
        j = np.arange(heads.shape[1])
        pair = (a >= 0) & (b >= 0) & (j[None, :, None] < j[None, None, :])
        jac = prep.jaccard(np.maximum(a, 0), np.maximum(b, 0))
        ok[check] = ~((jac >= dedup) & pair).any(axis=(1, 2))
    return ok


def _walk(prep: Prepared, cfg: MemlabConfig, order: np.ndarray, starts: np.ndarray,
          sizes: np.ndarray, qids: np.ndarray, limit: int, out: np.ndarray) -> None:
    """Selection's greedy walk (budget, dedup, k) for the questions ``qids``."""
    prep.dedup_arrays()
    vec = prep.inter_base[order[starts]] >= 0
    if vec.any():
        _walk_vectorised(prep, cfg, order, starts[vec], sizes[vec], qids[vec], limit, out)
    if (~vec).any():
        _walk_select(prep, cfg, order, starts[~vec], sizes[~vec], qids[~vec], limit, out)


def _walk_vectorised(prep: Prepared, cfg: MemlabConfig, order: np.ndarray, starts: np.ndarray,
                     sizes: np.ndarray, qids: np.ndarray, limit: int, out: np.ndarray) -> None:
    """One step per candidate rank over all the questions at once (exactly select's loop)."""
    budget, dedup = cfg.selection.char_budget, cfg.selection.dedup_jaccard
    cand = _padded(order, starts, sizes, int(sizes.max()))
    used = np.zeros(starts.size, dtype=np.int64)
    count = np.zeros(starts.size, dtype=np.int64)
    chosen = np.zeros((starts.size, limit), dtype=np.int64)     # positions picked so far
    slots = np.arange(limit)
    for j in range(cand.shape[1]):
        live = np.flatnonzero((count < limit) & (j < sizes))
        if live.size == 0:
            break
        p = cand[live, j]
        length = prep.text_len[p]
        fits = used[live] + length <= budget
        live, p, length = live[fits], p[fits], length[fits]
        if live.size == 0:
            continue
        n = count[live]
        if limit > 1:
            jac = prep.jaccard(p[:, None], chosen[live])
            dup = ((jac >= dedup) & (slots[None, :] < n[:, None])).any(axis=1)
            live, p, length, n = live[~dup], p[~dup], length[~dup], n[~dup]
        out[qids[live], n] = p
        chosen[live, n] = p
        used[live] += length
        count[live] = n + 1


def _walk_select(prep: Prepared, cfg: MemlabConfig, order: np.ndarray, starts: np.ndarray,
                 sizes: np.ndarray, qids: np.ndarray, limit: int, out: np.ndarray) -> None:
    """The questions whose conversation has no intersection matrix: through select() itself, on
    their kept rows (already sorted, capped and in table order within ties)."""
    idx = np.sort(np.concatenate([order[s:s + n] for s, n in zip(starts.tolist(),
                                                                 sizes.tolist())]))
    sub = RowSubset(prep.table, idx)
    ones = np.ones(idx.size, dtype=bool)
    # the order is known: minus the place in it serves as the score (same sort, same ties)
    place = np.empty(prep.n, dtype=np.float64)
    place[order] = -np.arange(order.size, dtype=np.float64)
    picked = select(sub, Scored(score=place[idx], eligible=ones, relevant=ones), k=limit,
                    terms=prep.terms, cfg=cfg)
    for qi in qids.tolist():
        got = idx[picked[qi]] if qi < len(picked) else np.zeros(0, dtype=np.int64)
        out[qi, :got.size] = got


def _oldest_first(prep: Prepared, out: np.ndarray) -> None:
    """'First' questions: their picks oldest first (stable), as selection's step 4."""
    head = out[:, 0]
    flag = np.flatnonzero((head >= 0) & ((prep.table["intent"][np.maximum(head, 0)]
                                          & INTENT_FIRST) != 0))
    if flag.size == 0:
        return
    sub = out[flag]
    times = np.where(sub >= 0, prep.table["event_time"][np.maximum(sub, 0)], np.inf)
    out[flag] = np.take_along_axis(sub, np.argsort(times, axis=1, kind="stable"), axis=1)

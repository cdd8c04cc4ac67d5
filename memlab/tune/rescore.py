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

**Pruning** (reverie, when the floor may let more than :data:`PRUNE_SHARE` of the rows through
and the replay has dense blocks, :mod:`memlab.tune.dense`): steps 1-2 run only on each question's
candidates of :mod:`memlab.tune.prune` (the rows a float32 bound says can reach its top
``PREFIX * k`` kept rows), scored exactly by the same scorer functions; those scoring at least the
bound's cut are a prefix of selection's order and are picked as above. A question whose walk runs
out of that prefix with fewer than ``k`` picks while one of its memories could still fit the
budget walks on over its kept rows that fit (scored exactly then), or is selected again from all
its kept rows where the walk cannot resume.

Every path here mirrors reference functions (:data:`memlab.tune.reference.MIRRORS`): where one of
them changed since the paths were checked against it, :func:`supported` says no and the caller
takes the reference path.

Results are positions of the replay's table, one row per question (``-1`` pads).
"""

from __future__ import annotations

import numpy as np

from memlab.bench.replay import ranked_per_question
from memlab.config import MemlabConfig
from memlab.recall.features import LAYER_CODES
from memlab.recall.score import (INTENT_FIRST, SCORERS, Scored, reverie_gate,
                                 reverie_memory, reverie_scored, score)
from memlab.recall.select import select
from memlab.tune import kernels, reference
from memlab.tune.prepared import Prepared, RowSubset
from memlab.tune.prune import candidates

#: Rows per question (times the ranking's length) in the prefix that selection sorts
#: (:func:`_prefix`) and that pruning keeps (at least): speed only.
PREFIX = 2
#: Pruning (the dense pass over every cell) serves configurations whose relevance floor may let
#: more than this share of the rows through; the row path (scoring those rows) the others.
#: Speed only; results are the same either way.
PRUNE_SHARE = 0.3

#: Selection through the numba kernels (:mod:`memlab.tune.kernels`) where numba imports; the
#: numpy path otherwise (same results). Tests set it to compare the two paths.
KERNELS = kernels.AVAILABLE

__all__ = ["ROW_WISE", "selections", "supported", "KERNELS"]

#: Scorers whose score, eligibility and relevance of a row depend on that row's raw signals only
#: (and reverie's 'first' boost on the question's relevant rows): scored on the relevant rows.
ROW_WISE = frozenset({"reverie", "cosine", "bm25", "rrf", "dialog_tree"})
_FLOOR_MODES = ("absolute", "zscore")
_WHOLE = 0.6      # score the whole table rather than gather rows once this share is in play
_PERMANENT = LAYER_CODES["permanent"]


def supported(prep: Prepared, cfg: MemlabConfig) -> bool:
    """Whether :func:`selections` reproduces the reference for ``cfg`` on ``prep``: the data and
    config are of a kind it serves, and the reference functions its paths mirror are those they
    were written against (:func:`memlab.tune.reference.stale`; else one warning per process)."""
    rc = cfg.recall
    return (prep.usable and cfg.fusion.scorer in SCORERS and rc.floor_mode in _FLOOR_MODES
            and not (rc.floor_mode == "zscore" and prep.z_unknown)
            and not reference.stale(cfg.fusion.scorer))


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
    if idx.size and name == "reverie":
        return _reverie(prep, cfg, idx)
    if idx.size == 0:
        return idx, np.zeros(0)
    s = score(RowSubset(prep.raw, idx), cfg)
    keep = np.asarray(s.eligible, dtype=bool) & np.asarray(s.relevant, dtype=bool)
    return idx[keep], s.score[keep]


def _reverie(prep: Prepared, cfg: MemlabConfig, idx: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Reverie on the relevant rows ``idx``: its memory-level quantities once per memory state,
    the forgetting gate on ``idx``, the scores on the eligible rows and on every relevant row of
    a 'first' question (the 'first' boost ranks those); the same values as :func:`score`. When
    most rows are in play, the whole table is scored in blocks of whole questions (slices, no
    gathers; blocks that fit the CPU caches) with the same mask."""
    state, state_rows = prep.memory_states
    memory = reverie_memory(RowSubset(prep.raw, state_rows), cfg)

    def run(at: np.ndarray, fn) -> list[np.ndarray]:
        if at.size <= _WHOLE * prep.n:
            return [a for a in fn(RowSubset(prep.raw, at), RowSubset(memory, state[at]),
                                  np.ones(at.size, dtype=bool))]
        mask = np.zeros(prep.n, dtype=bool)
        mask[at] = True
        parts = [fn(RowSubset(prep.table, sl), RowSubset(memory, state[sl]), mask[sl])
                 for sl in prep.blocks]
        return [np.concatenate(p)[at] for p in zip(*parts)]

    [eligible] = run(idx, lambda t, m, r: (reverie_gate(t, cfg, m, r)[1],))
    idx = idx[eligible | prep.first_intent[idx]]
    if idx.size == 0:
        return idx, np.zeros(0)

    def scored(t, m, r):
        s = reverie_scored(t, cfg, m, r)
        return s.score, np.asarray(s.eligible, dtype=bool) & np.asarray(s.relevant, dtype=bool)

    sc, keep = run(idx, scored)
    if not np.all(np.isfinite(sc)):
        score(prep.table, cfg)                   # raises as the reference does
    return idx[keep], sc[keep]


def _sorted(prep: Prepared, pos: np.ndarray, sc: np.ndarray, cfg: MemlabConfig
            ) -> tuple[np.ndarray, np.ndarray]:
    """Selection's candidate order and permanent cap (select._candidates on the kept rows)."""
    q = prep.qid[pos]
    o = _order(q, sc, prep.importance[pos])
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


def _order(q: np.ndarray, s: np.ndarray, imp: np.ndarray) -> np.ndarray:
    """``np.lexsort((-imp, -s, q))`` (rows in table order: ties keep it), faster: one stable
    argsort of the float key ``q * big - s`` (rounding is monotone, so it can merge two close
    scores of a question but never swap them), then each run of equal keys ordered exactly.
    Checked pair by pair; lexsort where the check fails."""
    if q.size < 2:
        return np.arange(q.size)
    lo, hi = float(s.min()), float(s.max())
    with np.errstate(over="ignore", invalid="ignore"):
        key = q * (2.0 * (hi - lo) + 1.0) - s
    o = np.argsort(key, kind="stable")
    k = key[o]
    tie = k[1:] == k[:-1]
    if tie.any():
        follows = np.r_[False, tie]                  # same key as the one before
        at = np.flatnonzero(follows | np.r_[tie, False])
        run = np.cumsum(~follows[at])
        sub = o[at]
        o[at] = sub[np.lexsort((-imp[sub], -s[sub], run))]
    a, b = o[:-1], o[1:]
    same = q[a] == q[b]
    ok = (q[a] < q[b]) | (same & ((s[a] > s[b]) | ((s[a] == s[b]) & (
        (imp[a] > imp[b]) | ((imp[a] == imp[b]) & (a < b))))))
    return o if ok.all() else np.lexsort((-imp, -s, q))


def selections(prep: Prepared, cfg: MemlabConfig) -> np.ndarray:
    """Selected table positions per question: an (n_questions, max(1, k)) int64 matrix, best
    first, -1 after the last pick; k = ``ranked_per_question(cfg)``. Needs :func:`supported`."""
    limit = max(1, int(ranked_per_question(cfg)))
    out = np.full((prep.n_q, limit), -1, dtype=np.int64)
    reverie = cfg.fusion.scorer == "reverie"
    if reverie and KERNELS and _fused(prep, cfg, limit, out):
        pass
    elif not (reverie and _relevant_share(prep, cfg) > PRUNE_SHARE
              and prep.dense is not None and _pruned(prep, cfg, limit, out)):
        out[:] = -1
        pos, sc = _scored(prep, cfg)
        _select(prep, cfg, pos, sc, limit, out)
    if cfg.temporal.enabled and cfg.temporal.oldest_first:
        _oldest_first(prep, out)
    return out


def _fused(prep: Prepared, cfg: MemlabConfig, limit: int, out: np.ndarray) -> bool:
    """Reverie's floor, gate, scores and selection fused per question in one numba kernel
    (:func:`memlab.tune.kernels.reverie_select`); False (``out`` reset) where it does not serve
    (a table that is not qid-sorted, a conversation without intersection matrix, a score that is
    not finite: the other paths decide, or raise as the scorer does)."""
    if not prep.fused_ok:
        return False
    memory = reverie_memory(prep.state_columns, cfg)
    if kernels.reverie_select(prep, cfg, memory, limit, out) == 0:
        return True
    out[:] = -1
    return False


def _relevant_share(prep: Prepared, cfg: MemlabConfig) -> float:
    """An upper bound of the share of rows that pass the relevance floor (from the sorted
    signals: two binary searches)."""
    rc = cfg.recall
    if rc.floor_mode == "absolute" and rc.relevance_floor == 0:
        return 1.0
    cos, z, lex = prep.floor_sorted
    side = cos if rc.floor_mode == "absolute" else z
    floor = rc.relevance_floor if rc.floor_mode == "absolute" else rc.relevance_z
    above = side.size - np.searchsorted(side, floor, side="left")
    above += lex.size - np.searchsorted(lex, rc.lexical_floor, side="left")
    return min(1.0, above / max(prep.n, 1))


def _select(prep: Prepared, cfg: MemlabConfig, pos: np.ndarray, sc: np.ndarray, limit: int,
            out: np.ndarray) -> None:
    """Selection of the questions of the kept rows ``pos`` (all of each question's kept rows,
    positions ascending; scores ``sc``) into ``out``."""
    if pos.size:
        if KERNELS:                     # the kernel orders lazily: no prefix to cut
            _pick(prep, cfg, pos, sc, limit, out)
            return
        cut = _prefix(prep, pos, sc, limit)
        if cut is None:
            _pick(prep, cfg, pos, sc, limit, out)
        else:
            _pick(prep, cfg, pos[cut], sc[cut], limit, out)
            _beyond_the_cut(prep, cfg, pos, sc, cut, limit, out)


def _exact(prep: Prepared, cfg: MemlabConfig, memory, pos: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Reverie's exact scores of the rows ``pos`` (each 'first' question's relevant rows all
    among them) and whether selection keeps each; None when a score is not finite."""
    state, _ = prep.memory_states
    s = reverie_scored(RowSubset(prep.raw, pos), cfg, RowSubset(memory, state[pos]),
                       np.ones(pos.size, dtype=bool))
    if not np.all(np.isfinite(s.score)):
        return None
    return s.score, np.asarray(s.eligible, dtype=bool)


def _pruned(prep: Prepared, cfg: MemlabConfig, limit: int, out: np.ndarray) -> bool:
    """Reverie's selections through :mod:`memlab.tune.prune`: the candidates scored exactly,
    each question's prefix picked; a question whose walk could go past its prefix (fewer than
    ``limit`` picks and a candidate short enough for the budget left) is selected again from
    all its kept rows. False (``out`` untouched or to be redone) when pruning does not apply."""
    _, state_rows = prep.memory_states
    memory = reverie_memory(RowSubset(prep.raw, state_rows), cfg)
    got = candidates(prep.dense, cfg, memory, prep.n_q, PREFIX * limit)
    if got is None:
        return False
    exact = _exact(prep, cfg, memory, got.pos)
    if exact is None:
        return False
    sc, keep = exact
    keep &= sc >= got.cut[prep.qid[got.pos]]    # each question's prefix of selection's order
    _select(prep, cfg, got.pos[keep], sc[keep], limit, out)
    whole = ~np.isfinite(got.cut)               # the questions whose kept rows are all here
    picked = out >= 0
    used = np.where(picked, prep.text_len[np.maximum(out, 0)], 0).sum(axis=1)
    redo = (~whole & (picked.sum(axis=1) < limit)
            & (got.min_len <= cfg.selection.char_budget - used))
    if not redo.any():
        return True
    # the walk goes on past the prefix over the rows that fit the budget left (as
    # _beyond_the_cut); from all kept rows where it cannot resume (the permanent cap counts
    # across the prefix, or no intersection matrix)
    prep.dedup_arrays()
    first = np.full(prep.n_q, -1, dtype=np.int64)
    first[prep.qid[got.pos[::-1]]] = got.pos[::-1]
    resume = ((got.permanent_kept() <= cfg.recall.permanent_limit) & (first >= 0)
              & (prep.inter_base[np.maximum(first, 0)] >= 0))
    for rows, max_len in ((redo & resume, cfg.selection.char_budget - used), (redo & ~resume, None)):
        if not rows.any():
            continue
        more = got.kept_of(rows, max_len)
        exact = _exact(prep, cfg, memory, more)
        if exact is None:
            return False
        sc, keep = exact
        more, sc = more[keep], sc[keep]
        if max_len is None:
            out[rows] = -1
            _select(prep, cfg, more, sc, limit, out)
        else:
            _beyond_the_cut(prep, cfg, more, sc, sc >= got.cut[prep.qid[more]], limit, out)
    return True


def _prefix(prep: Prepared, pos: np.ndarray, sc: np.ndarray, limit: int) -> np.ndarray | None:
    """Per question, its kept rows that score at least its (PREFIX limit)-th best: a prefix of
    selection's order (rows tied at the cut all in), so that only those are sorted and walked;
    the questions with more than twice that many. None when no list is that long."""
    if not prep.qid_sorted:
        return None
    q = prep.qid[pos]
    counts = np.bincount(q, minlength=prep.n_q)
    t = PREFIX * limit
    long = counts > 2 * t
    if not long.any():
        return None
    rows = long[q]
    lq, lsc = q[rows], sc[rows]
    lc = counts[long]
    width = int(lc.max())
    col = np.arange(lq.size) - np.repeat(np.cumsum(lc) - lc, lc)
    m = np.full((lc.size, width), -np.inf)
    m[np.repeat(np.arange(lc.size), lc), col] = lsc
    kth = np.full(prep.n_q, -np.inf)
    kth[long] = np.partition(m, width - t, axis=1)[:, width - t]
    return sc >= kth[q]


def _beyond_the_cut(prep: Prepared, cfg: MemlabConfig, pos: np.ndarray, sc: np.ndarray,
                    cut: np.ndarray, limit: int, out: np.ndarray) -> None:
    """Questions that ran out of their prefix with fewer than ``limit`` picks while a row past
    the cut fits their budget left: their walk goes on past the cut, over the rows that still
    fit (the budget left only shrinks: a longer row would be skipped anyway), from where it
    stopped; picked again from all their kept rows where the walk cannot resume (more permanent
    rows than the cap lets through: it counts across the cut; no intersection matrix)."""
    rest = ~cut
    if not rest.any():
        return
    q_rest = prep.qid[pos[rest]]
    starts = np.flatnonzero(np.r_[True, q_rest[1:] != q_rest[:-1]])
    shortest = np.full(prep.n_q, np.iinfo(np.int64).max)
    shortest[q_rest[starts]] = np.minimum.reduceat(prep.text_len[pos[rest]], starts)
    picked = out >= 0
    used = np.where(picked, prep.text_len[np.maximum(out, 0)], 0).sum(axis=1)
    left = cfg.selection.char_budget - used
    redo = (picked.sum(axis=1) < limit) & (shortest <= left)
    if not redo.any():
        return
    q = prep.qid[pos]
    prep.dedup_arrays()
    perm = np.bincount(q[prep.table["layer"][pos] == _PERMANENT], minlength=prep.n_q)
    resume = redo & (perm <= cfg.recall.permanent_limit)   # else the cap may bind past the cut
    first = np.full(prep.n_q, -1, dtype=np.int64)
    first[q[::-1]] = pos[::-1]                       # a row of each question
    resume &= (first >= 0) & (prep.inter_base[np.maximum(first, 0)] >= 0)
    again = redo & ~resume
    if again.any():
        rows = again[q]
        out[again] = -1
        _pick(prep, cfg, pos[rows], sc[rows], limit, out)
    tail = rest & resume[q] & (prep.text_len[pos] <= left[q])
    if tail.any() and KERNELS and _pick_kernel(prep, cfg, pos[tail], sc[tail], limit, out,
                                               resume=True):
        return
    if tail.any():
        tq = q[tail]
        o = _order(tq, sc[tail], prep.importance[pos[tail]])
        order, tq = pos[tail][o], tq[o]
        starts = np.flatnonzero(np.r_[True, tq[1:] != tq[:-1]])
        sizes = np.diff(np.r_[starts, order.size])
        _walk_vectorised(prep, cfg, order, starts, sizes, tq[starts], limit, out, resume=True)


def _pick(prep: Prepared, cfg: MemlabConfig, pos: np.ndarray, sc: np.ndarray, limit: int,
          out: np.ndarray) -> None:
    """Selection of the questions of the kept rows ``pos`` (scores ``sc``) into ``out``: the
    numba kernel where it serves, else :func:`_pick_numpy`."""
    if not (KERNELS and _pick_kernel(prep, cfg, pos, sc, limit, out)):
        if not KERNELS:
            kernels.note_fallback()
        _pick_numpy(prep, cfg, pos, sc, limit, out)


def _pick_kernel(prep: Prepared, cfg: MemlabConfig, pos: np.ndarray, sc: np.ndarray,
                 limit: int, out: np.ndarray, *, resume: bool = False) -> bool:
    """:func:`memlab.tune.kernels.select_runs` on the kept rows ``pos``; the questions it leaves
    (no intersection matrix) through :func:`_pick_numpy`. False (nothing written) when a score
    is NaN: the numpy path decides."""
    prep.dedup_arrays()
    q = prep.qid[pos]
    if q.size > 1 and not (q[1:] >= q[:-1]).all():
        o = np.argsort(q, kind="stable")
        pos, sc = pos[o], sc[o]
    sel = cfg.selection
    left = kernels.select_runs(prep, pos, sc, limit, sel.char_budget, sel.dedup_jaccard,
                               cfg.recall.permanent_limit, out, resume=resume)
    if left is None:
        return False
    if left.any():
        rows = left[prep.qid[pos]]
        _pick_numpy(prep, cfg, pos[rows], sc[rows], limit, out)
    return True


def _pick_numpy(prep: Prepared, cfg: MemlabConfig, pos: np.ndarray, sc: np.ndarray,
                limit: int, out: np.ndarray) -> None:
    """Sort and cap the kept rows ``pos`` (scores ``sc``), then each question's top ``limit``
    where nothing can bind, selection's walk elsewhere; into ``out``."""
    order, q = _sorted(prep, pos, sc, cfg)
    if order.size == 0:
        return
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
        j = np.arange(heads.shape[1])
        pair = (heads[:, :, None] >= 0) & (heads[:, None, :] >= 0) \
            & (j[None, :, None] < j[None, None, :])
        heads = np.where(heads >= 0, heads, heads[:, :1])   # pads: the question's own first
        jac = prep.jaccard(heads[:, :, None], heads[:, None, :])
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
                     sizes: np.ndarray, qids: np.ndarray, limit: int, out: np.ndarray, *,
                     resume: bool = False) -> None:
    """select's loop for all the questions at once. Each step moves every question to its next
    candidate that fits the budget left (the ones between would be skipped for the budget) and
    picks it unless it duplicates a pick: at most ``limit`` picks plus the dedup skips, not one
    step per candidate. ``resume``: the questions' picks in ``out`` so far are kept and the walk
    goes on after them."""
    budget, dedup = cfg.selection.char_budget, cfg.selection.dedup_jaccard
    cand = _padded(order, starts, sizes, int(sizes.max()))
    width = cand.shape[1]
    length = np.where(cand >= 0, prep.text_len[np.maximum(cand, 0)], np.iinfo(np.int64).max)
    col = np.arange(width)
    at = np.zeros(starts.size, dtype=np.int64)                  # next candidate to look at
    # positions picked so far (unfilled slots: the question's first candidate, same conversation)
    chosen = np.repeat(cand[:, :1], limit, axis=1)
    used = np.zeros(starts.size, dtype=np.int64)
    count = np.zeros(starts.size, dtype=np.int64)
    if resume:
        before = out[qids]
        have = before >= 0
        chosen = np.where(have, before, chosen)
        count = have.sum(axis=1)
        used = np.where(have, prep.text_len[np.maximum(before, 0)], 0).sum(axis=1)
    live = np.arange(starts.size)
    while live.size:
        left = budget - used[live]
        j = np.minimum(at[live], width - 1)
        found = length[live, j] <= left                         # the next candidate fits
        scan = np.flatnonzero(~found)
        if scan.size:                                           # else: the next one that does
            ls = live[scan]
            fit = (length[ls] <= left[scan][:, None]) & (col[None, :] >= at[ls, None])
            js = fit.argmax(axis=1)
            j[scan] = js
            found[scan] = fit[np.arange(ls.size), js]
        live, j = live[found], j[found]                         # the others have nothing left
        if live.size == 0:
            break
        p = cand[live, j]
        at[live] = j + 1
        n = count[live]
        take = np.ones(live.size, dtype=bool)
        seen = int(n.max())
        if seen and limit > 1:
            jac = prep.jaccard(p[:, None], chosen[live, :seen])
            take = ~((jac >= dedup) & (np.arange(seen)[None, :] < n[:, None])).any(axis=1)
        got, p, n, j = live[take], p[take], n[take], j[take]
        out[qids[got], n] = p
        chosen[got, n] = p
        used[got] += length[got, j]
        count[got] = n + 1
        live = live[(count[live] < limit) & (at[live] < sizes[live])]


def _walk_select(prep: Prepared, cfg: MemlabConfig, order: np.ndarray, starts: np.ndarray,
                 sizes: np.ndarray, qids: np.ndarray, limit: int, out: np.ndarray) -> None:
    """The questions whose conversation has no intersection matrix: through select() itself, on
    their kept rows (already sorted, capped and in table order within ties)."""
    idx = np.sort(np.concatenate([order[s:s + n] for s, n in zip(starts.tolist(),
                                                                 sizes.tolist())]))
    sub = RowSubset(prep.raw, idx)
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

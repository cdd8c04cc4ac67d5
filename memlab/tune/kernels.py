"""numba kernels of the per-configuration hot loop (issue 8, item 6): selection as one compiled
pass per question, the same picks as :mod:`memlab.tune.rescore`'s numpy path and
:func:`memlab.recall.select.select`, bit for bit.

:func:`select_runs`, per question (its kept rows contiguous in the input; any order within):

1. **Order**: selection's order (score desc, importance desc, table position asc: the stable
   lexsort's tie-break), only as far as the walk needs it: first the rows scoring at least the
   question's ``PREFIX * k``-th best score (an in-place quickselect finds it), sorted (argsort
   by score, then an insertion pass over runs of equal scores); the others, where the walk needs
   more, those that still fit the budget left or are permanent, sorted then. What the walk reads
   of each candidate (importance, permanence, text length, largest Jaccard) is gathered once
   into arrays beside its score, so the sort and the walk read the CPU caches, not the table.
   Where nothing can bind (the best ``k`` rows, no tie past them, fit the budget together, hold
   at most the cap of permanent rows and have no Jaccard at the dedup threshold with any memory
   of their conversation) they are the picks, sorted by insertion.
2. **Permanent cap**: a permanent row past the ``recall.permanent_limit``-th in that order is no
   candidate (it still counts).
3. **Walk**: skip a row whose text does not fit the budget left, skip one whose Jaccard with a
   pick is >= ``selection.dedup_jaccard`` (the stored Jaccards or those computed from the
   intersection counts, as :meth:`Prepared.jaccard <memlab.tune.prepared.Prepared.jaccard>`),
   stop at ``k`` picks or when no row left can fit (the shortest row of the question is longer
   than the budget left).

A question whose conversation has no intersection matrix is flagged ``unresolved`` (untouched);
the caller selects it on the numpy path. Any NaN score: nothing is written, the call returns 1
(the numpy path decides).

:func:`reverie_select` fuses what comes before, on the blocks of :mod:`memlab.tune.blocks`
(questions x memories, each question's memories in text-length order), per question: the
relevance floor (``recall.floor_mode``), reverie's relevance and forgetting gate and the score of
every row as :func:`memlab.recall.score.reverie_scored` computes it, term by term in the same
order from 0 (IEEE float64, no fast-math: the same values), in one loop of selects over
contiguous arrays that the compiler vectorises (:func:`_score_rows`; the memory-level terms come
from :func:`~memlab.recall.score.reverie_memory` once per memory state, their products with the
weights are formed once per state and gathered once per block; the 'first' boost by event time
rank, stable), then the walk as a **tournament tree**: the kept rows, in text-length order, are
the leaves, keyed by (score, the row's place in (importance desc, table position asc)), so a
node holds the first row of its subtree in selection's order; the rows that fit the budget left
are a prefix of the leaves, so each pick is the first of a shrinking prefix (O(log n)), a row
skipped for the budget is never looked at, and a pick or a duplicate leaves the tree. The
permanent cap is applied before (the permanent rows past the cap-th in selection's order are no
candidates). It reads the layout's columns in their stored dtypes (float32, int8, int16, int32;
the same values once converted to float64) and the Jaccards from the intersection counts (8
times smaller than stored float64 Jaccards: they stay in the CPU caches; the same values). A
relevance floor asked for again (a sweep over weights keeps the preset's) comes with its rows
laid out question by question (:meth:`Prepared.relevant_rows
<memlab.tune.prepared.Prepared.relevant_rows>`): the kernel then reads only them. A score that
is not finite returns 1: the numpy path then raises as the scorer does.

numba is optional (the ``fast`` extra): without it :data:`AVAILABLE` is False, the numpy path
serves (same results, slower), and that is logged once. Compiled functions are cached on disk
(numba's ``cache=True``: ``__pycache__`` beside this file, or ``NUMBA_CACHE_DIR``) where a cache
directory is writable, else compiled in each process (logged once). :func:`warm` compiles (or
loads) them on a tiny input; :data:`stats` holds its seconds.

One module on purpose (it is longer than memlab's usual ~500 lines): the fused kernel calls the
walk, and numba's disk cache of a compiled caller does not notice a change to a callee defined in
another file (numba's documented cache limitation), so splitting them would let a stale cached
kernel outlive an edit of the walk.
"""

from __future__ import annotations

import importlib.util
import logging
import time

import numpy as np

from memlab.recall.score import INTENT_FIRST, INTENT_HISTORICAL, INTENT_RECENT

__all__ = ["AVAILABLE", "WHY", "select_runs", "reverie_select", "pack", "FLOATS", "INTS", "warm",
           "stats"]

log = logging.getLogger(__name__)

_SPEC = importlib.util.find_spec("numba")
#: Whether the kernels can exist (numba is installed; it is imported, and the kernels compiled or
#: loaded from the disk cache, on first need: :func:`warm`).
AVAILABLE = _SPEC is not None
WHY = "" if AVAILABLE else ("numba is not installed (the `fast` extra): the numpy selection path "
                            "serves (same results, slower)")
#: compile_s: seconds :func:`warm` took to compile or load the kernels; cached: whether compiled
#: code is cached on disk; warmed: signatures warmed (inter dtypes); numpy_fallbacks: selections
#: the numpy path made because numba is missing.
stats: dict = {"compile_s": 0.0, "cached": False, "warmed": [], "numpy_fallbacks": 0}
#: Rows per question (times ``k``) walked first: those scoring at least that best score (speed
#: only; the same picks either way).
PREFIX = 2
_state = {"loaded": False, "logged": False, "logged_cache": False}


def _jit(numba, fn):
    """``numba.njit(cache=True)``, or without the disk cache where no cache directory is
    writable (numba raises RuntimeError when it finds no cache locator)."""
    try:
        out = numba.njit(cache=True, nogil=True)(fn)
        stats["cached"] = True
        return out
    except RuntimeError as e:
        if not _state["logged_cache"]:
            log.warning("numba cannot cache its kernels on disk (%s): compiled in each process",
                        e)
            _state["logged_cache"] = True
        return numba.njit(nogil=True)(fn)


def _load() -> bool:
    """Import numba and wrap the kernels (once); False where numba does not import."""
    global AVAILABLE, WHY, _better, _jaccard, _walk, _select_runs, _minimum
    global _reverie_select, _kth, _clear, _sort_run, _drain_sorted, _insertion_sort
    global _tree_build, _tree_best, _tree_drop, _tree_walk, _score_rows, _tree_fix
    if _state["loaded"]:
        return AVAILABLE
    _state["loaded"] = True
    try:
        import numba
    except ImportError as e:       # installed but broken: the numpy path serves
        AVAILABLE, WHY = False, f"numba does not import ({e}): the numpy selection path serves"
        note_fallback()
        return False
    inline = numba.njit(inline="always")
    _better, _jaccard, _minimum = inline(_better), inline(_jaccard), inline(_minimum)
    _insertion_sort = inline(_insertion_sort)
    _walk, _kth = _jit(numba, _walk), _jit(numba, _kth)
    _clear = _jit(numba, _clear)
    _sort_run, _drain_sorted = _jit(numba, _sort_run), _jit(numba, _drain_sorted)
    _tree_build, _tree_best, _tree_drop = inline(_tree_build), inline(_tree_best), \
        inline(_tree_drop)
    _tree_fix = inline(_tree_fix)
    _tree_walk, _score_rows = _jit(numba, _tree_walk), _jit(numba, _score_rows)
    _select_runs, _reverie_select = _jit(numba, _select_runs), _jit(numba, _reverie_select)
    return True


def note_fallback() -> None:
    """The numpy path serves because numba is missing: logged once, counted in
    ``stats["numpy_fallbacks"]``."""
    if AVAILABLE:
        return
    stats["numpy_fallbacks"] += 1
    if not _state["logged"]:
        log.warning(WHY)
        _state["logged"] = True


def _better(a, b, pos, sc, imp):
    """Whether candidate ``a`` comes before ``b`` in selection's order (indices into pos, sc and
    the candidates' importances ``imp``); without branches (a mispredicted branch per
    comparison costs more than evaluating every key)."""
    sa, sb = sc[a], sc[b]
    ia, ib = imp[a], imp[b]
    return (sa > sb) | ((sa == sb) & ((ia > ib) | ((ia == ib) & (pos[a] < pos[b]))))


def _jaccard(a, b, use_jac, jac, inter, inter_row, mem_local, n_terms):
    """Prepared.jaccard of positions ``a`` and ``b`` (same conversation, with a matrix; the
    matrix is symmetric, bit for bit: the walk reads the rows of its picks, which stay in the
    CPU caches)."""
    at = inter_row[a] + mem_local[b]
    if use_jac:
        return jac[at]
    x = np.float64(inter[at])
    union = np.float64(n_terms[a] + n_terms[b]) - x
    if union > 0:
        return x / union
    return 0.0


def _kth(buf, n, k):
    """The ``k``-th smallest of ``buf[:n]`` (0-based; ``buf`` reordered): quickselect with a
    median-of-three pivot (what np.partition gives, without its copy)."""
    lo = 0
    hi = n - 1
    while hi > lo:
        mid = (lo + hi) // 2
        a, b, c = buf[lo], buf[mid], buf[hi]
        if a < b:
            pivot = b if b < c else (c if a < c else a)
        else:
            pivot = a if a < c else (c if b < c else b)
        i = lo
        j = hi
        while i <= j:
            while buf[i] < pivot:
                i += 1
            while buf[j] > pivot:
                j -= 1
            if i <= j:
                t = buf[i]
                buf[i] = buf[j]
                buf[j] = t
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return buf[k]
    return buf[k]


def _clear(pos, sc, h, n1, q, scratch, imp, perm, tlen, mj, limit, budget, dedup, cap, out):
    """The walk where nothing can bind. ``h[:n1]`` holds a prefix of the question's rows in
    selection's order (any order within it); when its best ``limit`` rows (no tie with a row
    past them) fit the budget together, hold at most ``cap`` permanent rows and none of them has
    a Jaccard of ``dedup`` or more with any memory of its conversation, the picks are those rows
    in selection's order (sorted by insertion): written, True. Else False, nothing written
    (``h[:n1]`` may be reordered)."""
    top = limit if limit < n1 else n1
    if n1 > limit:
        for t in range(n1):
            scratch[t] = sc[h[t]]
        cut = _kth(scratch, n1, n1 - limit)
        n = 0
        for t in range(n1):                   # the best rows to the front
            i = h[t]
            if sc[i] >= cut:
                if n == top:                  # a tie across the cut: the general walk
                    return False
                h[t] = h[n]
                h[n] = i
                n += 1
    chars = 0
    permanent = 0
    for t in range(top):
        i = h[t]
        chars += tlen[i]
        permanent += perm[i]
        if mj[i] >= dedup:
            return False
    if chars > budget or permanent > cap:
        return False
    _insertion_sort(h, top, pos, sc, imp)
    for t in range(top):
        out[q, t] = pos[h[t]]
    return True


def _insertion_sort(h, n, pos, sc, imp):
    """``h[:n]`` put in selection's order by insertion (cheap on few rows or on runs already
    ordered by score)."""
    for t in range(1, n):
        i = h[t]
        u = t - 1
        while u >= 0 and _better(i, h[u], pos, sc, imp):
            h[u + 1] = h[u]
            u -= 1
        h[u + 1] = i


def _sort_run(h, size, pos, sc, imp, keys):
    """``h[:size]`` sorted in selection's order: by score (argsort), then an insertion pass
    that orders runs of equal scores by importance and table position."""
    for t in range(size):
        keys[t] = -sc[h[t]]
    o = np.argsort(keys[:size])
    tmp = h[:size][o]
    for t in range(size):
        h[t] = tmp[t]
    _insertion_sort(h, size, pos, sc, imp)


def _drain_sorted(h, size, pos, q, chosen, count, used, seen_permanent, perm, tlen, mj,
                  use_jac, jac, inter, inter_row, mem_local, n_terms, limit, budget, dedup, cap,
                  shortest, out):
    """The walk (module docstring, steps 2-3) over the candidates ``h[:size]`` (indices into
    pos and the candidates' permanence ``perm``, text length ``tlen`` and largest Jaccard in
    their conversation ``mj``), already in selection's order, from the state (count, used,
    seen_permanent); returns that state. (A budget that binds makes the walk look at most rows:
    one sort costs less than a heap pop per row.)"""
    for t in range(size):
        if count >= limit or budget - used < shortest:
            break
        i = h[t]
        if perm[i]:
            seen_permanent += 1
            if seen_permanent > cap:
                continue
        length = tlen[i]
        if length > budget - used:
            continue
        p = pos[i]
        duplicate = False
        if mj[i] >= dedup:
            for c in range(count):
                if _jaccard(chosen[c], p, use_jac, jac, inter, inter_row, mem_local,
                            n_terms) >= dedup:
                    duplicate = True
                    break
        if duplicate:
            continue
        out[q, count] = p
        chosen[count] = p
        used += length
        count += 1
    return count, used, seen_permanent


def _walk(pos, sc, s, e, q, work, scratch, chosen, imp, perm, tlen, mj, text_len, use_jac, jac,
          inter, inter_row, mem_local, n_terms, limit, budget, dedup, cap, resume, out):
    """One question's selection from its kept rows ``pos[s:e]`` (scores ``sc[s:e]``; their
    importance, permanence, text length and largest Jaccard at the same indices of ``imp``,
    ``perm``, ``tlen``, ``mj``) into ``out[q]`` (module docstring, steps 1-3): first over its rows
    scoring at least its (:data:`PREFIX` ``limit``)-th best score (a prefix of selection's order,
    ties at the cut all in; a quickselect finds it), then, where the walk needs more, over the
    others that fit the budget left or are permanent. ``resume``: the picks in ``out[q]`` stay
    and the walk goes on after them (their text lengths read from ``text_len`` by position)."""
    count = 0
    used = 0
    if resume:
        while count < limit and out[q, count] >= 0:
            chosen[count] = out[q, count]
            used += text_len[chosen[count]]
            count += 1
    size = e - s
    if size == 0 or count >= limit:
        return
    shortest = tlen[s]
    for j in range(s, e):
        if tlen[j] < shortest:
            shortest = tlen[j]
    if budget - used < shortest:
        return
    h = work[s:e]
    want = PREFIX * limit
    if size > 2 * want:
        for j in range(size):
            scratch[j] = sc[s + j]
        cut = _kth(scratch, size, size - want)
        n1 = 0
        n2 = size
        for j in range(s, e):               # the prefix from the front, the rest from the back
            if sc[j] >= cut:
                h[n1] = j
                n1 += 1
            else:
                n2 -= 1
                h[n2] = j
    else:
        n1 = size
        n2 = size
        for j in range(size):
            h[j] = s + j
    if count == 0 and _clear(pos, sc, h, n1, q, scratch, imp, perm, tlen, mj, limit, budget,
                             dedup, cap, out):
        return
    _sort_run(h, n1, pos, sc, imp, scratch)
    count, used, seen = _drain_sorted(h, n1, pos, q, chosen, count, used, 0, perm, tlen, mj,
                                      use_jac, jac, inter, inter_row, mem_local, n_terms, limit,
                                      budget, dedup, cap, shortest, out)
    if n2 < size and count < limit and budget - used >= shortest:
        left = budget - used
        m = 0
        for j in range(n2, size):
            i = h[j]
            if tlen[i] <= left or perm[i]:
                h[m] = i
                m += 1
        _sort_run(h, m, pos, sc, imp, scratch)
        _drain_sorted(h, m, pos, q, chosen, count, used, seen, perm, tlen, mj, use_jac, jac,
                      inter, inter_row, mem_local, n_terms, limit, budget, dedup, cap, shortest,
                      out)


def _select_runs(pos, sc, qid, importance, permanent, text_len, use_jac, jac, inter, inter_row,
                 mem_local, n_terms, max_jac, inter_base, limit, budget, dedup, cap, resume, out,
                 unresolved):
    n = pos.size
    for i in range(n):
        if np.isnan(sc[i]):
            return 1
    work = np.empty(n, dtype=np.int64)
    scratch = np.empty(n, dtype=np.float64)
    chosen = np.empty(limit, dtype=np.int64)
    imp = np.empty(n, dtype=importance.dtype)      # the candidates' own values, gathered once
    perm = np.empty(n, dtype=np.bool_)
    tlen = np.empty(n, dtype=np.int64)
    mj = np.empty(n, dtype=np.float64)
    for i in range(n):
        p = pos[i]
        imp[i] = importance[p]
        perm[i] = permanent[p]
        tlen[i] = text_len[p]
        mj[i] = max_jac[p]
    s = 0
    while s < n:
        q = qid[pos[s]]
        e = s + 1
        while e < n and qid[pos[e]] == q:
            e += 1
        if inter_base[pos[s]] < 0:          # no intersection matrix: the numpy path
            unresolved[q] = True
        else:
            _walk(pos, sc, s, e, q, work, scratch, chosen, imp, perm, tlen, mj, text_len,
                  use_jac, jac, inter, inter_row, mem_local, n_terms, limit, budget, dedup, cap,
                  resume, out)
        s = e
    return 0


# -- reverie: floor, gate, score and selection fused per question ---------------------------------
#: The walk's tree keys hold a leaf's index in their low bits: questions of at most 2^LEAF_BITS
#: cells (more: the numpy path).
LEAF_BITS = 24
LEAF_MASK = (1 << LEAF_BITS) - 1
#: Values per memory state in the fused kernel's table (see _reverie_select).
_MS = 11
#: The fused kernel's float parameters (config keys), packed by :func:`pack` in this order. The
#: kernel reads each by name: through the constant ``_F_`` + the field's name (upper case),
#: defined below from this list (never a position written out; tests/tune/test_reference.py
#: checks the packing, the constants and that the kernel reads ``fp`` and ``ip`` only through
#: them).
FLOATS = ("recall.relevance_floor", "recall.lexical_floor", "fusion.relevance_baseline",
          "forgetting.eligibility_threshold", "forgetting.eligibility_relevance",
          "fusion.relevance", "fusion.lexical", "fusion.importance", "fusion.frequency",
          "fusion.temporal", "fusion.emotion", "fusion.resident_boost_cap",
          "fusion.cue_reactivation_factor", "fusion.cue_reactivation_cap", "entity.boost_each",
          "entity.boost_cap", "temporal.recent_window_days", "temporal.intent_boost",
          "temporal.first_boost")
#: Its int parameters, read through ``_I_`` + the name (upper case): the floor's mode (0: every
#: row passes, 1: absolute, 2: z-score), recency mode (``fusion.temporal_mode == "recency"``),
#: governance, entity and temporal terms on, and the z-score rank from which a row passes the
#: floor (``z >= recall.relevance_z`` exactly where its rank is at least this).
INTS = ("floor_mode", "recency_mode", "governance", "entity", "temporal", "z_at")
_F_RELEVANCE_FLOOR = FLOATS.index("recall.relevance_floor")
_F_LEXICAL_FLOOR = FLOATS.index("recall.lexical_floor")
_F_RELEVANCE_BASELINE = FLOATS.index("fusion.relevance_baseline")
_F_ELIGIBILITY_THRESHOLD = FLOATS.index("forgetting.eligibility_threshold")
_F_ELIGIBILITY_RELEVANCE = FLOATS.index("forgetting.eligibility_relevance")
_F_RELEVANCE = FLOATS.index("fusion.relevance")
_F_LEXICAL = FLOATS.index("fusion.lexical")
_F_IMPORTANCE = FLOATS.index("fusion.importance")
_F_FREQUENCY = FLOATS.index("fusion.frequency")
_F_TEMPORAL = FLOATS.index("fusion.temporal")
_F_EMOTION = FLOATS.index("fusion.emotion")
_F_RESIDENT_BOOST_CAP = FLOATS.index("fusion.resident_boost_cap")
_F_CUE_REACTIVATION_FACTOR = FLOATS.index("fusion.cue_reactivation_factor")
_F_CUE_REACTIVATION_CAP = FLOATS.index("fusion.cue_reactivation_cap")
_F_BOOST_EACH = FLOATS.index("entity.boost_each")
_F_BOOST_CAP = FLOATS.index("entity.boost_cap")
_F_RECENT_WINDOW_DAYS = FLOATS.index("temporal.recent_window_days")
_F_INTENT_BOOST = FLOATS.index("temporal.intent_boost")
_F_FIRST_BOOST = FLOATS.index("temporal.first_boost")
_I_FLOOR_MODE = INTS.index("floor_mode")
_I_RECENCY_MODE = INTS.index("recency_mode")
_I_GOVERNANCE = INTS.index("governance")
_I_ENTITY = INTS.index("entity")
_I_TEMPORAL = INTS.index("temporal")
_I_Z_AT = INTS.index("z_at")


def _minimum(a, b):
    """np.minimum of two floats (NaN propagates); selects, no branch."""
    return np.nan if (np.isnan(a) | np.isnan(b)) else (a if a <= b else b)


def _tree_build(ts, tk, n, lsc, rank, kidx):
    """The tournament tree of the rows ``kidx[:n]`` of one question (a bottom-up segment tree:
    leaf ``i`` at ``n + i``, node ``i`` over ``2i`` and ``2i + 1``, the root at 1), each node's
    key (score ``lsc``, tie rank ``rank``: the row's place in (importance desc, table position
    asc), unique within the question) the key of its subtree's first row in selection's order.
    The tie key holds the leaf too: ``rank << LEAF_BITS | i`` (ordered by the rank alone, since
    ranks are unique; the leaf is its low bits)."""
    for i in range(n):
        j = kidx[i]
        ts[n + i] = lsc[j]
        tk[n + i] = (np.int64(rank[j]) << LEAF_BITS) | i
    for i in range(n - 1, 0, -1):
        _tree_fix(ts, tk, i)


def _tree_fix(ts, tk, i):
    """Node ``i``: the first of its two children in selection's order (no branch)."""
    sa, sb = ts[2 * i], ts[2 * i + 1]
    ka, kb = tk[2 * i], tk[2 * i + 1]
    a = (sa > sb) | ((sa == sb) & (ka < kb))
    ts[i] = sa if a else sb
    tk[i] = ka if a else kb


def _tree_best(ts, tk, n, m):
    """The key (score, tie key) of the first of leaves ``0..m-1`` (1 <= m < n) in selection's
    order, from the prefix's covering nodes (selects, no branch on the values)."""
    lo = n
    hi = n + m
    top = -np.inf
    key = n + n
    while lo < hi:
        odd = (lo & 1) != 0
        v, k = ts[lo], tk[lo]
        a = odd & ((v > top) | ((v == top) & (k < key)))
        top = v if a else top
        key = k if a else key
        lo += lo & 1
        odd = (hi & 1) != 0
        hi -= hi & 1
        v, k = ts[hi], tk[hi]
        a = odd & ((v > top) | ((v == top) & (k < key)))
        top = v if a else top
        key = k if a else key
        lo >>= 1
        hi >>= 1
    return top, key


def _tree_drop(ts, tk, n, j):
    """Leaf ``j`` out of the walk (-inf: after every row still in), the nodes above it
    recomputed."""
    i = n + j
    ts[i] = -np.inf
    i >>= 1
    while i >= 1:
        _tree_fix(ts, tk, i)
        i >>= 1


def _tree_walk(n, q, ts, tk, kidx, klen, lpos, lsc, rank, ltl, max_jac, crow, cml, cnt,
               chosen, inter, limit, budget, dedup, out):
    """Selection's walk (module docstring, step 3) over one question's rows, local ``0..n-1``
    in text-length order (``ltl`` ascending; ``lsc`` -inf for a row that is no candidate;
    ``rank`` the tie order): its candidates, in that order (``kidx``, their lengths ``klen``),
    go into a tournament tree; the ones that fit the budget left are a prefix of them, so each
    pick is the first of a shrinking prefix in selection's order, and a row skipped for the
    budget is never looked at. A pick or a duplicate leaves the tree; the walk stops at
    ``limit`` picks or when no candidate fits. Dedup reads each row's intersection counts
    (``crow``: where its row of them starts, ``cml``: its column in them, ``cnt``: its term
    count; as :meth:`Prepared.jaccard <memlab.tune.prepared.Prepared.jaccard>`) from the
    question's own arrays, not the table's."""
    c = 0
    for j in range(n):                  # the candidates (no branch)
        kidx[c] = j
        klen[c] = ltl[j]
        c += lsc[j] > -np.inf
    if c == 0:
        return
    _tree_build(ts, tk, c, lsc, rank, kidx)
    count = 0
    used = 0
    m = c
    while count < limit:
        left = budget - used
        if klen[m - 1] > left:          # the prefix that fits shrinks: binary search
            lo, hi = 0, m - 1           # klen[hi] > left; the answer is in [lo, hi]
            while lo < hi:
                mid = (lo + hi) >> 1
                if klen[mid] > left:
                    hi = mid
                else:
                    lo = mid + 1
            m = lo
        if m == 0:
            break
        i = tk[1] & LEAF_MASK           # the first of all: the prefix's too if it fits
        if i < m:
            top = ts[1]
        else:
            top, key = _tree_best(ts, tk, c, m)
            i = key & LEAF_MASK
        if top == -np.inf:
            break
        w = kidx[i]
        duplicate = False
        if max_jac[w] >= dedup:
            for t in range(count):
                if _jaccard(chosen[t], w, False, _EMPTY_F, inter, crow, cml, cnt) >= dedup:
                    duplicate = True
                    break
        if not duplicate:
            out[q, count] = lpos[w]
            chosen[count] = w
            used += klen[i]
            count += 1
        _tree_drop(ts, tk, c, i)


def _score_rows(n, q_intent, cos, zrank, lexical, entity, present, permanent, g0, g12, g3, g4,
                g5, g_temporal, g8, g9, g10, fp, ip, t_zero, inv, raw, rel, lsc, flag):
    """Reverie's score of each of a question's rows (``lsc``; ``flag`` 1: kept, relevant and
    eligible; 2: relevant in a 'first' question), from its raw signals (views of the question's
    rows; ``present`` >= 0 where a cell holds a row) and its memory states' factors ``g0..g10``
    (:func:`_reverie_select`'s table, gathered; ``g12`` the relevance factor, or with
    governance the resident boost (the other is 1, resp. 0); ``g_temporal`` the temporal one
    the question's intent ``q_intent`` takes):
    the floor, the gate and every term as :func:`memlab.recall.score.reverie_scored` computes
    them, term by term in ``score._sum``'s order (IEEE float64). Selects only, no branch on the
    values, every array read at ``j``: the compiler vectorises it. (whether a score of a kept or
    'first' row is not finite, 'first' rows, kept permanent rows)."""
    relevance_floor, lexical_floor = fp[_F_RELEVANCE_FLOOR], fp[_F_LEXICAL_FLOOR]
    base = fp[_F_RELEVANCE_BASELINE]
    z_at = ip[_I_Z_AT]        # z >= recall.relevance_z exactly where z's rank is at least this
    elig_rel = fp[_F_ELIGIBILITY_RELEVANCE]
    w_rel, w_lex = fp[_F_RELEVANCE], fp[_F_LEXICAL]
    cue_factor, cue_cap = fp[_F_CUE_REACTIVATION_FACTOR], fp[_F_CUE_REACTIVATION_CAP]
    ent_each, ent_cap = fp[_F_BOOST_EACH], fp[_F_BOOST_CAP]
    floor_mode, recency_mode, governance = ip[_I_FLOOR_MODE], ip[_I_RECENCY_MODE], \
        ip[_I_GOVERNANCE]
    entity_on, temporal_on = ip[_I_ENTITY], ip[_I_TEMPORAL]
    first_r = (q_intent & INTENT_FIRST) != 0
    recent = (q_intent & INTENT_RECENT) != 0
    historical = (q_intent & INTENT_HISTORICAL) != 0
    no_temporal = not ((recency_mode != 0) | recent | historical)   # the temporal term: 0
    direction = (1.0 if recent else 0.0) - (1.0 if historical else 0.0)
    n_first = 0
    n_perm = 0
    for j in range(n):          # the floor, relevance and the gate
        c = np.float64(cos[j])
        relevant = (present[j] >= 0) & (
            (floor_mode == 0) | ((floor_mode == 1) & (c >= relevance_floor))
            | ((floor_mode == 2) & (zrank[j] >= z_at))
            | ((floor_mode != 0) & (lexical[j] >= lexical_floor)))
        x = 0.0 if np.isnan(c) else c
        relevance = (x - base) / inv
        relevance = 0.0 if relevance < 0.0 else (1.0 if relevance > 1.0 else relevance)
        eligible = (g0[j] != 0.0) | (relevance >= elig_rel)
        kept = relevant & eligible
        scored_first = relevant & first_r
        n_first += scored_first
        n_perm += kept & permanent[j]
        rel[j] = relevance
        flag[j] = np.uint8(kept) | (np.uint8(scored_first) << np.uint8(1))
    bad = False
    for j in range(n):          # the score, term by term
        relevance = rel[j]
        temporal = t_zero if no_temporal else g_temporal[j]
        f12 = g12[j]
        rel_eff = relevance if governance != 0 else relevance * f12
        cue = _minimum(relevance * g9[j] * cue_factor, cue_cap)
        ent = _minimum(ent_each * np.float64(entity[j]), ent_cap) if entity_on != 0 else 0.0
        intent_t = g10[j] * direction if temporal_on != 0 else 0.0
        total = 0.0                              # score._sum's order
        total = total + w_rel * rel_eff
        total = total + w_lex * np.float64(lexical[j])
        total = total + g3[j]
        total = total + g4[j]
        total = total + g5[j]
        total = total + temporal
        total = total + g8[j]
        total = total + (f12 if governance != 0 else 0.0)
        total = total + cue
        total = total + ent
        total = total + intent_t
        f = flag[j]
        bad |= (f != 0) & (not np.abs(total) < np.inf)
        lsc[j] = total if ((f & 1) != 0) | raw else -np.inf
    return bad, n_first, n_perm


def _reverie_select(lq, q_cell, q_col, q_width, q_intent, pos, tie, by_time, cos, zrank,
                    lexical, entity, intent, c_state, c_imp, c_len, c_perm, c_mj, c_row, c_ml,
                    c_nt, m_imp, m_age, m_perm, m_reinf, m_freq, m_cog, m_rec, m_emo, m_ret, fp,
                    ip, inter, limit, budget, dedup, cap, out):
    # the floor's, relevance's and the per-row terms' parameters are read by _score_rows
    base, elig_thr = fp[_F_RELEVANCE_BASELINE], fp[_F_ELIGIBILITY_THRESHOLD]
    w_imp, w_freq, w_temp, w_emo = (fp[_F_IMPORTANCE], fp[_F_FREQUENCY], fp[_F_TEMPORAL],
                                    fp[_F_EMOTION])
    resident_cap = fp[_F_RESIDENT_BOOST_CAP]
    window, intent_boost = fp[_F_RECENT_WINDOW_DAYS], fp[_F_INTENT_BOOST]
    first_boost = fp[_F_FIRST_BOOST]
    recency_mode, governance, temporal_on = ip[_I_RECENCY_MODE], ip[_I_GOVERNANCE], \
        ip[_I_TEMPORAL]
    # per memory state, once: the gate and the state's factors of each term (the products the
    # per-row formula takes, the same IEEE operations on the same operands), side by side
    n_s = m_ret.size
    ms = np.empty((n_s, _MS), dtype=np.float64)
    t_zero = w_temp * 0.0
    for st in range(n_s):
        ret = m_ret[st]
        ms[st, 0] = 1.0 if (m_perm[st] or ret >= elig_thr) else 0.0
        if governance != 0:
            ms[st, 1] = 1.0
            ms[st, 2] = ret * resident_cap
        else:
            ms[st, 1] = _minimum(1.0, ret * m_reinf[st])
            ms[st, 2] = 0.0
        ms[st, 3] = w_imp * m_imp[st]
        ms[st, 4] = w_freq * m_freq[st]
        ms[st, 5] = m_cog[st]
        ms[st, 6] = w_temp * m_rec[st]
        ms[st, 7] = w_temp * (1.0 - m_rec[st])
        ms[st, 8] = w_emo * m_emo[st]
        ms[st, 9] = 1.0 - ret
        ms[st, 10] = intent_boost * (1.0 if m_age[st] < window else -1.0)
    widest = 1
    for iq in range(lq.size):
        widest = max(widest, q_width[iq])
    lsc = np.empty(widest, dtype=np.float64)       # a question's scores, in its cells' order
    rel = np.empty(widest, dtype=np.float64)       # and relevances
    flag = np.empty(widest, dtype=np.uint8)        # 1: kept (relevant, eligible); 2: 'first'
    ts = np.empty(2 * widest, dtype=np.float64)     # the walk's tree: keys of its nodes
    tk = np.empty(2 * widest, dtype=np.int64)
    kidx = np.empty(widest, dtype=np.int64)
    klen = np.empty(widest, dtype=np.int64)
    work = np.empty(widest, dtype=np.int64)
    scratch = np.empty(widest, dtype=np.float64)
    chosen = np.empty(limit, dtype=np.int64)
    g = np.empty((_MS, widest), dtype=np.float64)   # a block's columns' state factors
    inv = 1.0 - base
    boost = temporal_on != 0 and first_boost != 0.0
    block = -1
    for iq in range(lq.size):
        q, x0, c0, n = lq[iq], q_cell[iq], q_col[iq], q_width[iq]
        if n == 0:
            continue
        if c0 != block:             # a new block: its columns' state factors, gathered once
            block = c0
            for j in range(n):
                st = c_state[c0 + j]
                for t in range(_MS):
                    g[t, j] = ms[st, t]
        lpos = pos[x0:x0 + n]
        limp = c_imp[c0:c0 + n]
        ltl = c_len[c0:c0 + n]
        permanent = c_perm[c0:c0 + n]
        it = q_intent[iq]
        g_temporal = g[6] if (recency_mode != 0) | ((it & INTENT_RECENT) != 0) else g[7]
        g12 = g[2] if governance != 0 else g[1]
        bad, n_first, n_perm = _score_rows(
            n, it, cos[x0:x0 + n], zrank[x0:x0 + n], lexical[x0:x0 + n], entity[x0:x0 + n],
            intent[x0:x0 + n], permanent, g[0], g12, g[3], g[4], g[5], g_temporal, g[8],
            g[9], g[10], fp, ip, t_zero, inv, False, rel, lsc, flag)
        if bad:
            return 1
        if boost and n_first:            # score._first_boost: by event time, table order on ties
            _score_rows(n, it, cos[x0:x0 + n], zrank[x0:x0 + n], lexical[x0:x0 + n],
                        entity[x0:x0 + n], intent[x0:x0 + n], permanent, g[0], g12, g[3],
                        g[4], g[5], g_temporal, g[8], g[9], g[10], fp, ip, t_zero, inv,
                        True, rel, scratch, flag)     # every row's score, kept or not
            rank = 0
            for t in range(n):          # the question's rows by (event time, table position)
                j = by_time[x0 + t]
                if flag[j] & 2:
                    v = scratch[j] + first_boost * (1.0 - rank / n_first)
                    if not np.abs(v) < np.inf:
                        return 1
                    if flag[j] & 1:
                        lsc[j] = v
                    rank += 1
        if n_perm > cap:                  # the permanent cap: only the first `cap` in order
            m = 0
            for j in range(n):
                if flag[j] & 1 and permanent[j]:
                    work[m] = j
                    m += 1
            _sort_run(work, m, lpos, lsc, limp, scratch)
            for t in range(cap, m):
                lsc[work[t]] = -np.inf
        _tree_walk(n, q, ts, tk, kidx, klen, lpos, lsc, tie[x0:x0 + n], ltl,
                   c_mj[c0:c0 + n], c_row[c0:c0 + n], c_ml[c0:c0 + n], c_nt[c0:c0 + n], chosen,
                   inter, limit, budget, dedup, out)
    return 0


def select_runs(prep, pos: np.ndarray, sc: np.ndarray, limit: int, budget: int, dedup: float,
                cap: int, out: np.ndarray, *, resume: bool = False) -> np.ndarray | None:
    """Selection of the questions of the kept rows ``pos`` (grouped by question; scores ``sc``)
    into ``out`` (see the module docstring); ``resume``: each question's picks in ``out`` stay
    and its walk goes on from them. Returns the questions left for the numpy path (a bool mask),
    or None when a score is NaN (nothing written) or numba does not import. ``prep`` has its
    dedup arrays built."""
    if not _load():
        return None
    unresolved = np.zeros(out.shape[0], dtype=bool)
    use_jac = prep.jac is not None
    jac = prep.jac if use_jac else _EMPTY_F
    inter = _EMPTY_U8 if use_jac else prep.inter
    status = _select_runs(np.ascontiguousarray(pos, dtype=np.int64),
                          np.ascontiguousarray(sc, dtype=np.float64), prep.qid, prep.importance,
                          prep.permanent, prep.text_len, use_jac, jac, inter, prep.inter_row,
                          prep.mem_local, prep.n_terms, prep.max_jaccard, prep.inter_base,
                          int(limit), int(budget),
                          float(dedup), int(cap), bool(resume), out, unresolved)
    return None if status else unresolved


#: The memory-level arrays of reverie_memory the kernel reads, in its order.
MEMORY_KEYS = ("importance", "age", "permanent", "reinforcement", "frequency", "cognitive",
               "recency", "emotion", "retention")


def _get(cfg, key: str):
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def pack(prep, cfg) -> tuple[np.ndarray, np.ndarray]:
    """(fp, ip): the fused kernel's parameters of ``cfg`` in the orders of :data:`FLOATS` and
    :data:`INTS` (``prep``: the z-scores the floor's rank is found among)."""
    rc = cfg.recall
    ints = {"floor_mode": (0 if rc.floor_mode == "absolute" and rc.relevance_floor == 0
                           else 1 if rc.floor_mode == "absolute" else 2),
            "recency_mode": cfg.fusion.temporal_mode == "recency",
            "governance": cfg.governance.enabled, "entity": cfg.entity.enabled,
            "temporal": cfg.temporal.enabled,
            "z_at": np.searchsorted(prep.z_sorted, rc.relevance_z, side="left")}
    return (np.array([float(_get(cfg, k)) for k in FLOATS], dtype=np.float64),
            np.array([ints[k] for k in INTS], dtype=np.int64))


def reverie_select(prep, cfg, memory, limit: int, out: np.ndarray) -> int:
    """Reverie's selections of every question into ``out``: the relevance floor, the forgetting
    gate and the score of each row (``memory``: :func:`~memlab.recall.score.reverie_memory` of
    every memory state, ``prep.memory_states``), then selection, fused per question. 0 when done;
    1 when a score is not finite (``out`` to be redone by the numpy path, which raises as the
    scorer does). Needs a qid-sorted table whose every conversation has an intersection matrix
    (``prep.fused_ok``). 1 too where numba does not import."""
    if not _load():
        return 1
    rc = cfg.recall
    fp, ip = pack(prep, cfg)
    floor_mode = int(ip[_I_FLOOR_MODE])
    k = prep.kernel_layout
    if not k["intent_per_question"] or k["q_width"].max(initial=0) > LEAF_MASK:
        return 1
    floor = (floor_mode, rc.relevance_floor if floor_mode == 1 else rc.relevance_z,
             rc.lexical_floor)
    rel = prep.relevant_rows(floor) if floor_mode else None
    if rel is not None:              # the floor's rows, compacted: no floor pass
        k = rel
        ip[_I_FLOOR_MODE] = 0
    return _reverie_select(
        k["q"], k["q_cell"], k["q_col"], k["q_width"], k["q_intent"], k["pos"], k["rank"],
        k["by_time"], k["cosine"], k["zrank"], k["lexical"], k["entity_matches"], k["intent"],
        k["state"], k["importance"], k["text_len"], k["permanent"], k["max_jaccard"],
        k["inter_row"], k["mem_local"], k["n_terms"], *(memory[key] for key in MEMORY_KEYS),
        fp, ip, prep.inter, int(limit), int(cfg.selection.char_budget),
        float(cfg.selection.dedup_jaccard), int(rc.permanent_limit), out)


_EMPTY_F = np.zeros(0, dtype=np.float64)
_EMPTY_U8 = np.zeros(0, dtype=np.uint8)


def warm(inter_dtype: np.dtype | type = np.uint8) -> float:
    """Compile (or load from the disk cache) :func:`select_runs` for the Jaccards stored
    (``inter_dtype`` only matters when they are computed from intersection counts of that
    dtype) on a tiny input; the seconds it took (also in :data:`stats`). 0 without numba or when
    already warm."""
    key = np.dtype(inter_dtype).name
    if not AVAILABLE or key in stats["warmed"]:
        return 0.0
    t0 = time.perf_counter()
    if not _load():
        return 0.0
    i64 = np.zeros(2, dtype=np.int64)
    f64 = np.zeros(2)
    b = np.zeros(2, dtype=bool)
    out = np.full((1, 1), -1, dtype=np.int64)
    inter = np.zeros(1, dtype=inter_dtype)
    f32, i8, i16, i32 = (np.zeros(2, dtype=d) for d in (np.float32, np.int8, np.int16,
                                                        np.int32))
    for use_jac in (True, False):
        _select_runs(i64, f64, i64, f64, b, i64, use_jac, f64, inter, i64, i64, i64, f64, i64, 1,
                     1, 0.5, 1, False, out, b)
        # the fused kernel on the layout's stored dtypes (memlab.tune.blocks)
        one = np.zeros(1, dtype=np.int64)
        _reverie_select(one, one, one, np.full(1, 2), i8[:1], i64, i32, i32, f32, i32, f32,
                        i16, i8, i32, f32, i32, b, f64, i64, i64, i64, f64, f64, b, f64, f64,
                        f64, f64, f64, f64, np.zeros(len(FLOATS)), np.zeros(len(INTS), np.int64),
                        inter, 1, 1, 0.5, 1, out)
    took = time.perf_counter() - t0
    stats["warmed"].append(key)
    stats["compile_s"] += took
    return took

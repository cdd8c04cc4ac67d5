"""Ranking-context signals (issue 21): where a candidate stands among the query's candidates and
in its session. Pure functions over one query's candidate list; the candidates stage
(:func:`memlab.recall.candidates.build_features`) calls them, gated by ``recall.zscore_signals``
and ``recall.session_context``.

Per-query z-scores (each route over the rows it scored, population standard deviation):

- ``dense_z``: the cosine's z over the query's candidates with a cosine;
- ``bm25_z``: BM25's z over the candidates the lexical route returned (``lexical_rank > 0``);
- ``fused_z``: the mean of the two.

A row a route did not score (no vector; not in the lexical pool) gets that route's *floor*: the
lowest z among the rows the route did score. Why the floor: a candidate the route left out scored
at most what the route's last row scored (a pool is the top of its route), so the floor is an
upper bound that never ranks it above a row the route found, and every row keeps a defined fused
score (NaN would drop the row from a linear ranker and read as "unknown" to a tree). A route that
scored no row of the query leaves its z NaN and the fusion is the other route's z alone. One row,
or rows all equal: z 0.

Session context (``session``: a code per row, -1 for a memory outside any session; ``position``:
its 0-based place in its session by (timestamp, rowid); ``length``: the session's turns), over the
z-scores above:

- ``nb1_dense`` / ``nb1_bm25``: the best ``dense_z`` / ``bm25_z`` of the turns at distance 1 in the
  session (position +-1); ``nb2_dense`` / ``nb2_bm25``: at distance 1 or 2. A neighbour that is not
  a candidate of the query counts as the route's floor; a turn with no neighbour: NaN.
- ``sess_best`` / ``sess_mean``: the best and the mean ``fused_z`` over every turn of the session
  (the turns that are not candidates at the fused floor: the mean of the two floors).
- ``sess_pos``: position / (length - 1) (0 first, 1 last; 0 in a one-turn session);
  ``sess_first`` / ``sess_last``: 1.0 for the session's first / last turn, else 0.0.

Every context column is NaN for a memory outside any session.
"""

from __future__ import annotations

import numpy as np

__all__ = ["route_z", "fusion", "neighbour_max", "neighbour_maxes", "session_stats", "positions", "ZSCORE_COLUMNS",
           "SESSION_COLUMNS"]

ZSCORE_COLUMNS = ("dense_z", "bm25_z", "fused_z")
SESSION_COLUMNS = ("nb1_dense", "nb1_bm25", "nb2_dense", "nb2_bm25", "sess_best", "sess_mean",
                   "sess_pos", "sess_first", "sess_last")


def route_z(values: np.ndarray, scored: np.ndarray) -> tuple[np.ndarray, float]:
    """(z of every row, the route's floor): ``values``' z-score over the rows where ``scored``
    (population sd), the rows not scored at the floor (the lowest z of the scored rows). No row
    scored: all NaN, floor NaN. A zero sd: z 0."""
    values = np.asarray(values, np.float64)
    scored = np.asarray(scored, bool)
    z = np.full(len(values), np.nan)
    if not scored.any():
        return z, float("nan")
    v = values[scored]
    sd = v.std()
    z[scored] = (v - v.mean()) / sd if sd > 0 else 0.0
    floor = float(z[scored].min())
    z[~scored] = floor
    return z, floor


def fusion(dense_z: np.ndarray, bm25_z: np.ndarray) -> np.ndarray:
    """The mean of the two z-scores; where one is NaN (its route scored nothing), the other."""
    both = np.stack([np.asarray(dense_z, np.float64), np.asarray(bm25_z, np.float64)])
    known = ~np.isnan(both)
    total = np.where(known, both, 0.0).sum(axis=0)
    n = known.sum(axis=0)
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def _key(session: np.ndarray, position: np.ndarray, width: int) -> np.ndarray:
    return session.astype(np.int64) * width + position.astype(np.int64)


def neighbour_max(score: np.ndarray, floor: float, session: np.ndarray, position: np.ndarray,
                  length: np.ndarray, radius: int) -> np.ndarray:
    """Per row: the best ``score`` among the turns of its session at distance 1..``radius``
    (a turn that is not a row: ``floor``); NaN without a neighbour or a session."""
    return neighbour_maxes([(score, floor)], session, position, length, radius)[radius - 1][0]


def neighbour_maxes(scores: list[tuple[np.ndarray, float]], session: np.ndarray,
                    position: np.ndarray, length: np.ndarray, radius: int
                    ) -> list[list[np.ndarray]]:
    """:func:`neighbour_max` of every (score, floor) of ``scores`` at every radius 1..``radius``
    (``[r - 1][i]``), the neighbours looked up once for all of them."""
    session, position = np.asarray(session, np.int64), np.asarray(position, np.int64)
    length = np.asarray(length, np.int64)
    n = len(session)
    has = session >= 0
    out = [[np.full(n, np.nan) for _ in scores] for _ in range(radius)]
    if not has.any():
        return out
    width = int(length[has].max()) + 2 * radius + 1
    at_has = np.flatnonzero(has)
    s, p, m = session[has], position[has], length[has]
    keys = _key(s, p, width)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    values = [np.asarray(v, np.float64)[has][order] for v, _ in scores]
    best = [np.full(len(s), -np.inf) for _ in scores]
    found = np.zeros(len(s), bool)
    for d in range(1, radius + 1):
        for at in (p - d, p + d):
            inside = (at >= 0) & (at < m)
            want = _key(s, np.where(inside, at, 0), width)
            i = np.minimum(np.searchsorted(sorted_keys, want), len(sorted_keys) - 1)
            hit = inside & (sorted_keys[i] == want)
            for b, v, (_, floor) in zip(best, values, scores):
                np.fmax(b, np.where(hit, v[i], np.where(inside, floor, -np.inf)), out=b)
            found |= inside
        for r_out, b in zip(out[d - 1], best):
            got = np.where(np.isinf(b), np.nan, b)    # only unknown values (a NaN floor) near
            r_out[at_has[found]] = got[found]
    return out


def session_stats(score: np.ndarray, floor: float, session: np.ndarray, length: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (best, mean) ``score`` over every turn of its session, the turns that are not
    rows at ``floor``; NaN without a session."""
    score = np.asarray(score, np.float64)
    session, length = np.asarray(session, np.int64), np.asarray(length, np.int64)
    best = np.full(len(score), np.nan)
    mean = np.full(len(score), np.nan)
    has = session >= 0
    if not has.any():
        return best, mean
    codes, inv = np.unique(session[has], return_inverse=True)
    sums = np.bincount(inv, weights=score[has], minlength=len(codes))
    counts = np.bincount(inv, minlength=len(codes))
    tops = np.full(len(codes), -np.inf)
    np.maximum.at(tops, inv, score[has])
    n = np.zeros(len(codes), np.int64)
    n[inv] = length[has]
    rest = n - counts                     # turns of the session that are not rows
    tops = np.where(rest > 0, np.fmax(tops, floor), tops)
    best[has] = tops[inv]
    mean[has] = ((sums + rest * floor) / n)[inv]
    return best, mean


def positions(position: np.ndarray, length: np.ndarray, session: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(relative position, first, last) of every row as floats; NaN without a session."""
    position = np.asarray(position, np.float64)
    length = np.asarray(length, np.float64)
    has = np.asarray(session) >= 0
    rel = np.where(length > 1, position / np.maximum(length - 1, 1), 0.0)
    first = (position == 0).astype(np.float64)
    last = (position == length - 1).astype(np.float64)
    return tuple(np.where(has, v, np.nan) for v in (rel, first, last))

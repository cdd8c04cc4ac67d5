"""Bound-based pruning of reverie's rows (issue 8, item 6): per question, only the rows that can
reach its top ``want`` kept rows are scored exactly.

On the dense blocks of :mod:`memlab.tune.dense`, for one configuration:

1. **Kept, exactly.** Selection keeps a row when it passes the relevance floor and the forgetting
   gate. Both are exact comparisons here: the floor's z-score through its rank, cosine and lexical
   overlap against float32-rounded thresholds (:func:`~memlab.tune.dense.ceil32`), the gate's
   ``relevance >= eligibility_relevance`` as ``cosine >= c*`` (relevance is non-decreasing in the
   cosine: ``c*`` is found by bisection over the table's distinct cosines with the scorer's own
   float64 arithmetic) or the memory's retention over its threshold (one value per column).
2. **An approximate score** of every kept cell in float32: reverie's formula with its memory-level
   terms one vector per block (importance, frequency, cognitive, emotion, resident boost, and the
   temporal and intent terms of each intent class) and the row-level ones (relevance, cue,
   lexical, entity) from the cell's signals. Its distance from the exact float64 score is at most
   ``eps``, a bound of the float32 rounding (2^-18 times a bound of every partial sum's size:
   about 40 times the rounding of the dozen float32 operations).
3. **A threshold per question**: ``T`` at most its ``want``-th best approximate kept score (the
   ``want``-th largest of the maxima of groups of four cells). Every row that can score at least
   ``T - 2 eps`` exactly has an approximate score of at least ``T - 4 eps``: those are the
   candidates; the rows scoring at least ``T - 2 eps`` exactly (``cut``) are a prefix of
   selection's order of the question holding at least ``want`` rows.

'First' questions under ``temporal.first_boost`` keep every relevant row (the boost ranks them
all), as do questions with at most ``want`` kept rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memlab.config import MemlabConfig
from memlab.tune.dense import Block, Layout, ceil32

__all__ = ["Candidates", "candidates", "params", "block_scores", "GROUP", "EPS_SCALE"]

#: Cells per group whose maxima give the threshold (a lower bound of the want-th best). Speed only.
GROUP = 4
#: eps = EPS_SCALE * (a bound of every partial sum of the approximate score).
EPS_SCALE = 2.0 ** -18
#: Added to the approximate score of a cell that is not kept.
_SINK = -3e38


@dataclass
class Candidates:
    """``pos`` table positions to score exactly (ascending); per question (``n_q``) ``cut`` the
    exact score from which its rows form the prefix (-inf: all its kept rows are candidates) and
    ``min_len`` its shortest candidate text; ``kept_of(questions)`` every kept row of those."""

    pos: np.ndarray
    cut: np.ndarray
    min_len: np.ndarray
    kept: list[np.ndarray]
    layout: Layout

    def kept_of(self, questions: np.ndarray, max_len: np.ndarray | None = None) -> np.ndarray:
        """Table positions of the kept rows of ``questions`` (a bool mask over questions), those
        of text length at most ``max_len`` of their question when given; ascending."""
        out = []
        for b, k in zip(self.layout.blocks, self.kept):
            rows = np.flatnonzero(questions[b.q])
            if rows.size:
                sel = k[rows]
                if max_len is not None:
                    sel = sel & (b.text_len[rows] <= max_len[b.q[rows]][:, None])
                out.append(b.pos[rows][sel])
        return np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)

    def permanent_kept(self) -> np.ndarray:
        """Per question, its kept rows of the permanent layer."""
        out = np.zeros(self.cut.size, dtype=np.int64)
        for b, k in zip(self.layout.blocks, self.kept):
            if b.permanent.any():
                out[b.q] = np.count_nonzero(k & b.permanent[None, :], axis=1)
        return out


def _c_star(cos_sorted: np.ndarray, base: float, floor: float) -> np.float32:
    """The smallest of the table's cosines c with clip((c - base) / (1 - base), 0, 1) >= floor,
    computed as the scorer computes it (float64); +inf when none."""
    def ok(i: int) -> bool:
        c = np.array([cos_sorted[i]], dtype=np.float64)
        return bool(np.clip((c - base) / (1.0 - base), 0.0, 1.0)[0] >= floor)

    lo, hi = 0, cos_sorted.size
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return cos_sorted[lo] if lo < cos_sorted.size else np.float32(np.inf)


class _Params:
    """One configuration's quantities for :func:`block_scores`: memory-level values per state,
    thresholds of the exact tests."""

    def __init__(self, lay: Layout, cfg: MemlabConfig, m: dict[str, np.ndarray]) -> None:
        fu, rc, tc = cfg.fusion, cfg.recall, cfg.temporal
        ret, rec = m["retention"], m["recency"]
        gov = cfg.governance.enabled
        self.base = fu.relevance_baseline
        self.inv = 1.0 / (1.0 - self.base)
        self.wr, self.wl = fu.relevance, fu.lexical
        self.cap = fu.cue_reactivation_cap
        self.k_cue = (1.0 - ret) * fu.cue_reactivation_factor
        self.g = np.ones_like(ret) if gov else np.minimum(1.0, ret * m["reinforcement"])
        s0 = (fu.importance * m["importance"] + fu.frequency * m["frequency"] + m["cognitive"]
              + fu.emotion * m["emotion"] + (ret * fu.resident_boost_cap if gov else 0.0))
        zero = np.zeros_like(rec)
        if fu.temporal_mode == "recency":
            temporal = [rec, rec, rec, rec]
        else:                        # classes: none, recent, historical, both (recent wins)
            temporal = [zero, rec, 1.0 - rec, rec]
        if tc.enabled:
            new = np.where(m["age"] < tc.recent_window_days, 1.0, -1.0)
            intent = [zero, tc.intent_boost * new, -tc.intent_boost * new, zero]
        else:
            intent = [zero] * 4
        self.s_cls = np.stack([s0 + fu.temporal * temporal[c] + intent[c] for c in range(4)])
        self.gate_col = m["permanent"].astype(bool) | (ret >= cfg.forgetting.eligibility_threshold)
        self.c_star = _c_star(lay.cos_sorted, self.base, cfg.forgetting.eligibility_relevance)
        self.floor_mode = rc.floor_mode
        self.floor_all = rc.floor_mode == "absolute" and rc.relevance_floor == 0
        self.cos_floor = ceil32(rc.relevance_floor)
        self.z_floor = np.int32(np.searchsorted(lay.z_sorted, rc.relevance_z, side="left"))
        self.lex_floor = ceil32(rc.lexical_floor)
        self.first_all = tc.enabled and tc.first_boost != 0
        self.fold = self.cap >= float(self.k_cue.max(initial=0.0))   # r <= 1: cap never binds
        self.entity = cfg.entity.enabled
        self.ent_each, self.ent_cap = cfg.entity.boost_each, cfg.entity.boost_cap


def params(lay: Layout, cfg: MemlabConfig, memory) -> _Params | None:
    """:class:`_Params` of ``cfg``; ``memory`` is :func:`~memlab.recall.score.reverie_memory` of
    every memory state. None when a memory-level value is not finite (the row path then does
    what the scorer does)."""
    m = {k: np.asarray(v) for k, v in memory.items()}
    if not all(np.isfinite(v).all() for v in m.values() if v.dtype.kind == "f"):
        return None
    return _Params(lay, cfg, m)


def block_scores(b: Block, p: _Params) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(relevant, kept, approximate score, eps) of the cells of ``b``: relevant and kept exactly
    as the scorer and selection decide (absent cells: neither); the approximate score within
    ``eps`` of reverie's exact score on every kept cell (module docstring, steps 1-2)."""
    f32 = np.float32
    if p.floor_all:
        rel = b.present
    else:
        if p.floor_mode == "absolute":
            cos_ok = b.cos0 >= p.cos_floor
            if b.cos_nan is not None:
                cos_ok &= ~b.cos_nan
        else:
            cos_ok = b.zrank >= p.z_floor
        rel = (cos_ok | (b.lexical >= p.lex_floor)) & b.present
    gate = p.gate_col[b.state]
    if gate.all() or p.c_star <= b.cos_lo:
        kept = rel
    else:
        kept = rel & ((b.cos0 >= p.c_star) | gate[None, :])
    a = np.subtract(b.cos0, f32(p.base))
    a *= f32(p.inv)
    if b.cos_lo < p.base or b.cos_hi > 1.0:
        np.clip(a, 0.0, 1.0, out=a)
    kc, gc = p.k_cue[b.state], p.g[b.state]
    if p.fold:
        a *= (p.wr * gc + kc).astype(f32)[None, :]
    else:
        cue = a * kc.astype(f32)[None, :]
        np.minimum(cue, f32(p.cap), out=cue)
        a *= (p.wr * gc).astype(f32)[None, :]
        a += cue
    a += f32(p.wl) * b.lexical
    if p.entity:
        ent = f32(p.ent_each) * b.entity
        a += np.minimum(ent, f32(p.ent_cap), out=ent)
    s_col = p.s_cls[:, b.state]
    a += s_col.astype(f32)[b.intent_class]
    r_hi = max(1.0, (max(abs(b.cos_lo), abs(b.cos_hi)) + p.base) * p.inv)
    bound = (r_hi * float(np.max(p.wr * gc + kc, initial=0.0)) + p.wl * b.lex_hi
             + (min(p.ent_each * b.ent_hi, p.ent_cap) if p.entity else 0.0)
             + float(np.abs(s_col).max(initial=0.0)))
    return rel, kept, a, EPS_SCALE * bound


def candidates(lay: Layout, cfg: MemlabConfig, memory, n_q: int, want: int
               ) -> Candidates | None:
    """The candidates of ``cfg`` (see the module docstring); ``memory`` as :func:`params`.
    None when :func:`params` is."""
    p = params(lay, cfg, memory)
    if p is None:
        return None
    f32 = np.float32
    pos_parts, kept_parts = [], []
    cut = np.full(n_q, -np.inf)
    min_len = np.zeros(n_q, dtype=np.int64)
    for b in lay.blocks:
        rel, kept, a, eps = block_scores(b, p)
        min_len[b.q] = b.min_len
        # 3. thresholds: cells not kept sink far below any score (-3e38 or -inf)
        a += np.multiply(~kept, f32(_SINK), dtype=f32)
        count = np.add.reduce(kept, axis=1, dtype=np.int64)
        free = b.first if p.first_all else np.zeros(len(b.q), dtype=bool)
        sel = np.flatnonzero((count > want) & ~free)
        low = np.full(len(b.q), -np.inf, dtype=f32)
        if sel.size:
            part = a[sel]
            width = part.shape[1]
            if width >= GROUP * want:
                pad = (-width) % GROUP
                if pad:
                    part = np.concatenate([part, np.full((sel.size, pad), _SINK, f32)], 1)
                grouped = part[:, 0::GROUP]
                for j in range(1, GROUP):
                    grouped = np.maximum(grouped, part[:, j::GROUP])
                part = grouped
            t = np.partition(part, part.shape[1] - want, axis=1)[:, part.shape[1] - want]
            t = t.astype(np.float64)
            t[t <= _SINK / 2] = -np.inf          # fewer than want groups hold a kept cell
            low[sel] = np.nextafter((t - 4.0 * eps).astype(f32), f32(-np.inf))
            cut[b.q[sel]] = t - 2.0 * eps
        cand = a >= low[:, None]
        cand &= kept
        if p.first_all and free.any():
            cand[free] = rel[free]
        pos_parts.append(b.pos.ravel()[np.flatnonzero(cand)])
        kept_parts.append(kept)
    pos = np.sort(np.concatenate(pos_parts)) if pos_parts else np.zeros(0, dtype=np.int64)
    return Candidates(pos=pos, cut=cut, min_len=min_len, kept=kept_parts, layout=lay)

"""The numba selection kernel (memlab.tune.kernels) against selection itself
(memlab.recall.select.select) on synthetic tables built to tie: scores from a few values,
importances from two, near-duplicate term sets (Jaccards at exactly the dedup threshold), several
permanent rows per question, budgets that bind. Every tie-break of selection's order (score,
importance, table position), the permanent cap, the budget and the dedup rule must decide picks
here, so changing any of them in the kernel fails this test. Both ways of reading Jaccards
(stored, or from intersection counts) and the resumed walk are covered; a conversation without
an intersection matrix is left to the numpy path."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.recall.features import LAYER_CODES
from memlab.recall.score import Scored
from memlab.recall.select import select
from memlab.tune import kernels

needs_numba = pytest.mark.skipif(not kernels.AVAILABLE, reason=kernels.WHY)

WORDS = [f"w{i}" for i in range(8)]


def _world(rng: random.Random, n_q: int = 30, n_mem: int = 40):
    """A table of ``n_q`` questions over one conversation's ``n_mem`` memories; returns
    (table columns, scored, terms, fake prep)."""
    sets = []
    for _ in range(n_mem):                       # small vocabularies: many equal Jaccards
        sets.append(frozenset(rng.sample(WORDS, rng.randint(1, 4))))
    qid, row, score, imp, layer, length = [], [], [], [], [], []
    mem_imp = [rng.choice([0.5, 1.0]) for _ in range(n_mem)]
    mem_len = [rng.randint(1, 30) for _ in range(n_mem)]
    mem_layer = [rng.choice([LAYER_CODES["permanent"], LAYER_CODES["long_term"],
                             LAYER_CODES["long_term"]]) for _ in range(n_mem)]
    for q in range(n_q):
        for m in sorted(rng.sample(range(n_mem), rng.randint(0, n_mem))):
            qid.append(q)
            row.append(m)
            score.append(rng.choice([0.0, 0.25, 0.5, 1.0]))
            imp.append(mem_imp[m])
            layer.append(mem_layer[m])
            length.append(mem_len[m])
    n = len(qid)
    table = {"qid": np.array(qid, dtype=np.int64), "row": np.array(row, dtype=np.int64),
             "importance": np.array(imp), "layer": np.array(layer, dtype=np.int64),
             "text_len": np.array(length, dtype=np.int64), "intent": np.zeros(n, dtype=np.int64),
             "event_time": np.zeros(n)}
    kept = np.array([rng.random() < 0.85 for _ in range(n)], dtype=bool)
    scored = Scored(score=np.array(score), eligible=kept, relevant=np.ones(n, dtype=bool))
    terms = dict(enumerate(sets))
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    inter = np.array([[len(a & b) for b in sets] for a in sets], dtype=np.uint8)
    union = sizes[:, None] + sizes[None, :] - inter
    jac = inter / union
    np.fill_diagonal(jac, -np.inf)
    mem = table["row"]
    prep = SimpleNamespace(
        qid=table["qid"], importance=table["importance"],
        permanent=table["layer"] == LAYER_CODES["permanent"], text_len=table["text_len"],
        jac=(inter / union).ravel(), inter=inter.ravel(), inter_row=mem * n_mem, mem_local=mem,
        n_terms=sizes[mem], max_jaccard=jac.max(axis=1)[mem],
        inter_base=np.zeros(n, dtype=np.int64), n_q=n_q)
    return table, scored, terms, prep


def _cfg(rng: random.Random, k: int) -> MemlabConfig:
    return MemlabConfig().replace(**{
        "selection.char_budget": rng.choice([10, 25, 40, 60, 200]),
        "selection.dedup_jaccard": rng.choice([0.25, 1 / 3, 0.5, 2 / 3, 1.0]),
        "recall.permanent_limit": rng.choice([0, 1, 2, 3]),
        "temporal.enabled": False})


def _kernel(prep, table, scored, cfg, k, *, resume_from=None):
    keep = np.flatnonzero(scored.eligible & scored.relevant)
    out = (np.full((prep.n_q, max(1, k)), -1, dtype=np.int64) if resume_from is None
           else resume_from)
    left = kernels.select_runs(prep, keep, scored.score[keep], max(1, k),
                               cfg.selection.char_budget, cfg.selection.dedup_jaccard,
                               cfg.recall.permanent_limit, out, resume=resume_from is not None)
    return out, left


@needs_numba
@pytest.mark.parametrize("stored", [True, False], ids=["stored-jaccards", "counted-jaccards"])
def test_kernel_equals_select_on_ties(stored):
    rng = random.Random(8)
    decided = {"importance": 0, "position": 0, "cap": 0, "budget": 0, "dedup": 0}
    for trial in range(60):
        table, scored, terms, prep = _world(rng)
        if not stored:
            prep.jac = None
        k = rng.choice([0, 1, 3, 5, 8])
        cfg = _cfg(rng, k)
        want = select(table, scored, terms=terms, k=k, cfg=cfg)
        got, left = _kernel(prep, table, scored, cfg, k)
        assert not left.any()
        for q in range(prep.n_q):
            w = want[q] if q < len(want) else np.zeros(0, dtype=np.int64)
            row = got[q][got[q] >= 0]
            assert row.tolist() == w.tolist(), (trial, q, cfg.selection, cfg.recall.permanent_limit)
        _count_decisions(decided, table, scored, terms, cfg, k, want)
    assert all(v > 0 for v in decided.values()), decided    # every rule decided some pick


def _count_decisions(decided, table, scored, terms, cfg, k, want):
    """Which rules can decide picks in this draw (the test is only as good as its ties)."""
    keep = np.flatnonzero(scored.eligible & scored.relevant)
    q, s, imp = table["qid"][keep], scored.score[keep], table["importance"][keep]
    for a in range(keep.size - 1):
        same = (q[a + 1:] == q[a]) & (s[a + 1:] == s[a])
        decided["importance"] += int((same & (imp[a + 1:] != imp[a])).sum())
        decided["position"] += int((same & (imp[a + 1:] == imp[a])).sum())
    perm = table["layer"][keep] == LAYER_CODES["permanent"]
    counts = np.bincount(q[perm], minlength=int(q.max(initial=0)) + 1)
    decided["cap"] += int((counts > cfg.recall.permanent_limit).sum())
    kept_per_q = np.bincount(q, minlength=len(want))
    decided["budget"] += sum(len(p) < min(max(1, k), c) for p, c in zip(want, kept_per_q))
    rows = table["row"][keep]
    for qi in range(len(want)):               # pairs at exactly the threshold: >= vs > matters
        mine = rows[q == qi].tolist()
        for i, a in enumerate(mine):
            for b in mine[:i]:
                inter = len(terms[a] & terms[b])
                decided["dedup"] += inter / (len(terms[a]) + len(terms[b]) - inter) \
                    == cfg.selection.dedup_jaccard


@needs_numba
def test_resumed_walk_goes_on_from_the_picks():
    """resume=True: a question's picks so far stay, the walk goes on after them with their
    characters used and their terms as duplicates: the same as one walk over the rows where the
    first picks come first."""
    rng = random.Random(9)
    for _ in range(30):
        table, scored, terms, prep = _world(rng)
        k = rng.choice([3, 5, 8])
        cfg = _cfg(rng, k).replace(**{"recall.permanent_limit": 1000})   # the cap can't bind
        full, _ = _kernel(prep, table, scored, cfg, k)
        # the first pick of each question fixed, the walk resumed over the rows ranked below it
        keep = scored.eligible & scored.relevant
        first = np.full((prep.n_q, k), -1, dtype=np.int64)
        first[:, 0] = full[:, 0]
        later = keep.copy()
        for q in range(prep.n_q):
            if full[q, 0] >= 0:
                top = full[q, 0]
                rows = np.flatnonzero(keep & (table["qid"] == q))
                above = (scored.score[rows] > scored.score[top]) | (
                    (scored.score[rows] == scored.score[top])
                    & ((table["importance"][rows] > table["importance"][top])
                       | ((table["importance"][rows] == table["importance"][top])
                          & (rows <= top))))
                later[rows[above]] = False
        sub = Scored(score=scored.score, eligible=later, relevant=scored.relevant)
        got, left = _kernel(prep, table, sub, cfg, k, resume_from=first)
        assert not left.any()
        assert np.array_equal(got, full)


@needs_numba
def test_no_matrix_is_left_to_the_numpy_path_and_nan_writes_nothing():
    rng = random.Random(10)
    table, scored, terms, prep = _world(rng)
    cfg = _cfg(rng, 5)
    prep.inter_base = np.where(table["qid"] % 3 == 0, -1, 0)
    got, left = _kernel(prep, table, scored, cfg, 5)
    has_rows = np.bincount(table["qid"][scored.eligible], minlength=prep.n_q) > 0
    assert np.array_equal(left, (np.arange(prep.n_q) % 3 == 0) & has_rows)
    assert (got[left] == -1).all()
    scored.score[3] = np.nan
    out = np.full((prep.n_q, 5), -1, dtype=np.int64)
    keep = np.flatnonzero(scored.eligible | True)
    assert kernels.select_runs(prep, keep, scored.score[keep], 5, 100, 0.5, 2, out) is None
    assert (out == -1).all()


@needs_numba
def test_warm_compiles_once():
    kernels.warm()
    assert "uint8" in kernels.stats["warmed"]
    assert kernels.warm() == 0.0                 # already warm: nothing to do


def test_without_numba_the_numpy_path_serves_logged_once_and_counted(monkeypatch, caplog):
    """No numba (the `fast` extra missing): the numpy path selects, a warning is logged once and
    every selection it makes is counted."""
    from memlab.tune import rescore

    monkeypatch.setattr(kernels, "AVAILABLE", False)
    monkeypatch.setattr(kernels, "WHY", "numba is not installed: the numpy selection path serves")
    monkeypatch.setattr(kernels, "_state", {**kernels._state, "logged": False})
    monkeypatch.setitem(kernels.stats, "numpy_fallbacks", 0)
    monkeypatch.setattr(rescore, "KERNELS", False)
    calls = []
    monkeypatch.setattr(rescore, "_pick_numpy", lambda *args: calls.append(args))
    with caplog.at_level("WARNING", logger="memlab.tune.kernels"):
        for _ in range(3):
            rescore._pick(None, None, np.zeros(0, dtype=np.int64), np.zeros(0), 1, None)
    assert len(calls) == 3 and kernels.stats["numpy_fallbacks"] == 3
    assert len([r for r in caplog.records if "numpy selection path" in r.getMessage()]) == 1


@needs_numba
def test_kth_is_what_partition_gives():
    """The walk's cut (the (PREFIX k)-th best score of a question) comes from an in-place
    quickselect: the value np.partition puts at that place, on lists with many ties, runs of one
    value and sorted or reversed input."""
    kernels._load()
    rng = np.random.default_rng(3)
    cases = [np.arange(50.0), np.arange(50.0)[::-1].copy(), np.full(33, 0.25)]
    for _ in range(600):
        n = int(rng.integers(1, 120))
        cases.append(rng.integers(0, int(rng.integers(1, 9)), n).astype(np.float64)
                     if rng.random() < 0.5 else rng.random(n))
    for a in cases:
        for k in sorted({0, a.size - 1, int(rng.integers(0, a.size))}):
            buf = a.copy()
            assert kernels._kth(buf, a.size, k) == np.partition(a, k)[k]
            assert sorted(buf) == sorted(a)                  # reordered, nothing lost

"""Ranking-context signals (issue 21): per-query z-scores and their fusion, session neighbours,
session best and mean, position (memlab.recall.context), worked by hand; then through the store
(zh and en sessions, the hashing embedder): the columns of ``features()`` against the same
formulas written here over the table's own cosine and BM25, the session layout read from SQLite,
and the gates."""

from __future__ import annotations

import math

import numpy as np
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.recall import context
from memlab.recall.features import CONTEXT_COLUMNS

NAN = float("nan")

# One query's four candidates: three turns of one session of five (positions 0, 2, 3; turns 1
# and 4 are not candidates) and a memory outside any session.
COSINE = np.array([0.9, 0.5, 0.1, NAN])        # the last has no vector
BM25 = np.array([3.0, 0.0, 1.0, 0.0])
LEX_RANK = np.array([1, 0, 2, 0])              # the second and the last: not in the lexical pool
SESSION = np.array([7, 7, 7, -1])
POSITION = np.array([0, 2, 3, 0])
LENGTH = np.array([5, 5, 5, 0])

# by hand: cosines 0.9, 0.5, 0.1: mean 0.5, population sd sqrt((0.16 + 0 + 0.16) / 3)
SD = math.sqrt(0.32 / 3)
DZ = [0.4 / SD, 0.0, -0.4 / SD, -0.4 / SD]     # no cosine: the lowest z (the floor)
# BM25 over the lexical pool: 3 and 1: mean 2, sd 1 -> z 1, -1; the other rows at the floor -1
BZ = [1.0, -1.0, -1.0, -1.0]
FZ = [(d + b) / 2 for d, b in zip(DZ, BZ)]
FLOOR_D, FLOOR_B = -0.4 / SD, -1.0


def test_route_z_by_hand():
    dz, floor = context.route_z(COSINE, ~np.isnan(COSINE))
    np.testing.assert_allclose(dz, DZ)
    assert floor == pytest.approx(FLOOR_D)
    bz, floor = context.route_z(BM25, LEX_RANK > 0)
    np.testing.assert_allclose(bz, BZ)
    assert floor == -1.0


def test_route_z_edges():
    z, floor = context.route_z(np.array([2.0, 2.0, 5.0]), np.array([True, True, False]))
    np.testing.assert_array_equal(z, [0.0, 0.0, 0.0])            # equal values: z 0
    z, floor = context.route_z(np.array([1.0, 2.0]), np.array([False, False]))
    assert np.isnan(z).all() and math.isnan(floor)                # the route scored nothing


def test_fusion_is_the_mean_or_the_one_route_known():
    np.testing.assert_allclose(context.fusion(np.array(DZ), np.array(BZ)), FZ)
    got = context.fusion(np.array([1.0, NAN, NAN]), np.array([NAN, -2.0, NAN]))
    np.testing.assert_array_equal(got[:2], [1.0, -2.0])
    assert np.isnan(got[2])


def test_neighbour_max_by_hand():
    dz = np.array(DZ)
    # position 0: turn 1 (not a candidate: the floor); within 2 also turn 2 (z 0)
    # position 2: turns 1 (floor) and 3 (-0.4/sd); within 2 also 0 (0.4/sd) and 4 (floor)
    # position 3: turns 2 (0) and 4 (floor); within 2 also 1 (floor); 5 is past the end
    nb1 = context.neighbour_max(dz, FLOOR_D, SESSION, POSITION, LENGTH, 1)
    np.testing.assert_allclose(nb1, [FLOOR_D, FLOOR_D, 0.0, NAN])
    nb2 = context.neighbour_max(dz, FLOOR_D, SESSION, POSITION, LENGTH, 2)
    np.testing.assert_allclose(nb2, [0.0, 0.4 / SD, 0.0, NAN])


def test_neighbours_stay_in_their_session():
    # two sessions, each of two turns, both candidates: a turn's neighbour is its own session's
    score = np.array([1.0, 2.0, 3.0, 4.0])
    got = context.neighbour_max(score, -9.0, np.array([1, 1, 5, 5]), np.array([0, 1, 0, 1]),
                                np.array([2, 2, 2, 2]), 2)
    np.testing.assert_array_equal(got, [2.0, 1.0, 4.0, 3.0])
    lone = context.neighbour_max(np.array([1.0]), -9.0, np.array([3]), np.array([0]),
                                 np.array([1]), 2)
    assert np.isnan(lone[0])                                       # a one-turn session


def test_session_best_and_mean_by_hand():
    f_floor = (FLOOR_D + FLOOR_B) / 2
    best, mean = context.session_stats(np.array(FZ), f_floor, SESSION, LENGTH)
    # five turns: the three candidates and two at the fused floor
    want_mean = (FZ[0] + FZ[1] + FZ[2] + 2 * f_floor) / 5
    np.testing.assert_allclose(best, [FZ[0]] * 3 + [NAN])
    np.testing.assert_allclose(mean, [want_mean] * 3 + [NAN])
    assert want_mean == pytest.approx(-0.5449, abs=1e-4)


def test_session_best_counts_the_floor_only_for_missing_turns():
    # a whole session among the candidates, every score below the floor given: the floor is
    # no turn's score, so it is not the best
    best, mean = context.session_stats(np.array([-3.0, -2.0]), 0.0, np.array([4, 4]),
                                       np.array([2, 2]))
    np.testing.assert_array_equal(best, [-2.0, -2.0])
    np.testing.assert_array_equal(mean, [-2.5, -2.5])


def test_positions_by_hand():
    rel, first, last = context.positions(np.array([0, 2, 4, 0, 0]), np.array([5, 5, 5, 1, 0]),
                                         np.array([1, 1, 1, 2, -1]))
    np.testing.assert_allclose(rel, [0.0, 0.5, 1.0, 0.0, NAN])
    np.testing.assert_allclose(first, [1.0, 0.0, 0.0, 1.0, NAN])
    np.testing.assert_allclose(last, [0.0, 0.0, 1.0, 1.0, NAN])


# -- through the store ----------------------------------------------------------------------------
NOW = 1_700_000_000.0
TURNS = [   # (session, text), written in this order one second apart
    ("zh1", "小明：我养了一只叫年糕的橘猫"), ("zh1", "小红：年糕几岁了？"),
    ("zh1", "小明：年糕三岁了，很爱吃鱼"), ("zh1", "小红：我也想养猫"),
    ("zh2", "小明：周末去爬了香山"), ("zh2", "小红：香山的红叶好看吗？"),
    ("en1", "Ann: I adopted a cat named Momo"), ("en1", "Bob: how old is Momo?"),
    ("en1", "Ann: Momo is two and loves tuna"), ("en2", "Ann: we booked a flight to Lisbon"),
    ("", "a memory outside any session about a cat"),
]
QUERIES = ["年糕爱吃什么？", "What is my cat called?"]


def _open(**overrides):
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing",
                                    "recall.session_context": True, **overrides})
    s = memlab.open_store(":memory:", config=cfg, clock=FixedClock(NOW))
    s.add_many([{"text": t, "session_id": sid, "id": f"m{i}", "timestamp": NOW - 100 + i}
                for i, (sid, t) in enumerate(TURNS)])
    return s


@pytest.fixture(scope="module")
def store():
    s = _open()
    yield s
    s.close()


def _frame(store=None, **overrides):
    s = _open(**overrides) if store is None else store
    try:
        f = s.features(QUERIES, k=20, now=NOW)
    finally:
        if store is None:
            s.close()
    t = f.table.copy()
    t["id"] = [f.ids[int(r)] for r in t["row"]]
    return t


def _population_z(values):
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / sd if sd > 0 else 0.0 for v in values]


@pytest.mark.parametrize("qid", [0, 1], ids=["zh", "en"])
def test_store_columns_follow_the_formulas(store, qid):
    t = _frame(store)
    q = t[t["qid"] == qid].set_index("id")
    assert len(q) >= 5
    dense = q["cosine"].notna()
    want_d = dict(zip(q.index[dense], _population_z(q["cosine"][dense].tolist())))
    floor_d = min(want_d.values())
    lex = q["lexical_rank"] > 0
    want_b = dict(zip(q.index[lex], _population_z(q["bm25"][lex].tolist())))
    floor_b = min(want_b.values())
    # the ranks under each route (dense_rank, lexical_rank): 1..n in the route's score order
    for rank, value in (("dense_rank", "cosine"), ("lexical_rank", "bm25")):
        ranked = q[q[rank] > 0].sort_values(rank)
        assert ranked[rank].tolist() == list(range(1, len(ranked) + 1)) and len(ranked) >= 3
        assert (np.diff(ranked[value].to_numpy()) <= 1e-6).all(), rank
    for mid, row in q.iterrows():
        d, b = want_d.get(mid, floor_d), want_b.get(mid, floor_b)
        assert row["dense_z"] == pytest.approx(d, abs=1e-5)
        assert row["bm25_z"] == pytest.approx(b, abs=1e-5)
        assert row["fused_z"] == pytest.approx((d + b) / 2, abs=1e-5)
    # session context: turns in write order; a turn not among the candidates at the floor
    turn = {f"m{i}": (sid, [j for j, (s2, _) in enumerate(TURNS) if s2 == sid].index(i))
            for i, (sid, _) in enumerate(TURNS) if sid}
    members = {sid: [f"m{j}" for j, (s2, _) in enumerate(TURNS) if s2 == sid]
               for sid, _ in TURNS if sid}
    fused = {m: (want_d.get(m, floor_d) + want_b.get(m, floor_b)) / 2 for m in q.index}
    f_floor = (floor_d + floor_b) / 2
    for mid, row in q.iterrows():
        if mid not in turn:
            assert np.isnan(row[list(CONTEXT_COLUMNS[3:])].astype(float)).all()
            continue
        sid, pos = turn[mid]
        ms = members[sid]
        for r in (1, 2):
            near = [ms[p] for p in range(pos - r, pos + r + 1) if p != pos and 0 <= p < len(ms)]
            d = max((want_d.get(m, floor_d) if m in q.index else floor_d) for m in near) \
                if near else NAN
            b = max((want_b.get(m, floor_b) if m in q.index else floor_b) for m in near) \
                if near else NAN
            assert row[f"nb{r}_dense"] == pytest.approx(d, abs=1e-5, nan_ok=True)
            assert row[f"nb{r}_bm25"] == pytest.approx(b, abs=1e-5, nan_ok=True)
        scores = [fused.get(m, f_floor) for m in ms]
        assert row["sess_best"] == pytest.approx(max(scores), abs=1e-5)
        assert row["sess_mean"] == pytest.approx(sum(scores) / len(scores), abs=1e-5)
        assert row["sess_pos"] == pytest.approx(pos / (len(ms) - 1) if len(ms) > 1 else 0.0)
        assert row["sess_first"] == float(pos == 0)
        assert row["sess_last"] == float(pos == len(ms) - 1)


def test_the_gates_leave_the_columns_unknown(store):
    off = _frame(**{"recall.zscore_signals": False, "recall.session_context": False})
    assert off[list(CONTEXT_COLUMNS)].isna().all().all()
    z_only = _frame(**{"recall.session_context": False})
    assert z_only[["dense_z", "bm25_z", "fused_z"]].notna().all().all()
    assert z_only[list(CONTEXT_COLUMNS[3:])].isna().all().all()
    ctx_only = _frame(**{"recall.zscore_signals": False})
    assert ctx_only[["dense_z", "bm25_z", "fused_z"]].isna().all().all()
    on = _frame(store)
    inside = on["id"] != f"m{len(TURNS) - 1}"
    np.testing.assert_array_equal(ctx_only.loc[inside, "sess_mean"], on.loc[inside, "sess_mean"])

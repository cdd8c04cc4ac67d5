"""The query-understanding columns of the raw-signal table (issue 21): q_window_days,
window_dist_days, q_type, speaker_named, computed by build_features from a real store, in zh and
en, with values worked out by hand; each gated by its config field.

The store: four turns by two speakers (Caroline, 刘思远 and Melanie), dated relative to the time
asked, Wednesday 2026-05-13 15:00 UTC (last week: May 4-10, its Saturday May 9).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig

NOW = datetime(2026, 5, 13, 15, 0, tzinfo=timezone.utc).timestamp()
H = 3600.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing"})
MAY9 = datetime(2026, 5, 9, tzinfo=timezone.utc).timestamp()
TURNS = [   # id, speaker, text, event time
    ("c1", "Caroline", "Caroline: I went hiking in the hills", MAY9 + 10 * H),     # Sat 10:00
    ("m1", "Melanie", "Melanie: I painted the lake at sunrise", MAY9 - 2 * 24 * H),  # Thu May 7
    ("z1", "刘思远", "刘思远：我上周六去爬山了", MAY9 + 30 * H),                      # Sun 06:00
    ("z2", "刘思远", "刘思远：我在深圳做软件工程师", MAY9 - 40 * 24 * H),             # March 30
]
QUESTIONS = ["What did Caroline do last Saturday?", "刘思远上周六做了什么？",
             "Where does Melanie work?"]


def _table(cfg: MemlabConfig):
    store = memlab.open_store(":memory:", config=cfg, clock=FixedClock(NOW))
    try:
        # z2 is told today about March 30: its event_time, not its write time, is measured
        store.add_many([{"id": i, "speaker": s, "text": t, "timestamp": ts, "event_time": ts}
                        if i != "z2" else {"id": i, "speaker": s, "text": t,
                                           "timestamp": NOW - H, "event_time": ts}
                        for i, s, t, ts in TURNS])
        feats = store.features(QUESTIONS, k=10, now=NOW)
    finally:
        store.close()
    table = feats.table.copy()
    table["id"] = [feats.ids[int(r)] for r in table["row"]]
    return {(int(q), i): row for q, i, row in zip(table["qid"], table["id"],
                                                  table.to_dict(orient="records"))}


@pytest.fixture(scope="module")
def table():
    return _table(BASE)


def test_every_turn_is_a_candidate_of_every_question(table):
    assert len(table) == len(TURNS) * len(QUESTIONS)


def test_window_and_distance_worked_by_hand(table):
    """Last Saturday / 上周六 = [May 9 00:00, May 10 00:00) UTC, one day. Distances: c1 (May 9
    10:00) 0; m1 (May 7 00:00) 2 days before; z1 (May 10 06:00) 6 h = 0.25 day after; z2 (March
    30 00:00) 40 days before. "Where does Melanie work?" names no time: 0 and NaN."""
    want = {"c1": 0.0, "m1": 2.0, "z1": 0.25, "z2": 40.0}
    for q in (0, 1):
        for i, d in want.items():
            assert table[q, i]["q_window_days"] == 1.0
            assert table[q, i]["window_dist_days"] == pytest.approx(d, abs=1e-6), (q, i)
    for i in want:
        assert table[2, i]["q_window_days"] == 0.0
        assert math.isnan(table[2, i]["window_dist_days"])


def test_question_type_is_query_level(table):
    """what (2) for both 'What did ...' and '做了什么'; where (4) for 'Where does ...'."""
    assert {table[0, i]["q_type"] for i in ("c1", "m1", "z1", "z2")} == {2}
    assert {table[1, i]["q_type"] for i in ("c1", "m1", "z1", "z2")} == {2}
    assert {table[2, i]["q_type"] for i in ("c1", "m1", "z1", "z2")} == {4}


def test_speaker_named(table):
    """Caroline's question: her turn 1, the others -1; 刘思远's: his two turns 1, the others -1;
    Melanie's: hers 1."""
    assert [table[0, i]["speaker_named"] for i in ("c1", "m1", "z1", "z2")] == [1, -1, -1, -1]
    assert [table[1, i]["speaker_named"] for i in ("c1", "m1", "z1", "z2")] == [-1, -1, 1, 1]
    assert [table[2, i]["speaker_named"] for i in ("c1", "m1", "z1", "z2")] == [-1, 1, -1, -1]


def test_fields_off_give_neutral_columns():
    off = _table(BASE.replace(**{"query.time_expressions": False, "query.question_types": False,
                                 "query.speakers": False}))
    for row in off.values():
        assert row["q_window_days"] == 0.0 and math.isnan(row["window_dist_days"])
        assert row["q_type"] == 0 and row["speaker_named"] == 0


def test_the_calendar_offset_moves_the_window():
    """Read 14 hours east of UTC, last Saturday is May 9 local = [May 8 10:00, May 9 10:00) UTC:
    c1 (May 9 10:00 UTC) sits on its end (0), m1 (May 7 00:00) is 1 day 10 h before it."""
    east = _table(BASE.replace(**{"query.utc_offset_hours": 14.0}))
    assert east[0, "c1"]["window_dist_days"] == 0.0
    assert east[0, "m1"]["window_dist_days"] == pytest.approx(1 + 10 / 24)

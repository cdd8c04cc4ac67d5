"""Stage tags cannot lie (issue 8, item 1), checked for every field of the config schema.

A sweep rescores cached raw signals for every configuration that shares a features key
(``memlab.bench.run.features_key``: the candidates- and ingest-stage fields and the embedder), so:

- changing a ``score``-stage field must leave the raw-signal table unchanged (the table a benchmark
  builds: ``build_features`` with ``k = ranked_per_question(cfg)``, as replay does);
- changing a ``candidates``- or ``ingest``-stage field must change the features key.

The fields and the changed values come from the schema (``memlab.config.describe`` and the pydantic
fields), not from a hand list; the store and its questions exercise every route and every temporal
cue (recent, historical, when, first, an explicit window), entities, permanent and pinned memories.
"""

from __future__ import annotations

import math
import typing
from datetime import datetime, timezone

import pandas as pd
import pytest

import memlab
from memlab.bench.replay import ranked_per_question
from memlab.bench.run import features_key
from memlab.clock import FixedClock
from memlab.config import MemlabConfig, _sections, describe
from memlab.errors import ConfigError
from memlab.recall.candidates import Scope, build_features
from memlab.text import time_window_days

DAY = 86_400
NOW = datetime(2025, 6, 1, tzinfo=timezone.utc).timestamp()
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing"})
MEMORIES = [   # (text, days ago, fields)
    ("用户最喜欢玩星露谷物语", 400, {"layer": "permanent"}),
    ("用户的名字叫小林，住在北京", 500, {"layer": "permanent", "pinned": True}),
    ("Alice 和用户第一次见面是在北京的咖啡馆", 380, {"importance": 0.9}),
    ("最近用户在准备马拉松比赛，每天跑步", 3, {"importance": 0.7, "emotions": {"joy": 60}}),
    ("用户以前很喜欢弹吉他，后来没时间了", 300, {"importance": 0.4}),
    ("上周用户和 Bob 去爬了香山", 8, {"importance": 0.5}),
    ("Alice recently started learning Japanese", 10, {"importance": 0.6}),
    ("The user used to live in Shanghai before moving", 700, {"importance": 0.5}),
    ("Bob gave the user a birthday present in March", 80, {"importance": 0.8,
                                                          "emotions": {"joy": 90}}),
    ("The user first met Bob at a hiking club", 650, {"importance": 0.6}),
    ("事件记忆：用户三个月前搬了新家", 95, {"importance": 0.7}),
    ("用户对咖啡因过敏", 200, {"importance": 0.9}),
] + [(f"用户今天随手记了一件小事，编号 {i}", i * 11 % 300, {"importance": 0.2}) for i in range(30)]
QUESTIONS = ["用户最近在忙什么？", "用户以前喜欢什么乐器？", "用户第一次见 Alice 是什么时候？",
             "最近三个月用户去过哪里？", "What has Alice been doing recently?",
             "When did the user first meet Bob?", "Where did the user use to live?",
             "她爱玩什么游戏？", "用户对什么过敏"]


@pytest.fixture(scope="module")
def replay_like():
    """A store as a benchmark replay builds it, the question vectors and the background sample."""
    store = memlab.open_store(":memory:", config=BASE, clock=FixedClock(NOW))
    store.add_many([{"text": t, "timestamp": NOW - d * DAY, **f} for t, d, f in MEMORIES])
    qv = store.embedder.embed_queries(QUESTIONS)
    yield store, qv, store.background()
    store.close()


def _table(replay_like, cfg: MemlabConfig) -> pd.DataFrame:
    store, qv, bg = replay_like
    feats = build_features(QUESTIONS, query_vectors=qv, repo=store._store.signals(),
                           dense=store._store.dense, scope=Scope("agent_0", "user_0"), now=NOW,
                           k=ranked_per_question(cfg), cfg=cfg, background=bg)
    table = feats.table.copy()
    table["terms"] = [sorted(feats.terms[int(r)]) for r in table["row"]]
    table["text"] = [feats.texts[int(r)] for r in table["row"]]
    return table


# -- changed values, from the schema --------------------------------------------------------------
def _bounds(field) -> tuple[float, float]:
    lo, hi = -math.inf, math.inf
    for meta in field.metadata:
        for attr, side in (("ge", 0), ("gt", 0), ("le", 1), ("lt", 1)):
            v = getattr(meta, attr, None)
            if v is not None:
                lo, hi = (v, hi) if side == 0 else (lo, v)
    return lo, hi


def _candidates(field, default) -> list:
    """Values other than the default that the field's type and range admit, most telling first."""
    ann = field.annotation
    args = [a for a in typing.get_args(ann) if a is not type(None)]
    if typing.get_origin(ann) is typing.Literal:
        return [c for c in typing.get_args(ann) if c != default]
    if ann is bool:
        return [not default]
    lo, hi = _bounds(field)
    if ann is int or (default is None and int in args):
        base = 4 if default is None else default
        return [v for v in (base + 1, base - 1, base * 2, base // 2, lo, hi)
                if isinstance(v, (int, float)) and math.isfinite(v) and lo <= v <= hi
                and v != default]
    if ann is float:
        return [v for v in (default + 0.1, default - 0.1, default * 1.5 + 0.01, default / 2,
                            (default + hi) / 2 if math.isfinite(hi) else default + 1.0)
                if lo <= v <= hi and (v > lo or v == lo) and v != default
                and not (v == lo and any(getattr(m, "gt", None) is not None
                                         for m in field.metadata))
                and not (v == hi and any(getattr(m, "lt", None) is not None
                                         for m in field.metadata))]
    if typing.get_origin(ann) is tuple or isinstance(default, tuple):
        if default and isinstance(default[0], int):
            return [tuple(sorted(set(default) - {max(default)})), (1, 2)]
        return [(), ("测试",)] if default else [("测试",)]
    if ann is str or str in args:
        if isinstance(default, str) and "{text}" in default:
            return [default + " |"]
        return [(default or "") + "_x", "x"]
    raise AssertionError(f"no changed value for a field of type {ann}")


def _changed(key: str) -> MemlabConfig | None:
    section, _, name = key.partition(".")
    field = _sections()[section].model_fields[name]
    default = BASE.to_flat()[key]
    default = tuple(default) if isinstance(default, list) else default
    for value in _candidates(field, default):
        try:
            return BASE.replace(**{key: list(value) if isinstance(value, tuple) else value})
        except ConfigError:
            continue
    return None


FIELDS = [r["key"] for r in describe()]
SCORE = [r["key"] for r in describe() if r["stage"] == "score"]
FEATURE = [r["key"] for r in describe() if r["stage"] in ("candidates", "ingest")]


def test_every_field_has_a_changed_value():
    assert [k for k in FIELDS if _changed(k) is None] == []


@pytest.mark.parametrize("key", SCORE)
def test_a_score_field_leaves_the_raw_signal_table_unchanged(replay_like, key):
    pd.testing.assert_frame_equal(_table(replay_like, _changed(key)), _table(replay_like, BASE))


@pytest.mark.parametrize("key", FEATURE)
def test_a_candidates_or_ingest_field_changes_the_features_key(key):
    assert features_key(_changed(key)) != features_key(BASE)


def test_the_scenario_is_telling(replay_like):
    """The questions exercise what the candidate-stage signals read (every temporal intent, an
    explicit window, entities) and every route finds something: a test that cannot fail on a
    mis-tagged field is no test."""
    table = _table(replay_like, BASE)
    codes = set(table["intent"].astype(int))
    assert any(c & 1 for c in codes) and any(c & 2 for c in codes)
    assert any(c & 4 for c in codes) and any(c & 8 for c in codes)
    assert any(time_window_days(q) for q in QUESTIONS)
    assert (table["entity_matches"] > 0).any() and (table["dense_rank"] > 0).any()
    assert (table["lexical_rank"] > 0).any() and (table["layer"] == 0).any()


# -- through a benchmark replay: its ingest (bench/replay.py item_fields) reads config too ---------
@pytest.fixture(scope="module")
def replay_dataset():
    from memlab.bench.datasets.canonical import Card, Dataset, Item, Question

    def at(days):
        return datetime.fromtimestamp(NOW - days * DAY, tz=timezone.utc)

    card = Card(name="stages", version="1", language="zh", license="CC0-1.0", source="tests",
                granularity="turn", description="score-stage fields and a replay's ingest")
    items = [Item("c1", f"i{i}", "s1", "user", text, at(d),
                  {"emotion": 0.3 + 0.05 * i, "layer": "long_term" if i % 3 else "permanent",
                   "cognitive_layer": ("episodic", "semantic", "procedural")[i % 3]})
             for i, (text, d, _) in enumerate(MEMORIES[:12])]
    questions = [Question("c1", f"q{j}", q, at(0), "x", ("i0",)) for j, q in enumerate(QUESTIONS)]
    return Dataset(card, items, questions)


class _NoCache:
    def get_many(self, key, texts):
        return {}

    def put_many(self, key, texts, vecs):
        pass


def _replayed_table(ds, cfg):
    from memlab.bench.replay import replay
    from memlab.embed import make_embedder

    # with the dialogue tree built (bench.dialog_tree): what the familiars preset replays
    cfg = cfg.replace(**{"bench.dialog_tree": True})
    rep = replay(ds, cfg=cfg, embedder=make_embedder(cfg), cache=_NoCache(), progress=False)
    return rep.features.table


def test_the_replay_scenario_fills_tree_distances(replay_dataset):
    """The replay builds a dialogue tree whose distances reach the table (else a score-stage
    field read by the tree's construction would go unseen)."""
    table = _replayed_table(replay_dataset, BASE)
    assert table["tree_distance"].notna().any() and (table["tree_distance"] > 0).any()


@pytest.mark.parametrize("key", SCORE)
def test_a_score_field_leaves_a_replays_raw_signals_unchanged(replay_dataset, key):
    """A benchmark replay writes items through its own ingest (emotion scaled by the config, the
    layer and importance policies): a score-stage field must not change what it stores either."""
    pd.testing.assert_frame_equal(_replayed_table(replay_dataset, _changed(key)),
                                  _replayed_table(replay_dataset, BASE))

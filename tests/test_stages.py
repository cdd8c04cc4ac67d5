"""Stage tags cannot lie (issue 8, item 1; issue 18, item 4), checked for every field of the schema.

A sweep rescores cached raw signals for every configuration that shares a features key
(``memlab.bench.featcache.features_key``: the fields whose stage *in the config's write mode* is
candidates or ingest, and the embedder). A field's stage is ``describe()``'s ``stage`` for a raw
replay and its ``writer_stage`` for a writer replay (``bench.write_mode: writer``: the write
pipeline decides importance, gate and layer, and its §5 association step reads recall's relevance
floor). So, per write mode:

- a field outside the key (stage score, render or runtime in that mode) must leave the raw-signal
  table unchanged: the table ``build_features`` gives (with ``k = ranked_per_question(cfg)``, as
  replay does), and the table a benchmark replay gives, in raw mode and in writer mode;
- a field inside the key (candidates or ingest in that mode) must change the features key, and a
  field outside must not (a raw sweep over the relevance floor shares one replay).

The fields and the changed values come from the schema (``memlab.config.describe`` and the pydantic
fields), not from a hand list; the store and its questions exercise every route and every temporal
cue (recent, historical, when, first, an explicit window), entities, permanent and pinned memories.
The writer scenario's items arrive in several batches (questions asked in between), so the
association step finds earlier memories; its relevance floor sits just below association values
the scenario produces (``WRITER_FLOORS``) and it replays under each floor mode, so that every field
whose writer stage differs from its stage changes the writer table when changed as these tests
change it (``test_the_writer_scenario_is_telling``): removing that field's ``writer_stage`` fails
``test_a_field_outside_the_key_leaves_a_replays_table_unchanged``.
"""

from __future__ import annotations

import math
import typing
from datetime import datetime, timezone
from functools import lru_cache

import pandas as pd
import pytest

import memlab
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.featcache import features_key
from memlab.bench.replay import ranked_per_question, replay
from memlab.clock import FixedClock
from memlab.config import STAGE_COLUMN, MemlabConfig, _sections, describe
from memlab.embed import make_embedder
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
FEATURE_STAGES = ("candidates", "ingest")


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
    if default is None and float in args:     # an optional number (e.g. a per-language threshold)
        return [v for v in ((lo + hi) / 2, lo, hi) if math.isfinite(v)] or [0.5]
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


def _changed(key: str, base: MemlabConfig = BASE) -> MemlabConfig | None:
    """``base`` with ``key`` set to its first changed value the schema accepts (None: none)."""
    section, _, name = key.partition(".")
    field = _sections()[section].model_fields[name]
    default = base.to_flat()[key]
    default = tuple(default) if isinstance(default, list) else default
    for value in _candidates(field, default):
        try:
            return base.replace(**{key: list(value) if isinstance(value, tuple) else value})
        except ConfigError:
            continue
    return None


def _stage(row: dict, mode: str) -> str:
    return row[STAGE_COLUMN[mode]]


ROWS = describe()
FIELDS = [r["key"] for r in ROWS]
#: per write mode, the fields outside the features key: stage score, render or runtime there
OUTSIDE = {m: [r["key"] for r in ROWS if _stage(r, m) not in FEATURE_STAGES] for m in STAGE_COLUMN}
#: fields a writer replay reads at ingest although a raw one does not (their writer_stage)
WRITER_ONLY = [r["key"] for r in ROWS if r["writer_stage"] != r["stage"]]


# -- the writer scenario: the write pipeline decides, its association step reads the floor -------
#: the relevance floor of the writer bases: each just below values the scenario's association
#: lookups meet (hashing embedder), so that the tests' changed value (+0.1) moves some across:
#: floor_z 2.454-2.474 (ten candidates), cosine 0.123-0.185 (fifteen), lexical overlap 0.2 (one);
#: floor_z without the memory side's calibration against real questions (the values were read so)
WRITER_FLOORS = {"recall.relevance_z": 2.4, "recall.relevance_floor": 0.12,
                 "recall.lexical_floor": 0.15, "recall.background_calibration": "none"}
FLOOR_MODES = typing.get_args(_sections()["recall"].model_fields["floor_mode"].annotation)
WRITER_BASES = {f"writer/{m}": BASE.replace(**{"bench.write_mode": "writer",
                                               "recall.floor_mode": m, **WRITER_FLOORS})
                for m in FLOOR_MODES}
RAW_BASES = {"raw": BASE}
BASES = {**RAW_BASES, **WRITER_BASES}


def test_every_field_has_a_changed_value():
    for name, base in BASES.items():
        assert [k for k in FIELDS if _changed(k, base) is None] == [], name


@pytest.mark.parametrize("key", OUTSIDE["raw"])
def test_a_field_outside_the_key_leaves_the_raw_signal_table_unchanged(replay_like, key):
    pd.testing.assert_frame_equal(_table(replay_like, _changed(key)), _table(replay_like, BASE))


@pytest.mark.parametrize("mode", list(STAGE_COLUMN))
def test_the_features_key_holds_exactly_the_candidates_and_ingest_fields_of_the_mode(mode):
    """In either write mode, a field whose stage there is candidates or ingest changes the
    features key, and any other field leaves it (its cached table is rescored): in writer mode
    the relevance floor is in the key, in raw mode it is not."""
    base = BASES["raw" if mode == "raw" else "writer/zscore"]
    key = features_key(base)
    wrong = [r["key"] for r in ROWS if (features_key(_changed(r["key"], base)) != key)
             != (_stage(r, mode) in FEATURE_STAGES)]
    assert wrong == []
    assert WRITER_ONLY and all(k in OUTSIDE["raw"] and k not in OUTSIDE["writer"]
                               for k in WRITER_ONLY)


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


# -- through a benchmark replay: its ingest (bench/replay.py) reads config too --------------------
def _at(days):
    return datetime.fromtimestamp(NOW - days * DAY, tz=timezone.utc)


def _raw_dataset() -> Dataset:
    """Items with meta emotion, layer and cognitive layer (what raw mode's ingest reads), all
    questions asked at the end."""
    card = Card(name="stages", version="1", language="zh", license="CC0-1.0", source="tests",
                granularity="turn", description="score-stage fields and a replay's ingest")
    items = [Item("c1", f"i{i}", "s1", "user", text, _at(d),
                  {"emotion": 0.3 + 0.05 * i, "layer": "long_term" if i % 3 else "permanent",
                   "cognitive_layer": ("episodic", "semantic", "procedural")[i % 3]})
             for i, (text, d, _) in enumerate(MEMORIES[:12])]
    questions = [Question("c1", f"q{j}", q, _at(0), "x", ("i0",)) for j, q in enumerate(QUESTIONS)]
    return Dataset(card, items, questions)


#: when the writer scenario's questions are asked (days ago): its items are written in four
#: batches, each one's association lookup seeing the memories of the batches before
WRITER_ASKED = (600, 350, 90, 0)


def _writer_dataset() -> Dataset:
    """20 memories (two a character card's, written as given; the others low in emotion, so
    that the association count (§5 ⑤) sets their importance) and questions asked between them."""
    card = Card(name="stages-writer", version="1", language="mixed", license="CC0-1.0",
                source="tests", granularity="turn", description="a writer-mode replay's ingest")
    items = [Item("c1", f"i{i}", "s1", "user", text, _at(d),
                  {"emotion": 0.1, **({"layer": "permanent"} if i < 2 else {})})
             for i, (text, d, _) in enumerate(MEMORIES[:20])]
    questions = [Question("c1", f"q{t}-{j}", q, _at(t), "x", ("i0",)) for t in WRITER_ASKED
                 for j, q in enumerate(QUESTIONS if t == 0 else QUESTIONS[:3])]
    return Dataset(card, items, questions)


DATASETS = {"raw": _raw_dataset(), "writer": _writer_dataset()}


class _NoCache:
    def get_many(self, key, texts):
        return {}

    def put_many(self, key, texts, vecs):
        pass


def _replay(cfg: MemlabConfig):
    # with the dialogue tree built (bench.dialog_tree): what the familiars preset replays
    cfg = cfg.replace(**{"bench.dialog_tree": True})
    return replay(DATASETS[cfg.bench.write_mode], cfg=cfg, embedder=make_embedder(cfg),
                  cache=_NoCache(), progress=False)


def _replayed_table(cfg: MemlabConfig) -> pd.DataFrame:
    return _replay(cfg).features.table


@lru_cache(maxsize=None)
def _base_table(name: str) -> pd.DataFrame:
    return _replayed_table(BASES[name])


def _changed_all(keys: list[str], base: MemlabConfig) -> MemlabConfig:
    """``base`` with every one of ``keys`` changed (each as :func:`_changed` changes it)."""
    cfg = base
    for k in keys:
        cfg = _changed(k, cfg)
    flat, before = cfg.to_flat(), base.to_flat()
    assert [k for k in keys if flat[k] == before[k]] == []
    return cfg


def _cases():
    """(base, keys): each score- or render-stage field alone, under the raw base and under each
    floor mode's writer base (each floor field acts in one mode); the runtime fields of one
    section at once (a replay reads none: a failure names the section, a rerun per field finds
    the one), under the raw base and the default floor mode's writer base."""
    out = []
    for name, mode in [("raw", "raw"), *[(n, "writer") for n in WRITER_BASES]]:
        fields = [r for r in ROWS if r["key"] in OUTSIDE[mode]]
        out += [pytest.param(name, (r["key"],), id=f"{name}-{r['key']}") for r in fields
                if _stage(r, mode) != "runtime"]
        if name in ("raw", "writer/zscore"):
            runtime = [r["key"] for r in fields if _stage(r, mode) == "runtime"]
            for section in dict.fromkeys(k.split(".")[0] for k in runtime):
                keys = tuple(k for k in runtime if k.startswith(section + "."))
                out.append(pytest.param(name, keys, id=f"{name}-runtime:{section}"))
    return out


@pytest.mark.parametrize("base, keys", _cases())
def test_a_field_outside_the_key_leaves_a_replays_table_unchanged(base, keys):
    """A benchmark replay writes items through its own ingest (raw: emotion scaled by the config,
    the layer and importance policies; writer: the write pipeline with its association lookup,
    gate and layer routing): a field outside the features key of its mode must not change what
    it stores or the raw signals it computes."""
    pd.testing.assert_frame_equal(_replayed_table(_changed_all(list(keys), BASES[base])),
                                  _base_table(base))


@pytest.mark.parametrize("mode", list(STAGE_COLUMN))
def test_the_replay_scenario_fills_tree_distances(mode):
    """The replay builds a dialogue tree whose distances reach the table (else a score-stage
    field read by the tree's construction would go unseen)."""
    table = _base_table("raw" if mode == "raw" else "writer/zscore")
    assert table["tree_distance"].notna().any() and (table["tree_distance"] > 0).any()


def _stored_importance(table: pd.DataFrame) -> pd.Series:
    return table.drop_duplicates("row").set_index("row")["importance"].sort_index()


def test_the_writer_scenario_is_telling():
    """The writer replay runs the association step, and it matters: the pipeline scores what it
    stores with the count of memories that pass the relevance floor, so a lower floor stores
    higher importances (the issue's replay: 0.438 -> 0.573 when relevance_z went 2.0 -> 0.5).
    Every field a writer replay reads at ingest but a raw one does not (writer_stage), changed as
    test_a_field_outside_the_key_leaves_a_replays_table_unchanged would change it, changes the
    writer table under one of the floor modes' bases: so that test fails for it when its
    writer_stage is taken away."""
    rep = _replay(WRITER_BASES["writer/zscore"])
    assert rep.counts["writer: stored permanent"] == 2
    assert rep.counts["items_written"] == len(DATASETS["writer"].items)
    low = _stored_importance(_replayed_table(WRITER_BASES["writer/zscore"].replace(
        **{"recall.relevance_z": 0.5})))
    high = _stored_importance(_base_table("writer/zscore"))
    assert (low >= high).all() and low.mean() > high.mean()
    assert {"recall.floor_mode", "recall.relevance_z", "recall.relevance_floor",
            "recall.lexical_floor"} <= set(WRITER_ONLY)
    silent = [k for k in WRITER_ONLY
              if all(_replayed_table(_changed(k, base)).equals(_base_table(name))
                     for name, base in WRITER_BASES.items())]
    assert silent == []

"""Benchmark writer mode (bench.write_mode = writer, `memlab bench --mode`): items go through the
write pipeline (importance, gate, routing with the short-term draw) instead of raw add_many."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlab.bench.cli import with_modes
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.replay import replay
from memlab.config import MemlabConfig
from memlab.embed import make_embedder
from memlab.errors import ConfigError, DatasetError

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 0.0})


def _day(n):
    return T0 + timedelta(days=n)


def _dataset() -> Dataset:
    card = Card(name="writer-mode", version="1", language="mixed", license="CC0-1.0",
                source="tests", granularity="turn", description="writer mode")
    items = [
        Item("c1", "card", "s0", "小林", "我叫小林", _day(0), {"layer": "permanent"}),
        Item("c1", "i1", "s1", "小林", "好的", _day(1), {"emotion": 0.1}),           # trivial
        Item("c1", "i2", "s1", "小林", "我的生日是三月五日", _day(1), {"emotion": 0.0}),  # 0.37
        Item("c1", "i3", "s1", "小林", "今天考试通过了", _day(2), {"emotion": 0.9}),     # 0.9
        Item("c1", "i4", "s1", "小林", "ok", _day(2), {"emotion": 0.0}),              # trivial
    ]
    questions = [Question("c1", "q1", "生日", _day(5), "fact", ("i2",)),
                 Question("c1", "q2", "考试", _day(5), "event", ("i3",))]
    return Dataset(card, items, questions)


class _NoCache:
    def get_many(self, key, texts):
        return {}

    def put_many(self, key, texts, vecs):
        pass


def _replay(cfg):
    return replay(_dataset(), cfg=cfg, embedder=make_embedder(cfg), cache=_NoCache(),
                  progress=False)


def _stored_ids(rep):
    return sorted(set(rep.row_item.values()))


def test_raw_mode_stores_every_item():
    rep = _replay(CFG)
    assert _stored_ids(rep) == ["card", "i1", "i2", "i3", "i4"]
    assert rep.counts["items_written"] == 5
    assert not any(k.startswith("writer:") for k in rep.counts)


def test_writer_mode_gates_and_routes():
    rep = _replay(CFG.replace(**{"bench.write_mode": "writer"}))
    # the two acknowledgements fail the rule gate; the card item is written as given (permanent);
    # i2 scores 0.37 (short term, the draw at probability 1 keeps it); i3 0.9 (long term)
    assert _stored_ids(rep) == ["card", "i2", "i3"]
    assert rep.counts["writer: not stored (gate)"] == 2
    assert rep.counts["writer: stored permanent"] == 1
    assert rep.counts["writer: stored short_term"] == 1
    assert rep.counts["writer: stored long_term"] == 1
    layers = rep.features.table.drop_duplicates("row").set_index("row")["layer"]
    ids = {row: rep.row_item[row] for row in layers.index}
    assert {ids[r]: int(v) for r, v in layers.items()} == {"card": 0, "i2": 2, "i3": 1}


def test_writer_mode_short_term_probability_zero_keeps_long_term_only():
    rep = _replay(CFG.replace(**{"bench.write_mode": "writer",
                                 "layers.short_term_probability": 0.0}))
    assert _stored_ids(rep) == ["card", "i3"]
    assert rep.counts["writer: not stored (short-term draw)"] == 1


def test_writer_mode_names_a_refused_item():
    ds = _dataset()
    bad = Item("c1", "i5", "s1", "小林", "x" * 60, _day(3), {"emotion": 0.2})
    ds = Dataset(ds.card, list(ds.items) + [bad], ds.questions)
    cfg = CFG.replace(**{"bench.write_mode": "writer", "recall.max_text_chars": 50})
    with pytest.raises(DatasetError, match=r"i5\.text.*longer than recall\.max_text_chars"):
        replay(ds, cfg=cfg, embedder=make_embedder(cfg), cache=_NoCache(), progress=False)


def test_with_modes_names_presets():
    presets = [("reverie", CFG), ("cosine", CFG)]
    named = with_modes(presets, ["raw", "writer"])
    assert [n for n, _ in named] == ["reverie", "reverie+writer", "cosine", "cosine+writer"]
    assert [c.bench.write_mode for _, c in named] == ["raw", "writer"] * 2
    assert [n for n, _ in with_modes(presets, ["writer"])] == ["reverie", "cosine"]
    with pytest.raises(ConfigError, match="write_mode"):
        with_modes(presets, ["fast"])



def test_raw_mode_never_supersedes_writer_mode_applies_facts_rule():
    """Raw replay writes items as given: two items with one fact key stay recallable (lifelog's
    'historical' questions need the old revision); writer mode applies facts.rule (explicit by
    default: the newer statement supersedes the older, recall sees the newest only)."""
    card = Card(name="facts", version="1", language="zh", license="CC0-1.0", source="tests",
                granularity="turn", description="facts over time")
    items = [Item("c1", "i1", "s1", "小林", "我住在北京，北京的冬天很冷很冷", _day(1),
                  {"fact_key": "city", "emotion": 0.9}),
             Item("c1", "i2", "s1", "小林", "我住在上海，上海的夏天很热很热", _day(2),
                  {"fact_key": "city", "emotion": 0.9})]
    ds = Dataset(card, items, [Question("c1", "q1", "我住在哪里", _day(5), "fact", ("i2",))])

    def recalled(mode):
        cfg = CFG.replace(**{"bench.write_mode": mode})
        rep = replay(ds, cfg=cfg, embedder=make_embedder(cfg), cache=_NoCache(), progress=False)
        return sorted({rep.row_item[r] for r in rep.features.table["row"]})

    assert CFG.facts.rule == "explicit"
    assert recalled("raw") == ["i1", "i2"]
    assert recalled("writer") == ["i2"]

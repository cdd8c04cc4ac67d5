"""Fuzzy recall (reverie §9.2; memlab.recall.fuzzy): a seeded entity swap in the projected text only,
each swap logged in memory_recall_events, protected memories never fuzzed, off unless enabled."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import memlab
from memlab.bench.run import run_bench
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.recall.fuzzy import (Entity, Swap, choose_swaps, draw, fuzzy_report, lexicon_of,
                                 protected_reason, swapped_text)
from memlab.types import MemoryRecord

T = 1_700_000_000.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})
ON = BASE.replace(**{"fuzzy.enabled": True, "fuzzy.probability": 1.0})
GAMES = [("m_stardew", "用户最喜欢玩星露谷物语", 0.7), ("m_terraria", "用户上周买了泰拉瑞亚", 0.5),
         ("m_alice", "Alice loves Stardew Valley", 0.6), ("m_bob", "Bob bought Terraria", 0.6)]
QUERY = "用户喜欢玩什么游戏 Stardew Terraria"


def _store(cfg=ON, memories=GAMES, **kw):
    st_ = memlab.open_store(":memory:", config=cfg, clock=FixedClock(T), **kw)
    st_.add_many([{"id": i, "text": t, "importance": imp} for i, t, imp in memories])
    return st_


def _records(store):
    return store._store.conn.execute("SELECT * FROM memory_records ORDER BY rowid").fetchall()


def _events(store):
    return store._store.conn.execute(
        "SELECT agent_id, user_id, query, at, memory_ids_json, kind, meta_json, resolved_at "
        "FROM memory_recall_events ORDER BY id").fetchall()


def test_swap_in_projected_text_only_and_logged():
    with _store() as st_:
        before = _records(st_)
        res = st_.recall(QUERY, k=4)
        assert _records(st_) == before                       # the database never changes
        assert {m.id: m.text for m in st_.get(res.ids)} == {i: t for i, t, _ in GAMES}
        shown = dict(zip(res.ids, res.texts))
    # p = 1 and the store names both games: every memory shows the other game, spelt in its script
    assert shown == {"m_stardew": "用户最喜欢玩泰拉瑞亚", "m_terraria": "用户上周买了星露谷物语",
                     "m_alice": "Alice loves Terraria", "m_bob": "Bob bought Stardew Valley"}
    assert res.to_frame()["text"].tolist() == res.texts
    assert "用户最喜欢玩泰拉瑞亚" in res.to_prompt() and "星露谷物语" not in res.to_prompt().split(
        "<untrusted_memories>")[1].split("\n")[1]
    assert [s.memory_id for s in res.swaps] == res.ids


def test_every_swap_is_a_recall_event_row():
    with _store() as st_:
        res = st_.recall(QUERY, k=4, user_id="user_0")
        rows = _events(st_)
    assert len(rows) == 4
    for (agent, user, query, at, ids_json, kind, meta_json, resolved), swap in zip(rows, res.swaps):
        meta = json.loads(meta_json)
        assert (agent, user, query, at, kind, resolved) == ("agent_0", "user_0", QUERY, T,
                                                            "fuzzy_swap", None)
        assert json.loads(ids_json) == res.ids
        assert (meta["memory_id"], meta["original"], meta["replacement"]) == (
            swap.memory_id, swap.original, swap.replacement)
    stardew = json.loads(rows[res.ids.index("m_stardew")][6])
    assert (stardew["original"], stardew["replacement"], stardew["type"]) == ("星露谷物语", "泰拉瑞亚",
                                                                              "game")


def test_same_seed_same_swaps_other_seed_other_swaps():
    cfg = BASE.replace(**{"fuzzy.enabled": True, "fuzzy.probability": 0.5})
    queries = [f"{QUERY} {i}" for i in range(12)]

    def run(c):
        with _store(c) as st_:
            return [[(s.memory_id, s.replacement) for s in st_.recall(q, k=4).swaps]
                    for q in queries]

    first, again = run(cfg), run(cfg)
    other = run(cfg.replace(**{"fuzzy.seed": 7}))
    assert first == again
    assert first != other
    assert any(first) and not all(len(s) == 4 for s in first)


def test_swap_count_follows_the_seeded_draws():
    """Expected swaps = the memories whose own draw falls below p (fuzzy.draw), worked out here."""
    p = 0.3
    cfg = BASE.replace(**{"fuzzy.enabled": True, "fuzzy.probability": p, "fuzzy.seed": 11})
    queries = [f"游戏 Stardew Terraria {i}" for i in range(40)]
    expected = got = 0
    with _store(cfg) as st_:
        for q in queries:
            res = st_.recall(q, k=4)
            expected += sum(draw(11, agent_id="agent_0", user_id="user_0", query=q, at=T,
                                 memory_id=i).random() < p for i in res.ids)
            got += len(res.swaps)
        assert st_.fuzzy_rates()["projected"] == 160
        assert st_.fuzzy_rates()["fuzz_rate"] == pytest.approx(got / 160)
    assert got == expected and 0 < got < 160


def test_off_by_default_nothing_projected_nothing_logged():
    with _store(BASE) as st_:
        res = st_.recall(QUERY, k=4)
        assert res.swaps == () and sorted(res.texts) == sorted(t for _, t, _ in GAMES)
        assert _events(st_) == [] and "fuzzy: swaps" not in st_.stats


def test_store_pool_needs_another_memory_of_the_type_lexicon_pool_does_not():
    one = [("m1", "用户最喜欢玩星露谷物语", 0.5)]
    with _store(ON, one) as st_:
        assert st_.recall("星露谷物语", k=1).swaps == ()
    with _store(ON.replace(**{"fuzzy.pool": "lexicon"}), one) as st_:
        (swap,) = st_.recall("星露谷物语", k=1).swaps
    assert swap.type == "game" and swap.replacement != "星露谷物语"
    assert swap.replacement not in ("星露谷", "Stardew Valley", "Stardew")   # never an alias


def test_same_entity_never_swapped_for_its_own_alias():
    mems = [("m1", "用户最喜欢玩星露谷物语", 0.5), ("m2", "Alice loves Stardew", 0.5)]
    with _store(ON, mems) as st_:
        assert st_.recall("星露谷物语 Stardew", k=2).swaps == ()


def _mem(text="用户最喜欢玩星露谷物语", importance=0.5, layer="long_term", id="m1"):
    return MemoryRecord(id=id, text=text, importance=importance, retention_layer=layer)


def _lexicon_pool(target, memory, present):
    """Every group of the entity's type (fuzzy.pool = 'lexicon' without a store)."""
    lexicon = lexicon_of(tuple(ON.fuzzy.entity_types))
    return [Entity(target.type, lexicon.groups[g][1]) for g in lexicon.of_type(target.type)]


@given(st.floats(0.0, 1.0))
@example(0.9)
@example(0.8999999)
def test_protected_importance_never_fuzzed(importance):
    swaps = choose_swaps([_mem(importance=importance)], query="q", agent_id="a", user_id="u",
                         at=T, cfg=ON.fuzzy, pool=_lexicon_pool)
    assert (len(swaps) == 0) == (importance >= ON.fuzzy.protected_importance)


@pytest.mark.parametrize("memory, reason", [
    (_mem(layer="permanent"), "permanent"),
    (_mem("用户生日那天玩了星露谷物语"), "marker"),
    (_mem("I promised to play Stardew Valley with Bob"), "marker"),
    (_mem("Alice's birthday party had a Terraria cake"), "marker"),
    (_mem(importance=0.9), "importance"),
])
def test_protected_memories(memory, reason):
    assert protected_reason(memory, cfg=ON.fuzzy) == reason
    assert choose_swaps([memory], query="q", agent_id="a", user_id="u", at=T, cfg=ON.fuzzy,
                        pool=_lexicon_pool) == []


def test_card_anchors_are_never_fuzzed(tmp_path):
    card = tmp_path / "card.yaml"
    card.write_text("名字: 小铃\n爱好: [玩星露谷物语, 玩泰拉瑞亚]\n", encoding="utf-8")
    # importance 0.5: the permanent layer alone protects them (not the importance rule)
    # another memory names a third game, so an unprotected anchor would have a replacement
    with _store(ON.replace(**{"layers.permanent_importance": 0.5}),
                [("m_mc", "用户昨天玩了我的世界", 0.95)], card=card) as st_:
        res = st_.recall("爱好 星露谷物语 泰拉瑞亚", k=10)
        anchors = [m.id for m in res if m.id.startswith("pm_")]
        assert anchors and not {s.memory_id for s in res.swaps} & set(anchors)
        assert "我的爱好：玩星露谷物语、玩泰拉瑞亚。" in res.texts


def test_swapped_text_replaces_every_spelling_in_its_script():
    swap = Swap("m", "game", "星露谷物语", "泰拉瑞亚", ("星露谷物语", "星露谷", "Stardew Valley", "Stardew"),
                ("泰拉瑞亚", "Terraria"))
    assert swapped_text("星露谷物语（Stardew Valley）真好玩，星露谷!", swap) == "泰拉瑞亚（Terraria）真好玩，泰拉瑞亚!"
    assert swapped_text("stardewish STARDEW", swap) == "stardewish Terraria"


def test_fuzzy_report_counts_swaps_and_corrections():
    with _store() as st_:
        st_.recall(QUERY, k=4)
        st_.recall(QUERY, k=4, user_id="user_1")            # nothing stored for user_1
        assert st_.resolve_user_correction("不是泰拉瑞亚！") is not None
        frame = fuzzy_report(st_._store)
        rates = st_.fuzzy_rates()
    assert frame.to_dict("records") == [{"agent_id": "agent_0", "user_id": "user_0", "swaps": 4,
                                         "corrected": 1, "correction_rate": 0.25}]
    assert (rates["swaps"], rates["corrections"], rates["correction_rate"]) == (4, 1, 0.25)


def test_presets_keep_fuzzy_off():
    for path in sorted(Path("experiments/configs").rglob("*.yaml")):
        assert MemlabConfig.from_yaml(path).fuzzy.enabled is False, path


def test_bench_is_untouched_by_fuzzy(tiny_bench_folder, hashing_cfg):
    """Benchmarks score the raw-signal table and never project texts: fuzzy on at p = 1 changes
    no metric and no ranking."""
    on = hashing_cfg.replace(**{"fuzzy.enabled": True, "fuzzy.probability": 1.0,
                                "fuzzy.pool": "lexicon"})
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("off", hashing_cfg), ("on", on)],
                    progress=False)
    off_res, on_res = out.results
    pd.testing.assert_frame_equal(off_res.per_query, on_res.per_query)
    assert off_res.rankings == on_res.rankings


class _ReadOnlyLog:
    """The store's audit log on a file that cannot be written (a fake: log raises, reads work)."""

    def __init__(self, inner):
        self.inner = inner

    def log(self, **kw):
        from memlab.errors import ReadOnlyStore
        raise ReadOnlyStore("m.db: attempt to write a readonly database")

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_no_unaudited_swap_when_the_log_cannot_be_written():
    with _store() as st_:
        st_._store.events = _ReadOnlyLog(st_._store.events)
        res = st_.recall(QUERY, k=4)
        assert res.swaps == () and sorted(res.texts) == sorted(t for _, t, _ in GAMES)
        assert st_.stats["degraded: fuzzy recall skipped: its audit rows cannot be written "
                         "(ReadOnlyStore)"] == 1


@pytest.mark.parametrize("lines, rule", [
    (["game 星露谷"], "each entry is 'type: a / alias"),
    (["game: 星露谷 | | 泰拉瑞亚"], "no empty type, group or alias"),
    (["game: 星露谷", "game: 泰拉瑞亚"], "type 'game' is listed twice"),
    (["game: Stardew | 泰拉瑞亚", "food: stardew"], "alias 'stardew' is listed twice"),
])
def test_entity_types_are_validated(lines, rule):
    from memlab.errors import ConfigError
    with pytest.raises(ConfigError, match="fuzzy.entity_types") as err:
        BASE.replace(**{"fuzzy.entity_types": lines})
    assert rule in str(err.value)


def test_titles_from_the_extractor_are_one_type():
    """§9.2's own example: 《星露谷》 misremembered as 《泰拉瑞亚》 — here books in 《》 the lexicon does
    not type: each is swapped for a title another memory names; 《星露谷物语》 stays a game."""
    mems = [("m_santi", "用户最近在读《三体》", 0.5), ("m_xiyou", "用户小时候看过《西游记》", 0.5),
            ("m_game", "用户最喜欢《星露谷物语》", 0.5)]
    with _store(ON, mems) as st_:
        res = st_.recall("三体 西游记 星露谷物语", k=3)
    shown = dict(zip(res.ids, res.texts))
    assert shown == {"m_santi": "用户最近在读《西游记》", "m_xiyou": "用户小时候看过《三体》",
                     "m_game": "用户最喜欢《星露谷物语》"}       # no other game in the store
    assert {s.type for s in res.swaps} == {"title"}
    with _store(ON.replace(**{"fuzzy.titles": False}), mems) as st_:
        assert st_.recall("三体 西游记 星露谷物语", k=3).swaps == ()

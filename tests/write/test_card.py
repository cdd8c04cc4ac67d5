"""The permanent layer from a character card (reverie §4.2; memlab.write.card, MemoryStore.sync_card,
``memlab card sync``): anchors by content hash, re-sync changes only what changed, users' memories
are never touched, importance layers.permanent_importance, never forgotten."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

import memlab
from memlab.clock import FixedClock
from memlab.cli import app
from memlab.config import MemlabConfig
from memlab.errors import CardError
from memlab.write.card import anchor_id, card_anchors, load_card

CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 0.0})
DAY = 86_400.0
ZH_CARD = """名字: 小铃
生日: 3月14日
性格: [温柔, 有点迷糊]
爱好: [玩星露谷物语, 画画]
设定:
  - 我住在一座海边小镇。
"""
EN_CARD = {"name": "Luna", "birthday": "March 14", "hobbies": ["painting", "Stardew Valley"],
           "dislikes": "thunderstorms", "age": 19}


def _write(tmp_path, text: str, name: str = "card.yaml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _rows(store, where: str = "1"):
    """memory_records rows (every column, as stored), by rowid."""
    return store._store.conn.execute(
        f"SELECT * FROM memory_records WHERE {where} ORDER BY rowid").fetchall()


def _anchors(store, agent_id="agent_0", user_id="user_0"):
    return {r.id: r for r in store._store.repo.by_source("character_card", agent_id=agent_id,
                                                         user_id=user_id)}


def test_zh_card_becomes_permanent_anchors_with_hash_ids(tmp_path):
    path = _write(tmp_path, ZH_CARD)
    with memlab.open_store(":memory:", config=CFG, card=path, clock=FixedClock(0.0)) as st:
        got = _anchors(st)
    texts = ["我的名字是小铃。", "我的生日是3月14日。", "我的性格：温柔、有点迷糊。",
             "我的爱好：玩星露谷物语、画画。", "我住在一座海边小镇。"]
    assert sorted(r.text for r in got.values()) == sorted(texts)
    for r in got.values():
        digest = hashlib.sha256(f"agent_0\x1fuser_0\x1f{r.text}".encode()).hexdigest()
        assert r.id == "pm_" + digest[:32]
        assert r.source_hash == hashlib.sha256(r.text.encode()).hexdigest()
        assert (r.retention_layer, r.importance, r.source_type) == ("permanent", 1.0,
                                                                    "character_card")
    assert {r.meta["card_field"] for r in got.values()} == {"name", "birthday", "personality",
                                                            "hobbies", "facts"}


def test_en_card_from_json_uses_english_templates(tmp_path):
    path = _write(tmp_path, json.dumps(EN_CARD), "card.json")
    card = load_card(path)
    assert card.language == "en"
    texts = [a.text for a in card_anchors(card, cfg=CFG.card, agent_id="a", user_id="u")]
    assert texts == ["My name is Luna.", "I am 19 years old.", "My birthday is March 14.",
                     "My hobbies: painting, Stardew Valley.", "I dislike thunderstorms."]


def test_importance_comes_from_the_config(tmp_path):
    cfg = CFG.replace(**{"layers.permanent_importance": 0.95})
    with memlab.open_store(":memory:", config=cfg, card=_write(tmp_path, ZH_CARD)) as st:
        assert {r.importance for r in _anchors(st).values()} == {0.95}


def test_resync_of_the_same_card_changes_nothing(tmp_path):
    path = _write(tmp_path, ZH_CARD)
    with memlab.open_store(":memory:", config=CFG, card=path, clock=FixedClock(0.0)) as st:
        before = _rows(st)
        plan = st.sync_card(path, clock=FixedClock(5 * DAY))
        assert (len(plan.added), len(plan.removed), len(plan.kept)) == (0, 0, 5)
        assert not plan.changed
        assert _rows(st) == before


def test_changed_card_replaces_only_the_changed_anchor_and_never_touches_users(tmp_path):
    path = _write(tmp_path, ZH_CARD)
    clock = FixedClock(0.0)
    with memlab.open_store(":memory:", config=CFG, card=path, clock=clock) as st:
        st.add("用户最喜欢玩泰拉瑞亚", importance=0.7)
        st.add("用户的名字叫小林", layer="permanent")          # a user's own permanent memory
        st.add("用户明天要去北京出差", importance=0.3, agent_id="agent_0", user_id="user_1")
        st.recall("泰拉瑞亚")
        st.reinforce(["" + st.recall("泰拉瑞亚").ids[0]])
        users_before = _rows(st, "source_type != 'character_card'")
        old = _anchors(st)
        _write(tmp_path, ZH_CARD.replace("画画", "弹钢琴").replace("设定:\n  - 我住在一座海边小镇。\n", ""))
        clock.advance(DAY)
        plan = st.sync_card(path)
        new = _anchors(st)
        assert [a.text for a in plan.added] == ["我的爱好：玩星露谷物语、弹钢琴。"]
        assert sorted(a.text for a in plan.removed) == ["我住在一座海边小镇。",
                                                        "我的爱好：玩星露谷物语、画画。"]
        assert set(new) == set(old) - {a.id for a in plan.removed} | {a.id for a in plan.added}
        kept = set(old) & set(new)
        assert len(kept) == 3
        assert all(old[i] == new[i] for i in kept)
        assert _rows(st, "source_type != 'character_card'") == users_before
        # the removed anchors are gone from recall's permanent route too
        assert "我住在一座海边小镇。" not in st.recall("海边小镇", k=10).texts


def test_card_sync_is_per_owner(tmp_path):
    path = _write(tmp_path, ZH_CARD)
    with memlab.open_store(":memory:", config=CFG, card=path) as st:
        st.sync_card(path, agent_id="agent_0", user_id="user_1")
        a, b = _anchors(st), _anchors(st, user_id="user_1")
        assert len(a) == len(b) == 5 and not set(a) & set(b)
        _write(tmp_path, "名字: 小铃\n")
        st.sync_card(path, agent_id="agent_0", user_id="user_1")
        assert _anchors(st) == a
        assert [r.text for r in _anchors(st, user_id="user_1").values()] == ["我的名字是小铃。"]
        assert anchor_id("我的名字是小铃。", agent_id="agent_0", user_id="user_1") in \
            _anchors(st, user_id="user_1")


def test_dry_run_writes_nothing_and_shows_the_diff(tmp_path):
    path = _write(tmp_path, ZH_CARD)
    with memlab.open_store(":memory:", config=CFG, card=path) as st:
        before = _rows(st)
        _write(tmp_path, ZH_CARD.replace("温柔", "开朗"))
        plan = st.sync_card(path, dry_run=True)
        assert _rows(st) == before
        lines = plan.lines()
    assert lines[0].startswith("- pm_") and lines[0].endswith("[personality] 我的性格：温柔、有点迷糊。")
    assert lines[1].startswith("+ pm_") and lines[1].endswith("[personality] 我的性格：开朗、有点迷糊。")
    assert "would change 1 added, 1 removed, 4 unchanged" in lines[2]


def test_cli_card_sync_dry_run_then_sync(tmp_path):
    path = _write(tmp_path, ZH_CARD)
    db = tmp_path / "m.db"
    args = ["card", "sync", str(path), "--db", str(db), "--set", "embedding.backend=hashing"]
    runner = CliRunner()
    dry = runner.invoke(app, args + ["--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.count("\n+ pm_") + dry.output.startswith("+ pm_") == 5
    assert "would change 5 added" in dry.output
    with memlab.open_store(db, config=CFG) as st:
        assert len(st) == 0
    done = runner.invoke(app, args)
    assert done.exit_code == 0 and "changed 5 added, 0 removed" in done.output
    again = runner.invoke(app, args)
    assert "changed 0 added, 0 removed, 5 unchanged" in again.output
    with memlab.open_store(db, config=CFG) as st:
        assert len(st) == 5
    bad = _write(tmp_path, "名字: 小铃\n星座: 双鱼\n", "bad.yaml")
    out = runner.invoke(app, ["card", "sync", str(bad), "--db", str(db), "--set",
                              "embedding.backend=hashing"])
    assert out.exit_code == 2 and "bad.yaml" in out.output and "'星座'" in out.output


@pytest.mark.parametrize("text, field, rule", [
    ("名字: 小铃\n星座: 双鱼\n", "星座", "unknown field"),
    ("生日: 3月14日\n", "name", "required"),
    ("名字: 小铃\nname: Luna\n", "name", "the same field as '名字'"),
    ("名字: '  '\n", "名字", "must not be empty"),
    ("名字: 小铃\n生日: [3月14日, 4月1日]\n", "生日", "single value"),
    ("名字: 小铃\n爱好: []\n", "爱好", "empty list"),
    ("名字: 小铃\n爱好: {a: 1}\n", "爱好", "must be text"),
    ("名字: 小铃\n喜欢: true\n", "喜欢", "must be text"),
    ("名字: 小铃\n喜欢: 42\n", "喜欢", "age only"),
    ("名字: 小铃\nlanguage: fr\n", "language", "'zh' or 'en'"),
    ("- 小铃\n", "(top level)", "mapping"),
    ("名字: [小铃\n", "(file)", "not valid YAML"),
    ("名字: 小铃\n爱好: 画画\n名字: 小雪\n", "(file)", "duplicate key '名字' (first at line 1)"),
])
def test_malformed_card_names_file_field_rule_and_writes_nothing(tmp_path, text, field, rule):
    good = _write(tmp_path, ZH_CARD)
    with memlab.open_store(":memory:", config=CFG, card=good) as st:
        st.add("用户最喜欢玩泰拉瑞亚", importance=0.7)
        before = _rows(st)
        bad = _write(tmp_path, text, "bad.yaml")
        with pytest.raises(CardError) as err:
            st.sync_card(bad)
        assert _rows(st) == before
    msg = str(err.value)
    assert str(bad) in msg and f"field {field!r}" in msg and rule in msg, msg
    assert err.value.field == field


def test_malformed_json_names_line_and_column(tmp_path):
    bad = _write(tmp_path, '{"name": "Luna",\n "age": }', "bad.json")
    with pytest.raises(CardError, match=r"bad\.json:2:9: field '\(file\)': not valid JSON"):
        load_card(bad)


def test_a_malformed_card_at_open_raises_and_closes(tmp_path):
    bad = _write(tmp_path, "星座: 双鱼\n")
    with pytest.raises(CardError, match="unknown field"):
        memlab.open_store(tmp_path / "m.db", config=CFG, card=bad)
    with memlab.open_store(tmp_path / "m.db", config=CFG) as st:
        assert len(st) == 0


def test_anchors_are_never_forgotten(tmp_path):
    """Permanent rows have retention 1 (forgetting.py, layer code 0) however old: recall shows
    it in the explain frame ten years on."""
    with memlab.open_store(":memory:", config=CFG, card=_write(tmp_path, ZH_CARD),
                           clock=FixedClock(0.0)) as st:
        st.add("用户的生日是五月", importance=0.9, layer="long_term")
        frame = st.recall("生日", k=5, clock=FixedClock(3650 * DAY)).to_frame()
    ret = dict(zip(frame["text"], frame["retention"]))
    assert ret["我的生日是3月14日。"] == 1.0
    assert "用户的生日是五月" not in ret      # the long-term memory has faded out of recall


def test_a_json_card_with_a_key_twice_names_it(tmp_path):
    bad = _write(tmp_path, '{"name": "Luna", "hobbies": "drawing", "name": "Nova"}', "bad.json")
    with pytest.raises(CardError, match=r"bad\.json: field 'name': given twice in one object"):
        load_card(bad)

"""Facts over time (issue 9 item 4; reverie §6.1 fact_key / fact_revision / lifecycle_state):
the fact-key rule in zh and en, supersession inside the add's transaction, recall sees the latest
revision only (every route, SQL and in-process index), history, contradictions."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.types import MemoryRecord
from memlab.write.facts import derive_fact_key, fact_value, match_fact

T0 = 1_750_000_000.0
DAY = 86_400.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})
DERIVE = BASE.replace(**{"facts.rule": "subject_attribute"})


def _store(cfg=DERIVE, path=":memory:"):
    return memlab.open_store(path, config=cfg, clock=FixedClock(T0))


@pytest.mark.parametrize("text,attribute,value", [
    ("我的生日是三月三日", "birthday", "三月三日"),
    ("对了，我的生日在十月一号。", "birthday", "十月一号"),
    ("My birthday is March 3rd.", "birthday", "march 3rd"),
    ("我现在住在上海，工作很忙", "residence", "上海"),
    ("Caroline: I live in Boston now", "residence", "boston now"),
    ("I've moved to Lisbon!", "residence", "lisbon"),
    ("我最喜欢的颜色是蓝色", "favourite:颜色", "蓝色"),
    ("My favourite colour is blue", "favourite:colour", "blue"),
    ("my favorite band is Muse", "favourite:band", "muse"),
    ("我不喜欢猫", "likes:猫", "不喜欢"),
    ("我喜欢猫", "likes:猫", "喜欢"),
    ("I hate spiders", "likes:spiders", "hate"),
    ("我的名字叫小林", "name", "小林"),
    ("my name is Ada", "name", "ada"),
    ("今天天气不错", None, None),
    ("The weather is nice today", None, None),
])
def test_the_default_patterns_read_subject_attribute_facts_in_zh_and_en(text, attribute, value):
    fact = match_fact(text, DERIVE.facts)
    assert (fact is None) == (attribute is None)
    if fact is not None:
        assert (fact.attribute, fact.value) == (attribute, value)


def test_the_key_is_the_speaker_or_the_default_subject_and_the_rule_decides():
    rec = MemoryRecord(id="a", text="Caroline: I live in Boston", speaker="Caroline",
                       retention_layer="long_term")
    assert derive_fact_key(rec, DERIVE.facts) == "caroline:residence"
    no_speaker = MemoryRecord(id="b", text="我住在北京", retention_layer="short_term")
    assert derive_fact_key(no_speaker, DERIVE.facts) == "user:residence"
    assert derive_fact_key(no_speaker, BASE.facts) == ""            # explicit: none derived
    card = MemoryRecord(id="c", text="我的生日是三月三日", retention_layer="permanent")
    assert derive_fact_key(card, DERIVE.facts) == ""                # not the card's anchors
    given = MemoryRecord(id="d", text="我住在北京", fact_key="home", retention_layer="long_term")
    assert derive_fact_key(given, DERIVE.facts) == "home"           # a given key wins


def test_a_bad_pattern_is_a_config_error_naming_the_field():
    from memlab.errors import ConfigError
    for bad in (["no separator"], ["x|("], ["x:{who}|我(?P<value>.+)"]):
        with pytest.raises(ConfigError, match="facts.patterns"):
            BASE.replace(**{"facts.patterns": bad})


@pytest.mark.parametrize("old,new,query", [
    ("我的生日是三月三日", "我的生日是五月五日", "我的生日"),
    ("I live in Boston", "I live in Chicago", "where do I live"),
])
def test_a_new_statement_supersedes_the_old_and_recall_sees_the_latest_only(old, new, query):
    with _store() as st:
        a = st.add(old, importance=0.8, clock=FixedClock(T0))
        st.recall(query), st.recall(query)            # the second read loads the MemoryIndex
        b = st.add(new, importance=0.8, clock=FixedClock(T0 + DAY))
        assert b.fact_key == a.fact_key != ""
        assert (b.fact_revision, b.supersedes, b.lifecycle_state) == (2, a.id, "active")
        old_now = st.get([a.id])[0]
        assert old_now.lifecycle_state == "superseded" and old_now.fact_revision == 1
        for _ in range(2):                            # through the index, synced, and again
            assert st.recall(query, k=10).ids == [b.id]
        # no route at all offers the old revision: permanent, dense, lexical, entity
        table = st.features([query, old], k=10, now=T0 + 2 * DAY)
        assert a.id not in set(table.ids.values()) and b.id in set(table.ids.values())


def test_the_sql_path_and_the_dense_table_also_drop_the_old_revision(tmp_path):
    cfg = DERIVE.replace(**{"store.memory_index": "sqlite", "store.read_index": "sqlite-vec"})
    with _store(cfg, tmp_path / "s.sqlite") as st:
        a = st.add("我住在北京")
        b = st.add("我住在上海")
        assert st.recall("我住在哪里", k=10).ids == [b.id]
        vec = st._store.vectors
        active = dict(st._store.conn.execute(f"SELECT rowid, active FROM {vec.table}"))
        rows = dict(zip([a.id, b.id], st._store.repo.ids_to_rows([a.id, b.id])))
        assert (active[rows[a.id]], active[rows[b.id]]) == (0, 1)


def test_owners_and_the_permanent_layer_never_supersede_each_other():
    with _store() as st:
        mine = st.add("我住在北京", user_id="u1")
        yours = st.add("我住在上海", user_id="u2")
        card = st.add("我的生日是一月一日", layer="permanent", fact_key="user:birthday")
        user = st.add("我的生日是三月三日", layer="long_term")
        assert user.fact_key == card.fact_key and user.fact_revision == 1
        states = {r.id: r.lifecycle_state for r in
                  st.get([mine.id], user_id="u1") + st.get([yours.id], user_id="u2")
                  + st.get([card.id, user.id])}
        assert set(states.values()) == {"active"}


def test_a_batch_supersedes_in_order_and_keeps_the_chain():
    with _store() as st:
        recs = st.add_many([{"text": "I live in Paris"}, {"text": "I live in Rome"},
                            {"text": "I live in Oslo"}])
        assert [r.lifecycle_state for r in recs] == ["superseded", "superseded", "active"]
        assert [r.fact_revision for r in recs] == [1, 2, 3]
        assert [r.supersedes for r in recs] == [None, recs[0].id, recs[1].id]
        chain = st.history(recs[1].id)                  # from any revision: the whole chain
        assert [r.id for r in chain] == [r.id for r in recs]
        assert [r.lifecycle_state for r in st.get([r.id for r in recs])] == \
            ["superseded", "superseded", "active"]


def test_a_restatement_is_reinforced_and_a_pin_moves_to_the_new_revision():
    with _store() as st:
        a = st.add("我住在北京")
        st.pin(a.id)
        b = st.add("对，我住在北京。")
        assert b.mention_count == 2 and b.pinned and not st.get([a.id])[0].pinned
        c = st.add("我住在上海")
        assert c.mention_count == 1 and c.pinned           # another value: a new fact, pinned
        assert [r.id for r in st.pinned()] == [c.id]


def test_rule_none_compares_nothing():
    with _store(BASE.replace(**{"facts.rule": "none"})) as st:
        a = st.add("我住在北京", fact_key="home")
        b = st.add("我住在上海", fact_key="home")
        assert [r.lifecycle_state for r in st.get([a.id, b.id])] == ["active", "active"]
        assert b.fact_revision == 1 and b.supersedes is None


def test_explicit_keys_supersede_under_the_default_rule():
    with _store(BASE) as st:
        a = st.add("Moved to the new flat on Elm street", fact_key="home")
        b = st.add("Living at the lake house now", fact_key="home")
        assert b.supersedes == a.id and st.get([a.id])[0].lifecycle_state == "superseded"
        c = st.add("I live in Boston")                  # explicit: nothing derived
        assert c.fact_key == ""


def test_a_refused_add_undoes_the_supersession():
    with _store() as st:
        a = st.add("我住在北京")
        with pytest.raises(InvalidInput, match="already stored"):
            st.add_many([{"text": "我住在上海"}, {"text": "whatever", "id": a.id}])
        assert st.get([a.id])[0].lifecycle_state == "active"
        assert st.recall("我住在哪里", k=5).ids == [a.id]
        assert len(st) == 1


def test_history_refuses_another_tenants_id_and_a_single_memory_is_its_own_history():
    with _store() as st:
        a = st.add("今天天气不错")
        assert [r.id for r in st.history(a.id)] == [a.id]
        with pytest.raises(InvalidInput, match="no memory with this id"):
            st.history(a.id, user_id="someone_else")


def test_expired_memories_are_kept_but_never_recalled():
    with _store() as st:
        a = st.add("用户对咖啡因过敏")
        assert st.recall("咖啡因", k=5).ids == [a.id]
        assert st.expire([a.id]) == 1 and st.expire([a.id]) == 0
        assert st.recall("咖啡因", k=5).ids == [] and st.get([a.id])[0].lifecycle_state == "expired"


def test_contradictions_are_found_recorded_once_listed_and_resolved():
    with _store(BASE.replace(**{"facts.rule": "none"})) as st:
        a = st.add("我住在北京", fact_key="user:residence")
        b = st.add("我住在上海", fact_key="user:residence")
        same = st.add("I like tea", fact_key="drink")
        st.add("I like tea.", fact_key="drink")            # same value: no contradiction
        assert st.contradictions() == []
        found = st.contradictions(check=True)
        assert len(found) == 1
        c = found[0]
        assert (c.fact_key, c.memory_ids, c.values) == \
            ("user:residence", tuple(sorted([a.id, b.id])),
             tuple("北京" if i == a.id else "上海" for i in sorted([a.id, b.id])))
        assert [x.id for x in st.contradictions(check=True)] == [c.id]   # recorded once
        assert same.id not in c.memory_ids
        from memlab.write.facts import resolve_contradiction
        dropped = resolve_contradiction(st._store.repo, c.id, keep=b.id, at=T0, agent_id="agent_0",
                                        user_id="user_0")
        assert dropped == [a.id] and st.get([a.id])[0].lifecycle_state == "superseded"
        assert st.contradictions() == []
        assert st.contradictions(open_only=False)[0].resolution == f"kept {b.id}"


def test_fact_value_falls_back_to_the_whole_text():
    rec = MemoryRecord(id="x", text="  Living at the LAKE house. ", fact_key="home")
    assert fact_value(rec, BASE.facts) == "living at the lake house"


def test_cli_history_and_contradictions(tmp_path):
    path = tmp_path / "c.sqlite"
    with _store(DERIVE, path) as st:
        a = st.add("我的生日是三月三日")
        b = st.add("我的生日是五月五日")
    runner = CliRunner()
    from memlab.cli import app
    sets = ["--set", "embedding.backend=hashing"]
    out = runner.invoke(app, ["history", str(path), b.id, "--json", *sets])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert [(r["revision"], r["id"], r["state"]) for r in rows] == \
        [(1, a.id, "superseded"), (2, b.id, "active")]
    out = runner.invoke(app, ["history", str(path), "nope", *sets])
    assert out.exit_code == 2 and "no memory with this id" in out.output
    out = runner.invoke(app, ["contradictions", str(path), "--check", *sets])
    assert out.exit_code == 0 and "no contradictions recorded" in out.output


def test_the_evidence_check_of_every_owner_records_each_owners_contradictions():
    from memlab.write.facts import evidence_check
    with _store(BASE.replace(**{"facts.rule": "none"})) as st:
        for user in ("u1", "u2"):
            st.add("我住在北京", fact_key="user:residence", user_id=user)
            st.add("我住在上海", fact_key="user:residence", user_id=user)
        st.add("我住在广州", fact_key="user:residence", user_id="u3")
        found = evidence_check(st._store.repo, cfg=st.config, at=T0)
        assert sorted(c.user_id for c in found) == ["u1", "u2"]
        assert [c.id for c in evidence_check(st._store.repo, cfg=st.config, at=T0 + 1)] == \
            [c.id for c in found]
        with pytest.raises(InvalidInput, match="give both"):
            evidence_check(st._store.repo, cfg=st.config, at=T0, agent_id="agent_0")

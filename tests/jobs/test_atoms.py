"""extract_atoms (reverie §11.4): typed atoms by zh and en rules, stored linked to their memory."""

from __future__ import annotations

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import ConfigError, InvalidInput
from memlab.jobs import extract_atoms, stored_atoms

T0 = 1_700_000_000.0
CFG = MemlabConfig().jobs
CASES = [   # (text, the one atom kind it gives), in Chinese and in English
    ("我最喜欢吃火锅", "preference"),
    ("I really love jazz", "preference"),
    ("用户讨厌下雨天", "preference"),
    ("She hates horror movies", "preference"),
    ("我对花生过敏", "constraint"),
    ("He is allergic to cats", "constraint"),
    ("晚上十点以后不能打电话", "constraint"),
    ("You must not call after ten", "constraint"),
    ("我答应下周六陪她去看电影", "promise"),
    ("I promised Anna to call her", "promise"),
    ("我们约定每年一起过生日", "promise"),
    ("We agreed to meet every Sunday", "promise"),
    ("事件记忆：用户三个月前搬了新家", "event"),
    ("昨天用户参加了同学聚会", "event"),
    ("Yesterday we went to Lisbon", "event"),
    ("They got married in June", "event"),
    ("这次的教训是出门要带伞", "lesson"),
    ("下次别在雨天骑车", "lesson"),
    ("Lesson learned: back up the photos", "lesson"),
    ("Next time book the train early", "lesson"),
]


@pytest.mark.parametrize("text,kind", CASES)
def test_each_kind_in_chinese_and_english(text, kind):
    atoms = extract_atoms(text, CFG)
    assert [(a.kind, a.text) for a in atoms] == [(kind, text)]
    assert atoms[0].rule in getattr(CFG, f"atom_{kind}")


@pytest.mark.parametrize("text", ["猫是一种动物", "天空是蓝色的", "The sky is blue",
                                  "It looks like rain", "Paris is the capital of France"])
def test_plain_statements_give_no_atom(text):
    assert extract_atoms(text, CFG) == []


def test_clauses_split_into_atoms_of_several_kinds():
    zh = extract_atoms("我喜欢猫，但是对猫毛过敏。下次要记得吃药！", CFG)
    assert [(a.kind, a.text) for a in zh] == [("preference", "我喜欢猫"),
                                             ("constraint", "但是对猫毛过敏"),
                                             ("lesson", "下次要记得吃药")]
    en = extract_atoms("I love sushi, but I am allergic to shrimp. I promised to cook.", CFG)
    assert [(a.kind, a.text) for a in en] == [("preference", "I love sushi"),
                                             ("constraint", "I am allergic to shrimp"),
                                             ("promise", "I promised to cook")]
    both = extract_atoms("I promised to visit yesterday", CFG)      # one clause, two kinds
    assert [a.kind for a in both] == ["promise", "event"]


def test_rules_are_configuration():
    cfg = MemlabConfig().replace(**{"jobs.atom_preference": ["(?i)\\bfancy\\b", "钟意"],
                                    "jobs.atom_event": []}).jobs
    assert [a.kind for a in extract_atoms("I fancy tea", cfg)] == ["preference"]
    assert [a.kind for a in extract_atoms("我钟意饮茶", cfg)] == ["preference"]
    assert extract_atoms("I love tea", cfg) == [] and extract_atoms("昨天下雨", cfg) == []
    with pytest.raises(ConfigError, match="jobs.atom_lesson.*not a valid regular expression"):
        MemlabConfig().replace(**{"jobs.atom_lesson": ["(unclosed"]})
    with pytest.raises(ConfigError, match="jobs.atom_lesson.*empty string"):
        MemlabConfig().replace(**{"jobs.atom_lesson": ["x*"]})


@pytest.fixture
def store(tmp_path):
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing"})
    st = memlab.open_store(tmp_path / "s.sqlite", config=cfg, clock=FixedClock(T0))
    yield st
    st.close()


def test_the_job_stores_atoms_linked_to_their_memory_and_replaces_them(store):
    store.add("我喜欢猫，但是对猫毛过敏", id="m1", importance=0.5)
    store.add("I promised Anna to call her", id="m2", importance=0.5, user_id="u2")
    store.add("The sky is blue", id="m3", importance=0.5)
    worker = store.worker()
    store.enqueue_job("extract_atoms")
    [job] = worker.run().done
    assert job.result == {"read": 3, "memories": 3, "atoms": 3,
                          "by_kind": {"preference": 1, "constraint": 1, "promise": 1}}
    got = [(a.memory_id, a.user_id, a.kind, a.text, a.job_id) for a in stored_atoms(store._store.conn)]
    assert got == [("m1", "user_0", "preference", "我喜欢猫", job.id),
                   ("m1", "user_0", "constraint", "但是对猫毛过敏", job.id),
                   ("m2", "u2", "promise", "I promised Anna to call her", job.id)]
    # a second run replaces, never duplicates; one owner only
    store.enqueue_job("extract_atoms", agent_id="agent_0", user_id="u2")
    [again] = worker.run().done
    assert again.result["read"] == 1 and len(stored_atoms(store._store.conn)) == 3
    assert [a.job_id for a in stored_atoms(store._store.conn, user_id="u2")] == [again.id]
    # atoms go with their memory
    store._store.repo.delete(["m1"])
    assert [a.memory_id for a in stored_atoms(store._store.conn)] == ["m2"]


def test_a_memory_rewritten_between_read_and_write_is_left_for_the_next_job(store):
    from memlab.jobs import get_kind
    from memlab.jobs import queue
    from memlab.jobs.kinds import JobContext
    from memlab.text import memory_terms

    store.add("我喜欢猫", id="m1", importance=0.5)
    job = store.enqueue_job("extract_atoms", {"memory_ids": ["m1"]})
    held = queue.lease(store._store.conn, now=T0, owner="w", lease_seconds=300)
    ctx = JobContext(job=held.job, store=store._store, config=store.config, now=T0,
                     embedder=lambda: None, heartbeat=lambda: None)
    outcome = get_kind("extract_atoms").handler(ctx)
    store._store.repo.update_fields("m1", text="我对猫毛过敏", terms=memory_terms("我对猫毛过敏"))
    done = queue.complete(store._store.conn, held, now=T0, result=outcome.result,
                          write=outcome.write)
    assert done.result["memories"] == 0 and stored_atoms(store._store.conn) == []
    assert job.id == done.id


def test_bad_memory_ids_payload_is_refused(store):
    with pytest.raises(InvalidInput, match="payload.memory_ids"):
        store.enqueue_job("extract_atoms", {"memory_ids": "m1"})
    with pytest.raises(InvalidInput, match="payload.memory_ids"):
        store.enqueue_job("extract_atoms", {"memory_ids": []})

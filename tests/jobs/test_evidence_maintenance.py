"""evidence_check (contradictions by fact key), cleanup_usage (90 days), reembed (after an embedder
change) and consolidate (the Familiars consolidator as a job); reverie §11.4."""

from __future__ import annotations

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder
from memlab.errors import EmbeddingUnavailable, JobError
from memlab.jobs import contradictions
from memlab.jobs import queue

T0 = 1_700_000_000.0
DAY = 86_400.0
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing"})


@pytest.fixture
def store(tmp_path):
    st = memlab.open_store(tmp_path / "s.sqlite", config=CFG, clock=FixedClock(T0))
    yield st
    st.close()


def _add(store, id, text, fact_key, **kw):
    store.add(text, id=id, fact_key=fact_key, importance=0.5, **kw)


def test_the_job_records_each_contradiction_once_per_owner(tmp_path):
    """The job runs memlab.write.facts.evidence_check: active memories of one owner, one fact key,
    different values; a repetition (up to case and spaces), another owner's memory, a memory
    without a key and a superseded one are not contradictions."""
    none = CFG.replace(**{"facts.rule": "none"})   # keys kept, no supersession: both stay active
    store = memlab.open_store(tmp_path / "c.sqlite", config=none, clock=FixedClock(T0))
    _add(store, "a1", "用户住在北京", "user.city")
    _add(store, "a2", "用户住在上海", "user.city")
    _add(store, "b1", "The user lives in Paris", "user.city", user_id="u2")   # another owner
    _add(store, "c1", "The user's cat is Momo", "user.cat")
    _add(store, "c2", "the user's   CAT is momo", "user.cat")  # same value up to case and spaces
    _add(store, "d1", "Likes tea", "")                          # no fact key
    _add(store, "d2", "Likes coffee", "")
    _add(store, "e1", "The user is 30", "user.age")
    _add(store, "e2", "The user is 31", "user.age", lifecycle_state="superseded")   # not active
    worker = store.worker()
    store.enqueue_job("evidence_check")
    [job] = worker.run().done
    assert job.result == {"found": 1, "new": 1}
    rows = contradictions(store._store.conn)
    assert [(c.fact_key, c.memory_ids, c.values) for c in rows] == [
        ("user.city", ("a1", "a2"), ("用户住在北京", "用户住在上海"))]
    store.enqueue_job("evidence_check")
    assert worker.run().done[0].result == {"found": 1, "new": 0}       # recorded once
    store.enqueue_job("evidence_check", {"agent_id": "agent_0", "user_id": "u2"})
    assert worker.run().done[0].result == {"found": 0, "new": 0}
    assert len(contradictions(store._store.conn)) == 1
    store.close()


def test_cleanup_usage_removes_signals_older_than_90_days(store):
    assert CFG.governance.usage_cleanup_days == 90.0
    conn = store._store.conn
    ages = {"old": 90 * DAY + 1, "edge": 90 * DAY, "young": 89 * DAY, "new": 0.0}
    conn.executemany("INSERT INTO memory_usage_events (memory_id, kind, weight, at) VALUES "
                     "(?, 'injected', 0.2, ?)", [(k, T0 - a) for k, a in ages.items()])
    store.enqueue_job("cleanup_usage")
    [job] = store.worker().run().done
    assert job.result == {"cutoff": T0 - 90 * DAY, "deleted": 1}
    assert sorted(r[0] for r in conn.execute("SELECT memory_id FROM memory_usage_events")) == [
        "edge", "new", "young"]


def test_reembed_embeds_every_memory_for_the_new_embedder(tmp_path):
    path = tmp_path / "s.sqlite"
    old, new = HashingEmbedder(dim=32), HashingEmbedder(dim=48)
    with memlab.open_store(path, config=CFG, embedder=old, clock=FixedClock(T0)) as st:
        st.add_many([{"text": f"memory number {i} about cats", "importance": 0.5}
                     for i in range(5)])
        st.add("!!!", importance=0.5)     # the hashing embedder gives it no vector ('none')
    with memlab.open_store(path, config=CFG, embedder=new, clock=FixedClock(T0)) as st:
        versions = lambda: sorted({r[0] for r in st._store.conn.execute(  # noqa: E731
            "SELECT embedding_model_version FROM memory_records")})
        assert versions() == [old.version] and st.health.pending == 6
        dense = lambda: int((st.features(["cats"], k=3, now=T0).table["dense_rank"]  # noqa: E731
                             > 0).sum())
        assert dense() == 0          # no vector of the new embedder yet: lexical routes only
        st.enqueue_job("reembed")
        [job] = st.worker().run().done
        assert job.result == {"model_version": new.version, "other_version_before": 6,
                              "embedded": 6}
        assert versions() == [new.version] and st.health.pending == 0
        assert st.health.vectors == 5
        assert dense() == 5          # the dense route finds every re-embedded memory
        st.enqueue_job("reembed")
        assert st.worker().run().done[0].result["embedded"] == 0


def test_reembed_without_an_embedder_fails_saying_so(tmp_path):
    with memlab.open_store(tmp_path / "s.sqlite", config=CFG, load_embedder=False,
                           clock=FixedClock(T0)) as st:
        st.enqueue_job("reembed", max_attempts=1)
        [job] = st.worker().run().failed
        assert job.error.startswith("EmbeddingUnavailable: this worker has no embedder")


def test_reembed_loads_the_embedder_of_a_factory_only_when_it_runs(tmp_path):
    made = []

    def factory():
        made.append(1)
        return HashingEmbedder(dim=16)

    with memlab.open_store(tmp_path / "s.sqlite", config=CFG, load_embedder=False,
                           clock=FixedClock(T0)) as st:
        st.add("a memory about tea", importance=0.5)
        worker = st.worker(embedder=factory)
        st.enqueue_job("cleanup_usage")
        worker.run()
        assert made == []
        st.enqueue_job("reembed")
        [job] = worker.run().done
        assert made == [1] and job.result["embedded"] == 1


def test_consolidate_runs_the_familiars_consolidator(tmp_path):
    """The job plans with the worker's embedder and applies in the completing transaction
    (the consolidator itself: tests/lifecycle/test_consolidate.py)."""
    cfg = CFG.replace(**{"consolidation.similarity_threshold": 0.5})
    with memlab.open_store(tmp_path / "s.sqlite", config=cfg, embedder=HashingEmbedder(),
                           clock=FixedClock(T0)) as st:
        st.add_many([{"id": "m_1", "text": "我喜欢喝绿茶", "scope": "user",
                      "category": "preference", "importance": 0.5},
                     {"id": "m_2", "text": "我很喜欢喝绿茶。我住在北京。", "scope": "user",
                      "category": "preference", "importance": 0.7},
                     {"id": "m_3", "text": "我喜欢喝绿茶", "scope": "user", "category": "event",
                      "importance": 0.5}])
        st.enqueue_job("consolidate", agent_id="agent_0", user_id="user_0")
        [job] = st.worker().run().done
        assert {k: job.result[k] for k in ("clusters", "deprecated", "pinned_left")} == \
            {"clusters": 1, "deprecated": 2, "pinned_left": 0}
        [new] = st.get(job.result["added"])
        assert new.derived_from == ("m_1", "m_2") and new.importance == 0.7
        assert [r.deprecated for r in st.get(["m_1", "m_2", "m_3"])] == [True, True, False]


def test_consolidate_with_the_llm_synthesis_fails_in_a_worker(store):
    st = store
    st.enqueue_job("consolidate", max_attempts=1)
    worker = st.worker()
    worker.config = worker.config.replace(**{"consolidation.synthesis": "llm"})
    [job] = worker.run().failed
    assert "has no LLM" in job.error


def test_embedding_unavailable_is_memlabs_error():
    assert issubclass(EmbeddingUnavailable, memlab.errors.MemlabError)

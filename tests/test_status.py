"""memlab.status (familiars §5.11): counts by scope, category, layer, lifecycle, deprecated;
pending embeddings; jobs by state; usage and recall-log events; recall hit statistics; the
DataFrame, the dict and ``memlab status``. Counts worked out from what each test writes."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

import memlab
from memlab.cli import app
from memlab.config import MemlabConfig
from memlab.status import store_status

CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                "recall.relevance_floor": 0.0})


def _add(content, scope="user", category="profile", **entry):
    return {"op": "add", "scope": scope, "category": category,
            "entry": {"content": content, **entry}}


def _fill(st):
    first = st.write({"writes": [_add("用户名字是 Alice", salience=0.9),
                                 _add("The user likes tea", category="preference"),
                                 _add("用户现在很累", scope="ephemeral", category="state")]},
                     dialogue_id="d1")
    st.write({"writes": [_add("用户名字是 Ann", supersedes_id=first[0].id)]})
    st.add("A Reverie memory without a cell", layer="long_term", importance=0.7)
    st.add("another owner's memory", agent_id="a2")
    st.enqueue_job("reembed")


def test_counts_by_dimension():
    with memlab.open_store(":memory:", config=CFG) as st:
        _fill(st)
        s = st.status()
    assert s.memories == 6
    assert s.counts["scope"] == {"(none)": 2, "ephemeral": 1, "user": 3}
    assert s.counts["category"] == {"(none)": 2, "preference": 1, "profile": 2, "state": 1}
    # the explicit long_term add; salience 0.9 is above layers.long_term_threshold; the others
    # (0.5 default salience, §5 importance of the plain add) go short term
    assert s.counts["layer"] == {"long_term": 2, "short_term": 4}
    assert s.counts["deprecated"] == {"false": 5, "true": 1}
    assert s.counts["lifecycle_state"] == {"active": 6}
    assert s.counts["agent_id"] == {"a2": 1, "agent_0": 5}
    assert s.pending_embeddings == 0 and s.embedder.startswith("hashing")
    assert s.jobs == {"queued": 1}


def test_recall_hit_statistics_and_views():
    with memlab.open_store(":memory:", config=CFG) as st:
        fresh = st.status().recall
        assert fresh["recalls"] == 0 and math.isnan(fresh["hit_rate"])
        _fill(st)
        n = [len(st.recall(q, k=2)) for q in ("Alice", "tea", "用户")]
        st.recall("Alice", k=2, agent_id="nobody")     # returns nothing: no memories
        s = st.status()
        frame = s.to_frame()
        d = s.to_dict()
    assert n[0] >= 1 and n[1] >= 1
    assert s.recall["recalls"] == 4 and s.recall["hits"] == 3
    assert s.recall["hit_rate"] == pytest.approx(3 / 4)
    assert s.recall["mean_returned"] == pytest.approx(sum(n) / 4)
    row = frame[(frame.section == "by_scope") & (frame.key == "user")]
    assert row.value.tolist() == [3]
    assert list(frame.columns) == ["section", "key", "value"]
    assert json.loads(json.dumps(d))["counts"]["scope"]["user"] == 3
    assert d["recall"]["hits"] == 3


def test_pending_usage_and_store_level_call(tmp_path):
    path = tmp_path / "s.db"
    with memlab.open_store(path, config=CFG, load_embedder=False) as st:
        st.add("stored while the embedder is away")
        st.add("第二条记忆")
        s = store_status(st)
        assert s.pending_embeddings == 2 and s.embedder is None
    with memlab.open_store(path, config=CFG) as st:
        assert st.status().pending_embeddings == 2   # no vector for the hashing embedder yet
        st.embed_pending()
        ids = [r.id for r in st.list_memories(limit=10)[1]]
        st.feedback(ids, reply="stored while the embedder is away", confirmed=[ids[0]])
        s = st.status()
    assert s.pending_embeddings == 0
    assert set(s.usage) >= {"confirmed"} and s.usage["confirmed"]["events"] == 1


def test_memlab_status_cli(tmp_path):
    path = tmp_path / "s.db"
    with memlab.open_store(path, config=CFG) as st:
        _fill(st)
    runner = CliRunner()
    sets = ["--set", "embedding.backend=hashing"]
    res = runner.invoke(app, ["status", str(path), *sets])
    assert res.exit_code == 0, res.output
    assert "6 memories" in res.stdout and "by scope: (none) 2, ephemeral 1, user 3" in res.stdout
    res = runner.invoke(app, ["status", str(path), "--json", *sets])
    assert json.loads(res.stdout)["counts"]["deprecated"] == {"false": 5, "true": 1}
    res = runner.invoke(app, ["status", str(tmp_path / "missing.db"), *sets])
    assert res.exit_code == 2 and "no such store file" in res.output

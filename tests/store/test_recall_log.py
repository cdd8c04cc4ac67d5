"""The recall audit log (memlab.store.recall_log) and its migration (kind, resolved_at, owner
index): events logged before the migration are kept, unresolved and of kind ''."""

from __future__ import annotations

from memlab.store import LATEST, connect, migrate
from memlab.store.migrations import MIGRATIONS
from memlab.store.recall_log import FUZZY_SWAP, RecallEvents


def test_migration_keeps_old_events_and_adds_kind_and_resolved_at(tmp_path):
    conn = connect(tmp_path / "v3.sqlite", busy_timeout_ms=1000)
    version = next(v for v, name, _ in MIGRATIONS if name.startswith("recall events"))
    migrate(conn, migrations=MIGRATIONS[:version - 1])
    conn.execute("INSERT INTO memory_recall_events (agent_id, user_id, query, at, memory_ids_json, "
                 "meta_json) VALUES ('a', 'u', 'q', 5.0, '[\"m\"]', '{\"x\": 1}')")
    assert migrate(conn) == LATEST
    assert conn.execute("SELECT kind, resolved_at, meta_json FROM memory_recall_events"
                        ).fetchall() == [("", None, '{"x": 1}')]
    plan = " ".join(str(r) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM memory_recall_events WHERE agent_id = 'a' AND "
        "user_id = 'u' AND kind = 'fuzzy_swap' AND at >= 0"))
    assert "memory_recall_events_owner" in plan


def test_log_recent_resolve_and_counts(tmp_path):
    conn = connect(tmp_path / "s.sqlite", busy_timeout_ms=1000)
    migrate(conn)
    ev = RecallEvents(conn)
    first = ev.log(kind=FUZZY_SWAP, agent_id="a", user_id="u", query="q", at=10.0,
                   memory_ids=["m1", "m2"], metas=[{"memory_id": "m1"}, {"memory_id": "m2"}])
    later = ev.log(kind=FUZZY_SWAP, agent_id="a", user_id="u", query="q2", at=20.0,
                   memory_ids=["m1"], metas=[{"memory_id": "m1"}])
    ev.log(kind=FUZZY_SWAP, agent_id="a", user_id="v", query="q", at=30.0, memory_ids=["m9"],
           metas=[{"memory_id": "m9"}])
    assert [e.id for e in ev.recent(kind=FUZZY_SWAP, agent_id="a", user_id="u", since=0)] == \
        later + first[::-1]
    assert [e.id for e in ev.recent(kind=FUZZY_SWAP, agent_id="a", user_id="u", since=15)] == later
    assert ev.resolve(first[:1] + later, at=40.0, note={"corrected_by": "不是"}) == 2
    assert ev.resolve(later, at=50.0, note={}) == 0                    # already resolved
    (e,) = ev.get(later)
    assert (e.resolved_at, e.meta) == (40.0, {"memory_id": "m1", "corrected_by": "不是"})
    assert ev.resolved_memory_ids(kind=FUZZY_SWAP, agent_id="a", user_id="u") == {"m1"}
    assert ev.counts(kind=FUZZY_SWAP) == [("a", "u", 3, 2), ("a", "v", 1, 0)]

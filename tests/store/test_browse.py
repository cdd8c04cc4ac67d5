"""memlab.store.browse: the page reader of ``MemoryStore.list_memories`` (``GET /api/memory``)
refuses a limit or an offset outside SQLite's INTEGER range by name, before any SQL runs."""

from __future__ import annotations

import pytest

import memlab
from memlab.errors import InvalidInput
from memlab.store.browse import INT_MAX

from store_helpers import dump


@pytest.fixture
def st(hashing_cfg, tmp_path):
    with memlab.open_store(tmp_path / "s.db", config=hashing_cfg) as s:
        s.add_many([{"text": f"memory {i} 记忆 {i}", "timestamp": 1.7e9 + i} for i in range(3)])
        yield s


def test_a_page_at_the_bounds_is_read(st):
    assert [r.text for r in st.list_memories(limit=2, offset=1)[1]] == ["memory 1 记忆 1",
                                                                        "memory 0 记忆 0"]
    assert st.list_memories(limit=INT_MAX, offset=INT_MAX) == (3, [])
    assert INT_MAX == 2**63 - 1


@pytest.mark.parametrize("kw, field", [
    ({"limit": 10, "offset": 2**63}, "offset"),          # OverflowError in SQLite before
    ({"limit": 10, "offset": 10**20}, "offset"),
    ({"limit": 10, "offset": -1}, "offset"),
    ({"limit": 2**63}, "limit"),
    ({"limit": 0}, "limit"),
    ({"limit": True}, "limit"),
    ({"limit": 2.5}, "limit"),
    ({"limit": 10, "offset": "3"}, "offset"),
    ({"limit": 10, "offset": 10**5000}, "offset"),      # too long for repr(): still named
])
def test_a_limit_or_offset_out_of_range_is_refused_by_name(st, kw, field):
    before = dump(st._store.conn)
    with pytest.raises(InvalidInput) as err:
        st.list_memories(**kw)
    assert err.value.field == field
    assert "[" in err.value.rule and str(INT_MAX) in err.value.rule
    assert dump(st._store.conn) == before

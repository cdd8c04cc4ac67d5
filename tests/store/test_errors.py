"""Only memlab's errors come out of the store: locks, corruption, read-only files, foreign files.

Each error names the store's path and the cause, says what to do, and leaves the file unchanged.
"""

from __future__ import annotations

import hashlib

import pytest

from memlab.config import MemlabConfig
from memlab.errors import StoreError
from memlab.store import open_store
from store_helpers import add, dump, rec


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ----------------------------------------------------------------------------- locks (defect 10)

def test_lock_timeout_names_the_path_the_timeout_and_what_to_do(tmp_path):
    path = tmp_path / "s.sqlite"
    holder, hrepo = open_store(path)
    add(hrepo, [rec("a", "Alice likes green tea")])
    holder.execute("BEGIN IMMEDIATE")            # another writer holds the write lock
    cfg = MemlabConfig().replace(**{"store.busy_timeout_ms": 0})   # fail at once: no waiting
    conn, repo = open_store(path, config=cfg)
    before = dump(conn)
    with pytest.raises(StoreError) as err:
        add(repo, [rec("b", "爱丽丝喜欢喝乌龙茶")])
    msg = str(err.value)
    assert str(path) in msg
    assert "store.busy_timeout_ms" in msg and "0 ms" in msg
    assert "another" in msg and "retry" in msg
    holder.execute("ROLLBACK")
    assert dump(conn) == before and repo.count() == 1
    conn.close()
    holder.close()

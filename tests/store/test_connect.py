"""connect(): driver, pragmas, corruption check; transaction(); migrations."""

from __future__ import annotations

import os
import sqlite3

import pytest

from memlab.config import MemlabConfig
from memlab.errors import CorruptStore, StoreError
from memlab.store import (LATEST, Repository, connect, driver, migrate, open_store, schema_version,
                          transaction)
from store_helpers import add, dump, rec


def test_driver_can_load_extensions():
    mod = driver()
    assert hasattr(mod.Connection, "enable_load_extension")
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        assert mod.__name__.startswith("sqlean")


def test_file_store_pragmas(file_store):
    path, conn, _ = file_store
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert conn.execute("SELECT vec_version()").fetchone()[0].startswith("v")
    assert conn.isolation_level is None


@pytest.mark.parametrize("pages,checkpointed", [(1000, True), (100_000, False)])
def test_wal_autocheckpoint_pages_sets_when_the_wal_is_copied_into_the_file(
        tmp_path, pages, checkpointed):
    # one commit of 3,000 pages of 4 KiB: past 1,000 pages it is copied into the database file
    # at the commit (SQLite's default); under 100,000 it stays in the WAL, the file unchanged
    cfg = MemlabConfig().replace(**{"store.wal_autocheckpoint_pages": pages})
    path = tmp_path / "s.sqlite"
    conn, _ = open_store(path, config=cfg, quick_check=False)
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == pages
    before = path.stat().st_size
    with transaction(conn):
        conn.execute("CREATE TABLE big (b BLOB)")
        conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                     "WHERE i < 3000) INSERT INTO big SELECT zeroblob(4000) FROM n")
    grown = path.stat().st_size - before
    assert (grown > 3000 * 4000) is checkpointed, grown
    assert conn.execute("SELECT count(*) FROM big").fetchone()[0] == 3000
    conn.close()


def test_wal_autocheckpoint_pages_is_validated():
    with pytest.raises(Exception, match="wal_autocheckpoint_pages"):
        MemlabConfig().replace(**{"store.wal_autocheckpoint_pages": 0})


def _corrupt_cases(tmp_path):
    good = tmp_path / "good.sqlite"
    conn, repo = open_store(good, quick_check=False)
    add(repo, [rec(f"m{i}", f"some text {i} " * 20) for i in range(300)])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = good.read_bytes()
    assert len(data) > 8 * 4096
    return {
        "random": os.urandom(8192),
        "text": b"hello, I am not a database\n" * 50,
        "bad_magic": b"SQLite format 2\x00" + data[16:],
        "truncated": data[: len(data) // 3],
        "bad_page_size": data[:16] + (1000).to_bytes(2, "big") + data[18:],
    }


@pytest.mark.parametrize("case", ["random", "text", "bad_magic", "truncated", "bad_page_size"])
def test_corrupt_file_raises_and_is_left_unchanged(tmp_path, case):
    payload = _corrupt_cases(tmp_path)[case]
    path = tmp_path / f"{case}.sqlite"
    path.write_bytes(payload)
    with pytest.raises(CorruptStore) as err:
        open_store(path)
    assert str(path) in str(err.value)
    assert path.read_bytes() == payload
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(case)) == [path.name]


def test_quick_check_catches_a_damaged_page(tmp_path):
    path = tmp_path / "s.sqlite"
    conn, repo = open_store(path)
    add(repo, [rec(f"m{i}", f"text {i} " * 30) for i in range(400)])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    page = 4096
    # scribble over the body of every page after the first five (keeps the header valid)
    for start in range(5 * page, len(data), page):
        data[start + 8:start + 200] = b"\xff" * 192
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStore, match="quick_check|sqlite_master|malformed"):
        open_store(path, quick_check=True)
    assert path.read_bytes() == bytes(data)


def test_empty_file_is_a_new_store(tmp_path):
    path = tmp_path / "empty.sqlite"
    path.write_bytes(b"")
    conn, repo = open_store(path)
    assert repo.count() == 0 and schema_version(conn) == LATEST


def test_transaction_rolls_back_and_reraises(store):
    conn, repo = store
    with pytest.raises(ZeroDivisionError):
        with transaction(conn):
            add(repo, [rec("a")])
            1 / 0
    assert repo.count() == 0 and not conn.in_transaction


def test_nested_transaction_is_part_of_the_outer_one(store):
    conn, repo = store
    with pytest.raises(RuntimeError):
        with transaction(conn):
            add(repo, [rec("a")])       # its own transaction() becomes a savepoint
            add(repo, [rec("b")])
            raise RuntimeError("outer fails after both inner writes")
    assert repo.count() == 0
    with transaction(conn):
        add(repo, [rec("a")])
        with pytest.raises(ValueError):
            with transaction(conn):
                add(repo, [rec("b")])
                raise ValueError("inner only")
    assert repo.get(["a"])[0].id == "a" and repo.count() == 1


def test_migrations_are_idempotent(file_store):
    path, conn, repo = file_store
    add(repo, [rec("a")])
    before = dump(conn)
    assert migrate(conn) == LATEST
    assert migrate(conn) == LATEST
    conn.close()
    conn2, repo2 = open_store(path)
    assert dump(conn2) == before
    assert conn2.execute("SELECT version FROM schema_migrations").fetchall() == \
        [(v,) for v in range(1, LATEST + 1)]
    conn2.close()


def test_newer_schema_raises_store_error(tmp_path):
    path = tmp_path / "s.sqlite"
    conn, _ = open_store(path)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    with pytest.raises(StoreError, match=f"version {LATEST + 1} is newer"):
        open_store(path)
    conn = connect(path, busy_timeout_ms=100)
    with pytest.raises(StoreError, match="run memlab.store.migrate"):
        Repository(conn)


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    conn = connect(path, busy_timeout_ms=100)
    conn.execute("CREATE TABLE experiments (id INTEGER)")
    conn.close()
    with pytest.raises(StoreError, match="not a memlab store.*experiments"):
        open_store(path)


def test_migration_failure_leaves_version_and_schema(tmp_path):
    path = tmp_path / "s.sqlite"
    conn = connect(path, busy_timeout_ms=100)
    first = ("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT)",
             "CREATE TABLE a (x)")
    broken = ((1, "ok", first), (2, "bad", ("CREATE TABLE b (x)", "NOT SQL")))
    with pytest.raises(StoreError, match=r"migration 2 \(bad\) failed"):
        migrate(conn, migrations=broken)
    assert schema_version(conn) == 1
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert "a" in names and "b" not in names


def test_migration_3_admits_embedding_status_none_and_keeps_every_row(tmp_path):
    """A version-2 store (CHECK embedding_status IN ('pending', 'ready')) migrates to 3: the
    CHECK is loosened in place (schema text only), every row is kept, integrity is ok."""
    from memlab.store.migrations import MIGRATIONS

    path = tmp_path / "v2.sqlite"
    conn = connect(path, busy_timeout_ms=1000)
    migrate(conn, migrations=MIGRATIONS[:2])
    repo = Repository.__new__(Repository)      # Repository() refuses a schema it does not need
    repo.conn, repo.config = conn, MemlabConfig()
    add(repo, [rec("a"), rec("b")])
    rows = lambda: [t for t in dump(conn)[1:] if t[0] != "schema_migrations"]  # noqa: E731
    before = rows()
    refused = (driver().IntegrityError, StoreError)   # StoreError where driver errors are mapped
    with pytest.raises(refused, match="CHECK constraint failed"):
        conn.execute("UPDATE memory_records SET embedding_status = 'none' WHERE id = 'a'")
    assert migrate(conn, migrations=MIGRATIONS[:3]) == 3   # later ones add columns (10: keys)
    kept = dict(before)      # later migrations add tables (empty): the rows of these are kept
    assert [t for t in rows() if t[0] in kept] == before
    assert migrate(conn) == LATEST
    conn.execute("UPDATE memory_records SET embedding_status = 'none' WHERE id = 'a'")
    with pytest.raises(refused, match="CHECK constraint failed"):
        conn.execute("UPDATE memory_records SET embedding_status = 'bogus' WHERE id = 'b'")
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    conn, repo = open_store(path)
    assert repo.get(["a"])[0].embedding_status == "none"
    conn.close()


def test_migration_9_indexes_the_sessions_of_a_version_8_store(tmp_path):
    """A version-8 store with sessions migrates to 9: memory_records_session is made (turn order
    within an owner's session, for the ranking context of issue 21), every row kept, and the
    store answers session_layout from it."""
    from memlab.store.migrations import MIGRATIONS

    path = tmp_path / "v8.sqlite"
    conn = connect(path, busy_timeout_ms=1000)
    migrate(conn, migrations=MIGRATIONS[:8])
    repo = Repository.__new__(Repository)
    repo.conn, repo.config = conn, MemlabConfig()
    rows = add(repo, [rec("b", session_id="s", timestamp=2.0), rec("a", session_id="s",
                                                                  timestamp=1.0)])
    index = "SELECT name FROM sqlite_master WHERE name = 'memory_records_session'"
    assert conn.execute(index).fetchall() == []
    before = [t for t in dump(conn)[1:] if t[0] == "memory_records"]
    assert migrate(conn, migrations=MIGRATIONS[:9]) == 9   # 10 adds a column (keys_json)
    assert conn.execute(index).fetchall() == [("memory_records_session",)]
    assert [t for t in dump(conn)[1:] if t[0] == "memory_records"] == before
    assert migrate(conn) == LATEST
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    sess, pos, length = repo.session_layout(rows)
    assert sess.tolist() == [rows[1], rows[1]] and pos.tolist() == [1, 0]
    assert length.tolist() == [2, 2]
    conn.close()

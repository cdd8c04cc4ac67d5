#!/usr/bin/env python
"""Ingest throughput (issue 22, item 2): records/s into one store, today's code beside this one's.

    python benchmarks/ingest_throughput.py                          # 10k and 100k, the variants below
    python benchmarks/ingest_throughput.py --sizes 10000 --variants old:1000,new:1000
    python benchmarks/ingest_throughput.py --baseline-ref main~3    # "old" is that commit's code

Every variant writes the same seeded items (``recall_latency.py``'s bilingual corpus: texts through
the real term and entity indexes, importance and layer given, synthetic unit vectors given: the
embedding is excluded) through the public ``MemoryStore.add_many(items, vectors=...)`` into a fresh
file store (WAL, default config), in batches of B items (one all-or-nothing transaction each). A
variant is ``CODE:B[:trusted]``: CODE ``old`` runs the code of ``--baseline-ref`` (``git archive``
into a temporary folder, default the ``main`` branch), ``new`` this checkout's; ``trusted`` sets
``safety.refuse_hijack_writes: false`` (a bulk import of data one trusts: the per-item hijack screen
is skipped, the only write-path step it turns off). Each variant runs in its own process, one after
the other, sizes in turn, so the ratios come from one run on one machine at one load (recorded).

Reported per size: records/s over the whole fill (empty to N) and over its last tenth (the rate at
about N memories), wall seconds, peak RSS of the process, and a checksum of what was stored (records,
postings, term and owner statistics, entity links, vector rows): variants of one size must store the
same contents, the new code as the old (``same`` column). Not a test: timings depend on the load.
Prints a table and writes JSON (``--json``, default ``results/ingest_throughput.json``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent

#: what a checksum covers: the store's contents, in an order that does not depend on timing
CHECKED = {
    "records": "SELECT id, text, agent_id, user_id, retention_layer, cognitive_layer, timestamp, "
               "importance, emotions_json, terms_json, n_terms, keys_json, embedding_status, "
               "text_hash FROM memory_records ORDER BY id",
    "postings": "SELECT o.agent_id, t.term, r.id, t.dl FROM memory_terms t JOIN memory_owners o "
                "ON o.id = t.owner JOIN memory_records r ON r.rowid = t.rowid ORDER BY 1, 2, 3",
    "term_stats": "SELECT o.agent_id, s.term, s.df FROM term_stats s JOIN memory_owners o "
                  "ON o.id = s.owner ORDER BY 1, 2",
    "owners": "SELECT agent_id, user_id, n_docs, total_terms FROM memory_owners ORDER BY 1, 2",
    "entities": "SELECT e.name, r.id FROM memory_entity_links l JOIN memory_entities e "
                "ON e.id = l.entity_id JOIN memory_records r ON r.rowid = l.rowid ORDER BY 1, 2",
    "vectors": "SELECT r.id, e.text_hash FROM memory_embeddings e JOIN memory_records r "
               "ON r.rowid = e.rowid ORDER BY 1",
}


def checksum(conn) -> str:
    """sha256 over every CHECKED query's rows (floats rounded to 9 digits)."""
    h = hashlib.sha256()
    for name, sql in CHECKED.items():
        h.update(name.encode())
        for row in conn.execute(sql):
            h.update(repr(tuple(round(v, 9) if isinstance(v, float) else v
                                for v in row)).encode())
    return h.hexdigest()[:16]


def worker(n: int, batch: int, trusted: bool, tmp: str) -> dict:
    """One variant in this process: fill a fresh store with n items, return the figures."""
    sys.path.insert(0, str(HERE))
    import recall_latency as rl   # the corpus, its vectors and the lookup embedder

    from memlab.api import open_store
    from memlab.clock import FixedClock
    from memlab.config import MemlabConfig

    cfg = MemlabConfig()
    if trusted:
        cfg = cfg.replace(**{"safety.refuse_hijack_writes": False})
    vm = rl.VectorModel()
    corpus = rl.Corpus(vectors=vm, zh_fraction=0.5, span_days=730.0, permanent=20, batch=1000)
    corpus.grow(n)
    items = [dict(it, id=f"m{i:07d}") for i, it in enumerate(corpus.items(0, n))]
    mat = corpus.matrix(n)
    emb = rl.BenchEmbedder(dim=vm.dim, model=None)
    path = os.path.join(tmp, "store.sqlite")
    with open_store(":memory:", config=cfg, embedder=emb, clock=FixedClock(rl.NOW)) as warm:
        # first-use costs (the tokenisers' dictionaries, the safety rules) are not ingest
        warm.add_many([dict(it, id=f"w{i}") for i, it in enumerate(items[:20])],
                      vectors=mat[:20])
    store = open_store(path, config=cfg, embedder=emb, clock=FixedClock(rl.NOW))
    starts = list(range(0, n, batch))
    # the last tenth: from the first batch starting there (the last batch when none does)
    tail_lo = next((lo for lo in starts if lo >= n - n // 10), starts[-1])
    t0 = time.perf_counter()
    for lo in starts:
        if lo == tail_lo:
            t_tail, tail_n = time.perf_counter(), n - lo
        store.add_many(items[lo:lo + batch], vectors=mat[lo:lo + batch])
    end = time.perf_counter()
    count = len(store)
    store.close()
    from memlab.store.connect import connect
    conn = connect(path, busy_timeout_ms=5000)
    digest = checksum(conn)
    conn.close()
    return {"records": count, "seconds": round(end - t0, 2),
            "records_per_s": round(n / (end - t0), 1),
            "last_tenth_records_per_s": round(tail_n / (end - t_tail), 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "checksum": digest}


def baseline_tree(ref: str, into: str) -> str:
    """``ref``'s memlab package exported into ``into`` (git archive); returns the folder."""
    out = os.path.join(into, "baseline")
    os.makedirs(out)
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "memlab"], check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", out], input=arch, check=True)
    return out


def run_variant(code_dir: str, n: int, batch: int, trusted: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="ingest-") as tmp:
        env = dict(os.environ, PYTHONPATH=code_dir)
        cmd = [sys.executable, __file__, "--worker", str(n), str(batch), str(int(trusted)), tmp]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"variant failed ({code_dir}, n={n}, batch={batch}):\n"
                             f"{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def parse_variants(text: str) -> list[tuple[str, int, bool]]:
    out = []
    for v in text.split(","):
        parts = v.split(":")
        if parts[0] not in ("old", "new") or len(parts) not in (2, 3) or \
                (len(parts) == 3 and parts[2] != "trusted"):
            raise SystemExit(f"--variants: {v!r} is not CODE:BATCH[:trusted], CODE old or new")
        out.append((parts[0], int(parts[1]), len(parts) == 3))
    return out


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        n, batch, trusted, tmp = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
        print(json.dumps(worker(n, batch, trusted, tmp)))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="memories per fill (10000,100000)")
    ap.add_argument("--variants", default="old:1000,new:1000,new:10000,new:10000:trusted",
                    help="CODE:BATCH[:trusted], comma-separated")
    ap.add_argument("--baseline-ref", default="main", help="git ref of the old code (main)")
    ap.add_argument("--json", type=Path, default=ROOT / "results" / "ingest_throughput.json")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    variants = parse_variants(a.variants)
    wall = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ingest-base-") as base:
        old_dir = baseline_tree(a.baseline_ref, base) if any(c == "old" for c, _, _ in variants) \
            else None
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", a.baseline_ref],
                                capture_output=True, text=True).stdout.strip()
        for n in sizes:
            for code, batch, trusted in variants:
                if batch > n or n % batch:
                    continue
                load = os.getloadavg()[0]
                got = run_variant(old_dir if code == "old" else str(ROOT), n, batch, trusted)
                row = {"memories": n, "code": code, "batch": batch, "trusted": trusted, **got,
                       "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
                rows.append(row)
                print(f"[{n}] {code} batch {batch}{' trusted' if trusted else ''}: "
                      f"{got['records_per_s']:,.0f} records/s ({got['seconds']} s), last tenth "
                      f"{got['last_tenth_records_per_s']:,.0f}/s; load {row['load_after']}",
                      flush=True)
    for n in sizes:
        ref = next((r for r in rows if r["memories"] == n and r["code"] == "old"), None)
        digests = {r["checksum"] for r in rows if r["memories"] == n}
        for r in rows:
            if r["memories"] == n:
                r["same_contents"] = len(digests) == 1
                r["x_old"] = None if ref is None else round(
                    r["records_per_s"] / ref["records_per_s"], 2)
    head = (f"{'memories':>9} {'code':>4} {'batch':>6} {'screen':>6} {'records/s':>10} "
            f"{'at N (last 10%)':>15} {'x old':>6} {'s':>7} {'RSS MB':>7} {'same':>5} "
            f"{'load':>5}")
    print("\n" + head)
    for r in rows:
        print(f"{r['memories']:>9} {r['code']:>4} {r['batch']:>6} "
              f"{'off' if r['trusted'] else 'on':>6} {r['records_per_s']:>10,.0f} "
              f"{r['last_tenth_records_per_s']:>15,.0f} {r['x_old'] or '-':>6} "
              f"{r['seconds']:>7} {r['peak_rss_mb']:>7} {str(r['same_contents']):>5} "
              f"{r['load_after']:>5}")
    out = {"rows": rows, "baseline_ref": a.baseline_ref, "baseline_commit": commit,
           "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                       "processor": platform.processor(), "python": platform.python_version()},
           "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "wall_s": round(time.perf_counter() - wall, 1)}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"wall {out['wall_s']} s; wrote {a.json}")


if __name__ == "__main__":
    main()

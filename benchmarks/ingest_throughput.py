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

``--breakdown`` (this checkout's variants only): where the last tenth's time goes, in µs per
record: each SQL statement (by table; ``COMMIT`` holds the WAL checkpoints), the hijack screen,
the rest of the items' validation, the text features (terms, entities), the store's second check
of each record, building the rows, the dense index sync, and what is left (``add_many``'s own
time: Python glue). Timed by
wrapping those functions and the cursor's ``execute``/``executemany`` in the worker process (a
wrapper costs well under a microsecond per call); the row building runs inside the records
``executemany`` and is taken out of it (each part's own time: wrapped calls inside it are
counted where they belong).
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


class Breakdown:
    """Wall time of the write path's parts (see the module docstring), while ``on``."""

    #: (label, module, class or None, function) wrapped in place
    WRAPPED = (("hijack screen", "memlab.write.records", None, "screen_write"),
               ("validate items (rest)", "memlab.write.pipeline", "WritePipeline", "prepare"),
               ("terms", "memlab.write.pipeline", None, "memory_terms"),
               ("entities", "memlab.write.pipeline", None, "extract_entities"),
               ("store: check records", "memlab.store.repository", None, "validate_record"),
               ("store: build rows", "memlab.store.repository", None, "to_row"),
               ("dense index sync", "memlab.store.facade", "Store", "_applied"),
               ("add_many (all)", "memlab.api", "MemoryStore", "add_many"))

    def __init__(self) -> None:
        import importlib
        import re

        self.on = False
        self.acc: dict[str, float] = {}
        self.inner: list[float] = []
        connect = importlib.import_module("memlab.store.connect")
        cursor = connect._classes(connect.driver())[1]
        table = re.compile(r"(?:INTO|UPDATE|FROM)\s+(\w+)", re.I)

        def sql_label(_cursor, sql: str, *_args) -> str:
            words = sql.split()
            if words[0].upper() in ("COMMIT", "BEGIN", "SAVEPOINT", "RELEASE"):
                return "sql: " + words[0].upper()
            m = table.search(sql)
            return f"sql: {words[0].upper()} {m.group(1) if m else '?'}"

        for name in ("execute", "executemany"):
            self._wrap(cursor, name, sql_label)
        for label, module, cls, fn in self.WRAPPED:
            owner = importlib.import_module(module)
            self._wrap(owner if cls is None else getattr(owner, cls), fn,
                       lambda *_a, _l=label, **_k: _l)

    def _wrap(self, owner, name: str, label_of) -> None:
        orig = getattr(owner, name)
        acc, inner = self.acc, self.inner

        def timed(*args, **kw):
            if not self.on:
                return orig(*args, **kw)
            inner.append(0.0)            # the time of the wrapped calls made inside this one
            t = time.perf_counter()
            try:
                return orig(*args, **kw)
            finally:
                spent = time.perf_counter() - t
                key = label_of(*args)
                acc[key] = acc.get(key, 0.0) + spent - inner.pop()   # its own time only
                if inner:
                    inner[-1] += spent
        setattr(owner, name, timed)

    def per_record(self, n: int) -> dict[str, float]:
        """µs per record of each part (its own time: the wrapped calls inside it taken out);
        ``other (Python glue)``: add_many's own time."""
        out = {k: round(v / n * 1e6, 1) for k, v in sorted(self.acc.items(), key=lambda kv: -kv[1])
               if k != "add_many (all)"}
        out["other (Python glue)"] = round(self.acc.get("add_many (all)", 0.0) / n * 1e6, 1)
        out["total"] = round(sum(self.acc.values()) / n * 1e6, 1)
        return out


def worker(n: int, batch: int, trusted: bool, tmp: str, breakdown: bool = False) -> dict:
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
    parts = Breakdown() if breakdown else None
    starts = list(range(0, n, batch))
    # the last tenth: from the first batch starting there (the last batch when none does)
    tail_lo = next((lo for lo in starts if lo >= n - n // 10), starts[-1])
    t0 = time.perf_counter()
    for lo in starts:
        if lo == tail_lo:
            t_tail, tail_n = time.perf_counter(), n - lo
            if parts is not None:
                parts.on = True
        store.add_many(items[lo:lo + batch], vectors=mat[lo:lo + batch])
    end = time.perf_counter()
    if parts is not None:
        parts.on = False
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
            "checksum": digest,
            **({"breakdown_us": parts.per_record(tail_n)} if parts is not None else {})}


def baseline_tree(ref: str, into: str) -> str:
    """``ref``'s memlab package exported into ``into`` (git archive); returns the folder."""
    out = os.path.join(into, "baseline")
    os.makedirs(out)
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "memlab"], check=True,
                          capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", out], input=arch, check=True)
    return out


def run_variant(code_dir: str, n: int, batch: int, trusted: bool, breakdown: bool = False
                ) -> dict:
    with tempfile.TemporaryDirectory(prefix="ingest-") as tmp:
        env = dict(os.environ, PYTHONPATH=code_dir)
        cmd = [sys.executable, __file__, "--worker", str(n), str(batch), str(int(trusted)), tmp,
               str(int(breakdown))]
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
        print(json.dumps(worker(n, batch, trusted, tmp, breakdown=sys.argv[6] == "1")))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000", help="memories per fill (10000,100000)")
    ap.add_argument("--variants", default="old:1000,new:1000,new:10000,new:10000:trusted",
                    help="CODE:BATCH[:trusted], comma-separated")
    ap.add_argument("--baseline-ref", default="main", help="git ref of the old code (main)")
    ap.add_argument("--json", type=Path, default=ROOT / "results" / "ingest_throughput.json")
    ap.add_argument("--breakdown", action="store_true",
                    help="time the write path's parts over the last tenth (this checkout only)")
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
                got = run_variant(old_dir if code == "old" else str(ROOT), n, batch, trusted,
                                  breakdown=a.breakdown and code == "new")
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
    for r in rows:
        if "breakdown_us" in r:
            print(f"\n{r['memories']:,} memories, new, batch {r['batch']}, screen "
                  f"{'off' if r['trusted'] else 'on'}: µs per record over the last tenth")
            for k, v in r["breakdown_us"].items():
                print(f"  {v:8.1f}  {k}")
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

#!/usr/bin/env python
"""Load on the HTTP API (``memlab serve``, familiars §5.11): concurrent recalls and writes against a
real server process on 127.0.0.1; latency percentiles per endpoint; every write checked in the store.

Run from the repository root::

    python benchmarks/http_load.py                              # 200 writes + 200 recalls at once
    python benchmarks/http_load.py --writes 500 --recalls 500 --seed 2000 --embedder hashing
    python benchmarks/http_load.py --json results/http_load.json

What it does: starts ``memlab serve`` on a free port of 127.0.0.1 over a new store file (a bearer
token set), seeds it with ``--seed`` memories through ``POST /api/memory`` (sequentially, not
timed), then sends ``--sequential`` writes and recalls one at a time (the latency without a queue), then
``--writes`` POST /api/memory (one WriterOutput write each, zh and en contents)
and ``--recalls`` GET /api/recall requests all at once (interleaved, one httpx AsyncClient with a
connection per request), timing each request from send to full response. Then it reads the store
file directly (sqlite3) and checks that every write it was answered 200 for is there. Prints a
table (count, errors, p50, p95, p99, max per endpoint; wall time, requests/s; the machine's load
average before and after and its CPU count) and writes it as JSON. Exits 1 when a request failed
or a write is missing. Latency under load is queueing included: the server runs every store call
on one store thread (memlab.serve.app), so it grows with the number of requests in flight; the
"alone" rows are the service time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "bench-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write(i: int) -> dict:
    text = (f"用户第{i}次提到自己喜欢在周末去爬山，最近去了黄山" if i % 2
            else f"Load memory {i}: the user mentioned a trip to Lisbon in spring, number {i}")
    return {"agent_id": "bench", "writes": [{"op": "add", "scope": "user", "category": "event",
                                             "entry": {"content": text}}]}


def _query(i: int) -> str:
    return ("用户周末喜欢做什么" if i % 2 else f"trip to Lisbon number {i}")


def start_server(store: Path, port: int, embedder: str, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "memlab.cli", "serve", str(store),
                                 "--port", str(port), "--token", TOKEN,
                                 "--set", f"embedding.backend={embedder}"],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"memlab serve exited {proc.returncode}: {log.read_text()}")
        try:
            if httpx.get(url + "/api/memory_status", headers=AUTH, timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.terminate()
            raise SystemExit("memlab serve not ready within 120 s")
        time.sleep(0.1)


async def fire(url: str, writes: int, recalls: int, timeout: float) -> list[dict]:
    limits = httpx.Limits(max_connections=writes + recalls + 10,
                          max_keepalive_connections=writes + recalls + 10)
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=timeout,
                                 limits=limits) as c:
        async def one(kind: str, i: int) -> dict:
            t0 = time.perf_counter()
            try:
                if kind == "write":
                    r = await c.post("/api/memory", json=_write(i))
                else:
                    r = await c.get("/api/recall", params={"q": _query(i), "k": 5,
                                                           "agent_id": "bench"})
                status, body = r.status_code, (r.json() if r.status_code == 200 else r.text)
            except httpx.HTTPError as exc:
                status, body = None, repr(exc)
            return {"kind": kind, "i": i, "status": status, "seconds": time.perf_counter() - t0,
                    "ids": body.get("ids", []) if isinstance(body, dict) else [],
                    "error": None if status == 200 else str(body)[:200]}

        jobs = []
        for i in range(max(writes, recalls)):
            if i < writes:
                jobs.append(one("write", i))
            if i < recalls:
                jobs.append(one("recall", i))
        return await asyncio.gather(*jobs)


def summarise(results: list[dict]) -> list[dict]:
    rows = []
    for kind in ("write", "recall", "all"):
        rs = [r for r in results if kind == "all" or r["kind"] == kind]
        ms = np.array([r["seconds"] * 1000 for r in rs])
        rows.append({"endpoint": {"write": "POST /api/memory", "recall": "GET /api/recall",
                                  "all": "all"}[kind],
                     "requests": len(rs), "errors": sum(r["status"] != 200 for r in rs),
                     "p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95)),
                     "p99_ms": float(np.percentile(ms, 99)), "max_ms": float(ms.max())})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--recalls", type=int, default=200)
    ap.add_argument("--seed", type=int, default=500, help="memories written before the load")
    ap.add_argument("--embedder", default="hashing", help="embedding.backend of the server")
    ap.add_argument("--sequential", type=int, default=20,
                    help="writes and recalls sent one at a time first (latency without a queue)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request at most")
    ap.add_argument("--json", type=Path, default=ROOT / "results" / "http_load.json")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="memlab-http-load-"))
    store, port = tmp / "load.db", _free_port()
    load_before = os.getloadavg()
    proc = start_server(store, port, args.embedder, tmp / "server.log")
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as c:
            for i in range(args.seed):
                c.post("/api/memory", json=_write(100_000 + i)).raise_for_status()
        alone = []
        for i in range(args.sequential):   # one request at a time: the service time
            alone += asyncio.run(fire(url, 1, 1, args.timeout))
        t0 = time.perf_counter()
        results = asyncio.run(fire(url, args.writes, args.recalls, args.timeout))
        wall = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    load_after = os.getloadavg()
    conn = sqlite3.connect(store)
    stored = {r[0] for r in conn.execute("SELECT id FROM memory_records")}
    conn.close()
    answered = [i for r in results + alone if r["kind"] == "write" and r["status"] == 200
                for i in r["ids"]]
    missing = sorted(set(answered) - stored)
    rows = summarise(results)
    seq = summarise(alone) if alone else []
    for r in seq:
        r["endpoint"] += " (alone)"
    print(f"{'endpoint':<26} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'p99 ms':>8} {'max ms':>8}")
    for r in seq + rows:
        print(f"{r['endpoint']:<26} {r['requests']:>8} {r['errors']:>6} {r['p50_ms']:>8.1f} "
              f"{r['p95_ms']:>8.1f} {r['p99_ms']:>8.1f} {r['max_ms']:>8.1f}")
    n = len(results)
    print(f"{n} requests at once in {wall:.2f} s ({n / wall:.1f} req/s); store held "
          f"{args.seed} memories before; writes answered 200: {len(answered)}, missing from the "
          f"store file: {len(missing)}")
    print(f"machine: {os.cpu_count()} CPUs, load average before {load_before[0]:.2f}, after "
          f"{load_after[0]:.2f} (1 min)")
    report = {"rows": rows, "sequential": seq, "wall_s": wall, "requests_per_s": n / wall, "seed": args.seed,
              "embedder": args.embedder, "writes_answered": len(answered),
              "writes_missing": missing, "cpus": os.cpu_count(),
              "loadavg_before": load_before, "loadavg_after": load_after,
              "errors": [r["error"] for r in results if r["error"]][:10]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {args.json}")
    return 1 if missing or any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

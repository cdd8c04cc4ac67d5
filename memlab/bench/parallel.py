"""A replay's conversations in worker processes (``--n-jobs``) or on a Dask cluster
(``--scheduler``): the same raw signals as :func:`memlab.bench.replay.replay`, sooner (issue 22,
items 5 and 6).

The conversation is the unit of work: each is written into its own fresh store and asked its own
questions, so conversations share nothing but the config, the embedder's vectors and the
relevance floor's background sample. The calling process embeds everything first, through the
embedding cache (:func:`memlab.bench.replay.plan_replay`); a worker receives one
:class:`~memlab.bench.replay.Conversation` with its own vectors and returns its Replayed
(:func:`memlab.bench.replay.replay_conversation`: rows numbered from 1, qids from 0); the calling
process shifts and concatenates them in the dataset's order (:func:`memlab.bench.replay.merge`),
exactly as the serial replay does, and the result goes to the feature cache like any replay.

A worker's store embeds nothing: its embedder is :class:`PlannedVectors`, the vectors the calling
process made, looked up by text, so a worker never loads a model and its vectors are bit for bit
the caller's.

Each finished conversation is written at once beside the cache entry
(:func:`memlab.bench.featcache.partial_dir`, one sha256-checked folder per conversation, as the
entry itself). A worker that dies (killed, out of memory) stops the replay with
:class:`~memlab.errors.ReplayWorkerLost`; every finished conversation is on disk and a rerun
replays only the others. The folder goes when the entry is written.

Engines: ``concurrent.futures.ProcessPoolExecutor`` (spawn) for ``n_jobs`` processes on this
machine; Dask distributed (the optional extra ``distributed``) for a cluster, through the
client's ``concurrent.futures`` executor, so both run the same loop.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import resource
import shutil
import sys
import time
from concurrent.futures import Executor, Future, as_completed
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from tqdm.auto import tqdm

from memlab.bench.datasets.canonical import Dataset
from memlab.bench.featcache import Unusable, load, save
from memlab.bench.replay import Conversation, Plan, Replayed, merge, plan_replay, \
    replay_conversation
from memlab.config import MemlabConfig
from memlab.errors import EmbeddingUnavailable, InvalidInput, ReplayError, ReplayWorkerLost
from memlab.recall.background import adopt

log = logging.getLogger("memlab")

__all__ = ["PlannedVectors", "replay_parallel", "run_conversation", "peak_rss_mb"]

EXTRA = "distributed"


class PlannedVectors:
    """A worker's embedder: the vectors the calling process embedded for one conversation, by
    text (documents: the rendered items; queries: the questions and, in writer mode, the items'
    own texts). A text it was not given raises EmbeddingUnavailable naming it: never a vector
    made here."""

    def __init__(self, name: str, version: str, dim: int, conv: Conversation) -> None:
        self.name, self.version, self.dim = name, version, dim
        self._docs: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}
        if conv.doc_vecs is not None:
            self._docs.update(zip(conv.rendered, conv.doc_vecs))
        if conv.q_vecs is not None:
            self._queries.update(zip((q.text for q in conv.questions), conv.q_vecs))
        if conv.m_vecs is not None:
            self._queries.update(zip((it.text for it in conv.items), conv.m_vecs))

    def _look(self, table: dict[str, np.ndarray], texts: Sequence[str], what: str) -> np.ndarray:
        missing = [t for t in texts if t not in table]
        if missing:
            raise EmbeddingUnavailable(
                f"replay worker: no {what} vector was planned for {missing[0][:80]!r} "
                f"({len(missing)} text(s)); a worker embeds nothing itself")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([table[t] for t in texts]).astype(np.float32, copy=False)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._look(self._docs, texts, "document")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._look(self._queries, texts, "query")


def run_conversation(conv: Conversation, cfg: MemlabConfig, background: Any, dataset: str,
                     embedder: tuple[str, str, int] | None) -> Replayed:
    """A worker's task: one conversation's Replayed (``embedder``: (name, version, dim) of the
    caller's embedder, or None for lexical routes only)."""
    emb = None if embedder is None else PlannedVectors(*embedder, conv)
    if background is not None:   # the stores' own sample (writer mode's floor): the caller's
        adopt(cfg.recall, background)
    return replay_conversation(conv, cfg=cfg, embedder=emb, background=background,
                               dataset=dataset)


def peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident memory in MB of this process (``RUSAGE_SELF``) or of the largest of its
    finished child processes (``RUSAGE_CHILDREN``: the ``--n-jobs`` workers once shut down)."""
    rss = resource.getrusage(who).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


# -- partial results ------------------------------------------------------------------------------
def _part_key(key: dict[str, Any], conv: Conversation) -> dict[str, Any]:
    return {**key, "conversation": conv.conversation_id, "conversation_index": conv.index}


def _part_dir(folder: Path, conv: Conversation) -> Path:
    return folder / f"{conv.index:06d}"


def load_parts(folder: Path | None, key: dict[str, Any] | None,
               plan: Plan) -> dict[int, Replayed]:
    """The conversations of ``plan`` a previous run finished and kept in ``folder``; one that is
    unusable (corrupt, another key) is logged, removed and replayed."""
    done: dict[int, Replayed] = {}
    if folder is None or key is None or not folder.is_dir():
        return done
    for conv in plan.conversations:
        d = _part_dir(folder, conv)
        if not d.is_dir():
            continue
        try:
            done[conv.index] = load(d, _part_key(key, conv))
        except Unusable as exc:
            log.warning("memlab: kept conversation %s not used, replaying it: %s", d, exc)
            shutil.rmtree(d, ignore_errors=True)
    return done


# -- engines --------------------------------------------------------------------------------------
@contextmanager
def _executor(n_jobs: int, scheduler: Any) -> Iterator[tuple[Executor, tuple[type, ...]]]:
    """(an executor, the exceptions that mean a worker was lost)."""
    if scheduler is None:
        ex = ProcessPoolExecutor(max_workers=n_jobs, mp_context=mp.get_context("spawn"))
        try:
            yield ex, (BrokenProcessPool,)
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
        return
    try:
        from distributed import Client, KilledWorker
    except ImportError as exc:
        raise ReplayError(f"--scheduler needs the optional extra {EXTRA!r} (pip install "
                          f"'memlab[{EXTRA}]'): {exc}") from exc
    own = not isinstance(scheduler, Client)
    try:
        client = Client(scheduler, timeout="30s") if own else scheduler
    except (OSError, TimeoutError) as exc:
        raise ReplayError(f"Dask scheduler {scheduler!r} cannot be reached: {exc}") from exc
    try:
        ex = client.get_executor(pure=False)
        try:
            yield ex, (KilledWorker,)
        finally:
            ex.shutdown(wait=True)
    finally:
        if own:
            client.close()


def replay_parallel(ds: Dataset, *, cfg: MemlabConfig, embedder, cache, n_jobs: int = 2,
                    scheduler: Any = None, folder: Path | None = None,
                    key: dict[str, Any] | None = None, progress: bool = True,
                    task: Callable[..., Replayed] = run_conversation) -> Replayed:
    """:func:`memlab.bench.replay.replay` with the conversations in ``n_jobs`` worker processes
    (spawn), or on the Dask cluster ``scheduler`` (an address such as ``tcp://host:8786``, or a
    ``distributed.Client``; ``n_jobs`` unused). ``folder``/``key``: where finished
    conversations are kept, and the entry's key (:func:`memlab.bench.featcache.cached_replay`
    gives both; None: nothing kept). ``task``: the worker's function (tests wrap it).
    Timings add ``replay_wall`` (planning, the conversations and the merge); counts add
    ``replay: conversations kept`` (finished by an earlier run, read from ``folder``)."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InvalidInput("n_jobs", "must be an integer >= 1", n_jobs)
    t0 = time.perf_counter()
    workers = max(1, min(n_jobs, len(ds.conversations())))
    with _executor(workers, scheduler) as (ex, lost):
        if scheduler is None:   # the workers start (and import memlab) while this process plans
            for _ in range(workers):
                ex.submit(_ready)
        plan = plan_replay(ds, cfg=cfg, embedder=embedder, cache=cache, progress=progress)
        rep = _run(plan, ex, lost, cfg=cfg, embedder=embedder, folder=folder, key=key,
                   progress=progress, task=task)
    rep.timings["replay_wall"] = time.perf_counter() - t0
    return rep


def _ready() -> bool:
    """A worker's first task: nothing, once this module (memlab's replay) is imported."""
    return True


def _run(plan: Plan, ex: Executor, lost: tuple[type, ...], *, cfg: MemlabConfig, embedder,
         folder: Path | None, key: dict[str, Any] | None, progress: bool,
         task: Callable[..., Replayed]) -> Replayed:
    """The plan's conversations not kept in ``folder`` run on ``ex``; the merged Replayed."""
    done = load_parts(folder, key, plan)
    kept = len(done)
    todo = [c for c in plan.conversations if c.index not in done]
    emb = None if embedder is None else (getattr(embedder, "name", type(embedder).__name__),
                                         embedder.version, int(embedder.dim))
    bar = tqdm(total=len(plan.conversations), initial=kept, desc=f"replay {plan.dataset}",
               unit="conv", disable=not progress)
    try:
        futures: dict[Future, Conversation] = {
            ex.submit(task, c, cfg, plan.background, plan.dataset, emb): c for c in todo}
        try:
            for fut in as_completed(futures):
                _finish(fut, futures[fut], done, folder, key)
                bar.update(1)
        except BaseException as exc:
            for fut, c in futures.items():   # every conversation that did finish
                if fut.done() and not fut.cancelled() and fut.exception() is None:
                    _finish(fut, c, done, folder, key)
            if not isinstance(exc, lost):
                raise
            missing = [c.conversation_id for c in plan.conversations if c.index not in done]
            raise ReplayWorkerLost(plan.dataset, kept=len(done), missing=missing,
                                   folder=str(folder) if folder is not None else None,
                                   cause=f"{type(exc).__name__}: {exc}") from exc
    finally:
        bar.close()
    rep = merge(plan, [done[c.index] for c in plan.conversations])
    rep.counts["replay: conversations kept"] = kept
    return rep


def _finish(fut: Future, conv: Conversation, done: dict[int, Replayed], folder: Path | None,
            key: dict[str, Any] | None) -> None:
    """A finished conversation: kept on disk (when there is a folder) and in ``done``."""
    if conv.index in done:
        return
    part = fut.result()
    if folder is not None and key is not None:
        folder.mkdir(parents=True, exist_ok=True)
        save(part, _part_dir(folder, conv), _part_key(key, conv))
    done[conv.index] = part

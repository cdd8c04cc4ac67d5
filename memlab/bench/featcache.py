"""The feature cache: a dataset's replayed raw signals on disk, so a second bench or sweep does no
replay (issue 8, item 2).

A replay (:func:`memlab.bench.replay.replay`) depends on the dataset's content, the embedder, the
candidates- and ingest-stage part of the config (:func:`features_key`) and memlab's own code
(:func:`code_digest`). Their digest names a folder under ``<bench.cache_dir>/features/``::

    <dataset>-<digest>/
        manifest.json      the key in full, the sha256 of every file, counts, when and how long
        columns/<name>.npy one array per column of the raw-signal table (memory-mapped back)
        questions.json     the questions (qid order): ids, conversation, category, evidence, text
        rows.json          per global row: item id, session id, text, memory id, term set

A folder is written whole or not at all (written beside, then renamed into place). Reading checks
the key and every file's sha256: an entry that is stale (another key: it cannot happen by name, but
a hand-copied folder can) or corrupt (a file changed, missing or unreadable) is never used; it is
logged, counted, removed and replayed again.

The config's part depends on the write mode (issue 18): a field's stage is the one it has in the
config's ``bench.write_mode`` (``memlab.config``: ``stage``, or ``writer_stage`` in writer mode).
A writer replay stores what the write pipeline decides, and its §5 association step reads the
relevance floor (``recall.floor_mode``, ``relevance_z``, ``relevance_floor``, ``lexical_floor``:
score fields, ingest fields of a writer replay), so those four are in a writer replay's key and not
in a raw replay's: a sweep over them rescores one cached raw table, and replays once per value in
writer mode. The code part is the sha256 of the files a replay can execute, found by following the
import graph from the replay (:mod:`memlab.bench.replaycode`), and of memlab's data files.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from memlab.bench.datasets.canonical import Dataset
from memlab.bench.replay import Replayed
from memlab.bench.replaycode import ROOT, replay_files
from memlab.config import STAGE_COLUMN, MemlabConfig, describe
from memlab.home import under_home
from memlab.recall.features import COLUMNS, Features
from memlab.version import __version__

log = logging.getLogger("memlab")

FORMAT = 1            # bump when the folder layout changes
_FEATURE_STAGES = ("candidates", "ingest")
_NOT_FEATURES = ("embedding.batch_size", "embedding.threads")   # how, not what, is embedded


def features_key(cfg: MemlabConfig) -> str:
    """What the raw signals depend on in the config: every field whose stage in the config's write
    mode (``describe()``'s ``stage``, or ``writer_stage`` when ``bench.write_mode`` is writer) is
    candidates or ingest, and the embedder's (not its batch size or thread count). Configs with
    one key share one replay."""
    flat = cfg.to_flat()
    column = STAGE_COLUMN[cfg.bench.write_mode]
    keep = {r["key"]: flat[r["key"]] for r in describe()
            if (r[column] in _FEATURE_STAGES or r["key"].startswith("embedding."))
            and r["key"] not in _NOT_FEATURES}
    return json.dumps(keep, sort_keys=True, ensure_ascii=False, default=str)


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 of the memlab source and data files a replay can execute
    (:func:`memlab.bench.replaycode.replay_files`: the import graph from the replay, both write
    modes): a change of the code that computes raw signals must not reuse signals it computed
    before (``__version__`` alone does not move between commits)."""
    h = hashlib.sha256(__version__.encode())
    for rel in replay_files():
        h.update(rel.encode())
        h.update((ROOT / rel).read_bytes())
    return h.hexdigest()


def cache_key(ds: Dataset, cfg: MemlabConfig, embedder_version: str) -> dict[str, Any]:
    """What an entry depends on. ``embedder_version``: the embedder's version and this machine's
    numerics fingerprint (:func:`memlab.embed.numerics.numerics_key`), so that raw signals
    replayed on another machine (whose vectors differ by ~1e-3) are never read here."""
    return {"format": FORMAT, "dataset": ds.card.name, "dataset_version": ds.card.version,
            "dataset_hash": ds.content_hash(), "embedder": embedder_version,
            "features": features_key(cfg), "memlab": __version__, "code": code_digest()}


def entry_dir(cache_dir: str | Path, key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key["dataset"])[:40]
    return Path(cache_dir) / "features" / f"{safe}-{digest}"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- write ----------------------------------------------------------------------------------------
def save(rep: Replayed, folder: Path, key: dict[str, Any]) -> Path:
    """Write ``rep`` as the entry ``folder`` (whole, or not at all)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        (tmp / "columns").mkdir()
        cols = rep.features.columns
        for name in cols:
            np.save(tmp / "columns" / f"{name}.npy", np.ascontiguousarray(cols[name]),
                    allow_pickle=False)
        q = rep.questions
        records = [{c: (list(v) if isinstance(v, tuple) else v) for c, v in row.items()}
                   for row in q.to_dict(orient="records")]
        _write_json(tmp / "questions.json", {"columns": list(q.columns), "records": records})
        f = rep.features
        rows = sorted(set(f.texts) | set(rep.row_item))
        _write_json(tmp / "rows.json", {
            "rows": rows, "item": [rep.row_item.get(r) for r in rows],
            "session": [rep.row_session.get(r) for r in rows],
            "text": [f.texts.get(r) for r in rows], "id": [f.ids.get(r) for r in rows],
            "terms": [sorted(f.terms[r]) if r in f.terms else None for r in rows],
            "query_texts": list(f.query_texts)})
        files = {str(p.relative_to(tmp)): _sha256(p) for p in sorted(tmp.rglob("*"))
                 if p.is_file()}
        _write_json(tmp / "manifest.json", {"key": key, "files": files,
                                            "counts": rep.counts, "timings": rep.timings,
                                            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        if folder.exists():                     # another process wrote the same entry meanwhile
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")


# -- read -----------------------------------------------------------------------------------------
class Unusable(Exception):
    """An entry that must not be used (stale or corrupt); the message says why."""


def load(folder: Path, key: dict[str, Any]) -> Replayed:
    """The entry ``folder`` as a Replayed (columns memory-mapped), after checking its key and the
    sha256 of every file. Raises :class:`Unusable` naming what is wrong."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Unusable(f"manifest.json unreadable ({exc})") from None
    if manifest.get("key") != key:
        raise Unusable("stale: written for another key (dataset, embedder, config or code)")
    files = manifest.get("files") or {}
    present = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    if set(files) != present - {"manifest.json"}:
        raise Unusable(f"files differ from the manifest: {sorted(set(files) ^ (present - {'manifest.json'}))[:3]}")
    for rel, digest in files.items():
        if _sha256(folder / rel) != digest:
            raise Unusable(f"{rel}: sha256 differs from the manifest (corrupt)")
    try:
        cols = {p.stem: np.load(p, mmap_mode="r", allow_pickle=False)
                for p in sorted((folder / "columns").glob("*.npy"))}
        q = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
        r = json.loads((folder / "rows.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Unusable(f"cannot read the entry ({exc})") from None
    if set(cols) != set(COLUMNS) or len({len(v) for v in cols.values()}) > 1:
        raise Unusable("the columns are not those of the raw-signal table")
    questions = pd.DataFrame(q["records"], columns=q["columns"])
    if "evidence" in questions:
        questions["evidence"] = [tuple(e) for e in questions["evidence"]]
    rows = r["rows"]
    features = Features(columns=cols,
                        terms={g: frozenset(t) for g, t in zip(rows, r["terms"]) if t is not None},
                        texts={g: t for g, t in zip(rows, r["text"]) if t is not None},
                        ids={g: i for g, i in zip(rows, r["id"]) if i is not None},
                        query_texts=tuple(r["query_texts"]))
    return Replayed(features, questions,
                    {g: i for g, i in zip(rows, r["item"]) if i is not None},
                    {g: s for g, s in zip(rows, r["session"]) if s is not None},
                    timings={}, counts=dict(manifest.get("counts") or {}))


def partial_dir(folder: Path) -> Path:
    """Where a replay in worker processes keeps its finished conversations until the entry
    ``folder`` is written (:mod:`memlab.bench.parallel`): ``<entry>.partial/``, removed then."""
    return folder.with_name(folder.name + ".partial")


def cached_replay(ds: Dataset, *, cfg: MemlabConfig, embedder_version: str,
                  replay_fn: Callable[..., Replayed], partial: bool = False) -> Replayed:
    """The dataset's raw signals from the feature cache (``bench.feature_cache``; folder
    ``bench.cache_dir``/features), or replayed by ``replay_fn`` and written there. The returned
    timings say which (``feature_cache_load``, or the replay's stages and ``feature_cache_write``);
    its counts carry ``feature_cache_hit`` and, when an unusable entry was replaced,
    ``feature_cache_rebuilt``. ``partial``: ``replay_fn`` is called with the folder where it may
    keep finished conversations (:func:`partial_dir`; None when the cache is off), and its key;
    the folder is removed once the entry is written."""
    if not cfg.bench.feature_cache:
        return replay_fn(None, None) if partial else replay_fn()
    key = cache_key(ds, cfg, embedder_version)
    folder = entry_dir(under_home(cfg.bench.cache_dir), key)   # relative: under the memlab home
    rebuilt = 0
    if folder.exists():
        t0 = time.perf_counter()
        try:
            rep = load(folder, key)
        except Unusable as exc:
            log.warning("memlab: feature cache %s not used, replaying: %s", folder, exc)
            shutil.rmtree(folder, ignore_errors=True)
            rebuilt = 1
        else:
            rep.timings["feature_cache_load"] = time.perf_counter() - t0
            rep.counts["feature_cache_hit"] = 1
            return rep
    rep = replay_fn(partial_dir(folder), key) if partial else replay_fn()
    t0 = time.perf_counter()
    save(rep, folder, key)
    if partial:
        shutil.rmtree(partial_dir(folder), ignore_errors=True)
    rep.timings["feature_cache_write"] = time.perf_counter() - t0
    rep.counts["feature_cache_hit"] = 0
    if rebuilt:
        rep.counts["feature_cache_rebuilt"] = rebuilt
    return rep

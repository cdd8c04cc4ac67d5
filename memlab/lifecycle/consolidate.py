"""The consolidator (familiars §5.9): near-duplicate entries of one cell become one entry.

The spec's flow, step by step:

1. **Group** the live entries by owner (agent, user), (scope, category) and, for the dialogue and
   ephemeral scopes, the dialogue. Live: active and not deprecated (pass ``live`` to narrow it
   further, e.g. with the TTL check). Pinned entries are never consolidated: they are left out
   of clustering entirely. Records without a cell (Reverie's memories) are not touched: Reverie
   has its own lifecycle (fact supersession, forgetting), and a consolidator that merged them
   would change a design it does not belong to.
2. **Similarity**: the embedder's document vectors of the texts (through the store's embedding
   cache, read only: nothing is written while planning), normalised; a text the embedder gives
   no vector (all zero) is left out.
3. **Cluster** each group with scikit-learn ``AgglomerativeClustering(n_clusters=None,
   distance_threshold=1 - consolidation.similarity_threshold, metric="cosine",
   linkage=consolidation.linkage)``: clusters join while their linkage cosine is above the
   threshold. A cluster of at least ``consolidation.min_cluster_size`` entries is consolidated.
4. **Synthesise** one entry (``consolidation.synthesis``): ``extractive`` — the medoid's text
   (the member with the highest summed cosine to the others; ties: the oldest), then the
   sentences of the other sources, most similar source first, that bring at least
   ``extractive_min_novelty`` new memory terms, while the entry stays within
   ``extractive_max_chars``; ``llm`` — ``consolidation.llm_prompt`` through :mod:`memlab.llm`.
   The new text passes the write safety screen (an LLM's reply is untrusted).
5. **Write**, all clusters in ONE transaction (:func:`apply_plan`): every source
   ``deprecated=True``; the new entry ``derived_from`` = the source ids (oldest first). A failure
   anywhere leaves the store unchanged.

The new entry (memlab's choices): same owner, scope, category and dialogue; ``importance``
(Familiars' salience) the highest of the sources; ``tags``, ``keywords``, ``entities`` and
``source_quote`` the union (first-seen order); ``timestamp`` the newest source's (housekeeping
does not make old news recent); ``retention_layer`` the most durable of the sources;
``mention_count`` and ``access_count`` the sums, ``last_accessed`` the latest; ``emotions`` the
strongest value per name; ``epistemic_status`` the least certain (speculative < inferred <
asserted); untrusted web content stays ``untrusted_web``; no ``fact_key`` (a merged entry is no
single fact revision; the sources keep theirs); the id ``m_`` + 8 hex (familiars §5.3.2); the
other fields (cognitive layer, event time, evidence, TTL, speaker, session) the medoid's.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.llm import LLM, as_llm
from memlab.safety import screen_write
from memlab.store import Store, transaction
from memlab.store.scan import iter_records, records_by_id
from memlab.text import extract_entities, memory_terms
from memlab.types import RETENTION_LAYERS, UNTRUSTED_WEB, MemoryRecord

#: least certain first: a merged entry is as certain as its least certain source
_CERTAINTY = ("speculative", "inferred", "asserted")
#: the fields of a source whose change since planning makes a plan stale
_PLANNED_ON = ("text", "agent_id", "user_id", "scope", "category", "dialogue_id", "pinned",
               "deprecated", "lifecycle_state")


def _default_live(rec: MemoryRecord) -> bool:
    return rec.lifecycle_state == "active" and not rec.deprecated


@dataclass(frozen=True)
class Cluster:
    """One group of near-duplicates and the entry it becomes. ``sources`` oldest first;
    ``similarity[i]``: cosine of ``sources[i]`` to the medoid; ``text``: the synthesised text."""

    cluster_id: int
    agent_id: str
    user_id: str
    scope: str
    category: str
    dialogue_id: str | None
    sources: tuple[MemoryRecord, ...]
    similarity: tuple[float, ...]
    medoid: str
    text: str

    @property
    def source_ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.sources)


@dataclass
class Plan:
    """What a consolidation would do: the clusters, and what was left out (``pinned``: pinned
    live entries never clustered; ``no_vector``: entries the embedder gives no vector)."""

    clusters: list[Cluster] = field(default_factory=list)
    groups: int = 0
    candidates: int = 0
    pinned: int = 0
    no_vector: int = 0

    def to_frame(self):
        """One row per source: cluster, owner, cell, id, text, similarity to the medoid, whether
        it is the medoid, the synthesised text (a pandas DataFrame, for notebooks)."""
        import pandas as pd

        rows = [{"cluster": c.cluster_id, "agent_id": c.agent_id, "user_id": c.user_id,
                 "scope": c.scope, "category": c.category, "dialogue_id": c.dialogue_id,
                 "id": r.id, "text": r.text, "similarity": s, "medoid": r.id == c.medoid,
                 "synthesis": c.text}
                for c in self.clusters for r, s in zip(c.sources, c.similarity)]
        cols = ["cluster", "agent_id", "user_id", "scope", "category", "dialogue_id", "id",
                "text", "similarity", "medoid", "synthesis"]
        return pd.DataFrame(rows, columns=cols)

    def lines(self) -> list[str]:
        out = []
        for c in self.clusters:
            where = f"{c.scope}/{c.category}" + (f" dialogue={c.dialogue_id}" if c.dialogue_id
                                                  else "")
            out.append(f"cluster {c.cluster_id}: {where} agent={c.agent_id} user={c.user_id}: "
                       f"{len(c.sources)} entries")
            for r, s in zip(c.sources, c.similarity):
                mark = "*" if r.id == c.medoid else " "
                out.append(f"  {mark} {r.id}\tcos={s:.4f}\t{_one_line(r.text)}")
            out.append(f"  => {_one_line(c.text)}")
        out.append(f"{len(self.clusters)} cluster(s), {sum(len(c.sources) for c in self.clusters)}"
                   f" entries to deprecate; {self.candidates} live unpinned entries in "
                   f"{self.groups} cell(s); {self.pinned} pinned left alone; {self.no_vector} "
                   "without a vector")
        return out


def _one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def plan_consolidation(store: Store, *, embedder: Any, agent_id: str | None = None,
                       user_id: str | None = None, llm: LLM | Callable[[str], str] | None = None,
                       live: Callable[[MemoryRecord], bool] | None = None,
                       config: MemlabConfig | None = None) -> Plan:
    """The clusters a consolidation would merge (steps 1-4 of the module docstring); reads only.

    ``embedder``: gives the document vectors (``version``, ``embed_documents``); ``agent_id`` /
    ``user_id``: only that owner's entries (None: every owner); ``llm``: required when
    ``consolidation.synthesis`` is ``llm``; ``live``: an extra predicate an entry must pass
    (default: every active, undeprecated entry is live); ``config``: default the store's."""
    cfg = config if config is not None else store.config
    cc = cfg.consolidation
    if cc.synthesis == "llm" and llm is None:
        raise InvalidInput("llm", "consolidation.synthesis is 'llm': pass an LLM", None)
    model = as_llm(llm) if llm is not None else None
    live = live or _default_live
    groups: dict[tuple, list[MemoryRecord]] = {}
    plan = Plan()
    for rec in iter_records(store.conn, agent_id=agent_id, user_id=user_id, scoped_only=True):
        if not _default_live(rec) or not live(rec):
            continue
        if rec.pinned:
            plan.pinned += 1
            continue
        key = (rec.agent_id, rec.user_id, rec.scope, rec.category,
               rec.dialogue_id if rec.scope in ("dialogue", "ephemeral") else None)
        groups.setdefault(key, []).append(rec)
        plan.candidates += 1
    plan.groups = len(groups)
    for key, recs in groups.items():
        if len(recs) < cc.min_cluster_size:
            continue
        vecs, recs = _vectors(store, embedder, recs, plan)
        for members in _clusters(vecs, cc.similarity_threshold, cc.linkage, cc.min_cluster_size):
            plan.clusters.append(_cluster(len(plan.clusters) + 1, key, [recs[i] for i in members],
                                          vecs[members], cfg, model))
    return plan


def _vectors(store: Store, embedder: Any, recs: list[MemoryRecord], plan: Plan
             ) -> tuple[np.ndarray, list[MemoryRecord]]:
    """Unit document vectors of the records' texts (cache read, nothing written) and the records
    that have one."""
    vecs, _fresh = store.lookup_cached(embedder, [r.text for r in recs])
    vecs = np.asarray(vecs, np.float64)
    norms = np.linalg.norm(vecs, axis=1)
    keep = norms > 0
    plan.no_vector += int((~keep).sum())
    return vecs[keep] / norms[keep, None], [r for r, k in zip(recs, keep) if k]


def _clusters(vecs: np.ndarray, threshold: float, linkage: str, min_size: int
              ) -> list[np.ndarray]:
    """Index arrays of the clusters of at least ``min_size`` members (step 3)."""
    if len(vecs) < max(2, min_size):
        return []
    from sklearn.cluster import AgglomerativeClustering

    labels = AgglomerativeClustering(n_clusters=None, distance_threshold=1.0 - threshold,
                                     metric="cosine", linkage=linkage).fit_predict(vecs)
    out = [np.flatnonzero(labels == lab) for lab in np.unique(labels)]
    return sorted((m for m in out if len(m) >= min_size), key=lambda m: int(m[0]))


def _cluster(cid: int, key: tuple, sources: list[MemoryRecord], vecs: np.ndarray,
             cfg: MemlabConfig, llm: LLM | None) -> Cluster:
    sims = vecs @ vecs.T
    spread = sims.sum(axis=1) - np.diag(sims)      # summed cosine to the others
    medoid = int(np.argmax(np.round(spread, 9)))   # first of the ties: the oldest
    agent_id, user_id, scope, category, dialogue_id = key
    if cfg.consolidation.synthesis == "llm":
        text = _llm_text(sources, scope, category, cfg, llm)
    else:
        order = [int(i) for i in np.argsort(-sims[medoid], kind="stable") if i != medoid]
        text = extractive(sources[medoid].text, [sources[i].text for i in order], cfg)
    return Cluster(cid, agent_id, user_id, scope, category, dialogue_id, tuple(sources),
                   tuple(float(s) for s in sims[medoid]), sources[medoid].id, text)


def extractive(medoid: str, others: Sequence[str], cfg: MemlabConfig) -> str:
    """The medoid's text, then each sentence of ``others`` (in order) that brings at least
    ``extractive_min_novelty`` new memory terms, while the text stays within
    ``extractive_max_chars`` (the medoid's text is kept whole)."""
    cc, rc = cfg.consolidation, cfg.recall
    split = re.compile(cc.sentence_split)
    text = medoid.strip()
    seen = set(memory_terms(text, term_cap=rc.term_cap, text_cap=rc.text_cap))
    for other in others:
        for sentence in (s.strip() for s in split.split(other)):
            terms = set(memory_terms(sentence, term_cap=rc.term_cap, text_cap=rc.text_cap))
            if not terms or len(terms - seen) / len(terms) < cc.extractive_min_novelty:
                continue
            joined = text + _joint(text, sentence) + sentence
            if len(joined) > cc.extractive_max_chars:
                continue
            text, seen = joined, seen | terms
    return text


def _joint(text: str, sentence: str) -> str:
    """What goes between the text so far and an appended sentence: nothing after a CJK sentence
    end, a space after a Latin one; a text without a final stop gets one (。 after CJK)."""
    if text.endswith(("。", "！", "？", "；")):
        return ""
    if text.endswith((".", "!", "?", ";")):
        return " "
    return "。" if "\u4e00" <= text[-1] <= "\u9fff" else ". "


def _llm_text(sources: list[MemoryRecord], scope: str, category: str, cfg: MemlabConfig,
              llm: LLM | None) -> str:
    entries = "\n".join("- " + " ".join(r.text.split()) for r in sources)
    reply = llm.complete(cfg.consolidation.llm_prompt.format(scope=scope, category=category,
                                                             entries=entries)).strip()
    if not reply:
        raise InvalidInput("llm reply", "the LLM gave an empty merged entry", reply)
    if len(reply) > cfg.recall.max_text_chars:
        raise InvalidInput("llm reply", f"longer than recall.max_text_chars="
                           f"{cfg.recall.max_text_chars}", f"{len(reply)} characters")
    return reply


def merged_record(cluster: Cluster, *, new_id: str) -> MemoryRecord:
    """The new entry of a cluster (the module docstring's field rules)."""
    src = cluster.sources
    med = next(r for r in src if r.id == cluster.medoid)

    def union(name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(x for r in src for x in getattr(r, name)))

    emotions: dict[str, float] = {}
    for r in src:
        for k, v in r.emotions.items():
            if k not in emotions or abs(v) > abs(emotions[k]):
                emotions[k] = v
    accessed = [r.last_accessed for r in src if r.last_accessed is not None]
    return dataclasses.replace(
        med, id=new_id, text=cluster.text, importance=max(r.importance for r in src),
        tags=union("tags"), keywords=union("keywords"), entities=union("entities"),
        source_quote=union("source_quote"), derived_from=cluster.source_ids,
        timestamp=max(r.timestamp for r in src),
        retention_layer=min((r.retention_layer for r in src), key=RETENTION_LAYERS.index),
        mention_count=sum(r.mention_count for r in src),
        access_count=sum(r.access_count for r in src),
        last_accessed=max(accessed) if accessed else None, emotions=emotions,
        epistemic_status=min((r.epistemic_status for r in src), key=_CERTAINTY.index),
        source_type=UNTRUSTED_WEB if any(r.source_type == UNTRUSTED_WEB for r in src)
        else med.source_type, source_uri="", source_hash="", fact_key="", fact_revision=1,
        lifecycle_state="active", supersedes=None, deprecated=False, pinned=False,
        schema_version=max(r.schema_version for r in src), meta={},
        embedding_status="pending", embedding_model_version="")


def apply_plan(store: Store, plan: Plan, *, embedder: Any = None) -> list[MemoryRecord]:
    """Write a plan (step 5), all clusters in one transaction; returns the new entries.

    Each source must still be as planned (text, owner, cell, pinned, deprecated, state): a plan
    made stale by a write in between is refused with InvalidInput naming the source, and nothing
    is written. ``embedder``: when it is the store's embedder, the new entries are stored with
    their vectors; otherwise they are pending."""
    if not plan.clusters:
        return []
    cfg = store.config
    rc = cfg.recall
    taken: set[str] = set()
    new: list[MemoryRecord] = []
    for c in plan.clusters:
        new_id = _new_id(store, taken)
        rec = merged_record(c, new_id=new_id)
        fields = {k: v for k, v in dataclasses.asdict(rec).items() if k != "text"}
        screen_write(rec.text, fields, cfg.safety, where=f"cluster {c.cluster_id}")
        new.append(rec)
    vectors, fresh = None, []
    if embedder is not None and store.vectors is not None \
            and store.vectors.model_version == embedder.version:
        vectors, f = store.lookup_cached(embedder, [r.text for r in new])
        fresh = [f]
    with transaction(store.conn):
        for c in plan.clusters:
            now = {r.id: r for r in records_by_id(store.conn, list(c.source_ids))}
            for r in c.sources:
                cur = now.get(r.id)
                if cur is None or any(getattr(cur, f) != getattr(r, f) for f in _PLANNED_ON):
                    raise InvalidInput("plan", "stale: a source changed or went since the plan "
                                       "was made; plan again (nothing was written)", r.id)
                store.repo.update_fields(r.id, deprecated=True)
        stored = store.add(new, terms=[memory_terms(r.text, term_cap=rc.term_cap,
                                                    text_cap=rc.text_cap) for r in new],
                           entities=[extract_entities(r.text, min_chars=cfg.entity.min_chars)
                                     for r in new], vectors=vectors, fresh=fresh)
    return stored


def _new_id(store: Store, taken: set[str]) -> str:
    """``m_`` + 8 hex (familiars §5.3.2), not stored and not taken in this run."""
    while True:
        mem_id = "m_" + secrets.token_hex(4)
        if mem_id not in taken and not records_by_id(store.conn, [mem_id]):
            taken.add(mem_id)
            return mem_id


def plan_frame(store: Store, *, embedder: Any, **kwargs: Any):
    """The plan as a pandas DataFrame, one row per source (:meth:`Plan.to_frame`; keyword
    arguments as :func:`plan_consolidation`): for notebooks."""
    return plan_consolidation(store, embedder=embedder, **kwargs).to_frame()


def consolidate(store: Store, *, embedder: Any, dry_run: bool = False, **kwargs: Any
                ) -> tuple[Plan, list[MemoryRecord]]:
    """Plan (:func:`plan_consolidation`, same keyword arguments) and, unless ``dry_run``, apply;
    returns the plan and the new entries (none in a dry run)."""
    plan = plan_consolidation(store, embedder=embedder, **kwargs)
    return plan, ([] if dry_run else apply_plan(store, plan, embedder=embedder))

"""THE write pipeline: every memory memlab writes goes through :class:`WritePipeline`.

``MemoryStore.add`` / ``add_many``, ``MemoryStore.store_interaction`` and benchmark replay (raw and
writer mode) all call it. The data flow, one module per step:

1. build and validate the record (:mod:`memlab.write.records`: :func:`~.records.prepare`);
2. score importance where the caller gave none (:mod:`memlab.write.importance`, §5 ①-⑥; the
   association count ⑤ is looked up through the store's recall by the ``associate`` function the
   facade hands in, one batched lookup per owner);
3. (store_interaction only) the autonomy gate (:mod:`memlab.write.gate`) and the short-term draw
   (:mod:`memlab.write.interaction`);
4. embed the texts (before the transaction: no lock is held while a model runs);
5. in ONE transaction (``BEGIN IMMEDIATE``): read each owner's long-term usage, route every memory
   to a layer under that owner's budget pressure (:mod:`memlab.write.layers`, §5 and §11.3), give
   it its id (:func:`~.records.finish`) and insert records, terms, entities and vectors. A refusal
   at any step leaves the store unchanged. Untrusted web content (``source_type``
   ``untrusted_web``) is written apart, in the same transaction (:mod:`memlab.write.web`).

An explicit ``layer`` (or ``importance``) of an item is kept as given: benchmark raw mode gives
both, so it stores exactly what it did before the pipeline existed.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.lifecycle.ttl import check_turn
from memlab.store import Store
from memlab.store.cache import FreshVectors
from memlab.text import extract_entities, memory_terms
from memlab.types import MemoryRecord
from memlab.write.importance import score_importance
from memlab.write.layers import Budget, choose_layer
from memlab.write.facts import supersede_step
from memlab.write.familiars import deprecate_superseded
from memlab.write.keys import expand_keys
from memlab.write.pins import check_pin_cap
from memlab.write.records import Draft, TenantFn, finish, prepare
from memlab.write.web import WEB_LAYER, is_web, store_web, web_record
from memlab.windows import split_many
from memlab.store.connect import transaction

#: texts -> (their document vectors or None: stored pending, vectors the cache lacks)
EmbedFn = Callable[[list[str]], "tuple[np.ndarray | None, list[FreshVectors]]"]
#: (texts, owner, now, their query vectors or None) -> number of stored memories of that owner
#: associated with each text (§5 ⑤)
AssociateFn = Callable[[list[str], "tuple[str, str]", float, "np.ndarray | None"], Sequence[int]]
#: window texts -> (their document vectors, or None: not embedded; the vectors the cache lacks)
WindowEmbedFn = Callable[[list[str]], "tuple[np.ndarray | None, FreshVectors | None]"]


@dataclass(frozen=True)
class Routed:
    """Where one draft went: its record as stored (None: not stored, below the threshold and the
    short-term draw said no), its layer and the long-term threshold it met (budget pressure)."""

    record: MemoryRecord | None
    layer: str | None
    threshold: float | None


class WritePipeline:
    """One store's write path (see the module docstring). ``counters``: the store's ``stats``."""

    def __init__(self, store: Store, *, config: MemlabConfig, tenant: TenantFn, embed: EmbedFn,
                 associate: AssociateFn | None, counters: Counter[str],
                 embed_windows: WindowEmbedFn | None = None) -> None:
        self.store, self.config = store, config
        self._tenant, self._embed, self._associate = tenant, embed, associate
        self._embed_windows = embed_windows
        self.counters = counters

    # -- the steps ------------------------------------------------------------------------------
    def prepare(self, items: Iterable[Mapping[str, Any]], *, now: float,
                turn: int | None = None) -> list[Draft]:
        """Step 1: validate every item (nothing read or written yet). ``turn``: the dialogue's
        turn counter when known (TTL defaults, :func:`~.records.prepare`)."""
        if isinstance(items, Mapping) or isinstance(items, (str, bytes)):
            raise InvalidInput("items", "must be a list of items (mappings with a text)",
                               type(items).__name__)
        check_turn(turn, "turn")
        drafts = []
        for i, it in enumerate(items):
            if not isinstance(it, Mapping):
                raise InvalidInput(f"items[{i}]", "must be a mapping with a text",
                                   type(it).__name__)
            drafts.append(prepare(it, index=i, now=now, cfg=self.config, tenant=self._tenant,
                                  turn=turn))
        return drafts

    def associations(self, texts: list[str], owner: tuple[str, str], now: float,
                     vectors: np.ndarray | None = None) -> list[int]:
        """§5 ⑤: how many of the owner's stored memories each text is associated with (0 each
        without an ``associate`` function or with ``importance.association_k`` 0).
        ``vectors``: the texts' query vectors when the caller has them (benchmarks)."""
        if self._associate is None or self.config.importance.association_k == 0 or not texts:
            return [0] * len(texts)
        counts = [int(c) for c in self._associate(texts, owner, now, vectors)]
        if len(counts) != len(texts):
            raise RuntimeError(f"associate gave {len(counts)} counts for {len(texts)} texts")
        return counts

    def score(self, drafts: Sequence[Draft], *, now: float,
              replies: Sequence[str] | None = None) -> None:
        """Step 2: the §5 importance of every draft without one (association looked up in one
        batch per owner). ``replies``: the assistant's replies (store_interaction), scored with the
        text as §5 scores ``user_message`` and ``assistant_reply``."""
        todo = [j for j, d in enumerate(drafts) if d.importance is None]
        by_owner: dict[tuple[str, str], list[int]] = {}
        for j in todo:
            by_owner.setdefault(drafts[j].owner, []).append(j)
        cfg = self.config
        for owner, js in by_owner.items():
            assoc = self.associations([drafts[j].text for j in js], owner, now)
            for j, a in zip(js, assoc):
                d = drafts[j]
                d.associated = a
                d.importance = score_importance(
                    d.text, "" if replies is None else replies[j], emotion_intensity=d.intensity,
                    associated=a, cfg=cfg.importance, term_cap=cfg.recall.term_cap,
                    text_cap=cfg.recall.text_cap)

    def govern(self, repo, records: list[MemoryRecord], *, supersede: bool = False
               ) -> list[MemoryRecord]:
        """The lifecycle step of every write, inside its transaction (§6.1, §11.3): with
        ``supersede`` the memories the records name in ``supersedes`` are marked deprecated
        (Familiars, :func:`memlab.write.familiars.deprecate_superseded`); fact keys and
        supersession of older revisions (:func:`memlab.write.facts.supersede_step`), then the
        pin cap (:func:`memlab.write.pins.check_pin_cap`)."""
        if supersede:
            deprecate_superseded(repo, records)
        records = supersede_step(repo, records, self.config)
        check_pin_cap(repo, records, self.config)
        return records

    def commit(self, drafts: Sequence[Draft], *, vectors: np.ndarray | None = None,
               replacing: Sequence[str] = (), supersede: bool = False,
               windows: Sequence[np.ndarray] | None = None) -> list[Routed]:
        """Steps 4-5: embed (unless ``vectors`` are given), then route and insert in one
        transaction. One :class:`Routed` per draft, in order. ``replacing``: ids deleted in the
        same transaction (a character card's re-sync). ``supersede``: see :meth:`govern`.
        ``windows``: with ``chunk.enabled``, the window vectors of each text (:meth:`windows`;
        default: split and embedded here, with the texts' vectors)."""
        if not drafts:
            if replacing:
                self.store.add([], terms=[], entities=[], replacing=replacing)
            return []
        rc = self.config.recall
        texts = [d.text for d in drafts]
        terms = [memory_terms(t, term_cap=rc.term_cap, text_cap=rc.text_cap) for t in texts]
        ents = [extract_entities(t, min_chars=self.config.entity.min_chars) for t in texts]
        keys = [expand_keys(t, self.config) for t in texts] if rc.expanded_keys else None
        fresh: list[FreshVectors] = []
        if vectors is None:
            vectors, fresh = self._embed(texts)
        elif len(vectors) != len(drafts):
            raise InvalidInput("vectors", f"one vector per item ({len(drafts)})", len(vectors))
        if not self.config.chunk.enabled or vectors is None:
            windows = None
        elif windows is None:
            windows, new = self.windows(texts)
            fresh = fresh + ([new] if new is not None else [])
        elif len(windows) != len(drafts):
            raise InvalidInput("windows", f"one array per item ({len(drafts)})", len(windows))
        routed: list[Routed] = []
        web = {i: web_record(d) for i, d in enumerate(drafts) if is_web(d)}

        def build() -> list[MemoryRecord | None]:
            routed.clear()   # a retried build starts over
            budget = Budget(self.store.repo.layer_chars, layers=self.config.layers,
                            gov=self.config.governance)
            out: list[MemoryRecord | None] = []
            for i, d in enumerate(drafts):
                if i in web:   # stored apart (memlab.store.web), never a memory record
                    out.append(None)
                    routed.append(Routed(web[i], WEB_LAYER, None))
                    continue
                threshold = None
                layer = d.layer
                if layer is None:
                    threshold = budget.threshold(d.owner)
                    layer = choose_layer(d.importance, threshold=threshold,
                                         keep_short=d.keep_short)
                budget.charge(d.owner, layer, len(d.text))
                rec = None if layer is None else finish(d, layer=layer)
                out.append(rec)
                routed.append(Routed(rec, layer, threshold))
            return out

        if web:   # one transaction for both tables (the store's add nests as a savepoint)
            with transaction(self.store.conn):
                store_web(self.store, [web[i] for i in sorted(web)],
                          terms=[terms[i] for i in sorted(web)],
                          vectors=None if vectors is None else np.asarray(vectors)[sorted(web)],
                          fresh=fresh if len(web) == len(drafts) else [])
                stored = self._add(build, terms, ents, keys, vectors, fresh, replacing,
                                   supersede, windows)
        else:
            stored = self._add(build, terms, ents, keys, vectors, fresh, replacing, supersede,
                               windows)
        # the records as stored (embedding status and model version) in place of the built ones
        routed[:] = [Routed(next(stored), r.layer, r.threshold)
                     if r.record is not None and r.layer != WEB_LAYER else r for r in routed]
        self.counters["added"] += sum(r.record is not None and r.layer != WEB_LAYER
                                      for r in routed)
        self.counters["web content added"] += len(web)
        return routed

    def _add(self, build, terms, ents, keys, vectors, fresh, replacing, supersede, windows):
        return iter(self.store.add(build, terms=terms, entities=ents, keys=keys, vectors=vectors,
                                   fresh=fresh, replacing=replacing, windows=windows,
                                   prepare=functools.partial(self.govern, supersede=supersede)))

    def windows(self, texts: Sequence[str]
                ) -> tuple[list[np.ndarray] | None, FreshVectors | None]:
        """(each text's window vectors, (m, dim) with m = 0 for a text not split; the vectors the
        cache lacks), the windows of every text embedded in one batch (:mod:`memlab.windows`,
        ``chunk.*``); (None, None) without a window embedder or when it gives no vectors (the
        memories are then stored unsplit: recall reads their whole-text cosine)."""
        flat, counts = split_many(texts, self.config.chunk)
        if self._embed_windows is None:
            return None, None
        if not flat:
            return [np.zeros((0, 1), np.float32)] * len(texts), None
        vecs, new = self._embed_windows(flat)
        if vecs is None:
            return None, None
        self.counters["windows embedded"] += len(flat)
        cuts = np.cumsum(counts)[:-1]
        return np.split(np.asarray(vecs, np.float32), cuts), new

    # -- add / add_many ---------------------------------------------------------------------------
    def write(self, items: Iterable[Mapping[str, Any]], *, now: float,
              vectors: np.ndarray | None = None, replacing: Sequence[str] = (),
              turn: int | None = None, supersede: bool = False,
              windows: Sequence[np.ndarray] | None = None) -> list[MemoryRecord]:
        """add_many: every item is stored (an explicit write: a memory below the long-term
        threshold goes short term, never dropped), all or nothing. ``supersede``: see
        :meth:`govern`."""
        drafts = self.prepare(items, now=now, turn=turn)
        self.score(drafts, now=now)
        return [r.record for r in self.commit(drafts, vectors=vectors, replacing=replacing,
                                              supersede=supersede, windows=windows)]

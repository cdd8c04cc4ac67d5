"""What a sweep computes once per replay: everything in a :class:`~memlab.bench.replay.Replayed`
that no configuration changes, in the shape the fast per-configuration path reads (issue 8, item 6).

Per table row: every raw-signal column in the dtype the scorers and selection read it in (float64,
int64, bool: the memory-mapped float32/int8 columns are converted once, not per configuration),
the z-score of the relevance floor (:func:`memlab.recall.score.floor_z`), whether the memory is
gold for its question, its key for ``prompt_chars`` and, for dedup, the memory's index within its
conversation, its term count and the largest Jaccard it has with any other memory of that
conversation (config-independent bound: a query whose top picks all stay below
``selection.dedup_jaccard`` cannot have a dedup skip among them). Per conversation, the pairwise
term-intersection counts of its memories (for the exact vectorised walk), built on first need.

:func:`prepared` memoises one :class:`Prepared` per live Replayed (by identity; a Replayed is not
changed after it is made). ``usable`` is False, with ``why``, for data the fast path does not
reproduce bit for bit (NaN or infinite raw signals, unknown codes, a question key or a ranked item
twice, a row without its item): :mod:`memlab.tune.evaluate` then takes the reference path, which
raises or computes exactly as ``memlab bench``.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from memlab.bench.replay import Replayed
from memlab.bench.run import question_keys
from memlab.recall.features import (CHUNK_COLUMNS, COLUMNS, COGNITIVE_CODES, CONTEXT_COLUMNS,
                                    LAYER_CODES, column, n_rows)
from memlab.recall.score import INTENT_FIRST, REVERIE_MEMORY_COLUMNS, floor_z
from memlab.tune import kernels
from memlab.tune.blocks import block_layout, rows_layout
from memlab.tune.dense import Layout, layout

__all__ = ["Prepared", "prepared", "RowSubset", "MAX_DEDUP_MEMORIES"]

_MEMO: dict[int, tuple[weakref.ref, "Prepared"]] = {}

#: A conversation with more distinct candidate memories than this gets no intersection matrix
#: (its memory would grow with the square): its queries whose dedup can bind take the Python walk.
#: Speed only; results are the same either way.
MAX_DEDUP_MEMORIES = 6000

#: At most this many memory pairs (all conversations together) get their Jaccard stored as a
#: float64 (8 bytes each); else jaccard() computes them from the intersection counts. Speed only.
JACCARD_CELLS = 1 << 24

#: Relevance floors whose rows :meth:`Prepared.relevant_rows` keeps compacted. Speed only.
RELEVANT_MEMO = 2

#: Rows per block when the whole table is scored (arrays that stay in the CPU caches). Speed only.
BLOCK_ROWS = 48_000

_NULLABLE = ("cosine", "tree_distance", "q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std",
             "window_dist_days", *CONTEXT_COLUMNS, *CHUNK_COLUMNS, "key_bm25", "key_bm25_z")


def _dtype(kind: str) -> type:
    return np.float64 if kind.startswith("float") else np.bool_ if kind == "bool" else np.int64


class RowSubset(Mapping):
    """A :data:`~memlab.recall.features.Table` of some rows of another one (an index array or a
    slice): each column gathered on first read. Scorers that work row by row give on it the values they give those rows in the
    whole table."""

    def __init__(self, table: Mapping[str, np.ndarray], idx: np.ndarray | slice) -> None:
        self._table, self._idx, self._cols = table, idx, {}

    def __getitem__(self, name: str) -> np.ndarray:
        got = self._cols.get(name)
        if got is None:
            got = self._cols[name] = self._table[name][self._idx]
        return got

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


class _Converted(Mapping):
    """``raw``'s columns converted to the dtype the scorers read them in (float64, int64, bool),
    each on first read."""

    def __init__(self, raw: Mapping[str, np.ndarray]) -> None:
        self._raw, self._cols = raw, {}

    def __getitem__(self, name: str) -> np.ndarray:
        got = self._cols.get(name)
        if got is None:
            got = self._cols[name] = np.ascontiguousarray(
                np.asarray(self._raw[name], dtype=_dtype(COLUMNS[name])))
        return got

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class Prepared:
    """The config-independent arrays of one replay (see the module docstring)."""

    def __init__(self, rep: Replayed) -> None:
        self.terms = rep.features.terms     # the Replayed itself is not kept (see prepared())
        self.questions = rep.questions
        cols = rep.features.columns
        self.n = n_rows(cols)
        q = rep.questions
        self.n_q = len(q)
        self.keys = question_keys(rep)
        self.convs = q["conversation_id"].tolist()
        self.evidence = [tuple(e) for e in q["evidence"]] if self.n_q else []
        self.answerable = np.array([len(e) > 0 for e in self.evidence], dtype=bool)
        self.why = ""
        self.raw: dict[str, np.ndarray] = {}
        self.table: Mapping[str, np.ndarray] = {}
        if not self.n or not self.n_q:
            self.why = "an empty table or no question"
            return
        if set(cols) != set(COLUMNS):
            self.why = "the table lacks raw-signal columns"
            return
        # raw: the columns in their own dtypes (float32, int8...) in memory: what row subsets
        # gather from (less to move; the scorers convert what they read, to the same values);
        # table: each column converted to the dtype its readers use, on first read
        self.raw = {c: np.ascontiguousarray(column(cols, c)) for c in COLUMNS}
        self.table = _Converted(self.raw)
        self.why = self._check(rep.row_item)
        if self.why:
            return
        t = self.table
        self.qid = t["qid"]
        self.qid_sorted = bool((np.diff(self.qid) >= 0).all())
        self.importance = t["importance"]
        self.text_len = t["text_len"]
        self.cosine, self.lexical = t["cosine"], t["lexical"]
        stats = [t[c] for c in ("q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std")]
        self.z_unknown = bool((~np.isnan(self.cosine) & np.isnan(np.stack(stats)).any(axis=0))
                              .any())
        with np.errstate(invalid="ignore"):
            self.z = floor_z(self.cosine, *stats)
        rows = t["row"]
        items = [rep.row_item[r] for r in rows.tolist()]
        conv_of_row = [self.convs[i] for i in self.qid.tolist()]
        item_keys = [f"{c}::{i}" for c, i in zip(conv_of_row, items)]
        key_code, uniq = pd.factorize(pd.Series(item_keys, dtype=object))
        if len(np.unique(self.qid * len(uniq) + key_code)) != self.n:
            self.why = "a question ranks one item twice"
            return
        # prompt_chars reads text_len by item key, the last row of each key winning (as
        # evaluate's reference does)
        last = np.zeros(len(uniq), dtype=np.int64)
        last[key_code] = self.text_len
        self.chars = last[key_code]
        gold = [frozenset(e) for e in self.evidence]
        self.gold = np.fromiter((i in gold[q] for q, i in zip(self.qid.tolist(), items)),
                                dtype=bool, count=self.n)
        self.gold_count = np.array([len(g) for g in gold], dtype=np.int64)
        self.item_keys = item_keys
        self._dedup_ready = False

    def _check(self, row_item: Mapping[int, str]) -> str:
        t = self.table
        for c, kind in COLUMNS.items():
            if kind.startswith("float") and c not in _NULLABLE and not np.isfinite(t[c]).all():
                return f"column {c} holds NaN or infinite values"
        if not np.isin(t["layer"], list(LAYER_CODES.values())).all():
            return "unknown layer codes"
        if not np.isin(t["cognitive"], list(COGNITIVE_CODES.values())).all():
            return "unknown cognitive codes"
        qid = t["qid"]
        if qid.min() < 0 or qid.max() >= self.n_q:
            return "qids outside the questions"
        if len(set(self.keys)) != len(self.keys):
            return "two questions share conversation::query_id"
        if any(r not in row_item for r in np.unique(t["row"]).tolist()):
            return "a row without its item"
        return ""

    @property
    def usable(self) -> bool:
        return not self.why

    # -- dedup ------------------------------------------------------------------------------------
    def _dedup(self) -> None:
        """Per row: the memory's index within its conversation, its term count, the largest
        Jaccard with another memory of the conversation, and where the conversation's
        intersection counts start in ``inter`` (-1: none; ``inter_m`` their side)."""
        terms = self.terms
        rows = self.table["row"]
        conv_codes, _ = pd.factorize(pd.Series(self.convs, dtype=object))
        row_conv = conv_codes[self.qid]
        self.mem_local = np.zeros(self.n, dtype=np.int64)
        self.n_terms = np.zeros(self.n, dtype=np.int64)
        self.max_jaccard = np.full(self.n, np.inf)
        self.inter_base = np.full(self.n, -1, dtype=np.int64)
        self.inter_m = np.zeros(self.n, dtype=np.int64)
        blocks, jac_blocks, offset = [], [], 0
        by_conv = np.argsort(row_conv, kind="stable")
        cuts = np.flatnonzero(np.diff(row_conv[by_conv])) + 1
        for at in np.split(by_conv, cuts):
            mems, local = np.unique(rows[at], return_inverse=True)
            self.mem_local[at] = local
            sets = [terms.get(int(m)) for m in mems.tolist()]
            sizes = np.array([len(s) if s is not None else 0 for s in sets], dtype=np.int64)
            self.n_terms[at] = sizes[local]
            if len(mems) > MAX_DEDUP_MEMORIES or any(s is None for s in sets):
                continue                        # inf max_jaccard, no matrix: select() walks them
            inter = _intersections(sets)
            union = sizes[:, None] + sizes[None, :] - inter
            with np.errstate(invalid="ignore", divide="ignore"):
                jac = np.where(union > 0, inter / union, 0.0)
            if jac_blocks is not None and offset + inter.size <= JACCARD_CELLS:
                jac_blocks.append(jac.ravel().copy())
            else:
                jac_blocks = None
            np.fill_diagonal(jac, -np.inf)
            self.max_jaccard[at] = jac.max(axis=1)[local]
            self.inter_base[at] = offset
            self.inter_m[at] = len(mems)
            blocks.append(inter.ravel())
            offset += inter.size
        dtype = max((b.dtype for b in blocks), key=lambda d: d.itemsize, default=np.uint8)
        self.inter = (np.concatenate([b.astype(dtype) for b in blocks]) if blocks
                      else np.zeros(0, dtype=np.uint8))
        self.inter_row = self.inter_base + self.mem_local * self.inter_m
        # the Jaccards themselves, where they fit (what jaccard() computes, looked up)
        self.jac = np.concatenate(jac_blocks) if jac_blocks else None
        self.empty_terms = bool((self.n_terms == 0).any())
        kernels.warm(self.inter.dtype)       # the kernels read these counts
        self._dedup_ready = True

    def jaccard(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Jaccard of the term sets of the memories at positions ``a`` and ``b`` (broadcast;
        same conversation, with an intersection matrix), as ``memlab.text.jaccard``."""
        if self.jac is not None:
            return self.jac[self.inter_row[a] + self.mem_local[b]]
        inter = self.inter[self.inter_row[a] + self.mem_local[b]].astype(np.float64)
        union = self.n_terms[a] + self.n_terms[b] - inter
        if self.empty_terms:
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(union > 0, inter / union, 0.0)
        return inter / union

    def dedup_arrays(self) -> "Prepared":
        """Build the dedup arrays (:meth:`_dedup`) on first need."""
        if not self._dedup_ready:
            self._dedup()
        return self

    # -- session level ----------------------------------------------------------------------------
    def session_arrays(self, sessions: Mapping[str, str]) -> dict[str, Any] | None:
        """Per row its session code and whether that session is gold; per question the distinct
        gold sessions. None when ``sessions`` misses an item (the reference path raises).
        Memoised by the mapping's identity: a sweep passes one :func:`item_sessions` dict and
        does not change it."""
        memo = self.__dict__.setdefault("_sessions", {})
        hit = memo.get(id(sessions))
        if hit is not None and hit[0] is sessions:
            return hit[1]
        try:
            row_sess = [sessions[k] for k in self.item_keys]
            gold = [frozenset(sessions[f"{c}::{e}"] for e in ev)
                    for c, ev in zip(self.convs, self.evidence)]
        except KeyError:
            out = None
        else:
            code, _ = pd.factorize(pd.Series(row_sess, dtype=object))
            out = {"code": code.astype(np.int64),
                   "gold": np.fromiter((s in gold[q] for q, s in zip(self.qid.tolist(),
                                                                      row_sess)),
                                       dtype=bool, count=self.n),
                   "gold_count": np.array([len(g) for g in gold], dtype=np.int64)}
        memo[id(sessions)] = (sessions, out)
        return out

    @cached_property
    def memory_states(self) -> tuple[np.ndarray, np.ndarray]:
        """(state of each row, a row of each state): rows whose
        :data:`~memlab.recall.score.REVERIE_MEMORY_COLUMNS` hold the same values bit for bit share
        a state (one memory asked about at one time: LoCoMo's 768k rows hold 5.9k)."""
        state = np.zeros(self.n, dtype=np.int64)
        for c in REVERIE_MEMORY_COLUMNS:       # mixed-radix codes of the bit patterns, hashed
            v = self.table[c]
            v = v.astype(np.float64).view(np.int64) if v.dtype.kind == "f" else v.astype(np.int64)
            code, uniq = pd.factorize(v)
            state, _ = pd.factorize(state * len(uniq) + code)
        first = np.full(int(state.max(initial=-1)) + 1, self.n, dtype=np.int64)
        np.minimum.at(first, state, np.arange(self.n))
        return state.reshape(-1).astype(np.int64), first.astype(np.int64)

    @cached_property
    def state_columns(self) -> dict[str, np.ndarray]:
        """The raw columns of one row of each memory state (``memory_states``), gathered once:
        what :func:`~memlab.recall.score.reverie_memory` reads per configuration."""
        _, rows = self.memory_states
        return {c: self.raw[c][rows] for c in COLUMNS}

    @cached_property
    def blocks(self) -> list[slice]:
        """Row slices of whole questions, about :data:`BLOCK_ROWS` rows each (qid-sorted tables;
        else one slice of everything)."""
        if not self.qid_sorted:
            return [slice(0, self.n)]
        per = max(1, self.n_q * BLOCK_ROWS // max(self.n, 1))
        cuts = np.unique(np.searchsorted(self.qid, np.r_[np.arange(0, self.n_q, per),
                                                         self.n_q]))
        return [slice(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]

    @cached_property
    def floor_sorted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cosines, floor z-scores and lexical overlaps of the table, NaN dropped, sorted
        (float64, as the relevance floor compares them)."""
        return tuple(np.sort(v[~np.isnan(v)]) for v in (self.cosine, self.z, self.lexical))

    @cached_property
    def dense(self) -> Layout | None:
        """The dense blocks of :mod:`memlab.tune.dense` (None: the layout does not fit)."""
        return layout(self)

    @property
    def fused_ok(self) -> bool:
        """Whether :func:`memlab.tune.kernels.reverie_select` serves this table: qid-sorted, and
        every conversation with an intersection matrix (its Jaccards)."""
        got = self.__dict__.get("_fused_ok")
        if got is None:
            got = self.__dict__["_fused_ok"] = bool(
                self.qid_sorted and (self.dedup_arrays().inter_base >= 0).all())
        return got

    @cached_property
    def kernel_values(self) -> dict[str, np.ndarray]:
        """Per table row, what the fused kernel's layout (:mod:`memlab.tune.blocks`) is made
        of, in the stored dtypes (float32, int8, int16, int32: half the bytes or less of the
        converted ones, and the same values once converted back): the floor z-score's rank in
        :attr:`z_sorted` (int32, -1 for NaN: ``z >= t`` where the rank is at least
        ``searchsorted(z_sorted, t)``), the memory state as int32 (int64 past 2^31 states),
        permanence, the largest Jaccard in the conversation and where its intersection counts
        are (:meth:`jaccard`)."""
        out = {}
        for c in ("cosine", "lexical", "entity_matches", "intent", "importance", "text_len",
                  "event_time"):
            raw = self.raw[c]
            out[c] = raw if raw.dtype == np.dtype(COLUMNS[c]) else self.table[c]
        state = self.memory_states[0]
        out["state"] = (np.ascontiguousarray(state, dtype=np.int32)
                        if state.size == 0 or state.max() < np.iinfo(np.int32).max else state)
        self.dedup_arrays()
        known = ~np.isnan(self.z)
        zrank = np.full(self.n, -1, dtype=np.int32)
        zrank[known] = np.searchsorted(self.z_sorted, self.z[known])
        out.update(zrank=zrank, permanent=self.permanent, max_jaccard=self.max_jaccard,
                   inter_row=self.inter_row, mem_local=self.mem_local, n_terms=self.n_terms)
        return out

    @cached_property
    def z_sorted(self) -> np.ndarray:
        """The table's distinct floor z-scores (NaN dropped), ascending."""
        return np.unique(self.z[~np.isnan(self.z)])

    @cached_property
    def kernel_layout(self) -> dict[str, Any]:
        """The fused kernel's blocks of questions x memories (:mod:`memlab.tune.blocks`)."""
        return block_layout(self)

    def relevant_rows(self, floor: tuple) -> dict[str, Any] | None:
        """The rows that pass a relevance floor, laid out question by question
        (:func:`memlab.tune.blocks.rows_layout`), for the fused kernel to read without a floor
        pass. ``floor``: (1: absolute cosine | 2: z-score, its threshold, the lexical floor).
        Made when a floor comes back among the last 2 x :data:`RELEVANT_MEMO` floors asked for
        (a sweep that keeps the floor, e.g. over weights, asks for one floor again and again;
        one drawn per configuration must not pay the copy), the last :data:`RELEVANT_MEMO`
        kept; None otherwise (the kernel applies the floor itself)."""
        memo = self.__dict__.setdefault("_relevant_rows", OrderedDict())
        got = memo.get(floor)
        if got is not None:
            memo.move_to_end(floor)
            return got
        seen = self.__dict__.setdefault("_floors_seen", OrderedDict())
        again = floor in seen
        seen[floor] = True
        seen.move_to_end(floor)
        while len(seen) > 2 * RELEVANT_MEMO:
            seen.popitem(last=False)
        if not again or not self.qid_sorted:
            return None
        mode, side, lexical_floor = floor
        with np.errstate(invalid="ignore"):          # NaN passes no floor
            mask = ((self.cosine >= side) if mode == 1 else (self.z >= side)) \
                | (self.lexical >= lexical_floor)
        out = rows_layout(self, np.flatnonzero(mask))
        memo[floor] = out
        while len(memo) > RELEVANT_MEMO:
            memo.popitem(last=False)
        return out

    @cached_property
    def permanent(self) -> np.ndarray:
        """Rows of the permanent layer (selection caps them)."""
        return np.ascontiguousarray(self.table["layer"] == LAYER_CODES["permanent"])

    @cached_property
    def first_intent(self) -> np.ndarray:
        """Rows of questions with a 'first' intent (reverie's 'first' boost ranks them)."""
        return (self.table["intent"] & INTENT_FIRST) != 0

    @cached_property
    def frame_parts(self) -> dict[str, Any]:
        """The answerable questions (rows, index ``query_id``) and their category and
        conversation columns, as the reference path makes them; the categories' codes (sorted,
        as a groupby orders them) and a memo of question subsets' positions
        (:meth:`memlab.tune.evaluate.QueryScores.positions`)."""
        q = self.questions
        keep = np.flatnonzero(self.answerable)
        index = pd.Index([self.keys[i] for i in keep.tolist()], name="query_id")
        cats = pd.Series(q["category"].astype(str).to_numpy(), index=self.keys).reindex(index)
        convs = pd.Series(q["conversation_id"].astype(str).to_numpy(), index=self.keys)
        codes, uniq = pd.factorize(cats, sort=True)
        return {"rows": keep, "index": index, "cats": cats, "convs": convs.reindex(index),
                "cat_codes": codes.astype(np.int64), "n_cats": len(uniq), "positions": {}}


def _intersections(sets: list[frozenset[str]]) -> np.ndarray:
    """|a ∩ b| for every pair of ``sets`` (a square int matrix, smallest dtype that holds it)."""
    from scipy import sparse   # scikit-learn's own dependency

    vocab: dict[str, int] = {}
    indices = [vocab.setdefault(term, len(vocab)) for s in sets for term in s]
    indptr = np.cumsum([0] + [len(s) for s in sets])
    m = sparse.csr_matrix((np.ones(len(indices), dtype=np.int32), indices, indptr),
                          shape=(len(sets), max(len(vocab), 1)))
    inter = (m @ m.T).toarray()
    top = int(inter.max()) if inter.size else 0
    return inter.astype(np.uint8 if top < 256 else np.uint16 if top < 65536 else np.int64)


def prepared(rep: Replayed) -> Prepared:
    """The :class:`Prepared` arrays of ``rep``, made on first call and kept while ``rep`` lives
    (by identity: a Replayed is not changed after it is made; nothing is added to it, so it
    pickles as before)."""
    got = _MEMO.get(id(rep))
    if got is None or got[0]() is not rep:
        prep = Prepared(rep)
        kernels.warm()                # compile (or load) the kernels before any timed call
        _MEMO[id(rep)] = (weakref.ref(rep), prep)
        weakref.finalize(rep, _MEMO.pop, id(rep), None)
        return prep
    return got[1]

"""MemoryIndex: recall's in-process read path over ``memory_records``, kept in step with SQLite.

SQLite stays the truth. Recall reads, for every query, the permanent, lexical (BM25) and entity
candidates and then the stored signals of a few hundred memories; through SQL that is several
statements and a JSON decode per candidate (tens of milliseconds at 10k-100k memories). This index
holds the same data as arrays — one *position* per stored version of a memory — and answers the
same calls as :class:`~memlab.store.repository.Repository` with the same results
(``permanent_candidates``, ``lexical_candidates``, ``entity_candidates``, ``entity_matches``,
``feature_columns``, ``key_bm25``: the expanded-key field's BM25 from its own document
frequencies and totals; parity-tested), so :func:`memlab.recall.candidates.build_features` takes either.

Keeping in step (schema version 2): triggers on ``memory_records`` count every insert, delete and
update of a column read here in ``memory_generation.gen`` and log the rowid in ``memory_changes``.
:meth:`MemoryIndex.sync` compares that generation with its own and re-reads only the logged rows,
inside one read transaction (a consistent snapshot), whoever wrote them: this process, another
one, any code path. A row whose searchable state, owner, terms, entities, id, text or speaker
changed gets a new position (the old one is dead); other changes (reinforcement, importance,
times) are applied in place. The speaker is not among the trigger's columns (a migration would
be needed): it changes only through the whole-record update, which sets the text and the other
columns too, so the change is logged. When dead positions outnumber live ones the index reloads itself. It never syncs inside a
caller's write transaction, whose writes could still roll back: :meth:`Store.signals` then answers
from SQL. Inside a read snapshot (:func:`~memlab.store.snapshot.read_snapshot`) it syncs to that
snapshot: recall runs all its reads in one (:meth:`Store.read`), so the index and the dense route
always describe the same store.

BM25 is the repository's formula over the same statistics (per owner: searchable memories N, their
total term count, document frequencies): ``idf(t) * (k1 + 1) / (1 + k1 * (1 - b + b * dl / avgdl))``
summed over the matched query terms, ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Collection, Sequence
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, StoreInconsistent
from memlab.types import COGNITIVE_CODES, LAYER_CODES

from .connect import Connection
from .rowmap import RowMap
from .snapshot import in_write_transaction, read_snapshot

_COLUMNS = ("rowid, id, text, owner, retention_layer, cognitive_layer, importance, access_count, "
            "mention_count, timestamp, event_time, last_accessed, emotion_max, pinned, "
            "lifecycle_state = 'active' AND deprecated = 0, terms_json, n_terms, "
            "lifecycle_state = 'superseded' AND deprecated = 0, speaker, session_id, keys_json")
_LINKS = ("SELECT l.rowid, e.name FROM memory_entity_links l JOIN memory_entities e "
          "ON e.id = l.entity_id")
# numeric per-position columns: name -> dtype
_ARRAYS = {"rowid": np.int64, "owner": np.int64, "searchable": bool, "live": bool,
           "superseded": bool,
           "layer": np.int8, "cognitive": np.int8, "importance": np.float64,
           "access_count": np.int64, "mention_count": np.int64, "timestamp": np.float64,
           "event_time": np.float64, "last_accessed": np.float64, "emotion_max": np.float64,
           "pinned": bool, "text_len": np.int64, "dl": np.int64, "t_start": np.int64,
           "t_len": np.int64, "e_start": np.int64, "e_len": np.int64, "session": np.int64,
           "k_start": np.int64, "k_len": np.int64}
_SHIFT = 32  # posting key: owner << 32 | term or entity id


def _scalar_columns(cols: Sequence[tuple]) -> dict[str, list]:
    """The per-position values of rows read with ``_COLUMNS`` (given column-wise) that may change
    in place: everything but rowid, id, text, owner, searchability and terms."""
    nan = math.nan
    return {"layer": [LAYER_CODES[v] for v in cols[4]],
            "cognitive": [COGNITIVE_CODES[v] for v in cols[5]],
            "importance": list(cols[6]), "access_count": list(cols[7]),
            "mention_count": list(cols[8]), "timestamp": list(cols[9]),
            "event_time": [nan if v is None else v for v in cols[10]],
            "last_accessed": [nan if v is None else v for v in cols[11]],
            "emotion_max": list(cols[12]), "pinned": [bool(v) for v in cols[13]],
            "dl": list(cols[16]), "superseded": [bool(v) for v in cols[17]]}


class _Postings:
    """Positions holding one (owner, term) or (owner, entity): an array, an append tail and a
    flag saying some position in it may have died."""

    __slots__ = ("arr", "tail", "dirty")

    def __init__(self, arr: np.ndarray | None = None) -> None:
        self.arr = np.zeros(0, np.int64) if arr is None else arr
        self.tail: list[int] = []
        self.dirty = False

    def get(self, live: np.ndarray) -> np.ndarray:
        if self.tail:
            self.arr = np.concatenate([self.arr, np.asarray(self.tail, np.int64)])
            self.tail = []
        if self.dirty:
            self.arr = self.arr[live[self.arr]]
            self.dirty = False
        return self.arr


class MemoryIndex:
    """The in-process copy of what recall reads. Use :meth:`load`, then :meth:`sync` before reads.

    Args:
        config: the root config (``recall.bm25_k1`` and ``recall.bm25_b`` by default).
    """

    def __init__(self, *, config: MemlabConfig | None = None) -> None:
        self.config = config if config is not None else MemlabConfig()
        self.generation = -1
        self._n = 0
        self._cap = 0
        self._a: dict[str, np.ndarray] = {k: np.zeros(0, t) for k, t in _ARRAYS.items()}
        self._ids: list[str] = []
        self._texts: list[str] = []
        self._speakers: list[str] = []
        self._eflat = np.zeros(0, np.int64)     # entity ids of every position, back to back
        self._eflat_n = 0
        self._flat = np.zeros(0, np.int64)      # term ids of every position, back to back
        self._flat_n = 0
        self._vocab: dict[str, int] = {}
        self._words: list[str] = []
        self._kflat = np.zeros(0, np.int64)     # expanded-key ids of every position, back to back
        self._kflat_n = 0
        self._kvocab: dict[str, int] = {}
        self._kdf: dict[int, int] = {}          # owner << 32 | key id -> searchable holders
        self._ktotal: dict[int, int] = {}       # owner -> keys of its searchable positions
        self._entity_ids: dict[str, int] = {}
        self._where = RowMap()                  # rowid -> its live position
        self._post: dict[int, _Postings] = {}
        self._epost: dict[int, _Postings] = {}
        self._sessions: dict[tuple[int, str], int] = {}   # (owner, session_id) -> session code
        self._spost: dict[int, _Postings] = {}            # session code -> its positions
        self._owners: dict[tuple[str, str], int] = {}
        self._n_docs: dict[int, int] = {}
        self._total: dict[int, int] = {}
        self._dead = 0

    # -- loading and keeping in step -------------------------------------------------------------
    @classmethod
    def load(cls, conn: Connection, *, config: MemlabConfig | None = None) -> "MemoryIndex":
        """An index holding every memory of the store (one snapshot)."""
        index = cls(config=config)
        index._reload(conn)
        return index

    def _reload(self, conn: Connection) -> None:
        _check_committed(conn)
        self.__init__(config=self.config)
        with read_snapshot(conn):
            self.generation = _generation(conn)
            self._read_owners(conn)
            links: dict[int, list[str]] = {}
            for r, name in conn.execute(_LINKS):
                links.setdefault(r, []).append(name)
            rows = conn.execute(f"SELECT {_COLUMNS} FROM memory_records ORDER BY rowid").fetchall()
        self._append_rows(rows, links, bulk=True)

    def sync(self, conn: Connection) -> int:
        """Apply every change logged since this index's generation; returns the rows re-read
        (-1 after a full reload). Outside any transaction or inside a read snapshot
        (:func:`~memlab.store.snapshot.read_snapshot`: the index then matches that snapshot);
        never inside a write transaction, whose writes could still roll back."""
        _check_committed(conn)
        gen = _generation(conn)
        if gen == self.generation:
            return 0
        if gen < self.generation:   # the counter went back: another database file, a restore
            self._reload(conn)
            return -1
        with read_snapshot(conn):
            gen = _generation(conn)
            changed = [r for (r,) in conn.execute(
                "SELECT row FROM memory_changes WHERE seq > ? ORDER BY row", (self.generation,))]
            rows, links = self._read(conn, changed)
            self._read_owners(conn)
        self._apply(changed, rows, links)
        self.generation = gen
        if self._dead > max(1024, self._n - self._dead):
            self._reload(conn)
            return -1
        return len(changed)

    def _read(self, conn: Connection, rowids: list[int]
              ) -> tuple[dict[int, tuple], dict[int, list[str]]]:
        arg = (json.dumps(rowids),)
        rows = {r[0]: r for r in conn.execute(
            f"SELECT {_COLUMNS} FROM memory_records WHERE rowid IN (SELECT value FROM json_each(?))",
            arg)}
        links: dict[int, list[str]] = {}
        for r, name in conn.execute(
                f"{_LINKS} WHERE l.rowid IN (SELECT value FROM json_each(?))", arg):
            links.setdefault(r, []).append(name)
        return rows, links

    def _read_owners(self, conn: Connection) -> None:
        self._owners = {(a, u): o for o, a, u in conn.execute(
            "SELECT id, agent_id, user_id FROM memory_owners")}

    def _apply(self, changed: list[int], rows: dict[int, tuple], links: dict[int, list[str]]
               ) -> None:
        fresh: list[tuple] = []
        in_place: list[int] = []
        same: list[tuple] = []
        for rowid in changed:
            old = self._where.get(rowid)
            row = rows.get(rowid)
            if row is None:                      # deleted
                if old >= 0:
                    self._kill(old)
                continue
            if old >= 0 and self._same_identity(old, row, links.get(rowid, ())):
                in_place.append(old)
                same.append(row)
                continue
            if old >= 0:
                self._kill(old)
            fresh.append(row)
        if in_place:
            for name, values in _scalar_columns(list(zip(*same))).items():
                self._a[name][in_place] = values
        if fresh:
            self._append_rows(fresh, links, bulk=False)

    def _same_identity(self, p: int, row: tuple, names: Sequence[str]) -> bool:
        a = self._a
        if (row[1] != self._ids[p] or row[2] != self._texts[p] or int(row[3]) != a["owner"][p]
                or bool(row[14]) != a["searchable"][p] or row[18] != self._speakers[p]
                or self._session_code(int(row[3]), row[19], create=False) != a["session"][p]):
            return False
        s, n = int(a["t_start"][p]), int(a["t_len"][p])
        terms = list(dict.fromkeys(json.loads(row[15])))
        if len(terms) != n or [self._vocab.get(t, -1) for t in terms] != \
                self._flat[s:s + n].tolist():
            return False
        s, n = int(a["k_start"][p]), int(a["k_len"][p])
        if [self._kvocab.get(k, -1) for k in dict.fromkeys(json.loads(row[20]))] != \
                self._kflat[s:s + n].tolist():
            return False
        s, n = int(a["e_start"][p]), int(a["e_len"][p])
        return sorted(self._entity_ids.get(e, -1) for e in dict.fromkeys(names)) == \
            sorted(self._eflat[s:s + n].tolist())

    def _kill(self, p: int) -> None:
        a = self._a
        a["live"][p] = False
        if a["session"][p] >= 0:
            self._spost[int(a["session"][p])].dirty = True
        self._dead += 1
        self._where.clear(int(a["rowid"][p]), p)
        o = int(a["owner"][p])
        if a["searchable"][p]:
            self._n_docs[o] -= 1
            self._total[o] -= int(a["dl"][p])
            s, n = int(a["t_start"][p]), int(a["t_len"][p])
            for t in self._flat[s:s + n].tolist():
                self._post[(o << _SHIFT) | t].dirty = True
            s, n = int(a["e_start"][p]), int(a["e_len"][p])
            for e in self._eflat[s:s + n].tolist():
                self._epost[(o << _SHIFT) | e].dirty = True
            s, n = int(a["k_start"][p]), int(a["k_len"][p])
            self._ktotal[o] -= n
            for k in self._kflat[s:s + n].tolist():
                self._kdf[(o << _SHIFT) | k] -= 1

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(need, 2 * self._cap, 1024)
        for k, arr in self._a.items():
            out = np.zeros(cap, arr.dtype)
            out[:self._n] = arr[:self._n]
            self._a[k] = out
        self._cap = cap

    def _tid(self, term: str) -> int:
        i = self._vocab.get(term)
        if i is None:
            i = self._vocab[term] = len(self._words)
            self._words.append(term)
        return i

    def _session_code(self, owner: int, session_id: str, *, create: bool = True) -> int:
        """The code of an owner's session (-1: no session; -2: not seen, when not ``create``)."""
        if not session_id:
            return -1
        code = self._sessions.get((owner, session_id))
        if code is None:
            if not create:
                return -2
            code = self._sessions[(owner, session_id)] = len(self._sessions)
        return code

    def _kid(self, key: str) -> int:
        i = self._kvocab.get(key)
        if i is None:
            i = self._kvocab[key] = len(self._kvocab)
        return i

    def _eid(self, name: str) -> int:
        i = self._entity_ids.get(name)
        if i is None:
            i = self._entity_ids[name] = len(self._entity_ids)
        return i

    def _append_rows(self, rows: Sequence[tuple], links: dict[int, list[str]], *, bulk: bool
                     ) -> None:
        m = len(rows)
        if not m:
            return
        start = self._n
        self._grow(start + m)
        a = self._a
        lens, flat_new = self._flat_append(
            "_flat", [list(dict.fromkeys(json.loads(row[15]))) for row in rows], self._tid)
        e_lens, e_flat = self._flat_append(
            "_eflat", [list(dict.fromkeys(links.get(row[0], ()))) for row in rows], self._eid)
        k_lens, k_flat = self._flat_append(
            "_kflat", [list(dict.fromkeys(json.loads(row[20]))) for row in rows], self._kid)
        s = slice(start, start + m)
        cols = list(zip(*rows))
        a["rowid"][s] = cols[0]
        a["owner"][s] = cols[3]
        a["searchable"][s] = [bool(v) for v in cols[14]]
        a["live"][s] = True
        for name, values in _scalar_columns(cols).items():
            a[name][s] = values
        a["text_len"][s] = [len(t) for t in cols[2]]
        a["session"][s] = [self._session_code(int(o), sid) for o, sid in zip(cols[3], cols[19])]
        a["t_start"][s] = self._flat_n - lens.sum() + np.cumsum(lens) - lens
        a["t_len"][s] = lens
        a["e_start"][s] = self._eflat_n - e_lens.sum() + np.cumsum(e_lens) - e_lens
        a["e_len"][s] = e_lens
        a["k_start"][s] = self._kflat_n - k_lens.sum() + np.cumsum(k_lens) - k_lens
        a["k_len"][s] = k_lens
        self._ids.extend(cols[1])
        self._texts.extend(cols[2])
        self._speakers.extend(cols[18])
        self._where.set(a["rowid"][s], np.arange(start, start + m))
        self._n = start + m

        pos = np.arange(start, start + m, dtype=np.int64)
        for code, p in zip(a["session"][s].tolist(), pos.tolist()):   # sessions: every position
            if code >= 0:
                got = self._spost.get(code)
                if got is None:
                    got = self._spost[code] = _Postings()
                got.tail.append(p)
        # statistics and postings of the searchable ones
        owner = a["owner"][s]
        srch = a["searchable"][s]
        for o, t in zip(owner[srch].tolist(), a["dl"][s][srch].tolist()):
            self._n_docs[o] = self._n_docs.get(o, 0) + 1
            self._total[o] = self._total.get(o, 0) + t
        if not srch.any():
            return
        for o, n in zip(owner[srch].tolist(), k_lens[srch].tolist()):   # the key field's
            self._ktotal[o] = self._ktotal.get(o, 0) + n
        if k_lens[srch].sum():
            k_key = (np.repeat(owner[srch], k_lens[srch]) << _SHIFT) | k_flat[
                np.repeat(srch, k_lens)]
            for k, n in zip(*np.unique(k_key, return_counts=True)):
                k = int(k)
                self._kdf[k] = self._kdf.get(k, 0) + int(n)
        p_pos = np.repeat(pos[srch], lens[srch])
        p_key = (np.repeat(owner[srch], lens[srch]) << _SHIFT) | flat_new[
            np.repeat(srch, lens)]
        self._add_postings(self._post, p_key, p_pos, bulk=bulk)
        if e_lens[srch].sum():
            e_key = (np.repeat(owner[srch], e_lens[srch]) << _SHIFT) | e_flat[
                np.repeat(srch, e_lens)]
            self._add_postings(self._epost, e_key, np.repeat(pos[srch], e_lens[srch]), bulk=bulk)

    def _flat_append(self, name: str, lists: list[list[str]], to_id: Callable[[str], int]
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Append the ids of string lists to the flat buffer ``name``; (lengths, the new ids
        back to back). Strings are factorised first, so ``to_id`` runs once per distinct one."""
        lens = np.fromiter((len(x) for x in lists), np.int64, count=len(lists))
        total = int(lens.sum())
        strings = np.fromiter(itertools.chain.from_iterable(lists), object, count=total)
        codes, uniques = pd.factorize(strings)
        new = np.fromiter((to_id(u) for u in uniques), np.int64, count=len(uniques))[codes] \
            if total else np.zeros(0, np.int64)
        flat, used = getattr(self, name), getattr(self, name + "_n")
        if used + total > len(flat):
            grown = np.zeros(max(used + total, 2 * len(flat), 4096), np.int64)
            grown[:used] = flat[:used]
            flat = grown
            setattr(self, name, flat)
        flat[used:used + total] = new
        setattr(self, name + "_n", used + total)
        return lens, new

    @staticmethod
    def _add_postings(table: dict[int, _Postings], keys: np.ndarray, pos: np.ndarray, *,
                      bulk: bool) -> None:
        order = np.argsort(keys, kind="stable")
        keys, pos = keys[order], pos[order]
        uniq, starts = np.unique(keys, return_index=True)
        ends = np.r_[starts[1:], len(keys)]
        for k, s, e in zip(uniq.tolist(), starts.tolist(), ends.tolist()):
            p = table.get(k)
            if p is None:
                table[k] = _Postings(pos[s:e].copy() if not bulk else pos[s:e])
            else:
                p.tail.extend(pos[s:e].tolist())

    # -- reads: the Repository's candidate and signal calls --------------------------------------
    def __len__(self) -> int:
        return self._n - self._dead

    def _owner(self, agent_id: str, user_id: str) -> int | None:
        return self._owners.get((agent_id, user_id))

    def permanent_candidates(self, *, agent_id: str, user_id: str, limit: int) -> np.ndarray:
        """As :meth:`Repository.permanent_candidates`: most important, then newest, then rowid."""
        o = self._owner(agent_id, user_id)
        if o is None or limit <= 0:
            return np.zeros(0, np.int64)
        a, n = self._a, self._n
        idx = np.flatnonzero(a["live"][:n] & a["searchable"][:n] & (a["owner"][:n] == o)
                             & (a["layer"][:n] == LAYER_CODES["permanent"]))
        order = np.lexsort((a["rowid"][idx], -a["timestamp"][idx], -a["importance"][idx]))
        return a["rowid"][idx[order[:int(limit)]]]

    def superseded_candidates(self, *, agent_id: str, user_id: str, limit: int,
                              since: float | None = None, until: float | None = None
                              ) -> np.ndarray:
        """As :meth:`Repository.superseded_candidates`: newest first, then rowid."""
        o = self._owner(agent_id, user_id)
        if o is None or limit <= 0:
            return np.zeros(0, np.int64)
        a, n = self._a, self._n
        mask = a["live"][:n] & a["superseded"][:n] & (a["owner"][:n] == o)
        if since is not None or until is not None:
            t = np.where(np.isnan(a["event_time"][:n]), a["timestamp"][:n], a["event_time"][:n])
            mask &= (t >= (-math.inf if since is None else since)) & \
                (t < (math.inf if until is None else until))
        idx = np.flatnonzero(mask)
        order = np.lexsort((a["rowid"][idx], -a["timestamp"][idx]))
        return a["rowid"][idx[order[:int(limit)]]]

    def lexical_candidates(self, terms: Sequence[str], *, agent_id: str, user_id: str, limit: int,
                           k1: float | None = None, b: float | None = None
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`Repository.lexical_candidates`: (rowids, distinct matched query terms, BM25),
        best first, ties by rowid."""
        rc = self.config.recall
        k1 = rc.bm25_k1 if k1 is None else float(k1)
        b = rc.bm25_b if b is None else float(b)
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float64))
        o = self._owner(agent_id, user_id)
        if o is None or limit <= 0:
            return empty
        n_docs = self._n_docs.get(o, 0)
        if n_docs == 0:
            return empty
        live = self._a["live"]
        lists, idfs = [], []
        for t in dict.fromkeys(t for t in terms if isinstance(t, str) and t):
            tid = self._vocab.get(t)
            p = None if tid is None else self._post.get((o << _SHIFT) | tid)
            if p is None:
                continue
            arr = p.get(live)
            if len(arr):
                lists.append(arr)
                idfs.append(math.log(1.0 + (n_docs - len(arr) + 0.5) / (len(arr) + 0.5)))
        if not lists:
            return empty
        if sum(len(x) for x in lists) * 8 < self._n:   # few postings: sort them
            allpos = np.concatenate(lists)
            sizes = np.fromiter((len(x) for x in lists), np.int64, count=len(lists))
            hit, inverse = np.unique(allpos, return_inverse=True)
            acc = np.bincount(inverse, weights=np.repeat(np.asarray(idfs), sizes),
                              minlength=len(hit))
            count = np.bincount(inverse, minlength=len(hit))
        else:                                           # many: accumulate over all positions
            acc = np.zeros(self._n)
            count = np.zeros(self._n, np.int64)
            for arr, w in zip(lists, idfs):             # positions are distinct within a list
                acc[arr] += w
                count[arr] += 1
            hit = np.flatnonzero(count)
            acc, count = acc[hit], count[hit]
        avgdl = self._total[o] / n_docs
        dl = self._a["dl"][hit].astype(np.float64)
        score = acc * (k1 + 1.0) / (1.0 + k1 * (1.0 - b + b * dl / avgdl))
        rowid = self._a["rowid"][hit]
        limit = int(limit)
        if limit < len(hit):   # keep the top limit (plus ties at the cut), then order exactly
            cut = np.partition(score, len(hit) - limit)[len(hit) - limit]
            keep = np.flatnonzero(score >= cut)
            score, rowid, count = score[keep], rowid[keep], count[keep]
        order = np.lexsort((rowid, -score))[:limit]
        return rowid[order], count[order].astype(np.int32), score[order]

    def key_bm25(self, terms: Sequence[str], rowids: Sequence[int], *, agent_id: str,
                 user_id: str, k1: float | None = None, b: float | None = None) -> np.ndarray:
        """As :meth:`Repository.key_bm25` (:func:`memlab.store.keyfield.key_bm25`): BM25 of these
        memories over the expanded-key field, input order."""
        rc = self.config.recall
        k1 = rc.bm25_k1 if k1 is None else float(k1)
        b = rc.bm25_b if b is None else float(b)
        pos = self._positions(rowids)
        out = np.zeros(len(pos))
        o = self._owner(agent_id, user_id)
        n_docs = 0 if o is None else self._n_docs.get(o, 0)
        if not len(pos) or not n_docs or not self._ktotal.get(o, 0):
            return out
        want, idf = [], []
        for t in dict.fromkeys(t for t in terms if isinstance(t, str) and t):
            kid = self._kvocab.get(t)
            df = 0 if kid is None else self._kdf.get((o << _SHIFT) | kid, 0)
            if df > 0:
                want.append(kid)
                idf.append(math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)))
        if not want:
            return out
        a = self._a
        starts, lens = a["k_start"][pos], a["k_len"][pos]
        total = int(lens.sum())
        if not total:
            return out
        gather = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total)
        ids = self._kflat[gather]
        order = np.argsort(want)
        sorted_want = np.asarray(want, np.int64)[order]
        at = np.minimum(np.searchsorted(sorted_want, ids), len(want) - 1)
        hit = sorted_want[at] == ids
        weight = np.where(hit, np.asarray(idf)[order][at], 0.0)
        acc = np.bincount(np.repeat(np.arange(len(pos)), lens), weights=weight,
                          minlength=len(pos))
        avgdl = self._ktotal[o] / n_docs
        dl = lens.astype(np.float64)
        return np.where(acc > 0, acc * (k1 + 1.0) / (1.0 + k1 * (1.0 - b + b * dl / avgdl)), 0.0)

    def entity_candidates(self, entities: Sequence[str], *, agent_id: str, user_id: str,
                          limit: int) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`Repository.entity_candidates`: (rowids, shared-entity counts), most shared
        first, ties by rowid."""
        o = self._owner(agent_id, user_id)
        empty = np.zeros(0, np.int64), np.zeros(0, np.int32)
        if o is None or limit <= 0:
            return empty
        live = self._a["live"]
        lists = []
        for e in dict.fromkeys(e for e in entities if e):
            eid = self._entity_ids.get(e)
            p = None if eid is None else self._epost.get((o << _SHIFT) | eid)
            if p is not None:
                lists.append(p.get(live))
        if not lists:
            return empty
        hit, counts = np.unique(np.concatenate(lists), return_counts=True)
        rowid = self._a["rowid"][hit]
        order = np.lexsort((rowid, -counts))[:int(limit)]
        return rowid[order], counts[order].astype(np.int32)

    def entity_rows(self, entities: Sequence[str], *, agent_id: str, user_id: str,
                    limit: int) -> np.ndarray:
        return self.entity_candidates(entities, agent_id=agent_id, user_id=user_id,
                                      limit=limit)[0]

    def entity_matches(self, entities: Sequence[str], rowids: Sequence[int]) -> np.ndarray:
        """Number of these entities linked to each rowid (int16, aligned with ``rowids``)."""
        want = [self._entity_ids[e] for e in dict.fromkeys(entities) if e in self._entity_ids]
        pos = self._positions(rowids)
        a = self._a
        return _csr_overlap(self._eflat, a["e_start"][pos], a["e_len"][pos],
                            np.asarray(want, np.int64)).astype(np.int16)

    def session_layout(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`Repository.session_layout`: (session: its first turn's rowid, -1 outside
        any; 0-based position by (timestamp, rowid) among the session's searchable memories;
        the session's length), from the index's session postings (no SQL)."""
        pos = self._positions(rowids)
        a = self._a
        n = len(pos)
        sess, place, length = np.full(n, -1, np.int64), np.zeros(n, np.int64), \
            np.zeros(n, np.int64)
        code = np.where(a["searchable"][pos], a["session"][pos], -1)
        wanted = np.unique(code[code >= 0])
        if not len(wanted):
            return sess, place, length
        live = a["live"]
        members = np.concatenate([self._spost[int(c)].get(live) for c in wanted.tolist()])
        members = members[a["searchable"][members]]
        m_code = a["session"][members]
        order = np.lexsort((a["rowid"][members], a["timestamp"][members], m_code))
        members, m_code = members[order], m_code[order]
        starts = np.flatnonzero(np.r_[True, m_code[1:] != m_code[:-1]])
        counts = np.diff(np.r_[starts, len(members)])
        group = np.repeat(np.arange(len(starts)), counts)
        rank = np.arange(len(members)) - starts[group]
        at = np.full(self._n, -1, np.int64)
        at[members] = np.arange(len(members))
        hit = code >= 0
        j = at[pos[hit]]
        g = group[j]
        sess[hit] = a["rowid"][members[starts[g]]]
        place[hit], length[hit] = rank[j], counts[g]
        return sess, place, length

    def _positions(self, rowids: Sequence[int]) -> np.ndarray:
        """Live positions of ``rowids``. Recall asks only for rowids its routes found in the same
        read snapshot; one the index lacks means the index is out of step with the store (an
        internal fault, not the caller's input): :class:`StoreInconsistent`, and
        :meth:`Store.read` reloads the index and reads again."""
        pos = self._where.lookup(rowids)
        if (pos < 0).any():
            missing = int(np.asarray(rowids).reshape(-1)[np.flatnonzero(pos < 0)[0]])
            raise StoreInconsistent(f"the in-process MemoryIndex (generation {self.generation}) "
                                    f"does not hold rowid {missing}, which another read of the "
                                    f"store found: the index is out of step")
        return pos

    def feature_columns(self, rowids: Sequence[int]) -> dict[str, Any]:
        """As :meth:`Repository.feature_columns`; ``terms`` is an :class:`IndexTermSets` view
        (overlap counts vectorised; a set built only when asked for)."""
        pos = self._positions(rowids)
        a = self._a
        pl = pos.tolist()
        return {
            "rowids": a["rowid"][pos],
            "ids": [self._ids[p] for p in pl],
            "texts": [self._texts[p] for p in pl],
            "importance": a["importance"][pos].astype(np.float32),
            "access_count": a["access_count"][pos].astype(np.int32),
            "mention_count": a["mention_count"][pos].astype(np.int32),
            "timestamp": a["timestamp"][pos],
            "event_time": a["event_time"][pos],
            "last_accessed": a["last_accessed"][pos],
            "emotion_max": a["emotion_max"][pos].astype(np.float32),
            "layer": a["layer"][pos],
            "cognitive": a["cognitive"][pos],
            "pinned": a["pinned"][pos],
            "text_len": a["text_len"][pos].astype(np.int32),
            "terms": IndexTermSets(self, pos),
            "speakers": [self._speakers[p] for p in pl],
        }


class IndexTermSets:
    """The term sets of some positions of a :class:`MemoryIndex` (a snapshot: a position's terms
    never change; a changed memory gets a new position)."""

    def __init__(self, index: MemoryIndex, positions: np.ndarray) -> None:
        self._vocab, self._words = index._vocab, index._words
        self._flat = index._flat
        self._start = index._a["t_start"][positions]
        self._len = index._a["t_len"][positions]

    def __len__(self) -> int:
        return len(self._start)

    def __getitem__(self, i: int) -> frozenset[str]:
        s, n = int(self._start[i]), int(self._len[i])
        words = self._words
        return frozenset(words[t] for t in self._flat[s:s + n].tolist())

    def __iter__(self) -> Iterator[frozenset[str]]:
        return (self[i] for i in range(len(self)))

    def overlap(self, query_terms: Collection[str], idx: np.ndarray) -> np.ndarray:
        """|query_terms ∩ terms(i)| for each i in ``idx`` (query terms distinct)."""
        idx = np.asarray(idx, np.int64)
        q = np.fromiter((self._vocab[t] for t in query_terms if t in self._vocab), np.int64)
        return _csr_overlap(self._flat, self._start[idx], self._len[idx], q)


def _csr_overlap(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, want: np.ndarray
                 ) -> np.ndarray:
    """For each slice ``flat[start:start+len]`` (ids distinct within it), how many ids are in
    ``want`` (distinct)."""
    out = np.zeros(len(starts), np.int64)
    total = int(lens.sum()) if len(lens) else 0
    if not len(want) or total == 0:
        return out
    offsets = np.cumsum(lens) - lens
    gather = np.repeat(starts - offsets, lens) + np.arange(total)
    hit = np.isin(flat[gather], want)
    return np.bincount(np.repeat(np.arange(len(starts)), lens)[hit], minlength=len(starts))


def _check_committed(conn: Connection) -> None:
    """The index holds committed data only: refuse a connection inside a write transaction."""
    if in_write_transaction(conn):
        raise InvalidInput("conn", "MemoryIndex needs a connection outside any write transaction "
                           "(its writes could still roll back)", "in transaction")


def _generation(conn: Connection) -> int:
    return int(conn.execute("SELECT gen FROM memory_generation").fetchone()[0])


__all__ = ["MemoryIndex", "IndexTermSets"]

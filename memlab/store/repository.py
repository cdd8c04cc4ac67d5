"""The repository: every read and write of memories, their lexical and entity index (the only SQL).

Writes are all or nothing (one ``BEGIN IMMEDIATE`` transaction each, composable into a caller's
larger one) and validated before anything is written: bad input raises
:class:`~memlab.errors.InvalidInput` naming the field and the value, and leaves the store unchanged.

Lexical recall is BM25 over the memory-term sets (Reverie §6.2). Terms are a *set* per memory, so
every matched term has tf = 1 and a memory's BM25 is::

    bm25(d) = sum_{t in q ∩ d} idf(t) * (k1 + 1) / (1 + k1 * (1 - b + b * |d| / avgdl))
    idf(t)  = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with N, df and avgdl taken over the searchable memories (active, not deprecated) of the same
(agent_id, user_id): all three are lookups (``memory_owners``, ``term_stats``), never scans.

The expanded keys (schema version 10, :mod:`memlab.write.keys`) are a second field scored the same
way (:meth:`Repository.key_bm25`) with their own statistics (``key_stats``, ``total_keys``; N is
the same searchable memories), for the candidates the routes found: they are no route.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, StoreError
from memlab.inputs import MAX_INT, MAX_TIME, MIN_TIME, check_int, check_time
from memlab.types import COGNITIVE_CODES, LAYER_CODES, ListTermSets
from memlab.types import RETENTION_LAYERS, MemoryRecord

from . import keyfield
from .cache import EmbeddingCache
from .connect import Connection, db_path, transaction
from .migrations import LATEST, schema_version
from .records import (COLUMNS, DERIVED, FIELDS, TIME_OUT_OF_RANGE_SQL, VECTOR_META_FIELDS,
                      clean_strings, from_row, ids_json, searchable, to_row, validate_record)
from .vectors import VectorCache, registered_tables

_INSERT = (f"INSERT INTO memory_records (rowid, {', '.join(COLUMNS + DERIVED)}) "
           f"VALUES ({', '.join('?' * (1 + len(COLUMNS) + len(DERIVED)))})")
#: the same with the expanded keys (schema 10): only a batch that has keys names the column, so
#: a batch without keys writes exactly the columns of every schema since 2
_INSERT_KEYS = (f"INSERT INTO memory_records (rowid, {', '.join(COLUMNS + DERIVED)}, keys_json) "
                f"VALUES ({', '.join('?' * (2 + len(COLUMNS) + len(DERIVED)))})")
_UPDATE = (f"UPDATE memory_records SET {', '.join(c + ' = ?' for c in COLUMNS + DERIVED)} "
           f"WHERE rowid = ?")
_SELECT = f"SELECT rowid, {', '.join(COLUMNS)} FROM memory_records"
_AGENT, _USER = COLUMNS.index("agent_id"), COLUMNS.index("user_id")


def _check_found(ids: Sequence[str], owner_of: dict[str, tuple[str, str]], agent_id: str | None,
                 user_id: str | None) -> None:
    """InvalidInput naming the first id that is unknown or (with a tenant) another tenant's. The
    two cases read the same, so a caller cannot learn that another tenant's id exists."""
    if agent_id is None and user_id is None:
        missing = [i for i in ids if i not in owner_of]
        if missing:
            raise InvalidInput("ids", "unknown memory id", missing[0])
        return
    for i in ids:
        a, u = owner_of.get(i, (None, None))
        if (agent_id is not None and a != agent_id) or (user_id is not None and u != user_id):
            raise InvalidInput("ids", f"no memory with this id for agent_id={agent_id!r}, "
                               f"user_id={user_id!r}", i)


#: Where memories stand in their sessions (Repository.session_layout; ?1: their rowids as JSON).
SESSION_LAYOUT_SQL = (
    "WITH c AS (SELECT DISTINCT agent_id, user_id, session_id FROM memory_records "
    "WHERE rowid IN (SELECT value FROM json_each(?1)) AND session_id != ''), "
    "m AS (SELECT r.rowid AS row, first_value(r.rowid) OVER w AS sess, "
    "row_number() OVER w - 1 AS pos, count(*) OVER (PARTITION BY r.agent_id, r.user_id, "
    "r.session_id) AS n FROM c JOIN memory_records r ON r.agent_id = c.agent_id "
    "AND r.user_id = c.user_id AND r.session_id = c.session_id "
    "WHERE r.session_id != '' AND r.lifecycle_state = 'active' AND r.deprecated = 0 "
    "WINDOW w AS (PARTITION BY r.agent_id, r.user_id, r.session_id "
    "ORDER BY r.timestamp, r.rowid)) "
    "SELECT row, sess, pos, n FROM m WHERE row IN (SELECT value FROM json_each(?1))")


class Repository:
    """Memories in SQLite: add, read, lexical/entity/permanent candidates, features, lifecycle.

    Args:
        conn: a connection from :func:`memlab.store.connect` whose schema is migrated.
        config: the root config (``recall.bm25_k1``, ``recall.bm25_b``, ``recall.max_text_chars``).
    """

    def __init__(self, conn: Connection, *, config: MemlabConfig | None = None) -> None:
        version = schema_version(conn)
        if version != LATEST:
            raise StoreError(f"{db_path(conn)}: store schema version {version}, this memlab "
                             f"needs {LATEST}: run memlab.store.migrate(conn) first",
                             path=db_path(conn))
        self.conn = conn
        self.config = config if config is not None else MemlabConfig()

    # -- writes ----------------------------------------------------------------------------------
    def add(self, records: Sequence[MemoryRecord], *, terms: Sequence[Sequence[str]],
            entities: Sequence[Sequence[str]], keys: Sequence[Sequence[str]] | None = None
            ) -> list[int]:
        """Store memories with their terms (lexical index), entities and expanded keys (None:
        none); return their rowids.

        One transaction for records, postings, term and key statistics and entity links: all or
        nothing. Terms, keys and entities are deduplicated (sets); a memory that is not
        searchable (not active, or deprecated) keeps its terms and keys on the record but gets no
        postings and counts in no statistics.
        """
        records = list(records)
        terms, entities = list(terms), list(entities)
        keys = [[] for _ in records] if keys is None else list(keys)
        for name, seq in (("terms", terms), ("entities", entities), ("keys", keys)):
            if len(seq) != len(records):
                raise InvalidInput(name, f"needs one list per record ({len(records)})", len(seq))
        seen: set[str] = set()
        for rec in records:
            validate_record(rec, max_text_chars=self.config.recall.max_text_chars)
            if rec.id in seen:
                raise InvalidInput("id", "duplicate id in the batch", rec.id)
            seen.add(rec.id)
        terms = [clean_strings(t, "terms") for t in terms]
        entities = [clean_strings(e, "entities") for e in entities]
        keys = [clean_strings(k, "keys") for k in keys]
        if not records:
            return []
        conn = self.conn
        with transaction(conn):
            dup = conn.execute("SELECT id FROM memory_records WHERE id IN "
                               "(SELECT value FROM json_each(?)) LIMIT 1",
                               (json.dumps([r.id for r in records]),)).fetchone()
            if dup:
                raise InvalidInput("id", "already stored", dup[0])
            owners = self._owners({(r.agent_id, r.user_id) for r in records}, create=True)
            start = conn.execute(
                "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = "
                "'memory_records'), 0), coalesce((SELECT max(rowid) FROM memory_records), 0))"
            ).fetchone()[0] + 1
            rowids = list(range(start, start + len(records)))
            if any(keys):
                conn.executemany(_INSERT_KEYS, (
                    [rid] + to_row(rec, owners[rec.agent_id, rec.user_id], t)
                    + [json.dumps(k, ensure_ascii=False) if k else "[]"]
                    for rid, rec, t, k in zip(rowids, records, terms, keys)))
            else:
                conn.executemany(_INSERT, ([rid] + to_row(rec, owners[rec.agent_id, rec.user_id], t)
                                           for rid, rec, t in zip(rowids, records, terms)))

            self._index([(rid, owners[r.agent_id, r.user_id], t)
                         for rid, r, t in zip(rowids, records, terms) if searchable(r)])
            self._key_stats([(owners[r.agent_id, r.user_id], k)
                             for r, k in zip(records, keys) if searchable(r) and k], +1)
            self._link(list(zip(rowids, entities)))
        return rowids

    def reinforce(self, rowids: Sequence[int], *, now: float, times: int = 1) -> None:
        """last_accessed = now, access_count += times (default 1) for these memories, in one
        transaction.

        The explicit step after selection; never called inside scoring. ``times`` > 1: accesses
        batched by the caller (the Familiars reader's buffered access statistics). ``now`` is a
        time memlab stores (:func:`memlab.inputs.check_time`); the count stops at
        :data:`memlab.inputs.MAX_INT` (a count of accesses never reaches it in practice).
        """
        now = check_time(now, "now")
        check_int(times, "times", lo=1)
        wanted = set(int(r) for r in rowids)
        if not wanted:
            return
        with transaction(self.conn):
            cur = self.conn.execute(
                "UPDATE memory_records SET last_accessed = ?, access_count = "
                "min(access_count + ?, ?) WHERE rowid IN (SELECT value FROM json_each(?))",
                (now, times, MAX_INT, ids_json(wanted)))
            if cur.rowcount != len(wanted):
                raise InvalidInput("rowids", "unknown rowid(s)", sorted(wanted)[:5])

    def record_accesses(self, accesses: Mapping[str, tuple[int, float]]) -> int:
        """Batched :meth:`reinforce` by memory id, in ONE transaction: ``{id: (times, last
        access time)}``, grouped by (time, times) into reinforce calls. Ids no longer stored
        (deleted since they were read) are skipped. Returns how many memories were updated."""
        if not accesses:
            return 0
        ids = list(accesses)
        found = dict(self.conn.execute(
            "SELECT id, rowid FROM memory_records WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids, ensure_ascii=False),)).fetchall())
        groups: dict[tuple[float, int], list[int]] = {}
        for i in ids:
            if i in found:
                times, at = accesses[i]
                groups.setdefault((float(at), int(times)), []).append(found[i])
        with transaction(self.conn):
            for (at, times), rows in groups.items():
                self.reinforce(rows, now=at, times=times)
        return sum(len(r) for r in groups.values())

    def reinforce_ids(self, ids: Sequence[str], *, now: float, agent_id: str | None = None,
                      user_id: str | None = None) -> int:
        """:meth:`reinforce` by memory id; returns how many memories were updated. With a tenant
        (``agent_id`` and ``user_id``), an id of another tenant is refused like an unknown one,
        before anything is written."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        with transaction(self.conn):
            self.reinforce(self.ids_to_rows(ids, agent_id=agent_id, user_id=user_id), now=now)
        return len(ids)

    def update_fields(self, id: str, /, *, terms: Sequence[str] | None = None,
                      entities: Sequence[str] | None = None, keys: Sequence[str] | None = None,
                      **fields: Any) -> MemoryRecord:
        """Change fields of one memory (validated like ``add``); return the new record.

        The lexical index, the key statistics, entity links and every vector cache follow in the
        same transaction: a new text needs new ``terms`` and drops the memory's vectors (it
        becomes pending) and its expanded keys unless new ``keys`` are given (the old text's keys
        would be wrong); a change of agent, user, layer, time or lifecycle rewrites the vector
        metadata; a memory that stops (starts) being searchable leaves (joins) both fields.
        """
        unknown = sorted(set(fields) - set(FIELDS) | ({"id"} & set(fields)))
        if unknown:
            raise InvalidInput("fields", "unknown or read-only field", unknown[0])
        old = self.get([id])[0]
        new = dataclasses.replace(old, **fields)
        text_changed = new.text != old.text
        if text_changed:
            if terms is None:
                raise InvalidInput("terms", "required when text changes", None)
            new = dataclasses.replace(new, embedding_status="pending")
        validate_record(new, max_text_chars=self.config.recall.max_text_chars)
        conn = self.conn
        with transaction(conn):
            rowid, owner, old_terms, old_keys = conn.execute(
                "SELECT rowid, owner, terms_json, keys_json FROM memory_records WHERE id = ?",
                (id,)).fetchone()
            old_terms, old_keys = json.loads(old_terms), json.loads(old_keys)
            new_terms = clean_strings(terms, "terms") if terms is not None else old_terms
            new_keys = clean_strings(keys, "keys") if keys is not None else \
                [] if text_changed else old_keys
            new_owner = self._owners({(new.agent_id, new.user_id)}, create=True)[
                new.agent_id, new.user_id]
            if (searchable(old), owner, old_terms) != (searchable(new), new_owner, new_terms):
                if searchable(old):
                    self._unindex([(rowid, owner, old_terms)])
                if searchable(new):
                    self._index([(rowid, new_owner, new_terms)])
            if (searchable(old), owner, old_keys) != (searchable(new), new_owner, new_keys):
                if searchable(old):
                    self._key_stats([(owner, old_keys)], -1)
                if searchable(new):
                    self._key_stats([(new_owner, new_keys)], +1)
            conn.execute(_UPDATE, to_row(new, new_owner, new_terms) + [rowid])
            if new_keys != old_keys:
                conn.execute("UPDATE memory_records SET keys_json = ? WHERE rowid = ?",
                             (json.dumps(new_keys, ensure_ascii=False), rowid))
            if entities is not None:
                conn.execute("DELETE FROM memory_entity_links WHERE rowid = ?", (rowid,))
                self._link([(rowid, clean_strings(entities, "entities"))])
            caches = [VectorCache.from_registry(conn, model_version=m)
                      for m in registered_tables(conn)]
            if text_changed:
                conn.execute("DELETE FROM memory_embeddings WHERE rowid = ?", (rowid,))
                conn.execute("DELETE FROM memory_windows WHERE row = ?", (rowid,))   # old text's
                for cache in caches:
                    cache.delete([rowid])
            elif any(getattr(old, f) != getattr(new, f) for f in VECTOR_META_FIELDS):
                for cache in caches:
                    cache.refresh_meta([rowid])
        return new

    def delete(self, ids: Sequence[str]) -> int:
        """Delete memories with their postings, term statistics, entity links and vectors."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return 0
        conn = self.conn
        with transaction(conn):
            rows = conn.execute(
                "SELECT rowid, owner, terms_json, lifecycle_state, deprecated, keys_json "
                "FROM memory_records WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(ids),)).fetchall()
            if len(rows) != len(ids):
                found = set(self.rows_to_ids([r[0] for r in rows]))
                raise InvalidInput("ids", "unknown memory id", next(i for i in ids if i not in found))
            self._unindex([(r[0], r[1], json.loads(r[2])) for r in rows
                           if r[3] == "active" and not r[4]])
            self._key_stats([(r[1], json.loads(r[5])) for r in rows
                             if r[3] == "active" and not r[4]], -1)
            rowids = [r[0] for r in rows]
            for model in registered_tables(conn):
                VectorCache.from_registry(conn, model_version=model).delete(rowids)
            conn.execute("DELETE FROM memory_records WHERE rowid IN (SELECT value FROM json_each(?))",
                         (ids_json(rowids),))
        return len(rows)

    # -- embedding status ------------------------------------------------------------------------
    def pending(self, model_version: str, *, limit: int) -> list[int]:
        """Rowids (ascending) of memories with no vector for ``model_version`` yet (not those
        this version gives no vector: embedding_status 'none', :meth:`mark_no_vector`), less those
        whose times are outside the range memlab stores (stored before it checked them: they
        cannot be given a vector row; ``memlab store check`` reports them)."""
        return [r[0] for r in self.conn.execute(
            "SELECT rowid FROM memory_records r WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e "
            "WHERE e.rowid = r.rowid AND e.model_version = ?3) AND NOT (r.embedding_status = 'none' "
            f"AND r.embedding_model_version = ?3) AND NOT {TIME_OUT_OF_RANGE_SQL} "
            "ORDER BY rowid LIMIT ?4", (MIN_TIME, MAX_TIME, model_version, int(limit)))]

    def mark_no_vector(self, rowids: Sequence[int], model_version: str) -> None:
        """Record that ``model_version`` gives these memories no vector (an all-zero embedding:
        cosine is undefined): embedding_status 'none'. They are searched lexically and are not
        pending for that version."""
        rowids = [int(r) for r in rowids]
        if not rowids:
            return
        with transaction(self.conn):
            self._by_rowid("SELECT rowid FROM memory_records", rowids)   # unknown -> InvalidInput
            self.conn.execute(
                "DELETE FROM memory_embeddings WHERE model_version = ? AND rowid IN "
                "(SELECT value FROM json_each(?))", (model_version, ids_json(rowids)))
            self.conn.execute(
                "UPDATE memory_records SET embedding_status = 'none', embedding_model_version = ? "
                "WHERE rowid IN (SELECT value FROM json_each(?))", (model_version, ids_json(rowids)))

    def mark_embedded(self, rowids: Sequence[int], model_version: str, *,
                      text_hashes: Sequence[str] | None = None) -> None:
        """Record that these memories have a vector for ``model_version``, embedded from the texts
        whose sha256 are ``text_hashes`` (default: the memory text itself). A rebuild of the vector
        cache finds the vectors in the embedding cache under these hashes."""
        rowids = [int(r) for r in rowids]
        if text_hashes is not None and len(text_hashes) != len(rowids):
            raise InvalidInput("text_hashes", f"needs one per rowid ({len(rowids)})",
                               len(text_hashes))
        with transaction(self.conn):
            hashes = list(text_hashes) if text_hashes is not None else \
                [r[1] for r in self._by_rowid("SELECT rowid, text_hash FROM memory_records", rowids)]
            self.conn.executemany(
                "INSERT OR REPLACE INTO memory_embeddings (rowid, model_version, text_hash) "
                "VALUES (?, ?, ?)", [(r, model_version, h) for r, h in zip(rowids, hashes)])
            self.conn.execute(
                "UPDATE memory_records SET embedding_status = 'ready', embedding_model_version = ? "
                "WHERE rowid IN (SELECT value FROM json_each(?))", (model_version, ids_json(rowids)))

    def put_vectors(self, cache: VectorCache, rowids: Sequence[int], vectors: Any, *,
                    texts: Sequence[str] | None = None, meta: Sequence[Any] | None = None,
                    new: bool = False) -> int:
        """Store memories' vectors in one transaction: the vector table, the embedding cache (under
        the texts embedded: ``texts``, default the memory texts; a vector that differs from the
        one cached for its text under a key of its own: :meth:`EmbeddingCache.put_own`) and the
        embedded marks, so the vector table can always be rebuilt with each memory's own vector.
        Returns the table's new generation (for ExactIndex). ``meta`` and ``new``: as
        :meth:`VectorCache.upsert` (a write that has just inserted the records gives both: no
        read back, no delete)."""
        rowids = [int(r) for r in rowids]
        arr = cache.check_vectors(vectors, len(rowids))
        if texts is not None and len(texts) != len(rowids):
            raise InvalidInput("texts", f"needs one per rowid ({len(rowids)})", len(texts))
        with transaction(self.conn):
            if texts is None:
                texts = [r[1] for r in self._by_rowid("SELECT rowid, text FROM memory_records",
                                                      rowids)]
            keys = EmbeddingCache(self.conn).put_own(cache.model_version, texts, arr)
            generation = cache.upsert(rowids, arr, meta, new=new)
            self.mark_embedded(rowids, cache.model_version, text_hashes=keys)
        return generation

    # -- reads -----------------------------------------------------------------------------------
    def count(self, *, agent_id: str | None = None, user_id: str | None = None) -> int:
        """Number of stored memories (every lifecycle state), optionally of one agent/user."""
        sql, args = "SELECT count(*) FROM memory_records WHERE 1", []
        for col, v in (("agent_id", agent_id), ("user_id", user_id)):
            if v is not None:
                sql, args = sql + f" AND {col} = ?", args + [v]
        return int(self.conn.execute(sql, args).fetchone()[0])

    def get(self, ids: Sequence[str], *, agent_id: str | None = None,
            user_id: str | None = None) -> list[MemoryRecord]:
        """Records by id, in input order; an unknown id raises InvalidInput. With a tenant
        (``agent_id`` and ``user_id``), another tenant's id is refused like an unknown one."""
        ids = list(ids)
        rows = {r[1]: r for r in self.conn.execute(
            f"{_SELECT} WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))}
        at = {i: (r[1 + _AGENT], r[1 + _USER]) for i, r in rows.items()}
        _check_found(ids, at, agent_id, user_id)
        return [from_row(rows[i]) for i in ids]

    def with_ttl(self, *, agent_id: str | None = None, user_id: str | None = None
                 ) -> list[MemoryRecord]:
        """Active, not deprecated records that carry a TTL (Familiars §5.3.3; the TTL sweep of
        :mod:`memlab.lifecycle.ttl`), optionally of one agent/user, oldest rowid first."""
        sql, args = (f"{_SELECT} WHERE lifecycle_state = 'active' AND deprecated = 0 "
                     "AND ttl_json IS NOT NULL", [])
        for col, v in (("agent_id", agent_id), ("user_id", user_id)):
            if v is not None:
                sql, args = sql + f" AND {col} = ?", args + [v]
        return [from_row(r) for r in self.conn.execute(sql + " ORDER BY rowid", args)]

    def by_source(self, source_type: str, *, agent_id: str, user_id: str) -> list[MemoryRecord]:
        """Records of one agent and user written from one source (``source_type``: e.g. the
        character card's anchors), oldest rowid first."""
        return [from_row(r) for r in self.conn.execute(
            f"{_SELECT} WHERE agent_id = ? AND user_id = ? AND source_type = ? ORDER BY rowid",
            (agent_id, user_id, source_type))]

    def texts_containing(self, needles: Sequence[str], *, agent_id: str, user_id: str,
                         exclude: Sequence[str] = ()) -> list[str]:
        """Texts of the active memories of one agent and user (ids in ``exclude`` left out) that
        contain any of ``needles`` (lower-cased text; ASCII case folded by SQLite's lower())."""
        needles = list(dict.fromkeys(n.lower() for n in needles if n))
        if not needles:
            return []
        match = " OR ".join("instr(lower(text), ?) > 0" for _ in needles)
        return [r[0] for r in self.conn.execute(
            "SELECT text FROM memory_records WHERE agent_id = ? AND user_id = ? AND "
            "lifecycle_state = 'active' AND deprecated = 0 AND id NOT IN (SELECT value FROM "
            f"json_each(?)) AND ({match}) ORDER BY rowid",
            (agent_id, user_id, json.dumps(list(exclude), ensure_ascii=False), *needles))]

    def count_ids(self, ids: Sequence[str], *, agent_id: str, user_id: str) -> int:
        """How many of these ids are memories of this agent and user."""
        return int(self.conn.execute(
            "SELECT count(*) FROM memory_records WHERE agent_id = ? AND user_id = ? AND id IN "
            "(SELECT value FROM json_each(?))", (agent_id, user_id, json.dumps(list(ids)))
        ).fetchone()[0])

    def get_rows(self, rowids: Sequence[int]) -> list[MemoryRecord]:
        """Records by rowid, in input order; an unknown rowid raises InvalidInput."""
        return [from_row(r) for r in self._by_rowid(_SELECT, rowids)]

    def ids_to_rows(self, ids: Sequence[str], *, agent_id: str | None = None,
                    user_id: str | None = None) -> list[int]:
        """Rowids of these ids, in input order; an unknown id (or, with a tenant, another
        tenant's id) raises InvalidInput."""
        ids = list(ids)
        rows = self.conn.execute("SELECT id, rowid, agent_id, user_id FROM memory_records WHERE id "
                                 "IN (SELECT value FROM json_each(?))", (json.dumps(ids),)).fetchall()
        _check_found(ids, {r[0]: (r[2], r[3]) for r in rows}, agent_id, user_id)
        found = {r[0]: r[1] for r in rows}
        return [found[i] for i in ids]

    def rows_to_ids(self, rowids: Sequence[int]) -> list[str]:
        """Ids of these rowids, in input order; an unknown rowid raises InvalidInput."""
        return [r[1] for r in self._by_rowid("SELECT rowid, id FROM memory_records", rowids)]

    def _by_rowid(self, select: str, rowids: Sequence[int]) -> list[tuple]:
        """Rows of ``select`` (first column rowid) for these rowids, in input order."""
        rowids = [int(r) for r in rowids]
        found = {r[0]: r for r in self.conn.execute(
            f"{select} WHERE rowid IN (SELECT value FROM json_each(?))", (ids_json(rowids),))}
        missing = [r for r in rowids if r not in found]
        if missing:
            raise InvalidInput("rowids", "unknown rowid", missing[0])
        return [found[r] for r in rowids]

    # -- candidates ------------------------------------------------------------------------------
    def lexical_candidates(self, terms: Sequence[str], *, agent_id: str, user_id: str, limit: int,
                           k1: float | None = None, b: float | None = None,
                           common_df_fraction: float = 0.05
                           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Searchable memories of (agent, user) sharing terms with the query, top ``limit`` by BM25.

        Returns (rowids int64, match_counts int32 = distinct query terms present, bm25 float64),
        best first (ties by rowid). ``k1``/``b`` default to ``recall.bm25_k1``/``bm25_b``. Index
        lookups only: the term statistics by (owner, term), the postings by (owner, term).

        Speed (the result is exact either way, MaxScore): query terms in more than
        ``common_df_fraction`` of the owner's memories are not scanned at first; the memories
        holding a rarer term are scored in full (common terms by point lookups), and when the
        best any other memory could reach from common terms alone stays below the ``limit``-th
        score, that is the answer; otherwise every posting is scanned.
        """
        k1 = self.config.recall.bm25_k1 if k1 is None else float(k1)
        b = self.config.recall.bm25_b if b is None else float(b)
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float64))
        q = list(dict.fromkeys(t for t in terms if isinstance(t, str) and t))
        owner = self._owners({(agent_id, user_id)}, create=False).get((agent_id, user_id))
        if not q or limit <= 0 or owner is None:
            return empty
        n_docs, total = self.conn.execute(
            "SELECT n_docs, total_terms FROM memory_owners WHERE id = ?", (owner,)).fetchone()
        if n_docs == 0:
            return empty
        dfs = self.conn.execute(
            "SELECT term, df FROM term_stats WHERE owner = ? AND df > 0 AND term IN "
            "(SELECT value FROM json_each(?))", (owner, json.dumps(q, ensure_ascii=False))).fetchall()
        if not dfs:
            return empty
        avgdl = total / n_docs
        idf = {t: math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) for t, df in dfs}
        common = [t for t, df in dfs if df > common_df_fraction * n_docs]
        rare = [t for t, df in dfs if df <= common_df_fraction * n_docs]
        if common and rare:
            got = self._lexical_maxscore(owner, rare, common, idf, k1=k1, b=b, avgdl=avgdl,
                                         limit=int(limit))
            if got is not None:
                return got
        pairs = list(idf.items())
        values = ", ".join("(?, ?)" for _ in pairs)
        rows = self.conn.execute(
            f"WITH q(term, idf) AS (VALUES {values}) "
            "SELECT t.rowid, count(*), sum(q.idf) * ? / (1.0 + ? * (1.0 - ? + ? * max(t.dl) / ?)) "
            "AS s FROM q CROSS JOIN memory_terms t ON t.owner = ? AND t.term = q.term "
            "GROUP BY t.rowid ORDER BY s DESC, t.rowid LIMIT ?",
            [x for p in pairs for x in p] + [k1 + 1.0, k1, b, b, avgdl, owner, int(limit)]
        ).fetchall()
        if not rows:
            return empty
        rid, m, s = zip(*rows)
        return np.array(rid, np.int64), np.array(m, np.int32), np.array(s, np.float64)

    def _lexical_maxscore(self, owner: int, rare: list[str], common: list[str],
                          idf: dict[str, float], *, k1: float, b: float, avgdl: float, limit: int
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Exact top ``limit`` when no memory without a rare term can reach it, else None."""
        values = ", ".join("(?, ?)" for _ in rare)
        rows = self.conn.execute(
            f"WITH q(term, idf) AS (VALUES {values}) SELECT t.rowid, count(*), sum(q.idf), max(t.dl)"
            " FROM q CROSS JOIN memory_terms t ON t.owner = ? AND t.term = q.term GROUP BY t.rowid",
            [x for t in rare for x in (t, idf[t])] + [owner]).fetchall()
        if len(rows) < limit:
            return None
        rid = np.array([r[0] for r in rows], np.int64)
        m = np.array([r[1] for r in rows], np.int32)
        acc = np.array([r[2] for r in rows], np.float64)
        dl = np.array([r[3] for r in rows], np.float64)
        values = ", ".join("(?, ?)" for _ in common)
        pos = {r: i for i, r in enumerate(rid.tolist())}
        for r, n, add in self.conn.execute(
                f"WITH q(term, idf) AS (VALUES {values}) SELECT c.value, count(*), sum(q.idf) "
                "FROM json_each(?) c CROSS JOIN q CROSS JOIN memory_terms t "
                "ON t.owner = ? AND t.term = q.term AND t.rowid = c.value GROUP BY c.value",
                [x for t in common for x in (t, idf[t])] + [ids_json(rid), owner]):
            m[pos[r]] += n
            acc[pos[r]] += add
        score = acc * (k1 + 1.0) / (1.0 + k1 * (1.0 - b + b * dl / avgdl))
        order = np.lexsort((rid, -score))[:limit]
        # a memory holding only common terms (length >= 1) scores at most:
        bound = sum(idf[t] for t in common) * (k1 + 1.0) / (1.0 + k1 * (1.0 - b + b / avgdl))
        if not bound < score[order[-1]]:
            return None
        return rid[order], m[order], score[order]

    def key_bm25(self, terms: Sequence[str], rowids: Sequence[int], *, agent_id: str,
                 user_id: str, k1: float | None = None, b: float | None = None) -> np.ndarray:
        """BM25 of these memories over the expanded-key field (:func:`memlab.store.keyfield.
        key_bm25`; ``k1``/``b`` default to ``recall.bm25_k1``/``bm25_b``)."""
        rc = self.config.recall
        owner = self._owners({(agent_id, user_id)}, create=False).get((agent_id, user_id))
        return keyfield.key_bm25(self.conn, terms, rowids, owner=owner,
                                 k1=rc.bm25_k1 if k1 is None else float(k1),
                                 b=rc.bm25_b if b is None else float(b))

    def permanent_candidates(self, *, agent_id: str, user_id: str, limit: int) -> np.ndarray:
        """Rowids of active, non-deprecated permanent memories: most important, then newest."""
        rows = self.conn.execute(
            "SELECT rowid FROM memory_records WHERE agent_id = ? AND user_id = ? AND "
            "retention_layer = 'permanent' AND lifecycle_state = 'active' AND deprecated = 0 "
            "ORDER BY importance DESC, timestamp DESC, rowid LIMIT ?",
            (agent_id, user_id, int(limit))).fetchall()
        return np.array([r[0] for r in rows], np.int64)

    def superseded_candidates(self, *, agent_id: str, user_id: str, limit: int,
                              since: float | None = None, until: float | None = None
                              ) -> np.ndarray:
        """Rowids of superseded, non-deprecated memories of (agent, user) (old revisions of a
        fact, for historical questions): newest first, then rowid. ``since``/``until`` bound
        event_time (else timestamp) to [since, until), as the dense route's window does."""
        rows = self.conn.execute(
            "SELECT rowid FROM memory_records WHERE agent_id = ? AND user_id = ? AND "
            "lifecycle_state = 'superseded' AND deprecated = 0 "
            "AND coalesce(event_time, timestamp) >= ? AND coalesce(event_time, timestamp) < ? "
            "ORDER BY timestamp DESC, rowid LIMIT ?",
            (agent_id, user_id, -math.inf if since is None else float(since),
             math.inf if until is None else float(until), int(limit))).fetchall()
        return np.array([r[0] for r in rows], np.int64)

    def entity_candidates(self, entities: Sequence[str], *, agent_id: str, user_id: str,
                          limit: int) -> tuple[np.ndarray, np.ndarray]:
        """Searchable memories of (agent, user) linked to any of these entities (§11.1).

        Returns (rowids int64, shared-entity counts int32), most shared first (ties by rowid).
        """
        names = list(dict.fromkeys(e for e in entities if e))
        rows = self.conn.execute(
            "SELECT l.rowid, count(*) AS n FROM memory_entities e "
            "JOIN memory_entity_links l ON l.entity_id = e.id "
            "JOIN memory_records r ON r.rowid = l.rowid "
            "WHERE e.name IN (SELECT value FROM json_each(?)) AND r.agent_id = ? AND r.user_id = ? "
            "AND r.lifecycle_state = 'active' AND r.deprecated = 0 "
            "GROUP BY l.rowid ORDER BY n DESC, l.rowid LIMIT ?",
            (json.dumps(names, ensure_ascii=False), agent_id, user_id, int(limit))).fetchall()
        return (np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int32))

    def session_layout(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where these memories stand in their sessions, in input order: (session: the rowid of
        the session's first turn, -1 outside any session; position: 0-based, by (timestamp,
        rowid) among the session's searchable memories; length: the session's searchable
        memories). A session is one owner's memories with one non-empty ``session_id``; a memory
        that is not searchable (superseded, deprecated) stands outside (-1, 0, 0). One query
        (index ``memory_records_session``, schema version 9)."""
        rowids = [int(r) for r in rowids]
        arg = ids_json(rowids)
        found = {r: (s, p, n) for r, s, p, n in self.conn.execute(SESSION_LAYOUT_SQL,
                                                                   (arg,))}
        out = np.array([found.get(r, (-1, 0, 0)) for r in rowids], np.int64).reshape(-1, 3)
        return out[:, 0].copy(), out[:, 1].copy(), out[:, 2].copy()

    def entity_rows(self, entities: Sequence[str], *, agent_id: str, user_id: str,
                    limit: int) -> np.ndarray:
        """Rowids of :meth:`entity_candidates` (without the counts)."""
        return self.entity_candidates(entities, agent_id=agent_id, user_id=user_id,
                                      limit=limit)[0]

    def layer_chars(self, layer: str, *, agent_id: str | None = None,
                    user_id: str | None = None) -> int:
        """Characters of text held by the active memories of a retention layer (the §11.3
        budget pressure), optionally of one agent/user."""
        if layer not in RETENTION_LAYERS:
            raise InvalidInput("layer", f"must be one of {RETENTION_LAYERS}", layer)
        sql = ("SELECT coalesce(sum(length(text)), 0) FROM memory_records WHERE "
               "retention_layer = ? AND lifecycle_state = 'active'")
        args: list[Any] = [layer]
        for col, v in (("agent_id", agent_id), ("user_id", user_id)):
            if v is not None:
                sql, args = sql + f" AND {col} = ?", args + [v]
        return int(self.conn.execute(sql, args).fetchone()[0])

    def entity_matches(self, entities: Sequence[str], rowids: Sequence[int]) -> np.ndarray:
        """Number of these entities linked to each rowid (int16, aligned with ``rowids``)."""
        rowids = [int(r) for r in rowids]
        names = list(dict.fromkeys(e for e in entities if e))
        out = np.zeros(len(rowids), np.int16)
        if not names or not rowids:
            return out
        counts = dict(self.conn.execute(
            "SELECT l.rowid, count(*) FROM memory_entities e "
            "JOIN memory_entity_links l ON l.entity_id = e.id "
            "WHERE e.name IN (SELECT value FROM json_each(?)) "
            "AND l.rowid IN (SELECT value FROM json_each(?)) GROUP BY l.rowid",
            (json.dumps(names, ensure_ascii=False), ids_json(rowids))))
        for i, r in enumerate(rowids):
            out[i] = counts.get(r, 0)
        return out

    def feature_columns(self, rowids: Sequence[int]) -> dict[str, Any]:
        """The stored raw signals of these memories, in input order (the recall hot path).

        Arrays: rowids, importance, access_count, mention_count, timestamp, event_time and
        last_accessed (NaN when null), emotion_max (max |emotion|, raw), layer and cognitive
        (features.LAYER_CODES / COGNITIVE_CODES), pinned, text_len; lists: texts, ids, speakers;
        terms: the
        indexed term sets (:class:`~memlab.recall.features.ListTermSets`). One query for all
        rowids; an unknown rowid raises InvalidInput.
        """
        rows = self._by_rowid(
            "SELECT rowid, id, text, importance, access_count, mention_count, timestamp, "
            "event_time, last_accessed, emotion_max, retention_layer, cognitive_layer, pinned, "
            "terms_json, speaker FROM memory_records", rowids)
        n = len(rows)
        cols = list(zip(*rows)) if rows else [()] * 15
        nan = float("nan")
        return {
            "rowids": np.array(cols[0], np.int64),
            "ids": list(cols[1]),
            "texts": list(cols[2]),
            "importance": np.array(cols[3], np.float32),
            "access_count": np.array(cols[4], np.int32),
            "mention_count": np.array(cols[5], np.int32),
            "timestamp": np.array(cols[6], np.float64),
            "event_time": np.array([nan if v is None else v for v in cols[7]], np.float64),
            "last_accessed": np.array([nan if v is None else v for v in cols[8]], np.float64),
            "emotion_max": np.array(cols[9], np.float32),
            "layer": np.array([LAYER_CODES[v] for v in cols[10]], np.int8),
            "cognitive": np.array([COGNITIVE_CODES[v] for v in cols[11]], np.int8),
            "pinned": np.array(cols[12], bool).reshape(n),
            "text_len": np.array([len(t) for t in cols[2]], np.int32),
            "terms": ListTermSets([json.loads(t) for t in cols[13]]),
            "speakers": list(cols[14]),
        }

    # -- index maintenance (inside the caller's transaction) -------------------------------------
    def _owners(self, pairs: set[tuple[str, str]], *, create: bool) -> dict[tuple[str, str], int]:
        if create:
            self.conn.executemany("INSERT OR IGNORE INTO memory_owners (agent_id, user_id) "
                                  "VALUES (?, ?)", sorted(pairs))
        out = {}
        for a, u in pairs:
            row = self.conn.execute("SELECT id FROM memory_owners WHERE agent_id = ? AND "
                                    "user_id = ?", (a, u)).fetchone()
            if row:
                out[a, u] = row[0]
        return out

    def _index(self, items: list[tuple[int, int, list[str]]]) -> None:
        """Add postings, document frequencies and owner totals of (rowid, owner, terms)."""
        self._postings(items, +1)

    def _unindex(self, items: list[tuple[int, int, list[str]]]) -> None:
        self._postings(items, -1)

    def _postings(self, items: list[tuple[int, int, list[str]]], sign: int) -> None:
        if not items:
            return
        conn = self.conn
        posts = sorted((o, t, r, len(ts)) for r, o, ts in items for t in ts)
        if sign > 0:
            conn.executemany("INSERT INTO memory_terms (owner, term, rowid, dl) VALUES (?, ?, ?, ?)",
                             posts)
        else:
            conn.executemany("DELETE FROM memory_terms WHERE owner = ? AND term = ? AND rowid = ?",
                             [p[:3] for p in posts])
        df = Counter((o, t) for o, t, _, _ in posts)
        if sign > 0:
            conn.executemany("INSERT INTO term_stats (owner, term, df) VALUES (?, ?, ?) ON CONFLICT "
                             "(owner, term) DO UPDATE SET df = df + excluded.df",
                             [(o, t, n) for (o, t), n in df.items()])
        else:
            conn.executemany("UPDATE term_stats SET df = df - ? WHERE owner = ? AND term = ?",
                             [(n, o, t) for (o, t), n in df.items()])
            conn.executemany("DELETE FROM term_stats WHERE owner = ? AND term = ? AND df = 0",
                             list(df))
        per_owner: dict[int, list[int]] = {}
        for _, o, ts in items:
            acc = per_owner.setdefault(o, [0, 0])
            acc[0] += 1
            acc[1] += len(ts)
        conn.executemany("UPDATE memory_owners SET n_docs = n_docs + ?, total_terms = total_terms + ?"
                         " WHERE id = ?", [(sign * d, sign * t, o) for o, (d, t) in per_owner.items()])

    def _key_stats(self, items: list[tuple[int, list[str]]], sign: int) -> None:
        keyfield.key_stats(self.conn, items, sign)

    def _link(self, items: list[tuple[int, list[str]]]) -> None:
        """Entity links of (rowid, entity names); new names are added to memory_entities."""
        names = sorted({e for _, es in items for e in es})
        if not names:
            return
        self.conn.executemany("INSERT OR IGNORE INTO memory_entities (name) VALUES (?)",
                              [(n,) for n in names])
        ids = dict(self.conn.execute(
            "SELECT name, id FROM memory_entities WHERE name IN (SELECT value FROM json_each(?))",
            (json.dumps(names, ensure_ascii=False),)))
        self.conn.executemany("INSERT INTO memory_entity_links (entity_id, rowid) VALUES (?, ?)",
                              [(ids[e], r) for r, es in items for e in es])

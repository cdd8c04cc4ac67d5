"""Web content, stored apart (Reverie §12: 网页来源打 untrusted_web 标记且永远不进入真相源).

A memory whose ``source_type`` is ``untrusted_web`` never enters ``memory_records``: it lives in
``memory_web_content``, a table no recall route, governance step or index reads. So web content is
never a candidate of plain recall, never a fact revision (no fact key, never supersedes or is
superseded), never in a contradiction, never pinned, never permanent, never counted in a layer's
budget; it is recalled only through the explicit path (``MemoryStore.recall(...,
include_web=True)``, :mod:`memlab.recall.web`), and labelled there.

One row per item: its owner, time, the whole record as JSON (source_uri, meta, ...), its terms
(for the lexical fallback) and its document vector under one model version (float32 bytes; NULL
when the store had no embedder: ranked by terms only).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np

from memlab.errors import InvalidInput
from memlab.types import MemoryRecord

from .connect import Connection

#: Steps of the migration that creates the table (memlab.store.migrations).
WEB_TABLE_SQL: tuple[str, ...] = (
    """CREATE TABLE memory_web_content (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        timestamp REAL NOT NULL,
        record_json TEXT NOT NULL,
        terms_json TEXT NOT NULL,
        model_version TEXT NOT NULL DEFAULT '',
        vector BLOB)""",
    "CREATE INDEX memory_web_content_owner ON memory_web_content (agent_id, user_id, timestamp)",
)

_TUPLES = {f.name for f in dataclasses.fields(MemoryRecord) if f.default == ()}


def _record(js: str) -> MemoryRecord:
    d = json.loads(js)
    return MemoryRecord(**{k: tuple(v) if k in _TUPLES else v for k, v in d.items()})


@dataclasses.dataclass(frozen=True)
class WebRows:
    """An owner's web content: records, term lists and vectors (rows without a vector under
    the asked model version: NaN), aligned."""

    records: list[MemoryRecord]
    terms: list[frozenset[str]]
    vectors: np.ndarray | None


class WebContent:
    """``memory_web_content`` of one connection (writes inside the caller's transaction)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def add(self, records: Sequence[MemoryRecord], *, terms: Sequence[Sequence[str]],
            vectors: np.ndarray | None, model_version: str) -> None:
        for i, rec in enumerate(records):
            vec = None
            if vectors is not None and np.asarray(vectors[i]).any():
                vec = np.asarray(vectors[i], np.float32).tobytes()
            self.conn.execute(
                "INSERT INTO memory_web_content (id, agent_id, user_id, timestamp, record_json, "
                "terms_json, model_version, vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (rec.id, rec.agent_id, rec.user_id, rec.timestamp,
                 json.dumps(dataclasses.asdict(rec), ensure_ascii=False),
                 json.dumps(sorted(set(terms[i])), ensure_ascii=False),
                 model_version if vec is not None else "", vec))

    def exists(self, ids: Sequence[str]) -> list[str]:
        """Which of ``ids`` are web content (an add may not reuse one)."""
        return [r[0] for r in self.conn.execute(
            "SELECT id FROM memory_web_content WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids), ensure_ascii=False),))]

    def owner_rows(self, *, agent_id: str, user_id: str, model_version: str = "",
                   dim: int = 0) -> WebRows:
        """Every web item of (agent, user), newest first; vectors of ``model_version`` (a
        (n, dim) array, NaN rows where an item has none; None without a model version)."""
        rows = self.conn.execute(
            "SELECT record_json, terms_json, model_version, vector FROM memory_web_content "
            "WHERE agent_id = ? AND user_id = ? ORDER BY timestamp DESC, rowid",
            (agent_id, user_id)).fetchall()
        vecs = None
        if model_version and dim:
            vecs = np.full((len(rows), dim), np.nan, np.float32)
            for i, r in enumerate(rows):
                if r[2] == model_version and r[3] is not None:
                    vecs[i] = np.frombuffer(r[3], np.float32)
        return WebRows([_record(r[0]) for r in rows],
                       [frozenset(json.loads(r[1])) for r in rows], vecs)

    def get(self, ids: Sequence[str], *, agent_id: str, user_id: str) -> list[MemoryRecord]:
        """Web items by id, in order; an unknown id or another owner's: InvalidInput."""
        found = {r[0]: _record(r[1]) for r in self.conn.execute(
            "SELECT id, record_json FROM memory_web_content WHERE agent_id = ? AND user_id = ? "
            "AND id IN (SELECT value FROM json_each(?))",
            (agent_id, user_id, json.dumps(list(ids), ensure_ascii=False)))}
        missing = [i for i in ids if i not in found]
        if missing:
            raise InvalidInput("ids", f"no web content of agent_id={agent_id!r}, "
                               f"user_id={user_id!r} with this id", missing[0])
        return [found[i] for i in ids]

    def count(self, *, agent_id: str | None = None, user_id: str | None = None) -> int:
        if agent_id is None:
            return int(self.conn.execute("SELECT count(*) FROM memory_web_content").fetchone()[0])
        return int(self.conn.execute(
            "SELECT count(*) FROM memory_web_content WHERE agent_id = ? AND user_id = ?",
            (agent_id, user_id)).fetchone()[0])


__all__ = ["WEB_TABLE_SQL", "WebContent", "WebRows"]

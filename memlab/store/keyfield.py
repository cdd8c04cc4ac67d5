"""The expanded-key field's statistics and BM25 (schema version 10; issue 21, ``recall.expanded_keys``).

A memory's expanded keys (:mod:`memlab.write.keys`: its fact, names, dates and atom kinds as terms)
are stored as a set in ``memory_records.keys_json``; per owner, ``key_stats(owner, term, df)``
counts the searchable memories (active, not deprecated) holding each key and
``memory_owners.total_keys`` their keys together. The repository keeps both in step in the
transaction of every add, update and delete (:func:`key_stats`), as it keeps ``term_stats``.

BM25 over the field, for the candidates the routes found (the field is no route)::

    key_bm25(d) = sum_{t in q ∩ keys(d)} idf(t) * (k1 + 1) / (1 + k1 * (1 - b + b * |keys(d)| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with N the owner's searchable memories (``memory_owners.n_docs``, the lexical route's N) and avgdl
= total_keys / N: the lexical route's formula over the other field.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .connect import Connection
from .records import ids_json

__all__ = ["key_bm25", "key_stats"]


def key_stats(conn: Connection, items: list[tuple[int, list[str]]], sign: int) -> None:
    """Add (``sign`` +1) or remove (-1) the key document frequencies and owner key totals of
    searchable memories given as (owner, keys); inside the caller's transaction."""
    if not items:
        return
    df = Counter((o, t) for o, ks in items for t in ks)
    if sign > 0:
        conn.executemany("INSERT INTO key_stats (owner, term, df) VALUES (?, ?, ?) ON CONFLICT "
                         "(owner, term) DO UPDATE SET df = df + excluded.df",
                         [(o, t, n) for (o, t), n in df.items()])
    else:
        conn.executemany("UPDATE key_stats SET df = df - ? WHERE owner = ? AND term = ?",
                         [(n, o, t) for (o, t), n in df.items()])
        conn.executemany("DELETE FROM key_stats WHERE owner = ? AND term = ? AND df = 0",
                         list(df))
    totals: Counter[int] = Counter()
    for o, ks in items:
        totals[o] += len(ks)
    conn.executemany("UPDATE memory_owners SET total_keys = total_keys + ? WHERE id = ?",
                     [(sign * n, o) for o, n in totals.items() if n])


def key_bm25(conn: Connection, terms: Sequence[str], rowids: Sequence[int], *,
             owner: int | None, k1: float, b: float) -> np.ndarray:
    """BM25 of each of these memories (float64, input order) for the query ``terms`` over the
    expanded-key field, with the key statistics of ``owner`` (None: an owner with no memory).
    0 for a memory whose keys share no term with the query, and for all when the owner's
    searchable memories hold no key. One statistics lookup and one read of the rowids' keys."""
    rowids = [int(r) for r in rowids]
    out = np.zeros(len(rowids))
    q = list(dict.fromkeys(t for t in terms if isinstance(t, str) and t))
    if not q or not rowids or owner is None:
        return out
    n_docs, total = conn.execute(
        "SELECT n_docs, total_keys FROM memory_owners WHERE id = ?", (owner,)).fetchone()
    if n_docs == 0 or total == 0:
        return out
    idf = {t: math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) for t, df in conn.execute(
        "SELECT term, df FROM key_stats WHERE owner = ? AND df > 0 AND term IN "
        "(SELECT value FROM json_each(?))", (owner, json.dumps(q, ensure_ascii=False)))}
    if not idf:
        return out
    avgdl = total / n_docs
    keys = dict(conn.execute("SELECT rowid, keys_json FROM memory_records WHERE rowid IN "
                             "(SELECT value FROM json_each(?))", (ids_json(rowids),)))
    for i, r in enumerate(rowids):
        held = json.loads(keys.get(r, "[]"))
        acc = sum(idf.get(t, 0.0) for t in held)
        if acc:
            out[i] = acc * (k1 + 1.0) / (1.0 + k1 * (1.0 - b + b * len(held) / avgdl))
    return out

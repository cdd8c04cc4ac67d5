"""Helpers of the store tests: a record factory, a deterministic fake embedder, a table dump."""

from __future__ import annotations

import hashlib

import numpy as np

from memlab.text import extract_entities, memory_terms
from memlab.types import MemoryRecord


def fake_embed(texts: list[str], dim: int = 16) -> np.ndarray:
    """Deterministic unit vectors: a numpy generator seeded by each text's sha256."""
    out = np.empty((len(texts), dim), np.float32)
    for i, t in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(t.encode("utf-8")).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).standard_normal(dim)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


class CountingEmbedder:
    """A plain function texts -> vectors that counts the texts it was asked to embed."""

    def __init__(self, dim: int = 16) -> None:
        self.dim, self.calls, self.texts = dim, 0, 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.texts += len(texts)
        return fake_embed(texts, self.dim)


def rec(id: str, text: str | None = None, **kw) -> MemoryRecord:
    return MemoryRecord(id=id, text=text if text is not None else f"memory number {id}", **kw)


def add(repo, records: list[MemoryRecord]) -> list[int]:
    """Add records with their §6.2 terms and §11.1 entities."""
    return repo.add(records, terms=[memory_terms(r.text) for r in records],
                    entities=[extract_entities(r.text) for r in records])


def dump(conn) -> list:
    """Every row of every real table (vec0 shadow tables included) and the schema version."""
    out = [("user_version", conn.execute("PRAGMA user_version").fetchone()[0])]
    for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                  "ORDER BY name").fetchall():
        if sql.upper().startswith("CREATE VIRTUAL"):
            continue
        out.append((name, sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"').fetchall()))))
    return out



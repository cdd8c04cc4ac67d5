"""Helpers of the store tests: a record factory, a deterministic fake embedder, a table dump, and
the hashing config and zh/en texts and queries of the health and vector-content tests."""

from __future__ import annotations

import hashlib

import numpy as np

from memlab.config import MemlabConfig
from memlab.text import extract_entities, memory_terms
from memlab.types import MemoryRecord

HCFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.relevance_floor": 0.0})
ZH = ["用户最喜欢玩星露谷物语", "用户上周去了北京", "用户对咖啡因过敏", "今天午饭吃了牛肉面",
      "周末和朋友去公园散步", "最近在读一本关于历史的书"]
EN = ["Alice drinks green tea every morning", "Bob moved to Toronto last year",
      "Caroline adopted a cat named Momo", "we booked a flight to Lisbon",
      "my red bicycle is fast", "I watched a documentary about whales"]
QUERIES = ["她爱玩什么游戏？", "北京 旅行", "咖啡因", "green tea", "cat named Momo", "Lisbon flight"]


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



"""Shared fixtures: the model-free hashing config, a counting embedder, and a tiny canonical dataset
whose metrics are worked out by hand (tests/bench/test_run.py, tests/test_cli.py).

Use them as fixtures (``hashing_cfg``, ``counting_embedder``, ``tiny_bench``, ...): other folders
have their own ``conftest.py``, so importing from ``conftest`` would be ambiguous.

Nothing here reads public data: every dataset is written by the tests themselves.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from memlab.embed.numerics import PROBE
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question, write_dataset
from memlab.config import MemlabConfig
from memlab.embed import HashingEmbedder

from hypothesis import HealthCheck, settings

# CI runs on 2 shared cores: no per-example deadline (a slow example is not a wrong one)
settings.register_profile("memlab", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("memlab")

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def day(n: float) -> datetime:
    """``n`` days after 2024-01-01T00:00Z."""
    return T0 + timedelta(days=n)


def hashing_config(cache_dir: Path, **overrides: object) -> MemlabConfig:
    """The hashing embedder with the relevance floor off (absolute mode at 0: these tests check
    ranking and metrics, not abstention) and the benchmark embedding cache in ``cache_dir``."""
    return MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                     "recall.relevance_floor": 0.0,
                                     "bench.cache_dir": str(cache_dir), **overrides})


class CountingEmbedder:
    """The hashing embedder, recording every text it is asked to embed (a fake, not a mock).
    The numerics probe (:data:`memlab.embed.numerics.PROBE`, embedded once per embedder object
    for the caches' keys) is recorded apart, in ``probes``."""

    def __init__(self, inner: HashingEmbedder | None = None) -> None:
        self.inner = inner or HashingEmbedder()
        self.name, self.version, self.dim = self.inner.name, self.inner.version, self.inner.dim
        self.documents: list[str] = []
        self.queries: list[str] = []
        self.probes: list[str] = []

    def _record(self, into: list[str], texts: Sequence[str]) -> None:
        (self.probes if list(texts) == list(PROBE) else into).extend(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self._record(self.documents, texts)
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self._record(self.queries, texts)
        return self.inner.embed_queries(texts)


CARD = Card(name="tiny-bench", version="1", language="en", license="CC0-1.0", source="memlab tests",
            granularity="turn", description="A hand-made set whose metrics are worked out by hand.")


def tiny_bench_dataset() -> Dataset:
    """Two users; four questions asked on day 10 (rendering "{speaker}: {text}").

    ===========  ===========  ========================  ==================================
    question     category     gold                      where the gold ranks (any scorer)
    ===========  ===========  ========================  ==================================
    u1::q1       pets         u1::i1 (cat named Momo)   1 (the only item sharing terms)
    u1::q2       travel       u1::i4 (Lisbon flight)    absent: written on day 30
    u1::q3       things       u1::i3 (my red bicycle)   2: "red bicycle" (u1::i2) is closer
    u2::q1       music        u2::i1 (violin)           1 (u2 has the same item ids as u1)
    ===========  ===========  ========================  ==================================

    Hence recall@1 = (1+0+0+1)/4 = 0.5, recall@3 = 3/4, mrr = (1+0+1/2+1)/4 = 0.625,
    ndcg@10 = (1+0+1/log2(3)+1)/4.
    """
    items = [
        Item("u1", "i1", "s1", "Ann", "I adopted a cat named Momo", day(1)),
        Item("u1", "i2", "s1", "Ann", "red bicycle", day(2)),
        Item("u1", "i3", "s1", "Ann", "my red bicycle is fast", day(3)),
        Item("u1", "i4", "s1", "Ann", "we booked a flight to Lisbon", day(30)),
        Item("u2", "i1", "s1", "Bob", "I play the violin", day(1)),
        Item("u2", "i2", "s1", "Bob", "green tea every morning", day(2)),
    ]
    questions = [
        Question("u1", "q1", "cat named Momo", day(10), "pets", ("i1",)),
        Question("u1", "q2", "flight to Lisbon", day(10), "travel", ("i4",)),
        Question("u1", "q3", "red bicycle", day(10), "things", ("i3",)),
        Question("u2", "q1", "play the violin", day(10), "music", ("i1",)),
    ]
    return Dataset(CARD, items, questions)


@pytest.fixture
def counting_embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def tiny_bench() -> Dataset:
    return tiny_bench_dataset()


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def hashing_cfg(cache_dir: Path) -> MemlabConfig:
    return hashing_config(cache_dir)


@pytest.fixture
def tiny_bench_folder(tmp_path: Path) -> Path:
    """:func:`tiny_bench_dataset` written as a canonical folder."""
    return write_dataset(tiny_bench_dataset(), tmp_path / "tiny-bench")


@pytest.fixture
def hashing_yaml(tmp_path: Path, cache_dir: Path) -> Path:
    """A config file selecting the hashing embedder, floor 0 and a tmp embedding cache."""
    path = tmp_path / "hashing.yaml"
    path.write_text("embedding:\n  backend: hashing\nrecall:\n  floor_mode: absolute\n"
                    "  relevance_floor: 0.0\n"
                    f"bench:\n  cache_dir: {cache_dir}\n", encoding="utf-8")
    return path


class LLMStub:
    """A chat-completions stub: ``respond`` = (status, body bytes) for the next requests;
    ``requests`` records (path, headers, json body); ``hold`` makes it wait (an Event, not a
    sleep) until released, for the timeout test."""

    def __init__(self) -> None:
        self.respond = (200, b"")
        self.requests: list[tuple[str, dict, dict]] = []
        self.hold = threading.Event()
        self.hold.set()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):   # noqa: N802 (http.server's name)
                n = int(self.headers.get("Content-Length", 0))
                stub.requests.append((self.path, dict(self.headers),
                                      json.loads(self.rfile.read(n))))
                stub.hold.wait(timeout=10)
                status, body = stub.respond
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass   # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def llm_stub():
    """An OpenAI-compatible chat-completions stub on 127.0.0.1 (tests of memlab.llm's client)."""
    s = LLMStub()
    yield s
    s.close()


@pytest.fixture
def shared_dir(tmp_path: Path):
    """A folder the unprivileged child of :func:`privileges.as_unprivileged` can reach and write
    in (pytest's own tmp folder is private to root when the tests run as root)."""
    import os
    import shutil
    import tempfile

    if os.geteuid() != 0:
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="memlab-unprivileged-"))
    folder.chmod(0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)

"""The real ``memlab serve`` process the HTTP tests talk to, and what they read of its store.

One server per test session (the ``server`` fixture of ``conftest.py``): ``memlab serve`` in a
subprocess on a free port of 127.0.0.1 (a bounded readiness poll), the hashing embedder through
the VRAM gate, a bearer token; stopped in the fixture's finalizer. Each test writes as its own
agent, so the suites share it.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READY_S = 60.0   # bound of the readiness poll
MAX_BODY = 1024 * 1024   # the server's serve.max_body_bytes (above the 200 kB deep body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp: Path) -> None:
        self.path = tmp / "served.db"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "server.log"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("MEMLAB_SERVE_TOKEN", None)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "memlab.cli", "serve", str(self.path), "--port",
                 str(self.port), "--token", TOKEN, "--set", "embedding.backend=hashing",
                 "--set", "recall.floor_mode=absolute", "--set", "recall.relevance_floor=0.0",
                 "--set", "serve.page_max=20", "--set", "serve.page_default=5",
                 "--set", f"serve.max_body_bytes={MAX_BODY}"],
                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(tmp))
        deadline = time.monotonic() + READY_S
        while True:   # the bounded readiness poll
            if self.proc.poll() is not None:
                raise RuntimeError(f"memlab serve exited {self.proc.returncode}: "
                                   f"{self.log.read_text(errors='replace')}")
            try:
                if httpx.get(self.url + "/api/memory_status", headers=AUTH,
                             timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"memlab serve not ready within {READY_S} s")
            time.sleep(0.05)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=kw.pop("headers", AUTH), timeout=30.0,
                            **kw)


def add(content, scope="user", category="profile", **entry):
    """One WriterOutput ``add`` write."""
    return {"op": "add", "scope": scope, "category": category,
            "entry": {"content": content, **entry}}


def stored_ids(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT id FROM memory_records")}
    finally:
        conn.close()


def dump(path: Path, *, skip: tuple[str, ...] = ()) -> list:
    """Every row of every real table of the store file (sqlite-vec's shadow tables included;
    ``skip``: tables left out) and the schema version: equal before and after a refusal."""
    conn = sqlite3.connect(path)
    try:
        out = [("user_version", conn.execute("PRAGMA user_version").fetchone()[0])]
        for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                                      "ORDER BY name").fetchall():
            if sql.upper().startswith("CREATE VIRTUAL") or name in skip:
                continue
            out.append((name, sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))))
        return out
    finally:
        conn.close()

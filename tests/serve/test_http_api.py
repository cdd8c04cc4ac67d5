"""The HTTP API (memlab.serve, familiars §5.11) against a REAL server process on 127.0.0.1:
``memlab serve`` started in a subprocess on a free port (serve_helpers.Server, the session's
``server`` fixture). Each test writes as its own agent, so they share one server."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import pytest

from memlab.serve.cli import is_loopback
from serve_helpers import AUTH, TOKEN
from serve_helpers import add as _add
from serve_helpers import stored_ids as _stored_ids


# -- authentication ---------------------------------------------------------------------------------
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": TOKEN},
                                     {"Authorization": f"Basic {TOKEN}"}])
def test_missing_or_wrong_token_is_401(server, headers):
    with server.client(headers=headers) as c:
        for method, path in (("GET", "/api/memory_status"), ("GET", "/api/memory"),
                             ("GET", "/api/recall?q=x"), ("POST", "/api/memory"),
                             ("POST", "/api/agents/a/release-memory")):
            r = c.request(method, path, json={"writes": []} if method == "POST" else None)
            assert r.status_code == 401, (method, path, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
    with server.client() as c:
        assert c.get("/api/memory_status").status_code == 200


# -- write, list, recall ------------------------------------------------------------------------
def test_write_list_recall_and_status_zh_en(server):
    with server.client() as c:
        r = c.post("/api/memory", json={"agent_id": "wlr", "dialogue_id": "d1", "turn_id": "t1",
                                        "writes": [_add("用户名字是 Alice", salience=0.8),
                                                   {"op": "skip"},
                                                   _add("The user likes green tea",
                                                        category="preference")]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["indices"] == [0, 2] and body["skipped"] == [1] and body["dropped"] == []
        ids = body["ids"]
        page = c.get("/api/memory", params={"agent_id": "wlr"}).json()
        assert page["total"] == 2 and {m["id"] for m in page["memories"]} == set(ids)
        alice = next(m for m in page["memories"] if m["id"] == ids[0])
        assert (alice["scope"], alice["category"], alice["importance"]) == ("user", "profile", 0.8)
        assert alice["evidence"] == {"dialogue_id": "d1", "turn_id": "t1"}
        got = c.get("/api/recall", params={"q": "green tea", "k": 1, "agent_id": "wlr"}).json()
        assert [m["id"] for m in got["memories"]] == [ids[1]]
        assert got["memories"][0]["text"] == "The user likes green tea"
        assert got["memories"][0]["score"] > 0
        got = c.get("/api/recall", params={"q": "用户名字", "agent_id": "wlr"}).json()
        assert got["memories"][0]["id"] == ids[0]
        status = c.get("/api/memory_status").json()
        assert status["counts"]["agent_id"]["wlr"] == 2
        assert status["counts"]["scope"]["user"] >= 2
        assert status["recall"]["recalls"] >= 2 and status["recall"]["hits"] >= 2


def test_update_supersedes_through_the_api(server):
    with server.client() as c:
        old = c.post("/api/memory", json={"agent_id": "sup", "writes": [
            _add("用户住在北京")]}).json()["ids"][0]
        new = c.post("/api/memory", json={"agent_id": "sup", "writes": [
            {"op": "update", "scope": "user", "category": "profile",
             "entry": {"content": "用户住在上海", "supersedes_id": old}}]}).json()["ids"][0]
        mems = {m["id"]: m for m in c.get("/api/memory", params={"agent_id": "sup"}).json()[
            "memories"]}
        assert mems[old]["deprecated"] is True and mems[new]["supersedes"] == old
        r = c.post("/api/memory", json={"agent_id": "other", "writes": [
            _add("x", supersedes_id=new)]})
        assert r.status_code == 422
        assert r.json()["detail"][0]["field"] == "writes[0].entry.supersedes_id"


# -- malformed requests -----------------------------------------------------------------------------
@pytest.mark.parametrize("body, field", [
    ({"writes": [_add("ok"), _add("x", salience=3)]}, "writes[1].entry.salience"),
    ({"writes": [_add("x", scope="user", category="procedure")]}, "writes[0].(scope, category)"),
    ({"writes": [{"op": "update", "scope": "user", "category": "profile",
                  "entry": {"content": "x"}}]}, "writes[0].entry.supersedes_id"),
    ({"writes": [_add("x", colour="red")]}, "writes[0].entry.colour"),
])
def test_malformed_write_is_422_naming_the_field_and_writes_nothing(server, body, field):
    before = _stored_ids(server.path)
    with server.client() as c:
        r = c.post("/api/memory", json={"agent_id": "bad", **body})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == field
    assert _stored_ids(server.path) == before


@pytest.mark.parametrize("method, path, kwargs, field", [
    ("POST", "/api/memory", {"json": {"wrytes": []}}, "writes"),
    ("POST", "/api/memory", {"json": {"writes": [], "turn_counter": -1}}, "turn_counter"),
    ("POST", "/api/memory", {"content": b"{not json", "headers": {**AUTH, "content-type":
                                                                 "application/json"}}, "body"),
    ("GET", "/api/memory?limit=0", {}, "limit"),
    ("GET", "/api/memory?limit=21", {}, "limit"),      # serve.page_max = 20
    ("GET", "/api/memory?offset=-1", {}, "offset"),
    ("GET", "/api/recall", {}, "q"),
    ("GET", "/api/recall?q=x&k=0", {}, "k"),
])
def test_malformed_request_is_422_naming_the_field(server, method, path, kwargs, field):
    with server.client() as c:
        r = c.request(method, path, **kwargs)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["field"] == field


def test_k_over_the_store_limit_is_422_naming_k(server):
    with server.client() as c:
        r = c.get("/api/recall", params={"q": "x", "k": 10**6})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "k"


# -- paging ----------------------------------------------------------------------------------------
def test_paging_and_filters(server):
    with server.client() as c:
        ids = []
        for i in range(7):   # one write per request: distinct times, newest listed first
            ids += c.post("/api/memory", json={"agent_id": "pager", "writes": [
                _add(f"event number {i}", category="event" if i % 2 else "knowledge")]}
            ).json()["ids"]
        seen, offset, pages = [], 0, []
        for _ in range(5):   # bounded: a paging bug must fail, not loop
            if offset is None:
                break
            page = c.get("/api/memory", params={"agent_id": "pager", "limit": 3,
                                                "offset": offset}).json()
            assert page["total"] == 7
            pages.append(len(page["memories"]))
            seen += [m["id"] for m in page["memories"]]
            offset = page["next_offset"]
        assert pages == [3, 3, 1]
        default = c.get("/api/memory", params={"agent_id": "pager"}).json()   # page_default 5
        assert (default["limit"], len(default["memories"]), default["next_offset"]) == (5, 5, 5)
        assert seen == ids[::-1]            # newest first, no repeats, none missing
        ev = c.get("/api/memory", params={"agent_id": "pager", "category": "event"}).json()
        assert ev["total"] == 3 and {m["id"] for m in ev["memories"]} == set(ids[1::2])
        q = c.get("/api/memory", params={"agent_id": "pager", "q": "NUMBER 4"}).json()
        assert [m["id"] for m in q["memories"]] == [ids[4]]
        assert c.get("/api/memory", params={"agent_id": "pager", "scope": "identity"}
                     ).json()["total"] == 0
        # another agent's memories are not listed
        assert c.get("/api/memory", params={"agent_id": "nobody"}).json()["total"] == 0


# -- release-memory ----------------------------------------------------------------------------------
def test_release_memory_drops_the_indexes_and_recall_reloads(server):
    with server.client() as c:
        mid = c.post("/api/memory", json={"agent_id": "rel", "writes": [
            _add("用户喜欢爬山", category="preference")]}).json()["ids"][0]
        for _ in range(2):   # the second read loads the in-process indexes
            assert c.get("/api/recall", params={"q": "爬山", "agent_id": "rel"}).json()[
                "memories"][0]["id"] == mid
        r = c.post("/api/agents/rel/release-memory")
        assert r.status_code == 200
        held = r.json()["released"]["indexes"]
        assert r.json()["agent_id"] == "rel" and held["dense_index"] >= 1
        assert held["memory_index"] >= 1
        again = c.post("/api/agents/rel/release-memory").json()["released"]["indexes"]
        assert again == {"memory_index": 0, "dense_index": 0}
        assert c.get("/api/recall", params={"q": "爬山", "agent_id": "rel"}).json()[
            "memories"][0]["id"] == mid


def test_release_memory_unloads_the_gates_models_and_recall_reloads_them(server):
    """The store's embedder runs through the VRAM gate: release-memory unloads it (the status
    shows it gone, the trace counts one release), the next recall loads it again."""
    def vram(c):
        st = c.get("/api/memory_status").json()["vram"]
        return {m["model_id"]: m for m in st["models"]}, st["trace"]

    with server.client() as c:
        mid = c.post("/api/memory", json={"agent_id": "gate", "writes": [
            _add("The user's cat is called Miso 猫叫味噌", category="preference")]}).json()["ids"][0]
        assert c.get("/api/recall", params={"q": "cat Miso", "agent_id": "gate"}).json()[
            "memories"][0]["id"] == mid
        models, trace = vram(c)
        assert models["embedder:hashing"]["resident"] and models["embedder:hashing"][
            "priority"] == 2 and models["embedder:hashing"]["category"] == "sync"
        r = c.post("/api/agents/gate/release-memory").json()["released"]
        assert r["vram"]["unloaded"] == ["embedder:hashing"] and r["vram"]["deferred"] == []
        models, after = vram(c)
        assert not models["embedder:hashing"]["resident"]
        assert after["evictions_release"] == trace["evictions_release"] + 1
        assert c.get("/api/recall", params={"q": "味噌", "agent_id": "gate"}).json()[
            "memories"][0]["id"] == mid
        models, again = vram(c)
        assert models["embedder:hashing"]["resident"] and again["loads"] == after["loads"] + 1
        assert c.post("/api/agents/gate/release-memory").json()["released"]["vram"][
            "unloaded"] == ["embedder:hashing"]


def test_user_requests_acquire_the_embedder_at_critical(hashing_cfg, tmp_path):
    """§5.10.1: an embed on an active user request runs at CRITICAL: the recall's and the
    write's acquires carry vram.priority_critical (the model itself is IMPORTANT). In process
    (FastAPI's TestClient): the gate's trace is read directly."""
    from fastapi.testclient import TestClient

    from memlab.api import open_store
    from memlab.embed import HashingEmbedder
    from memlab.serve.app import create_app
    from memlab.vram.embedder import default_gate, gate_embedder

    gate = default_gate(hashing_cfg)
    emb = gate_embedder(hashing_cfg, gate, HashingEmbedder()).embedder
    with open_store(tmp_path / "s.db", config=hashing_cfg, embedder=emb) as st, \
            TestClient(create_app(st, gate=gate)) as c:
        assert c.post("/api/memory", json={"writes": [_add("用户喜欢绿茶")]}).status_code == 200
        assert c.get("/api/recall", params={"q": "绿茶"}).status_code == 200
        emb.embed_queries(["outside a request"])
    acquires = [e.priority for e in gate.trace if e.event == "acquire"]
    assert len(acquires) >= 3
    assert acquires[:-1] == [hashing_cfg.vram.priority_critical] * (len(acquires) - 1)
    assert acquires[-1] == hashing_cfg.vram.priority_important


def test_a_gate_is_only_for_a_store_passed_in_open(hashing_cfg, tmp_path):
    from memlab.errors import InvalidInput
    from memlab.serve.app import create_app
    from memlab.vram.embedder import default_gate

    with pytest.raises(InvalidInput, match="gate"):
        create_app(tmp_path / "s.db", hashing_cfg, gate=default_gate(hashing_cfg))


# -- load: concurrent recalls and writes, every write kept -----------------------------------------
def test_concurrent_recalls_and_writes_lose_nothing(server):
    n_writes, n_recalls = 120, 120

    async def run() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
        async with httpx.AsyncClient(base_url=server.url, headers=AUTH, timeout=120.0,
                                     limits=limits) as c:
            writes = [c.post("/api/memory", json={"agent_id": "load", "writes": [
                _add(f"load memory {i} 负载 {i}", category="event")]}) for i in range(n_writes)]
            reads = [c.get("/api/recall", params={"q": f"load memory {i}", "agent_id": "load"})
                     for i in range(n_recalls)]
            mixed = [x for pair in zip(writes, reads) for x in pair]
            return await asyncio.wait_for(asyncio.gather(*mixed), timeout=300)

    responses = asyncio.run(run())
    assert [r.status_code for r in responses] == [200] * (n_writes + n_recalls)
    ids = [i for r in responses[0::2] for i in r.json()["ids"]]
    assert len(ids) == n_writes == len(set(ids))
    assert set(ids) <= _stored_ids(server.path)    # every write is in the store file
    conn = sqlite3.connect(server.path)
    try:
        texts = {r[0] for r in conn.execute(
            "SELECT text FROM memory_records WHERE agent_id = 'load'")}
    finally:
        conn.close()
    assert texts == {f"load memory {i} 负载 {i}" for i in range(n_writes)}


def test_is_loopback():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "192.168.1.2", "::", "example.org"))

"""The HTTP API over one store (familiars §5.11): a FastAPI app, served by ``memlab serve``.

=============================================  ===================================================
``GET /api/memory_status``                     :func:`memlab.status.store_status` as JSON
``GET /api/memory``                            a page of memories: ``q`` (text contains),
                                               ``scope``, ``category``, ``agent_id``, ``user_id``,
                                               ``limit`` (1..``serve.page_max``, default
                                               ``serve.page_default``), ``offset``; newest first,
                                               with ``total`` and ``next_offset`` (null: last page)
``POST /api/memory``                           WriterOutput JSON (``writes``) plus optional
                                               ``agent_id``, ``user_id``, ``dialogue_id``,
                                               ``turn_id``, ``turn_counter``: applied by
                                               :func:`memlab.write.familiars.apply_writes`;
                                               returns the new ids, dropped and skipped writes
``POST /api/agents/{agent_id}/release-memory``  runs every releaser (see below) for the agent
``GET /api/recall?q=...&k=...``                the store's recall: ids, texts, scores
=============================================  ===================================================

Errors: every refusal is JSON, ``{"detail": [{"field", "msg", "type", ...}]}`` with ``field``
naming what was wrong (:mod:`memlab.serve.errors`): 422 for a malformed request (pydantic's
validation, with its ``loc`` too; memlab's refusals, :class:`~memlab.errors.InvalidInput`, with the
name memlab gives the field, e.g. ``writes[2].entry.salience``; a body that is not strict JSON,
:mod:`memlab.serve.body`), 401 without the token, 404/405 for an unknown path or method, 503 when
the store is locked, 500 (echoing nothing of the request) for a fault of the server. A refused
request leaves the store unchanged.

Bounds: every integer of a request lies in SQLite's INTEGER range (``offset``, ``k``,
``turn_counter`` and any integer inside a body; ``limit`` in 1..``serve.page_max``); a time a
request gives (a write's ``entry.ttl.expires_at``) lies in [TIME_MIN, TIME_MAX] in UTC: years 1
to 9999, the instants a Python datetime holds (:func:`check_times`); a body holds at most
``serve.max_body_bytes`` (413 otherwise, before it is read whole: :mod:`memlab.serve.body`).

Authentication: with a token every request, whatever its path, needs ``Authorization: Bearer
<token>`` (compared in constant time), checked before the body is read
(:class:`memlab.serve.auth.BearerAuth`): 401 otherwise. The OpenAPI schema is served at
``/openapi.json`` behind the same token; the interactive docs (``/docs``, ``/redoc``) are off:
FastAPI's pages load Swagger UI and ReDoc from a CDN (blank offline, and a third party's script
in a page that holds the token), and no local copy of their assets ships with FastAPI.

Concurrency: a store's SQLite connection, its transactions and its in-process indexes are not
made for several threads at once (one connection: two threads would interleave inside one
transaction). The endpoints are ``async`` and hand every use of the store to ONE store thread (a
single-worker executor, ``app.state.store_executor``): store calls run one after another, each
write committed before its response, while the event loop keeps accepting, parsing and answering
requests. (memlab's choice over a lock around FastAPI's thread pool of sync endpoints: there, up
to 40 threads wait on the lock, and in a trial of 400 requests at once on 2 busy cores the median
response came at 95% of the burst's wall time; with the store thread, at 70%.)

Releasers: ``POST /api/agents/{id}/release-memory`` calls each ``releasers[name](agent_id)`` and
returns their results by name:

- ``indexes``: the store's in-process read indexes. They hold every agent of the store in one
  array, so releasing one agent's drops them for all (they reload from SQLite at the next recall;
  nothing stored changes).
- ``vram`` (with a gate): the resident models (:func:`memlab.vram.embedder.release_models`):
  the store's embedder, which every agent of the store shares, unloaded now when idle (else when
  its encode ends) and loaded again by the gate at the next encode.

More hooks: ``create_app(..., releasers={name: fn})``, a callable ``(agent_id) -> JSON-ready
result``, or add one to ``app.state.releasers``.

VRAM gate (Familiars §5.10, ``vram.enabled``): a store opened here from a path runs its embedder
through a gate (:func:`memlab.vram.embedder.default_gate`: the GPU when NVML answers, else the
simulated device) as the embedder role of §5.10.1; each recall and write is a user request, so
its encodes run boosted to CRITICAL (``vram.priority_critical``); the gate's reaper unloads a model
idle for ``vram.idle_evict_seconds`` (§5.10.3). ``GET /api/memory_status`` adds the gate's
models (``vram``). A store passed in open uses the gate passed with it (``gate=``), if any.
"""

from __future__ import annotations

import asyncio
import functools
import math
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

from memlab.api import MemoryStore, open_store
from memlab.config import MemlabConfig
from memlab.errors import EmbeddingUnavailable, InvalidInput
from memlab.inputs import MAX_TIME, MIN_TIME, check_id, check_text, check_time
from memlab.serve import errors
from memlab.serve.auth import BearerAuth
from memlab.serve.body import StrictJSONRoute
from memlab.store.browse import INT_MAX
from memlab.vram.embedder import default_gate, gate_embedder, release_models
from memlab.vram.gate import VRAMGate
from memlab.vram.priority import boost_thread_priority

try:
    from fastapi import FastAPI, Query
    from pydantic import BaseModel, ConfigDict, Field
except ImportError as exc:  # pragma: no cover - the serve extra is installed in the dev venv
    raise ImportError("memlab serve needs FastAPI and uvicorn: pip install 'memlab[serve]'") \
        from exc

Releaser = Callable[[str], Any]
#: the range of a time a request gives, Unix seconds: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z
#: (memlab.inputs' range, which every way a record enters checks)
TIME_MIN, TIME_MAX = MIN_TIME, MAX_TIME


class WriteRequest(BaseModel):
    """The body of ``POST /api/memory``: WriterOutput (familiars §5.7.2) and where it was said."""

    model_config = ConfigDict(extra="forbid")
    writes: list[dict[str, Any]]
    agent_id: str | None = Field(None, min_length=1)
    user_id: str | None = Field(None, min_length=1)
    dialogue_id: str | None = Field(None, min_length=1)
    turn_id: str | None = Field(None, min_length=1)
    turn_counter: int | None = Field(None, ge=0, le=INT_MAX)


def check_times(writes: list[dict[str, Any]]) -> None:
    """Every ``writes[i].entry.ttl.expires_at`` that reads as an ISO 8601 time with a zone lies in
    [TIME_MIN, TIME_MAX] (UTC); InvalidInput naming it otherwise. (The writer refuses the others
    by name: not a string, not ISO 8601, no zone.)"""
    for i, w in enumerate(writes):
        entry = w.get("entry")
        ttl = entry.get("ttl") if isinstance(entry, dict) else None
        value = ttl.get("expires_at") if isinstance(ttl, dict) else None
        if not isinstance(value, str):
            continue
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            continue
        if t.utcoffset() is not None:
            field = f"writes[{i}].entry.ttl.expires_at"
            try:
                check_time(t, field)
            except InvalidInput as exc:        # the rule, with the value as the client sent it
                raise InvalidInput(field, exc.rule, value) from None


def _record(r) -> dict[str, Any]:
    return {"id": r.id, "text": r.text, "scope": r.scope, "category": r.category,
            "tags": list(r.tags), "importance": r.importance, "timestamp": r.timestamp,
            "retention_layer": r.retention_layer, "lifecycle_state": r.lifecycle_state,
            "deprecated": r.deprecated, "pinned": r.pinned, "supersedes": r.supersedes,
            "evidence": dict(r.evidence) if r.evidence is not None else None,
            "agent_id": r.agent_id, "user_id": r.user_id}


def _json_number(v: float) -> float | None:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _open_gated(path: str | Path, cfg: MemlabConfig) -> tuple[MemoryStore, VRAMGate | None]:
    """The store at ``path`` with its embedder through a VRAM gate (``vram.enabled``); an
    embedder that cannot be built leaves the store to open_store's lexical degradation."""
    if not cfg.vram.enabled:
        return open_store(path, config=cfg), None
    gate = default_gate(cfg)
    try:
        embedder = gate_embedder(cfg, gate).embedder
    except EmbeddingUnavailable:
        return open_store(path, config=cfg), None    # open_store logs and counts it
    return open_store(path, config=cfg, embedder=embedder), gate


def create_app(store: MemoryStore | str | Path, cfg: MemlabConfig | None = None, *,
               token: str | None = None, releasers: Mapping[str, Releaser] | None = None,
               gate: VRAMGate | None = None) -> "FastAPI":
    """The API over ``store``: a :class:`~memlab.api.MemoryStore` (left open at shutdown) or a
    store path (opened with ``cfg``, its embedder through a VRAM gate when ``vram.enabled``, and
    closed at shutdown). ``token``: required as a bearer token on every request (None: no
    authentication; bind to 127.0.0.1 then). ``releasers``: more release-memory hooks beside the
    store's indexes and the gate's models; ``gate``: the gate of a store passed in open (module
    docstring)."""
    owned = not isinstance(store, MemoryStore)
    if owned:
        if gate is not None:
            raise InvalidInput("gate", "is only for a store passed in open (a path builds its "
                               "own from vram.*)", type(gate).__name__)
        st, gate = _open_gated(store, cfg or MemlabConfig())
    else:
        st = store
    cfg = st.config
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlab-store")

    async def on_store(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on the store thread."""
        return await asyncio.get_running_loop().run_in_executor(
            executor, functools.partial(fn, *args, **kwargs))

    def as_user_request(fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with this thread boosted to CRITICAL while it runs (§5.10.1: an embed on an
        active user request)."""
        def run(*args: Any, **kwargs: Any) -> Any:
            with boost_thread_priority(cfg.vram.priority_critical):
                return fn(*args, **kwargs)
        return run

    def release_indexes(agent_id: str) -> dict[str, int]:
        return st.release_memory()

    app = FastAPI(title="memlab", summary="Familiars memory API (familiars §5.11)",
                  docs_url=None, redoc_url=None)
    app.router.route_class = StrictJSONRoute
    errors.install(app)
    if token is not None:
        app.add_middleware(BearerAuth, token=token)
    app.state.store, app.state.store_executor, app.state.gate = st, executor, gate
    app.state.max_body_bytes = cfg.serve.max_body_bytes
    hooks: dict[str, Releaser] = {"indexes": release_indexes}
    if gate is not None:
        hooks["vram"] = lambda agent_id: release_models(gate)
    app.state.releasers = {**hooks, **dict(releasers or {})}

    if owned and gate is not None:
        app.router.on_startup.append(gate.start_reaper)

    def shutdown() -> None:
        if owned and gate is not None:
            gate.stop_reaper()
        if owned:
            executor.submit(st.close).result()
        executor.shutdown(wait=True)

    app.router.on_shutdown.append(shutdown)

    @app.get("/api/memory_status")
    async def memory_status() -> dict[str, Any]:
        out = (await on_store(st.status)).to_dict()
        if gate is not None:
            out["vram"] = _gate_status(gate)
        return out

    @app.get("/api/memory")
    async def list_memory(q: str | None = Query(None, min_length=1,
                                          max_length=cfg.recall.max_query_chars),
                    scope: str | None = Query(None, min_length=1),
                    category: str | None = Query(None, min_length=1),
                    agent_id: str | None = Query(None, min_length=1),
                    user_id: str | None = Query(None, min_length=1),
                    limit: int = Query(cfg.serve.page_default, ge=1, le=cfg.serve.page_max),
                    offset: int = Query(0, ge=0, le=INT_MAX)) -> dict[str, Any]:
        total, recs = await on_store(st.list_memories, limit=limit, offset=offset, q=q,
                                     scope=scope, category=category, agent_id=agent_id,
                                     user_id=user_id)
        nxt = offset + len(recs)
        return {"total": total, "offset": offset, "limit": limit,
                "next_offset": nxt if nxt < total else None,
                "memories": [_record(r) for r in recs]}

    @app.post("/api/memory")
    async def write_memory(body: WriteRequest) -> dict[str, Any]:
        check_times(body.writes)
        out = await on_store(as_user_request(st.write), {"writes": body.writes},
                             agent_id=body.agent_id, user_id=body.user_id,
                             dialogue_id=body.dialogue_id, turn_id=body.turn_id,
                             turn_counter=body.turn_counter)
        return {"ids": out.ids, "indices": list(out.indices),
                "dropped": [{"index": d.index, "chars": d.chars, "total_before": d.total_before}
                            for d in out.dropped],
                "skipped": list(out.skipped), "chars": out.chars, "budget": out.budget}

    @app.post("/api/agents/{agent_id}/release-memory")
    async def release_memory(agent_id: str) -> dict[str, Any]:
        agent_id = check_id(agent_id, "agent_id")
        done = {name: await on_store(fn, agent_id) for name, fn in app.state.releasers.items()}
        return {"agent_id": agent_id, "released": done}

    @app.get("/api/recall")
    async def recall(q: str = Query(..., min_length=1, max_length=cfg.recall.max_query_chars),
               k: int | None = Query(None, ge=1, le=INT_MAX),
               agent_id: str | None = Query(None, min_length=1),
               user_id: str | None = Query(None, min_length=1)) -> dict[str, Any]:
        q = check_text(q, "q", max_chars=cfg.recall.max_query_chars,
                       limit_name="recall.max_query_chars")    # named as the API names it
        res = await on_store(as_user_request(st.recall), q, k=k, agent_id=agent_id,
                             user_id=user_id)
        frame = res.to_frame()
        scores = frame["score"].tolist() if len(res) else []
        return {"query": res.query, "empty_reason": res.empty_reason, "notes": list(res.notes),
                "memories": [{"rank": i + 1, "id": m.id, "text": m.text,
                              "score": _json_number(float(s))}
                             for i, (m, s) in enumerate(zip(res.memories, scores))]}

    return app


def _gate_status(gate: VRAMGate) -> dict[str, Any]:
    """The gate's capacity, what it holds, each registered model and its trace's counts."""
    return {"capacity_mb": gate.capacity_mb, "resident_mb": gate.resident_mb(),
            "device": gate.device.name, "simulated": bool(gate.device.simulated),
            "models": [{"model_id": r.model_id, "priority": r.priority, "category": r.category,
                        "estimated_mb": r.estimated_mb, "resident": r.resident,
                        "working": r.is_working} for r in gate.snapshot()],
            "trace": gate.trace.summary(gate.capacity_mb)}


__all__ = ["TIME_MAX", "TIME_MIN", "WriteRequest", "check_times", "create_app"]

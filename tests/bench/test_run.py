"""memlab.bench.run and memlab.bench.track: one replay per candidate configuration, metrics worked
out by hand on the tiny dataset of tests/conftest.py, the JSON report, presets, and MLflow runs in
a temporary SQLite store."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

import memlab.bench.run as run_mod
from memlab.bench.cli import write_artifacts
from memlab.bench.goldage import GOLD_COLUMNS
from memlab.bench.replay import replay as real_replay
from memlab.bench.run import format_table, resolve_preset, run_bench
from memlab.bench.track import track_outcome
from memlab.config import MemlabConfig
from memlab.errors import ConfigError

REPORT_KEYS = {"dataset", "config", "presets", "embedder", "metrics", "per_category", "ranking",
               "timings", "counts", "abstention", "significance", "vram", "environment"}
NDCG_RANK2 = 1 / math.log2(3)  # one gold item at rank 2


class CountingReplay:
    """Stands in for memlab.bench.run.replay: the real replay, counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, ds, **kw):
        self.calls += 1
        return real_replay(ds, **kw)


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> CountingReplay:
    counter = CountingReplay()
    monkeypatch.setattr(run_mod, "replay", counter)
    return counter


def two_presets(cfg: MemlabConfig) -> list[tuple[str, MemlabConfig]]:
    """cosine and rrf: scorers differ (stage 'score'), candidates are the same."""
    return [("cos", cfg.replace(**{"fusion.scorer": "cosine"})),
            ("rrf", cfg.replace(**{"fusion.scorer": "rrf"}))]


# ----------------------------------------------------------------------------- replays

def test_presets_that_share_candidates_share_one_replay(tiny_bench_folder, hashing_cfg, replays):
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                    progress=False)
    assert replays.calls == 1
    assert [r.name for r in out.results] == ["cos", "rrf"]


def test_presets_with_different_candidates_replay_each(tiny_bench_folder, hashing_cfg, replays):
    presets = [("both", hashing_cfg), ("dense", hashing_cfg.replace(**{"recall.use_lexical": False}))]
    run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    assert replays.calls == 2


# ----------------------------------------------------------------------------- metrics by hand

@pytest.mark.parametrize("scorer", ["cosine", "rrf"])
def test_per_query_metrics_worked_out_by_hand(tiny_bench_folder, hashing_cfg, scorer):
    """See tiny_bench_dataset: gold at rank 1, absent (not yet written), at rank 2, at rank 1."""
    cfg = hashing_cfg.replace(**{"fusion.scorer": scorer})
    out = run_bench(dataset=str(tiny_bench_folder), presets=[(scorer, cfg)], progress=False)
    (res,) = out.results
    pq = res.per_query
    assert list(pq.index) == ["u1::q1", "u1::q2", "u1::q3", "u2::q1"]
    assert pq["recall@1"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert pq["recall@3"].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert pq["mrr"].tolist() == [1.0, 0.0, 0.5, 1.0]
    assert pq["ndcg@10"].tolist() == pytest.approx([1.0, 0.0, NDCG_RANK2, 1.0])
    assert pq["category"].tolist() == ["pets", "travel", "things", "music"]
    assert res.rankings["u1::q3"][:2] == ["u1::i2", "u1::i3"]
    assert "u1::i4" not in res.rankings["u1::q2"]       # written on day 30, asked on day 10
    assert res.rankings["u2::q1"][0] == "u2::i1"        # not u1's i1

    agg = res.aggregate
    assert agg.loc["all", "recall@1"] == pytest.approx(0.5)
    assert agg.loc["all", "recall@3"] == pytest.approx(0.75)
    assert agg.loc["all", "mrr"] == pytest.approx(0.625)
    assert agg.loc["all", "ndcg@10"] == pytest.approx((2 + NDCG_RANK2) / 4)
    assert agg.loc["all", "n"] == 4
    assert agg.loc["things", "recall@1"] == 0.0 and agg.loc["things", "recall@3"] == 1.0
    assert agg.loc["travel", "recall@20"] == 0.0
    assert agg.loc["pets", "mrr"] == 1.0

    report = out.to_json()
    assert report["metrics"]["recall@1"] == pytest.approx(0.5)
    assert report["per_category"]["things"]["mrr"] == pytest.approx(0.5)
    assert report["per_category"]["things"]["n"] == 1


def test_limit_keeps_the_first_questions(tiny_bench_folder, hashing_cfg):
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("x", hashing_cfg)], limit=2,
                    progress=False)
    assert list(out.results[0].per_query.index) == ["u1::q1", "u1::q2"]
    assert out.results[0].aggregate.loc["all", "recall@1"] == pytest.approx(0.5)
    assert out.counts["questions"] == 2 and out.counts["conversations"] == 1


# ----------------------------------------------------------------------------- the report

def test_to_json_keys_timings_and_counts(tiny_bench_folder, hashing_cfg, tiny_bench):
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                    progress=False)
    report = out.to_json()
    assert set(report) == REPORT_KEYS
    assert report["presets"] == ["cos", "rrf"]
    assert report["dataset"] == {"name": "tiny-bench", "version": "1",
                                 "content_hash": tiny_bench.content_hash(), "questions": 4,
                                 "dropped": {}, "rejected": []}
    assert report["embedder"] == "hashing-v1-d384-t80"
    # several presets: config, metrics and per_category are keyed by preset
    assert set(report["config"]) == set(report["metrics"]) == {"cos", "rrf"}
    assert report["config"]["rrf"] == two_presets(hashing_cfg)[1][1].to_flat()
    assert report["metrics"]["rrf"]["mrr"] == pytest.approx(0.625)
    assert set(report["per_category"]["cos"]) == {"pets", "travel", "things", "music"}
    timings = report["timings"]
    for key in ("load", "embed", "ingest", "recall", "total", "peak_rss_mb", "score_cos",
                "score_rrf", "significance"):
        assert key in timings, key
        assert timings[key] >= 0
    assert timings["peak_rss_mb"] > 1                   # megabytes, not bytes or gigabytes
    assert report["counts"] == {"items_written": 5, "items": 6, "questions": 4,
                                "conversations": 2, "candidates": report["counts"]["candidates"],
                                "questions_without_evidence_dropped": 0, "feature_cache_hit": 0,
                                # an empty embedding cache: 6 item texts and 4 questions embedded
                                "embedding cache: hits": 0, "embedding cache: misses": 10}

    table = format_table(out)
    for name in ("cos", "rrf", "tiny-bench"):
        assert name in table
    assert "recall@10 per category" in table


def test_one_preset_reports_flat_metrics(tiny_bench_folder, hashing_cfg):
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("only", hashing_cfg)],
                    progress=False)
    report = out.to_json()
    assert set(report) == REPORT_KEYS
    assert report["config"] == hashing_cfg.to_flat()
    assert "recall@1" in report["metrics"] and "only" not in report["metrics"]
    assert report["significance"] is None and out.significance is None    # nothing to compare
    assert "p(" not in format_table(out) and "significance" not in report["timings"]


# ----------------------------------------------------------------------------- presets

def test_presets_with_different_embedders_are_refused(tiny_bench_folder, hashing_cfg, replays):
    presets = [("a", hashing_cfg), ("b", hashing_cfg.replace(**{"embedding.hashing_dim": 64}))]
    with pytest.raises(ConfigError) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    assert err.value.key == "embedding"
    assert "share the embedder" in str(err.value)
    assert replays.calls == 0


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError) as err:
        resolve_preset("no_such_preset")
    assert err.value.key == "preset" and err.value.value == "no_such_preset"
    for known in ("reverie", "cosine", "bm25", "generative_agents", "hybrid_rrf"):
        assert known in err.value.rule


def test_a_preset_resolves_by_name_or_path(tmp_path):
    name, path = resolve_preset("hybrid_rrf")
    assert name == "hybrid_rrf" and path.name == "hybrid_rrf.yaml" and path.is_file()
    own = tmp_path / "mine.yaml"
    shutil.copy(path, own)
    assert resolve_preset(str(own)) == ("mine", own)


def test_no_presets_is_an_error(tiny_bench_folder):
    with pytest.raises(ConfigError) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=[], progress=False)
    assert err.value.key == "presets"


# ----------------------------------------------------------------------------- MLflow

def _no_fsync(dbapi_connection, _record) -> None:
    dbapi_connection.execute("PRAGMA synchronous=OFF")


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MLflow database for the module. Creating it runs MLflow's migrations, each committed
    with an fsync (seconds on a disk); synchronous=OFF while creating it makes that CPU-bound."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    db = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    uri = f"sqlite:///{db}"
    event.listen(Engine, "connect", _no_fsync)
    try:
        MlflowClient(tracking_uri=uri).search_experiments()
    finally:
        event.remove(Engine, "connect", _no_fsync)
    return uri


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _runs(client, experiment: str) -> list:
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id])


def _artifact_names(client, run_id: str) -> set[str]:
    return {Path(a.path).name for a in client.list_artifacts(run_id)}


def test_track_outcome_logs_a_parent_and_one_run_per_preset(tiny_bench_folder, hashing_cfg,
                                                             tiny_bench, tracking_uri, tmp_path):
    presets = two_presets(hashing_cfg)
    out = run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    run_dir = write_artifacts(out, tmp_path / "results").run_dir
    ids = track_outcome(out, run_dir=run_dir, tracking_uri=tracking_uri, experiment="two")
    assert set(ids) == {"cos", "rrf"}
    client = _client(tracking_uri)
    runs = {r.info.run_id: r for r in _runs(client, "two")}
    assert len(runs) == 3                                           # a parent and two children
    (parent_id,) = [i for i, r in runs.items() if r.data.tags.get("memlab.kind") == "compare"]
    assert _artifact_names(client, parent_id) >= {"recall_curve.png", "per_category.png",
                                                  "report.json"}
    for name, cfg in presets:
        run = runs[ids[name]["run_id"]]
        assert ids[name]["tracking_uri"] == tracking_uri
        assert run.info.status == "FINISHED"
        tags = run.data.tags
        assert tags["mlflow.parentRunId"] == parent_id
        assert tags["memlab.preset"] == name
        assert tags["memlab.dataset.name"] == "tiny-bench"
        assert tags["memlab.dataset.version"] == "1"
        assert tags["memlab.dataset.hash"] == tiny_bench.content_hash()
        assert tags["memlab.embedder"] == "hashing-v1-d384-t80"
        # params: the flat config, values as text (containers as JSON)
        flat = cfg.to_flat()
        assert set(run.data.params) == set(flat)
        assert run.data.params["fusion.scorer"] == flat["fusion.scorer"]
        assert run.data.params["recall.relevance_floor"] == "0.0"
        assert run.data.params["bench.ks"] == "[1, 3, 5, 10, 20]"
        # metrics: overall and per category, '@' mapped to '_at_'
        m = run.data.metrics
        assert m["recall_at_1"] == pytest.approx(0.5)
        assert m["mrr"] == pytest.approx(0.625)
        assert m["recall_at_3/things"] == 1.0 and m["recall_at_1/things"] == 0.0
        assert m["recall_at_20/travel"] == 0.0
        assert m["n"] == 4 and m["n/pets"] == 1
        # u1 holds 3 memories on day 10, u2 2: every ranking is short of 10, none is empty
        assert (m["ranked_empty"], m["ranked_fewer_than_10"], m["ranked_fewer_than_20"]) == (0, 4, 4)
        assert m["ranked_per_question"] == 20                      # max(bench.k, max(bench.ks))
        assert _artifact_names(client, run.info.run_id) >= {
            "config.yaml", "per_query.csv", "recall_curve.png", "per_category.png"}
    # the logged config YAML is the preset's config
    path = client.download_artifacts(ids["rrf"]["run_id"], "config.yaml", str(tmp_path))
    assert MemlabConfig.from_yaml(path) == presets[1][1]


def test_track_outcome_one_preset_logs_one_run_without_parent(tiny_bench_folder, hashing_cfg,
                                                               tracking_uri, tmp_path):
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("solo", hashing_cfg)],
                    progress=False)
    run_dir = write_artifacts(out, tmp_path / "results").run_dir
    ids = track_outcome(out, run_dir=run_dir, tracking_uri=tracking_uri, experiment="one")
    client = _client(tracking_uri)
    (run,) = _runs(client, "one")
    assert run.info.run_id == ids["solo"]["run_id"]
    assert "mlflow.parentRunId" not in run.data.tags
    assert run.data.metrics["time_load"] >= 0                 # timings go to the only run
    assert run.data.metrics["recall_at_1/music"] == 1.0


def test_questions_without_gold_count_for_abstention_not_for_recall(tiny_bench, hashing_cfg,
                                                                    tmp_path, tracking_uri):
    """A question without evidence has nothing to recall: dropped from the recall metrics
    (counted), but replayed and scored for abstention: it should get no memory at all."""
    from memlab.bench.datasets.canonical import Dataset, write_dataset

    q0 = tiny_bench.questions[0]
    abstain = type(q0)(conversation_id=q0.conversation_id, query_id="abstain",
                       text="quantum chromodynamics", asked_at=q0.asked_at,
                       category="unanswerable", evidence=(), meta={})
    ds = Dataset(card=tiny_bench.card, items=tiny_bench.items,
                 questions=tiny_bench.questions + (abstain,))
    write_dataset(ds, tmp_path / "abstain")
    # floor off (hashing_cfg: absolute 0) answers everything; the default zscore floor refuses
    # the question about nothing stored and 'flight to Lisbon' (its item comes after the question)
    presets = [("off", hashing_cfg),
               ("zscore", hashing_cfg.replace(**{"recall.floor_mode": "zscore"}))]
    out = run_bench(dataset=str(tmp_path / "abstain"), presets=presets, progress=False)
    assert out.counts["questions_without_evidence_dropped"] == 1
    assert out.counts["questions"] == len(tiny_bench.questions) + 1       # replayed
    off, zs = out.results
    assert list(off.per_query.index) == ["u1::q1", "u1::q2", "u1::q3", "u2::q1"]
    assert off.aggregate.loc["all", "recall@1"] == pytest.approx(0.5)      # the 4 of conftest
    assert off.rankings["u1::abstain"] != [] and zs.rankings["u1::abstain"] == []
    assert off.abstention.loc["all"].to_dict() == {"abstention": 0.0, "answered": 1.0,
                                                   "n_unanswerable": 1, "n_answerable": 4}
    assert zs.abstention.loc["all"].to_dict() == {"abstention": 1.0, "answered": 0.75,
                                                  "n_unanswerable": 1, "n_answerable": 4}
    report = out.to_json()
    assert report["abstention"]["zscore"]["all"] == {"abstention": 1.0, "answered": 0.75,
                                                     "n_unanswerable": 1, "n_answerable": 4}
    table = format_table(out)
    assert "abstention" in table and "answered" in table
    ids = track_outcome(out, run_dir=write_artifacts(out, tmp_path / "results").run_dir,
                        tracking_uri=tracking_uri, experiment="abstain")
    run = _client(tracking_uri).get_run(ids["zscore"]["run_id"])
    assert run.data.metrics["abstention"] == 1.0 and run.data.metrics["answered"] == 0.75
    assert run.data.metrics["n_unanswerable"] == 1

def test_compare_tests_each_preset_against_the_first(tiny_bench_folder, hashing_cfg,
                                                      tracking_uri, tmp_path):
    """generative_agents ranks u1::q3's gold first where cosine ranks it second (see
    tiny_bench_dataset): recall@1 per question (1, 0, 0, 1) vs (1, 0, 1, 1), a difference of
    +0.25 in one question only. Four questions: all 2^4 sign vectors are enumerated, and one
    differing question is never significant: |+1| and |-1| are equally extreme, p = 1 exactly
    (a one-sided test would say 0.5)."""
    presets = [("cos", hashing_cfg.replace(**{"fusion.scorer": "cosine"})),
               ("ga", hashing_cfg.replace(**{"fusion.scorer": "generative_agents"})),
               ("rrf", hashing_cfg.replace(**{"fusion.scorer": "rrf"}))]
    out = run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    assert out.results[1].per_query["recall@1"].tolist() == [1.0, 0.0, 1.0, 1.0]
    sig = out.significance
    assert sig.attrs == {"baseline": "cos", "method": "randomisation", "resamples": 10_000,
                         "seed": 0, "questions": 4, "exact": True}
    assert sig.loc[("ga", "recall@1"), "diff"] == pytest.approx(0.25)
    assert sig.loc[("ga", "recall@1"), "p"] == 1.0
    assert sig.loc[("ga", "mrr"), "diff"] == pytest.approx(0.125)        # 1/2 -> 1 on u1::q3
    assert (sig.loc["rrf", "p"] == 1.0).all() and (sig.loc["rrf", "diff"] == 0).all()
    assert sig.loc["cos", "p"].isna().all()

    report = out.to_json()["significance"]
    assert report["baseline"] == "cos" and report["exact"] is True
    assert set(report["vs_baseline"]) == {"ga", "rrf"}
    assert report["vs_baseline"]["ga"]["recall@1"] == {"diff": 0.25, "p": 1.0}
    assert set(report["vs_baseline"]["ga"]) == set(out.results[0].per_query.columns) - {
        "category", "ranked", *GOLD_COLUMNS}                          # every metric

    table = format_table(out)
    rows = [ln.split() for ln in table.split("\n\n")[1].splitlines()]
    assert rows[0][-2:] == ["p(ndcg@10)", "n"]
    assert [r[-2] for r in rows[1:]] == ["-", "1.000", "1.000"]
    detail = table.split("vs cos: ")[1].split("\n\n")[0].splitlines()
    assert "all 2^4 sign flips (exact)" in detail[0]
    assert detail[1].split() == ["recall@5", "recall@10", "ndcg@10", "mrr"]
    assert detail[2].split()[0] == "ga" and detail[2].split()[-2:] == ["+0.125", "(1.000)"]

    ids = track_outcome(out, run_dir=write_artifacts(out, tmp_path / "results").run_dir,
                        tracking_uri=tracking_uri, experiment="significance")
    client = _client(tracking_uri)
    ga = client.get_run(ids["ga"]["run_id"])
    assert ga.data.metrics["p.recall_at_1"] == 1.0
    assert ga.data.metrics["diff.recall_at_1"] == pytest.approx(0.25)
    assert ga.data.tags["memlab.significance_baseline"] == "cos"
    first = client.get_run(ids["cos"]["run_id"])
    assert not any(k.startswith(("p.", "diff.")) for k in first.data.metrics)

"""memlab.sweep on the tiny dataset (tests/conftest.py: its metrics are worked out by hand).

On it, every scorer ranks u1::i3 second for u1::q3 ("red bicycle": u1::i2 is closer) unless the
relevance weight is 0, when the newer, equally lexical i3 wins: ndcg@10 goes from
(1 + 0 + 1/log2(3) + 1)/4 to (1 + 0 + 1 + 1)/4 = 0.75. A character budget of 10 selects nothing
(ndcg@10 0), so a sweep that took the wrong direction would report 0.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import memlab
from memlab.bench.datasets import registry
from memlab.bench.run import resolve_preset
from memlab.cli import app
from memlab.embed import make_embedder
from memlab.errors import ConfigError, InvalidInput, MemlabError
from memlab.tune.objective import Evaluator, Objective
from memlab.tune.space import Space
from memlab.tune.study import open_storage
from memlab.tune.sweep import sweep

DEFAULT_NDCG = (1 + 0 + 1 / math.log2(3) + 1) / 4
BEST_NDCG = 0.75

GRID = Space.from_dict({"params": {
    "fusion.relevance": {"float": [0.0, 0.62], "grid": [0.0, 0.62]},
    "selection.char_budget": {"int": [10, 3600], "grid": [10, 3600]}}}, name="tiny-grid")
WIDE = Space.from_dict({"params": {
    "fusion.relevance": {"float": [0.0, 1.0]}, "fusion.lexical": {"float": [0.0, 1.0]},
    "selection.char_budget": {"int": [10, 400], "log": True},
    "recall.lexical_pool_min": {"categorical": [60, 120]}},
    "constraints": [{"normalise": ["fusion.relevance", "fusion.lexical"], "sum": 0.78}]},
    name="tiny-wide")


@pytest.fixture
def hashing(cache_dir):
    return {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
            "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)}


@pytest.fixture
def run(tiny_bench_folder, hashing, tmp_path):
    def go(**kw):
        args = dict(dataset=str(tiny_bench_folder), preset="reverie", overrides=hashing,
                    out_dir=tmp_path / "sweeps", progress=False)
        return sweep(**{**args, **kw})
    go.out_dir = tmp_path / "sweeps"
    return go


def test_grid_sweep_finds_the_better_config_and_its_yaml_runs_in_bench(run, tiny_bench_folder,
                                                                        tmp_path):
    res = run(space=GRID, sampler="grid", trials=10)   # the grid has 4 points: 4 trials run
    assert len(res.trials) == 4 and (res.trials["state"] == "COMPLETE").all()
    got = res.trials.set_index(["fusion.relevance", "selection.char_budget"])["ndcg@10"]
    assert got[(0.0, 3600)] == pytest.approx(BEST_NDCG)
    assert got[(0.62, 3600)] == pytest.approx(DEFAULT_NDCG)
    assert got[(0.0, 10)] == 0 and got[(0.62, 10)] == 0
    assert res.default["ndcg@10"] == pytest.approx(DEFAULT_NDCG)
    assert res.best["values"]["ndcg@10"] == pytest.approx(BEST_NDCG)
    assert res.best["values"]["ndcg@10"] > res.default["ndcg@10"]
    assert res.best["params"] == {"fusion.relevance": 0.0, "selection.char_budget": 3600}
    assert res.best_config.fusion.relevance == 0.0
    assert res.best_config.embedding.backend == "hashing"       # the preset's full config
    table = res.table()
    assert list(table.index[:2]) == ["default", f"#{res.best['number']}"]
    # paired test per question against the defaults (exact: 4 questions, 2^4 sign flips): the
    # best differs on one question only (p = 1); a budget of 10 loses three (p = 4/16)
    p = table["p(ndcg@10)"]
    assert np.isnan(p["default"]) and p[f"#{res.best['number']}"] == pytest.approx(1.0)
    zero = res.trials.loc[res.trials["selection.char_budget"] == 10, "number"].astype(int)
    assert [res.significance[f"#{n}"]["ndcg@10"] for n in zero] == pytest.approx([0.25, 0.25])
    paths = res.write(tmp_path / "out")
    out = CliRunner().invoke(app, ["bench", "-d", str(tiny_bench_folder), "--config",
                                   paths["best_config"], "--no-track", "-q", "--json",
                                   str(tmp_path / "b.json"), "--out-dir", str(tmp_path / "r")])
    assert out.exit_code == 0, out.output
    bench = json.loads((tmp_path / "b.json").read_text())
    assert bench["metrics"]["ndcg@10"] == pytest.approx(res.best["values"]["ndcg@10"])


def test_a_rerun_continues_the_study_and_a_changed_sweep_is_refused(run):
    first = run(space=WIDE, sampler="random", trials=5, study="s")
    before = first.trials[["number", "ndcg@10", *WIDE.keys]]
    second = run(space=WIDE, sampler="random", trials=8, study="s")
    assert list(second.trials["number"]) == list(range(8))
    assert (second.trials["state"] == "COMPLETE").all()
    after = second.trials[["number", "ndcg@10", *WIDE.keys]].head(5)
    assert after.equals(before)                      # nothing redone, nothing lost
    sampled = second.trials[[f"params.{k}" for k in WIDE.keys]].round(12)
    assert not sampled.duplicated().any()            # a resumed sampler draws new values
    assert np.allclose(second.trials["fusion.relevance"] + second.trials["fusion.lexical"], 0.78)
    third = run(space=WIDE, sampler="random", trials=8, study="s")
    assert len(third.trials) == 8                    # already there: no trial runs
    with pytest.raises(ConfigError, match="objective") as err:
        run(space=WIDE, sampler="random", trials=9, study="s", objective="mrr")
    assert "'ndcg@10'" in str(err.value) and "'mrr'" in str(err.value)


def test_python_api_returns_the_trials_as_a_dataframe(tiny_bench_folder, hashing, tmp_path):
    res = memlab.sweep(dataset=str(tiny_bench_folder), preset="reverie", space=WIDE,
                       overrides=hashing, trials=4, sampler="tpe", out_dir=tmp_path,
                       progress=False, objective="mrr", track=False)
    assert res.trials.shape[0] == 4 and "mrr" in res.trials.columns
    assert res.study.study_name == res.to_json()["study"]
    assert res.to_json()["default"]["values"] == {"mrr": 0.625}    # (1 + 0 + 1/2 + 1) / 4


def test_several_objectives_give_the_pareto_front(run, tmp_path):
    res = run(space=WIDE, trials=12, objective="ndcg@10,-prompt_chars", seed=3)
    assert [t.name for t in res.study.directions] == ["MAXIMIZE", "MINIMIZE"]
    done = res.trials[res.trials["state"] == "COMPLETE"]
    pts = done[["ndcg@10", "prompt_chars"]].to_numpy()

    def dominated(p):   # some trial at least as good on both and better on one
        return any(q[0] >= p[0] and q[1] <= p[1] and (q[0] > p[0] or q[1] < p[1]) for q in pts)

    front = {p["number"] for p in res.pareto}
    assert front == {int(n) for n, p in zip(done["number"], pts) if not dominated(p)}
    assert len(set(map(tuple, pts))) > 1              # budgets 10..400 trade chars for ndcg
    paths = res.write(tmp_path / "o")
    assert open(paths["pareto_plot"], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "pareto" in res.to_json()


def test_folds_tune_on_some_conversations_and_score_the_others(run, tiny_bench_folder, hashing):
    res = run(space=GRID, sampler="grid", trials=4, folds=2)
    f = res.folds
    assert f["k"] == 2 and f["metric"] == "ndcg@10"
    tests = [set(x["params"]) for x in f["per_fold"]]
    assert all(t == set(GRID.keys) for t in tests)
    ds = registry.load(str(tiny_bench_folder))
    base = memlab.load_config(resolve_preset("reverie")[1], overrides=hashing)
    ev = Evaluator(ds, Objective.parse("ndcg@10"), embedder=make_embedder(base))
    held = []
    for x in f["per_fold"]:
        frame = ev.per_query(base.replace(**x["params"]))
        # the held-out value is the best config's mean over the questions it was not tuned on
        convs = set(frame["conversation_id"])
        assert x["train"] + x["test"] == 4 and len(convs) == 2
        assert x["tuned"]["ndcg@10"] >= x["default_tuned"]["ndcg@10"]
        held.append(x["held_out"]["ndcg@10"])
    assert f["summary"]["held_out"]["mean"] == pytest.approx(np.mean(held))
    assert f["summary"]["held_out"]["sd"] == pytest.approx(np.std(held, ddof=1))
    # u1 holds q1 (always 1), q2 (never found) and q3 (1 only at relevance 0); u2 holds q1 (1)
    by_size = {x["test"]: x for x in f["per_fold"]}
    assert by_size[1]["held_out"]["ndcg@10"] == 1.0
    assert by_size[3]["tuned"]["ndcg@10"] == 1.0                   # tuned on u2 alone
    assert "folds" in res.to_json() and "held-out fold" in res.format()


def _exact_p(diffs) -> float:
    """The paired randomisation test's p by enumeration of every sign vector (2**n of them)."""
    import itertools

    d = np.asarray(diffs, float)
    stat = abs(d.mean())
    signs = list(itertools.product((1, -1), repeat=len(d)))
    return sum(abs((np.asarray(s) * d).mean()) >= stat - 1e-12 for s in signs) / len(signs)


def test_folds_are_tested_question_by_question(run):
    """Each held-out question is scored by the configuration tuned on the other fold and paired
    with its default score; the p-value is the exact randomisation test over those pairs."""
    res = run(space=GRID, sampler="grid", trials=4, folds=2)
    d, t = res.held_out["default"], res.held_out["tuned"]
    assert list(d.index) == list(t.index) and len(d) == 4 and set(d["fold"]) == {0, 1}
    for x in res.folds["per_fold"]:          # each fold's rows: its own held-out questions
        rows = t[t["fold"] == x["fold"]]
        assert len(rows) == x["test"]
        assert rows["ndcg@10"].mean() == pytest.approx(x["held_out"]["ndcg@10"])
    test = res.held_out_test(["ndcg@10"])
    diffs = (t["ndcg@10"] - d["ndcg@10"]).to_numpy()
    assert test.loc[("tuned", "ndcg@10"), "diff"] == pytest.approx(diffs.mean())
    assert test.loc[("tuned", "ndcg@10"), "p"] == pytest.approx(_exact_p(diffs))
    paired = res.folds["paired"]["ndcg@10"]
    assert paired["p"] == pytest.approx(_exact_p(diffs), abs=1e-6) and paired["questions"] == 4
    frame = res.held_out_frame()
    assert list(frame.columns.get_level_values(0).unique()) == \
        ["question", "default", "tuned", "tuned - default"]
    np.testing.assert_allclose(frame[("tuned - default", "ndcg@10")], diffs)
    by_fold = res.held_out_test(["ndcg@10"], by_fold=True)
    assert set(by_fold.index.get_level_values("fold")) == {0, 1}
    assert "held out, question by question (4): ndcg@10" in res.format()
    assert res.to_json()["folds"]["paired"]["ndcg@10"]["p"] == paired["p"]


def test_held_out_and_transfer_frames_name_numbered_categories(tiny_bench, hashing, tmp_path):
    """A dataset that numbers its categories (as LoCoMo does, names in the questions' meta): the
    held-out and transfer frames carry the names; the trial scores are the same."""
    import dataclasses

    from memlab.bench.datasets.canonical import Dataset, write_dataset

    codes = {"pets": "1", "travel": "2", "things": "3", "music": "4"}
    qs = [dataclasses.replace(q, category=codes[q.category], meta={"category_name": q.category})
          for q in tiny_bench.questions]
    folder = write_dataset(Dataset(tiny_bench.card, tiny_bench.items, qs), tmp_path / "numbered")
    res = sweep(dataset=str(folder), preset="reverie", overrides=hashing, space=GRID,
                sampler="grid", trials=4, folds=2, test_dataset=str(folder),
                out_dir=tmp_path / "s", progress=False)
    want = {k: q.meta["category_name"] for q in qs for k in [f"{q.conversation_id}::{q.query_id}"]}
    for frames in (res.held_out, res.test_frames):
        for frame in frames.values():
            assert frame["category"].to_dict() == {k: want[k] for k in frame.index}


def test_each_fold_samples_its_own_configurations(run):
    """With one seed, the folds' studies drew the same configurations (the issue saw identical
    trials in every fold); each fold now has its own stream, and the sweep's own study keeps
    the seeds it had."""
    res = run(space=WIDE, sampler="random", trials=4, folds=2, study="own")
    storage = open_storage(run.out_dir / "own.journal")
    import optuna

    drawn = [[t.params for t in optuna.load_study(study_name=f"own.fold{i}",
                                                  storage=storage).trials[1:]]
             for i in range(2)]
    assert drawn[0] != drawn[1]
    again = run(space=WIDE, sampler="random", trials=4, study="own2")
    assert [t.params for t in res.study.trials] == [t.params for t in again.study.trials]


def test_transfer_is_tested_question_by_question(run, tiny_bench_folder):
    res = run(space=GRID, sampler="grid", trials=4, test_dataset=str(tiny_bench_folder))
    d, b = res.test_frames["default"], res.test_frames["best"]
    diffs = (b["ndcg@10"] - d["ndcg@10"]).to_numpy()
    assert res.test["paired"]["ndcg@10"]["p"] == pytest.approx(_exact_p(diffs), abs=1e-6)
    assert res.transfer_test(["ndcg@10"]).loc[("best", "ndcg@10"), "mean"] == \
        pytest.approx(BEST_NDCG)
    assert "(p " in res.format().splitlines()[-1]
    with pytest.raises(InvalidInput, match="folds="):
        res.held_out_test()


def test_test_dataset_scores_best_and_default_there(run, tiny_bench_folder):
    res = run(space=GRID, sampler="grid", trials=4, test_dataset=str(tiny_bench_folder))
    assert res.test["best"]["ndcg@10"] == pytest.approx(BEST_NDCG)
    assert res.test["default"]["ndcg@10"] == pytest.approx(DEFAULT_NDCG)
    assert res.to_json()["test"]["dataset"] == "tiny-bench"


def test_macro_categories_is_the_mean_of_category_means(tiny_bench):
    import pandas as pd

    ev = Evaluator(tiny_bench, Objective.parse("ndcg@10"), embedder=None, macro=True)
    frame = pd.DataFrame({"ndcg@10": [1.0, 0.0, 1.0], "category": ["a", "a", "b"]},
                         index=["x", "y", "z"])
    assert ev.reduce(frame)["ndcg@10"] == pytest.approx((0.5 + 1.0) / 2)
    ev.macro = False
    assert ev.reduce(frame)["ndcg@10"] == pytest.approx(2 / 3)
    assert ev.reduce(frame, ["x", "z"])["ndcg@10"] == 1.0


@pytest.mark.parametrize("kw, field, rule", [
    ({"objective": "ndcg@11"}, "objective", "not a per-query column"),
    ({"objective": "ndcg@10,-prompt_chars", "sampler": "cmaes"}, "sampler", "one objective"),
    ({"objective": "ndcg@10,mrr", "folds": 2}, "folds", "one column"),
    ({"sampler": "annealing"}, "sampler", "must be one of"),
    ({"trials": 0}, "trials", ">= 1"),
    ({"level": "turn"}, "level", "must be one of"),
    ({"folds": 3}, "folds", "at most the number of conversations"),
])
def test_bad_arguments_are_named(run, kw, field, rule):
    with pytest.raises(InvalidInput) as err:
        run(space=GRID, **{"trials": 2, **kw})
    assert err.value.field == field and rule in err.value.rule


def test_cli_sweep_writes_yaml_and_json(tiny_bench_folder, hashing, tmp_path):
    sets = [a for k, v in hashing.items() for a in ("--set", f"{k}={v}")]
    space = tmp_path / "grid.yaml"
    space.write_text("params:\n  fusion.relevance: {float: [0.0, 0.62], grid: [0.0, 0.62]}\n",
                     encoding="utf-8")
    args = ["sweep", "-d", str(tiny_bench_folder), "--space", str(space), "--sampler", "grid",
            "--trials", "2", "-q", "--no-track", "--out-dir", str(tmp_path / "o"), "--json",
            str(tmp_path / "s.json"), *sets]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    rep = json.loads((tmp_path / "s.json").read_text())
    assert rep["best"]["values"]["ndcg@10"] == pytest.approx(BEST_NDCG)
    assert rep["default"]["values"]["ndcg@10"] == pytest.approx(DEFAULT_NDCG)
    assert "default" in out.output and "memlab bench --config" in out.output
    bad = CliRunner().invoke(app, [*args[:4], str(tmp_path / "none.yaml"), *args[5:]])
    assert bad.exit_code == 2 and "no such search-space file" in bad.output


def test_one_replay_per_features_key(tiny_bench, hashing_cfg, counting_embedder):
    ev = Evaluator(tiny_bench, Objective.parse("ndcg@10"), embedder=counting_embedder,
                   max_replays=2)
    a, b, c = (hashing_cfg.replace(**{"recall.lexical_pool_min": n}) for n in (60, 120, 240))
    ev.per_query(a)
    ev.per_query(a.replace(**{"fusion.relevance": 0.1}))     # score stage: the same replay
    assert ev.replayed == 1 and len(ev.replays) == 1
    ev.per_query(b)
    ev.per_query(c)                                            # a third key drops the oldest (a)
    assert ev.replayed == 3 and len(ev.replays) == 2
    embedded = len(counting_embedder.queries)
    ev.per_query(a)                                            # back from the feature cache
    assert ev.replayed == 4 and len(counting_embedder.queries) == embedded


def test_session_level_scores_sessions(run, tiny_bench_folder, hashing):
    from memlab.tune.evaluate import item_sessions, per_query

    res = run(space=GRID, sampler="grid", trials=1, level="session", objective="recall@1")
    ds = registry.load(str(tiny_bench_folder))
    base = memlab.load_config(resolve_preset("reverie")[1], overrides=hashing)
    ev = Evaluator(ds, Objective.parse("recall@1"), embedder=make_embedder(base))
    want = per_query(ev.replay(base), base, level="session", sessions=item_sessions(ds))
    assert res.default["recall@1"] == pytest.approx(want["recall@1"].mean())
    assert res.default["recall@1"] == 1.0     # one session per user: its gold session ranks first


def test_an_optuna_rdb_url_holds_the_study(run, tmp_path):
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    run(space=WIDE, sampler="random", trials=2, storage=url, study="rdb")
    res = run(space=WIDE, sampler="random", trials=3, storage=url, study="rdb")
    assert res.storage == url and list(res.trials["number"]) == [0, 1, 2]
    assert not (tmp_path / "sweeps" / "rdb.journal").exists()


def test_a_runtime_setting_does_not_bind_the_study(run, hashing, tmp_path):
    run(space=WIDE, sampler="random", trials=2, study="rt")
    moved = {**hashing, "bench.cache_dir": str(tmp_path / "other-cache")}
    res = run(space=WIDE, sampler="random", trials=3, study="rt", overrides=moved)
    assert len(res.trials) == 3
    with pytest.raises(ConfigError, match="base_config"):
        run(space=WIDE, sampler="random", trials=4, study="rt",
            overrides={**hashing, "fusion.importance": 0.5})


REFUSED = Space.from_dict({"params": {"entity.boost_each": {"float": [0.05, 0.08]},
                                      "entity.boost_cap": {"float": [0.0, 0.04]}}},
                          name="refused")   # each > cap: the config's cross-field rule


def test_configs_the_schema_refuses_fail_their_trials_then_stop_the_sweep(run):
    with pytest.raises(ConfigError, match="21 trials in a row .* must be <= entity.boost_cap"):
        run(space=REFUSED, sampler="random", trials=3, study="refused")
    import optuna

    study = optuna.load_study(study_name="refused",
                              storage=open_storage(run.out_dir / "refused.journal"))
    assert [t.state.name for t in study.trials] == ["FAIL"] * 21
    assert all("entity.boost_each" in t.user_attrs["memlab.error"] for t in study.trials)


@pytest.mark.slow
def test_a_failing_worker_process_is_a_memlab_error(run):
    with pytest.raises(MemlabError, match="worker process.*rerun to continue"):
        run(space=REFUSED, sampler="random", trials=3, study="refused2", n_jobs=2)


INSIDE = Space.from_dict({"params": {
    "fusion.relevance": {"float": [0.0, 1.0]},
    "selection.char_budget": {"int": [10, 4000], "log": True},
    "fusion.temporal_mode": {"categorical": ["intent", "recency"]}}}, name="inside")


def test_a_new_study_starts_from_the_preset_so_the_best_is_never_worse(run):
    res = run(space=INSIDE, sampler="random", trials=3, seed=5, study="d")
    first = res.trials.iloc[0]
    assert (first["fusion.relevance"], first["selection.char_budget"],
            first["fusion.temporal_mode"]) == (0.62, 3600, "intent")
    assert first["ndcg@10"] == pytest.approx(res.default["ndcg@10"])
    assert res.best["values"]["ndcg@10"] >= res.default["ndcg@10"]
    again = run(space=INSIDE, sampler="random", trials=5, seed=5, study="d")
    assert (again.trials["fusion.relevance"] == 0.62).sum() == 1     # not enqueued twice
    off = run(space=INSIDE, sampler="random", trials=2, seed=5, study="off",
              start_from_default=False)
    assert off.trials.iloc[0]["fusion.relevance"] != 0.62
    # a default outside the space (char_budget 3600 > 400): no default trial
    outside = run(space=WIDE, sampler="random", trials=1, study="out")
    assert outside.trials.iloc[0]["selection.char_budget"] != 3600

"""memlab.compare (memlab.bench.compare): per-question comparison of two runs given as frames,
bench results and results folders; win/tie/loss, the paired test, filters, the figure, and
``memlab bench --per-query``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from typer.testing import CliRunner

import memlab
from memlab.bench.artifacts import run_folder, write_artifacts
from memlab.bench.compare import NO_AGE, Comparison, load_run, per_question
from memlab.bench.missplots import OUTCOME_COLOURS, win_tie_loss_bars
from memlab.bench.run import run_bench
from memlab.bench.significance import paired_test
from memlab.cli import app
from memlab.errors import InvalidInput

KEYS = ["u::q1", "u::q2", "u::q3", "u::q4", "u::q5", "u::q6"]


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run a and run b on six questions: b wins q2, q5, q6, loses q3, ties q1 and q4."""
    a = pd.DataFrame({"recall@10": [1.0, 0.0, 1.0, 0.0, 0.5, 0.0],
                      "mrr": [1.0, 0.0, 1 / 3, 0.0, 0.5, 0.0],
                      "category": ["1", "1", "2", "2", "2", "4"],
                      "language": ["en", "zh", "en", "zh", "en", "zh"],
                      "gold_age_days": [1.0, 3.0, 10.0, 20.0, 40.0, 100.0]}, index=KEYS)
    b = pd.DataFrame({"recall@10": [1.0, 1.0, 0.0, 0.0, 1.0, 1.0],
                      "mrr": [0.5, 1.0, 0.0, 1 / 49, 1.0, 0.25]}, index=KEYS)
    return a, b


def test_per_question_ranks_outcomes_and_the_paired_test():
    a, b = _frames()
    c = memlab.compare((a, "base"), (b, "new"), metric="recall@10", dataset="toy")
    assert isinstance(c, Comparison) and (c.a, c.b, c.dataset) == ("base", "new", "toy")
    f = c.to_frame()
    assert f.index.tolist() == KEYS
    assert f["best_rank_a"].tolist() == [1, pd.NA, 3, pd.NA, 2, pd.NA]    # 1 / mrr
    assert f["best_rank_b"].tolist() == [2, 1, pd.NA, 49, 1, 4]   # 1 / (1/49) = 49.000...01
    assert f["outcome"].astype(str).tolist() == ["tie", "win", "loss", "tie", "win", "win"]
    np.testing.assert_allclose(f["diff"], b["recall@10"] - a["recall@10"])
    assert f["category"].tolist() == a["category"].tolist()   # from run a (b has none)
    t = c.test
    ref = paired_test(a["recall@10"], b["recall@10"])        # the same settings: defaults
    assert (t["wins"], t["ties"], t["losses"], t["n"]) == (3, 2, 1, 6)
    assert t["diff"] == pytest.approx((0 + 1 - 1 + 0 + 0.5 + 1) / 6)
    assert t["p"] == pytest.approx(ref.p) and ref.exact      # 2^6 sign flips <= 10,000: exact
    assert "3 wins, 2 ties, 1 losses" in str(c)


def test_summary_per_category_language_and_gold_age():
    a, b = _frames()
    c = memlab.compare(a, b)
    by_cat = c.summary(by="category")
    assert by_cat.index.tolist() == ["all", "1", "2", "4"]
    assert by_cat.loc["2", ["n", "wins", "ties", "losses"]].tolist() == [3, 1, 1, 1]
    sub = paired_test(a["recall@10"][2:5], b["recall@10"][2:5])
    assert by_cat.loc["2", "p"] == pytest.approx(sub.p)        # the group's own test
    assert c.summary(by="language").loc["zh", "wins"] == 2
    ages = c.summary(by="gold_age")
    assert ages.index.tolist() == ["all", "0-7 d", "7-14 d", "14-30 d", "30-90 d", "90-inf d"]
    assert ages["n"].tolist() == [6, 2, 1, 1, 1, 1]
    custom = c.summary(by="gold_age", bins=(0, 30, float("inf")))
    assert custom["n"].tolist() == [6, 4, 2]
    narrow = c.summary(by="gold_age", bins=(0, 30))        # 40 and 100 days: no bin, said so
    assert narrow.index.tolist() == ["all", "0-30 d", NO_AGE] and narrow["n"].tolist() == [6, 4, 2]


def test_filters_recompute_the_test_on_the_subset():
    a, b = _frames()
    c = memlab.compare(a, b)
    old = c.filter(min_age_days=14)
    assert old.to_frame().index.tolist() == ["u::q4", "u::q5", "u::q6"]
    assert old.test["wins"] == 2 and old.test["n"] == 3
    young_en = c.filter(max_age_days=14, language="en")
    assert young_en.to_frame().index.tolist() == ["u::q1", "u::q3"]
    assert c.filter(min_age_days=10, max_age_days=40).to_frame().index.tolist() == [
        "u::q3", "u::q4"]                                      # [min, max): 10 in, 40 out
    assert c.filter(category=["1", "4"]).test["n"] == 3
    assert c.filter(category="2").test["losses"] == 1
    with pytest.raises(InvalidInput, match="leaves no question"):
        c.filter(category="9")


def test_errors_name_the_run_the_question_and_the_column():
    a, b = _frames()
    with pytest.raises(InvalidInput, match=r"u::q6.*run_b|run_b.*u::q6"):
        memlab.compare(a, b.drop(index="u::q6"))
    with pytest.raises(InvalidInput, match="metric.*ndcg@10"):
        memlab.compare(a, b, metric="ndcg@10")
    with pytest.raises(InvalidInput, match="best_rank.*mrr"):
        memlab.compare(a, b.drop(columns="mrr"))
    with pytest.raises(InvalidInput, match="run_a"):
        memlab.compare(42, b)
    with pytest.raises(InvalidInput, match="duplicated"):
        memlab.compare(pd.concat([a, a.iloc[:1]]), b)
    with pytest.raises(InvalidInput, match="gold_age"):
        memlab.compare(a.drop(columns="gold_age_days"), b).summary(by="gold_age")
    with pytest.raises(InvalidInput, match="method"):
        memlab.compare(a, b, method="t-test")
    with pytest.raises(InvalidInput, match="run_a"):
        memlab.compare("/nonexistent/folder", b)


def test_win_tie_loss_bars_draws_counts_per_group_with_p_values():
    a, b = _frames()
    c = memlab.compare((a, "base"), (b, "new"), dataset="toy")
    fig = win_tie_loss_bars(c, by="category")
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert ax.get_title() == "toy: new vs base, recall@10 per question"
    ticks = dict(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    assert [ticks[y] for y in sorted(ticks, reverse=True)] == ["all", "1", "2", "4"]
    # bars drawn column by column (wins, ties, losses), groups top to bottom
    widths = [p.get_width() for p in ax.patches]
    assert widths == [3, 1, 1, 1, 2, 1, 1, 0, 1, 0, 1, 0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["new better", "tie",
                                                                  "base better"]
    assert ax.patches[0].get_facecolor()[:3] == pytest.approx(
        tuple(int(OUTCOME_COLOURS["wins"][i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert sum("p=" in t.get_text() for t in ax.texts) == 4
    shares = c.plot(by=None, share=True).axes[0]
    assert [p.get_width() for p in shares.patches] == pytest.approx([0.5, 2 / 6, 1 / 6])
    with pytest.raises(InvalidInput, match="comparison"):
        win_tie_loss_bars(c.to_frame())


# ----------------------------------------------------------------------------- bench runs

@pytest.fixture
def bench_out(tiny_bench_folder, hashing_cfg):
    presets = [("cos", hashing_cfg.replace(**{"fusion.scorer": "cosine"})),
               ("bm25", hashing_cfg.replace(**{"fusion.scorer": "bm25"}))]
    return run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)


def test_bench_results_outcomes_and_folders_are_runs(tmp_path, bench_out):
    out = bench_out
    from_results = memlab.compare(out.results[0], out.results[1], metric="recall@1")
    from_outcome = memlab.compare((out, "cos"), (out, "bm25"), metric="recall@1")
    assert from_outcome.dataset == "tiny-bench" and from_results.dataset is None
    pd.testing.assert_series_equal(from_results.to_frame()["best_rank_b"],
                                   from_outcome.to_frame()["best_rank_b"])
    ages = from_outcome.to_frame()["gold_age_days"]      # u1::q2's gold is written 20 days
    assert ages.drop("u1::q2").to_dict() == {"u1::q1": 9.0, "u1::q3": 7.0, "u2::q1": 9.0}
    assert np.isnan(ages["u1::q2"])                        # after it: no gold yet, no age
    assert from_outcome.to_frame().loc["u1::q3", "best_rank_a"] == 2    # conftest: rank 2
    assert from_outcome.summary(by="category").index.tolist() == [
        "all", "music", "pets", "things", "travel"]                       # sorted groups
    run_dir = write_artifacts(out, run_folder(tmp_path / "results", "tiny", stamp="x")).run_dir
    report = tmp_path / "report.json"
    report.write_text(json.dumps({**out.to_json(), "artifacts": str(run_dir),
                                  "artifact_folders": {"cos": "cos", "bm25": "bm25"}}))
    for a, b, names in (((run_dir, "cos"), (run_dir, "bm25"), ("cos", "bm25")),
                        (run_dir / "cos", run_dir / "bm25", ("cos", "bm25")),
                        ((report, "cos"), (report, "bm25"), ("cos", "bm25")),
                        (run_dir / "cos" / "per_query.csv", run_dir / "bm25" / "per_query.csv",
                         ("per_query", "per_query"))):
        c = memlab.compare(a, b, metric="recall@1")
        assert (c.a, c.b) == names
        pd.testing.assert_series_equal(c.to_frame()["outcome"],
                                       from_outcome.to_frame()["outcome"])
        np.testing.assert_array_equal(c.to_frame()["best_rank_a"].to_numpy(dtype=float,
                                                                          na_value=np.nan),
                                      from_outcome.to_frame()["best_rank_a"].to_numpy(
                                          dtype=float, na_value=np.nan))
    assert memlab.compare(run_dir / "cos", run_dir / "bm25").dataset == "tiny-bench"
    with pytest.raises(InvalidInput, match="several presets.*cos, bm25"):
        load_run(out)
    with pytest.raises(InvalidInput, match="several presets"):
        load_run(run_dir)
    with pytest.raises(InvalidInput, match="no such preset"):
        load_run((out, "nope"))


def test_per_question_frame_of_a_bench(bench_out):
    f = per_question(bench_out)
    assert f.attrs == {"dataset": "tiny-bench", "metric": "recall@10", "baseline": "cos"}
    assert list(f.columns) == ["category", "language", "gold_age_days", "best_rank:cos",
                               "recall@10:cos", "best_rank:bm25", "recall@10:bm25",
                               "outcome:bm25"]
    assert f["best_rank:cos"].tolist() == [1, pd.NA, 2, 1]        # see tests/conftest.py
    assert f["recall@10:bm25"].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert f["outcome:bm25"].tolist() == ["tie"] * 4
    assert f["category"].tolist() == ["pets", "travel", "things", "music"]
    assert per_question(bench_out, metric="mrr")["mrr:cos"].tolist() == [1.0, 0.0, 0.5, 1.0]


def test_bench_per_query_cli_writes_parquet_and_prints_outcomes(tmp_path, tiny_bench_folder,
                                                               cache_dir):
    out = tmp_path / "pq" / "per_query.parquet"
    res = CliRunner().invoke(app, [
        "bench", "--dataset", str(tiny_bench_folder), "--compare", "cosine,hybrid_rrf",
        "--set", "embedding.backend=hashing", "--cache-dir", str(cache_dir), "--no-track",
        "--out-dir", str(tmp_path / "results"), "-q", "--per-query", str(out)],
        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "hybrid_rrf vs cosine, recall@10 per question:" in res.stdout
    assert f"wrote {out} (4 questions)" in res.stdout
    frame = pd.read_parquet(out)
    assert frame.index.tolist() == ["u1::q1", "u1::q2", "u1::q3", "u2::q1"]
    assert {"best_rank:cosine", "best_rank:hybrid_rrf", "recall@10:cosine",
            "outcome:hybrid_rrf", "category", "gold_age_days"} <= set(frame.columns)
    assert frame.loc["u1::q1", "best_rank:cosine"] == 1
    bad = CliRunner().invoke(app, [
        "bench", "--dataset", str(tiny_bench_folder), "--compare", "cosine",
        "--set", "embedding.backend=hashing", "--no-track", "--per-query", "x.xlsx"])
    assert bad.exit_code == 2 and "--per-query" in bad.stderr and "x.xlsx" in bad.stderr


def test_explain_misses_cli_prints_the_table_and_a_question_trace(tmp_path, tiny_bench_folder,
                                                                  cache_dir):
    out, fig, js = tmp_path / "m.csv", tmp_path / "m.png", tmp_path / "m.json"
    res = CliRunner().invoke(app, [
        "explain-misses", "--dataset", str(tiny_bench_folder), "--compare", "cosine,hybrid_rrf",
        "--set", "embedding.backend=hashing", "--cache-dir", str(cache_dir), "-k", "1",
        "--question", "u1::q3", "--by", "category", "--out", str(out), "--figure", str(fig),
        "--json", str(js), "-q"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "questions per stage" in res.stdout and "share of the misses" in res.stdout
    assert "u1::q3 [things] 'red bicycle'" in res.stdout
    assert "cosine: outranked at k=1" in res.stdout and "hybrid_rrf: outranked at k=1" in \
        res.stdout
    frame = pd.read_csv(out)
    assert len(frame) == 8 and set(frame["preset"]) == {"cosine", "hybrid_rrf"}
    assert fig.read_bytes()[:4] == b"\x89PNG"
    report = json.loads(js.read_text())
    assert report["counts"]["cosine"]["not_stored"] == 1 and report["k"] == [1]
    assert report["share_of_misses"]["hybrid_rrf"]["outranked"] == 0.5
    bad = CliRunner().invoke(app, [
        "explain-misses", "--dataset", str(tiny_bench_folder), "--compare", "cosine",
        "--set", "embedding.backend=hashing", "--cache-dir", str(cache_dir), "--question",
        "u1::nope"])
    assert bad.exit_code == 2 and "u1::nope" in bad.stderr
    early = CliRunner().invoke(app, ["explain-misses", "--dataset", str(tiny_bench_folder),
                                     "--out", "x.xlsx"])
    assert early.exit_code == 2 and "--out" in early.stderr and "x.xlsx" in early.stderr

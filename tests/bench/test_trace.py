"""memlab.bench.trace and memlab.bench.misses: the stage that lost each question's gold, on a
hand-built replay where every question's losing stage is known (one question per stage), and on
the tiny dataset of tests/conftest.py replayed for real."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from memlab.bench.datasets.canonical import Card, Dataset, Item, Question, write_dataset
from memlab.bench.misses import NO_AGE, MissReport, explain_misses
from memlab.bench.missplots import STAGE_COLOURS, where_lost_bars
from memlab.bench.replay import Replayed
from memlab.bench.run import rank, run_bench
from memlab.bench.trace import MISS_STAGES, STAGES, trace_replay
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.features import Features, make_columns


def day(n: float) -> datetime:
    """``n`` days after 2024-01-01T00:00Z (other folders have a conftest too: no import)."""
    return datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(days=n)


#: reverie with an absolute floor at 0.5 (lexical never passes), k = 2 of 2 ranked, one
#: permanent memory per question, a 100-character budget; dedup at the default Jaccard 0.82
CFG = MemlabConfig().replace(**{
    "embedding.backend": "hashing", "recall.floor_mode": "absolute",
    "recall.relevance_floor": 0.5, "recall.lexical_floor": 1.0, "recall.permanent_limit": 1,
    "bench.k": 2, "bench.ks": [1, 2], "selection.char_budget": 100})

# question -> its rows: (item, cosine, overrides); the gold item of each question is "g<stage>"
ROWS = {
    "found": [("g_found", 0.9, {})],
    "floor": [("x_floor", 0.9, {}), ("g_floor", 0.3, {})],
    # long-term, 2000 days since access: retention ~1e-7 < 0.05, relevance 0.6 < 0.85
    "forgetting": [("x_forget", 0.9, {}), ("g_forgetting", 0.6, {"since_access_days": 2000.0})],
    "permanent_cap": [("x_cap", 0.9, {"layer": 0}), ("g_permanent_cap", 0.7, {"layer": 0})],
    "dedup": [("x_dedup", 0.9, {}), ("g_dedup", 0.8, {"terms": ("x_dedup",)})],
    "budget": [("x_budget", 0.9, {"text_len": 60}), ("g_budget", 0.8, {"text_len": 50})],
    "outranked": [("x_out1", 0.95, {}), ("x_out2", 0.9, {}), ("g_outranked", 0.8, {})],
    "not_candidate": [("x_nc", 0.9, {})],
    "not_stored": [("x_ns", 0.9, {})],
}
LATER = {"g_not_stored"}        # written on day 20, after the questions (day 10)
CARD = Card(name="stages", version="1", language="en", license="CC0-1.0", source="memlab tests",
            granularity="turn", description="One question per stage that can lose the gold.")


def _hand_built() -> tuple[Replayed, Dataset]:
    """The replay of :data:`ROWS` (conversation u1, every question on day 10) and its dataset."""
    cols: dict[str, list] = {c: [] for c in ("qid", "row", "cosine", "dense_rank", "layer",
                                             "since_access_days", "text_len", "importance")}
    terms, texts, ids, row_item = {}, {}, {}, {}
    qrows = []
    for qid, (stage, rows) in enumerate(ROWS.items()):
        for rank_, (item, cos, extra) in enumerate(rows, start=1):
            row = len(cols["row"]) + 1
            cols["qid"].append(qid)
            cols["row"].append(row)
            cols["cosine"].append(cos)
            cols["dense_rank"].append(rank_)
            cols["layer"].append(extra.get("layer", 1))
            cols["since_access_days"].append(extra.get("since_access_days", 0.0))
            cols["text_len"].append(extra.get("text_len", 10))
            cols["importance"].append(0.5)
            terms[row] = frozenset(extra.get("terms", (item,)))
            texts[row], ids[row], row_item[row] = f"text of {item}", item, item
        qrows.append({"qid": qid, "query_id": f"q_{stage}", "conversation_id": "u1",
                      "category": stage, "evidence": (f"g_{stage}",), "text": f"ask {stage}"})
    features = Features(columns=make_columns(**cols), terms=terms, texts=texts, ids=ids)
    rep = Replayed(features, pd.DataFrame(qrows), row_item, {r: "s1" for r in row_item})
    items = sorted({i for rows in ROWS.values() for i, _, _ in rows}
                   | {f"g_{s}" for s in ROWS})
    ds = Dataset(CARD, [Item("u1", i, "s1", "Ann", f"text of {i}", day(20 if i in LATER else 1))
                        for i in items],
                 [Question("u1", f"q_{s}", f"ask {s}", day(10), s, (f"g_{s}",),
                           {"language": "en" if n % 2 else "zh"})
                  for n, s in enumerate(ROWS)])
    return rep, ds


@pytest.fixture(scope="module")
def hand():
    return _hand_built()


def test_each_question_is_lost_at_its_stage(hand):
    rep, ds = hand
    tr = trace_replay(rep, CFG, ds=ds, preset="reverie")
    stages = tr.questions["stage"].astype(str)
    assert stages.to_dict() == {f"u1::q_{s}": s for s in ROWS}
    assert set(ROWS) == set(STAGES)                     # one question per stage, every stage
    assert tr.summary().tolist() == [1] * len(STAGES)
    assert tr.misses().index.tolist() == [f"u1::q_{s}" for s in ROWS if s != "found"]


def test_ranks_walk_positions_and_routes(hand):
    rep, ds = hand
    tr = trace_replay(rep, CFG, ds=ds)
    q, g = tr.questions, tr.gold.set_index("item")
    assert q.loc["u1::q_found", "best_rank"] == 1
    assert pd.isna(q.loc["u1::q_outranked", "best_rank"])  # 2 memories ranked, both above it
    # the gold of dedup and budget was the walk's second row: skipped there
    assert g.loc["g_dedup", "walk_position"] == 2 and g.loc["g_budget", "walk_position"] == 2
    assert g.loc["g_outranked", "walk_position"] == 3
    assert pd.isna(g.loc["g_permanent_cap", "walk_position"])    # cut before the walk
    assert not bool(g.loc["g_floor", "relevant"]) and bool(g.loc["g_floor", "eligible"])
    assert not bool(g.loc["g_forgetting", "eligible"]) and bool(g.loc["g_forgetting", "relevant"])
    assert g.loc["g_found", "routes"] == "dense" and g.loc["g_permanent_cap", "routes"] == \
        "dense+permanent"
    assert g.loc["g_not_candidate", "routes"] == "" and np.isnan(g.loc["g_not_candidate", "score"])


def test_the_ranking_is_the_benchmarks(hand):
    rep, ds = hand
    tr = trace_replay(rep, CFG, ds=ds)
    ranked = rank(rep, CFG)
    for key, rank_ in tr.questions["best_rank"].items():
        gold = [f"u1::{e}" for e in rep.questions.set_index("query_id").loc[key[4:], "evidence"]]
        hits = [i + 1 for i, item in enumerate(ranked[key]) if item in gold]
        assert (min(hits) if hits else None) == (None if pd.isna(rank_) else rank_)


def test_without_the_dataset_a_gold_written_later_is_not_a_candidate(hand):
    rep, _ = hand
    tr = trace_replay(rep, CFG)
    assert tr.questions.loc["u1::q_not_stored", "stage"] == "not_candidate"
    assert "gold_age_days" not in tr.questions and "language" not in tr.questions


def test_gold_age_and_language_come_from_the_dataset(hand):
    rep, ds = hand
    q = trace_replay(rep, CFG, ds=ds).questions
    assert q.loc["u1::q_found", "gold_age_days"] == 9.0
    assert np.isnan(q.loc["u1::q_not_stored", "gold_age_days"])   # written 10 days later: no age
    assert q.loc["u1::q_found", "language"] == "zh" and q.loc["u1::q_floor", "language"] == "en"


def test_a_larger_k_finds_the_outranked_gold():
    rep, ds = _hand_built()
    cfg = CFG.replace(**{"bench.k": 3, "bench.ks": [1, 3]})
    q = trace_replay(rep, cfg, ds=ds).questions
    assert q.loc["u1::q_outranked", "stage"] == "found"
    assert q.loc["u1::q_outranked", "best_rank"] == 3
    # k = 1: the dedup and budget gold were skipped after one pick, but rank 2 is past k anyway
    q1 = trace_replay(rep, CFG, k=1, ds=ds).questions
    assert q1.loc["u1::q_dedup", "stage"] == "outranked"
    assert q1.loc["u1::q_budget", "stage"] == "outranked"


def test_the_scorers_routes_decide_what_is_a_candidate(hand):
    """rrf ranks only its routes' hits: a row the dense and lexical routes did not return is not
    its candidate; with the floor off, the floor question's gold is found by rrf's rank."""
    rep, ds = hand
    table = dict(rep.features.columns)
    table["dense_rank"] = table["dense_rank"].copy()
    gold_floor = int(np.flatnonzero(np.asarray([rep.row_item[r] == "g_floor"
                                                for r in table["row"]]))[0])
    table["dense_rank"][gold_floor] = 0                  # found by no rank-giving route
    rep2 = Replayed(Features(columns=table, terms=rep.features.terms, texts=rep.features.texts,
                             ids=rep.features.ids), rep.questions, rep.row_item, rep.row_session)
    rrf = CFG.replace(**{"fusion.scorer": "rrf", "recall.relevance_floor": 0.0})
    q = trace_replay(rep2, rrf, ds=ds).questions
    assert q.loc["u1::q_floor", "stage"] == "not_candidate"
    assert q.loc["u1::q_forgetting", "stage"] == "found"     # no forgetting in rrf
    assert q.loc["u1::q_found", "stage"] == "found"


def test_a_question_with_several_gold_items_takes_the_furthest(hand):
    rep, ds = hand
    q = rep.questions.copy()
    q.loc[q["query_id"] == "q_floor", "evidence"] = pd.Series(
        [("g_floor", "x_floor", "g_not_candidate")], index=q.index[q["query_id"] == "q_floor"])
    rep2 = Replayed(rep.features, q, rep.row_item, rep.row_session)
    tr = trace_replay(rep2, CFG)
    assert tr.questions.loc["u1::q_floor", "stage"] == "found"
    assert tr.questions.loc["u1::q_floor", "gold_item"] == "x_floor"
    assert tr.questions.loc["u1::q_floor", "n_gold"] == 3
    assert tr.gold[tr.gold["question"] == "u1::q_floor"]["stage"].tolist() == [
        "floor", "found", "not_candidate"]


def test_one_question_trace_shows_signals_terms_and_the_funnel(hand):
    rep, ds = hand
    qt = trace_replay(rep, CFG, ds=ds, preset="reverie").question("u1::q_forgetting")
    assert qt.stage == "forgetting" and qt.preset == "reverie" and qt.k == 2
    g = qt.to_frame().loc["g_forgetting"]
    assert g["cosine"] == pytest.approx(0.6) and g["since_access_days"] == 2000.0
    assert g["retention"] < CFG.forgetting.eligibility_threshold
    assert g["relevance_term"] == pytest.approx(0.62 * 0.6)
    terms = [c for c in qt.gold.columns if c.endswith("_term")]
    assert g[terms].sum() == pytest.approx(g["score"])        # the terms are the score
    f = qt.funnel
    assert f["rows"].tolist() == [2, 2, 2, 1, 1, 1]            # forgetting drops it
    assert f["gold g_forgetting"].tolist()[:3] == [2, 2, 2]
    assert f["gold g_forgetting"].isna().tolist()[3:] == [True, True, True]
    assert qt.ranking["id"].tolist() == ["x_forget"] and not qt.ranking["gold"].any()
    text = str(qt)
    assert "forgetting" in text and "g_forgetting" in text and "routes dense" in text
    with pytest.raises(InvalidInput, match="question"):
        trace_replay(rep, CFG).question("u1::nope")


def test_k_out_of_range_is_named(hand):
    rep, _ = hand
    for k in (0, 3, 2.0, True):
        with pytest.raises(InvalidInput, match="k"):
            trace_replay(rep, CFG, k=k)


# ----------------------------------------------------------------------------- over a dataset

def test_explain_misses_on_a_replayed_dataset(tmp_path, tiny_bench_folder, hashing_cfg):
    """tiny-bench (tests/conftest.py): u1::q2's gold is written on day 30, after the question;
    u1::q3's gold ranks 2 ("red bicycle" is closer); the others rank 1."""
    presets = [("cos", hashing_cfg.replace(**{"fusion.scorer": "cosine"})),
               ("rrf", hashing_cfg.replace(**{"fusion.scorer": "rrf"}))]
    report = explain_misses(dataset=str(tiny_bench_folder), presets=presets, k=1)
    assert isinstance(report, MissReport) and report.presets == ["cos", "rrf"]
    frame = report.to_frame()
    assert frame.index.names == ["preset", "question"] and len(frame) == 8
    for p in ("cos", "rrf"):
        assert frame.loc[p, "stage"].astype(str).to_dict() == {
            "u1::q1": "found", "u1::q2": "not_stored", "u1::q3": "outranked",
            "u2::q1": "found"}
        assert frame.loc[(p, "u1::q3"), "best_rank"] == 2
    counts = report.summary()
    assert counts.loc["cos"].to_dict() == {**{s: 0 for s in STAGES}, "found": 2,
                                           "not_stored": 1, "outranked": 1}
    shares = report.summary(share=True, misses_only=True)
    assert list(shares.columns) == list(MISS_STAGES)
    assert shares.loc["rrf", "not_stored"] == 0.5 and shares.loc["rrf", "outranked"] == 0.5
    by_cat = report.summary(by="category")
    assert by_cat.loc[("cos", "things"), "outranked"] == 1
    assert by_cat.loc["cos"].index.tolist() == ["music", "pets", "things", "travel"]   # sorted
    by_age = report.summary(by="gold_age", bins=(0, 8, 30))   # u1::q2: gold written 20 days
    assert by_age.loc[("rrf", "0-8 d"), "outranked"] == 1         # later, no age, in no bin
    assert by_age.loc[("rrf", "8-30 d"), "found"] == 2            # u1::q3: 7 days
    assert by_age.loc[("rrf", NO_AGE), "not_stored"] == 1
    assert by_age.loc["cos"].index.tolist() == ["0-8 d", "8-30 d", NO_AGE]   # age order
    assert report.question("u1::q3", "rrf").stage == "outranked"
    assert set(report.question("u1::q3")) == {"cos", "rrf"}
    # the best rank is the benchmark's: 1 / mrr
    out = run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    for r in out.results:
        best = report.traces[r.name].questions["best_rank"].astype(float).fillna(np.inf)
        np.testing.assert_allclose(1.0 / best, r.per_query["mrr"].loc[best.index])


def test_explain_misses_errors_name_the_problem(tiny_bench_folder, hashing_cfg):
    with pytest.raises(InvalidInput, match="presets"):
        explain_misses(dataset=str(tiny_bench_folder), presets=[])
    with pytest.raises(InvalidInput, match="distinct"):
        explain_misses(dataset=str(tiny_bench_folder), presets=[("a", hashing_cfg),
                                                                ("a", hashing_cfg)])
    with pytest.raises(InvalidInput, match="by"):
        report = explain_misses(dataset=str(tiny_bench_folder), presets=[("a", hashing_cfg)])
        report.summary(by="colour")
    with pytest.raises(InvalidInput, match="preset"):
        report.question("u1::q1", "nope")


def test_where_lost_bars_draws_one_bar_per_preset_and_stage(tmp_path, tiny_bench_folder,
                                                          hashing_cfg):
    presets = [("cos", hashing_cfg.replace(**{"fusion.scorer": "cosine"})), ("rev", hashing_cfg)]
    report = explain_misses(dataset=str(tiny_bench_folder), presets=presets, k=1)
    fig = where_lost_bars(report)
    assert isinstance(fig, Figure)
    (ax, ) = fig.axes
    assert "tiny-bench" in ax.get_title() and "recall@1" in ax.get_title()
    ticks = dict(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    assert [ticks[y] for y in sorted(ticks, reverse=True)] == ["cos (n=2)", "rev (n=2)"]
    # two stages reached (not_stored, outranked), one segment each per preset: 0.5 + 0.5
    assert len(ax.patches) == 4
    assert sorted(p.get_width() for p in ax.patches) == [0.5] * 4
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["not_stored: written after the question was asked",
                      "outranked: k memories ranked above it"]
    assert {p.get_facecolor()[:3] for p in ax.patches} == {
        tuple(int(STAGE_COLOURS[s][i:i + 2], 16) / 255 for i in (1, 3, 5))
        for s in ("not_stored", "outranked")}
    # into given axes, counts with found
    fig2 = Figure()
    ax2 = fig2.add_subplot()
    assert where_lost_bars(report, ax=ax2, share=False, misses_only=False) is fig2
    assert sorted(p.get_width() for p in ax2.patches) == [1, 1, 1, 1, 2, 2]
    assert ax2.get_xlabel() == "questions"
    assert report.plot().axes[0].get_title() == ax.get_title()
    with pytest.raises(InvalidInput, match="report"):
        where_lost_bars(report.to_frame())


def test_every_stage_has_a_description_and_a_colour():
    from memlab.bench.trace import STAGE_DESCRIPTIONS

    assert set(STAGE_DESCRIPTIONS) == set(STAGES) == set(STAGE_COLOURS)
    assert len(set(STAGE_COLOURS.values())) == len(STAGES)

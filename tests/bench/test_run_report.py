"""What ``memlab bench`` reports besides the metrics (issue 7, defects 10-12): question counts as
integers, rankings shorter than k counted, what is ranked per question, the per-category metrics
the user picks, the embedder refusing to fall back silently, datasets that cannot be evaluated.
The tiny dataset of tests/conftest.py throughout (hashing embedder)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlab.bench.run import format_table, run_bench


def day(n: float) -> datetime:
    """``n`` days after 2024-01-01T00:00Z (as in tests/conftest.py)."""
    return datetime(2024, 1, 1, tzinfo=timezone.utc) + timedelta(days=n)


def two_presets(cfg):
    return [("cos", cfg.replace(**{"fusion.scorer": "cosine"})),
            ("rrf", cfg.replace(**{"fusion.scorer": "rrf"}))]


def block(table: str, title: str | None = None) -> list[list[str]]:
    """The rows (split on spaces) of the table block that follows ``title`` (None: the first
    block after the header line), up to the next blank line."""
    lines = table.splitlines()
    start = (lines.index("") if title is None
             else next(i for i, ln in enumerate(lines) if ln.startswith(title))) + 1
    rows = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        rows.append(ln.split())
    return rows


# ----------------------------------------------------------------------------- n is a count

def test_the_question_count_n_prints_as_an_integer(tiny_bench_folder, hashing_cfg):
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                    progress=False)
    rows = block(format_table(out))
    assert rows[0][-1] == "n"
    assert [r[-1] for r in rows[1:]] == ["4", "4"]      # 4 questions, not 4.000


# ----------------------------------------------------------------------------- short rankings

FRUIT = ["apple", "banana", "cherry", "durian", "elderberry", "fig",
         "苹果", "香蕉", "樱桃", "榴莲", "葡萄", "西瓜"]


@pytest.fixture
def short_folder(tmp_path, tiny_bench):
    """The tiny dataset plus u3, asked before its only item is written (an empty ranking), and u4,
    twelve unrelated one-word items (6 en, 6 zh) all written before its question.

    With the relevance floor at 0, every written item is a candidate (the dense pool holds
    max(12, 4 * 20) = 80) and none is a near duplicate, so a question ranks as many memories as
    its conversation holds when it is asked: u1 3 (i4 is written on day 30), u2 2, u3 0, u4 12.
    Against k = 10 and the largest cut-off 20: 1 empty, 5 below 10, 6 below 20."""
    from memlab.bench.datasets.canonical import Dataset, Item, Question, write_dataset

    items = list(tiny_bench.items) + [Item("u3", "i1", "s1", "Cy", "I moved to Lyon", day(30))]
    items += [Item("u4", f"i{n}", "s1", "Di", word, day(n + 1)) for n, word in enumerate(FRUIT)]
    questions = list(tiny_bench.questions) + [
        Question("u3", "q1", "where did Cy move", day(10), "travel", ("i1",)),
        Question("u4", "q1", "樱桃 cherry", day(20), "things", ("i2", "i8"))]
    return write_dataset(Dataset(tiny_bench.card, items, questions), tmp_path / "short")


RANKED = {"u1::q1": 3, "u1::q2": 3, "u1::q3": 3, "u2::q1": 2, "u3::q1": 0, "u4::q1": 12}


def test_rankings_shorter_than_k_are_counted_per_preset(short_folder, hashing_cfg):
    out = run_bench(dataset=str(short_folder), presets=two_presets(hashing_cfg), progress=False)
    for r in out.results:
        assert {q: len(v) for q, v in r.rankings.items()} == RANKED
        assert r.per_query["ranked"].to_dict() == RANKED            # per question, in the CSV
    counts = {"empty": 1, "fewer_than_10": 5, "fewer_than_20": 6}
    ranking = out.to_json()["ranking"]
    assert {name: {k: v for k, v in ranking[name].items() if k in counts}
            for name in ("cos", "rrf")} == {"cos": counts, "rrf": counts}

    rows = block(format_table(out), "questions ranked fewer memories than k")
    assert rows[0] == ["empty", "<10", "<20", "of"]
    assert rows[1:] == [["cos", "1", "5", "6", "6"], ["rrf", "1", "5", "6", "6"]]


def test_one_preset_reports_its_ranking_counts_flat(short_folder, hashing_cfg):
    out = run_bench(dataset=str(short_folder), presets=[("only", hashing_cfg)], progress=False)
    ranking = out.to_json()["ranking"]
    assert ranking["empty"] == 1 and ranking["fewer_than_10"] == 5


def test_bench_k_above_the_cut_offs_is_counted_against_itself(short_folder, hashing_cfg):
    """bench.k = 12 (> no cut-off but < 20): u4's 12 memories reach it, the others do not."""
    cfg = hashing_cfg.replace(**{"bench.k": 12})
    out = run_bench(dataset=str(short_folder), presets=[("only", cfg)], progress=False)
    ranking = out.to_json()["ranking"]
    assert ranking["fewer_than_12"] == 5 and ranking["fewer_than_20"] == 6
    assert "fewer_than_10" not in ranking


# ----------------------------------------------------------------------------- what is ranked

def test_the_header_says_how_many_memories_are_ranked_and_why(tiny_bench_folder, hashing_cfg):
    """bench.k 10, bench.ks up to 20: 20 are ranked (the metrics need the largest cut-off);
    recall.k (8) is live recall()'s default, which a benchmark does not use."""
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                    progress=False)
    header = format_table(out).splitlines()[1]
    assert header == ("each question ranks up to 20 memories: max(bench.k = 10, largest cut-off "
                      "of bench.ks = 20); recall.k (8) is live recall()'s default, unused here")
    assert out.to_json()["ranking"]["cos"]["per_question"] == 20


def test_bench_k_above_every_cut_off_is_what_is_ranked(tiny_bench_folder, hashing_cfg):
    presets = [("a", hashing_cfg.replace(**{"bench.k": 30})), ("b", hashing_cfg)]
    out = run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    assert {n: v["per_question"] for n, v in out.to_json()["ranking"].items()} == {"a": 30, "b": 20}
    assert "each question ranks up to: a 30, b 20 memories" in format_table(out)


def test_bench_k_says_what_it_does():
    from memlab.config import describe

    (row,) = [r for r in describe() if r["key"] == "bench.k"]
    assert "max(k, max(ks))" in row["description"] and "recall.k" in row["description"]


# ----------------------------------------------------------------------------- --metric

@pytest.fixture
def cli():
    from typer.testing import CliRunner

    from memlab.cli import app

    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def per_category(table: str, metric: str) -> dict[str, list[str]]:
    rows = block(table, f"{metric} per category")
    return {r[0]: r[1:] for r in rows[2:]}                 # minus the header and 'category'


def test_per_category_tables_show_the_metrics_asked_for(tiny_bench_folder, hashing_cfg):
    """u1::q3's gold ranks 2nd (see tests/conftest.py): mrr 0.5 and ndcg@10 1/log2(3) = 0.631
    in 'things', 1 in the categories whose gold ranks first, 0 in 'travel'."""
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                    progress=False)
    table = format_table(out, per_category=["ndcg@10", "mrr"])
    assert "recall@10 per category" not in table
    assert per_category(table, "mrr")["things"] == ["0.500", "0.500", "1"]
    assert per_category(table, "ndcg@10")["things"] == ["0.631", "0.631", "1"]
    assert per_category(table, "ndcg@10")["travel"] == ["0.000", "0.000", "1"]
    assert "recall@10 per category" in format_table(out)                 # the default


def test_an_unknown_per_category_metric_names_the_valid_ones(tiny_bench_folder, hashing_cfg):
    from memlab.errors import InvalidInput

    out = run_bench(dataset=str(tiny_bench_folder), presets=[("x", hashing_cfg)], progress=False)
    with pytest.raises(InvalidInput) as err:
        format_table(out, per_category=["recall@7"])                   # 7 is not in bench.ks
    assert err.value.value == "recall@7"
    for valid in ("recall@10", "ndcg@20", "recall_any@1", "mrr"):
        assert valid in err.value.rule


def test_cli_metric_takes_a_comma_list_or_repeats(cli, tiny_bench_folder, hashing_yaml, tmp_path):
    res = cli("bench", "--dataset", tiny_bench_folder, "--config", hashing_yaml, "--no-track",
              "--out-dir", tmp_path / "r", "-q", "--metric", "ndcg@10,mrr", "--metric", "recall@1")
    assert res.exit_code == 0, res.output
    assert per_category(res.stdout, "mrr")["things"] == ["0.500", "1"]
    assert per_category(res.stdout, "recall@1")["things"] == ["0.000", "1"]
    assert per_category(res.stdout, "ndcg@10")["pets"] == ["1.000", "1"]
    assert "recall@10 per category" not in res.stdout


def test_cli_unknown_metric_exits_2_before_running(cli, tiny_bench_folder, hashing_yaml, tmp_path):
    res = cli("bench", "--dataset", tiny_bench_folder, "--config", hashing_yaml, "--no-track",
              "--out-dir", tmp_path / "r", "-q", "--metric", "mrr,recal@10")
    assert res.exit_code == 2
    assert "'recal@10'" in res.stderr and "recall@10" in res.stderr and "ndcg@20" in res.stderr
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- embedder failure

MISSING_MODEL = "/nonexistent/memlab-test-model"


@pytest.fixture
def broken_cfg(hashing_cfg):
    """A sentence-transformers model that is not there: make_embedder raises EmbeddingUnavailable."""
    return hashing_cfg.replace(**{"embedding.backend": "sentence-transformers",
                                  "embedding.model_path": MISSING_MODEL})


def test_an_embedder_that_cannot_load_stops_the_benchmark(tiny_bench_folder, broken_cfg):
    from memlab.errors import EmbeddingUnavailable

    with pytest.raises(EmbeddingUnavailable) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=two_presets(broken_cfg), progress=False)
    msg = str(err.value)
    assert "sentence-transformers" in msg and MISSING_MODEL in msg          # the embedder
    assert "neither a local folder nor an installed model package" in msg   # the cause
    assert "--lexical-only" in msg and "recall.use_dense" in msg            # the way out


def test_one_dense_preset_is_enough_to_stop(tiny_bench_folder, broken_cfg):
    from memlab.errors import EmbeddingUnavailable

    presets = [("bm25", broken_cfg.replace(**{"recall.use_dense": False})), ("dense", broken_cfg)]
    with pytest.raises(EmbeddingUnavailable):
        run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)


def test_lexical_presets_run_without_the_embedder(tiny_bench_folder, broken_cfg):
    """Every preset has recall.use_dense: false: the user asked for lexical ranking."""
    cfg = broken_cfg.replace(**{"recall.use_dense": False, "fusion.scorer": "bm25"})
    out = run_bench(dataset=str(tiny_bench_folder), presets=[("bm25", cfg)], progress=False)
    assert out.embedder_version.startswith("none (")
    assert "sentence-transformers" in out.embedder_version
    # u1::q1 "cat named Momo" shares its terms only with its gold item (tests/conftest.py)
    assert out.results[0].per_query.loc["u1::q1", "recall@1"] == 1.0


def test_lexical_only_runs_every_preset_lexically_and_records_it(tiny_bench_folder, broken_cfg):
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(broken_cfg),
                    lexical_only=True, progress=False)
    assert out.embedder_version == "none (lexical only, as asked)"
    report = out.to_json()
    assert {c["recall.use_dense"] for c in report["config"].values()} == {False}
    rrf = out.results[1]                 # fuses ranks: BM25's alone here, which finds Momo first
    assert rrf.name == "rrf" and rrf.per_query.loc["u1::q1", "recall@1"] == 1.0


def test_cli_lexical_only(cli, tiny_bench_folder, hashing_yaml, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(hashing_yaml.read_text().replace(
        "backend: hashing", f"backend: sentence-transformers\n  model_path: {MISSING_MODEL}"),
        encoding="utf-8")
    args = ("bench", "--dataset", tiny_bench_folder, "--config", broken, "--no-track", "-q",
            "--out-dir", tmp_path / "r")
    res = cli(*args)
    assert res.exit_code == 2 and MISSING_MODEL in res.stderr
    assert not (tmp_path / "r").exists()
    res = cli(*args, "--lexical-only")
    assert res.exit_code == 0, res.output
    assert "embedder none (lexical only, as asked)" in res.stdout


# ----------------------------------------------------------------------------- nothing to evaluate

def test_an_empty_queries_file_is_named(tiny_bench_folder, hashing_cfg):
    from memlab.errors import DatasetError

    queries = tiny_bench_folder / "queries.jsonl"
    queries.write_text("\n", encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=[("x", hashing_cfg)], progress=False)
    assert err.value.file == str(queries)
    assert str(err.value).startswith(f"{queries}: ")
    assert "holds no question" in err.value.rule


def test_questions_without_evidence_only_name_the_file(tiny_bench, tmp_path, hashing_cfg):
    from dataclasses import replace

    from memlab.bench.datasets.canonical import Dataset, write_dataset
    from memlab.errors import DatasetError

    qs = tuple(replace(q, evidence=()) for q in tiny_bench.questions)
    folder = write_dataset(Dataset(tiny_bench.card, tiny_bench.items, qs), tmp_path / "no-gold")
    with pytest.raises(DatasetError) as err:
        run_bench(dataset=str(folder), presets=[("x", hashing_cfg)], progress=False)
    assert err.value.file == str(folder / "queries.jsonl")
    assert "no question with gold evidence (4 questions, none with evidence)" in err.value.rule


def test_a_limit_of_zero_says_so(tiny_bench_folder, hashing_cfg):
    from memlab.errors import DatasetError

    with pytest.raises(DatasetError) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=[("x", hashing_cfg)], limit=0,
                  progress=False)
    assert err.value.file == str(tiny_bench_folder / "queries.jsonl")
    assert err.value.rule == "--limit 0 leaves no question of 4"


# ----------------------------------------------------------------------------- --lenient

@pytest.fixture
def damaged(tiny_bench, tmp_path):
    """The tiny set with items.jsonl line 3 (u1/i3, the gold of u1/q3 on queries.jsonl line 3)
    cut short: strict stops there; lenient drops it and u1/q3, and evaluates the 3 others."""
    from memlab.bench.datasets.canonical import write_dataset

    folder = write_dataset(tiny_bench, tmp_path / "damaged")
    lines = (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:25]
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_strict_bench_stops_at_the_bad_line(damaged, hashing_cfg):
    from memlab.errors import DatasetError

    with pytest.raises(DatasetError) as err:
        run_bench(dataset=str(damaged), presets=[("x", hashing_cfg)], progress=False)
    assert (err.value.file, err.value.line) == (str(damaged / "items.jsonl"), 3)


def test_lenient_bench_drops_counts_and_reports_bad_lines(damaged, hashing_cfg):
    from memlab.bench.datasets.canonical import DROP_REJECTED

    out = run_bench(dataset=str(damaged), presets=[("x", hashing_cfg)], progress=False,
                    lenient=True)
    assert list(out.results[0].per_query.index) == ["u1::q1", "u1::q2", "u2::q1"]
    dataset = out.to_json()["dataset"]
    assert dataset["dropped"] == {DROP_REJECTED: 2}
    items, queries = damaged / "items.jsonl", damaged / "queries.jsonl"
    assert dataset["rejected"][0].startswith(f"{items}:3: invalid JSON")
    assert dataset["rejected"][1].startswith(f"{queries}:3: field 'evidence'")
    rows = block(format_table(out), "--lenient: 2 bad records dropped")
    assert [" ".join(r) for r in rows] == dataset["rejected"]


def test_cli_lenient(cli, damaged, hashing_yaml, tmp_path):
    args = ("bench", "--dataset", damaged, "--config", hashing_yaml, "--no-track", "-q",
            "--out-dir", tmp_path / "r", "--json", tmp_path / "out.json")
    res = cli(*args)
    assert res.exit_code == 2 and f"{damaged / 'items.jsonl'}:3" in res.stderr
    res = cli(*args, "--lenient")
    assert res.exit_code == 0, res.output
    assert "--lenient: 2 bad records dropped" in res.stdout
    assert f"{damaged / 'items.jsonl'}:3: invalid JSON" in res.stdout

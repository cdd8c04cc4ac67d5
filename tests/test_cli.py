"""``memlab ...`` through typer's CliRunner: config show/validate, add + recall --explain, bench,
datasets list. The hashing embedder throughout (a config file selects it); no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlab.cli import app
from memlab.config import MemlabConfig, planned_keys

REPORT_KEYS = {"dataset", "config", "presets", "embedder", "metrics", "per_category", "ranking",
               "timings", "counts", "abstention", "significance", "vram", "environment"}


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return invoke


# ----------------------------------------------------------------------------- config

def test_config_show_lists_every_field_once(cli):
    res = cli("config", "show")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    rows = [ln for ln in lines if ln.split()[0] != "key"]          # minus a header line
    keys = [f"{s}.{k}" for s, sec in MemlabConfig().to_dict().items() for k in sec]
    # planned fields too (none today: then every field is in to_flat)
    assert len(rows) == len(keys) == len(MemlabConfig().to_flat()) + len(planned_keys())
    assert [ln.split()[0] for ln in rows] == keys


def test_config_show_marks_values_that_differ(cli, hashing_yaml):
    res = cli("config", "show", "--config", hashing_yaml, "--section", "embedding")
    assert res.exit_code == 0, res.output
    rows = {ln.split()[0]: ln for ln in res.stdout.splitlines() if ln.startswith("embedding.")}
    assert "hashing" in rows["embedding.backend"] and "*" in rows["embedding.backend"]
    assert "*" not in rows["embedding.hashing_dim"]     # a default: not marked
    assert all(k.startswith("embedding.") for k in rows)


def test_config_show_yaml_round_trips_through_validate(cli, hashing_yaml, tmp_path):
    res = cli("config", "show", "--config", hashing_yaml, "--format", "yaml")
    assert res.exit_code == 0, res.output
    out = tmp_path / "shown.yaml"
    out.write_text(res.stdout, encoding="utf-8")
    assert MemlabConfig.from_yaml(out) == MemlabConfig.from_yaml(hashing_yaml)

    ok = cli("config", "validate", out)
    assert ok.exit_code == 0, ok.output
    # four fields differ from the defaults: the embedder, the floor (mode and value), the cache
    assert "(4 field(s) differ from the defaults)" in ok.stdout
    assert 'embedding.backend = "hashing"' in ok.stdout
    assert 'recall.floor_mode = "absolute"' in ok.stdout
    assert "recall.relevance_floor = 0.0" in ok.stdout


def test_config_show_flat_is_key_equals_json(cli):
    res = cli("config", "show", "--format", "flat")
    assert res.exit_code == 0
    pairs = dict(ln.split("=", 1) for ln in res.stdout.splitlines())
    flat = MemlabConfig().to_flat()
    assert {k: json.loads(v) for k, v in pairs.items()} == {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in flat.items()}


@pytest.mark.parametrize("text, key", [
    ("fusion:\n  relevanse: 0.5\n", "fusion.relevanse"),
    ("fuzion:\n  relevance: 0.5\n", "fuzion"),
])
def test_config_validate_names_an_unknown_key(cli, tmp_path, text, key):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    res = cli("config", "validate", bad)
    assert res.exit_code == 2
    assert key in res.stderr and "unknown" in res.stderr
    assert res.stdout == ""


def test_config_validate_names_an_out_of_range_value(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("recall:\n  relevance_floor: 3.0\n", encoding="utf-8")
    res = cli("config", "validate", bad)
    assert res.exit_code == 2
    assert "recall.relevance_floor" in res.stderr and "3.0" in res.stderr


@pytest.mark.parametrize("content, expected", [
    (b"recall:\n  k: 5\n   lexical_floor: 0.3\n", ":3:17': not valid YAML"),
    ("recall:\n  k: 5  # café\n".encode("latin-1"), ":2:14': not UTF-8 text (byte 0xe9"),
    (b"base: bad.yaml\n", "`base:` makes a cycle"),
    (b"recall:\n  k: true\n", "recall.k"),
])
def test_config_validate_points_at_the_line_and_column(cli, tmp_path, content, expected):
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(content)
    res = cli("config", "validate", bad)
    assert res.exit_code == 2 and expected in res.stderr and "Traceback" not in res.output


def test_set_of_a_section_names_a_field_to_set(cli, tmp_path, hashing_yaml):
    res = cli("add", tmp_path / "m.db", "x", "--config", hashing_yaml, "--set", "recall=5")
    assert res.exit_code == 2
    assert "'recall' is a section, not a field" in res.stderr and "recall.k=8" in res.stderr
    assert not (tmp_path / "m.db").exists()


# ----------------------------------------------------------------------------- add and recall

def _explain_rows(stdout: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows (whitespace-split) of the explain table."""
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    header = lines[0].split()
    return header, [ln.split() for ln in lines[1:]]


def test_add_then_recall_explain_shows_the_components(cli, tmp_path, hashing_yaml):
    store = tmp_path / "mem.db"
    first = cli("add", store, "Alice adopted a cat named Momo", "--config", hashing_yaml,
                "--importance", "0.7")
    assert first.exit_code == 0, first.output
    mem_id, layer, importance = first.stdout.strip().split("\t")
    assert layer == "long_term" and importance == "importance=0.70"   # 0.7 > 0.6 threshold
    second = cli("add", store, "爱丽丝喜欢喝乌龙茶", "--config", hashing_yaml)
    assert second.exit_code == 0, second.output

    res = cli("recall", store, "Which cat did Alice adopt?", "--explain", "--config", hashing_yaml)
    assert res.exit_code == 0, res.output
    header, rows = _explain_rows(res.stdout)
    for col in ("rank", "score", "id", "text", "relevance", "retention", "relevance_term",
                "importance_term", "resident_term"):
        assert col in header, col
    numeric = header[header.index("text") + 1:]        # texts hold spaces: count from the right
    cells = dict(zip(numeric, rows[0][-len(numeric):]))
    assert rows[0][header.index("id")] == mem_id
    # the score is the sum of its additive terms (as printed, 4 decimals each)
    terms = sum(float(v) for k, v in cells.items() if k.endswith("_term"))
    assert float(cells["score"]) == pytest.approx(terms, abs=5e-4 * len(cells))
    assert float(cells["importance"]) == pytest.approx(0.7)

    plain = cli("recall", store, "Which cat did Alice adopt?", "--config", hashing_yaml)
    assert plain.exit_code == 0
    assert plain.stdout.split("\n", 1)[0].split() == ["rank", "score", "id", "text"]
    assert "relevance_term" not in plain.stdout

    prompt = cli("recall", store, "cat", "--prompt", "-k", "1", "--config", hashing_yaml)
    assert prompt.exit_code == 0
    assert "<untrusted_memories>" in prompt.stdout and "Alice adopted a cat named Momo" in prompt.stdout
    assert "乌龙茶" not in prompt.stdout


def test_recall_on_a_missing_store_exits_2_and_creates_nothing(cli, tmp_path, hashing_yaml):
    store = tmp_path / "absent.db"
    res = cli("recall", store, "anything", "--config", hashing_yaml)
    assert res.exit_code == 2
    assert str(store) in res.stderr and "no such store" in res.stderr
    assert not store.exists()


def test_add_and_recall_of_undecodable_text_exit_2_without_a_traceback(cli, tmp_path,
                                                                       hashing_yaml):
    """An argument that was not valid UTF-8 reaches Python as lone surrogates
    (surrogateescape): it used to end in a UnicodeEncodeError traceback."""
    store = tmp_path / "mem.db"
    assert cli("add", store, "first memory", "--config", hashing_yaml).exit_code == 0
    for args in (("add", store, "bad \udcff memory"), ("recall", store, "bad \udcff memory")):
        res = cli(*args, "--config", hashing_yaml)
        assert res.exit_code == 2 and "lone surrogate U+DCFF at position 4" in res.stderr
    assert "first memory" in cli("recall", store, "memory", "--config", hashing_yaml).stdout


def test_add_with_a_bad_importance_exits_2_and_stores_nothing(cli, tmp_path, hashing_yaml):
    store = tmp_path / "mem.db"
    assert cli("add", store, "first memory", "--config", hashing_yaml).exit_code == 0
    res = cli("add", store, "second memory", "--importance", "1.5", "--config", hashing_yaml)
    assert res.exit_code == 2
    assert "importance" in res.stderr and "1.5" in res.stderr
    listed = cli("recall", store, "memory", "--config", hashing_yaml)
    assert "first memory" in listed.stdout and "second memory" not in listed.stdout


# ----------------------------------------------------------------------------- store check, rebuild

def _store_with_memories(cli, tmp_path, hashing_yaml) -> Path:
    store = tmp_path / "mem.db"
    for text in ("Alice adopted a cat named Momo", "爱丽丝喜欢喝乌龙茶", "Bob moved to Toronto",
                 "用户上周去了北京", "my red bicycle is fast", "用户对咖啡因过敏"):
        assert cli("add", store, text, "--config", hashing_yaml).exit_code == 0
    return store


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_store_check_reports_a_healthy_store_and_exits_0(cli, tmp_path, hashing_yaml):
    from memlab.store import LATEST

    store = _store_with_memories(cli, tmp_path, hashing_yaml)
    before = _sha(store)
    res = cli("store", "check", store)
    assert res.exit_code == 0, res.output
    assert "healthy" in res.stdout and "integrity" in res.stdout and "ok" in res.stdout
    as_json = cli("store", "check", store, "--json", "--full")
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.stdout)
    assert report["healthy"] is True and report["problems"] == []
    assert report["integrity"] == ["ok"] and report["schema_version"] == LATEST
    assert sum(report["records"]["retention_layer"].values()) == 6
    assert report["records"]["embedding_status"] == {"ready": 6}
    [vec] = report["vectors"]
    assert vec["vectors"] == vec["embedded"] == 6 and vec["pending"] == 0
    assert vec["missing_vectors"] == 0 and vec["table_exists"] and vec["registered"]
    assert report["lexical_index"] == {"searchable_records": 6, "indexed_documents": 6}
    assert report["change_log"]["triggers_missing"] == []
    assert report["change_log"]["generation"] >= 6
    assert _sha(store) == before                  # a check writes nothing


def test_store_check_finds_lost_vectors_then_rebuild_restores_them(cli, tmp_path, hashing_yaml):
    from memlab.store import connect

    store = _store_with_memories(cli, tmp_path, hashing_yaml)
    before = cli("recall", store, "cat Momo 乌龙茶", "--config", hashing_yaml).stdout
    conn = connect(store, busy_timeout_ms=1000)
    [table] = [r[0] for r in conn.execute("SELECT table_name FROM vector_tables")]
    conn.execute(f"DELETE FROM {table} WHERE rowid IN (2, 4)")
    conn.close()
    res = cli("store", "check", store)
    assert res.exit_code == 1, res.output
    assert "UNHEALTHY" in res.stdout and "2 of 6 memories" in res.stdout
    report = json.loads(cli("store", "check", store, "--json").stdout)
    assert report["healthy"] is False and report["vectors"][0]["missing_vectors"] == 2

    rebuilt = cli("store", "rebuild", store, "--config", hashing_yaml, "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    done = json.loads(rebuilt.stdout)
    assert (done["from_cache"], done["embedded"], done["vectors"], done["pending"]) == (6, 0, 6, 0)
    assert (done["problem_at_open"], done["lost_at_open"]) == ("short", 2)
    assert cli("store", "check", store).exit_code == 0
    assert cli("recall", store, "cat Momo 乌龙茶", "--config", hashing_yaml).stdout == before
    human = cli("store", "rebuild", store, "--config", hashing_yaml)
    assert human.exit_code == 0 and "6 vectors" in human.stdout


@pytest.mark.parametrize("case", ["damaged", "foreign"])
def test_store_check_reports_a_damaged_or_foreign_file_and_exits_1(cli, tmp_path, hashing_yaml,
                                                                   case):
    if case == "damaged":
        path = _store_with_memories(cli, tmp_path, hashing_yaml)
        data = bytearray(path.read_bytes())
        data[2 * 4096:3 * 4096] = b"\x07" * 4096            # page 3: no b-tree page
        path.write_bytes(bytes(data))
    else:
        import sqlean

        path = tmp_path / "other.db"
        other = sqlean.connect(path)
        other.execute("CREATE TABLE experiments (id INTEGER)")
        other.commit()
        other.close()
    before = _sha(path)
    res = cli("store", "check", path)
    assert res.exit_code == 1, res.output
    assert "UNHEALTHY" in res.stdout
    assert ("quick_check" if case == "damaged" else "not a memlab store") in res.stdout
    assert _sha(path) == before


def test_store_commands_on_a_missing_file_exit_2_and_create_nothing(cli, tmp_path, hashing_yaml):
    path = tmp_path / "absent.db"
    for args in (("check", path), ("rebuild", path, "--config", hashing_yaml)):
        res = cli("store", *args)
        assert res.exit_code == 2 and str(path) in res.stderr and "no such store" in res.stderr
    assert not path.exists()


# ----------------------------------------------------------------------------- bench

def test_bench_writes_the_json_report_and_the_artifacts(cli, tmp_path, tiny_bench_folder,
                                                       hashing_yaml):
    out_json = tmp_path / "out" / "report.json"
    results = tmp_path / "results"
    res = cli("bench", "--dataset", tiny_bench_folder, "--config", hashing_yaml, "--json", out_json,
              "--no-track", "--out-dir", results, "-q")
    assert res.exit_code == 0, res.output
    assert "hashing" in res.stdout and "tiny-bench" in res.stdout     # the table
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert set(report) == REPORT_KEYS | {"artifacts", "artifact_errors", "artifact_folders"}
    assert report["artifact_errors"] == [] and report["artifact_folders"] == {"hashing": "hashing"}
    assert report["presets"] == ["hashing"]                          # the config file's stem
    assert report["significance"] is None                           # one preset: nothing to test
    assert report["metrics"]["recall@1"] == pytest.approx(0.5)       # see tests/conftest.py
    assert report["config"]["embedding.backend"] == "hashing"
    run_dir = Path(report["artifacts"])
    assert run_dir.parent == results
    files = {p.name for p in (run_dir / "hashing").iterdir()}
    assert {"config.yaml", "per_query.csv", "recall_curve.png", "per_category.png"} <= files
    assert (run_dir / "hashing" / "recall_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert MemlabConfig.from_yaml(run_dir / "hashing" / "config.yaml") == \
        MemlabConfig.from_yaml(hashing_yaml)


def test_bench_mode_runs_each_preset_raw_and_writer(cli, tmp_path, tiny_bench_folder,
                                                   hashing_yaml):
    out_json = tmp_path / "report.json"
    res = cli("bench", "--dataset", tiny_bench_folder, "--config", hashing_yaml, "--mode",
              "raw,writer", "--json", out_json, "--no-track", "--out-dir", tmp_path / "r", "-q")
    assert res.exit_code == 0, res.output
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["presets"] == ["hashing", "hashing+writer"]
    bad = cli("bench", "--dataset", tiny_bench_folder, "--config", hashing_yaml, "--mode", "fast",
              "--no-track", "--out-dir", tmp_path / "r2", "-q")
    assert bad.exit_code == 2 and "bench.write_mode" in bad.stderr


def test_bench_compare_with_different_embedders_exits_2(cli, tmp_path, tiny_bench_folder,
                                                        hashing_yaml):
    other = tmp_path / "dim64.yaml"
    other.write_text(hashing_yaml.read_text() + "embedding.hashing_dim: 64\n", encoding="utf-8")
    res = cli("bench", "--dataset", tiny_bench_folder, "--compare", f"{hashing_yaml},{other}",
              "--no-track", "--out-dir", tmp_path / "results", "-q")
    assert res.exit_code == 2
    assert "embedding" in res.stderr and "share the embedder" in res.stderr
    assert not (tmp_path / "results").exists()


def test_bench_unknown_preset_exits_2_naming_the_known(cli, tmp_path, tiny_bench_folder):
    res = cli("bench", "--dataset", tiny_bench_folder, "--compare", "cosine,nope", "--no-track",
              "--out-dir", tmp_path / "results", "-q")
    assert res.exit_code == 2
    assert "'nope'" in res.stderr and "hybrid_rrf" in res.stderr


# ----------------------------------------------------------------------------- datasets

def test_datasets_list_lists_the_lifelog_set(cli):
    res = cli("datasets", "list")
    assert res.exit_code == 0, res.output
    rows = {ln.split()[0]: ln.split() for ln in res.stdout.splitlines() if ln.strip()}
    from memlab.bench.datasets.registry import list_datasets

    assert list(rows) == [spec.name for spec in list_datasets()]
    # the project's own set ships in the repository: its local copy is always found
    lang, where = rows["memlab-lifelog"][1], rows["memlab-lifelog"][2]
    assert lang == "mixed"
    assert (Path(where) / "card.json").is_file()

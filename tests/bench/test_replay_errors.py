"""An item the store refuses while a benchmark replays it (issue 7, 10a): the error names the
dataset file, the 1-based line (or the record's path in a JSON document) and the field, not the
position inside a write batch (``items[4].text``). Hashing embedder; datasets made here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.bench.datasets.canonical import Dataset
from memlab.bench.run import run_bench
from memlab.errors import DatasetError


def rewrite_line(file: Path, line: int, **changes) -> None:
    """Change fields of the JSON object on 1-based ``line`` of a JSON Lines file."""
    lines = file.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[line - 1])
    for key, value in changes.items():
        if key.startswith("meta."):
            obj["meta"][key[5:]] = value
        else:
            obj[key] = value
    lines[line - 1] = json.dumps(obj, ensure_ascii=False)
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_text_over_the_limit_names_file_line_and_field(tiny_bench_folder, hashing_cfg):
    """Line 5 of items.jsonl is u2's first item; rendered "Bob: " + 20 x "violin " = 145
    characters, over recall.max_text_chars = 100 (every other item renders under 40)."""
    items = tiny_bench_folder / "items.jsonl"
    rewrite_line(items, 5, text="violin " * 20)
    cfg = hashing_cfg.replace(**{"recall.max_text_chars": 100})
    with pytest.raises(DatasetError) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=[("x", cfg)], progress=False)
    e = err.value
    assert (e.file, e.line, e.field) == (str(items), 5, "text")
    assert str(e).startswith(f"{items}:5: field 'text'")
    assert "recall.max_text_chars (100)" in e.rule and e.value == 145
    assert "items[" not in str(e)


def test_a_meta_field_the_store_refuses_names_its_line(tiny_bench_folder, hashing_cfg):
    """bench.importance_policy 'meta' takes meta.importance; 1.5 is outside [0, 1]. Line 3 is
    u1's 'my red bicycle is fast', written in the same batch as lines 1 and 2."""
    items = tiny_bench_folder / "items.jsonl"
    rewrite_line(items, 3, **{"meta.importance": 1.5})
    with pytest.raises(DatasetError) as err:
        run_bench(dataset=str(tiny_bench_folder), presets=[("x", hashing_cfg)], progress=False)
    e = err.value
    assert (e.file, e.line, e.field, e.value) == (str(items), 3, "meta.importance", 1.5)


def test_an_item_made_in_memory_is_named_by_its_ids(tiny_bench, hashing_cfg, monkeypatch):
    """No file behind it: the dataset, the conversation and the item id."""
    from dataclasses import replace

    import memlab.bench.run as run_mod

    items = list(tiny_bench.items)
    items[4] = replace(items[4], text="小提琴" * 50)              # u2/i1: "Bob: " + 150 characters
    ds = Dataset(tiny_bench.card, items, tiny_bench.questions)
    monkeypatch.setattr(run_mod.registry, "load", lambda *a, **k: ds)   # a loader returning it
    cfg = hashing_cfg.replace(**{"recall.max_text_chars": 100})
    with pytest.raises(DatasetError) as err:
        run_bench(dataset="in-memory", presets=[("x", cfg)], progress=False)
    e = err.value
    assert (e.file, e.line, e.field, e.value) == ("<dataset tiny-bench>", None, "u2/i1.text", 155)

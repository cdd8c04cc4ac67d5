"""Every loader records where each item was read (``Item.origin``), so that a later error about an
item (the store refusing it during a benchmark replay) names the file, the 1-based line or the
record's path, and the source's own field name (issue 7, 10a)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.bench.datasets.canonical import Origin, read_dataset, write_dataset
from memlab.bench.datasets.locomo import load_locomo
from memlab.bench.datasets.longmemeval import load_longmemeval
from memlab.bench.datasets.madial import load_madial_zh
from memlab.bench.datasets.memdaily import load_memdaily
from memlab.bench.run import run_bench
from memlab.errors import DatasetError


def item(ds, conversation_id: str, item_id: str):
    (it,) = [i for i in ds.items if (i.conversation_id, i.item_id) == (conversation_id, item_id)]
    return it


def test_canonical_items_know_their_line(tiny_bench, tmp_path):
    folder = write_dataset(tiny_bench, tmp_path / "tiny")
    ds = read_dataset(folder)
    assert item(ds, "u2", "i1").origin == Origin(str(folder / "items.jsonl"), 5)
    assert ds == tiny_bench                                  # the origin takes no part in equality
    assert ds.content_hash() == tiny_bench.content_hash()


def test_locomo_items_know_their_turn(locomo_file):
    origin = item(load_locomo(locomo_file), "conv-a", "D1:3").origin
    e = origin.error("too long", field="text", value=99)
    assert (e.file, e.line, e.field) == (str(locomo_file), None, "conv-a.conversation.session_1[2].text")


def test_longmemeval_items_know_their_turn_and_session(lme_file):
    turn = item(load_longmemeval(lme_file), "q1", "answer_1:0").origin
    assert turn.error("x", field="text").field == "q1.haystack_sessions[1][0].content"
    session = item(load_longmemeval(lme_file, granularity="session"), "q1", "answer_1").origin
    assert session.error("x", field="text").field == "q1.haystack_sessions[1].content"


def test_madial_entries_know_their_line(madial_root):
    """The zh memory file has a blank third line: entry 5 is on line 4."""
    file = madial_root / "zh" / "MADial-Bench-zh-memory.json"
    origin = item(load_madial_zh(madial_root / "zh"), "2", "5").origin
    assert origin == Origin(str(file), 4, where="5", text_field="event")


def test_memdaily_messages_know_their_record(memdaily_root):
    origin = item(load_memdaily(memdaily_root), "01_simple_roles:1", "1").origin
    assert origin.error("x", field="text").field == "01_simple_roles:1.message_list[1].message"
    assert origin.file.endswith("01_simple_roles.json")


def test_replay_names_the_madial_line_the_store_refuses(madial_root, hashing_cfg):
    """Rendered "{speaker}: {text}", entry 1 ("Bart: Bart在圣诞节晚会上跳舞，感觉非常开心。", 27
    characters) is the only one over 25; it is on line 1 of the zh memory file."""
    cfg = hashing_cfg.replace(**{"recall.max_text_chars": 25})
    with pytest.raises(DatasetError) as err:
        run_bench(dataset="madial-zh", path=str(madial_root / "zh"), presets=[("x", cfg)],
                  progress=False)
    e = err.value
    file = Path(madial_root / "zh" / "MADial-Bench-zh-memory.json")
    assert (e.file, e.line, e.field, e.value) == (str(file), 1, "1.event", 27)

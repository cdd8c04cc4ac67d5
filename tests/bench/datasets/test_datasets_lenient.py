"""Strict by default, lenient on request (issue 7, 12e): a dataset with one bad line stops the load
with file, 1-based line and field; ``lenient=True`` (``memlab bench --lenient``) drops each bad
record instead, counts it (``LoadReport.dropped[DROP_REJECTED]``) and lists it with file:line and
why (``LoadReport.rejected``). Records that depend on a dropped one (a question whose evidence was
on a dropped line) are dropped the same way. Files written here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlab.bench.datasets.canonical import DROP_REJECTED, read_dataset, write_dataset
from memlab.bench.datasets.locomo import load_locomo
from memlab.bench.datasets.longmemeval import load_longmemeval
from memlab.bench.datasets.madial import load_madial_en, load_madial_zh
from memlab.bench.datasets.memdaily import load_memdaily
from memlab.bench.datasets.registry import load
from memlab.errors import DatasetError


def lines_of(file: Path) -> list[str]:
    return file.read_text(encoding="utf-8").splitlines()


def set_line(file: Path, n: int, text: str) -> None:
    lines = lines_of(file)
    lines[n - 1] = text
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")


def drop_key(file: Path, n: int, key: str) -> None:
    obj = json.loads(lines_of(file)[n - 1])
    del obj[key]
    set_line(file, n, json.dumps(obj, ensure_ascii=False))


# ----------------------------------------------------------------------------- canonical

@pytest.fixture
def damaged(tiny_bench, tmp_path) -> Path:
    """The tiny set with items.jsonl line 3 (u1/i3) cut short and queries.jsonl line 2 (u1/q2)
    without its category. Lines of queries.jsonl: u1/q1, u1/q2, u1/q3 (evidence i3), u2/q1."""
    folder = write_dataset(tiny_bench, tmp_path / "damaged")
    set_line(folder / "items.jsonl", 3, lines_of(folder / "items.jsonl")[2][:25])
    drop_key(folder / "queries.jsonl", 2, "category")
    return folder


def test_strict_names_the_first_bad_line(damaged):
    with pytest.raises(DatasetError) as err:
        read_dataset(damaged)
    e = err.value
    assert (e.file, e.line) == (str(damaged / "items.jsonl"), 3)
    assert "invalid JSON" in e.rule


def test_lenient_drops_counts_and_lists_bad_lines(damaged, tiny_bench):
    ds = read_dataset(damaged, lenient=True)
    items, queries = damaged / "items.jsonl", damaged / "queries.jsonl"
    assert [(i.conversation_id, i.item_id) for i in ds.items] == [
        ("u1", "i1"), ("u1", "i2"), ("u1", "i4"), ("u2", "i1"), ("u2", "i2")]
    assert [(q.conversation_id, q.query_id) for q in ds.questions] == [("u1", "q1"), ("u2", "q1")]
    rejected = ds.report.rejected
    assert len(rejected) == 3 and ds.report.dropped == {DROP_REJECTED: 3}
    assert rejected[0].startswith(f"{items}:3: invalid JSON")
    assert rejected[1] == f"{queries}:2: field 'category' required field is missing"
    assert rejected[2].startswith(f"{queries}:3: field 'evidence' evidence names no item")
    assert ds.summary()["dropped"] == {DROP_REJECTED: 3}
    assert "rejected 3" in str(ds.report) and f"{queries}:2" in str(ds.report)


def test_lenient_a_clean_folder_loads_the_same(tiny_bench_folder, tiny_bench):
    ds = read_dataset(tiny_bench_folder, lenient=True)
    assert ds == tiny_bench and ds.report.rejected == [] and ds.report.dropped == {}


def test_lenient_bad_utf8_duplicates_and_blank_lines(tiny_bench, tmp_path):
    """A blank line does not shift the numbering; the later of two equal ids is the one dropped;
    a Chinese line that is not UTF-8 (GBK) is named by its line."""
    folder = write_dataset(tiny_bench, tmp_path / "t")
    items = folder / "items.jsonl"
    raw = items.read_bytes().split(b"\n")
    dup = raw[0].replace(b"I adopted a cat named Momo", "我收养了一只猫".encode())
    gbk = raw[1].replace(b"red bicycle", "红色自行车".encode("gbk"))
    items.write_bytes(b"\n".join([raw[0], b"", gbk, dup] + raw[2:]))
    ds = read_dataset(folder, lenient=True)
    assert len(ds.items) == 5                                   # i2 (GBK) and the repeat of i1 gone
    assert ds.items[0].text == "I adopted a cat named Momo"
    assert ds.report.rejected[0].startswith(f"{items}:3: not UTF-8")
    assert ds.report.rejected[1] == (f"{items}:4: field 'item_id' duplicate (conversation_id, "
                                     "item_id) (got 'i1')")
    with pytest.raises(DatasetError) as err:
        read_dataset(folder)
    assert err.value.line == 3


def test_registry_load_passes_lenient(damaged):
    assert len(load(damaged, lenient=True).questions) == 2
    with pytest.raises(DatasetError):
        load(damaged)


# ----------------------------------------------------------------------------- native loaders

def test_longmemeval_lenient_drops_a_bad_question(lme_data, tmp_path):
    lme_data[0]["question_date"] = "yesterday"                 # q1
    file = tmp_path / "longmemeval_oracle.json"
    file.write_text(json.dumps(lme_data), encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_longmemeval(file, granularity="session")
    assert err.value.field == "q1.question_date"
    ds = load_longmemeval(file, granularity="session", lenient=True)
    assert [q.query_id for q in ds.questions] == ["q4"]          # q2, q3 are abstention: dropped
    assert {i.conversation_id for i in ds.items} == {"q4"}      # q1's haystack went with it
    assert ds.report.dropped[DROP_REJECTED] == 1
    (why,) = ds.report.rejected
    assert why.startswith(f"{file}: field 'q1.question_date' date not in the form")


def test_locomo_lenient_drops_a_bad_turn_and_a_bad_question(locomo_data, tmp_path):
    del locomo_data[0]["conversation"]["session_1"][2]["text"]  # D1:3, evidence of question 0
    locomo_data[1]["qa"][0]["category"] = 7                     # conv-b's only question
    file = tmp_path / "locomo10.json"
    file.write_text(json.dumps(locomo_data), encoding="utf-8")
    with pytest.raises(DatasetError):
        load_locomo(file)
    ds = load_locomo(file, lenient=True)
    assert "D1:3" not in {i.item_id for i in ds.items_of("conv-a")}
    assert len(ds.items) == 7 - 1
    assert ds.questions_of("conv-b") == [] and "q0" not in {q.query_id for q in ds.questions}
    assert ds.report.dropped[DROP_REJECTED] == 2
    assert [r.split(": ", 1)[1] for r in ds.report.rejected] == [
        "field 'conv-a.conversation.session_1[2].text' required field is missing",
        "field 'conv-b.qa[0].category' category must be 1-5 (got 7)"]


def test_madial_lenient_drops_bad_lines(madial_root):
    """zh memory: line 4 (entry 5) not JSON; zh dialogue line 1 without user-id."""
    zh = madial_root / "zh"
    memory, dialogue = zh / "MADial-Bench-zh-memory.json", zh / "MADial-Bench-zh-dialogue.json"
    set_line(memory, 4, '{"5": {"time": "2024-10-23", "event": "Lisa吃了芒果')
    drop_key(dialogue, 1, "user-id")
    with pytest.raises(DatasetError) as err:
        load_madial_zh(zh)
    assert (err.value.file, err.value.line) == (str(memory), 4)
    ds = load_madial_zh(zh, lenient=True)
    assert "5" not in {i.item_id for i in ds.items}
    assert ds.questions == ()                    # dialogue 0 dropped; dialogue 1 cited only entry 5
    assert ds.report.rejected[0].startswith(f"{memory}:4: invalid JSON")
    assert ds.report.rejected[1].startswith(f"{dialogue}:1: field 'user-id' required field")
    # the English folder reads the zh memory file for owners: leniency applies there too
    assert load_madial_en(madial_root / "en", lenient=True).report.dropped[DROP_REJECTED] >= 1


def test_memdaily_lenient_drops_a_bad_message(memdaily_root):
    file = memdaily_root / "messages_and_QAs" / "01_simple_roles.json"
    data = json.loads(file.read_text(encoding="utf-8"))
    data[0]["message_list"][1]["time"] = "4月1日"                # the evidence of the only question
    file.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(DatasetError):
        load_memdaily(memdaily_root)
    ds = load_memdaily(memdaily_root, lenient=True)
    assert ds.conversations() == ["03_comparative_events:1"]    # its stream lost its question
    (why,) = ds.report.rejected
    assert why.startswith(f"{file}: field '01_simple_roles:1.message_list[1].time' time not in")

"""The canonical dataset format: records, Dataset helpers, reader validation and write/read round trips."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.bench.datasets.canonical import (Card, Dataset, Item, LoadReport, Question, read_dataset,
                                             write_dataset)
from memlab.errors import DatasetError, InvalidInput

UTC = timezone.utc
CST = timezone(timedelta(hours=8))


def _card(**kw) -> Card:
    base = dict(name="toy", version="1", language="mixed", license="MIT", source="tests", granularity="turn",
                description="a toy set")
    return Card(**{**base, **kw})


def _toy() -> Dataset:
    items = (
        Item("a", "t2", "s1", "Ann", "second", datetime(2024, 1, 1, 10, 0, 1, tzinfo=UTC), {}),
        Item("a", "t1", "s1", "Bob", "first", datetime(2024, 1, 1, 10, 0, 0, tzinfo=UTC), {"img": "x.jpg"}),
        Item("b", "t1", "s9", "Cy", "上海见", datetime(2024, 1, 1, 18, 0, 0, tzinfo=CST), {}),
        Item("a", "t3", "s2", "Ann", "tie", datetime(2024, 1, 1, 10, 0, 1, tzinfo=UTC), {}),
    )
    qs = (
        Question("b", "q1", "where?", datetime(2024, 2, 1, tzinfo=UTC), "place", ("t1",), {}),
        Question("a", "q1", "what first?", datetime(2024, 2, 1, tzinfo=UTC), "order", ("t1", "t2"), {"answer": 1}),
        Question("a", "q2", "tie?", datetime(2024, 2, 1, tzinfo=UTC), "order", ("t3",), {}),
    )
    return Dataset(card=_card(), items=items, questions=qs, report=LoadReport({"bad id": 2}, ["n1"]))


# ----------------------------------------------------------------------------- records and Dataset

def test_dataset_views_order_and_summary():
    ds = _toy()
    assert ds.conversations() == ["a", "b"]  # first seen among items
    # sorted by timestamp; t2 and t3 tie at 10:00:01 and keep file order
    assert [i.item_id for i in ds.items_of("a")] == ["t1", "t2", "t3"]
    assert [q.query_id for q in ds.questions_of("a")] == ["q1", "q2"]
    assert ds.items_of("nope") == []
    assert ds.summary() == {"name": "toy", "version": "1", "conversations": 2, "items": 4, "questions": 3,
                            "categories": {"order": 2, "place": 1}, "dropped": {"bad id": 2}}


def test_subset_keeps_items_of_kept_conversations():
    ds = _toy()
    one = ds.subset(limit_questions=1)  # the first question belongs to "b"
    assert [q.query_id for q in one.questions] == ["q1"] and one.conversations() == ["b"]
    assert [i.item_id for i in one.items] == ["t1"]
    only_a = ds.subset(conversations=["a"])
    assert len(only_a.items) == 3 and len(only_a.questions) == 2
    assert ds.subset(limit_questions=0).items == ()
    with pytest.raises(InvalidInput, match="conversations"):
        ds.subset(conversations=["zzz"])
    with pytest.raises(InvalidInput, match="limit_questions"):
        ds.subset(limit_questions=-1)


def test_to_frames_columns_and_utc():
    items, qs = _toy().to_frame("items"), _toy().to_frame("questions")
    assert list(items.columns) == ["conversation_id", "item_id", "session_id", "speaker", "text", "timestamp", "meta"]
    assert len(items) == 4 and len(qs) == 3
    # 18:00 at +08:00 is 10:00 UTC
    assert items.loc[2, "timestamp"].isoformat() == "2024-01-01T10:00:00+00:00"
    assert qs.loc[1, "evidence"] == ["t1", "t2"]


def test_content_hash_is_a_fixed_function_of_content():
    ds = _toy()
    assert ds.content_hash() == _toy().content_hash()
    assert len(ds.content_hash()) == 64
    changed = Dataset(card=_card(version="2"), items=ds.items, questions=ds.questions)
    assert changed.content_hash() != ds.content_hash()
    # the report is not content
    assert Dataset(card=ds.card, items=ds.items, questions=ds.questions).content_hash() == ds.content_hash()


def test_report_str_lists_reasons():
    text = str(LoadReport({"evidence names no turn": 3, "no evidence": 1}, ["repaired 'D:11:26'"]))
    assert "dropped 4" in text and "3  evidence names no turn" in text and "repaired 'D:11:26'" in text


@pytest.mark.parametrize("build, field", [
    (lambda: Item("a", "t", "s", "x", "hi", datetime(2024, 1, 1), {}), "item.timestamp"),
    (lambda: Item("a", "", "s", "x", "hi", datetime(2024, 1, 1, tzinfo=UTC), {}), "item.item_id"),
    (lambda: Item("a", "t", "s", "x", "hi", datetime(2024, 1, 1, tzinfo=UTC), {"k": (1, 2)}), "item.meta"),
    (lambda: Item("a", "t", "s", "x", "hi", datetime(2024, 1, 1, tzinfo=UTC), {"k": float("nan")}), "item.meta"),
    (lambda: Question("a", "q", "?", datetime(2024, 1, 1, tzinfo=UTC), "c", ("t", "t"), {}), "question.evidence"),
    (lambda: _card(language="fr"), "card.language"),
])
def test_records_reject_bad_values(build, field):
    with pytest.raises(InvalidInput) as err:
        build()
    assert err.value.field == field


def test_dataset_rejects_duplicates_and_dangling_evidence():
    ds = _toy()
    with pytest.raises(DatasetError, match="duplicate") as err:
        Dataset(card=ds.card, items=ds.items + (ds.items[0],), questions=())
    assert err.value.line == 5 and err.value.field == "item_id"
    bad_q = Question("b", "q9", "?", datetime(2024, 2, 1, tzinfo=UTC), "c", ("t2",), {})  # t2 is in "a", not "b"
    with pytest.raises(DatasetError, match="evidence") as err:
        Dataset(card=ds.card, items=ds.items, questions=(bad_q,))
    assert err.value.value == "t2"


# ----------------------------------------------------------------------------- reader: bad input

def _write_raw(folder: Path, *, card: str | None = None, items: list[str] | None = None,
               queries: list[str] | None = None) -> Path:
    write_dataset(_toy(), folder)
    if card is not None:
        (folder / "card.json").write_text(card, encoding="utf-8")
    if items is not None:
        (folder / "items.jsonl").write_text("".join(line + "\n" for line in items), encoding="utf-8")
    if queries is not None:
        (folder / "queries.jsonl").write_text("".join(line + "\n" for line in queries), encoding="utf-8")
    return folder


def _lines(folder: Path, name: str) -> list[str]:
    return (folder / name).read_text(encoding="utf-8").splitlines()


def _expect(folder: Path, file: str, line: int | None, field: str | None, rule: str) -> DatasetError:
    with pytest.raises(DatasetError) as err:
        read_dataset(folder)
    e = err.value
    assert Path(e.file).name == file and e.line == line and e.field == field, str(e)
    assert rule in e.rule, str(e)
    assert file in str(e) and (line is None or f":{line}" in str(e))
    return e


def test_truncated_items_file(tmp_path):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "items.jsonl")
    _write_raw(folder, items=lines[:2] + [lines[2][: len(lines[2]) // 2]])
    _expect(folder, "items.jsonl", 3, None, "invalid JSON")


def test_truncated_card(tmp_path):
    folder = _write_raw(tmp_path / "d")
    text = (folder / "card.json").read_text(encoding="utf-8")
    _write_raw(folder, card=text[:-20])
    _expect(folder, "card.json", text[:-20].count("\n") + 1, None, "invalid JSON")


def test_missing_field(tmp_path):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "items.jsonl")
    obj = json.loads(lines[1])
    del obj["speaker"]
    _write_raw(folder, items=[lines[0], json.dumps(obj)] + lines[2:])
    _expect(folder, "items.jsonl", 2, "speaker", "missing")


def test_evidence_names_no_item(tmp_path):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "queries.jsonl")
    obj = json.loads(lines[2])
    obj["evidence"] = ["t3", "t404"]
    _write_raw(folder, queries=lines[:2] + [json.dumps(obj)])
    e = _expect(folder, "queries.jsonl", 3, "evidence", "names no item")
    assert e.value == "t404"


def test_evidence_of_another_conversation_is_an_error(tmp_path):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "queries.jsonl")
    obj = json.loads(lines[0])  # conversation "b" has only t1
    obj["evidence"] = ["t2"]
    _write_raw(folder, queries=[json.dumps(obj)] + lines[1:])
    _expect(folder, "queries.jsonl", 1, "evidence", "names no item of conversation 'b'")


@pytest.mark.parametrize("value, rule", [
    ("8 May 2023, 1:56 pm", "not an ISO 8601"),
    ("2024-01-01T10:00:00", "without UTC offset"),
    (1704103200, "ISO 8601 string"),
])
def test_bad_timestamps(tmp_path, value, rule):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "items.jsonl")
    obj = json.loads(lines[3])
    obj["timestamp"] = value
    _write_raw(folder, items=lines[:3] + [json.dumps(obj)])
    e = _expect(folder, "items.jsonl", 4, "timestamp", rule)
    assert e.value == value


def test_z_suffix_is_accepted(tmp_path):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "items.jsonl")
    obj = json.loads(lines[0])
    obj["timestamp"] = "2024-01-01T10:00:01Z"
    _write_raw(folder, items=[json.dumps(obj)] + lines[1:])
    assert read_dataset(folder).items[0].timestamp == datetime(2024, 1, 1, 10, 0, 1, tzinfo=UTC)


@pytest.mark.parametrize("file, line, mutate, field, rule", [
    ("items.jsonl", 2, lambda o: o.update(item_id="t2"), "item_id", "duplicate"),  # line 1 is a/t2
    ("queries.jsonl", 3, lambda o: o.update(query_id="q1"), "query_id", "duplicate"),
    ("items.jsonl", 2, lambda o: o.update(extra=1), "extra", "unknown field"),
    ("items.jsonl", 2, lambda o: o.update(text=""), "text", "must not be empty"),
    ("items.jsonl", 2, lambda o: o.update(meta=[]), "meta", "must be a dict"),
    ("queries.jsonl", 3, lambda o: o.update(evidence="t3"), "evidence", "array"),
    ("queries.jsonl", 3, lambda o: o.update(category=5), "category", "string"),
])
def test_field_rules(tmp_path, file, line, mutate, field, rule):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, file)
    obj = json.loads(lines[line - 1])
    mutate(obj)
    lines[line - 1] = json.dumps(obj)
    _write_raw(folder, **{"items" if file == "items.jsonl" else "queries": lines})
    _expect(folder, file, line, field, rule)


def test_card_language_and_missing_files(tmp_path):
    folder = _write_raw(tmp_path / "d")
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    _write_raw(folder, card=json.dumps({**card, "language": "de"}))
    _expect(folder, "card.json", None, "language", "must be one of")
    (folder / "card.json").unlink()
    _expect(folder, "card.json", None, None, "missing")
    with pytest.raises(DatasetError, match="not a folder"):
        read_dataset(tmp_path / "nowhere")


def test_blank_lines_are_skipped_and_line_numbers_count_them(tmp_path):
    folder = _write_raw(tmp_path / "d")
    lines = _lines(folder, "items.jsonl")
    _write_raw(folder, items=[lines[0], "", lines[1], "{"])
    _expect(folder, "items.jsonl", 4, None, "invalid JSON")


# ----------------------------------------------------------------------------- round trips

def test_write_read_round_trip_exact(tmp_path):
    ds = _toy()
    back = read_dataset(write_dataset(ds, tmp_path / "out"))
    assert back == ds and back.content_hash() == ds.content_hash()
    assert back.items[2].timestamp.utcoffset() == timedelta(hours=8)
    assert "上海见" in (tmp_path / "out" / "items.jsonl").read_text(encoding="utf-8")  # ensure_ascii=False
    assert not list((tmp_path / "out").glob(".*.tmp"))


_ids = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8).filter(
    lambda s: s.strip() != "")
_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30).filter(
    lambda s: s.strip() != "")
_json = st.recursive(st.none() | st.booleans() | st.integers(-2**60, 2**60) | st.floats(allow_nan=False,
                     allow_infinity=False) | st.text(max_size=10),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                     max_leaves=8)
_meta = st.dictionaries(st.text(max_size=6), _json, max_size=3)
_times = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1),
                      timezones=st.sampled_from([UTC, CST, timezone(timedelta(hours=-5, minutes=-30))]))


@st.composite
def _datasets(draw) -> Dataset:
    convs = draw(st.lists(_ids, min_size=1, max_size=3, unique=True))
    items, questions = [], []
    for cid in convs:
        iids = draw(st.lists(_ids, min_size=1, max_size=4, unique=True))
        for iid in iids:
            items.append(Item(cid, iid, draw(st.text(max_size=5)), draw(st.text(max_size=5)), draw(_texts),
                              draw(_times), draw(_meta)))
        for qid in draw(st.lists(_ids, max_size=3, unique=True)):
            ev = draw(st.lists(st.sampled_from(iids), max_size=3, unique=True))
            questions.append(Question(cid, qid, draw(_texts), draw(_times), draw(st.text(max_size=5)), tuple(ev),
                                      draw(_meta)))
    card = _card(language=draw(st.sampled_from(["zh", "en", "mixed"])), description=draw(st.text(max_size=20)))
    order = draw(st.permutations(range(len(items))))
    return Dataset(card=card, items=tuple(items[i] for i in order), questions=tuple(questions))


@settings(max_examples=30, deadline=None)
@given(ds=_datasets())
def test_round_trip_property(tmp_path_factory, ds):
    folder = write_dataset(ds, tmp_path_factory.mktemp("rt"))
    back = read_dataset(folder)
    assert back == ds
    assert back.content_hash() == ds.content_hash()
    assert [i.timestamp.utcoffset() for i in back.items] == [i.timestamp.utcoffset() for i in ds.items]

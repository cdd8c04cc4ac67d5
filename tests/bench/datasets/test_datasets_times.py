"""Dataset times in the range memlab stores (issue 19): 0001-01-01T00:00:00Z..9999-12-31T23:59:59Z
in UTC. Every loader's times are checked where they are read (a DatasetError naming the file, line
and field) and every Item and Question built anywhere is checked again; a time a loader derives
(a turn after its session's start, a question after the last turn) that passes the end is named,
never a raw OverflowError from datetime."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from memlab.bench.datasets.canonical import Item, Question, read_dataset, write_dataset
from memlab.bench.datasets.locomo import load_locomo
from memlab.bench.datasets.longmemeval import load_longmemeval
from memlab.bench.datasets.madial import load_madial
from memlab.bench.datasets.memdaily import load_memdaily
from memlab.errors import DatasetError, InvalidInput

UTC = timezone.utc
WEST5 = timezone(timedelta(hours=-5))   # 9999-12-31 in the evening here is year 10000 in UTC
EAST5 = timezone(timedelta(hours=5))    # 0001-01-01 in the morning here is year 0 in UTC
RANGE = "0001-01-01T00:00:00Z..9999-12-31T23:59:59Z"


@pytest.mark.parametrize("when", [datetime(9999, 12, 31, 20, tzinfo=WEST5),
                                  datetime(1, 1, 1, 1, tzinfo=EAST5)])
def test_an_item_or_question_outside_the_range_is_refused(when):
    with pytest.raises(InvalidInput, match=rf"^item\.timestamp: must be a finite time in "
                                           rf"{RANGE}"):
        Item("c", "i", "s", "Ann", "text", when, {})
    with pytest.raises(InvalidInput, match=r"^question\.asked_at: must be a finite time"):
        Question("c", "q", "text?", when, "cat", ("i",), {})


def test_the_ends_of_the_range_round_trip_and_frame(tmp_path):
    from memlab.bench.datasets.canonical import Card, Dataset

    lo, hi = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    ds = Dataset(card=Card("t", "1", "mixed", "MIT", "tests", "turn", "ends"),
                 items=(Item("c", "a", "s", "Ann", "公元一年", lo, {}),
                        Item("c", "b", "s", "Bob", "the last second", hi, {})),
                 questions=(Question("c", "q", "when?", hi, "cat", ("a", "b"), {}),))
    back = read_dataset(write_dataset(ds, tmp_path / "d"))
    assert back == ds
    items, qs = back.to_frame("items"), back.to_frame("questions")
    assert items["timestamp"].tolist() == [lo, hi] and qs["asked_at"].tolist() == [hi]


@pytest.mark.parametrize("value", ["0001-01-01T03:00:00+05:00", "9999-12-31T22:00:00-05:00"])
def test_the_canonical_reader_names_file_line_and_field(tmp_path, value):
    from memlab.bench.datasets.canonical import Card, Dataset

    ds = Dataset(card=Card("t", "1", "en", "MIT", "tests", "turn", "x"),
                 items=(Item("c", "a", "s", "Ann", "one", datetime(2024, 1, 1, tzinfo=UTC), {}),
                        Item("c", "b", "s", "Ann", "two", datetime(2024, 1, 2, tzinfo=UTC), {})),
                 questions=())
    folder = write_dataset(ds, tmp_path / "d")
    lines = (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[1])
    obj["timestamp"] = value
    (folder / "items.jsonl").write_text("\n".join([lines[0], json.dumps(obj)]) + "\n",
                                        encoding="utf-8")
    with pytest.raises(DatasetError) as e:
        read_dataset(folder)
    assert (e.value.line, e.value.field, e.value.value) == (2, "timestamp", value)
    assert str(folder / "items.jsonl") in str(e.value) and RANGE in e.value.rule
    lenient = read_dataset(folder, lenient=True)          # a lenient load drops and reports it
    assert [i.item_id for i in lenient.items] == ["a"] and len(lenient.report.rejected) == 1


def _dump(path, obj):
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def test_locomo_session_date_and_derived_times(tmp_path, locomo_data):
    samples = locomo_data
    samples[1]["conversation"]["session_1_date_time"] = "11:00 pm on 31 December, 9999"
    f = _dump(tmp_path / "l.json", samples)
    with pytest.raises(DatasetError) as e:               # 23:00 at UTC-5 is year 10000 in UTC
        load_locomo(f, tz=WEST5)
    assert e.value.field == "conv-b.conversation.session_1_date_time" and RANGE in e.value.rule
    samples[1]["conversation"]["session_1_date_time"] = "11:59 pm on 31 December, 9999"
    _dump(f, samples)
    with pytest.raises(DatasetError) as e:               # the second turn, 60 s later
        load_locomo(f, turn_spacing_s=60.0)
    assert e.value.field == "conv-b.conversation.session_1[1].timestamp"
    assert "passes the latest time memlab stores" in e.value.rule
    with pytest.raises(DatasetError) as e:               # the question, 1 h after the last turn
        load_locomo(f, asked_after_s=3600.0)
    assert e.value.field == "conv-b.qa (asked_at: the last turn + asked_after_s)"
    assert str(f) in str(e.value)
    kept = load_locomo(f, asked_after_s=3600.0, lenient=True)
    assert {i.conversation_id for i in kept.items} == {"conv-a"}


def test_longmemeval_dates(tmp_path, lme_data):
    lme_data[0]["haystack_dates"][1] = "9999/12/31 (Fri) 23:00"
    f = _dump(tmp_path / "lme.json", lme_data)
    with pytest.raises(DatasetError) as e:
        load_longmemeval(f, tz=WEST5)
    assert e.value.field == "q1.haystack_dates[1]" and RANGE in e.value.rule
    lme_data[0]["haystack_dates"][1] = "9999/12/31 (Fri) 23:59"
    _dump(f, lme_data)
    with pytest.raises(DatasetError) as e:               # the turns after the session's start
        load_longmemeval(f, turn_spacing_s=30.0)
    assert e.value.field.startswith("q1.haystack_sessions[1][") and \
        e.value.field.endswith("].timestamp")


def test_madial_memory_time_and_asked_at(madial_root):
    mem = madial_root / "zh" / "MADial-Bench-zh-memory.json"
    text = mem.read_text(encoding="utf-8")
    mem.write_text(text.replace("2024-10-23", "0001-01-01"), encoding="utf-8")
    with pytest.raises(DatasetError) as e:       # midnight at UTC+5 is year 0 in UTC
        load_madial(madial_root / "zh", tz=EAST5)
    assert e.value.field == "5.time" and e.value.line is not None and RANGE in e.value.rule
    mem.write_text(text.replace("2024-10-23", "9999-12-31"), encoding="utf-8")
    with pytest.raises(DatasetError) as e:       # a question a day after 9999-12-31
        load_madial(madial_root / "zh")
    assert e.value.field == "asked_at (the latest memory + asked_after_days)"
    assert e.value.line is not None and "passes the latest time" in e.value.rule


def test_memdaily_message_time(memdaily_root):
    f = memdaily_root / "messages_and_QAs" / "01_simple_roles.json"
    text = f.read_text(encoding="utf-8")
    f.write_text(text.replace("2024年04月01日 周一 20:05", "9999年12月31日 周五 23:00"),
                 encoding="utf-8")
    with pytest.raises(DatasetError) as e:
        load_memdaily(memdaily_root, tz=WEST5)
    assert e.value.field.endswith(".time") and RANGE in e.value.rule
    assert e.value.value == "9999年12月31日 周五 23:00"

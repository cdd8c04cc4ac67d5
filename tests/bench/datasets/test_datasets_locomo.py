"""LoCoMo loader on a small generated file that holds every quirk of the real one."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from memlab.bench.datasets import locomo as L
from memlab.bench.datasets.locomo import load_locomo, parse_evidence
from memlab.errors import DatasetError, InvalidInput

UTC = timezone.utc


def test_counts_and_drops(locomo_file):
    ds = load_locomo(locomo_file)
    assert ds.conversations() == ["conv-a", "conv-b"]
    assert len(ds.items) == 5 + 2  # session_3 is empty and adds nothing
    # 10 + 1 questions; q6 (only D9:9) and q7 (no evidence) dropped
    assert [q.query_id for q in ds.questions_of("conv-a")] == ["q0", "q1", "q2", "q3", "q4", "q5", "q8", "q9"]
    assert len(ds.questions) == 9
    assert ds.report.dropped == {L.DROP_MALFORMED_ID: 1, L.DROP_UNKNOWN_ID: 2, L.DROP_NO_VALID_EVIDENCE: 1,
                                 L.DROP_NO_EVIDENCE_LISTED: 1}


def test_lenient_evidence_parsing(locomo_file):
    qs = {q.query_id: q for q in load_locomo(locomo_file).questions_of("conv-a")}
    assert qs["q1"].evidence == ("D1:2", "D2:1")           # "D1:2; D2:1"
    assert qs["q2"].evidence == ("D2:1", "D1:1", "D1:3")   # "D2:1 D1:1 D1:3"
    assert qs["q3"].evidence == ("D2:2",)                  # "D:2:2"
    assert qs["q4"].evidence == ("D2:2",)                  # "D2:02"
    assert qs["q5"].evidence == ("D1:1",)                  # bare "D" dropped
    assert qs["q9"].evidence == ("D1:1",)                  # D5:1 names no turn; the repeat collapses


@pytest.mark.parametrize("raw, ids, bad", [
    ("D8:6; D9:17", ["D8:6", "D9:17"], []),
    ("D9:1 D4:4 D4:6", ["D9:1", "D4:4", "D4:6"], []),
    ("D:11:26", ["D11:26"], []),
    ("D30:05", ["D30:5"], []),
    ("D", [], ["D"]),
    ("D1:3", ["D1:3"], []),
])
def test_parse_evidence(raw, ids, bad):
    assert parse_evidence(raw) == (ids, bad)


def test_items_times_speakers_and_meta(locomo_file):
    ds = load_locomo(locomo_file)
    a = ds.items_of("conv-a")
    assert [i.item_id for i in a] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert a[0].timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)          # "1:56 pm on 8 May, 2023"
    assert a[2].timestamp == datetime(2023, 5, 8, 13, 56, 2, tzinfo=UTC)       # + 2 turns x 1 s
    assert a[3].timestamp == datetime(2023, 6, 27, 10, 37, tzinfo=UTC)         # "10:37 am on 27 June, 2023"
    assert (a[1].speaker, a[1].session_id) == ("Bob", "session_1")
    assert a[1].meta == {"img_url": ["http://x/y.jpg"], "blip_caption": "a photo of a sunset painting",
                         "query": "sunset painting"}
    assert ds.items_of("conv-b")[0].timestamp == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)  # 12:09 am


def test_questions_answers_and_asked_at(locomo_file):
    ds = load_locomo(locomo_file)
    qs = {q.query_id: q for q in ds.questions_of("conv-a")}
    # last turn D2:2 at 10:37:01, plus 60 s
    assert qs["q0"].asked_at == datetime(2023, 6, 27, 10, 38, 1, tzinfo=UTC)
    assert (qs["q0"].category, qs["q0"].meta) == ("2", {"category_name": "temporal", "answer": "7 May 2023"})
    assert qs["q4"].meta["answer"] == 2022
    assert qs["q8"].category == "5"
    assert qs["q8"].meta == {"category_name": "adversarial", "answer": None, "adversarial_answer": "yes"}


def test_category_filter_and_spacing_options(locomo_file):
    ds = load_locomo(locomo_file, categories=[1, 2, 3, 4], turn_spacing_s=30, asked_after_s=0)
    assert {q.category for q in ds.questions} == {"1", "2", "3", "4"} and len(ds.questions) == 8
    assert ds.report.dropped[L.DROP_CATEGORY] == 1
    assert ds.card.version == "locomo10;categories=1,2,3,4"
    a = ds.items_of("conv-a")
    assert a[2].timestamp - a[0].timestamp == timedelta(seconds=60)
    assert ds.questions[0].asked_at == a[-1].timestamp
    with pytest.raises(InvalidInput, match="categories"):
        load_locomo(locomo_file, categories=[6])


def test_timezone_option(locomo_file):
    ds = load_locomo(locomo_file, tz="Asia/Shanghai")
    assert ds.items[0].timestamp.utcoffset() == timedelta(hours=8)
    with pytest.raises(InvalidInput, match="tz"):
        load_locomo(locomo_file, tz="Mars/Olympus")


def test_notes_name_every_repair(locomo_file):
    notes = "\n".join(load_locomo(locomo_file).report.notes)
    for raw in ("'D1:2; D2:1'", "'D:2:2'", "'D2:02'", "'D'", "'D9:9'", "'D5:1'"):
        assert raw in notes


def test_bad_session_date_names_file_and_field(tmp_path, locomo_data):
    samples = locomo_data
    samples[1]["conversation"]["session_1_date_time"] = "13 September 2023"
    f = tmp_path / "l.json"
    f.write_text(json.dumps(samples), encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_locomo(f)
    assert err.value.field == "conv-b.conversation.session_1_date_time" and str(f) in str(err.value)


def test_missing_field_and_truncated_file(tmp_path, locomo_file):
    text = locomo_file.read_text(encoding="utf-8")
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(DatasetError, match="invalid JSON") as err:
        load_locomo(cut)
    assert err.value.line is not None and err.value.line > 1
    data = json.loads(text)
    del data[0]["conversation"]["session_2"][1]["speaker"]
    f = tmp_path / "nospeaker.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DatasetError, match="missing") as err:
        load_locomo(f)
    assert err.value.field == "conv-a.conversation.session_2[1].speaker"
    with pytest.raises(DatasetError, match="missing"):
        load_locomo(tmp_path / "nowhere.json")

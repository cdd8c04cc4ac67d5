"""LongMemEval loader on a small generated file (turn and session level, abstention, quirks)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from memlab.bench.datasets import longmemeval as M
from memlab.bench.datasets.longmemeval import load_longmemeval
from memlab.errors import DatasetError, InvalidInput

UTC = timezone.utc


def test_turn_level_defaults(lme_file):
    ds = load_longmemeval(lme_file)
    assert ds.card.name == "longmemeval-oracle" and ds.card.granularity == "turn"
    # q2_abs, q3_abs dropped as abstention; q4 has no has_answer turn
    assert ds.report.dropped == {M.DROP_ABSTENTION: 2, M.DROP_NO_HAS_ANSWER: 1}
    assert [q.query_id for q in ds.questions] == ["q1"] and ds.conversations() == ["q1"]
    q = ds.questions[0]
    assert q.conversation_id == "q1" and q.category == "single-session-user"
    assert q.evidence == ("answer_1:0",)
    assert q.asked_at == datetime(2023, 5, 28, 19, 47, tzinfo=UTC)  # "2023/05/28 (Sun) 19:47"
    assert q.meta == {"answer": "Lisbon", "answer_session_ids": ["answer_1"], "question_type": "single-session-user",
                      "abstention": False}
    # the dropped questions take their haystacks with them: only q1's 2 + 3 turns remain
    assert len(ds.items) == 5


def test_turn_items_ids_times_and_order(lme_file):
    items = load_longmemeval(lme_file).items_of("q1")
    # "answer_1" is dated 2023/05/20, before "s_a" (2023/05/21): sorted by time it comes first
    assert [i.item_id for i in items] == ["answer_1:0", "answer_1:1", "answer_1:2", "s_a:0", "s_a:1"]
    assert items[0].timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert items[2].timestamp == datetime(2023, 5, 20, 2, 21, 2, tzinfo=UTC)
    assert (items[1].speaker, items[1].session_id, items[1].text) == ("assistant", "answer_1", "Nice city!")


def test_abstention_keep(lme_file):
    ds = load_longmemeval(lme_file, abstention="keep")
    # q3_abs has no has_answer turn and q4 neither
    assert ds.report.dropped == {M.DROP_NO_HAS_ANSWER: 2}
    assert {q.query_id: q.category for q in ds.questions} == {"q1": "single-session-user",
                                                              "q2_abs": "temporal-reasoning_abs"}
    assert ds.questions_of("q2_abs")[0].meta["abstention"] is True


def test_session_level(lme_file):
    ds = load_longmemeval(lme_file, granularity="session")
    assert ds.card.granularity == "session"
    assert ds.report.dropped == {M.DROP_ABSTENTION: 2, M.DROP_DUPLICATE_SESSION: 1}
    assert [q.query_id for q in ds.questions] == ["q1", "q4"]
    assert ds.questions_of("q4")[0].evidence == ("answer_4",)
    s = {i.item_id: i for i in ds.items_of("q1")}
    assert set(s) == {"s_a", "answer_1"}
    assert s["answer_1"].text == "user: I moved to Lisbon.\nassistant: Nice city!\nuser: Thanks."
    assert s["answer_1"].timestamp == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    # the repeated answer_4 keeps its first occurrence ("Trip to Porto.")
    assert [i.text for i in ds.items_of("q4")] == ["user: Trip to Porto.\nassistant: Fun."]


def test_card_name_follows_the_file(tmp_path, lme_data):
    f = tmp_path / "longmemeval_s_cleaned.json"
    f.write_text(json.dumps(lme_data), encoding="utf-8")
    assert load_longmemeval(f).card.name == "longmemeval-s"
    assert load_longmemeval(f, name="mine").card.name == "mine"


@pytest.mark.parametrize("kw, field", [({"granularity": "word"}, "granularity"),
                                       ({"abstention": "maybe"}, "abstention")])
def test_bad_options(lme_file, kw, field):
    with pytest.raises(InvalidInput) as err:
        load_longmemeval(lme_file, **kw)
    assert err.value.field == field


def test_bad_date_and_lengths(tmp_path, lme_data):
    data = lme_data
    data[0]["haystack_dates"][1] = "20 May 2023"
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DatasetError, match="2023/05/20 \\(Sat\\) 02:21") as err:
        load_longmemeval(f)
    assert err.value.field == "q1.haystack_dates[1]" and err.value.value == "20 May 2023"
    data[0]["haystack_dates"] = ["2023/05/21 (Sun) 19:50"]
    f.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DatasetError, match="differ in length"):
        load_longmemeval(f)
    f.write_text(json.dumps({"not": "a list"}), encoding="utf-8")
    with pytest.raises(DatasetError, match="list of questions"):
        load_longmemeval(f)

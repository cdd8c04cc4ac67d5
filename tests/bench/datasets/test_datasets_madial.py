"""MADial-Bench loaders (zh, en) on small generated JSON Lines folders with the real quirks."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone

import pytest

from memlab.bench.datasets import madial as M
from memlab.bench.datasets.madial import load_madial, load_madial_en, load_madial_zh, split_turn
from memlab.errors import DatasetError, InvalidInput

UTC = timezone.utc


def test_zh_counts_items_and_drops(madial_root):
    ds = load_madial_zh(madial_root / "zh")
    assert ds.card.name == "madial-zh" and ds.card.language == "zh"
    assert ds.conversations() == ["1", "2"]
    assert [i.item_id for i in ds.items_of("1")] == ["3", "1", "9"]  # by date
    assert [i.item_id for i in ds.items_of("2")] == ["7", "5"]
    it = ds.items_of("1")[1]
    assert (it.speaker, it.session_id) == ("Bart", "2023-12-25")
    assert it.text == "Bart在圣诞节晚会上跳舞，感觉非常开心。"
    assert it.timestamp == datetime(2023, 12, 25, tzinfo=UTC)
    assert it.meta == {"time": "2023-12-25", "scene": "活动类", "emotion": "开心"}
    assert ds.items_of("2")[0].speaker == "Lisa"
    assert ds.report.dropped == {M.DROP_OTHER_USER: 1, M.DROP_UNKNOWN_RELEVANT: 1, M.DROP_NO_EVIDENCE: 1,
                                 M.DROP_BAD_TEST_TURN: 1, M.DROP_NO_CONTEXT: 1}


def test_zh_questions(madial_root):
    ds = load_madial_zh(madial_root / "zh")
    assert [(q.conversation_id, q.query_id) for q in ds.questions] == [("1", "0"), ("2", "1")]
    q0, q1 = ds.questions
    assert q0.text == "Bart: 嗨\nAssistant: 你好\nBart: 我想跳舞"
    assert q0.evidence == ("1", "9") and q0.category == "recall"
    assert q0.asked_at == datetime(2024, 2, 3, tzinfo=UTC)   # user 1's latest memory 2024-02-02 + 1 day
    assert q1.asked_at == datetime(2024, 10, 24, tzinfo=UTC)
    assert q0.meta["gold_reply"] == "Assistant: 记得圣诞节晚会吗？" and q0.meta["test_turns"] == [4]
    # several test turns: the query stops at the first (2); entry 1 belongs to user 1
    assert q1.text == "Lisa: 我饿了" and q1.evidence == ("5",)


def test_context_turns_option(madial_root):
    ds = load_madial_zh(madial_root / "zh", context_turns=1)
    assert ds.questions[0].text == "Bart: 我想跳舞"
    with pytest.raises(InvalidInput, match="context_turns"):
        load_madial_zh(madial_root / "zh", context_turns=0)


def test_en_takes_owners_from_zh(madial_root):
    ds = load_madial_en(madial_root / "en")
    assert ds.card.language == "en"
    assert [i.item_id for i in ds.items_of("1")] == ["3", "1"]
    assert [i.item_id for i in ds.items_of("2")] == ["7", "5"]
    # entry 11 has no owner in the zh file; relevant id 9 exists only in zh
    assert ds.report.dropped == {M.DROP_NO_OWNER: 1, M.DROP_UNKNOWN_RELEVANT: 1}
    q0, q1 = ds.questions
    assert (q0.query_id, q1.query_id) == ("0", "1")  # line positions
    assert q0.text == "Bart: Hi\nAssistant: Hello\nBart: I want to dance\nI understand."
    assert q0.evidence == ("1",)
    assert q0.asked_at == datetime(2023, 12, 26, tzinfo=UTC)


def test_en_zh_path_resolution(tmp_path, madial_root):
    upstream = tmp_path / "upstream"
    shutil.copytree(madial_root / "zh", upstream / "ch")
    shutil.copytree(madial_root / "en", upstream / "en")
    assert len(load_madial_en(upstream / "en").items) == 4            # sibling ch/ as upstream names it
    lonely = tmp_path / "lonely" / "en"
    shutil.copytree(madial_root / "en", lonely)
    with pytest.raises(DatasetError, match="zh_path") as err:
        load_madial_en(lonely)
    assert err.value.field == "zh_path"
    assert len(load_madial_en(lonely, zh_path=madial_root / "zh").items) == 4


def test_language_detection(madial_root):
    assert load_madial(madial_root / "zh").card.language == "zh"
    with pytest.raises(DatasetError, match="MADial-Bench"):
        load_madial(madial_root)


@pytest.mark.parametrize("line, expected", [
    ('<Bart>:"你好"\n', ("Bart", "你好")),
    (' <Assistant>: "Hi there"\n', ("Assistant", "Hi there")),
    ('"I understand."\n', (None, "I understand.")),
    ("<EOD>\n", (None, "<EOD>")),
])
def test_split_turn(line, expected):
    assert split_turn(line) == expected


def test_bad_memory_time_names_line_and_field(madial_root):
    f = madial_root / "zh" / "MADial-Bench-zh-memory.json"
    lines = f.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace("2023-12-25", "Christmas 2023")
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as err:
        load_madial_zh(madial_root / "zh")
    assert (err.value.line, err.value.field, err.value.value) == (1, "1.time", "Christmas 2023")


def test_truncated_dialogue_line(madial_root):
    f = madial_root / "zh" / "MADial-Bench-zh-dialogue.json"
    lines = f.read_text(encoding="utf-8").splitlines()
    f.write_text("\n".join(lines[:2] + [lines[2][:30]]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="invalid JSON") as err:
        load_madial_zh(madial_root / "zh")
    assert err.value.line == 3

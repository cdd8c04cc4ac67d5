"""Builders of small native-format files (LoCoMo, LongMemEval, MADial-Bench, MemDaily, MemoryBank).

Every file is written here by the tests themselves (no public data is copied); each reproduces the quirks
of the real source that its loader must handle. The expected counts are spelled out in the tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def _dump(path: Path, obj: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=1), encoding="utf-8")
    return path


def _dump_lines(path: Path, rows: list[Any], *, blank_line_at: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    if blank_line_at is not None:
        lines.insert(blank_line_at, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- LoCoMo

def locomo_samples() -> list[dict]:
    turn = lambda d, s, t, **kw: {"speaker": s, "dia_id": d, "text": t, **kw}  # noqa: E731
    conv_a = {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [turn("D1:1", "Ann", "Hi Bob!"),
                      turn("D1:2", "Bob", "Look at my painting.", img_url=["http://x/y.jpg"],
                           blip_caption="a photo of a sunset painting", query="sunset painting"),
                      turn("D1:3", "Ann", "I went to a support group yesterday.")],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [turn("D2:1", "Bob", "I adopted a dog."), turn("D2:2", "Ann", "Congrats!")],
        "session_3_date_time": "4:33 pm on 12 July, 2023",  # a date without turns (as in conv-26)
        "session_3": [],
    }
    qa_a = [
        {"question": "When did Ann go to the support group?", "answer": "7 May 2023", "evidence": ["D1:3"],
         "category": 2},
        {"question": "q1", "answer": "a", "evidence": ["D1:2; D2:1"], "category": 1},          # split on ;
        {"question": "q2", "answer": "b", "evidence": ["D2:1 D1:1 D1:3"], "category": 4},      # split on spaces
        {"question": "q3", "answer": "c", "evidence": ["D:2:2"], "category": 4},               # D:2:2 -> D2:2
        {"question": "q4", "answer": 2022, "evidence": ["D2:02"], "category": 3},              # D2:02 -> D2:2
        {"question": "q5", "answer": "d", "evidence": ["D1:1", "D"], "category": 1},           # bare D dropped
        {"question": "q6", "answer": "e", "evidence": ["D9:9"], "category": 4},                # names no turn
        {"question": "q7", "answer": "f", "evidence": [], "category": 3},                      # no evidence
        {"question": "Is Bob's dog a cat?", "adversarial_answer": "yes", "evidence": ["D2:1"], "category": 5},
        {"question": "q9", "answer": "g", "evidence": ["D1:1", "D5:1", "D1:1"], "category": 4},  # D5:1 no turn
    ]
    conv_b = {"speaker_a": "Cy", "speaker_b": "Di",
              "session_1_date_time": "12:09 am on 13 September, 2023",
              "session_1": [turn("D1:1", "Cy", "Morning."), turn("D1:2", "Di", "I moved to Lyon.")]}
    qa_b = [{"question": "Where did Di move?", "answer": "Lyon", "evidence": ["D1:2"], "category": 4}]
    return [{"sample_id": "conv-a", "conversation": conv_a, "qa": qa_a, "event_summary": {}},
            {"sample_id": "conv-b", "conversation": conv_b, "qa": qa_b}]


@pytest.fixture
def locomo_data() -> list[dict]:
    """A fresh copy of the LoCoMo samples, to be altered by a bad-input test."""
    return locomo_samples()


@pytest.fixture
def lme_data() -> list[dict]:
    return lme_questions()


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    return _dump(tmp_path / "locomo" / "locomo10.json", locomo_samples())


# ----------------------------------------------------------------------------- LongMemEval

def lme_questions() -> list[dict]:
    t = lambda role, content, has=False: {"role": role, "content": content, "has_answer": has}  # noqa: E731
    q1 = {"question_id": "q1", "question_type": "single-session-user", "question": "Where do I live?",
          "answer": "Lisbon", "question_date": "2023/05/28 (Sun) 19:47",
          "haystack_dates": ["2023/05/21 (Sun) 19:50", "2023/05/20 (Sat) 02:21"],
          "haystack_session_ids": ["s_a", "answer_1"],
          "haystack_sessions": [[t("user", "Hello"), t("assistant", "Hi, how can I help?")],
                                [t("user", "I moved to Lisbon.", True), t("assistant", "Nice city!"),
                                 {"role": "user", "content": "Thanks."}]],  # no has_answer key: false
          "answer_session_ids": ["answer_1"]}
    q2 = {"question_id": "q2_abs", "question_type": "temporal-reasoning", "question": "When did I sell my car?",
          "answer": "You did not mention selling a car", "question_date": "2023/06/01 (Thu) 10:00",
          "haystack_dates": ["2023/05/30 (Tue) 09:00"], "haystack_session_ids": ["answer_2"],
          "haystack_sessions": [[t("user", "I bought a car.", True), t("assistant", "Great.")]],
          "answer_session_ids": ["answer_2"]}
    q3 = {"question_id": "q3_abs", "question_type": "multi-session", "question": "How many cats?", "answer": 0,
          "question_date": "2023/06/02 (Fri) 10:00", "haystack_dates": ["2023/05/30 (Tue) 09:00"],
          "haystack_session_ids": ["answer_3"],
          "haystack_sessions": [[t("user", "I have a dog."), t("assistant", "Cute.")]],
          "answer_session_ids": ["answer_3"]}
    q4 = {"question_id": "q4", "question_type": "multi-session", "question": "How many trips?", "answer": 2,
          "question_date": "2023/07/01 (Sat) 08:00",
          "haystack_dates": ["2023/06/10 (Sat) 09:00", "2023/06/11 (Sun) 09:00"],
          "haystack_session_ids": ["answer_4", "answer_4"],  # a repeated session id
          "haystack_sessions": [[t("user", "Trip to Porto."), t("assistant", "Fun.")],
                                [t("user", "Trip to Faro.")]],
          "answer_session_ids": ["answer_4"]}
    return [q1, q2, q3, q4]


@pytest.fixture
def lme_file(tmp_path: Path) -> Path:
    return _dump(tmp_path / "longmemeval" / "longmemeval_oracle.json", lme_questions())


# ----------------------------------------------------------------------------- MADial-Bench

ZH_MEMORY = [
    ("1", 1, "2023-12-25", "活动类", "开心", "Bart在圣诞节晚会上跳舞，感觉非常开心。"),
    ("3", 1, "2023-03-07", "活动类", "开心", "Bart在运动会上获得第一名。"),
    ("5", 2, "2024-10-23", "喜好类", "开心", "Lisa吃了芒果冰淇淋。"),
    ("7", 2, "2024-01-01", "情绪类", "焦虑", "Lisa考试前很紧张。"),
    ("9", 1, "2024-02-02", "其他类", "失望", "Bart的风筝坏了。"),  # zh only (like ids 161-171)
]
EN_MEMORY = {"1": "Bart danced at the Christmas party.", "3": "Bart won the race.", "5": "Lisa ate mango ice cream.",
             "7": "Lisa was nervous before the exam.", "11": "An entry with no owner in the zh file."}


def _zh_dialogues() -> list[dict]:
    return [
        {"dialogue": ["<BOD>\n", '<Bart>:"嗨"\n', '<Assistant>:"你好"\n', '<Bart>:"我想跳舞"\n',
                      '<Assistant>:"记得圣诞节晚会吗？"\n', "<EOD>\n"],
         "test-turn": [4], "relevant-id": [1, 9], "user-id": 1, "id": 0},
        {"dialogue": ["<BOD>\n", '<Lisa>:"我饿了"\n', '<Assistant>:"想吃什么？"\n', '<Lisa>:"冰淇淋"\n',
                      ' <Assistant>:"上次的芒果味？"\n', "<EOD>\n"],
         "test-turn": [4, 2], "relevant-id": [5, 1], "user-id": 2, "id": 1},  # 1 belongs to user 1
        {"dialogue": ["<BOD>\n", '<Bart>:"你好"\n', '<Assistant>:"嗨"\n', "<EOD>\n"],
         "test-turn": [2], "relevant-id": [404], "user-id": 1, "id": 2},  # names no entry
        {"dialogue": ["<BOD>\n", '<Lisa>:"你好"\n', "<EOD>\n"],
         "test-turn": [99], "relevant-id": [5], "user-id": 2, "id": 3},  # test turn out of range
        {"dialogue": ["<BOD>\n", '<Assistant>:"记得吗"\n', "<EOD>\n"],
         "test-turn": [1], "relevant-id": [7], "user-id": 2, "id": 4},  # nothing before the test turn
    ]


def _en_dialogues() -> list[dict]:
    return [  # no "id": the line position is the id
        {"dialogue": ["<BOD>\n", '<Bart>: "Hi"\n', '<Assistant>: "Hello"\n', ' <Bart>: "I want to dance"\n',
                      '"I understand."\n', '<Assistant>: "Remember the Christmas party?"\n', "<EOD>\n"],
         "test-turn": [5], "relevant-id": [1, 9], "user-id": 1},  # 9 has no English entry
        {"dialogue": ["<BOD>\n", '<Lisa>: "I am hungry"\n', '<Assistant>: "Mango again?"\n', "<EOD>\n"],
         "test-turn": [2], "relevant-id": [5], "user-id": 2},
    ]


def build_madial(root: Path, *, zh_folder: str = "zh") -> Path:
    """``root/<zh_folder>`` and ``root/en``; returns root."""
    zh_mem = [{k: {"time": t, "scene": s, "emotion": e, "event": ev, "user-id": u, "id": k}}
              for k, u, t, s, e, ev in ZH_MEMORY]
    _dump_lines(root / zh_folder / "MADial-Bench-zh-memory.json", zh_mem, blank_line_at=2)
    _dump_lines(root / zh_folder / "MADial-Bench-zh-dialogue.json", _zh_dialogues())
    times = {k: (t, e) for k, _, t, _, e, _ in ZH_MEMORY}
    en_mem = [{k: {"time": times.get(k, ("2024-05-05", ""))[0], "scene": "Activity", "emotion": "Happy",
                   "event": ev}} for k, ev in EN_MEMORY.items()]
    _dump_lines(root / "en" / "MADial-Bench-en-memory.json", en_mem)
    _dump_lines(root / "en" / "MADial-Bench-en-dialogue.json", _en_dialogues())
    return root


@pytest.fixture
def madial_root(tmp_path: Path) -> Path:
    return build_madial(tmp_path / "madial_bench")


# ----------------------------------------------------------------------------- MemDaily and MemoryBank

def _msg(mid: int, text: str, time: str, place: str = "上海") -> dict:
    return {"mid": mid, "message": text, "time": time, "place": place}


def _q(question: str, answer: str, targets: list[int], time: str = "2024年04月05日 周五 07:54") -> dict:
    return {"qid": 0, "question": question, "answer": answer, "target_step_id": targets,
            "choices": {"A": answer, "B": "x"}, "ground_truth": "A", "time": time}


MEMDAILY_SIMPLE = [
    {"tid": 1, "message_list": [_msg(0, "我表弟的邮箱是a@b.com。", "2024年04月01日 周一 08:36"),
                                _msg(1, "我表弟在杭州工作。", "2024年04月01日 周一 20:05"),
                                _msg(2, "我表弟身高169厘米。", "2024年04月02日 周二 07:06")],
     "question_list": [_q("我表弟在哪里工作？", "杭州", [1])]},
    {"tid": 2, "message_list": [_msg(0, "我同事今年39岁。", "2024年04月03日 周三 19:32"),
                                _msg(1, "我上司44岁。", "2024年04月04日 周四 16:11")],
     "question_list": [_q("[ERRORQ]", "[ERRORA]", [0])]},
    {"tid": 3, "message_list": [_msg(0, "我妹妹喜欢猫。", "2024年04月03日 周三 09:00"),
                                _msg(1, "我妹妹养了狗。", "2024年04月03日 周三 10:00")],
     "question_list": [_q("我妹妹养了什么？", "[ERRORA]", [1])]},
]
MEMDAILY_COMPARATIVE = [
    {"tid": 1, "message_list": [_msg(0, "我哥哥35岁。", "2024年04月02日 周二 12:00"),
                                _msg(1, "我姐姐38岁。", "2024年04月01日 周一 12:00")],  # times out of order
     "question_list": [_q("谁更年长？", "姐姐", [0, 1, 7], "2024年04月06日 周六 09:30")]},
]
POOL_TEXTS = [f"今天天气不错，第{i}天" for i in range(10)]


def build_memdaily(root: Path) -> Path:
    """``root/memdaily/messages_and_QAs/*.json`` and the pool ``root/memorybank/cn``; returns root/memdaily."""
    mdir = root / "memdaily" / "messages_and_QAs"
    _dump(mdir / "01_simple_roles.json", MEMDAILY_SIMPLE)
    _dump(mdir / "03_comparative_events.json", MEMDAILY_COMPARATIVE)
    history_a = {"2023-04-27": [{"query": POOL_TEXTS[i], "response": f"回复{i}"} for i in range(6)]}
    history_b = {"2023-04-28": [{"query": POOL_TEXTS[i], "response": f"回复{i}"} for i in range(6, 10)]
                 + [{"query": POOL_TEXTS[0], "response": "重复"}, {"query": "  ", "response": "空"}]}
    record = lambda name, h: {"name": name, "summary": {}, "personality": {}, "overall_history": "",  # noqa: E731
                              "history": h, "meta_information": {}}
    _dump(root / "memorybank" / "cn" / "memory_bank_cn.json", {"张三": record("张三", history_a),
                                                               "李四": record("李四", history_b)})
    return root / "memdaily"


@pytest.fixture
def memdaily_root(tmp_path: Path) -> Path:
    return build_memdaily(tmp_path)

"""LongMemEval (oracle, S, M; one schema) -> canonical dataset.

Native format: a JSON list of questions ``{"question_id", "question_type", "question", "answer",
"question_date": "2023/05/20 (Sat) 02:21", "haystack_dates": [...], "haystack_session_ids": [...],
"haystack_sessions": [[{"role", "content", "has_answer"}, ...], ...], "answer_session_ids": [...]}``.

Conversion:
- every question is its own conversation (its own haystack): ``conversation_id`` = ``query_id`` =
  ``question_id``; ``asked_at`` = ``question_date``; ``category`` = ``question_type``.
- ``granularity="turn"`` (default): one item per turn, ``item_id`` = ``<session_id>:<turn index>``,
  ``session_id`` = the haystack session id, ``speaker`` = the role; a turn's time is its session's date
  plus ``turn_spacing_s`` per preceding turn. Evidence = the turns with ``has_answer: true`` (a missing
  ``has_answer`` counts as false); a question without such a turn is dropped and counted.
- ``granularity="session"``: one item per session (``item_id`` = session id), text = its turns joined
  as ``"<role>: <content>"`` lines; evidence = ``answer_session_ids``.
- the session-level gold ``answer_session_ids`` and the answer are always in the question's ``meta``.
- abstention questions (id ending in ``_abs``: the premise is false, the gold turns only look related)
  are dropped and counted by default (``abstention="drop"``): their "evidence" is not an answer, so
  recall on them means nothing. ``abstention="keep"`` keeps them with category ``<question_type>_abs``.
- dates have no timezone: they are read in ``tz``. A session id repeated inside one haystack keeps its
  first occurrence (the repeat is dropped); an empty turn is dropped. Both are counted for the questions
  kept only (a dropped question takes its whole haystack with it).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Literal

from memlab.bench.datasets.canonical import (Card, Dataset, Item, LoadReport, Origin, Question, Rejections,
                                             in_range, native_field, read_native_json, resolve_tz,
                                             shifted)
from memlab.errors import DatasetError, InvalidInput

OFFICIAL_URL = "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned"
LICENSE = "MIT"
GRANULARITIES = ("turn", "session")
ABSTENTION = ("drop", "keep")

_DATE = re.compile(r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]{3}\))?\s*(\d{1,2}):(\d{2})\s*$")

DROP_ABSTENTION = "question: abstention (_abs), option abstention='drop'"
DROP_NO_HAS_ANSWER = "question: no has_answer turn (turn level)"
DROP_NO_ANSWER_SESSION = "question: no answer session in its haystack (session level)"
DROP_UNKNOWN_SESSION = "evidence: answer_session_id not in the haystack (session level)"
DROP_DUPLICATE_SESSION = "session: repeated session id in one haystack"
DROP_EMPTY_TURN = "turn: empty content"


def parse_lme_date(text: str, *, tz: tzinfo) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` -> an aware datetime in ``tz``; ValueError if the form differs."""
    m = _DATE.match(text)
    if not m:
        raise ValueError(text)
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=tz)


def _date(text: Any, *, file: Path, field: str, tz: tzinfo) -> datetime:
    try:
        when = parse_lme_date(text, tz=tz)
    except (ValueError, TypeError):
        raise DatasetError(str(file), "date not in the form '2023/05/20 (Sat) 02:21'", field=field,
                           value=text) from None
    return in_range(when, file=file, field=field, value=text)


def _card(file: Path, name: str | None, granularity: str, abstention: str) -> Card:
    stem = file.stem.lower()
    variant = next((v for v in ("oracle", "_m", "_s") if v in stem), "")
    default = {"oracle": "longmemeval-oracle", "_s": "longmemeval-s", "_m": "longmemeval-m"}.get(variant,
                                                                                                 "longmemeval")
    return Card(name=name or default, version=f"{file.name};granularity={granularity};abstention={abstention}",
                language="en", license=LICENSE, source=OFFICIAL_URL, granularity=granularity,
                description="LongMemEval: each question has its own haystack of chat sessions; gold turns "
                            "(has_answer) and gold sessions (answer_session_ids)")


def load_longmemeval(path: str | os.PathLike[str], *, granularity: Literal["turn", "session"] = "turn",
                     abstention: Literal["drop", "keep"] = "drop", turn_spacing_s: float = 1.0,
                     tz: str | tzinfo = "UTC", name: str | None = None, lenient: bool = False) -> Dataset:
    """Load a LongMemEval file (``longmemeval_oracle.json``, ``longmemeval_s_cleaned.json``, ``..._m_...``).

    Args:
        path: the JSON file.
        granularity: "turn" (items are turns, evidence the has_answer turns) or "session".
        abstention: "drop" (default) or "keep" the ``_abs`` questions (category ``<type>_abs``).
        turn_spacing_s: seconds added per turn inside a session.
        tz: timezone of the (naive) dates.
        name: the card's name (default from the file name: longmemeval-oracle / -s / -m).
        lenient: drop a question with a malformed field (and its haystack) and report it, instead of
            stopping (see `memlab.bench.datasets.canonical.Rejections`).
    """
    if granularity not in GRANULARITIES:
        raise InvalidInput("granularity", f"must be one of {GRANULARITIES}", granularity)
    if abstention not in ABSTENTION:
        raise InvalidInput("abstention", f"must be one of {ABSTENTION}", abstention)
    if turn_spacing_s < 0:
        raise InvalidInput("turn_spacing_s", "must be >= 0", turn_spacing_s)
    file, zone = Path(path), resolve_tz(tz)
    data = read_native_json(file)
    if not isinstance(data, list):
        raise DatasetError(str(file), "must be a JSON list of questions", value=type(data).__name__)
    dropped: Counter[str] = Counter()
    rej = Rejections(lenient)
    items: list[Item] = []
    questions: list[Question] = []
    for n, q in enumerate(data):
        with rej.record(file, where=f"[{n}]"):  # lenient: a bad question goes with its haystack
            qid = native_field(q, "question_id", str, file=file, where=f"[{n}]")
            qtype = native_field(q, "question_type", str, file=file, where=qid)
            is_abs = qid.endswith("_abs")
            if is_abs and abstention == "drop":
                dropped[DROP_ABSTENTION] += 1
                continue
            sids = native_field(q, "haystack_session_ids", list, file=file, where=qid)
            dates = native_field(q, "haystack_dates", list, file=file, where=qid)
            sessions = native_field(q, "haystack_sessions", list, file=file, where=qid)
            if not len(sids) == len(dates) == len(sessions):
                raise DatasetError(str(file), "haystack_session_ids, haystack_dates and haystack_sessions differ in "
                                   "length", field=f"{qid}.haystack_sessions",
                                   value=(len(sids), len(dates), len(sessions)))
            answer_sids = [str(s) for s in native_field(q, "answer_session_ids", list, file=file, where=qid)]
            conv_items: list[Item] = []
            local: Counter[str] = Counter()  # merged into dropped only if the question is kept
            gold_turns: list[str] = []
            seen_sessions: set[str] = set()
            for k, (sid, date, turns) in enumerate(zip(sids, dates, sessions)):
                sid = str(sid)
                if sid in seen_sessions:
                    local[DROP_DUPLICATE_SESSION] += 1
                    continue
                seen_sessions.add(sid)
                start = _date(date, file=file, field=f"{qid}.haystack_dates[{k}]", tz=zone)
                if not isinstance(turns, list):
                    raise DatasetError(str(file), "must be a list of turns", field=f"{qid}.haystack_sessions[{k}]")
                lines: list[str] = []
                for t, turn in enumerate(turns):
                    where = f"{qid}.haystack_sessions[{k}][{t}]"
                    role = native_field(turn, "role", str, file=file, where=where)
                    content = native_field(turn, "content", str, file=file, where=where)
                    if not content.strip():
                        local[DROP_EMPTY_TURN] += 1
                        continue
                    lines.append(f"{role}: {content}")
                    if granularity == "turn":
                        iid = f"{sid}:{t}"
                        conv_items.append(Item(qid, iid, sid, role, content,
                                               shifted(start, timedelta(seconds=t * turn_spacing_s),
                                                       file=file, field=f"{where}.timestamp"), {},
                                               Origin(str(file), where=where, text_field="content")))
                        if turn.get("has_answer") is True:
                            gold_turns.append(iid)
                if granularity == "session" and lines:
                    conv_items.append(Item(qid, sid, sid, "", "\n".join(lines), start, {},
                                           Origin(str(file), where=f"{qid}.haystack_sessions[{k}]",
                                                  text_field="content")))
            if granularity == "turn":
                evidence = gold_turns
                if not evidence:
                    dropped[DROP_NO_HAS_ANSWER] += 1
                    continue
            else:
                have = {it.item_id for it in conv_items}
                evidence = [s for s in dict.fromkeys(answer_sids) if s in have]
                if missing := set(answer_sids) - have:
                    local[DROP_UNKNOWN_SESSION] += len(missing)
                if not evidence:
                    dropped[DROP_NO_ANSWER_SESSION] += 1
                    continue
            answer = q.get("answer")
            meta: dict[str, Any] = {"answer": answer if isinstance(answer, (str, int, float)) else str(answer),
                                    "answer_session_ids": answer_sids, "question_type": qtype, "abstention": is_abs}
            asked_at = _date(native_field(q, "question_date", str, file=file, where=qid), file=file,
                             field=f"{qid}.question_date", tz=zone)
            question = Question(qid, qid, native_field(q, "question", str, file=file, where=qid), asked_at,
                                qtype + ("_abs" if is_abs else ""), tuple(evidence), meta)
            dropped.update(local)
            items.extend(conv_items)
            questions.append(question)
    notes = [f"granularity={granularity}; abstention={abstention}",
             "questions dropped take their haystack with them (each question is its own conversation)"]
    return Dataset(card=_card(file, name, granularity, abstention), items=tuple(items), questions=tuple(questions),
                   report=LoadReport(dropped=dict(dropped), notes=notes,
                                     questions_file=str(file), rejected=rej.rejected))

"""LoCoMo (``locomo10.json``) -> canonical dataset.

Native format: a JSON list of samples ``{"sample_id", "conversation": {"speaker_a", "speaker_b",
"session_N": [turn, ...], "session_N_date_time": "1:56 pm on 8 May, 2023", ...}, "qa": [...]}``; a turn is
``{"speaker", "dia_id": "D<session>:<turn>", "text", ...}`` (image turns add ``img_url``, ``blip_caption``,
``query``); a question is ``{"question", "answer" | "adversarial_answer", "evidence": [dia_id, ...],
"category": 1..5}``.

Conversion:
- one conversation per sample (``conversation_id`` = ``sample_id``), one item per turn (``item_id`` =
  ``dia_id``, ``session_id`` = ``session_N``); a turn's time is its session's date-time plus
  ``turn_spacing_s`` seconds per preceding turn of the session, so order is preserved; every other turn
  field (image url, caption, ...) goes to ``meta``. Session times have no timezone: they are read in ``tz``.
- ``query_id`` = ``q<index in qa>``; ``category`` = the number as a string ("1".."5"; 1 multi-hop,
  2 temporal, 3 open-domain, 4 single-hop, 5 adversarial, the name in ``meta["category_name"]``);
  the answer in ``meta["answer"]`` and, for category 5, ``meta["adversarial_answer"]``.
- ``asked_at`` = the conversation's last turn + ``asked_after_s``.
- evidence strings are parsed leniently where the intent is clear: split on ``;``, ``,`` and spaces;
  ``D:11:26`` -> ``D11:26``; ``D30:05`` -> ``D30:5``. Tokens that are no id (``D``) and ids that name no
  turn (``D10:19`` in conv-42) are dropped and counted; a question left without evidence is dropped and
  counted.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Iterable

from memlab.bench.datasets.canonical import (Card, Dataset, Item, LoadReport, Origin, Question, Rejections,
                                             in_range, native_field, read_native_json, resolve_tz,
                                             shifted)
from memlab.errors import DatasetError, InvalidInput

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
OFFICIAL_URL = "https://github.com/snap-research/LoCoMo/blob/main/data/locomo10.json"
LICENSE = "CC BY-NC 4.0"

_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE_TOKEN = re.compile(r"^D:?(\d+):(\d+)$")
_SPLIT = re.compile(r"[;,\s]+")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"

DROP_CATEGORY = "question: category not selected (option categories)"
DROP_NO_EVIDENCE_LISTED = "question: no evidence listed in the source"
DROP_NO_VALID_EVIDENCE = "question: no valid evidence left"
DROP_MALFORMED_ID = "evidence id: malformed, intent unclear"
DROP_UNKNOWN_ID = "evidence id: names no turn"
DROP_DUPLICATE_TURN = "turn: duplicate dia_id in the conversation"


def parse_session_time(text: str, *, tz: tzinfo) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware datetime in ``tz``; ValueError if the form differs."""
    cleaned = " ".join(text.replace(" ,", ",").split())
    return datetime.strptime(cleaned, _DATE_FORMAT).replace(tzinfo=tz)


def parse_evidence(raw: str) -> tuple[list[str], list[str]]:
    """Split one evidence string into canonical turn ids and the tokens that are no id.

    ``"D8:6; D9:17"`` -> ``(["D8:6", "D9:17"], [])``; ``"D:11:26"`` -> ``(["D11:26"], [])``;
    ``"D30:05"`` -> ``(["D30:5"], [])``; ``"D"`` -> ``([], ["D"])``.
    """
    ids, bad = [], []
    for token in _SPLIT.split(raw.strip()):
        if not token:
            continue
        m = _EVIDENCE_TOKEN.match(token)
        if m:
            ids.append(f"D{int(m.group(1))}:{int(m.group(2))}")
        else:
            bad.append(token)
    return ids, bad


def _sessions(conv: dict, *, file: Path, where: str) -> list[tuple[int, list]]:
    found = []
    for key, value in conv.items():
        m = _SESSION_KEY.match(key)
        if m:
            if not isinstance(value, list):
                raise DatasetError(str(file), "must be a list of turns", field=f"{where}.{key}",
                                   value=type(value).__name__)
            found.append((int(m.group(1)), value))
    return sorted(found)


def load_locomo(path: str | os.PathLike[str], *, categories: Iterable[int] | None = None,
                turn_spacing_s: float = 1.0, asked_after_s: float = 60.0, tz: str | tzinfo = "UTC",
                name: str = "locomo", lenient: bool = False) -> Dataset:
    """Load ``locomo10.json`` as a canonical `Dataset`.

    Args:
        path: the ``locomo10.json`` file.
        categories: LoCoMo categories to keep (1-5); None keeps all. The others are counted as dropped.
        turn_spacing_s: seconds added per turn inside a session (keeps turn order in time).
        asked_after_s: questions are asked this many seconds after the conversation's last turn.
        tz: timezone of the (naive) session date-times.
        name: the card's name.
        lenient: drop a malformed turn, session or question (a sample without id, conversation, turns or
            qa list: the whole sample) and report it, instead of stopping (see ``canonical.Rejections``).
    """
    file = Path(path)
    zone = resolve_tz(tz)
    keep = None if categories is None else {int(c) for c in categories}
    if keep is not None and not keep <= set(CATEGORY_NAMES):
        raise InvalidInput("categories", "must be LoCoMo categories among 1-5", sorted(keep))
    if turn_spacing_s < 0 or asked_after_s < 0:
        raise InvalidInput("turn_spacing_s/asked_after_s", "must be >= 0", (turn_spacing_s, asked_after_s))
    data = read_native_json(file)
    if not isinstance(data, list):
        raise DatasetError(str(file), "must be a JSON list of samples", value=type(data).__name__)
    dropped: Counter[str] = Counter()
    rej = Rejections(lenient)
    repaired: list[str] = []
    items: list[Item] = []
    questions: list[Question] = []
    for n, sample in enumerate(data):
        # lenient: a bad turn, session date or question is dropped alone; a sample without its id,
        # conversation, turns or qa list is dropped whole. Counts merge only for samples kept.
        with rej.record(file, where=f"[{n}]"):
            local: Counter[str] = Counter()
            fixes: list[str] = []
            cid = native_field(sample, "sample_id", str, file=file, where=f"[{n}]")
            conv = native_field(sample, "conversation", dict, file=file, where=cid)
            turn_ids: set[str] = set()
            last: datetime | None = None
            conv_items: list[Item] = []
            for sess_no, turns in _sessions(conv, file=file, where=f"{cid}.conversation"):
                if not turns:
                    continue
                with rej.record(file, where=f"{cid}.conversation.session_{sess_no}"):
                    date_key = f"session_{sess_no}_date_time"
                    raw_date = native_field(conv, date_key, str, file=file, where=f"{cid}.conversation")
                    try:
                        start = parse_session_time(raw_date, tz=zone)
                    except ValueError:
                        raise DatasetError(str(file), "session date not in the form '1:56 pm on 8 May, 2023'",
                                           field=f"{cid}.conversation.{date_key}", value=raw_date) from None
                    in_range(start, file=file, field=f"{cid}.conversation.{date_key}", value=raw_date)
                    for k, turn in enumerate(turns):
                        where = f"{cid}.conversation.session_{sess_no}[{k}]"
                        with rej.record(file, where=where):
                            dia_id = native_field(turn, "dia_id", str, file=file, where=where)
                            if dia_id in turn_ids:
                                local[DROP_DUPLICATE_TURN] += 1
                                continue
                            meta = {key: val for key, val in turn.items() if key not in ("dia_id", "speaker", "text")}
                            ts = shifted(start, timedelta(seconds=k * turn_spacing_s), file=file,
                                         field=f"{where}.timestamp")
                            conv_items.append(Item(cid, dia_id, f"session_{sess_no}",
                                                   native_field(turn, "speaker", str, file=file, where=where),
                                                   native_field(turn, "text", str, file=file, where=where), ts,
                                                   meta, Origin(str(file), where=where)))
                            turn_ids.add(dia_id)
                            last = ts if last is None or ts > last else last
            if last is None:
                raise DatasetError(str(file), "conversation has no turns", field=f"{cid}.conversation")
            asked_at = shifted(last, timedelta(seconds=asked_after_s), file=file,
                               field=f"{cid}.qa (asked_at: the last turn + asked_after_s)")
            conv_questions: list[Question] = []
            for qi, qa in enumerate(native_field(sample, "qa", list, file=file, where=cid)):
                where = f"{cid}.qa[{qi}]"
                with rej.record(file, where=where):
                    category = native_field(qa, "category", int, file=file, where=where)
                    if category not in CATEGORY_NAMES:
                        raise DatasetError(str(file), "category must be 1-5", field=f"{where}.category",
                                           value=category)
                    if keep is not None and category not in keep:
                        local[DROP_CATEGORY] += 1
                        continue
                    raw_evidence = native_field(qa, "evidence", list, file=file, where=where)
                    if not raw_evidence:
                        local[DROP_NO_EVIDENCE_LISTED] += 1
                        continue
                    evidence: list[str] = []
                    for raw in raw_evidence:
                        if not isinstance(raw, str):
                            raise DatasetError(str(file), "evidence must be strings", field=f"{where}.evidence",
                                               value=raw)
                        ids, bad = parse_evidence(raw)
                        if bad:
                            local[DROP_MALFORMED_ID] += len(bad)
                        if ids != [raw]:
                            fixes.append(f"{cid} q{qi}: {raw!r} -> {ids}")
                        for ev in ids:
                            if ev not in turn_ids:
                                local[DROP_UNKNOWN_ID] += 1
                                fixes.append(f"{cid} q{qi}: {ev!r} names no turn, dropped")
                            elif ev not in evidence:
                                evidence.append(ev)
                    if not evidence:
                        local[DROP_NO_VALID_EVIDENCE] += 1
                        continue
                    meta_q: dict[str, Any] = {"category_name": CATEGORY_NAMES[category], "answer": qa.get("answer")}
                    if "adversarial_answer" in qa:
                        meta_q["adversarial_answer"] = qa["adversarial_answer"]
                    conv_questions.append(Question(cid, f"q{qi}", native_field(qa, "question", str, file=file,
                                                                               where=where),
                                                   asked_at, str(category), tuple(evidence), meta_q))
            items.extend(conv_items)
            questions.extend(conv_questions)
            dropped.update(local)
            repaired.extend(fixes)
    notes = [f"evidence repaired or dropped: {r}" for r in repaired]
    if keep is not None:
        notes.append(f"categories kept: {sorted(keep)}")
    version = "locomo10" + (f";categories={','.join(map(str, sorted(keep)))}" if keep is not None else "")
    card = Card(name=name, version=version, language="en", license=LICENSE, source=OFFICIAL_URL,
                granularity="turn",
                description="LoCoMo: very long two-person chats; questions with gold evidence turns "
                            "(D<session>:<turn>)")
    return Dataset(card=card, items=tuple(items), questions=tuple(questions),
                   report=LoadReport(dropped=dict(dropped), notes=notes,
                                     questions_file=str(file), rejected=rej.rejected))

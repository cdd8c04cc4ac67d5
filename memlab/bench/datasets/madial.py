"""MADial-Bench (zh and en) -> canonical dataset.

Native format (JSON Lines despite the ``.json`` suffix), per language folder:

``MADial-Bench-<lang>-memory.json``
    one ``{"<id>": {"time": "2023-12-25", "scene", "emotion", "event", "user-id", "id"}}`` per line; the
    English entries carry neither ``id`` nor ``user-id``: the id is the line's key and the owner comes from
    the Chinese file, whose ids are the same (so the English loader needs the zh folder: ``zh_path``).
``MADial-Bench-<lang>-dialogue.json``
    one ``{"dialogue": ["<BOD>", "<Bart>:\\"...\\"", ...], "test-turn": [8], "relevant-id": [1, 78],
    "user-id": 1, "id": 0}`` per line; the English dialogues carry no ``id`` (the line position, 0-based,
    which matches the Chinese ids).

Conversion:
- ``conversation_id`` = the user id; items = that user's memory archive (``item_id`` = the entry id,
  ``session_id`` = its date, ``speaker`` = the user's name as tagged in the dialogues, ``text`` = the event,
  ``timestamp`` = the date at midnight in ``tz``, ``meta`` = time, scene, emotion).
- one question per dialogue: the text is the dialogue before the first test turn (``context_turns`` keeps
  only the last N turns; None keeps all), rendered ``"<speaker>: <text>"`` per line; evidence = the
  ``relevant-id`` entries of the same user; ``category`` = "recall" (the source has no categories);
  ``asked_at`` = the user's latest memory date + ``asked_after_days``; the test turns, the gold reply and
  the raw relevant ids go to ``meta``.
- dropped and counted: English entries with no owner in the zh file, relevant ids that name no entry of the
  user, questions left without evidence or without context.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from memlab.bench.datasets.canonical import (Card, Dataset, Item, LoadReport, Origin, Question, Rejections,
                                             in_range, native_field, read_native_jsonl, resolve_tz,
                                             shifted)
from memlab.errors import DatasetError, InvalidInput

OFFICIAL_URL = "https://github.com/hejunqing/MADial-Bench"
LICENSE = "MIT"
LANGS = ("zh", "en")
_TAGGED = re.compile(r"^\s*<([^<>:\n]{1,40})>\s*:\s*(.*?)\s*$", re.S)
_MARKERS = {"<BOD>", "<EOD>"}

DROP_NO_OWNER = "memory entry: no owner in the zh file (en only)"
DROP_DUPLICATE_ENTRY = "memory entry: repeated id"
DROP_UNKNOWN_RELEVANT = "relevant-id: names no memory entry"
DROP_OTHER_USER = "relevant-id: names another user's entry"
DROP_NO_EVIDENCE = "question: no valid relevant-id left"
DROP_BAD_TEST_TURN = "question: test-turn missing or out of range"
DROP_NO_CONTEXT = "question: no dialogue before the test turn"


def split_turn(line: str) -> tuple[str | None, str]:
    """``'<Bart>: "Hi!"\\n'`` -> ``("Bart", "Hi!")``; an untagged line -> ``(None, its text)``."""
    m = _TAGGED.match(line)
    speaker, text = (m.group(1).strip(), m.group(2)) if m else (None, line.strip())
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].strip()
    return speaker, text


def render_turn(line: str) -> str:
    speaker, text = split_turn(line)
    return f"{speaker}: {text}" if speaker else text


def _files(folder: Path, lang: str) -> tuple[Path, Path]:
    return folder / f"MADial-Bench-{lang}-dialogue.json", folder / f"MADial-Bench-{lang}-memory.json"


def _detect_language(folder: Path) -> str:
    found = [lang for lang in LANGS if _files(folder, lang)[0].is_file()]
    if len(found) != 1:
        raise DatasetError(str(folder), "expected one MADial-Bench-<zh|en>-dialogue.json in the folder "
                           "(or pass language=)", value=found)
    return found[0]


def _zh_folder(folder: Path, zh_path: str | os.PathLike[str] | None) -> Path:
    if zh_path is not None:
        return Path(zh_path)
    for sibling in ("zh", "ch"):  # the shared copy uses zh/, the upstream repository data/ch/
        if _files(folder.parent / sibling, "zh")[1].is_file():
            return folder.parent / sibling
    raise DatasetError(str(folder), "the English memory entries have no owner: the loader needs the Chinese "
                       "folder (MADial-Bench-zh-memory.json); pass zh_path=", field="zh_path")


def _read_memory(file: Path, *, owners: dict[str, str] | None, tz: tzinfo, dropped: Counter[str],
                 rejections: Rejections) -> list[tuple[str, str, dict[str, Any], datetime, int]]:
    """``[(owner, entry id, entry, time, line), ...]``; owners from the entry itself unless ``owners`` is
    given. A bad line goes to ``rejections`` whole."""
    out, seen = [], set()
    for line, obj in read_native_jsonl(file, rejections=rejections):
        with rejections.record(file, line=line):
            out.extend(_memory_line(file, line, obj, owners=owners, tz=tz, dropped=dropped, seen=seen))
    return out


def _memory_line(file: Path, line: int, obj: Any, *, owners: dict[str, str] | None, tz: tzinfo,
                 dropped: Counter[str], seen: set[str]) -> list[tuple[str, str, dict[str, Any], datetime, int]]:
    """The entries of one line of a memory file (see `_read_memory`)."""
    out = []
    if not isinstance(obj, dict):
        raise DatasetError(str(file), "must be a JSON object {id: entry}", line=line, value=type(obj).__name__)
    for key, entry in obj.items():
            where = f"{key}"
            event = native_field(entry, "event", str, file=file, where=where, line=line)
            raw_time = native_field(entry, "time", str, file=file, where=where, line=line)
            try:
                when = datetime.combine(date.fromisoformat(raw_time.strip()), datetime.min.time(), tzinfo=tz)
            except ValueError:
                raise DatasetError(str(file), "date not in the form 2023-12-25", line=line, field=f"{where}.time",
                                   value=raw_time) from None
            in_range(when, file=file, line=line, field=f"{where}.time", value=raw_time)
            if owners is None:
                owner = str(native_field(entry, "user-id", (int, str), file=file, where=where, line=line))
                if "id" in entry and str(entry["id"]) != key:
                    raise DatasetError(str(file), "entry id differs from its line key", line=line,
                                       field=f"{where}.id", value=entry["id"])
            elif key in owners:
                owner = owners[key]
            else:
                dropped[DROP_NO_OWNER] += 1
                continue
            if key in seen:
                dropped[DROP_DUPLICATE_ENTRY] += 1
                continue
            if not event.strip():
                raise DatasetError(str(file), "event must not be empty", line=line, field=f"{where}.event")
            out.append((owner, key, entry, when, line))
    seen.update(key for _, key, *_ in out)
    return out


def _positions(file: Path) -> dict[int, int]:
    """1-based line -> 0-based place among the file's non-blank lines."""
    with open(file, "rb") as fh:
        return {n: i for i, n in enumerate(n for n, raw in enumerate(fh, 1) if raw.strip())}


def load_madial(path: str | os.PathLike[str], *, language: str | None = None,
                zh_path: str | os.PathLike[str] | None = None, context_turns: int | None = None,
                asked_after_days: float = 1.0, tz: str | tzinfo = "UTC", name: str | None = None,
                lenient: bool = False) -> Dataset:
    """Load one language folder of MADial-Bench.

    Args:
        path: the folder holding ``MADial-Bench-<lang>-{dialogue,memory}.json``.
        language: "zh" or "en"; None detects it from the file names.
        zh_path: (en only) the Chinese folder that gives the English entries their owner; default the
            sibling ``zh`` (or upstream's ``ch``) folder.
        context_turns: how many turns before the test turn form the query; None = all of them.
        asked_after_days: questions are asked this long after the user's latest memory.
        tz: timezone of the (date-only) memory times.
        name: the card's name (default ``madial-<lang>``).
        lenient: drop a malformed line (a memory entry, a dialogue) and report it, instead of stopping
            (see ``canonical.Rejections``).
    """
    folder, zone = Path(path), resolve_tz(tz)
    lang = language or _detect_language(folder)
    if lang not in LANGS:
        raise InvalidInput("language", f"must be one of {LANGS}", lang)
    if context_turns is not None and (isinstance(context_turns, bool) or not isinstance(context_turns, int)
                                      or context_turns < 1):
        raise InvalidInput("context_turns", "must be a positive int or None", context_turns)
    dialogue_file, memory_file = _files(folder, lang)
    dropped: Counter[str] = Counter()
    rej = Rejections(lenient)
    owners = None
    if lang == "en":
        zh_entries = _read_memory(_files(_zh_folder(folder, zh_path), "zh")[1], owners=None, tz=zone,
                                  dropped=Counter(), rejections=rej)
        owners = {key: owner for owner, key, *_ in zh_entries}
    entries = _read_memory(memory_file, owners=owners, tz=zone, dropped=dropped, rejections=rej)
    position = _positions(dialogue_file)  # an English dialogue's id: its place among the non-blank lines
    dialogues = []
    names: dict[str, Counter[str]] = {}
    for line, dlg in read_native_jsonl(dialogue_file, rejections=rej):
        with rej.record(dialogue_file, line=line):
            uid = str(native_field(dlg, "user-id", (int, str), file=dialogue_file, where="", line=line))
            turns = native_field(dlg, "dialogue", list, file=dialogue_file, where="", line=line)
            if not all(isinstance(t, str) for t in turns):
                raise DatasetError(str(dialogue_file), "dialogue turns must be strings", line=line, field="dialogue")
            tags = Counter(split_turn(t)[0] for t in turns)
            names.setdefault(uid, Counter()).update({k: v for k, v in tags.items() if k and k != "Assistant"})
            dialogues.append((line, dlg))
    owner_of = {key: owner for owner, key, *_ in entries}
    latest: dict[str, datetime] = {}
    items: list[Item] = []
    for owner, key, entry, when, line in entries:
        latest[owner] = max(when, latest.get(owner, when))
        speaker = names[owner].most_common(1)[0][0] if names.get(owner) else ""
        meta = {"time": entry["time"], "scene": entry.get("scene"), "emotion": entry.get("emotion")}
        items.append(Item(owner, key, entry["time"].strip(), speaker, entry["event"], when, meta,
                          Origin(str(memory_file), line, where=key, text_field="event")))

    questions: list[Question] = []
    for line, dlg in dialogues:
        with rej.record(dialogue_file, line=line):
            uid = str(dlg["user-id"])
            turns = dlg["dialogue"]
            test_turns = native_field(dlg, "test-turn", list, file=dialogue_file, where="", line=line)
            if not test_turns or not all(isinstance(t, int) and 0 < t < len(turns) for t in test_turns):
                dropped[DROP_BAD_TEST_TURN] += 1
                continue
            first = min(test_turns)
            context = [render_turn(t) for t in turns[:first] if t.strip() not in _MARKERS]
            context = [c for c in context if c]
            if context_turns is not None:
                context = context[-context_turns:]
            if not context:
                dropped[DROP_NO_CONTEXT] += 1
                continue
            evidence: list[str] = []
            raw_relevant = native_field(dlg, "relevant-id", list, file=dialogue_file, where="", line=line)
            for rid in raw_relevant:
                rid = str(rid)
                if rid not in owner_of:
                    dropped[DROP_UNKNOWN_RELEVANT] += 1
                elif owner_of[rid] != uid:
                    dropped[DROP_OTHER_USER] += 1
                elif rid not in evidence:
                    evidence.append(rid)
            if not evidence:
                dropped[DROP_NO_EVIDENCE] += 1
                continue
            qid = str(dlg["id"]) if "id" in dlg else str(position[line])
            meta = {"test_turns": list(test_turns), "gold_reply": render_turn(turns[first]),
                    "relevant_ids": [str(r) for r in raw_relevant], "line": line}
            asked_at = shifted(latest[uid], timedelta(days=asked_after_days), file=dialogue_file,
                               line=line, field="asked_at (the latest memory + asked_after_days)")
            questions.append(Question(uid, qid, "\n".join(context), asked_at, "recall", tuple(evidence), meta))

    card = Card(name=name or f"madial-{lang}", version=f"MADial-Bench;context_turns={context_turns or 'all'}",
                language=lang, license=LICENSE, source=OFFICIAL_URL, granularity="memory-entry",
                description="MADial-Bench: the dialogue before the test turn is the query; gold entries "
                            "(relevant-id) of the user's memory archive (time, scene, emotion)")
    notes = ["query = " + (f"the last {context_turns}" if context_turns else "all") + " dialogue turns before the "
             "first test turn"]
    if lang == "en":
        notes.append("English entries take their owner from the Chinese memory file (same ids)")
    return Dataset(card=card, items=tuple(items), questions=tuple(questions),
                   report=LoadReport(dropped=dict(dropped), notes=notes,
                                     questions_file=str(dialogue_file), rejected=rej.rejected))


def load_madial_zh(path: str | os.PathLike[str], **options: Any) -> Dataset:
    """`load_madial` for the Chinese folder."""
    return load_madial(path, language="zh", **options)


def load_madial_en(path: str | os.PathLike[str], **options: Any) -> Dataset:
    """`load_madial` for the English folder (``zh_path`` defaults to the sibling zh folder)."""
    return load_madial(path, language="en", **options)

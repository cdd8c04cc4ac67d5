"""MemDaily (MemSim) -> canonical dataset, with seeded distractor infusion from a MemoryBank pool.

Native format: ``messages_and_QAs/<NN>_<type>_<scenario>.json``, each a JSON list of trajectories
``{"tid", "message_list": [{"mid", "message", "time": "2024年04月01日 周一 08:39", "place"}],
"question_list": [{"qid", "question", "answer", "target_step_id": [mid, ...], "choices", "ground_truth",
"time"}]}``.

Conversion:
- each trajectory (stream) is a conversation: ``conversation_id`` = ``<file stem>:<tid>``; items are its
  messages (``item_id`` = the mid, ``speaker`` = "user", ``session_id`` = the date, ``meta.place``); a
  question's evidence is ``target_step_id``; ``category`` = the type (simple, conditional, comparative,
  aggregative, post_processing, noisy); the scenario, answer and choices in ``meta``.
- as upstream's post-processing does, questions whose question is ``[ERRORQ]`` or answer ``[ERRORA]`` are
  dropped and counted; a stream left without questions is dropped with its messages.
- times have no timezone: they are read in ``tz``.
- distractors: streams are short (about 9 messages), so the official benchmark mixes ``noise`` times the
  stream's length of unrelated messages into each (9, 49, 99, 199 in the paper; 0 = none). They come from a
  pool of unrelated chat (`load_memorybank_pool`; never other MemDaily streams, which state conflicting
  facts about the same relations), drawn per stream with a generator seeded by ``seed`` and the
  conversation id (so a stream's distractors do not depend on which other streams are loaded); without
  replacement while the pool suffices, else the pool is reshuffled and reused (noted in the report). Their
  timestamps are uniform over the stream's time span, to the second. Distractor items have
  ``item_id`` = ``noise-<k>`` and ``meta={"distractor": true}``.
"""

from __future__ import annotations

import os
import re
import zlib
from collections import Counter
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from memlab.bench.datasets.canonical import (Card, Dataset, Item, LoadReport, Origin, Question, Rejections,
                                             in_range, native_field, read_native_json, resolve_tz)
from memlab.errors import DatasetError, InvalidInput

OFFICIAL_URL = "https://github.com/nuster1128/MemSim"
POOL_URL = "https://github.com/zhongwanjun/MemoryBank-SiliconFriend"
LICENSE = "none stated: research use only, not for redistribution"
MESSAGES_DIR = "messages_and_QAs"

_TIME = re.compile(r"^\s*(\d{4})年(\d{1,2})月(\d{1,2})日\s*(?:周[一二三四五六日天])?\s*(\d{1,2}):(\d{2})\s*$")
_STEM = re.compile(r"^\d+_(?P<type>.+)_(?P<scenario>roles|events|items|places|hybrid)$")

DROP_ERRORQ = "question: [ERRORQ]"
DROP_ERRORA = "question: [ERRORA]"
DROP_UNKNOWN_TARGET = "evidence: target_step_id names no message"
DROP_NO_EVIDENCE = "question: no valid target_step_id left"
DROP_STREAM_MESSAGES = "message: its stream has no question left"


def parse_memdaily_time(text: str, *, tz: tzinfo) -> datetime:
    """``"2024年04月01日 周一 08:39"`` -> an aware datetime in ``tz``; ValueError if the form differs."""
    m = _TIME.match(text)
    if not m:
        raise ValueError(text)
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=tz)


def _read_time(obj: Any, *, file: Path, where: str, tz: tzinfo) -> datetime:
    """The ``time`` field of a message or question, parsed; a DatasetError names the field."""
    raw = native_field(obj, "time", str, file=file, where=where)
    try:
        when = parse_memdaily_time(raw, tz=tz)
    except ValueError:
        raise DatasetError(str(file), "time not in the form '2024年04月01日 周一 08:39'",
                           field=f"{where}.time", value=raw) from None
    return in_range(when, file=file, field=f"{where}.time", value=raw)


def load_memorybank_pool(path: str | os.PathLike[str], *, include_responses: bool = False) -> list[str]:
    """Texts of the MemoryBank chat histories (``memorybank/{cn,en}``): a distractor pool.

    ``path`` is the language folder (holding ``memory_bank_*.json``) or the file itself. The user's
    messages (``query``) are the pool; ``include_responses`` adds the companion's replies. Unique texts in
    file order.
    """
    p = Path(path)
    files = sorted(p.glob("memory_bank_*.json")) if p.is_dir() else [p]
    if not files:
        raise DatasetError(str(p), "no memory_bank_*.json in the folder", value=POOL_URL)
    texts: dict[str, None] = {}
    for file in files:
        data = read_native_json(file)
        if not isinstance(data, dict):
            raise DatasetError(str(file), "must be a JSON object {user name: record}", value=type(data).__name__)
        for user, record in data.items():
            history = native_field(record, "history", dict, file=file, where=user)
            for day, turns in history.items():
                if not isinstance(turns, list):
                    raise DatasetError(str(file), "must be a list of turns", field=f"{user}.history.{day}")
                for k, turn in enumerate(turns):
                    keys = ("query", "response") if include_responses else ("query",)
                    for key in keys:
                        text = native_field(turn, key, str, file=file, where=f"{user}.history.{day}[{k}]").strip()
                        if text:
                            texts[text] = None
    if not texts:
        raise DatasetError(str(p), "the pool holds no text")
    return list(texts)


def _messages_dir(folder: Path) -> Path:
    if (folder / MESSAGES_DIR).is_dir():
        return folder / MESSAGES_DIR
    if folder.is_dir():
        return folder
    raise DatasetError(str(folder), f"not a MemDaily folder (expected {MESSAGES_DIR}/*.json); download it from "
                       f"{OFFICIAL_URL} (data_generation/final_dataset/{MESSAGES_DIR})")


def _distractors(pool: Sequence[str], n: int, rng: np.random.Generator) -> tuple[list[str], bool]:
    """``n`` pool texts: without replacement while the pool suffices, else reshuffled rounds. (texts, reused?)"""
    picks: list[int] = []
    while len(picks) < n:
        take = min(n - len(picks), len(pool))
        picks.extend(rng.permutation(len(pool))[:take].tolist())
    return [pool[i] for i in picks], n > len(pool)


def load_memdaily(path: str | os.PathLike[str], *, noise: int = 0, seed: int = 0,
                  pool: Sequence[str] | None = None, pool_path: str | os.PathLike[str] | None = None,
                  pool_include_responses: bool = False, tz: str | tzinfo = "UTC",
                  name: str = "memdaily", lenient: bool = False) -> Dataset:
    """Load MemDaily (the folder holding ``messages_and_QAs/``, or that folder itself).

    Args:
        path: the MemDaily folder.
        noise: distractors per stream message (0 none; the paper uses 9, 49, 99, 199).
        seed: seeds the distractor draw and their timestamps.
        pool: distractor texts; if None and ``noise`` > 0, read from ``pool_path``.
        pool_path: a MemoryBank language folder; default ``<MemDaily folder>/../memorybank/cn``.
        pool_include_responses: also use the companion's replies of the pool.
        tz: timezone of the (naive) times.
        name: the card's name.
        lenient: drop a malformed message or question (a trajectory without tid, message_list or
            question_list: all of it) and report it, instead of stopping (see ``canonical.Rejections``).
    """
    if isinstance(noise, bool) or not isinstance(noise, int) or noise < 0:
        raise InvalidInput("noise", "must be a non-negative int (the paper uses 0, 9, 49, 99, 199)", noise)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidInput("seed", "must be a non-negative int", seed)
    folder, zone = Path(path), resolve_tz(tz)
    mdir = _messages_dir(folder)
    files = sorted(mdir.glob("*.json"))
    if not files:
        raise DatasetError(str(mdir), "holds no *.json file", value=OFFICIAL_URL)
    if noise > 0 and pool is None:
        root = mdir.parent if mdir.name == MESSAGES_DIR else mdir
        pp = Path(pool_path) if pool_path is not None else root.parent / "memorybank" / "cn"
        if not pp.exists():
            raise DatasetError(str(pp), f"noise={noise} needs a distractor pool: pass pool_path= (a MemoryBank "
                               f"folder, {POOL_URL} eval_data/cn) or pool=", field="pool_path")
        pool = load_memorybank_pool(pp, include_responses=pool_include_responses)
    if noise > 0 and not pool:
        raise InvalidInput("pool", "must hold at least one text when noise > 0", pool)

    dropped: Counter[str] = Counter()
    rej = Rejections(lenient)
    items: list[Item] = []
    questions: list[Question] = []
    reused = 0
    for file in files:
        stem = file.stem
        m = _STEM.match(stem)
        qtype, scenario = (m.group("type"), m.group("scenario")) if m else (stem, "")
        data = read_native_json(file)
        if not isinstance(data, list):
            raise DatasetError(str(file), "must be a JSON list of trajectories", value=type(data).__name__)
        for n, traj in enumerate(data):
            # lenient: a bad message or question is dropped alone; a trajectory without tid, message_list
            # or question_list is dropped whole
            with rej.record(file, where=f"[{n}]"):
                tid = native_field(traj, "tid", (int, str), file=file, where=f"[{n}]")
                cid = f"{stem}:{tid}"
                messages = native_field(traj, "message_list", list, file=file, where=cid)
                stream: list[Item] = []
                for k, msg in enumerate(messages):
                    where = f"{cid}.message_list[{k}]"
                    with rej.record(file, where=where):
                        when = _read_time(msg, file=file, where=where, tz=zone)
                        mid = str(native_field(msg, "mid", (int, str), file=file, where=where))
                        stream.append(Item(cid, mid, when.date().isoformat(), "user",
                                           native_field(msg, "message", str, file=file, where=where), when,
                                           {"place": msg.get("place")},
                                           Origin(str(file), where=where, text_field="message")))
                mids = {it.item_id for it in stream}
                kept: list[Question] = []
                for k, qa in enumerate(native_field(traj, "question_list", list, file=file, where=cid)):
                    where = f"{cid}.question_list[{k}]"
                    with rej.record(file, where=where):
                        text = native_field(qa, "question", str, file=file, where=where)
                        answer = qa.get("answer")
                        if text.strip() == "[ERRORQ]":
                            dropped[DROP_ERRORQ] += 1
                            continue
                        if isinstance(answer, str) and answer.strip() == "[ERRORA]":
                            dropped[DROP_ERRORA] += 1
                            continue
                        evidence: list[str] = []
                        for target in native_field(qa, "target_step_id", list, file=file, where=where):
                            if str(target) not in mids:
                                dropped[DROP_UNKNOWN_TARGET] += 1
                            elif str(target) not in evidence:
                                evidence.append(str(target))
                        if not evidence:
                            dropped[DROP_NO_EVIDENCE] += 1
                            continue
                        asked_at = _read_time(qa, file=file, where=where, tz=zone)
                        meta = {"answer": answer, "choices": qa.get("choices"),
                                "ground_truth": qa.get("ground_truth"), "scenario": scenario,
                                "source_file": file.name, "tid": tid}
                        qid = str(native_field(qa, "qid", (int, str), file=file, where=where))
                        kept.append(Question(cid, qid, text, asked_at, qtype, tuple(evidence), meta))
                if not kept:
                    if stream:
                        dropped[DROP_STREAM_MESSAGES] += len(stream)
                    continue
                if noise > 0 and stream:
                    rng = np.random.default_rng([seed, zlib.crc32(cid.encode("utf-8"))])
                    texts, was_reused = _distractors(pool, noise * len(stream), rng)
                    reused += was_reused
                    start = min(it.timestamp for it in stream)
                    span = (max(it.timestamp for it in stream) - start).total_seconds()
                    offsets = (np.floor(rng.uniform(0.0, span, size=len(texts))) if span > 0
                               else np.zeros(len(texts)))
                    for j, (text, off) in enumerate(zip(texts, offsets.tolist())):
                        when = start + timedelta(seconds=off)
                        stream.append(Item(cid, f"noise-{j}", when.date().isoformat(), "user", text, when,
                                           {"distractor": True}))
                items.extend(sorted(stream, key=lambda it: it.timestamp))
                questions.extend(kept)
    notes = [f"noise={noise} distractors per stream message, seed={seed}"]
    if noise > 0:
        notes.append(f"distractor pool: {len(pool)} texts")
    if reused:
        notes.append(f"{reused} streams needed more distractors than the pool holds: the pool was reused")
    card = Card(name=name, version=f"MemDaily;noise={noise};seed={seed}", language="zh", license=LICENSE,
                source=OFFICIAL_URL, granularity="message",
                description="MemDaily (MemSim): short streams of user messages, one question each with gold "
                            "message ids (target_step_id)" + (f"; {noise}x distractors" if noise else ""))
    return Dataset(card=card, items=tuple(items), questions=tuple(questions),
                   report=LoadReport(dropped=dict(dropped), notes=notes,
                                     questions_file=str(mdir), rejected=rej.rejected))

"""The canonical recall-dataset format: records, the `Dataset` container, and its reader/writer.

A canonical dataset is a folder of three files (see DESIGN.md):

``card.json``
    ``{"name", "version", "language": "zh|en|mixed", "license", "source", "granularity", "description"}``
    and optionally ``"embed_max_tokens"``: the most tokens the embedder reads of one of its texts
    (an integer in [16, 131072]; a benchmark replays the dataset with ``embedding.max_tokens`` set
    to it unless the config sets one itself: :func:`memlab.bench.replay.card_config`). Absent:
    the embedder's own.
``items.jsonl``
    one thing to memorise per line: ``{"conversation_id", "item_id", "session_id", "speaker", "text",
    "timestamp", "meta"}``
``queries.jsonl``
    ``{"conversation_id", "query_id", "text", "asked_at", "category", "evidence": [item_id, ...], "meta"}``

Rules the reader enforces (each violation is a `DatasetError` naming file, 1-based line and field):
every field present with its type, no unknown fields (extras belong in ``meta``), ids non-empty,
timestamps ISO 8601 *with* a UTC offset (``Z`` or ``+08:00``; a naive timestamp is an error, never
silently taken as UTC) from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z in UTC (the times memlab
stores: :func:`memlab.inputs.check_time`; every `Item` and `Question`, from any loader, is checked), ``(conversation_id, item_id)`` and ``(conversation_id, query_id)`` unique,
every evidence id names an item of the same conversation, ``language`` one of zh/en/mixed, ``meta`` a
JSON object. An empty ``evidence`` list is allowed (e.g. abstention questions), but loaders of the
public benchmarks drop such questions and count them.

Strict by default: the first bad record stops the load. ``lenient=True`` (the reader and every loader;
``memlab bench --lenient``) drops each bad record instead (a line here; a turn, message, question or
sample of a native file), and a record that depended on it (a question whose evidence was dropped), and
reports them: counted in ``LoadReport.dropped[DROP_REJECTED]``, listed as "file:line: why" in
``LoadReport.rejected``. See `memlab.bench.datasets.provenance`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone, tzinfo
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memlab.bench.datasets.provenance import DROP_REJECTED, Origin, Rejections
from memlab.errors import DatasetError, InvalidInput
from memlab.inputs import TIME_RANGE, time_problem

LANGUAGES = ("zh", "en", "mixed")
CARD_FILE, ITEMS_FILE, QUERIES_FILE = "card.json", "items.jsonl", "queries.jsonl"
CARD_FIELDS = ("name", "version", "language", "license", "source", "granularity", "description")
ITEM_FIELDS = ("conversation_id", "item_id", "session_id", "speaker", "text", "timestamp", "meta")
QUERY_FIELDS = ("conversation_id", "query_id", "text", "asked_at", "category", "evidence", "meta")

# Per field: (kind, may be empty). Kinds: str, time, meta, ids.
_CARD_SPEC = {f: ("str", f not in ("name", "version", "language")) for f in CARD_FIELDS}
#: the card's optional length cap: its name and range (those of ``embedding.max_tokens``)
CARD_CAP, CAP_RANGE = "embed_max_tokens", (16, 131_072)


def _cap_problem(value: Any) -> str | None:
    lo, hi = CAP_RANGE
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        return f"must be an integer in [{lo}, {hi}] (tokens the embedder reads of a text) or absent"
    return None
_ITEM_SPEC = {"conversation_id": ("str", False), "item_id": ("str", False), "session_id": ("str", True),
              "speaker": ("str", True), "text": ("str", False), "timestamp": ("time", False),
              "meta": ("meta", True)}
_QUERY_SPEC = {"conversation_id": ("str", False), "query_id": ("str", False), "text": ("str", False),
               "asked_at": ("time", False), "category": ("str", True), "evidence": ("ids", True),
               "meta": ("meta", True)}


# ----------------------------------------------------------------------------- field rules

def _json_native_problem(value: Any, path: str = "meta") -> str | None:
    """Why ``value`` would not survive a JSON round trip unchanged, or None."""
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path}: non-finite float {value!r}"
    if isinstance(value, list):
        for i, v in enumerate(value):
            if (p := _json_native_problem(v, f"{path}[{i}]")) is not None:
                return p
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path}: key {k!r} is not a string"
            if (p := _json_native_problem(v, f"{path}.{k}")) is not None:
                return p
        return None
    return f"{path}: {type(value).__name__} is not a JSON type (use dict, list, str, int, float, bool, None)"


def _value_problem(kind: str, may_be_empty: bool, value: Any) -> str | None:
    """The rule ``value`` breaks for a field of ``kind`` (in-memory values), or None."""
    if kind == "str":
        if not isinstance(value, str):
            return "must be a string"
        return None if may_be_empty or value.strip() else "must not be empty"
    if kind == "time":
        if not isinstance(value, datetime):
            return "must be a datetime"
        if value.utcoffset() is None:
            return "must be timezone-aware (naive datetimes are ambiguous)"
        return time_problem(value)     # the range memlab stores (memlab.inputs.check_time)
    if kind == "meta":
        return "must be a dict" if not isinstance(value, dict) else _json_native_problem(value)
    if kind == "ids":
        if not all(isinstance(v, str) and v for v in value):
            return "must hold non-empty string ids"
        return "must not repeat an id" if len(set(value)) != len(value) else None
    raise AssertionError(kind)  # pragma: no cover - the specs above use only these kinds


def _check_record(kind_name: str, record: Any, spec: Mapping[str, tuple[str, bool]]) -> None:
    for name, (kind, may_be_empty) in spec.items():
        value = getattr(record, name)
        if (rule := _value_problem(kind, may_be_empty, value)) is not None:
            raise InvalidInput(f"{kind_name}.{name}", rule, value)


def parse_timestamp(text: Any) -> datetime:
    """Parse an ISO 8601 timestamp that carries a UTC offset; raise ValueError naming the rule."""
    if not isinstance(text, str):
        raise ValueError("must be an ISO 8601 string")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("not an ISO 8601 timestamp (e.g. 2023-05-08T13:56:00Z)") from None
    if value.utcoffset() is None:
        raise ValueError("ISO 8601 timestamp without UTC offset (append 'Z' or e.g. '+08:00')")
    if (problem := time_problem(value)) is not None:
        raise ValueError(problem)
    return value


def in_range(when: datetime, *, file: str | os.PathLike[str], field: str, value: Any,
             line: int | None = None) -> datetime:
    """``when`` (a time a loader parsed from ``value``) when memlab stores it; a DatasetError
    naming the file, line and field when it lies outside 0001-01-01..9999-12-31 in UTC (a
    date at the edge of that range with an offset that moves it out)."""
    if (problem := time_problem(when)) is not None:
        raise DatasetError(str(file), problem, line=line, field=field, value=value)
    return when


def shifted(when: datetime, delta: timedelta, *, file: str | os.PathLike[str], field: str,
            line: int | None = None) -> datetime:
    """``when + delta`` (a time a loader derives: a turn after its session's start, a question
    after the last turn); a DatasetError naming the file, line and field when it passes the
    latest time memlab stores (``datetime`` cannot even hold some of those)."""
    try:
        out = when + delta
    except OverflowError:
        out = None
    if out is None or time_problem(out) is not None:
        raise DatasetError(str(file), f"{when.isoformat()} + {delta} passes the latest time memlab "
                           f"stores ({TIME_RANGE})", line=line, field=field, value=when.isoformat())
    return out


# ----------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Card:
    """What a dataset is: name, version, language (zh|en|mixed), licence, source, granularity, description."""

    name: str
    version: str
    language: str
    license: str
    source: str
    granularity: str
    description: str
    embed_max_tokens: int | None = None

    def __post_init__(self) -> None:
        _check_record("card", self, _CARD_SPEC)
        if self.language not in LANGUAGES:
            raise InvalidInput("card.language", f"must be one of {LANGUAGES}", self.language)
        if (rule := _cap_problem(self.embed_max_tokens)) is not None:
            raise InvalidInput(f"card.{CARD_CAP}", rule, self.embed_max_tokens)


@dataclass(frozen=True)
class Item:
    """One thing to memorise (a turn, a message, a memory entry) at an aware timestamp.

    ``origin`` (where a loader read it; None when made in memory) takes no part in equality,
    serialisation or the content hash."""

    conversation_id: str
    item_id: str
    session_id: str
    speaker: str
    text: str
    timestamp: datetime
    meta: dict = field(default_factory=dict)
    origin: Origin | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_record("item", self, _ITEM_SPEC)


@dataclass(frozen=True)
class Question:
    """A query asked at ``asked_at`` whose gold answers are the ``evidence`` item ids (same conversation)."""

    conversation_id: str
    query_id: str
    text: str
    asked_at: datetime
    category: str
    evidence: tuple[str, ...]
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.evidence, list):
            object.__setattr__(self, "evidence", tuple(self.evidence))
        if not isinstance(self.evidence, tuple):
            raise InvalidInput("question.evidence", "must be a tuple of item ids", self.evidence)
        _check_record("question", self, _QUERY_SPEC)


@dataclass(frozen=True)
class LoadReport:
    """What a loader dropped (reason -> count) and notes worth reading (quirks repaired, choices made);
    ``rejected``: the bad records a lenient load dropped, "file:line: why" each (counted under
    `DROP_REJECTED`); ``questions_file``: the file the questions were read from (for messages)."""

    dropped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    questions_file: str | None = None
    rejected: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rejected:
            object.__setattr__(self, "dropped", {**self.dropped, DROP_REJECTED: len(self.rejected)})

    def __str__(self) -> str:
        lines = [f"dropped {sum(self.dropped.values())}" + (":" if self.dropped else "")]
        lines += [f"  {count:>6}  {reason}" for reason, count in sorted(self.dropped.items())]
        lines += [f"rejected {len(self.rejected)} (lenient):"] if self.rejected else []
        lines += [f"  {why}" for why in self.rejected]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


# ----------------------------------------------------------------------------- the dataset

def _record_dict(record: Item | Question) -> dict[str, Any]:
    if isinstance(record, Item):
        return {"conversation_id": record.conversation_id, "item_id": record.item_id,
                "session_id": record.session_id, "speaker": record.speaker, "text": record.text,
                "timestamp": record.timestamp.isoformat(), "meta": record.meta}
    return {"conversation_id": record.conversation_id, "query_id": record.query_id, "text": record.text,
            "asked_at": record.asked_at.isoformat(), "category": record.category,
            "evidence": list(record.evidence), "meta": record.meta}


def _card_dict(card: Card) -> dict[str, Any]:
    out: dict[str, Any] = {f: getattr(card, f) for f in CARD_FIELDS}
    if card.embed_max_tokens is not None:   # absent otherwise: older datasets hash as before
        out[CARD_CAP] = card.embed_max_tokens
    return out


@dataclass(frozen=True)
class Dataset:
    """A card, the items to memorise and the questions to ask; checked for integrity on construction.

    ``report`` (what the loader dropped) does not take part in equality or in `content_hash`.
    """

    card: Card
    items: tuple[Item, ...]
    questions: tuple[Question, ...]
    report: LoadReport = field(default_factory=LoadReport, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(self.items))
        object.__setattr__(self, "questions", tuple(self.questions))
        where = f"<dataset {self.card.name}>"
        seen: set[tuple[str, str]] = set()
        for n, it in enumerate(self.items, 1):
            key = (it.conversation_id, it.item_id)
            if key in seen:
                raise DatasetError(where, "duplicate (conversation_id, item_id)", line=n, field="item_id", value=key)
            seen.add(key)
        qseen: set[tuple[str, str]] = set()
        for n, q in enumerate(self.questions, 1):
            key = (q.conversation_id, q.query_id)
            if key in qseen:
                raise DatasetError(where, "duplicate (conversation_id, query_id)", line=n, field="query_id", value=key)
            qseen.add(key)
            for ev in q.evidence:
                if (q.conversation_id, ev) not in seen:
                    raise DatasetError(where, f"evidence names no item of conversation {q.conversation_id!r}",
                                       line=n, field="evidence", value=ev)

    @cached_property
    def _items_by_conv(self) -> dict[str, list[Item]]:
        out: dict[str, list[Item]] = {}
        for it in self.items:
            out.setdefault(it.conversation_id, []).append(it)
        return {cid: sorted(its, key=lambda i: i.timestamp) for cid, its in out.items()}

    @cached_property
    def _questions_by_conv(self) -> dict[str, list[Question]]:
        out: dict[str, list[Question]] = {}
        for q in self.questions:
            out.setdefault(q.conversation_id, []).append(q)
        return out

    @cached_property
    def _conversations(self) -> tuple[str, ...]:
        seen = dict.fromkeys(it.conversation_id for it in self.items)
        seen.update(dict.fromkeys(q.conversation_id for q in self.questions))
        return tuple(seen)

    def conversations(self) -> list[str]:
        """Conversation ids in first-seen order (items first, then questions)."""
        return list(self._conversations)

    def items_of(self, conversation_id: str) -> list[Item]:
        """The items of one conversation sorted by timestamp (stable: file order breaks ties)."""
        return list(self._items_by_conv.get(conversation_id, []))

    def questions_of(self, conversation_id: str) -> list[Question]:
        """The questions of one conversation in dataset order."""
        return list(self._questions_by_conv.get(conversation_id, []))

    def iter_lines(self) -> Iterator[str]:
        """The canonical serialisation (sorted keys, compact, UTF-8 text): card, items, questions."""
        dump = lambda obj: json.dumps(obj, ensure_ascii=False, sort_keys=True,  # noqa: E731
                                      separators=(",", ":"), allow_nan=False)
        yield dump(_card_dict(self.card))
        for it in self.items:
            yield dump(_record_dict(it))
        yield "--queries--"
        for q in self.questions:
            yield dump(_record_dict(q))

    def content_hash(self) -> str:
        """sha256 hex of the canonical serialisation; equal datasets hash equal across runs and machines."""
        h = hashlib.sha256()
        for line in self.iter_lines():
            h.update(line.encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()

    def to_frame(self, part: str = "items") -> Any:
        """A pandas DataFrame of ``part``: ``"items"`` (one row per thing to memorise) or
        ``"questions"`` (one row per question); times (``timestamp``, ``asked_at``) as UTC
        ``datetime64``."""
        import pandas as pd

        if part == "items":
            items = pd.DataFrame([_record_dict(it) for it in self.items],
                                 columns=list(ITEM_FIELDS))
            items["timestamp"] = pd.to_datetime(items["timestamp"], utc=True, format="ISO8601")
            return items
        if part == "questions":
            qs = pd.DataFrame([_record_dict(q) for q in self.questions],
                              columns=list(QUERY_FIELDS))
            qs["asked_at"] = pd.to_datetime(qs["asked_at"], utc=True, format="ISO8601")
            return qs
        raise InvalidInput("part", "items or questions", part)

    def to_frames(self) -> tuple[Any, Any]:
        """Retired: ``(to_frame("items"), to_frame("questions"))``."""
        from memlab.frames import renamed

        renamed("Dataset.to_frames()", 'Dataset.to_frame("items") and .to_frame("questions")')
        return self.to_frame("items"), self.to_frame("questions")

    def subset(self, *, limit_questions: int | None = None, conversations: Iterable[str] | None = None) -> Dataset:
        """A smaller dataset: the questions of ``conversations`` (default all), the first ``limit_questions``
        of them in dataset order, and all items of the conversations kept. Without a limit every chosen
        conversation is kept; with one, a conversation none of whose questions survive is left out."""
        if limit_questions is not None and (isinstance(limit_questions, bool) or not isinstance(limit_questions, int)
                                            or limit_questions < 0):
            raise InvalidInput("limit_questions", "must be a non-negative int or None", limit_questions)
        known = self.conversations()
        chosen = known if conversations is None else list(dict.fromkeys(conversations))
        known_set = set(known)
        unknown = [c for c in chosen if c not in known_set]
        if unknown:
            raise InvalidInput("conversations", "names conversations not in the dataset", unknown)
        chosen_set = set(chosen)
        qs = [q for q in self.questions if q.conversation_id in chosen_set]
        if limit_questions is not None:
            qs = qs[:limit_questions]
            chosen_set = {q.conversation_id for q in qs}
        items = [it for it in self.items if it.conversation_id in chosen_set]
        return Dataset(card=self.card, items=tuple(items), questions=tuple(qs), report=self.report)

    def category_names(self) -> dict[str, str]:
        """Category -> its name, for sources that number their categories (LoCoMo: ``"1"`` ->
        ``"multi-hop"``): each question's ``meta["category_name"]``, in sorted category order;
        empty when no question carries one (the category is then its own name). For tables
        and figures: the category itself stays what the source says."""
        names = {q.category: str(q.meta["category_name"]) for q in self.questions
                 if isinstance(q.meta, Mapping) and q.meta.get("category_name")}
        return dict(sorted(names.items()))

    def summary(self) -> dict[str, Any]:
        """Counts: conversations, items, questions, questions per category, and what the loader dropped."""
        return {"name": self.card.name, "version": self.card.version, "conversations": len(self.conversations()),
                "items": len(self.items), "questions": len(self.questions),
                "categories": dict(sorted(Counter(q.category for q in self.questions).items())),
                "dropped": dict(self.report.dropped)}


# ----------------------------------------------------------------------------- reading

def _fail(file: Path, rule: str, *, line: int | None = None, field: str | None = None,
          value: Any = None) -> DatasetError:
    return DatasetError(str(file), rule, line=line, field=field, value=value)


def _parse_fields(file: Path, line: int | None, obj: Any, spec: Mapping[str, tuple[str, bool]]) -> dict[str, Any]:
    """Check a decoded JSON object against ``spec``; return the field values converted (times, evidence)."""
    if not isinstance(obj, dict):
        raise _fail(file, "must be a JSON object", line=line, value=type(obj).__name__)
    for name in obj:
        if name not in spec:
            raise _fail(file, f"unknown field (allowed: {', '.join(spec)}; put extras in meta)", line=line, field=name)
    out: dict[str, Any] = {}
    for name, (kind, may_be_empty) in spec.items():
        if name not in obj:
            raise _fail(file, "required field is missing", line=line, field=name)
        value = obj[name]
        if kind == "time":
            try:
                out[name] = parse_timestamp(value)
            except ValueError as exc:
                raise _fail(file, str(exc), line=line, field=name, value=value) from None
            continue
        if kind == "ids":
            if not isinstance(value, list):
                raise _fail(file, "must be a JSON array of item ids", line=line, field=name, value=value)
            value = tuple(value)
        if (rule := _value_problem(kind, may_be_empty, value)) is not None:
            raise _fail(file, rule, line=line, field=name, value=value)
        out[name] = value
    return out


def _read_jsonl(file: Path, missing: str = "file is missing (a canonical dataset folder holds card.json, "
                "items.jsonl, queries.jsonl)", rejections: Rejections | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` of each non-blank line; a line that is not UTF-8 or not JSON goes
    to ``rejections`` (strict when None)."""
    rejections = rejections or Rejections()
    if not file.is_file():
        raise _fail(file, missing)
    with open(file, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                rejections.reject(_fail(file, f"not UTF-8 ({exc.reason})", line=n))
                continue
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                rejections.reject(_fail(file, f"invalid JSON ({exc.msg} at column {exc.colno}; truncated file?)",
                                        line=n))
                continue
            yield n, obj


def read_card(file: str | os.PathLike[str]) -> Card:
    """Read and validate a ``card.json``."""
    path = Path(file)
    if not path.is_file():
        raise _fail(path, "file is missing")
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise _fail(path, f"not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"invalid JSON ({exc.msg} at column {exc.colno}; truncated file?)", line=exc.lineno) from None
    cap = obj.pop(CARD_CAP, None) if isinstance(obj, dict) else None
    fields = _parse_fields(path, None, obj, _CARD_SPEC)
    if fields["language"] not in LANGUAGES:
        raise _fail(path, f"must be one of {LANGUAGES}", field="language", value=fields["language"])
    if (rule := _cap_problem(cap)) is not None:
        raise _fail(path, rule, field=CARD_CAP, value=cap)
    return Card(**fields, embed_max_tokens=cap)


def read_dataset(path: str | os.PathLike[str], *, report: LoadReport | None = None,
                 lenient: bool = False) -> Dataset:
    """Read and validate a canonical dataset folder; every problem is a `DatasetError` (file, line, field).

    ``lenient``: a bad line of items.jsonl or queries.jsonl is dropped and reported instead (see the module
    doc), and so is a question whose evidence names a dropped item. A bad card or a missing file still
    stops the load."""
    rej = Rejections(lenient)
    folder = Path(path)
    if not folder.is_dir():
        raise _fail(folder, "not a folder (a canonical dataset is a folder with card.json, items.jsonl, queries.jsonl)")
    card = read_card(folder / CARD_FILE)
    items_file, queries_file = folder / ITEMS_FILE, folder / QUERIES_FILE
    items: list[Item] = []
    seen: set[tuple[str, str]] = set()
    for n, obj in _read_jsonl(items_file, rejections=rej):
        with rej.record():
            f = _parse_fields(items_file, n, obj, _ITEM_SPEC)
            key = (f["conversation_id"], f["item_id"])
            if key in seen:
                raise _fail(items_file, "duplicate (conversation_id, item_id)", line=n, field="item_id",
                            value=f["item_id"])
            items.append(Item(**f, origin=Origin(str(items_file), n)))
            seen.add(key)
    questions: list[Question] = []
    qseen: set[tuple[str, str]] = set()
    for n, obj in _read_jsonl(queries_file, rejections=rej):
        with rej.record():
            f = _parse_fields(queries_file, n, obj, _QUERY_SPEC)
            key = (f["conversation_id"], f["query_id"])
            if key in qseen:
                raise _fail(queries_file, "duplicate (conversation_id, query_id)", line=n, field="query_id",
                            value=f["query_id"])
            for ev in f["evidence"]:
                if (f["conversation_id"], ev) not in seen:
                    raise _fail(queries_file, f"evidence names no item of conversation {f['conversation_id']!r} "
                                f"in {ITEMS_FILE}", line=n, field="evidence", value=ev)
            questions.append(Question(**f))
            qseen.add(key)
    report = dataclasses.replace(report or LoadReport(), questions_file=str(queries_file),
                                 rejected=(report.rejected if report else []) + rej.rejected)
    return Dataset(card=card, items=tuple(items), questions=tuple(questions), report=report)


# ----------------------------------------------------------------------------- writing

def write_dataset(ds: Dataset, path: str | os.PathLike[str]) -> Path:
    """Write ``ds`` as a canonical folder (UTF-8, one JSON object per line); `read_dataset` reads it back equal.

    Files are written to temporary names and renamed, so a failed write never leaves a half file behind.
    Returns the folder.
    """
    if not isinstance(ds, Dataset):
        raise InvalidInput("ds", "must be a Dataset", type(ds).__name__)
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InvalidInput("path", "exists and is not a folder", str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    dump = lambda obj: json.dumps(obj, ensure_ascii=False, allow_nan=False)  # noqa: E731
    payloads = {
        CARD_FILE: json.dumps(_card_dict(ds.card), ensure_ascii=False, indent=2) + "\n",
        ITEMS_FILE: "".join(dump(_record_dict(it)) + "\n" for it in ds.items),
        QUERIES_FILE: "".join(dump(_record_dict(q)) + "\n" for q in ds.questions),
    }
    for name, text in payloads.items():
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / name)
    return folder


# ----------------------------------------------------------------------------- helpers for native loaders

def read_native_json(file: str | os.PathLike[str]) -> Any:
    """Read one JSON document of a source benchmark; a missing or malformed file is a `DatasetError`."""
    path = Path(file)
    if not path.is_file():
        raise _fail(path, "file is missing")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except UnicodeDecodeError as exc:
        raise _fail(path, f"not UTF-8 ({exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise _fail(path, f"invalid JSON ({exc.msg} at column {exc.colno}; truncated file?)", line=exc.lineno) from None


def read_native_jsonl(file: str | os.PathLike[str], *,
                      rejections: Rejections | None = None) -> list[tuple[int, Any]]:
    """Read a JSON Lines file of a source benchmark as ``[(line_number, value), ...]`` (blank lines skipped;
    a line that is not UTF-8 JSON goes to ``rejections``, strict when None)."""
    return list(_read_jsonl(Path(file), "file is missing", rejections))


_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "a boolean"}


def native_field(obj: Any, key: str, kind: type | tuple[type, ...], *, file: str | os.PathLike[str],
                 where: str, line: int | None = None) -> Any:
    """``obj[key]`` checked to be of ``kind``; otherwise a `DatasetError` naming ``where.key``."""
    name = f"{where}.{key}" if where else key
    if not isinstance(obj, dict):
        raise _fail(Path(file), "must be a JSON object", line=line, field=where or None, value=type(obj).__name__)
    if key not in obj:
        raise _fail(Path(file), "required field is missing", line=line, field=name)
    value = obj[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        wanted = " or ".join(_TYPE_NAMES.get(k, k.__name__) for k in kinds)
        raise _fail(Path(file), f"must be {wanted}", line=line, field=name, value=value)
    return value


def resolve_tz(tz: str | tzinfo) -> tzinfo:
    """A timezone from an IANA name ("UTC", "Asia/Shanghai") or a tzinfo; naive source times are read in it."""
    if isinstance(tz, tzinfo):
        return tz
    if tz == "UTC":
        return timezone.utc
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidInput("tz", "must be an IANA timezone name such as 'UTC' or 'Asia/Shanghai'", tz) from None

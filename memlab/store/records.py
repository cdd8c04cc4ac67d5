"""MemoryRecord <-> memory_records row: validation and column mapping (no SQL runs here).

:func:`validate_record` raises :class:`~memlab.errors.InvalidInput` naming the field, the rule and
the value; :func:`to_row` and :func:`from_row` map every MemoryRecord field to its column
(mappings and lists as JSON, bools as 0/1) plus the derived columns.
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

from memlab.errors import InvalidCell, InvalidInput
from memlab.inputs import check_id, check_int, check_text, check_time, check_unicode
from memlab.types import (COGNITIVE_LAYERS, EMBEDDING_STATUSES, EPISTEMIC_STATUSES,
                          LIFECYCLE_STATES, RETENTION_LAYERS, VALID_CELLS, MemoryRecord)

from .cache import text_hash

_JSON_FIELDS = {"emotions": "emotions_json", "keywords": "keywords_json", "entities": "entities_json",
                "tags": "tags_json", "ttl": "ttl_json", "evidence": "evidence_json",
                "derived_from": "derived_from_json", "source_quote": "source_quote_json",
                "meta": "meta_json"}
FIELDS = [f.name for f in dataclasses.fields(MemoryRecord)]
COLUMNS = [_JSON_FIELDS.get(f, f) for f in FIELDS]
DERIVED = ["owner", "emotion_max", "terms_json", "n_terms", "text_hash"]
_TUPLES = {"keywords", "entities", "tags", "derived_from", "source_quote"}
_ENUMS = {"retention_layer": RETENTION_LAYERS, "cognitive_layer": COGNITIVE_LAYERS,
          "lifecycle_state": LIFECYCLE_STATES, "embedding_status": EMBEDDING_STATUSES,
          "epistemic_status": EPISTEMIC_STATUSES}
#: fields holding strings besides text and the ids (each string valid Unicode, structures at
#: most memlab.inputs.MAX_NESTING deep)
_STRINGS = ("emotions", "keywords", "entities", "fact_key", "source_type", "source_uri",
            "source_hash", "tags", "ttl", "supersedes", "evidence", "derived_from", "source_quote",
            "dialogue_id", "speaker", "session_id", "meta")
VECTOR_META_FIELDS = {"agent_id", "user_id", "retention_layer", "cognitive_layer", "event_time",
                "timestamp", "lifecycle_state", "deprecated"}


def ids_json(values: Sequence[Any]) -> str:
    return json.dumps([int(v) for v in values])


def _dumps(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not value:
        return "{}" if isinstance(value, Mapping) else "[]"
    try:
        return json.dumps(dict(value) if isinstance(value, Mapping) else list(value),
                          ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"must be JSON-serialisable ({exc})", value) from exc


def _finite(rec: MemoryRecord, field: str, *, lo: float | None = None, hi: float | None = None,
            optional: bool = False) -> None:
    v = getattr(rec, field)
    if v is None and optional:
        return
    if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v):
        raise InvalidInput(field, "must be a finite number", v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise InvalidInput(field, f"must be in [{lo}, {hi}]", v)


#: the record's times (:func:`memlab.inputs.check_time`) and counts with their least value
#: (:func:`memlab.inputs.check_int`)
TIMES = ("timestamp", "event_time", "last_accessed")
COUNTS = {"access_count": 0, "mention_count": 1, "fact_revision": 1, "schema_version": 0}
#: SQL true for a memory_records row whose times break :func:`memlab.inputs.check_time` (stored
#: before memlab checked them, or behind its back); parameters: MIN_TIME, MAX_TIME
TIME_OUT_OF_RANGE_SQL = (
    "(NOT (typeof(timestamp) IN ('real', 'integer') AND timestamp BETWEEN ?1 AND ?2) "
    "OR (event_time IS NOT NULL AND NOT (typeof(event_time) IN ('real', 'integer') "
    "AND event_time BETWEEN ?1 AND ?2)) "
    "OR (last_accessed IS NOT NULL AND NOT (typeof(last_accessed) IN ('real', 'integer') "
    "AND last_accessed BETWEEN ?1 AND ?2)))")


def clean_strings(values: Any, field: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Sequence):
        raise InvalidInput(field, "must be a list of strings", values)
    out = [v.strip() if isinstance(v, str) else v for v in values]
    bad = [v for v in out if not isinstance(v, str) or not v]
    if bad:
        raise InvalidInput(field, "items must be non-empty strings", bad[0])
    return list(dict.fromkeys(out))


def validate_record(rec: MemoryRecord, *, max_text_chars: int) -> None:
    """Raise InvalidInput (naming the field, rule and value) when a record cannot be stored."""
    if not isinstance(rec, MemoryRecord):
        raise InvalidInput("record", "must be a MemoryRecord", type(rec).__name__)
    for field in ("id", "agent_id", "user_id"):
        check_id(getattr(rec, field), field)
    check_text(rec.text, "text", max_chars=max_text_chars, limit_name="recall.max_text_chars")
    for field, allowed in _ENUMS.items():
        if getattr(rec, field) not in allowed:
            raise InvalidInput(field, f"must be one of {allowed}", getattr(rec, field))
    _finite(rec, "importance", lo=0.0, hi=1.0)
    for field in TIMES:
        check_time(getattr(rec, field), field, optional=field != "timestamp")
    for field, lo in COUNTS.items():
        check_int(getattr(rec, field), field, lo=lo)
    for field in _STRINGS:
        v = getattr(rec, field)
        if v is not None and not (type(v) in (str, tuple, dict) and not v):   # most are empty
            check_unicode(v, field)
    if not isinstance(rec.emotions, Mapping):
        raise InvalidInput("emotions", "must be a mapping name -> intensity", rec.emotions)
    for name, v in rec.emotions.items():
        if not isinstance(name, str) or isinstance(v, bool) or not isinstance(v, Real) \
                or not math.isfinite(v):
            raise InvalidInput("emotions", "must map names to finite numbers", {name: v})
    if (rec.scope is None) != (rec.category is None) or (
            rec.scope is not None and (rec.scope, rec.category) not in VALID_CELLS):
        raise InvalidCell("scope/category", "must both be None or a valid Familiars cell",
                          (rec.scope, rec.category))
    for field in ("deprecated", "pinned"):
        if not isinstance(getattr(rec, field), bool):
            raise InvalidInput(field, "must be a bool", getattr(rec, field))
    for field in _TUPLES:
        v = getattr(rec, field)
        if isinstance(v, str) or not isinstance(v, Sequence) \
                or not all(isinstance(x, str) for x in v):
            raise InvalidInput(field, "must be a tuple of strings", v)


def searchable(rec: MemoryRecord) -> bool:
    return rec.lifecycle_state == "active" and not rec.deprecated


_GET = operator.attrgetter(*FIELDS)
_JSON_AT = [(i, f) for i, f in enumerate(FIELDS) if f in _JSON_FIELDS]
_BOOL_AT = [i for i, f in enumerate(FIELDS) if f in ("deprecated", "pinned")]


def to_row(rec: MemoryRecord, owner: int, terms: list[str]) -> list[Any]:
    values = list(_GET(rec))
    for i, f in _JSON_AT:
        v = values[i]
        values[i] = ("{}" if isinstance(v, Mapping) else "[]") if not v and v is not None \
            else _dumps(v, f)
    for i in _BOOL_AT:
        values[i] = int(values[i])
    emax = max((abs(float(x)) for x in rec.emotions.values()), default=0.0)
    values += [owner, emax, _dumps(terms, "terms"), len(terms), text_hash(rec.text)]
    return values


def from_row(row: Sequence[Any]) -> MemoryRecord:
    kw: dict[str, Any] = {}
    for f, v in zip(FIELDS, row[1:]):
        if f in _JSON_FIELDS and v is not None:
            v = json.loads(v)
            if f in _TUPLES:
                v = tuple(v)
        elif f in ("deprecated", "pinned"):
            v = bool(v)
        kw[f] = v
    return MemoryRecord(**kw)

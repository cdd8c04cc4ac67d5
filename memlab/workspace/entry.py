"""One workspace entry on disk (familiars §5.3.1): an HTML-comment JSON header line, then the body.

::

    <!-- {"id":"m_a1b2c3d4","scope":"user","category":"profile",...} -->
    用户名字是 Alice，喜欢猫。

The header's first keys are exactly the spec's, in its order: ``id, scope, category, ts, tags,
salience, ttl, supersedes, deprecated, schema_version``. Then the other Familiars fields of §5.3.2
(``evidence, epistemic_status, last_accessed_ts, access_count, pinned, derived_from,
source_quote``), then memlab's (Reverie's) columns, so that export and import are lossless:
``agent_id, user_id, dialogue_id, retention_layer, cognitive_layer, timestamp, event_time,
last_accessed, emotions, keywords, entities, mention_count, fact_key, fact_revision,
lifecycle_state, source_type, source_uri, source_hash, speaker, session_id, meta``.

Mapping (memlab's choices):

- ``salience`` IS memlab's ``importance`` (both a [0, 1] weight of how much an entry matters);
  there is no separate ``importance`` key.
- the body is the record's ``text`` (the spec's ``content``);
- ``ts`` and ``last_accessed_ts`` are ISO 8601 with an offset (UTC) for Familiars readers; the
  exact floats are ``timestamp`` and ``last_accessed`` (JSON floats are written with ``repr``, so
  they round-trip bit for bit). On import the float wins when both are given; they must agree
  within :data:`TS_TOLERANCE` seconds (an edited ``ts`` with a stale ``timestamp`` is an error).
  A header with ``ts`` only (the spec's example) takes its time from ``ts``.
- embeddings are derived data: ``embedding_status`` and ``embedding_model_version`` are not
  written; imported records are pending (embedded again).
- a key missing on import takes :class:`~memlab.types.MemoryRecord`'s default, except the owner,
  scope, category, dialogue and layer, which come from the file's path; a key given must agree
  with the path. Unknown keys are errors (a typo never drops a field silently).

Lines: entries are separated only by header lines; a file is split on ``\\n`` alone (a body may
hold ``\\r``, U+2028 or any other line break). An entry is written as the header, ``\\n``, the
body, ``\\n``; on reading, the body is everything up to the next header line less that one final
``\\n``, so a body's own trailing newlines survive. A header line ending in ``\\r`` is refused as
a file with CR LF line endings (:data:`CRLF_RULE`). A header's values nest at most
:data:`memlab.inputs.MAX_NESTING` levels deep (checked before the JSON is parsed).

Escape rule: a body line that looks like the start of a header (it matches ``\\\\*<!-- {``: any
number of backslashes, then ``<!-- {``) gets one more backslash in front when written, and a
body line that starts with one or more backslashes before ``<!-- {`` loses one when read. So a
body can say anything, a header line included, and read back unchanged. In the header JSON, ``<``
and ``>`` are written as ``\\u003c`` / ``\\u003e`` so that no value can close the comment.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from numbers import Real
from typing import Any, Iterator

from memlab.errors import InvalidInput
from memlab.inputs import MAX_NESTING, check_json_depth
from memlab.types import CATEGORIES, SCOPES, VALID_CELLS, MemoryRecord

from .paths import Location

HEADER_START = "<!-- {"
_HEADER = re.compile(r"<!-- (\{.*) -->")
_LOOKS = re.compile(r"\\*<!-- \{")
#: seconds within which ``ts`` must agree with ``timestamp`` (ISO keeps microseconds)
TS_TOLERANCE = 1e-3

#: the spec's header keys (§5.3.1), in order
SPEC_KEYS = ("id", "scope", "category", "ts", "tags", "salience", "ttl", "supersedes",
             "deprecated", "schema_version")
#: the other Familiars fields of §5.3.2
FAMILIARS_KEYS = ("evidence", "epistemic_status", "last_accessed_ts", "access_count", "pinned",
                  "derived_from", "source_quote")
#: memlab's columns
MEMLAB_KEYS = ("agent_id", "user_id", "dialogue_id", "retention_layer", "cognitive_layer",
               "timestamp", "event_time", "last_accessed", "emotions", "keywords", "entities",
               "mention_count", "fact_key", "fact_revision", "lifecycle_state", "source_type",
               "source_uri", "source_hash", "speaker", "session_id", "meta")
HEADER_KEYS = SPEC_KEYS + FAMILIARS_KEYS + MEMLAB_KEYS
#: header key -> MemoryRecord field, where the names differ or a key is derived
_RENAMED = {"salience": "importance"}
_DERIVED = {"ts": "timestamp", "last_accessed_ts": "last_accessed"}
#: MemoryRecord fields not written (the body; derived embedding state)
NOT_WRITTEN = ("text", "embedding_status", "embedding_model_version")
_TUPLES = ("tags", "derived_from", "source_quote", "keywords", "entities")
_FLOATS = ("importance", "timestamp", "event_time", "last_accessed")



def written_fields() -> set[str]:
    """The MemoryRecord fields a header carries (every field but :data:`NOT_WRITTEN`; a test
    checks that this is every field, so a field added to MemoryRecord needs a header key)."""
    return {_RENAMED.get(k, k) for k in HEADER_KEYS if k not in _DERIVED}


class EntryError(ValueError):
    """A header that cannot be read: ``key`` (or None), the rule, and the 1-based ``line`` when
    the splitter knows it; the caller adds the file (:class:`~memlab.errors.WorkspaceError`)."""

    def __init__(self, rule: str, *, key: str | None = None, value: Any = None,
                 line: int | None = None) -> None:
        self.rule, self.key, self.value, self.line = rule, key, value, line
        super().__init__(rule)


def iso(seconds: float | None) -> str | None:
    """Unix seconds as ISO 8601 with the UTC offset (``2026-08-29T12:00:00+00:00``); None for
    None or a time outside datetime's range (the float key still carries it)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def from_iso(text: Any, key: str) -> float:
    if not isinstance(text, str):
        raise EntryError("must be an ISO 8601 time string with an offset", key=key, value=text)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise EntryError("not an ISO 8601 time", key=key, value=text) from None
    if dt.tzinfo is None:
        raise EntryError("needs a UTC offset (+00:00 or Z)", key=key, value=text)
    return dt.timestamp()


def header(rec: MemoryRecord) -> dict[str, Any]:
    """The header of a record: every key of :data:`HEADER_KEYS`, in order."""
    out: dict[str, Any] = {}
    for key in HEADER_KEYS:
        if key in _DERIVED:
            out[key] = iso(getattr(rec, _DERIVED[key]))
            continue
        v = getattr(rec, _RENAMED.get(key, key))
        if key in _TUPLES:
            v = list(v)
        elif key in ("emotions", "meta", "ttl", "evidence") and v is not None:
            v = dict(v)
        out[key] = v
    return out


def header_line(rec: MemoryRecord) -> str:
    text = json.dumps(header(rec), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return "<!-- " + text.replace("<", "\\u003c").replace(">", "\\u003e") + " -->"


def format_entry(rec: MemoryRecord) -> str:
    """The header line, the escaped body, each followed by ``\\n``."""
    body = "\n".join("\\" + ln if _LOOKS.match(ln) else ln for ln in rec.text.split("\n"))
    return header_line(rec) + "\n" + body + "\n"


CRLF_RULE = ("the header line ends with a carriage return: the file has Windows (CR LF) line "
             "endings; workspace files use LF line endings (a body keeps a CR as written, so memlab "
             "does not convert them): convert the file (e.g. dos2unix) and import it again")


def split_entries(text: str) -> Iterator[tuple[int, str, str]]:
    """(1-based line of the header, the header's JSON text, the unescaped body) of each entry.

    An EntryError naming the line for a header-like line that is not a header, or for text
    other than blank lines before the first header."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()            # the newline that ends the last body line
    starts: list[tuple[int, str]] = []
    for i, ln in enumerate(lines):
        if ln.startswith(HEADER_START):
            m = _HEADER.fullmatch(ln)
            if m is None and ln.endswith("\r") and _HEADER.fullmatch(ln[:-1]):
                raise EntryError(CRLF_RULE, line=i + 1)
            if m is None:
                raise EntryError("a header line is '<!-- {json} -->' on one line", line=i + 1)
            starts.append((i, m.group(1)))
        elif not starts and ln.strip():
            raise EntryError("text before the first header '<!-- {json} -->'", line=i + 1)
    for n, (i, head) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        body = [ln[1:] if _LOOKS.match(ln) else ln for ln in lines[i + 1:end]]
        yield i + 1, head, "\n".join(body)


def _check_type(key: str, v: Any) -> Any:
    """Header value ``v`` of ``key`` converted to the record's type, or EntryError naming it."""
    def need(ok: bool, rule: str) -> None:
        if not ok:
            raise EntryError(rule, key=key, value=v)

    field = _RENAMED.get(key, key)
    if field in _TUPLES:
        need(isinstance(v, list) and all(isinstance(x, str) for x in v),
             "must be a list of strings")
        return tuple(v)
    if field in _FLOATS:
        if v is None and field in ("event_time", "last_accessed"):
            return None
        need(isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v),
             "must be a finite number")
        return float(v)
    if field in ("emotions", "meta"):
        need(isinstance(v, dict), "must be a JSON object")
        return v
    if field in ("ttl", "evidence"):
        need(v is None or isinstance(v, dict), "must be a JSON object or null")
        return v
    if field in ("deprecated", "pinned"):
        need(isinstance(v, bool), "must be true or false")
        return v
    if field in ("access_count", "mention_count", "fact_revision", "schema_version"):
        need(isinstance(v, int) and not isinstance(v, bool), "must be an integer")
        return v
    if field == "scope":
        need(v is None or v in SCOPES, f"must be one of {SCOPES} or null")
        return v
    if field == "category":
        need(v is None or v in CATEGORIES, f"must be one of {CATEGORIES} or null")
        return v
    if field in ("supersedes", "dialogue_id"):
        need(v is None or isinstance(v, str), "must be a string or null")
        return v
    need(isinstance(v, str), "must be a string")
    return v


def parse_header(text: str) -> dict[str, Any]:
    """The header JSON as record fields (``importance`` for ``salience``, floats for the ISO
    times when no float is given); EntryError naming the key."""
    try:   # the header object itself, then a value nesting MAX_NESTING levels at most
        check_json_depth(text, "header", max_depth=MAX_NESTING + 1)
    except InvalidInput as exc:
        key = exc.field.partition(".")[2] or None
        if key is None:
            raise EntryError(f"the header {exc.rule}", value=exc.value) from None
        where = exc.value.partition(" at ")[2]    # 'character <n>'
        raise EntryError(f"nests deeper than {MAX_NESTING} levels (an object or array inside "
                         f"another)", key=key, value=f"more than {MAX_NESTING} at {where}") \
            from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EntryError(f"the header is not valid JSON ({exc.msg} at column {exc.colno})") \
            from None
    if not isinstance(raw, dict):
        raise EntryError("the header must be a JSON object", value=type(raw).__name__)
    unknown = [k for k in raw if k not in HEADER_KEYS]
    if unknown:
        raise EntryError(f"unknown header key (known: {', '.join(HEADER_KEYS)})", key=unknown[0])
    fields: dict[str, Any] = {}
    for key, v in raw.items():
        if key in _DERIVED:
            continue
        fields[_RENAMED.get(key, key)] = _check_type(key, v)
    cell = (fields.get("scope"), fields.get("category"))
    if "scope" in fields and "category" in fields and cell != (None, None) \
            and cell not in VALID_CELLS:
        valid = sorted(c for s, c in VALID_CELLS if s == cell[0])
        raise EntryError(f"({cell[0]!r}, {cell[1]!r}) is not a valid Familiars cell; the "
                         f"categories of {cell[0]!r} are {valid}", key="category", value=cell[1])
    for key, field in _DERIVED.items():
        v = raw.get(key)
        if v is None:
            continue
        seconds = from_iso(v, key)
        if field not in fields or fields[field] is None:
            fields[field] = seconds
        elif abs(seconds - fields[field]) > TS_TOLERANCE:
            raise EntryError(f"disagrees with {field}={fields[field]!r} (edit both, or drop "
                             f"{field})", key=key, value=v)
    if "id" not in fields:
        raise EntryError("every entry needs an id", key="id")
    if "timestamp" not in fields:
        raise EntryError("every entry needs its time: ts (ISO 8601) or timestamp", key="ts")
    return fields


def entry_record(fields: dict[str, Any], body: str, loc: Location) -> MemoryRecord:
    """The record of a parsed header and body in the file at ``loc``: the path gives what the
    header leaves out; a header value that contradicts the path is an EntryError."""
    from_path = {"agent_id": loc.agent_id, "user_id": loc.user_id, "scope": loc.scope,
                 "category": loc.category}
    if loc.scope in ("dialogue", "ephemeral"):
        from_path["dialogue_id"] = loc.dialogue_id
    if loc.scope is None:
        from_path["retention_layer"] = loc.retention_layer
    for name, v in from_path.items():
        if name in fields and fields[name] != v:
            raise EntryError(f"the file's path says {v!r}: this entry belongs in another file",
                             key=name, value=fields[name])
        fields[name] = v
    return MemoryRecord(text=body, **fields)

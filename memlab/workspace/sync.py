"""Export the SQLite truth to a markdown workspace and import one back (familiars §5.2.4, §5.3.1).

``export_workspace(store, dir)`` writes every record of the store (every lifecycle state,
deprecated ones too) into the file of its cell (:mod:`memlab.workspace.paths`), entries in rowid
order, in the format of :mod:`memlab.workspace.entry`. The export is the store's state; files of
the workspace that the store has no entries for are left alone, and a file the export writes is
replaced whole (written to a temporary file and renamed).

``import_workspace(store, dir)`` reads every regular ``*.md`` file under ``dir`` (sorted by
path; never through a symbolic link, never a path outside ``dir``: :mod:`.reader`, which reports
each link, FIFO or unreadable folder it refuses) and adds its records to the store verbatim —
ids, times, layers, counters and every other field as written — through
:meth:`memlab.store.Store.add`, the store's one insert (records, lexical index, entity links in
one transaction). The lexical terms and entity links are derived from the text with the store's
config, as every write derives them.

Each entry is validated by the API's own item validation (:func:`memlab.write.records.prepare`:
text and ids without control characters, times in the range memlab stores, the owner, the
cell, the ttl, and the safety screen: a workspace is editable text, and an entry that reads as
an attempt to hijack the assistant is refused like any write), then by the store's record check
(:func:`memlab.store.records.validate_record`: counts up to ``memlab.inputs.MAX_INT``); an import
admits nothing the API refuses. Nothing else of the write pipeline runs: importance is not
re-scored, layers are not re-routed, facts are not superseded and the pin cap is not applied (an
import restores a state, it does not write anew).

Files: UTF-8, LF line endings. A UTF-8 byte-order mark at the start of a file is skipped (some
editors write one); a header line ending in a carriage return (a file converted to CR LF line
endings) is refused with that reason: bodies keep a CR as written, so memlab does not guess which
CRs an editor added.

All or nothing per file: a file with any bad entry (unreadable header, unknown key, wrong type,
an invalid cell, a value the store refuses, an entry in the wrong file, an id twice) contributes
nothing and is reported with its 1-based line; the other files still load, each in its own
transaction.

An id the store already holds (memlab's choice): when the stored record is the entry itself
(every field but the embedding state equal) the entry is skipped and counted, so importing the
same workspace twice changes nothing; when it differs, its file is refused with that line
(an import never overwrites the truth, and never silently drops an edit).

Export: a file that cannot be written (a read-only folder, a file where a folder should be) is a
:class:`~memlab.errors.WorkspaceError` naming it and the reason; files written before it are
whole (each is written to a temporary file and renamed).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, MemlabError, WorkspaceError
from memlab.files import write_atomic
from memlab.inputs import check_tenant
from memlab.store import Store
from memlab.store.records import validate_record
from memlab.store.scan import iter_records, records_by_id
from memlab.text import extract_entities, memory_terms
from memlab.types import MemoryRecord
from memlab.write.records import finish, prepare

from .entry import EntryError, entry_record, format_entry, parse_header, split_entries
from .paths import Location, inside, parse_path, relative_path
from .reader import workspace_files

_EMBEDDING = {"embedding_status": "pending", "embedding_model_version": ""}


def location(rec: MemoryRecord) -> Location:
    """The file an entry belongs to."""
    return Location(user_id=rec.user_id, agent_id=rec.agent_id, scope=rec.scope,
                    category=rec.category,
                    dialogue_id=rec.dialogue_id if rec.scope in ("dialogue", "ephemeral") else None,
                    retention_layer=rec.retention_layer if rec.scope is None else None)


@dataclass
class ExportResult:
    """What an export wrote: files (workspace-relative) and the number of records."""

    directory: Path
    files: list[str] = field(default_factory=list)
    records: int = 0

    def summary(self) -> str:
        return f"exported {self.records} record(s) into {len(self.files)} file(s) under " \
               f"{self.directory}"


def export_workspace(store: Store, directory: str | Path, *, agent_id: str | None = None,
                     user_id: str | None = None) -> ExportResult:
    """Write the store's records (of one agent and/or user, or all) as a markdown workspace."""
    cfg = store.config.writer
    root = Path(directory)
    by_file: dict[Path, list[str]] = defaultdict(list)
    result = ExportResult(root)
    for rec in iter_records(store.conn, agent_id=agent_id, user_id=user_id):
        rel = relative_path(location(rec), default_agent_id=cfg.default_agent_id,
                            default_user_id=cfg.default_user_id)
        by_file[inside(root, rel)].append(format_entry(rec))
        result.records += 1
    for path, entries in sorted(by_file.items()):
        rel = path.relative_to(root.resolve()).as_posix()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, "".join(entries))
        except OSError as exc:
            raise WorkspaceError(str(path), f"cannot be written ({exc.strerror or exc}"
                                 f"{': ' + str(exc.filename) if exc.filename else ''}); "
                                 f"{len(result.files)} file(s) were written before it") from None
        result.files.append(rel)
    return result


@dataclass
class ImportResult:
    """What an import did. ``loaded``: file -> records added; ``skipped``: file -> entries whose
    id the store held with the same record; ``errors``: one :class:`WorkspaceError` per refused
    file (its file, line, key and rule)."""

    directory: Path
    loaded: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[WorkspaceError] = field(default_factory=list)

    @property
    def records(self) -> int:
        return sum(self.loaded.values())

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_frame(self):
        """One row per file: records ``loaded`` and ``skipped``, and the ``error`` that refused
        it ("" when none)."""
        import pandas as pd

        errors = {str(e.file): str(e) for e in self.errors}
        files = list(dict.fromkeys([*self.loaded, *self.skipped, *errors]))
        return pd.DataFrame([{"file": f, "loaded": self.loaded.get(f, 0),
                              "skipped": self.skipped.get(f, 0), "error": errors.get(f, "")}
                             for f in files], columns=["file", "loaded", "skipped", "error"])

    def lines(self) -> list[str]:
        out = [f"imported {self.records} record(s) from {len(self.loaded)} file(s) under "
               f"{self.directory}; {sum(self.skipped.values())} already stored (skipped); "
               f"{len(self.errors)} file(s) refused"]
        out += [f"  {f}: {n} record(s)" + (f", {self.skipped[f]} skipped" if self.skipped.get(f)
                                           else "") for f, n in self.loaded.items()]
        out += [f"error: {e}" for e in self.errors]
        return out


def import_workspace(store: Store, directory: str | Path) -> ImportResult:
    """Add the workspace's records to the store, each file all or nothing (module docstring)."""
    root = Path(directory)
    if not root.is_dir():
        raise InvalidInput("directory", "not a directory", str(directory))
    result = ImportResult(root)
    seen: set[str] = set()     # ids of the files loaded so far
    for rel, data in workspace_files(root):
        if isinstance(data, WorkspaceError):     # a link, a FIFO, a folder not read
            result.errors.append(data)
            continue
        try:
            records, skipped = _load_file(store, rel, data, seen)
        except WorkspaceError as exc:
            result.errors.append(exc)
            continue
        seen.update(r.id for r in records)
        result.loaded[rel] = len(records)
        if skipped:
            result.skipped[rel] = skipped
    return result


#: the API's field names (memlab.write.records.prepare) as header keys
_KEYS = {"text": "body", "importance": "salience", "layer": "retention_layer"}


def _key(field: str) -> str:
    """The header key an error about ``entry.<field>...`` (or ``<field>...``) names."""
    name = field.removeprefix("entry.")
    head = re.match(r"\w*", name).group()
    return _KEYS.get(head, head) + name[len(head):]


def _decode(rel: str, data: bytes) -> str:
    if data.startswith(b"\xef\xbb\xbf"):     # a UTF-8 byte-order mark (module docstring)
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceError(rel, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _validated(rec: MemoryRecord, cfg: MemlabConfig) -> MemoryRecord:
    """``rec`` through the API's item validation (:func:`memlab.write.records.prepare`, which
    screens it too) and the store's record check; InvalidInput naming the field."""
    w = cfg.writer

    def tenant(agent_id, user_id, where):
        return check_tenant(agent_id, user_id, default_agent_id=w.default_agent_id,
                            default_user_id=w.default_user_id, where=where)

    item = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec)}
    draft = prepare(item, index=0, now=rec.timestamp, cfg=cfg, tenant=tenant, where="entry")
    out = dataclasses.replace(finish(draft, layer=draft.layer), **_EMBEDDING)
    validate_record(out, max_text_chars=cfg.recall.max_text_chars)
    return out


def _load_file(store: Store, rel: str, data: bytes, seen: set[str]
               ) -> tuple[list[MemoryRecord], int]:
    """Parse, check and insert one file in one transaction; WorkspaceError on any refusal."""
    cfg: MemlabConfig = store.config
    try:
        loc = parse_path(rel, default_agent_id=cfg.writer.default_agent_id,
                         default_user_id=cfg.writer.default_user_id)
    except InvalidInput as exc:
        raise WorkspaceError(rel, exc.rule, value=exc.value) from None
    text = _decode(rel, data)
    records: list[tuple[int, MemoryRecord]] = []
    line = None
    try:
        for line, head, body in split_entries(text):
            rec = entry_record(parse_header(head), body, loc)
            records.append((line, _validated(rec, cfg)))
    except EntryError as exc:
        raise WorkspaceError(rel, exc.rule, line=exc.line or line, key=exc.key,
                             value=exc.value) from None
    except InvalidInput as exc:   # prepare, validate_record, the cell check, the safety screen
        raise WorkspaceError(rel, exc.rule, line=line, key=_key(exc.field),
                             value=exc.value) from None
    ids: dict[str, int] = {}
    for ln, rec in records:
        if rec.id in ids or rec.id in seen:
            where = f"line {ids[rec.id]}" if rec.id in ids else "an earlier file"
            raise WorkspaceError(rel, f"id given twice (also at {where})", line=ln, key="id",
                                 value=rec.id)
        ids[rec.id] = ln
    stored = {r.id: r for r in records_by_id(store.conn, list(ids))}
    new, skipped = [], 0
    for ln, rec in records:
        old = stored.get(rec.id)
        if old is None:
            new.append(rec)
        elif dataclasses.replace(old, **_EMBEDDING) == rec:
            skipped += 1
        else:
            raise WorkspaceError(rel, "the store holds another record with this id (an import "
                                 "never overwrites; delete it first or change the id)", line=ln,
                                 key="id", value=rec.id)
    rc = cfg.recall
    try:
        store.add(new, terms=[memory_terms(r.text, term_cap=rc.term_cap, text_cap=rc.text_cap)
                              for r in new],
                  entities=[extract_entities(r.text, min_chars=cfg.entity.min_chars) for r in new])
    except MemlabError as exc:
        raise WorkspaceError(rel, f"the store refused the file ({exc})") from None
    return new, skipped

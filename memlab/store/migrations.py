"""Numbered schema migrations of the memlab store.

Each migration is a tuple of SQL statements (never ``executescript``, which would commit the
enclosing transaction) applied in one ``BEGIN IMMEDIATE`` transaction together with the new
``PRAGMA user_version``; the applied migrations are also listed in ``schema_migrations``. A database
whose version is newer than this code raises :class:`~memlab.errors.StoreError`; a database that
already holds other tables but no memlab version is refused rather than written into.

Schema (version 1), after Reverie §6.1/§6.2/§7.2/§11.1 and Familiars §5.3.2:

- ``memory_records``: one row per memory; ``rowid INTEGER PRIMARY KEY AUTOINCREMENT`` (rowids are
  never reused, so a stale cache can never attach a vector to another memory) and ``id TEXT UNIQUE``;
  every :class:`~memlab.types.MemoryRecord` field (mappings and lists as JSON), the derived
  ``owner`` (agent, user), ``n_terms`` (BM25 length), ``emotion_max`` (max |emotion|), ``terms_json``
  (the lexical terms as indexed) and ``text_hash`` (sha256 of the text).
- ``memory_owners``: (agent_id, user_id) -> small integer, with the searchable document count and
  total term count of that owner (BM25's N and average length: lookups, not scans).
- ``memory_terms(owner, term, rowid, dl)`` WITHOUT ROWID: the lexical index. Postings exist only
  for searchable memories (active, not deprecated); looked up by (owner, term) through the primary
  key, so the agent/user filter is part of the index lookup.
- ``term_stats(owner, term, df)``: BM25 document frequencies per owner.
- ``memory_entities(id, name UNIQUE)`` + ``memory_entity_links(entity_id, rowid)`` (§11.1).
- ``memory_embeddings(rowid, model_version, text_hash)``: which text (by hash) each memory was
  embedded from under each model; absent = pending for that model.
- ``embedding_cache(model_version, text_hash, dim, vector)``: float32 blobs.
- ``vector_tables``: registry of the sqlite-vec tables, one per model version.
- ``memory_jobs``, ``memory_usage_events``, ``memory_recall_events``: for lifecycle issues.

Version 2: ``memory_generation(gen)`` and ``memory_changes(row, seq)``, filled by triggers on every
insert, delete and update (of a column recall reads) of ``memory_records``: the generation counts
changes, each changed rowid is logged with the generation of its last change. The in-process
:class:`~memlab.store.memindex.MemoryIndex` re-reads only the rows logged since its own generation,
whichever process or code path wrote them. One log row per memory (``INSERT OR REPLACE``).

Version 3: ``memory_records.embedding_status`` may also be ``'none'``: the embedder named by
``embedding_model_version`` gives the text no vector (the hashing embedder on a text without
terms); such a memory is searched lexically and is not pending for that version.

Version 4 (the fold worker, :mod:`memlab.jobs`): ``memory_jobs`` gains its lease holder and token
(``lease_owner``, ``lease_token``: a completion checks the token is still its own),
``max_attempts``, ``result_json``, ``error`` (the last failure's text), ``dedup_key`` (at most one
queued or leased job per key: a partial unique index), the owner (``agent_id``, ``user_id``) and
``started_at``/``finished_at``; ``memory_atoms`` (typed atoms extracted from a memory, each linked to
its source memory, deleted with it).

Version 5 (safety, :mod:`memlab.safety`): ``memory_audit``, one row per refusal of the safety
checks (:mod:`memlab.store.audit`).

Version 6 (fuzzy recall, :mod:`memlab.recall.fuzzy`):
``memory_recall_events.kind`` (what the event records: ``'fuzzy_swap'`` for a misremembered
entity, Reverie §9.2) and ``resolved_at`` (when the user's correction rolled it back; NULL while
unresolved), with an index by (agent_id, user_id, kind, at): a correction looks up the owner's
latest unresolved swaps without a scan. Existing rows get kind ``''`` and stay unresolved.

Version 7 (facts over time, pins, usage feedback): see ``_V7`` below.

Version 8 (safety, Reverie §12): ``memory_web_content``, untrusted web content stored apart from
``memory_records`` (:mod:`memlab.store.web`): no recall route, index or governance step reads it.

Version 11 (issue 21, ``chunk.*``): ``memory_windows``, the window vectors of long memories
(:mod:`memlab.store.windows`), deleted with their memory. A store of an older version opens with
the table empty: its memories read as not split.

Version 10 (expanded keys, issue 21): see ``_V10`` below.
"""

from __future__ import annotations

from typing import Callable, Sequence

from memlab.errors import CorruptStore, StoreError
from memlab.types import (COGNITIVE_LAYERS, EMBEDDING_STATUSES, EPISTEMIC_STATUSES,
                          LIFECYCLE_STATES, RETENTION_LAYERS, SCOPES, CATEGORIES)

from .audit import AUDIT_TABLE_SQL
from .cache import CACHE_TABLE_SQL
from .connect import Connection, db_path, transaction
from .snapshot import read_snapshot
from .web import WEB_TABLE_SQL
from .windows import WINDOW_TABLE_SQL


def _in(values: Sequence[str]) -> str:
    return "(" + ", ".join(f"'{v}'" for v in values) + ")"


_V1_EMBEDDING_STATUSES = "('pending', 'ready')"   # as released; 'none' came with version 3

_V1: tuple[str, ...] = (
    """CREATE TABLE schema_migrations (
        version INTEGER PRIMARY KEY,
        name TEXT NOT NULL)""",
    """CREATE TABLE memory_owners (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        n_docs INTEGER NOT NULL DEFAULT 0 CHECK (n_docs >= 0),
        total_terms INTEGER NOT NULL DEFAULT 0 CHECK (total_terms >= 0),
        UNIQUE (agent_id, user_id))""",
    f"""CREATE TABLE memory_records (
        rowid INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE CHECK (length(id) > 0),
        text TEXT NOT NULL CHECK (length(trim(text)) > 0),
        owner INTEGER NOT NULL REFERENCES memory_owners(id),
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        retention_layer TEXT NOT NULL CHECK (retention_layer IN {_in(RETENTION_LAYERS)}),
        cognitive_layer TEXT NOT NULL CHECK (cognitive_layer IN {_in(COGNITIVE_LAYERS)}),
        timestamp REAL NOT NULL,
        event_time REAL,
        importance REAL NOT NULL CHECK (importance >= 0.0 AND importance <= 1.0),
        emotions_json TEXT NOT NULL DEFAULT '{{}}',
        emotion_max REAL NOT NULL DEFAULT 0.0 CHECK (emotion_max >= 0.0),
        keywords_json TEXT NOT NULL DEFAULT '[]',
        entities_json TEXT NOT NULL DEFAULT '[]',
        embedding_model_version TEXT NOT NULL DEFAULT '',
        embedding_status TEXT NOT NULL CHECK (embedding_status IN {_V1_EMBEDDING_STATUSES}),
        last_accessed REAL,
        access_count INTEGER NOT NULL DEFAULT 0 CHECK (access_count >= 0),
        mention_count INTEGER NOT NULL DEFAULT 1 CHECK (mention_count >= 1),
        fact_key TEXT NOT NULL DEFAULT '',
        fact_revision INTEGER NOT NULL DEFAULT 1 CHECK (fact_revision >= 1),
        lifecycle_state TEXT NOT NULL CHECK (lifecycle_state IN {_in(LIFECYCLE_STATES)}),
        source_type TEXT NOT NULL DEFAULT '',
        source_uri TEXT NOT NULL DEFAULT '',
        source_hash TEXT NOT NULL DEFAULT '',
        scope TEXT CHECK (scope IS NULL OR scope IN {_in(SCOPES)}),
        category TEXT CHECK (category IS NULL OR category IN {_in(CATEGORIES)}),
        tags_json TEXT NOT NULL DEFAULT '[]',
        ttl_json TEXT,
        supersedes TEXT,
        deprecated INTEGER NOT NULL DEFAULT 0 CHECK (deprecated IN (0, 1)),
        evidence_json TEXT,
        epistemic_status TEXT NOT NULL CHECK (epistemic_status IN {_in(EPISTEMIC_STATUSES)}),
        pinned INTEGER NOT NULL DEFAULT 0 CHECK (pinned IN (0, 1)),
        derived_from_json TEXT NOT NULL DEFAULT '[]',
        source_quote_json TEXT NOT NULL DEFAULT '[]',
        dialogue_id TEXT,
        schema_version INTEGER NOT NULL DEFAULT 2,
        speaker TEXT NOT NULL DEFAULT '',
        session_id TEXT NOT NULL DEFAULT '',
        meta_json TEXT NOT NULL DEFAULT '{{}}',
        terms_json TEXT NOT NULL DEFAULT '[]',
        n_terms INTEGER NOT NULL DEFAULT 0 CHECK (n_terms >= 0),
        text_hash TEXT NOT NULL)""",
    "CREATE INDEX memory_records_layer ON memory_records (agent_id, user_id, retention_layer)",
    "CREATE INDEX memory_records_time ON memory_records (agent_id, user_id, timestamp)",
    "CREATE INDEX memory_records_fact ON memory_records (fact_key)",
    """CREATE TABLE memory_terms (
        owner INTEGER NOT NULL,
        term TEXT NOT NULL,
        rowid INTEGER NOT NULL,
        dl INTEGER NOT NULL,
        PRIMARY KEY (owner, term, rowid)) WITHOUT ROWID""",
    """CREATE TABLE term_stats (
        owner INTEGER NOT NULL,
        term TEXT NOT NULL,
        df INTEGER NOT NULL CHECK (df >= 0),
        PRIMARY KEY (owner, term)) WITHOUT ROWID""",
    """CREATE TABLE memory_entities (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE)""",
    """CREATE TABLE memory_entity_links (
        entity_id INTEGER NOT NULL REFERENCES memory_entities(id),
        rowid INTEGER NOT NULL REFERENCES memory_records(rowid) ON DELETE CASCADE,
        PRIMARY KEY (entity_id, rowid)) WITHOUT ROWID""",
    "CREATE INDEX memory_entity_links_row ON memory_entity_links (rowid)",
    """CREATE TABLE memory_embeddings (
        rowid INTEGER NOT NULL REFERENCES memory_records(rowid) ON DELETE CASCADE,
        model_version TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        PRIMARY KEY (rowid, model_version)) WITHOUT ROWID""",
    CACHE_TABLE_SQL,
    """CREATE TABLE vector_tables (
        model_version TEXT PRIMARY KEY,
        table_name TEXT NOT NULL UNIQUE,
        dim INTEGER NOT NULL CHECK (dim > 0),
        dtype TEXT NOT NULL CHECK (dtype IN ('float32', 'int8')),
        int8_scale REAL NOT NULL CHECK (int8_scale > 0),
        partitioned INTEGER NOT NULL CHECK (partitioned IN (0, 1)),
        generation INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE memory_jobs (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL DEFAULT '{}',
        state TEXT NOT NULL DEFAULT 'queued'
            CHECK (state IN ('queued', 'leased', 'done', 'failed')),
        lease_until REAL,
        attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL)""",
    "CREATE INDEX memory_jobs_state ON memory_jobs (state, kind)",
    """CREATE TABLE memory_usage_events (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        weight REAL NOT NULL,
        at REAL NOT NULL,
        meta_json TEXT NOT NULL DEFAULT '{}')""",
    "CREATE INDEX memory_usage_events_memory ON memory_usage_events (memory_id, at)",
    """CREATE TABLE memory_recall_events (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        query TEXT NOT NULL,
        at REAL NOT NULL,
        memory_ids_json TEXT NOT NULL DEFAULT '[]',
        meta_json TEXT NOT NULL DEFAULT '{}')""",
)

#: Columns of memory_records that recall's in-process MemoryIndex reads (an UPDATE of any other
#: column, e.g. embedding_status, does not log a change).
MEMORY_INDEX_COLUMNS: tuple[str, ...] = (
    "id", "text", "owner", "agent_id", "user_id", "retention_layer", "cognitive_layer", "timestamp",
    "event_time", "importance", "emotion_max", "last_accessed", "access_count", "mention_count",
    "lifecycle_state", "deprecated", "pinned", "terms_json", "n_terms", "session_id", "keys_json")


def _change_trigger(event: str, columns: Sequence[str] = MEMORY_INDEX_COLUMNS) -> str:
    ref = "OLD" if event == "DELETE" else "NEW"
    on = f"UPDATE OF {', '.join(columns)}" if event == "UPDATE" else event
    return (f"CREATE TRIGGER memory_records_log_{event.lower()} AFTER {on} ON memory_records "
            "BEGIN UPDATE memory_generation SET gen = gen + 1; "
            "INSERT OR REPLACE INTO memory_changes (row, seq) "
            f"VALUES ({ref}.rowid, (SELECT gen FROM memory_generation)); END")


_V2: tuple[str, ...] = (
    """CREATE TABLE memory_generation (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        gen INTEGER NOT NULL)""",
    "INSERT INTO memory_generation (id, gen) VALUES (1, 0)",
    """CREATE TABLE memory_changes (
        row INTEGER PRIMARY KEY,
        seq INTEGER NOT NULL)""",
    "CREATE INDEX memory_changes_seq ON memory_changes (seq)",
    _change_trigger("INSERT"),
    _change_trigger("UPDATE"),
    _change_trigger("DELETE"),
)

#: Version 7 (facts over time, pins and usage feedback; Reverie §6.1, §11.3; memlab/write/facts.py,
#: pins.py, feedback.py): the indexes that find an owner's active revision of a fact, the chain of
#: revisions and an owner's pins; ``memory_contradictions`` (two active memories of one owner with
#: one fact key and different values, as found by the evidence check: recorded once, listed until
#: resolved); ``memory_usage_totals`` (per memory: the usage weight received and the whole
#: references credited to ``access_count`` so far; the remainder carries to the next signal).
_V7: tuple[str, ...] = (
    "CREATE INDEX memory_records_fact_owner ON memory_records (agent_id, user_id, fact_key, "
    "lifecycle_state) WHERE fact_key != ''",
    "CREATE INDEX memory_records_supersedes ON memory_records (supersedes) "
    "WHERE supersedes IS NOT NULL",
    "CREATE INDEX memory_records_pinned ON memory_records (agent_id, user_id) WHERE pinned = 1",
    """CREATE TABLE memory_contradictions (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        fact_key TEXT NOT NULL CHECK (length(fact_key) > 0),
        memory_ids_json TEXT NOT NULL,
        values_json TEXT NOT NULL,
        found_at REAL NOT NULL,
        resolved_at REAL,
        resolution TEXT NOT NULL DEFAULT '',
        UNIQUE (agent_id, user_id, fact_key, memory_ids_json))""",
    """CREATE TABLE memory_usage_totals (
        row INTEGER PRIMARY KEY REFERENCES memory_records(rowid) ON DELETE CASCADE,
        weight REAL NOT NULL DEFAULT 0 CHECK (weight >= 0),
        credited INTEGER NOT NULL DEFAULT 0 CHECK (credited >= 0))""",
)

#: Version 10 (expanded keys, issue 21, :mod:`memlab.write.keys`): ``memory_records.keys_json``
#: (the memory's expanded-key terms, a set; '[]' for a memory written before or with
#: ``recall.expanded_keys`` off), ``key_stats(owner, term, df)`` (their document frequencies over
#: the owner's searchable memories, as ``term_stats`` for the terms) and
#: ``memory_owners.total_keys`` (the owner's searchable memories' key count: BM25's average
#: length). No postings: the field scores the candidates of the other routes, it is no route.
#: The change log's update trigger watches ``keys_json`` too (the MemoryIndex reads it).
_V10: tuple[str, ...] = (
    "ALTER TABLE memory_records ADD COLUMN keys_json TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE memory_owners ADD COLUMN total_keys INTEGER NOT NULL DEFAULT 0 "
    "CHECK (total_keys >= 0)",
    """CREATE TABLE key_stats (
        owner INTEGER NOT NULL,
        term TEXT NOT NULL,
        df INTEGER NOT NULL CHECK (df >= 0),
        PRIMARY KEY (owner, term)) WITHOUT ROWID""",
    "DROP TRIGGER memory_records_log_update",
    _change_trigger("UPDATE"),
)

Step = str | Callable[[Connection], None]


def _allow_embedding_status_none(conn: Connection) -> None:
    """Admit embedding_status 'none' in memory_records' CHECK (version 3).

    SQLite cannot ALTER a CHECK constraint. Loosening one (the new list is a superset, so every
    row still satisfies it) changes only the schema text: the procedure SQLite documents for it
    (https://sqlite.org/lang_altertable.html#otheralter: writable_schema, rewrite the table's
    CREATE statement, bump schema_version) runs in the migration's transaction and touches no
    row, page or index, in O(1) at any store size.
    """
    old = f"embedding_status IN {_V1_EMBEDDING_STATUSES}"
    new = f"embedding_status IN {_in(EMBEDDING_STATUSES)}"
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND "
                       "name = 'memory_records'").fetchone()[0]
    if sql.count(old) != 1:
        raise StoreError(f"memory_records has not the CHECK {old!r} of schema version 1")
    cookie = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND "
                     "name = 'memory_records'", (sql.replace(old, new),))
        conn.execute(f"PRAGMA schema_version = {cookie + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")

ATOM_KINDS = ("preference", "constraint", "promise", "event", "lesson")

_V4: tuple[str, ...] = tuple(
    f"ALTER TABLE memory_jobs ADD COLUMN {col}" for col in (
        "lease_owner TEXT", "lease_token TEXT",
        "max_attempts INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1)",
        "result_json TEXT", "error TEXT", "dedup_key TEXT", "agent_id TEXT", "user_id TEXT",
        "started_at REAL", "finished_at REAL")) + (
    "CREATE UNIQUE INDEX memory_jobs_dedup ON memory_jobs (dedup_key) "
    "WHERE dedup_key IS NOT NULL AND state IN ('queued', 'leased')",
    f"""CREATE TABLE memory_atoms (
        id INTEGER PRIMARY KEY,
        memory_id TEXT NOT NULL REFERENCES memory_records(id) ON DELETE CASCADE,
        agent_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN {_in(ATOM_KINDS)}),
        text TEXT NOT NULL CHECK (length(trim(text)) > 0),
        rule TEXT NOT NULL,
        job_id INTEGER,
        created_at REAL NOT NULL,
        UNIQUE (memory_id, kind, text))""",
    "CREATE INDEX memory_atoms_owner ON memory_atoms (agent_id, user_id, kind)",
)

#: (version, name, steps); versions are 1, 2, 3, ... in order. Append, never edit a released one.
MIGRATIONS: tuple[tuple[int, str, tuple[Step, ...]], ...] = (
    (1, "initial schema: records, lexical and entity index, embeddings, vector registry, jobs", _V1),
    (2, "change log of memory_records for the in-process MemoryIndex", _V2),
    (3, "embedding_status 'none': the embedder gives the text no vector",
     (_allow_embedding_status_none,)),
    (4, "fold jobs: leases, results, errors, dedup keys; atoms", _V4),
    (5, "memory_audit: refusals of the safety checks", AUDIT_TABLE_SQL),
    (6, "recall events: kind and resolved_at, indexed by owner (fuzzy recall audit)", (
        "ALTER TABLE memory_recall_events ADD COLUMN kind TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE memory_recall_events ADD COLUMN resolved_at REAL",
        "CREATE INDEX memory_recall_events_owner ON memory_recall_events "
        "(agent_id, user_id, kind, at)",
    )),
    (7, "facts over time, pins, usage feedback: fact and pin indexes, contradictions, usage "
     "totals", _V7),
    (8, "memory_web_content: untrusted web content stored apart (Reverie §12)", WEB_TABLE_SQL),
    (9, "memory_records_session: an owner's sessions in turn order (ranking context, issue 21)", (
        "CREATE INDEX memory_records_session ON memory_records (agent_id, user_id, session_id, "
        "timestamp) WHERE session_id != ''",
        # the MemoryIndex reads session_id now: an update of it is logged
        "DROP TRIGGER memory_records_log_update",
        _change_trigger("UPDATE", MEMORY_INDEX_COLUMNS[:-1]),
    )),
    (10, "expanded keys: a second lexical field per memory, its document frequencies and "
     "totals per owner (issue 21)", _V10),
    (11, "memory_windows: window vectors of long memories (chunk max, issue 21)",
     WINDOW_TABLE_SQL),
)

LATEST = MIGRATIONS[-1][0]


def schema_version(conn: Connection) -> int:
    """The database's schema version (``PRAGMA user_version``; 0 for a new database)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _refuse_foreign(conn: Connection) -> None:
    foreign = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    if foreign:
        path = db_path(conn)
        raise StoreError(f"{path}: not a memlab store: schema version 0 but it holds tables "
                         f"{sorted(foreign)[:5]}; refusing to write into it (the file is "
                         f"unchanged)", path=path)


def invalid_version(version: int, latest: int = LATEST) -> str:
    """What is wrong with a schema version no memlab writes ("" for 0 .. ``latest`` and newer
    ones, which :func:`_refuse_newer` names)."""
    if version >= 0:
        return ""
    return (f"its schema version (PRAGMA user_version) is {version}: no memlab writes one below 0 "
            f"(0 is a new database, 1 to {latest} memlab's schemas)")


def _refuse_newer(conn: Connection, latest: int) -> None:
    current = schema_version(conn)
    wrong = invalid_version(current, latest)
    if wrong:
        path = db_path(conn)
        raise CorruptStore(f"{path}: not a valid memlab store: {wrong}; the file was changed "
                           f"behind memlab's back or is damaged, and is left unchanged: run "
                           f"`memlab store check {path}`", path=path)
    if current > latest:
        path = db_path(conn)
        raise StoreError(f"{path}: store schema version {current} is newer than this memlab's "
                         f"{latest}: upgrade memlab to open it (the file is unchanged)", path=path)


def check_openable(conn: Connection) -> None:
    """Refuse, before anything is written (:func:`~memlab.store.connect.connect` runs it before
    the journal mode is set), a database of another application (schema version 0 with tables),
    of a newer memlab, or with a schema version below 0 (:class:`CorruptStore`). Reads only.

    Both reads see one state (a read snapshot): another process creating the same new store may
    commit its first migration between them, and a version read before that commit with the tables
    read after it would look like another application's database.

    Raises:
        StoreError: naming the file, what it holds and what to do; the file is left unchanged.
        CorruptStore: the schema version is below 0.
    """
    with read_snapshot(conn):
        _refuse_newer(conn, LATEST)
        if schema_version(conn) == 0:
            _refuse_foreign(conn)


def migrate(conn: Connection, *, migrations: Sequence[tuple[int, str, Sequence[Step]]] = MIGRATIONS
            ) -> int:
    """Apply the pending migrations, each in its own transaction; return the schema version.

    Idempotent: a database at the latest version is left untouched.

    Raises:
        StoreError: the database is newer than this code, or holds tables of another application.
        CorruptStore: its schema version is below 0.
    """
    latest = migrations[-1][0] if migrations else 0
    for i, (version, _, _) in enumerate(migrations, start=1):
        if version != i:
            raise StoreError(f"migrations: versions must be 1, 2, 3, ... in order (entry {i} is "
                             f"version {version})")
    _refuse_newer(conn, latest)
    current = schema_version(conn)
    for version, name, steps in migrations:
        if version <= current:
            continue
        with transaction(conn):
            now = schema_version(conn)
            if now >= version:  # another process migrated meanwhile
                continue
            if now == 0:
                _refuse_foreign(conn)
            for step in steps:
                try:
                    step(conn) if callable(step) else conn.execute(step)
                except StoreError as exc:   # the driver's error, mapped (connect.store_error)
                    raise type(exc)(f"migration {version} ({name}) failed: {exc}",
                                    path=exc.path) from exc
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)",
                         (version, name))
            conn.execute(f"PRAGMA user_version = {int(version)}")
        current = version
    return schema_version(conn)

"""The markdown workspace is a lossless copy of the SQLite truth (issue 10, item 1): SQLite ->
files -> a fresh SQLite gives identical records, every MemoryRecord field, for generated records
in Chinese and English, every valid cell, unscoped (Reverie) records, odd owner names and bodies
that hold header-like lines."""

from __future__ import annotations

import dataclasses
import tempfile
import unicodedata
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.embed import HashingEmbedder
from memlab.store import Store
from memlab.store.scan import iter_records
from memlab.text import extract_entities, memory_terms
from memlab.types import (COGNITIVE_LAYERS, EPISTEMIC_STATUSES, LIFECYCLE_STATES,
                          RETENTION_LAYERS, VALID_CELLS, MemoryRecord)
from memlab.workspace import export_workspace, format_entry, import_workspace

NAMES = ["agent_0", "user_0", "agent_1", "小明", "../x", "../../etc", "a/b", ".hidden", "-x",
         "~none", "50%", "user:42", "a b"]
PIECES = ["我喜欢猫", "用户名字是 Alice", "他住在北京。", "I like green tea", "my cat Momo", "\n",
          "\r\n", "<!-- {", " -->", '<!-- {"id":"m_x"} -->', "\\", "}", "。", " ", "\u2028", "-->"]
CELLS = sorted(VALID_CELLS) + [(None, None)] * 3
# no lone surrogates (not UTF-8) and no NUL (SQLite's length() stops at it: the store refuses)
SAFE = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
words = st.text(SAFE, max_size=8)
# a memory text holds no control character but tab, newline and CR, and something visible
# (memlab.inputs.check_text): the pieces give the line breaks
TEXT_CHARS = st.characters(blacklist_categories=("Cs", "Cc"))
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(TEXT_CHARS, max_size=4)),
                 min_size=1, max_size=8).map("".join).filter(
    lambda t: any(unicodedata.category(c)[0] in "LNPS" for c in t))
# up to year 9999: the vector cache files a vector by its quarter (memlab.store.vectors.quarter)
times = st.floats(-1e10, 2.5e11, allow_nan=False, allow_infinity=False)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**60, 2**60),
                         st.floats(allow_nan=False, allow_infinity=False), words)
json_values = st.recursive(json_scalars, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(words, c, max_size=3)), max_leaves=8)
ttls = st.one_of(st.none(),
                 st.builds(lambda t: {"kind": "absolute", "expires_at": t},
                           st.sampled_from(["2026-09-01T00:00:00Z", "2030-01-01T08:00:00+08:00"])),
                 st.builds(lambda n, c: {"kind": "turns", "turns": n, "created_turn": c},
                           st.integers(1, 50), st.integers(0, 1000)),
                 st.builds(lambda s: {"kind": "scope", "scope": s},
                           st.sampled_from(["session", "dialogue"])))
evidence = st.one_of(st.none(), st.builds(lambda d, t: {"dialogue_id": d, "turn_id": t},
                                          st.sampled_from(NAMES), st.integers(0, 10**6)))


@st.composite
def records(draw, i: int) -> MemoryRecord:
    scope, category = draw(st.sampled_from(CELLS))
    return MemoryRecord(
        id=draw(st.sampled_from(["m_", "lt_", "../", "记忆_", "a/"])) + f"{i:08x}",
        text=draw(texts), agent_id=draw(st.sampled_from(NAMES)),
        user_id=draw(st.sampled_from(NAMES)),
        retention_layer=draw(st.sampled_from(RETENTION_LAYERS)),
        cognitive_layer=draw(st.sampled_from(COGNITIVE_LAYERS)), timestamp=draw(times),
        event_time=draw(st.none() | times), importance=draw(st.floats(0.0, 1.0)),
        emotions=draw(st.dictionaries(st.sampled_from(["joy", "悲伤", "anger", "惊讶"]),
                                      st.floats(-100, 100) | st.integers(0, 100), max_size=3)),
        keywords=tuple(draw(st.lists(words, max_size=3))),
        entities=tuple(draw(st.lists(words, max_size=3))),
        last_accessed=draw(st.none() | times), access_count=draw(st.integers(0, 10**6)),
        mention_count=draw(st.integers(1, 100)), fact_key=draw(words),
        fact_revision=draw(st.integers(1, 9)),
        lifecycle_state=draw(st.sampled_from(LIFECYCLE_STATES)),
        source_type=draw(st.sampled_from(["local_interaction", "card", "import"])),
        source_uri=draw(words), source_hash=draw(words),
        scope=scope, category=category, tags=tuple(draw(st.lists(words, max_size=3))),
        ttl=draw(ttls), supersedes=draw(st.none() | st.just("m_0000beef")),
        deprecated=draw(st.booleans()), evidence=draw(evidence),
        epistemic_status=draw(st.sampled_from(EPISTEMIC_STATUSES)), pinned=draw(st.booleans()),
        derived_from=tuple(draw(st.lists(st.sampled_from(["m_1", "m_2", "旧_3"]), max_size=3))),
        source_quote=tuple(draw(st.lists(texts, max_size=2))),
        dialogue_id=draw(st.none() | st.sampled_from(NAMES)),
        schema_version=draw(st.integers(0, 5)), speaker=draw(words), session_id=draw(words),
        meta=draw(st.dictionaries(words, json_values, max_size=3)))


batches = st.integers(1, 12).flatmap(lambda n: st.tuples(*[records(i) for i in range(n)]))


def _add(store: Store, recs) -> None:
    store.add(list(recs), terms=[memory_terms(r.text) for r in recs],
              entities=[extract_entities(r.text) for r in recs])


def _by_id(store: Store) -> dict[str, dict]:
    return {r.id: dataclasses.asdict(r) for r in iter_records(store.conn)}


@settings(max_examples=40)
@given(batches)
def test_sqlite_files_sqlite_is_identical(recs):
    embedder = HashingEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        with Store.open(tmp / "a.sqlite", embedder=embedder) as a, \
                Store.open(tmp / "b.sqlite", embedder=embedder) as b:
            _add(a, recs)
            a.embed_pending(embedder)
            exported = export_workspace(a, tmp / "ws")
            assert exported.records == len(recs)
            result = import_workspace(b, tmp / "ws")
            assert result.errors == [] and result.records == len(recs)
            # embeddings are derived: pending after the import, the same once embedded again
            assert {r.embedding_status for r in iter_records(b.conn)} == {"pending"}
            b.embed_pending(embedder)
            assert _by_id(b) == _by_id(a)
            # nothing was written outside the workspace, whatever the owner names
            assert sorted(p.name for p in tmp.iterdir() if not p.name.startswith(("a.", "b."))) \
                == ["ws"]
            # importing the same workspace again changes nothing: every entry is skipped
            again = import_workspace(b, tmp / "ws")
            assert again.records == 0 and sum(again.skipped.values()) == len(recs)
            assert _by_id(b) == _by_id(a)


@settings(max_examples=200)
@given(st.lists(st.tuples(texts, times), min_size=1, max_size=6))
def test_a_file_of_entries_reads_back_exactly(entries):
    """The format alone (no store): any bodies, several entries in one file."""
    from memlab.workspace.entry import entry_record, parse_header, split_entries
    from memlab.workspace.paths import Location

    recs = [MemoryRecord(id=f"m_{i:08x}", text=t, scope="user", category="event", timestamp=ts)
            for i, (t, ts) in enumerate(entries)]
    text = "".join(format_entry(r) for r in recs)
    loc = Location("user_0", "agent_0", "user", "event")
    back = [entry_record(parse_header(h), b, loc) for _, h, b in split_entries(text)]
    assert back == recs

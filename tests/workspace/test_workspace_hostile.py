"""A hostile workspace (issue 19, items 3, 4, 8, 12): links out of the workspace, FIFOs, entries
the API refuses (control characters, times and counts out of range, nesting 50,000 deep), files
with CR LF line endings or a byte-order mark, and an export that cannot write. Every refusal
names the file (and line and key where there is one), and leaves the store exactly as it was
(its SQL dump compared)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from privileges import as_unprivileged
from typer.testing import CliRunner

import memlab
from memlab.cli import app
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput, WorkspaceError
from memlab.inputs import MAX_INT, MAX_NESTING
from memlab.store import Store
from memlab.store.scan import iter_records
from memlab.types import MemoryRecord
from memlab.workspace import export_workspace, import_workspace
from memlab.workspace.reader import workspace_files

TS = "2026-08-29T12:00:00+00:00"
T0 = 1_788_004_800.0     # TS in Unix seconds


def _head(**fields) -> str:
    """A header line: id m_1 and time TS unless given (ASCII JSON: a lone surrogate is written
    as its escape, which the parser reads back)."""
    when = {} if "timestamp" in fields else {"ts": TS}
    return "<!-- " + json.dumps({"id": "m_1", **when, **fields}) + " -->\n"


def _write(root: Path, rel: str, text: str | bytes) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return p


def _dump(store: Store) -> list:
    """Every row of every table and the schema version: equal dumps, an unchanged store."""
    conn = store.conn
    out = [("user_version", conn.execute("PRAGMA user_version").fetchone()[0])]
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                "ORDER BY name").fetchall():
        out.append((name, sorted(map(repr, conn.execute(f'SELECT * FROM "{name}"')))))
    return out


@pytest.fixture
def store(tmp_path):
    with Store.open(tmp_path / "s.sqlite") as st:
        st.add([MemoryRecord(id="m_0", text="用户喜欢绿茶", scope="user", category="preference",
                             timestamp=T0)], terms=[["绿茶"]], entities=[[]])
        yield st


# -- never through a link, never outside the workspace (item 3) --------------------------------

class _Opens:
    """The paths Python opens while it is on (an audit hook: Python offers no way to remove
    one, so it records only between start and stop)."""

    def __init__(self) -> None:
        self.paths: list[str] | None = None
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if self.paths is not None and event == "open" and isinstance(args[0], (str, bytes)):
            self.paths.append(os.fsdecode(args[0]))

    def __enter__(self) -> list[str]:
        self.paths = []
        return self.paths

    def __exit__(self, *exc) -> None:
        self.paths = None


OPENS = _Opens()


def test_a_file_link_out_of_the_workspace_is_refused_by_name_and_never_opened(store, tmp_path):
    """A link to a well-formed workspace file outside (which used to be imported) and a link to
    /etc/passwd (which used to be opened and read): both refused by name, neither target
    opened, the other file loaded, the store otherwise unchanged."""
    outside = _write(tmp_path / "elsewhere", "secret.md", _head(id="m_out") + "outside text\n")
    ws = tmp_path / "ws"
    _write(ws, "user/event.md", _head(id="m_ok") + "went to Lisbon\n")
    (ws / "user" / "preference.md").symlink_to(outside)
    (ws / "user" / "profile.md").symlink_to("/etc/passwd")
    before = {r.id for r in iter_records(store.conn)}
    with OPENS as opened:
        result = import_workspace(store, ws)
    assert result.loaded == {"user/event.md": 1}
    refused = {e.file: e.rule for e in result.errors}
    assert set(refused) == {"user/preference.md", "user/profile.md"}
    assert all("symbolic link" in r for r in refused.values())
    assert repr(str(outside)) in refused["user/preference.md"]
    assert "'/etc/passwd'" in refused["user/profile.md"]
    assert not [p for p in opened if p.endswith(("preference.md", "profile.md", "secret.md",
                                                 "passwd"))]
    assert {r.id for r in iter_records(store.conn)} == before | {"m_ok"}


def test_links_are_refused_wherever_they_point_and_the_store_is_unchanged(store, tmp_path):
    """A link to a file inside the workspace, a dangling link and a link to a folder outside
    holding a workspace tree: each refused by name, nothing imported."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    _write(outside, "agent_x/identity/preference.md",
           _head(scope="identity", category="preference") + "likes jazz\n")
    _write(ws, "notes.txt", "not a workspace file")
    (ws / "user").mkdir()
    (ws / "user" / "event.md").symlink_to(ws / "notes.txt")
    (ws / "user" / "state.md").symlink_to(tmp_path / "missing.md")
    (ws / "agents").symlink_to(outside)
    before = _dump(store)
    result = import_workspace(store, ws)
    assert {e.file for e in result.errors} == {"agents", "user/event.md", "user/state.md"}
    assert all("symbolic link" in e.rule for e in result.errors)
    assert result.records == 0 and _dump(store) == before


def test_a_fifo_is_refused_unread_and_does_not_stall_the_import(store, tmp_path):
    ws = tmp_path / "ws"
    _write(ws, "user/event.md", _head(id="m_ok") + "went to Lisbon\n")
    os.mkfifo(ws / "user" / "profile.md")
    result = import_workspace(store, ws)
    assert result.loaded == {"user/event.md": 1}
    [err] = result.errors
    assert err.file == "user/profile.md" and "not a regular file" in err.rule


def test_a_link_swapped_in_after_listing_is_not_followed(tmp_path):
    """The read itself refuses a link (O_NOFOLLOW), so a file replaced by a link between the
    listing and the read is never followed: the reader's last line of defence."""
    from memlab.workspace.reader import _read

    (tmp_path / "target.md").write_text("secret", encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "user.md").symlink_to(tmp_path / "target.md")
    fd = os.open(ws, os.O_RDONLY)
    try:
        with pytest.raises(WorkspaceError, match="symbolic link"):
            _read("user.md", fd, "user.md")
    finally:
        os.close(fd)


def test_files_come_in_path_order_and_hidden_names_are_skipped(tmp_path):
    ws = tmp_path / "ws"
    for rel in ("user/profile.md", "agents/a/identity/procedure.md", "user.md/x.md",
                ".hidden/user/profile.md", "user/.draft.md", "agents/a-b/identity/procedure.md"):
        _write(ws, rel, "x")
    got = [rel for rel, _ in workspace_files(ws)]
    assert got == sorted(got, key=lambda r: Path(r).parts) == [
        "agents/a/identity/procedure.md", "agents/a-b/identity/procedure.md", "user/profile.md",
        "user.md/x.md"]


def test_a_folder_deeper_than_any_workspace_path_is_reported(store, tmp_path):
    ws = tmp_path / "ws"
    _write(ws, "a/b/c/d/e/f/g/h.md", _head() + "deep\n")
    before = _dump(store)
    result = import_workspace(store, ws)
    [err] = result.errors
    assert err.file == "a/b/c/d/e/f/g" and "deeper than any workspace path" in err.rule
    assert _dump(store) == before


# -- an import admits nothing the API refuses (item 4, 12) -------------------------------------

BAD_ENTRIES = [
    # (path, header fields, body, the key named, a piece of the rule, the API's item)
    ("user/profile.md", {}, "a\x00b", "body", "U+0000", {"text": "a\x00b"}),
    ("user/profile.md", {}, "用户\x1b[31m喜欢猫", "body", "U+001B", {"text": "用户\x1b[31m喜欢猫"}),
    ("user/profile.md", {}, "\u200b\u200d\ufeff", "body", "visible character",
     {"text": "\u200b\u200d\ufeff"}),
    ("user/profile.md", {"id": "m\x001"}, "ok", "id", "U+0000", {"text": "ok", "id": "m\x001"}),
    ("user/profile.md", {"id": "m\ud800"}, "ok", "id", "U+D800",
     {"text": "ok", "id": "m\ud800"}),
    ("agents/a%00b/identity/preference.md", {}, "ok", "agent_id", "U+0000",
     {"text": "ok", "agent_id": "a\x00b"}),
    ("users/u%07/user/profile.md", {}, "ok", "user_id", "U+0007",
     {"text": "ok", "user_id": "u\x07"}),
    ("user/profile.md", {"timestamp": 1e300}, "ok", "timestamp", "9999-12-31",
     {"text": "ok", "timestamp": 1e300}),
    ("user/profile.md", {"timestamp": 1e12}, "ok", "timestamp", "9999-12-31",
     {"text": "ok", "timestamp": 1e12}),
    ("user/profile.md", {"timestamp": -1e12}, "ok", "timestamp", "0001-01-01",
     {"text": "ok", "timestamp": -1e12}),
    ("user/profile.md", {"ts": "0001-01-01T00:00:00+05:00"}, "ok", "timestamp", "0001-01-01",
     {"text": "ok", "timestamp": -62135614800.0}),
    ("user/profile.md", {"event_time": 1e300}, "ok", "event_time", "9999-12-31",
     {"text": "ok", "event_time": 1e300}),
    ("user/profile.md", {"ttl": {"kind": "turns", "turns": 0, "created_turn": 1}}, "ok",
     "ttl.turns", ">= 1", {"text": "ok", "ttl": {"kind": "turns", "turns": 0, "created_turn": 1}}),
    ("user/profile.md", {"meta": {"note": "x\ud800"}}, "ok", "meta['note']", "U+D800",
     {"text": "ok", "meta": {"note": "x\ud800"}}),
]


@pytest.mark.parametrize("rel, fields, body, key, rule, item", BAD_ENTRIES,
                         ids=[f"{b[3]}-{i}" for i, b in enumerate(BAD_ENTRIES)])
def test_an_entry_the_api_refuses_is_refused_by_name_and_the_store_is_unchanged(
        store, tmp_path, rel, fields, body, key, rule, item):
    ws = tmp_path / "ws"
    scope = rel.split("/")[-2] if "agents" in rel else "user"
    category = rel.rsplit("/", 1)[1][:-3]
    _write(ws, rel, _head(id="m_ok", scope=scope, category=category) + "a good entry\n"
           + _head(scope=scope, category=category, **fields) + body + "\n")
    before = _dump(store)
    result = import_workspace(store, ws)
    [err] = result.errors
    line = 1 if key in ("agent_id", "user_id") else 3    # the path: its first entry already
    assert (err.file, err.line, err.key) == (rel, line, key) and rule in str(err)
    assert result.records == 0 and _dump(store) == before   # the whole file refused
    # the API refuses the same entry, and the field it names is the same
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing"})
    with memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0)) as api:
        with pytest.raises(InvalidInput) as refused:
            api.add_many([{"scope": scope, "category": category, **item}])
        assert len(api) == 0
    named = {"body": "text"}.get(key, key).split("[")[0].split(".")[0]
    assert refused.value.field.startswith(f"items[0].{named}")


@pytest.mark.parametrize("key, value, rule", [
    ("access_count", 10**30, f"[0, {MAX_INT}]"),
    ("access_count", MAX_INT + 1, f"[0, {MAX_INT}]"),
    ("access_count", -1, f"[0, {MAX_INT}]"),
    ("mention_count", 2**63, f"[1, {MAX_INT}]"),
    ("fact_revision", 0, f"[1, {MAX_INT}]"),
    ("schema_version", 10**19, f"[0, {MAX_INT}]"),
])
def test_a_count_beyond_the_bound_is_refused_by_name(store, tmp_path, key, value, rule):
    """access_count 10^30 used to end the import with a raw OverflowError (SQLite INTEGER)."""
    ws = tmp_path / "ws"
    _write(ws, "user/profile.md", _head(**{key: value}) + "ok\n")
    before = _dump(store)
    result = import_workspace(store, ws)
    [err] = result.errors
    assert (err.file, err.line, err.key) == ("user/profile.md", 1, key) and rule in err.rule
    assert _dump(store) == before


def test_the_largest_count_and_the_extreme_times_are_stored(store, tmp_path):
    ws = tmp_path / "ws"
    _write(ws, "user/profile.md", _head(id="m_a", access_count=MAX_INT, mention_count=MAX_INT,
                                        timestamp=-62135596800.0, last_accessed=253402300799.0)
           + "ok\n")
    result = import_workspace(store, ws)
    assert result.errors == [] and result.records == 1
    rec = {r.id: r for r in iter_records(store.conn)}["m_a"]
    assert (rec.access_count, rec.timestamp, rec.last_accessed) == (
        MAX_INT, -62135596800.0, 253402300799.0)


def _nested(levels: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"k": value}
    return value


def test_meta_50000_deep_is_refused_by_name_and_64_levels_are_stored(store, tmp_path):
    """A 50,000-deep meta used to end the import with a raw RecursionError."""
    ws = tmp_path / "ws"
    deep = '{"k":' * 50_000 + "1" + "}" * 50_000
    header = '<!-- {"id":"m_1","ts":"' + TS + '","meta":' + deep + "} -->\n"
    _write(ws, "user/profile.md", header + "ok\n")
    _write(ws, "user/event.md", _head(id="m_64", meta=_nested(MAX_NESTING)) + "ok\n")
    _write(ws, "user/relation.md", _head(id="m_65", meta=_nested(MAX_NESTING + 1)) + "ok\n")
    before = {r.id for r in iter_records(store.conn)}
    result = import_workspace(store, ws)
    assert result.loaded == {"user/event.md": 1}
    errors = {e.file: e for e in result.errors}
    assert set(errors) == {"user/profile.md", "user/relation.md"}
    for e in errors.values():
        assert (e.line, e.key) == (1, "meta") and f"deeper than {MAX_NESTING} levels" in e.rule
    assert {r.id for r in iter_records(store.conn)} == before | {"m_64"}


# -- files from other editors (item 12) -------------------------------------------------------

def test_a_byte_order_mark_is_skipped(store, tmp_path):
    plain, bom = tmp_path / "plain", tmp_path / "bom"
    entry = _head(id="m_b", scope="user", category="profile") + "用户名字是 Alice\n"
    _write(plain, "user/profile.md", entry)
    _write(bom, "user/profile.md", b"\xef\xbb\xbf" + entry.encode("utf-8"))
    with Store.open(tmp_path / "a.sqlite") as a, Store.open(tmp_path / "b.sqlite") as b:
        assert import_workspace(a, plain).records == 1
        result = import_workspace(b, bom)
        assert result.errors == [] and result.records == 1
        assert list(iter_records(a.conn)) == list(iter_records(b.conn))


def test_crlf_line_endings_are_named_as_such(store, tmp_path):
    """Used to say "a header line is '<!-- {json} -->' on one line" of a well-formed header."""
    ws = tmp_path / "ws"
    _write(ws, "user/profile.md", (_head() + "ok\n" + _head(id="m_2") + "two\n")
           .replace("\n", "\r\n"))
    before = _dump(store)
    result = import_workspace(store, ws)
    [err] = result.errors
    assert (err.file, err.line) == ("user/profile.md", 1)
    assert "CR LF" in err.rule and "dos2unix" in err.rule and "on one line" not in err.rule
    assert _dump(store) == before


# -- the CLI: refusals printed, never a traceback (item 8) -------------------------------------

@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_cli_import_of_a_huge_count_and_a_deep_meta_exits_1_naming_them(cli, tmp_path):
    ws = tmp_path / "ws"
    _write(ws, "user/profile.md", _head(access_count=10**30) + "ok\n")
    _write(ws, "user/event.md", '<!-- {"id":"m_2","ts":"' + TS + '","meta":'
           + "[" * 50_000 + "]" * 50_000 + "} -->\nok\n")
    res = cli("workspace", "import", tmp_path / "s.sqlite", ws)
    assert res.exit_code == 1
    assert "user/profile.md:1: key 'access_count'" in res.stderr
    assert "user/event.md:1: key 'meta'" in res.stderr
    assert "Traceback" not in res.output


def _a_store(path: Path) -> Path:
    with Store.open(path) as st:
        st.add([MemoryRecord(id="m_1", text="I like green tea", scope="user",
                             category="preference", timestamp=T0)], terms=[[]], entities=[[]])
    return path


def test_export_where_a_folder_cannot_be_made_is_a_named_error(cli, tmp_path):
    src = _a_store(tmp_path / "s.sqlite")
    (tmp_path / "file").write_text("in the way", encoding="utf-8")
    with Store.open(src) as st:
        with pytest.raises(WorkspaceError, match=r"user/preference\.md: cannot be written "
                                                 r"\(Not a directory"):
            export_workspace(st, tmp_path / "file" / "ws")
    res = cli("workspace", "export", src, tmp_path / "file" / "ws")
    assert res.exit_code == 2 and "error: " in res.stderr and "cannot be written" in res.stderr
    assert "Traceback" not in res.output


def _export(src: Path, ws: Path) -> tuple[str, str]:
    res = CliRunner().invoke(app, ["workspace", "export", str(src), str(ws)])
    return str(res.exit_code), res.stderr + ("Traceback" if res.exc_info and
                                            res.exit_code not in (0, 1, 2) else "")


def test_export_into_a_read_only_folder_is_a_named_error(shared_dir):
    """Used to end in a raw PermissionError traceback."""
    src = _a_store(shared_dir / "s.sqlite")
    src.chmod(0o666)
    ws = shared_dir / "ws"
    ws.mkdir()
    ws.chmod(0o555)                       # read-only for everyone (root aside)
    kind, (code, err) = as_unprivileged(_export, src, ws)
    assert kind == "ok"
    assert code == "2" and err.startswith("error: ") and "Traceback" not in err
    assert "user/preference.md: cannot be written (Permission denied" in err
    assert list(ws.iterdir()) == []

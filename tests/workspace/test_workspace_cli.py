"""``memlab workspace export|import STORE DIR`` on real SQLite files (typer's CliRunner)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memlab.cli import app
from memlab.store import Store
from memlab.store.scan import iter_records
from memlab.types import MemoryRecord

HASHING = ["--set", "embedding.backend=hashing"]


@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_export_then_import_on_files_and_a_refused_file_exits_1(cli, tmp_path):
    src, dst, ws = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "ws"
    with Store.open(src) as st:
        st.add([MemoryRecord(id="m_1", text="用户名字是 Alice", scope="user", category="profile",
                             timestamp=1.25),
                MemoryRecord(id="m_2", text="I like green tea", scope="user",
                             category="preference", timestamp=2.5, importance=0.75),
                MemoryRecord(id="lt_3", text="Caroline moved to Lisbon", timestamp=3.0,
                             retention_layer="long_term", user_id="bob")],
               terms=[[], [], []], entities=[[], [], []])
        before = {r.id: r for r in iter_records(st.conn)}
    out = cli("workspace", "export", src, ws)
    assert out.exit_code == 0, out.output
    assert "exported 3 record(s) into 3 file(s)" in out.stdout
    assert sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*.md")) == [
        "user/preference.md", "user/profile.md", "users/bob/reverie/agent_0/long_term.md"]

    ok = cli("workspace", "import", dst, ws, "--embed", *HASHING)
    assert ok.exit_code == 0, ok.output
    assert "imported 3 record(s) from 3 file(s)" in ok.stdout and "embedded 3" in ok.stdout
    with Store.open(dst) as st:
        after = {r.id: r for r in iter_records(st.conn)}
    assert {i: (r.text, r.timestamp, r.importance, r.scope, r.user_id) for i, r in after.items()} \
        == {i: (r.text, r.timestamp, r.importance, r.scope, r.user_id) for i, r in before.items()}
    assert {r.embedding_status for r in after.values()} == {"ready"}

    bad = ws / "user" / "event.md"
    bad.write_text('<!-- {"id":"m_9","ts":"2026-01-01T00:00:00Z","salience":"high"} -->\nx\n',
                   encoding="utf-8")
    third = tmp_path / "c.sqlite"
    res = cli("workspace", "import", third, ws)
    assert res.exit_code == 1
    assert "user/event.md:1: key 'salience'" in res.stderr
    assert "imported 3 record(s) from 3 file(s)" in res.stdout and "1 file(s) refused" in res.stdout


def test_export_of_a_missing_store_fails_with_2(cli, tmp_path):
    res = cli("workspace", "export", tmp_path / "nope.sqlite", tmp_path / "ws")
    assert res.exit_code == 2 and "no such store file" in res.stderr
    assert not (tmp_path / "nope.sqlite").exists()

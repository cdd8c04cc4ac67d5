"""``memlab jobs enqueue|run|list|status|kinds`` through typer's CliRunner (hashing embedder)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import memlab
from memlab.cli import app
from memlab.config import MemlabConfig


@pytest.fixture
def cli(tmp_path):
    runner = CliRunner()
    cfg = tmp_path / "c.yaml"
    MemlabConfig().replace(**{"embedding.backend": "hashing"}).to_yaml(cfg)

    def invoke(*args: str, config: bool = True):
        extra = ["--config", str(cfg)] if config else []
        return runner.invoke(app, [str(a) for a in args] + extra, catch_exceptions=False)

    return invoke


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "s.sqlite"
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing"})
    with memlab.open_store(path, config=cfg) as st:
        st.add("我喜欢猫，但是对猫毛过敏", importance=0.5)
        st.add("I promised Anna to call her", importance=0.5)
    return path


def test_enqueue_run_list_status(cli, store):
    for kind in ("extract_atoms", "evidence_check", "cleanup_usage"):
        res = cli("jobs", "enqueue", store, kind)
        assert res.exit_code == 0, res.output
        assert res.stdout.split()[1:] == [kind, "queued"]
    res = cli("jobs", "status", store, "--json")
    assert json.loads(res.stdout) == {"jobs": {"cleanup_usage": {"queued": 1},
                                               "evidence_check": {"queued": 1},
                                               "extract_atoms": {"queued": 1}}, "ready": 3}
    res = cli("jobs", "run", store, "--once", "--quiet")
    assert res.exit_code == 0, res.output
    first = res.stdout.splitlines()[0].split("\t")
    assert first[1:3] == ["extract_atoms", "done"]
    assert json.loads(first[3])["by_kind"] == {"preference": 1, "constraint": 1, "promise": 1}
    assert "1 done, 0 failed" in res.stdout
    res = cli("jobs", "run", store, "--kind", "cleanup_usage", "--quiet")
    assert res.stdout.splitlines()[0].split("\t")[1:3] == ["cleanup_usage", "done"]
    res = cli("jobs", "status", store)
    assert res.exit_code == 0
    rows = {ln.split()[0]: ln.split()[1:] for ln in res.stdout.splitlines()[2:-1]}
    assert rows == {"cleanup_usage": ["0", "0", "1", "0"], "evidence_check": ["1", "0", "0", "0"],
                    "extract_atoms": ["0", "0", "1", "0"]}
    assert res.stdout.splitlines()[-1] == "ready to run now: 1"
    res = cli("jobs", "list", store)
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert lines[0].split()[:4] == ["id", "kind", "state", "attempts"]
    assert [ln.split()[1:4] for ln in lines[1:]] == [["cleanup_usage", "done", "1/3"],
                                                     ["evidence_check", "queued", "0/3"],
                                                     ["extract_atoms", "done", "1/3"]]
    listed = json.loads(cli("jobs", "list", store, "--json", "--state", "queued").stdout)
    assert [j["kind"] for j in listed] == ["evidence_check"]


def test_run_shows_progress(cli, store):
    cli("jobs", "enqueue", store, "cleanup_usage")
    res = CliRunner().invoke(app, ["jobs", "run", str(store)], catch_exceptions=False)
    assert res.exit_code == 0 and "fold jobs" in res.output and "1/1" in res.output


def test_errors_are_named_and_exit_2(cli, store, tmp_path):
    res = cli("jobs", "enqueue", store, "consolidate", "--payload", '{"agent_id": "a"}')
    assert res.exit_code == 2 and "give both agent_id and user_id" in res.output
    res = cli("jobs", "enqueue", store, "extract_atoms", "--payload", "{not json")
    assert res.exit_code == 2 and "--payload: not JSON" in res.output
    res = cli("jobs", "enqueue", store, "nope")
    assert res.exit_code == 2 and "unknown; known kinds" in res.output
    res = cli("jobs", "run", tmp_path / "missing.sqlite")
    assert res.exit_code == 2 and "no such store file" in res.output
    assert json.loads(cli("jobs", "status", store, "--json").stdout)["jobs"] == {}


def test_kinds_lists_every_kind(cli):
    res = cli("jobs", "kinds", config=False)
    names = [ln.split()[0] for ln in res.stdout.splitlines()]
    assert {"extract_atoms", "evidence_check", "cleanup_usage", "reembed", "consolidate"} <= \
        set(names)


def test_atoms_and_contradictions_are_visible(cli, tmp_path):
    path = tmp_path / "f.sqlite"
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing", "facts.rule": "none"})
    with memlab.open_store(path, config=cfg) as st:   # facts.rule none: c2 does not supersede c1
        st.add("我喜欢猫，但是对猫毛过敏", id="m1", importance=0.5)
        st.add("用户住在北京", id="c1", fact_key="user.city", importance=0.5)
        st.add("用户住在上海", id="c2", fact_key="user.city", importance=0.5)
    assert cli("jobs", "atoms", path).stdout.strip() == "no atoms (run an extract_atoms job)"
    for kind in ("extract_atoms", "evidence_check"):
        cli("jobs", "enqueue", path, kind)
    cli("jobs", "run", path, "--quiet")
    res = cli("jobs", "atoms", path)
    assert res.stdout.splitlines() == ["preference  m1\t我喜欢猫", "constraint  m1\t但是对猫毛过敏"]
    only = json.loads(cli("jobs", "atoms", path, "--kind", "constraint", "--json").stdout)
    assert [(a["memory_id"], a["text"]) for a in only] == [("m1", "但是对猫毛过敏")]
    res = cli("jobs", "contradictions", path)
    assert res.stdout.splitlines() == ["#1 user.city (agent_0/user_0, open)", "  c1: 用户住在北京",
                                       "  c2: 用户住在上海"]
    assert cli("jobs", "atoms", path, "--kind", "nope").exit_code == 2


def test_memlab_contradictions_is_the_alias_of_jobs_contradictions(cli, tmp_path):
    """One command, two names (issue 9): the same options, the same output, text and JSON."""
    path = tmp_path / "a.sqlite"
    cfg = MemlabConfig().replace(**{"embedding.backend": "hashing", "facts.rule": "none"})
    with memlab.open_store(path, config=cfg) as st:
        for user in ("u1", "u2"):
            st.add("I live in Boston", id=f"{user}a", fact_key="user.city", user_id=user)
            st.add("I live in Chicago", id=f"{user}b", fact_key="user.city", user_id=user)
    empty = "no contradictions recorded (run an evidence_check job, or --check)"
    assert cli("contradictions", path).stdout.strip() == empty
    assert cli("jobs", "contradictions", path).stdout.strip() == empty
    checked = cli("contradictions", path, "--check", "--agent-id", "agent_0", "--user-id", "u2")
    assert checked.stdout.splitlines() == ["#1 user.city (agent_0/u2, open)",
                                           "  u2a: i live in boston", "  u2b: i live in chicago"]
    assert cli("jobs", "contradictions", path, "--check").stdout.count("#") == 2  # every owner
    for args in ((), ("--json",), ("--all", "--user-id", "u1", "--agent-id", "agent_0")):
        assert cli("contradictions", path, *args).stdout == \
            cli("jobs", "contradictions", path, *args).stdout
    assert cli("contradictions", path, "--user-id", "u1").exit_code == 2   # give both

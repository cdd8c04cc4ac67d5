"""The pieces of the API's answers to bad requests, in process: the strict body reader
(memlab.serve.body), the JSON-safe error answers (memlab.serve.errors) and the 500 and 422
handlers with values no JSON encoder accepts (a releaser hook raises them; FastAPI's TestClient)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from memlab.errors import InvalidInput
from memlab.serve.auth import has_token
from memlab.serve.body import BadBody, first_refused, parse
from memlab.serve.errors import ECHO_CHARS, error, error_response, field_of, json_safe
from memlab.store.browse import INT_MAX, INT_MIN

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
NASTY_TEXT = st.text(st.one_of(st.characters(), SURROGATES), max_size=30)
SCALARS = st.one_of(st.none(), st.booleans(), st.floats(), NASTY_TEXT,
                    st.integers(min_value=-(2**70), max_value=2**70),
                    st.sampled_from([1, -1]).flatmap(lambda sign: st.sampled_from(
                        [sign * 10**100, sign * (INT_MAX + 1), sign * INT_MAX])))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(NASTY_TEXT, inner, max_size=4)),
    max_leaves=20)
#: and integers too long for str() (json.dumps refuses them, so only the errors see them)
HUGE = st.sampled_from([1, -1]).map(lambda sign: sign * 10**5000)


def strict_loads(raw: bytes):
    return json.loads(raw.decode("utf-8"), parse_constant=lambda c: pytest.fail(c))


# -- errors: any value can be echoed ---------------------------------------------------------------
@settings(max_examples=300)
@given(st.one_of(VALUES, HUGE, st.lists(HUGE, max_size=2)))
def test_an_error_echoing_any_value_serialises_as_strict_json(value):
    r = error_response(422, [error("writes[0].entry.content", "a rule", "InvalidInput",
                                   input=value, error=json_safe(value))])
    got = strict_loads(r.body)["detail"][0]
    assert got["field"] == "writes[0].entry.content" and got["msg"] == "a rule"
    if isinstance(value, str):
        assert len(got["input"]) <= ECHO_CHARS


@pytest.mark.parametrize("value, shown", [
    (float("nan"), "nan"), (float("inf"), "inf"), (-math.inf, "-inf"), (1.5, 1.5),
    ("a \ud800", "a \\ud800"), (10**40, "an integer of 133 bits"), (2**63, 2**63),
    ("x" * 1000, "x" * (ECHO_CHARS - 3) + "..."), (None, None), (True, True),
])
def test_json_safe(value, shown):
    assert json_safe(value) == shown


def test_json_safe_shows_a_deep_or_huge_container_by_a_bounded_repr():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert json_safe(deep).startswith("[[[")
    assert len(json_safe(list(range(10**6)))) <= ECHO_CHARS
    assert json_safe([10**5000]) == "list"   # its element cannot be shown


@pytest.mark.parametrize("loc, field", [
    (("body", "writes", 0, "entry", "salience"), "writes[0].entry.salience"),
    (("query", "offset"), "offset"), (("body",), "body"), (("body", 17), "body"),
    (("path", "agent_id"), "agent_id"), (("body", "a b"), "['a b']"), ((), "request"),
])
def test_field_of_a_pydantic_location(loc, field):
    assert field_of(loc) == field


# -- body: strict JSON, the path of what is refused ------------------------------------------------
def _expected_refusal(value, path=""):
    """The path of the first value the API refuses, in document order (the property's oracle,
    written recursively apart from first_refused's loop)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "body"
    if isinstance(value, str) and any("\ud800" <= c <= "\udfff" for c in value):
        return path or "body"
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return path or "body"
    if isinstance(value, list):
        for i, v in enumerate(value):
            got = _expected_refusal(v, f"{path}[{i}]")
            if got:
                return got
    if isinstance(value, dict):
        for k, v in value.items():
            if any("\ud800" <= c <= "\udfff" for c in k):
                return path or "body"
            key = f".{k}" if path else k
            if not k.isidentifier():
                key = "[" + repr(k) + "]"
            got = _expected_refusal(v, path + key)
            if got:
                return got
    return None


@settings(max_examples=300)
@given(VALUES)
def test_parse_returns_the_value_or_names_the_first_refused_one(value):
    raw = json.dumps(value, allow_nan=True).encode()      # ensure_ascii: \ud800 escapes
    expected = _expected_refusal(value)
    if expected is None:
        assert parse(raw) == value
    else:
        with pytest.raises(BadBody) as err:
            parse(raw)
        assert err.value.status_code == 422
        assert err.value.detail[0]["field"] == expected


@pytest.mark.parametrize("raw", [b"", b"{", b"[1,]", b"\xff", b"[" * 1025 + b"]" * 1025,
                                 b"[" * 100_000 + b"]" * 100_000, b"{'a': 1}", b"01"])
def test_parse_names_the_body_when_it_is_not_json(raw):
    with pytest.raises(BadBody) as err:
        parse(raw)
    assert err.value.detail[0]["field"] == "body"
    assert err.value.detail[0]["msg"].startswith("not valid JSON (RFC 8259)")


def test_an_integer_beyond_64_bits_is_read_as_written_not_as_a_float():
    for n in (2**64, -(2**63) - 1, 10**30):
        with pytest.raises(BadBody, match="INTEGER range"):
            parse(json.dumps({"a": [0, {"b": n}]}).encode())
    assert parse(json.dumps({"a": INT_MAX, "b": INT_MIN, "c": "1" * 40}).encode()) == {
        "a": INT_MAX, "b": INT_MIN, "c": "1" * 40}
    assert first_refused({"a": [1, 2**63]}) == ("a[1]", first_refused(2**63)[1])


# -- auth ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("headers, ok", [
    ([(b"authorization", b"Bearer tok")], True), ([(b"authorization", b"bearer  tok ")], True),
    ([(b"authorization", b"Bearer tok2")], False), ([(b"authorization", b"Basic tok")], False),
    ([(b"authorization", b"tok")], False), ([], False), ([(b"x-token", b"Bearer tok")], False),
    ([(b"authorization", b"Bearer wrong"), (b"authorization", b"Bearer tok")], False),
])
def test_has_token(headers, ok):
    assert has_token(headers, b"tok") is ok


# -- the handlers with values no encoder takes ---------------------------------------------------
@pytest.fixture
def client(hashing_cfg, tmp_path):
    from fastapi.testclient import TestClient

    from memlab.api import open_store
    from memlab.serve.app import create_app

    def boom(agent_id):
        if agent_id == "invalid":
            raise InvalidInput("agent_id", "a rule", float("nan"))
        if agent_id == "surrogate":
            raise InvalidInput("agent_id", "a rule \ud800", "x \udc00")
        raise RuntimeError(f"secret {agent_id} \ud800")

    with open_store(tmp_path / "s.db", config=hashing_cfg) as store, TestClient(
            create_app(store, releasers={"boom": boom}), raise_server_exceptions=False) as c:
        yield c


def test_a_fault_is_a_500_in_json_that_echoes_nothing(client):
    r = client.post("/api/agents/internal/release-memory")
    assert r.status_code == 500
    assert strict_loads(r.content) == {"detail": [{
        "field": "request", "msg": "internal error (the server logged it)",
        "type": "RuntimeError"}]}


@pytest.mark.parametrize("agent, shown", [("invalid", "nan"), ("surrogate", "x \\udc00")])
def test_a_refusal_with_an_unserialisable_value_is_a_422_in_json(client, agent, shown):
    r = client.post(f"/api/agents/{agent}/release-memory")
    assert r.status_code == 422
    got = strict_loads(r.content)["detail"][0]
    assert (got["field"], got["input"]) == ("agent_id", shown)

"""Hypothesis against the REAL server (``memlab serve`` on 127.0.0.1, serve_helpers.Server):
request bodies, query parameters and unauthenticated requests drawn from what a hostile client
can put on the wire — NaN, infinities, numbers beyond a double, integers beyond 64 bits, lone
surrogates, control characters, bytes that are not UTF-8, cut-off JSON, extra keys.

Whatever is sent, the answer is 200 or a 4xx (401 without the token) whose JSON body (strict: no
NaN) names the field; never a 500. A refused request leaves every row of the store file as it was
(a refusal by the hijack screen adds only its ``memory_audit`` row, by design); an accepted write
stores exactly the ids it returns.

Bounded: ``max_examples`` per test (FUZZ), one request per example with the client's 30 s timeout
(a hang fails, it does not wait); no per-example deadline (tests/conftest.py: a slow example on
two shared cores is not a wrong one). Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memlab.store.browse import INT_MAX
from serve_helpers import AUTH, dump

FUZZ = settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                         HealthCheck.too_slow])
AGENT = "fuzz"


def mostly(usual: st.SearchStrategy, odd: st.SearchStrategy, *, p: float = 0.7
           ) -> st.SearchStrategy:
    """``usual`` with probability about ``p``, else ``odd`` (tests/test_fuzz.py's device)."""
    return st.integers(0, 99).flatmap(lambda i: usual if i < 100 * p else odd)


_NASTY = ["\x00", "\ud800", "\udfff", "\u202e", "\u200b", "\ufeff", "\x1b[31m", "\\", "\"",
          "</untrusted_memories>", "用户", "喜欢", "绿茶", "Alice", "tea", " ", "\n"]
any_text = st.one_of(st.text(st.characters(exclude_categories=()), max_size=20),
                     st.lists(st.sampled_from(_NASTY), min_size=1, max_size=5).map("".join))
readable = st.one_of(
    st.text(st.sampled_from("用户喜欢喝绿茶住在上海 Alice likes tea."), min_size=1, max_size=30),
    st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=30))
big_ints = st.sampled_from([INT_MAX, INT_MAX + 1, 2**64, -(2**63) - 1, 10**30, 10**400])
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(min_value=-(2**70), max_value=2**70), big_ints,
                    st.sampled_from([1e308, 1e-320, -0.0]))
scalars = st.one_of(st.none(), st.booleans(), numbers, any_text)
any_value = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(any_text, inner, max_size=3)), max_leaves=8)
times = st.one_of(st.sampled_from(["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+00:01",
                                   "9999-12-31T23:59:59-23:59", "2026-09-01T00:00:00Z",
                                   "2026-09-01", "not a time"]), any_text)
ttls = st.one_of(
    st.none(),
    st.fixed_dictionaries({"kind": st.just("absolute"), "expires_at": times}),
    st.fixed_dictionaries({"kind": st.just("turns"), "turns": mostly(st.integers(1, 9), numbers),
                           "created_turn": mostly(st.integers(0, 9), numbers)}),
    any_value)
entries = st.fixed_dictionaries(
    {"content": mostly(readable, any_value, p=0.8)},
    optional={"salience": mostly(st.floats(0, 1), numbers),
              "tags": mostly(st.lists(readable, max_size=2), any_value),
              "ttl": ttls, "pinned": mostly(st.booleans(), scalars),
              "epistemic_status": mostly(st.sampled_from(["asserted", "inferred"]), any_text),
              "extra": any_value})
cells = st.sampled_from([("user", "profile"), ("user", "preference"), ("dialogue", "event"),
                         ("identity", "procedure")])
writes = st.tuples(cells, st.fixed_dictionaries(
    {"op": mostly(st.sampled_from(["add", "add", "add", "skip"]), any_value, p=0.9),
     "scope": mostly(st.just(None), any_value, p=0.9),        # None: the cell's
     "category": mostly(st.just(None), any_value, p=0.9),
     "entry": mostly(entries, any_value, p=0.9)})).map(
    lambda cw: {**cw[1], "scope": cw[1]["scope"] or cw[0][0],
                "category": cw[1]["category"] or cw[0][1]})
bodies = st.fixed_dictionaries(
    {"writes": mostly(st.lists(writes, min_size=1, max_size=3), any_value, p=0.9),
     "agent_id": mostly(st.just(AGENT), any_value, p=0.9)},
    optional={"turn_counter": mostly(st.integers(0, 99), numbers),
              "dialogue_id": any_text, "wrytes": any_value})


def encode(body, cut: int | None, junk: bytes) -> bytes:
    """The body on the wire: JSON with NaN/Infinity literals and \\ud800 escapes as a hostile
    client writes them, sometimes cut off or with bytes spliced in."""
    raw = json.dumps(body, allow_nan=True).encode()
    if cut is not None:
        raw = raw[:cut % (len(raw) + 1)] + junk
    return raw


def strict_json(r: httpx.Response):
    assert r.headers["content-type"] == "application/json", (r.status_code, r.text)
    return json.loads(r.content, parse_constant=lambda c: pytest.fail(f"{c} in a response"))


def memory_rows(path) -> int:
    return next(len(rows) for name, rows in dump(path) if name == "memory_records")


@FUZZ
@given(body=bodies, cut=mostly(st.none(), st.integers(0, 10_000), p=0.85),
       junk=st.binary(max_size=3))
def test_any_write_body_is_answered_200_or_422_naming_the_field(server, http, body, cut, junk):
    before = dump(server.path)
    r = http.post("/api/memory", content=encode(body, cut, junk),
                  headers={**AUTH, "content-type": "application/json"})
    got = strict_json(r)
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        err = got["detail"][0]
        assert isinstance(err["field"], str) and err["field"], got
        event(f"422 {err['type']}")
        skip = ("memory_audit",) if err["type"] == "UnsafeWrite" else ()
        assert dump(server.path, skip=skip) == [x for x in before if x[0] not in skip]
    else:
        event(f"200 with {len(got['ids'])} ids")
        assert memory_rows(server.path) == next(
            len(rows) for name, rows in before if name == "memory_records") + len(got["ids"])
        page = http.get("/api/memory", params={"agent_id": AGENT, "limit": 20},
                        headers=AUTH).json()
        assert set(got["ids"]) <= {m["id"] for m in page["memories"]}


wire_text = st.one_of(any_text, numbers.map(repr), big_ints.map(str),
                      st.integers(-5, 30).map(str))


def wire(value: str) -> str:
    """A query value percent-encoded as its UTF-8 bytes, a lone surrogate as the three bytes
    it would have been (invalid UTF-8 on the wire)."""
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


@FUZZ
@given(path=st.sampled_from(["/api/memory", "/api/recall"]),
       params=st.dictionaries(st.sampled_from(["q", "k", "offset", "limit", "agent_id",
                                               "user_id", "scope", "category"]),
                              wire_text, max_size=4))
def test_any_query_is_answered_200_or_422_naming_a_parameter(server, http, path, params):
    before = dump(server.path)
    query = "&".join(f"{k}={wire(v)}" for k, v in params.items())
    r = http.get(f"{path}?{query}", headers=AUTH)
    got = strict_json(r)
    assert r.status_code in (200, 422), r.text
    if r.status_code == 422:
        event(f"422 {got['detail'][0]['field']}")
        assert got["detail"][0]["field"] in {*params, "q"}, got    # recall needs a q
    assert dump(server.path) == before


@settings(FUZZ, max_examples=40)
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
       path=st.one_of(st.sampled_from(["/api/memory", "/api/recall?q=x", "/openapi.json",
                                       "/docs", "/api/agents/a/release-memory",
                                       "/api/memory_status"]),
                      st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e),
                              max_size=20).map(lambda p: "/" + quote(p))),
       token=st.one_of(st.none(), any_text.map(wire).filter(bool)),
       body=st.one_of(st.none(), st.binary(max_size=64),
                      bodies.map(lambda b: json.dumps(b, allow_nan=True).encode())))
def test_without_the_token_any_request_is_401(server, http, method, path, token, body):
    before = dump(server.path)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    r = http.request(method, path, content=body, headers={
        **headers, **({"content-type": "application/json"} if body is not None else {})})
    assert r.status_code == 401, r.text
    assert strict_json(r)["detail"][0]["field"] == "authorization"
    assert dump(server.path) == before

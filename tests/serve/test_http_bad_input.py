"""Bad input against the REAL server (``memlab serve`` on 127.0.0.1, serve_helpers.Server):
every bad request is answered 4xx with a JSON error naming the field, never 500, and the store
file holds the same rows in every table after it (issue 19, items 2 and 10).

Bodies are sent as raw bytes (``content=``): NaN, ``1e999`` and lone surrogates are what a client
can put on the wire, whatever its JSON library would refuse to write.
"""

from __future__ import annotations

import json

import httpx
import pytest

from memlab.store.browse import INT_MAX, INT_MIN
from serve_helpers import AUTH, MAX_BODY, TOKEN, add, dump, stored_ids

JSON = {"content-type": "application/json"}
DEEP = b"[" * 100_000 + b"]" * 100_000
ENTRY = b'{"agent_id": "bad", "writes": [{"op": "add", "scope": "user", "category": "profile", ' \
        b'"entry": {"content": %s, "salience": %s}}]}'


def entry(content: bytes = b'"ok"', salience: bytes = b"0.5") -> bytes:
    return ENTRY % (content, salience)


def body_of(**top) -> bytes:
    return json.dumps({"agent_id": "bad", "writes": [add("ok")], **top}).encode()


def strict_json(r: httpx.Response):
    """The response's JSON, read as strictly as the server reads requests (no NaN, no
    Infinity): a 4xx body that serialised must parse."""
    assert r.headers["content-type"] == "application/json", (r.status_code, r.text)
    return json.loads(r.content, parse_constant=lambda c: pytest.fail(f"{c} in a response"))


def send(http, method: str, path: str, *, headers: dict | None = None,
         content: bytes | None = None) -> httpx.Response:
    """One request with the token (or ``headers``), a body as JSON when there is one."""
    headers = AUTH if headers is None else headers
    return http.request(method, path, content=content,
                        headers={**headers, **JSON} if content is not None else headers)


def refused(server, http, method: str, path: str, *, status: int, field: str,
            headers: dict | None = None, content: bytes | None = None) -> dict:
    """Send, check the answer (``status``, JSON, ``detail[0].field``) and that the store file
    holds the same rows as before; the error."""
    before = dump(server.path)
    r = send(http, method, path, headers=headers, content=content)
    got = strict_json(r)
    assert r.status_code == status, r.text
    assert got["detail"][0]["field"] == field, got
    assert dump(server.path) == before
    return got["detail"][0]


# -- item 2: bodies the 422 handler could not serialise (500 "Internal Server Error" before) ---
@pytest.mark.parametrize("body, field, says", [
    (entry(salience=b"NaN"), "writes[0].entry.salience", "NaN"),
    (entry(salience=b"Infinity"), "writes[0].entry.salience", "Infinity"),
    (entry(salience=b"-Infinity"), "writes[0].entry.salience", "-Infinity"),
    (entry(salience=b"1e999"), "writes[0].entry.salience", "1e999"),
    (entry(salience=b"-1e999"), "writes[0].entry.salience", "-1e999"),
    (entry(content=b'"a \\ud800"'), "writes[0].entry.content", "U+D800"),
    (entry(content=b'"\\udfff tail"'), "writes[0].entry.content", "U+DFFF"),
    (entry(content=b'["x", "\\ud83d"]'), "writes[0].entry.content[1]", "U+D83D"),
    (b'{"agent_id": "\\ud800", "writes": []}', "agent_id", "U+D800"),
    (b'{"writes": [], "\\ud800": 1}', "body", "key"),
    (b'{"writes": [], "turn_counter": NaN}', "turn_counter", "NaN"),
])
def test_non_finite_numbers_and_lone_surrogates_are_422_naming_the_field(server, http, body,
                                                                         field, says):
    err = refused(server, http, "POST", "/api/memory", status=422, field=field, content=body)
    assert says in err["msg"]


@pytest.mark.parametrize("body", [b"{not json", b'{"writes": []', b"\xff\xfe{}", b"[1,]",
                                  b'{"writes": [] } trailing', DEEP,
                                  b"[" * 1025 + b"]" * 1025])
def test_a_body_that_is_not_json_is_422_naming_the_body(server, http, body):
    err = refused(server, http, "POST", "/api/memory", status=422, field="body", content=body)
    assert err["msg"].startswith("not valid JSON (RFC 8259)")


def test_a_100k_deep_body_names_the_depth(server, http):
    err = refused(server, http, "POST", "/api/memory", status=422, field="body", content=DEEP)
    assert "depth limit exceeded" in err["msg"]
    # nesting within the parser's limit (1,024) is read, then refused by the schema, by name
    refused(server, http, "POST", "/api/memory", status=422, field="body",
            content=b"[" * 1024 + b"]" * 1024)


@pytest.mark.parametrize("body, field", [
    (b"", "body"), (b"[]", "body"), (b'"writes"', "body"), (b"null", "body"),
    (b'{"writes": "x"}', "writes"), (b'{"writes": ["x"]}', "writes[0]"),
    (b'{"writes": [], "extra": 1}', "extra"),
    (entry(content=b"1"), "writes[0].entry.content"),
    (entry(salience=b"true"), "writes[0].entry.salience"),
])
def test_a_body_of_the_wrong_shape_is_422_naming_the_field(server, http, body, field):
    refused(server, http, "POST", "/api/memory", status=422, field=field, content=body)


def test_a_text_body_is_422_naming_the_body(server, http):
    before = dump(server.path)
    r = http.post("/api/memory", content=b"writes", headers={**AUTH, "content-type": "text/plain"})
    assert r.status_code == 422 and strict_json(r)["detail"][0]["field"] == "body"
    assert dump(server.path) == before


# -- one bound on every integer: SQLite's INTEGER range ----------------------------------------
@pytest.mark.parametrize("path, field", [
    (f"/api/memory?offset={INT_MAX + 1}", "offset"),        # OverflowError (500) before
    ("/api/memory?offset=1e20", "offset"),
    (f"/api/memory?offset={10**30}", "offset"),
    ("/api/memory?offset=" + "9" * 5000, "offset"),
    ("/api/memory?offset=-1", "offset"),
    ("/api/memory?offset=abc", "offset"),
    (f"/api/memory?limit={INT_MAX + 1}", "limit"),
    ("/api/memory?limit=1.5", "limit"),
    (f"/api/recall?q=x&k={INT_MAX + 1}", "k"),
    ("/api/recall?q=x&k=" + "9" * 5000, "k"),
    ("/api/recall?q=x&k=NaN", "k"),
    ("/api/recall?q=%00", "q"),
    ("/api/memory?agent_id=%00", "agent_id"),
])
def test_an_out_of_range_or_malformed_query_parameter_is_422_naming_it(server, http, path,
                                                                       field):
    refused(server, http, "GET", path, status=422, field=field)


def test_the_bound_itself_is_served(server, http):
    page = http.get("/api/memory", params={"agent_id": "nobody", "offset": INT_MAX},
                    headers=AUTH).json()
    assert (page["total"], page["memories"], page["next_offset"]) == (0, [], None)
    assert page["offset"] == INT_MAX


@pytest.mark.parametrize("body, field", [
    (body_of(turn_counter=INT_MAX + 1), "turn_counter"),
    (body_of(turn_counter=2**64), "turn_counter"),          # orjson would read it as a float
    (body_of(turn_counter=10**30), "turn_counter"),
    (json.dumps({"agent_id": "bad", "writes": [add("x", scope="dialogue", category="context",
                                                   ttl={"kind": "turns", "turns": INT_MAX + 1,
                                                        "created_turn": 0})]}).encode(),
     "writes[0].entry.ttl.turns"),
    (json.dumps({"agent_id": "bad", "writes": [add("x", scope="dialogue", category="context",
                                                   ttl={"kind": "turns", "turns": 2,
                                                        "created_turn": INT_MIN - 1})]}).encode(),
     "writes[0].entry.ttl.created_turn"),
    (b'{"writes": [], "turn_counter": 1' + b"0" * 5000 + b"}", "turn_counter"),
])
def test_an_integer_outside_sqlites_range_anywhere_in_a_body_is_422_naming_it(server, http,
                                                                               body, field):
    err = refused(server, http, "POST", "/api/memory", status=422, field=field, content=body)
    assert "INTEGER range" in err["msg"]


# -- times: a ttl's expires_at in years 1..9999 UTC ----------------------------------------------
@pytest.mark.parametrize("expires_at", ["0001-01-01T00:00:00+00:01",     # 0000-12-31 in UTC
                                        "9999-12-31T23:59:59-00:01"])    # 10000-01-01 in UTC
def test_an_expiry_outside_years_1_to_9999_utc_is_422_naming_it(server, http, expires_at):
    body = json.dumps({"agent_id": "bad", "writes": [
        add("x", ttl={"kind": "absolute", "expires_at": expires_at})]}).encode()
    err = refused(server, http, "POST", "/api/memory", status=422,
                  field="writes[0].entry.ttl.expires_at", content=body)
    assert "0001-01-01T00:00:00Z" in err["msg"] and err["input"] == expires_at


def test_an_expiry_at_the_bounds_is_stored(server, http):
    for t in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00-00:01"):
        r = http.post("/api/memory", headers=AUTH, json={"agent_id": "times", "writes": [
            add(f"expires {t}", ttl={"kind": "absolute", "expires_at": t})]})
        assert r.status_code == 200, r.text


# -- item 10: the token before the body; /docs and /openapi.json ------------------------------
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"Bearer {TOKEN}x"}])
@pytest.mark.parametrize("method, path, body", [
    ("POST", "/api/memory", b"{not json"),                 # 422 with the decode detail before
    ("POST", "/api/memory", DEEP),                         # 400 before
    ("POST", "/api/memory", entry(salience=b"NaN")),
    ("POST", "/api/memory", b"\xff"),
    ("GET", "/openapi.json", None),                        # served without the token before
    ("GET", "/docs", None),
    ("GET", "/redoc", None),
    ("GET", "/no/such/path", None),
    ("DELETE", "/api/memory", None),
    ("GET", f"/api/memory?offset={INT_MAX + 1}", None),
])
def test_without_the_token_everything_is_401_before_the_body_is_read(server, http, headers,
                                                                     method, path, body):
    before = dump(server.path)
    r = send(http, method, path, headers=headers, content=body)
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"] == "Bearer"
    assert strict_json(r)["detail"][0]["field"] == "authorization"
    assert "decode" not in r.text and "depth" not in r.text
    assert dump(server.path) == before


def test_openapi_is_served_with_the_token_and_the_docs_ui_is_off(server, http):
    spec = http.get("/openapi.json", headers=AUTH)
    assert spec.status_code == 200
    assert set(spec.json()["paths"]) == {
        "/api/memory_status", "/api/memory", "/api/recall",
        "/api/agents/{agent_id}/release-memory"}
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        r = http.get(path, headers=AUTH)
        assert r.status_code == 404 and strict_json(r)["detail"][0]["field"] == "path"
        assert "cdn" not in r.text.lower()


def test_an_unknown_path_or_method_is_json_naming_it(server, http):
    refused(server, http, "GET", "/api/nothing", status=404, field="path")
    refused(server, http, "DELETE", "/api/memory", status=405, field="method")
    refused(server, http, "POST", "/api/agents/%00/release-memory", status=422, field="agent_id")


def padded(size: int, content: str) -> bytes:
    """A valid JSON write of exactly ``size`` bytes (blank space after the object is JSON)."""
    raw = json.dumps({"agent_id": "big", "writes": [add(content)]}).encode()
    assert len(raw) <= size
    return raw + b" " * (size - len(raw))


def test_a_body_over_the_bound_is_413_before_it_is_read(server, http):
    body = padded(MAX_BODY + 1, "one byte too many")
    got = refused(server, http, "POST", "/api/memory", status=413, field="body", content=body)
    assert got["type"] == "body_too_large" and got["limit"] == MAX_BODY
    assert got["msg"].startswith(f"Content-Length {MAX_BODY + 1}: more than "
                                 "serve.max_body_bytes"), got


def test_a_chunked_body_over_the_bound_is_413_as_it_streams_in(server, http):
    body = padded(MAX_BODY + 1, "streamed without a length")

    def chunks():   # no Content-Length: httpx sends Transfer-Encoding: chunked
        for i in range(0, len(body), 64 * 1024):
            yield body[i:i + 64 * 1024]

    before = dump(server.path)
    r = http.post("/api/memory", content=chunks(), headers={**AUTH, **JSON})
    got = strict_json(r)["detail"][0]
    assert r.status_code == 413 and "content-length" not in r.request.headers
    assert (got["field"], got["type"]) == ("body", "body_too_large")
    assert got["msg"].startswith(f"the body passed {MAX_BODY + 1} bytes"), got
    assert dump(server.path) == before


def test_a_body_of_exactly_the_bound_is_stored(server, http):
    before = stored_ids(server.path)
    r = send(http, "POST", "/api/memory", content=padded(MAX_BODY, "exactly at the bound"))
    assert r.status_code == 200, r.text
    assert len(stored_ids(server.path) - before) == 1

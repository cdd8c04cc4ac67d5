"""A request's JSON body, parsed strictly before any endpoint sees it.

FastAPI parses a JSON body with the standard library's ``json``, which accepts ``NaN``,
``Infinity``, ``1e999`` (as inf), lone surrogates (``"\\ud800"``: not Unicode, cannot be stored as
UTF-8) and integers of any size, and dies on deep nesting with a RecursionError. The API's routes
(:class:`StrictJSONRoute`) parse with orjson instead: RFC 8259 exactly (valid UTF-8, no lone
surrogate, finite numbers, integers of at most 64 bits), nested at most 1,024 deep (orjson's
limit). Then every integer of the body must lie in SQLite's INTEGER range
(:data:`memlab.store.browse.INT_MIN` .. ``INT_MAX``), the one bound on integers of the API
(orjson reads an integer beyond 64 bits as a float: a body with a run of 19 or more digits is
read again by the standard library, each integer as written).

A body that breaks a rule is answered 422 (:mod:`memlab.serve.errors`) naming the field:
the path of the offending value (``writes[0].entry.salience``), found by reading the body again
leniently (the standard library, each refused number kept as a marker) when orjson refused it;
``body`` when the body is not JSON at all (syntax, bytes that are not UTF-8, nesting too deep),
with orjson's reason, line and column.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Coroutine, Mapping

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from memlab.serve.errors import error, path_join
from memlab.store.browse import INT_MAX, INT_MIN

_SURROGATE = re.compile("[\ud800-\udfff]")
#: a run of digits as long as the shortest integer outside SQLite's range (2**63: 19 digits)
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
#: a number's digits beyond which the lenient reader does not convert it (ints beyond 64 bits
#: are refused anyway; Python refuses str -> int past 4,300 digits)
_INT_DIGITS = 20


class BadBody(HTTPException):
    """A body refused before the endpoint: 422 with ``detail`` a list of errors (one)."""

    def __init__(self, field: str, msg: str, kind: str) -> None:
        super().__init__(422, [error(field, msg, kind)])


#: what _locate returns when the standard library cannot read the body either
_UNREADABLE: Any = object()


class _Refused:
    """A number the strict parser refuses, kept in place by the lenient one to find its path."""

    def __init__(self, why: str) -> None:
        self.why = why


def parse(raw: bytes) -> Any:
    """The JSON value of ``raw``; :class:`BadBody` naming the field when it breaks a rule."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        found = _locate(raw)
        if found is None or found is _UNREADABLE:
            raise BadBody("body", f"not valid JSON (RFC 8259): {exc}", "json_invalid") from None
        raise BadBody(found[0] or "body", found[1], "json_invalid") from None
    if _LONG_DIGITS.search(raw) is None:      # no integer outside SQLite's range can be there
        return value
    # orjson reads an integer beyond 64 bits as a float: read again, each integer as written
    found = _locate(raw)
    if found is _UNREADABLE:
        raise BadBody("body", "holds a number of 19 or more digits, nested too deep to check it "
                      f"against SQLite's INTEGER range [{INT_MIN}, {INT_MAX}]", "int_range")
    if found is not None:
        raise BadBody(found[0] or "body", found[1], "int_range")
    return value


def _locate(raw: bytes) -> Any:
    """(path, reason) of the first value orjson refuses or reads inexactly, read by the standard
    library with each refused number as a marker; None when there is none; _UNREADABLE when that
    reader fails too (syntax, encoding, depth)."""
    try:
        value = json.loads(raw, parse_constant=lambda s: _Refused(
            f"{s} is not a JSON number (RFC 8259: numbers are finite)"),
            parse_float=_lenient_float, parse_int=_lenient_int)
    except (ValueError, RecursionError):
        return _UNREADABLE
    return first_refused(value)


def _lenient_float(s: str) -> float | _Refused:
    x = float(s)
    return x if math.isfinite(x) else _Refused(f"{s[:40]} is beyond the range of a double "
                                               "(±1.8e308): not a finite number")


def _lenient_int(s: str) -> int | _Refused:
    n = int(s) if len(s) <= _INT_DIGITS else None
    return n if n is not None and INT_MIN <= n <= INT_MAX else _Refused(_int_rule(s))


def _int_rule(shown: str) -> str:
    if len(shown) > 40:
        shown = f"an integer of {len(shown.lstrip('-'))} digits"
    return f"{shown} is outside SQLite's INTEGER range [{INT_MIN}, {INT_MAX}]"


def first_refused(value: Any) -> tuple[str, str] | None:
    """(path, reason) of the first value, in document order, that the API refuses inside a
    parsed body: a marker of the lenient reader, a string (or key) with a lone surrogate, an
    integer outside SQLite's INTEGER range; None when there is none. Iterative: any depth."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, _Refused):
            return path_join(path), v.why
        if isinstance(v, str):
            bad = _surrogate(v)
            if bad is not None:
                return path_join(path), bad
        elif isinstance(v, int) and not isinstance(v, bool):
            if not INT_MIN <= v <= INT_MAX:
                return path_join(path), _int_rule(str(v))
        elif isinstance(v, dict):
            children = []
            for k, x in v.items():
                bad = _surrogate(k)
                children.append((path, _Refused(f"a key: {bad}")) if bad is not None
                                else (path + (k,), x))
            stack.extend(reversed(children))
        elif isinstance(v, list):
            stack.extend(reversed([(path + (i,), x) for i, x in enumerate(v)]))
    return None


def _surrogate(text: str) -> str | None:
    m = _SURROGATE.search(text)
    if m is None:
        return None
    return (f"lone surrogate U+{ord(m.group()):04X} at position {m.start()}: not valid Unicode "
            "(cannot be stored as UTF-8)")


class BodyTooLarge(HTTPException):
    """A body over ``serve.max_body_bytes``: 413, refused before it is read whole."""

    def __init__(self, limit: int, seen: str) -> None:
        super().__init__(413, [error("body", f"{seen}: more than serve.max_body_bytes "
                                     f"({limit} bytes)", "body_too_large", limit=limit)])


def body_limit(scope: Mapping[str, Any]) -> int | None:
    """The app's ``serve.max_body_bytes`` (``app.state.max_body_bytes``); None: no bound (an
    app built without it)."""
    app = scope.get("app")
    return getattr(getattr(app, "state", None), "max_body_bytes", None)


class _StrictRequest(Request):
    async def body(self) -> bytes:
        """The body, read at most ``serve.max_body_bytes`` far: a Content-Length beyond the
        bound is refused before a byte is read, and a body streamed without one (chunked) as
        soon as it passes the bound."""
        if not hasattr(self, "_body"):
            limit = body_limit(self.scope)
            declared = self.headers.get("content-length", "")
            if limit is not None and declared.isdigit() and int(declared) > limit:
                raise BodyTooLarge(limit, f"Content-Length {int(declared)}")
            chunks, size = [], 0
            async for chunk in self.stream():
                size += len(chunk)
                if limit is not None and size > limit:
                    raise BodyTooLarge(limit, f"the body passed {size} bytes")
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = parse(await self.body())
        return self._json


class StrictJSONRoute(APIRoute):
    """An APIRoute whose JSON body is read by :func:`parse` (FastAPI's custom request class
    pattern: ``app.router.route_class = StrictJSONRoute`` before the routes are added)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def strict(request: Request) -> Response:
            return await handler(_StrictRequest(request.scope, request.receive))

        return strict


__all__ = ["BadBody", "BodyTooLarge", "StrictJSONRoute", "body_limit", "first_refused", "parse"]

"""How the HTTP API answers a request it refuses: always JSON, always naming the field.

Every error body has one shape::

    {"detail": [{"field": "writes[1].entry.salience", "msg": "...", "type": "...", ...}]}

``field`` names what was wrong as the request gave it: a body path (``writes[1].entry.salience``,
``turn_counter``; ``body`` for a body that is not JSON at all), a query or path parameter
(``offset``, ``agent_id``), ``authorization`` (401), ``path`` (404), ``method`` (405), ``store``
(the store cannot serve the request) or ``request`` (500). ``msg`` is the rule; ``type`` the
error's kind (pydantic's type, memlab's error class). A refused value is echoed as ``input`` only
through :func:`json_safe`: nothing a client sends (NaN, a lone surrogate, a 10,000-digit integer, a
100,000-deep list) can make the error itself unserialisable; a 500 echoes nothing of the request.
"""

from __future__ import annotations

import logging
import reprlib
from typing import Any, Iterable, Mapping, Sequence

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from memlab.errors import InvalidInput, MemlabError, StoreError, StoreLocked

log = logging.getLogger("memlab")

#: how much of a refused value an error echoes (characters)
ECHO_CHARS = 200
#: how much of any other string of an error (a field path, a rule) it shows
TEXT_CHARS = 2000
#: integers beyond this magnitude are echoed by their size (str() of a huge int is slow, or refused)
_ECHO_INT = 10**30
_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = ECHO_CHARS
#: the field a status names when nothing more precise is known
_STATUS_FIELD = {401: "authorization", 404: "path", 405: "method"}


def safe_str(text: str, limit: int = ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, encodable as UTF-8 (a lone surrogate becomes the six
    characters ``\\ud800``)."""
    cut = text if len(text) <= limit else text[:limit - 3] + "..."
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


def json_safe(value: Any, limit: int = ECHO_CHARS) -> Any:
    """``value`` as JSON that always serialises: None, bools, finite floats and integers up to
    1e30 as they are; a string through :func:`safe_str` (``limit`` characters); NaN and
    infinities as their repr; a larger integer by its size; anything else (containers included)
    as a bounded repr."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= _ECHO_INT else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, str):
        return safe_str(value, limit)
    try:
        return safe_str(_repr.repr(value), limit)
    except (ValueError, RecursionError):      # an element too large or too deep to show
        return type(value).__name__


def error_response(status: int, errors: Iterable[Mapping[str, Any]], *,
                   headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The JSON error answer: ``{"detail": [...]}``, every value through :func:`json_safe`."""
    detail = [{str(k): _detail_value(k, v) for k, v in e.items()} for e in errors]
    return JSONResponse({"detail": detail}, status_code=status, headers=dict(headers or {}))


def _detail_value(key: str, v: Any) -> Any:
    limit = ECHO_CHARS if key == "input" else TEXT_CHARS
    if isinstance(v, (list, tuple)) and key == "loc":
        return [json_safe(x, limit) for x in v]
    return json_safe(v, limit)


def error(field: str, msg: str, kind: str, **more: Any) -> dict[str, Any]:
    """One error of a ``detail`` list."""
    return {"field": field, "msg": msg, "type": kind, **more}


def field_of(loc: Sequence[Any]) -> str:
    """pydantic's location as the field a client wrote: ('body', 'writes', 0, 'op') ->
    ``writes[0].op``; ('query', 'offset') -> ``offset``; ('body',) or ('body', 17) -> ``body``."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        where = parts.pop(0)
        if where == "body" and (not parts or isinstance(parts[0], int)):
            return "body"
    return path_join(parts) or "request"


def path_join(parts: Sequence[Any]) -> str:
    """A path of keys and indices as ``a.b[2].c`` (a key that is not an identifier quoted:
    ``a["x y"]``)."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and p.isidentifier():
            out += f".{p}" if out else p
        else:
            out += "[" + safe_str(repr(str(p))) + "]"
    return out


# -- the handlers ----------------------------------------------------------------------------------
def install(app) -> None:
    """Answer every refusal of ``app`` as JSON naming the field (module docstring)."""

    @app.exception_handler(RequestValidationError)
    def _validation(request, exc: RequestValidationError) -> JSONResponse:
        out = []
        for e in exc.errors():
            msg = e.get("msg", "invalid")
            reason = (e.get("ctx") or {}).get("error")
            if reason is not None:
                msg = f"{msg}: {reason}"
            out.append(error(field_of(e.get("loc", ())), msg, e.get("type", "invalid"),
                             loc=list(e.get("loc", ())), input=e.get("input")))
        return error_response(422, out)

    @app.exception_handler(InvalidInput)
    def _invalid(request, exc: InvalidInput) -> JSONResponse:
        return error_response(422, [error(exc.field, exc.rule, type(exc).__name__,
                                          input=exc.value, error=str(exc))])

    @app.exception_handler(StoreLocked)
    def _locked(request, exc: StoreLocked) -> JSONResponse:
        return error_response(503, [error("store", str(exc), type(exc).__name__)])

    @app.exception_handler(MemlabError)
    def _memlab(request, exc: MemlabError) -> JSONResponse:
        field = "store" if isinstance(exc, StoreError) else "request"
        return error_response(400, [error(field, str(exc), type(exc).__name__)])

    @app.exception_handler(HTTPException)
    def _http(request, exc: HTTPException) -> JSONResponse:
        if isinstance(exc.detail, list):         # ours (memlab.serve.body): errors already
            return error_response(exc.status_code, exc.detail, headers=exc.headers)
        return error_response(exc.status_code,
                              [error(_STATUS_FIELD.get(exc.status_code, "request"),
                                     str(exc.detail), f"http_{exc.status_code}")],
                              headers=exc.headers)

    @app.exception_handler(Exception)
    def _internal(request, exc: Exception) -> JSONResponse:
        # Starlette logs the traceback after this answer, which echoes nothing of the request
        return error_response(500, [error("request", "internal error (the server logged it)",
                                          type(exc).__name__)])


__all__ = ["ECHO_CHARS", "TEXT_CHARS", "error", "error_response", "field_of", "install",
           "json_safe", "path_join", "safe_str"]

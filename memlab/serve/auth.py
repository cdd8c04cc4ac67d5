"""The API's bearer token, checked before anything else of a request is read.

:class:`BearerAuth` is ASGI middleware outside the app's routing: a request without
``Authorization: Bearer <token>`` (compared in constant time) is answered 401 from its headers
alone, whatever its path (``/openapi.json``, an unknown path, a wrong method) and before its body
is read, so a client without the token learns nothing from how a malformed or 100,000-deep body
would be answered.
"""

from __future__ import annotations

import hmac
from typing import Any, Awaitable, Callable, Iterable

from memlab.serve.errors import error, error_response

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]],
                   Awaitable[None]]
MESSAGE = "missing or wrong token (Authorization: Bearer <token>)"


def has_token(headers: Iterable[tuple[bytes, bytes]], token: bytes) -> bool:
    """Whether the first ``Authorization`` header of ``headers`` (ASGI's raw pairs, names in
    lower case) is ``Bearer <token>`` (the scheme in any case; spaces around the token ignored)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, given = value.partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)
    return False


class BearerAuth:
    """ASGI middleware: HTTP requests without the token get 401 (module docstring), websocket
    connections a close (1008, policy violation); lifespan events pass."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app, self.token = app, token.encode("utf-8")

    async def __call__(self, scope: Scope, receive, send) -> None:
        if scope["type"] == "lifespan" or has_token(scope["headers"], self.token):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        response = error_response(401, [error("authorization", MESSAGE, "unauthorised")],
                                  headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


__all__ = ["BearerAuth", "MESSAGE", "has_token"]

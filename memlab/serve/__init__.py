"""The HTTP API over a store (familiars §5.11): ``memlab serve`` and :func:`create_app`.

FastAPI and uvicorn are the ``serve`` extra (``pip install 'memlab[serve]'``); they are imported
only here, when the API is used."""

from __future__ import annotations

from typing import Any


def create_app(*args: Any, **kwargs: Any):
    """:func:`memlab.serve.app.create_app` (imports FastAPI now)."""
    from memlab.serve.app import create_app as make

    return make(*args, **kwargs)


__all__ = ["create_app"]

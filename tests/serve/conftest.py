"""The HTTP tests' shared server (serve_helpers.Server): one ``memlab serve`` process per
session, on 127.0.0.1."""

from __future__ import annotations

import pytest

from serve_helpers import Server


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("serve"))
    yield s
    s.stop()


@pytest.fixture(scope="session")
def http(server):
    """One client for the session (no default headers: each request says its own; plain HTTP to
    127.0.0.1, so no TLS context, which costs ~0.1 s to build per client)."""
    with server.client(headers={}, verify=False) as c:
        yield c

"""Fixtures of the store tests."""

from __future__ import annotations

import pytest

from memlab.store import open_store


@pytest.fixture
def store():
    conn, repo = open_store(":memory:")
    yield conn, repo
    conn.close()


@pytest.fixture
def file_store(tmp_path):
    path = tmp_path / "store.sqlite"
    conn, repo = open_store(path)
    yield path, conn, repo
    conn.close()

"""boost_thread_priority (§5.10.4): nested boosts take the minimum; per thread."""

from __future__ import annotations

import threading
from contextlib import ExitStack

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlab.errors import InvalidInput
from memlab.vram import boost_thread_priority, current_priority


@given(st.lists(st.integers(1, 4), min_size=1, max_size=8))
def test_nested_boosts_take_the_minimum_and_unwind(levels):
    assert current_priority() is None
    with ExitStack() as stack:
        for depth, p in enumerate(levels, 1):
            inside = stack.enter_context(boost_thread_priority(p))
            assert inside == current_priority() == min(levels[:depth])
    assert current_priority() is None


def test_inner_critical_in_outer_nice_is_critical_and_the_outer_comes_back():
    with boost_thread_priority(3):
        with boost_thread_priority(1):
            assert current_priority() == 1
        assert current_priority() == 3
        with boost_thread_priority(4):
            assert current_priority() == 3


def test_a_boost_belongs_to_its_thread_and_unwinds_on_error():
    seen = []
    with boost_thread_priority(1):
        t = threading.Thread(target=lambda: seen.append(current_priority()))
        t.start()
        t.join()
    assert seen == [None]
    with pytest.raises(RuntimeError):
        with boost_thread_priority(2):
            raise RuntimeError("boom")
    assert current_priority() is None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "1"])
def test_bad_priorities_are_refused(bad):
    with pytest.raises(InvalidInput):
        with boost_thread_priority(bad):
            pass

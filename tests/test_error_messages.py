"""memlab's errors show the value that broke a rule, bounded, and never fail themselves."""

import memlab
from memlab.errors import SHOWN_MAX, ConfigError, InvalidInput, shown

import pytest


def test_a_value_is_shown_as_its_repr_and_never_fails():
    assert shown("a" * 10) == repr("a" * 10) and shown("a" * 1000) == repr("a" * 1000)
    assert shown("a" * 1000, cut=SHOWN_MAX) == repr("a" * (SHOWN_MAX - 3) + "...")
    assert shown(list(range(3))) == "[0, 1, 2]"
    assert shown(10 ** 5000) == "<an integer of 16,610 bits>"       # repr would raise ValueError
    assert shown(10 ** 20) == repr(10 ** 20) and shown(True) == "True"
    assert str(InvalidInput("text", "too long", "x" * 200)).endswith("...')")   # cut at 80


def test_an_integer_too_long_to_print_is_named_not_a_raw_value_error():
    err = InvalidInput("k", "must be at most 1000", 10 ** 5000)
    assert "k: must be at most 1000 (got <an integer of 16,610 bits>)" == str(err)
    assert "16,610 bits" in str(ConfigError("recall.k", "too large", 10 ** 5000))
    with memlab.open_store(":memory:", config=memlab.MemlabConfig().replace(
            **{"embedding.backend": "hashing"})) as st:
        with pytest.raises(InvalidInput, match="bits"):
            st.recall("x", k=10 ** 5000)

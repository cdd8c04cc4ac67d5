"""memlab's errors show the value that broke a rule, bounded, and never fail themselves."""

import memlab
from memlab.errors import SHOWN_MAX, ConfigError, InvalidInput, shown

import pytest


def test_a_value_is_shown_bounded():
    assert shown("a" * 10) == repr("a" * 10)
    assert shown("a" * 1000) == repr("a" * (SHOWN_MAX - 3) + "...")
    assert len(shown(list(range(1000)))) == SHOWN_MAX and shown(list(range(1000))).endswith("...")
    assert shown(10 ** 5000) == "<an integer of 16,610 bits>"       # repr would raise ValueError
    assert shown(10 ** 20) == repr(10 ** 20) and shown(True) == "True"


def test_an_integer_too_long_to_print_is_named_not_a_raw_value_error():
    err = InvalidInput("k", "must be at most 1000", 10 ** 5000)
    assert "k: must be at most 1000 (got <an integer of 16,610 bits>)" == str(err)
    assert "16,610 bits" in str(ConfigError("recall.k", "too large", 10 ** 5000))
    with memlab.open_store(":memory:", config=memlab.MemlabConfig().replace(
            **{"embedding.backend": "hashing"})) as st:
        with pytest.raises(InvalidInput, match="bits"):
            st.recall("x", k=10 ** 5000)

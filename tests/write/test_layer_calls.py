"""store_long_term / store_short_term (Reverie §4.1): a memory written to the layer as given, with
the layer's default importance (0.7 long term, 0.3 short term: layers.*_default_importance), an
``lt_`` / ``st_`` + uuid4 hex id and the cognitive layer by prefix."""

from __future__ import annotations

import re

import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput

T0 = 1_750_000_000.0
BASE = MemlabConfig().replace(**{"embedding.backend": "hashing"})


def _store(cfg=BASE):
    return memlab.open_store(":memory:", config=cfg, clock=FixedClock(T0))


@pytest.mark.parametrize("text", ["事件记忆：我们一起去了长城", "I had coffee with Mia"])
def test_the_layers_defaults_ids_and_cognitive_layer(text):
    with _store() as st:
        lt, stm = st.store_long_term(text), st.store_short_term(text + " again")
        a, b = st.get([lt, stm])
    assert re.fullmatch(r"lt_[0-9a-f]{32}", lt) and re.fullmatch(r"st_[0-9a-f]{32}", stm)
    assert (a.retention_layer, a.importance) == ("long_term", 0.7)
    assert (b.retention_layer, b.importance) == ("short_term", 0.3)
    assert a.cognitive_layer == ("episodic" if text.startswith("事件记忆：") else "semantic")


def test_the_layer_is_kept_whatever_the_importance_and_the_defaults_come_from_config():
    cfg = BASE.replace(**{"layers.long_term_default_importance": 0.2,
                          "layers.short_term_default_importance": 0.9})
    with _store(cfg) as st:
        low_long = st.get([st.store_long_term("我喜欢猫")])[0]      # below the §5 threshold 0.6
        high_short = st.get([st.store_short_term("我的生日是三月五日")])[0]
        given = st.get([st.store_long_term("remember the promise", importance=0.95,
                                           emotions={"joy": 40.0},
                                           source_uri="chat://1")])[0]
    assert (low_long.retention_layer, low_long.importance) == ("long_term", 0.2)
    assert (high_short.retention_layer, high_short.importance) == ("short_term", 0.9)
    assert (given.importance, dict(given.emotions), given.source_uri) == (0.95, {"joy": 40.0},
                                                                           "chat://1")


def test_bad_input_is_refused_and_nothing_is_written():
    with _store() as st:
        with pytest.raises(InvalidInput):
            st.store_long_term("x", importance=1.5)
        with pytest.raises(InvalidInput):
            st.store_short_term("   ")
        assert len(st) == 0

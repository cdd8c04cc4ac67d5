"""Reverie §5 importance scorer and §11.3 budget pressure, values worked out by hand."""

import pytest

from memlab.config import MemlabConfig
from memlab.write.importance import score_importance
from memlab.write.layers import choose_layer, long_term_threshold
from memlab.write.records import cognitive_layer_of

CFG = MemlabConfig()


def imp(msg, **kw):
    return score_importance(msg, cfg=CFG.importance, **kw)


def test_floor_for_plain_chatter():
    assert imp("ok") == 0.05  # ⑥ clamp to [0.05, 1]


def test_emotion_is_the_base():
    assert imp("ok", emotion_intensity=0.7) == 0.7  # ①


def test_markers():
    # ② two markers (生日, 喜欢): min(0.85, 0.25 + 2 * 0.12) = 0.49
    assert imp("我生日那天最喜欢吃蛋糕") == pytest.approx(0.49)
    # many markers cap at 0.85
    assert imp("生日 纪念日 约定 喜欢 讨厌 害怕 过敏") == pytest.approx(0.85)


def test_repetition():
    # ③ "cats" repeated in two sentences: min(0.8, 0.35 + 0.08 * 1) = 0.43
    assert imp("cats. cats.") == pytest.approx(0.43)


def test_long_message_and_association():
    assert imp("x" * 80 + " y") == pytest.approx(0.45)  # ④ (one token, not repeated)
    assert imp("ok", associated=3) == pytest.approx(0.7)  # ⑤ min(0.9, 0.4 + 0.1 * 3)
    assert imp("ok", associated=9) == pytest.approx(0.9)


def test_layer_and_budget_pressure():
    g, lay = CFG.governance, CFG.layers
    budget = g.long_term_char_budget
    assert long_term_threshold(0, layers=lay, gov=g) == 0.6
    assert long_term_threshold(int(0.70 * budget), layers=lay, gov=g) == 0.6
    # 85% usage is half-way from 70% to 100%: 0.6 + 0.5 * (0.95 - 0.6) = 0.775
    assert long_term_threshold(int(0.85 * budget), layers=lay, gov=g) == pytest.approx(0.775)
    assert long_term_threshold(2 * budget, layers=lay, gov=g) == pytest.approx(0.95)
    assert choose_layer(0.61, threshold=0.6) == "long_term"
    assert choose_layer(0.6, threshold=0.6) == "short_term"  # "> 0.6", strictly
    assert cognitive_layer_of("事件记忆：去了海边", layers=lay) == "episodic"
    assert cognitive_layer_of("喜欢海边", layers=lay) == "semantic"


# -- properties (hypothesis) -----------------------------------------------------------------------
from hypothesis import given, strategies as st  # noqa: E402

_TEXT = st.text(alphabet=st.sampled_from(list("我的生日是三月五日喜欢讨厌 birthdaylove,.!。\n")),
                max_size=120)
_UNIT = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(msg=_TEXT, reply=_TEXT, lo=_UNIT, hi=_UNIT, assoc=st.integers(0, 10))
def test_stronger_emotion_never_lowers_importance(msg, reply, lo, hi, assoc):
    lo, hi = min(lo, hi), max(lo, hi)
    assert imp(msg, assistant_reply=reply, emotion_intensity=lo, associated=assoc) \
        <= imp(msg, assistant_reply=reply, emotion_intensity=hi, associated=assoc)


@given(msg=_TEXT, reply=_TEXT, emo=st.floats(-5, 5, allow_nan=False), assoc=st.integers(0, 50))
def test_importance_is_always_in_floor_to_one(msg, reply, emo, assoc):
    value = imp(msg, assistant_reply=reply, emotion_intensity=emo, associated=assoc)
    assert CFG.importance.floor <= value <= 1.0


@given(msg=_TEXT, a=st.integers(0, 10), b=st.integers(0, 10))
def test_more_associations_never_lower_importance(msg, a, b):
    assert imp(msg, associated=min(a, b)) <= imp(msg, associated=max(a, b))

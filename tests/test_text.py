"""memory_terms (§6.2), entities (§11.1) and temporal intent (§11.2)."""

import re

from hypothesis import given, strategies as st

from memlab.config import MemlabConfig
from memlab.text import TemporalIntent, extract_entities, jaccard, memory_terms, temporal_intent


def test_spec_example_terms():
    # §6.2: 「我记得你怕黑」 -> 我记 记得 得你 ... (2-grams then 3-grams; the run is > 4 chars)
    assert memory_terms("我记得你怕黑") == ["我记", "记得", "得你", "你怕", "怕黑",
                                        "我记得", "记得你", "得你怕", "你怕黑"]


def test_short_run_kept_whole_and_english_tokens():
    # the run (<= 4 chars) first, then its 2-grams; its 3-gram duplicates the run and is dropped
    assert memory_terms("Hi, I love 星露谷!") == ["hi", "love", "星露谷", "星露", "露谷"]
    # single letters are not tokens; digits are
    assert memory_terms("a 42 b") == ["42"]


def test_caps():
    text = "".join(chr(0x4E00 + i) for i in range(500))
    assert len(memory_terms(text)) == 80
    assert len(memory_terms(text, term_cap=10)) == 10
    # only the first text_cap characters are read
    assert memory_terms("ab " * 10 + "zz", text_cap=6) == ["ab"]


@given(st.text(max_size=300))
def test_terms_are_distinct_lowercase_and_bounded(text):
    terms = memory_terms(text)
    assert len(terms) == len(set(terms)) <= 80
    for t in terms:
        assert t == t.lower()
        assert re.fullmatch(r"[a-z0-9_]{2,}|[\u3400-\u9fff]{1,4}", t)


def test_jaccard():
    assert jaccard({"a", "b"}, {"b", "c"}) == 1 / 3
    assert jaccard(set(), set()) == 0.0


def test_entities():
    ents = extract_entities("When did Caroline meet Melanie at 《星露谷物语》 fan club with 小林?")
    assert ents == ["caroline", "melanie", "星露谷物语", "小林"]
    assert extract_entities("I think The weather is nice") == []


def _intent(q):
    t = MemlabConfig().temporal
    return temporal_intent(q, recent=t.recent_cues, historical=t.historical_cues,
                           when=t.when_cues, first=t.first_cues)


def test_temporal_intent():
    assert _intent("她最近在忙什么？").kind == "recent"
    assert _intent("我以前住在哪里？").kind == "historical"
    assert _intent("What sport did I use to do every week?").kind == "historical"
    assert _intent("Didn't I use to live in Boston?").kind == "historical"
    assert _intent("What app do I use to track my runs?").kind == "none"
    assert _intent("我第一次去北京是什么时候？") == TemporalIntent(when=True, first=True)
    assert _intent("When did I adopt the cat?").kind == "when"
    assert _intent("What have I been reading lately?").kind == "recent"
    assert _intent("What's my cat's name?").kind == "none"
    # 'now' inside a word is not a cue
    assert _intent("Do you know my snowboard?").kind == "none"
    assert TemporalIntent.from_code(_intent("我第一次去北京是什么时候？").code).first


def test_time_windows():
    from memlab.text import time_window_days as w

    assert w("最近三个月我去过哪里？") == 3 * 30.44
    assert w("过去两周吃了什么") == 14.0
    assert w("近十天") == 10.0 and w("最近十二个月") == 12 * 30.44 and w("最近半年") == 0.5 * 365.25
    assert w("What did I read in the last 2 weeks?") == 14.0
    assert w("over the past few weeks") == 21.0 and w("this year") == 365.25
    # the recent *intent* carries no window
    assert w("最近怎么样") is None and w("lately") is None and w("the last time we met") is None

"""memlab.bench.replay: time order, what a question may see, ids, rendering, policies, the cache,
rows of several conversations, and a bad template. Hashing embedder, datasets made here."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.replay import render_item, replay
from memlab.bench.run import open_cache, rank
from memlab.embed import make_embedder
from memlab.errors import ConfigError

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
CARD = Card("replay-test", "1", "en", "CC0-1.0", "memlab tests", "turn", "made by the test")
PERMANENT, LONG_TERM, SHORT_TERM = 0, 1, 2  # memlab.recall.features.LAYER_CODES


def day(n: float) -> datetime:
    return T0 + timedelta(days=n)


def run_replay(ds: Dataset, cfg, embedder, *, progress: bool = False):
    cache = open_cache(cfg)
    try:
        return replay(ds, cfg=cfg, embedder=embedder, cache=cache, progress=progress)
    finally:
        cache.close()


def rows_of(rep, qid: int) -> list[int]:
    t = rep.features.table
    return sorted(int(r) for r in t.loc[t["qid"] == qid, "row"])


def items_seen(rep, qid: int) -> set[str]:
    return {rep.row_item[r] for r in rows_of(rep, qid)}


def column(rep, qid: int, item_id: str, name: str) -> float:
    t = rep.features.table
    sel = t[(t["qid"] == qid) & (t["row"].map(rep.row_item) == item_id)]
    assert len(sel) == 1, (qid, item_id)
    return float(sel[name].iloc[0])


# ----------------------------------------------------------------------------- time

def timeline() -> Dataset:
    """The file lists the later item first; the question's text is the later item's text."""
    items = [
        Item("c1", "late", "s2", "Alice", "I adopted a dog named Rex", day(10)),
        Item("c1", "early", "s1", "Alice", "I adopted a cat named Momo", day(1)),
        Item("c1", "boundary", "s1", "Alice", "we planted tomatoes", day(5)),
    ]
    q = "Alice: I adopted a dog named Rex"
    questions = [
        Question("c1", "q_day20", q, day(20), "x", ("late",)),
        Question("c1", "q_day0", q, day(0), "x", ("early",)),
        Question("c1", "q_day5", q, day(5), "x", ("early",)),
    ]
    return Dataset(CARD, items, questions)


def test_items_are_written_in_time_order_and_a_question_sees_only_the_past(hashing_cfg):
    rep = run_replay(timeline(), hashing_cfg, None)
    # questions are asked in time order within a conversation: qid 0 = day 0, 1 = day 5, 2 = day 20
    assert rep.questions["query_id"].tolist() == ["q_day0", "q_day5", "q_day20"]
    assert items_seen(rep, 0) == set()                      # nothing written before day 1
    assert items_seen(rep, 1) == {"early", "boundary"}      # timestamp <= asked_at, not 'late'
    assert items_seen(rep, 2) == {"early", "boundary", "late"}
    # written in timestamp order, not file order: store rows grow early < boundary < late
    by_item = {i: r for r, i in rep.row_item.items()}
    assert by_item["early"] < by_item["boundary"] < by_item["late"]
    # and with their own timestamps: ages on day 20 are 19, 15 and 10 days
    assert column(rep, 2, "early", "age_days") == pytest.approx(19.0)
    assert column(rep, 2, "boundary", "age_days") == pytest.approx(15.0)
    assert column(rep, 2, "late", "age_days") == pytest.approx(10.0)
    assert column(rep, 1, "early", "age_days") == pytest.approx(4.0)


def test_a_later_item_that_would_win_is_not_recalled_before_it_exists(hashing_cfg):
    cfg = hashing_cfg.replace(**{"fusion.scorer": "cosine"})
    rep = run_replay(timeline(), cfg, make_embedder(cfg))
    ranks = rank(rep, cfg)
    # on day 20 the later item is the question's own text: it ranks first
    assert ranks["c1::q_day20"][0] == "c1::late"
    assert column(rep, 2, "late", "cosine") == pytest.approx(1.0, abs=1e-6)
    # on day 5 it does not exist yet
    assert "c1::late" not in ranks["c1::q_day5"]
    assert ranks["c1::q_day5"][0] == "c1::early"            # shares alice, adopted, named
    assert ranks["c1::q_day0"] == []


# ----------------------------------------------------------------------------- ids and rendering

def test_memory_ids_are_item_ids(hashing_cfg):
    rep = run_replay(timeline(), hashing_cfg, None)
    assert dict(rep.features.ids) == rep.row_item
    assert set(rep.row_item.values()) == {"early", "boundary", "late"}
    assert rep.row_session == {r: {"late": "s2"}.get(i, "s1") for r, i in rep.row_item.items()}


def rendering_dataset() -> Dataset:
    items = [Item("c1", "a", "s1", "Alice", "I adopted a cat", day(1)),
             Item("c1", "b", "s7", "", "bought oat milk", day(2))]
    return Dataset(CARD, items, [Question("c1", "q", "Alice", day(3), "x", ("a",))])


@pytest.mark.parametrize("template, expected", [
    ("{speaker}: {text}", {"a": "Alice: I adopted a cat", "b": "user: bought oat milk"}),
    ("[{date}] {speaker}: {text}", {"a": "[2024-01-02] Alice: I adopted a cat",
                                    "b": "[2024-01-03] user: bought oat milk"}),
    ("{session_id} | {text}", {"a": "s1 | I adopted a cat", "b": "s7 | bought oat milk"}),
    ("{{{speaker}}} {text!s}", {"a": "{Alice} I adopted a cat", "b": "{user} bought oat milk"}),
])
def test_the_rendered_text_is_what_is_stored_and_embedded(hashing_cfg, counting_embedder,
                                                          template, expected):
    cfg = hashing_cfg.replace(**{"bench.render_template": template})
    rep = run_replay(rendering_dataset(), cfg, counting_embedder)
    stored = {rep.row_item[r]: text for r, text in rep.features.texts.items()}
    assert stored == expected
    assert counting_embedder.documents == [expected["a"], expected["b"]]
    assert counting_embedder.queries == ["Alice"]


def test_the_speaker_in_the_template_makes_the_speaker_findable(hashing_cfg):
    """Question 'Alice': overlap 1 with 'Alice: ...' (term alice), 0 with the bare text."""
    with_speaker = run_replay(rendering_dataset(), hashing_cfg, None)
    bare = run_replay(rendering_dataset(), hashing_cfg.replace(**{"bench.render_template": "{text}"}),
                      None)
    assert column(with_speaker, 0, "a", "lexical") == 1.0
    assert items_seen(bare, 0) == set()  # lexical route only (no embedder): nothing matches


# ----------------------------------------------------------------------------- policies

def policy_dataset() -> Dataset:
    items = [
        Item("c1", "perm", "s1", "A", "my name is Alice", day(1),
             {"importance": 0.9, "layer": "permanent"}),
        Item("c1", "low", "s1", "A", "had toast", day(1), {"importance": 0.2}),
        Item("c1", "high", "s1", "A", "my sister moved to Paris", day(1), {"importance": 0.8}),
        Item("c1", "none", "s1", "A", "it rained", day(1), {}),
        Item("c1", "short", "s1", "A", "bus was late", day(1), {"importance": 0.95,
                                                                 "layer": "short_term"}),
    ]
    return Dataset(CARD, items, [Question("c1", "q", "anything", day(2), "x", ("perm",))])


def test_importance_and_layer_come_from_meta(hashing_cfg):
    """Policies 'meta': the item's importance (else bench.default_importance 0.5) and its layer
    (else by importance: > layers.long_term_threshold 0.6 -> long_term, else short_term)."""
    rep = run_replay(policy_dataset(), hashing_cfg, make_embedder(hashing_cfg))
    assert len(rows_of(rep, 0)) == 5  # floor 0, dense route: every item is a candidate
    expected = {"perm": (0.9, PERMANENT), "low": (0.2, SHORT_TERM), "high": (0.8, LONG_TERM),
                "none": (0.5, SHORT_TERM), "short": (0.95, SHORT_TERM)}
    for item_id, (importance, layer) in expected.items():
        assert column(rep, 0, item_id, "importance") == pytest.approx(importance)
        assert column(rep, 0, item_id, "layer") == layer, item_id


def test_constant_importance_and_one_layer_ignore_meta(hashing_cfg):
    cfg = hashing_cfg.replace(**{"bench.importance_policy": "constant",
                                 "bench.default_importance": 0.3,
                                 "bench.layer_policy": "long_term"})
    rep = run_replay(policy_dataset(), cfg, make_embedder(cfg))
    for item_id in ("perm", "low", "high", "none", "short"):
        assert column(rep, 0, item_id, "importance") == pytest.approx(0.3)
        assert column(rep, 0, item_id, "layer") == LONG_TERM


# ----------------------------------------------------------------------------- the cache

def test_a_second_replay_with_the_same_cache_embeds_nothing(hashing_cfg, counting_embedder):
    ds = timeline()
    first = run_replay(ds, hashing_cfg, counting_embedder)
    # three distinct item texts; the three questions share one text: embedded once
    assert len(counting_embedder.documents) == 3
    assert counting_embedder.queries == ["Alice: I adopted a dog named Rex"]

    again = type(counting_embedder)()
    second = run_replay(ds, hashing_cfg, again)
    assert again.documents == [] and again.queries == []
    cols = ["qid", "row", "cosine", "lexical", "dense_rank"]
    assert second.features.table[cols].equals(first.features.table[cols])


@pytest.mark.parametrize("progress", [False, True])
def test_progress_false_shows_no_embedding_bars(hashing_cfg, capsys, progress):
    """Regression: the embedding bars ignored ``progress`` (``memlab bench -q`` showed them)."""
    cfg = hashing_cfg.replace(**{"embedding.batch_size": 1})  # three batches: a bar is due
    run_replay(timeline(), cfg, make_embedder(cfg), progress=progress)
    err = capsys.readouterr().err
    assert ("embed items" in err) is progress
    assert ("replay replay-test" in err) is progress


# ----------------------------------------------------------------------------- conversations

def test_rows_of_two_conversations_never_collide(hashing_cfg):
    """Both conversations use item ids i1, i2 with different texts; every candidate row maps back
    to an item of its own question's conversation."""
    items = [
        Item("c1", "i1", "s1", "Ann", "I adopted a cat named Momo", day(1)),
        Item("c1", "i2", "s1", "Ann", "my cat likes tuna", day(2)),
        Item("c2", "i1", "s1", "Bob", "I adopted a cat named Tiger", day(1)),
        Item("c2", "i2", "s1", "Bob", "my cat likes chicken", day(2)),
    ]
    questions = [Question("c1", "q1", "what does my cat like", day(3), "x", ("i2",)),
                 Question("c2", "q1", "what does my cat like", day(3), "x", ("i2",))]
    ds = Dataset(CARD, items, questions)
    rep = run_replay(ds, hashing_cfg, make_embedder(hashing_cfg))
    rendered = {(it.conversation_id, it.item_id): render_item(it, "{speaker}: {text}")
                for it in items}
    convs = rep.questions["conversation_id"].tolist()
    assert convs == ["c1", "c2"]
    seen_rows = []
    for qid, conv in enumerate(convs):
        rows = rows_of(rep, qid)
        assert len(rows) == 2
        for r in rows:
            assert rep.features.texts[r] == rendered[(conv, rep.row_item[r])]
        seen_rows.append(set(rows))
    assert not seen_rows[0] & seen_rows[1]
    ranks = rank(rep, hashing_cfg)
    assert set(ranks["c1::q1"]) == {"c1::i1", "c1::i2"}
    assert set(ranks["c2::q1"]) == {"c2::i1", "c2::i2"}
    # the embedding cache (empty): 4 item texts and the one question text both ask, embedded
    assert rep.counts == {"items_written": 4, "items": 4, "questions": 2, "conversations": 2,
                          "candidates": 4, "embedding cache: hits": 0,
                          "embedding cache: misses": 5}


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("template", [
    "{speakr}: {text}",     # unknown placeholder
    "{0} {text}",           # positional
    "{speaker}: {text",     # unbalanced brace (was a bare ValueError)
    "{text!z}",             # unknown conversion (was a bare ValueError)
    "{text.upper}",         # attribute of a field (was a bare AttributeError)
    "{date:%Y}",            # a format spec the rendered string cannot take (was ValueError)
    "{text:{width}}",       # an unknown field nested in a format spec
    "{}",                   # an empty field
])
def test_a_bad_render_template_is_a_config_error_before_anything_is_embedded(
        hashing_cfg, counting_embedder, template):
    cfg = hashing_cfg.replace(**{"bench.render_template": template})
    with pytest.raises(ConfigError) as err:
        run_replay(timeline(), cfg, counting_embedder)
    assert err.value.key == "bench.render_template"
    assert err.value.value == template
    assert "bench.render_template" in str(err.value)
    assert counting_embedder.documents == [] and counting_embedder.queries == []

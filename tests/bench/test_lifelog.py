"""memlab-lifelog: the generator is deterministic, the shipped copy is a fresh generation, and each
question category means what its name says (gold = latest revision, oldest event, ...)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memlab.bench import lifelog
from memlab.errors import InvalidInput

SHIPPED = Path(__file__).resolve().parents[2] / "datasets" / "memlab-lifelog"
FILES = ("card.json", "items.jsonl", "queries.jsonl", "README.md")
CJK = re.compile(r"[\u3400-\u9fff]")


@pytest.fixture(scope="module")
def default(tmp_path_factory):
    folder = lifelog.write(tmp_path_factory.mktemp("lifelog") / "ll")
    card, items, queries = lifelog.generate()
    return folder, card, items, queries


@pytest.fixture(scope="module")
def index(default):
    _, _, items, queries = default
    by_id = {i["item_id"]: i for i in items}
    by_conv = defaultdict(list)
    for i in items:
        by_conv[i["conversation_id"]].append(i)
    return by_id, by_conv


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _terms(text: str) -> set[str]:
    """Reverie-style lexical terms: lower-case en tokens, zh character 2-grams."""
    text = text.lower()
    terms = set(re.findall(r"[a-z0-9]{2,}", text))
    for run in re.findall(r"[\u3400-\u9fff]+", text):
        terms.update(run[i:i + 2] for i in range(len(run) - 1))
    return terms - {"my", "do", "is", "the", "what", "did", "am", "of", "to", "at", "in", "on", "and", "it"}


# ----------------------------------------------------------------------------- determinism and the shipped copy

def test_same_seed_same_bytes(default, tmp_path):
    folder = default[0]
    again = lifelog.write(tmp_path / "again")
    for name in FILES:
        assert (again / name).read_bytes() == (folder / name).read_bytes(), name


def test_other_seed_differs():
    _, items_a, queries_a = lifelog.generate(seed=1, users=2, months=4)
    _, items_b, queries_b = lifelog.generate(seed=2, users=2, months=4)
    assert [i["text"] for i in items_a] != [i["text"] for i in items_b]
    assert [q["text"] for q in queries_a] != [q["text"] for q in queries_b]


def test_shipped_copy_equals_fresh_generation(default):
    """CI's check of datasets/memlab-lifelog: regenerate with `python -m memlab.bench.lifelog --out ...`."""
    folder = default[0]
    for name in FILES:
        assert (SHIPPED / name).read_bytes() == (folder / name).read_bytes(), f"{name} is stale"


def test_files_are_sorted_key_utf8_jsonl_and_small(default):
    folder, card, items, queries = default
    assert json.loads((folder / "card.json").read_text("utf-8")) == card
    lines = (folder / "items.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == len(items)
    assert lines[0] == json.dumps(items[0], ensure_ascii=False, sort_keys=True)
    assert "\\u" not in lines[0]                     # Chinese is written as UTF-8, not escaped
    assert sum((folder / n).stat().st_size for n in FILES) < 5 * 1024 * 1024


def test_card(default):
    card = default[1]
    assert card["name"] == "memlab-lifelog" and card["version"] == "1.1.0"
    assert card["language"] == "mixed" and card["license"] == "CC0-1.0" and card["granularity"] == "utterance"
    assert "seed 20261129" in card["source"]


def test_canonical_reader_accepts_it(default):
    canonical = pytest.importorskip("memlab.bench.datasets.canonical")
    ds = canonical.read_dataset(default[0])
    assert len(ds.items) == len(default[2]) and len(ds.questions) == len(default[3])


# ----------------------------------------------------------------------------- records

def test_counts_per_category_and_language(default):
    _, _, items, queries = default
    per_cat = Counter(q["category"] for q in queries)
    assert set(per_cat) == set(lifelog.CATEGORIES)
    assert min(per_cat.values()) >= 20, per_cat
    assert 300 <= len(queries) <= 450
    per_conv = Counter(i["conversation_id"] for i in items)
    assert len(per_conv) == 8 and all(300 <= n <= 600 for n in per_conv.values()), per_conv
    assert [c.rsplit("-", 1)[1] for c in per_conv] == ["zh"] * 4 + ["en"] * 3 + ["mixed"]


def test_timestamps_increase_within_a_user_and_carry_an_offset(index):
    _, by_conv = index
    for conv, items in by_conv.items():
        times = [_t(i["timestamp"]) for i in items]
        assert all(t.utcoffset() is not None for t in times)
        assert all(a < b for a, b in zip(times, times[1:])), conv
        assert all(i["session_id"] == i["timestamp"][:10] for i in items)
        assert len({t.utcoffset() for t in times}) == 1
        assert (times[-1] - times[0]).days >= 200               # about 8 months


def test_item_meta_follows_the_writer_policy(default):
    for i in default[2]:
        m = i["meta"]
        assert 0.0 <= m["importance"] <= 1.0 and 0.0 <= m["emotion"] <= 1.0
        assert m["layer"] == ("permanent" if m["kind"] == "card" else
                              "long_term" if m["importance"] > 0.6 else "short_term")
        assert m["cognitive_layer"] == ("semantic" if m["kind"] in ("card", "fact", "revision") else "episodic")
        if m["kind"] == "trivia":
            assert m["importance"] <= 0.25 and m["emotion"] <= 0.2
        if "fact_key" in m:
            assert isinstance(m["revision"], int) and m["revision"] >= 1


def test_evidence_names_items_of_the_same_conversation_asked_later(default, index):
    by_id, by_conv = index
    ids = [q["query_id"] for q in default[3]]
    assert len(ids) == len(set(ids))
    for q in default[3]:
        assert bool(q["evidence"]) == (q["category"] != "unanswerable"), q["query_id"]
        asked = _t(q["asked_at"])
        for e in q["evidence"]:
            assert by_id[e]["conversation_id"] == q["conversation_id"]
            assert _t(by_id[e]["timestamp"]) < asked
        assert _t(by_conv[q["conversation_id"]][-1]["timestamp"]) < asked   # after the whole log


# ----------------------------------------------------------------------------- 1.1.0: unanswerable, 1.0.0 unchanged

# sha256 of memlab-lifelog 1.0.0's items.jsonl and queries.jsonl (the last release without unanswerable)
V1_ITEMS_SHA256 = "a3f9cd604dcdf41f09c57416c30f031008afd3ded708bfcbcdd85236fe9df035"
V1_QUERIES_SHA256 = "56ef0335c40493fd79ff0ca6bbb9e046352bb33e72874624fbc4dd419717574a"


def test_items_and_answerable_questions_are_byte_identical_to_1_0_0(default):
    """Unanswerable questions come from their own seeded stream: adding them changed no byte of 1.0.0,
    so metrics on the answerable questions stay comparable across versions."""
    folder = default[0]
    assert hashlib.sha256((folder / "items.jsonl").read_bytes()).hexdigest() == V1_ITEMS_SHA256
    lines = (folder / "queries.jsonl").read_text("utf-8").splitlines(keepends=True)
    answerable = "".join(ln for ln in lines if json.loads(ln)["category"] != "unanswerable")
    assert hashlib.sha256(answerable.encode("utf-8")).hexdigest() == V1_QUERIES_SHA256
    _, items, queries = lifelog.generate(per_user={**lifelog.DEFAULT_PER_USER, "unanswerable": 0})
    assert items == default[2] and queries == [q for q in default[3] if q["category"] != "unanswerable"]


def test_unanswerable_questions_have_no_gold_and_spread_over_users_and_languages(default):
    queries = _of(default[3], "unanswerable")
    langs = Counter(q["meta"]["language"] for q in queries)
    assert 18 <= langs["zh"] <= 22 and 18 <= langs["en"] <= 22, langs
    per_conv = Counter(q["conversation_id"] for q in queries)
    assert len(per_conv) == 8 and all(n == 5 for n in per_conv.values()), per_conv
    for q in queries:
        assert q["evidence"] == [] and q["query_id"].startswith(q["conversation_id"] + "-u")
        key = q["meta"]["topic"].split(":", 1)[1]
        assert q["text"] == lifelog.T.UNANSWERABLE[key][q["meta"]["language"]]
        assert q["meta"]["near"] is lifelog.T.UNANSWERABLE[key]["near"]
    assert {q["meta"]["near"] for q in queries} == {True, False}      # some near a stored subject


def test_no_log_states_what_an_unanswerable_question_asks(default):
    """Every item of every user avoids the words of each unanswerable topic's answer (the pool's
    `absent`: zh substrings, en whole words), so no question of the category has an answer."""
    texts = [i["text"] for i in default[2]]
    for key, topic in lifelog.T.UNANSWERABLE.items():
        zh, en = topic["absent"]
        pattern = re.compile("|".join([re.escape(w) for w in zh]
                                      + [rf"\b{re.escape(w)}\b" for w in en]), re.I)
        hits = [t for t in texts if pattern.search(t)]
        assert hits == [], (key, hits[:3])


def test_unanswerable_questions_are_asked_after_the_log(default, index):
    _, by_conv = index
    for q in _of(default[3], "unanswerable"):
        assert _t(by_conv[q["conversation_id"]][-1]["timestamp"]) < _t(q["asked_at"])


def test_shipped_checksums_are_registered():
    from memlab.bench.datasets import registry as R

    spec = R.info("memlab-lifelog")
    assert set(spec.sha256) == {"card.json", "items.jsonl", "queries.jsonl"}
    assert R.verify("memlab-lifelog", SHIPPED) == {name: True for name in spec.sha256}


# ----------------------------------------------------------------------------- categories

def _of(queries, category):
    return [q for q in queries if q["category"] == category]


def test_superseded_gold_is_the_latest_revision(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "superseded"):
        (gold,) = [by_id[e] for e in q["evidence"]]
        key = gold["meta"]["fact_key"]
        revisions = [i for i in by_conv[q["conversation_id"]] if i["meta"].get("fact_key") == key]
        assert len(revisions) >= 2
        assert sorted(i["meta"]["revision"] for i in revisions) == list(range(1, len(revisions) + 1))
        assert gold["meta"]["revision"] == len(revisions) and gold is revisions[-1]


def test_historical_gold_is_the_old_state(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "historical"):
        (gold,) = [by_id[e] for e in q["evidence"]]
        revisions = [i for i in by_conv[q["conversation_id"]] if i["meta"].get("fact_key") == q["meta"]["fact_key"]]
        assert gold["meta"]["revision"] == 1 and gold is revisions[0] and len(revisions) == 2


def _group(by_conv, q):
    return [i for i in by_conv[q["conversation_id"]] if i["meta"].get("topic") == q["meta"]["topic"]]


def test_temporal_first_gold_is_the_oldest_of_its_group(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "temporal_first"):
        group = _group(by_conv, q)
        assert len(group) >= 3 and q["evidence"] == [group[0]["item_id"]]
        assert q["meta"]["answer"] == group[0]["timestamp"][:10]
        assert not any(w in i["text"] for i in group for w in ("第一次", "又", "first", "again"))


def test_recency_gold_is_the_latest_of_its_topic_and_asked_soon(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "recency"):
        group = _group(by_conv, q)
        assert len(group) >= 3 and q["evidence"] == [group[-1]["item_id"]]
        assert _t(q["asked_at"]) - _t(group[-1]["timestamp"]) < timedelta(days=8)


def test_temporal_when_answer_is_the_event_date(default, index):
    by_id, _ = index
    for q in _of(default[3], "temporal_when"):
        (gold,) = [by_id[e] for e in q["evidence"]]
        assert q["meta"]["answer"] == gold["timestamp"][:10] and q["meta"]["temporal_intent"] == "when"


def test_salient_gold_stands_out_among_trivia_sharing_the_key_word(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "salience"):
        (gold,) = [by_id[e] for e in q["evidence"]]
        assert gold["meta"]["importance"] >= 0.85 and gold["meta"]["emotion"] >= 0.8
        trivia = [i for i in _group(by_conv, q) if i is not gold]
        assert len(trivia) >= 3 and all(i["meta"]["importance"] <= 0.25 for i in trivia)
        word = q["meta"]["keyword"].lower()
        assert all(word in i["text"].lower() for i in [gold, *trivia]) and word in q["text"].lower()


def test_entity_evidence_is_every_item_naming_the_person(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "entity"):
        name = q["meta"]["topic"].split(":", 1)[1]
        assert name in q["text"]
        naming = [i["item_id"] for i in by_conv[q["conversation_id"]] if name in i["text"]]
        assert sorted(q["evidence"]) == naming and 2 <= len(naming) <= 4
        assert all(name in by_id[e]["meta"]["entities"] for e in naming)


def test_permanent_gold_is_the_character_card_asked_months_later(default, index):
    by_id, by_conv = index
    for q in _of(default[3], "permanent"):
        (gold,) = [by_id[e] for e in q["evidence"]]
        assert gold["meta"]["layer"] == "permanent" and gold["meta"]["importance"] == 1.0
        assert gold["session_id"] == by_conv[q["conversation_id"]][0]["session_id"]
        assert _t(q["asked_at"]) - _t(gold["timestamp"]) > timedelta(days=180)


def test_cross_lingual_asks_in_english_about_chinese(default, index):
    by_id, _ = index
    for q in _of(default[3], "cross_lingual"):
        assert not CJK.search(q["text"]) and q["meta"]["language"] == "en"
        assert all(CJK.search(by_id[e]["text"]) for e in q["evidence"])
        assert not q["conversation_id"].endswith("-en")


def test_paraphrases_share_fewer_words_with_their_fact_than_plain_questions(default, index):
    by_id, _ = index

    def overlap(category):
        shares = [len(_terms(q["text"]) & _terms(by_id[q["evidence"][0]]["text"])) for q in _of(default[3], category)]
        return sum(shares) / len(shares)

    assert overlap("paraphrase") < 0.5 * overlap("fact")
    assert overlap("cross_lingual") < 0.2


def test_questions_do_not_contain_their_answer(default):
    for q in default[3]:
        answer = q["meta"].get("answer")
        if answer and q["category"] != "temporal_first":
            assert answer.lower() not in q["text"].lower(), q


# ----------------------------------------------------------------------------- language sanity

def test_texts_are_filled_and_in_their_language(default):
    _, _, items, queries = default
    records = [(r["text"], r["meta"]["language"]) for r in [*items, *queries]]
    for text, lang in records:
        assert "{" not in text and "}" not in text and text == text.strip() and "  " not in text, text
        if lang == "zh":
            assert CJK.search(text) and text[-1] in "。！？", text
            assert not re.search(r"[。，！？]{2}", text.replace("！！", "")), text
        else:
            assert not CJK.search(text) and text[-1] in ".!?", text
            assert text[0].isupper() or text[0].isdigit(), text
            assert not re.search(r"[.,;:]{2}| [.,;:!?]", text), text


def test_texts_vary(default):
    facts = [i["text"] for i in default[2] if i["meta"]["kind"] != "trivia"]
    assert len(set(facts)) > 0.75 * len(facts)        # across users, the same templates and values recur
    per_user = defaultdict(list)
    for i in default[2]:
        per_user[(i["conversation_id"], i["meta"]["kind"] == "trivia")].append(i["text"])
    for (conv, trivia), texts in per_user.items():
        if trivia:                                    # daily chatter may repeat, but not mostly
            assert len(set(texts)) > 0.4 * len(texts), conv
        else:                                         # a user never states a planned thing twice verbatim
            assert len(set(texts)) == len(texts), conv


# ----------------------------------------------------------------------------- options, errors, entry point

def test_small_generation_keeps_the_invariants():
    card, items, queries = lifelog.generate(seed=7, users=3, months=3, languages=("mixed", "en"))
    ids = {i["item_id"]: i for i in items}
    assert [c for c in dict.fromkeys(i["conversation_id"] for i in items)] == ["u01-mixed", "u02-en", "u03-mixed"]
    for q in queries:
        assert all(_t(ids[e]["timestamp"]) < _t(q["asked_at"]) for e in q["evidence"])
    assert not any(q["category"] == "cross_lingual" and q["conversation_id"].endswith("-en") for q in queries)


@pytest.mark.parametrize("kwargs, field", [
    ({"users": 0}, "users"), ({"months": 1}, "months"), ({"per_user": {"gossip": 1}}, "per_user.gossip"),
    ({"per_user": {"superseded": 9}}, "per_user.superseded"), ({"languages": ("fr",)}, "languages"),
    ({"start": "March"}, "start"), ({"trivia_per_day": (3, 1)}, "trivia_per_day"), ({"ask_days": (0, 2)}, "ask_days"),
    ({"policy": {**lifelog.DEFAULT_POLICY, "salient": (0.9, 0.8, 0.8, 0.9)}}, "policy.salient"),
    ({"long_term_threshold": 1.5}, "long_term_threshold"),
])
def test_bad_options_raise_naming_the_field(kwargs, field):
    with pytest.raises(InvalidInput) as err:
        lifelog.generate(**kwargs)
    assert err.value.field == field and field in str(err.value)


def test_entry_point_writes_the_folder(tmp_path, capsys):
    lifelog.main(["--out", str(tmp_path / "x"), "--seed", "3", "--users", "1", "--months", "3"])
    assert all((tmp_path / "x" / n).is_file() for n in FILES)
    card = json.loads((tmp_path / "x" / "card.json").read_text("utf-8"))
    assert card["source"] == "generated by memlab.bench.lifelog (seed 3, users 1, months 3)"
    assert "wrote" in capsys.readouterr().out

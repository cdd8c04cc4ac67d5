"""memlab-lifelog: the project's own bilingual recall benchmark, made by a deterministic seeded generator.

Several users each tell a companion agent about their life for some months (one item = one thing the
user said; ``session_id`` = the day; timestamps strictly increasing, in the user's UTC offset). The
things said are planned so that every mechanism of the specs has questions with gold evidence:
identity facts of the character card (``permanent``), plain and paraphrased facts, English questions
about Chinese facts, recency, first-time and dated events, old states, superseded revisions,
salient events hidden among trivia that share their words, and people. Daily chatter fills the days.

The phrase banks are in `memlab.bench.lifelog_templates`. Everything is drawn from ``random.Random``
seeded with strings, so the same arguments give the same bytes on every machine and Python version.

Run ``python -m memlab.bench.lifelog --out datasets/memlab-lifelog`` to regenerate the shipped copy.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from memlab.bench import lifelog_templates as T
from memlab.errors import InvalidInput

NAME, VERSION, DEFAULT_SEED = "memlab-lifelog", "1.1.0", 20261129
CATEGORIES = ("fact", "paraphrase", "recency", "temporal_first", "temporal_when", "historical",
              "superseded", "salience", "entity", "permanent", "cross_lingual", "unanswerable")
# Questions per user and category. cross_lingual applies to users who write Chinese (zh, mixed).
# unanswerable (1.1.0): drawn from a stream of their own, so every 1.0.0 item and question is unchanged.
DEFAULT_PER_USER: Mapping[str, int] = {
    "fact": 5, "paraphrase": 5, "recency": 4, "temporal_first": 3, "temporal_when": 4, "historical": 3,
    "superseded": 4, "salience": 4, "entity": 3, "permanent": 5, "cross_lingual": 5, "unanswerable": 5}
DEFAULT_LANGUAGES = ("zh", "zh", "zh", "zh", "en", "en", "en", "mixed")
# Writer policy per item kind: (importance low, high, emotion intensity low, high), drawn uniformly.
DEFAULT_POLICY: Mapping[str, tuple[float, float, float, float]] = {
    "card": (1.0, 1.0, 0.0, 0.1), "trivia": (0.05, 0.25, 0.0, 0.2), "fact": (0.45, 0.7, 0.1, 0.35),
    "revision": (0.6, 0.8, 0.2, 0.5), "event": (0.35, 0.6, 0.2, 0.5), "salient": (0.88, 0.98, 0.8, 0.97)}
_COGNITIVE = {"card": "semantic", "fact": "semantic", "revision": "semantic", "trivia": "episodic",
              "event": "episodic", "salient": "episodic"}
_INTENT = {"recency": "recent", "temporal_first": "first", "temporal_when": "when", "historical": "historical"}
_POOL_SIZES = {"recency": len(T.RECENCY), "temporal_first": len(T.FIRST), "temporal_when": len(T.WHEN),
               "historical": len(T.HISTORICAL), "superseded": len(T.SUPERSEDED), "salience": len(T.SALIENCE),
               "entity": min(len(v) for v in T.FRIENDS.values()), "permanent": len(T.CARD),
               "unanswerable": len(T.UNANSWERABLE)}


def _side(value: Any, lang: str) -> str:
    """The ``lang`` side of a slot value: ``(zh, en)`` pairs pick one, plain strings are shared."""
    return value[0 if lang == "zh" else 1] if isinstance(value, tuple) else str(value)


def _slot_of(template: str) -> str | None:
    """The first ``{slot}`` of a template (the value a group's statements vary), or None."""
    return next((name for _, name, _, _ in string.Formatter().parse(template) if name), None)


def _entity_names(slots: Mapping[str, Any], lang: str) -> list[str]:
    return [_side(v, lang).strip("《》") for k, v in slots.items() if k in T.ENTITY_SLOTS]


class _Log:
    """One user's planned life: item drafts (day, language, text, meta) and question drafts."""

    def __init__(self, *, rng: random.Random, lang: str, days: int, policy: Mapping[str, tuple],
                 long_term_threshold: float) -> None:
        self.rng, self.lang, self.days = rng, lang, days
        self.policy, self.long_term_threshold = policy, long_term_threshold
        self.items: list[dict[str, Any]] = []
        self.queries: list[dict[str, Any]] = []
        self.static_topics = rng.sample(list(T.FACTS), len(T.FACTS))
        self.friends = rng.sample(T.FRIENDS[lang], len(T.FRIENDS[lang]))

    def plan_lang(self) -> str:
        """The language of one plan: the user's own, or a coin flip for a mixed-language user."""
        return self.rng.choice(("zh", "en")) if self.lang == "mixed" else self.lang

    def day_in(self, lo: float, hi: float) -> int:
        """A day drawn uniformly between two fractions of the log (day 0 is the character card)."""
        a, b = max(1, int(lo * self.days)), max(1, min(self.days - 1, int(hi * self.days)))
        return self.rng.randint(a, max(a, b))

    def days_in(self, k: int, lo: int, hi: int) -> list[int]:
        """``k`` distinct sorted days in ``[lo, hi]``."""
        return sorted(self.rng.sample(range(max(1, lo), max(lo + k, hi + 1)), k))

    def add(self, day: int, lang: str, text: str, kind: str, *, topic: str | None = None,
            entities: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
        lo, hi, elo, ehi = self.policy[kind]
        importance = round(self.rng.uniform(lo, hi), 2)
        layer = ("permanent" if kind == "card" else
                 "long_term" if importance > self.long_term_threshold else "short_term")
        meta = {"language": lang, "kind": kind, "importance": importance,
                "emotion": round(self.rng.uniform(elo, ehi), 2), "layer": layer,
                "cognitive_layer": _COGNITIVE[kind], "entities": list(dict.fromkeys(entities)), **extra}
        if topic is not None:
            meta["topic"] = topic
        item = {"day": day, "lang": lang, "text": text, "meta": meta}
        self.items.append(item)
        return item

    def say(self, day: int, lang: str, templates: Sequence[str], slots: Mapping[str, Any], kind: str,
            **meta: Any) -> dict[str, Any]:
        values = {k: _side(v, lang) for k, v in slots.items()}
        text = self.rng.choice(templates).format_map(values)
        return self.add(day, lang, text, kind, entities=_entity_names(slots, lang), **meta)

    def ask(self, category: str, lang: str, templates: Sequence[str], slots: Mapping[str, Any],
            evidence: Sequence[dict[str, Any]], *, topic: str, answer: str | None = None,
            answer_is_date: bool = False, soon: bool = False, **meta: Any) -> None:
        """Record a question. ``answer_is_date``: the answer is the gold item's date (known once stamped);
        ``soon``: asked 1-2 days after the log's end instead of 1-30 (recency)."""
        text = self.rng.choice(templates).format_map({k: _side(v, lang) for k, v in slots.items()})
        self.queries.append({"category": category, "lang": lang, "text": text, "evidence": list(evidence),
                             "topic": topic, "answer": answer.strip("《》") if answer else None,
                             "answer_is_date": answer_is_date, "soon": soon, "meta": meta})


# ----------------------------------------------------------------------------- planners, one per category

def _static(log: _Log, n: int, category: str) -> None:
    for _ in range(n):
        key = log.static_topics.pop()
        topic = T.FACTS[key]
        slots = log.rng.choice(topic["values"])
        lang = "zh" if category == "cross_lingual" else log.plan_lang()
        qlang = "en" if category == "cross_lingual" else lang
        item = log.say(log.day_in(0.0, 0.6), lang, topic[lang]["say"], slots, "fact", topic=f"fact:{key}")
        bank = topic[qlang]["para" if category == "paraphrase" else "ask"]
        log.ask(category, qlang, bank, slots, [item], topic=f"fact:{key}",
                answer=_side(slots[topic["answer"]], lang))


def _recency(log: _Log, n: int) -> None:
    for key in log.rng.sample(list(T.RECENCY), n):
        topic, lang = T.RECENCY[key], log.plan_lang()
        k = log.rng.randint(3, 4)
        values = log.rng.sample(topic["values"], k)
        days = log.days_in(k - 1, 1, log.days - 12) + [log.rng.randint(log.days - 5, log.days - 1)]
        slot = _slot_of(topic[lang]["say"][0])
        items = [log.say(d, lang, topic[lang]["say"], {slot: v}, "event", topic=f"recency:{key}")
                 for d, v in zip(days, values)]
        log.ask("recency", lang, topic[lang]["ask"], {}, [items[-1]], topic=f"recency:{key}",
                answer=_side(values[-1], lang), soon=True)


def _temporal_first(log: _Log, n: int) -> None:
    for key in log.rng.sample(list(T.FIRST), n):
        group, lang = T.FIRST[key], log.plan_lang()
        slots = {"venue": log.rng.choice(group["values"])} if "values" in group else {}
        k = log.rng.randint(3, 4)
        first = log.day_in(0.0, 0.5)
        days = [first] + log.days_in(k - 1, first + 1, log.days - 1)
        texts = log.rng.sample(group[lang]["say"], k)
        items = [log.say(d, lang, [t], slots, "event", topic=f"first:{key}") for d, t in zip(days, texts)]
        log.ask("temporal_first", lang, group[lang]["ask"], slots, [items[0]], topic=f"first:{key}",
                answer_is_date=True)


def _temporal_when(log: _Log, n: int) -> None:
    for key in log.rng.sample(list(T.WHEN), n):
        event, lang = T.WHEN[key], log.plan_lang()
        slots = {_slot_of(event[lang]["ask"][0]): log.rng.choice(event["values"])} if "values" in event else {}
        item = log.say(log.day_in(0.0, 0.97), lang, event[lang]["say"], slots, "event", topic=f"when:{key}")
        log.ask("temporal_when", lang, event[lang]["ask"], slots, [item], topic=f"when:{key}", answer_is_date=True)


def _historical(log: _Log, n: int) -> None:
    for key in log.rng.sample(list(T.HISTORICAL), n):
        topic, lang = T.HISTORICAL[key], log.plan_lang()
        old, new = log.rng.choice(topic["values"])
        first = log.say(log.day_in(0.0, 0.35), lang, topic[lang]["old"], {"old": old}, "revision",
                        topic=f"history:{key}", fact_key=key, revision=1)
        log.say(log.day_in(0.5, 1.0), lang, topic[lang]["new"], {"new": new}, "revision",
                topic=f"history:{key}", fact_key=key, revision=2)
        log.ask("historical", lang, topic[lang]["ask"], {}, [first], topic=f"history:{key}",
                answer=_side(old, lang), fact_key=key)


def _phone(rng: random.Random, lang: str) -> str:
    if lang == "zh":
        digits = rng.choice("358") + "".join(rng.choice("0123456789") for _ in range(9))
        return "1" + digits
    return f"({rng.choice(('206', '312', '415', '617', '720', '512'))}) 555-01{rng.randint(0, 99):02d}"


def _superseded(log: _Log, n: int) -> None:
    for key in log.rng.sample(list(T.SUPERSEDED), n):
        topic, lang = T.SUPERSEDED[key], log.plan_lang()
        k = log.rng.randint(*topic["revisions"])
        values = (log.rng.sample(topic["values"], k) if topic["values"] is not None
                  else [_phone(log.rng, lang) for _ in range(k)])
        days = [log.day_in(0.0, 0.25)]
        days += log.days_in(k - 1, max(days[0] + 2, int(0.3 * log.days)), log.days - 3)
        items = [log.say(d, lang, topic[lang]["first" if r == 0 else "later"], {topic["slot"]: v}, "revision",
                         topic=f"supersede:{key}", fact_key=key, revision=r + 1)
                 for r, (d, v) in enumerate(zip(days, values))]
        if key == "partner" and days[1] - days[0] >= 2:
            log.add(log.rng.randint(days[0] + 1, days[1] - 1), lang, log.rng.choice(T.BREAKUP[lang]), "event",
                    topic="supersede:partner:breakup")
        log.ask("superseded", lang, topic[lang]["ask"], {}, [items[-1]], topic=f"supersede:{key}",
                answer=_side(values[-1], lang), fact_key=key)


def _salience(log: _Log, n: int) -> None:
    for key in log.rng.sample(list(T.SALIENCE), n):
        topic, lang = T.SALIENCE[key], log.plan_lang()
        names = topic.get("entities", {}).get(lang, [])
        event = log.add(log.day_in(0.0, 0.97), lang, topic["event"][lang], "salient",
                        topic=f"salience:{key}", entities=names)
        for text in log.rng.sample(topic["trivia"][lang], log.rng.randint(3, 4)):
            log.add(log.day_in(0.0, 1.0), lang, text, "trivia", topic=f"salience:{key}")
        log.ask("salience", lang, topic["ask"][lang], {}, [event], topic=f"salience:{key}",
                keyword=topic["keyword"][lang])


def _entity(log: _Log, n: int) -> None:
    for _ in range(n):
        name, gender = log.friends.pop()
        slots = {"p": name, **T.PRONOUNS[gender]}
        k = log.rng.randint(2, 4)
        picks = log.rng.sample(range(len(T.ENTITY["zh"]["say"])), k)
        items = []
        for day, i in zip(log.days_in(k, 1, log.days - 1), picks):
            lang = log.plan_lang()
            items.append(log.say(day, lang, [T.ENTITY[lang]["say"][i]], slots, "event", topic=f"entity:{name}"))
        lang = log.plan_lang()
        log.ask("entity", lang, T.ENTITY[lang]["ask"], slots, items,
                topic=f"entity:{name}")


_PLANNERS: dict[str, Callable[[_Log, int], None]] = {
    "fact": lambda log, n: _static(log, n, "fact"),
    "paraphrase": lambda log, n: _static(log, n, "paraphrase"),
    "cross_lingual": lambda log, n: _static(log, n, "cross_lingual") if log.lang != "en" else None,
    "recency": _recency, "temporal_first": _temporal_first, "temporal_when": _temporal_when,
    "historical": _historical, "superseded": _superseded, "salience": _salience, "entity": _entity,
}


def _card(log: _Log, n: int, profile: tuple) -> None:
    """Day 0: the character card (permanent layer, importance 1.0); ``n`` of its fields are asked."""
    (full, nick), month, day = profile, log.rng.randint(1, 12), log.rng.randint(1, 28)
    slots = {"name": {"full": full, "nick": nick},
             "birthday": {"month": str(month), "day": str(day), "month_en": T.MONTHS_EN[month - 1]},
             "hometown": {"hometown": log.rng.choice(T.CARD["hometown"]["values"])},
             "allergy": {"allergen": log.rng.choice(T.CARD["allergy"]["values"])},
             "school": {"school": log.rng.choice(T.CARD["school"]["values"])}}
    asked = set(log.rng.sample(list(T.CARD), n))
    for key, field in T.CARD.items():
        lang = log.plan_lang()
        item = log.say(0, lang, field[lang]["say"], slots[key], "card", topic=f"card:{key}")
        answer = f"{month:02d}-{day:02d}" if key == "birthday" else _side(next(iter(slots[key].values())), lang)
        if key in asked:
            log.ask("permanent", lang, field[lang]["ask"], {}, [item], topic=f"card:{key}", answer=answer)


def _trivia(log: _Log, *, active_day_rate: float, trivia_per_day: tuple[int, int]) -> None:
    planned = Counter(item["day"] for item in log.items)
    seen = {item["text"] for item in log.items}
    lo, hi = trivia_per_day
    for day in range(1, log.days):
        if planned[day]:
            count = log.rng.randint(0, max(0, hi - 1))
        else:
            count = log.rng.randint(lo, hi) if log.rng.random() < active_day_rate else 0
        for _ in range(count):
            lang = log.plan_lang()
            for _attempt in range(6):   # avoid repeating a sentence the user already said
                template = log.rng.choice(T.TRIVIA[lang])
                text = template.format_map({k: _side(log.rng.choice(v), lang) for k, v in T.TRIVIA_SLOTS.items()})
                if text not in seen:
                    break
            seen.add(text)
            log.add(day, lang, text, "trivia")


# ----------------------------------------------------------------------------- time and records

def _stamp(log: _Log, start: date, tz: timezone) -> None:
    """Order each day's items and give them strictly increasing times within one evening-sized session."""
    by_day: dict[int, list[dict[str, Any]]] = {}
    for item in log.items:
        by_day.setdefault(item["day"], []).append(item)
    for day in sorted(by_day):
        items = by_day[day]
        if day > 0:
            log.rng.shuffle(items)
        minute = 9 * 60 if day == 0 else log.rng.randint(7 * 60, 21 * 60 + 30)
        minute = min(minute, 23 * 60 + 50 - 10 * len(items))
        at = datetime.combine(start + timedelta(days=day), time(0), tzinfo=tz) + timedelta(minutes=minute)
        for item in items:
            at += timedelta(minutes=log.rng.randint(1, 9), seconds=log.rng.randint(0, 59))
            item["at"] = at
    log.items = [item for day in sorted(by_day) for item in by_day[day]]


def _user(*, index: int, seed: int, lang: str, profile: tuple, tz_name: str, start: date, days: int,
          per_user: Mapping[str, int], policy: Mapping[str, tuple], long_term_threshold: float,
          active_day_rate: float, trivia_per_day: tuple[int, int], ask_days: tuple[int, int],
          ask_days_recency: tuple[int, int]) -> tuple[list[dict], list[dict]]:
    rng = random.Random(f"{NAME}/{seed}/user/{index}")
    log = _Log(rng=rng, lang=lang, days=days, policy=policy, long_term_threshold=long_term_threshold)
    _card(log, per_user.get("permanent", 0), profile)
    for category, planner in _PLANNERS.items():
        planner(log, per_user.get(category, 0))
    _trivia(log, active_day_rate=active_day_rate, trivia_per_day=trivia_per_day)
    sign, hh, mm = tz_name[0], int(tz_name[1:3]), int(tz_name[4:6])
    tz = timezone((1 if sign == "+" else -1) * timedelta(hours=hh, minutes=mm))
    _stamp(log, start + timedelta(days=rng.randint(0, 20)), tz)

    conv = f"u{index + 1:02d}-{lang}"
    speaker = _side(profile[0], "zh" if lang == "zh" else "en")
    items, ids = [], {}
    for n, draft in enumerate(log.items, start=1):
        ids[id(draft)] = f"{conv}-{n:04d}"
        items.append({"conversation_id": conv, "item_id": ids[id(draft)], "session_id": draft["at"].date().isoformat(),
                      "speaker": speaker, "text": draft["text"], "timestamp": draft["at"].isoformat(),
                      "meta": draft["meta"]})
    end = log.items[-1]["at"]
    drafts = []
    for q in log.queries:   # asked on a later day than the last item, between 08:00 and 23:00
        later = rng.randint(*ask_days_recency) if q["soon"] else rng.randint(*ask_days)
        asked = (datetime.combine(end.date() + timedelta(days=later), time(0), tzinfo=tz)
                 + timedelta(minutes=rng.randint(8 * 60, 22 * 60 + 59), seconds=rng.randint(0, 59)))
        gold = q["evidence"]
        answer = gold[0]["at"].date().isoformat() if q["answer_is_date"] else q["answer"]
        meta = {"language": q["lang"], "evidence_language": gold[0]["lang"], "topic": q["topic"], **q["meta"]}
        if answer is not None:
            meta["answer"] = answer
        if q["category"] in _INTENT:
            meta["temporal_intent"] = _INTENT[q["category"]]
        drafts.append((asked, CATEGORIES.index(q["category"]), {
            "conversation_id": conv, "text": q["text"], "asked_at": asked.isoformat(), "category": q["category"],
            "evidence": [ids[id(g)] for g in gold], "meta": meta}))
    drafts.sort(key=lambda d: (d[0], d[1], d[2]["meta"]["topic"]))
    queries = [{"query_id": f"{conv}-q{n:02d}", **d[2]} for n, d in enumerate(drafts, start=1)]
    queries += _unanswerable(index=index, seed=seed, lang=lang, conv=conv, end=end, tz=tz,
                             n=per_user.get("unanswerable", 0), ask_days=ask_days)
    return items, queries


def _unanswerable(*, index: int, seed: int, lang: str, conv: str, end: datetime, tz: timezone, n: int,
                  ask_days: tuple[int, int]) -> list[dict]:
    """``n`` questions about things the user never said (no gold), from a random stream of their own
    (so the rest of the dataset is the same with or without them), ids ``{conv}-u01``..., asked 1-30 days
    after the log like the others. A mixed-language user asks them in English: with the default 4 zh and 3 en
    users that balances the set at 20 zh + 20 en."""
    rng = random.Random(f"{NAME}/{seed}/unanswerable/{index}")
    drafts = []
    for key in rng.sample(sorted(T.UNANSWERABLE), n):
        topic, qlang = T.UNANSWERABLE[key], "en" if lang == "mixed" else lang
        asked = (datetime.combine(end.date() + timedelta(days=rng.randint(*ask_days)), time(0), tzinfo=tz)
                 + timedelta(minutes=rng.randint(8 * 60, 22 * 60 + 59), seconds=rng.randint(0, 59)))
        drafts.append((asked, key, {"conversation_id": conv, "text": topic[qlang], "asked_at": asked.isoformat(),
                                    "category": "unanswerable", "evidence": [],
                                    "meta": {"language": qlang, "near": topic["near"], "topic": f"unanswerable:{key}"}}))
    drafts.sort(key=lambda d: (d[0], d[1]))
    return [{"query_id": f"{conv}-u{m:02d}", **d[2]} for m, d in enumerate(drafts, start=1)]


def _check(*, users: int, months: int, per_user: Mapping[str, int], languages: Sequence[str],
           start: str, active_day_rate: float, trivia_per_day: tuple[int, int]) -> date:
    if not isinstance(users, int) or not 1 <= users <= 64:
        raise InvalidInput("users", "an integer in [1, 64]", users)
    if not isinstance(months, int) or not 3 <= months <= 36:
        raise InvalidInput("months", "an integer in [3, 36] (questions need room to space their events)", months)
    for key, count in per_user.items():
        if key not in CATEGORIES:
            raise InvalidInput(f"per_user.{key}", f"a category, one of {', '.join(CATEGORIES)}", key)
        if not isinstance(count, int) or not 0 <= count <= _POOL_SIZES.get(key, len(T.FACTS)):
            raise InvalidInput(f"per_user.{key}", f"an integer in [0, {_POOL_SIZES.get(key, len(T.FACTS))}]", count)
    statics = sum(per_user.get(k, 0) for k in ("fact", "paraphrase", "cross_lingual"))
    if statics > len(T.FACTS):
        raise InvalidInput("per_user", f"fact + paraphrase + cross_lingual at most {len(T.FACTS)}", statics)
    if not languages or any(lang not in T.USERS for lang in languages):
        raise InvalidInput("languages", "a non-empty sequence of 'zh', 'en', 'mixed'", list(languages))
    if not 0.0 <= active_day_rate <= 1.0:
        raise InvalidInput("active_day_rate", "a probability in [0, 1]", active_day_rate)
    lo, hi = trivia_per_day
    if not 0 <= lo <= hi <= 8:
        raise InvalidInput("trivia_per_day", "(low, high) with 0 <= low <= high <= 8", trivia_per_day)
    try:
        return date.fromisoformat(start)
    except (TypeError, ValueError):
        raise InvalidInput("start", "an ISO date such as '2025-03-03'", start) from None


def generate(*, seed: int = DEFAULT_SEED, users: int = 8, months: int = 8,
             per_user: Mapping[str, int] = DEFAULT_PER_USER, languages: Sequence[str] = DEFAULT_LANGUAGES,
             start: str = "2025-03-03", policy: Mapping[str, tuple[float, float, float, float]] = DEFAULT_POLICY,
             long_term_threshold: float = 0.6, active_day_rate: float = 0.8,
             trivia_per_day: tuple[int, int] = (1, 3), ask_days: tuple[int, int] = (1, 30),
             ask_days_recency: tuple[int, int] = (1, 2)) -> tuple[dict, list[dict], list[dict]]:
    """Generate the dataset as plain canonical records: ``(card, items, queries)``.

    seed: everything is drawn from it. users: conversations; user ``i`` writes ``languages[i % len]``
    ("zh", "en" or "mixed": each plan drawn in zh or en). months: length of each log (30.44 days a
    month; day 0 holds the character card, each user starts up to 20 days after ``start``).
    per_user: questions per user and category (default `DEFAULT_PER_USER`). policy: importance and
    emotion-intensity ranges per item kind. long_term_threshold: importance above it is
    ``layer="long_term"`` (Reverie: 0.6). active_day_rate: chance a day without planned items has
    chatter; trivia_per_day: how many chatter items such a day holds. ask_days: questions are asked
    this many days after the log's last day (ask_days_recency for recency questions, whose gold is
    placed in the log's last 5 days).
    """
    first = _check(users=users, months=months, per_user=per_user, languages=languages, start=start,
                   active_day_rate=active_day_rate, trivia_per_day=trivia_per_day)
    for name, (lo, hi) in (("ask_days", ask_days), ("ask_days_recency", ask_days_recency)):
        if not 1 <= lo <= hi:
            raise InvalidInput(name, "(low, high) days with 1 <= low <= high", (lo, hi))
    for kind in DEFAULT_POLICY:
        bounds = policy.get(kind)
        ordered = bounds is not None and len(bounds) == 4 and 0 <= bounds[0] <= bounds[1] <= 1 \
            and 0 <= bounds[2] <= bounds[3] <= 1
        if not ordered:
            raise InvalidInput(f"policy.{kind}", "(importance low, high, emotion low, high), each pair "
                               "ordered in [0, 1]", bounds)
    if not 0.0 <= long_term_threshold <= 1.0:
        raise InvalidInput("long_term_threshold", "an importance in [0, 1]", long_term_threshold)
    days = int(round(months * 30.44))
    master = random.Random(f"{NAME}/{seed}/cast")
    profiles = {lang: master.sample(T.USERS[lang], len(T.USERS[lang])) for lang in T.USERS}
    used: Counter[str] = Counter()
    items: list[dict] = []
    queries: list[dict] = []
    for index in range(users):
        lang = languages[index % len(languages)]
        profile = profiles[lang][used[lang] % len(profiles[lang])]
        used[lang] += 1
        its, qs = _user(index=index, seed=seed, lang=lang, profile=profile,
                        tz_name=master.choice(T.TIMEZONES[lang]), start=first, days=days, per_user=per_user,
                        policy=policy, long_term_threshold=long_term_threshold,
                        active_day_rate=active_day_rate, trivia_per_day=trivia_per_day, ask_days=ask_days,
                        ask_days_recency=ask_days_recency)
        items += its
        queries += qs
    card = {"name": NAME, "version": VERSION, "language": "mixed", "license": "CC0-1.0",
            "source": f"generated by memlab.bench.lifelog (seed {seed}, users {users}, months {months})",
            "granularity": "utterance",
            "description": ("Synthetic bilingual life-logs: each user tells a companion agent about their life "
                            f"for {months} months, in Chinese, English or both. Questions with gold evidence "
                            "exercise permanent identity facts, plain and paraphrased facts, cross-lingual "
                            "recall, recency, first-time and dated events, old states, superseded revisions, "
                            "salient events among look-alike trivia, and people; unanswerable questions (no gold "
                            "evidence) ask about things never said, to measure abstention.")}
    return card, items, queries


def render_readme(*, card: Mapping[str, str], items: Sequence[Mapping], queries: Sequence[Mapping],
                  seed: int) -> str:
    """The dataset folder's README.md: what it is, counts, one example per category, how to regenerate."""
    by_id = {item["item_id"]: item for item in items}
    cat_lang = Counter((q["category"], q["meta"]["language"]) for q in queries)
    lines = [f"# {card['name']} {card['version']}", "", card["description"], "",
             f"Licence {card['license']}; {card['source']}. Canonical memlab format (DESIGN.md): `card.json`, "
             "`items.jsonl` (one thing the user told the agent per line; `session_id` is the day; `speaker` is the "
             "user; timestamps strictly increase within a conversation, in the user's UTC offset), `queries.jsonl` "
             "(gold `evidence` item ids). Every question is asked after its conversation's last item, so replaying "
             "a whole conversation and then asking at `asked_at` is faithful; recency questions are asked 1-2 days "
             "after the log's last day (their gold falls in its last 5 days), the others 1-30 days after it.", "",
             "Item `meta`: `language`, `kind` (card, fact, revision, event, salient, trivia), `importance` and "
             "`emotion` (intensity) in [0, 1] from the writer policy, `layer` (permanent, or long_term above "
             "importance 0.6, else short_term), `cognitive_layer` (semantic, episodic), `entities`, and where "
             "relevant `topic`, `fact_key`, `revision`. Question `meta`: `language`, `evidence_language`, `topic`, "
             "`answer` (a date `YYYY-MM-DD` for temporal questions), `temporal_intent`, `fact_key`; unanswerable "
             "questions: `language`, `topic`, `near` (the log speaks of the same subject, never of the detail asked).", "",
             "Since 1.1.0 each user also asks 5 `unanswerable` questions (ids `<conversation>-u01`...; empty `evidence`): "
             "the right answer is no memory at all. They are drawn from a random stream of their own, so `items.jsonl` "
             "and every 1.0.0 question are byte for byte those of 1.0.0 and recall metrics stay comparable.", "",
             "## Counts", "",
             f"{len({i['conversation_id'] for i in items})} conversations, {len(items)} items, "
             f"{len(queries)} questions (by the question's language; cross_lingual evidence is Chinese).",
             "", "| category | zh questions | en questions | total |", "|---|---|---|---|"]
    for cat in CATEGORIES:
        zh, en = cat_lang[(cat, "zh")], cat_lang[(cat, "en")]
        lines.append(f"| `{cat}` | {zh} | {en} | {zh + en} |")
    lines += ["", "| conversation | speaker | items | questions | first day | last day |", "|---|---|---|---|---|---|"]
    for conv in dict.fromkeys(i["conversation_id"] for i in items):
        its = [i for i in items if i["conversation_id"] == conv]
        nq = sum(q["conversation_id"] == conv for q in queries)
        first, last = its[0]["session_id"], its[-1]["session_id"]
        lines.append(f"| {conv} | {its[0]['speaker']} | {len(its)} | {nq} | {first} | {last} |")
    lines += ["", "## Categories", "", "| category | what it exercises | example question | gold evidence |",
              "|---|---|---|---|"]
    for cat in CATEGORIES:
        q = next((q for q in queries if q["category"] == cat), None)
        gold = (" / ".join(by_id[e]["text"] for e in q["evidence"]) or "(none)") if q else ""
        lines.append(f"| `{cat}` | {T.CATEGORY_DOCS[cat]} | {q['text'] if q else ''} | {gold} |")
    lines += ["", "## Regenerate", "", "```",
              f"python -m memlab.bench.lifelog --out datasets/{card['name']} --seed {seed}", "```", "",
              "The generator is deterministic: the same arguments give the same bytes; "
              "`tests/bench/test_lifelog.py` checks that this folder equals a fresh generation.", ""]
    return "\n".join(lines)


def _jsonl(records: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)


def write(path: str | Path, *, seed: int = DEFAULT_SEED, **options: Any) -> Path:
    """Generate (same keyword arguments as `generate`) and write card.json, items.jsonl, queries.jsonl
    and README.md into the folder ``path`` (created if needed). Returns the folder."""
    card, items, queries = generate(seed=seed, **options)
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"card.json": json.dumps(card, ensure_ascii=False, sort_keys=True, indent=2) + "\n",
             "items.jsonl": _jsonl(items), "queries.jsonl": _jsonl(queries),
             "README.md": render_readme(card=card, items=items, queries=queries, seed=seed)}
    for name, text in files.items():
        (folder / name).write_bytes(text.encode("utf-8"))
    return folder


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m memlab.bench.lifelog --out DIR [--seed N] [--users N] [--months N]``."""
    parser = argparse.ArgumentParser(prog="python -m memlab.bench.lifelog", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True,
                        help="folder to write (card.json, items.jsonl, queries.jsonl, README.md)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--months", type=int, default=8)
    args = parser.parse_args(argv)
    folder = write(args.out, seed=args.seed, users=args.users, months=args.months)
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()

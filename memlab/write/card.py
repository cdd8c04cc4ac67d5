"""The permanent layer from a character card (Reverie §4.2).

"永久层不在聊天里写入，它由角色卡在每次启动时重新生成，「名字 / 生日 / 性格 / 爱好」这些身份锚点内容哈希
固定，换角色卡会整体更新，但用户自己存的记忆不动。永久层的记忆 importance=1.0，永不遗忘、永不错记。"

A card is a YAML or JSON mapping of fields, named in English or Chinese (``name`` / ``名字``,
``birthday`` / ``生日``, ``personality`` / ``性格``, ``hobbies`` / ``爱好``, ...: :data:`FIELDS`).
Each field becomes one anchor memory whose text is the field's template (``card.templates_zh`` or
``card.templates_en``, by the card's language) filled with the value (a list joined by
``card.separator_*``); each item of ``facts`` / ``设定`` is an anchor of its own.

Anchors are keyed by content: ``id = "pm_" + sha256(agent, user, text)[:32]``, so re-syncing a
card changes only what changed: an anchor whose text is unchanged keeps its row byte for byte, a
new one is inserted, one the card no longer yields is **deleted** (memlab's choice: the card is the
truth of the permanent layer and is itself its history; a retired copy would still be a permanent
memory to every query). A changed field is the old anchor deleted and the new inserted. Only rows
with ``source_type = "character_card"`` of the same agent and user are ever touched: memories
users stored, permanent ones included, never are.

Pure functions; :meth:`memlab.api.MemoryStore.sync_card` reads the existing anchors and writes
the plan in one transaction.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from memlab.config import CardConfig
from memlab.errors import CardError, ConfigError
from memlab.types import MemoryRecord
from memlab.yamlfile import load_yaml

SOURCE_TYPE = "character_card"

#: canonical field -> its accepted names (English and Chinese), in anchor order
FIELDS: dict[str, tuple[str, ...]] = {
    "name": ("name", "名字", "姓名", "名称"),
    "nickname": ("nickname", "昵称", "外号"),
    "gender": ("gender", "性别"),
    "age": ("age", "年龄"),
    "birthday": ("birthday", "生日"),
    "occupation": ("occupation", "job", "职业"),
    "personality": ("personality", "性格", "个性"),
    "hobbies": ("hobbies", "爱好", "兴趣"),
    "likes": ("likes", "喜欢", "喜好"),
    "dislikes": ("dislikes", "讨厌", "不喜欢"),
    "background": ("background", "背景", "经历"),
    "speaking_style": ("speaking_style", "说话风格", "口癖"),
    "facts": ("facts", "设定", "其他"),
}
#: fields whose value must be a single text (a list is refused)
SCALAR = frozenset({"name", "gender", "age", "birthday"})
_LANGUAGE_KEYS = ("language", "语言")
_ALIAS = {a.lower(): f for f, names in FIELDS.items() for a in names}
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class Card:
    """A validated card: its file, language (zh/en) and values by canonical field."""

    path: str
    language: str
    values: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Anchor:
    """One anchor memory a card yields."""

    id: str
    field: str
    text: str


@dataclass(frozen=True)
class CardSync:
    """What a sync does (or, dry run, would do): anchors added, removed and kept."""

    path: str
    agent_id: str
    user_id: str
    added: tuple[Anchor, ...]
    removed: tuple[Anchor, ...]
    kept: tuple[Anchor, ...]
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)

    def lines(self) -> list[str]:
        """The diff: ``- id [field] text`` then ``+ id [field] text``, then a summary."""
        out = [f"- {a.id} [{a.field}] {a.text}" for a in self.removed]
        out += [f"+ {a.id} [{a.field}] {a.text}" for a in self.added]
        verb = "would change" if self.dry_run else "changed"
        out.append(f"{self.path}: {verb} {len(self.added)} added, {len(self.removed)} removed, "
                   f"{len(self.kept)} unchanged (agent_id={self.agent_id!r}, "
                   f"user_id={self.user_id!r})")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


# -- reading and validating -----------------------------------------------------------------------
def load_card(path: str | Path, *, max_chars: int = 100_000) -> Card:
    """Read and validate a card file (``.json``: JSON; anything else: YAML).

    Raises:
        CardError: naming the file, the field and the rule (unreadable file, not a mapping,
            unknown field, a field given twice, no name, an empty or non-text value, a value
            longer than ``max_chars``).
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CardError(str(p), "(file)", f"cannot be read as UTF-8 text: {exc}") from None
    try:
        data = (json.loads(raw, object_pairs_hook=_no_repeated_key) if p.suffix.lower() == ".json"
                else load_yaml(raw, str(p)))
    except json.JSONDecodeError as exc:
        raise CardError(f"{p}:{exc.lineno}:{exc.colno}", "(file)", f"not valid JSON: {exc.msg}")\
            from None
    except _RepeatedKey as exc:
        raise CardError(str(p), exc.key, "given twice in one object (JSON keeps only the last, "
                        "silently)") from None
    except ConfigError as exc:   # memlab.yamlfile's rules: YAML syntax, a key twice, depth
        raise CardError(exc.key, "(file)", exc.rule, exc.value) from None
    return parse_card(data, file=str(p), max_chars=max_chars)


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_repeated_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key that appears twice raises (json keeps the last silently)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _RepeatedKey(k)
        out[k] = v
    return out


def parse_card(data: Any, *, file: str = "<card>", max_chars: int = 100_000) -> Card:
    """Validate a card's mapping (see :func:`load_card`)."""
    if not isinstance(data, Mapping):
        raise CardError(file, "(top level)", "a card is a mapping of fields (name, birthday, "
                        "personality, hobbies, ...)", type(data).__name__)
    values: dict[str, tuple[str, ...]] = {}
    given: dict[str, str] = {}
    language = None
    for key, value in data.items():
        if not isinstance(key, str):
            raise CardError(file, str(key), "field names are text", key)
        if key.strip().lower() in _LANGUAGE_KEYS:
            if value not in ("zh", "en"):
                raise CardError(file, key, "must be 'zh' or 'en'", value)
            language = value
            continue
        field = _ALIAS.get(key.strip().lower())
        if field is None:
            known = ", ".join(f"{f} ({'/'.join(n[1:])})" for f, n in FIELDS.items())
            raise CardError(file, key, f"unknown field; known: {known}, language (语言)")
        if field in given:
            raise CardError(file, key, f"the same field as {given[field]!r} (give it once)")
        given[field] = key
        values[field] = _texts(value, file=file, key=key, field=field, max_chars=max_chars)
    if "name" not in values:
        raise CardError(file, "name", "required (name or 名字)")
    if language is None:
        cjk = any(_CJK.search(k) for k in given.values()) or any(
            _CJK.search(t) for ts in values.values() for t in ts)
        language = "zh" if cjk else "en"
    ordered = {f: values[f] for f in FIELDS if f in values}
    return Card(path=file, language=language, values=ordered)


def _texts(value: Any, *, file: str, key: str, field: str, max_chars: int) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and field in SCALAR:
        raise CardError(file, key, "must be a single value, not a list", value)
    if not items:
        raise CardError(file, key, "must not be an empty list", value)
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, _dt.date)):
            raise CardError(file, key, "must be text (or a list of texts)", item)
        if isinstance(item, int) and field != "age":
            raise CardError(file, key, "must be text; a number is allowed for age only", item)
        text = item.isoformat() if isinstance(item, _dt.date) else str(item).strip()
        if not text:
            raise CardError(file, key, "must not be empty", item)
        if len(text) > max_chars:
            raise CardError(file, key, f"longer than {max_chars} characters "
                            "(recall.max_text_chars)", text)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise CardError(file, key, "holds a lone surrogate (not valid Unicode text)", text)
        out.append(text)
    return tuple(out)


# -- anchors and the sync plan --------------------------------------------------------------------
def anchor_id(text: str, *, agent_id: str, user_id: str) -> str:
    """``pm_`` + the first 32 hex digits of sha256(agent_id, user_id, text): the same anchor text
    of the same owner always has the same id (ids are unique across owners)."""
    digest = hashlib.sha256(f"{agent_id}\x1f{user_id}\x1f{text}".encode("utf-8")).hexdigest()
    return f"pm_{digest[:32]}"


def _templates(cfg: CardConfig, language: str) -> dict[str, str]:
    lines = cfg.templates_zh if language == "zh" else cfg.templates_en
    return {k.strip(): t for k, _, t in (line.partition("=") for line in lines)}


def card_anchors(card: Card, *, cfg: CardConfig, agent_id: str, user_id: str) -> list[Anchor]:
    """The anchors of a card, in field order (duplicates by text dropped).

    Raises:
        CardError: a field of the card has no template in ``card.templates_<language>``.
    """
    templates = _templates(cfg, card.language)
    sep = cfg.separator_zh if card.language == "zh" else cfg.separator_en
    out: dict[str, Anchor] = {}
    for field, texts in card.values.items():
        if field not in templates:
            raise CardError(card.path, field, f"no template for it in card.templates_"
                            f"{card.language}")
        parts = texts if field == "facts" else (sep.join(texts),)
        for part in parts:
            text = templates[field].format(value=part)
            aid = anchor_id(text, agent_id=agent_id, user_id=user_id)
            out.setdefault(aid, Anchor(aid, field, text))
    return list(out.values())


def plan_sync(card: Card, existing: Sequence[MemoryRecord], *, cfg: CardConfig, agent_id: str,
              user_id: str, dry_run: bool = False) -> CardSync:
    """The diff between the card's anchors and the owner's stored card anchors (``existing``:
    the rows with ``source_type = "character_card"`` of this agent and user)."""
    wanted = card_anchors(card, cfg=cfg, agent_id=agent_id, user_id=user_id)
    have = {r.id: r for r in existing}
    added = tuple(a for a in wanted if a.id not in have)
    kept = tuple(a for a in wanted if a.id in have)
    keep = {a.id for a in wanted}
    removed = tuple(Anchor(r.id, str(r.meta.get("card_field", "")), r.text)
                    for r in existing if r.id not in keep)
    return CardSync(path=card.path, agent_id=agent_id, user_id=user_id, added=added,
                    removed=removed, kept=kept, dry_run=dry_run)


def anchor_items(plan: CardSync, *, importance: float) -> list[dict[str, Any]]:
    """The ``add_many`` items of the anchors a plan adds: permanent, semantic, ``importance``
    (``layers.permanent_importance``), source ``character_card`` with the card's path and the
    text's sha256, ``meta.card_field``."""
    return [{"id": a.id, "text": a.text, "layer": "permanent", "cognitive_layer": "semantic",
             "importance": importance, "agent_id": plan.agent_id, "user_id": plan.user_id,
             "source_type": SOURCE_TYPE, "source_uri": plan.path,
             "source_hash": hashlib.sha256(a.text.encode("utf-8")).hexdigest(),
             "meta": {"card_field": a.field}} for a in plan.added]


def sync_card(repo, card: str | Path, *, agent_id: str, user_id: str, dry_run: bool, cfg,
              stats, add_many) -> CardSync:
    """``MemoryStore.sync_card`` for a resolved owner: load the card, plan the sync against the
    owner's anchors, and (unless ``dry_run``) write it through ``add_many(items, replacing)``
    (the write pipeline: new anchors in, the ones the card no longer yields out, one
    transaction); ``stats`` counts what changed."""
    c = load_card(card, max_chars=cfg.recall.max_text_chars)
    existing = repo.by_source(SOURCE_TYPE, agent_id=agent_id, user_id=user_id)
    plan = plan_sync(c, existing, cfg=cfg.card, agent_id=agent_id, user_id=user_id,
                     dry_run=dry_run)
    if plan.changed and not dry_run:
        add_many(anchor_items(plan, importance=cfg.layers.permanent_importance),
                 [a.id for a in plan.removed])
        stats["card anchors added"] += len(plan.added)
        stats["card anchors removed"] += len(plan.removed)
    return plan

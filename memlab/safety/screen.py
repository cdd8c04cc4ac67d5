"""What a write must pass before anything of it is stored (Reverie §12), one pure call per item.

:func:`screen_write` is called by ``MemoryStore.add_many`` for each item, after the text and the
owner are validated and before a record is built:

- **hijack refusal** (``safety.refuse_hijack_writes``): each of ``safety.checked_fields`` (the text
  and, by default, speaker, source quotes, tags and every key and value of ``meta`` at any depth)
  is matched against the hijack rules (:mod:`memlab.safety.rules`); a match raises
  :class:`~memlab.errors.UnsafeWrite` naming the field (``items[0].meta['note']``, a key as
  ``items[0].meta key``), the rule and the pattern. ``MemoryStore.add_many`` and the workspace
  import (:mod:`memlab.workspace.sync`, a header's ``meta``) both call it with the item's fields. The caller records the refusal (``memory_audit``) and writes
  nothing else;
- **untrusted web content never becomes truth** (``source_type == "untrusted_web"``, the spec's
  "网页来源打 untrusted_web 标记且永远不进入真相源"): such an item is stored apart, in
  ``memory_web_content`` (:mod:`memlab.store.web`, written by :mod:`memlab.write.web`), never in
  ``memory_records``, so no recall route, fact supersession, contradiction, pin or budget sees
  it; it is recalled only through ``recall(..., include_web=True)`` and labelled
  ``safety.untrusted_label`` there (:mod:`memlab.recall.web`). Here it must also not *ask* to be
  truth: ``epistemic_status`` is ``"speculative"`` (an explicit ``asserted`` or ``inferred`` is
  refused), and a permanent layer, a pin, a ``fact_key`` or ``supersedes`` are refused. Each
  refusal is an :class:`~memlab.errors.InvalidInput` naming the field.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from memlab.config import SafetyConfig
from memlab.errors import InvalidInput, UnsafeWrite
from memlab.safety.rules import excerpt, find_hijack
from memlab.types import UNTRUSTED_WEB

__all__ = ["screen_write", "UNTRUSTED_WEB"]

_UNTRUSTED_RULE = "source_type 'untrusted_web' never becomes truth (Reverie §12)"


def _strings(value: Any, field: str) -> Iterator[tuple[Callable[[], str], str]]:
    """(field path, string) of each string in a field: the field itself, each string of a list
    or tuple, and in a mapping (``meta``) every key and value at any depth, in document order.
    Walked without recursion, and each path is made only when asked for (a deep ``meta`` would
    otherwise cost its depth squared)."""
    stack: list[tuple[tuple, Any]] = [((None, field), value)]   # path: (parent path, step)

    def render(path: tuple) -> str:
        steps = []
        while path is not None:
            path, step = path
            steps.append(step)
        return "".join(reversed(steps))

    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            yield (lambda p=path: render(p)), v
        elif isinstance(v, Mapping):
            for k, x in reversed(list(v.items())):
                stack.append(((path, f"[{k!r}]"), x))
                stack.append(((path, " key"), k))
        elif isinstance(v, (list, tuple)):
            stack.extend(((path, f"[{i}]"), x) for i, x in reversed(list(enumerate(v))))


def screen_write(text: str, fields: Mapping[str, Any], cfg: SafetyConfig, *,
                 where: str) -> dict[str, Any]:
    """The item's other ``fields`` as they are to be stored, or a refusal.

    ``text``: the validated memory text; ``fields``: the rest of the item (``agent_id`` and
    ``user_id`` already resolved: they are named in the error); ``where``: the item's name in
    errors (``items[3]``).

    Raises:
        UnsafeWrite: a checked field matches a hijack rule.
        InvalidInput: untrusted web content asks to become truth (permanent, pinned, a fact,
            superseding a memory, or asserted).
    """
    out = dict(fields)
    if cfg.refuse_hijack_writes:
        for name in cfg.checked_fields:
            value = text if name == "text" else out.get(name)
            for path, s in _strings(value, f"{where}.{name}"):
                hit = find_hijack(s, cfg)
                if hit is not None:
                    raise UnsafeWrite(path(), hit.rule, hit.pattern,
                                      excerpt(hit, cfg.audit_excerpt_chars),
                                      agent_id=out.get("agent_id"), user_id=out.get("user_id"))
    if out.get("source_type") == UNTRUSTED_WEB:
        layer = out.get("layer") or out.get("retention_layer")
        if layer == "permanent":
            raise InvalidInput(f"{where}.layer", f"{_UNTRUSTED_RULE}: never the permanent layer",
                               layer)
        for name in ("pinned", "fact_key", "supersedes"):
            if out.get(name):
                raise InvalidInput(f"{where}.{name}", f"{_UNTRUSTED_RULE}: it cannot be "
                                   f"{'pinned' if name == 'pinned' else 'given ' + name}",
                                   out[name])
        status = out.setdefault("epistemic_status", "speculative")
        if status != "speculative":
            raise InvalidInput(f"{where}.epistemic_status", f"{_UNTRUSTED_RULE}: it is stored as "
                               "'speculative'", status)
    return out

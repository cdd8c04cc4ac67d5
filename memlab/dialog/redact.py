"""Privacy redaction replay (§5.5.2): a node's content as the LLM may see it.

A node's ``metadata["redactions"]`` lists the privacy decisions taken on its content, one per
finding: ``{"span": [start, end], "decision": "ignore" | "mask" | "record", "token": str}``.
``metadata["redactions_content_hash"]`` is the sha256 (hex) of the content, UTF-8 encoded, that the
spans index (:func:`content_hash`; memlab's choice of hash).

memlab's reading of the decisions: ``mask`` replaces the span with its ``token``; ``ignore`` (a
false finding) and ``record`` (the user let it be remembered) leave the text as it is. Spans are
character offsets into the content (Python ``str`` indices: code points, so a Chinese character is
one), ``0 <= start <= end <= len(content)``. They are applied in reverse span order (last first),
so that earlier offsets stay valid. memlab's choice for spans that overlap (share at least one
character; adjacent ones do not): they are masked as one region with the token of the span that
starts first (the longer on a tie), so no character of any masked span reaches the LLM.

When the hash is missing or does not match the content (the content changed after the decisions
were taken), the spans cannot be trusted: the raw content is returned, as the spec says — a
documented degradation, logged once and counted (``stats["redaction: hash mismatch, raw
content"]``). A malformed redaction (not a span, an unknown decision) is an InvalidInput naming the
node and the redaction.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from typing import Any

from memlab.errors import InvalidInput

__all__ = ["content_hash", "node_content_for_llm", "DECISIONS", "STATS", "HASH_MISMATCH"]

log = logging.getLogger("memlab")

DECISIONS = ("ignore", "mask", "record")
#: the decisions whose span is replaced by the token (memlab's reading, module docstring)
REPLACING = frozenset({"mask"})
HASH_MISMATCH = "redaction: hash mismatch, raw content"
#: counts of the module-level calls that pass no ``stats`` of their own
STATS: Counter[str] = Counter()


def content_hash(content: str) -> str:
    """sha256 (hex) of ``content`` encoded as UTF-8: the ``redactions_content_hash``."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _spans(node: Any) -> list[tuple[int, int, str]]:
    """The replacing spans of ``node``'s redactions as (start, end, token), checked."""
    content = node.content
    reds = node.metadata.get("redactions")
    if not isinstance(reds, list):
        raise InvalidInput(f"nodes[{node.id}].metadata.redactions", "must be a list", reds)
    out = []
    for j, r in enumerate(reds):
        at = f"nodes[{node.id}].metadata.redactions[{j}]"
        if not isinstance(r, dict):
            raise InvalidInput(at, "must be an object {span, decision, token}", r)
        decision, token, span = r.get("decision"), r.get("token"), r.get("span")
        if decision not in DECISIONS:
            raise InvalidInput(f"{at}.decision", f"one of {', '.join(DECISIONS)}", decision)
        if not isinstance(token, str):
            raise InvalidInput(f"{at}.token", "must be a string", token)
        if not isinstance(span, (list, tuple)) or len(span) != 2 or any(
                isinstance(x, bool) or not isinstance(x, int) for x in span) \
                or not 0 <= span[0] <= span[1] <= len(content):
            raise InvalidInput(f"{at}.span", f"[start, end] with 0 <= start <= end <= "
                               f"{len(content)} (the content's length in characters)", span)
        if decision in REPLACING:
            out.append((span[0], span[1], token))
    return out


def _regions(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans merged (the token of the first; on a tie the longer), in start order."""
    merged: list[tuple[int, int, str]] = []
    for start, end, token in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            s0, e0, t0 = merged[-1]
            merged[-1] = (s0, max(e0, end), t0)
        else:
            merged.append((start, end, token))
    return merged


def node_content_for_llm(node: Any, *, stats: Counter | None = None) -> str:
    """``node.content`` with its stored privacy decisions replayed (module docstring): masked
    spans replaced by their tokens, in reverse span order. No redactions: the content as is. A
    hash that is missing or does not match the content: the raw content (logged once, counted in
    ``stats``, default :data:`STATS`)."""
    content = node.content
    meta = node.metadata or {}
    if not meta.get("redactions"):
        return content
    if meta.get("redactions_content_hash") != content_hash(content):
        counter = STATS if stats is None else stats
        counter[HASH_MISMATCH] += 1
        if counter[HASH_MISMATCH] == 1:
            log.warning("memlab degraded: node %s: redactions_content_hash does not match its "
                        "content (sha256 of the UTF-8 text); the raw content is used (logged "
                        "once, counted)", node.id)
        return content
    out = content
    for start, end, token in reversed(_regions(_spans(node))):
        out = out[:start] + token + out[end:]
    return out

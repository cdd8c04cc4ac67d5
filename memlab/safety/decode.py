"""Base64 inside a text, decoded for the hijack rules (issue 19, item 9), a pure function.

An instruction encoded in base64 (``SWdub3JlIGFsbCBwcmV2aW91cyBpbnN0cnVjdGlvbnM=``) reads as
nothing to a pattern and as an order to a model that decodes it. :func:`decoded_spans` finds the
spans that look like base64 (standard or URL-safe alphabet, padded or not) and returns what they
decode to, joined by line breaks, for :func:`memlab.safety.find_hijack` to screen like any text.

Which spans (memlab's choices): at least ``safety.base64_min_chars`` characters of the alphabet
in a row, holding upper- and lower-case letters (a long plain word or an all-caps run is not
base64), that decode to valid UTF-8 without control characters other than line breaks and tabs
(binary data, an image's bytes, a hash, a random token decode to bytes that are not such text,
and are left alone). Invisible characters inside a span are removed first (as the canonical
spelling does), and full-width letters read as ASCII.

Bounds: one call decodes each span once; the joined text is at most 3/4 of the text's length,
so screening it again costs less than the text itself did. Base64 inside the decoded text is
decoded by the caller, at most ``safety.base64_max_depth`` levels deep: a nested or repeated
encoding cannot make the screen loop or grow (every level is shorter than the one before).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata

__all__ = ["decoded_spans"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]")


@functools.cache
def _span_re(min_chars: int) -> re.Pattern[str]:
    return re.compile(f"[A-Za-z0-9+/_-]{{{min_chars},}}={{0,2}}")


def _decode(span: str) -> str | None:
    body = span.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:   # one character too many: no encoder writes that
        body = body[:-1]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return None if not text.strip() or _CONTROL.search(text) else text


def decoded_spans(text: str, *, min_chars: int, drop: dict[int, str | None]) -> str | None:
    """What the base64-looking spans of ``text`` decode to, one per line, or None when none
    decodes to text. ``drop``: the invisible characters to remove first (the canonical
    spelling's step 1 table)."""
    plain = text if text.isascii() and text.isprintable() else \
        unicodedata.normalize("NFKC", text.translate(drop))
    out = []
    for m in _span_re(min_chars).finditer(plain):
        span = m.group(0)
        if span.lower() == span or span.upper() == span:
            continue
        decoded = _decode(span)
        if decoded is not None:
            out.append(decoded)
    return "\n".join(out) if out else None

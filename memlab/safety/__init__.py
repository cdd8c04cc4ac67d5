"""Safety of what memlab writes and recalls (Reverie §10, §12), as pure functions.

- :mod:`memlab.safety.canonical`: the canonical spelling the rules match (NFKC, invisible
  characters removed, look-alikes folded, case folded);
- :mod:`memlab.safety.rules`: the hijack rules (``safety.hijack_patterns_zh``/``_en``),
  :func:`find_hijack` and the injection guard :func:`guard_user_message`;
- :mod:`memlab.safety.screen`: :func:`screen_write`, the check of each write (hijack refusal,
  ``untrusted_web`` never truth).

The store records refusals in ``memory_audit`` (:mod:`memlab.store.audit`); the prompt block's
escaping is :mod:`memlab.recall.inject`.
"""

from memlab.safety.canonical import normalize
from memlab.safety.rules import Verdict, find_hijack, guard_user_message
from memlab.safety.screen import UNTRUSTED_WEB, screen_write

__all__ = ["normalize", "find_hijack", "guard_user_message", "Verdict", "screen_write",
           "UNTRUSTED_WEB"]

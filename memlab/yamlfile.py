"""Reading a YAML file strictly: config files and sweep spaces.

PyYAML's ``safe_load`` plus three rules, each a :class:`~memlab.errors.ConfigError` naming
``file:line:column``, the rule and the text there:

- the file is UTF-8 text (the offending byte named);
- no mapping holds a key twice (``safe_load`` keeps the last value silently; a merge key ``<<``
  may still be overridden, as YAML says);
- nesting is at most :data:`MAX_DEPTH` levels (deeper, PyYAML's recursive composer ran out of
  Python stack: RecursionError at about 300 levels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from memlab.errors import ConfigError

__all__ = ["read_yaml", "load_yaml", "MAX_DEPTH"]

#: the deepest nesting of collections a memlab YAML file may have (configs use 3, spaces 4)
MAX_DEPTH = 64

MERGE_TAG = "tag:yaml.org,2002:merge"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys and nesting deeper than MAX_DEPTH."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels (memlab's "
                                "limit for a YAML file)", self.peek_event().start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:   # an unhashable key: PyYAML's own error follows
                    continue
                if first is not key_node:
                    raise ConstructorError(
                        None, None, f"duplicate key {key!r} (first at line "
                        f"{first.start_mark.line + 1}): YAML would keep only the last value; "
                        "give each key once", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str, where: str) -> Any:
    """Parse ``text`` with :class:`StrictLoader`; ConfigError naming ``where:line:column``."""
    try:
        return yaml.load(text, Loader=StrictLoader)   # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
        rule = f"not valid YAML: {exc.problem or exc.context}"
        if exc.context and exc.context_mark and exc.problem:
            rule += (f" ({exc.context} started at line {exc.context_mark.line + 1}, column "
                     f"{exc.context_mark.column + 1})")
        lines = text.splitlines()
        shown = lines[mark.line] if mark and mark.line < len(lines) else ""
        raise ConfigError(at, rule, shown[:200]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(where, "not valid YAML", str(exc).splitlines()[0]) from None


def read_yaml(path: str | Path, what: str = "config file") -> Any:
    """The document in the YAML file ``path`` (None when empty). ConfigError naming the file
    when it cannot be read, is not UTF-8 or breaks a rule above; ``what`` names the file's
    kind in the message."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(str(p), f"{what} cannot be read", str(exc)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"{p}:{line}:{column}", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                          f"at offset {exc.start}): save the {what} as UTF-8",
                          raw[max(0, exc.start - 20):exc.start + 20]) from None
    return load_yaml(text, str(p))

"""Where an entry lives in the workspace (familiars §5.2.4) and what a workspace path says.

The spec's layout, kept exactly for the default tenant (``writer.default_agent_id`` /
``writer.default_user_id``)::

    user/<category>.md                                   scope user
    agents/<agent>/identity/<category>.md                scope identity
    agents/<agent>/<dialogue>/dialogue/<category>.md     scope dialogue
    agents/<agent>/<dialogue>/ephemeral/<category>.md    scope ephemeral

memlab is multi-tenant and also holds Reverie's memories, which have no (scope, category). Its
choices, documented here and in the README:

- another user's entries go under ``users/<user>/`` with the same layout inside;
- a ``user``-scope entry of an agent other than the default one goes to
  ``agents/<agent>/user/<category>.md`` (the spec's ``user/`` is shared across agents, memlab's
  records carry their agent);
- records without a cell (Reverie's) go to ``reverie/<agent>/<retention_layer>.md``;
- a dialogue or ephemeral entry without a dialogue id uses the segment ``~none``.

Names become path segments through :func:`segment`: a name of word characters (any script, so
Chinese names stay readable), digits, ``_ - . @ +``, starting with a word character, is used as it
is; any other name (``../x``, ``a/b``, ``.hidden``, ``~none`` itself) is percent-encoded, every
character outside ``[A-Za-z0-9_]`` as ``%XX`` of its UTF-8 bytes. An encoded segment always holds
a ``%`` and a verbatim one never does, so :func:`unsegment` inverts it, and no name can make a
path leave the workspace: :func:`resolve_path` also checks that the resolved path is inside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote

from memlab.errors import InvalidCell, InvalidInput
from memlab.types import CATEGORIES, RETENTION_LAYERS, SCOPES, VALID_CELLS

#: the segment of a dialogue or ephemeral entry without a dialogue id
NO_DIALOGUE = "~none"
_VERBATIM = re.compile(r"[^\W][\w.@+-]*")   # starts with a word character (\w is Unicode)
_ENCODED = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-F]{2})+")
SUFFIX = ".md"


def segment(name: str, field: str) -> str:
    """``name`` as one path segment (see the module docstring): verbatim or percent-encoded."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(field, "must be a non-empty string", name)
    if _VERBATIM.fullmatch(name) and "%" not in name:
        return name
    return quote(name, safe="").replace(".", "%2E").replace("~", "%7E").replace("-", "%2D")


def unsegment(seg: str, field: str) -> str:
    """The name a segment stands for (:func:`segment` inverted); InvalidInput when ``seg`` is
    neither a verbatim name nor a percent-encoded one."""
    if _VERBATIM.fullmatch(seg) and "%" not in seg:
        return seg
    bad = InvalidInput(field, "not a workspace path segment (a name, or a percent-encoded one)",
                       seg)
    if "%" not in seg or not _ENCODED.fullmatch(seg):
        raise bad
    try:
        name = unquote(seg, errors="strict")
    except UnicodeDecodeError:
        raise bad from None
    if segment(name, field) != seg:     # one spelling per name: a file maps to one location
        raise bad
    return name


@dataclass(frozen=True, slots=True)
class Location:
    """What a workspace path says about the entries of its file. ``scope`` None: Reverie's
    records (``retention_layer`` set, ``category`` None)."""

    user_id: str
    agent_id: str
    scope: str | None
    category: str | None
    dialogue_id: str | None = None
    retention_layer: str | None = None


def relative_path(loc: Location, *, default_agent_id: str, default_user_id: str) -> PurePosixPath:
    """The path of ``loc``'s file relative to the workspace (see the module docstring)."""
    root = PurePosixPath() if loc.user_id == default_user_id else \
        PurePosixPath("users", segment(loc.user_id, "user_id"))
    agent = segment(loc.agent_id, "agent_id")
    if loc.scope is None:
        if loc.retention_layer not in RETENTION_LAYERS or loc.category is not None:
            raise InvalidInput("retention_layer", f"a record without a cell needs one of "
                               f"{RETENTION_LAYERS} (and no category)", loc.retention_layer)
        return root / "reverie" / agent / f"{loc.retention_layer}{SUFFIX}"
    if (loc.scope, loc.category) not in VALID_CELLS:
        raise InvalidCell("scope/category", "not a valid Familiars cell (familiars §5.2.3)",
                          (loc.scope, loc.category))
    fname = f"{loc.category}{SUFFIX}"
    if loc.scope == "user":
        return root / "user" / fname if loc.agent_id == default_agent_id else \
            root / "agents" / agent / "user" / fname
    if loc.scope == "identity":
        return root / "agents" / agent / "identity" / fname
    dialogue = NO_DIALOGUE if loc.dialogue_id is None else segment(loc.dialogue_id, "dialogue_id")
    return root / "agents" / agent / dialogue / loc.scope / fname


def resolve_path(*, workspace: str | Path, scope: str, category: str, agent_id: str = "agent_0",
                 dialogue_id: str | None = None, user_id: str | None = None,
                 default_agent_id: str = "agent_0", default_user_id: str = "user_0") -> Path:
    """familiars §5.2.4 ``resolve_path``: the file of a (scope, category) cell of an agent (and a
    dialogue). ``user_id`` None: the default user (the spec's single-user layout). The names are
    turned into safe segments and the result is checked to lie inside ``workspace``."""
    if scope not in SCOPES:
        raise InvalidInput("scope", f"must be one of {SCOPES}", scope)
    if category not in CATEGORIES:
        raise InvalidInput("category", f"must be one of {CATEGORIES}", category)
    loc = Location(user_id=default_user_id if user_id is None else user_id, agent_id=agent_id,
                   scope=scope, category=category, dialogue_id=dialogue_id)
    return inside(Path(workspace), relative_path(loc, default_agent_id=default_agent_id,
                                                 default_user_id=default_user_id))


def inside(workspace: Path, rel: PurePosixPath) -> Path:
    """``workspace / rel``, refused (InvalidInput) unless it resolves to a path inside
    ``workspace``."""
    root = workspace.resolve()
    path = (root / rel).resolve()
    if path == root or not path.is_relative_to(root):
        raise InvalidInput("path", f"leaves the workspace {str(root)!r}", str(rel))
    return root / rel


def parse_path(rel: PurePosixPath | str, *, default_agent_id: str, default_user_id: str
               ) -> Location:
    """The :class:`Location` a workspace-relative path stands for (:func:`relative_path`
    inverted); InvalidInput naming the path when it is not one of the layout's paths."""
    parts = list(PurePosixPath(rel).parts)
    bad = InvalidInput("path", "not a workspace path (user/<category>.md, agents/<agent>/"
                       "identity/<category>.md, agents/<agent>/<dialogue>/dialogue|ephemeral/"
                       "<category>.md, reverie/<agent>/<layer>.md, optionally under "
                       "users/<user>/)", str(rel))
    if not parts or not parts[-1].endswith(SUFFIX):
        raise bad
    user = default_user_id
    if parts[0] == "users":
        if len(parts) < 3:
            raise bad
        user = unsegment(parts[1], "user_id")
        parts = parts[2:]
    stem = parts[-1][:-len(SUFFIX)]
    if parts[0] == "reverie" and len(parts) == 3:
        if stem not in RETENTION_LAYERS:
            raise InvalidInput("path", f"a reverie file is named <retention_layer>.md, one of "
                               f"{RETENTION_LAYERS}", str(rel))
        return Location(user, unsegment(parts[1], "agent_id"), None, None, retention_layer=stem)
    if stem not in CATEGORIES:
        raise InvalidInput("path", f"a cell file is named <category>.md, one of {CATEGORIES}",
                           str(rel))
    if parts[0] == "user" and len(parts) == 2:
        scope, agent, dialogue = "user", default_agent_id, None
    elif parts[0] == "agents" and len(parts) == 4 and parts[2] in ("identity", "user"):
        scope, agent, dialogue = parts[2], unsegment(parts[1], "agent_id"), None
        if scope == "user" and agent == default_agent_id:
            raise bad   # the default agent's user entries live in user/
    elif parts[0] == "agents" and len(parts) == 5 and parts[3] in ("dialogue", "ephemeral"):
        scope, agent = parts[3], unsegment(parts[1], "agent_id")
        dialogue = None if parts[2] == NO_DIALOGUE else unsegment(parts[2], "dialogue_id")
    else:
        raise bad
    if (scope, stem) not in VALID_CELLS:
        raise InvalidCell("path", f"({scope!r}, {stem!r}) is not a valid Familiars cell "
                          "(familiars §5.2.3)", str(rel))
    return Location(user, agent, scope, stem, dialogue_id=dialogue)

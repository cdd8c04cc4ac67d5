"""Layer routing (§5) under budget pressure per owner (§11.3).

§5: importance above the long-term threshold goes to the long-term layer; otherwise, "by
probability", to the short-term layer. §11.3: once the long-term layer holds more than
``governance.budget_pressure_start`` (70%) of its character budget, the threshold rises linearly
from ``layers.long_term_threshold`` (0.6) to ``governance.budget_threshold_max`` (0.95) at 100%.
Memories already stored are never squeezed: pressure only decides where a new one goes.

The budget is an owner's: one (agent, user) pair's active long-term characters, so that another
user's memories never raise my threshold (memlab's reading of §11.3, whose store holds one user).
:class:`Budget` reads each owner's usage once, inside the write's transaction, and counts what the
write itself routes to the long-term layer, so a batch routes exactly as the same items added one
by one would.
"""

from __future__ import annotations

from typing import Callable

from memlab.config import GovernanceConfig, LayersConfig

#: (layer, agent_id, user_id) -> active characters of that owner's layer (Repository.layer_chars)
LayerChars = Callable[..., int]


def long_term_threshold(used_chars: int, *, layers: LayersConfig, gov: GovernanceConfig) -> float:
    """§11.3 budget pressure: above budget_pressure_start of the long-term char budget, the threshold
    rises linearly from layers.long_term_threshold to governance.budget_threshold_max (at 100%)."""
    usage = used_chars / gov.long_term_char_budget
    if usage <= gov.budget_pressure_start:
        return layers.long_term_threshold
    frac = min(1.0, (usage - gov.budget_pressure_start) / (1.0 - gov.budget_pressure_start))
    return layers.long_term_threshold + frac * (gov.budget_threshold_max - layers.long_term_threshold)


def choose_layer(importance: float, *, threshold: float, keep_short: bool = True) -> str | None:
    """§5: importance > threshold -> long_term; else short_term when ``keep_short`` (the
    short-term draw came up, or an explicit add), else None: not stored."""
    if importance > threshold:
        return "long_term"
    return "short_term" if keep_short else None


class Budget:
    """The long-term threshold of each owner during one write (read lazily, then kept up to date
    with what the write routes to the long-term layer)."""

    def __init__(self, layer_chars: LayerChars, *, layers: LayersConfig,
                 gov: GovernanceConfig) -> None:
        self._layer_chars, self._layers, self._gov = layer_chars, layers, gov
        self._stored: dict[tuple[str, str], int] = {}   # read from the store, once per owner
        self._added: dict[tuple[str, str], int] = {}    # routed to long term by this write

    def used(self, owner: tuple[str, str]) -> int:
        """The owner's long-term characters: stored (read at the first ask) plus this write's."""
        if owner not in self._stored:
            self._stored[owner] = self._layer_chars("long_term", agent_id=owner[0],
                                                    user_id=owner[1])
        return self._stored[owner] + self._added.get(owner, 0)

    def threshold(self, owner: tuple[str, str]) -> float:
        return long_term_threshold(self.used(owner), layers=self._layers, gov=self._gov)

    def charge(self, owner: tuple[str, str], layer: str | None, chars: int) -> None:
        """Count a memory this write routed (only the long-term layer has a budget). Nothing is
        read here: a write whose layers are all given (a bulk import, benchmark raw mode) never
        sums the owner's stored texts, a scan of the layer that grows with the store."""
        if layer == "long_term":
            self._added[owner] = self._added.get(owner, 0) + chars


def layer_item(layer: str, text: str, *, importance: float | None, layers: LayersConfig,
               **fields) -> dict:
    """The add item of Reverie §4.1's ``store_long_term`` / ``store_short_term``: written to
    ``layer`` as given (no §5 scoring, no routing or budget pressure), with the layer's default
    importance (``layers.long_term_default_importance`` 0.7, ``short_term_default_importance``
    0.3) unless one is given; the pipeline gives it the layer's id prefix (``lt_`` / ``st_`` +
    uuid4 hex) and the cognitive layer by prefix (事件记忆： -> episodic)."""
    default = {"long_term": layers.long_term_default_importance,
               "short_term": layers.short_term_default_importance}
    if layer not in default:
        raise ValueError(f"layer must be long_term or short_term, not {layer!r}")
    return {"text": text, "layer": layer,
            "importance": default[layer] if importance is None else importance, **fields}

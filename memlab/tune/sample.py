"""Random configurations drawn over the config schema (:func:`memlab.config.describe`): what the
parity tests (tests/tune/test_parity.py) and the throughput benchmark
(benchmarks/sweep_throughput.py) score, so both see the same kind of configuration.

The fields are those the reverie scorer reads (:func:`reverie_keys`: every score-stage field of
fusion, forgetting, selection, entity, temporal and governance, and the relevance floor's and the
permanent cap's recall fields) and, on request, some candidate-stage keys
(:data:`CANDIDATE_KEYS`: pool sizes and the entity and temporal routes), which need their own
replay. Each field's value is drawn within its schema range: a bool or a choice uniformly, a number
log-uniformly between its default divided and multiplied by ``spread`` (a default of 0: uniformly
within ``zero_width`` of it), clipped to the range; ``ranges`` overrides the interval of a key
(e.g. a char budget that binds on short test texts). A draw the schema refuses (an open bound hit)
is drawn again.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any, Mapping, Sequence

from memlab.config import MemlabConfig, describe
from memlab.errors import ConfigError, InvalidInput

__all__ = ["reverie_keys", "plus_keys", "CANDIDATE_KEYS", "random_configs", "field_ranges"]

_REVERIE_SECTIONS = ("fusion.", "forgetting.", "selection.", "entity.", "temporal.",
                     "governance.")
_RECALL_SCORE = ("recall.floor_mode", "recall.relevance_z", "recall.relevance_floor",
                 "recall.lexical_floor", "recall.permanent_limit")
#: Candidate-stage keys a reverie sweep may vary (each value combination is its own replay).
CANDIDATE_KEYS = ("recall.lexical_pool_min", "recall.lexical_pool_per_k", "recall.dense_pool_min",
                  "recall.dense_pool_per_k", "entity.enabled", "temporal.enabled",
                  "temporal.time_windows")
#: choices that need a file besides the config (a model): never drawn at random
_NEEDS_A_FILE = {"recall.floor_mode": ("learned",)}
_RANGE = re.compile(r"^([\[(])\s*(-?[\d.e+]+)\s*,\s*(-?[\d.e+]+)\s*([\])])$")


def field_ranges() -> dict[str, dict[str, Any]]:
    """Every config field by key: ``type``, ``default``, ``stage`` and, for numbers, ``lo``/``hi``
    (and whether each bound is open), for a choice its ``choices`` (from ``describe()``)."""
    out = {}
    for row in describe():
        info: dict[str, Any] = {"type": row["type"], "default": row["default"],
                                "stage": row["stage"]}
        rng = str(row["range"] or "")
        m = _RANGE.match(rng)
        if m:
            info.update(lo=float(m.group(2)), hi=float(m.group(3)), lo_open=m.group(1) == "(",
                        hi_open=m.group(4) == ")")
        elif row["type"].startswith("Literal") and "|" in rng:
            info["choices"] = [c for c in rng.split("|")
                               if c not in _NEEDS_A_FILE.get(row["key"], ())]
        out[row["key"]] = info
    return out


def plus_keys() -> tuple[str, ...]:
    """The fields only the reverie_plus scorer reads (:mod:`memlab.recall.plus`): its weights and
    their shapes (``fusion.context_types``, a list, is not drawn)."""
    return ("fusion.dense_z", "fusion.bm25_z", "fusion.neighbour", "fusion.session",
            "fusion.window", "fusion.window_half_life_days", "fusion.speaker",
            "fusion.context_typed")


def reverie_keys() -> tuple[str, ...]:
    """The score-stage fields the reverie scorer and selection read (not ``fusion.scorer``, nor
    ``fusion.learned_model``, which only the learned scorer reads, nor :func:`plus_keys` and
    ``fusion.context_types``, which only reverie_plus reads)."""
    only_others = ("fusion.scorer", "fusion.learned_model", "fusion.context_types", *plus_keys())
    return tuple(k for k, f in field_ranges().items()
                 if f["stage"] == "score" and k not in only_others
                 and (k.startswith(_REVERIE_SECTIONS) or k in _RECALL_SCORE))


def _draw(rng: random.Random, key: str, f: Mapping[str, Any], spread: float, zero_width: float,
          interval: tuple[float, float] | None) -> Any:
    if f["type"] == "bool":
        return rng.random() < 0.5
    if "choices" in f:
        return rng.choice(f["choices"])
    if "lo" not in f:
        raise InvalidInput("keys", "not a number, bool or choice field: cannot draw it", key)
    d = float(f["default"])
    if interval is not None:
        lo, hi = interval
        value = rng.uniform(lo, hi)
    elif d > 0:
        lo, hi = max(f["lo"], d / spread), min(f["hi"], d * spread)
        value = math.exp(rng.uniform(math.log(lo), math.log(hi))) if lo > 0 else rng.uniform(lo, hi)
    else:
        lo, hi = max(f["lo"], d - zero_width), min(f["hi"], d + zero_width)
        value = rng.uniform(lo, hi)
    return int(round(value)) if f["type"] == "int" else value


def random_configs(base: MemlabConfig, n: int, *, seed: int, keys: Sequence[str] | None = None,
                   candidate_keys: Sequence[str] = (), candidate_share: float = 0.0,
                   scorers: Sequence[str] = ("reverie",), spread: float = 4.0,
                   zero_width: float = 0.5,
                   ranges: Mapping[str, tuple[float, float]] | None = None
                   ) -> list[MemlabConfig]:
    """``n`` configurations: ``base`` with every key of ``keys`` (default :func:`reverie_keys`)
    drawn (seeded), ``fusion.scorer`` drawn from ``scorers``, and, in a ``candidate_share`` of
    them, the ``candidate_keys`` drawn too (the others keep ``base``'s)."""
    fields = field_ranges()
    keys = reverie_keys() if keys is None else tuple(keys)
    unknown = [k for k in (*keys, *candidate_keys, *(ranges or {})) if k not in fields]
    if unknown:
        raise ConfigError(unknown[0], "not a config field", unknown[0])
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        with_candidates = candidate_keys and rng.random() < candidate_share
        drawn = list(keys) + (list(candidate_keys) if with_candidates else [])
        for attempt in range(50):
            values = {k: _draw(rng, k, fields[k], spread, zero_width, (ranges or {}).get(k))
                      for k in drawn}
            values["fusion.scorer"] = rng.choice(list(scorers))
            try:
                out.append(base.replace(**values))
                break
            except ConfigError:
                if attempt == 49:
                    raise
    return out

"""Search spaces of sweeps: dotted config keys -> float, int or categorical ranges, plus
constraints, read from ``experiments/sweeps/NAME.yaml`` and checked against the config schema.

A space file::

    name: reverie                  # default: the file's stem
    preset: reverie                # the preset it is meant for (memlab sweep --preset default)
    grid_points: 3                 # values per float/int key for the grid sampler (default 3)
    grid_max: 100000               # the most points a grid may have (default 100,000)
    params:
      fusion.relevance: {float: [0.0, 2.0]}
      fusion.temporal_half_life_days: {float: [1.0, 365.0], log: true}
      recall.lexical_pool_min: {int: [40, 400], step: 40}
      fusion.temporal_mode: {categorical: [intent, recency]}
    constraints:
      - normalise: [fusion.relevance, fusion.lexical, fusion.importance]
        sum: 1.0
      - order: [forgetting.short_term_half_life_days, forgetting.long_term_half_life_days]

Checks (each a :class:`~memlab.errors.ConfigError` naming the key, the rule and the value): the
key exists; its stage is not ``runtime`` (recall never reads it) nor ``render`` (only the prompt
block rendered after selection reads it: no ranking or metric moves); a float range is on a float
field and an int range on an int field; the range lies inside the field's range (``ge``/``gt``/``le``/
``lt``); ``log`` needs a low bound above 0; every categorical choice is a valid value of the field.
``normalise`` rescales its keys' sampled values so that they sum to ``sum`` (all 0: equal shares);
its keys are float keys of the space with a low bound >= 0, and ``sum`` must be a valid value of
each (a rescaled weight lies in [0, sum]).

``order: [a, b, ...]`` makes every trial satisfy ``a <= b <= ...`` by reparametrisation, not by
pruning: no trial is wasted and the sampler sees every key's own declared range. Each later key is
sampled in its range ``[lo, hi]`` as usual, then mapped monotonically onto ``[max(lo, v), hi]``
where ``v`` is the previous key's value (geometrically for a log range, linearly otherwise; a
sample unchanged whenever ``v <= lo``). So the applied value keeps the sampled one's place in its
range; a draw at ``lo`` means "as short as the previous key allows", one at ``hi`` stays ``hi``.
Optuna records the sampled values; :meth:`Space.apply` (the trial table's applied columns, the
configs of the best trials) maps them the same way. A ratio parametrisation (``long = short *
r``) was the alternative: it changes the long key's range into a product of two ranges that can
leave the field's bounds, and spreads trials unevenly over it. Order keys are float keys of the
space with no ``step``, each ``hi`` at least the previous key's (so the mapped range is never
empty), in no other constraint.

The grid sampler visits every point of the product of the keys' grid values; Optuna builds that
product as a list. A grid of more than ``grid_max`` points (default :data:`GRID_MAX`, 100,000) is
refused before it is built (:meth:`Space.check_grid`), its size computed exactly with Python
integers (``numpy.prod`` wrapped around int64 at 3^40) and shown by its log10 when huge: 60 keys
of 3 values are 3^60, about 4.2e28 points, which took every byte of memory before. ``grid_points``
may not exceed ``grid_max``.

The file is read by :func:`memlab.yamlfile.read_yaml`: UTF-8, no key twice, at most 64 levels
deep, each failure a ConfigError naming ``file:line:column``.
"""

from __future__ import annotations

import hashlib
import json
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from memlab.config import MemlabConfig, describe_field
from memlab.errors import ConfigError
from memlab.yamlfile import read_yaml

__all__ = ["Param", "Normalise", "Order", "Space", "load_space", "resolve_space", "SPACE_DIRS",
           "GRID_MAX"]

REPO_ROOT = Path(__file__).resolve().parents[2]
SPACE_DIRS = (Path("experiments/sweeps"), REPO_ROOT / "experiments" / "sweeps")
KINDS = ("float", "int", "categorical")
#: Stages of fields no metric of a sweep reads, and why (memlab.config's stages).
_UNMEASURED = {"runtime": "recall never reads it",
               "render": "only the prompt block rendered after selection reads it (no score, "
                         "ranking or metric changes)"}
#: the most points a grid sampler's grid may have unless a space's ``grid_max`` says otherwise
GRID_MAX = 100_000


@dataclass(frozen=True)
class Param:
    """One searched key: ``kind`` float|int|categorical; ``low``/``high`` (float, int), ``log``,
    ``step``; ``choices`` (categorical); ``grid`` the grid sampler's values (None: derived)."""

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] = ()
    grid: tuple[Any, ...] | None = None

    def suggest(self, trial) -> Any:
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log,
                                     step=int(self.step or 1))
        return trial.suggest_categorical(self.key, list(self.choices))

    def grid_count(self, points: int) -> int:
        """``len(self.grid_values(points))``, building no list for a float key."""
        if self.grid is None and self.kind == "float":
            return points
        return len(self.grid_values(points))

    def grid_values(self, points: int) -> list[Any]:
        """The values the grid sampler visits: ``grid`` when given, else ``points`` values spread
        over the range (geometrically with ``log``), the choices of a categorical key."""
        if self.grid is not None:
            return list(self.grid)
        if self.kind == "categorical":
            return list(self.choices)
        spread = np.geomspace if self.log else np.linspace
        vals = spread(self.low, self.high, points)
        if self.kind == "int":
            return sorted({int(round(v)) for v in vals})
        return [float(v) for v in vals]


@dataclass(frozen=True)
class Normalise:
    """Rescale ``keys`` so that they sum to ``total`` (all 0: equal shares)."""

    keys: tuple[str, ...]
    total: float

    def apply(self, values: dict[str, Any]) -> None:
        raw = np.array([float(values[k]) for k in self.keys])
        s = raw.sum()
        scaled = raw * (self.total / s) if s > 0 else np.full(len(raw), self.total / len(raw))
        values.update({k: float(v) for k, v in zip(self.keys, scaled)})


@dataclass(frozen=True)
class Order:
    """``keys[0] <= keys[1] <= ...``: each later key's sampled value, in its range ``(low, high,
    log)`` of ``ranges``, mapped onto ``[max(low, previous value), high]`` (module docstring)."""

    keys: tuple[str, ...]
    ranges: tuple[tuple[float, float, bool], ...]

    def apply(self, values: dict[str, Any]) -> None:
        prev = float(values[self.keys[0]])
        for key, (lo, hi, log) in zip(self.keys[1:], self.ranges[1:]):
            v = float(values[key])
            floor = max(lo, prev)
            if floor > lo:
                if log:
                    share = math.log(v / lo) / math.log(hi / lo)
                    v = math.exp(math.log(floor) + share * math.log(hi / floor))
                else:
                    v = floor + (v - lo) * (hi - floor) / (hi - lo)
                v = min(hi, max(floor, v))     # exact bounds whatever the rounding
            values[key] = v
            prev = v


Constraint = Normalise | Order


@dataclass(frozen=True)
class Space:
    """A validated search space."""

    name: str
    params: tuple[Param, ...]
    constraints: tuple[Constraint, ...] = ()
    preset: str | None = None
    grid_points: int = 3
    source: str = ""
    description: str = ""
    grid_max: int = GRID_MAX

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def suggest(self, trial) -> dict[str, Any]:
        """Sample every key on an Optuna trial, apply the constraints: the config overrides."""
        values = {p.key: p.suggest(trial) for p in self.params}
        for c in self.constraints:
            c.apply(values)
        return values

    def apply(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Optuna's recorded params -> the config overrides (constraints applied)."""
        values = {k: params[k] for k in self.keys if k in params}
        for c in self.constraints:
            if all(k in values for k in c.keys):
                c.apply(values)
        return values

    def grid(self) -> dict[str, list[Any]]:
        """The grid sampler's search space (call :meth:`check_grid` first: Optuna builds the
        product of these lists)."""
        return {p.key: p.grid_values(self.grid_points) for p in self.params}

    def grid_size(self) -> int:
        """The number of points of the grid: the product of the keys' value counts, an exact
        Python integer (no int64 wrap-around)."""
        return math.prod(p.grid_count(self.grid_points) for p in self.params)

    def check_grid(self) -> int:
        """The grid's size; ConfigError naming it when it is over ``grid_max``, before anything
        of that size is built."""
        counts = [p.grid_count(self.grid_points) for p in self.params]
        size = math.prod(counts)
        if size > self.grid_max:
            where = self.source or self.name
            raise ConfigError(f"{where}: grid", f"the grid sampler would visit {_count(counts)} "
                              f"points (the product of {len(counts)} keys' value counts), more "
                              f"than grid_max = {self.grid_max:,}: give fewer keys, fewer "
                              "grid_points or explicit grid values, use --sampler random or tpe "
                              "(which sample the same ranges), or raise grid_max in the space",
                              _count(counts))
        return size

    def digest(self) -> str:
        """A short hash of what the space searches (a study refuses another space)."""
        blob = json.dumps([[p.key, p.kind, p.low, p.high, p.log, p.step, list(p.choices)]
                           for p in self.params] + [[list(c.keys), c.total]
                                                     if isinstance(c, Normalise)
                                                     else ["order", list(c.keys)]
                                                     for c in self.constraints],
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, name: str = "space",
                  source: str = "") -> "Space":
        where = source or name
        if not isinstance(data, Mapping):
            raise ConfigError(where, "a search space is a mapping with 'params'",
                              type(data).__name__)
        unknown = set(data) - {"name", "preset", "grid_points", "grid_max", "params",
                               "constraints", "description"}
        if unknown:
            raise ConfigError(f"{where}: {sorted(map(str, unknown))[0]}", "unknown top-level key "
                              "of a search space (known: name, preset, description, grid_points, "
                              "grid_max, params, constraints)", sorted(map(str, unknown)))
        params_in = data.get("params")
        if not isinstance(params_in, Mapping) or not params_in:
            raise ConfigError(f"{where}: params", "must map at least one dotted config key to "
                              "its range", params_in)
        grid_max = data.get("grid_max", GRID_MAX)
        if isinstance(grid_max, bool) or not isinstance(grid_max, int) or grid_max < 1:
            raise ConfigError(f"{where}: grid_max", "must be an integer >= 1", grid_max)
        points = data.get("grid_points", 3)
        if (isinstance(points, bool) or not isinstance(points, int) or points < 2
                or points > grid_max):
            raise ConfigError(f"{where}: grid_points", f"must be an integer in [2, grid_max = "
                              f"{grid_max:,}]", points)
        params = tuple(_param(str(k), v) for k, v in params_in.items())
        constraints = tuple(_constraint(c, {p.key: p for p in params}, i)
                            for i, c in enumerate(data.get("constraints") or []))
        seen: dict[str, int] = {}
        for i, c in enumerate(constraints):
            for k in c.keys:
                if k in seen:
                    what = "normalise " if all(isinstance(constraints[j], Normalise)
                                               for j in (seen[k], i)) else ""
                    raise ConfigError(k, f"is in two {what}constraints ({seen[k]} and {i})", k)
                seen[k] = i
        return cls(name=str(data.get("name") or name), params=params, constraints=constraints,
                   preset=data.get("preset"), grid_points=points, source=source,
                   description=str(data.get("description") or ""), grid_max=grid_max)


def _count(counts: list[int]) -> str:
    """A grid's size as text: exact up to 10^15, else its power of ten from a sum of logs (the
    exact integer may have more digits than Python prints)."""
    size = math.prod(counts)
    if size < 10 ** 15:
        return f"{size:,}"
    exp = sum(math.log10(c) for c in counts)
    return f"about {10 ** (exp % 1):.1f}e{int(exp)}"


def _field(key: str):
    """The pydantic field of a dotted key (ConfigError 'unknown key' when there is none)."""
    describe_field(key)
    section, _, name = key.partition(".")
    return MemlabConfig.model_fields[section].annotation.model_fields[name]


def _base_type(annotation: Any) -> Any:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        return args[0]
    return annotation


def _bounds(f) -> dict[str, float]:
    out = {}
    for meta in f.metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if getattr(meta, attr, None) is not None:
                out[attr] = getattr(meta, attr)
    return out


def _check_value(key: str, value: Any, what: str) -> None:
    """``value`` must be a valid value of ``key`` (as the config itself validates it)."""
    try:
        MemlabConfig().replace(**{key: value})
    except ConfigError as exc:
        if exc.key != key:   # a cross-field rule: checked per trial, not here
            return
        raise ConfigError(key, f"{what} is not a valid value of the field: {exc.rule}",
                          value) from None


def _param(key: str, spec: Any) -> Param:
    info = describe_field(key)
    if info["planned"]:
        raise ConfigError(key, f"planned ({info['planned']}): no code reads it yet, a sweep over "
                          "it measures nothing", info["planned"])
    if info["stage"] in _UNMEASURED:
        raise ConfigError(key, f"stage '{info['stage']}': {_UNMEASURED[info['stage']]}, a sweep "
                          "over it measures nothing", info["stage"])
    if not isinstance(spec, Mapping):
        raise ConfigError(key, "a range is a mapping such as {float: [0.0, 1.0]}, {int: [1, 9]} "
                          "or {categorical: [a, b]}", spec)
    kinds = [k for k in KINDS if k in spec]
    if len(kinds) != 1:
        raise ConfigError(key, "give exactly one of float, int, categorical", dict(spec))
    kind = kinds[0]
    allowed = {kind, "grid"} | ({"log", "step"} if kind != "categorical" else set())
    extra = set(spec) - allowed
    if extra:
        raise ConfigError(key, f"unknown option(s) of a {kind} range (known: "
                          f"{', '.join(sorted(allowed))})", sorted(extra))
    grid = spec.get("grid")
    if grid is not None:
        if not isinstance(grid, (list, tuple)) or not grid:
            raise ConfigError(key, "grid must be a non-empty list of values", grid)
        for g in grid:
            _check_value(key, g, "grid value")
        grid = tuple(grid)
    f = _field(key)
    if kind == "categorical":
        choices = spec["categorical"]
        if not isinstance(choices, (list, tuple)) or not choices:
            raise ConfigError(key, "categorical needs a non-empty list of choices", choices)
        for c in choices:
            _check_value(key, c, "choice")
        return Param(key, kind, choices=tuple(choices), grid=grid)
    want = float if kind == "float" else int
    ftype = _base_type(f.annotation)
    if ftype is not want:
        raise ConfigError(key, f"a {kind} range needs a {kind} field; this field is "
                          f"{info['type']} (use categorical for other types)", kind)
    rng = spec[kind]
    if (not isinstance(rng, (list, tuple)) or len(rng) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in rng)
            or (kind == "int" and any(not isinstance(v, int) for v in rng))):
        raise ConfigError(key, f"{kind} range must be [low, high] of {kind}s", rng)
    low, high = rng
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ConfigError(key, "range must have finite low < high", rng)
    b = _bounds(f)
    if ("ge" in b and low < b["ge"]) or ("gt" in b and low <= b["gt"]):
        raise ConfigError(key, f"low bound outside the field's range {info['range']}", low)
    if ("le" in b and high > b["le"]) or ("lt" in b and high >= b["lt"]):
        raise ConfigError(key, f"high bound outside the field's range {info['range']}", high)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(key, "log must be true or false", log)
    if log and low <= 0:
        raise ConfigError(key, "a log range needs low > 0", low)
    step = spec.get("step")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, want) or step <= 0:
            raise ConfigError(key, f"step must be a positive {kind}", step)
        if log:
            raise ConfigError(key, "step and log cannot be combined (Optuna's rule)", step)
    return Param(key, kind, low=float(low) if kind == "float" else int(low),
                 high=float(high) if kind == "float" else int(high), log=log, step=step,
                 grid=grid)


def _order(spec: Mapping[str, Any], params: dict[str, Param], where: str) -> Order:
    keys = spec["order"]
    if not isinstance(keys, (list, tuple)) or len(keys) < 2 or len(set(map(str, keys))) < len(keys):
        raise ConfigError(where, "order needs a list of at least two distinct keys", keys)
    ranges, prev = [], None
    for k in keys:
        p = params.get(k)
        if p is None or p.kind != "float":
            raise ConfigError(k, f"{where}: order takes float keys of the space's params",
                              p.kind if p else "not in params")
        if p.step is not None or p.grid is not None:
            raise ConfigError(k, f"{where}: an ordered key has no step or grid (its value is "
                              "mapped into the range the previous key leaves)",
                              p.step if p.step is not None else list(p.grid))
        if prev is not None and p.high < prev.high:
            raise ConfigError(k, f"{where}: the high bound must be at least {prev.key}'s "
                              f"({prev.high:g}), else no value is left above a high draw of it",
                              p.high)
        ranges.append((float(p.low), float(p.high), bool(p.log)))
        prev = p
    return Order(tuple(str(k) for k in keys), tuple(ranges))


def _constraint(spec: Any, params: dict[str, Param], index: int) -> Normalise | Order:
    where = f"constraints[{index}]"
    if isinstance(spec, Mapping) and set(spec) == {"order"}:
        return _order(spec, params, where)
    if not isinstance(spec, Mapping) or set(spec) != {"normalise", "sum"}:
        raise ConfigError(where, "a constraint is {normalise: [keys...], sum: S} or "
                          "{order: [keys...]}", spec)
    keys, total = spec["normalise"], spec["sum"]
    if not isinstance(keys, (list, tuple)) or len(keys) < 2:
        raise ConfigError(where, "normalise needs a list of at least two keys", keys)
    if isinstance(total, bool) or not isinstance(total, (int, float)) or not total > 0:
        raise ConfigError(where, "sum must be a number > 0", total)
    for k in keys:
        p = params.get(k)
        if p is None or p.kind != "float":
            raise ConfigError(k, f"{where}: normalise takes float keys of the space's params",
                              p.kind if p else "not in params")
        if p.low < 0:
            raise ConfigError(k, f"{where}: a normalised weight needs low >= 0", p.low)
        _check_value(k, float(total), f"{where}: sum (the largest a normalised weight can be)")
    return Normalise(tuple(str(k) for k in keys), float(total))


def load_space(path: str | Path) -> Space:
    """Read and validate a search-space YAML file."""
    p = Path(path)
    return Space.from_dict(read_yaml(p, "search space"), name=p.stem, source=str(p))


def resolve_space(name_or_path: str | Path | Space) -> Space:
    """A :class:`Space`, a YAML path, or a shipped space's name (``reverie``)."""
    if isinstance(name_or_path, Space):
        return name_or_path
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.exists():
            raise ConfigError("space", "no such search-space file", str(p))
        return load_space(p)
    for d in SPACE_DIRS:
        cand = d / f"{name_or_path}.yaml"
        if cand.exists():
            return load_space(cand)
    known = sorted({f.stem for d in SPACE_DIRS if d.exists() for f in d.glob("*.yaml")})
    raise ConfigError("space", f"unknown search space; known: {', '.join(known)} (or a YAML "
                      "path)", str(name_or_path))

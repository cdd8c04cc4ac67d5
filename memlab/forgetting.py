"""Forgetting as retrieval suppression (Reverie §9.1): pure retention curves and eligibility.

Every function is pure numpy over arrays (scalars work too, and come back as 0-d arrays or floats
through numpy's usual broadcasting). Nothing here reads a clock or a store: the caller passes the
elapsed days, counts and layer codes from the feature table (``memlab.recall.features``).

The formula, term by term (§9.1)::

    references    = access_count + mention_count - 1                      (>= 0)
    reinforcement = 1 + alpha * log1p(references)
    strength      = max(floor, (base + 1.25 * importance + 0.5 * emotion_intensity) * reinforcement)
    retention     = exp(-decay_lambda * layer_scale * elapsed_days / strength)
    layer_scale   = layer_scale_<layer> / <layer>_half_life_days

With ``decay_lambda = ln 2`` (the default) a memory of strength 1 keeps half of itself after one
half-life. The permanent layer (code 0) and pinned memories (§11.3) always have retention 1.

``<layer>_half_life_days`` is therefore the half-life of a memory of strength 1 only. A memory's
*effective* half-life, and the days until its retention falls to any level r (the inverse of the
curve), follow from the same formula::

    days_to_retention(r) = -ln(r) * strength / (decay_lambda * layer_scale)
    half_life            = days_to_retention(1/2)

At importance 0.5 (strength 0.35 + 1.25 * 0.5 = 0.975) the long-term half-life is
0.975 * 90 = 87.75 days and the short-term one 0.975 * 7 = 6.8 days; such a memory stops being
eligible (retention < ``eligibility_threshold`` = 0.05) after ``days_to_retention(0.05)``: 4.32
half-lives, 379 and 29.5 days. :func:`cue_reactivation` is the score term of §8 through which a
strong cue lifts a faded memory (``fusion.cue_reactivation_*``): the scorer
(:mod:`memlab.recall.score`) computes the same values, a test holds them equal.

Forgetting never deletes: :func:`eligible` only says whether a memory may be *retrieved* now; a
strong cue (relevance >= ``eligibility_relevance``) still recalls a forgotten memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memlab.config import ForgettingConfig, FusionConfig, MemlabConfig
from memlab.errors import InvalidInput
from memlab.types import LAYER_CODES

PERMANENT = LAYER_CODES["permanent"]
LONG_TERM = LAYER_CODES["long_term"]
SHORT_TERM = LAYER_CODES["short_term"]

__all__ = [
    "references", "reinforcement", "strength", "emotion_intensity", "layer_scale", "retention",
    "eligible", "forgetting_curve", "days_to_retention", "half_life", "forgotten_after",
    "eligibility_curve", "cue_reactivation", "layer_code",
]


def _section(cfg: MemlabConfig | ForgettingConfig) -> ForgettingConfig:
    """The forgetting section of a root config, or the section itself."""
    sec = cfg.forgetting if isinstance(cfg, MemlabConfig) else cfg
    if not isinstance(sec, ForgettingConfig):
        raise InvalidInput("cfg", "must be a MemlabConfig or a ForgettingConfig",
                           type(cfg).__name__)
    return sec


def references(access_count: Any, mention_count: Any) -> np.ndarray:
    """``access_count + mention_count - 1``, never below 0 (a memory written once has 0)."""
    acc = np.asarray(access_count, dtype=np.float64)
    men = np.asarray(mention_count, dtype=np.float64)
    return np.maximum(acc + men - 1.0, 0.0)


def reinforcement(refs: Any, *, alpha: float) -> np.ndarray:
    """``1 + alpha * log1p(refs)``: each time a memory is recalled or restated it fades slower."""
    r = np.maximum(np.asarray(refs, dtype=np.float64), 0.0)
    return 1.0 + alpha * np.log1p(r)


def strength(importance: Any, emotion_intensity: Any, reinforcement: Any,
             cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """``max(floor, (base + k_imp * importance + k_emo * emotion_intensity) * reinforcement)``.

    Importance and emotion intensity are clipped to [0, 1] first (§9.1 clamps importance).
    """
    f = _section(cfg)
    imp = np.clip(np.asarray(importance, dtype=np.float64), 0.0, 1.0)
    emo = np.clip(np.asarray(emotion_intensity, dtype=np.float64), 0.0, 1.0)
    raw = (f.strength_base + f.strength_importance * imp + f.strength_emotion * emo) \
        * np.asarray(reinforcement, dtype=np.float64)
    return np.maximum(f.strength_floor, raw)


def emotion_intensity(emotion_max: Any, *, scale: float) -> np.ndarray:
    """``max|emotion| / scale`` clipped to [0, 1] (§9.1 divides by 100: fusion.emotion_scale)."""
    if not scale > 0:
        raise InvalidInput("scale", "must be > 0", scale)
    return np.clip(np.asarray(emotion_max, dtype=np.float64) / scale, 0.0, 1.0)


def _check_layers(codes: np.ndarray) -> None:
    bad = (codes != PERMANENT) & (codes != LONG_TERM) & (codes != SHORT_TERM)
    if np.any(bad):
        raise InvalidInput("layer", "must be a layer code: 0 permanent, 1 long_term, "
                           "2 short_term", codes[bad].ravel()[0].item())


def layer_scale(layer_codes: Any, cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """Per-day decay rate: ``layer_scale_<layer> / <layer>_half_life_days`` (0 for permanent)."""
    f = _section(cfg)
    codes = np.asarray(layer_codes)
    _check_layers(codes)
    long_rate = f.layer_scale_long_term / f.long_term_half_life_days
    short_rate = f.layer_scale_short_term / f.short_term_half_life_days
    return np.where(codes == LONG_TERM, long_rate, np.where(codes == SHORT_TERM, short_rate, 0.0))


def retention(layer_codes: Any, since_access_days: Any, importance: Any, emotion_intensity: Any,
              refs: Any, pinned: Any, cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """Retention in (0, 1] of each memory (§9.1); 1 for the permanent layer and pinned memories.

    ``since_access_days`` is the time since the forgetting anchor (last access, else the write);
    negative values (clock skew) count as 0. ``refs`` are :func:`references`.
    """
    f = _section(cfg)
    codes = np.asarray(layer_codes)
    rate = layer_scale(codes, f)
    days = np.maximum(np.asarray(since_access_days, dtype=np.float64), 0.0)
    reinf = reinforcement(refs, alpha=f.reinforcement_alpha)
    s = strength(importance, emotion_intensity, reinf, f)
    out = np.exp(-f.decay_lambda * rate * days / s)
    keep = (codes == PERMANENT) | np.asarray(pinned, dtype=bool)
    return np.where(keep, 1.0, out)


def eligible(retention: Any, relevance: Any, is_permanent: Any,
             cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """May the memory be retrieved now? Permanent, or retention >= threshold, or a strong cue.

    Relevance NaN fails the cue test. Forgetting is suppression, never deletion: a memory that is
    not eligible today is still in the store and a strong enough cue recalls it.
    """
    f = _section(cfg)
    ret = np.asarray(retention, dtype=np.float64)
    rel = np.asarray(relevance, dtype=np.float64)
    return (np.asarray(is_permanent, dtype=bool) | (ret >= f.eligibility_threshold)
            | (rel >= f.eligibility_relevance))


def forgetting_curve(days: Any, *, importance: float, emotion: float = 0.0, refs: float = 0.0,
                     layer: str | int = "long_term", pinned: bool = False,
                     cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """Retention after each of ``days`` since the last access, for plots.

    ``emotion`` is the emotion *intensity* on [0, 1] (see :func:`emotion_intensity`); ``layer`` a
    name (``permanent``, ``long_term``, ``short_term``) or its code.
    """
    code = layer_code(layer)
    d = np.asarray(days, dtype=np.float64)
    if np.any(np.isnan(d)):
        raise InvalidInput("days", "must not contain NaN", d[np.isnan(d)].ravel()[0].item())
    return retention(np.full(d.shape, code, dtype=np.int8), d, importance, emotion, refs, pinned,
                     cfg)


def layer_code(layer: str | int) -> int:
    """A layer name (``permanent``, ``long_term``, ``short_term``) or code -> its code."""
    if isinstance(layer, str):
        if layer not in LAYER_CODES:
            raise InvalidInput("layer", f"must be one of {sorted(LAYER_CODES)}", layer)
        return LAYER_CODES[layer]
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise InvalidInput("layer", f"must be one of {sorted(LAYER_CODES)} or its code",
                           layer)
    code = int(layer)
    _check_layers(np.asarray([code]))
    return code


def days_to_retention(level: Any, *, importance: Any, emotion: Any = 0.0, refs: Any = 0.0,
                      layer: str | int = "long_term", pinned: bool = False,
                      cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """Days since the last access after which retention falls to ``level`` (in (0, 1]).

    ``-ln(level) * strength / (decay_lambda * layer_scale)``: the inverse of
    :func:`forgetting_curve` (0 days at level 1). Infinite for the permanent layer and pinned
    memories, which never fade. ``importance``, ``emotion`` (intensity on [0, 1]) and ``refs``
    (:func:`references`) broadcast like :func:`retention`'s arguments.
    """
    f = _section(cfg)
    lv = np.asarray(level, dtype=np.float64)
    bad = ~((lv > 0.0) & (lv <= 1.0))
    if np.any(bad):
        raise InvalidInput("level", "a retention level must be in (0, 1]",
                           lv[bad].ravel()[0].item())
    code = layer_code(layer)
    s = strength(importance, emotion, reinforcement(refs, alpha=f.reinforcement_alpha), f)
    if code == PERMANENT or pinned:
        return np.broadcast_to(np.inf, np.broadcast(lv, s).shape).astype(np.float64)
    rate = float(layer_scale(np.asarray([code]), f)[0])
    return -np.log(lv) * s / (f.decay_lambda * rate)


def half_life(*, importance: Any, emotion: Any = 0.0, refs: Any = 0.0,
              layer: str | int = "long_term", pinned: bool = False,
              cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """The effective half-life in days of a memory of this importance, emotion intensity,
    references and layer: ``ln 2 * strength / (decay_lambda * layer_scale)`` (with the default
    ``decay_lambda = ln 2``: ``strength * <layer>_half_life_days``; 87.75 days at importance 0.5
    in the long-term layer). Infinite for the permanent layer and pinned memories."""
    return days_to_retention(0.5, importance=importance, emotion=emotion, refs=refs, layer=layer,
                             pinned=pinned, cfg=cfg)


def forgotten_after(*, importance: Any, emotion: Any = 0.0, refs: Any = 0.0,
                    layer: str | int = "long_term", pinned: bool = False,
                    cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """Days after which the memory is no longer eligible without a strong cue: retention falls
    below ``eligibility_threshold`` (:func:`days_to_retention` of it; a threshold of 0 never
    forgets: infinite)."""
    f = _section(cfg)
    if f.eligibility_threshold <= 0.0:
        s = strength(importance, emotion, reinforcement(refs, alpha=f.reinforcement_alpha), f)
        return np.full(np.shape(s), np.inf)
    return days_to_retention(f.eligibility_threshold, importance=importance, emotion=emotion,
                             refs=refs, layer=layer, pinned=pinned, cfg=f)


def eligibility_curve(days: Any, *, relevance: float, importance: float, emotion: float = 0.0,
                      refs: float = 0.0, layer: str | int = "long_term", pinned: bool = False,
                      cfg: MemlabConfig | ForgettingConfig) -> np.ndarray:
    """Whether a memory asked about with this cue ``relevance`` may be retrieved after each of
    ``days`` (:func:`eligible` of :func:`forgetting_curve`): True until
    :func:`forgotten_after`, then only when ``relevance >= eligibility_relevance``."""
    ret = forgetting_curve(days, importance=importance, emotion=emotion, refs=refs, layer=layer,
                           pinned=pinned, cfg=cfg)
    return eligible(ret, np.full(ret.shape, relevance, dtype=np.float64),
                    np.full(ret.shape, layer_code(layer) == PERMANENT), cfg)


def cue_reactivation(relevance: Any, retention: Any,
                     cfg: MemlabConfig | FusionConfig) -> np.ndarray:
    """The cue-reactivation score term (§8): ``min(relevance * (1 - retention) * factor, cap)``
    with ``fusion.cue_reactivation_factor`` and ``fusion.cue_reactivation_cap``: the more a
    memory has faded, the more a relevant cue lifts it, never by more than the cap."""
    fu = cfg.fusion if isinstance(cfg, MemlabConfig) else cfg
    if not isinstance(fu, FusionConfig):
        raise InvalidInput("cfg", "must be a MemlabConfig or a FusionConfig", type(cfg).__name__)
    rel = np.asarray(relevance, dtype=np.float64)
    ret = np.asarray(retention, dtype=np.float64)
    return np.minimum(rel * (1.0 - ret) * fu.cue_reactivation_factor, fu.cue_reactivation_cap)

"""The gold memory of each question, and recall against its age (issue 20).

A question's *gold* memories are its evidence items that were written by the time it is asked
(replay writes an item when its timestamp is at or before ``asked_at``; evidence from later cannot
be recalled and is left out here). Per question, :func:`gold_columns` gives:

=======================  ========================================================================
gold_age_days            ``(asked_at - timestamp) / 86400`` of the **youngest** gold memory (the
                         most recent evidence: the one forgetting suppresses least, so a drop of
                         recall with this age is not an artefact of one old gold among young
                         ones); NaN when no gold was written yet
gold_age_days_oldest     the same of the oldest gold (equal to gold_age_days with one gold)
gold_count               gold memories written by ``asked_at``
gold_layer               the youngest gold's layer as the replay stored it (``permanent``,
                         ``long_term``, ``short_term``; a pandas string column); NaN when
                         unknown
gold_importance          its stored importance in [0, 1]; NaN when unknown
gold_emotion             its emotion intensity in [0, 1] (``emotion_max / fusion.emotion_scale``)
gold_references          its references, ``access_count + mention_count - 1`` (§9.1)
=======================  ========================================================================

The stored values come from the replay's raw-signal table: the memory's row for any question of
its conversation (a replay never changes a memory it wrote: no recall reinforces it, no later
write re-routes it). A gold memory that was never a candidate of any question of its
conversation has no row: its layer, importance, emotion and references are unknown (NaN)
and counted in the frame's ``attrs["gold_unseen"]``. The age needs no replay.

:func:`recall_by_age` bins a per-query metric by ``gold_age_days``: per preset and bin, the
question count, the mean and a confidence interval (Wilson's score interval, or a seeded
percentile bootstrap); the figure is :func:`memlab.bench.forgetplots.recall_by_age_plot`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from memlab.bench.datasets.canonical import Dataset
from memlab.bench.replay import Replayed
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.frames import labelled
from memlab.types import LAYER_CODES

__all__ = ["GOLD_COLUMNS", "AGE_BINS", "gold_columns", "with_gold_columns", "recall_by_age",
           "wilson_interval", "bootstrap_interval", "bin_labels"]

GOLD_COLUMNS = ("gold_age_days", "gold_age_days_oldest", "gold_count", "gold_layer",
                "gold_importance", "gold_emotion", "gold_references")
#: default bin edges in days: a day, a week, two weeks, a month, two, four, eight, then older
AGE_BINS: tuple[float, ...] = (0.0, 1.0, 7.0, 14.0, 30.0, 60.0, 120.0, 240.0, math.inf)
SECONDS_PER_DAY = 86400.0
_LAYER_NAMES = {code: name for name, code in LAYER_CODES.items()}
INTERVALS = ("wilson", "bootstrap")


def _stored(rep: Replayed, emotion_scale: float) -> dict[tuple[str, str], tuple]:
    """(conversation, item id) -> (layer name, importance, emotion, references) of every memory
    that is a row of the replay's table (its first row)."""
    cols = rep.features.columns
    if not len(cols) or "row" not in cols or not len(cols["row"]):
        return {}
    rows = np.asarray(cols["row"])
    uniq, first = np.unique(rows, return_index=True)
    convs = rep.questions["conversation_id"].astype(str).to_numpy()[np.asarray(cols["qid"])[first]]
    layer = np.asarray(cols["layer"])[first]
    imp = np.asarray(cols["importance"], dtype=np.float64)[first]
    emo = np.clip(np.asarray(cols["emotion_max"], dtype=np.float64)[first] / emotion_scale, 0, 1)
    refs = np.maximum(np.asarray(cols["access_count"], dtype=np.float64)[first]
                      + np.asarray(cols["mention_count"], dtype=np.float64)[first] - 1.0, 0.0)
    return {(c, rep.row_item[int(r)]): (_LAYER_NAMES.get(int(la)), float(i), float(e), float(f))
            for c, r, la, i, e, f in zip(convs, uniq, layer, imp, emo, refs)}


def gold_columns(ds: Dataset, rep: Replayed | None = None, *,
                 cfg: MemlabConfig | None = None) -> pd.DataFrame:
    """The :data:`GOLD_COLUMNS` of every question of ``ds`` (index ``conversation_id::query_id``;
    see the module docstring). ``rep``: the replay of ``ds`` the stored values are read from
    (None: age and count only, the rest unknown); ``cfg``: its config (the emotion scale;
    None: the default)."""
    scale = (cfg or MemlabConfig()).fusion.emotion_scale
    stored = _stored(rep, scale) if rep is not None else {}
    unknown = (None, math.nan, math.nan, math.nan)
    keys, data, unseen = [], [], 0
    for conv in ds.conversations():
        stamps = {it.item_id: it.timestamp.timestamp() for it in ds.items_of(conv)}
        for q in ds.questions_of(conv):
            asked = q.asked_at.timestamp()
            gold = [(asked - stamps[e]) / SECONDS_PER_DAY for e in q.evidence
                    if e in stamps and stamps[e] <= asked]
            keys.append(f"{conv}::{q.query_id}")
            if not gold:
                data.append((math.nan, math.nan, 0, *unknown))
                continue
            written = [e for e in q.evidence if e in stamps and stamps[e] <= asked]
            youngest = written[int(np.argmin(gold))]
            got = stored.get((conv, youngest))
            if got is None:
                unseen += rep is not None
                got = unknown
            data.append((min(gold), max(gold), len(gold), *got))
    out = pd.DataFrame(data, index=pd.Index(keys), columns=list(GOLD_COLUMNS))
    out = out.astype({"gold_age_days": "float64", "gold_age_days_oldest": "float64",
                      "gold_count": "int64", "gold_layer": "str", "gold_importance": "float64",
                      "gold_emotion": "float64", "gold_references": "float64"})
    out.attrs["gold_unseen"] = int(unseen)
    return out


def with_gold_columns(per_query: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """``per_query`` with the :data:`GOLD_COLUMNS` of its questions appended (``gold`` from
    :func:`gold_columns`; a question it lacks gets unknown values)."""
    return per_query.join(gold.reindex(per_query.index)[list(GOLD_COLUMNS)])


def bin_labels(edges: Sequence[float]) -> list[str]:
    """``"0-1"``, ``"1-7"``, ..., ``"240+"``: a label per bin of ``edges`` (days)."""
    def num(v: float) -> str:
        return f"{v:g}"
    return [f"{num(lo)}+" if math.isinf(hi) else f"{num(lo)}-{num(hi)}"
            for lo, hi in zip(edges[:-1], edges[1:])]


def _check_edges(edges: Sequence[float]) -> np.ndarray:
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or len(e) < 2 or np.isnan(e).any() or np.any(np.diff(e) <= 0):
        raise InvalidInput("bins", "must be at least two increasing bin edges in days (inf "
                           "allowed last)", list(edges))
    return e


def wilson_interval(mean: float, n: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval of a proportion ``mean`` over ``n`` questions. For per-query
    values in [0, 1] that are not all 0 or 1 (recall@k with several gold items), ``mean * (1 -
    mean)`` bounds their variance, so the interval is a conservative one. (NaN, NaN) when n = 0."""
    if n == 0:
        return math.nan, math.nan
    z = stats.norm.ppf(0.5 + confidence / 2)
    denom = 1 + z * z / n
    centre = (mean + z * z / (2 * n)) / denom
    half = z * math.sqrt(mean * (1 - mean) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap_interval(values: np.ndarray, *, confidence: float = 0.95, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (``resamples`` draws from a
    generator seeded with ``seed``). (NaN, NaN) when empty."""
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1)
    tail = (1 - confidence) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


def recall_by_age(frames: pd.DataFrame | Mapping[str, pd.DataFrame], *,
                  metric: str = "recall@10", bins: Sequence[float] = AGE_BINS,
                  age: str = "gold_age_days", interval: str = "wilson",
                  confidence: float = 0.95, resamples: int = 2000,
                  seed: int = 0) -> pd.DataFrame:
    """``metric`` against the age of the gold memory, binned: one row per preset and bin.

    ``frames``: per-query frames with ``metric`` and ``age`` columns (:func:`gold_columns`
    joined), one or ``{preset: frame}``. Bins are ``[lo, hi)`` in days (``bins`` their edges).
    Columns: ``preset``, ``bin`` (label), ``lo``, ``hi``, ``n`` (questions), ``mean``, ``low``
    and ``high`` (the ``confidence`` interval: ``interval`` ``wilson`` or ``bootstrap``), and
    ``age_median`` (the median age of the bin's questions, where a figure puts the point).
    Questions without an age (no gold written yet) fall in no bin; their count per preset is in
    ``attrs["without_age"]``.
    """
    if interval not in INTERVALS:
        raise InvalidInput("interval", f"must be one of {', '.join(INTERVALS)}", interval)
    if not 0 < confidence < 1:
        raise InvalidInput("confidence", "must be in (0, 1)", confidence)
    edges = _check_edges(bins)
    labels = bin_labels(edges)
    rows, without = [], {}
    for name, frame in labelled(frames, field="frames").items():
        for col in (metric, age):
            if col not in frame.columns:
                raise InvalidInput(f"frames[{name!r}]", f"has no column {col!r} (gold ages: "
                                   "memlab.bench.goldage.gold_columns)", col)
        values = frame[metric].to_numpy(dtype=np.float64)
        ages = frame[age].to_numpy(dtype=np.float64)
        if np.any((values < 0) | (values > 1)):
            raise InvalidInput(metric, "values must be in [0, 1] for a proportion's interval",
                               float(values[(values < 0) | (values > 1)][0]))
        known = ~np.isnan(ages)
        without[name] = int((~known).sum())
        which = np.searchsorted(edges, ages, side="right") - 1   # [lo, hi)
        for b, label in enumerate(labels):
            sel = known & (which == b)
            v = values[sel]
            n, mean = int(sel.sum()), float(v.mean()) if sel.any() else math.nan
            if interval == "wilson":
                low, high = wilson_interval(mean, n, confidence=confidence)
            else:
                low, high = bootstrap_interval(v, confidence=confidence, resamples=resamples,
                                               seed=seed)
            rows.append({"preset": name, "bin": label, "lo": edges[b], "hi": edges[b + 1],
                         "n": n, "mean": mean, "low": low, "high": high,
                         "age_median": float(np.median(ages[sel])) if n else math.nan})
    out = pd.DataFrame(rows)
    out.attrs.update({"metric": metric, "age": age, "interval": interval,
                      "confidence": confidence, "without_age": without})
    return out

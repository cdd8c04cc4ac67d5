"""Paired significance tests over per-query metrics: does preset B score differently from preset A
on the same questions, or could the difference of their means be chance?

API (what ``memlab bench --compare``, ``memlab sweep`` and notebooks call)
-------------------------------------------------------------------------
:func:`compare_presets` ``(frames, *, metrics=None, resamples=10_000, seed=0,
method="randomisation")`` takes ``{preset name: per-query DataFrame}`` (the first preset is the
baseline; index = question keys, one row per question, the same questions in every frame; one
column per metric, e.g. :func:`memlab.bench.metrics.evaluate` or
:func:`memlab.tune.evaluate.per_query`) and returns a long DataFrame indexed by
``(preset, metric)`` with columns ``mean`` (the preset's mean), ``diff`` (its mean minus the
baseline's) and ``p`` (two-sided; NaN on the baseline's own rows, whose ``diff`` is 0).
``.unstack("metric")`` gives one row per preset. ``frame.attrs`` records the baseline, the
method, the resamples, the seed, the number of questions and whether the p-values are exact.
``metrics`` None: every numeric column the frames share. :func:`compare_with_config` is the same
with the method, resamples and seed read from ``cfg.bench.significance_*``.

:func:`paired_test` ``(a, b, ...)`` tests two aligned arrays (one question per row; 1-D, or 2-D
with one column per metric) and returns a :class:`PairedTest` (means, difference, p).
:func:`paired_p_values` is the kernel: per column of a ``(questions, columns)`` matrix of paired
differences, the p-value.

Errors (:class:`memlab.errors.InvalidInput`): no question; a question in one frame and not in the
baseline (or the reverse), named, never silently dropped; a duplicated question key; a metric
missing from a frame; NaN in a metric, naming the preset, the metric and the questions.

The tests
---------
Statistic: the mean of the paired differences ``d_i = b_i - a_i`` over the ``n`` questions.

``randomisation`` (default): Fisher's paired randomisation test (Smucker, Allan & Carterette,
CIKM 2007; ranx's ``fisher``). Under the null hypothesis the two scores of each question are
exchangeable, so each ``d_i`` keeps or flips its sign with probability 1/2. ``resamples`` random
sign vectors ``s`` give ``p = (1 + #{|mean(s d)| >= |mean(d)|}) / (1 + resamples)`` (Phipson &
Smyth 2010: a Monte-Carlo p-value never reads 0; ranx reports ``# / resamples``; the two differ
by less than ``1 / resamples``). When ``2**n <= resamples`` every sign vector is enumerated
instead and ``p = #{...} / 2**n`` is exact: one question gives p = 1, as it must.

``bootstrap``: the paired bootstrap test (Efron & Tibshirani 1993, ch. 16; Sakai, SIGIR 2006,
with the mean rather than the studentised statistic): ``resamples`` resamplings of the questions
with replacement, ``p = (1 + #{|mean(d*) - mean(d)| >= |mean(d)|}) / (1 + resamples)`` (the
bootstrap distribution shifted to the null's mean 0).

Identical scores (``d = 0``) give p = 1 under both. "At least as extreme" is judged with a
tolerance of 1e-9 relative to ``sum |d_i|``, so that sign vectors that give the same sum in
another floating-point order count (without it a tie can fall on either side of the bound).

Vectorised: the resamples are a ``(resamples, n)`` matrix of signs (or bootstrap counts) drawn in
chunks of at most :data:`CHUNK_ELEMENTS` cells (32 MB of float64), and every column (all metrics
of all comparisons) is tested at once by one matrix product per chunk; no Python loop runs per
resample. Each sign vector takes ``ceil(n / 64)`` raw 64-bit draws of the seeded generator (each
bootstrap resample ``n`` float64 draws), so the chunk size does not change the result, and every
column sees the same sign vectors: testing columns together or one by one gives the same
p-values. Sign vector ``j`` flips question ``i`` by position, so a sampled p-value depends on the
order of the questions (the baseline frame's order) as well as on the seed; an exact one does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from memlab.errors import InvalidInput

if TYPE_CHECKING:
    from memlab.config import MemlabConfig

__all__ = [
    "CHUNK_ELEMENTS",
    "METHODS",
    "PairedTest",
    "compare_presets",
    "compare_with_config",
    "paired_p_values",
    "paired_test",
]

Method = Literal["randomisation", "bootstrap"]
METHODS: tuple[str, ...] = ("randomisation", "bootstrap")
CHUNK_ELEMENTS = 1 << 22
"""Cells of one chunk of the resample matrix (memory only: the p-values do not depend on it)."""
TIE_TOLERANCE = 1e-9
"""Relative tolerance of "at least as extreme" (floating-point ties; see the module docstring)."""


@dataclass(frozen=True)
class PairedTest:
    """One paired test: ``mean_b - mean_a = diff``, two-sided ``p``; arrays when several columns
    were tested at once."""

    mean_a: float | np.ndarray
    mean_b: float | np.ndarray
    diff: float | np.ndarray
    p: float | np.ndarray
    n: int
    method: str
    resamples: int
    exact: bool


def _check_settings(resamples: int, seed: int, method: str) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) \
            or resamples < 1:
        raise InvalidInput("resamples", "must be a whole number >= 1", resamples)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInput("seed", "must be a whole number >= 0", seed)
    if method not in METHODS:
        raise InvalidInput("method", f"one of {', '.join(METHODS)}", method)


def is_exact(n: int, resamples: int, method: str = "randomisation") -> bool:
    """Whether the randomisation test enumerates all ``2**n`` sign vectors (at most
    ``resamples`` of them) instead of sampling."""
    return method == "randomisation" and n < 63 and (1 << n) <= resamples


def _chunks(total: int, n: int) -> list[tuple[int, int]]:
    rows = max(1, CHUNK_ELEMENTS // max(n, 1))
    return [(start, min(total, start + rows)) for start in range(0, total, rows)]


def paired_p_values(diffs: np.ndarray, *, resamples: int = 10_000, seed: int = 0,
                    method: Method = "randomisation") -> np.ndarray:
    """Two-sided p-value of each column of ``diffs`` (``(questions, columns)``, or 1-D: one
    column), the paired differences of one metric between two systems, question by question."""
    _check_settings(resamples, seed, method)
    d = np.asarray(diffs, dtype=np.float64)
    one = d.ndim == 1
    d = d[:, None] if one else d
    if d.ndim != 2 or d.shape[0] == 0:
        raise InvalidInput("diffs", "needs a (questions, columns) matrix with at least one "
                           "question", d.shape)
    if np.isnan(d).any():
        cols = sorted({int(c) for c in np.nonzero(np.isnan(d))[1]})
        raise InvalidInput("diffs", f"NaN in column(s) {cols}: a p-value needs every question's "
                           "score", "NaN")
    n = d.shape[0]
    observed = d.sum(axis=0)                              # the sum: mean * n, the same test
    bound = np.abs(observed) - TIE_TOLERANCE * np.abs(d).sum(axis=0)
    hits = np.zeros(d.shape[1], dtype=np.int64)
    if is_exact(n, resamples, method):
        total = 1 << n
        bits = np.arange(n, dtype=np.int64)
        for lo, hi in _chunks(total, n):
            flips = (np.arange(lo, hi, dtype=np.int64)[:, None] >> bits) & 1
            hits += (np.abs((1.0 - 2.0 * flips) @ d) >= bound).sum(axis=0)
        p = hits / total
    else:
        rng = np.random.default_rng(seed)
        words = -(-n // 64)                               # 64 sign bits per raw 64-bit draw
        for lo, hi in _chunks(resamples, n):
            if method == "randomisation":
                raw = rng.bit_generator.random_raw((hi - lo) * words).astype("<u8")
                flips = np.unpackbits(raw.view(np.uint8).reshape(hi - lo, words * 8),
                                      axis=1)[:, :n]
                stat = np.abs(observed - 2.0 * (flips.astype(np.float64) @ d))
            else:
                u = rng.random((hi - lo, n))          # one 64-bit draw per cell
                picks = np.minimum((u * n).astype(np.int64), n - 1)
                offsets = np.arange(hi - lo, dtype=np.int64)[:, None] * n
                counts = np.bincount((picks + offsets).ravel(), minlength=(hi - lo) * n)
                stat = np.abs(counts.reshape(hi - lo, n).astype(np.float64) @ d - observed)
            hits += (stat >= bound).sum(axis=0)
        p = (1 + hits) / (1 + resamples)
    p = np.minimum(p, 1.0)
    return p[0] if one else p


def paired_test(a, b, *, resamples: int = 10_000, seed: int = 0,
                method: Method = "randomisation") -> PairedTest:
    """Test ``b`` against ``a``: aligned per-question scores (1-D, or 2-D with one column per
    metric). Floats when 1-D, arrays per column when 2-D."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise InvalidInput("b", f"must have a's shape {x.shape}: one score per question, "
                           "the same questions in the same order", y.shape)
    for name, arr in (("a", x), ("b", y)):
        if arr.size and np.isnan(arr).any():
            raise InvalidInput(name, "NaN score: a p-value needs every question's score", "NaN")
    p = paired_p_values(y - x, resamples=resamples, seed=seed, method=method)
    n = x.shape[0]
    mean_a, mean_b = x.mean(axis=0), y.mean(axis=0)
    scalar = x.ndim == 1
    as_out = (lambda v: float(v)) if scalar else (lambda v: np.asarray(v))
    return PairedTest(as_out(mean_a), as_out(mean_b), as_out(mean_b - mean_a), as_out(p), n,
                      method, resamples, is_exact(n, resamples, method))


def _preview(keys: Sequence, show: int = 5) -> str:
    keys = [str(k) for k in keys]
    more = f" ... and {len(keys) - show} more" if len(keys) > show else ""
    return ", ".join(keys[:show]) + more


def _metrics_of(frames: Mapping[str, pd.DataFrame], metrics: Sequence[str] | None) -> list[str]:
    first = next(iter(frames.values()))
    if metrics is None:
        shared = [c for c in first.columns
                  if all(c in f.columns and pd.api.types.is_numeric_dtype(f[c])
                         and not pd.api.types.is_bool_dtype(f[c]) for f in frames.values())]
        if not shared:
            raise InvalidInput("metrics", "the frames share no numeric column to test",
                               list(first.columns))
        return shared
    if isinstance(metrics, str) or not len(metrics):
        raise InvalidInput("metrics", "a non-empty list of column names", metrics)
    for name, frame in frames.items():
        missing = [m for m in metrics if m not in frame.columns]
        if missing:
            raise InvalidInput(f"frames[{name!r}]", f"has no column {', '.join(missing)}; it has "
                               f"{', '.join(map(str, frame.columns))}", missing)
    return list(metrics)


def _aligned(frames: Mapping[str, pd.DataFrame], metrics: list[str]) -> np.ndarray:
    """(presets, questions, metrics) in the baseline's question order; errors name what is
    missing, duplicated or NaN."""
    names = list(frames)
    base = frames[names[0]].index
    out = []
    for name in names:
        frame = frames[name]
        dup = frame.index[frame.index.duplicated()]
        if len(dup):
            raise InvalidInput(f"frames[{name!r}]", "one row per question: duplicated question "
                               f"key(s) {_preview(dup.unique())}", len(dup))
        missing, extra = base.difference(frame.index), frame.index.difference(base)
        if len(missing) or len(extra):
            why = []
            if len(missing):
                why.append(f"{len(missing)} question(s) of the baseline {names[0]!r} missing "
                           f"from {name!r}: {_preview(missing)}")
            if len(extra):
                why.append(f"{len(extra)} question(s) of {name!r} not in the baseline "
                           f"{names[0]!r}: {_preview(extra)}")
            raise InvalidInput(f"frames[{name!r}]", "a paired test needs the same questions in "
                               "every frame; " + "; ".join(why), len(missing) + len(extra))
        values = frame.loc[base, metrics]
        try:
            arr = values.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            bad = [m for m in metrics if not pd.api.types.is_numeric_dtype(values[m])]
            raise InvalidInput(f"frames[{name!r}]", "metrics must be numbers; not numeric: "
                               f"{', '.join(bad)}", bad) from None
        nan = np.isnan(arr)
        if nan.any():
            col = int(np.nonzero(nan.any(axis=0))[0][0])
            rows = base[nan[:, col]]
            raise InvalidInput(f"frames[{name!r}][{metrics[col]!r}]", "NaN for "
                               f"{len(rows)} question(s) ({_preview(rows)}): a p-value needs "
                               "every question's score", "NaN")
        out.append(arr)
    return np.stack(out)


def compare_presets(frames: Mapping[str, pd.DataFrame], *, metrics: Sequence[str] | None = None,
                    resamples: int = 10_000, seed: int = 0,
                    method: Method = "randomisation") -> pd.DataFrame:
    """Every preset against the first, metric by metric (see the module docstring)."""
    _check_settings(resamples, seed, method)
    if not isinstance(frames, Mapping) or not frames:
        raise InvalidInput("frames", "a mapping {preset name: per-query DataFrame} with at least "
                           "one preset (the first is the baseline)", type(frames).__name__)
    names = [str(k) for k in frames]
    cols = _metrics_of(frames, metrics)
    values = _aligned(frames, cols)                     # (P, n, M)
    n_presets, n, n_metrics = values.shape
    if n == 0:
        raise InvalidInput("frames", "no question to test", 0)
    diffs = values[1:] - values[0]                      # (P-1, n, M)
    p = np.full((n_presets, n_metrics), np.nan)
    if n_presets > 1:
        stacked = diffs.transpose(1, 0, 2).reshape(n, -1)   # every comparison's columns at once
        p[1:] = paired_p_values(stacked, resamples=resamples, seed=seed,
                                method=method).reshape(n_presets - 1, n_metrics)
    means = values.mean(axis=1)                         # (P, M)
    out = pd.DataFrame({"mean": means.ravel(), "diff": (means - means[0]).ravel(),
                        "p": p.ravel()},
                       index=pd.MultiIndex.from_product([names, cols], names=["preset", "metric"]))
    out.attrs = {"baseline": names[0], "method": method, "resamples": int(resamples),
                 "seed": int(seed), "questions": int(n), "exact": is_exact(n, resamples, method)}
    return out


def compare_with_config(frames: Mapping[str, pd.DataFrame], cfg: MemlabConfig, *,
                        metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`compare_presets` with ``bench.significance_test``, ``bench.significance_resamples``
    and ``bench.significance_seed`` of ``cfg``."""
    b = cfg.bench
    return compare_presets(frames, metrics=metrics, resamples=b.significance_resamples,
                           seed=b.significance_seed, method=b.significance_test)


def format_p(p: float) -> str:
    """A p-value for a table: ``-`` (none: the baseline), ``<0.001``, else three decimals."""
    if p is None or np.isnan(p):
        return "-"
    return "<0.001" if p < 0.001 else f"{p:.3f}"

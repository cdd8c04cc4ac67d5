"""Fit the forgetting parameters to recall against the gold memory's age (issue 20).

The method is FSRS's optimiser (open-spaced-repetition/fsrs-optimizer) carried over from a learner's
reviews to a benchmark's questions. An *event* is one answerable question of a replayed dataset
under one configuration: the age ``t`` of its gold memory when asked (``gold_age_days``, the
youngest written gold: :mod:`memlab.bench.goldage`), that memory's layer, importance, emotion and
references as stored, and whether it was recalled (``y``: a 0/1 per-query metric, by default
``recall_any@10``, the gold in the top 10). The model is memlab's own retention curve (§9.1, the
function :func:`memlab.forgetting.retention`) under a link::

    p(recalled) = base + gain * R(t; theta)         0 <= base, base + gain <= 1

``base`` is what the retriever still recalls of a fully forgotten memory (forgetting is
suppression, not deletion: a strong cue recalls it), ``gain`` what retention decides; ``theta`` are
the fitted forgetting fields (by default the half-lives of the layers that hold at least
``min_events`` gold memories; the others, and every other field, keep the configuration's values).
A permanent or pinned gold has R = 1.

- **Loss**: the weighted mean log-loss of ``y`` under ``p`` (``weighting``: every question
  alike, or every conversation alike), plus a **prior toward the defaults**: an L2 penalty
  ``sum_j (ln theta_j - ln theta0_j)^2 / (2 prior_sd^2)`` on the log scale, added to the summed
  loss (a log-normal prior with ``prior_sd`` in natural-log units: 1 is a factor e at one sd),
  so that few events barely move a parameter and many override the prior.
- **Bounded optimisation**: ``scipy.optimize.minimize`` (L-BFGS-B) over ``ln theta`` in
  ``bounds``, ``base`` and the share ``span = gain / (1 - base)`` in [0, 1].
- **Time-ordered split**: the questions asked last (``test_fraction`` of them, by ``asked_at``;
  questions asked at one moment never straddle the split) are held out; FSRS splits reviews by
  time the same way, so the held-out events are the future of the fitted ones.
- **Validation** on the held-out events: log loss, RMSE over age bins (observed against mean
  predicted recall per bin of :data:`memlab.bench.goldage.AGE_BINS`, weighted by count: FSRS's
  "RMSE (bins)") and ROC AUC (scikit-learn), for the fitted ``theta`` and for the spec's (the
  same link refitted with ``theta`` fixed at the configuration's values).
- **Uncertainty**: a bootstrap over conversations (resampled with replacement, refitted; the
  2.5 and 97.5 percentiles: ``low``, ``high``) and the standard error of ``ln theta`` from the
  numerical Hessian of the penalised loss (``exp(ln theta +- 1.96 se)``: ``se_low``,
  ``se_high``). The bootstrap respects that one conversation's questions share a user, but with
  few conversations it has few distinct resamples (2 conversations: 3) and comes out too narrow;
  the Hessian's treats questions as independent. ``settings["conversations"]`` says how many the
  fit had.

What the fitted half-lives mean: the speed at which *this system's* recall of a gold memory falls
with its age, read through memlab's retention curve; a value above the spec's says its recall
lasts longer than its retention alone would. :func:`held_out_comparison` answers whether the
configuration with them ranks better than the spec's on the held-out questions (a paired test:
:func:`memlab.bench.significance.compare_presets`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize
from sklearn import metrics as skm
from threadpoolctl import threadpool_limits

from memlab import forgetting as fg
from memlab.bench.datasets.canonical import Dataset
from memlab.bench.goldage import AGE_BINS
from memlab.config import MemlabConfig, describe_field
from memlab.errors import InvalidInput
from memlab.types import LAYER_CODES

__all__ = ["FITTABLE", "events_of", "time_split", "fit_forgetting", "ForgettingFit",
           "predict", "held_out_comparison", "simulate_events"]

#: forgetting fields the fit can move, and their default bounds (days or coefficients)
FITTABLE: dict[str, tuple[float, float]] = {
    "forgetting.long_term_half_life_days": (0.5, 3650.0),
    "forgetting.short_term_half_life_days": (0.5, 3650.0),
    "forgetting.strength_base": (0.01, 20.0),
    "forgetting.strength_importance": (0.01, 20.0),
    "forgetting.strength_emotion": (0.01, 20.0),
}
_HALF_LIFE_OF = {"long_term": "forgetting.long_term_half_life_days",
                 "short_term": "forgetting.short_term_half_life_days"}
WEIGHTINGS = ("question", "conversation")
EPS = 1e-6        # predictions are clipped to [EPS, 1 - EPS] inside the log-loss


# ----------------------------------------------------------------------------- events

def events_of(per_query: pd.DataFrame, dataset: Dataset, *,
              metric: str = "recall_any@10") -> pd.DataFrame:
    """One event per question of ``per_query`` (a per-query frame with the gold columns:
    ``memlab bench``'s, or ``tune.evaluate.per_query(..., dataset=)``) whose gold age and layer
    are known: ``key``, ``conversation_id``, ``asked_at`` (Unix s), ``age_days``, ``layer``
    (code), ``importance``, ``emotion``, ``references`` and ``y`` (``metric``, 0 or 1)."""
    for col in (metric, "gold_age_days", "gold_layer", "gold_importance"):
        if col not in per_query.columns:
            raise InvalidInput("per_query", f"has no column {col!r} (the gold columns come "
                               "with memlab bench or tune.evaluate.per_query(dataset=...))", col)
    y = per_query[metric].to_numpy(dtype=np.float64)
    if np.any((y != 0) & (y != 1)):
        raise InvalidInput("metric", "must be 0 or 1 per question (a hit: recall_any@k or "
                           "recall_all@k), not a fraction", metric)
    asked = {f"{q.conversation_id}::{q.query_id}": q.asked_at.timestamp()
             for q in dataset.questions}
    known = per_query["gold_age_days"].notna() & per_query["gold_layer"].notna()
    pq = per_query[known]
    missing = [k for k in pq.index if k not in asked]
    if missing:
        raise InvalidInput("dataset", "holds no question of these per-query keys (another "
                           f"dataset?): {', '.join(map(str, missing[:3]))}", len(missing))
    out = pd.DataFrame({
        "key": pq.index.astype(str),
        "conversation_id": [k.split("::", 1)[0] for k in pq.index],
        "asked_at": [asked[k] for k in pq.index],
        "age_days": pq["gold_age_days"].to_numpy(dtype=np.float64),
        "layer": pq["gold_layer"].map(LAYER_CODES).to_numpy(dtype=np.int64),
        "importance": pq["gold_importance"].to_numpy(dtype=np.float64),
        "emotion": pq.get("gold_emotion", pd.Series(0.0, index=pq.index)).fillna(0.0)
        .to_numpy(dtype=np.float64),
        "references": pq.get("gold_references", pd.Series(0.0, index=pq.index)).fillna(0.0)
        .to_numpy(dtype=np.float64),
        "y": pq[metric].to_numpy(dtype=np.float64),
    })
    out.attrs.update({"metric": metric, "dropped": int((~known).sum())})
    return out


def time_split(events: pd.DataFrame, *, test_fraction: float = 0.3) -> np.ndarray:
    """A boolean mask of the held-out events: those asked after the cut-off, the ``asked_at``
    that leaves about ``test_fraction`` of the events after it (questions asked at one moment
    fall on one side). At least one moment on each side."""
    if not 0 < test_fraction < 1:
        raise InvalidInput("test_fraction", "must be in (0, 1)", test_fraction)
    t = events["asked_at"].to_numpy(dtype=np.float64)
    moments = np.unique(t)
    if len(moments) < 2:
        raise InvalidInput("events", "a time-ordered split needs questions asked at two "
                           "moments at least", len(moments))
    counts = np.array([(t == m).sum() for m in moments])
    after = np.cumsum(counts[::-1])[::-1]            # events asked at or after each moment
    share = after / len(t)
    # the first moment of the test side: the one whose tail share is closest to the fraction
    start = int(np.argmin(np.abs(share[1:] - test_fraction))) + 1
    return t >= moments[start]


def _weights(events: pd.DataFrame, weighting: str) -> np.ndarray:
    if weighting not in WEIGHTINGS:
        raise InvalidInput("weighting", f"must be one of {', '.join(WEIGHTINGS)}", weighting)
    if weighting == "question":
        return np.ones(len(events))
    sizes = events.groupby("conversation_id")["key"].transform("size").to_numpy(dtype=float)
    w = 1.0 / sizes
    return w * (len(w) / w.sum())                     # mean 1: the prior keeps its strength


# ----------------------------------------------------------------------------- the model

def _retention(ev: Mapping[str, np.ndarray], cfg: MemlabConfig,
               theta: Mapping[str, float]) -> np.ndarray:
    f = cfg.forgetting.model_copy(update={k.split(".", 1)[1]: float(v) for k, v in theta.items()})
    n = len(ev["age_days"])
    return fg.retention(ev["layer"], ev["age_days"], ev["importance"], ev["emotion"],
                        ev["references"], np.zeros(n, dtype=bool), f)


def predict(events: pd.DataFrame, cfg: MemlabConfig, theta: Mapping[str, float], *,
            base: float, gain: float) -> np.ndarray:
    """``base + gain * R(t; theta)`` of each event (``theta``: fitted fields over ``cfg``)."""
    ev = {c: events[c].to_numpy() for c in ("layer", "age_days", "importance", "emotion",
                                            "references")}
    return base + gain * _retention(ev, cfg, theta)


def _log_loss(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    p = np.clip(p, EPS, 1 - EPS)
    return float(-np.sum(w * (y * np.log(p) + (1 - y) * np.log(1 - p))) / np.sum(w))


@dataclass
class _Problem:
    ev: dict[str, np.ndarray]
    y: np.ndarray
    w: np.ndarray
    cfg: MemlabConfig
    keys: tuple[str, ...]
    log0: np.ndarray
    prior_sd: float

    def unpack(self, x: np.ndarray) -> tuple[dict[str, float], float, float]:
        k = len(self.keys)
        theta = {key: float(math.exp(v)) for key, v in zip(self.keys, x[:k])}
        base, span = float(x[k]), float(x[k + 1])
        return theta, base, (1.0 - base) * span

    def total(self, x: np.ndarray) -> float:
        """The summed weighted log-loss plus the prior penalty (what the optimiser minimises,
        divided by the weight sum for scale)."""
        theta, base, gain = self.unpack(x)
        p = np.clip(base + gain * _retention(self.ev, self.cfg, theta), EPS, 1 - EPS)
        loss = -np.sum(self.w * (self.y * np.log(p) + (1 - self.y) * np.log(1 - p)))
        k = len(self.keys)
        penalty = np.sum((x[:k] - self.log0) ** 2) / (2 * self.prior_sd ** 2)
        return float(loss + penalty)


def _solve(prob: _Problem, bounds: list[tuple[float, float]], starts: Sequence[np.ndarray]
           ) -> optimize.OptimizeResult:
    scale = float(np.sum(prob.w))
    best = None
    # a handful of parameters: BLAS threads only wait on one another (3x slower on 2 busy cores)
    with threadpool_limits(limits=1, user_api="blas"):
        for x0 in starts:
            res = optimize.minimize(lambda x: prob.total(x) / scale, x0, method="L-BFGS-B",
                                    bounds=bounds, options={"ftol": 1e-12, "gtol": 1e-9})
            if best is None or res.fun < best.fun:
                best = res
    return best


def _hessian_se(prob: _Problem, x: np.ndarray, bounds: list[tuple[float, float]],
                step: float = 1e-3) -> np.ndarray:
    """Standard errors of ``x`` from the central-difference Hessian of the penalised loss
    (NaN where a parameter sits on a bound or the Hessian is not positive definite)."""
    n = len(x)
    h = np.zeros((n, n))
    f0 = prob.total(x)
    for i in range(n):
        for j in range(i, n):
            ei, ej = np.eye(n)[i] * step, np.eye(n)[j] * step
            if i == j:
                h[i, i] = (prob.total(x + ei) - 2 * f0 + prob.total(x - ei)) / step ** 2
            else:
                h[i, j] = h[j, i] = (prob.total(x + ei + ej) - prob.total(x + ei - ej)
                                     - prob.total(x - ei + ej) + prob.total(x - ei - ej)) \
                    / (4 * step ** 2)
    try:
        cov = np.linalg.inv(h)
    except np.linalg.LinAlgError:
        return np.full(n, np.nan)
    se = np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.nan))
    at_bound = np.array([x[i] - lo < step or hi - x[i] < step for i, (lo, hi) in enumerate(bounds)])
    if np.any(np.linalg.eigvalsh(h) <= 0):
        return np.full(n, np.nan)
    return np.where(at_bound, np.nan, se)


# ----------------------------------------------------------------------------- validation

def _validation(y: np.ndarray, p: np.ndarray, age: np.ndarray, w: np.ndarray) -> dict[str, float]:
    edges = np.asarray(AGE_BINS)
    which = np.searchsorted(edges, age, side="right") - 1
    sq, n = 0.0, 0
    for b in np.unique(which):
        sel = which == b
        sq += sel.sum() * (y[sel].mean() - p[sel].mean()) ** 2
        n += sel.sum()
    auc = float(skm.roc_auc_score(y, p, sample_weight=w)) if 0 < y.mean() < 1 else math.nan
    return {"log_loss": float(skm.log_loss(y, np.clip(p, EPS, 1 - EPS), sample_weight=w,
                                           labels=[0, 1])),
            "rmse_bins": float(math.sqrt(sq / n)) if n else math.nan, "auc": auc,
            "n": int(len(y))}


# ----------------------------------------------------------------------------- the fit

@dataclass
class ForgettingFit:
    """The result of :func:`fit_forgetting` (``to_frame()``: one row per fitted field)."""

    params: pd.DataFrame          # per field: spec, fitted, low, high (bootstrap), se_low, se_high
    base: float
    gain: float
    spec_base: float              # the link refitted with theta at the spec's values
    spec_gain: float
    validation: pd.DataFrame      # rows fitted, spec; log_loss, rmse_bins, auc, n (held out)
    events: pd.DataFrame          # the events, with test (bool), p_fitted, p_spec
    config: MemlabConfig          # the base configuration with the fitted fields
    settings: dict[str, Any] = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        return self.params

    @property
    def theta(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.params["fitted"].items()}

    @property
    def test_keys(self) -> list[str]:
        """The held-out questions (``conversation_id::query_id``)."""
        return self.events.loc[self.events["test"], "key"].tolist()

    def __repr__(self) -> str:
        fitted = ", ".join(f"{k.split('.')[-1]}={v:.3g}" for k, v in self.theta.items())
        v = self.validation
        return (f"ForgettingFit({fitted}, base={self.base:.3f}, gain={self.gain:.3f}; held-out "
                f"log loss {v.loc['fitted', 'log_loss']:.4f} vs spec {v.loc['spec', 'log_loss']:.4f})")


def _fit_keys(events: pd.DataFrame, fit: Sequence[str] | None, min_events: int) -> list[str]:
    if fit is None:
        counts = events["layer"].value_counts()
        keys = [key for name, key in _HALF_LIFE_OF.items()
                if counts.get(LAYER_CODES[name], 0) >= min_events]
        if not keys:
            raise InvalidInput("events", f"no layer holds {min_events} gold memories with a "
                               "half-life to fit (permanent memories never fade)",
                               counts.to_dict())
        return keys
    if isinstance(fit, str) or not len(fit):
        raise InvalidInput("fit", "a non-empty list of forgetting fields", fit)
    for key in fit:
        if key not in FITTABLE:
            raise InvalidInput("fit", f"not a field the fit can move; known: "
                               f"{', '.join(FITTABLE)}", key)
    return list(fit)


def fit_forgetting(events: pd.DataFrame, *, cfg: MemlabConfig,
                   fit: Sequence[str] | None = None, prior_sd: float = 1.0,
                   weighting: str = "question", test_fraction: float = 0.3,
                   test: np.ndarray | None = None, bounds: Mapping[str, tuple[float, float]]
                   | None = None, min_events: int = 20, bootstrap: int = 200,
                   seed: int = 0) -> ForgettingFit:
    """Fit ``fit`` (forgetting fields; None: the half-lives of the layers with at least
    ``min_events`` gold memories) to ``events`` (:func:`events_of`) on the events before the
    time-ordered split (``test``: a mask of held-out events of one's own instead), then
    validate on the held-out ones (module docstring). ``bootstrap``: refits over resampled
    conversations for the intervals (0: none)."""
    if not prior_sd > 0:
        raise InvalidInput("prior_sd", "must be > 0 (natural-log units)", prior_sd)
    if len(events) == 0:
        raise InvalidInput("events", "no event to fit (questions with a known gold age)", 0)
    keys = _fit_keys(events, fit, min_events)
    flat = cfg.to_flat()
    spec = np.array([float(flat[k]) for k in keys])
    bnd = {**FITTABLE, **dict(bounds or {})}
    for k in keys:
        lo, hi = bnd[k]
        describe_field(k)
        if not 0 < lo < hi:
            raise InvalidInput(f"bounds[{k!r}]", "must be (low, high) with 0 < low < high",
                               bnd[k])
    box = [(math.log(bnd[k][0]), math.log(bnd[k][1])) for k in keys] + [(0.0, 1.0), (0.0, 1.0)]
    test_mask = time_split(events, test_fraction=test_fraction) if test is None \
        else np.asarray(test, dtype=bool)
    if test_mask.shape != (len(events),) or test_mask.all() or not test_mask.any():
        raise InvalidInput("test", "a mask over the events with both sides non-empty",
                           int(test_mask.sum()))
    w_all = _weights(events, weighting)
    cols = ("layer", "age_days", "importance", "emotion", "references")

    def problem(rows: np.ndarray) -> _Problem:
        ev = {c: events[c].to_numpy()[rows] for c in cols}
        return _Problem(ev, events["y"].to_numpy(dtype=float)[rows], w_all[rows], cfg,
                        tuple(keys), np.log(spec), prior_sd)

    train = np.flatnonzero(~test_mask)
    lows, highs = np.array([b[0] for b in box]), np.array([b[1] for b in box])
    log0 = np.log(spec)
    starts = [np.clip(np.concatenate([log0 + shift, link]), lows, highs)
              for shift, link in ((0.0, [0.2, 0.5]), (1.0, [0.1, 0.8]), (-1.0, [0.3, 0.3]))]
    prob = problem(train)
    res = _solve(prob, box, starts)
    theta, base, gain = prob.unpack(res.x)
    # the spec's theta under its own link, fitted on the same events
    spec_theta = dict(zip(keys, spec.tolist()))
    spec_res = _solve(_Fixed(prob, spec_theta), box[-2:], [np.array([0.2, 0.5])])
    spec_base = float(spec_res.x[0])
    spec_gain = (1.0 - spec_base) * float(spec_res.x[1])
    se = _hessian_se(prob, res.x, box)[:len(keys)]
    boot = _bootstrap(events, train, problem, box, res.x, bootstrap, seed, len(keys))
    params = pd.DataFrame({
        "spec": spec, "fitted": [theta[k] for k in keys],
        "low": boot[0] if boot is not None else np.nan,
        "high": boot[1] if boot is not None else np.nan,
        "se_low": np.exp(res.x[:len(keys)] - 1.96 * se),
        "se_high": np.exp(res.x[:len(keys)] + 1.96 * se),
        "events": [int((events["layer"].to_numpy()[train] == _layer_of(k)).sum())
                   if _layer_of(k) is not None else len(train) for k in keys],
    }, index=pd.Index(keys, name="field"))
    out_events = events.assign(
        test=test_mask, weight=w_all,
        p_fitted=predict(events, cfg, theta, base=base, gain=gain),
        p_spec=predict(events, cfg, spec_theta, base=spec_base, gain=spec_gain))
    held = out_events[test_mask]
    val = pd.DataFrame({name: _validation(held["y"].to_numpy(), held[col].to_numpy(),
                                          held["age_days"].to_numpy(), held["weight"].to_numpy())
                        for name, col in (("fitted", "p_fitted"), ("spec", "p_spec"))}).T
    val["n"] = val["n"].astype(int)
    return ForgettingFit(params, base, gain, spec_base, spec_gain, val, out_events,
                         cfg.replace(**theta),
                         {"prior_sd": prior_sd, "weighting": weighting,
                          "test_fraction": test_fraction, "bootstrap": bootstrap, "seed": seed,
                          "metric": events.attrs.get("metric"), "converged": bool(res.success),
                          "train": int(len(train)), "test": int(test_mask.sum()),
                          "conversations": int(events["conversation_id"].iloc[train].nunique())})


def _layer_of(key: str) -> int | None:
    for name, k in _HALF_LIFE_OF.items():
        if k == key:
            return LAYER_CODES[name]
    return None


class _Fixed:
    """The link alone (base, span) with theta fixed: the spec's curve refitted."""

    def __init__(self, prob: _Problem, theta: dict[str, float]) -> None:
        self.prob, self.r = prob, _retention(prob.ev, prob.cfg, theta)
        self.w = prob.w   # _solve divides by its sum

    def total(self, x: np.ndarray) -> float:
        base, gain = float(x[0]), (1 - float(x[0])) * float(x[1])
        p = np.clip(base + gain * self.r, EPS, 1 - EPS)
        y = self.prob.y
        return float(-np.sum(self.w * (y * np.log(p) + (1 - y) * np.log(1 - p))))


def _bootstrap(events: pd.DataFrame, train: np.ndarray, problem, box, x_hat: np.ndarray,
               n: int, seed: int, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """2.5 and 97.5 percentiles of theta over ``n`` refits on conversations resampled with
    replacement (from the training events)."""
    if n <= 0:
        return None
    convs = events["conversation_id"].to_numpy()[train]
    uniq = np.unique(convs)
    by_conv = {c: train[convs == c] for c in uniq}
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n):
        rows = np.concatenate([by_conv[c] for c in rng.choice(uniq, size=len(uniq))])
        res = _solve(problem(rows), box, [x_hat])
        draws.append(np.exp(res.x[:k]))
    d = np.array(draws)
    return np.percentile(d, 2.5, axis=0), np.percentile(d, 97.5, axis=0)


def held_out_comparison(rep, ds: Dataset, fit: ForgettingFit, *, cfg: MemlabConfig,
                        metrics: Sequence[str] = ("recall@10", "ndcg@10"),
                        questions: Sequence[str] | None = None) -> pd.DataFrame:
    """The spec's configuration (``cfg``) against the fitted one (``fit.config``) on the
    held-out questions (``questions``; default ``fit.test_keys``) of the replay ``rep`` of
    ``ds``: :func:`memlab.bench.significance.compare_presets` of their per-query metrics
    (the paired test of ``cfg.bench.significance_*``)."""
    from memlab.bench.significance import compare_with_config
    from memlab.tune.evaluate import per_query

    keys = list(fit.test_keys if questions is None else questions)
    frames = {"spec": per_query(rep, cfg), "fitted": per_query(rep, fit.config)}
    frames = {k: v.reindex(keys).dropna(subset=list(metrics)) for k, v in frames.items()}
    return compare_with_config(frames, cfg, metrics=list(metrics))


def simulate_events(n: int, *, cfg: MemlabConfig, theta: Mapping[str, float], base: float,
                    gain: float, conversations: int = 10, max_age_days: float = 365.0,
                    long_share: float = 0.5, seed: int = 0) -> pd.DataFrame:
    """``n`` synthetic events drawn from the model with known parameters (for tests, and for a
    notebook run without data): ages log-uniform on [0.1, ``max_age_days``], layers long term
    with probability ``long_share`` else short term, importance and emotion uniform on [0, 1],
    no references; ``y`` ~ Bernoulli(base + gain * R(t; theta)); each conversation asks its
    questions at one moment, conversation ``c`` on day ``c``."""
    if n < 1 or conversations < 1:
        raise InvalidInput("n", "at least one event and one conversation", (n, conversations))
    if not (0 <= base and gain >= 0 and base + gain <= 1):
        raise InvalidInput("gain", "base and gain must satisfy 0 <= base, base + gain <= 1",
                           (base, gain))
    rng = np.random.default_rng(seed)
    conv = rng.integers(0, conversations, n)
    events = pd.DataFrame({
        "key": [f"c{c}::q{i}" for i, c in enumerate(conv)],
        "conversation_id": [f"c{c}" for c in conv],
        "asked_at": conv * 86400.0,
        "age_days": np.exp(rng.uniform(math.log(0.1), math.log(max_age_days), n)),
        "layer": np.where(rng.random(n) < long_share, LAYER_CODES["long_term"],
                          LAYER_CODES["short_term"]),
        "importance": rng.uniform(0, 1, n), "emotion": rng.uniform(0, 1, n),
        "references": np.zeros(n),
    })
    p = predict(events, cfg, theta, base=base, gain=gain)
    events["y"] = (rng.random(n) < p).astype(float)
    events.attrs["metric"] = "simulated"
    return events

"""memlab.bench.forgetplots: each figure's axes, series and labels (not pixels), the series equal
to the formulas they draw."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from memlab import forgetting as fg
from memlab.bench import forgetplots as fp
from memlab.bench.goldage import recall_by_age, wilson_interval
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.tune.forgetfit import fit_forgetting, simulate_events

CFG = MemlabConfig()


def lines(fig):
    """Labelled series by label: plain lines, and the data line of each error-bar series."""
    ax = fig.axes[0]
    out = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
    out.update({c.get_label(): c.lines[0] for c in ax.containers if c.lines[0] is not None})
    return out


def test_retention_plot_draws_one_curve_per_level_marked_at_its_half_life():
    days = np.linspace(0, 365, 50)
    fig = fp.retention_plot(CFG, days=days, label="spec")
    ax = fig.axes[0]
    assert isinstance(fig, Figure)
    assert ax.get_title() == "Retention over days: long-term layer by importance\n(spec)"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("days since last access", "retention")
    got = lines(fig)
    assert list(got) == ["importance 0.2 (half-life 54.0 d)", "importance 0.5 (half-life 87.8 d)",
                         "importance 0.9 (half-life 132.8 d)", "eligibility threshold 0.05"]
    np.testing.assert_allclose(got["importance 0.5 (half-life 87.8 d)"].get_ydata(),
                               2.0 ** (-days / (0.975 * 90)))
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert [float(m.get_xdata()[0]) for m in markers] == pytest.approx([54.0, 87.75, 132.75])
    emo = fp.retention_plot(CFG, vary="emotion", levels=[0.0, 1.0], layer="short_term")
    assert list(lines(emo))[:2] == ["emotion 0 (half-life 6.8 d)",
                                    "emotion 1 (half-life 10.3 d)"]
    with pytest.raises(InvalidInput, match="vary"):
        fp.retention_plot(CFG, vary="age")


def test_half_life_plot_per_layer_and_emotion_on_a_log_axis():
    fig = fp.half_life_plot(CFG, emotions=(0.0,))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and ax.get_xlabel() == "importance"
    got = lines(fig)
    assert list(got) == ["long-term, emotion 0", "short-term, emotion 0"]
    x, y = got["short-term, emotion 0"].get_data()
    np.testing.assert_allclose(y, (0.35 + 1.25 * x) * 7)


def test_eligibility_plot_steps_down_at_forgotten_after_for_a_weak_cue():
    days = np.array([0.0, 10.0, 29.0, 30.0, 60.0])
    fig = fp.eligibility_plot(CFG, days=days)
    got = lines(fig)
    assert "Eligibility over days: short-term layer" in fig.axes[0].get_title()
    weak, strong = got["eligible, cue relevance 0.5"], got["eligible, cue relevance 0.85"]
    np.testing.assert_allclose(weak.get_ydata(), [1, 1, 1, 0, 0])     # forgotten after 29.5 d
    np.testing.assert_allclose(strong.get_ydata(), np.ones(5) - 0.015)  # drawn just under
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["forgotten after 29.5 d"]


def test_cue_reactivation_plot_is_the_score_terms():
    days = np.linspace(0, 60, 13)
    fig = fp.cue_reactivation_plot(CFG, days=days, relevances=(0.3,))
    got = lines(fig)
    r = 2.0 ** (-days / (0.975 * 7))
    np.testing.assert_allclose(got["cue reactivation, relevance 0.3"].get_ydata(),
                               np.minimum(0.3 * (1 - r) * 0.35, 0.10))
    np.testing.assert_allclose(got["resident boost"].get_ydata(), 0.15 * r)
    assert fig.axes[0].get_ylabel() == "score term"


def per_query(ages, values):
    return pd.DataFrame({"recall@10": values, "gold_age_days": ages})


def test_recall_by_age_plot_one_series_per_preset_with_counts_and_intervals():
    t = recall_by_age({"reverie": per_query([0.5, 3.0, 3.5, 40.0], [1.0, 1.0, 0.0, 0.0]),
                       "cosine": per_query([0.5, 3.0, 3.5, 40.0], [1.0, 0.0, 0.0, 1.0])},
                      bins=(0, 1, 7, 30, math.inf))
    fig = fp.recall_by_age_plot(t, dataset="LoCoMo 1-4")
    ax = fig.axes[0]
    assert ax.get_title().startswith("LoCoMo 1-4: recall@10 by age of the gold memory")
    assert ax.get_ylabel() == "recall@10"
    assert [tl.get_text() for tl in ax.get_xticklabels()] == ["0-1\nn=1", "1-7\nn=2",
                                                              "7-30\nn=0", "30+\nn=1"]
    got = lines(fig)
    assert list(got) == ["reverie", "cosine"]
    np.testing.assert_allclose(got["reverie"].get_ydata(), [1.0, 0.5, 0.0])   # empty bin left out
    # side by side: the two presets' points straddle each bin's position
    assert got["reverie"].get_xdata()[0] < 0 < got["cosine"].get_xdata()[0]
    caps = [c for c in ax.collections]                    # one error-bar collection per preset
    seg = caps[0].get_segments()[1]                       # reverie, bin 1-7: Wilson of 0.5 of 2
    assert (seg[0][1], seg[1][1]) == pytest.approx(wilson_interval(0.5, 2))
    with pytest.raises(InvalidInput, match="recall_by_age"):
        fp.recall_by_age_plot(pd.DataFrame({"x": [1]}), dataset="d")


@pytest.fixture(scope="module")
def fit():
    ev = simulate_events(1500, cfg=CFG, theta={"forgetting.short_term_half_life_days": 12.0},
                         base=0.15, gain=0.7, long_share=0.0, seed=1)
    ev.attrs["metric"] = "recall_any@10"
    return fit_forgetting(ev, cfg=CFG, bootstrap=0)


def test_forgetting_fit_plot_observed_and_both_curves(fit):
    fig = fp.forgetting_fit_plot(fit, dataset="sim")
    ax = fig.axes[0]
    assert ax.get_title() == ("sim: recall_any@10 by age of the gold memory\nforgetting fit, "
                              "held-out questions")
    got = lines(fig)
    h = fit.theta["forgetting.short_term_half_life_days"]
    assert list(got) == [f"fitted (short_term {h:.1f} d)", "spec (short_term 7 d)", "observed"]
    held = fit.events[fit.events["test"]]
    assert got["observed"].get_ydata().mean() == pytest.approx(
        held.groupby(pd.cut(held["age_days"], [0, 1, 7, 14, 30, 60, 120, 240, np.inf],
                            right=False), observed=True)["y"].mean().mean())
    n = sum(int(t.get_text().split("n=")[1]) for t in ax.get_xticklabels())
    assert n == len(held)


def test_calibration_plot_names_the_log_losses(fit):
    fig = fp.calibration_plot(fit, dataset="sim", bins=4)
    got = lines(fig)
    v = fit.validation
    assert list(got)[:2] == [f"fitted (log loss {v.loc['fitted', 'log_loss']:.3f})",
                             f"spec (log loss {v.loc['spec', 'log_loss']:.3f})"]
    assert fig.axes[0].get_xlabel() == "predicted recall_any@10"
    assert len(next(iter(got.values())).get_xdata()) == 4
    with pytest.raises(InvalidInput, match="bins"):
        fp.calibration_plot(fit, dataset="sim", bins=1)


def test_every_figure_draws_into_given_axes():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure()
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 4)
    for ax, draw in zip(axes, (fp.retention_plot, fp.half_life_plot, fp.eligibility_plot,
                               fp.cue_reactivation_plot)):
        assert draw(CFG, ax=ax) is fig
    assert all(ax.get_lines() for ax in axes)

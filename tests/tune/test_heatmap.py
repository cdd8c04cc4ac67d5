"""``memlab.plots.sweep_heatmap`` (issue 20, notebook 02): the metric over two keys of a sweep, in
the units the configuration applies. A grid sweep draws one cell per grid point holding that
trial's value; a random sweep is binned, each cell the best (or mean) of its trials; a normalised
weight is placed at its applied value, not the sampled one."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

import memlab
from memlab.errors import InvalidInput
from memlab.tune.plots import heatmap_table
from memlab.tune.space import Space

HASHING = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
           "recall.relevance_floor": 0.0}


def _sweep(folder, cache_dir, out, space, *, trials, sampler, objective="mrr"):
    return memlab.sweep(str(folder), space=space, preset="reverie", trials=trials,
                        sampler=sampler, objective=objective, cache_dir=cache_dir,
                        overrides=HASHING, out_dir=out, track=False, progress=False,
                        verbose=False)


@pytest.fixture
def grid(tiny_bench_folder, cache_dir, tmp_path):
    space = Space.from_dict({"grid_points": 3, "params": {
        "fusion.relevance": {"float": [0.0, 1.0]},
        "forgetting.short_term_half_life_days": {"float": [1.0, 100.0], "log": True}}},
        name="two")
    return _sweep(tiny_bench_folder, cache_dir, tmp_path / "g", space, trials=9, sampler="grid")


def test_a_grid_sweep_is_one_cell_per_point_holding_its_trial(grid):
    x, y = "fusion.relevance", "forgetting.short_term_half_life_days"
    fig = memlab.plots.sweep_heatmap(grid, x, y)
    ax = fig.axes[0]
    assert ax.get_title().splitlines()[0] == \
        f"tiny-bench: mrr, over {x} and {y}"
    assert ax.get_xlabel() == f"{x} (applied)" and ax.get_yscale() == "log"
    cells = heatmap_table(grid, x, y)
    assert len(cells) == 9 and set(cells["trials"]) == {1}
    assert sorted(cells["x"].unique()) == [0.0, 0.5, 1.0]
    np.testing.assert_allclose(sorted(cells["y"].unique()), [1.0, 10.0, 100.0])
    done = grid.trials[grid.trials["state"] == "COMPLETE"]
    for _, c in cells.iterrows():
        trial = done[np.isclose(done[x], c["x"]) & np.isclose(done[y], c["y"])]
        assert c["value"] == trial["mrr"].item()
    # the mesh holds the same numbers, row y, column x; each cell's text names value and count
    mesh = ax.collections[0]
    arr = np.ma.filled(mesh.get_array(), np.nan).reshape(3, 3)
    want = cells.pivot(index="y", columns="x", values="value").to_numpy()
    np.testing.assert_allclose(arr, want)
    assert sum("n=1" in t.get_text() for t in ax.texts) == 9
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "preset default" and labels[1].startswith("best trial #")


def test_into_given_axes(grid):
    host = Figure()
    ax = host.add_subplot()
    assert memlab.plots.sweep_heatmap(grid, "fusion.relevance",
                                      "forgetting.short_term_half_life_days", ax=ax) is host


def test_a_random_sweep_is_binned_and_a_normalised_weight_is_applied(tiny_bench_folder,
                                                                     cache_dir, tmp_path):
    space = Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 1.0]},
                                        "fusion.lexical": {"float": [0.0, 1.0]}},
                             "constraints": [{"normalise": ["fusion.relevance",
                                                            "fusion.lexical"], "sum": 2.0}]},
                            name="norm")
    res = _sweep(tiny_bench_folder, cache_dir, tmp_path / "r", space, trials=30,
                 sampler="random")
    x, y = "fusion.relevance", "fusion.lexical"
    done = res.trials[res.trials["state"] == "COMPLETE"]
    # applied values sum to 2 (the sampled ones lie in [0, 1]): the axes are the applied ones
    np.testing.assert_allclose(done[x] + done[y], 2.0)
    cells = heatmap_table(res, x, y, bins=4)
    assert cells.attrs["cells"] == (4, 4) and cells["trials"].sum() == len(done)
    assert cells["x_hi"].max() == pytest.approx(done[x].max())
    for _, c in cells.iterrows():
        inside = done[(done[x] >= c["x_lo"]) & (done[x] <= c["x_hi"])
                      & (done[y] >= c["y_lo"]) & (done[y] <= c["y_hi"])]
        assert c["value"] == inside["mrr"].max()
    mean = heatmap_table(res, x, y, bins=4, agg="mean")
    assert (mean["value"] <= cells["value"] + 1e-12).all()


def test_bad_keys_and_options_are_named(grid):
    x, y = "fusion.relevance", "forgetting.short_term_half_life_days"
    with pytest.raises(InvalidInput, match="x: a key of the space"):
        heatmap_table(grid, "fusion.lexical", y)
    with pytest.raises(InvalidInput, match="y: another key than x"):
        heatmap_table(grid, x, x)
    with pytest.raises(InvalidInput, match="agg: best or mean"):
        heatmap_table(grid, x, y, agg="median")
    with pytest.raises(InvalidInput, match="metric: an objective column"):
        heatmap_table(grid, x, y, metric="ndcg@10")


def test_each_cell_is_the_best_or_mean_of_its_trials(grid):
    """Hand-set trial values on the grid sweep's table: 2 x 2 bins over [0, 1] x [1, 100] (log),
    the best of each cell is its max (mrr is maximised), the mean its mean."""
    import dataclasses

    import pandas as pd

    x, y = "fusion.relevance", "forgetting.short_term_half_life_days"
    rows = [(0.0, 1.0, 0.1), (0.2, 2.0, 0.5), (0.1, 5.0, 0.3),      # low x, low y
            (0.9, 1.0, 0.7),                                         # high x, low y
            (1.0, 100.0, 0.2), (0.8, 50.0, 0.6)]                     # high x, high y
    table = pd.DataFrame({"number": range(6), "state": "COMPLETE",
                          x: [r[0] for r in rows], y: [r[1] for r in rows],
                          "mrr": [r[2] for r in rows]})
    fake = dataclasses.replace(grid, trials=table)
    best = heatmap_table(fake, x, y, bins=2)
    mean = heatmap_table(fake, x, y, bins=2, agg="mean")
    assert best.attrs["cells"] == (2, 2) and not best.attrs["x_grid"]
    got = {(round(r.x_hi, 3), round(r.y_hi, 3)): (r.value, r.trials) for r in best.itertuples()}
    assert got == {(0.5, 10.0): (0.5, 3), (1.0, 10.0): (0.7, 1), (1.0, 100.0): (0.6, 2)}
    assert sorted(mean["value"].round(6)) == [0.3, 0.4, 0.7]

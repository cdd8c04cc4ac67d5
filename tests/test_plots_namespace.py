"""``memlab.plots`` (issue 20, item 2): one namespace re-exporting every figure; each takes
``ax=``, returns the figure, names the dataset and the metric in its title; and a figure shows
inline in a fresh Jupyter kernel without ``%matplotlib`` (a real kernel, nbclient), while the
command line stays headless (no pyplot)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

import memlab
from memlab.bench.run import run_bench
from memlab.tune.space import Space

ROOT = Path(__file__).resolve().parents[1]


def test_every_figure_resolves_and_takes_ax():
    from memlab import plots

    assert set(plots.FIGURES) <= set(dir(plots)) and "save" in dir(plots)
    for name in plots.FIGURES:
        fn = getattr(plots, name)
        params = inspect.signature(fn).parameters     # ax=, or fig= for a multi-panel figure
        assert callable(fn) and ("ax" in params or "fig" in params), name
    with pytest.raises(AttributeError, match="recall_curve"):
        plots.no_such_figure  # noqa: B018


def test_import_memlab_plots_loads_no_matplotlib():
    code = "import sys, memlab.plots; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture
def outcome(tiny_bench_folder, hashing_cfg):
    return run_bench(dataset=str(tiny_bench_folder), progress=False,
                     presets=[("reverie", hashing_cfg),
                              ("cosine", hashing_cfg.replace(**{"fusion.scorer": "cosine"}))])


def test_bench_figures_from_an_outcome_name_dataset_and_metric(outcome):
    fig = memlab.plots.recall_curve(outcome)
    (ax,) = fig.axes
    assert ax.get_title() == "tiny-bench: recall@k"
    assert [ln.get_label() for ln in ax.get_lines()] == ["reverie", "cosine"]
    ks = outcome.results[0].config.bench.ks
    assert list(ax.get_lines()[0].get_xdata()) == list(ks)
    want = outcome.results[0].aggregate.loc["all", [f"recall@{k}" for k in ks]]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), want.to_numpy(float))
    bars = memlab.plots.per_category_bars(outcome, metric="mrr")
    assert bars.axes[0].get_title() == "tiny-bench: mrr per category"
    assert [t.get_text() for t in bars.axes[0].get_xticklabels()] == \
        ["all", "music", "pets", "things", "travel"]
    heights = [p.get_height() for p in bars.axes[0].patches][:5]        # reverie's bars
    assert heights[0] == pytest.approx(0.625)                           # (1 + 0 + 1/2 + 1) / 4
    # into given axes, beside another figure's
    host = Figure()
    left, right = host.subplots(1, 2)
    assert memlab.plots.recall_curve(outcome, ax=left, metric="ndcg") is host
    assert memlab.plots.per_category_bars(outcome, ax=right) is host
    assert left.get_title() == "tiny-bench: ndcg@k"
    assert right.get_title() == "tiny-bench: recall@10 per category"


@pytest.fixture
def sweep(tiny_bench_folder, cache_dir, tmp_path):
    space = Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 1.0]},
                                        "selection.char_budget": {"int": [10, 400]}}}, name="p")
    return memlab.sweep(str(tiny_bench_folder), space=space, preset="reverie", trials=9,
                        sampler="random", objective="mrr,-prompt_chars", cache_dir=cache_dir,
                        overrides={"embedding.backend": "hashing", "recall.floor_mode":
                                   "absolute", "recall.relevance_floor": 0.0},
                        out_dir=tmp_path / "s", track=False, progress=False, verbose=False)


def test_sweep_figures_take_ax_and_name_dataset_and_metric(sweep):
    host = Figure()
    axes = host.subplots(2, 2).ravel()
    names = ["sweep_history", "sweep_importance", "sweep_best_config", "sweep_pareto"]
    for name, ax in zip(names, axes):
        assert getattr(memlab.plots, name)(sweep, ax=ax) is host
    titles = [ax.get_title().splitlines()[0] for ax in axes]
    assert titles == ["tiny-bench: mrr, optimisation history",
                      "tiny-bench: mrr, parameter importance",
                      "tiny-bench: mrr, best config against the preset",
                      "tiny-bench: mrr vs prompt_chars, Pareto front"]
    assert all(ax.get_title().splitlines()[1] == f"study {sweep.study.study_name}"
               for ax in axes)
    # 9 trials over 2 keys: under 10 per key, so the importance carries the caution
    assert "caution: 9 trials for 2 keys (under 20)" in axes[1].get_xlabel()
    done = sweep.trials[sweep.trials["state"] == "COMPLETE"]
    np.testing.assert_allclose(axes[0].get_lines()[0].get_ydata(),
                               done.sort_values("number")["mrr"].to_numpy())


def test_fit_importance_takes_ax_and_names_dataset_and_metric():
    imp = pd.DataFrame({"mean": [0.2, 0.05], "sd": [0.01, 0.02]}, index=["lexical", "cosine"])
    host = Figure()
    ax = host.add_subplot()
    assert memlab.plots.fit_importance(imp, ax=ax, dataset="locomo", metric="ndcg@10") is host
    assert ax.get_title() == "locomo: permutation importance of ndcg@10"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cosine", "lexical"]
    assert [p.get_width() for p in ax.patches] == [0.05, 0.2]


def test_a_figure_shows_inline_in_a_fresh_kernel(tmp_path):
    """A real Jupyter kernel: no %matplotlib; the returned figure is a PNG (it was text,
    '<Figure size ... with 1 Axes>'), and pyplot is never imported."""
    import nbformat
    from nbclient import NotebookClient

    frame = "pd.DataFrame({'recall@1': [0.5, 1.0], 'recall@3': [1.0, 1.0]}, index=['q1', 'q2'])"
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"import sys\nsys.path.insert(0, {str(ROOT)!r})"),
        nbformat.v4.new_code_cell(f"import memlab, pandas as pd\n"
                                  f"memlab.plots.recall_curve({frame}, ks=[1, 3], "
                                  "dataset='tiny')"),
        nbformat.v4.new_code_cell("from matplotlib.figure import Figure\n"
                                  "Figure()                         # any Figure, too"),
        nbformat.v4.new_code_cell("print('matplotlib.pyplot' in sys.modules)")])
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = [[o for o in cell.outputs] for cell in nb.cells]
    shown = out[1][0]
    assert shown["output_type"] == "execute_result" and "image/png" in shown["data"]
    assert shown["data"]["image/png"][:8] == "iVBORw0K"                  # base64 of a PNG
    assert out[3][0]["text"] == "False\n"
    assert not [o for cell in out for o in cell if o.get("name") == "stderr"]


def test_show_figures_inline_outside_ipython_does_nothing():
    from memlab.notebook import show_figures_inline

    assert show_figures_inline() is False


def test_show_figures_inline_keeps_a_printer_already_there():
    """A shell's PNG formatter that already has a Figure printer (``%matplotlib inline`` ran)
    keeps it; one without gets memlab's, by name."""
    from IPython.core.formatters import PNGFormatter

    from memlab.notebook import show_figures_inline

    class Shell:
        def __init__(self):
            self.display_formatter = type("D", (), {"formatters": {"image/png": PNGFormatter()}})

    fresh = Shell()
    assert show_figures_inline(fresh) is True
    png = fresh.display_formatter.formatters["image/png"]
    assert ("matplotlib.figure", "Figure") in png.deferred_printers
    data = png(memlab.plots.recall_curve(pd.DataFrame({"recall@1": [1.0]}), ks=[1]))
    assert data is not None
    mine = Shell()
    own = mine.display_formatter.formatters["image/png"]
    own.for_type(Figure, lambda fig: "theirs")
    assert show_figures_inline(mine) is True
    assert own(Figure()) == "theirs" and ("matplotlib.figure", "Figure") not in \
        own.deferred_printers

"""The notebooks as committed (issue 20, items 1 and 6): numbered, each opening with what it shows,
what data it needs and its measured full-data time, sized by ``MEMLAB_NOTEBOOK_SIZE``, and
committed WITHOUT outputs (``python3 dev.py notebooks`` writes executed copies, with outputs, to
the git-ignored ``results/notebooks/``). ``pytest --nbmake notebooks/`` runs them."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = ["01_quickstart", "02_tune_scoring_weights", "03_reproduce_benchmarks",
         "04_forgetting_curves", "05_vram_eviction_traces", "06_dialogue_tree",
         "07_chat_session", "08_fold_jobs", "09_why_recall_missed"]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def test_the_notebooks_are_the_numbered_nine():
    assert [p.stem for p in NOTEBOOKS] == NAMES


def outputs_left(path: Path) -> list[str]:
    """Where a notebook holds outputs or execution counts (cell numbers from 1)."""
    found = []
    for i, cell in enumerate(_cells(path), 1):
        if cell.get("outputs"):
            found.append(f"cell {i}: {len(cell['outputs'])} output(s)")
        if cell.get("execution_count") is not None:
            found.append(f"cell {i}: execution_count {cell['execution_count']}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_is_committed_without_outputs(path):
    left = outputs_left(path)
    assert not left, (f"{path.name} holds outputs ({'; '.join(left[:5])}): clear them "
                      "(jupyter nbconvert --clear-output --inplace, or Edit > Clear Outputs of "
                      "All Cells) before committing; `python3 dev.py notebooks` writes executed "
                      "copies to results/notebooks/")


def test_outputs_are_found(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": "1", "metadata": {},
                     "outputs": [{"output_type": "execute_result", "data": {"text/plain": "1"},
                                  "metadata": {}, "execution_count": 3}],
                     "execution_count": 3}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert outputs_left(path) == ["cell 1: 1 output(s)", "cell 1: execution_count 3"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_opens_with_what_it_shows_its_data_and_its_full_time(path):
    cells = _cells(path)
    first = _text(cells[0])
    assert cells[0]["cell_type"] == "markdown"
    assert re.match(rf"# {path.stem[:2]} [·—] ", first), first.splitlines()[0]
    assert "**Data" in first, "the first cell says what data it needs"
    assert re.search(r"full", first) and re.search(r"\d+(\.\d+)? ?(s|min)\b", first), \
        "the first cell gives the measured full-data time"
    params = [c for c in cells if c["cell_type"] == "code"
              and "MEMLAB_NOTEBOOK_SIZE" in _text(c)]
    assert params, "a parameter cell reads MEMLAB_NOTEBOOK_SIZE"
    assert re.search(r"""os\.environ\.get\(\s*["']MEMLAB_NOTEBOOK_SIZE["']\s*,\s*["']small["']""",
                     _text(params[0])), "small is the default (the test run)"


def test_executed_copies_are_git_ignored():
    out = subprocess.run(["git", "check-ignore", "-q", "results/notebooks/01_quickstart.ipynb"],
                         cwd=ROOT)
    assert out.returncode == 0


def _dev():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_notebooks_executes_into_a_folder_with_outputs(tmp_path):
    """A real kernel runs a two-cell notebook in its own folder; the copy holds its outputs and
    the source is untouched. A failing notebook is written up to its error, and named."""
    import nbformat

    dev = _dev()
    src = tmp_path / "nbs"
    src.mkdir()
    good = src / "good.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\nprint(os.path.basename(os.getcwd()))"),
        nbformat.v4.new_code_cell("6 * 7")]), good)
    bad = src / "bad.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("raise ValueError('no data')"),
        nbformat.v4.new_code_cell("print('never')")]), bad)
    before = good.read_bytes()
    report = dev.execute_notebooks([good, bad], tmp_path / "out", timeout=120)
    assert good.read_bytes() == before
    assert report["good.ipynb"]["error"] is None and "no data" in report["bad.ipynb"]["error"]
    ran = nbformat.read(tmp_path / "out" / "good.ipynb", as_version=4)
    assert ran.cells[0].outputs[0]["text"] == "nbs\n"              # run in the notebook's folder
    assert ran.cells[1].outputs[0]["data"]["text/plain"] == "42"
    failed = nbformat.read(tmp_path / "out" / "bad.ipynb", as_version=4)
    assert failed.cells[0].outputs[0]["ename"] == "ValueError" and not failed.cells[1].outputs


def test_dev_notebooks_picks_notebooks_by_name():
    dev = _dev()
    assert [p.name for p in dev._notebooks(["02", "01_quickstart"])] == \
        ["02_tune_scoring_weights.ipynb", "01_quickstart.ipynb"]
    assert len(dev._notebooks([])) == len(NOTEBOOKS)
    with pytest.raises(SystemExit, match="no notebook matches 'zz'"):
        dev._notebooks(["zz"])


def _run_count(db: Path) -> int:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    ids = [e.experiment_id for e in client.search_experiments()]
    return len(client.search_runs(ids, max_results=5000)) if ids else 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["02_tune_scoring_weights", "03_reproduce_benchmarks"])
def test_a_notebook_rerun_leaves_the_mlflow_run_count_unchanged(name, tmp_path, monkeypatch):
    """Issue 20, done-when: the whole notebook run twice on a kept folder (MEMLAB_NOTEBOOK_WORK,
    small size) in fresh kernels: the first run logs, the second finds its runs and adds none
    (a stable run key per sweep, trial and bench run)."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("MEMLAB_NOTEBOOK_WORK", str(work))
    monkeypatch.setenv("MEMLAB_NOTEBOOK_SIZE", "small")
    dev = _dev()
    path = ROOT / "notebooks" / f"{name}.ipynb"
    counts = []
    for attempt in ("first", "second"):
        report = dev.execute_notebooks([path], tmp_path / attempt, timeout=600)
        assert report[path.name]["error"] is None, report
        counts.append(_run_count(work / "mlflow.db"))
    assert counts[0] > 0 and counts[1] == counts[0], counts

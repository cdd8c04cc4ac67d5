"""Quiet on a CPU machine (issue 18, item 7): a benchmark without a GPU writes no warning to stderr
(the simulated device is one INFO log line: tests/vram/test_probes.py), and its progress bars
raise no TqdmWarning, in a process, on the command line or in a notebook kernel (``tqdm.auto``:
widgets in Jupyter, which needs ipywidgets, text elsewhere)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from tqdm import TqdmWarning

from memlab.bench.run import run_bench

ROOT = Path(__file__).resolve().parents[1]


def test_a_bench_in_process_raises_no_tqdm_warning(tiny_bench_folder, hashing_cfg, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = run_bench(dataset=str(tiny_bench_folder), presets=[("reverie", hashing_cfg)],
                        progress=True)
    assert out.results[0].aggregate.loc["all", "recall@1"] == pytest.approx(0.5)
    assert [str(w.message) for w in caught if issubclass(w.category, TqdmWarning)] == []
    bars = capsys.readouterr().err.replace("\r", "\n")
    assert "replay tiny-bench: 100%" in bars and "4/4" in bars    # drawn, ending at their total


def test_the_bench_command_writes_nothing_to_stderr(tiny_bench_folder, cache_dir, tmp_path):
    """A real ``memlab bench -q`` process of this checkout, warnings shown as Python shows them
    by default: the table on stdout, stderr empty (it held the red 'no GPU found' line)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-c", "from memlab.cli import app; app()", "bench", "--dataset",
           str(tiny_bench_folder), "--set", "embedding.backend=hashing", "--set",
           "recall.floor_mode=absolute", "--set", "recall.relevance_floor=0.0", "--cache-dir",
           str(cache_dir), "--no-track", "--out-dir", str(tmp_path / "r"), "-q"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "recall@10" in res.stdout and res.stderr == ""


def test_a_bench_in_a_notebook_kernel_writes_nothing_to_stderr(tiny_bench_folder, cache_dir,
                                                               tmp_path):
    """A real Jupyter kernel (nbclient) runs a bench with progress bars: they are widgets, and
    no cell has stderr output (no TqdmWarning 'IProgress not found', no 'no GPU found')."""
    import ipywidgets  # noqa: F401  (a core dependency: without it tqdm.auto warns in a kernel)
    import nbformat
    from nbclient import NotebookClient

    cfg = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
           "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"import sys\nsys.path.insert(0, {str(ROOT)!r})"),
        nbformat.v4.new_code_cell(
            "from memlab.bench.run import run_bench\nfrom memlab.config import MemlabConfig\n"
            f"cfg = MemlabConfig().replace(**{cfg!r})\n"
            f"out = run_bench(dataset={str(tiny_bench_folder)!r}, presets=[('reverie', cfg)], "
            "progress=True)\nprint(out.results[0].aggregate.loc['all', 'recall@1'])")])
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in nb.cells for o in cell.outputs]
    assert [o.get("text") for o in outputs if o.get("name") == "stderr"] == []
    assert [o.text for o in outputs if o.get("name") == "stdout"] == ["0.5\n"]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for o in outputs)                                   # the bars, as widgets

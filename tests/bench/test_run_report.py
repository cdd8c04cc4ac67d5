"""What ``memlab bench`` reports besides the metrics (issue 7, defects 10-12): question counts as
integers, rankings shorter than k counted, what is ranked per question, the per-category metrics
the user picks, the embedder refusing to fall back silently, datasets that cannot be evaluated.
The tiny dataset of tests/conftest.py throughout (hashing embedder)."""

from __future__ import annotations

import pytest

from memlab.bench.run import format_table, run_bench


def two_presets(cfg):
    return [("cos", cfg.replace(**{"fusion.scorer": "cosine"})),
            ("rrf", cfg.replace(**{"fusion.scorer": "rrf"}))]


def block(table: str, title: str | None = None) -> list[list[str]]:
    """The rows (split on spaces) of the table block that follows ``title`` (None: the first
    block after the header line), up to the next blank line."""
    lines = table.splitlines()
    start = 2 if title is None else next(i for i, ln in enumerate(lines) if ln.startswith(title)) + 1
    rows = []
    for ln in lines[start:]:
        if not ln.strip():
            break
        rows.append(ln.split())
    return rows


# ----------------------------------------------------------------------------- n is a count

def test_the_question_count_n_prints_as_an_integer(tiny_bench_folder, hashing_cfg):
    out = run_bench(dataset=str(tiny_bench_folder), presets=two_presets(hashing_cfg),
                    progress=False)
    rows = block(format_table(out))
    assert rows[0][-1] == "n"
    assert [r[-1] for r in rows[1:]] == ["4", "4"]      # 4 questions, not 4.000

"""``memlab explain-misses``: where each preset loses the gold on a dataset, and single-question
stage traces (a thin shell over :func:`memlab.bench.misses.explain_misses`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (cache_dir_option, dataset_option, failing, json_out_option,
                            limit_option, loader_option, loader_options, path_option,
                            quiet_option, set_option)
from memlab.config import parse_assignments
from memlab.errors import InvalidInput

DEFAULT_PRESETS = "reverie,hybrid_rrf"


def explain_misses_cmd(
    dataset: str = dataset_option("A registered name (memlab datasets list) or a canonical "
                                  "folder."),
    path: Optional[str] = path_option(),
    option: Optional[List[str]] = loader_option("Dataset loader option key=value (e.g. "
                                                "'categories=[1,2,3,4]')."),
    compare: str = typer.Option(DEFAULT_PRESETS, "--compare", help="Comma-separated presets (or "
                                "YAML paths) traced side by side."),
    set_: Optional[List[str]] = set_option("key=value config overrides (every preset)."),
    k: Optional[int] = typer.Option(None, "-k", "--k", help="The cut-off: a question is missed "
                                    "when no gold item ranks in the top k (default bench.k)."),
    limit: Optional[int] = limit_option(),
    by: Optional[str] = typer.Option(
        None, "--by", help="Also per group: category, language or gold_age (the gold's age at "
        "the question, binned 0-7-14-30-90 days)."),
    question: Optional[List[str]] = typer.Option(
        None, "--question", help="Print the stage trace of this question "
        "(conversation::query; repeatable)."),
    out: Optional[Path] = typer.Option(None, "--out", help="One row per (preset, question): "
                                       "stage, best rank, category, ... (.parquet or .csv)."),
    figure: Optional[Path] = typer.Option(None, "--figure", help="The bar chart of where the "
                                          "gold is lost (PNG, SVG or PDF)."),
    json_out: Optional[Path] = json_out_option("Write the counts per preset and stage as JSON."),
    cache_dir: Optional[Path] = cache_dir_option(),
    lexical_only: bool = typer.Option(False, "--lexical-only", help="No embedder: every preset "
                                      "runs with recall.use_dense false."),
    quiet: bool = quiet_option(),
) -> None:
    """Where recall loses the gold: per preset, the questions missed at k by the stage that lost
    their gold (not stored yet, not a candidate, relevance floor, forgetting, permanent cap,
    dedup, budget, outranked), from the cached raw signals and the reference scorer and
    selection."""
    import pandas as pd

    from memlab.bench.compare import write_per_question
    from memlab.bench.misses import explain_misses
    from memlab.bench.trace import STAGE_DESCRIPTIONS

    with failing():
        if out is not None and out.suffix not in (".parquet", ".csv"):
            raise InvalidInput("--out", "a .parquet or .csv file name", str(out))
        overrides = parse_assignments(set_)
        if cache_dir is not None:
            overrides["bench.cache_dir"] = str(cache_dir)
        report = explain_misses(dataset=dataset, presets=[p.strip() for p in compare.split(",")
                                                          if p.strip()],
                                path=path, dataset_options=loader_options(option), limit=limit,
                                k=k, overrides=overrides, lexical_only=lexical_only,
                                progress=not quiet)
        counts = report.summary()
        shares = report.summary(share=True, misses_only=True)
        grouped = report.summary(by=by) if by else None
        traces = [report.question(q) for q in question or []]
    frame = report.to_frame()
    ks = sorted({t.k for t in report.traces.values()})
    n = int(counts.sum(axis=1).iloc[0])
    typer.echo(f"dataset {report.dataset} ({n} questions with gold); a miss: no gold item in "
               f"the top {'/'.join(map(str, ks))}")
    typer.echo("")
    typer.echo("questions per stage (first stage that lost the gold; found = within k)")
    typer.echo(counts.to_string())
    typer.echo("")
    typer.echo("share of the misses")
    typer.echo(shares.to_string(float_format=lambda v: f"{v:.3f}", na_rep="-"))
    if grouped is not None:
        typer.echo("")
        typer.echo(f"questions per stage and {by}")
        typer.echo(grouped.to_string())
    typer.echo("")
    typer.echo("stages: " + "; ".join(f"{s}: {d}" for s, d in STAGE_DESCRIPTIONS.items()))
    pd.set_option("display.width", 160)
    for per_preset in traces:
        for t in per_preset.values():
            typer.echo("")
            typer.echo(str(t))
            typer.echo(t.funnel.to_string())
    with failing(OSError):
        if out is not None:
            write_per_question(frame.reset_index(level="preset"), out, where="--out")
            typer.echo(f"wrote {out}")
        if figure is not None:
            from memlab.bench.plots import save

            save(report.plot(), figure)
            typer.echo(f"wrote {figure}")
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps({
                "dataset": report.dataset, "k": ks, "questions": n,
                "counts": {p: {s: int(v) for s, v in row.items()}
                           for p, row in counts.iterrows()},
                "share_of_misses": {p: {s: (None if pd.isna(v) else round(float(v), 6))
                                        for s, v in row.items()}
                                    for p, row in shares.iterrows()}},
                ensure_ascii=False, indent=1), encoding="utf-8")
            typer.echo(f"wrote {json_out}")

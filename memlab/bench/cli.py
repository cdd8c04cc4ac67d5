"""``memlab bench``: run presets on a dataset, print a table, write JSON, log to MLflow."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import List, Optional

import typer

from memlab.bench.run import (BenchOutcome, check_metrics, format_table, resolve_preset,
                              run_bench)
from memlab.cliutil import (run_overrides, cache_dir_option, config_option, dataset_option, experiment_option,
                            failing, json_out_option, limit_option, loader_option, loader_options,
                            no_track_option, no_vram_gate_option, path_option, quiet_option,
                            set_option, tracking_uri_option)
from memlab.config import MemlabConfig, load_config
from memlab.errors import ConfigError

DEFAULT_COMPARE = "reverie,cosine,bm25,generative_agents,hybrid_rrf"


def bench(
    dataset: str = dataset_option("A registered name (memlab datasets list) or a canonical "
                                  "folder."),
    path: Optional[str] = path_option(),
    option: Optional[List[str]] = loader_option("Dataset loader option key=value (e.g. "
                                                "noise=99, granularity=session)."),
    config: Optional[Path] = config_option("A YAML config (one run)."),
    set_: Optional[List[str]] = set_option("key=value config overrides (applied to every "
                                           "preset)."),
    compare: Optional[str] = typer.Option(None, "--compare", help="Comma-separated presets (or "
                                          f"YAML paths) run side by side, e.g. {DEFAULT_COMPARE}"),
    mode: Optional[str] = typer.Option(
        None, "--mode", help="How items are written (bench.write_mode): raw (add_many with the "
        "importance and layer policies, every item stored; the default) or writer (the write "
        "pipeline decides importance, gate and layer, as store_interaction does). "
        "'raw,writer' runs every preset both ways ('PRESET+writer')."),
    limit: Optional[int] = limit_option(),
    json_out: Optional[Path] = json_out_option(),
    out_dir: Path = typer.Option(Path("results"), "--out-dir", help="Per-query results and plots."),
    tracking_uri: Optional[str] = tracking_uri_option("MLflow tracking URI (default "
                                                      "sqlite:///mlflow.db here)."),
    no_track: bool = no_track_option(),
    experiment: str = experiment_option("memlab-bench"),
    quiet: bool = quiet_option(),
    cache_dir: Optional[Path] = cache_dir_option(
        "Folder of the embedding and feature caches (bench.cache_dir; default .cache/memlab). A "
        "second run with the same dataset, embedder and candidates/ingest config reads its raw "
        "signals from there: no replay."),
    lexical_only: bool = typer.Option(
        False, "--lexical-only", help="Rank with the lexical routes only: no embedder is loaded "
        "and every preset runs with recall.use_dense false. Without it an embedder that cannot "
        "load stops the run (unless no preset uses the dense route)."),
    lenient: bool = typer.Option(
        False, "--lenient", help="Drop and count the dataset's bad records (lines) instead of "
        "stopping at the first; each is listed with file:line and why (table and JSON)."),
    no_vram_gate: bool = no_vram_gate_option(
        "Run the embedder without the VRAM gate (vram.enabled false): no trace in the results "
        "folder or MLflow. Metrics are the same either way."),
    metric: Optional[List[str]] = typer.Option(
        None, "--metric", help="Metric(s) of the per-category tables, repeatable or a comma "
        "list, e.g. ndcg@10,mrr (default recall@10; cut-offs from bench.ks)."),
) -> None:
    """Benchmark recall on a labelled dataset: recall@k, nDCG@k, MRR overall and per category."""
    with failing():
        overrides = run_overrides(set_, cache_dir, no_vram_gate)
        if compare:
            presets = []
            for name in [c.strip() for c in compare.split(",") if c.strip()]:
                pname, ppath = resolve_preset(name)
                presets.append((pname, load_config(ppath, overrides=overrides)))
        elif config is not None:
            presets = [(config.stem, load_config(config, overrides=overrides))]
        else:
            presets = [("reverie", load_config(None, overrides=overrides))]
        if mode is not None:
            presets = with_modes(presets, [m.strip() for m in mode.split(",") if m.strip()])
        per_category = None
        if metric:
            per_category = check_metrics([m.strip() for ms in metric for m in ms.split(",")
                                          if m.strip()], [cfg for _, cfg in presets])
        out = run_bench(dataset=dataset, presets=presets, path=path,
                        dataset_options=loader_options(option), limit=limit,
                        progress=not quiet, lexical_only=lexical_only, lenient=lenient)
    typer.echo(format_table(out, per_category=per_category))
    report = out.to_json()
    run_dir = write_artifacts(out, out_dir)
    report["artifacts"] = str(run_dir)
    if not no_track:
        from memlab.bench.track import track_outcome

        run_ids = track_outcome(out, run_dir=run_dir, tracking_uri=tracking_uri,
                                experiment=experiment)
        report["mlflow_runs"] = run_ids
        typer.echo(f"\nMLflow: {len(run_ids)} run(s) in experiment {experiment!r} "
                   f"({next(iter(run_ids.values()))['tracking_uri'] if run_ids else ''})")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
        typer.echo(f"wrote {json_out}")


def with_modes(presets: list[tuple[str, MemlabConfig]], modes: list[str]
               ) -> list[tuple[str, MemlabConfig]]:
    """Each preset once per write mode (bench.write_mode): one mode keeps the preset's name; with
    several, a mode other than raw is named '<preset>+<mode>'."""
    if not modes or len(set(modes)) != len(modes):
        raise ConfigError("bench.write_mode", "--mode takes raw, writer or raw,writer",
                          ",".join(modes))
    return [(name if len(modes) == 1 or m == "raw" else f"{name}+{m}",
             cfg.replace(**{"bench.write_mode": m}))
            for name, cfg in presets for m in modes]


def write_artifacts(out: BenchOutcome, out_dir: Path) -> Path:
    """Per preset: the config YAML, per-query rankings and metrics (CSV), a recall@k curve and a
    per-category bar chart (PNG); with a VRAM gate its trace and timeline in ``vram/``.
    Returns the run folder."""
    from memlab.bench import plots

    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = out_dir / f"{stamp}-{out.dataset.card.name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    ks = out.results[0].config.bench.ks
    aggs = {r.name: r.aggregate for r in out.results}
    for r in out.results:
        d = run_dir / r.name
        d.mkdir(exist_ok=True)
        r.config.to_yaml(d / "config.yaml")
        pq = r.per_query.copy()
        pq["ranking"] = [json.dumps(r.rankings[q], ensure_ascii=False) for q in pq.index]
        pq.to_csv(d / "per_query.csv")
        r.aggregate.to_csv(d / "aggregate.csv")
        plots.save(plots.recall_curve({r.name: r.aggregate}, ks=ks), d / "recall_curve.png")
        plots.save(plots.per_category_bars({r.name: r.aggregate}), d / "per_category.png")
    if len(out.results) > 1:
        plots.save(plots.recall_curve(aggs, ks=ks), run_dir / "recall_curve.png")
        plots.save(plots.per_category_bars(aggs), run_dir / "per_category.png")
    if out.vram is not None:
        out.vram.write(run_dir / "vram")
    (run_dir / "report.json").write_text(json.dumps(out.to_json(), ensure_ascii=False, indent=1),
                                         encoding="utf-8")
    return run_dir

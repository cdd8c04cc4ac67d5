"""``memlab vram simulate``: replay a workload through the gate in simulated time and print its
summary; ``--compare-policy`` puts the gate beside plain LRU and ollama's keep-alive; ``--track``
logs the run to MLflow (:mod:`memlab.bench.vramtrack`). Here, in bench, because tracking is
bench's (memlab.vram sits below it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (config_option, experiment_option, failing, json_out_option,
                            load_cli_config, set_option, tracking_uri_option)
from memlab.errors import MemlabError

vram_app = typer.Typer(help="The VRAM gate: simulate workloads under its eviction policy.",
                       no_args_is_help=True)


@vram_app.command("simulate")
def simulate_cmd(
    workload: Path = typer.Option(..., "--workload", "-w", help="A workload YAML "
                                  "(experiments/workloads/)."),
    capacity_mb: Optional[float] = typer.Option(None, "--capacity-mb", help="The simulated "
                                                "device's memory (default: the workload's "
                                                "capacity_mb); the gate keeps vram.reserve_mb."),
    compare_policy: bool = typer.Option(False, "--compare-policy", help="Also run plain LRU and "
                                        "keep-alive (unload whatever is idle --keepalive-s)."),
    keepalive_s: Optional[float] = typer.Option(None, "--keepalive-s", help="Idle seconds of the "
                                                "keep-alive baseline (default vram.keepalive_s)."),
    config: Optional[Path] = config_option(), set_: Optional[List[str]] = set_option(),
    json_out: Optional[Path] = json_out_option("Write the summaries as JSON."),
    trace_out: Optional[Path] = typer.Option(None, "--trace", help="Write the gate's trace "
                                             "(JSON Lines)."),
    plot_out: Optional[Path] = typer.Option(None, "--plot", help="Draw the gate's timeline "
                                            "(PNG)."),
    track: bool = typer.Option(False, "--track", help="Log the run to MLflow: params, the "
                               "summary as metrics, the trace, the timeline and the workload."),
    tracking_uri: Optional[str] = tracking_uri_option(
        "MLflow tracking URI with --track (default sqlite:///mlflow.db in the working folder)."),
    experiment: str = experiment_option("memlab-vram"),
) -> None:
    """Replay WORKLOAD on a simulated GPU: evictions, checkpoints, resumes, sync waits (p50/p95,
    simulated seconds), loads, hits and time over capacity (always 0 for a correct gate)."""
    import pandas as pd

    from memlab.bench.tracking import resolve_tracking_uri
    from memlab.bench.vramtrack import simulation_report, track_simulation
    from memlab.vram.plots import vram_timeline
    from memlab.vram.simulate import COMPARED, Workload, compare_policies, simulate

    with failing(ValueError):
        if track:           # a bad URI stops here, before the simulation
            resolve_tracking_uri(tracking_uri, workdir=Path.cwd())
        cfg = load_cli_config(config, set_).vram
        wl = Workload.from_yaml(workload, cfg)
        cap = capacity_mb if capacity_mb is not None else wl.capacity_mb
        if cap is None:
            raise MemlabError(f"{workload}: no capacity_mb in the workload; give --capacity-mb")
        res = simulate(wl, cap, cfg, policy="priority")
        policies = compare_policies(wl, cap, cfg, keepalive_s=keepalive_s) \
            if compare_policy else None
    table = policies if policies is not None else pd.DataFrame.from_dict(
        {"priority": {k: res.summary[k] for k in COMPARED}}, orient="index")
    typer.echo(f"workload {wl.name}: {len(wl.turns)} turns, {len(wl.jobs)} jobs, "
               f"device {cap:g} MB, gate capacity {res.capacity_mb:g} MB")
    with pd.option_context("display.width", 200, "display.max_columns", None):
        typer.echo(table.T.to_string(float_format=lambda v: f"{v:g}"))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(simulation_report(res, table), indent=1),
                            encoding="utf-8")
    if trace_out is not None:
        res.trace.to_jsonl(trace_out)
    if plot_out is not None:
        plot_out.parent.mkdir(parents=True, exist_ok=True)
        vram_timeline(res).savefig(plot_out, dpi=110)
    if track:
        with failing(ValueError):
            run = track_simulation(res, policies=policies, tracking_uri=tracking_uri,
                                   experiment=experiment)
        typer.echo(f"MLflow: run {run['run_id']} in experiment {experiment!r} "
                   f"({run['tracking_uri']})")

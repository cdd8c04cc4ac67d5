"""Log a VRAM simulation to MLflow (issue 20): ``memlab vram simulate --track`` and its Python twin.

:func:`track_simulation` logs one run for a :class:`~memlab.vram.simulate.SimResult`::

    res = simulate(wl, wl.capacity_mb, cfg.vram)
    track_simulation(res, policies=compare_policies(wl, wl.capacity_mb, cfg.vram))

- params: the workload's name and its turn and job counts, the device MB, the gate's capacity,
  the policy (and the keep-alive seconds under ``keepalive``), every ``vram.*`` field of the
  config it ran under;
- metrics: the simulation's summary (:func:`memlab.vram.simulate.simulate`); given
  ``policies`` (:func:`~memlab.vram.simulate.compare_policies`), also ``<policy>/<metric>`` for
  each of its rows;
- artifacts: ``vram/trace.jsonl``, ``vram/timeline.png``
  (:func:`memlab.vram.plots.vram_timeline`), ``vram/summary.txt`` (one line saying what happened,
  then the numbers), ``workload.yaml`` (:meth:`~memlab.vram.simulate.Workload.to_dict`: enough to
  run it again) and ``summary.json`` (:func:`simulation_report`); given ``policies``, also
  ``policies.csv`` and ``vram/policies.png`` (:func:`memlab.vram.plots.vram_policies`);
- tags: ``memlab.kind`` ``vram-simulation``, ``memlab.workload``, ``memlab.run_key`` (a hash of
  what decides the result: workload, device MB, VRAM config, policy, keep-alive, whether policies
  were compared), memlab's version and git commit.

Reruns: the simulator is deterministic, so a finished run of the experiment with the same
``memlab.run_key`` is the same result: it is not logged again (``logged`` False, ``run_id`` the
existing run's) and re-running a notebook cell adds no run.

The tracking URI is resolved as ``memlab bench`` resolves it
(:func:`memlab.bench.tracking.resolve_tracking_uri` against the working folder), and the run goes
through :func:`memlab.bench.tracking.log_run` (batched, validated before anything is created).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlab.bench.environment import REPO_ROOT
from memlab.bench.tracking import _client, _quiet, log_run, provenance_tags, resolve_tracking_uri
from memlab.bench.vramgate import SUMMARY_ARTIFACT, TIMELINE_ARTIFACT, TRACE_ARTIFACT, trace_note
from memlab.errors import InvalidInput
from memlab.vram.simulate import SimResult

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["EXPERIMENT", "run_key", "simulation_report", "track_simulation"]

#: the default MLflow experiment of simulations
EXPERIMENT = "memlab-vram"


def _checked(result: SimResult) -> SimResult:
    if not isinstance(result, SimResult) or result.workload is None or result.config is None \
            or result.device_mb is None:
        raise InvalidInput("result", "must be what memlab.vram.simulate.simulate returned (a "
                           "SimResult with its workload, device MB and config)",
                           type(result).__name__)
    return result


def simulation_report(result: SimResult, policies: "pd.DataFrame | None" = None
                      ) -> dict[str, Any]:
    """The JSON of a simulation (``memlab vram simulate --json``): workload, device and gate
    capacity, policy, summary and, given ``policies``, its rows by policy."""
    result = _checked(result)
    return {"workload": result.workload.name, "capacity_mb": result.device_mb,
            "gate_capacity_mb": result.capacity_mb, "policy": result.policy,
            "summary": result.summary,
            "policies": None if policies is None else policies.to_dict(orient="index")}


def run_key(result: SimResult, *, compared: bool = False) -> str:
    """A hash of what decides a simulation's result (the simulator is deterministic): the
    same workload, device, config, policy and keep-alive give the same key."""
    result = _checked(result)
    spec = {"workload": result.workload.to_dict(), "device_mb": result.device_mb,
            "config": result.config.model_dump(mode="json"), "policy": result.policy,
            "keepalive_s": result.keepalive_s, "compared": compared}
    text = json.dumps(spec, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _logged_run(uri: str, experiment: str, key: str) -> str | None:
    """The id of a finished run of ``experiment`` tagged ``memlab.run_key`` = ``key`` (a hex
    digest: nothing to quote)."""
    import mlflow  # noqa: F401  (its import sets its loggers to INFO: before _quiet, not inside)

    with _quiet(True):
        client = _client(uri, telemetry=False)   # a new SQLite database is created here
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            return None
        runs = client.search_runs([exp.experiment_id], max_results=1,
                                  filter_string=f"tags.`memlab.run_key` = '{key}' and "
                                  "attributes.status = 'FINISHED'")
    return runs[0].info.run_id if runs else None


def track_simulation(result: SimResult, *, policies: "pd.DataFrame | None" = None,
                     tracking_uri: str | None = None, experiment: str = EXPERIMENT,
                     workdir: Path | None = None) -> dict[str, Any]:
    """Log ``result`` as one MLflow run (see the module docstring); returns ``{"run_id",
    "tracking_uri", "experiment", "logged"}`` (``logged`` False: the same run was there).

    Args:
        result: from :func:`memlab.vram.simulate.simulate`.
        policies: the same workload under every policy
            (:func:`memlab.vram.simulate.compare_policies`), logged beside it.
        tracking_uri: as ``memlab bench --tracking-uri``; None: ``sqlite:///<workdir>/mlflow.db``.
        experiment: the MLflow experiment (created when missing).
        workdir: the folder a relative or default SQLite URI is resolved against (default: the
            working folder, as the CLI does).
    """
    import yaml

    from memlab.bench import plots
    from memlab.vram.plots import vram_policies, vram_timeline

    result = _checked(result)
    uri = resolve_tracking_uri(tracking_uri, workdir=Path.cwd() if workdir is None else workdir)
    wl, cfg = result.workload, result.config
    params: dict[str, Any] = {"workload": wl.name, "workload.turns": len(wl.turns),
                              "workload.jobs": len(wl.jobs), "device_mb": result.device_mb,
                              "gate_capacity_mb": result.capacity_mb, "policy": result.policy}
    if result.keepalive_s is not None:
        params["keepalive_s"] = result.keepalive_s
    params.update({f"vram.{k}": v for k, v in cfg.model_dump(mode="json").items()})
    metrics = {k: float(v) for k, v in result.summary.items()}
    if policies is not None:
        for policy, row in policies.iterrows():
            metrics.update({f"{policy}/{k}": float(v) for k, v in row.items()})
    key = run_key(result, compared=policies is not None)
    out = {"tracking_uri": uri, "experiment": experiment}
    existing = _logged_run(uri, experiment, key)
    if existing is not None:
        return {"run_id": existing, **out, "logged": False}
    note = trace_note(result.summary, {m.name: m.mb for m in wl.models}, result.capacity_mb)
    tags = {"memlab.kind": "vram-simulation", "memlab.workload": wl.name,
            "memlab.run_key": key, "vram.note": note, "vram.simulated": "true",
            **provenance_tags(repo_dir=REPO_ROOT)}
    with tempfile.TemporaryDirectory(prefix="memlab-vram-") as tmp:
        d = Path(tmp)
        (d / "vram").mkdir()
        artifacts = {TRACE_ARTIFACT: result.trace.to_jsonl(d / "vram" / "trace.jsonl"),
                     TIMELINE_ARTIFACT: plots.save(vram_timeline(result),
                                                   d / "vram" / "timeline.png"),
                     SUMMARY_ARTIFACT: d / "vram" / "summary.txt",
                     "workload.yaml": d / "workload.yaml", "summary.json": d / "summary.json"}
        artifacts[SUMMARY_ARTIFACT].write_text(
            "\n".join([note, "", *(f"{k}: {v:g}" for k, v in result.summary.items())]) + "\n",
            encoding="utf-8")
        artifacts["workload.yaml"].write_text(
            yaml.safe_dump(wl.to_dict(), sort_keys=False, allow_unicode=True), encoding="utf-8")
        artifacts["summary.json"].write_text(
            json.dumps(simulation_report(result, policies), indent=1, ensure_ascii=False),
            encoding="utf-8")
        if policies is not None:
            policies.to_csv(d / "policies.csv", index_label="policy")
            artifacts["policies.csv"] = d / "policies.csv"
            artifacts["vram/policies.png"] = plots.save(
                vram_policies(policies, workload=wl.name), d / "vram" / "policies.png")
        run_id = log_run(experiment=experiment, run_name=f"vram {wl.name}: {result.policy}",
                         params=params, metrics=metrics, tags=tags, artifacts=artifacts,
                         tracking_uri=uri)
    return {"run_id": run_id, **out, "logged": True}

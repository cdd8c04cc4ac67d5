"""``memlab jobs enqueue|run|list|status|kinds|atoms|contradictions``: the fold worker from the
shell.

Times are the system clock's; ``run`` shows a progress bar (``--quiet``: none) and prints what it
did. Exit code 2 with ``error: ...`` on memlab's errors, as every memlab command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (agent_option, config_option, failing, json_flag, load_cli_config,
                            quiet_option, set_option, store_argument, user_option, when)
from memlab.clock import SystemClock
from memlab.errors import MemlabError

jobs_app = typer.Typer(help="Fold jobs (atoms, contradictions, usage cleanup, re-embedding): "
                       "queue, run, list.", no_args_is_help=True)


def _open(store: Path, config: Optional[Path], sets: list[str] | None, *, must_exist: bool = True):
    from memlab.embed import make_embedder
    from memlab.jobs import Worker

    if must_exist and not store.exists():
        raise MemlabError(f"{store}: no such store file")
    cfg = load_cli_config(config, sets)
    return Worker.open(store, config=cfg, clock=SystemClock(), embedder=lambda: make_embedder(cfg))


@jobs_app.command("enqueue")
def enqueue_cmd(
    store: Path = store_argument(),
    kind: str = typer.Argument(..., help="The job kind (memlab jobs kinds)."),
    payload: Optional[str] = typer.Option(None, "--payload", help="The payload, a JSON object."),
    agent_id: Optional[str] = agent_option(help="The owner the job works on (with --user-id; "
                                                "default every owner)."),
    user_id: Optional[str] = user_option(),
    dedup_key: Optional[str] = typer.Option(None, "--dedup-key", help="At most one queued or "
                                            "running job per key."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option(),
) -> None:
    """Queue a job; prints its id."""
    with failing():
        try:
            data = json.loads(payload) if payload else {}
        except json.JSONDecodeError as exc:
            raise MemlabError(f"--payload: not JSON ({exc}): {payload!r}") from None
        with _open(store, config, set_, must_exist=False) as worker:
            job = worker.enqueue(kind, data, agent_id=agent_id, user_id=user_id,
                                 dedup_key=dedup_key)
    typer.echo(f"{job.id}\t{job.kind}\t{job.state}")


@jobs_app.command("run")
def run_cmd(
    store: Path = store_argument(),
    once: bool = typer.Option(False, "--once", help="Run at most one job."),
    max_jobs: Optional[int] = typer.Option(None, "--max-jobs", help="Run at most this many jobs "
                                           "(default: until none is ready)."),
    kind: Optional[List[str]] = typer.Option(None, "--kind", help="Only jobs of this kind "
                                             "(repeatable)."),
    quiet: bool = quiet_option("No progress bar."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option(),
) -> None:
    """Lease and run the ready jobs; prints what was done."""
    with failing():
        with _open(store, config, set_) as worker:
            report = worker.run(max_jobs=1 if once else max_jobs, kinds=kind or None,
                                progress=not quiet)
    for job in report.done + report.failed + report.retried:
        shown = json.dumps(job.result, ensure_ascii=False) if job.state == "done" else job.error
        typer.echo(f"{job.id}\t{job.kind}\t{job.state}\t{shown}")
    typer.echo(report.summary())


@jobs_app.command("list")
def list_cmd(
    store: Path = store_argument(),
    state: Optional[List[str]] = typer.Option(None, "--state", help="queued | leased | done | "
                                              "failed (repeatable)."),
    kind: Optional[List[str]] = typer.Option(None, "--kind", help="Only this kind (repeatable)."),
    limit: int = typer.Option(50, "--limit", help="Newest jobs shown."),
    as_json: bool = json_flag("The jobs as JSON."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option(),
) -> None:
    """The jobs, newest first, as a table."""
    import pandas as pd

    with failing():
        with _open(store, config, set_) as worker:
            jobs = worker.jobs(states=state or None, kinds=kind or None, limit=limit)
    if as_json:
        typer.echo(json.dumps([j.to_dict() for j in jobs], ensure_ascii=False, indent=1))
        return
    if not jobs:
        typer.echo("no jobs")
        return
    frame = pd.DataFrame([{"id": j.id, "kind": j.kind, "state": j.state,
                           "attempts": f"{j.attempts}/{j.max_attempts}",
                           "owner": f"{j.agent_id}/{j.user_id}" if j.agent_id else "*",
                           "created": when(j.created_at, seconds=True),
                           "finished": when(j.finished_at, seconds=True),
                           "result / error": json.dumps(j.result, ensure_ascii=False)
                           if j.result is not None else (j.error or "")} for j in jobs])
    with pd.option_context("display.max_colwidth", 70, "display.width", 200):
        typer.echo(frame.to_string(index=False))


@jobs_app.command("status")
def status_cmd(
    store: Path = store_argument(),
    as_json: bool = json_flag("The counts as JSON."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option(),
) -> None:
    """Jobs by kind and state, and how many are ready to run now."""
    import pandas as pd

    from memlab.jobs.queue import JOB_STATES

    with failing():
        with _open(store, config, set_) as worker:
            counts, ready = worker.status(), worker.ready()
    if as_json:
        out: dict = {}
        for (k, s), n in counts.items():
            out.setdefault(k, {})[s] = n
        typer.echo(json.dumps({"jobs": out, "ready": ready}, ensure_ascii=False, indent=1))
        return
    if not counts:
        typer.echo("no jobs")
        return
    table = pd.Series(counts).unstack(fill_value=0).reindex(columns=list(JOB_STATES),
                                                            fill_value=0)
    table.index.name = "kind"
    typer.echo(table.to_string())
    typer.echo(f"ready to run now: {ready}")


@jobs_app.command("kinds")
def kinds_cmd() -> None:
    """The job kinds and what they do."""
    from memlab.jobs import kinds

    for name, k in sorted(kinds().items()):
        note = f" [cannot run: {k.unavailable}]" if k.unavailable else ""
        typer.echo(f"{name:<16} {k.description}{note}")


@jobs_app.command("atoms")
def atoms_cmd(
    store: Path = store_argument(),
    kind: Optional[str] = typer.Option(None, "--kind", help="preference | constraint | promise | "
                                       "event | lesson."),
    agent_id: Optional[str] = agent_option(), user_id: Optional[str] = user_option(),
    as_json: bool = json_flag("The atoms as JSON."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option(),
) -> None:
    """The typed atoms extract_atoms stored, with their source memory."""
    from dataclasses import asdict

    from memlab.jobs import stored_atoms

    with failing():
        with _open(store, config, set_) as worker:
            rows = stored_atoms(worker.store.conn, agent_id=agent_id, user_id=user_id, kind=kind)
    if as_json:
        typer.echo(json.dumps([asdict(a) for a in rows], ensure_ascii=False, indent=1))
        return
    if not rows:
        typer.echo("no atoms (run an extract_atoms job)")
        return
    for a in rows:
        typer.echo(f"{a.kind:<11} {a.memory_id}\t{a.text}")


@jobs_app.command("contradictions")
def contradictions_cmd(
    store: Path = store_argument(),
    check: bool = typer.Option(False, "--check", help="Run the evidence check first (records "
                               "what it finds), of the owner given or of every owner."),
    include_resolved: bool = typer.Option(False, "--all", help="Resolved ones too."),
    agent_id: Optional[str] = agent_option(help="One owner (with --user-id); default: every "
                                                "owner."),
    user_id: Optional[str] = user_option(),
    as_json: bool = json_flag("The contradictions as JSON."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option(),
) -> None:
    """Recorded contradictions: active memories of one fact key with different values
    (memlab.write.facts; found by the evidence_check job or --check). Also ``memlab
    contradictions``: one command, two names."""
    from dataclasses import asdict

    from memlab.clock import to_unix
    from memlab.write.facts import evidence_check, list_contradictions

    from memlab.errors import InvalidInput

    with failing():
        if (agent_id is None) != (user_id is None):
            raise InvalidInput("--agent-id/--user-id", "give both (one owner) or neither (every "
                               "owner)", (agent_id, user_id))
        with _open(store, config, set_) as worker:
            repo = worker.store.repo
            if check:
                evidence_check(repo, cfg=worker.store.config, agent_id=agent_id,
                               user_id=user_id, at=to_unix(SystemClock().now()))
            rows = list_contradictions(repo, agent_id=agent_id, user_id=user_id,
                                       open_only=not include_resolved)
    if as_json:
        typer.echo(json.dumps([asdict(c) for c in rows], ensure_ascii=False, indent=1))
        return
    if not rows:
        typer.echo("no contradictions recorded (run an evidence_check job, or --check)")
        return
    for c in rows:
        state = f"resolved {when(c.resolved_at, seconds=True)}: {c.resolution}" \
            if c.resolved_at is not None else "open"
        typer.echo(f"#{c.id} {c.fact_key} ({c.agent_id}/{c.user_id}, {state})")
        for mid, value in zip(c.memory_ids, c.values):
            typer.echo(f"  {mid}: {value}")

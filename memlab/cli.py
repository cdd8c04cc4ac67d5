"""``memlab ...``: config, add, recall, store (check, rebuild), datasets, bench, sweep."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

from memlab.config import MemlabConfig, describe, load_config, parse_assignments
from memlab.errors import MemlabError

app = typer.Typer(help="memlab: long-term memory for conversational agents, measured.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
config_app = typer.Typer(help="Show or validate the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")
store_app = typer.Typer(help="Check a store file, or rebuild its vector table.",
                        no_args_is_help=True)
app.add_typer(store_app, name="store")


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def _config(config: Optional[Path], sets: list[str] | None) -> MemlabConfig:
    return load_config(config, overrides=parse_assignments(sets))


@config_app.command("show")
def config_show(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A YAML config file."),
    fmt: str = typer.Option("table", "--format", help="table | yaml | json | flat"),
    section: Optional[str] = typer.Option(None, help="Only this section."),
) -> None:
    """Every field: value, default, range, stage and description."""
    try:
        cfg = _config(config, None)
    except MemlabError as exc:
        _fail(exc)
    if fmt == "yaml":
        typer.echo(cfg.to_yaml())
        return
    flat = cfg.to_flat()
    if fmt == "flat":
        for k, v in flat.items():
            typer.echo(f"{k}={json.dumps(v, ensure_ascii=False)}")
        return
    rows = [dict(r, value=flat[r["key"]]) for r in describe()
            if section is None or r["key"].startswith(section + ".")]
    if fmt == "json":
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    def short(v: object) -> str:
        text = json.dumps(v, ensure_ascii=False)
        return text if len(text) <= 24 else text[:21] + "..."

    typer.echo(f"{'key':<40} {'value':<24} {'default':<24} {'range':<18} {'stage':<10} description")
    for r in rows:
        mark = "" if r["value"] == r["default"] else "*"
        typer.echo(f"{r['key']:<40} {short(r['value']) + mark:<24} {short(r['default']):<24} "
                   f"{r['range']:<18} {r['stage']:<10} {r['description']}")


@config_app.command("validate")
def config_validate(path: Path) -> None:
    """Validate a YAML config file: unknown keys and out-of-range values are named."""
    try:
        cfg = MemlabConfig.from_yaml(path)
    except MemlabError as exc:
        _fail(exc)
    changed = {k: v for k, v in cfg.to_flat().items() if v != MemlabConfig().to_flat()[k]}
    typer.echo(f"ok: {path} ({len(changed)} field(s) differ from the defaults)")
    for k, v in changed.items():
        typer.echo(f"  {k} = {json.dumps(v, ensure_ascii=False)}")


@app.command("add")
def add_cmd(
    store: Path = typer.Argument(..., help="The store file (created when missing)."),
    text: str = typer.Argument(..., help="The memory text."),
    importance: Optional[float] = typer.Option(None, help="In [0, 1]; default: §5 scorer."),
    layer: Optional[str] = typer.Option(None, help="permanent | long_term | short_term."),
    agent_id: Optional[str] = typer.Option(None), user_id: Optional[str] = typer.Option(None),
    config: Optional[Path] = typer.Option(None, "--config", "-c"),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="key=value overrides."),
) -> None:
    """Add one memory to a store file."""
    from memlab.api import open_store

    try:
        cfg = _config(config, set_)
        with open_store(store, config=cfg) as st:
            rec = st.add(text, importance=importance, layer=layer, agent_id=agent_id,
                         user_id=user_id)
    except MemlabError as exc:
        _fail(exc)
    typer.echo(f"{rec.id}\t{rec.retention_layer}\timportance={rec.importance:.2f}")


@app.command("recall")
def recall_cmd(
    store: Path = typer.Argument(..., help="The store file."),
    query: str = typer.Argument(...),
    k: Optional[int] = typer.Option(None, "-k", help="Memories to return."),
    explain: bool = typer.Option(False, "--explain", help="Show every score component."),
    prompt: bool = typer.Option(False, "--prompt", help="Print the prompt block."),
    agent_id: Optional[str] = typer.Option(None), user_id: Optional[str] = typer.Option(None),
    config: Optional[Path] = typer.Option(None, "--config", "-c"),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="key=value overrides."),
) -> None:
    """Recall memories for a query (time: now)."""
    import pandas as pd

    from memlab.api import open_store

    if not store.exists():
        _fail(MemlabError(f"{store}: no such store file"))
    try:
        cfg = _config(config, set_)
        with open_store(store, config=cfg) as st:
            res = st.recall(query, k=k, agent_id=agent_id, user_id=user_id)
    except MemlabError as exc:
        _fail(exc)
    for note in res.notes:
        typer.secho(f"note: {note}", fg=typer.colors.YELLOW, err=True)
    if not len(res):
        typer.echo(f"no memories: {res.empty_reason}")
        return
    if prompt:
        typer.echo(res.to_prompt())
        return
    frame = res.to_frame()
    if not explain:
        frame = frame[["rank", "score", "id", "text"]]
    with pd.option_context("display.max_columns", None, "display.width", 200,
                           "display.max_colwidth", 60, "display.float_format", "{:.4f}".format):
        typer.echo(frame.to_string(index=False))


@store_app.command("check")
def store_check(
    store: Path = typer.Argument(..., help="The store file (opened read-only)."),
    full: bool = typer.Option(False, "--full", help="PRAGMA integrity_check (slower) instead of "
                              "quick_check."),
    as_json: bool = typer.Option(False, "--json", help="The report as JSON."),
    config: Optional[Path] = typer.Option(None, "--config", "-c"),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="key=value overrides."),
) -> None:
    """Integrity, schema version, records by layer and status, pending embeddings, vectors
    against embedded memories per model version, the change log. Writes nothing. Exit code 0 when
    healthy, 1 when a problem is found, 2 when the file cannot be opened."""
    from memlab.store.health import check_store

    if not store.exists():
        _fail(MemlabError(f"{store}: no such store file"))
    try:
        cfg = _config(config, set_)
        report = check_store(store, full=full, busy_timeout_ms=cfg.store.busy_timeout_ms)
    except MemlabError as exc:
        _fail(exc)
    typer.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=1) if as_json
               else "\n".join(report.lines()))
    raise typer.Exit(0 if report.healthy else 1)


@store_app.command("rebuild")
def store_rebuild(
    store: Path = typer.Argument(..., help="The store file."),
    as_json: bool = typer.Option(False, "--json", help="The report as JSON."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Names the embedder."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="key=value overrides."),
) -> None:
    """Rebuild the embedder's vector table from the records through the embedding cache,
    embedding what the cache lacks; report the counts."""
    from dataclasses import asdict

    from memlab.embed import make_embedder
    from memlab.store.health import rebuild_store

    if not store.exists():
        _fail(MemlabError(f"{store}: no such store file"))
    try:
        cfg = _config(config, set_)
        report = rebuild_store(store, config=cfg, embedder=make_embedder(cfg))
    except MemlabError as exc:
        _fail(exc)
    typer.echo(json.dumps(asdict(report), ensure_ascii=False, indent=1) if as_json
               else "\n".join(report.lines()))


def _mount() -> None:
    from memlab.bench.cli import bench
    from memlab.bench.datasets.cli import datasets_app
    from memlab.tune.cli import sweep_cmd

    app.add_typer(datasets_app, name="datasets")
    app.command("bench")(bench)
    app.command("sweep")(sweep_cmd)


_mount()


def main() -> None:  # pragma: no cover
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()

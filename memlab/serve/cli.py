"""``memlab status STORE [--json]`` and ``memlab serve STORE [--host] [--port] [--token]``
(familiars §5.11)."""

from __future__ import annotations

import ipaddress
import json
import logging
from pathlib import Path
from typing import List, Optional

import typer

from memlab.config import load_config, parse_assignments
from memlab.errors import MemlabError

log = logging.getLogger("memlab")


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def status_cmd(
    store: Path = typer.Argument(..., help="The store file."),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of text."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A YAML config file."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="key=value overrides."),
) -> None:
    """Counts of a store: memories by scope, category and layer, pending embeddings, jobs,
    usage and recall-log events (familiars §5.11 memory writer-status)."""
    from memlab.api import open_store

    if not store.exists():
        _fail(f"{store}: no such store file")
    try:
        cfg = load_config(config, overrides=parse_assignments(set_))
        with open_store(store, config=cfg) as st:
            status = st.status()
    except MemlabError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(status.to_dict(), ensure_ascii=False, indent=2))
    else:
        typer.echo(str(status))


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_cmd(
    store: Path = typer.Argument(..., help="The store file (created when missing)."),
    host: Optional[str] = typer.Option(None, "--host", help="Bind address (default "
                                       "serve.host: 127.0.0.1). Another address is logged as a "
                                       "warning."),
    port: Optional[int] = typer.Option(None, "--port", help="TCP port (default serve.port)."),
    token: Optional[str] = typer.Option(None, "--token", envvar="MEMLAB_SERVE_TOKEN",
                                        help="Require 'Authorization: Bearer TOKEN'."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="A YAML config file."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="key=value overrides."),
) -> None:
    """Serve the HTTP API over a store (FastAPI + uvicorn): /api/memory_status, /api/memory,
    /api/recall, /api/agents/{id}/release-memory."""
    try:
        import uvicorn

        from memlab.serve.app import create_app
    except ImportError as exc:
        _fail(f"{exc}: pip install 'memlab[serve]'")
    try:
        cfg = load_config(config, overrides=parse_assignments(set_))
        if port is not None:
            cfg = cfg.replace(**{"serve.port": port})
        bind = host or cfg.serve.host
        if not is_loopback(bind):
            log.warning("memlab serve: binding %s, not loopback: the API is reachable from other "
                        "machines%s", bind, "" if token else " WITHOUT a token (--token)")
        app = create_app(store, cfg, token=token or None)
    except MemlabError as exc:
        _fail(str(exc))
    uvicorn.run(app, host=bind, port=cfg.serve.port, log_level="warning", access_log=False)

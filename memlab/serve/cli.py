"""``memlab status STORE [--json]`` and ``memlab serve STORE [--host] [--port] [--token]``
(familiars §5.11)."""

from __future__ import annotations

import ipaddress
import json
import logging
from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (config_option, fail, failing, json_flag, load_cli_config, set_option,
                            store_argument)

log = logging.getLogger("memlab")


def status_cmd(
    store: Path = store_argument(),
    as_json: bool = json_flag("JSON instead of text."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Counts of a store: memories by scope, category and layer, pending embeddings, jobs,
    usage and recall-log events (familiars §5.11 memory writer-status)."""
    from memlab.api import open_store

    if not store.exists():
        fail(f"{store}: no such store file")
    with failing():
        cfg = load_cli_config(config, set_)
        with open_store(store, config=cfg) as st:
            status = st.status()
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
    store: Path = store_argument("The store file (created when missing)."),
    host: Optional[str] = typer.Option(None, "--host", help="Bind address (default "
                                       "serve.host: 127.0.0.1). Another address is logged as a "
                                       "warning."),
    port: Optional[int] = typer.Option(None, "--port", help="TCP port (default serve.port)."),
    token: Optional[str] = typer.Option(None, "--token", envvar="MEMLAB_SERVE_TOKEN",
                                        help="Require 'Authorization: Bearer TOKEN'."),
    config: Optional[Path] = config_option(),
    set_: Optional[List[str]] = set_option("key=value overrides."),
) -> None:
    """Serve the HTTP API over a store (FastAPI + uvicorn): /api/memory_status, /api/memory,
    /api/recall, /api/agents/{id}/release-memory."""
    try:
        import uvicorn

        from memlab.serve.app import create_app
    except ImportError as exc:
        fail(f"{exc}: pip install 'memlab[serve]'")
    with failing():
        cfg = load_cli_config(config, set_)
        if port is not None:
            cfg = cfg.replace(**{"serve.port": port})
        bind = host or cfg.serve.host
        if not is_loopback(bind):
            log.warning("memlab serve: binding %s, not loopback: the API is reachable from other "
                        "machines%s", bind, "" if token else " WITHOUT a token (--token)")
        app = create_app(store, cfg, token=token or None)
    uvicorn.run(app, host=bind, port=cfg.serve.port, log_level="warning", access_log=False)

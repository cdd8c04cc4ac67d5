"""``memlab workspace export|import STORE DIR``: the markdown workspace from the shell.

Exit code 2 with ``error: ...`` on memlab's errors, as every memlab command; ``import`` exits 1
when any file was refused (the other files are loaded; each refusal is printed with its file and
line).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (agent_option, config_option, failing, load_cli_config, set_option,
                            store_argument, user_option)
from memlab.errors import MemlabError

workspace_app = typer.Typer(help="Export a store as a Familiars markdown workspace, or import "
                            "one (familiars §5.2.4, §5.3.1).", no_args_is_help=True)

_DIR = typer.Argument(..., help="The workspace folder.")


@workspace_app.command("export")
def export_cmd(
    store: Path = store_argument(), directory: Path = _DIR,
    agent_id: Optional[str] = agent_option(help="Only this agent's records."),
    user_id: Optional[str] = user_option(help="Only this user's records."),
    config: Optional[Path] = config_option(), set_: Optional[List[str]] = set_option(),
) -> None:
    """Write every record of STORE (every state, deprecated ones too) into DIR, one markdown
    file per cell; files the export writes are replaced whole."""
    from memlab.store import Store

    from .sync import export_workspace

    with failing():
        if not store.exists():
            raise MemlabError(f"{store}: no such store file")
        cfg = load_cli_config(config, set_)
        with Store.open(store, config=cfg) as st:
            result = export_workspace(st, directory, agent_id=agent_id, user_id=user_id)
    typer.echo(result.summary())


@workspace_app.command("import")
def import_cmd(
    store: Path = store_argument("The store file (created when missing)."),
    directory: Path = _DIR,
    embed: bool = typer.Option(False, "--embed", help="Embed the imported records now with the "
                               "configured embedder (default: they stay pending; `memlab store "
                               "rebuild STORE` embeds them)."),
    config: Optional[Path] = config_option(), set_: Optional[List[str]] = set_option(),
) -> None:
    """Add DIR's records to STORE verbatim (ids, times and every field), each file all or
    nothing; an entry whose id is stored with the same record is skipped."""
    from memlab.store import Store

    from .sync import import_workspace

    with failing():
        cfg = load_cli_config(config, set_)
        embedder = None
        if embed:
            from memlab.embed import make_embedder

            embedder = make_embedder(cfg)
        with Store.open(store, config=cfg, embedder=embedder) as st:
            result = import_workspace(st, directory)
            embedded = st.embed_pending(embedder) if embedder is not None else 0
    for line in result.lines():
        if line.startswith("error: "):
            typer.secho(line, fg=typer.colors.RED, err=True)
        else:
            typer.echo(line)
    if embed:
        typer.echo(f"embedded {embedded} record(s)")
    raise typer.Exit(0 if result.ok else 1)

"""``memlab consolidate STORE [--dry-run] [--agent-id A --user-id U]``: the consolidator
(familiars §5.9) from the shell. Prints every cluster (source ids, cosine to the medoid, texts,
the synthesised text); ``--dry-run`` writes nothing. Exit code 2 with ``error: ...`` on memlab's
errors, as every memlab command."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from memlab.cliutil import (agent_option, config_option, failing, load_cli_config, set_option,
                            store_argument, user_option)
from memlab.errors import MemlabError


def consolidate_cmd(
    store: Path = store_argument(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would merge, write "
                                 "nothing."),
    agent_id: Optional[str] = agent_option("--agent-id", "--agent", help="Only this agent's "
                                           "entries (default every owner)."),
    user_id: Optional[str] = user_option("--user-id", "--user", help="Only this user's entries."),
    config: Optional[Path] = config_option(), set_: Optional[List[str]] = set_option(),
) -> None:
    """Merge near-duplicate entries of each Familiars cell into one (consolidation.* config):
    the sources are deprecated, the new entry records derived_from. Pinned entries and
    Reverie's memories (no cell) are never touched."""
    from memlab.embed import make_embedder
    from memlab.llm import OpenAIChat
    from memlab.store import Store

    from .consolidate import consolidate

    with failing():
        if not store.exists():
            raise MemlabError(f"{store}: no such store file")
        cfg = load_cli_config(config, set_)
        embedder = make_embedder(cfg)
        llm = OpenAIChat.from_config(cfg.llm) if cfg.consolidation.synthesis == "llm" else None
        with Store.open(store, config=cfg) as st:
            plan, added = consolidate(st, embedder=embedder, dry_run=dry_run, llm=llm,
                                      agent_id=agent_id, user_id=user_id)
    for line in plan.lines():
        typer.echo(line)
    if dry_run:
        typer.echo("dry run: nothing written")
    else:
        typer.echo(f"wrote {len(added)} consolidated entr{'y' if len(added) == 1 else 'ies'}: "
                   + ", ".join(r.id for r in added) if added else "nothing to consolidate")

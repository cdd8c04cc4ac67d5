"""``memlab datasets ...``: list the registered datasets, show one, convert one to the canonical format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from memlab.bench.datasets.canonical import write_dataset
from memlab.bench.datasets.registry import info, list_datasets, load, resolve_path
from memlab.cliutil import failing
from memlab.errors import InvalidInput, MemlabError

datasets_app = typer.Typer(help="Recall datasets: list, describe, convert to the canonical format.",
                           no_args_is_help=True)


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """``["noise=9", "categories=[1,2]", "tz=Asia/Shanghai"]`` -> options; values are JSON when they parse."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInput("--option", "must look like key=value", pair)
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


@datasets_app.command("list")
def list_cmd() -> None:
    """The registered datasets and whether a local copy was found."""
    for spec in list_datasets():
        try:
            where = str(resolve_path(spec.name))
        except MemlabError:
            where = "(not found locally)"
        typer.echo(f"{spec.name:<20} {spec.language:<6} {where}")


@datasets_app.command("info")
def info_cmd(name: Annotated[str, typer.Argument(help="a registered dataset name")]) -> None:
    """What a dataset is, its licence, download URL, checksums, options and local path."""
    with failing():
        spec = info(name)
    typer.echo(f"name:         {spec.name}\nlanguage:     {spec.language}\nlicence:      {spec.license}\n"
               f"official url: {spec.official_url}\ndescription:  {spec.description}\n"
               f"default path: {spec.default_relpath}" + (" (in the repository)" if spec.bundled else ""))
    for rel, digest in spec.sha256.items():
        typer.echo(f"sha256:       {digest}  {rel}")
    for key, doc in spec.options.items():
        typer.echo(f"option:       {key} = {doc}")
    try:
        typer.echo(f"local copy:   {resolve_path(spec.name)}")
    except MemlabError as exc:
        typer.echo(f"local copy:   none ({exc})")


@datasets_app.command("convert")
def convert_cmd(
    name: Annotated[str, typer.Argument(help="a registered dataset name")],
    out: Annotated[Path, typer.Option("--out", help="folder to write card.json, items.jsonl, queries.jsonl")],
    path: Annotated[Optional[Path], typer.Option("--path", help="the native file or folder")] = None,
    option: Annotated[Optional[list[str]], typer.Option("--option", "-o", help="loader option key=value")] = None,
) -> None:
    """Load a dataset in its native format and write it in the canonical format."""
    with failing():
        ds = load(name, path=path, **parse_options(option or []))
        write_dataset(ds, out)
    summary = ds.summary()
    typer.echo(f"wrote {out}: {summary['conversations']} conversations, {summary['items']} items, "
               f"{summary['questions']} questions; sha256 {ds.content_hash()}")
    typer.echo(str(ds.report))

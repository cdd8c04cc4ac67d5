"""What memlab's commands share: :func:`fail`, the option and argument declarations that two or
more commands repeat, the config of ``--config``/``--set``, and the times they print.

Each declaration is a factory returning a fresh ``typer.Option``/``typer.Argument`` with the
names, short flags and default every command that takes it uses; where the commands' help texts
differ, the help is a parameter and each command passes its own. The command modules
(memlab/cli.py and every package's ``cli.py``) import from here; this module imports only the
clock, the config and the errors, so that every layer's command module may.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, NoReturn, Optional

import typer

from memlab.clock import from_unix
from memlab.config import MemlabConfig, load_config, parse_assignments
from memlab.errors import MemlabError


# -- errors ----------------------------------------------------------------------------------------
def fail(message: object) -> NoReturn:
    """``error: MESSAGE`` in red on stderr and exit code 2: how every memlab command stops on an
    error."""
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


@contextmanager
def failing(*also: type[Exception]) -> Iterator[None]:
    """A :class:`MemlabError` (or one of ``also``) raised in the block becomes :func:`fail`."""
    try:
        yield
    except (MemlabError, *also) as exc:
        fail(exc)


def load_cli_config(config: Optional[Path], sets: list[str] | None) -> MemlabConfig:
    """The config of ``--config FILE`` (none: the defaults) with the ``--set key=value``
    overrides applied; a :class:`MemlabError` (unknown key, value out of range, unreadable file)
    is :func:`fail`."""
    with failing():
        return load_config(config, overrides=parse_assignments(sets))


def loader_options(pairs: list[str] | None) -> dict:
    """``--option key=value`` pairs of a dataset loader; each value is read as YAML."""
    import yaml

    return {k: yaml.safe_load(v) for k, v in parse_assignments(pairs, what="--option").items()}


def run_overrides(sets: list[str] | None, cache_dir: Path | None, no_vram_gate: bool) -> dict:
    """The config overrides of a run command (bench, sweep): ``--set`` pairs, ``--cache-dir`` as
    ``bench.cache_dir`` (made absolute against the working folder, as a path typed on the command
    line means; a relative ``bench.cache_dir`` in a config is under the memlab home) and
    ``--no-vram-gate`` as ``vram.enabled`` false."""
    overrides = parse_assignments(sets)
    if cache_dir is not None:
        overrides["bench.cache_dir"] = str(Path(cache_dir).expanduser().absolute())
    if no_vram_gate:
        overrides["vram.enabled"] = False
    return overrides


# -- times -----------------------------------------------------------------------------------------
def when(t: float | None, *, seconds: bool = False) -> str:
    """A unix time as UTC text to the minute (``2026-12-01 23:55``) or, with ``seconds``, to the
    second; ``""`` for none."""
    if t is None:
        return ""
    return from_unix(t).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


# -- a store and its config ------------------------------------------------------------------------
def store_argument(help: str = "The store file.") -> Any:
    """STORE, the store file (required)."""
    return typer.Argument(..., help=help)


def config_option(help: Optional[str] = "A YAML config file.") -> Any:
    """``--config/-c FILE``."""
    return typer.Option(None, "--config", "-c", help=help)


def set_option(help: str = "key=value config overrides.") -> Any:
    """``--set key=value`` (repeatable)."""
    return typer.Option(None, "--set", help=help)


def agent_option(*names: str, help: Optional[str] = None) -> Any:
    """The agent of the owner: ``--agent-id`` from the parameter's name, or ``names``."""
    return typer.Option(None, *names, help=help)


def user_option(*names: str, help: Optional[str] = None) -> Any:
    """The user of the owner: ``--user-id`` from the parameter's name, or ``names``."""
    return typer.Option(None, *names, help=help)


def json_flag(help: str) -> Any:
    """``--json``: print JSON instead of text."""
    return typer.Option(False, "--json", help=help)


def json_out_option(help: str = "Write the results as JSON.") -> Any:
    """``--json FILE``: write a JSON report there."""
    return typer.Option(None, "--json", help=help)


def quiet_option(help: str = "No progress bars.") -> Any:
    """``--quiet/-q``."""
    return typer.Option(False, "--quiet", "-q", help=help)


# -- datasets, caches and MLflow (bench, sweep, fit) -----------------------------------------------
def dataset_option(help: str) -> Any:
    """``--dataset/-d NAME`` (default memlab-lifelog)."""
    return typer.Option("memlab-lifelog", "--dataset", "-d", help=help)


def path_option(help: str = "Where the named dataset's files are.") -> Any:
    """``--path``: where the named dataset's files are."""
    return typer.Option(None, "--path", help=help)


def loader_option(help: str) -> Any:
    """``--option key=value`` of the dataset loader (repeatable; :func:`loader_options`)."""
    return typer.Option(None, "--option", help=help)


def cache_dir_option(help: str = "Folder of the embedding and feature caches "
                     "(bench.cache_dir).") -> Any:
    """``--cache-dir``: bench.cache_dir."""
    return typer.Option(None, "--cache-dir", help=help)


def limit_option(help: str = "Only the first N questions.") -> Any:
    """``--limit N`` questions."""
    return typer.Option(None, "--limit", help=help)


def no_vram_gate_option(help: str) -> Any:
    """``--no-vram-gate``: vram.enabled false."""
    return typer.Option(False, "--no-vram-gate", help=help)


def tracking_uri_option(help: str) -> Any:
    """``--tracking-uri``: MLflow's tracking URI."""
    return typer.Option(None, "--tracking-uri", help=help)


def no_track_option(help: str = "Do not log to MLflow.") -> Any:
    """``--no-track``."""
    return typer.Option(False, "--no-track", help=help)


def experiment_option(default: str, help: str = "MLflow experiment.") -> Any:
    """``--experiment NAME``: the MLflow experiment."""
    return typer.Option(default, "--experiment", help=help)

"""memlab/cliutil.py: what every command shares (fail, the shared option declarations, the config
of --config/--set, the printed times), and that every memlab command still declares the shared
options with the same names, short flags and defaults."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import List, Optional

import pytest
import typer
from typer.testing import CliRunner

from memlab import cliutil as cu
from memlab.cli import app
from memlab.errors import InvalidInput

#: parameter name -> (opts, default, required) every memlab command that has it declares;
#: agent_id/user_id: the long name, and consolidate adds --agent/--user
SHARED = {
    "store": (["store"], None, True),
    "config": (["--config", "-c"], None, False),
    "set_": (["--set"], None, False),
    "agent_id": (["--agent-id"], None, False),
    "user_id": (["--user-id"], None, False),
    "as_json": (["--json"], False, False),
    "json_out": (["--json"], None, False),
    "quiet": (["--quiet", "-q"], False, False),
    "tracking_uri": (["--tracking-uri"], None, False),
    "no_track": (["--no-track"], False, False),
    "dataset": (["--dataset", "-d"], "memlab-lifelog", False),
    "cache_dir": (["--cache-dir"], None, False),
    "no_vram_gate": (["--no-vram-gate"], False, False),
}
ALIASES = {("consolidate", "agent_id"): ["--agent-id", "--agent"],
           ("consolidate", "user_id"): ["--user-id", "--user"]}


def _commands(cmd, path=()):
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def test_every_command_declares_the_shared_options_alike():
    seen = {name: [] for name in SHARED}
    for path, cmd in _commands(typer.main.get_command(app)):
        for p in cmd.params:
            if p.name in SHARED:
                opts, default, required = SHARED[p.name]
                opts = ALIASES.get((path.split()[-1], p.name), opts)
                assert (p.opts, p.default, p.required) == (opts, default, required), (path, p.name)
                assert p.envvar is None, (path, p.name)
                seen[p.name].append(path)
    # shared: every one of them stands in two commands or more
    assert {name: len(paths) for name, paths in seen.items() if len(paths) < 2} == {}
    assert len(seen["config"]) >= 20 and "jobs run" in seen["store"] and "sweep" in seen["quiet"]


def _declared(factory, *args, annotation=Optional[str], **kwargs):
    """The click parameter ``factory(*args, **kwargs)`` declares on a one-command app."""
    one = typer.Typer()

    @one.command()
    def cmd(value=factory(*args, **kwargs)) -> None:  # noqa: B008
        """One parameter."""

    cmd.__annotations__["value"] = annotation
    (param,) = [p for p in typer.main.get_command(one).params if p.name == "value"]
    return param


@pytest.mark.parametrize("factory,args,opts,default,help", [
    (cu.config_option, (), ["--config", "-c"], None, "A YAML config file."),
    (cu.config_option, (None,), ["--config", "-c"], None, None),
    (cu.set_option, (), ["--set"], None, "key=value config overrides."),
    (cu.set_option, ("key=value overrides.",), ["--set"], None, "key=value overrides."),
    (cu.quiet_option, (), ["--quiet", "-q"], False, "No progress bars."),
    (cu.quiet_option, ("No progress bar.",), ["--quiet", "-q"], False, "No progress bar."),
    (cu.json_flag, ("The jobs as JSON.",), ["--json"], False, "The jobs as JSON."),
    (cu.json_out_option, (), ["--json"], None, "Write the results as JSON."),
    (cu.no_track_option, (), ["--no-track"], False, "Do not log to MLflow."),
    (cu.experiment_option, ("memlab-sweep",), ["--experiment"], "memlab-sweep",
     "MLflow experiment."),
    (cu.dataset_option, ("A name.",), ["--dataset", "-d"], "memlab-lifelog", "A name."),
    (cu.path_option, (), ["--path"], None, "Where the named dataset's files are."),
    (cu.limit_option, (), ["--limit"], None, "Only the first N questions."),
    (cu.cache_dir_option, (), ["--cache-dir"], None,
     "Folder of the embedding and feature caches (bench.cache_dir)."),
    (cu.agent_option, ("--agent-id", "--agent"), ["--agent-id", "--agent"], None, None),
])
def test_each_factory_declares_its_names_default_and_the_help_given(factory, args, opts,
                                                                    default, help):
    param = _declared(factory, *args)
    assert (param.opts, param.default, param.help, param.required) == (opts, default, help, False)


def test_the_store_argument_is_required_and_takes_its_help():
    param = _declared(cu.store_argument, annotation=Path)
    assert (param.opts, param.required, param.help) == (["value"], True, "The store file.")
    assert _declared(cu.store_argument, "The store file (created when missing).",
                     annotation=Path).help == "The store file (created when missing)."


# -- fail, failing, load_cli_config ----------------------------------------------------------------
demo = typer.Typer()


@demo.command()
def load(config: Optional[Path] = cu.config_option(),
         set_: Optional[List[str]] = cu.set_option()) -> None:
    """Print recall.k of the config of --config/--set."""
    typer.echo(cu.load_cli_config(config, set_).recall.k)


@demo.command()
def boom(kind: str) -> None:
    """Raise an error of KIND inside failing()."""
    with cu.failing(KeyError):
        if kind == "memlab":
            raise InvalidInput("text", "must not be empty", "")
        if kind == "key":
            raise KeyError("k")
        raise ValueError("not memlab's")
    typer.echo("unreachable")


def test_load_cli_config_applies_set_and_fails_on_a_bad_key(tmp_path):
    runner = CliRunner()
    assert runner.invoke(demo, ["load", "--set", "recall.k=7"]).stdout == "7\n"
    (tmp_path / "c.yaml").write_text("recall:\n  k: 3\n", encoding="utf-8")
    assert runner.invoke(demo, ["load", "-c", str(tmp_path / "c.yaml")]).stdout == "3\n"
    res = runner.invoke(demo, ["load", "--set", "recall.nope=1"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith("error: ") and "recall.nope" in res.stderr


def test_failing_prints_error_in_red_on_stderr_and_exits_2():
    res = CliRunner().invoke(demo, ["boom", "memlab"], color=True)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr == "\x1b[31merror: text: must not be empty (got '')\x1b[0m\n"
    res = CliRunner().invoke(demo, ["boom", "key"])
    assert (res.exit_code, res.stderr) == (2, "error: 'k'\n")


def test_failing_lets_other_errors_through():
    res = CliRunner().invoke(demo, ["boom", "other"])
    assert res.exit_code == 1 and isinstance(res.exception, ValueError)


def test_when_is_utc_to_the_minute_or_the_second():
    t = datetime(2026, 12, 1, 23, 55, 37, 900000, tzinfo=timezone.utc).timestamp()
    assert cu.when(t) == "2026-12-01 23:55"
    assert cu.when(t, seconds=True) == "2026-12-01 23:55:37"
    assert cu.when(None) == "" and cu.when(None, seconds=True) == ""

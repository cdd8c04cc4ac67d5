"""Hostile inputs to ``memlab sweep`` (issue 19, items 8): each is refused by a named
memlab error, exit code 2, no traceback, before anything of its size is built or written; the
files given stay byte-identical. Read-only folders are tried in a process that permissions bind
(as root, for whom chmod changes nothing, the child runs as uid 65534)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlab.cli import app
from memlab.errors import ConfigError
from memlab.tune.space import load_space

ROOT = Path(__file__).resolve().parents[2]
SPACE = ("params:\n"
         "  fusion.relevance: {float: [0.0, 1.0]}\n"
         "  fusion.temporal: {float: [0.0, 1.0]}\n")


def hashing_sets(cache_dir: Path) -> list[str]:
    pairs = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
             "recall.relevance_floor": "0.0"}
    return [a for k, v in pairs.items() for a in ("--set", f"{k}={v}")] + ["--cache-dir",
                                                                             str(cache_dir)]


@pytest.fixture
def args(tiny_bench_folder, tmp_path):
    """``memlab sweep`` on the tiny dataset with the hashing embedder, then ``extra``."""
    space = tmp_path / "space.yaml"
    space.write_text(SPACE, encoding="utf-8")

    def make(*extra: str, space_file: Path = space) -> list[str]:
        return ["sweep", "-d", str(tiny_bench_folder), "--space", str(space_file), "--preset",
                "reverie", "--trials", "2", "-q", "--no-track", "--out-dir",
                str(tmp_path / "out"), *hashing_sets(tmp_path / "cache"), *extra]
    return make


def refused(argv: list[str], *needles: str) -> str:
    """Run the CLI in this process: exit code 2, ``error:`` and each needle, no traceback."""
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), (
        res.exit_code, repr(res.exception), res.output)
    assert "error:" in res.output and "Traceback" not in res.output
    for n in needles:
        assert n in res.output, res.output
    return res.output


# -- item 8: the space file ------------------------------------------------------------------------
def test_a_space_not_utf8_deep_or_with_a_key_twice_is_named(args, tmp_path):
    latin = tmp_path / "latin1.yaml"
    latin.write_bytes((SPACE + "# café\n").encode("latin-1"))
    refused(args(space_file=latin), f"{latin}:4:6", "not UTF-8", "0xe9")
    deep = tmp_path / "deep.yaml"
    deep.write_text("params: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", encoding="utf-8")
    refused(args(space_file=deep), f"{deep}:1:", "nested deeper than 64 levels")
    twice = tmp_path / "twice.yaml"
    twice.write_text(SPACE + "  fusion.relevance: {float: [0.2, 0.4]}\n", encoding="utf-8")
    refused(args(space_file=twice), f"{twice}:4:3", "duplicate key 'fusion.relevance'",
            "first at line 2")
    with pytest.raises(ConfigError, match="duplicate key 'params'"):
        load_space(_write(tmp_path / "two.yaml", SPACE + SPACE))


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path

"""Hostile inputs to ``memlab sweep`` (issue 19, items 1, 8 and 12): each is refused by a named
memlab error, exit code 2, no traceback, before anything of its size is built or written; the
files given stay byte-identical. Read-only folders are tried in a process that permissions bind
(as root, for whom chmod changes nothing, the child runs as uid 65534)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memlab.bench.datasets.canonical import write_dataset
from memlab.cli import app
from memlab.config import describe
from memlab.errors import ConfigError, DatasetError
from memlab.tune.objective import Objective
from memlab.tune.space import GRID_MAX, Space, load_space
from memlab.tune.storage import RECORD_START, open_storage
from memlab.tune.study import SETTINGS_ATTR, open_study
from memlab.tune.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
from privileges import NOBODY  # noqa: E402
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


# -- item 8: --storage (a path or a URL that cannot hold a study) ----------------------------------
def _garbage(path: Path) -> None:
    path.write_bytes(np.random.default_rng(19).bytes(3000))


def _text(path: Path) -> None:
    path.write_bytes(b"hello")                       # no newline: looked like a torn record


def _bad_middle(path: Path) -> None:
    path.write_bytes(RECORD_START + b'0,"worker_id":"w"}\nnot json\n' + RECORD_START + b"5}\n")


def _bad_tail(path: Path) -> None:
    open_study(open_storage(path), "t", Objective.parse("mrr"), {})
    with open(path, "ab") as f:
        f.write(b"trailing words")                  # not a torn record: must not be cut off


@pytest.mark.parametrize("make,rule", [
    (_garbage, "is not an Optuna journal"),
    (_text, "is not an Optuna journal"),
    (_bad_middle, "is not a readable Optuna journal"),
    (_bad_tail, "neither a record nor a torn one"),
])
def test_a_file_that_is_not_a_journal_is_refused_and_left_unchanged(args, tmp_path, make, rule):
    journal = tmp_path / "given.journal"
    make(journal)
    before = journal.read_bytes()
    refused(args("--storage", str(journal)), "storage:", rule, str(journal))
    assert journal.read_bytes() == before


def test_a_folder_or_a_folder_under_a_file_is_refused(args, tmp_path):
    (tmp_path / "adir").mkdir()
    refused(args("--storage", str(tmp_path / "adir")), "storage:", "is a folder")
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    refused(args("--storage", str(tmp_path / "afile" / "s.journal")), "storage:",
            "cannot be made")


def test_rdb_urls_that_cannot_hold_a_study_are_named_without_their_password(args, tmp_path):
    refused(args("--storage", "foo://bar"), "storage:", "unknown database scheme 'foo'")
    refused(args("--storage", "://nothing"), "storage:", "not a database URL")
    refused(args("--storage", f"sqlite:///{tmp_path}/missing/dir/s.db"), "storage:",
            "cannot be opened")
    from sqlalchemy.engine import make_url

    try:   # the driver SQLAlchemy reads postgresql:// with (psycopg 3 from SQLAlchemy 2.1)
        make_url("postgresql://u@h/db").get_dialect().import_dbapi()
        rule = "cannot be opened"                    # installed: port 1 refuses the connection
    except ImportError:
        rule = "the database driver for postgresql is not installed"
    out = refused(args("--storage", "postgresql://u:s3cret@127.0.0.1:1/db"), "storage:", rule,
                  "u:***@127.0.0.1:1")
    assert "s3cret" not in out


@pytest.fixture
def shared(tiny_bench):
    """A folder uid 65534 can reach (pytest's tmp folder is private to root), the tiny dataset
    and the space in it, ``w`` writable by that user and ``ro`` read-only."""
    folder = Path(tempfile.mkdtemp(prefix="memlab-sweep-ro-"))
    folder.chmod(0o755)
    write_dataset(tiny_bench, folder / "tiny")
    _write(folder / "space.yaml", SPACE)
    (folder / "w").mkdir()
    (folder / "ro").mkdir()
    (folder / "ro" / "s.journal").write_bytes(b"")
    (folder / "ro" / "mine.journal").write_bytes(b"")
    if os.geteuid() == 0:
        os.chown(folder / "w", NOBODY, NOBODY)
        os.chown(folder / "ro" / "mine.journal", NOBODY, NOBODY)   # writable, its folder not
    for p in folder.rglob("*"):
        if p.name != "w":
            p.chmod(0o755 if p.is_dir() else 0o644)
    (folder / "ro").chmod(0o555)
    try:
        yield folder
    finally:
        (folder / "ro").chmod(0o755)
        shutil.rmtree(folder)


def unprivileged_sweep(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    """``memlab sweep`` in a child process that file permissions bind."""
    drop = dict(user=NOBODY, group=NOBODY, extra_groups=[]) if os.geteuid() == 0 else {}
    argv = [sys.executable, "-m", "memlab.cli", "sweep", "-d", str(folder / "tiny"), "--space",
            str(folder / "space.yaml"), "--preset", "reverie", "--trials", "2", "-q",
            "--no-track", *hashing_sets(folder / "w" / "cache"), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder / "w")}
    try:
        return subprocess.run(argv, cwd=folder / "w", env=env, capture_output=True, text=True,
                              timeout=300, **drop)
    except PermissionError as exc:                     # root without CAP_SETUID
        pytest.skip(f"cannot drop root privileges: {exc}")


def test_read_only_storage_and_out_dir_are_named(shared):
    ro, w = shared / "ro", shared / "w"
    cases = [
        (("--storage", str(ro / "new.journal"), "--out-dir", str(w / "o")),
         "storage: the journal or its lock file beside it cannot be written",
         "Permission denied"),
        (("--storage", str(ro / "s.journal"), "--out-dir", str(w / "o")),   # root's 0644 file
         "storage: the journal or its lock file", "Permission denied"),
        (("--storage", str(ro / "mine.journal"), "--out-dir", str(w / "o")),  # the lock's folder
         "storage: the journal or its lock file", "Permission denied"),
        (("--out-dir", str(ro / "out")), "--out-dir: cannot write into this folder",
         "Permission denied"),
        (("--storage", f"sqlite:///{ro}/s.db", "--out-dir", str(w / "o")),
         "storage: the study database cannot be opened", "unable to open database file"),
    ]
    for extra, *needles in cases:
        done = unprivileged_sweep(shared, *extra)
        out = done.stdout + done.stderr
        assert done.returncode == 2 and "Traceback" not in out, out
        for n in needles:
            assert n in out, out
    assert sorted(p.name for p in ro.iterdir()) == ["mine.journal", "s.journal"]
    assert (ro / "s.journal").read_bytes() == (ro / "mine.journal").read_bytes() == b""


# -- item 8: --limit -------------------------------------------------------------------------------
def test_limit_0_is_named_like_bench(args):
    """It was a KeyError('conversation_id') from an empty per-query frame."""
    refused(args("--limit", "0"), "queries.jsonl", "--limit 0 leaves no question of 4")


def test_an_empty_dataset_is_a_dataset_error(tiny_bench, tmp_path):
    from dataclasses import replace

    folder = write_dataset(replace(tiny_bench, questions=()), tmp_path / "empty")
    with pytest.raises(DatasetError, match="no question with gold evidence"):
        sweep(dataset=str(folder), space=Space.from_dict({"params": {
            "fusion.relevance": {"float": [0.0, 1.0]}}}), preset="reverie", trials=1,
            out_dir=tmp_path / "o", progress=False,
            overrides={"embedding.backend": "hashing", "bench.cache_dir": str(tmp_path / "c")})


# -- item 1: a grid over grid_max is refused before it is built ------------------------------------
def wide_space(keys: int, points: int = 3) -> Space:
    """``keys`` float keys of the config (score or candidate stage), each over a range inside
    its field's, ``points`` grid values each."""
    params = {}
    for r in describe():
        if len(params) == keys:
            break
        if r["stage"] == "runtime" or r["type"] != "float":
            continue
        for rng in ([0.0, 1.0], [0.1, 0.9]):
            try:
                Space.from_dict({"params": {r["key"]: {"float": rng}}})
            except ConfigError:
                continue
            params[r["key"]] = {"float": rng}
            break
    assert len(params) == keys
    return Space.from_dict({"params": params, "grid_points": points}, name=f"wide{keys}")


def test_a_grid_of_3_to_the_60_is_refused_with_its_size_and_counted_without_overflow():
    """60 float keys of 3 values: 3^60 points. Optuna's GridSampler built the whole product
    (MemoryError after 23 s under a 6 GB cap); numpy.prod wrapped around int64 at 3^40."""
    space = wide_space(60)
    assert space.grid_size() == 3 ** 60                       # exact, a Python int
    assert wide_space(41).grid_size() == 3 ** 41
    assert int(np.prod([3] * 41)) != 3 ** 41                  # what the old count gave
    with pytest.raises(ConfigError) as err:
        space.check_grid()
    msg = str(err.value)
    assert "about 4.2e28 points" in msg and f"grid_max = {GRID_MAX:,}" in msg
    assert "60 keys" in msg and "--sampler random" in msg


def test_a_grid_over_grid_max_stops_the_sweep_before_anything_runs(args, tmp_path):
    """11 keys of 3 values: 177,147 points > 100,000. Before, the grid was built and swept."""
    space = wide_space(11)
    path = tmp_path / "wide.yaml"
    import yaml

    path.write_text(yaml.safe_dump({"params": {p.key: {"float": [p.low, p.high]}
                                               for p in space.params}}), encoding="utf-8")
    refused(args("--sampler", "grid", space_file=path), "177,147 points", "grid_max = 100,000")
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.journal"))
    # the same space with a raised grid_max is a grid like any other (its size checked, not run)
    raised = Space.from_dict({"params": {p.key: {"float": [p.low, p.high]} for p in space.params},
                              "grid_max": 200_000})
    assert raised.check_grid() == 3 ** 11


@pytest.mark.parametrize("extra,rule", [
    ({"grid_max": 0}, "grid_max"), ({"grid_max": True}, "grid_max"),
    ({"grid_max": 10, "grid_points": 11}, "grid_points"),
])
def test_grid_max_and_grid_points_are_validated(extra, rule):
    with pytest.raises(ConfigError, match=rule):
        Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 1.0]}}, **extra})


# -- item 12: a study is bound to its sampler and seed ---------------------------------------------
@pytest.fixture
def small_sweep(tiny_bench_folder, tmp_path, cache_dir):
    hashing = {"embedding.backend": "hashing", "recall.floor_mode": "absolute",
               "recall.relevance_floor": 0.0, "bench.cache_dir": str(cache_dir)}
    space = Space.from_dict({"params": {"fusion.relevance": {"float": [0.0, 1.0]}}}, name="one")

    def go(cache: Path = cache_dir, **kw):
        base = dict(dataset=str(tiny_bench_folder), preset="reverie", space=space, trials=2,
                    overrides={**hashing, "bench.cache_dir": str(cache)}, out_dir=tmp_path,
                    study="s", progress=False, sampler="random", seed=1)
        return sweep(**{**base, **kw})
    go.journal = tmp_path / "s.journal"
    return go


def _trials(journal: Path) -> list:
    import optuna

    study = optuna.load_study(study_name="s", storage=open_storage(journal))
    return [(t.number, t.state.name, t.params, t.values) for t in study.trials]


def test_another_sampler_or_seed_on_an_existing_study_is_refused_before_the_replay(
        small_sweep, counting_embedder, tmp_path):
    """The README says a rerun with other settings is refused; sampler and seed were not
    recorded, so another --sampler or --seed continued the study with other draws. The refusal
    comes before the replay: nothing embedded, no feature cache written (a fresh cache folder;
    the cache folder does not bind a study)."""
    small_sweep()
    before = _trials(small_sweep.journal)
    fresh = tmp_path / "fresh-cache"
    for change, key, have in [({"sampler": "tpe"}, "sampler", "'random'"),
                              ({"sampler": "auto"}, "sampler", "'random'"),
                              ({"seed": 2}, "seed", "1")]:
        with pytest.raises(ConfigError, match=f"made with {key} = {have}"):
            small_sweep(trials=4, cache=fresh, embedder=counting_embedder, **change)
        assert _trials(small_sweep.journal) == before      # no trial added
    assert counting_embedder.documents == counting_embedder.queries == []
    assert not fresh.exists()
    assert len(small_sweep(trials=3).study.trials) == 3    # the same settings continue it


def test_auto_is_recorded_as_the_sampler_it_stands_for(small_sweep):
    small_sweep(sampler="auto")
    small_sweep(sampler="tpe", trials=3)                   # auto is tpe for one objective
    with pytest.raises(ConfigError, match="made with sampler = 'tpe'"):
        small_sweep(sampler="random", trials=4)


def test_a_study_made_before_sampler_and_seed_were_recorded_records_them(small_sweep):
    import optuna

    small_sweep()
    study = optuna.load_study(study_name="s", storage=open_storage(small_sweep.journal))
    old = {k: v for k, v in study.user_attrs[SETTINGS_ATTR].items() if k not in ("sampler",
                                                                                 "seed")}
    study.set_user_attr(SETTINGS_ATTR, old)                # as an older memlab left it
    assert len(small_sweep(trials=3).study.trials) == 3
    again = optuna.load_study(study_name="s", storage=open_storage(small_sweep.journal))
    assert again.user_attrs[SETTINGS_ATTR] == {**old, "sampler": "random", "seed": 1}
    with pytest.raises(ConfigError, match="made with seed = 1"):
        small_sweep(seed=2, trials=4)


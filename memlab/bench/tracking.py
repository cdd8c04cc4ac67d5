"""MLflow tracking for benchmark runs: one run, logged in as few batched calls as MLflow allows.

Tracking URI. MLflow 3 refuses the file-system store (``./mlruns``, ``file:...``) unless
``MLFLOW_ALLOW_FILE_STORE=true`` is set (3.17: "maintenance mode"), so memlab's default is an
embedded SQLite database, ``sqlite:///<workdir>/mlflow.db`` with an absolute path; a tracking
server (``http(s)://``) or a database URL (``postgresql://``, ``mysql://``, ``mssql://``) is passed
through. Creating a new SQLite database runs MLflow's migrations once (seconds).

Names. MLflow keys (params, metrics, tags) may hold only word characters, ``.``, ``-``, ``/``
and spaces (``:`` too, but not on Windows), at most 250 characters, and must not look like a path
that normalises elsewhere (``a//b``, ``./a``). :func:`mlflow_key` maps a name deterministically:
``@`` becomes ``_at_`` (``recall@10`` -> ``recall_at_10``, ``recall@10/temporal`` ->
``recall_at_10/temporal``) and any other character outside that set becomes ``_`` (``:`` included,
so keys are the same on every platform). Two names that map to the same key are an error.

Limits. One ``log_batch`` request holds at most 100 params, 100 tags and 1000 entities in all;
param values at most 6000 characters, tag values 8000. Params longer than the limit are truncated
with a visible suffix and listed in the tag ``memlab.params_truncated`` (the full configuration
travels as the config YAML artifact); a tag value over its limit is an error.

Quiet. MLflow's own telemetry is opted out (``MLFLOW_DISABLE_TELEMETRY=true``, set only when the
user has not set it; ``DO_NOT_TRACK=true`` is honoured by MLflow as well) unless
``telemetry=True``; MLflow's INFO logs (database migrations) are held back to WARNING while a call
runs. The client API used here prints no run URLs.
"""

from __future__ import annotations

import contextlib
import importlib.util
import hashlib
import json
import logging
import math
import os
import posixpath
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from memlab.bench.environment import git_commit, memlab_version  # noqa: F401 (public here too)
from memlab.errors import InvalidInput

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

__all__ = [
    "MAX_ENTITIES_PER_BATCH",
    "MAX_KEY_LENGTH",
    "MAX_PARAMS_TAGS_PER_BATCH",
    "MAX_PARAM_VALUE_LENGTH",
    "MAX_TAG_VALUE_LENGTH",
    "dataset_tags",
    "find_run",
    "git_commit",
    "log_run",
    "memlab_version",
    "metrics_from_aggregate",
    "mlflow_key",
    "plan_batches",
    "provenance_tags",
    "resolve_tracking_uri",
    "run_key",
    "source_digest",
]

# MLflow's limits (mlflow.utils.validation; a test checks they still agree).
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_ENTITIES_PER_BATCH = 1000
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_KEY_LENGTH = 250

TRUNCATED_TAG = "memlab.params_truncated"
#: the tag holding a run's stable key (:func:`run_key`): a rerun of the same run finds it
RUN_KEY_TAG = "memlab.run_key"
PARENT_TAG = "mlflow.parentRunId"
GIT_COMMIT_TAG = "mlflow.source.git.commit"

_SERVER_SCHEMES = ("http", "https", "postgresql", "mysql", "mssql", "databricks")
_DISALLOWED = re.compile(r"[^\w./\- ]")


# --------------------------------------------------------------------------- names and values
def mlflow_key(name: str, *, field: str = "key") -> str:
    """MLflow-safe key for ``name``: ``@`` -> ``_at_``, other disallowed characters -> ``_``."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(field, "must be a non-empty string", name)
    key = _DISALLOWED.sub("_", name.replace("@", "_at_"))
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(field, f"MLflow keys are at most {MAX_KEY_LENGTH} characters", name)
    norm = posixpath.normpath(key)
    if norm != key or norm == "." or norm.startswith(".."):
        raise InvalidInput(field, "MLflow keys must not read as a path that normalises elsewhere "
                           "(no '//', './', '..', leading or trailing '/')", name)
    return key


def _keys(names: Mapping[str, Any], *, field: str) -> dict[str, str]:
    """name -> key, refusing two names that land on one key."""
    seen: dict[str, str] = {}
    out: dict[str, str] = {}
    for name in names:
        key = mlflow_key(name, field=f"{field}[{name!r}]")
        if key in seen:
            raise InvalidInput(field, f"{seen[key]!r} and {name!r} both map to MLflow key "
                               f"{key!r}", name)
        seen[key] = name
        out[name] = key
    return out


def _param_text(value: Any) -> str:
    """Params are strings: scalars by ``str``, containers as sorted JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return json.dumps(items, sort_keys=True, ensure_ascii=False, default=str)
    return str(value)


def _metric_value(name: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"metrics[{name!r}]", "must be a real number", value) from None


def metrics_from_aggregate(aggregate: pd.DataFrame, *, overall_label: str = "all",
                           separator: str = "/") -> dict[str, float]:
    """Flatten an aggregate frame (``metrics.aggregate``) into metric names.

    The overall row gives ``"recall@10"``; a category row gives ``"recall@10/<category>"``; the
    count column ``n`` becomes ``"n"`` and ``"n/<category>"``. Names still hold ``@``:
    :func:`log_run` maps them with :func:`mlflow_key`.
    """
    out: dict[str, float] = {}
    for cat, row in aggregate.iterrows():
        suffix = "" if cat == overall_label else f"{separator}{cat}"
        for column, value in row.items():
            out[f"{column}{suffix}"] = float(value)
    return out


# --------------------------------------------------------------------------- batching
@dataclass
class Batch:
    """One ``log_batch`` request's worth of (key, value) pairs."""

    params: list[tuple[str, str]] = field(default_factory=list)
    tags: list[tuple[str, str]] = field(default_factory=list)
    metrics: list[tuple[str, float]] = field(default_factory=list)
    size: int = 0  # approximate request bytes

    def __len__(self) -> int:
        return len(self.params) + len(self.tags) + len(self.metrics)


def plan_batches(*, params: list[tuple[str, str]], tags: list[tuple[str, str]],
                 metrics: list[tuple[str, float]],
                 max_params_tags: int = MAX_PARAMS_TAGS_PER_BATCH,
                 max_entities: int = MAX_ENTITIES_PER_BATCH,
                 max_bytes: int = 900_000) -> list[Batch]:
    """Split entities into the fewest requests within MLflow's limits.

    Greedy: each request takes up to ``max_params_tags`` params and as many tags, then fills the
    rest up to ``max_entities`` with metrics, closing early before ``max_bytes`` (an estimate
    of the JSON body; a tracking server refuses bodies over 1 MB). Without the byte limit this
    reaches the lower bound ``max(ceil(P/100), ceil(T/100), ceil((P+T+M)/1000))``.
    """
    def cost(key: str, value: Any) -> int:
        return len(key.encode()) + len(str(value).encode()) + 64

    queues = {"params": list(params), "tags": list(tags), "metrics": list(metrics)}
    caps = {"params": max_params_tags, "tags": max_params_tags, "metrics": max_entities}
    batches: list[Batch] = []
    while any(queues.values()):
        batch = Batch()
        for kind in ("params", "tags", "metrics"):
            queue, bucket = queues[kind], getattr(batch, kind)
            while (queue and len(bucket) < caps[kind] and len(batch) < max_entities
                   and (len(batch) == 0 or batch.size + cost(*queue[0]) <= max_bytes)):
                item = queue.pop(0)
                batch.size += cost(*item)
                bucket.append(item)
        batches.append(batch)
    return batches


# --------------------------------------------------------------------------- URIs and quiet
def resolve_tracking_uri(uri: str | None, *, workdir: Path, home: Path | None = None) -> str:
    """The tracking URI to use: ``uri`` checked, or ``sqlite:///<home>/mlflow.db`` (``home``:
    the memlab home's root, :mod:`memlab.home`; None: ``workdir``).

    A relative SQLite path is made absolute against ``workdir``. A file-system store
    (a bare path or ``file:``) is refused: MLflow 3 no longer accepts one by default.
    """
    workdir = Path(workdir).expanduser().resolve()
    if uri is None:
        return f"sqlite:///{(Path(home).expanduser().resolve() if home else workdir) / 'mlflow.db'}"
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower() if "://" in uri else ""
    if scheme == "sqlite":
        db = uri.split("://", 1)[1]
        if not db.startswith("/"):
            raise InvalidInput("tracking_uri", "a SQLite URI needs sqlite:///<path> (three "
                               "slashes)", uri)
        path = Path(db[1:])  # sqlite:///rel.db -> rel.db; sqlite:////abs.db -> /abs.db
        path = path if path.is_absolute() else workdir / path
        return f"sqlite:///{path}"
    if scheme in _SERVER_SCHEMES:
        return uri
    raise InvalidInput("tracking_uri", "use sqlite:///<path>.db, a tracking server URL or a "
                       "database URL; MLflow 3 refuses file-system stores such as ./mlruns", uri)


@contextlib.contextmanager
def _quiet(enabled: bool) -> Iterator[None]:
    """Hold MLflow's and alembic's INFO logs back to WARNING for the duration. mlflow is
    imported first: its import sets its loggers' levels, which would undo these (a new SQLite
    store then said "Creating initial MLflow database tables" on stderr)."""
    if enabled and importlib.util.find_spec("mlflow") is not None:
        import mlflow  # noqa: F401
    loggers = [logging.getLogger(n) for n in ("mlflow", "alembic")] if enabled else []
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for lg, level in zip(loggers, before):
            lg.setLevel(level)


def _client(tracking_uri: str, *, telemetry: bool) -> MlflowClient:
    if not telemetry:
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        import mlflow.telemetry
        from mlflow.tracking import MlflowClient
    except ImportError as err:
        raise ImportError("memlab's tracking needs mlflow: pip install 'mlflow>=3.1,<4'") from err
    if not telemetry and mlflow.telemetry.get_telemetry_client() is not None:
        mlflow.telemetry.set_telemetry_client()  # re-reads the opt-out; drops the client
    return MlflowClient(tracking_uri=tracking_uri)


def _experiment_id(client: MlflowClient, name: str, *, artifact_location: str | None) -> str:
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is None:
        try:
            return client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException as err:  # another process created it first
            if err.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            exp = client.get_experiment_by_name(name)
    if exp is None or exp.lifecycle_stage != "active":
        raise InvalidInput("experiment", "is deleted in this tracking store; restore it or "
                           "choose another name", name)
    return exp.experiment_id


def _default_artifact_location(tracking_uri: str, experiment: str) -> str | None:
    """Next to a SQLite database: ``<db folder>/mlartifacts/<experiment>``; servers decide."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    db = Path(tracking_uri[len("sqlite:///"):])
    return (db.parent / "mlartifacts" / mlflow_key(experiment, field="experiment")).as_uri()


def _stage_artifacts(artifacts: Mapping[str, Path], into: Path) -> None:
    for name, source in artifacts.items():
        dest = into / name
        if source.is_dir():
            shutil.copytree(source, dest, dirs_exist_ok=False)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)


def _check_artifacts(artifacts: Mapping[str, Path]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for name, source in artifacts.items():
        norm = posixpath.normpath(name) if isinstance(name, str) else ""
        if not norm or norm != name or norm.startswith(("..", "/")) or norm == ".":
            raise InvalidInput(f"artifacts[{name!r}]", "the name is the file's relative path in "
                               "the run (e.g. 'plots/recall.png'): no '..', no leading '/'", name)
        path = Path(source)
        if not path.exists():
            raise InvalidInput(f"artifacts[{name!r}]", "file does not exist", str(path))
        out[name] = path
    return out


# --------------------------------------------------------------------------- the run
def log_run(*, experiment: str, run_name: str, params: Mapping[str, Any],
            metrics: Mapping[str, float], tags: Mapping[str, str],
            artifacts: Mapping[str, Path], tracking_uri: str, parent_run_id: str | None = None,
            artifact_location: str | None = None, max_param_length: int = MAX_PARAM_VALUE_LENGTH,
            quiet: bool = True, telemetry: bool = False, start_time: float | None = None,
            end_time: float | None = None, run_key: str | None = None) -> str:
    """Log one finished run and return its id.

    Everything is validated before the run is created, so bad input leaves the store unchanged.
    Tags, params and metrics go out in :func:`plan_batches` requests (one for a typical run:
    up to 100 params); artifacts are staged into one folder and uploaded in one call.

    Args:
        experiment: experiment name; created when missing.
        run_name: the run's display name.
        params: flat configuration (``{"fusion.relevance": 0.62, ...}``); values become strings
            (containers as sorted JSON); longer than ``max_param_length`` -> truncated, listed
            in the tag ``memlab.params_truncated``.
        metrics: name -> number; names mapped by :func:`mlflow_key` (``recall@10`` ->
            ``recall_at_10``).
        tags: name -> string (see :func:`dataset_tags`, :func:`provenance_tags`).
        artifacts: path inside the run (``"config.yaml"``, ``"plots/recall.png"``) -> local file
            or folder.
        tracking_uri: see :func:`resolve_tracking_uri`.
        parent_run_id: nest this run under a parent (sweeps).
        artifact_location: where a *new* experiment stores artifacts; default: next to a SQLite
            database (``<db folder>/mlartifacts/<experiment>``), the server's choice otherwise.
        max_param_length: MLflow's param value limit (6000).
        quiet: hold MLflow's INFO logs back while logging.
        telemetry: leave MLflow's usage telemetry on (default: opted out).
        start_time, end_time: when the run itself started and ended (unix seconds): MLflow's
            start and end time, so its duration is the run's, not the logging's (default: the
            logging's; the metrics are stamped with ``end_time``).
        run_key: the run's stable key (:func:`run_key`), logged as the tag ``memlab.run_key``;
            :func:`find_run` finds a run by it.

    On an error while logging, the run is marked FAILED and the error propagates.
    """
    if not experiment:
        raise InvalidInput("experiment", "must be a non-empty name", experiment)
    param_keys = _keys(params, field="params")
    metric_keys = _keys(metrics, field="metrics")
    tag_keys = _keys(tags, field="tags")
    checked_artifacts = _check_artifacts(artifacts)

    truncated: list[str] = []
    param_items: list[tuple[str, str]] = []
    for name, value in params.items():
        text = _param_text(value)
        if len(text) > max_param_length:
            marker = f"...[truncated {len(text)} chars]"
            text = text[: max_param_length - len(marker)] + marker
            truncated.append(param_keys[name])
        param_items.append((param_keys[name], text))
    tag_items = [(tag_keys[n], str(v)) for n, v in tags.items()]
    if run_key is not None:
        tag_items.append((RUN_KEY_TAG, str(run_key)))
    if truncated:
        tag_items.append((TRUNCATED_TAG, ",".join(truncated)[:MAX_TAG_VALUE_LENGTH]))
    for key, value in tag_items:
        if len(value) > MAX_TAG_VALUE_LENGTH:
            raise InvalidInput(f"tags[{key!r}]", f"MLflow tag values are at most "
                               f"{MAX_TAG_VALUE_LENGTH} characters", value)
    metric_items = [(metric_keys[n], _metric_value(n, v)) for n, v in metrics.items()]
    start_ms, end_ms = _millis(start_time, "start_time"), _millis(end_time, "end_time")
    if start_ms is not None and end_ms is not None and end_ms < start_ms:
        raise InvalidInput("end_time", f"must not be before start_time ({start_time})", end_time)
    batches = plan_batches(params=param_items, tags=tag_items, metrics=metric_items)

    with _quiet(quiet):
        client = _client(tracking_uri, telemetry=telemetry)
        from mlflow.entities import Metric, Param, RunTag

        location = artifact_location or _default_artifact_location(tracking_uri, experiment)
        exp_id = _experiment_id(client, experiment, artifact_location=location)
        run_tags = {PARENT_TAG: parent_run_id} if parent_run_id else None
        run = client.create_run(exp_id, run_name=run_name, tags=run_tags, start_time=start_ms)
        run_id = run.info.run_id
        try:
            stamp = end_ms if end_ms is not None else int(time.time() * 1000)
            for batch in batches:
                client.log_batch(
                    run_id,
                    metrics=[Metric(k, v, stamp, 0) for k, v in batch.metrics],
                    params=[Param(k, v) for k, v in batch.params],
                    tags=[RunTag(k, v) for k, v in batch.tags],
                )
            if checked_artifacts:
                with tempfile.TemporaryDirectory(prefix="memlab-artifacts-") as tmp:
                    _stage_artifacts(checked_artifacts, Path(tmp))
                    client.log_artifacts(run_id, tmp)
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
        client.set_terminated(run_id, status="FINISHED", end_time=end_ms)
    return run_id


def _millis(t: float | None, name: str) -> int | None:
    """Unix seconds -> MLflow's milliseconds; None stays None."""
    if t is None:
        return None
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
        raise InvalidInput(name, "must be a time in unix seconds (a finite number >= 0)", t)
    return int(round(t * 1000))


# --------------------------------------------------------------------------- reruns
#: memlab's files whose change can change a result: its source and its data files
_SOURCE_SUFFIXES = (".py", ".txt", ".npz", ".json", ".yaml")


def source_digest(root: Path | None = None) -> str:
    """sha256 (24 hex digits) of memlab's source and data files (every ``.py``, ``.txt``,
    ``.npz``, ``.json`` and ``.yaml`` under the package, by relative path): the code part of a
    run's key. An edit anywhere in memlab gives new keys (a conservative superset of what a run
    executes; the feature cache's narrower digest is :func:`memlab.bench.featcache.code_digest`)."""
    root = Path(__file__).resolve().parents[1] if root is None else Path(root)
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES
                       and "__pycache__" not in p.parts and p.is_file()):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:24]


def run_key(*parts: Any) -> str:
    """A stable key of a run from what decides its results (config, data, code, ...): the
    sha256 of their canonical JSON, 24 hex digits. Equal parts give equal keys in every process
    and on every machine."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:24]


def find_run(*, tracking_uri: str, experiment: str, key: str,
             parent_run_id: str | None = None, telemetry: bool = False) -> str | None:
    """The id of a finished, not deleted run of ``experiment`` tagged ``memlab.run_key = key``
    (under ``parent_run_id`` when given), the latest if several; None when there is none (no
    experiment of that name included). A failed or killed run does not count: it is logged
    again."""
    if not experiment:
        raise InvalidInput("experiment", "must be a non-empty name", experiment)
    if not isinstance(key, str) or not re.fullmatch(r"[0-9a-f]{8,64}", key):
        raise InvalidInput("key", "a run key is 8 to 64 lowercase hex digits (run_key)", key)
    with _quiet(True):
        client = _client(tracking_uri, telemetry=telemetry)
        exp = client.get_experiment_by_name(experiment)
        if exp is None or exp.lifecycle_stage != "active":
            return None
        where = f"tags.`{RUN_KEY_TAG}` = '{key}' and attributes.status = 'FINISHED'"
        if parent_run_id is not None:
            where += f" and tags.`{PARENT_TAG}` = '{parent_run_id}'"
        runs = client.search_runs([exp.experiment_id], filter_string=where, max_results=1,
                                  order_by=["attributes.start_time DESC"])
    return runs[0].info.run_id if runs else None


# --------------------------------------------------------------------------- provenance
def dataset_tags(*, name: str, version: str, content_hash: str) -> dict[str, str]:
    """Tags that identify the dataset a run used."""
    return {"memlab.dataset.name": name, "memlab.dataset.version": str(version),
            "memlab.dataset.hash": content_hash}


def provenance_tags(*, repo_dir: Path | None = None) -> dict[str, str]:
    """``memlab.version`` and MLflow's ``mlflow.source.git.commit``, where they are known."""
    out: dict[str, str] = {}
    version = memlab_version()
    if version is not None:
        out["memlab.version"] = version
    commit = git_commit(repo_dir) if repo_dir is not None else None
    if commit is not None:
        out[GIT_COMMIT_TAG] = commit
    return out

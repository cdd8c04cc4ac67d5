"""memlab's own errors.

Every message names what was wrong (the field, file or line), the rule that was broken and the
value that broke it, so that a user can fix the input without reading the source.
"""

from __future__ import annotations

from typing import Any

#: The longest text shown whole in an InvalidInput message (longer: cut, with "...").
SHOWN_MAX = 80


def shown(value: Any, *, cut: int | None = None) -> str:
    """``repr(value)`` for a message: a string longer than ``cut`` cut inside its quotes; an
    integer too long for Python to print (over 4,300 digits) by its size; a value whose repr
    fails by its type. Never raises."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4_000:
        return f"<an integer of {value.bit_length():,} bits>"
    if isinstance(value, str) and cut is not None and len(value) > cut:
        value = value[:cut - 3] + "..."
    try:
        return repr(value)
    except (ValueError, RecursionError) as exc:   # a value whose repr itself fails
        return f"<{type(value).__name__}: unprintable ({type(exc).__name__})>"


class MemlabError(Exception):
    """Base class of every error memlab raises on purpose.

    Picklable with its fields (a worker process's or a Dask worker's error reaches the caller as
    the same class, message and attributes; Python's default would call ``__init__`` with the
    message alone, which most subclasses refuse)."""

    def __reduce__(self):
        return _restore, (type(self), self.args, dict(self.__dict__))


def _restore(cls: type, args: tuple, state: dict) -> MemlabError:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class ConfigError(MemlabError, ValueError):
    """A configuration key is unknown or its value breaks the field's rule."""

    def __init__(self, key: str, rule: str, value: Any = None) -> None:
        self.key, self.rule, self.value = key, rule, value
        super().__init__(f"config {key!r}: {rule} (got {shown(value)})")


class InvalidInput(MemlabError, ValueError):
    """A value handed to a public function breaks a rule (empty text, NaN importance, ...)."""

    def __init__(self, field: str, rule: str, value: Any = None) -> None:
        self.field, self.rule, self.value = field, rule, value
        super().__init__(f"{field}: {rule} (got {shown(value, cut=SHOWN_MAX)})")


class UnsafeWrite(InvalidInput):
    """A write refused because a field reads as an attempt to hijack the assistant's identity or
    instructions (Reverie §10, §12: ``identity_attack_flags``), matched after normalisation
    (:mod:`memlab.safety`). Names the field, the safety rule and the pattern that matched, and an
    excerpt of the normalised text around the match. Nothing of the write is stored; the refusal
    itself is recorded as a ``memory_audit`` row.

    ``safety_rule``: the rule's name (``ignore_instructions``, ``identity_override``, ...);
    ``pattern``: the configured pattern that matched; ``excerpt``: the normalised text around the
    match; ``agent_id``/``user_id``: the owner of the refused write (None when unknown).
    """

    def __init__(self, field: str, safety_rule: str, pattern: str, excerpt: str, *,
                 agent_id: str | None = None, user_id: str | None = None) -> None:
        self.safety_rule, self.pattern, self.excerpt = safety_rule, pattern, excerpt
        self.agent_id, self.user_id = agent_id, user_id
        super().__init__(field, f"refused: reads as an attempt to hijack the assistant's identity "
                         f"or instructions (safety rule {safety_rule!r}, pattern {pattern!r})",
                         excerpt)


class InvalidCell(InvalidInput):
    """A (scope, category) pair outside Familiars' VALID_CELLS."""


class PinLimitExceeded(InvalidInput):
    """Pinning would give an owner more than ``governance.pins_max`` pinned memories (§11.3)."""

    def __init__(self, memory_id: str, *, agent_id: str, user_id: str, cap: int,
                 count: int) -> None:
        self.agent_id, self.user_id, self.cap, self.count = agent_id, user_id, cap, count
        super().__init__("pin", f"agent_id={agent_id!r}, user_id={user_id!r} would have {count} "
                         f"pinned memories, more than governance.pins_max = {cap}: unpin one "
                         f"first (nothing was changed)", memory_id)


class StoreError(MemlabError):
    """The store cannot be opened or written (corrupt file, foreign schema, lock timeout).

    ``path``: the store file, when known (every message names it too).
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class CorruptStore(StoreError):
    """The database file is not a readable SQLite database or fails its integrity check."""


class ReadOnlyStore(StoreError):
    """SQLite could not write: the file, its folder or its -wal/-shm files are read-only, or the
    store was opened read-only. Nothing was written."""


class StoreLocked(StoreError):
    """Another connection held the store's write lock longer than ``store.busy_timeout_ms``."""


class StoreInconsistent(StoreError):
    """Two parts of the store disagree (an in-process index or the vector cache out of step with
    ``memory_records``, e.g. a rowid one holds and the other lacks). An internal fault, never the
    caller's input: recall reloads its in-process indexes and reads again; a vector cache that
    still disagrees is rebuilt from the truth (``MemoryStore.rebuild_vectors()``)."""


class EmbeddingUnavailable(MemlabError):
    """The embedder cannot load or cannot embed; recall degrades to lexical, never to fake vectors."""


class LLMError(MemlabError):
    """A language model could not answer: the server refused (status and body named), did not
    answer within the timeout, or sent something that is not a chat completion. Nothing is
    retried: the caller decides (the LLM gate falls back to the rule gate, logged and counted).

    ``url``: the endpoint; ``status``: the HTTP status when there was one."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        self.url, self.status = url, status
        super().__init__(message)


class DatasetError(MemlabError, ValueError):
    """A dataset file is malformed. Names the file, the line (1-based, when known) and the field."""

    def __init__(self, file: str, rule: str, *, line: int | None = None, field: str | None = None,
                 value: Any = None) -> None:
        self.file, self.line, self.field, self.rule, self.value = file, line, field, rule, value
        where = str(file) + (f":{line}" if line is not None else "")
        what = f" field {field!r}" if field else ""
        got = f" (got {value!r})" if value is not None else ""
        super().__init__(f"{where}:{what} {rule}{got}")


class CardError(MemlabError, ValueError):
    """A character card file (memlab.write.card) is malformed. Names the file, the field and the
    rule; nothing is written."""

    def __init__(self, file: str, field: str, rule: str, value: Any = None) -> None:
        self.file, self.field, self.rule, self.value = file, field, rule, value
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        got = f" (got {shown!r})" if value is not None else ""
        super().__init__(f"{file}: field {field!r}: {rule}{got}")


class VRAMError(MemlabError):
    """The VRAM gate cannot satisfy a request (larger than the device, nothing evictable)."""


class JobError(MemlabError):
    """A fold job cannot be queued or run: an unknown kind, a kind whose machinery memlab does not
    have yet (``JobKind.unavailable``) or cannot use here (``consolidate`` with the LLM synthesis
    in a worker), an owner given by half (a payload that breaks a kind's rules is
    :class:`InvalidInput`, naming the payload key)."""


class LeaseLost(JobError):
    """A worker's lease of a job is no longer its own (it expired and another worker took the job,
    or the job is finished): the worker's result is discarded, nothing it would write is written."""


class DeviceUnavailable(VRAMError):
    """A device probe cannot answer: no NVIDIA driver or library, no device at that index, a CPU
    build of torch, or the probe's package is not installed. Names the probe (``nvml``,
    ``torch.cuda``) and the reason (the NVML or torch error as it came).

    ``probe``: the probe's name; ``reason``: what failed."""

    def __init__(self, probe: str, reason: str) -> None:
        self.probe, self.reason = probe, reason
        super().__init__(f"{probe}: {reason}")


class WorkspaceError(MemlabError, ValueError):
    """A file of a Familiars markdown workspace (:mod:`memlab.workspace`) is malformed or cannot be
    written: names the file, the 1-based line (when known), the header key and the rule. The file
    contributes nothing to an import; the store is unchanged by it."""

    def __init__(self, file: str, rule: str, *, line: int | None = None, key: str | None = None,
                 value: Any = None) -> None:
        self.file, self.line, self.key, self.rule, self.value = file, line, key, rule, value
        where = str(file) + (f":{line}" if line is not None else "")
        what = f" key {key!r}:" if key else ""
        shown = value if not isinstance(value, str) or len(value) <= 80 else value[:77] + "..."
        got = f" (got {shown!r})" if value is not None else ""
        super().__init__(f"{where}:{what} {rule}{got}")


class ReplayError(MemlabError):
    """A replay in worker processes or on a Dask cluster (:mod:`memlab.bench.parallel`) cannot
    run or finish: the optional extra it needs is not installed, or the cluster cannot be
    reached."""


class ReplayWorkerLost(ReplayError):
    """A replay worker (a process of ``--n-jobs``, or a Dask worker) died while replaying
    (killed, out of memory, crashed). The conversations that finished are kept on disk beside
    the feature cache entry; a rerun replays only the others.

    ``dataset``: its name; ``kept``: conversations finished and kept; ``missing``: the
    conversation ids not finished; ``folder``: where the finished ones are (None: the feature
    cache is off, nothing kept)."""

    def __init__(self, dataset: str, *, kept: int, missing: list[str], folder: str | None,
                 cause: str) -> None:
        self.dataset, self.kept, self.missing, self.folder = dataset, kept, missing, folder
        where = (f"kept in {folder}: a rerun replays only the {len(missing)} others" if folder
                 else "not kept (bench.feature_cache is off)")
        shown_ids = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more"
                                              if len(missing) > 5 else "")
        super().__init__(f"replay of dataset {dataset!r}: a worker was lost ({cause}) with "
                         f"{len(missing)} conversation(s) not finished ({shown_ids}); {kept} "
                         f"finished conversation(s) {where}")

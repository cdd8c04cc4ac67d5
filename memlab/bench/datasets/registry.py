"""Datasets by name: what each is, where it comes from, its checksum, and how to load it.

`load` never downloads anything. A name is resolved to a local path in this order: the ``path``
argument; the environment variable ``MEMLAB_DATASETS`` (a folder laid out like ``../shared/datasets``,
read at call time); the folder ``../shared/datasets`` next to the repository, when it exists. A missing
file is a `DatasetError` that names the official download URL and the ``--path`` to pass. A path to a
canonical folder (``card.json``, ``items.jsonl``, ``queries.jsonl``) loads directly.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from memlab.bench.datasets.canonical import CARD_FILE, Dataset, read_dataset
from memlab.bench.datasets.locomo import load_locomo
from memlab.bench.datasets.longmemeval import load_longmemeval
from memlab.bench.datasets.madial import load_madial_en, load_madial_zh
from memlab.bench.datasets.memdaily import load_memdaily
from memlab.errors import DatasetError, InvalidInput

ENV_VAR = "MEMLAB_DATASETS"
REPO_ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset.

    ``sha256`` maps a file (relative to the dataset's path when that is a folder, else its own name) to the
    sha256 of the official file; empty when no unmodified official copy was available to hash.
    ``default_relpath`` is relative to the datasets root (``MEMLAB_DATASETS`` or ``../shared/datasets``),
    or to the repository root when ``bundled`` (the project's own sets under ``datasets/``).
    """

    name: str
    loader: Callable[..., Dataset]
    description: str
    language: str
    license: str
    official_url: str
    sha256: Mapping[str, str] = field(default_factory=dict)
    default_relpath: str = ""
    bundled: bool = False
    options: Mapping[str, str] = field(default_factory=dict)


def _load_canonical(path: str | os.PathLike[str], *, lenient: bool = False, **options: Any) -> Dataset:
    if options:
        raise InvalidInput("options", "a canonical dataset takes no loader options but lenient", sorted(options))
    return read_dataset(path, lenient=lenient)


def _lme(default_name: str) -> Callable[..., Dataset]:
    def loader(path: str | os.PathLike[str], **options: Any) -> Dataset:
        return load_longmemeval(path, **{"name": default_name, **options})
    loader.__doc__ = f"`load_longmemeval` with the card name {default_name!r}."
    return loader


_LENIENT = {"lenient": "drop and report bad records instead of stopping at the first (false)"}
_LME_OPTS = {"granularity": "turn (default) | session", "abstention": "drop (default) | keep",
             "turn_spacing_s": "seconds between turns (1.0)", "tz": "timezone of the dates (UTC)", **_LENIENT}
_LME_URL = "https://huggingface.co/datasets/xiaowu0162/longmemeval-cleaned"

_REGISTRY: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> DatasetSpec:
    """Add ``spec`` to the registry (a name registered twice is an error)."""
    if spec.name in _REGISTRY:
        raise InvalidInput("name", "is already registered", spec.name)
    _REGISTRY[spec.name] = spec
    return spec


for _spec in (
    DatasetSpec("locomo", load_locomo, "LoCoMo: 10 very long two-person chats, 1,986 questions with gold turns; "
                "categories 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial", "en",
                "CC BY-NC 4.0", "https://github.com/snap-research/LoCoMo/blob/main/data/locomo10.json",
                {"locomo10.json": "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4"},
                "locomo/locomo10.json",
                options={"categories": "LoCoMo categories to keep, e.g. [1,2,3,4] (all)",
                         "turn_spacing_s": "seconds between turns (1.0)",
                         "asked_after_s": "questions asked this long after the last turn (60)", **_LENIENT}),
    # The oracle copy in ../shared was reassembled and re-sorted: it is not the official file, so no checksum.
    DatasetSpec("longmemeval-oracle", _lme("longmemeval-oracle"), "LongMemEval oracle: 500 questions, each with "
                "only its evidence sessions; turn-level gold (has_answer)", "en", "MIT", _LME_URL, {},
                "longmemeval/longmemeval_oracle.json", options=_LME_OPTS),
    DatasetSpec("longmemeval-s", _lme("longmemeval-s"), "LongMemEval S: 500 questions, about 50 sessions "
                "(115k tokens) of haystack each", "en", "MIT", _LME_URL, {},
                "longmemeval/longmemeval_s_cleaned.json", options=_LME_OPTS),
    DatasetSpec("longmemeval-m", _lme("longmemeval-m"), "LongMemEval M: 500 questions, about 500 sessions of "
                "haystack each", "en", "MIT", _LME_URL, {}, "longmemeval/longmemeval_m_cleaned.json",
                options=_LME_OPTS),
    DatasetSpec("madial-zh", load_madial_zh, "MADial-Bench (zh): 160 dialogues; the dialogue before the test "
                "turn is the query, gold entries of the user's memory archive", "zh", "MIT",
                "https://github.com/hejunqing/MADial-Bench (data/ch)",
                {"MADial-Bench-zh-dialogue.json": "760e929111c2b2abb4a78f36d96256b0cebe8e4ce1f180371c4404a7c7f81186",
                 "MADial-Bench-zh-memory.json": "a07531f7f3a6265dbb838f8623b7f981cdb5f74206e65c6a276c178ad0bd93df"},
                "madial_bench/zh", options={"context_turns": "turns before the test turn in the query (all)",
                                            **_LENIENT}),
    DatasetSpec("madial-en", load_madial_en, "MADial-Bench (en): 160 dialogues; entry owners come from the zh "
                "folder (zh_path, default the sibling zh folder)", "en", "MIT",
                "https://github.com/hejunqing/MADial-Bench (data/en and data/ch)",
                {"MADial-Bench-en-dialogue.json": "ba987172b4a720dd108c9a3b04855b8489ecde96fdf5d484d6522602ec6f4a31",
                 "MADial-Bench-en-memory.json": "d384b2d35e01ed364165001911af7f8193c808d168b106dea7b23435c7717aa5"},
                "madial_bench/en", options={"zh_path": "the zh folder (sibling zh)",
                                            "context_turns": "turns before the test turn in the query (all)",
                                            **_LENIENT}),
    # The shared copy is a third of the trajectories, not the official set: no checksum.
    DatasetSpec("memdaily", load_memdaily, "MemDaily (MemSim): short user-message streams, one question each; "
                "distractors from a MemoryBank pool with noise/seed", "zh",
                "none stated: research use only, not for redistribution",
                "https://github.com/nuster1128/MemSim (data_generation/final_dataset/messages_and_QAs)", {},
                "memdaily", options={"noise": "distractors per message: 0, 9, 49, 99, 199 (0)",
                                     "seed": "distractor seed (0)",
                                     "pool_path": "MemoryBank folder (<root>/memorybank/cn)", **_LENIENT}),
    # 1.1.0 (unanswerable questions added; items and 1.0.0 questions unchanged): regenerate with
    # `python -m memlab.bench.lifelog --out datasets/memlab-lifelog`, then update these
    DatasetSpec("memlab-lifelog", _load_canonical, "memlab's own labelled lifelog recall set (canonical format, "
                "shipped with the repository)", "mixed", "CC0-1.0 (see its card.json)", "(bundled with memlab)",
                {"card.json": "7f3968c7e7fedf345eff23575255efb3582d964b63d1da99c57fb05aa0fbd989",
                 "items.jsonl": "a3f9cd604dcdf41f09c57416c30f031008afd3ded708bfcbcdd85236fe9df035",
                 "queries.jsonl": "a400f34098442afdd654c144b14a1096fa3699ec1cd852cc98239b8260b50c89"},
                "datasets/memlab-lifelog", bundled=True, options=_LENIENT),
):
    register(_spec)


def list_datasets() -> list[DatasetSpec]:
    """The registered datasets, by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def info(name: str) -> DatasetSpec:
    """The spec of a registered dataset; an unknown name is an `InvalidInput` listing the known ones."""
    if name not in _REGISTRY:
        raise InvalidInput("name", f"is not a registered dataset (known: {', '.join(sorted(_REGISTRY))})", name)
    return _REGISTRY[name]


def datasets_root() -> Path | None:
    """``$MEMLAB_DATASETS`` if set (read now), else ``../shared/datasets`` next to the repository if it exists."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    shared = REPO_ROOT.parent / "shared" / "datasets"
    return shared if shared.is_dir() else None


def resolve_path(name: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Where the files of dataset ``name`` are (see the module doc); a missing file is a `DatasetError`."""
    spec = info(name)
    if path is not None:
        where: Path | None = Path(path)
    elif spec.bundled:
        where = REPO_ROOT / spec.default_relpath
    else:
        root = datasets_root()
        where = root / spec.default_relpath if root is not None else None
    if where is not None and where.exists():
        return where
    shown = str(where) if where is not None else f"(no --path, no ${ENV_VAR}, no ../shared/datasets)"
    if spec.bundled and path is None:
        raise DatasetError(shown, f"dataset {name!r} ships with the repository but its folder is missing")
    raise DatasetError(shown, f"dataset {name!r} not found; nothing is downloaded automatically: get it from "
                       f"{spec.official_url}, then pass --path /path/to/{Path(spec.default_relpath).name} "
                       f"(or set {ENV_VAR} to a folder holding {spec.default_relpath})")


def sha256_of(file: str | os.PathLike[str], *, chunk_bytes: int = 1 << 20) -> str:
    """The sha256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(file, "rb") as fh:
        while chunk := fh.read(chunk_bytes):
            h.update(chunk)
    return h.hexdigest()


def verify(name: str, path: str | os.PathLike[str]) -> dict[str, bool]:
    """Compare the files at ``path`` with the official checksums of ``name``: ``{file: matches}``."""
    spec, where = info(name), Path(path)
    out = {}
    for rel, digest in spec.sha256.items():
        file = where / rel if where.is_dir() else where
        out[rel] = file.is_file() and sha256_of(file) == digest
    return out


def load(name_or_path: str | os.PathLike[str], *, path: str | os.PathLike[str] | None = None,
         check_sha256: bool = False, **options: Any) -> Dataset:
    """Load a dataset by registered name, or a canonical folder by path.

    Args:
        name_or_path: a registered name (see `list_datasets`) or a canonical dataset folder.
        path: for a name, the native file or folder (overrides ``MEMLAB_DATASETS`` and ../shared/datasets).
        check_sha256: compare the files with the official checksums first; a mismatch is a `DatasetError`
            (off by default: a user's modified copy is legitimate, but it is then not the official set).
        **options: the loader's options (see ``info(name).options``).
    """
    key = str(name_or_path)
    if key not in _REGISTRY:
        folder = Path(name_or_path)
        looks_like_path = folder.exists() or isinstance(name_or_path, os.PathLike) or os.sep in key
        if not looks_like_path:
            info(key)  # raises: unknown name, listing the known ones
        if path is not None:
            raise InvalidInput("path", "only applies to a registered name", str(path))
        if not (folder / CARD_FILE).is_file():
            raise DatasetError(key, f"is neither a registered dataset ({', '.join(sorted(_REGISTRY))}) nor a "
                               f"canonical folder holding {CARD_FILE}")
        return _load_canonical(folder, **options)
    where = resolve_path(key, path)
    if check_sha256:
        for rel, ok in verify(key, where).items():
            if not ok:
                raise DatasetError(str(where), f"{rel} does not match the official sha256 "
                                   f"{info(key).sha256[rel]}", field="sha256")
    return _REGISTRY[key].loader(where, **options)

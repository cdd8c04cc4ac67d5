"""The presets a benchmark runs, from what a user names: preset names or YAML paths, one config
(a file or a :class:`~memlab.config.MemlabConfig`), overrides applied to each, and write modes.
``memlab bench`` (``--compare``, ``--config``, ``--set``, ``--mode``) and :func:`memlab.bench`
(``presets=``, ``config=``, ``overrides=``, ``mode=``) build them here, so both run the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from memlab.bench.run import resolve_preset
from memlab.config import MemlabConfig, load_config
from memlab.errors import ConfigError, InvalidInput

__all__ = ["DEFAULT_COMPARE", "build_presets", "split_names", "with_modes"]

#: what the README's comparison runs (``memlab bench --compare``)
DEFAULT_COMPARE = "reverie,cosine,bm25,generative_agents,hybrid_rrf"

Named = tuple[str, MemlabConfig]


def split_names(value: str | Sequence[str] | None, *, field: str) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` -> ``["a", "b"]`` (blanks dropped); None -> ``[]``."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        parts = [p for v in value for p in v.split(",")]
    else:
        raise InvalidInput(field, "a comma-separated string or a list of strings", value)
    return [p.strip() for p in parts if p.strip()]


def _one(value: MemlabConfig | str | Path, overrides: Mapping[str, Any], *, field: str
         ) -> MemlabConfig:
    if isinstance(value, MemlabConfig):
        return value.replace(**dict(overrides)) if overrides else value
    if isinstance(value, (str, Path)):
        return load_config(value, overrides=dict(overrides))
    raise InvalidInput(field, "a MemlabConfig or a YAML path", type(value).__name__)


def build_presets(*, presets: str | Sequence[str] | Mapping[str, Any] | None = None,
                  config: MemlabConfig | str | Path | None = None,
                  overrides: Mapping[str, Any] | None = None,
                  mode: str | Sequence[str] | None = None) -> list[Named]:
    """``[(name, config), ...]`` in the order named.

    ``presets``: preset names or YAML paths (``"reverie,cosine"`` or a list; each resolved by
    :func:`memlab.bench.run.resolve_preset`), or ``{name: MemlabConfig or YAML path}``.
    ``config``: one config instead (a YAML path, named by its stem, or a MemlabConfig, named
    ``config``). Neither: the default config, named ``reverie``. ``overrides``
    (``{"fusion.relevance": 0.5}``) apply to every preset. ``mode``: write modes
    (:func:`with_modes`)."""
    over = dict(overrides or {})
    if presets is not None and config is not None:
        raise InvalidInput("config", "give presets or config, not both", str(config))
    if isinstance(presets, Mapping):
        if not presets:
            raise ConfigError("presets", "at least one preset", {})
        out = [(str(name), _one(cfg, over, field=f"presets[{name!r}]"))
               for name, cfg in presets.items()]
    elif presets is not None:
        names = split_names(presets, field="presets")
        if not names:
            raise ConfigError("presets", "at least one preset", presets)
        out = []
        for name in names:
            pname, ppath = resolve_preset(name)
            out.append((pname, load_config(ppath, overrides=over)))
    elif config is not None:
        name = Path(config).stem if isinstance(config, (str, Path)) else "config"
        out = [(name, _one(config, over, field="config"))]
    else:
        out = [("reverie", load_config(None, overrides=over))]
    if mode is not None:
        out = with_modes(out, split_names(mode, field="mode"))
    return out


def with_modes(presets: list[Named], modes: list[str]) -> list[Named]:
    """Each preset once per write mode (bench.write_mode): one mode keeps the preset's name; with
    several, a mode other than raw is named '<preset>+<mode>'."""
    if not modes or len(set(modes)) != len(modes):
        raise ConfigError("bench.write_mode", "--mode takes raw, writer or raw,writer",
                          ",".join(modes))
    return [(name if len(modes) == 1 or m == "raw" else f"{name}+{m}",
             cfg.replace(**{"bench.write_mode": m}))
            for name, cfg in presets for m in modes]

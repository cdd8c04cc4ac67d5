"""No inert config (issue 9, item 12): every field has behaviour, or it is marked planned.

The fields come from the schema (``memlab.config.describe``). "Has behaviour" is checked statically
over the source of ``memlab/`` (config.py itself left out), on the syntax tree, so comments,
docstrings and error-message strings never count as a read. A field ``section.name`` is read by a
module when the module has

- an attribute chain ``<x>.section.name``, or
- a reference to the section (``<x>.section``, the section's class name, or the string
  ``"section"``) together with an attribute ``.name``, ``getattr(<x>, "name")`` or
  ``getattr(<x>, f"prefix{...}")`` with ``name`` starting with ``prefix``.

A field read only by tests does not count. Planned fields must be unread (mark them planned no
longer once they are read), out of ``to_flat()`` (MLflow params, digest, features key, tuning
spaces), listed by ``memlab config show``, and still accepted in YAML.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlab.bench.featcache import features_key
from memlab.cli import app
from memlab.config import LayersConfig, MemlabConfig, _sections, describe, planned_keys
from memlab.errors import ConfigError
from memlab.tune.space import Space

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
           for p in sorted((ROOT / "memlab").rglob("*.py")) if p.name != "config.py"
           or p.parent.name != "memlab"}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the Constant nodes that are docstrings or bare string statements."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            out.add(id(node.value))
    return out


class _Uses:
    """What one module's syntax tree references: attributes, chains, names, getattr keys."""

    def __init__(self, text: str):
        tree = ast.parse(text)
        docs = _docstrings(tree)
        self.attrs: set[str] = set()
        self.chains: set[tuple[str, str]] = set()
        self.names: set[str] = set()
        self.strings: set[str] = set()
        self.getattr_names: set[str] = set()
        self.getattr_prefixes: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                self.attrs.add(node.attr)
                if isinstance(node.value, ast.Attribute):
                    self.chains.add((node.value.attr, node.attr))
            elif isinstance(node, ast.Name):
                self.names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs:
                self.strings.add(node.value)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "getattr" and len(node.args) >= 2:
                arg = node.args[1]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    self.getattr_names.add(arg.value)
                elif isinstance(arg, ast.JoinedStr) and arg.values \
                        and isinstance(arg.values[0], ast.Constant):
                    self.getattr_prefixes.add(arg.values[0].value)

    def reads(self, section: str, cls: str, name: str) -> bool:
        if (section, name) in self.chains:
            return True
        mentions = (section in self.attrs or cls in self.names or cls in self.attrs
                    or section in self.strings or cls in self.strings)
        return mentions and (name in self.attrs or name in self.getattr_names
                             or any(name.startswith(p) for p in self.getattr_prefixes))


def readers(key: str, sources: dict[str, str]) -> list[str]:
    """The modules of ``sources`` that read the dotted config key."""
    section, _, name = key.partition(".")
    cls = _sections()[section].__name__
    return [path for path, text in sources.items() if _Uses(text).reads(section, cls, name)]


USES = {path: _Uses(text) for path, text in SOURCES.items()}
ALL = describe(include_planned=True)
LIVE = [r["key"] for r in ALL if not r["planned"]]
PLANNED = [r["key"] for r in ALL if r["planned"]]


def _readers(key: str) -> list[str]:
    section, _, name = key.partition(".")
    cls = _sections()[section].__name__
    return [p for p, u in USES.items() if u.reads(section, cls, name)]


@pytest.fixture
def cli():
    runner = CliRunner()
    return lambda *args: runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def test_sources_are_the_package():
    assert "memlab/api.py" in SOURCES and "memlab/config.py" not in SOURCES
    assert len(SOURCES) > 50


@pytest.mark.parametrize("key", LIVE)
def test_every_field_with_behaviour_is_read_by_memlab(key):
    assert _readers(key), (f"{key}: no module of memlab/ reads it; give it behaviour or mark it "
                           "planned=\"issue N\" in memlab/config.py")


def test_the_check_fails_when_a_reader_goes():
    """Remove the one read of forgetting.decay_lambda (``.decay_lambda`` in forgetting.py) and
    the field has no reader; comments, docstrings and messages naming it do not count."""
    key = "forgetting.decay_lambda"
    assert readers(key, SOURCES) == ["memlab/forgetting.py"]
    broken = dict(SOURCES)
    broken["memlab/forgetting.py"] = re.sub(r"\.decay_lambda\b", ".other_name",
                                            SOURCES["memlab/forgetting.py"])
    assert readers(key, broken) == []
    prose = ('"""Reads cfg.forgetting.decay_lambda."""\n'
             '# cfg.forgetting.decay_lambda\n'
             'def f(cfg):\n'
             '    """cfg.forgetting.decay_lambda"""\n'
             '    raise ValueError("forgetting.decay_lambda is bad")\n')
    assert readers(key, {"prose.py": prose}) == []
    assert readers(key, {"code.py": "def f(cfg):\n    return cfg.forgetting.decay_lambda\n"}) \
        == ["code.py"]
    # a field name read on some other object, in a module that never touches the section
    assert readers(key, {"other.py": "def f(x):\n    return x.decay_lambda\n"}) == []
    # getattr with a literal name or an f-string prefix (jobs.atom_<kind>)
    assert readers("jobs.atom_event", {"g.py": 'def f(cfg):\n    j = cfg.jobs\n'
                                       '    return getattr(j, f"atom_{k}")\n'}) == ["g.py"]


def test_no_field_is_planned_today():
    """Issues 9-11 gave every planned field behaviour; a field planned again must be unread."""
    assert PLANNED == [] and planned_keys() == frozenset()
    assert all(_readers(k) == [] for k in PLANNED)


@pytest.fixture
def marked(monkeypatch):
    """The planned mechanism without a planned field: one live field marked planned ("issue 99")
    for the test, the cached key set rebuilt on both sides."""
    f = LayersConfig.model_fields["short_term_default_importance"]
    monkeypatch.setattr(f, "json_schema_extra", {**(f.json_schema_extra or {}),
                                                 "planned": "issue 99"})
    planned_keys.cache_clear()
    yield "layers.short_term_default_importance"
    planned_keys.cache_clear()


def test_a_planned_field_is_listed_with_its_issue(marked):
    rows = describe(include_planned=True)
    assert {r["key"]: r["planned"] for r in rows if r["planned"]} == {marked: "issue 99"}
    assert planned_keys() == {marked}


def test_planned_fields_are_out_of_the_flat_dict_describe_and_features(marked):
    flat = MemlabConfig().to_flat()
    assert marked not in flat and "layers.long_term_default_importance" in flat
    assert marked not in {r["key"] for r in describe()}
    # set in a config, a planned field changes neither the digest nor the features key
    cfg = MemlabConfig().replace(**{marked: 0.1})
    assert cfg.layers.short_term_default_importance == 0.1
    assert cfg.digest() == MemlabConfig().digest()
    assert features_key(cfg) == features_key(MemlabConfig())
    # and a live field still does
    assert cfg.replace(**{"recall.k": 33}).digest() != cfg.digest()


def test_a_yaml_setting_planned_fields_still_loads(marked, tmp_path):
    p = tmp_path / "planned.yaml"
    p.write_text("layers:\n  long_term_default_importance: 0.9\n"
                 "layers.short_term_default_importance: 0.2\n", encoding="utf-8")
    cfg = MemlabConfig.from_yaml(p)
    assert (cfg.layers.long_term_default_importance,
            cfg.layers.short_term_default_importance) == (0.9, 0.2)
    cfg.to_yaml(tmp_path / "back.yaml")
    assert MemlabConfig.from_yaml(tmp_path / "back.yaml") == cfg
    with pytest.raises(ConfigError) as err:   # still validated
        MemlabConfig().replace(**{marked: 9})
    assert err.value.key == marked


def test_every_preset_loads():
    presets = sorted((ROOT / "experiments" / "configs").glob("*.yaml"))
    assert presets
    for p in presets:
        MemlabConfig.from_yaml(p)


def test_a_sweep_space_refuses_a_planned_field(marked):
    with pytest.raises(ConfigError) as err:
        Space.from_dict({"params": {marked: {"float": [0.0, 1.0]}}})
    assert err.value.key == marked and "planned" in err.value.rule


def test_no_sweep_file_names_a_planned_field():
    text = "\n".join(p.read_text(encoding="utf-8")
                     for p in sorted((ROOT / "experiments" / "sweeps").glob("*.yaml")))
    assert text
    assert [k for k in PLANNED if k in text] == []


def test_config_show_lists_planned_fields_with_their_issue(cli, tmp_path, marked):
    res = cli("config", "show")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split()[:7] == ["key", "value", "default", "range", "stage", "writer",
                                    "planned"]
    rows = {ln.split()[0]: ln for ln in lines[1:] if ln.strip()}
    for r in describe(include_planned=True):
        cell = r["planned"] or "-"
        writer = r["writer_stage"] if r["writer_stage"] != r["stage"] else "-"
        assert re.search(rf"\s{r['stage']}\s+{writer}\s+{re.escape(cell)}\s",
                         rows[r["key"]]), r["key"]
    assert re.search(r"\sscore\s+ingest\s+-\s", rows["recall.relevance_z"])
    shown = json.loads(cli("config", "show", "--format", "json", "--section", "layers").stdout)
    assert {r["key"] for r in shown if r["planned"] == "issue 99"} == {marked}
    p = tmp_path / "w.yaml"
    p.write_text("layers:\n  short_term_default_importance: 0.25\n", encoding="utf-8")
    ok = cli("config", "validate", p)
    assert ok.exit_code == 0, ok.output
    assert ("layers.short_term_default_importance = 0.25  (planned, issue 99: no behaviour yet)"
            in ok.stdout)

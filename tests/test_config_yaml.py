"""Config YAML read strictly (issue 19, items 8 and 12): a key given twice and nesting past
memlab.yamlfile.MAX_DEPTH are ConfigErrors naming file:line:column, from the API and from
``memlab config validate`` (exit code 2, no traceback)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memlab.cli import app
from memlab.config import MemlabConfig
from memlab.errors import ConfigError
from memlab.yamlfile import MAX_DEPTH


def _validate(path) -> str:
    res = CliRunner().invoke(app, ["config", "validate", str(path)])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit), res.output
    assert "Traceback" not in res.output
    return res.output


@pytest.mark.parametrize("text", [
    "".join("  " * i + f"k{i}:\n" for i in range(600)) + "  " * 600 + "1\n",   # block style
    "fusion: " + "[" * 600 + "]" * 600 + "\n",                                  # flow style
    "recall: " + "{a: " * 600 + "1" + "}" * 600 + "\n",
])
def test_yaml_nested_600_deep_is_named_not_a_recursion_error(tmp_path, text):
    """PyYAML's composer recursed past Python's stack: RecursionError (about 300 levels)."""
    p = tmp_path / "deep.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels") as err:
        MemlabConfig.from_yaml(p)
    assert f"{p}:" in str(err.value)
    assert f"nested deeper than {MAX_DEPTH} levels" in _validate(p)


def test_nesting_up_to_the_limit_is_read(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("recall:\n  k: 5\nbench:\n  ks: [1, 5, 10]\n", encoding="utf-8")
    cfg = MemlabConfig.from_yaml(p)
    assert cfg.recall.k == 5 and list(cfg.bench.ks) == [1, 5, 10]
    from memlab.yamlfile import load_yaml

    deepest = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert load_yaml(deepest, "t") is not None
    with pytest.raises(ConfigError, match="nested deeper"):
        load_yaml("[" + deepest + "]", "t")


@pytest.mark.parametrize("text,key,line,first", [
    ("fusion:\n  relevance: 0.1\n  relevance: 0.9\n", "relevance", 3, 2),
    ("fusion:\n  relevance: 0.1\nrecall:\n  k: 3\nfusion:\n  lexical: 0.9\n", "fusion", 5, 1),
    ("fusion.relevance: 0.1\nfusion.relevance: 0.2\n", "fusion.relevance", 2, 1),
    ("recall: {k: 3, k: 4}\n", "k", 1, 1),
])
def test_a_key_given_twice_is_refused_naming_it(tmp_path, text, key, line, first):
    """safe_load kept the last value silently: `fusion:` twice lost the first section whole."""
    p = tmp_path / "twice.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        MemlabConfig.from_yaml(p)
    msg = str(err.value)
    assert f"{p}:{line}:" in msg and f"duplicate key {key!r} (first at line {first})" in msg
    assert f"duplicate key {key!r}" in _validate(p)


def test_a_merge_key_may_still_be_overridden(tmp_path):
    """YAML's ``<<`` merges a mapping whose keys the mapping itself may override."""
    p = tmp_path / "merge.yaml"
    p.write_text("fusion:\n  <<: {relevance: 0.3, lexical: 0.2}\n  relevance: 0.4\n",
                 encoding="utf-8")
    cfg = MemlabConfig.from_yaml(p)
    assert (cfg.fusion.relevance, cfg.fusion.lexical) == (0.4, 0.2)


def test_a_set_value_nested_too_deep_is_a_config_error():
    with pytest.raises(ConfigError, match="not a valid scalar"):
        MemlabConfig().replace(**{"bench.ks": "[" * 600 + "]" * 600})

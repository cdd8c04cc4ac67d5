"""The config tree: spec defaults, validation, and lossless round trips."""

import math

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from memlab.config import MemlabConfig, describe, describe_field, load_config
from memlab.errors import ConfigError

# Every constant the two specs state, with where they state it. The config defaults must equal them.
SPEC = {
    # reverie §8 fused score
    "fusion.relevance": 0.62, "fusion.lexical": 0.16, "fusion.importance": 0.08,
    "fusion.frequency": 0.04, "fusion.temporal": 0.24, "fusion.emotion": 0.10,
    "fusion.resident_boost_cap": 0.15, "fusion.cue_reactivation_factor": 0.35,
    "fusion.cue_reactivation_cap": 0.10,
    # reverie §8 candidate pools: max(80, min(400, 24k)), max(12, 4k), max(120, 30k); 10 permanent
    "recall.permanent_pool_min": 80, "recall.permanent_pool_max": 400,
    "recall.permanent_pool_per_k": 24, "recall.permanent_limit": 10,
    "recall.dense_pool_min": 12, "recall.dense_pool_per_k": 4,
    "recall.lexical_pool_min": 120, "recall.lexical_pool_per_k": 30,
    # reverie §6.2 memory_terms
    "recall.term_cap": 80, "recall.text_cap": 8192,
    # reverie §8 selection
    "selection.char_budget": 3600, "selection.dedup_jaccard": 0.82,
    "selection.prompt_max_items": 20,
    # reverie §9.1 retention
    "forgetting.long_term_half_life_days": 90.0, "forgetting.short_term_half_life_days": 7.0,
    "forgetting.strength_base": 0.35, "forgetting.strength_importance": 1.25,
    "forgetting.strength_emotion": 0.5, "forgetting.strength_floor": 0.15,
    "fusion.emotion_scale": 100.0,
    # reverie §4-§5 layers and importance
    "layers.long_term_threshold": 0.6, "layers.long_term_default_importance": 0.7,
    "layers.short_term_default_importance": 0.3, "layers.permanent_importance": 1.0,
    "importance.marker_base": 0.25, "importance.marker_step": 0.12, "importance.marker_cap": 0.85,
    "importance.repeat_base": 0.35, "importance.repeat_step": 0.08, "importance.repeat_cap": 0.8,
    "importance.long_message_chars": 80, "importance.long_message_score": 0.45,
    "importance.association_base": 0.4, "importance.association_step": 0.1,
    "importance.association_cap": 0.9, "importance.association_k": 3, "importance.floor": 0.05,
    # reverie §11
    "entity.boost_each": 0.04, "entity.boost_cap": 0.08, "temporal.intent_boost": 0.08,
    "temporal.oldest_first": True,
    "governance.budget_pressure_start": 0.70, "governance.budget_threshold_max": 0.95,
    "governance.pins_max": 20, "governance.usage_weight_injected": 0.2,
    "governance.usage_weight_used": 1.0, "governance.usage_weight_explicit": 2.0,
    "governance.used_overlap": 0.25, "governance.daily_reinforcement_cap": 6,
    "governance.fold_lease_seconds": 300.0, "governance.usage_cleanup_days": 90.0,
    "fuzzy.protected_importance": 0.9, "fuzzy.correction_bonus": 0.03,
    # reverie §7.1
    "embedding.bge_query_instruction": "为这个句子生成表示以用于检索相关文章：",
    # familiars §5.4 dialogue tree
    "dialog_tree.alpha": 0.3, "dialog_tree.beta": 0.3, "dialog_tree.gamma": 0.15,
    "dialog_tree.delta": 0.35, "dialog_tree.tau_attach": 0.35, "dialog_tree.recency_tau": 600.0,
    "dialog_tree.tree_tau": 3.0, "dialog_tree.title_max_chars": 40,
    # familiars §5.7.3, §5.3, §5.10
    "writer.max_chars_total": 1500, "writer.default_salience": 0.5,
    "writer.default_category": "knowledge", "writer.default_agent_id": "agent_0",
    "writer.schema_version": 2, "vram.priority_critical": 1, "vram.priority_important": 2,
    "vram.priority_nice": 3, "vram.priority_background": 4, "vram.embedder_mb": 700.0,
    # baselines named by the issues: RRF k = 60, Generative Agents 0.995 per hour, weights 1
    "baselines.rrf_k": 60.0, "baselines.ga_recency_decay": 0.995, "baselines.ga_relevance": 1.0,
    "baselines.ga_importance": 1.0, "baselines.ga_recency": 1.0,
}


@pytest.mark.parametrize("key,value", sorted(SPEC.items()))
def test_default_matches_spec(key, value):
    section, _, name = key.partition(".")
    assert MemlabConfig().to_dict()[section][name] == value   # planned fields too


def test_the_spec_episodic_prefix_is_the_first():
    # reverie §4.1: text.startswith("事件记忆：") -> episodic; the English prefix is memlab's addition
    assert MemlabConfig().layers.episodic_prefixes[0] == "事件记忆："


def test_decay_lambda_gives_half_life():
    # exp(-lambda * 1/half_life * half_life / 1) = 1/2 at strength 1
    assert math.exp(-MemlabConfig().forgetting.decay_lambda) == pytest.approx(0.5)


def test_every_field_is_described_with_a_stage():
    rows = describe()
    assert len(rows) == len(MemlabConfig().to_flat()) > 100
    for r in rows:
        assert r["description"], r["key"]
        assert r["stage"] in ("score", "candidates", "ingest", "render", "runtime"), r["key"]
        assert r["writer_stage"] in ("score", "candidates", "ingest", "render", "runtime")
    # a field the spec leaves open says it is memlab's choice
    assert "memlab's choice" in describe_field("forgetting.reinforcement_alpha")["description"]
    assert describe_field("fusion.relevance")["range"] == "[0.0, 10.0]"


def test_flat_and_yaml_round_trip(tmp_path):
    cfg = MemlabConfig().replace(**{"fusion.relevance": 0.5, "bench.ks": [1, 10]})
    assert MemlabConfig.from_flat(cfg.to_flat()) == cfg
    path = tmp_path / "c.yaml"
    cfg.to_yaml(path)
    assert MemlabConfig.from_yaml(path) == cfg
    assert cfg.bench.ks == (1, 10)


def test_yaml_dotted_keys_and_base(tmp_path):
    (tmp_path / "base.yaml").write_text("fusion:\n  relevance: 0.3\n")
    (tmp_path / "c.yaml").write_text("base: base.yaml\nfusion.lexical: 0.5\nrecall:\n  k: 3\n")
    cfg = MemlabConfig.from_yaml(tmp_path / "c.yaml")
    assert (cfg.fusion.relevance, cfg.fusion.lexical, cfg.recall.k) == (0.3, 0.5, 3)


@pytest.mark.parametrize("key,value,rule", [
    ("fusion.relevance", -0.1, "greater than or equal"),
    ("fusion.nope", 1, "unknown field"),
    ("nope.x", 1, "unknown section"),
    ("fusion.scorer", "magic", "reverie"),
    ("selection.dedup_jaccard", 1.5, "less than or equal"),
    ("entity.boost_each", 0.5, "entity.boost_cap"),
    ("bench.ks", "[0, 5]", "positive"),
    ("recall.k", "many", "integer"),
])
def test_bad_values_name_key_rule_value(key, value, rule):
    with pytest.raises(ConfigError) as e:
        MemlabConfig().replace(**{key: value})
    msg = str(e.value)
    assert key in msg and rule in msg and str(value) in msg


def test_unknown_yaml_key_is_named(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("fusion:\n  relevanse: 0.3\n")
    with pytest.raises(ConfigError, match="fusion.relevanse.*unknown key"):
        MemlabConfig.from_yaml(p)
    p.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        MemlabConfig.from_yaml(p)


def test_config_is_frozen():
    cfg = MemlabConfig()
    with pytest.raises(Exception):
        cfg.fusion.relevance = 1.0  # type: ignore[misc]


def test_string_overrides_parse_as_yaml_scalars():
    cfg = load_config(None, overrides={"fusion.relevance": "0.5", "governance.enabled": "false",
                                       "bench.ks": "[1, 5]"})
    assert cfg.fusion.relevance == 0.5 and cfg.governance.enabled is False
    assert cfg.bench.ks == (1, 5)


_floats = {k for k, r in ((r["key"], r) for r in describe())
           if r["type"] == "float" and r["range"].startswith("[0.0") and r["range"].endswith("1.0]")}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(_floats)), st.floats(0.0, 1.0))
def test_unit_interval_fields_round_trip(key, value):
    try:
        cfg = MemlabConfig().replace(**{key: value})
    except ConfigError:  # a cross-field rule (e.g. boost_each <= boost_cap) may refuse it
        return
    assert MemlabConfig.from_flat(cfg.to_flat()) == cfg
    assert cfg.to_flat()[key] == value


# -- files that are not config, and messages that point at the problem (issue 7, defects 6, 10) --
def test_a_non_utf8_config_file_is_a_config_error_naming_the_file_and_the_byte(tmp_path):
    """It used to raise a raw UnicodeDecodeError."""
    p = tmp_path / "latin1.yaml"
    p.write_bytes("recall:\n  k: 5  # café\n".encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        MemlabConfig.from_yaml(p)
    assert str(p) in str(e.value) and "UTF-8" in str(e.value) and "0xe9" in str(e.value)


@pytest.mark.parametrize("files", [
    {"self.yaml": "base: self.yaml\nrecall:\n  k: 3\n"},
    {"a.yaml": "base: b.yaml\n", "b.yaml": "base: a.yaml\nrecall:\n  k: 3\n"},
    {"a.yaml": "base: sub/b.yaml\n", "sub/b.yaml": "base: ../a.yaml\n"},
])
def test_a_base_cycle_is_a_config_error_naming_the_chain(tmp_path, files):
    """`base:` naming the file itself, or a -> b -> a, used to raise RecursionError."""
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    first = next(iter(files))
    with pytest.raises(ConfigError, match="cycle") as e:
        MemlabConfig.from_yaml(tmp_path / first)
    chain = str(e.value)
    assert chain.count(first.split("/")[-1]) >= 2   # starts and ends with the same file


def test_a_shared_base_is_not_a_cycle(tmp_path):
    (tmp_path / "root.yaml").write_text("recall:\n  k: 3\n")
    (tmp_path / "mid.yaml").write_text("base: root.yaml\nfusion:\n  lexical: 0.5\n")
    (tmp_path / "top.yaml").write_text("base: mid.yaml\nfusion:\n  relevance: 0.4\n")
    cfg = MemlabConfig.from_yaml(tmp_path / "top.yaml")
    assert (cfg.recall.k, cfg.fusion.lexical, cfg.fusion.relevance) == (3, 0.5, 0.4)


@pytest.mark.parametrize("text,line,column", [
    ("recall:\n  k: 5\n   lexical_floor: 0.3\n", 3, 17),     # bad indentation
    ("recall: {k: 5\nfusion:\n  relevance: 0.5\n", 2, 7),      # unclosed flow mapping
    ("recall:\n  k: [1, 2\n", 3, 1),                            # unclosed list
    ("fusion:\n\trelevance: 0.5\n", 2, 1),                      # a tab
])
def test_a_yaml_syntax_error_gives_file_line_and_column(tmp_path, text, line, column):
    """YAML errors used to give no line or column."""
    p = tmp_path / "broken.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        MemlabConfig.from_yaml(p)
    assert f"{p}:{line}:{column}" in str(e.value) and "not valid YAML" in str(e.value)


def test_setting_a_section_says_it_is_a_section_and_names_a_field():
    """`--set recall=5` used to say 'unknown section' for a section that exists."""
    with pytest.raises(ConfigError) as e:
        MemlabConfig().replace(recall=5)
    msg = str(e.value)
    assert "unknown" not in msg and "is a section" in msg and "recall.k=" in msg
    with pytest.raises(ConfigError, match="unknown section"):
        MemlabConfig().replace(recal=5)


# -- strict types (issue 7, defect 11b) -------------------------------------------------------------
def _fields_of_type(name):
    return sorted(r["key"] for r in describe() if r["type"] == name)


INT_FIELDS = _fields_of_type("int")
FLOAT_FIELDS = _fields_of_type("float")
BOOL_FIELDS = _fields_of_type("bool")


def test_the_generic_strictness_tests_see_every_numeric_field():
    assert "recall.k" in INT_FIELDS and len(INT_FIELDS) > 30 and len(FLOAT_FIELDS) > 60
    assert "embedding.threads" in _fields_of_type("int | None")


@pytest.mark.parametrize("key", INT_FIELDS + _fields_of_type("int | None"))
@pytest.mark.parametrize("value", [True, False, 2.5, "3"], ids=repr)
def test_every_int_field_refuses_bools_fractions_and_strings(key, value):
    """`recall.k: true` in YAML used to be accepted as 1."""
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        MemlabConfig.from_dict({key.split(".")[0]: {key.split(".")[1]: value}})


@pytest.mark.parametrize("key", FLOAT_FIELDS)
def test_every_float_field_refuses_bools_and_accepts_ints(key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        MemlabConfig().replace(**{key: True})
    default = MemlabConfig().to_flat()[key]
    whole = float(round(default))
    try:
        cfg = MemlabConfig().replace(**{key: int(whole)})
    except ConfigError:   # the whole number is out of this field's range
        return
    got = cfg.to_flat()[key]
    assert type(got) is float and got == whole


@pytest.mark.parametrize("key", BOOL_FIELDS)
def test_every_bool_field_refuses_numbers(key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        MemlabConfig.from_dict({key.split(".")[0]: {key.split(".")[1]: 1}})


def test_yaml_true_for_recall_k_is_refused(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("recall:\n  k: true\n")
    with pytest.raises(ConfigError, match=r"recall\.k"):
        MemlabConfig.from_yaml(p)
    with pytest.raises(ConfigError, match=r"bench\.ks"):
        MemlabConfig().replace(**{"bench.ks": [1, True]})


def test_string_overrides_still_parse_numbers_written_any_way():
    """--set values are strings; YAML 1.1 reads '1e-05' as a string: still a float here."""
    cfg = MemlabConfig().replace(**{"fusion.relevance": "1e-01", "recall.k": "12",
                                    "fuzzy.probability": "5e-2"})
    assert (cfg.fusion.relevance, cfg.recall.k, cfg.fuzzy.probability) == (0.1, 12, 0.05)


def test_bytes_are_refused_by_key_not_decoded():
    """pydantic decodes b'' to '' for a str field, which to_flat/from_flat read back as None:
    a value that does not round-trip (found by tests/test_fuzz.py)."""
    with pytest.raises(ConfigError, match="embedding.model_path.*bytes"):
        MemlabConfig().replace(**{"embedding.model_path": b""})

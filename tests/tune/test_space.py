"""Search spaces: checked against the config schema, with errors naming the key, the rule and the
value; the normalise constraint; the shipped spaces."""

from __future__ import annotations

import math

import optuna
import pytest

from memlab.config import MemlabConfig, describe, describe_field
from memlab.errors import ConfigError
from memlab.tune.space import Normalise, Space, load_space, resolve_space

SHIPPED = ("reverie", "generative_agents", "hybrid_rrf")


def space(params, constraints=None, **top):
    return Space.from_dict({"params": params, "constraints": constraints or [], **top})


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_spaces_load_and_apply_to_their_preset(name):
    from memlab.bench.run import resolve_preset

    sp = resolve_space(name)
    assert sp.name == name and sp.preset == name
    _, ppath = resolve_preset(sp.preset)
    base = MemlabConfig.from_yaml(ppath)
    # the middle of every range is a valid configuration of the preset
    trial = optuna.trial.FixedTrial({p.key: (p.choices[0] if p.kind == "categorical" else
                                             (p.low + p.high) / 2 if p.kind == "float" else
                                             int((p.low + p.high) // 2)) for p in sp.params})
    cfg = base.replace(**sp.suggest(trial))
    for c in sp.constraints:
        assert sum(cfg.to_flat()[k] for k in c.keys) == pytest.approx(c.total)


#: score-stage fields of these sections that the reverie space leaves out, and why
REVERIE_LEFT_OUT = {
    "fusion.scorer": "the design itself, not a weight",
    "fusion.emotion_scale": "the data's scale",
    "forgetting.decay_lambda": "multiplies the same rates as the half-lives",
    "forgetting.layer_scale_long_term": "multiplies the same rate as the half-life",
    "forgetting.layer_scale_short_term": "multiplies the same rate as the half-life",
    "fusion.learned_model": "the learned scorer's model file, not a reverie weight",
    "fusion.learned_floor": "the learned scorer's gate, not a reverie weight",
    **{k: "reverie_plus's term (memlab.recall.plus), not a reverie weight" for k in (
        "fusion.dense_z", "fusion.bm25_z", "fusion.neighbour", "fusion.session", "fusion.window",
        "fusion.window_half_life_days", "fusion.speaker", "fusion.context_typed",
        "fusion.context_types")},
}


def test_reverie_space_covers_every_fusion_forgetting_selection_weight():
    keys = set(resolve_space("reverie").keys)
    wanted = {r["key"] for r in describe() if r["stage"] == "score"
              and r["key"].split(".")[0] in ("fusion", "forgetting", "selection", "entity")}
    assert wanted - keys - set(REVERIE_LEFT_OUT) == set()
    assert {"recall.lexical_pool_min", "recall.dense_pool_min"} <= keys   # candidate stage


@pytest.mark.parametrize("params, key, rule", [
    ({"fusion.nope": {"float": [0.0, 1.0]}}, "fusion.nope", "unknown key"),
    ({"governance.pins_max": {"int": [1, 5]}}, "governance.pins_max", "runtime"),
    ({"selection.prompt_max_items": {"int": [5, 40]}}, "selection.prompt_max_items",
     "stage 'render': only the prompt block rendered after selection reads it"),
    ({"facts.past_label": {"categorical": ["", "[old] "]}}, "facts.past_label", "render"),
    ({"selection.char_budget": {"float": [10.0, 100.0]}}, "selection.char_budget",
     "needs a float field"),
    ({"fusion.relevance": {"int": [0, 1]}}, "fusion.relevance", "needs a int field"),
    ({"fusion.relevance": {"float": [-0.5, 1.0]}}, "fusion.relevance",
     "low bound outside the field's range [0.0, 10.0]"),
    ({"fusion.relevance": {"float": [0.0, 11.0]}}, "fusion.relevance",
     "high bound outside the field's range [0.0, 10.0]"),
    ({"fusion.temporal_half_life_days": {"float": [0.0, 10.0]}},
     "fusion.temporal_half_life_days", "low bound outside the field's range (0.0, 100000.0]"),
    ({"fusion.relevance_baseline": {"float": [0.0, 1.0]}}, "fusion.relevance_baseline",
     "high bound outside"),
    ({"fusion.relevance": {"float": [0.0, 1.0], "log": True}}, "fusion.relevance",
     "log range needs low > 0"),
    ({"fusion.relevance": {"float": [0.5, 0.5]}}, "fusion.relevance", "low < high"),
    ({"fusion.relevance": {"float": [0.0, 1.0], "spread": 2}}, "fusion.relevance",
     "unknown option"),
    ({"fusion.relevance": {"float": [0.0, 1.0], "int": [0, 1]}}, "fusion.relevance",
     "exactly one of"),
    ({"fusion.temporal_mode": {"categorical": ["intent", "sometimes"]}}, "fusion.temporal_mode",
     "choice is not a valid value"),
    ({"fusion.relevance": {"float": [0.0, 1.0], "grid": [0.5, 12.0]}}, "fusion.relevance",
     "grid value is not a valid value"),
    ({"selection.char_budget": {"int": [10, 100], "step": 2.5}}, "selection.char_budget",
     "step must be a positive int"),
])
def test_a_bad_range_names_the_key_and_the_rule(params, key, rule):
    with pytest.raises(ConfigError) as err:
        space(params)
    assert err.value.key == key and rule in err.value.rule


def test_bad_constraints_are_named():
    two = {"fusion.relevance": {"float": [0.0, 1.0]}, "fusion.lexical": {"float": [0.0, 1.0]}}
    with pytest.raises(ConfigError, match="float keys of the space") as err:
        space(two, [{"normalise": ["fusion.relevance", "fusion.importance"], "sum": 1.0}])
    assert err.value.key == "fusion.importance"
    with pytest.raises(ConfigError, match="sum .* not a valid value") as err:
        space(two, [{"normalise": ["fusion.relevance", "fusion.lexical"], "sum": 20.0}])
    assert err.value.key == "fusion.relevance" and err.value.value == 20.0
    with pytest.raises(ConfigError, match="low >= 0"):
        space({"fusion.cognitive_episodic": {"float": [-0.2, 0.2]},
               "fusion.lexical": {"float": [0.0, 1.0]}},
              [{"normalise": ["fusion.cognitive_episodic", "fusion.lexical"], "sum": 1.0}])
    with pytest.raises(ConfigError, match="sum must be a number > 0"):
        space(two, [{"normalise": ["fusion.relevance", "fusion.lexical"], "sum": 0}])
    with pytest.raises(ConfigError, match="two normalise constraints"):
        space(two, [{"normalise": ["fusion.relevance", "fusion.lexical"], "sum": 1.0}] * 2)
    with pytest.raises(ConfigError, match="unknown top-level key"):
        space(two, nonsense=1)


def test_a_file_that_is_not_yaml_or_missing_is_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("params: [unclosed", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML") as err:
        load_space(bad)
    assert str(bad) in str(err.value)
    with pytest.raises(ConfigError, match="no such search-space file"):
        resolve_space(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="known: .*reverie"):
        resolve_space("no-such-space")


def test_normalise_rescales_to_the_sum_and_keeps_the_ratios():
    vals = {"a": 1.0, "b": 3.0, "c": 0.5}
    Normalise(("a", "b"), 2.0).apply(vals)
    assert vals == {"a": 0.5, "b": 1.5, "c": 0.5}   # 2 * 1/4, 2 * 3/4; c untouched
    zeros = {"a": 0.0, "b": 0.0, "c": 0.0}
    Normalise(("a", "b", "c"), 1.5).apply(zeros)
    assert zeros == {"a": 0.5, "b": 0.5, "c": 0.5}   # all zero: equal shares


def test_suggest_and_apply_give_the_same_config():
    sp = space({"fusion.relevance": {"float": [0.0, 1.0]}, "fusion.lexical": {"float": [0.0, 1.0]},
                "selection.char_budget": {"int": [100, 1000], "step": 100},
                "fusion.temporal_mode": {"categorical": ["intent", "recency"]}},
               [{"normalise": ["fusion.relevance", "fusion.lexical"], "sum": 0.78}])
    raw = {"fusion.relevance": 0.3, "fusion.lexical": 0.1, "selection.char_budget": 700,
           "fusion.temporal_mode": "recency"}
    got = sp.suggest(optuna.trial.FixedTrial(raw))
    assert got == sp.apply(raw)
    assert got["fusion.relevance"] == pytest.approx(0.78 * 0.75)
    assert got["fusion.lexical"] == pytest.approx(0.78 * 0.25)
    assert got["selection.char_budget"] == 700 and got["fusion.temporal_mode"] == "recency"
    MemlabConfig().replace(**got)   # a valid configuration


def test_grid_values():
    sp = space({"fusion.temporal_half_life_days": {"float": [1.0, 100.0], "log": True},
                "selection.char_budget": {"int": [1, 3]},
                "fusion.relevance": {"float": [0.0, 1.0], "grid": [0.2, 0.6]},
                "fusion.temporal_mode": {"categorical": ["intent", "recency"]}}, grid_points=3)
    g = sp.grid()
    assert [math.log10(v) for v in g["fusion.temporal_half_life_days"]] == pytest.approx([0, 1, 2])
    assert g["selection.char_budget"] == [1, 2, 3]
    assert g["fusion.relevance"] == [0.2, 0.6]
    assert g["fusion.temporal_mode"] == ["intent", "recency"]
    with pytest.raises(ConfigError, match="grid_points"):
        space({"fusion.relevance": {"float": [0.0, 1.0]}}, grid_points=1)


def test_digest_follows_what_is_searched():
    a = space({"fusion.relevance": {"float": [0.0, 1.0]}})
    assert a.digest() == space({"fusion.relevance": {"float": [0.0, 1.0]}}).digest()
    assert a.digest() != space({"fusion.relevance": {"float": [0.0, 2.0]}}).digest()


def test_reverie_score_space_is_reverie_without_its_candidate_keys():
    from memlab.config import describe_field

    full, score_only = resolve_space("reverie"), resolve_space("reverie_score")
    assert score_only.preset == "reverie"
    assert all(describe_field(k)["stage"] == "score" for k in score_only.keys)
    assert set(full.keys) - set(score_only.keys) == {k for k in full.keys
                                                     if describe_field(k)["stage"] != "score"}
    assert [c.keys for c in score_only.constraints] == [c.keys for c in full.constraints]


def test_every_committed_preset_loads_and_tuned_presets_resolve_by_name():
    """experiments/configs/**.yaml (tuned/<dataset>.yaml and reverie_tuned included) are valid
    configs, runnable by name in memlab bench --compare."""
    from pathlib import Path

    from memlab.bench.run import resolve_preset
    from memlab.config import load_config

    root = Path(__file__).resolve().parents[2] / "experiments" / "configs"
    names = [p.relative_to(root).with_suffix("").as_posix() for p in sorted(root.rglob("*.yaml"))]
    assert "reverie_tuned" in names and any(n.startswith("tuned/") for n in names)
    for name in names:
        cfg = load_config(resolve_preset(name)[1])
        if "tuned" in name:
            assert cfg.fusion.scorer == "reverie" and cfg != load_config(resolve_preset("reverie")[1])


def test_no_shipped_space_or_random_draw_names_a_field_no_metric_reads():
    """The shipped spaces load (validation refuses a runtime- or render-stage field) and name
    none; the random configurations of memlab.tune.sample (parity tests, throughput benchmark)
    draw only score-stage fields, so not selection.prompt_max_items (render) either."""
    from memlab.tune.sample import reverie_keys
    from memlab.tune.space import REPO_ROOT, load_space

    paths = sorted((REPO_ROOT / "experiments" / "sweeps").glob("*.yaml"))
    assert paths
    for path in paths:
        keys = load_space(path).keys
        assert [k for k in keys if describe_field(k)["stage"] in ("render", "runtime")] == [], path
    assert "selection.prompt_max_items" not in reverie_keys()
    assert {describe_field(k)["stage"] for k in reverie_keys()} == {"score"}

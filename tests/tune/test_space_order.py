"""The search space's order constraint (issue 20): short <= long half-life in every trial, by
reparametrisation (values by hand), its checks, and the shipped forgetting space."""

from __future__ import annotations

import math

import optuna
import pytest

from memlab.config import MemlabConfig, describe_field
from memlab.errors import ConfigError
from memlab.tune.space import Normalise, Order, Space, resolve_space

SHORT, LONG = "forgetting.short_term_half_life_days", "forgetting.long_term_half_life_days"
HALF_LIVES = {SHORT: {"float": [1.0, 90.0], "log": True},
              LONG: {"float": [7.0, 1825.0], "log": True}}


def space(params, constraints, **top):
    return Space.from_dict({"params": params, "constraints": constraints, **top})


def ordered(**top):
    return space(HALF_LIVES, [{"order": [SHORT, LONG]}], **top)


def test_a_later_key_is_mapped_into_the_range_the_earlier_leaves_geometrically():
    o = Order((SHORT, LONG), ((1.0, 90.0, True), (7.0, 1825.0, True)))
    for sampled, want in [(7.0, 30.0),                          # the bottom -> the short value
                          (1825.0, 1825.0),                     # the top stays
                          (math.sqrt(7 * 1825), math.sqrt(30 * 1825))]:   # the geometric middle
        vals = {SHORT: 30.0, LONG: sampled}
        o.apply(vals)
        assert vals == {SHORT: 30.0, LONG: pytest.approx(want)}
    vals = {SHORT: 3.0, LONG: 10.0}     # short under the long range: nothing moves
    o.apply(vals)
    assert vals == {SHORT: 3.0, LONG: 10.0}


def test_a_linear_range_is_mapped_linearly_and_chains_follow_the_previous_value():
    o = Order(("a", "b", "c"), ((0.0, 1.0, False), (0.0, 2.0, False), (0.0, 2.0, False)))
    vals = {"a": 1.0, "b": 1.0, "c": 0.0}
    o.apply(vals)
    # b: 1 + (1 - 0) * (2 - 1) / 2 = 1.5; c: its bottom -> b's value 1.5
    assert vals == {"a": 1.0, "b": 1.5, "c": 1.5}


def test_every_trial_of_a_sampler_is_ordered_and_none_is_pruned():
    sp = ordered()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = []

    def objective(trial):
        got = sp.suggest(trial)
        assert got == sp.apply(trial.params)      # what the trial table and best configs show
        MemlabConfig().replace(**got)             # a valid configuration
        seen.append(got)
        return 0.0

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=300)
    assert len(seen) == 300 == len(study.get_trials(states=[optuna.trial.TrialState.COMPLETE]))
    assert all(v[SHORT] <= v[LONG] <= 1825.0 and v[LONG] >= 7.0 for v in seen)
    # the raw draws would have broken the order in some trials
    raw = [t.params for t in study.trials]
    assert sum(r[SHORT] > r[LONG] for r in raw) > 10


def test_every_grid_point_is_ordered():
    sp = ordered(grid_points=4)
    for s in sp.grid()[SHORT]:
        for lv in sp.grid()[LONG]:
            got = sp.apply({SHORT: s, LONG: lv})
            assert got[SHORT] <= got[LONG]


@pytest.mark.parametrize("params, order, key, rule", [
    (HALF_LIVES, [SHORT], "constraints[0]", "at least two distinct keys"),
    (HALF_LIVES, [SHORT, SHORT], "constraints[0]", "at least two distinct keys"),
    (HALF_LIVES, [SHORT, "forgetting.strength_base"], "forgetting.strength_base",
     "float keys of the space"),
    ({SHORT: {"float": [1.0, 90.0]}, "selection.char_budget": {"int": [100, 1000]}},
     [SHORT, "selection.char_budget"], "selection.char_budget", "float keys of the space"),
    ({SHORT: {"float": [1.0, 90.0]}, LONG: {"float": [7.0, 63.0], "step": 7.0}}, [SHORT, LONG],
     LONG, "no step or grid"),
    ({SHORT: {"float": [1.0, 90.0]}, LONG: {"float": [7.0, 60.0]}}, [SHORT, LONG], LONG,
     "at least forgetting.short_term_half_life_days's (90)"),
])
def test_bad_order_constraints_are_named(params, order, key, rule):
    with pytest.raises(ConfigError) as err:
        space(params, [{"order": order}])
    assert err.value.key == key and rule in err.value.rule


def test_a_key_in_two_constraints_is_refused():
    params = {"fusion.relevance": {"float": [0.0, 1.0]}, "fusion.lexical": {"float": [0.0, 1.0]}}
    with pytest.raises(ConfigError, match="two constraints"):
        space(params, [{"normalise": ["fusion.relevance", "fusion.lexical"], "sum": 1.0},
                       {"order": ["fusion.relevance", "fusion.lexical"]}])
    with pytest.raises(ConfigError, match="or {order: "):
        space(params, [{"order": ["fusion.relevance", "fusion.lexical"], "sum": 1.0}])


def test_digests_of_normalise_spaces_are_unchanged_and_order_counts():
    """A study is bound to its space's digest: the order constraint must not move the digests of
    the spaces that predate it (values of the shipped spaces before it)."""
    assert resolve_space("reverie").digest() == "eafd8b0de4f6"
    assert resolve_space("reverie_score").digest() == "f4a59384205c"
    assert ordered().digest() != space(HALF_LIVES, []).digest()


def test_the_shipped_forgetting_space():
    sp = resolve_space("forgetting")
    assert sp.preset == "reverie" and sp.keys[:2] == [SHORT, LONG]
    assert [type(c) for c in sp.constraints] == [Order] and sp.constraints[0].keys == (SHORT, LONG)
    assert all(describe_field(k)["stage"] == "score" for k in sp.keys)
    assert {k.split(".")[0] for k in sp.keys} == {"forgetting", "fusion"}
    assert sp.check_grid() == 2 ** 12
    # the case the issue saw: a short half-life drawn above the long one
    got = sp.apply({**{p.key: p.low for p in sp.params}, SHORT: 60.0, LONG: 7.0})
    assert got[LONG] == pytest.approx(60.0) and got[SHORT] == 60.0
    assert not any(isinstance(c, Normalise) for c in sp.constraints)


def test_the_order_holds_exactly_not_to_a_rounding():
    """exp(log(x)) is not always x: a draw at the bottom of the long range gives exactly the
    short value (never one ulp under it), a draw at the top exactly the top."""
    o = Order((SHORT, LONG), ((1.0, 90.0, True), (7.0, 1825.0, True)))
    for short in [7.1 + 0.37 * i for i in range(200)]:
        low, high = {SHORT: short, LONG: 7.0}, {SHORT: short, LONG: 1825.0}
        o.apply(low)
        o.apply(high)
        assert low[LONG] >= short and high[LONG] <= 1825.0

"""The sweep runs the formula in the code (issue 18, item 6): the fast paths' record of the
reference functions they mirror (memlab.tune.reference), the fallback to the reference path when
one changed, and the fused kernel's parameters passed by name.

Data: the bilingual parity set of tests/tune/test_parity.py (hashing embedder). The edit of the
reference runs in a copy of the memlab package, in a subprocess (its code is the edited one).
"""

from __future__ import annotations

import ast
import inspect
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import memlab
from memlab.bench.run import rank, replay_cached
from memlab.embed import HashingEmbedder
from memlab.recall import score as score_module
from memlab.tune import evaluate, kernels, reference, reference_hashes
from memlab.tune.evaluate import per_query_reference, per_query_scores
from memlab.tune.prepared import prepared
from memlab.tune.sample import random_configs

sys.path.insert(0, str(Path(__file__).parent))
from test_parity import SEED, _base, _dataset  # noqa: E402

EDITED = "memlab.recall.score:reverie_scored"


@pytest.fixture
def fresh(monkeypatch):
    """reference's per-process state, fresh (restored after the test)."""
    monkeypatch.setattr(reference, "stats", {"checked": False, "changed": (), "fallbacks": 0,
                                             "warned": False})
    return reference.stats


@pytest.fixture(scope="module")
def rep(tmp_path_factory):
    base = _base(tmp_path_factory.mktemp("reference"))
    return replay_cached(_dataset(), base, embedder=HashingEmbedder(), progress=False), base


def test_the_recorded_hashes_are_the_code():
    """Every function a fast path mirrors is recorded, with the hash of its code now: an edit of
    the reference fails this until the fast paths are re-checked and the hashes recorded again."""
    now = reference.current()
    assert "missing" not in now.values()
    assert set(now) == {n for fns in reference.MIRRORS.values() for n in fns}
    diff = {n for n in now if reference_hashes.RECORDED.get(n) != now[n]}
    assert not diff and set(reference_hashes.RECORDED) == set(now), (
        f"changed since the fast paths were checked: {sorted(diff)}; re-check them "
        f"(tests/tune/test_parity.py), then: {reference.RECORD_COMMAND}")


def test_record_writes_the_module_the_check_reads(tmp_path, capsys):
    """``--record`` writes a module whose RECORDED is the code's hashes now; without it the
    command lists each function as the same and exits 0."""
    path = tmp_path / "hashes.py"
    assert reference.record(path) == reference.current()
    namespace: dict = {}
    exec(path.read_text(encoding="utf-8"), namespace)
    assert namespace["RECORDED"] == reference.current()
    assert reference.main([]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == len(reference.current()) and all(r.startswith("same") for r in listed)


def test_the_hash_is_of_the_code_not_its_comments_docstrings_or_layout():
    src = inspect.getsource(score_module.reverie_scored)
    h = reference.source_hash(src)
    doc = ast.parse(src).body[0].body[0].value.value
    assert doc in src
    reworded = src.replace(doc, "Another docstring, longer,\n    on two lines.")
    commented = src.replace("    fu = cfg.fusion\n", "    # a comment\n    fu = cfg.fusion  # why\n")
    rewrapped = src.replace('"lexical_term": fu.lexical * lexical,',
                            '"lexical_term": (fu.lexical\n                         * lexical),')
    for same in (reworded, commented, rewrapped):
        assert same != src and reference.source_hash(same) == h
    coefficient = src.replace('"lexical_term": fu.lexical * lexical,',
                              '"lexical_term": 2.0 * fu.lexical * lexical,')
    comparison = src.replace("age < tc.recent_window_days", "age <= tc.recent_window_days")
    for other in (coefficient, comparison):
        assert other != src and reference.source_hash(other) != h
    # fields that newer Pythons add empty (type_params, ...) are not part of the form hashed
    assert "type_params" not in reference._canonical(ast.parse("def f(x):\n    return x\n"))


@pytest.mark.parametrize("function,falls_back", [
    ("memlab.recall.score:reverie_scored", {"reverie"}),
    ("memlab.forgetting:eligible", {"reverie"}),
    ("memlab.recall.score:cosine", {"cosine"}),
    ("memlab.recall.score:_floor_absolute", {"reverie", "cosine", "bm25", "generative_agents"}),
    ("memlab.recall.select:select", {"reverie", "cosine", "bm25", "generative_agents"}),
])
def test_a_change_sends_the_scorers_whose_fast_path_mirrors_it_to_the_reference(
        fresh, monkeypatch, caplog, function, falls_back):
    recorded = {**reference_hashes.RECORDED, function: "0" * 16}
    monkeypatch.setattr(reference, "_recorded", lambda: recorded)
    with caplog.at_level(logging.WARNING, logger="memlab.tune.reference"):
        got = {s for s in ("reverie", "cosine", "bm25", "generative_agents")
               if reference.stale(s)}
        reference.stale("reverie")
    assert got == falls_back
    assert fresh["fallbacks"] == len(falls_back) + ("reverie" in falls_back)
    [warning] = caplog.records                      # once per process
    assert function in warning.getMessage()
    assert reference.RECORD_COMMAND in warning.getMessage()


def test_the_sweep_path_falls_back_in_process(rep, fresh, monkeypatch, caplog):
    """With reverie_scored recorded otherwise, per_query_scores and rankings of a reverie
    configuration come from the reference path (the fast selections never run), with one
    warning; a cosine configuration still takes the fast path."""
    rep, base = rep
    recorded = {**reference_hashes.RECORDED, EDITED: "0" * 16}
    monkeypatch.setattr(reference, "_recorded", lambda: recorded)
    calls = []
    fast = evaluate.selections
    monkeypatch.setattr(evaluate, "selections", lambda *a: calls.append(1) or fast(*a))
    with caplog.at_level(logging.WARNING, logger="memlab.tune.reference"):
        got = per_query_scores(rep, base).to_frame()
        assert evaluate.rankings(rep, base) == rank(rep, base)
        pd.testing.assert_frame_equal(got, per_query_reference(rep, base))
        assert not calls and fresh["fallbacks"] == 2
        cosine = base.replace(**{"fusion.scorer": "cosine"})
        per_query_scores(rep, cosine)
        assert calls                                  # its fast path mirrors nothing changed
    assert [r.getMessage().count(EDITED) for r in caplog.records] == [1]


#: Run in a copy of memlab whose reverie_scored was edited: the sweep path (per_query_scores,
#: rankings), the reference path, and the fast path with the check bypassed.
SCRIPT = r"""
import json, pickle, sys
import memlab
from memlab.bench.run import rank
from memlab.tune import evaluate, reference
rep, cfg = pickle.loads(open(sys.argv[1], "rb").read())
calls = []
fast = evaluate.selections
evaluate.selections = lambda *a: calls.append(1) or fast(*a)
values = lambda s: {c: v.tolist() for c, v in s.values.items()}
out = {"memlab": memlab.__file__,
       "sweep": values(evaluate.per_query_scores(rep, cfg)),
       "rankings": evaluate.rankings(rep, cfg), "rank": rank(rep, cfg),
       "reference": evaluate.per_query_reference(rep, cfg).drop(
           columns=["category", "conversation_id"]).to_dict("list"),
       "fast_calls": len(calls), "changed": reference.stats["changed"],
       "fallbacks": reference.stats["fallbacks"]}
reference.stats["changed"] = ()           # the check bypassed: what the fast path would give
out["unchecked"] = values(evaluate.per_query_scores(rep, cfg))
print(json.dumps(out))
"""


def test_an_edited_reference_in_a_copy_makes_the_sweep_fall_back(rep, tmp_path):
    """A copy of memlab whose reverie score weighs the lexical term 4 times: its sweep path warns
    once, naming reverie_scored and the command that records the hashes, and gives the metrics
    of its own reference path (the edited formula), which differ from the unedited fast path's;
    the fast path with the check bypassed would have given the old formula (numba's kernels run
    as Python here: NUMBA_DISABLE_JIT, no compilation in the copy)."""
    rep, base = rep
    copy = tmp_path / "src" / "memlab"
    shutil.copytree(Path(memlab.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    src = copy / "recall" / "score.py"
    text = src.read_text(encoding="utf-8")
    old = '"lexical_term": fu.lexical * lexical,'
    assert text.count(old) == 1
    src.write_text(text.replace(old, '"lexical_term": 4.0 * fu.lexical * lexical,'),
                   encoding="utf-8")
    data = tmp_path / "replay.pickle"
    data.write_bytes(pickle.dumps((rep, base)))
    env = {**os.environ, "PYTHONPATH": str(copy.parent), "NUMBA_DISABLE_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(data)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["memlab"] == str(copy / "__init__.py")
    assert done.stderr.count("the reference code differs") == 1, done.stderr
    assert EDITED in done.stderr and reference.RECORD_COMMAND in done.stderr
    assert out["changed"] == [EDITED]
    assert out["fast_calls"] == 0 and out["fallbacks"] == 2       # the reference path served
    assert out["rankings"] == out["rank"]
    for c, v in out["reference"].items():
        assert out["sweep"][c] == v, c
    original = {c: v.tolist() for c, v in per_query_scores(rep, base).values.items()}
    assert out["sweep"] != original               # the edit matters on this data
    if kernels.AVAILABLE:                         # the fused kernel: the formula it was written for
        assert out["unchecked"] == original


# -- the fused kernel's parameters, by name ------------------------------------------------------
def test_the_kernel_parameters_are_packed_by_name(rep):
    """pack() puts each config value of kernels.FLOATS at the index of its name (two
    configurations whose values are all distinct, in two orders, so a slip of one place shows;
    two drawn), and the int parameters at theirs."""
    rep, base = rep
    prep = prepared(rep)
    n = len(kernels.FLOATS)
    distinct = [base.replace(**{k: 0.9 * ((i + shift) % n + 1) / (n + 1)
                                for i, k in enumerate(kernels.FLOATS)}) for shift in (0, 7)]
    for j, cfg in enumerate(distinct + random_configs(base, 2, seed=SEED, keys=kernels.FLOATS)):
        flat = cfg.to_flat()
        values = [float(flat[k]) for k in kernels.FLOATS]
        assert j >= 2 or len(set(values)) == n
        fp, ip = kernels.pack(prep, cfg)
        assert fp.tolist() == values
        for key in kernels.FLOATS:
            assert fp[getattr(kernels, "_F_" + key.split(".")[1].upper())] == flat[key]
    for floor, mode in (({"recall.floor_mode": "absolute", "recall.relevance_floor": 0.0}, 0),
                        ({"recall.floor_mode": "absolute", "recall.relevance_floor": 0.3}, 1),
                        ({"recall.floor_mode": "zscore", "recall.relevance_z": 1.5}, 2)):
        for flags in ({"governance.enabled": True, "entity.enabled": False,
                       "temporal.enabled": True, "fusion.temporal_mode": "recency"},
                      {"governance.enabled": False, "entity.enabled": True,
                       "temporal.enabled": False, "fusion.temporal_mode": "intent"}):
            cfg = base.replace(**floor, **flags)
            _, ip = kernels.pack(prep, cfg)
            want = {"floor_mode": mode, "recency_mode": flags["fusion.temporal_mode"] == "recency",
                    "governance": flags["governance.enabled"],
                    "entity": flags["entity.enabled"], "temporal": flags["temporal.enabled"],
                    "z_at": np.searchsorted(prep.z_sorted, cfg.recall.relevance_z, side="left")}
            assert ip.tolist() == [int(want[k]) for k in kernels.INTS]
            for name, v in want.items():
                assert ip[getattr(kernels, "_I_" + name.upper())] == v


def test_the_kernel_reads_its_parameters_only_by_name():
    """In kernels.py, ``fp`` and ``ip`` are indexed only through the constants ``_F_<FIELD>`` and
    ``_I_<NAME>``, each the index of its name in FLOATS / INTS (no position written out); the
    memory-level arrays go to the kernel's parameters of their names (MEMORY_KEYS)."""
    tree = ast.parse(Path(kernels.__file__).read_text(encoding="utf-8"))
    read = {"fp": set(), "ip": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and node.value.id in read:
            assert isinstance(node.slice, ast.Name), ast.unparse(node)
            read[node.value.id].add(node.slice.id)
    floats = {"_F_" + k.split(".")[1].upper(): i for i, k in enumerate(kernels.FLOATS)}
    ints = {"_I_" + k.upper(): i for i, k in enumerate(kernels.INTS)}
    assert read["fp"] <= set(floats) and read["ip"] <= set(ints)
    assert read["fp"] == set(floats)                  # every float packed is read
    defined = {n: v for n, v in vars(kernels).items() if n.startswith(("_F_", "_I_"))}
    assert defined == {**floats, **ints}
    params = list(inspect.signature(inspect.unwrap(
        getattr(kernels._reverie_select, "py_func", kernels._reverie_select))).parameters)
    m = [p for p in params if p.startswith("m_")]
    assert len(m) == len(kernels.MEMORY_KEYS)
    assert all(key.startswith(p[2:]) for p, key in zip(m, kernels.MEMORY_KEYS)), (m,)

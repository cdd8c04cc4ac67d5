"""One frame convention (issue 20, item 2): every result with rows has ``.to_frame()``; the retired
spellings (``.frame``, ``.frame()``, ``.to_frames()``) still answer, with a DeprecationWarning;
``add_many`` takes a DataFrame; the store's list reads have a frame form (zh and en memories)."""

from __future__ import annotations

import ast
import dataclasses
import math
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import memlab
from memlab.clock import FixedClock
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.frames import Records
from memlab.types import MemoryRecord

T0 = 1_750_000_000.0
HCFG = MemlabConfig().replace(**{"embedding.backend": "hashing", "recall.floor_mode": "absolute",
                                 "recall.relevance_floor": 0.0})
MEMLAB = Path(memlab.__file__).resolve().parent


@pytest.fixture
def store():
    st = memlab.open_store(":memory:", config=HCFG, clock=FixedClock(T0))
    yield st
    st.close()


def test_add_many_takes_a_dataframe_as_it_takes_dicts(store):
    """The frame's rows are the items; a missing value is a field not given, so a row without
    an importance gets the §5 scorer's, exactly as a dict without the key does."""
    when = datetime(2025, 6, 1, tzinfo=timezone.utc)
    frame = pd.DataFrame({"id": ["m1", "m2", "m3"],
                          "text": ["用户最喜欢玩星露谷物语", "Bob adopted a cat named Momo",
                                   "用户对咖啡因过敏"],
                          "importance": [0.9, np.nan, 0.8],
                          "timestamp": [pd.Timestamp(when), pd.NaT, pd.Timestamp(when)]})
    stored = store.add_many(frame)
    assert [r.id for r in stored] == ["m1", "m2", "m3"]
    assert stored[0].importance == 0.9 and stored[2].importance == 0.8
    assert stored[0].timestamp == when.timestamp() and stored[1].timestamp == T0   # the clock
    with memlab.open_store(":memory:", config=HCFG, clock=FixedClock(T0)) as other:
        as_dicts = other.add_many([{"id": "m2", "text": "Bob adopted a cat named Momo"}])
    assert stored[1].importance == as_dicts[0].importance                # the scorer's value
    out = stored.to_frame()
    assert list(out["id"]) == ["m1", "m2", "m3"] and out.loc[1, "text"].startswith("Bob")
    assert list(out.columns) == [f.name for f in dataclasses.fields(MemoryRecord)]


def test_a_bad_frame_is_refused_and_nothing_is_stored(store):
    with pytest.raises(InvalidInput, match="items.columns"):
        store.add_many(pd.DataFrame({0: ["no field name"]}))
    with pytest.raises(InvalidInput, match="importance"):
        store.add_many(pd.DataFrame({"text": ["ok", "bad"], "importance": [0.5, 7.0]}))
    assert len(store) == 0


def test_list_reads_have_a_frame_form(store):
    a = store.add("用户对咖啡因过敏", importance=0.8)
    b = store.add("I play the violin", importance=0.7)
    got = store.get([b.id, a.id])
    assert isinstance(got, list) and got == [b, a]                        # still a list
    frame = got.to_frame()
    assert list(frame["id"]) == [b.id, a.id] and list(frame["importance"]) == [0.7, 0.8]
    store.pin(a.id)
    assert list(store.pinned().to_frame()["text"]) == ["用户对咖啡因过敏"]
    assert list(store.history(a.id).to_frame()["id"]) == [a.id]
    none = store.contradictions().to_frame()
    assert len(none) == 0 and "fact_key" in none.columns                 # columns even when empty
    n, page = store.list_memories(limit=10)
    assert n == 2 and set(page.to_frame()["id"]) == {a.id, b.id}
    assert Records([], columns=["x"]).to_frame().columns.tolist() == ["x"]


def test_recall_and_reader_results_use_to_frame(store):
    store.add("Bob adopted a cat named Momo", importance=0.6)
    store.add("小明喜欢星露谷物语", importance=0.6)
    res = store.recall("cat Momo", k=2)
    frame = res.to_frame()
    assert frame.loc[0, "text"] == "Bob adopted a cat named Momo"
    frame.loc[0, "text"] = "changed"                                     # a copy
    assert res.to_frame().loc[0, "text"] == "Bob adopted a cat named Momo"
    with pytest.warns(DeprecationWarning, match=r"RecallResult.frame is deprecated: use "
                                                r"RecallResult.to_frame\(\)"):
        old = res.frame
    pd.testing.assert_frame_equal(old, res.to_frame())
    ctx = store.build_rag_context("星露谷物语", k=2, now=T0)
    assert ctx.to_frame().loc[0, "text"] == "小明喜欢星露谷物语"
    with pytest.warns(DeprecationWarning, match="ReaderResult.to_frame"):
        pd.testing.assert_frame_equal(ctx.frame, ctx.to_frame())


def test_retired_spellings_warn_and_answer_the_same(tiny_bench, tmp_path):
    from memlab.jobs import Worker, enqueue

    items, qs = tiny_bench.to_frame("items"), tiny_bench.to_frame("questions")
    assert len(items) == 6 and len(qs) == 4 and str(items["timestamp"].dt.tz) == "UTC"
    with pytest.warns(DeprecationWarning, match="to_frames"):
        old = tiny_bench.to_frames()
    pd.testing.assert_frame_equal(old[0], items)
    pd.testing.assert_frame_equal(old[1], qs)
    with pytest.raises(InvalidInput, match="part"):
        tiny_bench.to_frame("memories")
    with memlab.open_store(tmp_path / "s.sqlite", config=HCFG, clock=FixedClock(T0)) as st:
        enqueue(st._store, "cleanup_usage", now=T0)
        w = Worker(st._store, clock=FixedClock(T0))
        report = w.run()
        assert list(report.to_frame()["outcome"]) == ["done"]
        with pytest.warns(DeprecationWarning, match=r"Worker.to_frame\(\)"):
            pd.testing.assert_frame_equal(w.frame(), w.to_frame())


def test_every_retired_spelling_in_memlab_warns():
    """Every ``frame`` method or property and every ``to_frames`` left in memlab is an alias
    that calls :func:`memlab.frames.renamed` (a DeprecationWarning), and its class has
    ``to_frame`` (or, for the evaluator, ``per_query``)."""
    found = []
    for path in MEMLAB.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
            methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
            for name in ("frame", "to_frames"):
                fn = methods.get(name)
                if fn is None:
                    continue
                calls = {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call)
                         and isinstance(c.func, ast.Name)}
                found.append(f"{path.name}:{cls.name}.{name}")
                assert "renamed" in calls, f"{path}: {cls.name}.{name} does not warn"
                assert {"to_frame", "per_query"} & set(methods), cls.name
    assert len(found) >= 8, found


@pytest.mark.parametrize("cls", [
    "memlab.recall.result:RecallResult", "memlab.recall.reader:ReaderResult",
    "memlab.recall.score:Scored", "memlab.jobs.worker:Worker", "memlab.jobs.worker:RunReport",
    "memlab.chat:ChatSession", "memlab.bench.datasets.canonical:Dataset",
    "memlab.tune.evaluate:QueryScores", "memlab.tune.report:SweepResult",
    "memlab.bench.run:BenchOutcome", "memlab.bench.run:PresetResult",
    "memlab.tune.crossfit:CrossFit", "memlab.tune.fit:LinearFit",
    "memlab.workspace.sync:ImportResult", "memlab.frames:Records", "memlab.status:StoreStatus",
    "memlab.write.feedback:FeedbackReport", "memlab.lifecycle.consolidate:Plan",
    "memlab.vram.trace:Trace"])
def test_results_with_rows_have_to_frame(cls):
    import importlib

    module, name = cls.split(":")
    assert callable(getattr(getattr(importlib.import_module(module), name), "to_frame"))


def test_nan_fields_of_a_frame_are_not_given():
    from memlab.frames import frame_items

    f = pd.DataFrame({"text": ["a", "b"], "importance": [math.nan, 0.5],
                      "speaker": [None, "Ann"]})
    assert frame_items(f) == [{"text": "a"}, {"text": "b", "importance": 0.5, "speaker": "Ann"}]

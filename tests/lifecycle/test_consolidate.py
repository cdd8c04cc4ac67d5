"""The consolidator (familiars §5.9, issue 10 item 6).

Done when: on a generated set of near-duplicates it merges exactly the clusters above the
threshold, and a pinned duplicate stays. The vectors are chosen, not learned: a fake embedder
returns for each text a unit vector built so that every pairwise cosine is known. Members of one
group share a base direction ``b`` and each has its own orthogonal direction ``e_i``:
``v_i = sqrt(c) b + sqrt(1 - c) e_i``, so ``cos(v_i, v_j) = c`` for i != j, and members of
different groups are orthogonal (cosine 0).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.errors import InvalidInput, LLMError
from memlab.llm import RecordedLLM
from memlab.lifecycle.consolidate import (apply_plan, consolidate, extractive,
                                          plan_consolidation, plan_frame)
from memlab.config import MemlabConfig
from memlab.store import Store
from memlab.store.scan import iter_records
from memlab.types import MemoryRecord

THRESHOLD = 0.9
ABOVE, BELOW = 0.95, 0.85     # pairwise cosines of a group that merges and one that does not


class ChosenEmbedder:
    """Returns the vector chosen for each text (KeyError for any other: a test never embeds a
    text it did not plan)."""

    name = "chosen"

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.dim = len(next(iter(vectors.values())))
        digest = hashlib.sha1(repr(sorted((t, v.tobytes()) for t, v in vectors.items()))
                              .encode()).hexdigest()[:8]
        self.version = f"chosen-{digest}"

    def embed_documents(self, texts):
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)

    embed_queries = embed_documents


class Space:
    """Orthogonal unit directions handed out one at a time."""

    def __init__(self, dim: int) -> None:
        self.eye, self.next = np.eye(dim), 0

    def take(self) -> np.ndarray:
        self.next += 1
        return self.eye[self.next - 1]

    def group(self, n: int, cos: float) -> list[np.ndarray]:
        b = self.take()
        return [math.sqrt(cos) * b + math.sqrt(1 - cos) * self.take() for _ in range(n)]


def _cfg(**kw) -> MemlabConfig:
    return MemlabConfig().replace(**{"consolidation.similarity_threshold": THRESHOLD, **kw})


def _rec(i: str, text: str, **kw) -> MemoryRecord:
    kw.setdefault("scope", "user")
    kw.setdefault("category", "preference")
    return MemoryRecord(id=i, text=text, **kw)


def _store(path: Path, recs: list[MemoryRecord], cfg: MemlabConfig) -> Store:
    st = Store.open(path, config=cfg)
    st.add(recs, terms=[[] for _ in recs], entities=[[] for _ in recs])
    return st


def _texts(n: int, g: int, zh: bool) -> list[str]:
    return [f"用户喜欢第{g}种茶，第{i}次提到" if zh else f"the user likes tea number {g}, mention {i}"
            for i in range(n)]


@settings(max_examples=30)
@given(st.lists(st.tuples(st.integers(1, 4), st.booleans(), st.booleans()), min_size=1,
                max_size=6),
       st.sampled_from(["average", "complete", "single"]))
def test_exactly_the_groups_above_the_threshold_are_merged(tmp_path_factory, groups, linkage):
    """Generated groups: (size, above the threshold?, zh?). Every linkage agrees here: within a
    group all cosines are equal, across groups 0."""
    space = Space(64)
    recs, vectors, expected = [], {}, []
    for g, (n, above, zh) in enumerate(groups):
        ids = [f"m_{g}_{i}" for i in range(n)]
        cos = ABOVE if above else BELOW
        for i, (t, v) in enumerate(zip(_texts(n, g, zh), space.group(n, cos))):
            vectors[t] = v
            recs.append(_rec(ids[i], t, timestamp=float(g * 10 + i)))
        if above and n >= 2:
            expected.append(tuple(ids))
    cfg = _cfg(**{"consolidation.linkage": linkage})
    path = tmp_path_factory.mktemp("c") / "s.sqlite"
    with _store(path, recs, cfg) as st:
        plan, added = consolidate(st, embedder=ChosenEmbedder(vectors))
        assert sorted(c.source_ids for c in plan.clusters) == sorted(expected)
        assert sorted(r.derived_from for r in added) == sorted(expected)
        deprecated = {r.id for r in iter_records(st.conn) if r.deprecated}
        assert deprecated == {i for ids in expected for i in ids}
        for c in plan.clusters:   # cosine to the medoid: 1 for itself, ABOVE for the others
            assert sorted(np.round(c.similarity, 6)) == [ABOVE] * (len(c.sources) - 1) + [1.0]


def test_a_pinned_duplicate_stays_and_other_cells_owners_and_reverie_are_apart(tmp_path):
    space = Space(32)
    dup = space.group(4, ABOVE)     # the same near-duplicate direction everywhere
    texts = ["我喜欢喝绿茶", "我很喜欢喝绿茶", "I like green tea", "I really like green tea"]
    vectors = dict(zip(texts, dup))
    recs = [_rec("m_a", texts[0], timestamp=1.0, importance=0.3, tags=("茶",)),
            _rec("m_b", texts[1], timestamp=2.0, importance=0.8, tags=("tea", "茶")),
            _rec("m_pin", texts[2], timestamp=3.0, pinned=True),                 # pinned
            _rec("m_other_cell", texts[3], scope="dialogue", category="preference",
                 dialogue_id="d1"),
            _rec("m_other_owner", texts[3], user_id="bob"),
            _rec("m_reverie", texts[2], scope=None, category=None),
            _rec("m_old", texts[3], deprecated=True),
            _rec("m_expired", texts[3], lifecycle_state="expired")]
    with _store(tmp_path / "s.sqlite", recs, _cfg()) as st:
        plan, [new] = consolidate(st, embedder=ChosenEmbedder(vectors))
        assert [c.source_ids for c in plan.clusters] == [("m_a", "m_b")]
        assert plan.pinned == 1
        got = {r.id: r for r in iter_records(st.conn)}
        assert not got["m_pin"].deprecated and "m_pin" not in new.derived_from
        assert {i for i, r in got.items() if r.deprecated} == {"m_a", "m_b", "m_old"}
        assert (new.derived_from, new.scope, new.category, new.agent_id, new.user_id) == \
            (("m_a", "m_b"), "user", "preference", "agent_0", "user_0")
        assert new.importance == 0.8 and new.tags == ("茶", "tea") and new.timestamp == 2.0
        assert new.id.startswith("m_") and len(new.id) == 10 and not new.deprecated
        assert got[new.id] == new


def test_dropping_the_pinned_filter_would_merge_the_pin(tmp_path):
    """The break the test above guards: with the pin removed, the same entry is merged."""
    space = Space(8)
    texts = ["I like green tea", "I really like green tea"]
    vectors = dict(zip(texts, space.group(2, ABOVE)))
    with _store(tmp_path / "s.sqlite", [_rec("m_1", texts[0]), _rec("m_2", texts[1], pinned=True)],
                _cfg()) as st:
        assert plan_consolidation(st, embedder=ChosenEmbedder(vectors)).clusters == []
        st.repo.update_fields("m_2", pinned=False)
        assert [c.source_ids for c in plan_consolidation(
            st, embedder=ChosenEmbedder(vectors)).clusters] == [("m_1", "m_2")]


@pytest.mark.parametrize("cos, merged", [(0.91, True), (0.89, False)])
def test_the_threshold_is_the_cosine_between_two_entries(tmp_path, cos, merged):
    space = Space(8)
    texts = ["用户养了一只猫叫Momo", "用户有只猫名叫Momo"]
    vectors = dict(zip(texts, space.group(2, cos)))
    with _store(tmp_path / "s.sqlite", [_rec("m_1", texts[0]), _rec("m_2", texts[1])],
                _cfg()) as st:
        plan = plan_consolidation(st, embedder=ChosenEmbedder(vectors))
    assert bool(plan.clusters) is merged


def test_linkage_decides_a_chain(tmp_path):
    """A~B and B~C above the threshold (0.79), A~C far below: single linkage chains all three,
    complete keeps the closest pair, average joins C by the mean cosine; the config decides."""
    angles = {"tea A": 0.0, "tea B": 0.35, "tea C": 0.8}
    vectors = {t: np.array([math.cos(x), math.sin(x)]) for t, x in angles.items()}
    ab, bc, ac = math.cos(0.35), math.cos(0.45), math.cos(0.8)     # 0.939, 0.900, 0.697
    threshold = 0.79
    assert ab > bc > threshold > (ac + bc) / 2 - 0.01 and (ac + bc) / 2 > threshold > ac
    out = {}
    for linkage in ("single", "complete", "average"):
        with _store(tmp_path / f"{linkage}.sqlite", [_rec(f"m_{t[-1]}", t) for t in angles],
                    _cfg(**{"consolidation.similarity_threshold": threshold,
                            "consolidation.linkage": linkage})) as st:
            out[linkage] = [c.source_ids for c in plan_consolidation(
                st, embedder=ChosenEmbedder(vectors)).clusters]
    # A-B merge first (0.939); then (A,B)-C: single max(0.697, 0.900), complete min, average mean
    assert out == {"single": [("m_A", "m_B", "m_C")], "complete": [("m_A", "m_B")],
                   "average": [("m_A", "m_B", "m_C")]}


def test_dry_run_changes_nothing_in_the_file(tmp_path):
    space = Space(8)
    texts = ["我喜欢喝绿茶", "我很喜欢喝绿茶"]
    vectors = dict(zip(texts, space.group(2, ABOVE)))
    path = tmp_path / "s.sqlite"
    _store(path, [_rec("m_1", texts[0]), _rec("m_2", texts[1])], _cfg()).close()
    before = path.read_bytes()
    with Store.open(path, config=_cfg()) as st:
        plan, added = consolidate(st, embedder=ChosenEmbedder(vectors), dry_run=True)
        assert len(plan.clusters) == 1 and added == []
    assert path.read_bytes() == before


def test_the_plan_as_a_dataframe(tmp_path):
    space = Space(8)
    texts = ["I like green tea.", "I like green tea. My cat is Momo."]
    vectors = dict(zip(texts, space.group(2, ABOVE)))
    with _store(tmp_path / "s.sqlite", [_rec("m_1", texts[0], timestamp=1.0),
                                         _rec("m_2", texts[1], timestamp=2.0)], _cfg()) as st:
        frame = plan_frame(st, embedder=ChosenEmbedder(vectors))
    assert list(frame["id"]) == ["m_1", "m_2"] and list(frame["cluster"]) == [1, 1]
    assert list(frame["medoid"]) == [True, False]          # a tie: the oldest
    assert np.allclose(frame["similarity"], [1.0, ABOVE])
    assert set(frame["synthesis"]) == {"I like green tea. My cat is Momo."}
    assert {"scope", "category", "text"} <= set(frame.columns)


def test_extractive_synthesis_keeps_the_medoid_and_adds_only_new_sentences():
    cfg = MemlabConfig()
    # zh: the paraphrase adds no new terms worth it, the new fact is appended
    assert extractive("我喜欢喝绿茶。", ["我很喜欢喝绿茶。我住在北京。"], cfg) == "我喜欢喝绿茶。我住在北京。"
    # en: "really" alone is under the novelty bar; the cat is not
    assert extractive("I like green tea", ["I really like green tea. My cat is Momo."], cfg) \
        == "I like green tea. My cat is Momo."
    # the character cap: a sentence that would pass it is left out, the medoid is kept whole
    small = cfg.replace(**{"consolidation.extractive_max_chars": 20})
    assert extractive("I like green tea", ["My cat is Momo and she is grey."], small) \
        == "I like green tea"


def test_llm_synthesis_through_the_protocol(tmp_path):
    space = Space(8)
    texts = ["I like green tea", "I really like green tea"]
    vectors = dict(zip(texts, space.group(2, ABOVE)))
    cfg = _cfg(**{"consolidation.synthesis": "llm"})
    llm = RecordedLLM(["The user likes green tea very much."])
    with _store(tmp_path / "s.sqlite", [_rec("m_1", texts[0]), _rec("m_2", texts[1])], cfg) as st:
        with pytest.raises(InvalidInput, match="pass an LLM"):
            plan_consolidation(st, embedder=ChosenEmbedder(vectors))
        plan, [new] = consolidate(st, embedder=ChosenEmbedder(vectors), llm=llm)
    assert new.text == "The user likes green tea very much."
    [prompt] = llm.prompts
    assert "user/preference" in prompt and "- I like green tea\n- I really like green tea" in prompt


def test_a_failure_leaves_the_store_unchanged(tmp_path):
    space = Space(16)
    texts = ["tea one", "tea one again", "cat two", "cat two again"]
    vectors = dict(zip(texts, space.group(2, ABOVE) + space.group(2, ABOVE)))
    recs = [_rec(f"m_{i}", t) for i, t in enumerate(texts)]
    with _store(tmp_path / "s.sqlite", recs, _cfg()) as st:
        before = list(iter_records(st.conn))
        plan = plan_consolidation(st, embedder=ChosenEmbedder(vectors))
        assert len(plan.clusters) == 2
        st.repo.update_fields("m_3", pinned=True)       # the second cluster is stale now
        with pytest.raises(InvalidInput, match="stale") as err:
            apply_plan(st, plan)
        assert err.value.value == "m_3"
        after = list(iter_records(st.conn))
        assert [r for r in after if r.id != "m_3"] == [r for r in before if r.id != "m_3"]
        # an LLM that fails: nothing planned, nothing written
        cfg = _cfg(**{"consolidation.synthesis": "llm"})
        with pytest.raises(LLMError):
            consolidate(st, embedder=ChosenEmbedder(vectors), llm=RecordedLLM([]), config=cfg)
        assert list(iter_records(st.conn)) == after


def test_cli_dry_run_prints_and_writes_nothing_then_consolidates(tmp_path):
    from typer.testing import CliRunner

    from memlab.cli import app

    path = tmp_path / "s.sqlite"
    texts = ["I like green tea very much", "I like green tea very much indeed. My cat is Momo.",
             "我喜欢喝绿茶", "我很喜欢喝绿茶。我住在北京。", "The weather is cold today"]
    _store(path, [_rec(f"m_{i}", t, timestamp=float(i)) for i, t in enumerate(texts)],
           _cfg()).close()
    before = path.read_bytes()
    args = ["consolidate", str(path), "--set", "embedding.backend=hashing",
            "--set", "consolidation.similarity_threshold=0.5"]
    runner = CliRunner()
    dry = runner.invoke(app, args + ["--dry-run", "--agent", "agent_0", "--user", "user_0"],
                        catch_exceptions=False)
    assert dry.exit_code == 0, dry.output
    assert "cluster 1: user/preference agent=agent_0 user=user_0: 2 entries" in dry.stdout
    assert "=> I like green tea very much. My cat is Momo." in dry.stdout
    assert "=> 我喜欢喝绿茶。我住在北京。" in dry.stdout
    assert "dry run: nothing written" in dry.stdout
    assert path.read_bytes() == before
    done = runner.invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 0 and "wrote 2 consolidated entries" in done.stdout
    with Store.open(path) as st:
        recs = list(iter_records(st.conn))
    assert sorted(r.id for r in recs if r.deprecated) == ["m_0", "m_1", "m_2", "m_3"]
    assert sorted(r.derived_from for r in recs if r.derived_from) == [("m_0", "m_1"),
                                                                    ("m_2", "m_3")]


def test_the_facade_consolidates_the_default_tenant_with_its_embedder(tmp_path):
    import memlab

    cfg = _cfg(**{"embedding.backend": "hashing", "consolidation.similarity_threshold": 0.5})
    with memlab.open_store(tmp_path / "s.sqlite", config=cfg) as st:
        st.add_many([{"id": "m_1", "text": "我喜欢喝绿茶", "scope": "user",
                      "category": "preference"},
                     {"id": "m_2", "text": "我很喜欢喝绿茶。", "scope": "user",
                      "category": "preference"},
                     {"id": "m_3", "text": "我喜欢喝绿茶", "scope": "user",
                      "category": "preference", "user_id": "bob"}])
        plan, added = st.consolidate(dry_run=True)
        assert [c.source_ids for c in plan.clusters] == [("m_1", "m_2")] and added == []
        plan, [new] = st.consolidate()
        assert new.derived_from == ("m_1", "m_2") and st.get([new.id]) == [new]
        ws = tmp_path / "ws"
        assert st.export_workspace(ws).records == 4
    with memlab.open_store(tmp_path / "t.sqlite", config=cfg) as other:
        assert other.import_workspace(ws).records == 4
        assert other.get([new.id])[0].derived_from == ("m_1", "m_2")


def test_the_plan_figure_shows_each_source_against_the_threshold(tmp_path):
    """memlab.plots.consolidation_plan: one bar per source, its cosine to the medoid (1 for the
    medoid, ABOVE for the others), the threshold line; an empty plan says so."""
    from memlab.plots import consolidation_plan

    space = Space(16)
    texts = _texts(3, 0, True)
    vectors = dict(zip(texts, space.group(3, ABOVE)))
    recs = [_rec(f"m_{i}", t, timestamp=float(i)) for i, t in enumerate(texts)]
    with _store(tmp_path / "s.sqlite", recs, _cfg()) as st:
        plan, _ = consolidate(st, embedder=ChosenEmbedder(vectors), dry_run=True)
    fig = consolidation_plan(plan, threshold=THRESHOLD)
    ax = fig.axes[0]
    assert ax.get_title() == "user/preference: consolidation plan, cosine to the medoid"
    assert sorted(round(p.get_width(), 6) for p in ax.patches) == [ABOVE, ABOVE, 1.0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sum(label.endswith("(medoid)") for label in labels) == 1
    assert sorted(label.split(": ")[1].split(" ")[0] for label in labels) == ["m_0", "m_1", "m_2"]
    assert all(label.startswith("#") and "user/preference" in label for label in labels)
    assert ax.get_lines()[0].get_xdata()[0] == THRESHOLD
    empty = consolidation_plan(type(plan)(candidates=2, groups=1))
    assert "nothing to consolidate (2 live entries in 1 cells)" in empty.axes[0].texts[0].get_text()

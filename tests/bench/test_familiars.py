"""The familiars preset: replay builds one dialogue tree per conversation and its distances reach
the raw-signal table, which the dialog_tree scorer ranks; bench --compare and sweeps run it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import memlab
from memlab.bench.datasets.canonical import Card, Dataset, Item, Question
from memlab.bench.replay import render_item, replay
from memlab.bench.run import features_key, resolve_preset, run_bench
from memlab.bench.tree import ConversationTree, user_speaker
from memlab.config import describe
from memlab.dialog import DialogTree
from memlab.embed import HashingEmbedder
from memlab.tune.space import resolve_space

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _chat() -> Dataset:
    """Two speakers (LoCoMo-like): Mei opens, so Mei asks (Q), Tom answers (A); zh and en."""
    turns = [("Mei", "我下周去东京出差"), ("Tom", "需要我帮你订新宿的酒店吗？"),
             ("Mei", "好的，预算每晚一千五"), ("Tom", "Booked: Hotel Gracery Shinjuku"),
             ("Tom", "Also, your passport expires in May"),
             ("Mei", "Recommend a sci-fi novel for the flight"), ("Tom", "Try The Three-Body Problem"),
             ("Mei", "我的护照什么时候过期？")]
    items = [Item("c1", f"t{i}", "s1", sp, text, at(i)) for i, (sp, text) in enumerate(turns)]
    questions = [Question("c1", "q1", "我住哪家酒店？", at(4.5), "hotel", ("t3",)),
                 Question("c1", "q2", "What book did Tom recommend?", at(30), "book", ("t6",))]
    card = Card(name="familiars-chat", version="1", language="mixed", license="CC0-1.0",
                source="memlab tests", granularity="turn", description="two speakers")
    return Dataset(card, items, questions)


def _cfg(tmp_path, **over):
    base = memlab.load_config(resolve_preset("familiars")[1], overrides={
        "embedding.backend": "hashing", "bench.cache_dir": str(tmp_path / "cache"), **over})
    return base


class _NoCache:
    def get_many(self, key, texts):
        return {}

    def put_many(self, key, texts, vecs):
        pass


def test_roles_follow_the_speakers():
    ds = _chat()
    items = ds.items_of("c1")
    assert user_speaker(items) == "Mei"
    assert user_speaker([Item("c", "1", "s", "assistant", "hi", T0),
                         Item("c", "2", "s", "User", "hello", T0)]) == "User"
    conv = ConversationTree(items, memlab.MemlabConfig())
    vecs = HashingEmbedder().embed_documents([it.text for it in items])
    conv.add(items, vecs)
    kinds = [(n.node_type, n.origin) for n in conv.tree.nodes]
    assert kinds == [("Q", "user"), ("A", "response"), ("Q", "user"), ("A", "response"),
                     ("A", "proactive"), ("Q", "user"), ("A", "response"), ("Q", "user")]
    assert conv.tree[1].parent == 0 and conv.tree[3].parent == 2 and conv.tree[6].parent == 5
    assert conv.tree.node_of_memory("t4") == 4


def test_replay_fills_the_tree_distance_of_each_question_from_its_anchor(tmp_path):
    """The table's distances are those of a tree built by hand from the same turns and vectors
    (the turns written by each question's time), looked up by the candidate's item id."""
    ds, cfg = _chat(), _cfg(tmp_path)
    emb = HashingEmbedder()
    rep = replay(ds, cfg=cfg, embedder=emb, cache=_NoCache(), progress=False)
    table = rep.features.table
    assert table["tree_distance"].notna().any()
    items = ds.items_of("c1")
    for qid, q in enumerate(sorted(ds.questions_of("c1"), key=lambda x: x.asked_at)):
        upto = [it for it in items if it.timestamp <= q.asked_at]
        tree = DialogTree(cfg=cfg)
        vecs = emb.embed_documents([render_item(it, cfg.bench.render_template) for it in upto])
        for it, v in zip(upto, vecs):
            if it.speaker == "Mei":
                tree.add_question(it.text, timestamp=it.timestamp.timestamp(), embedding=v)
            elif tree.nodes[-1].node_type == "Q":
                tree.add_response(it.text, timestamp=it.timestamp.timestamp(), embedding=v)
            else:
                tree.add_proactive(it.text, timestamp=it.timestamp.timestamp(), embedding=v)
            tree.link_memory(len(tree) - 1, it.item_id)
        anchor = tree.anchor(timestamp=q.asked_at.timestamp(),
                             embedding=emb.embed_queries([q.text])[0])
        want = tree.memory_distances(anchor)
        rows = table[table["qid"] == qid]
        assert len(rows)
        for row, hops in zip(rows["row"], rows["tree_distance"]):
            expect = want.get(rep.row_item[int(row)])
            assert (np.isnan(hops) if expect is None else hops == expect)
    assert rep.counts["dialog tree: roots"] == len(tree.roots) and rep.counts["items"] == 8
    assert rep.counts["dialog tree: questions with an anchor"] + \
        rep.counts.get("dialog tree: questions without an anchor", 0) == 2
    # without the tree (the other presets): unknown throughout
    plain = replay(ds, cfg=cfg.replace(**{"bench.dialog_tree": False}), embedder=emb,
                   cache=_NoCache(), progress=False)
    assert plain.features.table["tree_distance"].isna().all()


def test_the_attach_fields_are_candidates_stage_and_change_the_features_key(tmp_path):
    stages = {r["key"]: r["stage"] for r in describe()}
    for key in ("alpha", "beta", "delta", "tau_attach", "recency_tau"):
        assert stages[f"dialog_tree.{key}"] == "candidates"
    assert stages["dialog_tree.gamma"] == stages["dialog_tree.tree_tau"] == "score"
    assert stages["bench.dialog_tree"] == "candidates"
    cfg = _cfg(tmp_path)
    assert features_key(cfg.replace(**{"dialog_tree.tau_attach": 0.1})) != features_key(cfg)
    assert features_key(cfg.replace(**{"dialog_tree.gamma": 0.9})) == features_key(cfg)


def test_bench_compares_familiars_with_the_baselines(tiny_bench_folder, tmp_path):
    over = {"embedding.backend": "hashing", "bench.cache_dir": str(tmp_path / "cache")}
    presets = [(name, memlab.load_config(resolve_preset(name)[1], overrides=over))
               for name in ("cosine", "hybrid_rrf", "familiars")]
    out = run_bench(dataset=str(tiny_bench_folder), presets=presets, progress=False)
    fam = out.results[-1]
    assert fam.name == "familiars" and fam.config.fusion.scorer == "dialog_tree"
    assert set(fam.aggregate.loc["all"].index) >= {"ndcg@10", "recall@10"}
    # every gold item the dense route finds first for cosine is still found by familiars
    assert fam.aggregate.loc["all", "recall@10"] >= 0.5
    assert out.significance is not None


def test_the_sweep_space_loads_and_runs(tiny_bench_folder, tmp_path):
    space = resolve_space("familiars")
    assert space.preset == "familiars"
    assert set(space.keys) == {f"dialog_tree.{k}" for k in (
        "alpha", "beta", "gamma", "delta", "tau_attach", "recency_tau", "tree_tau")}
    res = memlab.sweep(dataset=str(tiny_bench_folder), space="familiars", trials=3,
                       sampler="random", out_dir=tmp_path, progress=False,
                       overrides={"embedding.backend": "hashing",
                                  "bench.cache_dir": str(tmp_path / "cache")})
    assert (res.trials["state"] == "COMPLETE").all() and len(res.trials) == 3

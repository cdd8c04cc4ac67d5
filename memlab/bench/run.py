"""A benchmark run: load a dataset, replay it once per candidate configuration, score every preset
on the same raw signals, compute metrics overall and per category, and report.

``memlab bench`` is a thin CLI over :func:`run_bench`.
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.bench import metrics as M
from memlab.bench.datasets import registry
from memlab.bench.datasets.canonical import Dataset
from memlab.bench.environment import environment, environment_line
from memlab.bench.featcache import cached_replay, features_key  # noqa: F401 (features_key: public here too)
from memlab.bench.goldage import gold_columns, with_gold_columns
from memlab.bench.parallel import replay_parallel
from memlab.bench.replay import (ROWS_PER_CONVERSATION, Replayed, card_config, ranked_per_question,
                                  replay)
from memlab.bench.significance import compare_with_config, format_p
from memlab.config import MemlabConfig, describe
from memlab.embed.numerics import numerics_key
from memlab.errors import ConfigError, DatasetError, EmbeddingUnavailable, InvalidInput
from memlab.recall.score import score as score_table
from memlab.recall.features import n_rows
from memlab.recall.select import select

REPO_ROOT = Path(__file__).resolve().parents[2]
PRESET_DIRS = (Path("experiments/configs"), REPO_ROOT / "experiments" / "configs")


def resolve_preset(name_or_path: str) -> tuple[str, Path]:
    """A preset name (``reverie``) or a YAML path -> (name, path)."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p.stem, p
    for d in PRESET_DIRS:
        cand = d / f"{name_or_path}.yaml"
        if cand.exists():
            return name_or_path, cand
    known = sorted({f.stem for d in PRESET_DIRS if d.exists() for f in d.glob("*.yaml")})
    raise ConfigError("preset", f"unknown preset; known: {', '.join(known)} (or a YAML path)",
                      name_or_path)


def rank(rep: Replayed, cfg: MemlabConfig) -> dict[str, list[str]]:
    """Score the raw signals with ``cfg`` and select up to `ranked_per_question` memories each.

    Keys are ``conversation_id::query_id``; items are ``conversation_id::item_id`` (item ids are
    only unique within a conversation)."""
    k = ranked_per_question(cfg)
    table = rep.features.columns            # arrays (memory-mapped from the feature cache)
    out: dict[str, list[str]] = {}
    keys = question_keys(rep)
    convs = rep.questions["conversation_id"].tolist()
    if not n_rows(table):
        return {key: [] for key in keys}
    scored = score_table(table, cfg)
    picks = select(table, scored, terms=rep.features.terms, k=k, cfg=cfg)
    rows = np.asarray(table["row"])
    for qid, key in enumerate(keys):
        pos = picks[qid] if qid < len(picks) else np.zeros(0, int)
        out[key] = [f"{convs[qid]}::{rep.row_item[int(r)]}" for r in rows[pos]]
    return out


def question_keys(rep: Replayed) -> list[str]:
    """``conversation_id::query_id`` of every question, in qid order: the key of rankings,
    qrels and per-query frames (query ids are only unique within a conversation)."""
    q = rep.questions
    return [f"{c}::{i}" for c, i in zip(q["conversation_id"], q["query_id"])]


def item_sessions(ds: Dataset) -> dict[str, str]:
    """``conversation::item`` -> ``conversation::session`` for every item of ``ds`` (gold items a
    replay never retrieved included): what session-level metrics map through."""
    return {f"{c}::{it.item_id}": f"{c}::{it.session_id}"
            for c in ds.conversations() for it in ds.items_of(c)}


def qrels_of(rep: Replayed) -> dict[str, list[str]]:
    return {f"{c}::{q}": [f"{c}::{e}" for e in ev]
            for c, q, ev in zip(rep.questions["conversation_id"], rep.questions["query_id"],
                                rep.questions["evidence"])}


@dataclass
class PresetResult:
    name: str
    config: MemlabConfig
    per_query: pd.DataFrame
    aggregate: pd.DataFrame
    session_aggregate: pd.DataFrame | None
    rankings: dict[str, list[str]]
    timings: dict[str, float] = field(default_factory=dict)
    abstention: pd.DataFrame | None = None   # M.abstention: overall and per question language

    def to_frame(self) -> pd.DataFrame:
        """``per_query`` (a copy): one row per answerable question, its metrics and category."""
        return self.per_query.copy()

    def ranking_counts(self) -> dict[str, int]:
        """Questions whose ranking is empty, and shorter than bench.k and than the largest
        cut-off (a conversation with fewer memories, or a relevance floor, leaves it short)."""
        answerable = self.per_query.index   # an unanswerable question should rank nothing
        lengths = np.fromiter((len(self.rankings[q]) for q in answerable), int, len(answerable))
        out = {"per_question": ranked_per_question(self.config), "empty": int((lengths == 0).sum())}
        for k in sorted({self.config.bench.k, max(self.config.bench.ks)}):
            out[f"fewer_than_{k}"] = int((lengths < k).sum())
        return out


@dataclass
class BenchOutcome:
    dataset: Dataset
    results: list[PresetResult]
    timings: dict[str, float]
    counts: dict[str, int]
    embedder_version: str
    significance: pd.DataFrame | None = None   # significance.compare_presets: vs the first preset
    vram: Any = None   # memlab.bench.vramgate.BenchVRAM: the gate the run's models went through
    #: where it ran (memlab.bench.environment): versions, commit, CPU, embedder numerics
    environment: dict[str, Any] | None = None
    #: set by memlab.bench (memlab.bench.workbench): the run folder, the files and runs that could not
    #: be written ({"path", "error"}), the MLflow runs (memlab.bench.track.track_outcome)
    run_dir: Path | None = None
    artifact_errors: list[dict[str, str]] | None = None
    mlflow_runs: dict[str, dict[str, Any]] | None = None

    def to_frame(self) -> pd.DataFrame:
        """Every preset's ``per_query`` stacked: one row per (preset, question), indexed by
        ``preset`` and ``question``."""
        return pd.concat({r.name: r.per_query for r in self.results},
                         names=["preset", "question"])

    def significance_json(self) -> dict[str, Any] | None:
        """The paired tests against the first preset: settings, then per preset and metric the
        difference of means and the p-value. None with a single preset."""
        sig = self.significance
        if sig is None:
            return None
        vs = {name: {str(m): {"diff": round(float(row["diff"]), 6), "p": round(float(row["p"]), 6)}
                     for m, row in sig.loc[name].iterrows()}
              for name in sig.index.unique("preset") if name != sig.attrs["baseline"]}
        return {**sig.attrs, "vs_baseline": vs}

    def to_json(self) -> dict[str, Any]:
        single = len(self.results) == 1

        def pick(fn):
            vals = {r.name: fn(r) for r in self.results}
            return next(iter(vals.values())) if single else vals

        def overall(r: PresetResult) -> dict[str, float]:
            row = r.aggregate.loc["all"].drop("n").to_dict()
            if r.session_aggregate is not None:
                row.update({f"session_{k}": v for k, v in
                            r.session_aggregate.loc["all"].drop("n").to_dict().items()})
            return {k: round(float(v), 6) for k, v in row.items()}

        def per_cat(r: PresetResult) -> dict[str, dict[str, float]]:
            agg = r.aggregate.drop(index="all")
            return {str(c): {k: (int(v) if k == "n" else round(float(v), 6))
                             for k, v in row.items()} for c, row in agg.iterrows()}

        def abst(r: PresetResult) -> dict[str, dict[str, float | int | None]]:
            return {str(g): {k: (int(v) if k.startswith("n_") else None if math.isnan(v)
                                 else round(float(v), 6)) for k, v in row.items()}
                    for g, row in r.abstention.iterrows()}

        card = self.dataset.card
        return {
            "dataset": {"name": card.name, "version": card.version,
                        "content_hash": self.dataset.content_hash(),
                        "questions": len(self.dataset.questions),
                        "dropped": dict(self.dataset.report.dropped),
                        "rejected": list(self.dataset.report.rejected)},
            "config": pick(lambda r: r.config.to_flat()),
            "presets": [r.name for r in self.results],
            "embedder": self.embedder_version,
            "metrics": pick(overall),
            "per_category": pick(per_cat),
            "ranking": pick(PresetResult.ranking_counts),
            "timings": {**{k: round(v, 3) for k, v in self.timings.items()},
                        **{f"score_{r.name}": round(r.timings.get("score", 0.0), 3)
                           for r in self.results}},
            "counts": self.counts,
            "abstention": pick(abst),
            "significance": self.significance_json(),
            "vram": self.vram.to_json() if self.vram is not None else None,
            "environment": self.environment,
        }


def _peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident memory in MB of this process, or (``RUSAGE_CHILDREN``) of the largest of
    its finished child processes (the ``n_jobs`` replay workers)."""
    rss = resource.getrusage(who).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def open_cache(cfg: MemlabConfig):
    """The persistent embedding cache of benchmarks (bench.cache_dir; relative: under the memlab
    home, :mod:`memlab.home`)."""
    from memlab.home import under_home
    from memlab.store.cache import EmbeddingCacheFile

    return EmbeddingCacheFile(under_home(cfg.bench.cache_dir) / "embeddings.sqlite")


def replay_cached(ds: Dataset, cfg: MemlabConfig, *, embedder, cache=None,
                  progress: bool = True, n_jobs: int = 1, scheduler=None) -> Replayed:
    """The raw signals of ``ds`` under ``cfg``: from the feature cache, or replayed (and cached).
    ``embedder`` None: lexical only. ``cache``: the embedding cache (opened and closed here when
    None). ``n_jobs`` > 1: the conversations are replayed in that many worker processes;
    ``scheduler``: on that Dask cluster (:mod:`memlab.bench.parallel`); the raw signals are the
    same."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InvalidInput("n_jobs", "must be an integer >= 1", n_jobs)
    own = cache is None
    cache = open_cache(cfg) if own else cache
    version = numerics_key(embedder) if embedder is not None else "none"
    try:
        if n_jobs == 1 and scheduler is None:
            return cached_replay(ds, cfg=cfg, embedder_version=version,
                                 replay_fn=lambda: replay(ds, cfg=cfg, embedder=embedder,
                                                          cache=cache, progress=progress))
        return cached_replay(
            ds, cfg=cfg, embedder_version=version, partial=True,
            replay_fn=lambda folder, key: replay_parallel(
                ds, cfg=cfg, embedder=embedder, cache=cache, n_jobs=n_jobs,
                scheduler=scheduler, folder=folder, key=key, progress=progress))
    finally:
        if own:
            cache.close()


def _has_sessions(rep: Replayed) -> bool:
    per_conv: dict[int, set[str]] = {}
    for g, s in rep.row_session.items():
        per_conv.setdefault(g // ROWS_PER_CONVERSATION, set()).add(s)
    return any(len(v) > 1 for v in per_conv.values())


def _nothing_to_evaluate(loaded: int, limit: int | None, no_gold: int, dropped: int) -> str:
    """Why a dataset left no question to evaluate."""
    by_loader = f" ({dropped} records dropped by the loader: see its report)" if dropped else ""
    if not loaded:
        return "holds no question: nothing to evaluate" + by_loader
    if not no_gold:
        return f"--limit {limit} leaves no question of {loaded}"
    return f"has no question with gold evidence ({no_gold} questions, none with evidence)"


def run_bench(*, dataset: str, presets: Sequence[tuple[str, MemlabConfig]], path: str | None = None,
              dataset_options: Mapping[str, Any] | None = None, limit: int | None = None,
              progress: bool = True, embedder=None, lexical_only: bool = False,
              lenient: bool = False, gate=None, n_jobs: int = 1,
              scheduler=None) -> BenchOutcome:
    """Run every preset on one dataset; presets that share candidate settings share one replay.

    An embedder that cannot load stops the run (EmbeddingUnavailable) unless lexical ranking was
    asked for: ``lexical_only`` (no embedder is loaded and every preset runs with
    recall.use_dense false, as recorded), or every preset has recall.use_dense false.
    ``lenient``: the loader drops and reports bad records instead of stopping at the first one.
    ``gate``: the VRAM gate the embedder runs through (:mod:`memlab.bench.vramgate`); None: a
    default one on :func:`memlab.vram.detect.detect_device`, unless the first preset has
    ``vram.enabled`` false (then no gate). Results are the same with or without it.
    ``n_jobs``: worker processes that replay the conversations; ``scheduler``: a Dask
    scheduler address that does (:mod:`memlab.bench.parallel`). Results are the same; the
    timings add ``peak_rss_workers_mb`` (the largest worker process, when there were any)."""
    from memlab.bench.vramgate import default_gate, open_bench_gate
    from memlab.embed import make_embedder

    if not presets:
        raise ConfigError("presets", "at least one preset", [])
    if lexical_only:
        presets = [(name, cfg.replace(**{"recall.use_dense": False})) for name, cfg in presets]
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    ds = registry.load(dataset, path=path,
                       **{**dict(dataset_options or {}), **({"lenient": True} if lenient else {})})
    loaded = len(ds.questions)
    if limit is not None:
        ds = ds.subset(limit_questions=limit)
    # questions without evidence (unanswerable): no recall metric (dropped from them, counted),
    # but replayed and scored for abstention (M.abstention)
    no_gold = sum(1 for q in ds.questions if not q.evidence)
    if no_gold == len(ds.questions):   # none to score for recall (an empty file included)
        raise DatasetError(ds.report.questions_file or str(dataset), _nothing_to_evaluate(
            loaded, limit, no_gold, sum(ds.report.dropped.values())))
    langs = pd.Series({f"{q.conversation_id}::{q.query_id}": (q.meta or {}).get("language")
                       for q in ds.questions})
    timings["load"] = time.perf_counter() - t0
    presets = [(name, card_config(cfg, ds.card)) for name, cfg in presets]   # the card's cap
    versions = {p.embedding.model_dump_json() for _, p in presets}
    if len(versions) > 1:
        raise ConfigError("embedding", "presets compared in one run must share the embedder",
                          sorted(versions))
    base = presets[0][1]
    no_embedder = "none (lexical only, as asked)"
    vram = None
    if gate is None and base.vram.enabled:
        gate = default_gate(base)
    if embedder is None and not lexical_only:
        try:
            if gate is not None:
                vram = open_bench_gate(base, None, gate=gate, build_embedder=True)
                embedder = vram.embedder
            else:
                embedder = make_embedder(base)
        except EmbeddingUnavailable as exc:
            e = base.embedding
            what = f"{e.backend!r}" + (f" (model {e.model_path})" if e.model_path else "")
            if any(cfg.recall.use_dense for _, cfg in presets):
                raise EmbeddingUnavailable(
                    f"embedder {what} cannot load: {exc}. The benchmark stops rather than rank "
                    "with the lexical routes only; fix the embedder, or ask for lexical ranking "
                    "(--lexical-only, or presets with recall.use_dense: false)") from exc
            no_embedder = f"none (every preset is lexical; embedder {what} cannot load: {exc})"
    if gate is not None and vram is None:
        vram = open_bench_gate(base, embedder, gate=gate)
        embedder = vram.embedder
    cache = open_cache(base)
    groups: dict[str, Replayed] = {}
    golds: dict[str, pd.DataFrame] = {}   # per replay: the gold memory's age, layer, importance
    results: list[PresetResult] = []
    counts: dict[str, int] = {}
    try:
        for name, cfg in presets:
            key = features_key(cfg)
            if key not in groups:
                rep = replay_cached(ds, cfg, embedder=embedder, cache=cache, progress=progress,
                                    n_jobs=n_jobs, scheduler=scheduler)
                groups[key] = rep
                golds[key] = gold_columns(ds, rep, cfg=cfg)
                for stage, secs in rep.timings.items():
                    timings[stage] = timings.get(stage, 0.0) + secs
                counts = {**rep.counts, **counts} if counts else dict(rep.counts)
            rep = groups[key]
            t1 = time.perf_counter()
            all_rankings = rank(rep, cfg)
            t_score = time.perf_counter() - t1
            all_qrels = qrels_of(rep)
            abstention = M.abstention(all_rankings, all_qrels,
                                      by=None if langs.isna().any() else langs)
            qrels = {k: v for k, v in all_qrels.items() if v}
            rankings = {k: all_rankings[k] for k in qrels}
            per_query = M.evaluate(rankings, qrels, ks=cfg.bench.ks)
            cats = pd.Series(rep.questions["category"].astype(str).to_numpy(),
                             index=list(all_rankings))
            agg = M.aggregate(per_query, by=cats)
            sess_agg = None
            if _has_sessions(rep):
                item_sess = item_sessions(ds)
                sq = M.evaluate(M.to_sessions(rankings, item_sess), M.to_sessions(qrels, item_sess),
                                ks=cfg.bench.ks)
                sess_agg = M.aggregate(sq)
            per_query = with_gold_columns(per_query.assign(
                category=cats, ranked=[len(rankings[q]) for q in per_query.index]), golds[key])
            results.append(PresetResult(name, cfg, per_query, agg, sess_agg, all_rankings,
                                        {"score": t_score}, abstention))
    finally:
        cache.close()
    significance = None
    if len(results) > 1:   # settings of the first preset (bench.significance_*)
        t2 = time.perf_counter()
        significance = compare_with_config(
            {r.name: r.per_query for r in results}, base,
            metrics=shared_metrics([r.config for r in results]))
        timings["significance"] = time.perf_counter() - t2
    counts["questions_without_evidence_dropped"] = no_gold
    if vram is not None:   # what the gate saw is the replay's only when there was one
        vram.features_cached = all(r.counts.get("feature_cache_hit") == 1
                                   for r in groups.values())
    timings["total"] = time.perf_counter() - t0
    timings["peak_rss_mb"] = _peak_rss_mb()
    if n_jobs > 1 or scheduler is not None:
        timings["peak_rss_workers_mb"] = _peak_rss_mb(resource.RUSAGE_CHILDREN)
    return BenchOutcome(ds, results, timings, counts,
                        embedder.version if embedder is not None else no_embedder, significance,
                        vram, environment(embedder=embedder, threads=base.embedding.threads))


def _rejected_lines(rejected: Sequence[str], *, show: int = 10) -> list[str]:
    """What a lenient load dropped: a count, the first ``show`` as file:line: why, a blank line."""
    if not rejected:
        return []
    more = [f"  ... and {len(rejected) - show} more (dataset.rejected in the JSON)"] \
        if len(rejected) > show else []
    return ([f"--lenient: {len(rejected)} bad records dropped"]
            + [f"  {why}" for why in rejected[:show]] + more + [""])


def _ranked_line(results: Sequence[PresetResult]) -> str:
    """How many memories each question ranks, and why (not recall.k)."""
    per = {r.name: ranked_per_question(r.config) for r in results}
    c = results[0].config
    if len(set(per.values())) == 1:
        return (f"each question ranks up to {per[results[0].name]} memories: max(bench.k = "
                f"{c.bench.k}, largest cut-off of bench.ks = {max(c.bench.ks)}); recall.k "
                f"({c.recall.k}) is live recall()'s default, unused here")
    return ("each question ranks up to: " + ", ".join(f"{n} {v}" for n, v in per.items())
            + " memories (max(bench.k, max(bench.ks)) per preset); recall.k is live recall()'s "
            "default, unused here")


def shared_metrics(configs: Sequence[MemlabConfig]) -> list[str]:
    """The metric columns the benchmark computes for every config (families over bench.ks, and
    mrr), in the first config's order."""
    valid = [c for c, _, _ in M.metric_columns(ks=configs[0].bench.ks)]
    for cfg in configs[1:]:
        have = {c for c, _, _ in M.metric_columns(ks=cfg.bench.ks)}
        valid = [c for c in valid if c in have]
    return valid


def check_metrics(names: Sequence[str], configs: Sequence[MemlabConfig]) -> tuple[str, ...]:
    """``names`` if the benchmark computes each for every config (families over bench.ks, and
    mrr); otherwise an InvalidInput naming the valid ones."""
    valid = shared_metrics(configs)
    for name in list(names) or [""]:
        if name not in valid:
            raise InvalidInput("metric", "not a metric this benchmark computes; valid (cut-offs "
                               f"from bench.ks): {', '.join(valid)}", name)
    return tuple(names)


def _with_p_values(out: BenchOutcome, overall: pd.DataFrame,
                   cols: list[str]) -> tuple[list[str], list[str]]:
    """A ``p(<main metric>)`` column before ``n`` in the overall table (``-`` on the first preset;
    the main metric: ndcg@bench.k if shown, else the first shown), and a block with the
    difference of means and the p-value of every shown metric against the first preset."""
    sig = out.significance
    shown = [m for m in cols if m != "n" and m in sig.index.unique("metric")]
    if not shown:
        return cols, []
    main = f"ndcg@{out.results[0].config.bench.k}"
    main = main if main in shown else shown[0]
    p_col = f"p({main})"
    overall[p_col] = [format_p(sig.loc[(name, main), "p"]) for name in overall.index]
    a = sig.attrs
    how = (f"all 2^{a['questions']} sign flips (exact)" if a["exact"] else
           f"{a['resamples']:,} random sign flips, seed {a['seed']}"
           if a["method"] == "randomisation" else
           f"{a['resamples']:,} bootstrap resamples, seed {a['seed']}")
    others = overall.index[1:]
    block = pd.DataFrame({m: [f"{sig.loc[(name, m), 'diff']:+.3f} "
                              f"({format_p(sig.loc[(name, m), 'p'])})" for name in others]
                          for m in shown}, index=others)
    return (cols[:-1] + [p_col, "n"],
            ["", f"vs {a['baseline']}: mean difference (two-sided p), paired {a['method']} test, "
                 f"{a['questions']} questions, {how}",
             block.to_string()])


def format_table(out: BenchOutcome, *, metrics: Sequence[str] = ("recall@5", "recall@10",
                                                                   "ndcg@10", "mrr"),
                 per_category: Sequence[str] | None = None) -> str:
    """Presets side by side: overall metrics, then ``per_category`` (default recall@10) per
    category, one block per metric."""
    overall = pd.DataFrame({r.name: r.aggregate.loc["all"] for r in out.results}).T
    cols = [m for m in metrics if m in overall.columns] + ["n"]
    overall["n"] = overall["n"].astype(int)  # a count: the transpose made it float
    sig_lines: list[str] = []
    if out.significance is not None:
        cols, sig_lines = _with_p_values(out, overall, cols)
    lines = [f"dataset {out.dataset.card.name} {out.dataset.card.version}  "
             f"({out.counts.get('questions', 0)} questions, {out.counts.get('items', 0)} items, "
             f"embedder {out.embedder_version})", _ranked_line(out.results), "",
             *_rejected_lines(out.dataset.report.rejected),
             overall[cols].to_string(float_format=lambda v: f"{v:.3f}"), *sig_lines]
    short = pd.DataFrame({r.name: r.ranking_counts() for r in out.results}).T.drop(
        columns="per_question")  # said in the header
    short.columns = [c.replace("fewer_than_", "<") for c in short.columns]
    short["of"] = overall["n"]
    lines += ["", "questions ranked fewer memories than k", short.to_string()]
    sess = {r.name: r.session_aggregate.loc["all"] for r in out.results
            if r.session_aggregate is not None}
    if sess:
        s = pd.DataFrame(sess).T
        lines += ["", "session level", s[[c for c in ("recall@5", "recall@10", "ndcg@10")
                                           if c in s.columns]].to_string(
            float_format=lambda v: f"{v:.3f}")]
    if per_category is None:
        per_category = ["recall@10" if "recall@10" in overall.columns else cols[0]]
    for metric in check_metrics(per_category, [r.config for r in out.results]):
        per_cat = pd.DataFrame({r.name: r.aggregate.drop(index="all")[metric]
                                for r in out.results})
        per_cat["n"] = out.results[0].aggregate.drop(index="all")["n"]
        lines += ["", f"{metric} per category",
                  per_cat.to_string(float_format=lambda v: f"{v:.3f}")]
    abst = pd.concat({r.name: r.abstention for r in out.results if r.abstention is not None},
                     names=["preset", "language"])
    lines += ["", "abstention: questions without gold that got no memory; answered: questions "
              "with gold that got at least one",
              abst.to_string(float_format=lambda v: f"{v:.3f}", na_rep="-")]
    t = out.timings
    workers = (f" (largest replay worker {t['peak_rss_workers_mb']:.0f} MB)"
               if "peak_rss_workers_mb" in t else "")
    lines += ["", "timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()
                                             if not k.startswith("peak_rss"))
              + f"; peak memory {t.get('peak_rss_mb', 0):.0f} MB" + workers]
    lines += cache_lines(out.counts)
    if out.environment is not None:
        lines.append(environment_line(out.environment))
    return "\n".join(lines)


def cache_lines(counts: Mapping[str, int]) -> list[str]:
    """The embedding cache's hit rate (replay counts :data:`~memlab.bench.replay.CACHE_HITS` /
    ``CACHE_MISSES``: distinct texts), or nothing when the replay embedded nothing."""
    from memlab.bench.replay import CACHE_HITS, CACHE_MISSES

    hits, misses = int(counts.get(CACHE_HITS, 0)), int(counts.get(CACHE_MISSES, 0))
    if not hits + misses:
        return []
    line = (f"embedding cache: {hits:,} of {hits + misses:,} distinct texts found "
            f"({hits / (hits + misses):.1%}), {misses:,} embedded; one cache for every dataset "
            "and run (keyed by the model's numerics and the sha256 of the text)")
    if counts.get("feature_cache_hit") == 1:
        line += "; the replay came from the feature cache: counts of the run that made it"
    return [line]

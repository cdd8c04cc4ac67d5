"""Candidates and raw signals: the expensive, impure half of recall (§8).

For each query, gather candidates from every route — permanent (always considered), dense (vector
search), lexical (term index, BM25-ranked) and entity (memories sharing a named entity, §11.1) —
and compute their raw signals into one :mod:`memlab.recall.features` table. Nothing here depends on
a scoring weight: the pure scorer reads the table.

Every route sees active memories only, with one exception: a question with historical intent
(``以前``/``used to``, §11.2) also sees the owner's superseded fact revisions when
``facts.historical_sees_superseded`` is on — the dense route ranks them by cosine together with
its active rows, as if the vector search had included them (:func:`_with_history`). The lexical
and entity indexes hold active memories only, so an old revision is found by its vector.

What the question itself says (issue 21, the ``query`` section) becomes columns too: the window
its time expressions name and each candidate's distance to it (:mod:`memlab.recall.timeexpr`),
its type (:mod:`memlab.recall.qtype`) and whether it names a candidate's speaker
(:mod:`memlab.recall.speaker`). They filter nothing.

With ``chunk.enabled``, a long memory's windows (stored at write time, :mod:`memlab.windows`) give
``chunk_max``, the query's best cosine over them, and ``chunk_gain`` (its excess over the whole
text's cosine): read for the candidates the routes found, they add none.

With ``recall.expanded_keys``, the question's terms over the expanded-key field written with every
memory (:func:`memlab.write.keys.query_keys`: its lexical terms, dates and atom kinds) give each
candidate a second BM25 (``key_bm25``, :meth:`Repository.key_bm25`) and its z-score over the
query's candidates (``key_bm25_z``). The field scores candidates; it is no route.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Callable, Protocol, Sequence

import numpy as np

from memlab.config import MemlabConfig, RecallConfig
from memlab.recall import context
from memlab.recall.background import (Background, calibrate_memory_side,
                                      language_codes, pair_calibration)
from memlab.recall.features import (CHUNK_COLUMNS, LAYER_CODES, Features, TermSets, empty_table,
                                    make_columns)
from memlab.recall.qtype import type_code
from memlab.recall.speaker import speaker_column
from memlab.recall.timeexpr import Window, distance_days, resolve
from memlab.text import extract_entities, memory_terms, temporal_intent, time_window_days
from memlab.windows import window_max
from memlab.write.keys import query_keys

SECONDS_PER_DAY = 86_400.0


def pool_sizes(k: int, rc: RecallConfig) -> tuple[int, int, int]:
    """(permanent, dense, lexical) pool sizes of §8: max(80, min(400, 24k)), max(12, 4k),
    max(120, 30k) with the config's defaults."""
    permanent = max(rc.permanent_pool_min, min(rc.permanent_pool_max, rc.permanent_pool_per_k * k))
    dense = max(rc.dense_pool_min, rc.dense_pool_per_k * k)
    lexical = max(rc.lexical_pool_min, rc.lexical_pool_per_k * k)
    return permanent, dense, lexical


def max_k(rc: RecallConfig, search_limit: int) -> int:
    """The largest k whose dense pool (``dense_pool_per_k * k``, :func:`pool_sizes`) fits a vector
    search that returns at most ``search_limit`` rows."""
    return search_limit // rc.dense_pool_per_k if rc.dense_pool_per_k else search_limit


class DenseIndex(Protocol):
    def search(self, query_vec: np.ndarray, k: int, *, agent_id: str, user_id: str
               ) -> tuple[np.ndarray, np.ndarray]: ...

    def vectors(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]: ...

    def windows(self, rowids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class Scope:
    """Whose memories a recall may see: filtered before ranking, never after."""

    agent_id: str
    user_id: str


@dataclass
class _Routes:
    """What the routes found for one query: candidate rows in first-found order (permanent,
    dense, lexical, entity) and each route's signal aligned with them (0 = not found)."""

    rows: np.ndarray
    dense_rank: np.ndarray
    lex_rank: np.ndarray
    bm25: np.ndarray
    entity: np.ndarray
    terms: frozenset[str]
    intent: int
    since: float | None
    window: Window | None = None   # the question's time expressions (query.time_expressions)
    qtype: int = 0                 # its type bits (query.question_types)
    keys: tuple[str, ...] | None = None   # its terms over the key field (recall.expanded_keys)


def _first_found(parts: Sequence[np.ndarray]) -> tuple[np.ndarray, Callable[[np.ndarray],
                                                                                np.ndarray]]:
    """(distinct rows of ``parts`` in first-found order, a function: rows -> their positions)."""
    allr = np.concatenate([np.asarray(p, np.int64) for p in parts]) if parts else \
        np.zeros(0, np.int64)
    uniq, first = np.unique(allr, return_index=True)
    order = np.argsort(first, kind="stable")
    inv = np.empty_like(order)
    inv[order] = np.arange(len(order))
    return uniq[order], lambda r: inv[np.searchsorted(uniq, r)]


def _routes(query: str, qv: np.ndarray | None, *, repo, dense: DenseIndex | None, scope: Scope,
            now: float, pools: tuple[int, int, int], cfg: MemlabConfig) -> _Routes:
    """Every route's candidates for one query (§8 ①-③ and the §11.1 entity route)."""
    rc, tc = cfg.recall, cfg.temporal
    n_perm, n_dense, n_lex = pools
    qterms = memory_terms(query, term_cap=rc.query_term_cap, text_cap=rc.text_cap)
    history = cfg.facts.historical_sees_superseded
    cues = temporal_intent(query, recent=tc.recent_cues, historical=tc.historical_cues,
                           when=tc.when_cues, first=tc.first_cues) if tc.enabled or history \
        else None
    intent = cues.code if tc.enabled else 0
    history = history and cues.historical   # the route reads the cues even with temporal off
    window = time_window_days(query) if tc.enabled and tc.time_windows else None
    since = now - window * SECONDS_PER_DAY if window else None
    bounds = {"since": since, "until": now + 1.0} if since is not None else {}
    who = {"agent_id": scope.agent_id, "user_id": scope.user_id}
    none = np.zeros(0, np.int64)
    p_rows = d_rows = l_rows = e_rows = none
    l_bm25 = np.zeros(0)
    e_counts = none
    if rc.use_permanent and n_perm > 0:
        p_rows = repo.permanent_candidates(**who, limit=n_perm)
    if rc.use_dense and qv is not None and dense is not None and n_dense > 0:
        d_rows, d_cos = dense.search(qv, n_dense, **who, **bounds)
        if history:
            d_rows = _with_history(d_rows, d_cos, qv, repo=repo, dense=dense, who=who,
                                   bounds=bounds, limit=n_dense,
                                   pool=cfg.facts.historical_pool_max)
    if rc.use_lexical and qterms and n_lex > 0:
        l_rows, _, l_bm25 = repo.lexical_candidates(qterms, **who, limit=n_lex)
    entities = extract_entities(query, min_chars=cfg.entity.min_chars) if cfg.entity.enabled \
        else []
    if entities:
        e_rows, e_counts = repo.entity_candidates(entities, **who, limit=n_lex)
    rows, loc = _first_found([p_rows, d_rows, l_rows, e_rows])
    n = len(rows)
    dense_rank = np.zeros(n, np.int64)
    lex_rank = np.zeros(n, np.int64)
    bm25 = np.zeros(n)
    entity = np.zeros(n, np.int64)
    if len(d_rows):
        dense_rank[loc(d_rows)] = np.arange(1, len(d_rows) + 1)
    if len(l_rows):
        at = loc(l_rows)
        lex_rank[at] = np.arange(1, len(l_rows) + 1)
        bm25[at] = l_bm25
    if entities:
        if len(e_rows) < n_lex:  # every linked memory is here: the counts are complete
            if len(e_rows):
                entity[loc(e_rows)] = e_counts
        else:
            entity = np.asarray(repo.entity_matches(entities, rows), np.int64)
    qc = cfg.query
    asked = resolve(query, now, utc_offset_hours=qc.utc_offset_hours) if qc.time_expressions \
        else None
    qtype = type_code(query, en=qc.type_rules_en, zh=qc.type_rules_zh) if qc.question_types \
        else 0
    keys = tuple(query_keys(query, cfg)) if rc.expanded_keys else None
    return _Routes(rows, dense_rank, lex_rank, bm25, entity, frozenset(qterms), intent, since,
                   asked, qtype, keys)


def _with_history(d_rows: np.ndarray, d_cos: np.ndarray, qv: np.ndarray, *, repo,
                  dense: DenseIndex, who: dict[str, str], bounds: dict[str, float], limit: int,
                  pool: int) -> np.ndarray:
    """The dense route of a historical question over active memories *and* the owner's
    superseded revisions (at most ``pool``, newest first): the best ``limit`` by cosine, the
    active rows keeping their order (a tie goes to the active row)."""
    h_rows = repo.superseded_candidates(**who, limit=pool, **bounds)
    if not len(h_rows):
        return d_rows
    have, vecs = dense.vectors(h_rows)
    if not len(have):
        return d_rows
    h_cos = vecs @ np.asarray(qv, np.float32)
    rows = np.concatenate([np.asarray(d_rows, np.int64), h_rows[have]])
    cos = np.concatenate([np.asarray(d_cos, np.float64), h_cos.astype(np.float64)])
    return rows[np.argsort(-cos, kind="stable")[:limit]]


class _BackgroundSignals:
    """The background statistics of a batch (:mod:`memlab.recall.background`): per query, its
    cosine statistics against the sample in each language; per candidate of the union, its
    statistics against the sample (as questions) in each query language asked, computed once."""

    def __init__(self, bg: Background, queries: Sequence[str], query_vectors: np.ndarray,
                 texts: Sequence[str], vec_pos: np.ndarray, vecs: np.ndarray,
                 rc: RecallConfig) -> None:
        self.qlang = language_codes(queries, rc)
        self.mlang = language_codes(texts, rc)
        self.q = [bg.query_stats(v) for v in query_vectors]
        have = vec_pos >= 0
        self.m: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for lang in np.unique(self.qlang).tolist():
            mean = np.full(len(vec_pos), np.nan)
            std = np.full(len(vec_pos), np.nan)
            if have.any():
                mu, sd = bg.memory_stats(vecs[vec_pos[have]], lang)
                # against real questions of this language (recall.background_calibration)
                loc, scale = pair_calibration(bg, lang, self.mlang[have],
                                              rc.background_calibration)
                mean[have], std[have] = calibrate_memory_side(mu, sd, loc, scale)
            self.m[lang] = (mean, std)

    def of(self, qi: int, idx: np.ndarray) -> tuple[np.ndarray, ...]:
        """(q_bg_mean, q_bg_std, m_bg_mean, m_bg_std) of query ``qi``'s candidates ``idx``."""
        q_mean, q_std = self.q[qi]
        lang = self.mlang[idx]
        m_mean, m_std = self.m[int(self.qlang[qi])]
        return q_mean[lang], q_std[lang], m_mean[idx], m_std[idx]


def build_features(queries: Sequence[str], *, query_vectors: np.ndarray | None, repo,
                   dense: DenseIndex | None, scope: Scope, now: float, k: int,
                   cfg: MemlabConfig, background: Background | None = None) -> Features:
    """The raw-signal table for a batch of queries asked at ``now`` by ``scope``.

    ``repo`` answers the candidate and signal calls: a :class:`~memlab.store.Repository` (SQL) or
    the in-process :class:`~memlab.store.memindex.MemoryIndex` (``Store.signals()``). Routes run
    per query; the stored signals of the union of their candidates are fetched once for the
    batch. ``query_vectors`` is None when the embedder is unavailable: the dense route is skipped
    and cosine is NaN (a documented degradation; the caller logs and counts it). So is a query's
    all-zero row (the embedder gives that query no vector, e.g. hashing on emoji only).
    ``background``: the embedder's background sample, for the ``q_bg_*`` / ``m_bg_*`` columns (NaN
    without it; the zscore relevance floor needs them wherever a cosine is known).
    ``repo.session_layout`` places the candidates in their sessions for the ranking-context
    columns of ``recall.session_context`` (:mod:`memlab.recall.context`).
    """
    pools = pool_sizes(k, cfg.recall)
    has_qv = np.zeros(len(queries), bool) if query_vectors is None else \
        np.asarray(query_vectors).any(axis=1)
    found = [_routes(q, query_vectors[qi] if has_qv[qi] else None, repo=repo,
                     dense=dense, scope=scope, now=now, pools=pools, cfg=cfg)
             for qi, q in enumerate(queries)]
    all_rows, loc = _first_found([f.rows for f in found])
    if not len(all_rows):
        return Features(table=empty_table(), query_texts=tuple(queries))
    union = all_rows.tolist()
    cols = repo.feature_columns(all_rows)
    term_sets = cols["terms"]
    ts = cols["timestamp"]
    last = np.where(np.isnan(cols["last_accessed"]), ts, cols["last_accessed"])
    ev = np.where(np.isnan(cols["event_time"]), ts, cols["event_time"])
    permanent = cols["layer"] == LAYER_CODES["permanent"]
    vec_pos = np.full(len(union), -1, dtype=np.int64)
    vecs = np.zeros((0, 0), dtype=np.float32)
    if query_vectors is not None and dense is not None:
        have, vecs = dense.vectors(all_rows)
        vec_pos[have] = np.arange(len(have))
    bg = None
    if background is not None and query_vectors is not None and dense is not None:
        bg = _BackgroundSignals(background, queries, query_vectors, cols["texts"], vec_pos, vecs,
                                cfg.recall)
    windows = None
    if cfg.chunk.enabled and len(vecs):   # the long memories' stored windows (chunk.*)
        windows = dense.windows(all_rows)
    layout = None
    if cfg.recall.session_context:      # where each candidate stands in its session
        layout = repo.session_layout(all_rows)
    parts: dict[str, list[np.ndarray]] = {c: [] for c in (
        "qid", "idx", "cosine", "lexical", "bm25", "dense_rank", "lexical_rank", "entity",
        "intent", "q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std", "q_window_days",
        "window_dist_days", "q_type", "speaker_named", *context.ZSCORE_COLUMNS,
        *context.SESSION_COLUMNS, "q_lang", *CHUNK_COLUMNS, *KEY_COLUMNS)}
    qlang = language_codes(queries, cfg.recall)   # the abstention thresholds' language
    speakers = cols["speakers"] if cfg.query.speakers else None
    for qi, f in enumerate(found):
        idx = loc(f.rows)
        keep = slice(None)
        if f.since is not None:  # an explicit window binds every route but the permanent one
            keep = permanent[idx] | (ev[idx] >= f.since)
            idx = idx[keep]
        if not len(idx):
            continue
        cosine = np.full(len(idx), np.nan, dtype=np.float32)
        vp = vec_pos[idx]
        if len(vecs) and (vp >= 0).any() and has_qv[qi]:
            cosine[vp >= 0] = vecs[vp[vp >= 0]] @ np.asarray(query_vectors[qi], dtype=np.float32)
        parts["qid"].append(np.full(len(idx), qi))
        parts["idx"].append(idx)
        parts["cosine"].append(cosine)
        parts["lexical"].append((term_sets.overlap(f.terms, idx) / len(f.terms)).astype(
            np.float32) if f.terms else np.zeros(len(idx), np.float32))
        parts["bm25"].append(f.bm25[keep])
        parts["dense_rank"].append(f.dense_rank[keep])
        parts["lexical_rank"].append(f.lex_rank[keep])
        parts["entity"].append(f.entity[keep])
        parts["intent"].append(np.full(len(idx), f.intent))
        parts["q_window_days"].append(np.full(len(idx), f.window.days if f.window else 0.0))
        parts["window_dist_days"].append(distance_days(ev[idx], f.window))
        parts["q_type"].append(np.full(len(idx), f.qtype))
        parts["q_lang"].append(np.full(len(idx), qlang[qi], np.int8))
        parts["speaker_named"].append(
            speaker_column(queries[qi], [speakers[j] for j in idx.tolist()],
                           prefix_min=cfg.query.speaker_prefix_min) if speakers is not None
            else np.zeros(len(idx), np.int8))
        stats = bg.of(qi, idx) if bg is not None else (np.full(len(idx), np.nan),) * 4
        for name, values in zip(("q_bg_mean", "q_bg_std", "m_bg_mean", "m_bg_std"), stats):
            parts[name].append(values)
        for name, values in _context(cosine, f.bm25[keep], f.lex_rank[keep], idx, layout,
                                     cfg.recall).items():
            parts[name].append(values)
        best = _window_best(query_vectors[qi] if has_qv[qi] else None, idx, windows, cosine,
                            cfg.chunk.enabled)
        parts["chunk_max"].append(best)
        parts["chunk_gain"].append(best - cosine)
        for name, values in _key_columns(f.keys, all_rows[idx], repo, scope).items():
            parts[name].append(values)
    if not parts["idx"]:
        return Features(table=empty_table(), query_texts=tuple(queries))
    cat = {c: np.concatenate(v) for c, v in parts.items()}
    i = cat["idx"]
    columns = make_columns(
        qid=cat["qid"], row=all_rows[i], cosine=cat["cosine"], lexical=cat["lexical"],
        bm25=cat["bm25"], dense_rank=cat["dense_rank"], lexical_rank=cat["lexical_rank"],
        importance=cols["importance"][i], access_count=cols["access_count"][i],
        mention_count=cols["mention_count"][i],
        age_days=np.maximum(0.0, (now - ts[i]) / SECONDS_PER_DAY),
        since_access_days=np.maximum(0.0, (now - last[i]) / SECONDS_PER_DAY),
        event_age_days=(now - ev[i]) / SECONDS_PER_DAY, event_time=ev[i],
        emotion_max=cols["emotion_max"][i], layer=cols["layer"][i],
        cognitive=cols["cognitive"][i], pinned=cols["pinned"][i],
        entity_matches=cat["entity"], intent=cat["intent"], text_len=cols["text_len"][i],
        q_bg_mean=cat["q_bg_mean"], q_bg_std=cat["q_bg_std"], m_bg_mean=cat["m_bg_mean"],
        m_bg_std=cat["m_bg_std"], q_window_days=cat["q_window_days"],
        window_dist_days=cat["window_dist_days"], q_type=cat["q_type"],
        speaker_named=cat["speaker_named"],
        **{c: cat[c] for c in (*context.ZSCORE_COLUMNS, *context.SESSION_COLUMNS)},
        q_lang=cat["q_lang"],
        **{c: cat[c] for c in (*CHUNK_COLUMNS, *KEY_COLUMNS)},
    )
    used = np.unique(i).tolist()
    texts, ids = cols["texts"], cols["ids"]
    return Features(columns=columns,
                    terms=_TermsByRow({union[j]: j for j in used}, term_sets),
                    texts={union[j]: texts[j] for j in used},
                    ids={union[j]: ids[j] for j in used},
                    query_texts=tuple(queries))


def _context(cosine: np.ndarray, bm25: np.ndarray, lex_rank: np.ndarray, idx: np.ndarray,
             layout: tuple[np.ndarray, np.ndarray, np.ndarray] | None, rc: RecallConfig
             ) -> dict[str, np.ndarray]:
    """The ranking-context columns of one query's candidates (:mod:`memlab.recall.context`):
    NaN where their gate is off. ``layout``: (session, position, length) of the batch's union,
    ``idx`` the candidates' places in it."""
    n = len(idx)
    out = {c: np.full(n, np.nan) for c in (*context.ZSCORE_COLUMNS, *context.SESSION_COLUMNS)}
    if not (rc.zscore_signals or rc.session_context):
        return out
    dz, d_floor = context.route_z(cosine, ~np.isnan(cosine))
    bz, b_floor = context.route_z(bm25, lex_rank > 0)
    fz = context.fusion(dz, bz)
    if rc.zscore_signals:
        out.update(dense_z=dz, bm25_z=bz, fused_z=fz)
    if layout is None:
        return out
    sess, pos, length = (v[idx] for v in layout)
    f_floor = context.fusion(np.array([d_floor]), np.array([b_floor]))[0]
    near = context.neighbour_maxes([(dz, d_floor), (bz, b_floor)], sess, pos, length, 2)
    for r, (d, b) in enumerate(near, start=1):
        out[f"nb{r}_dense"], out[f"nb{r}_bm25"] = d, b
    out["sess_best"], out["sess_mean"] = context.session_stats(fz, f_floor, sess, length)
    out["sess_pos"], out["sess_first"], out["sess_last"] = context.positions(pos, length, sess)
    return out


def _window_best(qv: np.ndarray | None, idx: np.ndarray,
                 windows: tuple[np.ndarray, np.ndarray] | None, cosine: np.ndarray,
                 enabled: bool) -> np.ndarray:
    """The chunk_max column of one query's candidates ``idx`` (places in the batch's union;
    ``windows``: (each window's place in the union, the unit vectors)): the best window cosine,
    the whole text's cosine where a memory has no window; NaN without a cosine or with
    ``chunk.enabled`` off."""
    if not enabled:
        return np.full(len(idx), np.nan)
    best = np.asarray(cosine, np.float64).copy()
    if windows is None or qv is None or not len(windows[0]):
        return best
    owner, vecs = windows
    pick = np.isin(owner, idx)
    if not pick.any():
        return best
    local = np.searchsorted(np.sort(idx), owner[pick])
    order = np.argsort(idx)
    wmax = window_max(qv, order[local], vecs[pick], len(idx))
    has = ~np.isnan(wmax) & ~np.isnan(best)
    best[has] = wmax[has]
    return best
KEY_COLUMNS = ("key_bm25", "key_bm25_z")


def _key_columns(keys: tuple[str, ...] | None, rows: np.ndarray, repo, scope: Scope
                 ) -> dict[str, np.ndarray]:
    """The expanded-key columns of one query's candidates (``rows``): BM25 of the question's key
    terms over each memory's keys, and its z-score over the candidates (all of them scored: no
    shared key is a BM25 of 0). NaN with ``recall.expanded_keys`` off (``keys`` None)."""
    if keys is None:
        return {c: np.full(len(rows), np.nan) for c in KEY_COLUMNS}
    score = repo.key_bm25(keys, rows, agent_id=scope.agent_id, user_id=scope.user_id)
    return {"key_bm25": score,
            "key_bm25_z": context.route_z(score, np.ones(len(rows), bool))[0]}


class _TermsByRow(Mapping):
    """A memory's term set by rowid, built when first asked for (selection asks for a few)."""

    def __init__(self, where: dict[int, int], term_sets: TermSets) -> None:
        self._where, self._sets = where, term_sets
        self._done: dict[int, frozenset[str]] = {}

    def __getitem__(self, row: int) -> frozenset[str]:
        got = self._done.get(row)
        if got is None:
            got = self._done[row] = self._sets[self._where[row]]
        return got

    def __iter__(self):
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

"""Stage traces: where recall lost a question's gold memory (issue 20, item 4).

A benchmark question is missed at cut-off ``k`` when none of its gold items ranks in the top
``k``. The trace says, per gold item, the first stage of recall that left it out, read from the
replay's raw-signal table (:class:`memlab.bench.replay.Replayed`, from the feature cache) and the
reference scorer and selection (:func:`memlab.recall.score.score`,
:func:`memlab.recall.select.select`, called as :func:`memlab.bench.run.rank` calls them; the
selection's :class:`~memlab.recall.select.SelectTrace` tells what its walk skipped). Nothing here
re-implements a score, a gate or the walk.

Stages, in the order recall applies them (:data:`STAGES`):

=================  ===============================================================================
``not_stored``     the gold item was written after the question was asked (needs the dataset)
``not_candidate``  no route returned it (it is not in the question's table), or the preset's scorer
                   does not rank rows of that route (rrf and bm25 rank only their routes' hits,
                   cosine only dense hits: ``relevant`` with the floor off is False)
``floor``          under the relevance floor (``recall.floor_mode``; ``relevant`` is False)
``forgetting``     not eligible: suppressed by forgetting (§9.1; reverie only)
``permanent_cap``  a permanent memory beyond ``recall.permanent_limit`` of its question
``dedup``          the walk skipped it as a near-duplicate of a chosen memory, before k were chosen
``budget``         the walk skipped it for ``selection.char_budget``, before k were chosen
``outranked``      it passed every gate but k memories ranked above it
``found``          it ranks within the top k
=================  ===============================================================================

A question's stage is that of its gold item that got furthest (``found`` if any is found; among
items that reached the walk, the one the walk met first). A row that fails both the floor and the
forgetting gate counts at the floor (the earlier stage); its ``eligible`` column still says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from memlab.bench.datasets.canonical import Dataset
from memlab.bench.replay import ROWS_PER_CONVERSATION, Replayed, ranked_per_question
from memlab.config import MemlabConfig
from memlab.errors import InvalidInput
from memlab.recall.features import COLUMNS, LAYER_CODES, column, n_rows
from memlab.recall.score import Scored, score
from memlab.recall.select import SKIP_BUDGET, SKIP_DEDUP, SelectTrace, explain_frame, select

__all__ = ["STAGES", "STAGE_DESCRIPTIONS", "MISS_STAGES", "ROUTES", "StageTrace", "QuestionTrace",
           "trace_replay", "gold_ages", "question_languages"]

STAGES: tuple[str, ...] = ("not_stored", "not_candidate", "floor", "forgetting", "permanent_cap",
                           "dedup", "budget", "outranked", "found")
#: the stages of a miss (every stage but ``found``)
MISS_STAGES: tuple[str, ...] = STAGES[:-1]
STAGE_DESCRIPTIONS: dict[str, str] = {
    "not_stored": "written after the question was asked",
    "not_candidate": "no route of the preset returned it",
    "floor": "under the relevance floor",
    "forgetting": "suppressed by forgetting (not eligible)",
    "permanent_cap": "beyond the cap on permanent memories",
    "dedup": "cut by dedup before k were chosen",
    "budget": "cut by the character budget before k were chosen",
    "outranked": "k memories ranked above it",
    "found": "within the top k",
}
#: how far a stage gets (a question's stage is its gold item's furthest); the walk's three share one
_PROGRESS = {"not_stored": 0, "not_candidate": 1, "floor": 2, "forgetting": 3,
             "permanent_cap": 4, "dedup": 5, "budget": 5, "outranked": 5, "found": 6}
#: the recall routes (§8) and how the table shows that a route returned a row
ROUTES: tuple[str, ...] = ("dense", "lexical", "entity", "permanent")


def _routes_of(table: Mapping[str, np.ndarray], pos: int) -> list[str]:
    found = {"dense": column(table, "dense_rank")[pos] > 0,
             "lexical": column(table, "lexical_rank")[pos] > 0,
             "entity": column(table, "entity_matches")[pos] > 0,
             "permanent": column(table, "layer")[pos] == LAYER_CODES["permanent"]}
    return [r for r in ROUTES if found[r]]


def gold_ages(ds: Dataset) -> pd.Series:
    """Per question key (``conversation::query``): the age in days of its youngest gold item
    written by ``asked_at`` (NaN: none written yet) — ``gold_age_days`` of
    :func:`memlab.bench.goldage.gold_columns`, the one definition per_query uses too."""
    from memlab.bench.goldage import gold_columns

    return gold_columns(ds)["gold_age_days"]


def question_languages(ds: Dataset) -> pd.Series:
    """Per question key: ``meta.language`` (None when the dataset does not say)."""
    return pd.Series({f"{q.conversation_id}::{q.query_id}": (q.meta or {}).get("language")
                      for q in ds.questions}, name="language", dtype=object)


@dataclass
class QuestionTrace:
    """One question under one preset: its stage, its gold items' rows and the funnel.

    ``gold``: one row per gold item: stage, routes, final rank, rank by score among the
    question's candidates, walk position, then every raw signal of the table and every score
    component (``*_term``) of the preset's scorer (NaN for an item that is not a candidate).
    ``funnel``: rows left after each stage of the question and, per gold item, its rank by score
    among them (NA once cut). ``ranking``: the memories chosen (:func:`memlab.recall.select.
    explain_frame`) with a ``gold`` column.
    """

    question: str
    text: str
    category: str
    preset: str
    k: int
    stage: str
    gold: pd.DataFrame
    funnel: pd.DataFrame
    ranking: pd.DataFrame

    def to_frame(self) -> pd.DataFrame:
        """The gold items' rows (see the class doc)."""
        return self.gold

    def __str__(self) -> str:
        lines = [f"{self.question} [{self.category}] {self.text!r}",
                 f"{self.preset}: {self.stage} at k={self.k} ({STAGE_DESCRIPTIONS[self.stage]})"]
        for item, g in self.gold.iterrows():
            rank = "-" if pd.isna(g["rank"]) else int(g["rank"])
            routes = g["routes"] or "none"
            score_txt = "" if pd.isna(g["score"]) else f", score {g['score']:.3f}"
            lines.append(f"  gold {item}: {g['stage']}; routes {routes}; rank {rank}{score_txt}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:   # Jupyter: the summary, then the gold rows
        return f"<pre>{self}</pre>" + self.gold.to_html(max_cols=20)


@dataclass
class StageTrace:
    """Where each question's gold is lost under one preset (:func:`trace_replay`).

    ``questions``: one row per question with gold (index ``conversation::query``): ``stage``,
    ``best_rank`` (the best-ranked gold item's rank, NA when none is ranked), ``category``,
    ``language`` and ``gold_age_days`` (from the dataset, when given), ``n_gold``.
    ``gold``: one row per (question, gold item): ``stage``, ``routes``, ``rank``,
    ``walk_position``, ``eligible``, ``relevant``, ``score``.
    """

    preset: str
    k: int
    dataset: str | None
    questions: pd.DataFrame
    gold: pd.DataFrame
    _rep: Replayed = field(repr=False)
    _cfg: MemlabConfig = field(repr=False)
    _scored: Scored = field(repr=False)
    _route_ok: np.ndarray = field(repr=False)
    _walk: SelectTrace = field(repr=False)
    _picks: list[np.ndarray] = field(repr=False)
    _positions: dict[tuple[int, str], int] = field(repr=False)
    _groups: dict[int, np.ndarray] = field(repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per question (``questions``)."""
        return self.questions

    def summary(self) -> pd.Series:
        """Questions per stage, in :data:`STAGES` order (every stage, zeros included)."""
        return self.questions["stage"].value_counts().reindex(list(STAGES), fill_value=0) \
            .rename(self.preset)

    def misses(self) -> pd.DataFrame:
        """The questions whose gold is not in the top k."""
        return self.questions[self.questions["stage"] != "found"]

    def question(self, key: str) -> QuestionTrace:
        """The trace of one question (key ``conversation::query``)."""
        if key not in self.questions.index:
            raise InvalidInput("question", "not a question with gold of this trace; e.g. "
                               + ", ".join(map(str, self.questions.index[:3])), key)
        return _question_trace(self, key)


def _grouped(qid: np.ndarray) -> dict[int, np.ndarray]:
    """qid -> its table positions (in table order)."""
    if not qid.size:
        return {}
    order = np.argsort(qid, kind="stable")
    q = qid[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    ends = np.r_[starts[1:], q.size]
    return {int(q[s]): order[s:e] for s, e in zip(starts, ends)}


def _gold_positions(rep: Replayed, groups: dict[int, np.ndarray], rows: np.ndarray,
                    conv_index: Mapping[str, int] | None) -> dict[tuple[int, str], int]:
    """(qid, gold item id) -> its table position, for the gold items in their question's table."""
    item_row = {(g // ROWS_PER_CONVERSATION, item): g for g, item in rep.row_item.items()}
    out = {}
    q = rep.questions
    for qid, conv, evidence in zip(q["qid"], q["conversation_id"], q["evidence"]):
        pos = groups.get(int(qid))
        if pos is None or not evidence:
            continue
        ordinal = (conv_index[conv] if conv_index is not None
                   else int(rows[pos[0]]) // ROWS_PER_CONVERSATION)
        qrows = rows[pos]
        for item in evidence:
            g = item_row.get((ordinal, item))
            if g is None:
                continue
            hit = np.flatnonzero(qrows == g)
            if hit.size:
                out[(int(qid), item)] = int(pos[hit[0]])
    return out


def _walk_positions(order: np.ndarray, qid: np.ndarray) -> dict[int, int]:
    """Table position -> its 1-based position in its question's walk (the walk's order)."""
    if not order.size:
        return {}
    q = qid[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, q.size]))
    return dict(zip(order.tolist(), (np.arange(q.size) - first + 1).tolist()))


def _stage(pos: int | None, *, written_later: bool, route_ok, scored: Scored, walk_at: dict,
           picks: Sequence[int], skipped: Mapping[int, tuple[str, int]], k: int) -> str:
    """The first stage that left the row at table position ``pos`` out of the top k."""
    if pos is None:
        return "not_stored" if written_later else "not_candidate"
    if not route_ok[pos]:
        return "not_candidate"
    if not scored.relevant[pos]:
        return "floor"
    if not scored.eligible[pos]:
        return "forgetting"
    if pos not in walk_at:
        return "permanent_cap"
    if pos in picks:
        return "found" if picks.index(pos) < k else "outranked"
    why = skipped.get(pos)
    if why is not None and why[1] < k:
        return {SKIP_BUDGET: "budget", SKIP_DEDUP: "dedup"}[why[0]]
    return "outranked"


def trace_replay(rep: Replayed, cfg: MemlabConfig, *, k: int | None = None,
                 ds: Dataset | None = None, preset: str = "preset") -> StageTrace:
    """Trace every question with gold of the replay ``rep`` under ``cfg`` at cut-off ``k``
    (default ``bench.k``). ``ds``: the replayed dataset, for ``not_stored``, the gold's age and
    the question's language (without it, a gold item written later counts as ``not_candidate``).
    The ranking is the benchmark's (:func:`memlab.bench.run.rank`: up to
    ``max(bench.k, max(bench.ks))`` memories per question)."""
    k = cfg.bench.k if k is None else k
    limit = ranked_per_question(cfg)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= limit:
        raise InvalidInput("k", f"a cut-off in [1, {limit}] (the memories a benchmark ranks per "
                           "question: max(bench.k, max(bench.ks)))", k)
    table = rep.features.columns
    n = n_rows(table)
    qid = column(table, "qid", np.int64) if n else np.zeros(0, np.int64)
    rows = column(table, "row", np.int64) if n else np.zeros(0, np.int64)
    walk = SelectTrace()
    if n:
        scored = score(table, cfg)
        off = cfg.replace(**{"recall.floor_mode": "absolute", "recall.relevance_floor": 0.0})
        route_ok = np.asarray(score(table, off).relevant, dtype=bool)
        picks = select(table, scored, terms=rep.features.terms, k=limit, cfg=cfg, trace=walk)
    else:
        scored = Scored(np.zeros(0), np.zeros(0, bool), np.zeros(0, bool))
        route_ok, picks = np.zeros(0, bool), []
    groups = _grouped(qid)
    conv_index = {c: i for i, c in enumerate(ds.conversations())} if ds is not None else None
    positions = _gold_positions(rep, groups, rows, conv_index)
    walk_at = _walk_positions(walk.order, qid)
    asked = stamps = None
    if ds is not None:
        asked = {(q.conversation_id, q.query_id): q.asked_at for q in ds.questions}
        stamps = {(c, it.item_id): it.timestamp for c in ds.conversations()
                  for it in ds.items_of(c)}
    gold_rows, q_rows = [], []
    q = rep.questions
    for qi, conv, query, cat, evidence in zip(q["qid"], q["conversation_id"], q["query_id"],
                                             q["category"], q["evidence"]):
        if not evidence:
            continue
        key, qi = f"{conv}::{query}", int(qi)
        chosen = picks[qi].tolist() if qi < len(picks) else []
        items = []
        for item in evidence:
            pos = positions.get((qi, item))
            later = bool(asked is not None and (conv, item) in stamps
                         and stamps[(conv, item)] > asked[(conv, query)])
            st = _stage(pos, written_later=later, route_ok=route_ok, scored=scored,
                        walk_at=walk_at, picks=chosen, skipped=walk.skipped, k=k)
            rank = chosen.index(pos) + 1 if pos is not None and pos in chosen else pd.NA
            wpos = walk_at.get(pos) if pos is not None else None
            items.append((st, wpos, item))
            gold_rows.append({
                "question": key, "item": item, "stage": st,
                "routes": "+".join(_routes_of(table, pos)) if pos is not None else "",
                "rank": rank, "walk_position": pd.NA if wpos is None else wpos,
                "eligible": bool(scored.eligible[pos]) if pos is not None else pd.NA,
                "relevant": bool(scored.relevant[pos]) if pos is not None else pd.NA,
                "score": float(scored.score[pos]) if pos is not None else np.nan,
            })
        best = max(items, key=lambda t: (_PROGRESS[t[0]], -(t[1] or 0)))
        ranks = [r["rank"] for r in gold_rows[-len(evidence):] if not pd.isna(r["rank"])]
        q_rows.append({"question": key, "stage": best[0], "gold_item": best[2],
                       "best_rank": min(ranks) if ranks else pd.NA, "category": str(cat),
                       "n_gold": len(evidence)})
    questions = pd.DataFrame(q_rows, columns=["question", "stage", "gold_item", "best_rank",
                                              "category", "n_gold"]).set_index("question")
    questions["best_rank"] = questions["best_rank"].astype("Int64")
    questions["stage"] = pd.Categorical(questions["stage"], categories=list(STAGES))
    if ds is not None:
        questions["language"] = question_languages(ds).reindex(questions.index)
        questions["gold_age_days"] = gold_ages(ds).reindex(questions.index)
    gold = pd.DataFrame(gold_rows, columns=["question", "item", "stage", "routes", "rank",
                                            "walk_position", "eligible", "relevant", "score"])
    gold["rank"] = gold["rank"].astype("Int64")
    gold["walk_position"] = gold["walk_position"].astype("Int64")
    return StageTrace(preset, int(k), ds.card.name if ds is not None else None, questions, gold,
                      rep, cfg, scored, route_ok, walk, picks, positions, groups)


# -- one question ---------------------------------------------------------------------------------
def _question_trace(tr: StageTrace, key: str) -> QuestionTrace:
    rep, table, scored = tr._rep, tr._rep.features.columns, tr._scored
    qrow = rep.questions[[f"{c}::{q}" == key for c, q in
                          zip(rep.questions["conversation_id"], rep.questions["query_id"])]].iloc[0]
    qi = int(qrow["qid"])
    pos_all = tr._groups.get(qi, np.zeros(0, np.int64))
    gold = tr.gold[tr.gold["question"] == key].set_index("item")
    # the funnel: the rows a stage leaves, and each gold item's rank by score among them
    walked = np.isin(pos_all, tr._walk.order)
    masks = {"candidates": np.ones(pos_all.size, bool),
             "scorer's routes": tr._route_ok[pos_all],
             "relevance floor": scored.relevant[pos_all] & tr._route_ok[pos_all],
             "forgetting": scored.relevant[pos_all] & scored.eligible[pos_all],
             "permanent cap": walked}
    chosen = tr._picks[qi] if qi < len(tr._picks) else np.zeros(0, np.int64)
    sc = scored.score[pos_all] if pos_all.size else np.zeros(0)
    funnel = {"rows": {s: int(m.sum()) for s, m in masks.items()}}
    funnel["rows"]["chosen"] = int(chosen.size)
    extra: dict[str, list] = {c: [] for c in list(COLUMNS) + list(scored.components)}
    score_rank = []
    for item in gold.index:
        pos = tr._positions.get((qi, item))
        col = {}
        for stage, m in masks.items():
            if pos is None or not m[pos_all == pos].any():
                col[stage] = pd.NA
            else:
                col[stage] = int((sc[m] > scored.score[pos]).sum()) + 1
        col["chosen"] = (int(np.flatnonzero(chosen == pos)[0]) + 1
                         if pos is not None and (chosen == pos).any() else pd.NA)
        funnel[f"gold {item}"] = col
        score_rank.append(col["candidates"])
        for c in extra:
            src = table if c in COLUMNS else scored.components
            extra[c].append(np.asarray(src[c])[pos].item() if pos is not None else np.nan)
    gold = gold.assign(score_rank=pd.array(score_rank, dtype="Int64"), **extra)
    ranking = explain_frame(table, scored, chosen, rep.features.ids, rep.features.texts)
    ranking.insert(4, "gold", [rep.row_item.get(int(r)) in set(gold.index)
                               for r in ranking["row"]])
    funnel_frame = pd.DataFrame(funnel)
    for c in funnel_frame.columns:
        funnel_frame[c] = funnel_frame[c].astype("Int64")
    return QuestionTrace(key, str(qrow["text"]), str(qrow["category"]), tr.preset, tr.k,
                         str(tr.questions.loc[key, "stage"]), gold, funnel_frame, ranking)

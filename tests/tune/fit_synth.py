"""A synthetic replay whose gold rows follow a known combination of raw signals (tests of learned
fusion): per question, candidates with uniform cosine, lexical overlap and entity matches; the
gold row is the argmax of ``sharpness * (w . signals) + Gumbel noise`` (a softmax choice, so the
pairwise and pointwise logistic fits recover the weights' ratios)."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from memlab.bench.replay import ROWS_PER_CONVERSATION, Replayed
from memlab.config import MemlabConfig
from memlab.recall.features import Features, make_columns

#: floor off (absolute 0), so that every row is selectable and only the weights rank
CFG = MemlabConfig().replace(**{"recall.floor_mode": "absolute", "recall.relevance_floor": 0.0})


def synth_replay(weights: Mapping[str, float], *, conversations: int = 6, per_conv: int = 40,
                 candidates: int = 30, sharpness: float = 6.0, seed: int = 0) -> Replayed:
    """``weights`` over ``cosine`` (= relevance at baseline 0), ``lexical`` and
    ``entity_matches`` (0-3)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {k: [] for k in ("qid", "row", "cosine", "lexical", "entity_matches",
                                             "text_len")}
    questions, row_item = [], {}
    qid = 0
    for c in range(conversations):
        for j in range(per_conv):
            sig = {"cosine": rng.uniform(0, 1, candidates),
                   "lexical": rng.uniform(0, 1, candidates),
                   "entity_matches": rng.integers(0, 4, candidates).astype(float)}
            util = sum(w * sig[k] for k, w in weights.items())
            gold = int(np.argmax(sharpness * util + rng.gumbel(size=candidates)))
            rows = c * ROWS_PER_CONVERSATION + qid * 1000 + np.arange(candidates)
            for r in rows.tolist():
                row_item[r] = f"i{r}"
            cols["qid"] += [qid] * candidates
            cols["row"] += rows.tolist()
            for k, v in sig.items():
                cols[k] += v.tolist()
            cols["text_len"] += rng.integers(5, 16, candidates).tolist()
            questions.append({"query_id": f"q{j}", "conversation_id": f"c{c}", "category": "x",
                              "evidence": [f"i{rows[gold]}"]})
            qid += 1
    table = make_columns(**cols)
    feats = Features(columns=table, terms={int(r): frozenset({f"t{r}"}) for r in table["row"]})
    return Replayed(feats, pd.DataFrame(questions), row_item, {r: "s1" for r in row_item})


def with_evidence(rep: Replayed, evidence: Mapping[str, list[str]]) -> Replayed:
    """``rep`` with the evidence of some questions (key ``conv::query``) replaced."""
    q = rep.questions.copy()
    keys = [f"{c}::{i}" for c, i in zip(q["conversation_id"], q["query_id"])]
    q["evidence"] = [list(evidence.get(k, e)) for k, e in zip(keys, q["evidence"])]
    return Replayed(rep.features, q, rep.row_item, rep.row_session)

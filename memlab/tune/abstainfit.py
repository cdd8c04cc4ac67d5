"""Fit and measure the per-query abstention decision (:mod:`memlab.recall.abstain`) on a replay.

Each question of a replayed dataset is one training row: its query features
(:func:`memlab.recall.abstain.query_features`) and whether it is answerable (it has gold
evidence). :func:`kfold` predicts every question with a model fitted on the other conversations'
(folds by conversation, never a question's own user) and reports, per question language, the
abstention on unanswerable questions (the recall of abstaining), its precision (the share of
refused questions that were unanswerable) and the answered share of answerable ones, at
``recall.abstain_threshold``. :func:`fit_and_save` fits on every question and writes the skops
file with its data and config recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from memlab.bench.replay import Replayed
from memlab.errors import InvalidInput
from memlab.recall.abstain import QUERY_FEATURES, fit_abstention, query_features, \
    save_abstain_model
from memlab.recall.background import cjk_share

__all__ = ["questions_frame", "kfold", "Report", "abstention_table", "fit_and_save"]


def questions_frame(rep: Replayed, *, zh_share: float = 0.7) -> pd.DataFrame:
    """One row per question (qid order): its query features, ``answerable``, ``language`` (zh
    when its CJK share is at least ``zh_share``, else en) and ``conversation``."""
    q = rep.questions
    feats = query_features(rep.features.columns, len(q))
    feats["answerable"] = [len(e) > 0 for e in q["evidence"]]
    feats["language"] = ["zh" if cjk_share(t) >= zh_share else "en" for t in q["text"]]
    feats["conversation"] = q["conversation_id"].to_numpy()
    return feats


def abstention_table(frame: pd.DataFrame, p: np.ndarray, threshold: float) -> pd.DataFrame:
    """Per language and overall: abstention (refused / unanswerable), precision of abstention
    (unanswerable among refused; NaN when none refused), answered (answered / answerable), the
    counts."""
    refused = np.asarray(p) < threshold
    rows = {}
    for name, sel in [("all", np.ones(len(frame), bool)),
                      *[(lang, (frame["language"] == lang).to_numpy())
                        for lang in sorted(frame["language"].unique())]]:
        ans = frame["answerable"].to_numpy()[sel]
        ref = refused[sel]
        rows[name] = {"abstention": ref[~ans].mean() if (~ans).any() else np.nan,
                      "precision": (~ans[ref]).mean() if ref.any() else np.nan,
                      "answered": (~ref[ans]).mean() if ans.any() else np.nan,
                      "n_unanswerable": int((~ans).sum()), "n_answerable": int(ans.sum())}
    return pd.DataFrame(rows).T


@dataclass
class Report:
    """Out-of-fold P(answerable) of every question and the table at the threshold."""

    frame: pd.DataFrame
    p: np.ndarray
    threshold: float

    def table(self, threshold: float | None = None) -> pd.DataFrame:
        return abstention_table(self.frame, self.p,
                                self.threshold if threshold is None else threshold)

    def to_frame(self) -> pd.DataFrame:
        out = self.frame.copy()
        out["p_answerable"] = self.p
        return out


def kfold(frame: pd.DataFrame, *, threshold: float = 0.5, C: float = 1.0,
          features: tuple[str, ...] = QUERY_FEATURES) -> Report:
    """Leave-one-conversation-out predictions (each conversation's questions by a model of the
    others'). A conversation whose complement lacks either class is an InvalidInput."""
    convs = list(dict.fromkeys(frame["conversation"]))
    if len(convs) < 2:
        raise InvalidInput("conversations", "k-fold needs at least 2 conversations", len(convs))
    p = np.zeros(len(frame))
    for c in convs:
        test = (frame["conversation"] == c).to_numpy()
        model = fit_abstention(frame[~test], frame["answerable"].to_numpy()[~test], C=C,
                               features=features)
        p[test] = model.predict_proba(frame.loc[test, list(features)].to_numpy(np.float64))[:, 1]
    return Report(frame, p, threshold)


def fit_and_save(frame: pd.DataFrame, path: str | Path, *, dataset: dict, config: dict,
                 C: float = 1.0, features: tuple[str, ...] = QUERY_FEATURES) -> Path:
    """Fit on every question of ``frame`` and write the model with ``dataset`` (name, version,
    hash) and the training config and counts in its manifest."""
    model = fit_abstention(frame, frame["answerable"].to_numpy(), C=C, features=features)
    counts = {"questions": int(len(frame)), "unanswerable": int((~frame["answerable"]).sum()),
              "by_language": {k: int(v) for k, v in frame["language"].value_counts().items()}}
    return save_abstain_model(model, path, features=features, dataset=dataset,
                              trained={"C": C, "class_weight": "balanced", "config": config,
                                       **counts})

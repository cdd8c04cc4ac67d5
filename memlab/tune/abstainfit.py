"""Fit and measure the per-query abstention decision (:mod:`memlab.recall.abstain`) on a replay.

Each question of a replayed dataset is one training row: its query features
(:func:`memlab.recall.abstain.query_features`) and whether it is answerable (it has gold
evidence). :func:`kfold` predicts every question with a model fitted on the other conversations'
(folds by conversation, never a question's own user) and reports, per question language, the
abstention on unanswerable questions (the recall of abstaining), its precision (the share of
refused questions that were unanswerable) and the answered share of answerable ones, at
``recall.abstain_threshold``, or, with ``answered`` (``recall.abstain_answered``), at a threshold
per language chosen on the training folds alone (:func:`choose_threshold` over the inner
leave-one-conversation-out predictions of the other conversations): the first goal is that share
of answerable questions answered, abstention comes second. :func:`fit_and_save` fits on every
question and writes the skops file with its data and config recorded; :func:`language_thresholds`
chooses the thresholds a model fitted on every question should carry.

Extra unanswerable questions (off-topic questions asked of each conversation's store: memlab's
background questions, ``extra`` True in the frame) are training rows only: they are held out with
their conversation and never counted in the table, which measures the dataset's own questions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import dataclasses
from typing import Mapping, Sequence

from memlab.bench.datasets.canonical import Dataset, Question
from memlab.bench.replay import Replayed
from memlab.config import RecallConfig
from memlab.errors import InvalidInput
from memlab.recall.abstain import QUERY_FEATURES, fit_abstention, query_features, \
    save_abstain_model
from memlab.recall.background import BOTH, EN, ZH, language_codes

__all__ = ["questions_frame", "with_off_topic", "choose_threshold", "kfold", "Report",
           "abstention_table", "loco_predictions", "language_thresholds", "fit_and_save",
           "EXTRA_CATEGORY"]

#: the category of off-topic questions added for training (:func:`with_off_topic`)
EXTRA_CATEGORY = "off_topic_added"


LANGUAGE_NAMES = {ZH: "zh", EN: "en", BOTH: "mixed"}


def questions_frame(rep: Replayed, rc: RecallConfig | None = None, *,
                    extra_category: str = EXTRA_CATEGORY) -> pd.DataFrame:
    """One row per question (qid order): its query features, ``answerable``, ``language`` (zh,
    en or mixed as recall reads it: :func:`memlab.recall.background.language_codes` with ``rc``'s
    shares), ``conversation`` and ``extra`` (its category is ``extra_category``: an off-topic
    question added for training)."""
    q = rep.questions
    feats = query_features(rep.features.columns, len(q))
    feats["answerable"] = [len(e) > 0 for e in q["evidence"]]
    codes = language_codes(list(q["text"]), rc or RecallConfig())
    feats["language"] = [LANGUAGE_NAMES[int(c)] for c in codes]
    feats["conversation"] = q["conversation_id"].to_numpy()
    feats["extra"] = (q["category"] == extra_category).to_numpy() if "category" in q \
        else np.zeros(len(q), bool)
    return feats


def with_off_topic(ds: Dataset, questions: Mapping[str, Sequence[str]], rc: RecallConfig,
                   *, category: str = EXTRA_CATEGORY) -> Dataset:
    """``ds`` with off-topic questions added as unanswerable: each conversation gets its share
    of ``questions[lang]`` (the conversations of a language split the list round-robin, so that
    no text is asked of two conversations), its language being that of most of its own
    questions, asked when its last question is."""
    convs = ds.conversations()
    lang = {}
    for c in convs:
        codes = language_codes([q.text for q in ds.questions_of(c)], rc)
        lang[c] = "zh" if (codes == ZH).sum() * 2 > len(codes) else "en"
    extra = []
    for name, texts in questions.items():
        mine = [c for c in convs if lang[c] == name]
        for i, c in enumerate(mine):
            last = max(q.asked_at for q in ds.questions_of(c))
            extra += [Question(conversation_id=c, query_id=f"{c}-offtopic-{j:03d}", text=t,
                               asked_at=last, category=category, evidence=())
                      for j, t in enumerate(list(texts)[i::len(mine)])]
    return dataclasses.replace(ds, questions=ds.questions + tuple(extra))


def choose_threshold(p_answerable: np.ndarray, answered: float) -> float:
    """The largest threshold that answers at least ``answered`` of these answerable questions'
    P(answerable) (p >= threshold answers): sorted ascending, the value at index n - ceil(answered
    x n); 0 when there are none."""
    p = np.sort(np.asarray(p_answerable, np.float64))
    if not len(p):
        return 0.0
    need = int(np.ceil(answered * len(p) - 1e-9))
    return float(p[len(p) - need]) if need > 0 else 1.0


def abstention_table(frame: pd.DataFrame, p: np.ndarray, threshold: float) -> pd.DataFrame:
    """Per language and overall: abstention (refused / unanswerable), precision of abstention
    (unanswerable among refused; NaN when none refused), answered (answered / answerable), the
    counts; over the dataset's own questions (not the ``extra`` ones). ``threshold``: one value
    or one per row."""
    refused = np.asarray(p) < np.asarray(threshold)
    own = ~frame["extra"].to_numpy(bool) if "extra" in frame else np.ones(len(frame), bool)
    rows = {}
    for name, sel in [("all", own),
                      *[(lang, own & (frame["language"] == lang).to_numpy())
                        for lang in sorted(frame.loc[own, "language"].unique())]]:
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
    threshold: float | np.ndarray

    def table(self, threshold: float | np.ndarray | None = None) -> pd.DataFrame:
        return abstention_table(self.frame, self.p,
                                self.threshold if threshold is None else threshold)

    def to_frame(self) -> pd.DataFrame:
        out = self.frame.copy()
        out["p_answerable"] = self.p
        out["threshold"] = np.broadcast_to(self.threshold, len(out))
        return out


def loco_predictions(frame: pd.DataFrame, C: float, features: tuple[str, ...]) -> np.ndarray:
    """Each conversation's P(answerable) from a model of the other conversations'."""
    convs = list(dict.fromkeys(frame["conversation"]))
    if len(convs) < 2:
        raise InvalidInput("conversations", "k-fold needs at least 2 conversations", len(convs))
    p = np.zeros(len(frame))
    for c in convs:
        test = (frame["conversation"] == c).to_numpy()
        model = fit_abstention(frame[~test], frame["answerable"].to_numpy()[~test], C=C,
                               features=features)
        p[test] = model.predict_proba(frame.loc[test, list(features)].to_numpy(np.float64))[:, 1]
    return p


def language_thresholds(frame: pd.DataFrame, p: np.ndarray, answered: float,
                        default: float = 0.5) -> dict[str, float]:
    """Per language of ``frame``: :func:`choose_threshold` of its answerable questions' ``p``
    (``default`` for a language without any)."""
    out = {}
    ans = frame["answerable"].to_numpy(bool)
    for lang in ("zh", "en", "mixed"):
        sel = ans & (frame["language"] == lang).to_numpy()
        out[lang] = choose_threshold(p[sel], answered) if sel.any() else default
    return out


def kfold(frame: pd.DataFrame, *, threshold: float = 0.5, C: float = 1.0,
          features: tuple[str, ...] = QUERY_FEATURES, answered: float | None = None) -> Report:
    """Leave-one-conversation-out predictions (each conversation's questions by a model of the
    others'). A conversation whose complement lacks either class is an InvalidInput.

    ``answered`` (``recall.abstain_answered``): each held-out conversation's questions are
    decided at the threshold of their language chosen on the other conversations alone
    (:func:`language_thresholds` over their own leave-one-conversation-out predictions), else at
    ``threshold``."""
    frame = frame.reset_index(drop=True)
    p = loco_predictions(frame, C, features)
    if answered is None:
        return Report(frame, p, threshold)
    thr = np.full(len(frame), threshold, np.float64)
    for c in dict.fromkeys(frame["conversation"]):
        test = (frame["conversation"] == c).to_numpy()
        train = frame[~test].reset_index(drop=True)
        chosen = language_thresholds(train, loco_predictions(train, C, features), answered,
                                     threshold)
        thr[test] = frame.loc[test, "language"].map(chosen).to_numpy(np.float64)
    return Report(frame, p, thr)


def fit_and_save(frame: pd.DataFrame, path: str | Path, *, dataset: dict, config: dict,
                 C: float = 1.0, features: tuple[str, ...] = QUERY_FEATURES,
                 recall: RecallConfig | None = None) -> Path:
    """Fit on every question of ``frame`` and write the model with ``dataset`` (name, version,
    hash) and the training config and counts in its manifest. ``recall``: the manifest also
    records ``thresholds``, the per-language thresholds (:func:`language_thresholds`) that answer
    ``recall.abstain_answered`` of each language's answerable questions under leave-one-
    conversation-out predictions of ``frame`` (the values to give
    ``recall.abstain_threshold_zh`` / ``_en``), else ``recall.abstain_threshold``."""
    model = fit_abstention(frame, frame["answerable"].to_numpy(), C=C, features=features)
    counts = {"questions": int(len(frame)), "unanswerable": int((~frame["answerable"]).sum()),
              "by_language": {k: int(v) for k, v in frame["language"].value_counts().items()}}
    if recall is not None:
        counts["answered"] = recall.abstain_answered
        counts["thresholds"] = language_thresholds(
            frame, loco_predictions(frame, C, features), recall.abstain_answered,
            recall.abstain_threshold)
    return save_abstain_model(model, path, features=features, dataset=dataset,
                              trained={"C": C, "class_weight": "balanced", "config": config,
                                       **counts})

"""Folds by conversation (scikit-learn ``GroupKFold``): a configuration tuned on some
conversations is scored on others, never on the questions it was tuned on (issue 8, item 4).

Scoring is per question (a question's ranking depends on its own candidates only), so a fold is a
set of questions: tune on the mean over the training questions of :func:`memlab.tune.evaluate.
per_query`, report the held-out questions' mean. Nothing is replayed per fold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from memlab.errors import InvalidInput

__all__ = ["Fold", "conversation_folds"]


@dataclass(frozen=True)
class Fold:
    """One split: question keys (``conversation::query``) to tune on and to hold out."""

    index: int
    train: pd.Index
    test: pd.Index


def conversation_folds(conversations: pd.Series, k: int, *, seed: int | None = 0) -> list[Fold]:
    """``k`` folds of the questions in ``conversations`` (index: question key, values: its
    conversation), grouped so that no conversation is in two folds (``GroupKFold``; with ``seed``
    the groups are shuffled first, so that folds do not follow the file's order)."""
    from sklearn.model_selection import GroupKFold

    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise InvalidInput("folds", "must be an integer >= 2", k)
    groups = conversations.astype(str)
    n_groups = groups.nunique()
    if k > n_groups:
        raise InvalidInput("folds", f"at most the number of conversations ({n_groups}): a fold "
                           "holds whole conversations", k)
    if seed is not None:   # GroupKFold balances sizes deterministically; relabel groups first
        uniq = groups.unique()
        perm = dict(zip(uniq, np.random.default_rng(seed).permutation(len(uniq))))
        labels = groups.map(perm).to_numpy()
    else:
        labels = groups.to_numpy()
    out = []
    for i, (tr, te) in enumerate(GroupKFold(n_splits=k).split(np.zeros(len(groups)),
                                                               groups=labels)):
        out.append(Fold(i, conversations.index[tr], conversations.index[te]))
    return out

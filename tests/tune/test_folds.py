from __future__ import annotations

import pandas as pd
import pytest

from memlab.errors import InvalidInput
from memlab.tune.folds import conversation_folds


def _convs(sizes):
    keys, convs = [], []
    for c, n in enumerate(sizes):
        for q in range(n):
            keys.append(f"c{c}::q{q}"), convs.append(f"c{c}")
    return pd.Series(convs, index=keys)


def test_folds_hold_whole_conversations_and_cover_every_question_once():
    convs = _convs([5, 3, 8, 2, 7, 4, 6])
    folds = conversation_folds(convs, 3, seed=1)
    assert len(folds) == 3
    tested = pd.Index([]).append([f.test for f in folds])
    assert sorted(tested) == sorted(convs.index)            # each question held out once
    for f in folds:
        assert not set(f.train) & set(f.test)
        assert len(f.train) + len(f.test) == len(convs)
        assert not set(convs[f.train]) & set(convs[f.test])  # no conversation on both sides
    assert [f.test.tolist() for f in conversation_folds(convs, 3, seed=1)] == \
        [f.test.tolist() for f in folds]                     # seeded: reproducible


def test_bad_fold_counts_are_refused():
    convs = _convs([2, 2])
    with pytest.raises(InvalidInput, match="folds"):
        conversation_folds(convs, 1)
    with pytest.raises(InvalidInput, match="conversations"):
        conversation_folds(convs, 3)

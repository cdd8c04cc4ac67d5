"""Integration: the loaders on the real public datasets, when a shared copy sits next to the repository.

Skipped cleanly where ``../shared/datasets`` (relative to the repository) is absent. The counts pinned
here were measured on those copies (see SOURCE.txt there for their provenance).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlab.bench.datasets import locomo as LC
from memlab.bench.datasets import longmemeval as LM
from memlab.bench.datasets import memdaily as MD
from memlab.bench.datasets import registry as R
from memlab.bench.datasets.canonical import read_dataset, write_dataset

pytestmark = pytest.mark.slow  # reads the full public files (a few seconds)

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "datasets"


def _need(rel: str) -> Path:
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"no shared copy at {path}")
    return path


def test_locomo_counts_and_quirks(tmp_path):
    path = _need("locomo/locomo10.json")
    assert R.verify("locomo", path) == {"locomo10.json": True}
    ds = LC.load_locomo(path)
    assert len(ds.conversations()) == 10 and len(ds.items) == 5882
    # 1,986 questions in the file: 4 list no evidence; no question loses all of its evidence
    assert len(ds.questions) == 1982
    assert ds.report.dropped == {LC.DROP_NO_EVIDENCE_LISTED: 4, LC.DROP_MALFORMED_ID: 1, LC.DROP_UNKNOWN_ID: 2}
    assert ds.summary()["categories"] == {"1": 282, "2": 321, "3": 92, "4": 841, "5": 446}
    first = ds.items_of("conv-26")[0]
    assert (first.item_id, first.speaker, first.timestamp.isoformat()) == ("D1:1", "Caroline",
                                                                          "2023-05-08T13:56:00+00:00")
    qs = {q.query_id: q for q in ds.questions_of("conv-43")}
    assert "D11:26" in qs["q18"].evidence
    assert {q.query_id: q for q in ds.questions_of("conv-50")}["q69"].evidence == ("D30:5",)
    assert len(LC.load_locomo(path, categories=[1, 2, 3, 4]).questions) == 1536
    assert read_dataset(write_dataset(ds, tmp_path / "locomo")).content_hash() == ds.content_hash()


def test_longmemeval_oracle_counts():
    path = _need("longmemeval/longmemeval_oracle.json")
    ds = LM.load_longmemeval(path)
    assert (len(ds.questions), len(ds.items)) == (470, 10288)
    assert ds.report.dropped == {LM.DROP_ABSTENTION: 30}
    keep = LM.load_longmemeval(path, abstention="keep")
    assert len(keep.questions) == 479 and keep.report.dropped == {LM.DROP_NO_HAS_ANSWER: 21}
    sess = LM.load_longmemeval(path, granularity="session", abstention="keep")
    assert (len(sess.questions), len(sess.items)) == (500, 948)


@pytest.mark.parametrize("lang, items", [("zh", 171), ("en", 160)])
def test_madial_counts(lang, items):
    _need(f"madial_bench/{lang}")
    ds = R.load(f"madial-{lang}", path=SHARED / "madial_bench" / lang, check_sha256=True)
    assert (len(ds.items), len(ds.questions), ds.conversations()) == (items, 160, ["1", "2"])
    assert ds.report.dropped == {}
    assert ds.questions[0].evidence == ("1", "78", "105", "113", "108")


def test_memdaily_counts_and_noise():
    path = _need("memdaily")
    pool_dir = _need("memorybank/cn")
    ds = MD.load_memdaily(path)
    assert (len(ds.conversations()), len(ds.questions), len(ds.items)) == (1007, 1007, 8747)
    assert ds.report.dropped == {MD.DROP_ERRORQ: 17, MD.DROP_STREAM_MESSAGES: 196}
    noisy = MD.load_memdaily(path, noise=9, seed=0)
    assert len(noisy.items) == 8747 * 10
    distractors = {i.text for i in noisy.items if i.meta.get("distractor")}
    assert distractors <= set(MD.load_memorybank_pool(pool_dir))
    assert not distractors & {i.text for i in ds.items}

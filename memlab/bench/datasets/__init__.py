"""Recall datasets: the canonical format, loaders of the public benchmarks, and a registry by name.

>>> from memlab.bench.datasets import load
>>> ds = load("locomo", categories=[1, 2, 3, 4])        # doctest: +SKIP
>>> ds.summary(), ds.report                              # doctest: +SKIP
"""

from __future__ import annotations

from memlab.bench.datasets.canonical import (Card, Dataset, Item, LoadReport, Origin, Question,
                                             read_dataset, write_dataset)
from memlab.bench.datasets.locomo import load_locomo
from memlab.bench.datasets.longmemeval import load_longmemeval
from memlab.bench.datasets.madial import load_madial, load_madial_en, load_madial_zh
from memlab.bench.datasets.memdaily import load_memdaily, load_memorybank_pool
from memlab.bench.datasets.registry import DatasetSpec, info, list_datasets, load

__all__ = ["Card", "Dataset", "DatasetSpec", "Item", "LoadReport", "Origin", "Question", "info",
           "list_datasets", "load", "load_locomo", "load_longmemeval", "load_madial", "load_madial_en",
           "load_madial_zh", "load_memdaily", "load_memorybank_pool", "read_dataset", "write_dataset"]

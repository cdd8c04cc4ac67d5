"""memlab's frame convention: every result that has rows has ``.to_frame()`` (a pandas DataFrame,
one row per memory, question, trial or event), and inputs that take rows take a DataFrame.

- :class:`Records`: what the store's list reads return (``get``, ``history``, ``pinned``, ...): a
  list, as before, with ``.to_frame()`` (one row per record, one column per field);
- :func:`frame_items`: a DataFrame's rows as the items ``add_many`` takes (a missing value: the
  field not given);
- :func:`labelled`: one DataFrame or a ``{label: DataFrame}`` mapping (a figure's or a table's
  runs) as a checked ``{label: DataFrame}`` dict;
- :func:`renamed`: the warning of a retired spelling (``.frame``, ``.frame()``, ``.to_frames()``),
  kept as an alias for a while.

pandas is imported when a frame is made, not with this module.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Iterable, Mapping, Sequence

from memlab.errors import InvalidInput

__all__ = ["Records", "frame_items", "is_frame", "labelled", "renamed"]


def renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (DeprecationWarning) that ``old`` is retired in favour of ``new``."""
    warnings.warn(f"{old} is deprecated: use {new} (memlab's frame convention: every result "
                  "with rows has .to_frame())", DeprecationWarning, stacklevel=stacklevel)


def _row(record: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    if isinstance(record, dict):
        return dict(record)
    if hasattr(record, "to_dict"):
        return dict(record.to_dict())
    raise InvalidInput("record", "a dataclass record or a dict", type(record).__name__)


class Records(list):
    """A list of records (dataclasses such as :class:`~memlab.types.MemoryRecord`, or row
    dicts) with :meth:`to_frame`. ``columns``: the frame's columns, so that an empty list gives
    a frame with them (default: the first record's fields)."""

    def __init__(self, items: Iterable[Any] = (), *, columns: Sequence[str] | None = None
                 ) -> None:
        super().__init__(items)
        self.columns = tuple(columns) if columns is not None else None

    @classmethod
    def of(cls, items: Iterable[Any], record_type: type) -> "Records":
        """``items`` with the fields of the dataclass ``record_type`` as the columns."""
        return cls(items, columns=[f.name for f in dataclasses.fields(record_type)])

    def to_frame(self):
        """One row per record, one column per field (a DataFrame)."""
        import pandas as pd

        rows = [_row(r) for r in self]
        return pd.DataFrame(rows, columns=list(self.columns) if self.columns is not None
                            else None)


def is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (pandas not imported for it)."""
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas")


def labelled(data: Any, *, field: str, label: str = "run") -> dict[str, Any]:
    """``{label: data}`` for one DataFrame, else ``data`` (a non-empty mapping of DataFrames) with
    its keys as strings; InvalidInput naming ``field`` (``field[key]`` for a value) otherwise."""
    if is_frame(data):
        return {label: data}
    if not isinstance(data, Mapping) or not data:
        raise InvalidInput(field, "must be a DataFrame or a non-empty {label: DataFrame} dict",
                           type(data).__name__)
    for name, frame in data.items():
        if not is_frame(frame):
            raise InvalidInput(f"{field}[{name!r}]", "must be a DataFrame", type(frame).__name__)
    return {str(k): v for k, v in data.items()}


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NaTType", "NAType")


def frame_items(frame: Any, *, field: str = "items") -> list[dict[str, Any]]:
    """A DataFrame's rows as item dicts, one per row, its columns as the fields; a missing value
    (NaN, None, NaT, NA) means the field is not given for that row. Column names must be
    strings (InvalidInput naming the first that is not)."""
    for c in frame.columns:
        if not isinstance(c, str):
            raise InvalidInput(f"{field}.columns", "column names are the item's fields: "
                               "strings", c)
    return [{k: v for k, v in row.items() if not _missing(v)}
            for row in frame.to_dict("records")]

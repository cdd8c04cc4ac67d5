"""Where dataset records come from, and what a lenient load does with a bad one.

`Origin`: the file, 1-based line (JSON Lines) or path inside a JSON document of a record, kept on each
`Item` so that a later error about it (a benchmark replay the store refuses) names where to fix it.

`Rejections`: strict by default (the first bad record's `DatasetError` stops the load); lenient, each bad
record is dropped and listed as "file:line: why" (``LoadReport.rejected``, counted under `DROP_REJECTED`).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from memlab.errors import DatasetError, InvalidInput


@dataclass(frozen=True)
class Origin:
    """Where a record was read, for messages about it later (a replay the store refuses): the file,
    the 1-based line of a JSON Lines file, the record's path inside a JSON document (``where``), and
    the source's own name of the field that became ``text``."""

    file: str
    line: int | None = None
    where: str | None = None
    text_field: str = "text"

    def error(self, rule: str, *, field: str, value: Any = None) -> DatasetError:
        """A `DatasetError` about ``field`` (a canonical field name) of this record."""
        name = self.text_field if field == "text" else field
        return DatasetError(self.file, rule, line=self.line, value=value,
                            field=f"{self.where}.{name}" if self.where else name)


DROP_REJECTED = "record: malformed, dropped (lenient; see rejected)"


class Rejections:
    """What a load does with a bad record. Strict (the default): its `DatasetError` stops the load.
    Lenient: the record is dropped and the error kept in ``rejected`` ("file:line: why"), for the
    `LoadReport`; the load goes on."""

    def __init__(self, lenient: bool = False) -> None:
        if not isinstance(lenient, bool):
            raise InvalidInput("lenient", "must be true or false", lenient)
        self.lenient = lenient
        self.rejected: list[str] = []

    def reject(self, error: DatasetError) -> None:
        """Raise ``error`` (strict), or keep it and go on (lenient)."""
        if not self.lenient:
            raise error
        self.rejected.append(str(error))

    @contextmanager
    def record(self, file: str | os.PathLike[str] | None = None, *, line: int | None = None,
               where: str | None = None) -> Iterator[None]:
        """Guard the reading of one record: a `DatasetError` in the block goes to `reject`, and so
        does an `InvalidInput` from building the record, as a `DatasetError` at ``file``/``line``/
        ``where`` (when ``file`` is given). Whatever the block had not appended yet is dropped."""
        try:
            yield
        except DatasetError as exc:
            if not self.lenient:
                raise
            self.rejected.append(str(exc))
        except InvalidInput as exc:
            if file is None:
                raise
            name = f"{where}.{exc.field}" if where else exc.field
            self.reject(DatasetError(str(file), exc.rule, line=line, field=name, value=exc.value))

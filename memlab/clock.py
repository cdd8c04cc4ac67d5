"""Clocks. Nothing inside scoring reads the wall clock: a Clock is passed in."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Protocol, runtime_checkable

from memlab.errors import InvalidInput


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Current time as Unix seconds (UTC)."""


class SystemClock:
    """The wall clock. Use at the edges only (the CLI, a live agent)."""

    def now(self) -> float:
        return time.time()


@dataclass
class FixedClock:
    """A clock that says what it is told; ``advance`` moves it."""

    t: float

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise InvalidInput("seconds", "a clock cannot go backwards", seconds)
        self.t += seconds


class ReplayClock(FixedClock):
    """Dataset time: set to each item's timestamp as it is written, then to the question's date."""

    def set(self, t: float | datetime) -> None:
        value = to_unix(t)
        if value < self.t:
            raise InvalidInput("t", "replay time must not go backwards", value)
        self.t = value


def to_unix(t: float | int | datetime) -> float:
    """Unix seconds of a timestamp; a naive datetime is an error (time zones matter)."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise InvalidInput("timestamp", "datetime must be timezone-aware", t.isoformat())
        return t.timestamp()
    return float(t)


def from_unix(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=timezone.utc)

"""Python values for the SQL Server types Python's own classes cannot hold exactly.

``datetime2``, ``time`` and ``datetimeoffset`` keep 100-nanosecond ticks (Python's ``datetime`` stops
at microseconds). Every other type uses a Python class: bool, int, Decimal, float, str, bytes,
datetime.date, datetime.datetime (datetime, smalldatetime), uuid.UUID; NULL is None.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from .sqltypes import SqlType

TICKS_PER_SECOND = 10_000_000
TICKS_PER_DAY = 86_400 * TICKS_PER_SECOND


@dataclass(frozen=True, slots=True, order=True)
class Time:
    """A time of day in 100 ns ticks since midnight."""

    ticks: int

    @classmethod
    def from_time(cls, value: dt.time) -> Time:
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return cls(seconds * TICKS_PER_SECOND + value.microsecond * 10)

    def to_time(self) -> dt.time:
        """Truncated to microseconds."""
        seconds, rest = divmod(self.ticks, TICKS_PER_SECOND)
        return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, rest // 10)

    def isoformat(self, scale: int = 7) -> str:
        seconds, rest = divmod(self.ticks, TICKS_PER_SECOND)
        text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return text + (f".{rest:07d}"[: scale + 1] if scale else "")


@dataclass(frozen=True, slots=True, order=True)
class DateTime2:
    """A date and a time of day with 100 ns ticks, no time zone."""

    date: dt.date
    time: Time

    @classmethod
    def from_datetime(cls, value: dt.datetime) -> DateTime2:
        return cls(value.date(), Time.from_time(value.time()))

    def to_datetime(self) -> dt.datetime:
        """Truncated to microseconds."""
        return dt.datetime.combine(self.date, self.time.to_time())

    def isoformat(self, scale: int = 7) -> str:
        return f"{self.date.isoformat()} {self.time.isoformat(scale)}"


@dataclass(frozen=True, slots=True)
class DateTimeOffset:
    """An instant (``utc``, 100 ns ticks) and the offset it was written with, in minutes."""

    utc: DateTime2
    offset_minutes: int

    def local(self) -> DateTime2:
        """The date and time as written (UTC plus the offset)."""
        ticks = self.utc.date.toordinal() * TICKS_PER_DAY + self.utc.time.ticks
        days, rest = divmod(ticks + self.offset_minutes * 60 * TICKS_PER_SECOND, TICKS_PER_DAY)
        return DateTime2(dt.date.fromordinal(days), Time(rest))

    def isoformat(self, scale: int = 7) -> str:
        sign = "-" if self.offset_minutes < 0 else "+"
        hours, minutes = divmod(abs(self.offset_minutes), 60)
        return f"{self.local().isoformat(scale)} {sign}{hours:02d}:{minutes:02d}"

    # SQL Server compares datetimeoffset values by their instant only
    def __eq__(self, other: object) -> bool:
        return isinstance(other, DateTimeOffset) and self.utc == other.utc

    def __hash__(self) -> int:
        return hash(self.utc)

    def __lt__(self, other: DateTimeOffset) -> bool:
        return self.utc < other.utc


@dataclass(frozen=True, slots=True)
class Variant:
    """A ``sql_variant``: a value and the base type it carries."""

    value: Any
    type: SqlType

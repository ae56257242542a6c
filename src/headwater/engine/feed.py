"""The connector interface for distributed runs (Spark), where the driver reads and executors build.

A :class:`ChangeFeed` lives in one driver-side process and owns the database's change stream:
it reads ahead (`latest`), hands out picklable work items covering a range of positions
(`plan`), and acknowledges a position to the database once the destination committed it
(`commit`). A :class:`WorkDecoder` — also picklable, shipped with the work — turns one work
item into records anywhere: an executor process on another machine, with no access to the
driver's memory or files. Offsets are plain JSON-able dicts so that a checkpoint (Spark's
offset log) can store them; replaying a range after a restart yields the same records.

Every record comes with a *position*: a fixed-width hex string that sorts the connector's
records in their delivery order (snapshot records before streamed ones; within a transaction,
by message). Destinations order and deduplicate by it (e.g. a MERGE applies an event only when
its position is newer than the row's).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from headwater.engine.records import SourceRecord

Offset = dict[str, Any]


def position_key(major: int, minor: int, sub: int = 0) -> str:
    """A sortable position: 16 + 16 + 8 hex digits (e.g. commit LSN, message index, record index)."""
    return f"{major:016X}{minor:016X}{sub:08X}"


@dataclass(frozen=True)
class PositionedRecord:
    position: str
    record: SourceRecord


class WorkDecoder(ABC):
    """Builds the records of one work item; runs in executors (picklable, no open resources)."""

    @abstractmethod
    def decode(self, item: Any) -> Iterator[PositionedRecord]: ...


class ChangeFeed(ABC):
    """Driver side of a distributed run. Not thread-safe: one caller (the stream reader)."""

    @abstractmethod
    def initial_offset(self) -> Offset:
        """Where a run without a checkpoint starts (may take the slot and plan a snapshot)."""

    @abstractmethod
    def latest(self, start: Offset, max_records: int | None) -> Offset:
        """Read ahead from `start` and return the end of the next batch (== `start` when nothing
        new arrived); about `max_records` records at most when given."""

    @abstractmethod
    def plan(self, start: Offset, end: Offset) -> list[Any]:
        """Picklable work items covering exactly (`start`, `end`], in order; after a restart this
        re-reads the range from the database."""

    @abstractmethod
    def commit(self, end: Offset) -> None:
        """The destination durably holds everything up to `end`: acknowledge it to the database."""

    @abstractmethod
    def decoder(self) -> WorkDecoder: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

"""What a connector implements for the engine's coordinator: the driver-side I/O of one run.

In the spirit of Debezium's `ChangeEventSourceFactory` + `OffsetContext`: the engine decides
(snapshot policy, table order, chunk plan, markers, the snapshot -> stream handover, read-ahead
and batching) and the connector does the database's part:

- **positions**: what a stored offset says (:meth:`CaptureSource.stored`), where a run without
  a snapshot resumes, a fixed-width sort key per record (the connector's own);
- **snapshot source**: open a consistent point (:meth:`open_snapshot`), list its tables and
  the dialect to plan chunks (:meth:`snapshot_tables`, :meth:`chunk_dialect`), read one chunk
  (:meth:`read_chunk` in the standalone runner; a picklable unit and decoder in Spark);
- **streaming source**: stream from a position into the engine (:meth:`stream`), or hand over
  units of work for executors (:meth:`stream_units`), and acknowledge what the destination holds.

Offsets are plain JSON-able dicts (a checkpoint or an offsets file stores them); only the
connector reads their fields.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwater.engine.connector import ConnectorError, Emit
from headwater.engine.snapshot_plan import ChunkDialect, SnapshotChunk, SnapshotTable
from headwater.engine.snapshot_policy import Stored

Offset = dict[str, Any]


@dataclass
class SnapshotPoint:
    """A consistent point of the database, opened for a snapshot: `handle` is what a reader of
    another connection or process needs to read inside it (picklable: PostgreSQL's exported
    snapshot name, LSN and transaction id), `offset` where streaming resumes after it."""

    handle: Any
    offset: Offset


class UnitStream(ABC):
    """Streamed changes as units of work for executors, read ahead by a background reader.

    Each unit comes with the offset after it (ordered by :meth:`CaptureSource.sort_key`);
    `between_transactions`
    says whether an offset lies between transactions (a batch with transaction metadata ends only
    there); `split` cuts a unit where its offsets reach a key (a restart reads the same changes in
    units of other sizes than the batch that logged the offset)."""

    @abstractmethod
    def get(self, timeout: float) -> tuple[Any, Offset]:
        """The next unit and the offset after it; raises queue.Empty after `timeout` seconds."""

    @abstractmethod
    def between_transactions(self, offset: Offset) -> bool: ...

    @abstractmethod
    def split(self, unit: Any, end_key: tuple[Any, ...]) -> tuple[Any | None, Any]:
        """(the part of `unit` up to `end_key`, or None; the rest)."""

    @abstractmethod
    def append(self, units: list[Any], unit: Any) -> None:
        """Add a unit to a batch's list (joining it to the last one where a transaction must
        stay whole)."""

    @abstractmethod
    def changes(self, unit: Any) -> int:
        """The changes in a unit (what a batch's size counts)."""

    @abstractmethod
    def nbytes(self, unit: Any) -> int: ...

    @abstractmethod
    def past(self, offset: Offset, target: Any) -> bool:
        """Whether `offset` lies at or after `target` (from :meth:`CaptureSource.current_position`)."""

    @abstractmethod
    def caught_up(self, target: Any) -> bool:
        """Everything before `target` (from :meth:`CaptureSource.current_position`) was handed over."""

    @abstractmethod
    def check(self) -> None:
        """Raise the reader's failure, if it failed."""

    @abstractmethod
    def close(self) -> None: ...


class CaptureSource(ABC):
    """One run's connection to the database, driver side. Not thread-safe (one caller)."""

    @abstractmethod
    def open(self) -> None:
        """Connect, check the server, find the captured tables (and, where it applies, set up
        what streaming needs: PostgreSQL's publication)."""

    @abstractmethod
    def stored(self, offset: Offset | None, *, in_snapshot: bool = False) -> tuple[Stored, bool]:
        """What the stored offset says, and whether the database still holds its position
        (ConnectorError when the offset is corrupt). `in_snapshot`: the offset is where a snapshot
        that did not complete was to stream from (a Spark checkpoint's snapshot batch)."""

    @abstractmethod
    def sort_key(self, offset: Offset) -> tuple[Any, ...]:
        """Orders the connector's offsets."""

    @abstractmethod
    def lost_error(self, offset: Offset, *, resumer: str | None = None,
                   fresh_start: str = "remove the offsets file") -> ConnectorError:
        """The error for a stored position the database no longer holds: what is lost, what to do."""

    @abstractmethod
    def resume_offset(self, offset: Offset | None) -> Offset:
        """Where streaming starts without a snapshot (the stored offset, or the database's
        current position for a first start)."""

    # -- snapshot source -------------------------------------------------------------------

    @abstractmethod
    def open_snapshot(self, offset: Offset | None, resnapshot: bool) -> SnapshotPoint:
        """Open a consistent point to snapshot at. `offset`: the stored one (a snapshot taken
        again); `resnapshot`: the stored position is gone and a new one is wanted."""

    def resume_snapshot(self, offset: Offset) -> SnapshotPoint | None:
        """Open a NEW consistent point to read the rest of an initial snapshot a crash
        interrupted (`offset`: a record's offset of that snapshot, or the Spark source's
        snapshot-phase offset), whose point's offset streams from the interrupted snapshot's
        ORIGINAL position (so every change since the first point is streamed after the rows read
        now); None, with a log line saying why, when the database no longer holds that position
        or the connector cannot resume (the engine then takes a new snapshot as Debezium does)."""
        return None

    @abstractmethod
    def snapshot_tables(self, point: SnapshotPoint) -> list[SnapshotTable]:
        """The captured tables (any order; the plan orders them)."""

    @abstractmethod
    def chunk_dialect(self, point: SnapshotPoint) -> ChunkDialect:
        """The planning queries, run inside the snapshot."""

    @abstractmethod
    def read_chunk(self, point: SnapshotPoint, chunk: SnapshotChunk, emit: Callable[[Any], None],
                   stop: threading.Event) -> None:
        """Standalone: read one chunk inside the snapshot, handing its records to `emit`."""

    @abstractmethod
    def snapshot_unit(self, point: SnapshotPoint, chunk: SnapshotChunk) -> Any:
        """Spark: a picklable unit of work reading `chunk` inside the snapshot (for the decoder)."""

    @abstractmethod
    def close_snapshot(self, point: SnapshotPoint | None = None) -> None:
        """End the snapshot transaction (idempotent)."""

    @abstractmethod
    def completed_offset(self, snapshot_offset: Offset) -> Offset:
        """The offset saying the snapshot at `snapshot_offset` (a point's offset) completed:
        streaming resumes there."""

    # -- streaming source ------------------------------------------------------------------

    @abstractmethod
    def stream(self, start: Offset, emit: Emit, stop: threading.Event) -> None:
        """Standalone: stream from `start` into `emit` until `stop` is set."""

    @abstractmethod
    def stream_units(self, start: Offset, read_ahead: int) -> UnitStream:
        """Spark: start a background reader at `start` handing over units of work."""

    def release(self) -> None:  # noqa: B027 - optional hook
        """Close every connection after a retriable failure (the next run opens them again)."""

    def open_extract(self, idle_seconds: float) -> SnapshotPoint:
        """A one-off batch read: a consistent point held open for tasks that read it later (until
        they all did, or `idle_seconds` pass without one reading)."""
        raise ConnectorError("this connector has no batch reads")

    def expect_tasks(self, count: int) -> None:  # noqa: B027 - optional hook
        """The batch read's tasks: the point is released once they all read."""

    def release_extract(self) -> None:  # noqa: B027 - optional hook
        """Give up the batch read's point (planning failed)."""

    def extract_decoder(self) -> Any:
        """The decoder of the batch read's tasks."""
        raise ConnectorError("this connector has no batch reads")

    def incremental_source(self) -> Any:
        """The connector's part of incremental and blocking snapshots
        (:class:`headwater.engine.signals.connector.IncrementalSource`), opened on first use;
        None when the connector has none."""
        return None

    # -- signals in the Spark source (headwater.engine.signals.units) -------------------------

    def record_positions(self, records: list[Any]) -> list[str]:
        """The positions the connector's WorkDecoder would give `records`, built on the driver by
        :meth:`stream` (what one call of its emit handed over, in order: a message's records are
        never split between calls), so that they sort with the executors' records."""
        raise ConnectorError("this connector cannot run signals in the Spark source (its records built on the "
                             "driver have no positions)")

    def offset_position(self, offset: Offset) -> str:
        """A position after every record up to `offset` and before every record after it, of the
        same width as :meth:`record_positions` gives (a suffix added to it stays below the next
        record's)."""
        raise ConnectorError("this connector cannot run signals in the Spark source (its offsets have no "
                             "positions)")

    def keep_stream_alive(self) -> None:  # noqa: B027 - optional hook
        """Called on the thread running :meth:`stream`, from inside its `emit`, while the records
        emitted wait for room downstream (the Spark source's read-ahead is full): keep the
        connection alive meanwhile (PostgreSQL: a status update, before wal_sender_timeout ends
        it). A connector that polls needs nothing."""

    @abstractmethod
    def current_position(self) -> Any:
        """The database's current end of log (Trigger.AvailableNow reads up to it)."""

    @abstractmethod
    def acknowledge(self, offset: Offset) -> None:
        """The destination durably holds everything up to `offset`."""

    @abstractmethod
    def close(self) -> None: ...

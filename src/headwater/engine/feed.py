"""The coordinator for distributed runs (Spark), where the driver reads and executors build.

A :class:`CaptureFeed` lives in one driver-side process and owns the database's change stream
through the connector's :class:`~headwater.engine.source.CaptureSource`: it decides the start per
`snapshot.mode` (the same policy as the standalone runner), plans the snapshot as chunks, reads
ahead (`latest`), hands out picklable work items covering a range of positions (`plan`), and
acknowledges a position to the database once the destination committed it (`commit`). A
:class:`WorkDecoder` — also picklable, shipped with the work — turns one work item into records
anywhere: an executor process on another machine, with no access to the driver's memory or files.
Offsets are plain JSON-able dicts (the connector's, plus `phase`) so that a checkpoint (Spark's
offset log) can store them; replaying a range after a restart yields the same records.

Every record comes with a *position*: a fixed-width string chosen by the connector that sorts its
records in their delivery order (snapshot records before streamed ones; within a transaction, by
message). Destinations order and deduplicate by it (e.g. a MERGE applies an event only when its
position is newer than the row's).
"""

from __future__ import annotations

import logging
import queue
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.engine.capture import plan_snapshot, start_decision
from headwater.engine.read_ahead import READ_AHEAD_BYTES
from headwater.engine.records import SourceRecord
from headwater.engine.snapshot_policy import SnapshotMode
from headwater.engine.source import Offset, SnapshotPoint, UnitStream

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector
    from headwater.engine.typed_rows import TypedRowChanges, TypedRows  # pyarrow: executors only

log = logging.getLogger(__name__)

PHASE_SNAPSHOT = "snapshot"
PHASE_STREAM = "stream"
# changes the driver reads ahead of Spark (source option readAheadMessages), and at most
# READ_AHEAD_BYTES of them. A streaming micro-batch takes what has been read ahead (under
# AvailableNow it waits for the read-ahead to fill), so this also sizes the batches of a catch-up:
# each one costs a Delta sink a MERGE or rewrite of the whole table. The byte bound keeps wide
# rows in check.
DEFAULT_READ_AHEAD_MESSAGES = 1_048_576

# Properties of the standalone runner that the Spark source does not apply: a warning at start
# names each one that is set (the Spark source's own options are in docs/spark.md).
_OFFSETS_IN_CHECKPOINT = "Spark's checkpoint is the offset store"
_SPARK_BATCHES = ("the Spark source's batches are bounded by its maxRowsPerBatch and readAheadMessages "
                  "options")
NO_EFFECT_IN_SPARK: dict[str, str] = {
    "offset.storage": _OFFSETS_IN_CHECKPOINT,
    "offset.storage.file.filename": _OFFSETS_IN_CHECKPOINT,
    "offset.flush.interval.ms": _OFFSETS_IN_CHECKPOINT + ", written as each batch commits",
    "max.batch.size": _SPARK_BATCHES,
    "max.queue.size": _SPARK_BATCHES,
    "max.queue.size.in.bytes": _SPARK_BATCHES,
    "poll.interval.ms": "Spark's trigger decides when a batch is planned",
    "encoding.workers": "Spark's executors build the records",
    "heartbeat.interval.ms": "the Spark source emits no heartbeat records (the database is acknowledged as "
                             "each batch commits)",
    "heartbeat.action.query": "the Spark source emits no heartbeat records",
    "snapshot.delay.ms": "the Spark source snapshots when its first batch is planned",
}


@dataclass(frozen=True)
class PositionedRecord:
    position: str
    record: SourceRecord


class WorkDecoder(ABC):
    """Builds the records of one work item; runs in executors (picklable, no open resources)."""

    @abstractmethod
    def decode(self, item: Any) -> Iterator[PositionedRecord]: ...

    # Typed rows (headwater.engine.typed_rows), for lake sinks; optional: by default every item
    # is decoded as events.

    def decode_typed_rows(self, item: Any) -> list[TypedRows] | None:
        """The item's rows as typed rows (a snapshot chunk), or None when it is decoded as events."""
        return None

    def typed_row_changes(self) -> TypedRowChanges | None:
        """A task's gatherer of typed row changes for :meth:`decode_changes`, or None when the
        connector has none."""
        return None

    def decode_changes(self, item: Any, changes: TypedRowChanges) -> Iterator[PositionedRecord]:
        """Like :meth:`decode`, but the row changes `changes` takes go to it instead of becoming
        events; it hands them on as typed rows."""
        return self.decode(item)


def _phase(offset: Offset) -> str:
    return str(offset.get("phase") or PHASE_STREAM)


def _own(offset: Offset) -> Offset:
    """The connector's part of a feed offset."""
    return {k: v for k, v in offset.items() if k != "phase"}


class CaptureFeed:
    """Driver side of a distributed run. Not thread-safe: one caller (the stream reader)."""

    def __init__(self, connector: SourceConnector, *, snapshot_chunk_rows: int = 100_000,
                 read_ahead_messages: int = DEFAULT_READ_AHEAD_MESSAGES) -> None:
        self.connector = connector
        self.config = connector.config
        self.mode = SnapshotMode.from_config(connector.config)
        self.snapshot_chunk_rows = snapshot_chunk_rows
        self.read_ahead_messages = read_ahead_messages
        for name, why in connector.spark_no_effect(dict(NO_EFFECT_IN_SPARK)).items():
            if self.config.is_set(name):
                log.warning("property '%s' has no effect in the Spark source: %s", name, why)
        self.source = connector.capture_source(parallel=True)
        self._opened = False
        self._point: SnapshotPoint | None = None
        self._units: UnitStream | None = None
        self._ready: list[tuple[Any, Offset]] = []   # read ahead, in order
        self._target: Any = None                    # Trigger.AvailableNow: read up to here, then stop
        self._initial: Offset | None = None         # what initial_offset decided (Spark asks more than once)

    def decoder(self) -> WorkDecoder:
        return self.connector.work_decoder()

    def _open(self) -> None:
        if not self._opened:
            self.source.open()
            self._opened = True

    def _snapshot_offset(self, point: SnapshotPoint) -> Offset:
        return {"phase": PHASE_SNAPSHOT, **point.offset}

    # -- start -------------------------------------------------------------------------------

    def initial_offset(self) -> Offset:
        # Spark asks twice before batch 0 (for its start, then again to plan it): the second
        # answer must be the first, not a second snapshot point
        if self._initial is None:
            self._open()
            _, decision = start_decision(self.connector, self.source, None)
            if decision.snapshot:
                self._point = self.source.open_snapshot(None, False)
                self._initial = self._snapshot_offset(self._point)
            else:
                self._initial = {"phase": PHASE_STREAM, **self.source.resume_offset(None)}
        return dict(self._initial)

    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: everything committed up to now, then no more batches."""
        self._open()
        self._target = self.source.current_position()

    def _position_gone(self, start: Offset) -> bool:
        """Before streaming starts: whether the database no longer holds the checkpoint's position
        (and snapshot.mode takes a new snapshot then; the connector's error when it does not)."""
        if self._units is not None:
            return False
        self._open()
        _, decision = start_decision(self.connector, self.source, _own(start), resumer="the checkpoint",
                                     fresh_start="use a new checkpoint location")
        return decision.resnapshot

    # -- batches -----------------------------------------------------------------------------

    def latest(self, start: Offset, max_records: int | None) -> Offset:
        if _phase(start) == PHASE_SNAPSHOT:
            return {"phase": PHASE_STREAM, **self.source.completed_offset(_own(start))}
        if not self.mode.streams:
            return start
        if self._position_gone(start):
            # a new snapshot of the present (from a new log position where the connector needs
            # one), as the standalone runner does. This batch only moves there (it reads nothing);
            # the next one reads the snapshot, then the stream goes on
            self._point = self.source.open_snapshot(_own(start), True)
            return self._snapshot_offset(self._point)
        units = self._ensure_streaming(start)
        sort_key = self.source.sort_key
        start_key = sort_key(_own(start))
        if self._target is not None and units.past(_own(start), self._target):
            return start
        limit = max_records or self.read_ahead_messages
        count = sum(units.changes(u) for u, _ in self._ready)
        volume = sum(units.nbytes(u) for u, _ in self._ready)
        available_now = self._target is not None
        # AvailableNow catches up on a backlog: a batch waits until the reader has read ahead as
        # much as it may (or everything there is), since every batch pays the sinks' fixed costs
        # (a MERGE reads the whole table). Otherwise a batch takes what has arrived: latency first.
        fill = min(limit, self.read_ahead_messages) if available_now else 0
        deadline = time.monotonic() + (120.0 if available_now else 0.5)
        progress = False
        while True:
            units.check()
            # a unit may end where the batch starts (e.g. only the BEGIN of the transaction a
            # restart resumes in): returning `start` then would end an AvailableNow run early.
            # Once the end has moved, more units cannot move it back: no need to look again.
            progress = progress or sort_key(_own(self._batch_end(start, limit))) > start_key
            if progress and count >= limit:
                break
            if available_now and not progress and units.caught_up(self._target):
                break
            filled = count >= fill or volume >= READ_AHEAD_BYTES
            try:
                item = units.get(timeout=0.0 if progress and filled else 0.2)
            except queue.Empty:
                if progress and (filled or (available_now and units.caught_up(self._target))):
                    break
                if time.monotonic() >= deadline:
                    break
                continue
            self._ready.append(item)
            count += units.changes(item[0])
            volume += units.nbytes(item[0])
        return self._batch_end(start, limit)

    def _batch_end(self, start: Offset, limit: int) -> Offset:
        """The end of the next batch from what was read ahead: about `limit` changes, but never
        cut before the position moved past `start`."""
        units = self._units
        assert units is not None
        end = start
        start_key = self.source.sort_key(_own(start))
        counted = 0
        for unit, after in self._ready:
            changes = units.changes(unit)
            if counted and counted + changes > limit and self.source.sort_key(_own(end)) > start_key:
                break
            counted += changes
            if not units.between_transactions(after):
                continue
            end = {"phase": PHASE_STREAM, **after}
        return end

    def plan(self, start: Offset, end: Offset) -> list[Any]:
        if _phase(start) == PHASE_SNAPSHOT:
            return self._plan_snapshot(start)
        if _phase(end) == PHASE_SNAPSHOT:  # the move to a new snapshot (see latest)
            return []
        if self.source.sort_key(_own(end)) <= self.source.sort_key(_own(start)):
            return []
        if self._position_gone(start):
            # a batch logged before the position went, replayed: its changes cannot be read again;
            # the snapshot the next batch takes holds their result
            log.warning("the changes of the batch from %s to %s cannot be read again; the new snapshot that "
                        "follows replaces them", _own(start), _own(end))
            return []
        units = self._ensure_streaming(start)
        end_key = self.source.sort_key(_own(end))
        work: list[Any] = []
        while True:
            if not self._ready:
                units.check()
                try:
                    self._ready.append(units.get(timeout=1.0))
                except queue.Empty:
                    continue
            unit, after = self._ready[0]
            after_key = self.source.sort_key(after)
            if after_key <= end_key:
                self._ready.pop(0)
                units.append(work, unit)
                if after_key == end_key:
                    return work
                continue
            head, tail = units.split(unit, end_key)
            if head is not None:
                units.append(work, head)
            self._ready[0] = (tail, after)
            return work

    def _plan_snapshot(self, start: Offset) -> list[Any]:
        self._open()
        at = _own(start)
        point = self._point
        if point is None or self.source.sort_key(point.offset) != self.source.sort_key(at):
            # the snapshot was planned by another process (its consistent point is gone): the
            # policy decides as for a stored snapshot that did not complete
            _, decision = start_decision(self.connector, self.source, at, in_snapshot=True,
                                         resumer="the checkpoint's unfinished snapshot",
                                         fresh_start="use a new checkpoint location and empty outputs")
            log.warning("the snapshot of the checkpoint did not complete; taking it again, then streaming")
            self._point = point = self.source.open_snapshot(at, decision.resnapshot)
        chunks = plan_snapshot(self.connector, self.source, point, self.snapshot_chunk_rows)
        return [self.source.snapshot_unit(point, chunk) for chunk in chunks]

    def _ensure_streaming(self, start: Offset) -> UnitStream:
        if self._units is None:
            self._open()
            if self._point is not None:
                self.source.close_snapshot(self._point)
                self._point = None
            self._units = self.source.stream_units(_own(start), self.read_ahead_messages)
        return self._units

    def commit(self, end: Offset) -> None:
        if _phase(end) != PHASE_STREAM:
            return
        own = _own(end)
        if self._point is not None and own.get("snapshot_completed"):
            self.source.close_snapshot(self._point)
            self._point = None
        self.source.acknowledge(own)  # the connector acknowledges only once it streams

    # -- batch reads -------------------------------------------------------------------------

    def plan_extract(self, idle_seconds: float) -> tuple[list[Any], WorkDecoder]:
        """A one-off batch read: every captured table, chunked, inside one consistent snapshot
        that stays open for the tasks; nothing streams. The chunks' records carry the log position
        current at the snapshot."""
        point = self.source.open_extract(idle_seconds)
        try:
            chunks = plan_snapshot(self.connector, self.source, point, self.snapshot_chunk_rows)
            work = [self.source.snapshot_unit(point, chunk) for chunk in chunks]
        except BaseException:
            self.source.release_extract()
            raise
        finally:
            self.source.close_snapshot(point)
        self.source.expect_tasks(len(work))
        log.info("batch read: %d chunk(s) inside one snapshot", len(work))
        return work, self.source.extract_decoder()

    def close(self) -> None:
        if self._units is not None:
            self._units.close()
            self._units = None
        self._point = None
        self._ready = []
        self.source.close()
        self._opened = False
        self._initial = None

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

import json
import logging
import queue
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.engine.capture import plan_snapshot, start_decision
from headwater.engine.connector import ConnectorError
from headwater.engine.read_ahead import READ_AHEAD_BYTES
from headwater.engine.records import SourceRecord
from headwater.engine.signals.blocking import BLOCKING_KEY
from headwater.engine.signals.run import signals_configured
from headwater.engine.snapshot_plan import SnapshotChunk
from headwater.engine.snapshot_policy import SnapshotMode
from headwater.engine.snapshot_resume import (
    PROGRESS_KEY,
    STREAM_FROM_KEY,
    SnapshotProgress,
    between,
    progress_of,
    remaining,
    without_progress,
)
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
    "snapshot.chunk.rows": "the Spark source's chunks are sized by its snapshotChunkRows option",
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


# Signals (engine/signals/units.py): a record the signaling stage adds after the stream's last
# record (a blocking snapshot's rows, a notification) carries that record's offset, so its connector
# sort key is that record's: its number after it, under this key, orders it after that record (a
# batch may end at it: the stream need not move on first).
ADDED_KEY = "headwater_added"


def _own(offset: Offset) -> Offset:
    """The connector's part of a feed offset."""
    return {k: v for k, v in offset.items() if k not in ("phase", ADDED_KEY, BLOCKING_KEY)}


def stream_key(source: Any, offset: Offset) -> tuple[Any, ...]:
    """Orders the stream's offsets: the connector's sort key, then (a record the signaling stage
    added) its number after the record whose offset it carries. A tuple sorts before its
    extensions, so a plain offset sorts before the added records that follow it, and they before
    the next plain one of a greater connector key."""
    key = tuple(source.sort_key(_own(offset)))
    added = offset.get(ADDED_KEY)
    return (*key, int(added)) if added else key


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
        # the snapshot planned at self._point, and where each progress text leaves off in it
        self._plan: list[SnapshotChunk] | None = None
        self._plan_index: dict[str, int] = {}
        # the snapshot point (sort key of its offset) a checkpoint's snapshot batches are read at
        # in this process: a point resuming it, or None when it cannot be (its position is gone)
        self._serving: tuple[tuple[Any, ...], SnapshotPoint | None] | None = None
        # signals (headwater.engine.signals): the stream runs through the signaling stage here,
        # on the driver, and hands over the records it built
        self._signals = signals_configured(connector, None)
        self._snapshotted = False  # a snapshot batch was planned in this process (notifications)

    def decoder(self) -> WorkDecoder:
        decoder = self.connector.work_decoder()
        if self._signals:
            # the stream's units hold records the driver built (engine/signals/units.py)
            from headwater.engine.signals.units import DriverRecordsDecoder

            decoder = DriverRecordsDecoder(decoder)
        if self.config.get("notification.enabled.channels"):
            # snapshot units carrying the initial snapshot's notifications (see _plan_snapshot)
            from headwater.engine.snapshot_notification_units import NotifyingDecoder

            decoder = NotifyingDecoder(decoder)
        return decoder

    def _key(self, offset: Offset) -> tuple[Any, ...]:
        """A stream-phase feed offset's sort key (see stream_key)."""
        return stream_key(self.source, offset)

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
        if self._signals:
            raise ConnectorError("Trigger.AvailableNow is not available with signals (signal.data.collection, "
                                 "signal.enabled.channels, notification.enabled.channels) in the Spark source: "
                                 "an incremental snapshot outlives any end chosen at the start; use a "
                                 "processing-time trigger")
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
            self._snapshotted = True
            return self._snapshot_batch_end(start, max_records)
        if not self.mode.streams:
            return start
        if self._position_gone(start):
            # a new snapshot of the present (from a new log position where the connector needs
            # one), as the standalone runner does. This batch only moves there (it reads nothing);
            # the next one reads the snapshot, then the stream goes on
            self._point = self.source.open_snapshot(_own(start), True)
            return self._snapshot_offset(self._point)
        units = self._ensure_streaming(start)
        start_key = self._key(start)
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
            progress = progress or self._key(self._batch_end(start, limit)) > start_key
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
        start_key = self._key(start)
        counted = 0
        for unit, after in self._ready:
            changes = units.changes(unit)
            if counted and counted + changes > limit and self._key(end) > start_key:
                break
            counted += changes
            if not units.between_transactions(after):
                continue
            end = {"phase": PHASE_STREAM, **after}
        return end

    def plan(self, start: Offset, end: Offset) -> list[Any]:
        if _phase(start) == PHASE_SNAPSHOT:
            self._snapshotted = True
            return self._plan_snapshot(start, end)
        if _phase(end) == PHASE_SNAPSHOT:  # the move to a new snapshot (see latest)
            return []
        if self._key(end) <= self._key(start):
            return []
        if self._position_gone(start):
            # a batch logged before the position went, replayed: its changes cannot be read again;
            # the snapshot the next batch takes holds their result
            log.warning("the changes of the batch from %s to %s cannot be read again; the new snapshot that "
                        "follows replaces them", _own(start), _own(end))
            return []
        units = self._ensure_streaming(start)
        end_key = self._key(end)
        work: list[Any] = []
        while True:
            if not self._ready:
                units.check()
                try:
                    self._ready.append(units.get(timeout=1.0))
                except queue.Empty:
                    continue
            unit, after = self._ready[0]
            after_key = self._key(after)
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

    # -- the snapshot, in batches (resumable initial snapshot, engine/snapshot_resume.py) -------
    #
    # With maxRowsPerBatch, the snapshot is several batches of about that many rows (whole
    # chunks); each batch's end offset carries the snapshot's progress and the offset streaming
    # starts at once it completes. A query restarted from its checkpoint reads the batch that did
    # not commit again, then goes on from there: at a new consistent point, each range cut by the
    # two progresses alone (engine/snapshot_resume.between), streaming from the original position.
    # When that position is gone, nothing of the old snapshot is read any more: its batches end
    # at once at the (gone) streaming position, where the streaming path takes a whole new
    # snapshot as snapshot.mode says (or stops with the connector's error).

    def _stream_from(self, start: Offset) -> Offset:
        text = start.get(STREAM_FROM_KEY)
        if isinstance(text, str):
            return dict(json.loads(text))
        return self.source.completed_offset(without_progress(_own(start)))

    def _snapshot_batch_end(self, start: Offset, max_records: int | None) -> Offset:
        stream_from = self._stream_from(start)
        completed = {"phase": PHASE_STREAM, **stream_from}
        at = without_progress(_own(start))
        # split only where the snapshot point already names the streaming position (a later
        # process resumes from the batch offsets alone)
        if not max_records or self.source.sort_key(at) != self.source.sort_key(stream_from):
            return completed
        pending = self._pending(start)
        per = max(1, max_records // max(1, self.snapshot_chunk_rows))
        begun = progress = progress_of(start) or SnapshotProgress()
        taken = 0
        for chunk in pending:
            # a batch ends only where the progress moved (a chunk of a table without a key does
            # not move it): its end must name a place after its start in the plan
            if taken >= per and progress != begun:
                break
            progress = progress.after_chunk(chunk)
            taken += 1
        if taken >= len(pending):
            return completed
        text = progress.to_text()
        assert self._plan is not None
        self._plan_index[text] = self._plan_index[self._progress_text(start)] + taken
        return {"phase": PHASE_SNAPSHOT, **at, PROGRESS_KEY: text, STREAM_FROM_KEY: json.dumps(stream_from)}

    @staticmethod
    def _progress_text(offset: Offset) -> str:
        return (progress_of(offset) or SnapshotProgress()).to_text()

    def _snapshot_point(self, start: Offset) -> SnapshotPoint | None:
        """This process's snapshot point for `start`; or, when another process planned the
        snapshot (a restart from the checkpoint), a new one that resumes it; None when it cannot
        be resumed because the position it was to stream from is gone (and snapshot.mode takes
        a new snapshot then; the connector's error when it does not)."""
        self._open()
        at = without_progress(_own(start))
        key = self.source.sort_key(at)
        point = self._point
        if point is not None and self.source.sort_key(point.offset) == key:
            return point
        if self._serving is not None and self._serving[0] == key and (self._serving[1] is None
                                                                      or self._serving[1] is point):
            return self._serving[1]
        self._plan, self._plan_index = None, {}
        resumed = self.source.resume_snapshot(at)
        if resumed is not None:
            log.info("resuming the checkpoint's unfinished snapshot at a new consistent point (%s)",
                     "its batch from " + self._progress_text(start))
            self._point, self._serving = resumed, (key, resumed)
            return resumed
        # the policy decides as for a stored snapshot that did not complete
        _, decision = start_decision(self.connector, self.source, at, in_snapshot=True,
                                     resumer="the checkpoint's unfinished snapshot",
                                     fresh_start="use a new checkpoint location and empty outputs")
        if decision.resnapshot:
            # its rows read so far cannot be completed by streaming the changes since its point
            log.warning("the checkpoint's unfinished snapshot cannot be resumed: the position it was to stream from "
                        "is gone; its remaining batches read nothing and a whole new snapshot follows "
                        "(snapshot.mode=%s), then streaming from that snapshot's position",
                        self.config.get("snapshot.mode"))
            self._serving = (key, None)
            return None
        # the position is held but the connector cannot resume: the rest, read at a new point,
        # is followed by every change since the original one (streaming starts there), as resuming does
        log.warning("the checkpoint's unfinished snapshot cannot be resumed by the connector; reading its remaining "
                    "batches at a new consistent point, then streaming from where that snapshot was to stream from")
        self._point = point = self.source.open_snapshot(at, False)
        self._serving = (key, point)
        return point

    def _pending(self, start: Offset) -> list[SnapshotChunk]:
        """The chunks after `start`'s progress, from this process's plan (none when the
        snapshot cannot be resumed)."""
        point = self._snapshot_point(start)
        if point is None:
            return []
        if self._plan is None:
            self._plan = plan_snapshot(self.connector, self.source, point, self.snapshot_chunk_rows)
            self._plan_index = {SnapshotProgress().to_text(): 0}
        index = self._plan_index.get(self._progress_text(start))
        if index is None:  # a progress made by another process: the rest, cut by it
            self._plan = remaining(self._plan, progress_of(start))
            self._plan_index = {self._progress_text(start): 0}
            index = 0
        return self._plan[index:]

    def _plan_snapshot(self, start: Offset, end: Offset) -> list[Any]:
        point = self._snapshot_point(start)
        if point is None:
            log.info("the snapshot batch ending at %s reads nothing: the new snapshot that follows reads every table",
                     self._progress_text(end) if _phase(end) == PHASE_SNAPSHOT else "the snapshot's end")
            return []
        pending = self._pending(start)
        end_text = self._progress_text(end) if _phase(end) == PHASE_SNAPSHOT else None
        if end_text is None:
            chunks = pending
        elif end_text in self._plan_index:
            assert self._plan is not None
            chunks = self._plan[self._plan_index[self._progress_text(start)]:self._plan_index[end_text]]
        else:  # a batch logged by another process, read again
            chunks = between(pending, None, progress_of(end))
        units = [self.source.snapshot_unit(point, chunk) for chunk in chunks]
        if not self.config.get("notification.enabled.channels"):
            return units
        # Debezium's "Initial Snapshot" notifications, placed among the executors' records
        # (engine/snapshot_notification_units.py): one plan per point this process reads, over
        # the chunks from where it starts (STARTED once, whatever the batches)
        from headwater.engine.snapshot_notification_units import SnapshotNotificationPlan

        notes: SnapshotNotificationPlan | None = getattr(self, "_notification_plan", None)
        if notes is None or notes.point is not point:
            notes = self._notification_plan = SnapshotNotificationPlan(self.connector, point, pending)

        def fallback() -> str:
            # where streaming starts (a snapshot without rows sends its notifications there)
            if _phase(end) != PHASE_STREAM:
                return ""
            try:
                return self.source.offset_position(_own(end))
            except ConnectorError:
                return ""

        return notes.wrap(chunks, units, _phase(end) == PHASE_STREAM, fallback)

    def _ensure_streaming(self, start: Offset) -> UnitStream:
        if self._units is None:
            self._open()
            if self._point is not None:
                self.source.close_snapshot(self._point)
                self._point = None
            own = _own(start)
            if self._signals or signals_configured(self.connector, own):
                # the stage must see every record in order: the driver streams through it and
                # hands over the records it built (an incremental snapshot the checkpoint says
                # runs goes on from its chunk)
                from headwater.engine.signals.units import SignalUnitStream

                self._signals = True
                if start.get(ADDED_KEY):  # the stage's records after the stream's last go on from there
                    own[ADDED_KEY] = start[ADDED_KEY]
                if start.get(BLOCKING_KEY):  # a blocking snapshot the batch ended in: read again
                    own[BLOCKING_KEY] = start[BLOCKING_KEY]
                initial = self._initial
                first = (initial is not None and _phase(initial) == PHASE_STREAM and _own(initial) == _own(start)
                         if not self._snapshotted else None)
                self._units = SignalUnitStream(self.connector, self.source, own, self.read_ahead_messages,
                                               first_start=first).start()
            else:
                self._units = self.source.stream_units(own, self.read_ahead_messages)
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

"""The coordinator: snapshot, then stream, per `snapshot.mode` and the stored offset — once, for
every connector. The standalone runner drives it through :func:`run_capture` (on the engine's
reader thread); the Spark source through :class:`headwater.engine.feed.CaptureFeed`. Both plan
the snapshot with :func:`plan_snapshot`.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from headwater.engine.connector import Emit
from headwater.engine.records import OffsetMarker
from headwater.engine.signals.blocking import unfinished_blocking
from headwater.engine.signals.run import initial_notifications, open_stage, signals_configured, stream_with_signals
from headwater.engine.signals.snapshot_notifications import SnapshotNotifications
from headwater.engine.snapshot_plan import LastRecordMarker, SnapshotChunk, plan_chunks, snapshot_tables
from headwater.engine.snapshot_policy import Decision, SnapshotMode, Stored, decide
from headwater.engine.snapshot_resume import (
    PROGRESS_KEY,
    ProgressStamp,
    SnapshotProgress,
    progress_of,
    remaining,
    without_progress,
)
from headwater.engine.source import CaptureSource, Offset, SnapshotPoint

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector

log = logging.getLogger(__name__)

# snapshot records handed to the engine's queue at a time
_SNAPSHOT_HANDOFF = 512


def plan_snapshot(connector: SourceConnector, source: CaptureSource, point: SnapshotPoint,
                  chunk_rows: int | None) -> list[SnapshotChunk]:
    """The snapshot's chunks at `point`, in order, with their markers' places: the captured tables
    ordered by `table.include.list`, narrowed by `snapshot.include.collection.list`, with their
    select overrides or custom snapshot query; `chunk_rows` None reads each table whole."""
    tables, selects = snapshot_tables(connector.config, source.snapshot_tables(point), connector.snapshot_query,
                                      connector.column_filter)
    return plan_chunks(source.chunk_dialect(point), tables, selects, chunk_rows)


def start_decision(connector: SourceConnector, source: CaptureSource, offset: Offset | None, *,
                   in_snapshot: bool = False, resumer: str | None = None,
                   fresh_start: str = "remove the offsets file") -> tuple[Stored, Decision]:
    """What `snapshot.mode` says to do with this stored offset; stops with the connector's error
    when the position is gone and the mode takes no new snapshot."""
    stored, held = source.stored(offset, in_snapshot=in_snapshot)
    decision = decide(SnapshotMode.from_config(connector.config), stored, held)
    if decision.lost:
        assert offset is not None
        raise source.lost_error(offset, resumer=resumer, fresh_start=fresh_start)
    if decision.resnapshot:
        log.warning("the stored position can no longer be streamed from; taking a new snapshot (snapshot.mode=%s; "
                    "rows deleted in between may remain in materialized tables)", connector.config.get("snapshot.mode"))
    return stored, decision


def run_capture(connector: SourceConnector, source: CaptureSource, offset: Offset | None, emit: Emit,
                stop: threading.Event) -> None:
    """Capture until `stop` is set or capture is complete (e.g. snapshot.mode=initial_only)."""
    # a blocking snapshot the stored offset says was not finished is read again before streaming
    blocking, offset = unfinished_blocking(offset)
    source.open()
    stored, decision = start_decision(connector, source, offset)
    if decision.snapshot:
        delay_ms = connector.config.get("snapshot.delay.ms")
        if delay_ms > 0:
            log.info("waiting %d ms before the snapshot (snapshot.delay.ms)", delay_ms)
            if stop.wait(delay_ms / 1000):
                return
        start = _snapshot(connector, source, offset if stored is not Stored.NOTHING else None, decision, emit, stop)
        if start is None:
            return
    else:
        start = source.resume_offset(offset)
        notifications = initial_notifications(connector, emit)
        if notifications is not None:
            # as Debezium: a connector with a schema history snapshots the structure at a first start
            # (STARTED, COMPLETED); every other start without a snapshot is SKIPPED
            if connector.keeps_schema_history and stored in (Stored.NOTHING, Stored.UNFINISHED_SNAPSHOT):
                notifications.initial_started(start)
                notifications.initial_completed(start)
            else:
                notifications.initial_skipped(start)
    if decision.stream and not stop.is_set():
        state = None if decision.snapshot else offset  # an incremental snapshot in progress goes on
        if signals_configured(connector, state):
            stage = open_stage(connector, source, emit, state)
            stream_with_signals(connector, source, start, emit, stop, stage,
                                resume_blocking=blocking if not decision.snapshot else None)
        else:
            if blocking is not None:
                log.warning("the stored offset says a blocking snapshot of %s did not finish; signals are no longer "
                            "configured, so it is not read again", blocking.collections)
            source.stream(start, emit, stop)


def _snapshot(connector: SourceConnector, source: CaptureSource, offset: Offset | None, decision: Decision,
              emit: Emit, stop: threading.Event) -> Offset | None:
    """Read every chunk at a new consistent point, in order — or, resuming a snapshot a crash
    interrupted, the chunks it had not read; the offset streaming resumes at, or None when
    stopped first. Each record's offset carries the progress (engine/snapshot_resume.py)."""
    progress, point = resume_point(connector, source, offset, decision)
    if point is None:
        point = source.open_snapshot(offset, decision.resnapshot)
    buffer: list[Any] = []
    stamp = ProgressStamp(progress or SnapshotProgress())
    last: list[Offset] = [point.offset]

    def hand_over(item: Any) -> None:
        stamp(item)
        last[0] = getattr(item, "offset", last[0])
        buffer.append(item)
        if len(buffer) >= _SNAPSHOT_HANDOFF:
            flush()

    def flush() -> None:
        if buffer:
            emit(buffer[:])
            buffer.clear()

    def notify(records: list[Any]) -> None:
        # notifications pass the one-record look-ahead (as Debezium's do) but not what it released
        for record in records:
            record.offset = last[0]
        flush()
        emit(records)

    marker = LastRecordMarker(hand_over)

    def read(item: Any) -> None:
        if getattr(item, "op", None) == "r":
            tables.row()  # counted as read: the look-ahead holds a table's last row past its notification
        marker(item)

    partition: str | None = None
    tables = SnapshotNotifications(None, [], [], point.offset)
    try:
        chunks = remaining(plan_snapshot(connector, source, point, snapshot_chunk_rows(connector)), progress)
        names = list(dict.fromkeys(chunk.collection for chunk in chunks))
        tables = SnapshotNotifications(initial_notifications(connector, notify), names,
                                       captured_collections(connector, names), point.offset)
        tables.started()
        for chunk in chunks:
            if stop.is_set():
                return None
            if chunk.partition != partition:
                marker.finish()  # the previous partition's last record says `last`
                partition = chunk.partition
            flush()
            tables.table(chunk.collection)
            source.read_chunk(point, chunk, read, stop)
            if stop.is_set():
                return None  # the chunk may be cut short: it is not complete
            stamp.advance(chunk)
        if stop.is_set():
            return None
    finally:
        source.close_snapshot(point)
    flush()
    tables.finish_table()
    marker.finish()
    flush()
    tables.completed()
    done = source.completed_offset(point.offset)
    buffer.append(OffsetMarker(done))
    emit(buffer[:])
    return done


def captured_collections(connector: SourceConnector, snapshotted: list[str]) -> list[str]:
    """The captured tables as Debezium's TABLE_SCAN_COMPLETED notification lists them: the
    snapshotted ones and the signal table, sorted."""
    signal = (connector.config.get("signal.data.collection") or "").strip()
    return sorted({*snapshotted, *([signal] if signal else [])})


def snapshot_chunk_rows(connector: SourceConnector) -> int | None:
    """`snapshot.chunk.rows`: rows per chunk of the standalone snapshot (0: each table whole)."""
    rows = connector.config.get("snapshot.chunk.rows")
    return int(rows) if rows else None


def resume_point(connector: SourceConnector, source: CaptureSource, offset: Offset | None,
                 decision: Decision) -> tuple[SnapshotProgress | None, SnapshotPoint | None]:
    """(the progress of the interrupted snapshot `offset` comes from, and a new consistent point
    to read the rest at), or (None, None) when there is nothing to resume or it cannot be: then
    a new snapshot is taken as Debezium does, and the log says why."""
    if offset is None or not decision.snapshot:
        return None, None
    progress = progress_of(offset)
    if decision.resnapshot:
        if progress is not None:
            log.warning("the interrupted snapshot cannot be resumed: the position it was to stream from is gone; "
                        "taking a new snapshot")
        return None, None
    mode = SnapshotMode.from_config(connector.config).mode
    if progress is None:
        if offset.get(PROGRESS_KEY) is None and mode != "always":
            log.info("the stored offset carries no snapshot progress (it was written by an earlier version, or the "
                     "snapshot completed): taking a whole new snapshot")
        return None, None
    if mode == "always":
        log.info("snapshot.mode=always: taking a new snapshot, not resuming the interrupted one")
        return None, None
    point = source.resume_snapshot(without_progress(offset))
    if point is None:
        log.warning("the interrupted snapshot cannot be resumed (see above): taking a new snapshot")
        return None, None
    log.info("resuming the interrupted snapshot at a new consistent point: %d table(s) already read%s; streaming "
             "then starts at the snapshot's original position", len(progress.done),
             f", {progress.table} from after key {list(progress.after or ())}" if progress.table else "")
    return progress, point

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
from headwater.engine.snapshot_plan import LastRecordMarker, SnapshotChunk, plan_chunks, snapshot_tables
from headwater.engine.snapshot_policy import Decision, SnapshotMode, Stored, decide
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
    if decision.stream and not stop.is_set():
        source.stream(start, emit, stop)


def _snapshot(connector: SourceConnector, source: CaptureSource, offset: Offset | None, decision: Decision,
              emit: Emit, stop: threading.Event) -> Offset | None:
    """Read every chunk at a new consistent point, in order; the offset streaming resumes at, or
    None when stopped first."""
    point = source.open_snapshot(offset, decision.resnapshot)
    buffer: list[Any] = []

    def hand_over(item: Any) -> None:
        buffer.append(item)
        if len(buffer) >= _SNAPSHOT_HANDOFF:
            emit(buffer[:])
            buffer.clear()

    marker = LastRecordMarker(hand_over)
    partition: str | None = None
    try:
        for chunk in plan_snapshot(connector, source, point, None):
            if stop.is_set():
                return None
            if chunk.partition != partition:
                marker.finish()  # the previous partition's last record says `last`
                partition = chunk.partition
            source.read_chunk(point, chunk, marker, stop)
        if stop.is_set():
            return None
    finally:
        source.close_snapshot(point)
    marker.finish()
    done = source.completed_offset(point.offset)
    buffer.append(OffsetMarker(done))
    emit(buffer[:])
    return done

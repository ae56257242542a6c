"""Blocking snapshots (`execute-snapshot` of type blocking): streaming pauses, the requested
tables are read as the initial snapshot reads them — the signal's `additional-conditions` filters
being whole SELECT statements, like `snapshot.select.statement.overrides`, which are honoured
too — at a new consistent point, then streaming resumes. The records carry the streaming position
and name the request (:data:`BLOCKING_KEY`): a run that stops before the snapshot ends reads it
again when it starts from such an offset, before it streams (rows may come twice, as Debezium says
of an interrupted blocking snapshot); an offset marker without the request ends it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from headwater.engine.connector import ConnectorError
from headwater.engine.records import OffsetMarker
from headwater.engine.signals.actions import SnapshotRequest
from headwater.engine.signals.incremental import expand
from headwater.engine.signals.snapshot_notifications import SnapshotNotifications
from headwater.engine.snapshot_plan import LastRecordMarker, plan_chunks, snapshot_tables

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector
    from headwater.engine.signals.connector import IncrementalSource
    from headwater.engine.source import CaptureSource

log = logging.getLogger(__name__)

_HANDOFF = 512
# the key of a blocking snapshot's offsets naming its request (JSON text: offsets stay flat)
BLOCKING_KEY = "headwater_blocking"


def unfinished_blocking(offset: dict[str, Any] | None) -> tuple[SnapshotRequest | None, dict[str, Any] | None]:
    """The blocking snapshot an offset says was not finished (or None), and the offset without it."""
    if not offset or BLOCKING_KEY not in offset:
        return None, offset
    rest = {k: v for k, v in offset.items() if k != BLOCKING_KEY}
    try:
        return SnapshotRequest.from_text(offset[BLOCKING_KEY]), rest
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ConnectorError(f"the stored offset's {BLOCKING_KEY!r} is not a blocking snapshot request "
                             f"({type(exc).__name__}: {exc}): {offset[BLOCKING_KEY]!r}") from None


class _BlockingConfig:
    """The connector's configuration as the snapshot plan reads it, for one blocking snapshot:
    its tables are the signal's (not `snapshot.include.collection.list`), its filters overrides."""

    def __init__(self, config: Any, request: SnapshotRequest, names: list[str]) -> None:
        self._config = config
        self.raw = dict(config.raw)
        overrides = list(config.get("snapshot.select.statement.overrides") or [])
        for pattern, statement in request.conditions.items():
            for name in expand([pattern], names):
                self.raw[f"snapshot.select.statement.overrides.{name}"] = statement
                if name not in overrides:
                    overrides.append(name)
        self._overrides = overrides

    def get(self, name: str) -> Any:
        if name == "snapshot.include.collection.list":
            return None
        if name == "snapshot.select.statement.overrides":
            return self._overrides
        return self._config.get(name)


def run_blocking_snapshot(connector: SourceConnector, source: CaptureSource, incremental: IncrementalSource,
                          request: SnapshotRequest, offset: dict[str, Any], emit: Callable[[list[Any]], None],
                          stop: threading.Event, notifications: Any = None) -> int:
    """Read the requested tables at a new point opened at the stream's position `offset`; every
    record carries `offset` and the request (BLOCKING_KEY) until the offset marker that ends it.
    `emit` takes records and `notifications` (the NotificationService, or None) hands its records to
    the same place, in order. Returns the records emitted."""
    marked = {**offset, BLOCKING_KEY: request.to_text()}
    point = incremental.open_blocking_snapshot(offset)
    buffer: list[Any] = []
    count = 0
    progress: SnapshotNotifications | None = None

    def hand_over(item: Any) -> None:
        nonlocal count
        if hasattr(item, "offset"):
            item.offset = marked
        buffer.append(item)
        count += 1
        if len(buffer) >= _HANDOFF:
            flush()

    def flush() -> None:
        if buffer:
            emit(buffer[:])
            buffer.clear()

    try:
        captured = source.snapshot_tables(point)
        names = [t.collection for t in captured]
        wanted = set(expand(request.collections, names))
        missing = [c for c in request.collections if c in wanted and c not in names]
        if missing:
            log.warning("blocking snapshot: no captured table matches %s", missing)
        chosen = [t for t in captured if t.collection in wanted]
        tables, selects = snapshot_tables(_BlockingConfig(connector.config, request, names), chosen,
                                          connector.snapshot_query, connector.column_filter)
        log.info("blocking snapshot of %s started", [t.collection for t in tables])
        # TABLE_SCAN_COMPLETED's data_collections: the tables this snapshot reads, sorted (Debezium's
        # capturedTables of an on-demand snapshot; the signal table only when requested — recorded)
        progress = SnapshotNotifications(notifications, [t.collection for t in tables],
                                         sorted(t.collection for t in chosen), marked)
        flush()
        progress.started()
        marker = LastRecordMarker(hand_over)

        def read(item: Any) -> None:
            # counted as read, not as handed on: the look-ahead holds a table's last row past its
            # TABLE_SCAN_COMPLETED, whose total_rows_scanned includes it (recorded, blocking)
            if progress is not None and getattr(item, "op", None) == "r":
                progress.row()
            marker(item)
        partition: str | None = None
        for chunk in plan_chunks(source.chunk_dialect(point), tables, selects, None):
            if stop.is_set():
                flush()
                progress.aborted()
                emit([])  # hands on the notification (the notifications go out with the next emit)
                return count
            if chunk.partition != partition:
                marker.finish()
                partition = chunk.partition
            flush()  # what the look-ahead released goes before the next table's notifications
            progress.table(chunk.collection)
            source.read_chunk(point, chunk, read, stop)
        flush()
        progress.finish_table()
        marker.finish()
        flush()
        progress.completed()
    finally:
        source.close_snapshot(point)
    # even when nothing is buffered: COMPLETED waits in the stage for the next emit, which on a
    # quiet database would be the next change streamed; the marker ends the snapshot (a restart
    # after it streams on)
    buffer.append(OffsetMarker(dict(offset)))
    emit(buffer[:])
    buffer.clear()
    log.info("blocking snapshot completed: %d records", count)
    return count

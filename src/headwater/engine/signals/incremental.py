"""Incremental snapshots: Debezium's watermark algorithm (DDD-3), connector-neutral.

A table is read in chunks of `incremental.snapshot.chunk.size` rows in key order, while the
stream goes on. For each chunk: the window's open mark is written, the chunk is read into a
buffer keyed by the rows' record keys, the close mark is written. When the open mark comes back
through the stream, the window opens: every streamed event of the table evicts the buffered row
with its key (the event is newer than, or as new as, what was read). When the close mark comes
back, the rows left in the buffer are emitted as read events and the next chunk is read. So the
events, replayed in order, end in the table's state however the rows changed meanwhile.

The state (tables left, their conditions, the last key sent, the table's maximum key) travels in
every offset handed on while a snapshot runs; a restart reads the next chunk after the last key
sent (Debezium's `init`). The connector's part is an
:class:`~headwater.engine.signals.connector.IncrementalSource`.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from headwater.engine.connector import ConnectorError
from headwater.engine.records import SourceRecord
from headwater.engine.signals.actions import SnapshotRequest
from headwater.engine.signals.connector import ChunkRow, IncrementalSource, SnapshotTableError
from headwater.engine.signals.keys import decode_key, encode_key, key_token

log = logging.getLogger(__name__)

COLLECTIONS_KEY = "incremental_snapshot_collections"
PRIMARY_KEY = "incremental_snapshot_primary_key"
MAXIMUM_KEY = "incremental_snapshot_maximum_key"
CORRELATION_ID = "incremental_snapshot_correlation_id"
OFFSET_KEYS = (COLLECTIONS_KEY, PRIMARY_KEY, MAXIMUM_KEY, CORRELATION_ID)
_ID = "incremental_snapshot_collections_id"
_CONDITION = "incremental_snapshot_collections_additional_condition"
_SURROGATE = "incremental_snapshot_collections_surrogate_key"

Offset = dict[str, Any]


@dataclass
class Collection:
    id: str
    condition: str | None = None
    surrogate_key: str | None = None


class IncrementalContext:
    """What an incremental snapshot has done and has left (Debezium's IncrementalSnapshotContext)."""

    def __init__(self) -> None:
        self.collections: list[Collection] = []
        self.correlation_id: str | None = None
        self.last_key_sent: tuple[Any, ...] | None = None
        self.chunk_end: tuple[Any, ...] | None = None
        self.maximum_key: tuple[Any, ...] | None = None
        self.chunk_id: str | None = None
        self.window_open = False
        self.paused = False
        self.stop_requested: list[list[str]] = []
        self._fields: dict[str, Any] | None = None

    @property
    def running(self) -> bool:
        return bool(self.collections)

    @property
    def current(self) -> Collection | None:
        return self.collections[0] if self.collections else None

    def changed(self) -> None:
        self._fields = None

    def offset_fields(self) -> dict[str, Any]:
        """The offset entries saying where the snapshot is ({} when none runs)."""
        if self._fields is None:
            if not self.collections:
                self._fields = {}
            else:
                self._fields = {
                    COLLECTIONS_KEY: orjson.dumps([{_ID: c.id, _CONDITION: c.condition, _SURROGATE: c.surrogate_key}
                                                   for c in self.collections]).decode(),
                    PRIMARY_KEY: encode_key(self.last_key_sent),
                    MAXIMUM_KEY: encode_key(self.maximum_key),
                    CORRELATION_ID: self.correlation_id,
                }
        return self._fields

    @classmethod
    def from_offset(cls, offset: Offset | None) -> IncrementalContext:
        ctx = cls()
        text = (offset or {}).get(COLLECTIONS_KEY)
        if not text:
            return ctx
        try:
            entries = orjson.loads(text)
            ctx.collections = [Collection(e[_ID], e.get(_CONDITION), e.get(_SURROGATE)) for e in entries]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConnectorError(f"the stored offset's {COLLECTIONS_KEY} cannot be read ({exc}); remove the "
                                 "incremental_snapshot_* entries from the offsets to drop the incremental "
                                 "snapshot") from None
        assert offset is not None
        ctx.last_key_sent = decode_key(offset.get(PRIMARY_KEY), PRIMARY_KEY)
        ctx.chunk_end = ctx.last_key_sent
        ctx.maximum_key = decode_key(offset.get(MAXIMUM_KEY), MAXIMUM_KEY)
        ctx.correlation_id = offset.get(CORRELATION_ID)
        return ctx

    def next_collection(self) -> None:
        self.collections.pop(0)
        self.chunk_end = self.last_key_sent = self.maximum_key = None
        self.changed()


class IncrementalSnapshotter:
    """Runs incremental snapshots for the stage (headwater.engine.signals.stage), which calls it
    on the streaming thread (or the signal thread, under its lock). `out(records)` hands records
    on in stream order; `notify` is the NotificationService (or None)."""

    def __init__(self, source: IncrementalSource, *, chunk_size: int, strategy: str,
                 out: Callable[[list[Any]], None], notifications: Any = None) -> None:
        self.source = source
        self.chunk_size = chunk_size
        self.marks = source.window_marks(strategy)
        self.out = out
        self.notifications = notifications
        self.ctx = IncrementalContext()
        self.window: dict[bytes, ChunkRow] = {}
        self.columns: list[str] = []
        self.rows_scanned = 0

    # -- the offset --------------------------------------------------------------------------

    def with_progress(self, offset: Offset) -> Offset:
        """`offset` with the snapshot's state (the same dict when none runs)."""
        fields = self.ctx.offset_fields()
        if not fields:
            return offset
        return {**offset, **fields}

    def restore(self, offset: Offset | None) -> None:
        """The state a stored offset holds; a running snapshot goes on with its next chunk
        (:meth:`resume`, once streaming delivers)."""
        self.ctx = IncrementalContext.from_offset(offset)
        if self.ctx.running:
            log.info("an incremental snapshot is in progress (%s); reading its next chunk",
                     ", ".join(c.id for c in self.ctx.collections))

    # -- signals -----------------------------------------------------------------------------

    def add(self, request: SnapshotRequest, correlation_id: str, offset: Offset) -> None:
        """`execute-snapshot` of type incremental."""
        captured = self.source.captured_tables()
        ids = list(dict.fromkeys(self.source.collection_id(i) for i in expand(request.collections, captured)))
        if len(ids) > len(request.collections):
            log.info("data-collections to snapshot expanded from %s to %s", request.collections, ids)
        was_running = self.ctx.running
        known = {c.id for c in self.ctx.collections}
        added = []
        for cid in ids:
            if cid in known:
                continue
            condition = request.conditions.get(cid)  # a name as given, else the first pattern matching
            if condition is None:
                condition = next((v for k, v in request.conditions.items() if _matches(k, cid)), None)
            # Debezium keeps (and stores) a filter in parentheses, so that it ANDs safely
            added.append(Collection(cid, f"({condition})" if condition else None, request.surrogate_key))
        self.ctx.collections.extend(added)
        # as Debezium: the latest request's id names the snapshot from now on
        self.ctx.correlation_id = correlation_id
        self.ctx.changed()
        if not added:
            log.info("incremental snapshot: nothing new to snapshot in %s", ids)
            return
        if not was_running:
            log.info("incremental snapshot %s of %s started", correlation_id, [c.id for c in added])
            if self.notifications is not None:
                self.notifications.incremental_started(self.ctx, self.with_progress(offset))
            self.read_chunk(offset)
        else:
            log.info("added %s to the running incremental snapshot", [c.id for c in added])

    def request_stop(self, request: SnapshotRequest) -> None:
        """`stop-snapshot` (acted on before the next chunk is read, as Debezium does)."""
        self.ctx.stop_requested.append(request.collections)

    def pause(self, offset: Offset) -> None:
        if self.ctx.running and not self.ctx.paused:
            log.info("incremental snapshot paused")
            self.ctx.paused = True
            if self.notifications is not None:
                self.notifications.incremental_paused(self.ctx, self.with_progress(offset))

    def resume(self, offset: Offset) -> None:
        if self.ctx.running and self.ctx.paused:
            log.info("incremental snapshot resumed")
            self.ctx.paused = False
            if self.notifications is not None:
                self.notifications.incremental_resumed(self.ctx, self.with_progress(offset))
            self.read_chunk(offset)

    # -- the window --------------------------------------------------------------------------

    def open_window(self, window_id: str) -> None:
        if not self._expected(window_id):
            log.info("window open %r ignored: the current chunk is %r", window_id, self.ctx.chunk_id)
            return
        self.ctx.window_open = True

    def close_window(self, window_id: str, offset: Offset) -> None:
        if not self._expected(window_id):
            log.info("window close %r ignored: the current chunk is %r", window_id, self.ctx.chunk_id)
            return
        self.ctx.window_open = False
        self._send_window(offset)
        self.read_chunk(offset)

    def evict(self, record: SourceRecord) -> None:
        """A streamed event: while the window is open it supersedes the buffered row of its key."""
        if not self.ctx.window_open or not self.window:
            return
        current = self.ctx.current
        if current is None or record.table != current.id or record.key is None:
            return
        self.window.pop(key_token(record.key), None)

    def _expected(self, window_id: str) -> bool:
        return self.ctx.chunk_id is not None and window_id.startswith(self.ctx.chunk_id)

    def _send_window(self, offset: Offset) -> None:
        current = self.ctx.current
        if not self.window or current is None:
            self.window.clear()
            return
        rows = list(self.window.values())
        self.window.clear()
        records = self.source.read_events(current.id, rows, offset)
        # every record's offset says the rows up to it were sent: a restart goes on after them
        for row, record in zip(rows, records, strict=True):
            self.ctx.last_key_sent = row.chunk_key
            self.ctx.changed()
            record.offset = self.with_progress(record.offset)
        self.out(records)

    # -- reading chunks ----------------------------------------------------------------------

    def read_chunk(self, offset: Offset) -> None:
        """Debezium's readChunk: act on stop requests; open the window, read the next chunk that
        has rows (finishing tables on the way), close the window."""
        self._process_stop(offset)
        ctx = self.ctx
        if not ctx.running or ctx.paused:
            return
        ctx.chunk_id = str(uuid.uuid4())
        self.marks.open(ctx.chunk_id)
        while ctx.running:
            current = ctx.current
            assert current is not None
            try:
                if ctx.maximum_key is None:
                    self.columns = self.source.chunk_columns(current.id, current.surrogate_key)
                    ctx.maximum_key = self.source.maximum_key(current.id, self.columns, current.condition)
                    ctx.changed()
                    if ctx.maximum_key is None:
                        log.info("incremental snapshot of %s finished: the table is empty", current.id)
                        self._table_done(offset, "EMPTY")
                        continue
                elif not self.columns:
                    self.columns = self.source.chunk_columns(current.id, current.surrogate_key)
                rows = self.source.read_chunk(current.id, self.columns, ctx.chunk_end, ctx.maximum_key,
                                              self.chunk_size, current.condition)
            except SnapshotTableError as exc:
                log.warning("incremental snapshot of %s skipped: %s", current.id, exc)
                self._table_done(offset, exc.status)
                continue
            if not rows:
                log.info("incremental snapshot of %s finished (%d rows)", current.id, self.rows_scanned)
                self._table_done(offset, "SUCCEEDED")
                continue
            for row in rows:
                self.window[key_token(row.message_key)] = row
            ctx.chunk_end = rows[-1].chunk_key
            self.rows_scanned += len(rows)
            if self.notifications is not None:
                self.notifications.incremental_in_progress(self.ctx, self.with_progress(offset))
            break
        self.marks.close(ctx.chunk_id)

    def _table_done(self, offset: Offset, status: str) -> None:
        current = self.ctx.current
        assert current is not None
        if self.notifications is not None:
            self.notifications.incremental_table_scan_completed(self.ctx, current.id, self.rows_scanned, status,
                                                                self.with_progress(offset))
        self.rows_scanned = 0
        self.columns = []
        self.window.clear()
        self._next_collection(offset)

    def _next_collection(self, offset: Offset) -> None:
        self.ctx.next_collection()
        if not self.ctx.running:
            log.info("incremental snapshot %s completed", self.ctx.correlation_id)
            if self.notifications is not None:
                self.notifications.incremental_completed(self.ctx, offset)
            self.ctx.correlation_id = None

    def _process_stop(self, offset: Offset) -> None:
        ctx = self.ctx
        while ctx.stop_requested:
            names = ctx.stop_requested.pop(0)
            if not ctx.running:
                log.warning("stop-snapshot: no incremental snapshot is running")
                ctx.correlation_id = None
                continue
            ids = ([self.source.collection_id(i) for i in expand(names, self.source.captured_tables())] if names
                   else [c.id for c in ctx.collections])
            stopped: list[str] = []
            current_stopped = False
            for cid in ids:
                if ctx.current is not None and cid == ctx.current.id:
                    current_stopped = True
                    continue
                index = next((i for i, c in enumerate(ctx.collections) if c.id == cid), None)
                if index is None:
                    log.warning("stop-snapshot: %s is not part of the incremental snapshot", cid)
                    continue
                ctx.collections.pop(index)
                stopped.append(cid)
            ctx.changed()
            correlation_id = ctx.correlation_id
            if current_stopped and ctx.current is not None:
                stopped.append(ctx.current.id)
                self.rows_scanned = 0
                self.columns = []
                self.window.clear()
                # as Debezium: the current table ends like a finished one (COMPLETED when it was
                # the last), then the abort is notified
                self._next_collection(offset)
                ctx.correlation_id = correlation_id if ctx.running else None
            log.info("removed %s from the incremental snapshot", stopped)
            if self.notifications is not None:
                self.notifications.incremental_aborted(ctx, stopped, self.with_progress(offset))
            if not ctx.running:
                ctx.correlation_id = None


def _matches(pattern: str, collection: str) -> bool:
    try:
        return re.fullmatch(pattern, collection) is not None
    except re.error:
        return pattern == collection


def expand(patterns: list[str], captured: list[str]) -> list[str]:
    """Debezium's expandAndDedupeDataCollectionIds: each pattern is a regular expression matched
    against the whole id of every captured table; a pattern matching none stays as given (the
    snapshot then reports the table as unknown)."""
    out: list[str] = []
    for pattern in patterns:
        matched = [c for c in captured if _matches(pattern, c)]
        for cid in matched or [pattern]:
            if cid not in out:
                out.append(cid)
    return out

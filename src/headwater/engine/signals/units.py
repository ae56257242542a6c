"""Signals in distributed runs (Spark): the driver streams through the signaling stage and hands
over units of records it has already built.

The stage (:mod:`.stage`) must see every streamed record in order: it reads the signal table,
evicts buffered incremental-snapshot rows by key, emits read events when a window closes, stops
the stream for a blocking snapshot. So when signals are configured the feed does not hand raw
replication messages to executors: :class:`SignalUnitStream` runs
:func:`~headwater.engine.signals.run.stream_with_signals` on its background thread, and each unit
is a run of built records with their positions; executors only serialize them
(:class:`DriverRecordsDecoder`).

Positions. A streamed record gets the position the connector's own WorkDecoder would give it
(:meth:`CaptureSource.record_positions`), so that positions written before signals were turned on,
or by the executors' snapshot chunks, sort together with these. A record the stage adds (read
events at a window's close, a blocking snapshot's rows, notifications) gets the position of the
last streamed record before it plus a suffix of its own: it sorts after everything before it and
before the next streamed record, which is where the stage put it in the stream. (Read events
emitted at a window's close thus sort just before the record that closed the window: newer than
any change of their keys before, older than any after.)

Sort keys. The feed cuts batches at a unit's offset and replays a range by sort key
(:func:`~headwater.engine.feed.stream_key`). Read events at a window's close carry the closing
record's offset: they share its key and stay in its unit. Records the stage adds after the last
streamed record (a blocking snapshot's rows, notifications of the signal thread) carry that
record's offset plus their number after it (`feed.ADDED_KEY`), counted from the last growth of
the connector's key: their keys grow, so they are handed over once the stream has been quiet a
moment, without waiting for the next change. The numbers are the stage's order of output, which
a restart's replay reproduces where the stage acts again (a signal of the signal table); a batch
ending among them is cut there by :meth:`SignalUnitStream.split`.

A blocking snapshot's rows are handed over as they come, so the read-ahead's bound holds for them
too and a batch may end inside one. Their offsets name its request (`blocking.BLOCKING_KEY`): a
restart from such a batch end reads the blocking snapshot again before it streams (numbered on
after the rows the checkpoint has; rows already delivered come twice, as Debezium's interrupted
blocking snapshot's may). The offset marker that ends it becomes an entry of its own, numbered
after its last row and without the request, so a restart after it does not read it again. Each
unit ends where the next entry's key is greater. While the read-ahead queue is full the stream
thread waits in its emit, keeping the connection alive (:meth:`CaptureSource.keep_stream_alive`);
other threads (the signal channels') never wait there.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.engine.connector import ConnectorError
from headwater.engine.feed import ADDED_KEY, PositionedRecord, WorkDecoder
from headwater.engine.read_ahead import UnitQueue
from headwater.engine.records import OffsetMarker, SourceRecord
from headwater.engine.signals.blocking import BLOCKING_KEY, unfinished_blocking
from headwater.engine.source import UnitStream

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector
    from headwater.engine.source import CaptureSource, Offset
    from headwater.engine.typed_rows import TypedRowChanges, TypedRows

log = logging.getLogger(__name__)

# how long the stream must be quiet before the entries at its head are handed over (they may
# still be joined by entries of the same sort key, see the module doc)
QUIET_S = 0.3
# a record's share of a task's bytes, estimated (the records are pickled whole)
_RECORD_BYTES = 600
# the suffix of a position the stage's own records take: after the anchor, in their order
_SUFFIX = "~{:012X}"


@dataclass
class DriverRecords:
    """A run of records built on the driver, in order, with their positions. `keys`: each
    record's sort key (driver side only, to cut a unit at a batch end; not shipped)."""

    records: list[PositionedRecord]
    keys: list[tuple[Any, ...]] | None = None

    @property
    def size(self) -> int:
        """Records to serialize (the Spark source groups items into tasks by it)."""
        return len(self.records)

    @property
    def nbytes(self) -> int:
        return len(self.records) * _RECORD_BYTES

    def __getstate__(self) -> dict[str, Any]:
        return {"records": self.records, "keys": None}


class DriverRecordsDecoder(WorkDecoder):
    """The feed's decoder while signals run: :class:`DriverRecords` are serialized as they are
    (events: the Delta sink takes them through its event path, typed rows are not built for
    them); anything else (the initial snapshot's chunks) goes to the connector's decoder."""

    def __init__(self, inner: WorkDecoder) -> None:
        self.inner = inner

    def decode(self, item: Any) -> Iterator[PositionedRecord]:
        if isinstance(item, DriverRecords):
            return iter(item.records)
        return self.inner.decode(item)

    def decode_typed_rows(self, item: Any) -> list[TypedRows] | None:
        if isinstance(item, DriverRecords):
            return None
        return self.inner.decode_typed_rows(item)

    def typed_row_changes(self) -> TypedRowChanges | None:
        return self.inner.typed_row_changes()

    def decode_changes(self, item: Any, changes: TypedRowChanges) -> Iterator[PositionedRecord]:
        if isinstance(item, DriverRecords):
            return iter(item.records)
        return self.inner.decode_changes(item, changes)


class _PositioningSource:
    """The capture source as the stage's stream sees it: every record `stream()` emits is given
    its connector position before the stage takes it (a message's records arrive in one call);
    `owner` learns when a stream runs (between two, a blocking snapshot does)."""

    def __init__(self, source: CaptureSource, owner: SignalUnitStream) -> None:
        self._source = source
        self._owner = owner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def stream(self, start: Offset, emit: Callable[[list[Any]], None], stop: threading.Event) -> None:
        source, positions = self._source, self._owner.positions

        def positioned(items: list[Any]) -> None:
            records = [item for item in items if isinstance(item, SourceRecord)]
            if records:
                for record, position in zip(records, source.record_positions(records), strict=True):
                    positions[id(record)] = (position, record)
            emit(items)

        self._owner.streaming(True)
        try:
            source.stream(start, positioned, stop)
        finally:
            self._owner.streaming(False)


@dataclass
class _Entry:
    record: PositionedRecord | None  # None: an offset marker
    key: tuple[Any, ...]
    offset: Offset


class SignalUnitStream(UnitStream):
    """The stage's output as units of :class:`DriverRecords`, read ahead on a background thread
    that runs :func:`stream_with_signals` from `start` (the feed's offset, with the incremental
    snapshot's state when one runs, and `feed.ADDED_KEY` when it ended among the stage's own
    records)."""

    def __init__(self, connector: SourceConnector, source: CaptureSource, start: Offset, read_ahead: int,
                 first_start: bool | None = None) -> None:
        own = dict(start)
        # the initial snapshot's notifications of a start without one, as run_capture sends them:
        # True a first start, False a restart from the checkpoint, None: after a snapshot read in
        # this run (by the executors, which send none)
        self.first_start = first_start
        added = int(own.pop(ADDED_KEY, 0) or 0)
        # the blocking snapshot a batch ended inside (read again before streaming)
        self.resume_blocking, own = unfinished_blocking(own)
        self._in_blocking = False  # the last entry the stage added was a blocking snapshot's
        self.connector = connector
        self.source = source
        self.start_offset = own
        self._queue = UnitQueue(read_ahead)
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._lock = threading.Lock()
        self.positions: dict[int, tuple[str, SourceRecord]] = {}
        self._pending: list[_Entry] = []
        self._handed_key: tuple[Any, ...] | None = None  # the sort key of the last unit handed over
        self._last_arrival = time.monotonic()
        self._anchor = source.offset_position(own)  # the last streamed record's position
        self._added = added  # the stage's records since that one (their position suffixes)
        # the connector's key and offset of the last streamed entry, and the number the stage's
        # records after it have reached (their keys: that key + the number)
        self._stream_key: tuple[Any, ...] = tuple(source.sort_key(own))
        self._stream_offset: Offset = own
        self._sequence = added
        self._thread = threading.Thread(target=self._run, name="headwater-feed-signals", daemon=True)

    def start(self) -> SignalUnitStream:
        self._thread.start()
        return self

    # -- the reader thread -------------------------------------------------------------------

    def _run(self) -> None:
        from headwater.engine.signals.run import open_stage, stream_with_signals

        try:
            source: Any = _PositioningSource(self.source, self)
            self._initial_notifications()
            stage = open_stage(self.connector, source, self._take, self.start_offset)
            stream_with_signals(self.connector, source, self.start_offset, self._take, self._stop, stage,
                                resume_blocking=self.resume_blocking)
        except BaseException as exc:  # handed to the caller of get()/check()
            self._failure = exc

    def _initial_notifications(self) -> None:
        """Debezium's: a connector with a schema history snapshots the structure at a first start
        (STARTED, COMPLETED); every other start without a snapshot is SKIPPED."""
        from headwater.engine.signals.run import initial_notifications

        if self.first_start is None:
            return
        notifications = initial_notifications(self.connector, self._take)
        if notifications is None:
            return
        if self.first_start and self.connector.keeps_schema_history:
            notifications.initial_started(self.start_offset)
            notifications.initial_completed(self.start_offset)
        else:
            notifications.initial_skipped(self.start_offset)

    def streaming(self, running: bool) -> None:
        """A stream starts or returns (what came before is quiet only QUIET_S after that)."""
        with self._lock:
            self._last_arrival = time.monotonic()

    def _base(self, offset: Offset | None) -> tuple[Any, ...] | None:
        if not offset:
            return None
        try:
            return tuple(self.source.sort_key(offset))
        except (KeyError, TypeError, ValueError):
            return None

    def _entry(self, item: Any) -> _Entry | None:
        """An item of the stage's output as an entry, its key and offset set (under the lock)."""
        base = self._base(getattr(item, "offset", None))
        if isinstance(item, SourceRecord):
            known = self.positions.pop(id(item), None)
            if known is not None:
                position = self._anchor = known[0]
                self._added = 0
                return self._streamed(PositionedRecord(position, item), base, item.offset)
            position = self._anchor + _SUFFIX.format(self._added)
            self._added += 1
            record = PositionedRecord(position, item)
            if base is not None and base > self._stream_key:
                # it carries a record's offset not streamed yet (read events at a window's close,
                # before the closing record): that record's key
                return _Entry(record, base, dict(item.offset or {}))
            self._sequence += 1
            offset = {**(item.offset if base == self._stream_key else self._stream_offset), ADDED_KEY: self._sequence}
            blocking = (item.offset or {}).get(BLOCKING_KEY)
            self._in_blocking = blocking is not None
            if blocking is not None:
                offset[BLOCKING_KEY] = blocking
            return _Entry(record, (*self._stream_key, self._sequence), offset)
        if isinstance(item, OffsetMarker):
            if self._in_blocking and base == self._stream_key and BLOCKING_KEY not in item.offset:
                # the end of a blocking snapshot: after its last row (a batch may end there)
                self._in_blocking = False
                self._sequence += 1
                return _Entry(None, (*self._stream_key, self._sequence), {**item.offset, ADDED_KEY: self._sequence})
            return self._streamed(None, base, item.offset)
        return None

    def _streamed(self, record: PositionedRecord | None, base: tuple[Any, ...] | None,
                  offset: Offset | None) -> _Entry:
        """An entry of the stream itself: its key moves the stream's on."""
        if base is not None and base > self._stream_key:
            self._stream_key, self._stream_offset, self._sequence = base, dict(offset or {}), 0
        if self._sequence:
            # the stage added records after an earlier record of the same key: this one goes with
            # the last of them (keys never go back)
            return _Entry(record, (*self._stream_key, self._sequence),
                          {**dict(offset or self._stream_offset), ADDED_KEY: self._sequence})
        return _Entry(record, self._stream_key, dict(offset or self._stream_offset))

    def _take(self, items: list[Any]) -> None:
        """The stage's output (stream thread, or the signal thread: the stage serializes them)."""
        with self._lock:
            for item in items:
                entry = self._entry(item)
                if entry is not None:
                    self._pending.append(entry)
            self._last_arrival = time.monotonic()
            if threading.current_thread() is not self._thread:
                return  # never waits for room here: get() hands it over (or the stream's next output)
            # cut and queued under the lock: get() hands the head over only when the queue is
            # empty, under the same lock, so units leave in order
            ready = self._cut(final=False)
            if ready is not None:
                self._put(ready)

    def _cut(self, final: bool) -> tuple[DriverRecords, Offset, tuple[Any, ...]] | None:
        """The pending entries up to the last place where the sort key grows (all of them when
        `final` and their key is past what was handed over), as a unit; under the lock."""
        pending, handed = self._pending, self._handed_key
        end = -1
        for i in range(len(pending) - 1):
            if pending[i].key < pending[i + 1].key and (handed is None or pending[i].key > handed):
                end = i
        if final and pending and (handed is None or pending[-1].key > handed):
            end = len(pending) - 1
        if end < 0:
            return None
        taken, self._pending = pending[:end + 1], pending[end + 1:]
        self._handed_key = taken[-1].key
        records = [e.record for e in taken if e.record is not None]
        keys = [e.key for e in taken if e.record is not None]
        return DriverRecords(records, keys), taken[-1].offset, taken[-1].key

    def _put(self, ready: tuple[DriverRecords, Offset, tuple[Any, ...]]) -> None:
        """Queue a unit (stream thread): while the queue is full the connection is kept alive."""
        unit, after, _ = ready
        while True:
            try:
                self._queue.put(unit, after, len(unit.records), unit.nbytes, timeout=1.0)
                return
            except queue.Full:
                if self._stop.is_set():
                    raise ConnectorError("the feed was closed") from None
                self.source.keep_stream_alive()

    # -- UnitStream --------------------------------------------------------------------------

    def get(self, timeout: float) -> tuple[DriverRecords, Offset]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._queue.get(min(max(0.0, deadline - time.monotonic()), QUIET_S))
            except queue.Empty:
                pass
            # (the stream thread may hold the lock waiting for room in the queue: then there is
            # something to get)
            if self._lock.acquire(timeout=0.05):
                try:
                    if self._queue.empty() and time.monotonic() - self._last_arrival >= QUIET_S:
                        ready = self._cut(final=True)
                        if ready is not None:
                            unit, after, _ = ready
                            return unit, after
                finally:
                    self._lock.release()
            if time.monotonic() >= deadline:
                raise queue.Empty

    def between_transactions(self, offset: Offset) -> bool:
        # the records are built: a transaction's BEGIN/END were counted on the driver, so a batch
        # may end anywhere (a restart inside a transaction re-emits the rest, as the standalone
        # runner's does)
        return True

    def split(self, unit: DriverRecords, end_key: tuple[Any, ...]) -> tuple[DriverRecords | None, DriverRecords]:
        keys = unit.keys or []
        cut = 0
        while cut < len(keys) and keys[cut] <= end_key:
            cut += 1
        head = DriverRecords(unit.records[:cut], keys[:cut]) if cut else None
        return head, DriverRecords(unit.records[cut:], keys[cut:])

    def append(self, units: list[Any], unit: DriverRecords) -> None:
        if not unit.records:
            return
        units.append(DriverRecords(unit.records))

    def changes(self, unit: DriverRecords) -> int:
        return len(unit.records)

    def nbytes(self, unit: DriverRecords) -> int:
        return unit.nbytes

    def past(self, offset: Offset, target: Any) -> bool:
        raise ConnectorError("Trigger.AvailableNow is not available with signals (signal.data.collection, "
                             "signal.enabled.channels, notification.enabled.channels) in the Spark source; use "
                             "a processing-time trigger")

    def caught_up(self, target: Any) -> bool:
        return self.past({}, target)

    def check(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

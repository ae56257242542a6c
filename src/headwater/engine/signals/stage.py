"""The signaling stage: between a connector's stream and the engine's queue.

It reads the signal table's change events as signals before passing them on (Debezium's order:
a window closed by a record is emptied before that record), runs incremental snapshots against
the stream (:mod:`.incremental`), polls the other channels on a thread of its own, asks the
stream to stop for a blocking snapshot, and adds the incremental snapshot's progress to every
offset it passes on. One lock serializes the stream thread and the signal thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from headwater.engine.records import OffsetMarker, SourceRecord
from headwater.engine.signals import actions
from headwater.engine.signals.actions import SnapshotRequest
from headwater.engine.signals.incremental import IncrementalSnapshotter
from headwater.engine.signals.signal import Signal, SignalError, signal_from_row
from headwater.engine.signals.watermarks import WINDOW_CLOSE, WINDOW_OPEN

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector
    from headwater.engine.source import CaptureSource

log = logging.getLogger(__name__)

Offset = dict[str, Any]


class SignalingStream:
    """Wraps `emit` for one run's streaming. `offset`: the stored offset (an incremental snapshot
    in progress goes on); `channels`: the polled channels (file, kafka, api); `notifications`: the
    NotificationService or None."""

    def __init__(self, connector: SourceConnector, source: CaptureSource, emit: Callable[[list[Any]], None],
                 offset: Offset | None, *, channels: list[Any] = (), notifications: Any = None) -> None:
        config = connector.config
        self.connector = connector
        self.source = source
        self._emit = emit
        self.notifications = notifications
        self.signal_collection: str | None = (config.get("signal.data.collection") or "").strip() or None
        self.strategy: str = config.get("incremental.snapshot.watermarking.strategy")
        self.channels = list(channels)
        self.poll_interval_s = config.get("signal.poll.interval.ms") / 1000 if self.channels else 0.0
        self.lock = threading.RLock()
        self.last_offset: Offset | None = offset
        self._out: list[Any] = []
        self.blocking: list[tuple[SnapshotRequest, Offset | None]] = []
        self.stream_stop = threading.Event()  # set: the stream returns (a blocking snapshot waits)
        self.incremental = source.incremental_source()
        self.snapshotter: IncrementalSnapshotter | None = None
        if self.incremental is not None:
            self.snapshotter = IncrementalSnapshotter(
                self.incremental, chunk_size=config.get("incremental.snapshot.chunk.size"), strategy=self.strategy,
                out=self._out.extend, notifications=notifications)
            self.snapshotter.restore(offset)
        self._resume_pending = self.snapshotter is not None and self.snapshotter.ctx.running
        self._poller: threading.Thread | None = None
        self._closed = threading.Event()
        # an error acting on a polled signal (a lost connection): the stream stops and the run
        # fails with it, as if the stream thread had met it
        self.failure: BaseException | None = None

    def emit_direct(self, records: list[Any]) -> None:
        """Records not from the stream (a blocking snapshot's), in order with notifications."""
        with self.lock:
            self._out.extend(records)
            self._flush()

    def emit_notifications(self, records: list[Any]) -> None:
        """Where the NotificationService's sink records go: in stream order, with the next flush."""
        self._out.extend(records)

    def set_notifications(self, notifications: Any) -> None:
        self.notifications = notifications
        if self.snapshotter is not None:
            self.snapshotter.notifications = notifications

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start polling the channels; an incremental snapshot found in the offset reads its next
        chunk now (Debezium's init), before the first streamed change."""
        with self.lock:
            self._resume()
            self._flush()
        for channel in self.channels:
            channel.start()
        if self.channels:
            self._poller = threading.Thread(target=self._poll, name="headwater-signals", daemon=True)
            self._poller.start()

    def close(self) -> None:
        self._closed.set()
        if self._poller is not None:
            self._poller.join(timeout=10)
        for channel in self.channels:
            try:
                channel.close()
            except Exception as exc:  # closing must not hide the run's own outcome
                log.warning("closing the %s signal channel failed: %s", getattr(channel, "name", "?"), exc)

    def send(self, signal: Signal) -> None:
        """Act on a signal now (the in-process API and the polled channels)."""
        with self.lock:
            self._act(signal, self.last_offset)
            self._flush()

    # -- the stream --------------------------------------------------------------------------

    def emit(self, items: list[Any]) -> None:
        with self.lock:
            if self.failure is not None:
                raise self.failure
            snapshotter = self.snapshotter
            out = self._out
            begin_at: int | None = None  # a transaction's BEGIN just handed on, with no event after it yet
            for item in items:
                if isinstance(item, SourceRecord):
                    offset = item.offset
                    if item.table is not None and item.table == self.signal_collection and item.op in ("c", "d"):
                        mark = len(out)
                        self._source_signal(item, offset)
                        if begin_at is not None and len(out) > mark:
                            # Debezium acts on a signal before its transaction's BEGIN goes out
                            produced = out[mark:]
                            del out[mark:]
                            out[begin_at:begin_at] = produced
                    elif snapshotter is not None:
                        # (heartbeats too: read-only watermarks close a window on a quiet database)
                        kind = snapshotter.marks.classify(item, snapshotter.ctx.chunk_id)
                        if kind == "open":
                            snapshotter.open_window(snapshotter.ctx.chunk_id or "")
                        if item.op is not None:
                            snapshotter.evict(item)
                        if kind == "close":
                            # read-only marks: the window closes before this (newer) event
                            snapshotter.close_window(snapshotter.ctx.chunk_id or "", offset)
                    self.last_offset = offset
                    if snapshotter is not None:
                        item.offset = snapshotter.with_progress(offset)
                    is_begin = item.op is None and isinstance(item.value, dict) and item.value.get("status") == "BEGIN"
                    begin_at = len(out) if is_begin else None
                elif isinstance(item, OffsetMarker):
                    self.last_offset = item.offset
                    if snapshotter is not None:
                        item.offset = snapshotter.with_progress(item.offset)
                out.append(item)
            self._flush()

    def _flush(self) -> None:
        if self._out:
            items = self._out[:]
            self._out.clear()
            self._emit(items)

    def _resume(self) -> None:
        if self._resume_pending and self.snapshotter is not None:
            self._resume_pending = False
            self.snapshotter.read_chunk(self.last_offset or {})

    def _source_signal(self, record: SourceRecord, offset: Offset) -> None:
        value = record.value or {}
        if record.op == "d":
            if self.strategy != "insert_delete":
                return
            row = value.get("before") or {}
            try:
                deleted = signal_from_row(list(row.values()))
            except SignalError:
                return
            # Debezium: under insert_delete the open row's delete closes its window
            signal = Signal(deleted.id.replace("open", "close"), WINDOW_CLOSE, deleted.data)
        else:
            try:
                signal = signal_from_row(list((value.get("after") or {}).values()))
            except SignalError as exc:
                log.warning("a row of the signal table %s is not a signal: %s", self.signal_collection, exc)
                return
        self._act(signal, offset)

    # -- actions -----------------------------------------------------------------------------

    def _act(self, signal: Signal, offset: Offset | None) -> None:
        at = offset or {}
        snapshotter = self.snapshotter
        kind = signal.type
        try:
            if kind == WINDOW_OPEN:
                if snapshotter is not None:
                    snapshotter.open_window(signal.id)
            elif kind == WINDOW_CLOSE:
                if snapshotter is not None:
                    snapshotter.close_window(signal.id, at)
            elif kind == actions.EXECUTE_SNAPSHOT:
                request = actions.execute_snapshot(signal)
                log.info("%s: %s snapshot of %s requested", signal, request.kind, request.collections)
                if request.kind == actions.BLOCKING:
                    self._request_blocking(request, offset)
                else:
                    self._incremental(signal).add(request, signal.id, at)
            elif kind == actions.STOP_SNAPSHOT:
                request = actions.stop_snapshot(signal)
                if request.kind == actions.INCREMENTAL:
                    self._incremental(signal).request_stop(request)
                else:
                    log.warning("%s: only incremental snapshots can be stopped", signal)
            elif kind == actions.PAUSE_SNAPSHOT:
                self._incremental(signal).pause(at)
            elif kind == actions.RESUME_SNAPSHOT:
                self._incremental(signal).resume(at)
            elif kind == actions.LOG:
                log.info(actions.log_message(signal).replace("{}", "<none>" if offset is None else str(offset), 1))
            elif kind == actions.SCHEMA_CHANGES:
                raise SignalError(f"{signal}: schema-changes signals are not supported by Headwater's connectors")
            else:
                raise SignalError(f"{signal}: unknown signal type; known: execute-snapshot, stop-snapshot, "
                                  "pause-snapshot, resume-snapshot, log")
        except SignalError as exc:
            log.warning("%s; the signal is skipped", exc)

    def _incremental(self, signal: Signal) -> IncrementalSnapshotter:
        if self.snapshotter is None:
            raise SignalError(f"{signal}: incremental snapshots need signal.data.collection (the signal table the "
                              "window marks are written to)" if self.signal_collection is None else
                              f"{signal}: this connector has no incremental snapshots")
        return self.snapshotter

    def _request_blocking(self, request: SnapshotRequest, offset: Offset | None) -> None:
        if self.incremental is None:
            raise SignalError("blocking snapshots are not available for this connector")
        self.blocking.append((request, offset))
        self.stream_stop.set()

    def take_blocking(self) -> SnapshotRequest | None:
        with self.lock:
            if not self.blocking:
                return None
            request, _ = self.blocking.pop(0)
            if not self.blocking:
                self.stream_stop.clear()
            return request

    def with_progress(self, offset: Offset) -> Offset:
        return self.snapshotter.with_progress(offset) if self.snapshotter is not None else offset

    # -- polled channels ---------------------------------------------------------------------

    def _poll(self) -> None:
        while not self._closed.wait(self.poll_interval_s):
            for channel in self.channels:
                try:
                    signals = channel.read()
                except Exception as exc:  # a channel failing must not stop the stream
                    log.warning("reading the %s signal channel failed: %s", getattr(channel, "name", "?"), exc)
                    continue
                for signal in signals:
                    try:
                        self.send(signal)
                    except Exception as exc:
                        log.error("acting on %s failed: %s", signal, exc)
                        self.failure = exc
                        self.stream_stop.set()
                        return

"""The engine loop: a reader thread runs the connector into the bounded queue; the calling
thread polls batches, writes them to the sink, and periodically makes them durable, stores the
offset and acknowledges it to the connector — in that order, so the database never releases a
change the destination does not durably hold."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from headwater.engine.capture import run_capture
from headwater.engine.connector import ConnectorError, SourceConnector
from headwater.engine.offsets import OffsetStore
from headwater.engine.queue import ChangeEventQueue, QueueClosed
from headwater.engine.records import EncodedBatch, OffsetMarker, PendingBatch, SourceRecord
from headwater.engine.source import CaptureSource

log = logging.getLogger(__name__)

# how often the stop watcher looks at the caller's stop event (threading.Event has no callback)
_STOP_CHECK_S = 0.2


class Sink(Protocol):
    def write(self, records: list[SourceRecord]) -> None: ...

    def write_encoded(self, batch: EncodedBatch) -> None:
        """Records already serialized by worker processes (only called when the sink was
        built with the serializer those workers use)."""

    def flush(self) -> None:
        """Make everything written so far durable."""

    def close(self) -> None: ...


@dataclass
class EngineSettings:
    max_queue_size: int = 8192
    max_queue_size_in_bytes: int = 0
    max_batch_size: int = 2048
    poll_interval_ms: int = 500
    offset_flush_interval_ms: int = 60_000
    # retries after a retriable connector error (a lost connection): errors.max.retries (-1 =
    # without limit), a delay doubling from errors.retry.delay.initial.ms up to
    # errors.retry.delay.max.ms, and never shorter than retriable.restart.connector.wait.ms
    errors_max_retries: int = 0
    retry_delay_initial_ms: int = 300
    retry_delay_max_ms: int = 10_000
    restart_wait_ms: int = 10_000

    @classmethod
    def from_connector(cls, c: Any) -> EngineSettings:
        """The settings a connector's configuration (`HeadwaterConfig.connector`) states."""
        return cls(
            max_queue_size=c.get("max.queue.size"),
            max_queue_size_in_bytes=c.get("max.queue.size.in.bytes"),
            max_batch_size=c.get("max.batch.size"),
            poll_interval_ms=c.get("poll.interval.ms"),
            offset_flush_interval_ms=c.get("offset.flush.interval.ms"),
            errors_max_retries=c.get("errors.max.retries"),
            retry_delay_initial_ms=c.get("errors.retry.delay.initial.ms"),
            retry_delay_max_ms=c.get("errors.retry.delay.max.ms"),
            restart_wait_ms=c.get("retriable.restart.connector.wait.ms"),
        )

    def retry_delay_s(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1, 2, ...)."""
        backoff = min(self.retry_delay_initial_ms * 2 ** min(attempt - 1, 30), self.retry_delay_max_ms)
        return max(backoff, self.restart_wait_ms) / 1000


@dataclass
class EngineStats:
    records: int = 0
    per_topic: dict[str, int] = field(default_factory=dict)
    commits: int = 0
    last_offset: dict[str, Any] | None = None


class Engine:
    def __init__(self, connector: SourceConnector, sink: Sink, offsets: OffsetStore, settings: EngineSettings,
                 *, on_batch: Callable[[list[SourceRecord], EngineStats], None] | None = None) -> None:
        self.connector = connector
        self.sink = sink
        self.offsets = offsets
        self.settings = settings
        self.stats = EngineStats()
        self.on_batch = on_batch
        self._reader_stop = threading.Event()
        self._source: CaptureSource | None = None

    def run(self, stop: threading.Event) -> None:
        """Run until `stop` is set (then drain and commit) or the connector finishes or fails
        (then commit what was delivered and re-raise the connector's error). A retriable error
        (a lost connection) runs the connector again from the stored offset, per the retry
        settings; nothing delivered before it is lost, as its offset was committed first."""
        partition = self.connector.partition()
        s = self.settings
        failures = 0
        error: BaseException | None = None
        done = threading.Event()
        threading.Thread(target=self._watch_stop, args=(stop, done), name="headwater-stop", daemon=True).start()
        try:
            while True:
                delivered = self.stats.records
                error = self._run_once(partition, stop)
                if error is None or stop.is_set() or not self.connector.is_retriable(error):
                    break
                if self.stats.records > delivered:
                    failures = 0  # the previous restart worked: count consecutive failures only
                reason = (str(error).strip() or type(error).__name__).splitlines()[0]
                if 0 <= s.errors_max_retries <= failures:
                    error = ConnectorError(
                        f"{reason} (gave up after {failures} {'retry' if failures == 1 else 'retries'}: "
                        f"errors.max.retries={s.errors_max_retries})")
                    break
                failures += 1
                delay = s.retry_delay_s(failures)
                limit = "" if s.errors_max_retries < 0 else f" of {s.errors_max_retries}"
                log.warning("%s; restarting the connector in %.1f s (retry %d%s)", reason, delay, failures, limit)
                if self._source is not None:
                    self._source.release()
                if stop.wait(delay):
                    error = None
                    break
        finally:
            done.set()
            try:
                if self._source is not None:
                    self._source.close()
                self.connector.close()
            finally:
                self.sink.close()
        if error is not None:
            raise error

    def _watch_stop(self, stop: threading.Event, done: threading.Event) -> None:
        """Pass a stop request on to the reader while the consumer may be waiting in an idle poll
        (up to poll.interval.ms): the reader stops, closes the queue, and that ends the poll."""
        while not done.is_set():
            if stop.wait(_STOP_CHECK_S):
                self._reader_stop.set()
                return

    def signal(self, signal_type: str, data: str | dict[str, Any] | None = None,
               signal_id: str | None = None) -> Any:
        """Send a signal to this running engine (`execute-snapshot`, `stop-snapshot`, `log`, ...)
        through its in-process channel (`signal.enabled.channels` must list `in-process`); it is
        acted on at the channel's next poll (`signal.poll.interval.ms`). Returns the Signal sent."""
        from headwater.engine.signals.channels import send_in_process

        return send_in_process(self.connector.config.get("topic.prefix"), signal_type, data, signal_id)

    def _run_once(self, partition: dict[str, Any], stop: threading.Event) -> BaseException | None:
        """One run of the connector from the stored offset; returns its error (None when it
        finished or was stopped). Everything delivered is committed before returning."""
        offset = self.offsets.load(partition)
        if self._source is None:
            self._source = self.connector.capture_source(parallel=False)
        queue = ChangeEventQueue(self.settings.max_queue_size, self.settings.max_queue_size_in_bytes)
        self._reader_stop = threading.Event()
        reader = threading.Thread(target=self._read, args=(offset, queue), name="headwater-reader", daemon=True)
        reader.start()
        pending: dict[str, Any] | None = None
        quiet = True  # no records delivered since the last commit: offset markers only
        last_commit = time.monotonic()
        interval = self.settings.offset_flush_interval_ms / 1000
        poll_s = self.settings.poll_interval_ms / 1000
        error: BaseException | None = None
        try:
            while True:
                if stop.is_set() and not self._reader_stop.is_set():
                    self._reader_stop.set()
                # The poll returns as soon as anything is queued (a batch grows only with what
                # piled up meanwhile); poll.interval.ms bounds an idle wait only, and a due offset
                # commit shortens it. A stop reaches the reader through _watch_stop meanwhile.
                timeout = poll_s
                if pending is not None:
                    timeout = min(timeout, max(0.0, last_commit + interval - time.monotonic()))
                try:
                    batch = queue.poll(self.settings.max_batch_size, timeout)
                except QueueClosed as closed:
                    error = closed.__cause__
                    break
                if batch:
                    offset = self._deliver(batch)
                    if offset is not None:
                        pending = offset
                # an idle position with no records before it is stored at once (see OffsetMarker)
                settle = False
                if batch and quiet:
                    quiet = all(isinstance(item, OffsetMarker) for item in batch)
                    settle = quiet and any(item.idle for item in batch)
                if pending is not None and (settle or time.monotonic() - last_commit >= interval):
                    self._commit(partition, pending)
                    pending = None
                    quiet = True
                    last_commit = time.monotonic()
        finally:
            self._reader_stop.set()
            reader.join(timeout=60)
            if pending is not None:
                self._commit(partition, pending)
        return error

    def _deliver(self, batch: list[Any]) -> dict[str, Any] | None:
        """Write one polled batch to the sink, in order; returns the offset after it."""
        records: list[SourceRecord] = []
        offset = None
        for item in batch:
            if isinstance(item, PendingBatch):
                if records:
                    self._write(records)
                    records = []
                encoded = item.result()
                if not encoded.written:
                    self.sink.write_encoded(encoded)
                for topic, n, _ in encoded.segments:
                    self.stats.records += n
                    self.stats.per_topic[topic] = self.stats.per_topic.get(topic, 0) + n
                if encoded.offset is not None:
                    offset = encoded.offset
            else:
                if isinstance(item, SourceRecord):
                    records.append(item)
                offset = item.offset
        if records:
            self._write(records)
        return offset

    def _write(self, records: list[SourceRecord]) -> None:
        self.sink.write(records)
        self._count(records)
        if self.on_batch is not None:
            self.on_batch(records, self.stats)

    def _read(self, offset: dict[str, Any] | None, queue: ChangeEventQueue) -> None:
        try:
            assert self._source is not None
            run_capture(self.connector, self._source, offset, queue.put_many, self._reader_stop)
        except BaseException as exc:  # handed to the consumer thread, which re-raises it
            queue.close(exc)
        else:
            queue.close()

    def _commit(self, partition: dict[str, Any], offset: dict[str, Any]) -> None:
        self.sink.flush()
        self.offsets.save(partition, offset)
        if self._source is not None:
            self._source.acknowledge(offset)
        self.stats.commits += 1
        self.stats.last_offset = offset

    def _count(self, records: list[SourceRecord]) -> None:
        self.stats.records += len(records)
        per_topic = self.stats.per_topic
        for r in records:
            per_topic[r.topic] = per_topic.get(r.topic, 0) + 1

"""Notifications: Debezium's reports on snapshots (``notification.enabled.channels``).

A :class:`Notification` is Debezium's (``io.debezium.pipeline.notification.Notification``): id,
aggregate type (``Initial Snapshot`` or ``Incremental Snapshot``), type, a string map of
additional data, and a timestamp in epoch milliseconds. Two channels deliver it:

- ``sink``: a record on ``notification.sink.topic.name``, built like Debezium's
  SinkNotificationChannel: key ``io.debezium.connector.common.NotificationKey`` v1 {id}, value
  ``io.debezium.connector.common.Notification`` v1 {id, type, aggregate_type, additional_data
  (optional map of strings), timestamp}, no headers (not even the ``__debezium.context.*`` ones),
  carrying the offset the caller passes;
- ``log``: Debezium's line ``[Notification Service]  {id='…', aggregateType='…', type='…',
  additionalData={k=v, …}, timestamp=…}`` at INFO.

``jmx`` has no effect in Headwater (the configuration check warns at start). Debezium sends to
the log channel before the sink, and so does this module.

Java's HashMap decides the order of ``additional_data`` in Debezium's JSON and log line; it is
reproduced here (:func:`java_hash_order`), so records match Debezium's byte for byte. Where two
keys share a hash bucket their order depends on ``Map.of``'s per-JVM random salt; the order here
is the one recorded from Debezium 3.6.3 (tests/conformance/signals/golden).

API (every method is a no-op when :attr:`NotificationService.enabled` is False)::

    NotificationService(config, connector_name, emit, clock=<epoch ms>, new_id=<uuid4 text>)
        emit(records: list[SourceRecord]) receives the sink channel's records
        enabled: bool — sink or log is enabled

    # initial and blocking snapshots ("Initial Snapshot"; id: a random UUID each)
    initial_started(offset)                     STARTED      {}
    initial_skipped(offset)                     SKIPPED      {}
    initial_table_in_progress(collection, snapshot_tables, offset)
                                                IN_PROGRESS  {current_collection_in_progress, data_collections}
    initial_table_completed(collection, rows, captured_tables, offset)
                                                TABLE_SCAN_COMPLETED {scanned_collection, data_collections,
                                                             total_rows_scanned, status=SUCCEEDED}
    initial_table_failed(collection, offset)    TABLE_SCAN_COMPLETED {scanned_collection, status=SQL_EXCEPTION}
    initial_completed(offset)                   COMPLETED    {}
    initial_aborted(offset)                     ABORTED      {}

    # incremental snapshots ("Incremental Snapshot"; id: ctx.correlation_id, the id of the signal
    # that started it, or a random UUID when there is none)
    incremental_started(ctx, offset)            STARTED      {data_collections}
    incremental_paused(ctx, offset)             PAUSED       {data_collections}
    incremental_resumed(ctx, offset)            RESUMED      {data_collections}
    incremental_in_progress(ctx, offset)        IN_PROGRESS  {data_collections, current_collection_in_progress,
                                                              maximum_key, last_processed_key}
    incremental_table_scan_completed(ctx, scanned_collection, total_rows_scanned, status, offset)
                                                TABLE_SCAN_COMPLETED {data_collections, scanned_collection,
                                                                      total_rows_scanned, status}
    incremental_completed(ctx, offset)          COMPLETED    {}
    incremental_aborted(ctx, stopped, offset)   ABORTED      {data_collections: the stopped ones}

    close()

Every map also holds ``connector_name`` (``topic.prefix``: Debezium's logical name). `ctx` is
any object with the attributes of :class:`IncrementalProgress` (the engine's IncrementalContext);
`data_collections` are its collections still to snapshot (the current one included), in order.
Lists are joined with ``,``; keys are rendered as Java's ``Objects.toString`` would render the
JDBC values (:func:`java_text`).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from headwater.engine.records import SourceRecord
from headwater.model.schema import INT64, STRING, Schema, struct

if TYPE_CHECKING:
    from headwater.config.configuration import Configuration

log = logging.getLogger(__name__)

Offset = dict[str, Any]

SINK = "sink"
LOG = "log"
JMX = "jmx"
CHANNELS = (SINK, LOG, JMX)

INITIAL_SNAPSHOT = "Initial Snapshot"
INCREMENTAL_SNAPSHOT = "Incremental Snapshot"

# Debezium's SchemaFactory.notificationKeySchema / notificationValueSchema
KEY_SCHEMA = struct("io.debezium.connector.common.NotificationKey", [("id", STRING)], version=1)
VALUE_SCHEMA = struct(
    "io.debezium.connector.common.Notification",
    [
        ("id", STRING),
        ("type", STRING),
        ("aggregate_type", STRING),
        ("additional_data", Schema("map", keys=STRING, values=STRING, optional=True)),
        ("timestamp", INT64),
    ],
    version=1,
)

_LOG_PREFIX = "[Notification Service] "


@dataclass(frozen=True)
class Notification:
    """One notification; `additional_data` in the order Debezium's HashMap iterates it."""

    id: str
    aggregate_type: str
    type: str
    additional_data: dict[str, str]
    timestamp: int

    def __str__(self) -> str:
        """Debezium's Notification.toString (the log channel's text)."""
        data = "{" + ", ".join(f"{k}={v}" for k, v in self.additional_data.items()) + "}"
        return (f"{{id='{self.id}', aggregateType='{self.aggregate_type}', type='{self.type}', "
                f"additionalData={data}, timestamp={self.timestamp}}}")

    def record(self, topic: str, offset: Offset) -> SourceRecord:
        """The sink channel's record (Debezium's SinkNotificationChannel.send)."""
        value = {"id": self.id, "type": self.type, "aggregate_type": self.aggregate_type,
                 "additional_data": self.additional_data, "timestamp": self.timestamp}
        return SourceRecord(topic, KEY_SCHEMA, {"id": self.id}, VALUE_SCHEMA, value, offset, (), None, None,
                            context_headers=False)


class _Collection(Protocol):
    @property
    def id(self) -> str: ...


class IncrementalProgress(Protocol):
    """What the incremental notifications read from the engine's incremental-snapshot context."""

    @property
    def collections(self) -> Sequence[_Collection]: ...
    @property
    def current(self) -> _Collection | None: ...
    @property
    def correlation_id(self) -> str | None: ...
    @property
    def maximum_key(self) -> Sequence[Any] | None: ...
    @property
    def chunk_end(self) -> Sequence[Any] | None: ...


def _epoch_ms() -> int:
    return time.time_ns() // 1_000_000


def _random_id() -> str:
    return str(uuid.uuid4())


class NotificationService:
    """Sends Debezium's snapshot notifications to the enabled channels (see the module doc)."""

    def __init__(self, config: Configuration, connector_name: str, emit: Callable[[list[SourceRecord]], None],
                 clock: Callable[[], int] = _epoch_ms, new_id: Callable[[], str] = _random_id) -> None:
        channels = [c.strip() for c in config.get("notification.enabled.channels") or [] if c.strip()]
        unknown = [c for c in channels if c not in CHANNELS]
        if unknown:  # the configuration check refuses these; a guard for unchecked configurations
            raise ValueError(f"unknown notification channel(s) {', '.join(unknown)}")
        self.topic: str | None = None
        if SINK in channels:
            self.topic = (config.get("notification.sink.topic.name") or "").strip() or None
            if self.topic is None:
                raise ValueError("notification.sink.topic.name must be set when the sink notification channel "
                                 "is enabled")
        self.log_enabled = LOG in channels
        self.enabled = self.log_enabled or self.topic is not None
        self.connector_name = connector_name
        self._emit = emit
        self._clock = clock
        self._new_id = new_id

    # -- sending -----------------------------------------------------------------------------

    def notify(self, notification: Notification, offset: Offset) -> None:
        """To every enabled channel: the log first, then the sink (Debezium's order)."""
        if self.log_enabled:
            log.info("%s %s", _LOG_PREFIX, notification)
        if self.topic is not None:
            self._emit([notification.record(self.topic, offset)])

    def _send(self, aggregate_type: str, kind: str, data: list[tuple[str, str]], offset: Offset,
              notification_id: str | None = None) -> None:
        """Debezium's buildNotificationWith: `data` (a Map.of, in the order Java iterated it) copied
        into a HashMap, connector_name put last."""
        entries = dict(data)
        order = java_hash_order([*entries, "connector_name"], _copied_map_capacity(len(entries)))
        entries["connector_name"] = self.connector_name
        notification = Notification(notification_id or self._new_id(), aggregate_type, kind,
                                    {k: entries[k] for k in order}, self._clock())
        self.notify(notification, offset)

    # -- initial and blocking snapshots ------------------------------------------------------

    def initial_started(self, offset: Offset) -> None:
        if self.enabled:
            self._send(INITIAL_SNAPSHOT, "STARTED", [], offset)

    def initial_skipped(self, offset: Offset) -> None:
        """The snapshot is not run (snapshot.mode, or it was completed before)."""
        if self.enabled:
            self._send(INITIAL_SNAPSHOT, "SKIPPED", [], offset)

    def initial_table_in_progress(self, collection: str, snapshot_tables: Sequence[str], offset: Offset) -> None:
        """Before a table is read. `snapshot_tables`: the tables whose rows this snapshot reads (the
        signal table excluded), which Debezium lists in the order of a Java HashSet."""
        if self.enabled:
            tables = java_hash_order(list(snapshot_tables), _hash_set_capacity(len(snapshot_tables)))
            self._send(INITIAL_SNAPSHOT, "IN_PROGRESS", [("current_collection_in_progress", collection),
                                                         ("data_collections", ",".join(tables))], offset)

    def initial_table_completed(self, collection: str, rows: int, captured_tables: Sequence[str],
                                offset: Offset) -> None:
        """After a table is read. `captured_tables`: every captured table, the signal table
        included, in Debezium's order (the include-list patterns' matches, each sorted, then the
        signal table's)."""
        if self.enabled:
            self._send(INITIAL_SNAPSHOT, "TABLE_SCAN_COMPLETED", [
                ("scanned_collection", collection), ("total_rows_scanned", str(rows)), ("status", "SUCCEEDED"),
                ("data_collections", ",".join(captured_tables))], offset)

    def initial_table_failed(self, collection: str, offset: Offset) -> None:
        """Reading a table failed (the snapshot then aborts)."""
        if self.enabled:
            self._send(INITIAL_SNAPSHOT, "TABLE_SCAN_COMPLETED",
                       [("scanned_collection", collection), ("status", "SQL_EXCEPTION")], offset)

    def initial_completed(self, offset: Offset) -> None:
        if self.enabled:
            self._send(INITIAL_SNAPSHOT, "COMPLETED", [], offset)

    def initial_aborted(self, offset: Offset) -> None:
        if self.enabled:
            self._send(INITIAL_SNAPSHOT, "ABORTED", [], offset)

    # -- incremental snapshots ---------------------------------------------------------------

    def _incremental(self, ctx: IncrementalProgress, kind: str, data: list[tuple[str, str]], offset: Offset,
                     correlation_id: str | None = None) -> None:
        self._send(INCREMENTAL_SNAPSHOT, kind, data, offset, correlation_id or ctx.correlation_id)

    def incremental_started(self, ctx: IncrementalProgress, offset: Offset) -> None:
        if self.enabled:
            self._incremental(ctx, "STARTED", [("data_collections", _collections(ctx))], offset)

    def incremental_paused(self, ctx: IncrementalProgress, offset: Offset) -> None:
        if self.enabled:
            self._incremental(ctx, "PAUSED", [("data_collections", _collections(ctx))], offset)

    def incremental_resumed(self, ctx: IncrementalProgress, offset: Offset) -> None:
        if self.enabled:
            self._incremental(ctx, "RESUMED", [("data_collections", _collections(ctx))], offset)

    def incremental_in_progress(self, ctx: IncrementalProgress, offset: Offset) -> None:
        """After a chunk with rows was read (before its window closes): `ctx.chunk_end` is the
        chunk's last key, `ctx.maximum_key` the table's."""
        if not self.enabled:
            return
        current = ctx.current
        maximum = ctx.maximum_key
        self._incremental(ctx, "IN_PROGRESS", [
            ("current_collection_in_progress", current.id if current is not None else ""),
            # Debezium writes the absent maximum key with quotes: "\"<null>\""
            ("maximum_key", _key_text(maximum) if maximum is not None else '"<null>"'),
            ("data_collections", _collections(ctx)),
            ("last_processed_key", _key_text(ctx.chunk_end or ())),
        ], offset)

    def incremental_table_scan_completed(self, ctx: IncrementalProgress, scanned_collection: str,
                                         total_rows_scanned: int, status: str, offset: Offset) -> None:
        """A table is done (before it leaves `ctx.collections`): `status` is Debezium's
        TableScanCompletionStatus (SUCCEEDED, EMPTY, NO_PRIMARY_KEY, UNKNOWN_SCHEMA, SQL_EXCEPTION,
        SKIPPED)."""
        if self.enabled:
            self._incremental(ctx, "TABLE_SCAN_COMPLETED", [
                ("scanned_collection", scanned_collection), ("total_rows_scanned", str(total_rows_scanned)),
                ("status", status), ("data_collections", _collections(ctx))], offset)

    def incremental_completed(self, ctx: IncrementalProgress, offset: Offset) -> None:
        if self.enabled:
            self._incremental(ctx, "COMPLETED", [], offset)

    def incremental_aborted(self, ctx: IncrementalProgress, stopped: Sequence[str], offset: Offset,
                            correlation_id: str | None = None) -> None:
        """A stop-snapshot removed `stopped`. The id is `ctx.correlation_id` at the call, as in
        Debezium (which has unset it when the stop ended the snapshot: a random id then);
        `correlation_id` replaces it."""
        if self.enabled:
            self._incremental(ctx, "ABORTED", [("data_collections", ",".join(stopped))], offset, correlation_id)

    def close(self) -> None:
        """Nothing to release: the channels hold no resources (Debezium's close is a no-op too)."""


def _collections(ctx: IncrementalProgress) -> str:
    return ",".join(c.id for c in ctx.collections)


def _key_text(key: Sequence[Any]) -> str:
    return ",".join(java_text(v) for v in key)


# -- Java's renderings -------------------------------------------------------------------------


def java_text(value: Any) -> str:
    """`Objects.toString(value, "<null>")` of the value JDBC would have returned for a key
    column: java.sql.Timestamp/Date/Time, BigDecimal, Double... (text passes through)."""
    if value is None:
        return "<null>"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal):
        return str(value)  # Python's Decimal text is the same to-scientific-string as BigDecimal's
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, dt.datetime):  # java.sql.Timestamp: fraction without trailing zeros, at least ".0"
        fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
        return f"{value:%Y-%m-%d %H:%M:%S}.{fraction}"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):  # java.sql.Time drops the fraction
        return f"{value:%H:%M:%S}"
    return str(value)


def _java_double(value: float) -> str:
    """Double.toString: plain between 10^-3 and 10^7, else d.dddE<n>; the shortest digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    exact = Decimal(repr(abs(value)))
    digits = "".join(map(str, exact.as_tuple().digits)).rstrip("0") or "0"
    exponent = exact.adjusted()
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[:exponent + 1].ljust(exponent + 1, "0")
            return f"{sign}{whole}.{digits[exponent + 1:] or '0'}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# -- Java's HashMap iteration order ----------------------------------------------------------


def _java_string_hash(text: str) -> int:
    """String.hashCode, spread as HashMap.hash does (h ^ h >>> 16), as an unsigned 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h ^ (h >> 16)


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return size


def _copied_map_capacity(size: int) -> int:
    """The table size of `new HashMap<>(Map.of(<size entries>))` after one more put
    (connector_name): putMapEntries sizes it for the copy, the put may double it."""
    if size == 0:
        return 16  # an empty copy allocates nothing; the put allocates the default table
    capacity = _table_size_for(int(size / 0.75 + 1.0))
    while size + 1 > int(capacity * 0.75):
        capacity <<= 1
    return capacity


def _hash_set_capacity(size: int) -> int:
    """The table size of `new HashSet<>(collection)` (Java 17: max(size / .75 + 1, 16))."""
    return _table_size_for(max(int(size / 0.75) + 1, 16))


def java_hash_order(keys: Sequence[str], capacity: int) -> list[str]:
    """The iteration order of a java.util.HashMap/HashSet of String keys inserted in `keys`'
    order whose table has `capacity` buckets: by bucket, then by insertion (a resize keeps the
    relative order of a bucket's entries)."""
    mask = capacity - 1
    return sorted(keys, key=lambda k: _java_string_hash(k) & mask)


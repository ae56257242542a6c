"""The ``headwater`` data source for Spark: ``spark.readStream.format("headwater")``.

Options are the connector properties of the standalone runner (``database.hostname``,
``topic.prefix``, ``table.include.list``, …), plus a few for the source itself:

- ``maxRowsPerBatch`` — at most about this many change messages per micro-batch (default: no limit);
- ``snapshotChunkRows`` — rows per snapshot chunk (default 100,000): each chunk is one task;
- ``snapshotParallelism`` — at most this many snapshot tasks (chunks are spread over them);
  default: one task per chunk, Spark runs as many at once as it has task slots;
- ``streamTaskMessages`` — replication messages per streaming task (default 65,536): the reader
  hands over runs of messages as they arrive (often a few dozen at a time), and a task per run
  would cost more in scheduling than in decoding; a task also stops at ~64 MiB of messages. On a
  cluster with many cores and batches of a few hundred thousand messages, a lower value spreads
  a batch over more of them;
- ``headers`` — ``true`` (default); ``false`` leaves the ``headers`` column null (the pipeline
  runner sets it when every sink is a Delta sink, which ignores headers: they were a large part
  of a streamed record's bytes);
- ``streamDelivery`` — ``events`` (default); ``rows``: the inserts, updates and deletes of tables
  whose columns all have an exact typed form are delivered as records carrying typed Arrow rows in
  ``typed_rows`` (see :mod:`headwater.engine.typed_rows`; changes that need an
  event — key changes, unchanged-TOAST values, ``REPLICA IDENTITY FULL`` updates — stay events).
  For the Delta sink; the pipeline runner turns it on when every sink is a Delta sink;
- ``snapshotIdleSeconds`` — batch reads only: how long the exported snapshot waits for a task
  to start reading before it is released (default 300);
- ``snapshotDelivery`` — ``events`` (default): every snapshot row is one record; ``rows``: a
  snapshot chunk of a table whose columns all have an exact typed form is delivered as a few
  records carrying its rows as typed Arrow data in ``typed_rows`` (for the Delta sink, which
  stores them without building, writing and parsing JSON events; the pipeline runner turns this on
  when every sink is a Delta sink). Other tables' chunks stay events.

``spark.read.format("headwater")`` (batch) reads the same snapshot chunks once, without a slot:
a consistent extract of every captured table (see :class:`HeadwaterBatchReader`); it takes
``snapshotParallelism``, ``snapshotChunkRows``, ``snapshotDelivery``, ``valueFormat`` and
``headers`` as the stream does.

Where things run: the stream reader (``initialOffset``/``latestOffset``/``partitions``/``commit``)
lives in one long-lived Python process on the driver and owns the replication connection
(:class:`~headwater.engine.feed.CaptureFeed`). Partitions carry raw replication messages (or a
snapshot chunk to read) to the executors, which build and serialize the events and return Arrow
batches. Spark's checkpoint holds the connector's offsets; ``commit`` acknowledges a position to
the database once Spark has committed the batch that ends there.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from headwater.config import ConfigError, from_properties
from headwater.config.registry import default_connector_class
from headwater.engine.feed import DEFAULT_READ_AHEAD_MESSAGES, CaptureFeed, PositionedRecord, WorkDecoder
from headwater.serialization.json import ENVELOPE_START
from headwater.serialization.parallel import SerializerSettings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from headwater.engine.typed_rows import TypedRows

log = logging.getLogger(__name__)

FORMAT = "headwater"
# the record columns; key/value/headers are exactly what the standalone runner writes
SCHEMA = ("topic string, key string, value string, headers array<struct<key:string,value:binary>>, "
          "op string, position string, ts_ms long, source_db string, source_schema string, source_table string, "
          "typed_rows binary, typed_row_count int")
SOURCE_OPTIONS = ("maxRowsPerBatch", "snapshotChunkRows", "snapshotParallelism", "snapshotIdleSeconds",
                  "snapshotDelivery", "readAheadMessages", "valueFormat", "streamTaskMessages", "headers",
                  "streamDelivery")
SNAPSHOT_DELIVERIES = ("events", "rows")
VALUE_FORMATS = ("json", "payload")
_ARROW_ROWS = 4096
DEFAULT_SNAPSHOT_IDLE_S = 300  # batch reads: the exported snapshot waits this long for a task
# streaming work per task: the reader hands messages over in runs of a few dozen, and one task per
# run spent more time being scheduled and set up than decoding. Since rows are decoded in bulk
# (typed_changes) a task's fixed cost weighs more, hence tasks larger than the 16,384 messages they
# were before; see bench/README.md (Measurements behind design choices)
DEFAULT_STREAM_TASK_MESSAGES = 65_536
# and at most about this many message bytes per task (wide rows: each partition is pickled whole)
STREAM_TASK_BYTES = 64 << 20


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.schema([("topic", pa.string()), ("key", pa.string()), ("value", pa.string()),
                      ("headers", pa.list_(header)), ("op", pa.string()), ("position", pa.string()),
                      ("ts_ms", pa.int64()), ("source_db", pa.string()), ("source_schema", pa.string()),
                      ("source_table", pa.string()), ("typed_rows", pa.binary()),
                      ("typed_row_count", pa.int32())])


@dataclass
class SourceSettings:
    connector_properties: dict[str, str]
    max_rows_per_batch: int | None
    snapshot_chunk_rows: int
    snapshot_parallelism: int | None
    snapshot_idle_seconds: int = DEFAULT_SNAPSHOT_IDLE_S
    snapshot_delivery: str = "events"
    read_ahead_messages: int | None = None  # None: the feed's default
    value_format: str = "json"
    stream_task_messages: int = DEFAULT_STREAM_TASK_MESSAGES
    headers: bool = True  # False: the headers column stays null (sinks that ignore headers)
    stream_delivery: str = "events"  # rows: streamed row changes as typed Arrow rows (Delta sinks)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> SourceSettings:
        """Spark hands Python data sources their options with lower-cased keys; the connector's
        property names are restored from its field definitions. A property whose key has a
        case-sensitive part of its own (e.g. a hash salt in `column.mask.hash.<alg>.with.salt.<salt>`)
        goes into the `properties` option instead: a JSON object of properties, kept as written."""
        lowered = {str(k).lower(): str(v) for k, v in options.items()}

        def positive(name: str, default: int | None) -> int | None:
            raw = lowered.get(name.lower())
            if raw is None or raw.strip() == "":
                return default
            try:
                value = int(raw.strip())
            except ValueError:
                value = 0
            if value <= 0:
                raise ConfigError([f"headwater source option {name}={raw!r}: expected a positive integer"])
            return value

        def choice(name: str, allowed: tuple[str, ...], expected: str | None = None) -> str:
            """The option's value (case-insensitive), the first allowed one when unset."""
            raw = lowered.get(name.lower(), "")
            value = raw.strip().lower() or allowed[0]
            if value not in allowed:
                raise ConfigError([f"headwater source option {name}={raw!r}: "
                                   f"expected {expected or 'one of ' + ', '.join(allowed)}"])
            return value

        props: dict[str, str] = {}
        if "properties" in lowered:
            try:
                given = json.loads(lowered["properties"])
            except ValueError as exc:
                raise ConfigError([f"headwater source option properties: not a JSON object ({exc})"]) from None
            if not isinstance(given, dict):
                raise ConfigError(["headwater source option properties: expected a JSON object of properties"])
            props.update({str(k): str(v) for k, v in given.items()})
        ignored = {o.lower() for o in (*SOURCE_OPTIONS, "properties", "path")}
        names = _property_names(props.get("connector.class") or lowered.get("connector.class"))
        for key, value in lowered.items():
            if key not in ignored:
                props[_restore_case(key, names)] = value
        props.setdefault("connector.class", default_connector_class())
        idle = positive("snapshotIdleSeconds", DEFAULT_SNAPSHOT_IDLE_S) or DEFAULT_SNAPSHOT_IDLE_S
        delivery = choice("snapshotDelivery", SNAPSHOT_DELIVERIES)
        value_format = choice("valueFormat", VALUE_FORMATS)
        headers = choice("headers", ("true", "false"), "true or false")
        stream_delivery = choice("streamDelivery", SNAPSHOT_DELIVERIES)
        return cls(props, positive("maxRowsPerBatch", None), positive("snapshotChunkRows", 100_000) or 100_000,
                   positive("snapshotParallelism", None), idle, delivery, positive("readAheadMessages", None),
                   value_format, positive("streamTaskMessages", None) or DEFAULT_STREAM_TASK_MESSAGES,
                   headers == "true", stream_delivery)


def _property_names(connector_class: str | None) -> dict[str, str]:
    from headwater.config import connector_fields

    fields = connector_fields(connector_class or default_connector_class())
    names = {name.lower(): name for name in fields.names()}
    for field in fields:
        for old in field.deprecated_names:
            names[old.lower()] = old
    for dynamic in fields.dynamic:
        prefix = getattr(dynamic, "prefix", None)
        if isinstance(prefix, str):
            names.setdefault(prefix.lower(), prefix)
    return names


def _restore_case(key: str, names: dict[str, str]) -> str:
    """The property name as the connector spells it: exact field names, else the longest known
    prefix (dynamic families such as `snapshot.select.statement.overrides.<table>`)."""
    if key in names:
        return names[key]
    for lower, name in sorted(names.items(), key=lambda item: -len(item[0])):
        if key.startswith(lower + ".") or (lower.endswith(".") and key.startswith(lower)):
            return name + key[len(lower):]
    return key


def _open_feed(settings: SourceSettings) -> tuple[CaptureFeed, SerializerSettings]:
    from headwater.standalone import build_connector, serializer_settings

    config = from_properties(settings.connector_properties)
    for warning in config.warnings:
        log.warning("%s", warning)
    connector = build_connector(config)
    feed = CaptureFeed(connector, snapshot_chunk_rows=settings.snapshot_chunk_rows,
                       read_ahead_messages=settings.read_ahead_messages or DEFAULT_READ_AHEAD_MESSAGES)
    return feed, serializer_settings(config, connector)


class WorkPartition(InputPartition):
    """What one task does: decode these work items (in order) with this decoder."""

    def __init__(self, decoder: WorkDecoder, serializer: SerializerSettings, items: list[Any],
                 typed_rows: bool = False, payload_values: bool = False, headers: bool = True,
                 typed_changes: bool = False) -> None:
        super().__init__(None)
        self.decoder = decoder
        self.serializer = serializer
        self.items = items
        self.typed_rows = typed_rows  # snapshotDelivery=rows
        self.payload_values = payload_values  # valueFormat=payload
        self.headers = headers  # headers=false: the column stays null
        self.typed_changes = typed_changes  # streamDelivery=rows


def _record_batches(partition: WorkPartition) -> Iterator[pa.RecordBatch]:
    """Executor side: build, serialize and hand over the records as Arrow batches."""
    import pyarrow as pa

    schema = _arrow_schema()
    serializer = partition.serializer.create(in_place=True)
    # valueFormat=payload: values without their schema; each value schema is sent once per task,
    # in a schema record ahead of its first use (the Delta sink learns the columns from those)
    payloads = (dataclasses.replace(partition.serializer, value_schemas_enable=False).create(in_place=True)
                if partition.payload_values else None)
    schema_text = serializer.value_converter.schema_text
    sent: dict[int, Any] = {}  # id(schema) -> schema (kept alive, so the id stays unique)
    columns: list[list[Any]] = [[] for _ in range(len(schema))]
    topic, key, value, headers, op, position, ts_ms, db, sch, tbl, rows, row_count = columns

    def flush() -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)],
                                           schema=schema)
        for c in columns:
            c.clear()
        return batch

    decoder = partition.decoder
    # streamDelivery=rows: the decoder takes the row changes of tables with typed rows out of the
    # stream (None: the connector has no typed rows)
    changes = decoder.typed_row_changes() if partition.typed_changes else None
    with_headers = partition.headers

    def add(positioned: PositionedRecord) -> None:
        record = positioned.record
        if payloads is not None and record.value_schema is not None and id(record.value_schema) not in sent:
            sent[id(record.value_schema)] = record.value_schema
            # the envelope with its schema whatever value.converter.schemas.enable says
            text = ENVELOPE_START + schema_text(record.value_schema) + b',"payload":null}'
            for column, cell in zip(columns, (record.topic, None, text, [], None, positioned.position,
                                              None, None, None, None, None, None)):
                column.append(cell)
        envelope = record.value if isinstance(record.value, dict) else None
        source = envelope.get("source") if envelope is not None else None
        topic.append(record.topic)
        # UTF-8 bytes and (name, bytes) pairs go to Arrow as they are: pa.array validates
        # UTF-8 for string columns and takes tuples for structs, in C (no str/dict per record)
        key.append(serializer.key(record))
        value.append(serializer.value(record) if payloads is None else payloads.value(record))
        headers.append(serializer.header_pairs(record) if with_headers else None)
        op.append(record.op)
        position.append(positioned.position)
        if isinstance(source, dict):
            ts_ms.append(source.get("ts_ms"))
            db.append(source.get("db"))
            sch.append(source.get("schema") or None)
            tbl.append(source.get("table") or None)
        else:
            ts_ms.append(envelope.get("ts_ms") if envelope is not None else None)
            db.append(None)
            sch.append(None)
            tbl.append(None)
        rows.append(None)
        row_count.append(None)

    def add_typed(outputs: Iterable[TypedRows | PositionedRecord]) -> bool:
        """Typed rows as records, one per batch of rows: the key and value of the table's template
        record (the sink learns the table's schemas from them), the position and time of the first
        row, and the rows as an Arrow IPC stream in `typed_rows`; the events among them (rows the
        decoder built as events after all) as such. True if typed rows were added."""
        from headwater.engine.typed_rows import to_ipc

        added = False
        for out in outputs:
            if isinstance(out, PositionedRecord):
                add(out)
                continue
            record, batch = out.template, out.rows
            source = record.value.get("source") or {}
            for column, cell in zip(columns, (
                    record.topic, serializer.key(record), serializer.value(record),
                    serializer.header_pairs(record) if with_headers else None, out.op, out.position, out.ts_ms,
                    source.get("db"), source.get("schema") or None, source.get("table") or None, to_ipc(batch),
                    batch.num_rows)):
                column.append(cell)
            added = True
        return added

    for item in partition.items:
        typed = decoder.decode_typed_rows(item) if partition.typed_rows else None  # snapshotDelivery=rows
        if typed is not None:
            if add_typed(typed):
                yield flush()  # each record holds a batch of rows: handed over at once
            continue
        records = decoder.decode(item) if changes is None else decoder.decode_changes(item, changes)
        for positioned in records:
            add(positioned)
            if len(topic) >= _ARROW_ROWS:
                yield flush()
        if changes is not None and add_typed(changes.ready()):
            yield flush()
    if changes is not None:
        add_typed(changes.finish())
    if topic:
        yield flush()


def _spark_offset(offset: dict[str, Any]) -> dict[str, Any]:
    """Spark's offset log takes primitive values only: drop the nulls (they read back as absent)."""
    return {k: v for k, v in offset.items() if v is not None}


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings
        self._feed: CaptureFeed | None = None
        self._serializer: SerializerSettings | None = None
        self._available_now = False

    def __getstate__(self) -> dict[str, Any]:  # executors get the settings, never the connections
        return {"settings": self.settings, "_feed": None, "_serializer": None, "_available_now": False}

    def _open(self) -> CaptureFeed:
        if self._feed is None:
            self._feed, self._serializer = _open_feed(self.settings)
        return self._feed

    def initialOffset(self) -> dict:
        return _spark_offset(self._open().initial_offset())

    def getDefaultReadLimit(self) -> ReadLimit:
        rows = self.settings.max_rows_per_batch
        return ReadMaxRows(rows) if rows else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        feed = self._open()
        feed.prepare_available_now()
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return _spark_offset(self._open().latest(start, max_rows))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        feed = self._open()
        items = feed.plan(start, end)
        assert self._serializer is not None
        return _partitions(feed.decoder(), self._serializer, items, self.settings.snapshot_parallelism,
                           typed_rows=self.settings.snapshot_delivery == "rows",
                           payload_values=self.settings.value_format == "payload",
                           task_messages=self.settings.stream_task_messages, headers=self.settings.headers,
                           typed_changes=self.settings.stream_delivery == "rows")

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, WorkPartition)
        return _record_batches(partition)

    def commit(self, end: dict) -> None:
        self._open().commit(end)

    def stop(self) -> None:
        if self._feed is not None:
            self._feed.close()
            self._feed = None


def _all_snapshot(items: list[Any]) -> bool:
    # (a chunk carrying initial-snapshot notifications wraps the connector's unit: engine/snapshot_notification_units)
    return all(type(getattr(item, "inner", item)).__name__ == "SnapshotWork" for item in items)


def _partitions(decoder: WorkDecoder, serializer: SerializerSettings, items: list[Any],
                parallelism: int | None, typed_rows: bool = False, payload_values: bool = False,
                task_messages: int = DEFAULT_STREAM_TASK_MESSAGES, headers: bool = True,
                typed_changes: bool = False) -> list[InputPartition]:
    if parallelism and len(items) > parallelism and _all_snapshot(items):
        groups: list[list[Any]] = [items[i::parallelism] for i in range(parallelism)]
    else:
        groups = _runs(items, task_messages)
    return [WorkPartition(decoder, serializer, group, typed_rows, payload_values, headers, typed_changes)
            for group in groups]


def _runs(items: list[Any], task_messages: int, task_bytes: int = STREAM_TASK_BYTES) -> list[list[Any]]:
    """Consecutive items with a `size` (streamed messages) grouped into tasks of about
    `task_messages` messages and at most about `task_bytes` bytes, in order; any other item (a
    snapshot chunk) is a task of its own. An item larger than a task stays whole."""
    groups: list[list[Any]] = []
    run: list[Any] = []
    count = volume = 0
    for item in items:
        size = getattr(item, "size", None)
        nbytes = getattr(item, "nbytes", 0) if size is not None else 0
        if size is None or (run and (count + size > task_messages or volume + nbytes > task_bytes)):
            if run:
                groups.append(run)
            run, count, volume = [], 0, 0
            if size is None:
                groups.append([item])
                continue
        run.append(item)
        count += size
        volume += nbytes
    if run:
        groups.append(run)
    return groups


class HeadwaterBatchReader(DataSourceReader):
    """``spark.read.format("headwater")``: a one-off consistent extract — the snapshot events
    (``op`` = ``r``) of every captured table, read in chunks by parallel tasks inside one exported
    snapshot. No slot is created and nothing streams; the snapshot is held open by a small
    process on the driver until every chunk is read (or ``snapshotIdleSeconds`` pass without a
    task reading)."""

    def __init__(self, settings: SourceSettings) -> None:
        self.settings = settings

    def partitions(self) -> list[InputPartition]:
        feed, serializer = _open_feed(self.settings)
        try:
            items, decoder = feed.plan_extract(float(self.settings.snapshot_idle_seconds))
        finally:
            feed.close()
        if not items:  # nothing captured: one task that reads nothing
            return [WorkPartition(decoder, serializer, [])]
        return _partitions(decoder, serializer, items, self.settings.snapshot_parallelism,
                           typed_rows=self.settings.snapshot_delivery == "rows",
                           payload_values=self.settings.value_format == "payload", headers=self.settings.headers)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, WorkPartition)
        return _record_batches(partition)


class HeadwaterDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return HeadwaterStreamReader(SourceSettings.from_options(self.options))

    def reader(self, schema: Any) -> DataSourceReader:
        return HeadwaterBatchReader(SourceSettings.from_options(self.options))


def register(spark: SparkSession) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark.dataSource.register(HeadwaterDataSource)


__all__ = ["FORMAT", "SCHEMA", "HeadwaterDataSource", "register"]

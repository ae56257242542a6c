"""The engine's own test double: a connector over an in-memory change log.

Not a stand-in for any database: it is the smallest thing that implements the engine's connector
interface (positions, source block, snapshot source with a chunk dialect, streaming source), so
the coordinator, dispatcher, queue and delivery loop can be driven without one. Positions are
indexes into the log; a log purged up to an index no longer holds the positions before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from headwater.engine.connector import ConnectorError, Emit, RetriableConnectorError, SourceConnector
from headwater.engine.dispatcher import EventDispatcher
from headwater.engine.records import SourceRecord
from headwater.engine.registry import SourceDescription
from headwater.engine.signals.connector import ChunkRow, IncrementalSource, SnapshotTableError
from headwater.engine.snapshot_plan import Bound, SnapshotChunk, snapshot_marker
from headwater.engine.snapshot_policy import Stored
from headwater.engine.source import CaptureSource, Offset, SnapshotPoint, UnitStream
from headwater.model.envelope import COMMON_SOURCE_FIELDS, OP_CREATE, OP_DELETE, OP_READ, OP_UPDATE
from headwater.model.schema import INT64, NO_DEFAULT, OPTIONAL_INT64, OPTIONAL_STRING, STRING, Schema, struct
from headwater.relational.table import Column, Table, TableId
from headwater.relational.table_schema import TableSchema, build_table_schema

SOURCE_SCHEMA = struct("test.memory.Source", [*COMMON_SOURCE_FIELDS, ("table", STRING), ("pos", OPTIONAL_INT64)])


class Settings(dict):
    """Connector properties with the defaults the engine reads."""

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "snapshot.mode": "initial", "snapshot.delay.ms": 0, "table.include.list": None,
        "snapshot.include.collection.list": None, "snapshot.select.statement.overrides": None,
        "tombstones.on.delete": True, "topic.prefix": "mem",
        "snapshot.mode.configuration.based.snapshot.data": False,
        "snapshot.mode.configuration.based.snapshot.on.data.error": False,
        "snapshot.mode.configuration.based.start.stream": True,
        "signal.data.collection": None, "signal.enabled.channels": ["source"], "signal.poll.interval.ms": 100,
        "incremental.snapshot.chunk.size": 1024, "incremental.snapshot.watermarking.strategy": "insert_insert",
        "notification.enabled.channels": [], "notification.sink.topic.name": None,
    }

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key, self.DEFAULTS.get(key, default))

    @property
    def raw(self) -> dict[str, Any]:
        return self

    def is_set(self, key: str) -> bool:
        return key in self


class _Int64Converters:
    """Every column is a 64-bit integer; values are Python ints already (`text` columns: strings,
    for the signal table)."""

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        if column.type_name == "text":
            return OPTIONAL_STRING
        return INT64

    def converter_for(self, table: Table, column: Column, schema: Schema) -> Callable[[Any], Any]:
        if column.type_name == "text":
            return lambda v: v
        return int

    def default_for(self, table: Table, column: Column, schema: Schema) -> Any:
        return NO_DEFAULT

    def fallback_for(self, table: Table, column: Column, schema: Schema) -> Any:
        return 0


@dataclass
class MemoryTable:
    """A table whose key is its first column."""

    collection: str
    table: Table
    raw_columns: tuple[str, ...]
    schema: TableSchema
    topic: str
    rows: dict[Any, tuple[Any, ...]] = field(default_factory=dict)


@dataclass
class Change:
    op: str
    collection: str
    before: tuple[int, ...] | None
    after: tuple[int, ...] | None


class MemoryDatabase:
    def __init__(self, server: str = "mem") -> None:
        self.server = server
        self.tables: dict[str, MemoryTable] = {}
        self.log: list[Change] = []
        self.purged = 0                 # positions before this are gone
        self.acknowledged: list[int] = []
        self.changed = threading.Condition()

    def create(self, name: str, *columns: str, type_name: str = "int8") -> None:
        table = Table(TableId(None, "public", name),
                      tuple(Column(c, i + 1, type_name) for i, c in enumerate(columns)), (columns[0],))
        schema = build_table_schema(table, _Int64Converters(), topic_prefix=self.server, source_schema=SOURCE_SCHEMA)
        self.tables[f"public.{name}"] = MemoryTable(f"public.{name}", table, tuple(columns), schema,
                                                    f"{self.server}.public.{name}")

    def _apply(self, change: Change) -> None:
        with self.changed:
            rows = self.tables[change.collection].rows
            if change.before is not None:
                del rows[change.before[0]]
            if change.after is not None:
                rows[change.after[0]] = change.after
            self.log.append(change)
            self.changed.notify_all()

    def insert(self, name: str, *row: int) -> None:
        self._apply(Change(OP_CREATE, f"public.{name}", None, tuple(row)))

    def update(self, name: str, key: int, *row: int) -> None:
        before = self.tables[f"public.{name}"].rows[key]
        self._apply(Change(OP_UPDATE, f"public.{name}", before, tuple(row)))

    def delete(self, name: str, key: int) -> None:
        self._apply(Change(OP_DELETE, f"public.{name}", self.tables[f"public.{name}"].rows[key], None))

    def delete_where(self, name: str, key: Any) -> None:
        if key in self.tables[f"public.{name}"].rows:
            self.delete(name, key)

    def purge(self) -> None:
        """Drop the log's positions so far (as a database's retention would)."""
        self.purged = len(self.log)


def _source(server: str, table: str, snapshot: str, pos: int | None) -> dict[str, Any]:
    return {"version": "test", "connector": "memory", "name": server, "ts_ms": 0, "snapshot": snapshot,
            "db": "memory", "sequence": None, "ts_us": 0, "ts_ns": 0, "table": table, "pos": pos}


class _Dialect:
    """Planning queries over the snapshot's copy of the rows."""

    def __init__(self, rows: dict[str, dict[int, tuple[int, ...]]]) -> None:
        self.rows = rows

    def count(self, table: Any, select: str | None) -> int:
        return len(self.rows[table.collection])

    def sampled_bounds(self, table: Any, key: Any, rows: int, chunks: int, percent: float) -> list[Bound]:
        return []  # no sampling: the plan falls back to every key

    def exact_bounds(self, table: Any, key: Any, rows: int, size: int) -> list[Bound]:
        keys = sorted(self.rows[table.collection])
        return [(str(k),) for n, k in enumerate(keys, 1) if n % size == 0 and n < rows]

    def block_range(self, table: Any) -> tuple[int, int, int] | None:
        return None


class MemoryCaptureSource(CaptureSource):
    def __init__(self, connector: MemoryConnector) -> None:
        self.connector = connector
        self.db = connector.db
        self.opened = 0

    def open(self) -> None:
        self.opened += 1

    def stored(self, offset: Offset | None, *, in_snapshot: bool = False) -> tuple[Stored, bool]:
        if offset is None:
            return Stored.NOTHING, True
        if not isinstance(offset.get("pos"), int):
            raise ConnectorError(f"stored offset {offset} is invalid")
        held = offset["pos"] >= self.db.purged
        if in_snapshot or (offset.get("snapshot") and not offset.get("snapshot_completed")):
            return Stored.UNFINISHED_SNAPSHOT, held
        return Stored.POSITION, held

    def lost_error(self, offset: Offset, *, resumer: str | None = None,
                   fresh_start: str = "remove the offsets file") -> ConnectorError:
        return ConnectorError(f"the log no longer holds position {offset['pos']} ({resumer or 'stored offset'}); "
                              f"{fresh_start}")

    def sort_key(self, offset: Offset) -> tuple[int]:
        return (offset["pos"],)

    def resume_offset(self, offset: Offset | None) -> Offset:
        return offset if offset is not None else {"pos": len(self.db.log)}

    def open_snapshot(self, offset: Offset | None, resnapshot: bool) -> SnapshotPoint:
        with self.db.changed:
            rows = {name: dict(t.rows) for name, t in self.db.tables.items()}
            pos = len(self.db.log)
        return SnapshotPoint(rows, {"pos": pos, "snapshot": True})

    def snapshot_tables(self, point: SnapshotPoint) -> list[Any]:
        signal = self.connector.config.get("signal.data.collection")
        return [t for t in self.db.tables.values() if t.collection != signal]

    def chunk_dialect(self, point: SnapshotPoint) -> _Dialect:
        return _Dialect(point.handle)

    def read_chunk(self, point: SnapshotPoint, chunk: SnapshotChunk, emit: Callable[[Any], None],
                   stop: threading.Event) -> None:
        table = self.db.tables[chunk.collection]
        if chunk.select is not None:  # "WHERE <python expression over the columns>" stands for a SELECT
            condition = chunk.select.split("WHERE", 1)[1]
            keep = {k for k, row in point.handle[chunk.collection].items()
                    if _holds(condition, table.raw_columns, row)}
            point = SnapshotPoint({**point.handle, chunk.collection: {k: point.handle[chunk.collection][k]
                                                                      for k in keep}}, point.offset)
        keys = sorted(k for k in point.handle[chunk.collection]
                      if (chunk.lower is None or k > int(chunk.lower[0]))
                      and (chunk.upper is None or k <= int(chunk.upper[0])))
        dispatcher = self.connector.dispatcher(emit, lambda: point.offset)
        for n, key in enumerate(keys):
            marker = snapshot_marker(chunk.first_chunk and n == 0, chunk.last_chunk and n == len(keys) - 1,
                                     chunk.first_table, chunk.last_table)
            row = table.schema.row(point.handle[chunk.collection][key])
            dispatcher.dispatch_change(table.schema, table.topic, OP_READ, None, row,
                                       _source(self.db.server, table.table.id.table, marker, None),
                                       collection=chunk.collection)
        time.sleep(self.connector.read_delay)

    def snapshot_unit(self, point: SnapshotPoint, chunk: SnapshotChunk) -> Any:
        return point, chunk

    def close_snapshot(self, point: SnapshotPoint | None = None) -> None:
        pass

    def completed_offset(self, snapshot_offset: Offset) -> Offset:
        return {"pos": snapshot_offset["pos"], "snapshot_completed": True}

    def stream(self, start: Offset, emit: Emit, stop: threading.Event) -> None:
        pos = start["pos"]
        if pos < self.db.purged:
            raise self.lost_error(start)
        while not stop.is_set():
            with self.db.changed:
                if pos >= len(self.db.log):
                    self.db.changed.wait(0.05)
                    continue
                change = self.db.log[pos]
            if self.connector.fail_at == pos:
                if not self.connector.fail_always:
                    self.connector.fail_at = None
                raise RetriableConnectorError(f"connection lost at position {pos}")
            pos += 1
            table = self.db.tables[change.collection]
            schema = table.schema
            records: list[Any] = []
            dispatcher = self.connector.dispatcher(records.append, lambda p=pos: {"pos": p})
            before = schema.row(change.before) if change.before is not None else None
            after = schema.row(change.after) if change.after is not None else None
            dispatcher.dispatch_change(schema, table.topic, change.op, before, after,
                                       _source(self.db.server, table.table.id.table, "false", pos - 1),
                                       collection=change.collection)
            if not records:
                dispatcher.dispatch_offset({"pos": pos})
            emit(records)

    def incremental_source(self) -> MemoryIncrementalSource | None:
        if self.connector.config.get("signal.data.collection") is None:
            return None
        return MemoryIncrementalSource(self)

    def stream_units(self, start: Offset, read_ahead: int) -> UnitStream:
        raise ConnectorError("the memory connector has no parallel streaming")

    def current_position(self) -> int:
        return len(self.db.log)

    def acknowledge(self, offset: Offset) -> None:
        self.db.acknowledged.append(offset["pos"])

    def close(self) -> None:
        pass


class MemoryConnector(SourceConnector):
    connector_name = "memory"
    description = SourceDescription("memory", ())

    def __init__(self, db: MemoryDatabase, **properties: Any) -> None:
        self.db = db
        self.config = Settings(properties)
        self.fail_at: int | None = None  # a retriable failure when streaming reaches this position
        self.fail_always = False         # ... at every run, not only the first
        self.chunk_delay = 0.0           # seconds an incremental-snapshot chunk takes to read
        self.read_delay = 0.0            # seconds an initial or blocking snapshot's chunk takes after its rows
        self.sources: list[MemoryCaptureSource] = []

    def partition(self) -> dict[str, Any]:
        return {"server": self.db.server}

    def validate(self) -> None:
        pass

    def capture_source(self, *, parallel: bool) -> MemoryCaptureSource:
        source = MemoryCaptureSource(self)
        self.sources.append(source)
        return source

    def dispatcher(self, emit: Callable[[Any], None], next_offset: Callable[[], dict[str, Any]]) -> EventDispatcher:
        return EventDispatcher(emit=emit, next_offset=next_offset,
                               tombstones_on_delete=self.config.get("tombstones.on.delete"),
                               skipped_operations=frozenset())


def _holds(condition: str | None, columns: tuple[str, ...], row: tuple[Any, ...]) -> bool:
    """A condition of this test double: a Python expression over the row's columns."""
    return condition is None or bool(eval(condition, {}, dict(zip(columns, row, strict=True))))


class MemoryIncrementalSource(IncrementalSource):
    """Incremental and blocking snapshots over the memory database; the signal table is a table of
    text columns (id, type, data) written through the log like any other."""

    def __init__(self, capture: MemoryCaptureSource) -> None:
        self.capture = capture
        self.db = capture.db
        self.signal = capture.connector.config.get("signal.data.collection")
        self.chunks_read = 0

    def captured_tables(self) -> list[str]:
        return [c for c in self.db.tables if c != self.signal]

    def _table(self, collection: str) -> MemoryTable:
        table = self.db.tables.get(collection)
        if table is None:
            raise SnapshotTableError(f"table {collection} does not exist", "UNKNOWN_SCHEMA")
        return table

    def chunk_columns(self, collection: str, surrogate_key: str | None) -> list[str]:
        table = self._table(collection)
        if surrogate_key is not None:
            if surrogate_key not in table.raw_columns:
                raise SnapshotTableError(f"{collection} has no column {surrogate_key}", "SQL_EXCEPTION")
            return [surrogate_key]
        return [table.raw_columns[0]]

    def _rows(self, collection: str, columns: Sequence[str],
              condition: str | None) -> list[tuple[tuple[Any, ...], Any]]:
        table = self._table(collection)
        index = [table.raw_columns.index(c) for c in columns]
        with self.db.changed:
            rows = list(table.rows.values())
        return sorted(((tuple(r[i] for i in index), r) for r in rows if _holds(condition, table.raw_columns, r)),
                      key=lambda kr: kr[0])

    def maximum_key(self, collection: str, columns: Sequence[str], condition: str | None) -> tuple[Any, ...] | None:
        rows = self._rows(collection, columns, condition)
        return rows[-1][0] if rows else None

    def read_chunk(self, collection: str, columns: Sequence[str], after: tuple[Any, ...] | None,
                   maximum: tuple[Any, ...], limit: int, condition: str | None) -> list[ChunkRow]:
        self.chunks_read += 1
        time.sleep(self.capture.connector.chunk_delay)
        schema = self._table(collection).schema
        out = []
        for key, row in self._rows(collection, columns, condition):
            if (after is None or key > after) and key <= maximum:
                out.append(ChunkRow(schema.key(schema.row(row)), key, row))
                if len(out) == limit:
                    break
        return out

    def read_events(self, collection: str, rows: Sequence[ChunkRow], offset: Offset) -> list[SourceRecord]:
        table = self._table(collection)
        records: list[Any] = []
        dispatcher = self.capture.connector.dispatcher(records.append, lambda: offset)
        for row in rows:
            dispatcher.dispatch_change(table.schema, table.topic, OP_READ, None, table.schema.row(row.row),
                                       _source(self.db.server, table.table.id.table, "incremental", None),
                                       collection=collection)
        return records

    def insert_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        self.db.insert(self.signal.split(".", 1)[1], signal_id, signal_type, data)

    def delete_signal(self, signal_id: str) -> None:
        self.db.delete_where(self.signal.split(".", 1)[1], signal_id)

    def open_blocking_snapshot(self, position: Offset) -> SnapshotPoint:
        return self.capture.open_snapshot(None, False)

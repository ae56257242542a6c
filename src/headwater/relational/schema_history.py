"""Debezium's schema history (``schema.history.internal``) for connectors that keep one.

A connector that cannot read a table's structure as of an arbitrary past position (SQL Server,
Db2, Informix: the catalog only shows the present) records every table structure it emits
events with, at the position where it starts to apply, and on restart rebuilds the structures in
force at the stored offset from these records.

The records are Debezium's ``HistoryRecord`` documents, one JSON document per line in
Debezium's order: ``{"source": <partition>, "position": <offset>, "ts_ms", "databaseName",
"schemaName", "ddl", "tableChanges": [...]}`` (null fields left out, as Debezium does), so a
history file written by Debezium's ``FileSchemaHistory`` is read here and vice versa.

Recovery (``AbstractSchemaHistory.recover``): a record is applied when its ``source`` equals the
partition of a stored offset and the connector's comparator says its position is at or before
that offset's position; records are applied in the order they were written. Connectors without a
DDL parser rebuild tables from ``tableChanges`` only. A record carrying a DDL statement but no
table changes cannot be applied by them: Debezium skips it without a word; here it is an error
naming the record, unless ``schema.history.internal.skip.unparseable.ddl=true``, which skips it
with a warning (the option's meaning: go on when a stored statement cannot be applied).

Durability (``FileSchemaHistory``): each record is appended as one ``write`` of the line and its
newline to a file opened with ``O_APPEND`` and fsynced (``buffering()`` defers the fsync to the
end of a run of records, as Debezium buffers the snapshot's records). A crash can therefore leave
at most the last line incomplete. Debezium would fail to parse such a line; here, on start, a
last line without its newline that is not a complete JSON document is reported (warning) and
cut off. That is safe because a connector records a schema change before it emits or commits
anything after it: the offset stored before the crash lies before the lost record, so the
connector derives the same change again after the restart. A malformed line anywhere else is
corruption and stops the connector (``SchemaHistoryError`` with the line number).

The ``store.only.captured.tables.ddl`` / ``store.only.captured.databases.ddl`` options decide which
tables get schema change events at all (history and schema-change topic alike): see
``HistoryScope``.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from headwater.relational.schema_change import TableChange
from headwater.relational.table import Column, Table, TableId

log = logging.getLogger(__name__)

FILE_SCHEMA_HISTORY = "io.debezium.storage.file.history.FileSchemaHistory"
MEMORY_SCHEMA_HISTORY = "io.debezium.relational.history.MemorySchemaHistory"
KAFKA_SCHEMA_HISTORY = "io.debezium.storage.kafka.history.KafkaSchemaHistory"

PositionPredicate = Callable[[Mapping[str, Any]], bool]


class SchemaHistoryError(RuntimeError):
    """The schema history cannot be read, written or applied."""


# --- records ------------------------------------------------------------------------------------

def _jsonable_position(position: Mapping[str, Any]) -> dict[str, Any]:
    # HistoryRecord stores byte[] position values with setBinary, which Jackson writes as base64
    return {k: base64.b64encode(v).decode("ascii") if isinstance(v, (bytes, bytearray)) else v
            for k, v in position.items()}


@dataclass(frozen=True)
class HistoryRecord:
    """One ``HistoryRecord`` document. ``table_changes`` holds the items as written (history
    rendering); ``changes()`` parses them."""

    source: dict[str, Any] | None
    position: dict[str, Any] | None
    ts_ms: int | None = None
    database_name: str | None = None
    schema_name: str | None = None
    ddl: str | None = None
    table_changes: tuple[dict[str, Any], ...] | None = None

    @classmethod
    def create(cls, source: Mapping[str, Any], position: Mapping[str, Any], *, database_name: str | None,
               schema_name: str | None, ddl: str | None, changes: Sequence[TableChange] | None,
               ts_ms: int | None) -> HistoryRecord:
        return cls(dict(source), _jsonable_position(position), ts_ms, database_name, schema_name, ddl,
                   None if changes is None else tuple(c.to_json() for c in changes))

    def document(self) -> dict[str, Any]:
        """The JSON document, keys in HistoryRecord's order, null fields left out."""
        d: dict[str, Any] = {"source": self.source or {}, "position": self.position or {}}
        if self.ts_ms is not None:
            d["ts_ms"] = self.ts_ms
        if self.database_name is not None:
            d["databaseName"] = self.database_name
        if self.schema_name is not None:
            d["schemaName"] = self.schema_name
        if self.ddl is not None:
            d["ddl"] = self.ddl
        if self.table_changes is not None:
            d["tableChanges"] = list(self.table_changes)
        return d

    def line(self) -> bytes:
        """The document as one line of Debezium's history file (compact JSON, no newline)."""
        return orjson.dumps(self.document())

    @classmethod
    def from_document(cls, d: Mapping[str, Any]) -> HistoryRecord:
        changes = d.get("tableChanges")
        source, position = d.get("source"), d.get("position")
        return cls(
            dict(source) if isinstance(source, Mapping) else None,
            dict(position) if isinstance(position, Mapping) else None,
            d.get("ts_ms"), d.get("databaseName"), d.get("schemaName"), d.get("ddl"),
            tuple(changes) if isinstance(changes, list) else None,
        )

    @property
    def valid(self) -> bool:
        """HistoryRecord.isValid: both source and position present."""
        return self.source is not None and self.position is not None

    def changes(self, *, use_catalog_before_schema: bool = False) -> list[TableChange]:
        return [TableChange.from_json(c, use_catalog_before_schema=use_catalog_before_schema)
                for c in self.table_changes or ()]


@dataclass(frozen=True)
class StopPoint:
    """Where recovery stops for one partition: records of ``source`` whose position satisfies
    ``at_or_before`` (the connector's HistoryRecordComparator against the stored offset) apply."""

    source: Mapping[str, Any]
    at_or_before: PositionPredicate


# --- the histories --------------------------------------------------------------------------------

class SchemaHistory:
    """AbstractSchemaHistory: record, recover; storage specifics in subclasses."""

    name = "schema history"

    def __init__(self, *, skip_unparseable_ddl: bool = False) -> None:
        self.skip_unparseable_ddl = skip_unparseable_ddl
        self._lock = threading.RLock()
        self._running = False

    # storage -----------------------------------------------------------------------------
    def storage_exists(self) -> bool:
        raise NotImplementedError

    def initialize_storage(self) -> None:
        """Create the storage (idempotent)."""

    def exists(self) -> bool:
        """Whether the history holds anything (Debezium: a connector with offsets but no history
        cannot recover its tables)."""
        raise NotImplementedError

    def start(self) -> None:
        with self._lock:
            if not self._running:
                if not self.storage_exists():
                    self.initialize_storage()
                self._load()
                self._running = True

    def stop(self) -> None:
        with self._lock:
            self._running = False

    def _load(self) -> None:
        """Read what the storage holds (at start)."""

    def _store(self, record: HistoryRecord) -> None:
        raise NotImplementedError

    def records(self) -> list[HistoryRecord]:
        """Every record, in the order written."""
        raise NotImplementedError

    @contextlib.contextmanager
    def buffering(self) -> Iterator[None]:
        """Records written inside are made durable together at the end (Debezium's
        startBuffering/stopBuffering around the snapshot's schema records)."""
        yield

    # record / recover ---------------------------------------------------------------------
    def record(self, source: Mapping[str, Any], position: Mapping[str, Any], *, database_name: str | None,
               schema_name: str | None, ddl: str | None, changes: Sequence[TableChange] | None,
               ts_ms: int | None) -> HistoryRecord:
        """Store one schema change (AbstractSchemaHistory.record): ``source`` is the partition,
        ``position`` the offset at the change."""
        record = HistoryRecord.create(source, position, database_name=database_name, schema_name=schema_name,
                                      ddl=ddl, changes=changes, ts_ms=ts_ms)
        with self._lock:
            if not self._running:
                raise SchemaHistoryError(f"the {self} has been stopped and accepts no more records")
            self._store(record)
        return record

    def recover(self, stop_points: Iterable[StopPoint]) -> list[HistoryRecord]:
        """The records to apply, in order, to rebuild the tables as of the given offsets. Records
        of other partitions, past their stop point, or without source/position are left out."""
        stops = list(stop_points)
        out: list[HistoryRecord] = []
        for number, record in enumerate(self.records(), 1):
            if not record.valid:
                log.warning("%s: record %d has no source or position; skipped", self, number)
                continue
            stop = next((s for s in stops if dict(s.source) == record.source), None)
            if stop is None or not stop.at_or_before(record.position or {}):
                continue
            if record.table_changes:
                out.append(record)
            elif record.ddl is not None:
                message = (f"{self}: record {number} (position {record.position}) holds the DDL statement "
                           f"{record.ddl!r} without table changes, and this connector does not parse DDL")
                if not self.skip_unparseable_ddl:
                    raise SchemaHistoryError(message + "; set schema.history.internal.skip.unparseable.ddl=true "
                                             "to skip such records (tables they changed may then be wrong)")
                log.warning("%s; skipped (schema.history.internal.skip.unparseable.ddl=true)", message)
        return out


class MemorySchemaHistory(SchemaHistory):
    """io.debezium.relational.history.MemorySchemaHistory: lost when the process ends."""

    name = "memory schema history"

    def __init__(self, *, skip_unparseable_ddl: bool = False) -> None:
        super().__init__(skip_unparseable_ddl=skip_unparseable_ddl)
        self._records: list[HistoryRecord] = []

    def storage_exists(self) -> bool:
        return True

    def exists(self) -> bool:
        return bool(self._records)

    def _store(self, record: HistoryRecord) -> None:
        self._records.append(record)

    def records(self) -> list[HistoryRecord]:
        with self._lock:
            return list(self._records)

    def __str__(self) -> str:
        return "memory schema history"


class FileSchemaHistory(SchemaHistory):
    """io.debezium.storage.file.history.FileSchemaHistory (``schema.history.internal.file.filename``)."""

    def __init__(self, path: str | os.PathLike[str], *, skip_unparseable_ddl: bool = False,
                 fsync: bool = True) -> None:
        super().__init__(skip_unparseable_ddl=skip_unparseable_ddl)
        self.path = Path(path)
        self.fsync = fsync
        self._records: list[HistoryRecord] = []
        self._fd: int | None = None
        self._needs_newline = False  # the file ends in a complete record without its newline
        self._buffering = 0
        self._dirty = False

    def __str__(self) -> str:
        return f"schema history file {self.path}"

    def storage_exists(self) -> bool:
        return self.path.exists()

    def exists(self) -> bool:
        # FileSchemaHistory.exists: the file is there and not empty
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def initialize_storage(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
            os.close(fd)
            if self.fsync:
                _fsync_dir(self.path.parent)
        except OSError as e:
            raise SchemaHistoryError(f"cannot create the schema history file {self.path}: {e}") from e

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except OSError as e:
            raise SchemaHistoryError(f"cannot read the schema history file {self.path}: {e}") from e
        records: list[HistoryRecord] = []
        lines = data.split(b"\n")
        last = len(lines) - 1  # lines[last] is what follows the final newline ("" when the file ends in one)
        keep = len(data)
        self._needs_newline = False
        offset = 0
        for number, raw in enumerate(lines, 1):
            start, offset = offset, offset + len(raw) + 1
            if not raw.strip():
                continue
            try:
                document = orjson.loads(raw)
                if not isinstance(document, dict):
                    raise ValueError("not a JSON object")
            except (orjson.JSONDecodeError, ValueError) as e:
                if number - 1 == last:
                    log.warning("%s: the last line (%d bytes at offset %d) is incomplete, left by an interrupted "
                                "write; it is removed (the change it recorded comes again from the stored offset)",
                                self, len(raw), start)
                    keep = start
                    break
                raise SchemaHistoryError(f"{self}: line {number} is not a history record ({e}); the file is "
                                         f"damaged") from e
            records.append(HistoryRecord.from_document(document))
            if number - 1 == last:
                self._needs_newline = True
        if keep < len(data):
            try:
                os.truncate(self.path, keep)
            except OSError as e:
                raise SchemaHistoryError(f"cannot remove the incomplete last line of {self.path}: {e}") from e
        self._records = records
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            raise SchemaHistoryError(f"cannot open the schema history file {self.path} for appending: {e}") from e

    def stop(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            super().stop()

    def _store(self, record: HistoryRecord) -> None:
        assert self._fd is not None
        line = record.line() + b"\n"
        if self._needs_newline:
            line = b"\n" + line
        try:
            # one write(2) to an O_APPEND file: the line lands whole at the end, or (killed or out
            # of space) partly, which _load detects on the next start
            written = os.write(self._fd, line)
            while written < len(line):
                written += os.write(self._fd, line[written:])
            if self.fsync:
                if self._buffering:
                    self._dirty = True
                else:
                    os.fsync(self._fd)
        except OSError as e:
            raise SchemaHistoryError(f"cannot append to the schema history file {self.path}: {e}") from e
        self._needs_newline = False
        self._records.append(record)

    @contextlib.contextmanager
    def buffering(self) -> Iterator[None]:
        with self._lock:
            self._buffering += 1
        try:
            yield
        finally:
            with self._lock:
                self._buffering -= 1
                if not self._buffering and self._dirty and self._fd is not None:
                    self._dirty = False
                    try:
                        os.fsync(self._fd)
                    except OSError as e:
                        raise SchemaHistoryError(f"cannot flush the schema history file {self.path}: {e}") from e

    def records(self) -> list[HistoryRecord]:
        with self._lock:
            if not self._running:
                raise SchemaHistoryError(f"the {self} is not started")
            return list(self._records)


def create_schema_history(implementation: str, *, file_filename: str | None = None,
                          skip_unparseable_ddl: bool = False) -> SchemaHistory:
    """The history ``schema.history.internal`` names (validated configuration expected; the
    errors here are the last line of defence)."""
    if implementation == FILE_SCHEMA_HISTORY:
        if not file_filename:
            raise SchemaHistoryError(f"schema.history.internal={FILE_SCHEMA_HISTORY} needs "
                                     "schema.history.internal.file.filename (the history file's path)")
        return FileSchemaHistory(file_filename, skip_unparseable_ddl=skip_unparseable_ddl)
    if implementation == MEMORY_SCHEMA_HISTORY:
        return MemorySchemaHistory(skip_unparseable_ddl=skip_unparseable_ddl)
    if implementation == KAFKA_SCHEMA_HISTORY:
        raise SchemaHistoryError(
            f"schema.history.internal={KAFKA_SCHEMA_HISTORY} is not supported: Headwater's connectors run "
            f"no Kafka client; use {FILE_SCHEMA_HISTORY} with schema.history.internal.file.filename")
    raise SchemaHistoryError(f"schema.history.internal={implementation!r} is not supported; use "
                             f"{FILE_SCHEMA_HISTORY} or {MEMORY_SCHEMA_HISTORY}")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- what gets recorded ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HistoryScope:
    """Which tables get schema change events — stored in the history and sent to the
    schema-change topic — for ``schema.history.internal.store.only.captured.tables.ddl`` and
    ``.store.only.captured.databases.ddl`` (RelationalTableFilters.eligibleForSchemaDataCollectionFilter,
    EventDispatcher.dispatchSchemaChangeEvent, HistorizedRelationalDatabaseSchema.skipSchemaChangeEvent).

    The connector answers for each table: ``captured`` (table include/exclude lists),
    ``in_captured_schema`` (database/schema include/exclude lists), ``builtin`` (a system table
    left out by ``table.ignore.builtin``)."""

    store_only_captured_tables: bool = False
    store_only_captured_databases: bool = False
    ignore_builtin: bool = True

    def snapshot_includes(self, *, captured: bool, in_captured_schema: bool, builtin: bool) -> bool:
        """Whether the snapshot records the table's structure (a CREATE event): only captured
        tables, only the tables of captured databases/schemas, or every table (the default)."""
        if builtin and self.ignore_builtin:
            return False
        if self.store_only_captured_tables:
            return captured
        if self.store_only_captured_databases:
            return in_captured_schema
        return True

    def streaming_includes(self, *, captured: bool, in_captured_schema: bool) -> bool:
        """Whether a schema change met while streaming is recorded: a change of a table outside
        the filters only when not restricted to captured tables, and, with
        ``store.only.captured.databases.ddl``, only within captured schemas."""
        if not captured and self.store_only_captured_tables:
            return False
        return not (self.store_only_captured_databases and not in_captured_schema)


# --- rebuilding tables ----------------------------------------------------------------------------

ColumnFromDescription = Callable[[Mapping[str, Any]], Column]


def table_from_change(change: TableChange, column_from_description: ColumnFromDescription) -> Table:
    """The relational table a CREATE/ALTER change describes; columns built by the connector from
    their history rendering (it knows what its type names mean)."""
    # in the order written: Debezium numbers positions 1..n in the table's column order
    columns = tuple(column_from_description(c.to_json()) for c in change.columns)
    return Table(change.id, columns, tuple(change.primary_key))


def apply_records(records: Iterable[HistoryRecord], column_from_description: ColumnFromDescription,
                  tables: dict[TableId, Table] | None = None, *,
                  use_catalog_before_schema: bool = False) -> dict[TableId, Table]:
    """Apply the table changes of ``records`` in order (AbstractSchemaHistory.recover): CREATE and
    ALTER overwrite the table (an ALTER with a previous id removes that one), DROP removes it."""
    tables = {} if tables is None else tables
    for record in records:
        for change in record.changes(use_catalog_before_schema=use_catalog_before_schema):
            if change.type == "DROP":
                tables.pop(change.id, None)
                continue
            if change.previous_id is not None:
                tables.pop(change.previous_id, None)
            tables[change.id] = table_from_change(change, column_from_description)
    return tables


def recover_tables(history: SchemaHistory, stop_points: Iterable[StopPoint],
                   column_from_description: ColumnFromDescription, *,
                   use_catalog_before_schema: bool = False) -> dict[TableId, Table]:
    """The tables in force at the stored offsets, rebuilt from the history."""
    return apply_records(history.recover(stop_points), column_from_description,
                         use_catalog_before_schema=use_catalog_before_schema)


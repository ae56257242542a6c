"""SQL Server's side of incremental and blocking snapshots (Debezium 3.6's
SignalBasedIncrementalSnapshotChangeEventSource over SqlServerConnection, the default chunk query
builder and SqlServerIncrementalSnapshotContext); the engine runs the algorithm
(headwater.engine.signals).

Data collections are `db.schema.table` (MS-49); the signal table `signal.data.collection` is one of
them, in a database of `database.names`. Chunks are read with Debezium's statements
(`SELECT TOP <n> <projection> FROM [db].[schema].[table] WHERE <bounds> AND <filter> ORDER BY
<key>[ OPTION(RECOMPILE)]`), on this module's own connections (one per database, never the
streaming one), with the table as the stream knows it (its capture instance's columns), so a read
event equals the stream's and the initial snapshot's events but for its source block. Debezium's
projection is `*` (or the filtered columns' names); a table with a column the driver cannot read
exactly as itself (the temporal and CLR types, which the initial snapshot reads by an expression:
types.select_expression) is read with those expressions instead, and its chunk keys are kept as that
text, which SQL Server converts back to the column's type when it compares.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.history import TableEntry, data_collection
from headwater.connectors.sqlserver.source_info import DatabaseOffset, source_block
from headwater.engine.connector import ConnectorError
from headwater.engine.records import SourceRecord
from headwater.engine.signals.connector import ChunkRow, IncrementalSource, SnapshotTableError
from headwater.engine.source import SnapshotPoint
from headwater.model.envelope import OP_READ
from headwater.relational.table import Column, TableId

if TYPE_CHECKING:
    from headwater.connectors.sqlserver.capture import SqlServerCaptureSource

log = logging.getLogger(__name__)

# Debezium's TableScanCompletionStatus values a table can end with here
UNKNOWN_SCHEMA, NO_PRIMARY_KEY, SQL_EXCEPTION = "UNKNOWN_SCHEMA", "NO_PRIMARY_KEY", "SQL_EXCEPTION"

_PART = re.compile(r'\[((?:[^\]]|\]\])*)\]|"((?:[^"]|"")*)"|([^.\[\]"]+)')


def parse_collection(name: str) -> TableId:
    """`db.schema.table` (each part optionally in [brackets] or "quotes") -> TableId, as Debezium's
    TableId.parse with SqlServerTableIdPredicates reads `signal.data.collection`."""
    parts: list[str] = []
    pos = 0
    text = name.strip()
    while pos <= len(text):
        m = _PART.match(text, pos)
        if m is None:
            raise ValueError(f"{name!r} is not a table name of the form databaseName.schemaName.tableName")
        bracket, dquote, plain = m.groups()
        parts.append(bracket.replace("]]", "]") if bracket is not None else
                     dquote.replace('""', '"') if dquote is not None else plain.strip())
        pos = m.end()
        if pos == len(text):
            break
        if text[pos] != ".":
            raise ValueError(f"{name!r} is not a table name of the form databaseName.schemaName.tableName")
        pos += 1
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"{name!r} is not a table name of the form databaseName.schemaName.tableName (SQL Server "
                         "names the database too)")
    return TableId(parts[0], parts[1], parts[2])


def signal_table(config: Any) -> TableId | None:
    """The table `signal.data.collection` names (None: no signal table). Debezium 3.6 accepts one
    signal table per database (a comma-separated list); Headwater's signaling stage reads one, so
    a list is refused here."""
    name = str(config.get("signal.data.collection") or "").strip()
    if not name:
        return None
    if "," in name:
        raise ConnectorError(f"signal.data.collection={name}: several signal tables (one per database) are not "
                             "supported by Headwater's SQL Server connector; name one table "
                             "(databaseName.schemaName.tableName) in one of the databases of database.names")
    try:
        return parse_collection(name)
    except ValueError as exc:
        raise ConnectorError(f"signal.data.collection: {exc}") from None


def same_table(a: TableId, b: TableId) -> bool:
    """SQL Server's names compare without case (its default collations)."""
    return (a.catalog or "").lower() == (b.catalog or "").lower() and \
        (a.schema or "").lower() == (b.schema or "").lower() and a.table.lower() == b.table.lower()


@dataclass(frozen=True)
class SignalTableFilter:
    """The connector's table filter plus the signal table: Debezium's RelationalTableFilters
    captures `signal.data.collection` whatever the include/exclude lists say, so its rows (signals
    and watermarks) come through the stream. Picklable, like the filter it wraps."""

    inner: Any
    signal: TableId

    def __call__(self, table_id: TableId) -> bool:
        if same_table(table_id, self.signal):
            return True
        return bool(self.inner(table_id))

    def schema_included(self, schema: str | None) -> bool:
        return bool(self.inner.schema_included(schema))


@dataclass(frozen=True)
class MsChunkRow:
    """What a ChunkRow's `row` holds: the table's entry it was read with and the converted value."""

    entry: TableEntry
    value: dict[str, Any]


class SqlServerIncrementalSource(IncrementalSource):
    def __init__(self, capture: SqlServerCaptureSource) -> None:
        self.capture = capture
        self.connector = capture.connector
        self.config = capture.config
        self.signal = signal_table(self.config)
        self.recompile = bool(self.config.get("incremental.snapshot.option.recompile"))
        self._conns: dict[str, SqlServerConnection] = {}
        self._databases: dict[str, str] | None = None   # lower-case name -> the server's spelling

    # -- connections -------------------------------------------------------------------------

    def _database_names(self) -> dict[str, str]:
        if self._databases is None:
            if self.capture.databases:
                names = list(self.capture.databases)
            else:  # `headwater signal --channel source`: the capture source is not open
                from headwater.connectors.sqlserver.metadata import real_database_name

                names = []
                for configured in self.connector.database_names:
                    conn = self._conn_for(configured)
                    names.append(real_database_name(conn, configured))
                    conn.rollback()
            self._databases = {n.lower(): n for n in names}
        return self._databases

    def _conn_for(self, database: str) -> SqlServerConnection:
        conn = self._conns.get(database.lower())
        if conn is None or conn.closed:
            conn = self._conns[database.lower()] = SqlServerConnection(self.config, database,
                                                                        purpose="headwater-incremental")
        return conn

    def _conn(self, database: str) -> SqlServerConnection:
        return self._conn_for(self._database_names().get(database.lower(), database))

    def close(self) -> None:
        conns = list(self._conns.values())
        self._conns.clear()
        for conn in conns:
            conn.close()

    def _end(self, conn: SqlServerConnection) -> None:
        """Ends the read transaction (a failure here loses nothing: the connection is dropped)."""
        try:
            conn.rollback()
        except ConnectorError:
            conn.close()

    # -- tables ------------------------------------------------------------------------------

    def _is_signal(self, table_id: TableId) -> bool:
        return self.signal is not None and same_table(table_id, self.signal)

    def _entries(self) -> dict[str, TableEntry]:
        schema = self.capture.schema
        if schema is None:
            raise ConnectorError("the SQL Server capture source is not open: incremental snapshots run while it "
                                 "streams")
        filt = self.connector.table_filter
        inner = filt.inner if isinstance(filt, SignalTableFilter) else filt
        databases = {d.lower() for d in self.capture.databases}
        out = {}
        for table_id in sorted(schema.tables, key=lambda t: t.sort_key()):
            entry = schema.tables[table_id]
            if (table_id.catalog or "").lower() in databases and inner(table_id) and not self._is_signal(table_id):
                out[entry.collection] = entry
        return out

    def captured_tables(self) -> list[str]:
        return list(self._entries())

    def collection_id(self, name: str) -> str:
        """The captured table's id as its records carry it, for a name in [brackets] or "quotes",
        or in another case (SQL Server resolves names without case)."""
        try:
            wanted = parse_collection(name)
        except ValueError:
            return name
        for collection, entry in self._entries().items():
            if same_table(entry.table.id, wanted):
                return collection
        return name

    def _entry(self, collection: str) -> TableEntry:
        entries = self._entries()
        entry = entries.get(collection)
        if entry is None:  # SQL Server's names compare without case
            entry = next((e for c, e in entries.items() if c.lower() == collection.lower()), None)
        if entry is None:
            raise SnapshotTableError(f"Schema not found for table '{collection}' (it is not captured, or does not "
                                     "exist)", UNKNOWN_SCHEMA)
        return entry

    def chunk_columns(self, collection: str, surrogate_key: str | None) -> list[str]:
        table = self._entry(collection).table
        if surrogate_key:
            if table.column(surrogate_key) is None:
                # Debezium: IllegalArgumentException "Surrogate key ... doesn't exist in table"
                raise SnapshotTableError(f'Surrogate key "{surrogate_key}" doesn\'t exist in table '
                                         f'"{data_collection(table.id)}"', UNKNOWN_SCHEMA)
            return [surrogate_key]
        # Debezium's KeyMapper: message.key.columns when it names columns of the table, else the key
        mapper = self.connector.key_columns
        mapped = mapper.key_columns(table.id, [c.name for c in table.columns]) if mapper is not None else None
        columns = list(mapped) if mapped else list(table.primary_key)
        if not columns:
            raise SnapshotTableError(f"Incremental snapshot for table '{data_collection(table.id)}' skipped because "
                                     "the table has no primary keys", NO_PRIMARY_KEY)
        return columns

    # -- queries -----------------------------------------------------------------------------

    def _projection(self, entry: TableEntry, key: Sequence[str]) -> tuple[str, list[Column] | None]:
        """(Debezium's projection, the columns it selects in order — None for `*`, whose columns
        are matched by name)."""
        from headwater.connectors.sqlserver.types import select_expression

        table = entry.table
        filtered = bool(self.config.get("column.include.list") or self.config.get("column.exclude.list"))
        plain = all(select_expression(c) == quote(c.name) for c in table.columns)
        if plain and not filtered:
            return "*", None
        wanted = [c for c in table.columns if not filtered or self.connector.column_filter(table.id, c.name)
                  or c.name in key]
        return ", ".join(select_expression(c) for c in wanted), wanted

    def _select(self, entry: TableEntry, key: Sequence[str], limit: int, condition: str | None,
                additional: str | None, order: str) -> tuple[str, list[Column] | None]:
        """SqlServerConnection.buildSelectWithRowLimits."""
        projection, columns = self._projection(entry, key)
        sql = f"SELECT TOP {limit} {projection} FROM {_quoted(entry.table.id)}"
        if condition:
            sql += f" WHERE {condition}"
            if additional:
                sql += f" AND {additional}"
        elif additional:
            sql += f" WHERE {additional}"
        sql += f" ORDER BY {order}"
        if self.recompile:
            sql += " OPTION(RECOMPILE)"
        return sql, columns

    def _run(self, entry: TableEntry, sql: str, params: Sequence[Any], columns: list[Column] | None,
             what: str) -> list[list[Any]]:
        """The rows of `sql`, each in the table's column order (columns not selected: None)."""
        import mssql_python

        conn = self._conn(entry.table.id.catalog or "")
        try:
            cur = conn._cursor()
            cur.execute(sql, *params)
            names = [d[0] for d in cur.description or ()]
            fetched = [tuple(r) for r in cur.fetchall()]
            cur.close()
        except mssql_python.Error as exc:
            from headwater.connectors.sqlserver.connection import database_error

            error = database_error(what, exc)
            self._end(conn)
            if error.retriable:
                conn.close()
                raise error from None  # a lost connection fails the run (it resumes at the chunk)
            gone = "invalid object name" in str(error).lower()
            raise SnapshotTableError(str(error), UNKNOWN_SCHEMA if gone else SQL_EXCEPTION) from None
        except ConnectorError:
            conn.close()
            raise
        self._end(conn)
        table_columns = list(entry.table.columns)
        if columns is None:
            lower = {n.lower(): i for i, n in enumerate(names)}
            at = [lower.get(c.name.lower()) for c in table_columns]
        else:
            position = {c.name: i for i, c in enumerate(columns)}
            at = [position.get(c.name) for c in table_columns]
        return [[None if i is None else row[i] for i in at] for row in fetched]

    def _key_of(self, entry: TableEntry, raw: list[Any], key: Sequence[str]) -> tuple[Any, ...]:
        names = [c.name for c in entry.table.columns]
        return tuple(raw[names.index(k)] for k in key)

    def _key_columns(self, entry: TableEntry, key: Sequence[str], collection: str) -> list[Column]:
        out = []
        for name in key:
            column = entry.table.column(name)
            if column is None:
                raise SnapshotTableError(f"table {collection}: its chunk key column {name} is not a column of the "
                                         "table any more", UNKNOWN_SCHEMA)
            out.append(column)
        return out

    def maximum_key(self, collection: str, columns: Sequence[str], condition: str | None) -> tuple[Any, ...] | None:
        entry = self._entry(collection)
        self._key_columns(entry, columns, collection)
        # Debezium's buildMaxPrimaryKeyQuery: the first row in descending key order
        order = ", ".join(f"{quote(c)} DESC" for c in columns)
        sql, selected = self._select(entry, columns, 1, None, condition, order)
        rows = self._run(entry, sql, (), selected, f"reading the maximum key of table {collection} failed")
        return self._key_of(entry, rows[0], columns) if rows else None

    def chunk_query(self, entry: TableEntry, columns: Sequence[str], after: tuple[Any, ...] | None,
                    maximum: tuple[Any, ...] | None, limit: int,
                    condition: str | None) -> tuple[str, list[Any], list[Column] | None]:
        """Debezium's AbstractChunkQueryBuilder.buildChunkQuery: the first chunk has no bounds,
        later ones `<after the last key> AND NOT (<after the maximum key>)`; NULL keys sort first
        in SQL Server (nullsSortLast false); parameters with a NULL value are not bound."""
        key = self._key_columns(entry, columns, data_collection(entry.table.id))
        bounds = None
        params: list[Any] = []
        if after is not None:
            lower, p1 = _lower_bound(key, after, inclusive=False)
            bounds, params = lower, p1
            if maximum is not None:
                upper, p2 = _lower_bound(key, maximum, inclusive=False)
                bounds += f" AND NOT {upper}"
                params += p2
        order = ", ".join(quote(c) for c in columns)
        sql, selected = self._select(entry, columns, limit, bounds, condition, order)
        return sql, params, selected

    def read_chunk(self, collection: str, columns: Sequence[str], after: tuple[Any, ...] | None,
                   maximum: tuple[Any, ...], limit: int, condition: str | None) -> list[ChunkRow]:
        entry = self._entry(collection)
        sql, params, selected = self.chunk_query(entry, columns, after, maximum, limit, condition)
        rows = self._run(entry, sql, params, selected, f"reading a chunk of table {collection} failed")
        from headwater.connectors.sqlserver.streaming import event_failed

        out: list[ChunkRow] = []
        mode = self.config.get("event.processing.failure.handling.mode") or "fail"
        for raw in rows:
            chunk_key = self._key_of(entry, raw, columns)
            try:
                value = entry.schema.row(raw)
            except Exception as exc:  # a value the converters cannot take, as in the initial snapshot
                event_failed(mode, entry.collection, exc, f"in the incremental snapshot (key {chunk_key})")
                continue
            out.append(ChunkRow(entry.schema.key(value), chunk_key, MsChunkRow(entry, value)))
        return out

    def read_events(self, collection: str, rows: Sequence[ChunkRow], offset: dict[str, Any]) -> list[SourceRecord]:
        """Debezium's sendWindowEvents: the offset context is marked `incremental` and keeps the
        stream position (commit_lsn, change_lsn, event_serial_no of the table's database); ts is
        the time each event is sent."""
        records: list[SourceRecord] = []
        dispatcher = self.connector.dispatcher(records.append, lambda: offset)
        server = self.connector.server
        for chunk_row in rows:
            row: MsChunkRow = chunk_row.row
            table_id = row.entry.table.id
            db = table_id.catalog or ""
            position = _position(offset, db)
            source = source_block(server, db, table_id.schema or "", table_id.table,
                                  ts_us=time.time_ns() // 1000, snapshot="incremental",
                                  commit_lsn=position.commit_lsn, change_lsn=position.change_lsn,
                                  event_serial_no=position.event_serial_no)
            dispatcher.dispatch_change(row.entry.schema, row.entry.topic, OP_READ, None, row.value, source,
                                       collection=row.entry.collection)
        return records

    # -- signal table ------------------------------------------------------------------------

    def _signal_target(self) -> tuple[SqlServerConnection, str]:
        if self.signal is None:
            raise ConnectorError("no signal table: set signal.data.collection (databaseName.schemaName.tableName, a "
                                 "table with the columns id, type and data in a database of database.names) to send "
                                 "signals through the source channel and to run incremental snapshots")
        db = self._database_names().get((self.signal.catalog or "").lower())
        if db is None:
            raise ConnectorError(f"signal.data.collection={self.config.get('signal.data.collection')}: its database "
                                 f"is not one of database.names ({', '.join(self.connector.database_names)})")
        return self._conn_for(db), _quoted(TableId(db, self.signal.schema, self.signal.table))

    def _write(self, sql: str, params: tuple[Any, ...], what: str) -> None:
        conn, _ = self._signal_target()
        try:
            conn.execute(sql, params, what=f"{what} in signal table {self.config.get('signal.data.collection')} "
                                           "failed")
            conn.commit()
        except ConnectorError:
            try:
                conn.rollback()
            except ConnectorError:
                conn.close()
            raise

    def insert_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        # Debezium: INSERT INTO [db].[schema].[table] VALUES (?, ?, ?) — the columns by position
        _, table = self._signal_target()
        self._write(f"INSERT INTO {table} VALUES (?, ?, ?)", (signal_id, signal_type, data),
                    f"inserting signal {signal_id!r}")

    def delete_signal(self, signal_id: str) -> None:
        # Debezium's DeleteWindowCloser: DELETE FROM <signal table> WHERE id = ?
        _, table = self._signal_target()
        self._write(f"DELETE FROM {table} WHERE id = ?", (signal_id,), f"deleting signal {signal_id!r}")

    # -- blocking snapshots ------------------------------------------------------------------

    def open_blocking_snapshot(self, position: dict[str, Any]) -> SnapshotPoint:
        return self.capture.open_blocking_snapshot(position)


def _quoted(table_id: TableId) -> str:
    """SqlServerConnection.quotedTableIdString: [db].[schema].[table]."""
    return ".".join(quote(p) for p in (table_id.catalog, table_id.schema, table_id.table) if p is not None)


def _position(offset: dict[str, Any], db: str) -> DatabaseOffset:
    entries = offset.get("databases") if isinstance(offset, dict) else None
    entry = entries.get(db) if isinstance(entries, dict) else None
    if entry is None and isinstance(entries, dict):
        entry = next((v for k, v in entries.items() if k.lower() == db.lower()), None)
    return DatabaseOffset.from_dict(entry) if isinstance(entry, dict) else DatabaseOffset()


def _lower_bound(key: Sequence[Column], values: Sequence[Any], *, inclusive: bool) -> tuple[str, list[Any]]:
    """AbstractChunkQueryBuilder.addLowerBound for a database whose NULLs sort first:
    `((k1 > ?) OR (k1 = ? AND k2 > ?) …)`; a nullable column's `k > v` is `(k > ? AND k IS NOT
    NULL)`, `k > NULL` is `k IS NOT NULL`, `k = NULL` is `k IS NULL` (no parameter)."""
    sql = "(" if len(key) > 1 else ""
    params: list[Any] = []
    for i in range(len(key)):
        last_i = i == len(key) - 1
        sql += "("
        for j in range(i + 1):
            last_j = i == j
            operator = " = ?" if not last_j else (" >= ?" if last_i and inclusive else " > ?")
            name = quote(key[j].name)
            value = values[j]
            if not key[j].optional:
                sql += name + operator
                params.append(value)
            elif value is not None:
                if last_j:
                    sql += f"({name}{operator} AND {name} IS NOT NULL)"
                else:
                    sql += name + operator
                params.append(value)
            elif last_j:
                sql += "1 = 1" if last_i and inclusive else f"{name} IS NOT NULL"
            else:
                sql += f"{name} IS NULL"
            if not last_j:
                sql += " AND "
        sql += ")"
        if not last_i:
            sql += " OR "
    if len(key) > 1:
        sql += ")"
    return sql, params

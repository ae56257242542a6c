"""PostgreSQL's side of incremental and blocking snapshots (Debezium's
PostgresSignalBasedIncrementalSnapshotChangeEventSource, its read-only variant and the
RowValueConstructorChunkQueryBuilder); the engine runs the algorithm (headwater.engine.signals).

Chunks are read as the initial snapshot reads rows: `COPY (SELECT …) TO STDOUT` in text format,
converted by the same table schemas (built from the catalog, as Debezium refreshes a table's
schema from JDBC metadata before it snapshots it), so a read event equals the initial snapshot's
`r` event but for its source block. Chunk keys are kept in PostgreSQL's text form: exact for every
type, JSON-able for the offsets, and given back to the server as untyped literals, which it reads
as the key column's own type.

The connection is this module's own (never the replication or the snapshot one): a chunk is read
in a short READ COMMITTED transaction that first takes the table's ACCESS SHARE lock, then reads
its definition (so no ALTER can commit between the two: PG-53), then the rows; watermark rows are
written and committed one by one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql

from headwater.connectors.postgres import snapshot as snap
from headwater.connectors.postgres.connection import connect, connection_error, first_line
from headwater.connectors.postgres.events import event_failed
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.schemas import CapturedTable, SchemaRegistry
from headwater.connectors.postgres.source_info import sequence, source_block
from headwater.engine.connector import ConnectorError
from headwater.engine.records import SourceRecord
from headwater.engine.signals.connector import ChunkRow, IncrementalSource, SnapshotTableError, WindowMarks
from headwater.engine.source import SnapshotPoint
from headwater.model.envelope import OP_READ
from headwater.relational.table import Table, TableId

if TYPE_CHECKING:
    from headwater.connectors.postgres.capture import PgCaptureSource

log = logging.getLogger(__name__)

# Debezium's TableScanCompletionStatus values a table can end with here
UNKNOWN_SCHEMA, NO_PRIMARY_KEY, SQL_EXCEPTION = "UNKNOWN_SCHEMA", "NO_PRIMARY_KEY", "SQL_EXCEPTION"

READ_ONLY_MIN_VERSION = 130000  # pg_current_snapshot(), as Debezium's READ_ONLY_SUPPORTED_VERSION


def parse_collection(name: str) -> TableId:
    """`schema.table` (each part optionally double-quoted, `""` an escaped quote) -> TableId, as
    Debezium's TableId.parse reads `signal.data.collection` and the signals' data collections.
    A name without schema is in `public`."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(name):
        ch = name[i]
        if quoted:
            if ch == '"':
                if i + 1 < len(name) and name[i + 1] == '"':
                    current.append('"')
                    i += 1
                else:
                    quoted = False
            else:
                current.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ".":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    if quoted or not all(parts) or len(parts) > 3:
        raise ValueError(f"{name!r} is not a table name of the form schema.table")
    if len(parts) == 1:
        return TableId(None, "public", parts[0])
    return TableId(None, parts[-2], parts[-1])  # a leading database name is the connector's own


def signal_table(config: Any) -> TableId | None:
    """The table `signal.data.collection` names, or None."""
    name = config.get("signal.data.collection")
    if not name or not str(name).strip():
        return None
    try:
        return parse_collection(str(name).strip())
    except ValueError as exc:
        raise ConnectorError(f"signal.data.collection: {exc}") from None


@dataclass(frozen=True)
class SignalTableFilter:
    """The connector's table filter plus the signal table: Debezium's RelationalTableFilters adds
    `signal.data.collection` to the tables captured whatever the include/exclude lists say, so
    its rows (signals and watermarks) come through the stream (and it is in a filtered
    publication). Picklable, like the filter it wraps."""

    inner: Any
    signal: TableId

    def __call__(self, table_id: TableId) -> bool:
        if table_id.schema == self.signal.schema and table_id.table == self.signal.table:
            return True
        return bool(self.inner(table_id))


@dataclass
class _Loaded:
    oid: int
    table: Table
    captured: CapturedTable


@dataclass(frozen=True)
class PgChunkRow:
    """What a ChunkRow's `row` holds: the converted value and the table's schemas it was read with."""

    captured: CapturedTable
    value: dict[str, Any]


class PostgresIncrementalSource(IncrementalSource):
    def __init__(self, capture: PgCaptureSource) -> None:
        self.capture = capture
        self.connector = capture.connector
        self.config = capture.config
        self.settings = self.connector.builder_settings()
        self.signal = signal_table(self.config)
        self._conn: Any = None
        self._registry: SchemaRegistry | None = None
        self._tables: dict[str, _Loaded] = {}

    # -- connection --------------------------------------------------------------------------

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.config, application_name="headwater-incremental")
            self._conn.autocommit = False
            self._registry = self.settings.registry(CatalogReader(self._conn))
            self._tables.clear()
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg2.Error:
                pass

    def _rollback(self) -> None:
        """After a failed statement: roll back (the connection stays usable), or forget a broken
        connection (the next call connects again)."""
        if self._conn is None:
            return
        try:
            self._conn.rollback()
        except psycopg2.Error:
            self.close()

    def _failed(self, what: str, exc: psycopg2.Error) -> ConnectorError:
        self._rollback()
        return connection_error(what, exc)

    # -- tables ------------------------------------------------------------------------------

    def _is_signal(self, table_id: TableId) -> bool:
        return self.signal is not None and table_id.schema == self.signal.schema and \
            table_id.table == self.signal.table

    def _captured_ids(self) -> dict[str, TableId]:
        conn = self._connection()
        try:
            ids = self.connector.captured_table_ids(CatalogReader(conn))
            conn.commit()
        except psycopg2.Error as exc:
            raise self._failed("listing the captured tables failed", exc) from None
        return {t.identifier(): t for t, kind in ids if kind in ("r", "p") and not self._is_signal(t)}

    def captured_tables(self) -> list[str]:
        return list(self._captured_ids())

    def collection_id(self, name: str) -> str:
        """`"public"."My.Table"` (PG-41) is the table records name `public.My.Table`."""
        try:
            return parse_collection(name).identifier()
        except ValueError:
            return name

    def _load(self, collection: str, *, locked: bool = False) -> _Loaded:
        """The table's definition and schemas, read from the catalog again (a table whose
        definition changed since the last chunk gets new schemas, as the streamed events do after
        PostgreSQL's Relation message); SnapshotTableError when it is gone."""
        conn = self._connection()
        catalog = CatalogReader(conn)
        known = self._tables.get(collection)
        table_id = known.table.id if known is not None else self._captured_ids().get(collection)
        if table_id is None:
            raise SnapshotTableError(f"table {collection} is not captured (or does not exist)", UNKNOWN_SCHEMA)
        oid = catalog.oid_of(table_id)
        table = catalog.read_tables([oid]).get(oid) if oid is not None else None
        if table is None:
            self._tables.pop(collection, None)
            raise SnapshotTableError(f"table {collection} does not exist any more", UNKNOWN_SCHEMA)
        if known is not None and known.oid == oid and known.table == table:
            return known
        if known is not None:
            log.info("the definition of table %s changed during its incremental snapshot; its next rows are read "
                     "with the new one", collection)
        assert self._registry is not None
        loaded = _Loaded(oid, table, self._registry.build(table))
        self._tables[collection] = loaded
        return loaded

    def chunk_columns(self, collection: str, surrogate_key: str | None) -> list[str]:
        try:
            loaded = self._load(collection)
            self._conn.commit()
        except psycopg2.Error as exc:
            self._rollback()
            raise SnapshotTableError(f"reading table {collection} failed: {first_line(exc)}", SQL_EXCEPTION) from None
        except BaseException:
            self._rollback()
            raise
        return self._key_columns(loaded, surrogate_key)

    def _key_columns(self, loaded: _Loaded, surrogate_key: str | None) -> list[str]:
        table = loaded.table
        if surrogate_key:
            if table.column(surrogate_key) is None:
                # Debezium: IllegalArgumentException "Surrogate key ... doesn't exist in table"
                raise SnapshotTableError(f'Surrogate key "{surrogate_key}" doesn\'t exist in table '
                                         f'"{table.id.identifier()}"', UNKNOWN_SCHEMA)
            return [surrogate_key]
        # Debezium's KeyMapper: message.key.columns when it names columns of the table, else the key
        mapper = self.settings.key_columns
        names = [c.name for c in table.columns]
        mapped = mapper.key_columns(table.id, names) if mapper is not None else None
        columns = list(mapped) if mapped else list(table.primary_key)
        if not columns:
            raise SnapshotTableError(f"Incremental snapshot for table '{table.id.identifier()}' skipped because the "
                                     "table has no primary keys", NO_PRIMARY_KEY)
        return columns

    # -- queries -----------------------------------------------------------------------------

    def _table_ident(self, loaded: _Loaded) -> sql.Composable:
        return sql.Identifier(loaded.table.id.schema or "public", loaded.table.id.table)

    def maximum_key(self, collection: str, columns: Sequence[str], condition: str | None) -> tuple[Any, ...] | None:
        conn = self._connection()
        try:
            loaded = self._load(collection)
            # Debezium's buildMaxPrimaryKeyQuery: the first row in descending key order
            query = sql.SQL("SELECT {keys} FROM {t}{where} ORDER BY {order} LIMIT 1").format(
                # aliased: an output column named like a key column is what ORDER BY would sort (as text)
                keys=sql.SQL(", ").join(
                    sql.SQL("{}::text AS {}").format(sql.Identifier(c), sql.Identifier(f"__hw_k{i}"))
                    for i, c in enumerate(columns)),
                t=self._table_ident(loaded),
                where=sql.SQL(" WHERE {}").format(sql.SQL(condition)) if condition else sql.SQL(""),
                order=sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(c)) for c in columns))
            with conn.cursor() as cur:
                cur.execute(query)
                row = cur.fetchone()
            conn.commit()
        except psycopg2.Error as exc:
            self._rollback()
            raise SnapshotTableError(f"reading the maximum key of table {collection} failed: {first_line(exc)}",
                                     SQL_EXCEPTION) from None
        except BaseException:
            self._rollback()
            raise
        return None if row is None else tuple(row)

    def chunk_query(self, loaded: _Loaded, columns: Sequence[str], after: tuple[Any, ...] | None,
                    maximum: tuple[Any, ...] | None, limit: int, condition: str | None) -> sql.Composable:
        """Debezium's RowValueConstructorChunkQueryBuilder: `ROW(k1, k2) > ROW(…) AND ROW(k1, k2)
        <= ROW(…)` when every key column is NOT NULL, else the base builder's expanded form that
        places NULLs last (PostgreSQL's order); the first chunk has no bounds (Debezium bounds a
        chunk by the maximum key only from the second one); the `additional-conditions` filter
        is ANDed on (in parentheses: Debezium appends it bare, so a filter with OR would escape
        the chunk bounds)."""
        table = loaded.table
        nullable = any((c := table.column(name)) is None or c.optional for name in columns)
        bounds: list[sql.Composable] = []
        if after is not None:
            bounds.append(_lower_bound(columns, after, nullable, inclusive=False))
            if maximum is not None:
                bounds.append(_upper_bound(columns, maximum, nullable))
        if condition:
            bounds.append(sql.SQL("({})").format(sql.SQL(condition)))
        raw = list(loaded.captured.raw_columns)
        extra = [c for c in columns if c not in raw]  # a key column the rows leave out (generated)
        select = sql.SQL(", ").join(sql.Identifier(c) for c in raw + extra)
        return sql.SQL("SELECT {cols} FROM {t}{where} ORDER BY {order} LIMIT {n}").format(
            cols=select, t=self._table_ident(loaded),
            where=sql.SQL(" WHERE ") + sql.SQL(" AND ").join(bounds) if bounds else sql.SQL(""),
            order=sql.SQL(", ").join(sql.Identifier(c) for c in columns), n=sql.Literal(limit))

    def read_chunk(self, collection: str, columns: Sequence[str], after: tuple[Any, ...] | None,
                   maximum: tuple[Any, ...], limit: int, condition: str | None) -> list[ChunkRow]:
        conn = self._connection()
        raws: list[list[str | None]] = []
        try:
            known = self._tables.get(collection)
            if known is not None:
                # the lock first: the definition read next is the one the SELECT sees (PG-53)
                with conn.cursor() as cur:
                    cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(self._table_ident(known)))
            loaded = self._load(collection)
            if known is None:
                with conn.cursor() as cur:
                    cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(self._table_ident(loaded)))
                loaded = self._load(collection)
            if any(loaded.table.column(c) is None for c in columns):
                raise SnapshotTableError(
                    f"table {collection}: its chunk key column(s) {', '.join(columns)} changed during the incremental "
                    "snapshot (PostgreSQL cannot go on reading it in chunks; send the execute-snapshot signal for it "
                    "again)", UNKNOWN_SCHEMA)
            query = self.chunk_query(loaded, columns, after, maximum, limit, condition)
            statement = sql.SQL("COPY ({}) TO STDOUT").format(query)
            with conn.cursor() as cur:
                cur.copy_expert(statement, _Lines(raws))
            conn.commit()
        except psycopg2.Error as exc:
            self._rollback()
            gone = isinstance(exc, psycopg2.errors.UndefinedTable)
            raise SnapshotTableError(f"reading a chunk of table {collection} failed: {first_line(exc)}",
                                     UNKNOWN_SCHEMA if gone else SQL_EXCEPTION) from None
        except BaseException:
            self._rollback()
            raise
        captured = loaded.captured
        raw_count = len(captured.raw_columns)
        positions = {name: i for i, name in enumerate(list(captured.raw_columns) +
                                                       [c for c in columns if c not in captured.raw_columns])}
        key_at = [positions[c] for c in columns]
        out: list[ChunkRow] = []
        for raw in raws:
            chunk_key = tuple(raw[i] for i in key_at)
            try:
                value = captured.schema.row(raw[:raw_count])
            except Exception as exc:  # event.processing.failure.handling.mode, as in the initial snapshot
                # warn/skip leave the row out (read_events gives one record per row it is handed)
                event_failed(self.settings.failure_mode, captured, exc, [raw[:raw_count]],
                             f"in the incremental snapshot (key {chunk_key})")
                continue
            out.append(ChunkRow(captured.schema.key(value), chunk_key, PgChunkRow(captured, value)))
        return out

    def read_events(self, collection: str, rows: Sequence[ChunkRow], offset: dict[str, Any]) -> list[SourceRecord]:
        """Debezium's sendWindowEvents: the offset context is marked `incremental` (PostgreSQL's
        source block then leaves out txId, lsn and xmin) and keeps the stream position's
        `sequence`; ts is the time each event is sent."""
        records: list[SourceRecord] = []
        dispatcher = self.settings.dispatcher(records.append, lambda: offset)
        s = self.settings
        seq = sequence(offset.get("last_commit_lsn"), offset.get("lsn"))
        for chunk_row in rows:
            row: PgChunkRow = chunk_row.row
            table_id = row.captured.table.id
            source = source_block(s.server, s.dbname, ts_us=time.time_ns() // 1000, snapshot="incremental",
                                  schema=table_id.schema or "", table=table_id.table, tx_id=None, lsn=None,
                                  last_commit_lsn=None)
            source["sequence"] = seq
            dispatcher.dispatch_change(row.captured.schema, row.captured.topic, OP_READ, None, row.value, source,
                                       collection=row.captured.collection)
        return records

    # -- signal table ------------------------------------------------------------------------

    def _signal_ident(self) -> sql.Composable:
        if self.config.get("read.only"):
            raise ConnectorError("read.only=true: Headwater writes nothing to the database, so there is no signal "
                                 "table to write to; send signals through the file or kafka channel")
        if self.signal is None:
            raise ConnectorError("no signal table: set signal.data.collection (a table with the columns id, type "
                                 "and data) to send signals through the source channel and to run incremental "
                                 "snapshots with incremental.snapshot.watermarking.strategy=" +
                                 str(self.config.get("incremental.snapshot.watermarking.strategy")))
        return sql.Identifier(self.signal.schema or "public", self.signal.table)

    def _write(self, statement: sql.Composable, params: tuple[Any, ...], what: str) -> None:
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
            conn.commit()
        except psycopg2.Error as exc:
            raise self._failed(f"{what} in signal table {self.config.get('signal.data.collection')} failed",
                               exc) from None

    def insert_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        # Debezium: INSERT INTO <signal table> VALUES (?, ?, ?) — the columns by position
        self._write(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(self._signal_ident()),
                    (signal_id, signal_type, data), f"inserting signal {signal_id!r}")

    def delete_signal(self, signal_id: str) -> None:
        # Debezium's DeleteWindowCloser: DELETE FROM <signal table> WHERE id = ? (a column named id)
        self._write(sql.SQL("DELETE FROM {} WHERE id = %s").format(self._signal_ident()),
                    (signal_id,), f"deleting signal {signal_id!r}")

    def window_marks(self, strategy: str) -> WindowMarks:
        if self.config.get("read.only"):
            return SnapshotWatermarks(self)
        return super().window_marks(strategy)

    # -- blocking snapshots ------------------------------------------------------------------

    def open_blocking_snapshot(self, position: dict[str, Any] | None = None) -> SnapshotPoint:
        """See PgCaptureSource.open_blocking_snapshot; `position` (the offset streaming stopped
        at) gives the records Debezium's source block."""
        return self.capture.open_blocking_snapshot(position)

    # -- read-only watermarks ----------------------------------------------------------------

    def current_snapshot(self) -> tuple[PgSnapshot, int]:
        """pg_current_snapshot() and the WAL position it was taken at."""
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT pg_current_snapshot()::text, (CASE pg_is_in_recovery() WHEN true THEN "
                            "pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END)::text")
                text, lsn = cur.fetchone()
            conn.commit()
        except psycopg2.Error as exc:
            raise self._failed("reading pg_current_snapshot() failed", exc) from None
        from headwater.connectors.postgres.pgoutput import parse_lsn

        return PgSnapshot.parse(text), parse_lsn(lsn) if lsn else 0

    def force_new_transaction_id(self) -> None:
        """Debezium's forceNewTransactionId, when a read-only incremental snapshot starts: a
        transaction id is assigned (not on a standby), so the watermarks move on."""
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT (CASE pg_is_in_recovery() WHEN true THEN NULL::xid8 ELSE pg_current_xact_id() END)")
            conn.commit()
        except psycopg2.Error as exc:
            raise self._failed("assigning a transaction id failed", exc) from None


class _Lines:
    """COPY's text output -> rows (the initial snapshot's parser)."""

    def __init__(self, rows: list[list[str | None]]) -> None:
        self.rows = rows
        self._tail = b""

    def write(self, data: bytes | str) -> int:
        buf = self._tail + (data if isinstance(data, bytes) else data.encode("utf-8"))
        lines = buf.split(b"\n")
        self._tail = lines.pop()
        self.rows.extend(snap.parse_copy_line(line.decode("utf-8")) for line in lines)
        return len(data)


def _lower_bound(columns: Sequence[str], key: tuple[Any, ...], nullable: bool, *, inclusive: bool) -> sql.Composable:
    if not nullable:
        return _row_compare(columns, ">=" if inclusive else ">", key)
    return _expanded_lower_bound(columns, key, inclusive)


def _upper_bound(columns: Sequence[str], key: tuple[Any, ...], nullable: bool) -> sql.Composable:
    if not nullable:
        return _row_compare(columns, "<=", key)
    # the base builder: NOT (key > maximum)
    return sql.SQL("NOT ") + _expanded_lower_bound(columns, key, False)


def _row_compare(columns: Sequence[str], operator: str, key: tuple[Any, ...]) -> sql.Composable:
    cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    values = sql.SQL(", ").join(sql.Literal(v) for v in key)
    if len(columns) > 1:
        return sql.SQL("ROW({}) {} ROW({})").format(cols, sql.SQL(operator), values)
    return sql.SQL("{} {} {}").format(cols, sql.SQL(operator), values)


def _expanded_lower_bound(columns: Sequence[str], key: tuple[Any, ...], inclusive: bool) -> sql.Composable:
    """AbstractChunkQueryBuilder.addLowerBound with NULLs sorting last: (k1 > ?) OR (k1 = ? AND
    k2 > ?) …, where `k > NULL` is false, `k = NULL` is `k IS NULL` and `k > v` also holds for a
    NULL k. (Debezium writes NOT NULL columns without the NULL cases; they are the same there.)"""
    terms: list[sql.Composable] = []
    for i in range(len(columns)):
        last_term = i == len(columns) - 1
        parts: list[sql.Composable] = []
        for j in range(i + 1):
            col = sql.Identifier(columns[j])
            value = key[j]
            if j < i:
                parts.append(sql.SQL("{} IS NULL").format(col) if value is None
                             else sql.SQL("{} = {}").format(col, sql.Literal(value)))
            elif value is None:
                parts.append(sql.SQL("{} IS NULL").format(col) if last_term and inclusive else sql.SQL("1 = 0"))
            else:
                op = sql.SQL(">=" if last_term and inclusive else ">")
                parts.append(sql.SQL("({col} {op} {v} OR {col} IS NULL)").format(col=col, op=op, v=sql.Literal(value)))
        terms.append(sql.SQL("(") + sql.SQL(" AND ").join(parts) + sql.SQL(")"))
    joined = sql.SQL(" OR ").join(terms)
    return sql.SQL("(") + joined + sql.SQL(")") if len(columns) > 1 else joined


# -- read.only ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PgSnapshot:
    """pg_current_snapshot(): `xmin:xmax:xip,…` (64-bit transaction ids)."""

    xmin: int
    xmax: int
    xip: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> PgSnapshot:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), tuple(int(x) for x in xip.split(",") if x))


class SnapshotWatermarks(WindowMarks):
    """`read.only=true` (Debezium's PostgresReadOnlyIncrementalSnapshotChangeEventSource): nothing
    is written; the window's low and high watermarks are pg_current_snapshot() before and after
    the chunk is read, and streamed events open and close it by their transaction id: the window
    opens at the first event of a transaction at or after the low watermark's xmin, and closes at
    one past both watermarks' xmax. As in Debezium an event of an older transaction closes the
    window without opening it (everything it changed was visible to the chunk).

    Debezium also closes the window on heartbeats and commits whose transaction is visible to the
    high watermark, so a quiet database does not stall the snapshot. Headwater's heartbeat records
    carry no transaction id; a heartbeat closes the window once its stream position has reached
    the WAL position taken with the high watermark: every transaction the chunk saw has been
    streamed by then, and any later change arrives after the chunk's events. (Without heartbeats
    the window closes at the next streamed change, as in Debezium.)"""

    def __init__(self, source: PostgresIncrementalSource) -> None:
        self.source = source
        self.heartbeat_topic = source.settings.heartbeat_topic
        self.low: PgSnapshot | None = None
        self.high: PgSnapshot | None = None
        self.high_lsn = 0
        self.opened = False
        self._started = False

    def open(self, chunk_id: str) -> None:
        if not self._started:
            self.source.force_new_transaction_id()
            self._started = True
        self.low, _ = self.source.current_snapshot()
        self.high = None
        self.opened = False

    def close(self, chunk_id: str) -> None:
        self.high, self.high_lsn = self.source.current_snapshot()

    def classify(self, record: SourceRecord, chunk_id: str | None) -> str | None:
        low, high = self.low, self.high
        if chunk_id is None or low is None or high is None:
            return None
        if self.heartbeat_topic is not None and record.topic == self.heartbeat_topic:
            position = max(record.offset.get("lsn_commit") or 0, record.offset.get("message_lsn") or 0)
            return self._closed() if position >= self.high_lsn else None
        value = record.value
        source = value.get("source") if isinstance(value, dict) else None
        xid = source.get("txId") if isinstance(source, dict) else None
        if xid is None:
            return None  # not a change of a transaction (a non-transactional message, a tombstone)
        txid = _widen(int(xid), low.xmax)
        past_high = txid > max(high.xmax, low.xmax)
        if not self.opened:
            if txid < low.xmin or past_high:
                return self._closed()
            self.opened = True
            return "open"
        return self._closed() if past_high else None

    def _closed(self) -> str:
        self.low = self.high = None
        self.opened = False
        return "close"


def _widen(xid: int, reference: int) -> int:
    """A streamed 32-bit transaction id in the 64-bit space of `reference` (pg_current_snapshot's
    ids carry the epoch): the one nearest to it."""
    if xid >= 1 << 32:
        return xid
    candidate = (reference & ~0xFFFFFFFF) | xid
    if candidate > reference + (1 << 31):
        candidate -= 1 << 32
    elif candidate < reference - (1 << 31):
        candidate += 1 << 32
    return candidate

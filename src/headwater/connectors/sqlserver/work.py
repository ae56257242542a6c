"""SQL Server's units of work on Spark's executors (see :mod:`units` for what they are and why the
result is consistent).

:class:`SqlServerWorkDecoder` is picklable and carries the connector's properties (the password
among them: never logged, never in an error); an executor builds the connector's parts from them
once, opens its own connections, and:

- reads a snapshot chunk (:class:`~headwater.connectors.sqlserver.units.SnapshotUnit`): the
  table's captured columns with the same select expressions as the standalone snapshot, the rows
  of the chunk's key range, in their own transaction;
- reads a streaming window (:class:`~headwater.connectors.sqlserver.units.StreamWindow`): the
  standalone loop's merge (:class:`~headwater.connectors.sqlserver.streaming.Streamer`) over the
  window's capture instances — the change queries, the k-way merge, update pairs, restart
  de-duplication, `event_serial_no` — so the events are the standalone runner's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from headwater.connectors.sqlserver import snapshot as snap
from headwater.connectors.sqlserver.changes import skipped_codes
from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.lsn import lsn_to_str
from headwater.connectors.sqlserver.source_info import epoch_micros, make_offset, source_block
from headwater.connectors.sqlserver.streaming import event_failed
from headwater.connectors.sqlserver.units import (
    COMPLETE,
    SnapshotUnit,
    StreamUnit,
    StreamWindow,
    change_position,
    snapshot_position,
)
from headwater.engine.feed import PositionedRecord, WorkDecoder
from headwater.engine.records import SourceRecord
from headwater.engine.snapshot_plan import snapshot_marker
from headwater.model.envelope import OP_READ

if TYPE_CHECKING:
    from headwater.connectors.sqlserver.connector import SqlServerConnector
    from headwater.connectors.sqlserver.history import DatabaseSchema, TableEntry
    from headwater.relational.table import Table

log = logging.getLogger(__name__)


class SqlServerWorkDecoder(WorkDecoder):
    """Executor side: reads snapshot chunks and streaming windows into records with positions."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.properties = dict(properties)  # holds the password: never logged, never in an error
        self._connector: SqlServerConnector | None = None
        self._schema: DatabaseSchema | None = None
        self._entries: dict[Any, TableEntry] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"properties": self.properties, "_connector": None, "_schema": None, "_entries": {}}

    # -- the connector's parts, built once per executor process ---------------------------------------

    def connector(self) -> SqlServerConnector:
        if self._connector is None:
            from headwater.config import COMMON_FIELDS, Configuration
            from headwater.config.registry import ensure_builtin_connectors, resolve_connector
            from headwater.connectors.sqlserver.connector import SqlServerConnector

            ensure_builtin_connectors()
            _, fields = resolve_connector(self.properties.get("connector.class"))
            self._connector = SqlServerConnector(Configuration.build(self.properties, COMMON_FIELDS.merge(fields)))
        return self._connector

    def schema(self) -> DatabaseSchema:
        """The tables' event schemas, without a history (the driver keeps it)."""
        if self._schema is None:
            from headwater.connectors.sqlserver.history import DatabaseSchema

            c = self.connector()
            self._schema = DatabaseSchema(c.config, c.topic_naming, column_filter=c.column_filter,
                                          key_columns=c.key_columns, custom_converters=c.custom_converters)
        return self._schema

    def entry(self, table: Table) -> TableEntry:
        try:
            entry = self._entries.get(table)
        except TypeError:  # an unhashable column detail: built each time
            return self.schema().build(table)
        if entry is None:
            entry = self._entries[table] = self.schema().build(table)
        return entry

    # -- WorkDecoder -------------------------------------------------------------------------------

    def decode(self, item: Any) -> Iterator[PositionedRecord]:
        if isinstance(item, SnapshotUnit):
            return self._snapshot(item)
        if isinstance(item, StreamUnit):
            return self._stream(item)
        raise TypeError(f"not a SQL Server work item: {type(item).__name__}")

    # -- snapshot chunks ---------------------------------------------------------------------------

    def _snapshot(self, unit: SnapshotUnit) -> Iterator[PositionedRecord]:
        for position, record in unit.records:
            yield PositionedRecord(position, record)
        if unit.table is None:
            return
        c = self.connector()
        chunk = unit.chunk
        entry = self.entry(unit.table)
        table_id = entry.table.id
        dispatcher = c.dispatcher(lambda r: held.append(r) if isinstance(r, SourceRecord) else None, lambda: {})
        held: list[SourceRecord] = []
        conn = SqlServerConnection(c.config, unit.database, purpose="headwater-snapshot")
        try:
            if unit.isolation == "snapshot":
                conn.rollback()  # the level applies from the next transaction on
            conn.set_isolation(unit.isolation)
            ts_us = epoch_micros(snap.snapshot_timestamp(conn))
            statement, params = chunk_statement(chunk, list(entry.table.columns))
            rows = conn.stream(statement, params, fetch_size=unit.fetch_size,
                               what=f"snapshot of table {entry.collection} (chunk {chunk.chunk_index}) failed")
            n = 0
            previous: tuple[Any, ...] | None = None
            for raw in rows:
                if previous is not None:
                    yield from self._row(dispatcher, held, unit, entry, previous, n - 1, ts_us, n == 1, False)
                previous = raw
                n += 1
            if previous is not None:
                yield from self._row(dispatcher, held, unit, entry, previous, n - 1, ts_us, n == 1, True)
            conn.rollback()
        finally:
            conn.close()
        log.debug("snapshot of %s chunk %d read", table_id, chunk.chunk_index)

    def _row(self, dispatcher: Any, held: list[SourceRecord], unit: SnapshotUnit, entry: TableEntry,
             raw: tuple[Any, ...], row: int, ts_us: int, first_row: bool,
             last_row: bool) -> Iterator[PositionedRecord]:
        chunk = unit.chunk
        marker = snapshot_marker(first_row and chunk.first_chunk, last_row and chunk.last_chunk, unit.first_table,
                                 unit.last_table)
        table_id = entry.table.id
        source = source_block(self.connector().server, unit.database, table_id.schema or "", table_id.table,
                              ts_us=ts_us, snapshot=marker, commit_lsn=unit.lsn, change_lsn=None, event_serial_no=None)
        try:
            after = entry.schema.row(raw)
        except Exception as exc:  # a value the converters cannot take
            event_failed(self.connector().config.get("event.processing.failure.handling.mode") or "fail",
                         entry.collection, exc, "in the snapshot")
            return
        dispatcher.dispatch_change(entry.schema, entry.topic, OP_READ, None, after, source,
                                   collection=entry.collection)
        base = snapshot_position(unit.db_index, chunk.table_index, chunk.chunk_index, row)
        for i, record in enumerate(held):
            yield PositionedRecord(base[:-2] + f"{i:02x}", record)
        held.clear()

    # -- streaming windows ---------------------------------------------------------------------------

    def _stream(self, unit: StreamUnit) -> Iterator[PositionedRecord]:
        out: list[PositionedRecord] = [PositionedRecord(p, r) for p, r in unit.records]
        # connections for this unit only: a decoder outlives its task in a reused Python worker, and
        # connections kept there piled up on the server
        conns: dict[str, SqlServerConnection] = {}
        try:
            for window in unit.windows:
                conn = conns.get(window.database)
                if conn is None:
                    conn = conns[window.database] = SqlServerConnection(self.connector().config, window.database,
                                                                        purpose="headwater-stream")
                out += [PositionedRecord(p, r) for p, r in window.records]
                out += self._window(conn, window)
                conn.rollback()  # ends the read transaction, as the loop does after each iteration
        finally:
            for conn in conns.values():
                conn.close()
        return iter(out)

    def _window(self, conn: SqlServerConnection, window: StreamWindow) -> list[PositionedRecord]:
        """The standalone loop's merge of the window's capture instances, its records positioned
        by the change they belong to."""
        from headwater.connectors.sqlserver.streaming import Streamer, _InstanceGone

        c = self.connector()
        db = window.database
        schema = self.schema()
        for source, table in window.entries.items():
            schema.tables[source] = self.entry(table)
        out: list[PositionedRecord] = []
        counter = {"prefix": "", "n": 0}
        streamer: Streamer | None = None

        def emit(record: Any) -> None:
            if not isinstance(record, SourceRecord):
                return  # positions only (the executor stores none)
            assert streamer is not None
            at = streamer.states[db].offset
            prefix = change_position(window.db_index, at.commit_lsn, at.change_lsn, at.event_serial_no, 0)[:-2]
            if prefix != counter["prefix"]:
                counter["prefix"], counter["n"] = prefix, 0
            out.append(PositionedRecord(prefix + f"{counter['n']:02x}", record))
            counter["n"] += 1

        settings = c.stream_settings([db])
        streamer = Streamer(settings, schema, {db: conn}, {db: window.start.copy()}, lambda batch: None,
                            lambda _emit, next_offset: c.dispatcher(emit, next_offset), make_offset)
        state = streamer.states[db]
        # the instances started by the window's end (a window cut where another table's instance
        # starts, or at a replayed batch's end, may end before a new one starts: SQL Server answers a
        # range before an instance's start with error 313), as the standalone loop lists them
        state.tables = [ct for ct in window.instances if ct.start_lsn is None or ct.start_lsn <= window.to_lsn]
        if settings.provide_transaction_metadata:
            self._open_transaction(conn, window, state)
        if window.end_tx is not None or window.end_open:  # the idle timer's END of the last transaction
            if state.tx_id is not None:
                state.dispatcher.transaction_end(state.tx_id, state.tx_ts_ms)
            return out
        stop = threading.Event()
        while True:
            try:
                streamer._merge(state, window.from_lsn, window.to_lsn, stop)
                break
            except _InstanceGone as gone:
                # disabled since the driver planned the window: read again without it (the
                # changes already out are skipped by their positions), as the standalone loop does
                log.info("Table is no longer captured with capture instance %s", gone.capture_instance)
                state.tables = [t for t in state.tables if t.capture_instance != gone.capture_instance]
                conn.rollback()
        # a transaction still open at the window's end gets its END in a later unit: when the next
        # transaction of the database begins, or from the idle timer (see _open_transaction)
        for ct in window.instances:
            schema.tables.pop(ct.source, None)
        return out


    def _open_transaction(self, conn: SqlServerConnection, window: StreamWindow, state: Any) -> None:
        """The database's transaction context as the standalone loop has it when the window begins:
        the last transaction streamed before it, if its END is still pending (after the window's
        `tx_floor`), with its events per data collection (counted from the change tables as the
        loop counts them: an update's two rows are one event)."""
        # a skipped operation never reaches the dispatcher, so it begins no transaction: look past them
        skipped = skipped_codes(sorted(self.connector().skipped_operations))
        tx = window.end_tx
        if tx is None:
            if window.tx_floor is None:
                return
            if window.end_open:
                tx = _last_commit_before(conn, window, window.to_lsn, skipped, inclusive=True)
            elif window.from_lsn is None:
                return
            else:
                # the first window after a restart starts at the commit its start position completed (the
                # loop reads it again and skips its changes): that commit is before the window's changes
                again = window.start.commit_lsn == window.from_lsn and window.start.change_lsn == COMPLETE
                tx = _last_commit_before(conn, window, window.from_lsn, skipped, inclusive=again)
            if tx is None or tx <= window.tx_floor:
                return
        counts: dict[str, int] = {}
        for ct in window.instances:
            where, params = _instance_filters(ct, skipped)
            n = int(conn.query_one(
                f"SELECT COUNT(*) FROM {quote(window.database)}.[cdc].{quote(ct.capture_instance + '_CT')} WHERE "
                f"[__$start_lsn] = ? AND [__$operation] <> 3{where}", (tx, *params),
                what=f"reading capture instance {ct.capture_instance!r}") or 0)
            table = window.entries.get(ct.source)
            if n and table is not None:
                collection = self.entry(table).collection
                counts[collection] = counts.get(collection, 0) + n
        if not counts:
            return
        state.dispatcher.resume_transaction(counts)
        state.tx_id = lsn_to_str(tx)
        state.tx_ts_ms = int(time.time() * 1000)


def _instance_filters(ct: Any, skipped: list[str]) -> tuple[str, list[Any]]:
    where, params = "", []
    if ct.stop_lsn is not None:
        where += " AND [__$start_lsn] < ?"
        params.append(ct.stop_lsn)
    if skipped:
        where += f" AND [__$operation] NOT IN ({','.join(skipped)})"
    return where, params


def _last_commit_before(conn: SqlServerConnection, window: StreamWindow, lsn: bytes, skipped: list[str], *,
                        inclusive: bool = False) -> bytes | None:
    """The commit LSN of the database's last change of the window's capture instances before `lsn`
    (or at it: `inclusive`), not counting `skipped` operations."""
    best: bytes | None = None
    below = "<=" if inclusive else "<"
    for ct in window.instances:
        where, params = _instance_filters(ct, skipped)
        value = conn.query_one(
            f"SELECT MAX([__$start_lsn]) FROM {quote(window.database)}.[cdc].{quote(ct.capture_instance + '_CT')} "
            f"WHERE [__$start_lsn] {below} ?{where}", (lsn, *params),
            what=f"reading capture instance {ct.capture_instance!r}")
        if value is not None and (best is None or bytes(value) > best):
            best = bytes(value)
    return best


def chunk_statement(chunk: Any, columns: list[Any]) -> tuple[str, list[Any]]:
    """The chunk's SELECT: the standalone snapshot's statement, narrowed to the chunk's key range
    (`lower < key <= upper`, compared column by column: T-SQL has no row comparison; the bounds
    are the keys' text, converted by SQL Server to the column's type)."""
    if chunk.select:
        return snap.override_statement(chunk.select, columns), []
    statement = snap.select_statement(chunk.table.id, columns)
    key = list(chunk.key_columns)
    parts: list[str] = []
    params: list[Any] = []
    for op, bound in ((">", chunk.lower), ("<=", chunk.upper)):
        if bound is None or not key:
            continue
        condition, values = _row_comparison(key, list(bound), op)
        parts.append(condition)
        params += values
    if parts:
        statement += " WHERE " + " AND ".join(parts)
    return statement, params


def _row_comparison(key: list[str], bound: list[Any], op: str) -> tuple[str, list[Any]]:
    """(k1, k2, ...) op (b1, b2, ...) for `>` or `<=` in lexicographic order, as OR of ANDs."""
    strict = ">" if op == ">" else "<"
    terms: list[str] = []
    params: list[Any] = []
    for i in range(len(key)):
        equal = [f"{quote(k)} = ?" for k in key[:i]]
        last = i == len(key) - 1
        comparison = f"{quote(key[i])} {op if last else strict} ?"
        terms.append("(" + " AND ".join([*equal, comparison]) + ")")
        params += [*bound[:i], bound[i]]
    return "(" + " OR ".join(terms) + ")", params




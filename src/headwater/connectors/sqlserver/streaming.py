"""Streaming: Debezium's loop over the change tables of every database (spec §1.7, MS-53..62;
SqlServerStreamingChangeEventSource.executeIteration of 3.6).

One iteration per database, the databases of `database.names` in turn; the loop sleeps
`poll.interval.ms` only after a round in which no database streamed. An iteration:

1. every `max(60 s, 3 × poll.interval.ms)`: commit (keeps tempdb small; read-only replicas need a
   new transaction to see new changes — every iteration with ApplicationIntent=ReadOnly);
2. with transaction metadata, after 2 × the capture job's polling interval without changes: the
   pending END when the capture job's last scan was empty;
3. `toLsn`: the last transaction's LSN, or the N-th after the last processed one
   (`max.iteration.transactions`); none: "no maximum LSN" (the Agent status query, once);
4. nothing past the last processed commit: a heartbeat, done;
5. `fromLsn` = fn_cdc_increment_lsn(last commit), except the first iteration after a restart
   (the last transaction is read again and de-duplicated by position);
6. pending schema-change checkpoints (capture instances starting in the window) are migrated;
   new capture instances re-read the list (CREATE for new tables, a second instance of a table
   gets the first's stop LSN);
7. each capture instance's changes in [max(start, from), to], merged by (commit LSN, change LSN):
   restart de-duplication, instances past their stop LSN skipped, update pairs (3 then 4) as one
   `u` counting 2 for `event_serial_no`, 1 = `d`, 2 = `c`;
8. the window is done: the last processed position is `toLsn`; the read transaction ends.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from headwater.connectors.sqlserver import metadata as md
from headwater.connectors.sqlserver.changes import (
    OP_DELETE as CDC_DELETE,
)
from headwater.connectors.sqlserver.changes import (
    OP_INSERT,
    OP_UPDATE_AFTER,
    OP_UPDATE_BEFORE,
    ChangeRow,
    change_rows,
    column_changed,
    is_max_column,
)
from headwater.connectors.sqlserver.connection import SqlServerConnection
from headwater.connectors.sqlserver.history import DatabaseSchema, TableEntry, data_collection
from headwater.connectors.sqlserver.lsn import ZERO, describe, lsn_to_str
from headwater.connectors.sqlserver.source_info import DatabaseOffset, epoch_micros, source_block
from headwater.engine.connector import ConnectorError, connector_error
from headwater.engine.dispatcher import EventDispatcher
from headwater.engine.transaction import OFFSET_TRANSACTION_ID, load_open_transaction, store_open_transaction
from headwater.model.envelope import OP_CREATE, OP_DELETE, OP_UPDATE
from headwater.model.values import same_value

log = logging.getLogger(__name__)

_MISSING_FUNCTION = re.compile(r"Invalid object name '(.*)\.cdc\.fn_cdc_get_all_changes_(.*)'\.")
_MISSING_TABLE = re.compile(r"Invalid object name '(.*)\.cdc\.(.*)_CT'\.")


@dataclass
class StreamSettings:
    server: str
    databases: tuple[str, ...]
    query_mode: str                       # data.query.mode
    max_transactions: int                 # max.iteration.transactions
    page_rows: int                        # streaming.fetch.size
    fetch_size: int                       # query.fetch.size
    poll_interval_s: float                # poll.interval.ms
    skipped: tuple[str, ...]              # skipped.operations (c, u, d)
    agent_status_query: str | None        # database.sqlserver.agent.status.query
    read_only: bool                       # ApplicationIntent=ReadOnly
    heartbeat_interval_s: float           # heartbeat.interval.ms
    heartbeat_topic: str | None
    provide_transaction_metadata: bool
    failure_mode: str = "fail"            # event.processing.failure.handling.mode
    skip_unchanged: bool = False          # skip.messages.without.change


@dataclass
class DatabaseState:
    """One database's streaming context (Debezium's SqlServerStreamingExecutionContext)."""

    database: str
    conn: SqlServerConnection
    offset: DatabaseOffset
    dispatcher: EventDispatcher
    last_processed: tuple[bytes | None, bytes | None]
    increase_from_lsn: bool
    tables: list[md.ChangeTable] | None = None
    checkpoints: list[md.ChangeTable] = field(default_factory=list)
    not_monotonic: bool = False
    last_commit_time: float = field(default_factory=time.monotonic)
    tx_id: str | None = None             # the transaction whose END is pending
    tx_ts_ms: int = 0
    end_timer: float | None = None


class Streamer:
    """Streams every database of the connector into the engine's queue."""

    def __init__(self, settings: StreamSettings, schema: DatabaseSchema, conns: dict[str, SqlServerConnection],
                 offsets: dict[str, DatabaseOffset], emit: Callable[[list[Any]], None],
                 dispatcher_factory: Callable[[Callable[[Any], None], Callable[[], dict[str, Any]]], EventDispatcher],
                 make_offset: Callable[[dict[str, DatabaseOffset]], dict[str, Any]],
                 capture_polling_interval_s: float = 5.0) -> None:
        self.settings = settings
        self.schema = schema
        self.offsets = offsets
        self._emit_batch = emit
        self._make_offset = make_offset
        self._pending: list[Any] = []
        self.check_agent = True
        self.end_delay_s = 2 * capture_polling_interval_s
        self.commit_every_s = max(60.0, 3 * settings.poll_interval_s)
        self._last_heartbeat = time.monotonic()
        # heartbeat.action.query's runner (database -> None; failures are its own to report)
        self.heartbeat_action: Callable[[str], None] | None = None
        self._last_marked: dict[str, Any] | None = None
        self.states: dict[str, DatabaseState] = {}
        self._raw: dict[tuple[int, str], _Raw] = {}
        # see transaction_ended: with several databases, a connection to the login's default database
        self._metadata_conn: SqlServerConnection | None = None
        for db in settings.databases:
            offset = offsets[db]
            dispatcher = dispatcher_factory(self._pending.append, self.current_offset)
            self.states[db] = DatabaseState(
                db, conns[db], offset, dispatcher, (offset.commit_lsn, offset.change_lsn),
                # the window starts after the stored commit only right after a snapshot: after a
                # restart the last transaction may not have been streamed whole
                increase_from_lsn=offset.snapshot_completed)
            if settings.provide_transaction_metadata:
                _restore_transaction(self.states[db])
            # the transaction keys are written from the dispatcher's state from now on
            offset.extra = {k: v for k, v in offset.extra.items() if not k.startswith("transaction_")}
            log.info("database %s: last position recorded in offsets is %s(%s)[%d]", db, describe(offset.commit_lsn),
                     describe(offset.change_lsn), offset.event_serial_no)

    # -- offsets -----------------------------------------------------------------------------------

    def current_offset(self) -> dict[str, Any]:
        offset = self._make_offset(self.offsets)
        for db, entry in offset["databases"].items():
            state = self.states.get(db) if hasattr(self, "states") else None
            if state is not None and not entry.get("snapshot"):
                entry.update(_transaction_keys(state, self.settings.provide_transaction_metadata))
        return offset

    def _flush(self) -> None:
        if self._pending:
            batch = self._pending[:]
            self._pending.clear()
            self._emit_batch(batch)

    def _heartbeat(self, state: DatabaseState, *, force: bool = False) -> None:
        """Debezium's dispatchHeartbeatEvent: a heartbeat record once `heartbeat.interval.ms` has
        passed since the last; the position itself (no record) otherwise."""
        now = time.monotonic()
        s = self.settings
        if s.heartbeat_topic is not None and s.heartbeat_interval_s > 0 and \
                (force or now - self._last_heartbeat >= s.heartbeat_interval_s):
            self._last_heartbeat = now
            if self.heartbeat_action is not None:  # heartbeat.action.query, before the record (Debezium's order)
                self.heartbeat_action(state.database)
            state.dispatcher.dispatch_heartbeat(self.current_offset(), s.heartbeat_topic, s.server)
        else:
            offset = self.current_offset()
            if offset != self._last_marked:  # an unchanged position need not be stored again
                self._last_marked = offset
                state.dispatcher.dispatch_offset(offset)

    # -- the loop ------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            streamed = False
            for db in self.settings.databases:
                if stop.is_set():
                    break
                state = self.states[db]
                if self.iterate(state, stop):
                    streamed = True
                self._flush()
            if not streamed:
                stop.wait(self.settings.poll_interval_s)

    def iterate(self, state: DatabaseState, stop: threading.Event) -> bool:
        s = self.settings
        db = state.database
        conn = state.conn
        if s.read_only or time.monotonic() - state.last_commit_time >= self.commit_every_s:
            conn.commit()
            state.last_commit_time = time.monotonic()
        self._end_transaction_if_idle(state)
        to_lsn = md.to_lsn(conn, db, state.last_processed[0], s.max_transactions)
        if to_lsn is None:
            if self.check_agent:
                try:
                    if not md.agent_running(conn, db, s.agent_status_query):
                        log.error("No maximum LSN recorded in the database; SQL Server Agent is not running")
                except ConnectorError as exc:
                    if exc.retriable:
                        raise
                    log.warning("No maximum LSN recorded in the database; this may happen if there are no changes "
                                "recorded in the change table yet or low activity database where the cdc clean up "
                                "job periodically clears entries from the cdc tables. Otherwise, this may be an "
                                "indication that the SQL Server Agent is not running. You should follow the "
                                "documentation on how to configure SQL Server Agent running status query.")
                    log.warning("Cannot query the status of the SQL Server Agent: %s", exc)
                    conn.rollback()
                self.check_agent = False
            # the cleanup may have emptied the change tables (and their LSN mapping) past the position
            last = state.last_processed[0]
            if last is not None and state.tables:
                self._check_cleanup(state, md.increment_lsn(conn, db, last) if state.increase_from_lsn else last)
                conn.rollback()
            return False
        self.check_agent = True
        last_commit = state.last_processed[0]
        if last_commit is not None and to_lsn <= last_commit and state.increase_from_lsn:
            self._heartbeat(state)
            return False
        if last_commit is not None and state.increase_from_lsn:
            from_lsn = md.increment_lsn(conn, db, last_commit)
        else:
            from_lsn = last_commit
        state.increase_from_lsn = True
        if from_lsn is not None and state.tables:
            self._check_cleanup(state, from_lsn)

        while state.checkpoints:
            self._migrate(state, state.checkpoints.pop(0))
        if state.tables is None or md.new_change_tables(conn, db, from_lsn or ZERO, to_lsn) > 0:
            state.tables = self._tables_to_query(state, to_lsn)
            for ct in state.tables:
                if ct.start_lsn is not None and (from_lsn or ZERO) <= ct.start_lsn <= to_lsn \
                        and ct not in state.checkpoints:
                    log.info("Schema will be changed for %s", ct)
                    state.checkpoints.append(ct)
            state.checkpoints.sort(key=lambda c: c.start_lsn or ZERO)

        try:
            any_data = self._merge(state, from_lsn, to_lsn, stop)
        except _InstanceGone as gone:
            log.info("Table is no longer captured with capture instance %s", gone.capture_instance)
            state.tables = [t for t in state.tables if t.capture_instance != gone.capture_instance]
            conn.rollback()
            return True
        if stop.is_set():
            return True
        state.last_processed = (to_lsn, None)
        conn.rollback()  # ends the read transaction (otherwise CDC could not be disabled for tables)
        if not any_data:
            self._set_position(state, to_lsn, None, 0)
            self._heartbeat(state)
        return True

    # -- capture instances ---------------------------------------------------------------------------

    def _check_cleanup(self, state: DatabaseState, from_lsn: bytes) -> None:
        """Spec §8: the cleanup job moves a capture instance's start LSN forward; past the window's
        start, changes this connector has not read are gone. Debezium reads on from the new start
        without a word; here it stops (a new snapshot follows where snapshot.mode takes one)."""
        db = state.database
        current = {name: (bytes(lsn) if lsn is not None else None)
                   for name, lsn in state.conn.query(md.sql(md.GET_START_LSNS, db),
                                                     what=f"reading cdc.change_tables of database {db!r}")}
        for ct in state.tables or ():
            if ct.start_lsn is None or ct.start_lsn > from_lsn:
                continue  # an instance that starts after the window's start: nothing of it was missed
            start = current.get(ct.capture_instance)
            if start is not None and start > from_lsn:
                raise connector_error(
                    f"database {db!r}: the CDC cleanup moved the start of capture instance {ct.capture_instance!r} to "
                    f"{describe(start)}, past {describe(from_lsn)} where streaming goes on: the changes in between "
                    "were removed before this connector read them and are lost for it. "
                    + ("Restarting takes a new snapshot (snapshot.mode="
                       f"{self.snapshot_mode_name})" if self.snapshots_when_lost else
                       "Restart with snapshot.mode=when_needed to take a new snapshot (or raise the cleanup job's "
                       "retention above the connector's lag)"),
                    retriable=self.snapshots_when_lost)

    snapshot_mode_name = "initial"
    snapshots_when_lost = False

    def _tables_to_query(self, state: DatabaseState, to_lsn: bytes) -> list[md.ChangeTable]:
        """Debezium's getChangeTablesToQuery: the included tables' instances; two instances of a
        table: the older stops where the newer starts, and the newer reads with its own schema;
        a table seen for the first time gets a CREATE schema-change event."""
        db = state.database
        instances = md.change_tables(state.conn, db, to_lsn)
        if not instances:
            log.warning("No table has enabled CDC or security constraints prevents getting the list of change tables")
        by_table: dict[Any, list[md.ChangeTable]] = {}
        for ct in instances:
            if self.schema_filter(ct.source):
                by_table.setdefault(ct.source, []).append(ct)
            else:
                log.info("CDC is enabled for table %s but the table is not on connector's table include list", ct)
        if not by_table:
            log.warning("No table on connector's include list has enabled CDC, tables on include list do not contain "
                        "any table with CDC enabled or no table match the include/exclude filter(s)")
        out: list[md.ChangeTable] = []
        catalog: md.CatalogTables | None = None
        for source, captures in by_table.items():
            current = captures[0]
            if len(captures) > 1:
                current, future = sorted(captures[:2], key=lambda c: c.start_lsn or ZERO)
                current.stop_lsn = future.start_lsn
                catalog = catalog or md.read_catalog(state.conn, db)
                future.table = catalog.table(source, future.captured_columns)
                out.append(future)
                log.info("Multiple capture instances present for the same table: %s and %s", current, future)
            if self.schema.table_for(source) is None:
                log.info("Table %s is new to be monitored by capture instance %s", source, current.capture_instance)
                catalog = catalog or md.read_catalog(state.conn, db)
                table = catalog.table(source, current.captured_columns)
                if table is not None:
                    now_us = int(time.time() * 1_000_000)
                    self._schema_event(state, "CREATE", table, now_us)
            entry = self.schema.table_for(source)
            current.table = entry.table if entry is not None else None
            out.append(current)
        return out

    schema_filter: Callable[[Any], bool] = staticmethod(lambda table_id: True)  # type: ignore[assignment]

    def _schema_event(self, state: DatabaseState, kind: str, table: Any, ts_us: int) -> TableEntry:
        offset = state.offset
        source = source_block(self.settings.server, state.database, table.id.schema, table.id.table, ts_us=ts_us,
                              snapshot="false", commit_lsn=offset.commit_lsn, change_lsn=offset.change_lsn,
                              event_serial_no=offset.event_serial_no)
        return self.schema.schema_change(kind, table, source=source, offset=self.current_offset(),
                                         partition_offset=offset.to_dict(), emit=self._pending.append, ddl="N/A")

    def _migrate(self, state: DatabaseState, ct: md.ChangeTable) -> None:
        """Debezium's migrateTable: the source table's structure for the new capture instance; an
        ALTER schema-change event when it differs from the one in use."""
        log.info("Migrating schema to %s", ct)
        catalog = md.read_catalog(state.conn, state.database)
        table = catalog.table(ct.source, ct.captured_columns)
        old = self.schema.table_for(ct.source)
        if table is None or (old is not None and old.table == table):
            log.info("Migration skipped, no table schema changes detected.")
            return
        self._schema_event(state, "ALTER", table, int(time.time() * 1_000_000))
        ct.table = table

    # -- the merge -----------------------------------------------------------------------------------

    def _merge(self, state: DatabaseState, from_lsn: bytes | None, to_lsn: bytes, stop: threading.Event) -> bool:
        start_position = (state.offset.commit_lsn or ZERO, state.offset.change_lsn or ZERO)
        start_serial = state.offset.event_serial_no
        serial_in_initial_tx = 1
        pointers = []
        for ct in state.tables or ():
            if ct.table is None:
                continue
            pointer = _Pointer(ct, self._rows(state, ct, from_lsn, to_lsn))
            pointer.next()
            pointers.append(pointer)
        any_data = False
        while not stop.is_set():
            smallest: _Pointer | None = None
            for p in pointers:
                if p.row is None:
                    continue
                if smallest is None or p.row.position() < smallest.row.position():  # type: ignore[union-attr]
                    smallest = p
            if smallest is None:
                break
            row = smallest.row
            assert row is not None
            if row.commit_lsn is None or row.change_lsn is None:
                log.error("Skipping change %s as its LSN is NULL which is not expected", smallest.ct)
                smallest.next()
                continue
            if smallest.new_transaction() and state.not_monotonic:
                log.info("Resetting changesStoppedBeingMonotonic as transaction changes")
                state.not_monotonic = False
            if smallest.went_back():
                log.info("Disabling skipping changes due to not monotonic order of changes")
                state.not_monotonic = True
            position = row.position()
            if not state.not_monotonic and position < start_position:
                smallest.next()
                continue
            if not state.not_monotonic and position == start_position and serial_in_initial_tx <= start_serial:
                serial_in_initial_tx += 1
                smallest.next()
                continue
            ct = smallest.ct
            if ct.stop_lsn is not None and ct.stop_lsn <= row.commit_lsn:
                smallest.next()
                continue
            any_data = True
            if state.checkpoints and row.commit_lsn >= (state.checkpoints[0].start_lsn or ZERO):
                self._migrate(state, state.checkpoints.pop(0))
            operation = row.operation
            data = row
            after = None
            count = 1
            if operation == OP_UPDATE_BEFORE:
                if not smallest.next() or smallest.row is None or smallest.row.operation != OP_UPDATE_AFTER:
                    raise ConnectorError(
                        f"the update before event at {lsn_to_str(row.commit_lsn)}({lsn_to_str(row.change_lsn)}) for "
                        f"table {data_collection(ct.source)} was not followed by the update after event (as Debezium, "
                        "Headwater stops: report this with the change table rows around this LSN)")
                after = smallest.row
                count = 2
            elif operation not in (CDC_DELETE, OP_INSERT):
                raise ConnectorError(f"received a change of unexpected operation {operation} in capture instance "
                                     f"{ct.capture_instance!r} at {lsn_to_str(row.commit_lsn)}")
            self._set_position(state, row.commit_lsn, row.change_lsn, count)
            self._dispatch(state, ct, operation, data, after)
            smallest.next()
            if len(self._pending) >= 512:
                self._flush()
        return any_data

    def _rows(self, state: DatabaseState, ct: md.ChangeTable, from_lsn: bytes | None,
              to_lsn: bytes) -> Iterator[ChangeRow]:
        start = ct.start_lsn if ct.start_lsn is not None and (from_lsn is None or ct.start_lsn > from_lsn) \
            else from_lsn
        if start is None:
            start = md.min_lsn(state.conn, state.database, ct.capture_instance) or ZERO
        assert ct.table is not None
        columns = [c for c in ct.table.columns if c.name in set(ct.captured_columns)]
        try:
            yield from change_rows(state.conn, state.database, ct.capture_instance, columns,
                                   mode=self.settings.query_mode, from_lsn=start, to_lsn=to_lsn,
                                   skipped=self.settings.skipped, page_rows=self.settings.page_rows,
                                   fetch_size=self.settings.fetch_size)
        except ConnectorError as exc:
            # a capture instance disabled while streaming: function mode fails on its function
            # (Debezium drops the instance); direct mode on its change table (Debezium 3.6 fails
            # and restarts the task, which then no longer sees the instance: the same events)
            text = str(exc)
            m = _MISSING_FUNCTION.search(text) or _MISSING_TABLE.search(text)
            if m and m.group(1).lower() == state.database.lower():
                raise _InstanceGone(m.group(2)) from None
            raise

    def _set_position(self, state: DatabaseState, commit: bytes | None, change: bytes | None, count: int) -> None:
        """Debezium's setChangePosition: the event serial number counts up at one position."""
        offset = state.offset
        if (offset.commit_lsn, offset.change_lsn) == (commit, change):
            offset.event_serial_no += count
        else:
            offset.event_serial_no = count
        offset.commit_lsn, offset.change_lsn = commit, change
        offset.snapshot = False
        offset.snapshot_completed = False

    def _dispatch(self, state: DatabaseState, ct: md.ChangeTable, operation: int, row: ChangeRow,
                  after_row: ChangeRow | None) -> None:
        entry = self.schema.table_for(ct.source)
        table = ct.table
        if entry is None or table is None:
            return
        ts_us = epoch_micros(row.commit_time) if row.commit_time is not None else int(time.time() * 1_000_000)
        offset = state.offset
        source = source_block(self.settings.server, state.database, ct.source.schema or "", ct.source.table,
                              ts_us=ts_us, snapshot="false", commit_lsn=offset.commit_lsn,
                              change_lsn=offset.change_lsn, event_serial_no=offset.event_serial_no)
        tx_id = lsn_to_str(row.commit_lsn)
        ts_ms = ts_us // 1000
        if self.settings.provide_transaction_metadata:
            if state.tx_id is not None and state.tx_id != tx_id:
                state.dispatcher.transaction_end(state.tx_id, ts_ms)
            state.tx_id = tx_id
            state.tx_ts_ms = ts_ms
        state.end_timer = time.monotonic()
        key = (id(entry), ct.capture_instance)
        raw = self._raw.get(key)
        if raw is None or raw.entry is not entry:
            raw = self._raw[key] = _Raw(entry, ct)
        try:
            if operation == OP_INSERT:
                op, before, after = OP_CREATE, None, entry.schema.row(raw(row))
            elif operation == CDC_DELETE:
                op, before, after = OP_DELETE, entry.schema.row(raw(row)), None
            else:
                assert after_row is not None
                op, before, after = OP_UPDATE, entry.schema.row(raw(row)), entry.schema.row(raw(after_row))
        except Exception as exc:  # a value the converters cannot take
            event_failed(self.settings.failure_mode, entry.collection, exc,
                         f"at commit LSN {describe(offset.commit_lsn)}, change LSN {describe(offset.change_lsn)}")
            return
        if op == OP_UPDATE and self.settings.skip_unchanged and same_value(before, after):
            return  # skip.messages.without.change: no captured column changed
        state.dispatcher.dispatch_change(entry.schema, entry.topic, op, before, after, source,
                                         collection=entry.collection, tx_id=tx_id if
                                         self.settings.provide_transaction_metadata else None, tx_ts_ms=ts_ms)

    def _end_transaction_if_idle(self, state: DatabaseState) -> None:
        """Debezium's endTransaction: with transaction metadata, the pending END once twice the
        capture job's polling interval passed without changes and its last scan was empty."""
        if not self.settings.provide_transaction_metadata or state.tx_id is None or state.end_timer is None:
            return
        if time.monotonic() - state.end_timer < self.end_delay_s:
            return
        if self.transaction_ended(state):
            state.dispatcher.transaction_end(state.tx_id, state.tx_ts_ms)
            state.tx_id = None
            state.end_timer = None
            self._flush()

    def transaction_ended(self, state: DatabaseState) -> bool:
        """Debezium's didTransactionEnd on its metadata connection: whether the capture job's last
        scan was empty. With one database that connection is in the database; with several it stays
        in the login's default database (usually master, which has no capture job, so Debezium never
        sends the idle END there — only the next transaction of the database ends the open one)."""
        if len(self.settings.databases) == 1:
            return md.scan_ended_empty(state.conn)
        if self._metadata_conn is None or self._metadata_conn.closed:
            try:
                self._metadata_conn = SqlServerConnection(state.conn.config, None, purpose=state.conn.purpose)
            except Exception as exc:  # as the query's own errors: only logged (Debezium's)
                log.warning("could not connect to the login's default database to ask whether the last "
                            "transaction ended: %s", exc)
                return False
        conn = self._metadata_conn
        ended = md.scan_ended_empty(conn)
        try:
            conn.rollback()  # ends the read transaction the query opened
        except ConnectorError as exc:
            log.warning("the default database's connection failed: %s", exc)
            conn.close()  # the next check connects again
        return ended

    def close(self) -> None:
        """Closes the connection transaction_ended opened (the database connections are the owner's)."""
        if self._metadata_conn is not None:
            self._metadata_conn.close()
            self._metadata_conn = None


def _transaction_keys(state: DatabaseState, provided: bool) -> dict[str, Any]:
    """Debezium's TransactionContext.store: the open transaction's id and its per-collection
    event counts (what a restart inside the transaction continues from)."""
    counts = state.dispatcher.open_transaction()
    keys: dict[str, Any] = {OFFSET_TRANSACTION_ID: None}
    if provided and state.tx_id is not None and counts is not None:
        store_open_transaction(keys, state.tx_id, counts)
    return keys


def _restore_transaction(state: DatabaseState) -> None:
    """Debezium's TransactionContext.load: a stored open transaction goes on where it stopped (no
    second BEGIN; total and per-collection orders continue)."""
    stored = load_open_transaction(state.offset.extra)
    if stored is None:
        return
    tx_id, counts = stored
    state.dispatcher.resume_transaction(counts)
    state.tx_id = tx_id
    state.tx_ts_ms = int(time.time() * 1000)
    state.end_timer = time.monotonic()


class _InstanceGone(Exception):
    def __init__(self, capture_instance: str) -> None:
        super().__init__(capture_instance)
        self.capture_instance = capture_instance


class _Pointer:
    """One capture instance's rows, one at a time (Debezium's SqlServerChangeTablePointer)."""

    def __init__(self, ct: md.ChangeTable, rows: Iterator[ChangeRow]) -> None:
        self.ct = ct
        self._rows = rows
        self.row: ChangeRow | None = None
        self.previous: ChangeRow | None = None

    def next(self) -> bool:
        self.previous = self.row
        self.row = next(self._rows, None)
        return self.row is not None

    def new_transaction(self) -> bool:
        return self.previous is not None and self.row is not None and self.row.commit_lsn > self.previous.commit_lsn

    def went_back(self) -> bool:
        return self.previous is not None and self.row is not None and self.previous.position() > self.row.position()


class _Raw:
    """A change row's captured values in the table's column order (columns the capture instance
    lacks are null; LOB columns an update left out are the converters' unavailable marker)."""

    def __init__(self, entry: TableEntry, ct: md.ChangeTable) -> None:
        self.entry = entry
        captured = list(ct.captured_columns)
        selected = [c for c in entry.table.columns if c.name in set(captured)]
        index = {c.name: i for i, c in enumerate(selected)}
        self.slots = [index.get(c.name) for c in entry.table.columns]
        self.mask_bits = [captured.index(c.name) if c.name in index else None for c in entry.table.columns]
        self.max_columns = [is_max_column(c) for c in entry.table.columns]
        from headwater.connectors.sqlserver.types import UNAVAILABLE
        self.unavailable = UNAVAILABLE
        self.any_max = any(self.max_columns)

    def __call__(self, row: ChangeRow) -> list[Any]:
        values = row.values
        out = [None if slot is None else values[slot] for slot in self.slots]
        if self.any_max and row.operation in (OP_UPDATE_BEFORE, OP_UPDATE_AFTER):
            for i, is_max in enumerate(self.max_columns):
                bit = self.mask_bits[i]
                if is_max and out[i] is None and bit is not None and not column_changed(row.update_mask, bit):
                    out[i] = self.unavailable
        return out


def event_failed(mode: str, collection: str, exc: BaseException, where: str) -> None:
    """Debezium's `event.processing.failure.handling.mode` for an event that cannot be built:
    fail stops the connector naming the table and position, warn logs it and leaves the event
    out, skip leaves it out (logged at debug level, as Debezium does)."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if mode == "fail":
        raise ConnectorError(f"cannot process the change event of table {collection} {where}: {reason}. "
                             "event.processing.failure.handling.mode=fail stops here; set it to warn or skip to "
                             "leave such events out")
    log.log(logging.WARNING if mode == "warn" else logging.DEBUG,
            "skipped the change event of table %s %s (event.processing.failure.handling.mode=%s): %s", collection,
            where, mode, reason)

"""SQL Server's side of a run for the engine's coordinator (see :mod:`headwater.engine.source`):
positions, the snapshot source and the streaming source over every database of `database.names`.

Debezium keeps one partition per database and runs their snapshots one after the other, each in
its own transaction with its own maximum LSN, then one streaming loop over all of them. The
engine plans one snapshot with a partition per database (each captured table says its database
and its `schema.table` name, what `table.include.list` order is matched on): the databases in
Debezium's partition order, the tables of each in Debezium's order, the `source.snapshot` markers
(`first` … `last`) per database. Here each chunk is read as given; a database's snapshot steps
(isolation, locks, maximum LSN, structure, schema events) are done once, before its first chunk,
and its transaction is ended when the next database's chunks begin or the snapshot completes.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.connectors.sqlserver import metadata as md
from headwater.connectors.sqlserver import snapshot as snap
from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.history import DatabaseSchema, TableEntry, data_collection
from headwater.connectors.sqlserver.incremental import same_table
from headwater.connectors.sqlserver.lsn import describe, lsn_to_str
from headwater.connectors.sqlserver.source_info import (
    DatabaseOffset,
    epoch_micros,
    make_offset,
    offset_sort_key,
    parse_offset,
    partition_order,
    source_block,
)
from headwater.connectors.sqlserver.streaming import Streamer, event_failed
from headwater.engine.connector import ConnectorError, Emit
from headwater.engine.snapshot_plan import (
    Bound,
    SnapshotChunk,
    snapshot_marker,
)
from headwater.engine.snapshot_policy import Stored
from headwater.engine.source import CaptureSource, Offset, SnapshotPoint, UnitStream
from headwater.model.envelope import OP_READ
from headwater.relational.table import Table, TableId

if TYPE_CHECKING:
    from headwater.connectors.sqlserver.connector import SqlServerConnector

log = logging.getLogger(__name__)


@dataclass
class CapturedTable:
    """A table whose rows the snapshot reads (the engine's SnapshotTable)."""

    database: str
    table: Table
    collection: str                       # "db.schema.table"
    change_table: md.ChangeTable | None   # its newest capture instance (None: CDC not enabled)

    @property
    def raw_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.table.columns)

    @property
    def partition(self) -> str:
        """The plan's partition: the table's database (Debezium snapshots each on its own)."""
        return self.database

    @property
    def order_name(self) -> str:
        """The name `table.include.list` order is matched on (Debezium's table id mapper: schema.table)."""
        return self.table.id.identifier()


@dataclass
class _DatabaseSnapshot:
    """One database's snapshot in progress."""

    database: str
    started: bool = False
    done: bool = False
    lsn: bytes | None = None
    tables: dict[TableId, TableEntry] = field(default_factory=dict)


class SqlServerCaptureSource(CaptureSource):
    def __init__(self, connector: SqlServerConnector, *, parallel: bool) -> None:
        self.connector = connector
        self.config = connector.config
        self.parallel = parallel
        self.conns: dict[str, SqlServerConnection] = {}
        self.databases: list[str] = []
        self.schema: DatabaseSchema | None = None
        self._catalogs: dict[str, md.CatalogTables] = {}
        self._captured: dict[str, list[CapturedTable]] = {}
        self._db_snapshots: dict[str, _DatabaseSnapshot] = {}
        # databases whose stored position carries over a snapshot of the others (Debezium decides
        # per database: one whose snapshot completed streams on while another's is taken again)
        self._kept: dict[str, DatabaseOffset] = {}
        # resumable initial snapshot: the LSN each interrupted database's snapshot streams from
        self._resume_lsns: dict[str, bytes] = {}
        self._heartbeat_conns: dict[str, SqlServerConnection] = {}
        self._deferred: list[Any] = []             # records for the start of streaming (schema events)
        self._schema_loaded = False
        self._streamer: Streamer | None = None
        # signals (incremental.py): the connector's side of incremental and blocking snapshots, and
        # the stream position a blocking snapshot's records carry, per database (None: not blocking)
        self._incremental: Any = None
        self._blocking_at: dict[str, DatabaseOffset] | None = None
        # record_positions' count of the driver's records at the last position (prefix, changes',
        # schema changes', and the snapshot's schema changes handed over at the stream's start)
        self._driver_positions: tuple[str, int, int, int] = ("", 0, 0, 0)

    # -- set-up ----------------------------------------------------------------------------------

    def open(self) -> None:
        if self.conns:
            return
        c = self.connector
        names = []
        for configured in c.database_names:
            conn = SqlServerConnection(self.config, configured, purpose="headwater")
            real = md.real_database_name(conn, configured)
            conn.commit()
            names.append(real)
            self.conns[real] = conn
        self.databases = partition_order(c.server, names)
        c.connected(self.databases)
        if self.schema is not None and self.schema.history is not None:
            self.schema.history.stop()
        self.schema = c.database_schema()
        self._schema_loaded = False

    def _conn(self, database: str) -> SqlServerConnection:
        conn = self.conns.get(database)
        if conn is None or conn.closed:
            conn = self.conns[database] = SqlServerConnection(self.config, database)
        return conn

    # -- positions -------------------------------------------------------------------------------

    def _parse(self, offset: Offset) -> dict[str, DatabaseOffset]:
        try:
            return parse_offset(offset, self.databases)
        except (ValueError, TypeError) as exc:
            raise ConnectorError(f"stored offset for server {self.connector.server!r} is invalid ({exc}); remove the "
                                 "offsets file to start over") from None

    def stored(self, offset: Offset | None, *, in_snapshot: bool = False) -> tuple[Stored, bool]:
        if offset is None:
            return Stored.NOTHING, True
        entries = self._parse(offset)
        missing = [db for db in self.databases if db not in entries]
        unfinished = [db for db, e in entries.items() if e.snapshot and not e.snapshot_completed]
        if in_snapshot or missing or unfinished:
            # a snapshot that did not finish (or a database added to database.names since): taken
            # again for those databases; the others' positions must still be held to carry over
            done = {db: e for db, e in entries.items() if db in self.databases and db not in unfinished}
            return Stored.UNFINISHED_SNAPSHOT, in_snapshot or not self._lost(done)
        return Stored.POSITION, not self._lost(entries)

    def _lost(self, entries: dict[str, DatabaseOffset]) -> dict[str, bytes]:
        """The databases whose change tables no longer reach back to the stored position: the
        cleanup job removed changes past it (Debezium's validateLogPosition: the oldest start LSN
        of the capture instances must not lie after the stored commit LSN)."""
        lost = {}
        for db, entry in entries.items():
            if entry.commit_lsn is None:
                continue
            oldest = md.min_lsn_of_all(self._conn(db), db)
            self._conn(db).rollback()
            if oldest is not None and oldest > entry.commit_lsn:
                lost[db] = oldest
        return lost

    def lost_error(self, offset: Offset, *, resumer: str | None = None,
                   fresh_start: str = "remove the offsets file") -> ConnectorError:
        entries = self._parse(offset)
        lost = self._lost(entries)
        resumer = resumer or f"the stored offset of server {self.connector.server!r}"
        parts = [f"database {db!r}: {resumer} resumes at {describe(entries[db].commit_lsn)} but the change tables now "
                 f"start at {describe(oldest)}" for db, oldest in lost.items()]
        where = "; ".join(parts) or f"{resumer} lies before what the change tables hold"
        return ConnectorError(
            f"{where} — the CDC cleanup job removed changes that were not streamed yet, so they are lost for this "
            "connector. Set snapshot.mode=when_needed to take a new snapshot (or always), or, accepting the loss, "
            f"{fresh_start} and start with snapshot.mode=no_data")

    def sort_key(self, offset: Offset) -> tuple[Any, ...]:
        return offset_sort_key(offset, self.databases or self.connector.database_names)

    def resume_offset(self, offset: Offset | None) -> Offset:
        mode = self.connector.snapshot_mode_name
        if offset is not None:
            if mode == "recovery":
                # rebuild the schema history from the tables as they are now (Debezium's
                # RecoverySnapshotter: schema only, streaming from the stored offset)
                self._schema_only_snapshot(self._parse(offset))
            else:
                self._recover_schema(offset)
            return offset
        # no_data (and recovery) on a first start: the structure is recorded, streaming starts after
        # the current maximum LSN
        return make_offset(self._schema_only_snapshot({}))

    def completed_offset(self, snapshot_offset: Offset) -> Offset:
        for db in self.snapshot_databases:  # databases without any chunk: their snapshot is the schema only
            self._database_snapshot(db, None)
            self._finish_database(db)
        entries = {}
        for db in self.databases:
            kept = self._kept.get(db)
            if kept is not None:
                entries[db] = kept.copy()
                continue
            state = self._db_snapshots[db]
            entries[db] = DatabaseOffset(commit_lsn=state.lsn, snapshot=True, snapshot_completed=True)
        if self._kept:
            self._recover_schema(make_offset(dict(self._kept)))
        self._schema_loaded = True
        return make_offset(entries)

    @property
    def snapshot_databases(self) -> list[str]:
        """The databases this snapshot takes (all but those whose position carries over)."""
        return [db for db in self.databases if db not in self._kept]

    # -- schema recovery --------------------------------------------------------------------------

    def _recover_schema(self, offset: Offset) -> None:
        if self._schema_loaded:
            return
        assert self.schema is not None
        history = self.schema.history
        if history is not None and not history.exists() and self.connector.snapshot_on_schema_error:
            log.warning("the schema history (%s) is missing or empty although server %r has stored offsets: recording "
                        "the tables' current structure at the stored positions "
                        "(snapshot.mode.configuration.based.snapshot.on.schema.error=true)", history,
                        self.connector.server)
            self._schema_only_snapshot(self._parse(offset), record=True)
            return
        if history is not None and not history.exists():
            raise ConnectorError(
                f"the schema history ({history}) is missing or empty, but server {self.connector.server!r} has stored "
                "offsets: the table structures of the stored position cannot be recovered. Restore the history, or "
                "set snapshot.mode=recovery to record the tables' current structure (only if they did not change "
                "since the stored position), or remove the offsets to take a new snapshot")
        self.schema.recover(offset.get("databases") or {})
        self._schema_loaded = True

    def _schema_only_snapshot(self, entries: dict[str, DatabaseOffset], *,
                              record: bool | None = None) -> dict[str, DatabaseOffset]:
        """The structure of every database's tables recorded (history; schema-change events are
        emitted when streaming starts); the offsets: the stored ones, or the maximum LSNs.
        `record` None: as snapshot.mode says (configuration_based's snapshot.schema)."""
        assert self.schema is not None
        out: dict[str, DatabaseOffset] = {}
        for db in self.databases:
            conn = self._conn(db)
            lsn = md.max_lsn(conn, db)
            entry = entries.get(db) or DatabaseOffset(commit_lsn=lsn, snapshot=True, snapshot_completed=True)
            self._record_structure(db, entry, lsn, emit=self._deferred.append, record=record)
            conn.rollback()
            out[db] = entry
        self._schema_loaded = True
        return out

    # -- captured tables ------------------------------------------------------------------------

    def _catalog(self, db: str) -> md.CatalogTables:
        catalog = self._catalogs.get(db)
        if catalog is None:
            catalog = self._catalogs[db] = md.read_catalog(self._conn(db), db)
        return catalog

    def _captured_tables(self, db: str) -> list[CapturedTable]:
        """Debezium's captured tables: every table the filters include (CDC enabled or not),
        restricted to the newest capture instance's columns."""
        catalog = self._catalog(db)
        newest: dict[TableId, md.ChangeTable] = {}
        for ct in md.change_tables(self._conn(db), db):
            have = newest.get(ct.source)
            if have is None or (ct.start_lsn or b"") > (have.start_lsn or b""):
                newest[ct.source] = ct
        out = []
        for table_id in sorted(catalog.columns, key=lambda t: t.sort_key()):
            if not self.connector.table_filter(table_id):
                continue
            ct = newest.get(table_id)
            table = catalog.table(table_id, ct.captured_columns if ct is not None else None)
            assert table is not None
            if ct is None:
                log.warning("table %s is captured but has no CDC capture instance: its rows are snapshotted, its "
                            "changes are not streamed", data_collection(table_id))
            out.append(CapturedTable(db, table, data_collection(table_id), ct))
        return out

    def _record_structure(self, db: str, entry: DatabaseOffset, lsn: bytes | None,
                          emit: Callable[[Any], None] | None, record: bool | None = None) -> dict[TableId, TableEntry]:
        """Snapshot steps 4–5: each table's structure as CREATE schema change (history, and the
        schema-change topic), for the tables the schema history scope includes; returns the
        captured tables' entries."""
        assert self.schema is not None
        self._catalogs.pop(db, None)
        captured = {t.table.id: t for t in self._captured_tables(db)}
        catalog = self._catalog(db)
        scope = self.connector.history_scope()
        newest = {t.table.id: t.change_table for t in captured.values()}
        entries: dict[TableId, TableEntry] = {}
        history = self.schema.history
        buffering = history.buffering() if history is not None else None
        if buffering is not None:
            buffering.__enter__()
        try:
            for table_id in sorted(catalog.columns, key=lambda t: t.sort_key()):
                builtin = not self.connector.system_tables_filter(table_id)
                in_schema = self.connector.table_filter.schema_included(table_id.schema)
                is_captured = table_id in captured
                if not scope.snapshot_includes(captured=is_captured, in_captured_schema=in_schema, builtin=builtin):
                    continue
                ct = newest.get(table_id)
                table = catalog.table(table_id, ct.captured_columns if ct is not None else None)
                assert table is not None
                now_us = int(time.time() * 1_000_000)
                source = source_block(self.connector.server, db, table_id.schema or "", table_id.table, ts_us=now_us,
                                      snapshot="true", commit_lsn=lsn, change_lsn=None, event_serial_no=None)
                position = DatabaseOffset(commit_lsn=lsn, snapshot=True, snapshot_completed=False).to_dict()
                te = self.schema.schema_change("CREATE", table, source=source, offset=make_offset({db: entry}),
                                               partition_offset=position, emit=emit, ddl=None,
                                               record=self.connector.snapshot_schema if record is None else record)
                if is_captured:
                    entries[table_id] = te
            for table_id, ct_table in captured.items():
                if table_id not in entries:
                    entries[table_id] = self.schema.define(ct_table.table)
        finally:
            if buffering is not None:
                buffering.__exit__(None, None, None)
        return entries

    # -- snapshot source -------------------------------------------------------------------------

    def open_snapshot(self, offset: Offset | None, resnapshot: bool) -> SnapshotPoint:
        self._blocking_at = None
        self._db_snapshots = {}
        self._kept = {}
        self._resume_lsns = {}
        if offset is not None and not resnapshot and self.connector.snapshot_mode_name not in ("always", "recovery"):
            # a snapshot taken again because some databases' did not finish (or are new): the
            # others stream on from their stored positions (their events are not sent twice)
            stored = self._parse(offset)
            self._kept = {db: e for db, e in stored.items()
                          if db in self.databases and not (e.snapshot and not e.snapshot_completed)}
            if self._kept:
                log.info("taking the snapshot of %s; %s stream on from their stored positions",
                         ", ".join(self.snapshot_databases) or "no database", ", ".join(self._kept))
        entries = {db: DatabaseOffset(snapshot=True) for db in self.snapshot_databases}
        return SnapshotPoint({"databases": tuple(self.snapshot_databases)},
                             make_offset({**self._kept, **entries}))

    def resume_snapshot(self, offset: Offset) -> SnapshotPoint | None:
        """A snapshot a crash interrupted (resumable initial snapshot, engine/snapshot_resume.py):
        databases whose snapshot completed stream on (as open_snapshot keeps them); an interrupted
        one is read at a new transaction (snapshot.isolation.mode) but streams from its original
        LSN, which the change tables must still hold."""
        entries = self._parse(offset)
        interrupted = {db: e.commit_lsn for db, e in entries.items()
                       if db in self.databases and e.snapshot and not e.snapshot_completed and e.commit_lsn is not None}
        if not interrupted:
            log.warning("the interrupted snapshot cannot be resumed: the stored offset names no snapshot LSN")
            return None
        lost = self._lost({db: entries[db] for db in interrupted})
        if lost:
            log.warning("the interrupted snapshot cannot be resumed: the change tables of %s no longer reach back "
                        "to its LSN", ", ".join(sorted(lost)))
            return None
        point = self.open_snapshot(offset, False)
        self._resume_lsns = {db: lsn for db, lsn in interrupted.items() if lsn is not None}
        return point

    def snapshot_tables(self, point: SnapshotPoint) -> list[Any]:
        if self.connector.snapshot_mode_name == "recovery":
            return []  # the schema only (recorded as each database's snapshot starts)
        tables: list[CapturedTable] = []
        for db in self.snapshot_databases:
            captured = self._captured_tables(db)
            self._conn(db).commit()
            self._captured[db] = captured
            # the signal table is captured (streamed, locked) but its rows are not snapshotted
            tables += [t for t in captured if not self._is_signal_table(t.table.id)]
        return tables

    def chunk_dialect(self, point: SnapshotPoint) -> SqlServerChunkDialect:
        return SqlServerChunkDialect(self._conn)

    def chunk_dialect_for(self, db: str) -> SqlServerChunkDialect:
        return SqlServerChunkDialect(self._conn)

    def read_chunk(self, point: SnapshotPoint, chunk: SnapshotChunk, emit: Callable[[Any], None],
                   stop: threading.Event) -> None:
        db = chunk.partition or self._database_of(chunk)
        # the databases before this one: those read are done (the engine marked their last record
        # at the partition change), those without any chunk take their (schema only) snapshot now
        for other in self.snapshot_databases:
            if other == db:
                break
            if self._blocking_at is not None and other not in self._db_snapshots:
                continue  # a blocking snapshot reads only the databases of its tables
            self._database_snapshot(other, emit)
            self._finish_database(other)
        state = self._database_snapshot(db, emit)
        entry = state.tables.get(chunk.table.id)
        if entry is None:
            return
        conn = self._conn(db)
        c = self.connector
        ts = snap.snapshot_timestamp(conn)
        ts_us = epoch_micros(ts)
        lsn = state.lsn
        offset = make_offset({**self._kept,
                              **{d: DatabaseOffset(commit_lsn=s.lsn, snapshot=True, snapshot_completed=s.done)
                                 for d, s in self._db_snapshots.items() if s.started},
                              db: DatabaseOffset(commit_lsn=lsn, snapshot=True)})
        dispatcher = c.dispatcher(emit, lambda: offset)
        fetch = c.config.get("snapshot.fetch.size", 2000) or 2000
        if chunk.lower is None and chunk.upper is None:
            rows = snap.table_rows(conn, chunk.table.id, list(entry.table.columns), override=chunk.select,
                                   fetch_size=fetch)
        else:  # a key range of a table planned in chunks
            key = [entry.table.column(k) for k in chunk.key_columns]
            rows = snap.chunk_rows(conn, chunk.table.id, list(entry.table.columns), [k for k in key if k is not None],
                                   chunk.lower, chunk.upper, fetch_size=fetch)
        n = 0
        previous: tuple[Any, ...] | None = None
        for raw in rows:
            if stop.is_set():
                rows.close()  # type: ignore[attr-defined]
                return
            if previous is not None:
                self._emit_row(dispatcher, entry, previous, db, chunk, ts_us, lsn, n == 1, False)
            previous = raw
            n += 1
        if previous is not None:
            self._emit_row(dispatcher, entry, previous, db, chunk, ts_us, lsn, n == 1, True)

    def _database_of(self, chunk: SnapshotChunk) -> str:
        return chunk.table.id.catalog or self.databases[0]

    def _emit_row(self, dispatcher: Any, entry: TableEntry, raw: tuple[Any, ...], db: str, chunk: SnapshotChunk,
                  ts_us: int, lsn: bytes | None, first_row: bool, last_row: bool) -> None:
        marker = snapshot_marker(first_row and chunk.first_chunk, last_row and chunk.last_chunk, chunk.first_table,
                                 chunk.last_table)
        table_id = entry.table.id
        at = self._blocking_at.get(db) if self._blocking_at is not None else None
        source = source_block(self.connector.server, db, table_id.schema or "", table_id.table, ts_us=ts_us,
                              snapshot=marker, commit_lsn=lsn, change_lsn=at.change_lsn if at else None,
                              event_serial_no=at.event_serial_no if at else None)
        try:
            after = entry.schema.row(raw)
        except Exception as exc:  # a value the converters cannot take
            event_failed(self.connector.config.get("event.processing.failure.handling.mode") or "fail",
                         entry.collection, exc, "in the snapshot")
            return
        dispatcher.dispatch_change(entry.schema, entry.topic, OP_READ, None, after, source,
                                   collection=entry.collection)

    def _database_snapshot(self, db: str, emit: Callable[[Any], None] | None) -> _DatabaseSnapshot:
        """A database's snapshot steps 1–6 (see snapshot.py), once per snapshot (open_snapshot
        starts over), before its first rows: whoever comes first — its first chunk, the Spark
        source's planning, or completed_offset (which Spark may call before planning) — takes them."""
        state = self._db_snapshots.get(db)
        if state is None:
            state = self._db_snapshots[db] = _DatabaseSnapshot(db)
        if state.started:
            return state
        c = self.connector
        conn = self._conn(db)
        isolation = c.snapshot_isolation
        snap.begin(conn, isolation)
        # Debezium locks the captured tables the snapshot reads (snapshot.include.collection.list)
        include = [re.compile(p, re.IGNORECASE) for p in c.config.get("snapshot.include.collection.list") or []]
        lock_ids = [t.table.id for t in self._captured.get(db) or ()
                    if not include or any(p.fullmatch(t.collection) for p in include)]
        blocking = self._blocking_at.get(db) if self._blocking_at is not None else None
        if self._blocking_at is not None:  # the signal table is written while a blocking snapshot runs
            lock_ids = [t for t in lock_ids if not self._is_signal_table(t)]
        snap.lock_tables(conn, isolation, c.config.get("snapshot.locking.mode", "exclusive"),
                         c.config.get("snapshot.lock.timeout.ms", 10000), lock_ids)
        if self._blocking_at is not None:
            # Debezium's blocking snapshot skips "determining snapshot offset": the stream's position
            state.lsn = blocking.commit_lsn if blocking is not None else None
        else:
            state.lsn = self._resume_lsns.get(db) or snap.snapshot_lsn(conn, db)
        log.info("snapshot of database %s at LSN %s", db, describe(state.lsn))
        entry = DatabaseOffset(commit_lsn=state.lsn, snapshot=True)
        state.tables = self._record_structure(db, entry, state.lsn, emit if emit is not None else self._deferred.append)
        snap.release_schema_locks(conn, isolation)
        state.started = True
        return state

    def _finish_database(self, db: str) -> None:
        """A database's snapshot transaction ended (its last record's `last` marker is the
        engine's: it marks a partition's last record when the partition changes)."""
        state = self._db_snapshots[db]
        if state.done:
            return
        snap.end(self._conn(db))
        state.done = True

    def snapshot_unit(self, point: SnapshotPoint, chunk: SnapshotChunk) -> Any:
        # Spark (SPARK helper): see units.py for how a snapshot read by many connections holds
        from headwater.connectors.sqlserver.units import plan_snapshot_unit

        return plan_snapshot_unit(self, point, chunk)

    def close_snapshot(self, point: SnapshotPoint | None = None) -> None:
        for db, state in self._db_snapshots.items():
            if state.started and not state.done:
                try:
                    conn = self.conns.get(db)
                    if conn is not None and not conn.closed:
                        snap.end(conn)
                except ConnectorError as exc:
                    log.warning("ending the snapshot transaction of database %s failed: %s", db, exc)

    # -- streaming source ------------------------------------------------------------------------

    def stream(self, start: Offset, emit: Emit, stop: threading.Event) -> None:
        c = self.connector
        if c.snapshot_mode_name == "initial_only":
            return
        self._blocking_at = None  # a blocking snapshot before this stream is over
        assert self.schema is not None
        if not self._schema_loaded:
            self._recover_schema(start)
        if self._deferred:
            emit(self._deferred[:])
            self._deferred.clear()
        entries = self._parse(start)
        for db in self.databases:
            entries.setdefault(db, DatabaseOffset())
        conns = {db: self._conn(db) for db in self.databases}
        settings = c.stream_settings(self.databases)
        emit = self._signal_records(emit)
        interval = md.capture_polling_interval(conns[self.databases[0]]) if settings.provide_transaction_metadata \
            else 5.0
        streamer = Streamer(settings, self.schema, conns, entries, emit, c.dispatcher, make_offset,
                            capture_polling_interval_s=interval)
        streamer.schema_filter = c.table_filter  # type: ignore[assignment]
        streamer.snapshot_mode_name = c.snapshot_mode_name
        streamer.snapshots_when_lost = c.snapshot_mode.snapshots_when_lost
        if c.config.get("heartbeat.action.query", None):
            streamer.heartbeat_action = self._heartbeat_action
        self._streamer = streamer
        log.info("streaming databases %s from %s", ", ".join(self.databases),
                 ", ".join(f"{db}: {lsn_to_str(e.commit_lsn)}" for db, e in entries.items()))
        streamer.run(stop)
        self._stream_stopped()

    # -- signals: incremental and blocking snapshots (incremental.py) ---------------------------

    def _is_signal_table(self, table_id: TableId) -> bool:
        signal = getattr(self.connector, "signal_table", None)
        return signal is not None and same_table(table_id, signal)

    def incremental_source(self) -> Any:
        """The connector's side of incremental and blocking snapshots, on connections of its own
        (opened at first use); the Spark source's driver runs them too (engine/signals/units.py)."""
        if self._incremental is None:
            from headwater.connectors.sqlserver.incremental import SqlServerIncrementalSource

            self._incremental = SqlServerIncrementalSource(self)
        return self._incremental

    def open_blocking_snapshot(self, position: Offset) -> SnapshotPoint:
        """A blocking snapshot's point: each database's snapshot steps as the initial snapshot's
        (isolation, locks, structure) on its own connection, but no maximum LSN: the records carry
        `position`, the stream's offset when it stopped (Debezium's blocking snapshot keeps the
        streaming offset context: commit_lsn, change_lsn, event_serial_no). Read by
        snapshot_tables / chunk_dialect / read_chunk, ended by close_snapshot."""
        self.close_snapshot()
        entries = self._parse(position)
        self._db_snapshots = {}
        self._kept = {}
        self._resume_lsns = {}
        self._blocking_at = {db: entries.get(db, DatabaseOffset()) for db in self.databases}
        return SnapshotPoint({"databases": tuple(self.databases), "blocking": True}, dict(position))

    def _signal_records(self, emit: Emit) -> Emit:
        """The engine's stage knows the signal table's records by `record.table ==
        signal.data.collection`; SQL Server's names compare without case, so the records of the
        signal table carry the name as configured when the server spells it otherwise."""
        configured = str(self.config.get("signal.data.collection") or "").strip()
        signal = getattr(self.connector, "signal_table", None)
        if signal is None:
            return emit
        real = next((db for db in self.databases if db.lower() == (signal.catalog or "").lower()), signal.catalog)
        catalog = self._catalogs.get(real or "") or (self._catalog(real) if real in self.databases else None)
        found = next((t for t in (catalog.columns if catalog else ()) if same_table(t, signal)), None)
        canonical = data_collection(found) if found is not None else None
        if canonical is None or canonical == configured:
            return emit

        def renamed(items: list[Any]) -> None:
            for item in items:
                if getattr(item, "table", None) == canonical:
                    item.table = configured
            emit(items)

        return renamed

    def _stream_stopped(self) -> None:
        """stream() returned (stopped for a blocking snapshot, or for good): the read
        transactions end, so the next snapshot or stream() starts on clean connections."""
        for conn in self.conns.values():
            if not conn.closed:
                try:
                    conn.rollback()
                except ConnectorError as exc:
                    log.warning("ending the read transaction of database %s failed: %s", conn.database, exc)

    # -- signals in the Spark source: positions of records built on the driver -----------------

    def _signals_database(self) -> str:
        """The one database whose records the driver positions: with several, a record the stage
        adds (an incremental snapshot's read event of a table in one database, anchored after a
        signal-table record of another) could not sort with the changes of its own database."""
        databases = self.databases or list(self.connector.database_names)
        if len(databases) != 1:
            raise ConnectorError("signals (signal.data.collection, signal.enabled.channels, notification.enabled."
                                 "channels) in the Spark source take one database in database.names, got "
                                 f"{len(databases)}: run a query per database, or use `headwater run`")
        return databases[0]

    def record_positions(self, records: list[Any]) -> list[str]:
        """The positions SqlServerWorkDecoder gives (units.py, work.py): a change's records (the
        END of the transaction before it, BEGIN, the event, its tombstone) at the database's
        position when they were dispatched — the one their offset holds — numbered in a row; a
        schema change after the change it follows at 0xF0 on; a snapshot's schema changes handed
        over at the stream's start (no_data, recovery) as the decoder's first unit has them."""
        from headwater.connectors.sqlserver.units import change_position, schema_position

        db = self._signals_database()
        out: list[str] = []
        prefix, n, schema_n, snapshot_n = self._driver_positions
        for record in records:
            entry = ((record.offset or {}).get("databases") or {}).get(db) or {}
            at = DatabaseOffset.from_dict(entry)
            if at.snapshot:
                out.append(schema_position(0, snapshot_n))
                snapshot_n += 1
                continue
            here = change_position(0, at.commit_lsn, at.change_lsn, at.event_serial_no, 0)[:-2]
            if here != prefix:
                prefix, n, schema_n = here, 0, 0
            value = record.value if isinstance(record.value, dict) else {}
            if "tableChanges" in value:
                out.append(prefix + f"{0xF0 + schema_n:02x}")
                schema_n += 1
            else:
                out.append(prefix + f"{n:02x}")
                n += 1
        self._driver_positions = (prefix, n, schema_n, snapshot_n)
        return out

    def offset_position(self, offset: Offset) -> str:
        """After every record at or before the database's position in `offset` (a record's n is
        below 0xFF), before every record after it."""
        from headwater.connectors.sqlserver.units import change_position

        db = self._signals_database()
        at = DatabaseOffset.from_dict(((offset or {}).get("databases") or {}).get(db) or {})
        return change_position(0, at.commit_lsn, at.change_lsn, at.event_serial_no, 0xFF)

    def stream_units(self, start: Offset, read_ahead: int) -> UnitStream:
        # Spark (SPARK helper): the streaming loop plans windows, executors read them (units.py)
        from headwater.connectors.sqlserver.units import open_unit_stream

        return open_unit_stream(self, start, read_ahead)

    def _heartbeat_action(self, database: str) -> None:
        """`heartbeat.action.query` in the database the heartbeat is for, on a connection of its own
        (committed at once: the streaming connection's read transaction must not carry it). A
        failure is logged with the query and does not stop capture; the connection is opened
        again at the next heartbeat."""
        query = self.config.get("heartbeat.action.query")
        conn = self._heartbeat_conns.get(database)
        try:
            if conn is None or conn.closed:
                conn = self._heartbeat_conns[database] = SqlServerConnection(self.config, database,
                                                                             purpose="headwater-heartbeat")
            conn.execute(query, what="heartbeat.action.query")
            conn.commit()
        except ConnectorError as exc:
            log.error("heartbeat.action.query %r failed in database %s: %s", query, database, exc)
            if conn is not None:
                conn.close()
                self._heartbeat_conns.pop(database, None)

    def current_position(self) -> Any:
        return tuple(lsn_to_str(md.max_lsn(self._conn(db), db)) for db in self.databases)

    def acknowledge(self, offset: Offset) -> None:
        """Nothing to acknowledge: SQL Server's change tables are cleaned by retention, not by
        the reader."""

    def release(self) -> None:
        self.close_snapshot()
        for conn in [*self.conns.values(), *self._heartbeat_conns.values()]:
            conn.close()
        self.conns.clear()
        self._heartbeat_conns.clear()
        self._catalogs.clear()
        if self._streamer is not None:
            self._streamer.close()
        self._streamer = None
        if self._incremental is not None:
            self._incremental.close()
            self._incremental = None

    def close(self) -> None:
        self.release()
        if self.schema is not None and self.schema.history is not None:
            self.schema.history.stop()


class SqlServerChunkDialect:
    """The engine's planning queries in T-SQL, each on the connection of the table's database."""

    def __init__(self, conn_of: Callable[[str], SqlServerConnection]) -> None:
        self.conn_of = conn_of

    def _name(self, table: Any) -> str:
        return snap.quoted_table(table.table.id)

    def count(self, table: Any, select: str | None) -> int:
        return int(self.conn_of(table.database).query_one(f"SELECT COUNT_BIG(*) FROM {self._name(table)}") or 0)

    def sampled_bounds(self, table: Any, key: Any, rows: int, chunks: int, percent: float) -> list[Bound]:
        return []  # TABLESAMPLE samples pages, not rows: the exact bounds are used

    def exact_bounds(self, table: Any, key: Any, rows: int, size: int) -> list[Bound]:
        cols = ", ".join(quote(k) for k in key)
        texts = ", ".join(f"CONVERT(nvarchar(4000), {quote(k)}, 121) AS {quote(f'__hw_k{i}')}"
                          for i, k in enumerate(key))  # the text snapshot.chunk_rows casts back
        outer = ", ".join(quote(f"__hw_k{i}") for i in range(len(key)))
        rows_ = self.conn_of(table.database).query(
            f"SELECT {outer} FROM (SELECT {texts}, ROW_NUMBER() OVER (ORDER BY {cols}) AS rn "
            f"FROM {self._name(table)}) s WHERE rn % {int(size)} = 0 AND rn < {int(rows)} ORDER BY rn")
        return [tuple(str(v) for v in r) for r in rows_]

    def block_range(self, table: Any) -> tuple[int, int, int] | None:
        return None


"""PostgreSQL's side of a run, for the engine's coordinator: the slot, the snapshot source and
the streaming source (see :mod:`headwater.engine.source`).

The initial snapshot reads inside one consistent database snapshot. A new slot exports its
snapshot (`CREATE_REPLICATION_SLOT … EXPORT_SNAPSHOT`): the rows read inside it are exactly the
state at the slot's consistent point, and streaming from there neither overlaps nor leaves a gap.
An existing slot is kept (a snapshot that did not finish, or mode=always): a snapshot of the
present is read, then the stream sends everything since the slot's position again; a new slot
would start after changes the sinks never saw, and a row deleted since a partial snapshot would
stay there as a ghost. Parallel readers (Spark's executors) import the snapshot by name.
"""

from __future__ import annotations

import copy
import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg2
from psycopg2 import sql

from headwater.connectors.postgres import snapshot as snap
from headwater.connectors.postgres.connection import connect, connect_kwargs, connection_error, first_line
from headwater.connectors.postgres.events import Chunk, SnapshotRows, StreamPosition, advance_position
from headwater.connectors.postgres.incremental import PostgresIncrementalSource, signal_table
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.pgoutput import format_lsn, parse_lsn
from headwater.connectors.postgres.replication import (
    SlotState,
    create_slot,
    drop_slot,
    read_slot,
    slot_catalog_xmin,
)
from headwater.connectors.postgres.schemas import CapturedTable
from headwater.connectors.postgres.snapshot_lease import HOLDER_APP, SnapshotHolder, export_snapshot
from headwater.connectors.postgres.source_info import PgOffset, position_key
from headwater.connectors.postgres.streaming import StreamingReader
from headwater.connectors.postgres.work import (
    PgWorkDecoder,
    SnapshotWork,
    StreamWork,
    change_messages,
    chunk_bytes,
    copy_rows,
)
from headwater.engine.connector import ConnectorError, Emit
from headwater.engine.read_ahead import UnitQueue
from headwater.engine.snapshot_plan import Bound, SnapshotChunk, SnapshotTable
from headwater.engine.snapshot_policy import Stored
from headwater.engine.source import CaptureSource, Offset, SnapshotPoint, UnitStream

if TYPE_CHECKING:
    from headwater.connectors.postgres.connector import PostgresConnector

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PgSnapshotHandle:
    """What a reader needs to read inside the snapshot, and what its records say."""

    snapshot_name: str | None  # exported (None: read in the snapshot connection's own transaction)
    lsn: int                   # source.lsn of the records: where the snapshot was read
    txid: int | None           # source.txId of the records
    # a blocking snapshot's records carry the stream's position, as Debezium's: its last commit
    last_commit_lsn: int | None = None


# savepoints of the Spark source driver's snapshot transaction (see _release_driver_locks)
_DRIVER_LOCKS = "headwater_driver_locks"
_PLANNING_QUERY = "headwater_planning_query"


def offset_key(offset: Offset) -> tuple[int, int]:
    """Orders stream offsets: inside a transaction (its commit LSN, messages done); between
    transactions (the restart LSN, or the last non-transactional message's LSN). A commit's end
    LSN lies after its commit LSN, so a transaction's positions sort before the one after it."""
    if offset.get("tx_final_lsn") is not None:
        return offset["tx_final_lsn"], offset.get("tx_msgs", 0)
    return max(offset.get("lsn_commit") or 0, offset.get("message_lsn") or 0), 0


def position_offset(pos: StreamPosition) -> Offset:
    return pos.offset(None, pos.tx_msgs)


class PgCaptureSource(CaptureSource):
    def __init__(self, connector: PostgresConnector, *, parallel: bool) -> None:
        self.connector = connector
        self.config = connector.config
        self.parallel = parallel  # readers in other processes: the snapshot is exported
        self._conn: Any = None
        self._repl: Any = None
        self._slot: SlotState | None = None
        self._registry: Any = None
        self._table_ids: list[Any] = []
        self._snapshot_conn: Any = None
        # the Spark source's driver: the table locks of its snapshot transaction (planning,
        # snapshot.locking.mode=shared) are taken inside _DRIVER_LOCKS and given up before
        # executors read (see _release_driver_locks)
        self._driver_locks = False
        self._captured: dict[str, CapturedTable] = {}
        self._streaming: StreamingReader | None = None
        self._units: PgUnitStream | None = None
        self._heartbeat_conn: Any = None
        self._xmin_conn: Any = None
        self._holder: Any = None
        self._incremental: PostgresIncrementalSource | None = None

    # -- set-up ----------------------------------------------------------------------------

    def open(self, *, publication: bool = True) -> None:
        if self._conn is not None:
            return
        c = self.connector
        self._conn = connect(self.config, application_name="headwater-driver" if self.parallel else "headwater")
        if publication:  # an extract reads tables only: any wal_level will do
            c.check_server(self._conn)
            c.connected()
        else:
            c.server_version = self._conn.server_version
        catalog = CatalogReader(self._conn)
        self._table_ids = c.captured_table_ids(catalog)
        self._registry = c.builder_settings().registry(catalog)
        if not publication:
            return
        c.ensure_publication(self._conn, self._table_ids)
        slot = c.wait_for_slot(self._conn)
        if slot is not None and (slot.plugin != "pgoutput" or slot.database != c.dbname):
            raise ConnectorError(
                f"replication slot {c.slot_name!r} exists for plugin {slot.plugin!r} in database "
                f"{slot.database!r}; Headwater needs a pgoutput slot in {c.dbname!r} (choose another slot.name)")
        self._slot = slot

    def _replication(self) -> Any:
        if self._repl is None:
            self._repl = connect(self.config, replication=True, application_name="headwater-stream")
        return self._repl

    # -- positions -------------------------------------------------------------------------

    def parse(self, offset: Offset) -> PgOffset:
        try:
            return PgOffset.from_dict(offset)
        except (ValueError, TypeError) as exc:
            raise ConnectorError(f"stored offset for server {self.connector.server!r} is invalid ({exc}); "
                                 "remove the offsets file to start over") from None

    def stored(self, offset: Offset | None, *, in_snapshot: bool = False) -> tuple[Stored, bool]:
        if offset is None:
            return Stored.NOTHING, True
        stored = self.parse(offset)
        slot = self._slot = read_slot(self._conn, self.connector.slot_name)
        if in_snapshot or (stored.snapshot and not stored.snapshot_completed):
            # the slot still stands where the snapshot was to stream from
            held = slot is not None and slot.wal_status != "lost" and \
                (slot.confirmed_flush_lsn or 0) <= (stored.lsn_commit or 0)
            return Stored.UNFINISHED_SNAPSHOT, held
        return Stored.POSITION, slot is not None and self.slot_problem(stored, slot) is None

    def slot_problem(self, stored: PgOffset, slot: SlotState) -> str | None:
        """Why an existing slot cannot resume at the stored offset, or None. A slot that was
        dropped and created again (a restore, pg_upgrade, a manual drop) or advanced by hand
        starts past the stored position: the server would silently resume from the slot and the
        changes in between would be lost (spec PG-243, a Headwater hardening)."""
        if slot.wal_status == "lost":
            return ("was invalidated by the server (wal_status=lost: max_slot_wal_keep_size removed WAL it "
                    "still needed)")
        position = slot.position()
        if stored.lsn_commit is None or position is None or position <= stored.lsn_commit:
            return None
        problem = (f"starts at {format_lsn(position)} (confirmed_flush_lsn "
                   f"{format_lsn(slot.confirmed_flush_lsn or 0)}, restart_lsn {format_lsn(slot.restart_lsn or 0)}: "
                   "it was dropped and created again, or advanced by hand; or, after this connector was "
                   "killed, psycopg2 had reported a keepalive position the connector had not stored yet)")
        if not self.connector.flush_lsn_enabled():
            # lsn.flush.mode=manual: whoever advances the slot may have moved it past the offset
            log.warning("replication slot %s %s; the changes in between are not received again",
                        self.connector.slot_name, problem)
            return None
        return problem

    def lost_error(self, offset: Offset, *, resumer: str | None = None,
                   fresh_start: str = "remove the offsets file") -> ConnectorError:
        stored = self.parse(offset)
        slot = self._slot
        if slot is None:
            problem = None
        elif stored.snapshot and not stored.snapshot_completed:
            problem = f"has moved on to {format_lsn(slot.confirmed_flush_lsn or 0)}" \
                if slot.wal_status != "lost" else self.slot_problem(stored, slot)
        else:
            problem = self.slot_problem(stored, slot)
        return self.connector.vanished_slot_error(stored, problem, resumer=resumer, fresh_start=fresh_start)

    def sort_key(self, offset: Offset) -> tuple[int, int]:
        return offset_key(offset)

    def resume_offset(self, offset: Offset | None) -> Offset:
        if offset is not None:
            return offset
        if self._slot is None:
            created = create_slot(self._replication(), self.connector.slot_name, export_snapshot=False)
            return PgOffset(lsn_commit=created.consistent_point).to_dict()
        # no offsets, no snapshot wanted, the slot exists: stream from where it stands
        return PgOffset(lsn_commit=self._slot.confirmed_flush_lsn or 0).to_dict()

    def completed_offset(self, snapshot_offset: Offset) -> Offset:
        at = self.parse(snapshot_offset)
        return PgOffset(lsn_commit=at.lsn_commit, lsn=at.lsn_commit, tx_id=at.tx_id,
                        snapshot_completed=True).to_dict()

    # -- snapshot source -------------------------------------------------------------------

    def open_snapshot(self, offset: Offset | None, resnapshot: bool) -> SnapshotPoint:
        c = self.connector
        slot = self._slot = read_slot(self._conn, c.slot_name)
        keep = slot is not None and slot.wal_status != "lost" and bool(slot.confirmed_flush_lsn)
        conn = connect(self.config, application_name="headwater-snapshot")
        try:
            if keep:
                assert slot is not None and slot.confirmed_flush_lsn is not None
                stream_from = slot.confirmed_flush_lsn
                log.warning("replication slot %s exists: taking a snapshot, then streaming from the slot's "
                            "position %s (changes since then arrive again)", c.slot_name, format_lsn(stream_from))
                if self.parallel:
                    conn.autocommit = False
                    with conn.cursor() as cur:
                        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        name, txid, record_lsn = export_snapshot(cur)
                    handle = PgSnapshotHandle(name, record_lsn, txid)
                else:
                    txid, wal_lsn = snap.begin_snapshot_transaction(conn, None,
                                                                    self.config.get("snapshot.isolation.mode"))
                    handle = PgSnapshotHandle(None, wal_lsn or stream_from, txid)
            else:
                if slot is not None:  # invalidated (wal_status=lost) or never confirmed: unusable
                    drop_slot(self._conn, c.slot_name)
                created = create_slot(self._replication(), c.slot_name, export_snapshot=True)
                log.info("created replication slot %s at %s with an exported snapshot", c.slot_name,
                         format_lsn(created.consistent_point))
                stream_from = created.consistent_point
                txid, _ = snap.begin_snapshot_transaction(conn, created.snapshot_name)
                handle = PgSnapshotHandle(created.snapshot_name, stream_from, txid)
            if self.parallel:
                with conn.cursor() as cur:
                    cur.execute(f"SAVEPOINT {_DRIVER_LOCKS}")
            self._lock_tables(conn)
        except psycopg2.Error as exc:
            conn.close()
            raise connection_error("snapshot failed", exc) from None
        except BaseException:
            conn.close()
            raise
        self.close_snapshot()  # a point replaced (a restarted driver's): its transaction ends
        self._snapshot_conn, self._driver_locks = conn, self.parallel
        offset_at = PgOffset(lsn_commit=stream_from, lsn=stream_from, tx_id=handle.txid, snapshot=True)
        return SnapshotPoint(handle, offset_at.to_dict())

    def resume_snapshot(self, offset: Offset) -> SnapshotPoint | None:
        """A snapshot a crash interrupted (resumable initial snapshot, engine/snapshot_resume.py):
        a new REPEATABLE READ transaction, no new slot; streaming then starts at the slot's
        position, where the interrupted snapshot was to stream from."""
        slot = read_slot(self._conn, self.connector.slot_name)
        problem = snap.resume_problem(self.parse(offset).lsn_commit, slot)
        if problem is not None:
            log.warning("the interrupted snapshot cannot be resumed: %s", problem)
            return None
        return self.open_snapshot(offset, False)

    def _lock_tables(self, conn: Any) -> None:
        """`snapshot.locking.mode=shared`: as Debezium, no exclusive access (ALTER, TRUNCATE, DROP)
        to the snapshotted tables while the snapshot transaction runs; locks taken before the
        schemas are read."""
        if self.config.get("snapshot.locking.mode") != "shared":
            return
        include = [re.compile(p, re.IGNORECASE) for p in self.config.get("snapshot.include.collection.list") or []]
        tables = [t for t, _ in self._table_ids if not include or any(p.fullmatch(t.identifier()) for p in include)]
        snap.lock_tables(conn, tables, self.config.get("snapshot.lock.timeout.ms"))

    def open_extract(self, idle_seconds: float) -> SnapshotPoint:
        """A one-off batch read: one snapshot that a holder process keeps open for the tasks (see
        :mod:`~headwater.connectors.postgres.snapshot_lease`); no slot, no publication."""
        self.open(publication=False)
        holder = SnapshotHolder(connect_kwargs(self.config, application_name=HOLDER_APP), idle_seconds=idle_seconds)
        lease = holder.lease
        try:
            conn = connect(self.config, application_name="headwater-driver")
            snap.begin_snapshot_transaction(conn, lease.snapshot_name)
            self._snapshot_conn = conn
            self._lock_tables(conn)
        except BaseException:
            holder.release()
            raise
        self._holder = holder
        log.info("batch read inside snapshot %s at %s", lease.snapshot_name, format_lsn(lease.lsn))
        return SnapshotPoint(PgSnapshotHandle(lease.snapshot_name, lease.lsn, lease.txid), {})

    def expect_tasks(self, count: int) -> None:
        self._holder.expect(count)

    def release_extract(self) -> None:
        self._holder.release()

    def extract_decoder(self) -> PgWorkDecoder:
        lease = self._holder.lease
        return PgWorkDecoder(self.connector.builder_settings(),
                             connect_kwargs(self.config, application_name=lease.task_application_name), lease=lease)

    def snapshot_tables(self, point: SnapshotPoint) -> list[SnapshotTable]:
        catalog = CatalogReader(self._conn)
        # the signal table is captured (streamed) but never snapshotted, as Debezium's
        # RelationalSnapshotChangeEventSource skips signal.data.collection
        signal = signal_table(self.config)
        oids = [catalog.oid_of(t) for t, _ in self._table_ids
                if signal is None or (t.schema, t.table) != (signal.schema, signal.table)]
        tables = self._registry.load([o for o in oids if o is not None])
        self._captured = {t.collection: t for t in tables.values()}
        return list(tables.values())

    def chunk_dialect(self, point: SnapshotPoint) -> PgChunkDialect:
        return PgChunkDialect(self._snapshot_conn, keep_locks=not self.parallel)

    def read_chunk(self, point: SnapshotPoint, chunk: SnapshotChunk, emit: Callable[[Any], None],
                   stop: threading.Event) -> None:
        handle: PgSnapshotHandle = point.handle
        captured = self._captured[chunk.collection]
        settings = self.connector.builder_settings()
        dispatcher = settings.dispatcher(emit, lambda: point.offset)
        rows = SnapshotRows(settings, captured, dispatcher, txid=handle.txid, lsn=handle.lsn,
                            first_table=chunk.first_table, last_table=chunk.last_table,
                            first_in_table=chunk.first_chunk, last_in_table=chunk.last_chunk,
                            last_commit_lsn=handle.last_commit_lsn)
        timeout = self.config.get("database.query.timeout.ms")
        try:
            if chunk.lower is None and chunk.upper is None and chunk.blocks is None:
                selects = {chunk.collection: chunk.select} if chunk.select else {}
                snap.read_rows(self._snapshot_conn, captured, selects, stop, rows.on_row, timeout)
            else:
                copy_rows(self._snapshot_conn, captured, self.snapshot_unit(point, chunk), rows.on_row, stop)
        except snap.SnapshotStopped:
            return
        rows.finish()

    def snapshot_unit(self, point: SnapshotPoint, chunk: SnapshotChunk) -> SnapshotWork:
        handle: PgSnapshotHandle = point.handle
        self._release_driver_locks()  # the work goes to executors
        return SnapshotWork(chunk, handle.snapshot_name or "", handle.lsn, handle.txid)

    def _release_driver_locks(self) -> None:
        """Spark: executors read the snapshot in transactions of their own while the driver's
        stays open for the snapshot's batches. A lock the driver kept on a table would make a
        TRUNCATE or ALTER of it wait for the whole snapshot, and every executor reading the table
        then queues behind that TRUNCATE: a wait across sessions PostgreSQL does not see as a
        deadlock, and the query hangs. So the driver gives its locks up (rolls back to the
        savepoint taken before them) once the schemas are read and the chunks planned; the
        snapshot itself (its exported snapshot) is the top transaction's and stays."""
        if not self._driver_locks or self._snapshot_conn is None:
            return
        try:
            with self._snapshot_conn.cursor() as cur:
                cur.execute(f"ROLLBACK TO SAVEPOINT {_DRIVER_LOCKS}")
                cur.execute(f"RELEASE SAVEPOINT {_DRIVER_LOCKS}")
        except psycopg2.Error as exc:
            raise connection_error("snapshot failed", exc) from None
        self._driver_locks = False

    def close_snapshot(self, point: SnapshotPoint | None = None) -> None:
        self._driver_locks = False
        conn, self._snapshot_conn = self._snapshot_conn, None
        if conn is not None:
            try:
                conn.rollback()
                conn.close()
            except psycopg2.Error:
                pass

    # -- streaming source ------------------------------------------------------------------

    def _reader(self, start: Offset, emit: Emit, pool: Any, settings: Any = None,
                idle_markers: bool = False) -> StreamingReader:
        """The slot's reader, configured; what streaming needs first is done here: the snapshot's
        transaction ends (its exported snapshot would hold the slot's connection) and
        `replica.identity.autoset.values` applies (as Debezium, when streaming starts)."""
        c = self.connector
        self.close_snapshot()
        c.apply_replica_identities(self._conn, self._table_ids)
        reader = StreamingReader(
            repl_conn=self._replication(), registry=self._registry, settings=settings or c.builder_settings(),
            slot_name=c.slot_name, publication=c.publication,
            status_interval_s=max(self.config.get("status.update.interval.ms") / 1000, 1.0),
            flush_lsn_to_server=c.flush_lsn_enabled(), emit=emit,
            position=StreamPosition.resume(self.parse(start)), pool=pool,
            heartbeat_interval_s=self.config.get("heartbeat.interval.ms") / 1000 if not self.parallel else 0.0,
            heartbeat_action=self._heartbeat_action if self.config.get("heartbeat.action.query")
            and not self.parallel else None,
            spools=c.stream_spools(), server_version=c.server_version, idle_markers=idle_markers)
        reader.stream_params = c.stream_params()
        xmin_ms = self.config.get("xmin.fetch.interval.ms")
        if xmin_ms > 0:
            reader.xmin_fetch = self._fetch_slot_xmin
            reader.xmin_interval_s = xmin_ms / 1000
        return reader

    def stream(self, start: Offset, emit: Emit, stop: threading.Event) -> None:
        c = self.connector
        if self._streaming is not None:
            self._end_previous_stream()
        pool = c.pool
        settings = c.builder_settings()  # the reader's and the workers' (the same events either way)
        if pool is not None:
            pool.start(settings)
        # the engine stores offsets itself: idle positions go to it as markers (the Spark source's
        # checkpoint follows its batches instead)
        reader = self._reader(start, emit, pool, settings, idle_markers=True)
        self._streaming = reader
        reader.start()
        log.info("streaming from slot %s at %s%s", c.slot_name, format_lsn(start.get("lsn_commit") or 0),
                 f" with {pool.workers} worker processes" if pool is not None else "")
        if reader.spools is not None:
            log.info("in-progress transactions are streamed (pgoutput protocol 2) and spooled in %s",
                     reader.spools.directory)
        try:
            reader.run(stop)
        except ConnectorError as exc:
            raise c.explain_stream_failure(exc) from None

    def _end_previous_stream(self) -> None:
        """stream() again after a stream stopped (a blocking snapshot ran in between): the
        replication connection is in COPY mode for good, so it is closed after its last
        acknowledgement and the next stream starts on a new one, from the engine's offset."""
        previous, self._streaming = self._streaming, None
        assert previous is not None
        previous.final_feedback()
        if self._repl is not None:
            try:
                self._repl.close()
            except psycopg2.Error:
                pass
            self._repl = None
        # the closed connection's walsender lets the slot go a moment later: starting again before
        # that fails with "slot is active"; wait for it quietly, then as slot.max.retries says
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            state = read_slot(self._conn, self.connector.slot_name)
            if state is None or not state.active:
                return
            time.sleep(0.05)
        self.connector.wait_for_slot(self._conn)

    # -- incremental and blocking snapshots (headwater.engine.signals) -----------------------

    def incremental_source(self) -> PostgresIncrementalSource | None:
        """The connector's side of incremental and blocking snapshots, on its own connection
        (opened at first use); the Spark source's driver runs them too (engine/signals/units.py)."""
        if self._incremental is None:
            self._incremental = PostgresIncrementalSource(self)
        return self._incremental

    def open_blocking_snapshot(self, position: Offset | None = None) -> SnapshotPoint:
        """A blocking snapshot's consistent point: always a new SERIALIZABLE READ ONLY DEFERRABLE
        transaction, never a slot's exported snapshot (PG-65), read by snapshot_tables /
        chunk_dialect / read_chunk like the initial snapshot and ended by close_snapshot (or by
        the next stream()). `position`: the offset where streaming stopped; the records' txId, lsn
        and sequence are its, as Debezium's blocking snapshot reuses the streaming offset context
        (recorded, blocking); without it, the transaction's own."""
        self.close_snapshot()
        conn = connect(self.config, application_name="headwater-snapshot")
        try:
            txid, lsn = snap.begin_snapshot_transaction(conn, None, "serializable")
            self._lock_tables(conn)
        except psycopg2.Error as exc:
            conn.close()
            raise connection_error("blocking snapshot failed", exc) from None
        except BaseException:
            conn.close()
            raise
        self._snapshot_conn = conn
        if position is not None:
            at = self.parse(position)
            stream_lsn = at.lsn if at.lsn is not None else at.lsn_commit
            handle = PgSnapshotHandle(None, stream_lsn or 0, at.tx_id, at.last_commit_lsn)
            return SnapshotPoint(handle, dict(position))
        handle = PgSnapshotHandle(None, lsn or 0, txid)
        return SnapshotPoint(handle, PgOffset(lsn_commit=lsn, lsn=lsn, tx_id=txid, snapshot=True).to_dict())

    def record_positions(self, records: list[Any]) -> list[str]:
        """The positions PgWorkDecoder gives (work.py, `_stream`): a transaction's message has its
        commit LSN and its number in it (BEGIN 0, a data message its number, COMMIT one past the
        last), a message outside a transaction its own LSN; then the record's number among its
        message's records. The records of a data message share its LSN; all but the last carry
        the messages done before it in `tx_msgs`, the last its own number."""
        out: list[str] = []
        i, n = 0, len(records)
        while i < n:
            offset = records[i].offset or {}
            final, lsn = offset.get("tx_final_lsn"), offset.get("lsn")
            status = _transaction_status(records[i])
            j = i + 1
            while (status is None and j < n and _transaction_status(records[j]) is None
                   and (records[j].offset or {}).get("tx_final_lsn") == final
                   and (records[j].offset or {}).get("lsn") == lsn):
                j += 1
            if final is None:
                major, minor = lsn or offset.get("message_lsn") or 0, 0
            elif status == "BEGIN":
                major, minor = final, 0
            elif status == "END":
                major, minor = final, (offset.get("tx_msgs") or 0) + 1
            else:
                major, minor = final, (records[j - 1].offset or {}).get("tx_msgs") or 0
            prefix = position_key(major, minor)[:32]
            out.extend(prefix + f"{k:08X}" for k in range(j - i))
            i = j
        return out

    def offset_position(self, offset: Offset) -> str:
        """After every record up to `offset`: inside a transaction, the last of its messages done;
        between transactions, the last LSN before the restart LSN (a transaction's records carry
        its commit LSN, which lies before its end LSN), or the last non-transactional message."""
        final = offset.get("tx_final_lsn")
        if final is not None:
            return position_key(final, offset.get("tx_msgs") or 0, 0xFFFFFFFF)
        commit, message = offset.get("lsn_commit") or 0, offset.get("message_lsn") or 0
        if message and message >= commit:
            return position_key(message, 0, 0xFFFFFFFF)
        if commit <= 0:
            return position_key(0, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF)  # after the snapshot's records (major 0)
        return position_key(commit - 1, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF)

    def keep_stream_alive(self) -> None:
        """The stream's emit waits downstream (the Spark source's read-ahead with signals): a
        status update at most every second, as during a long replay, so that wal_sender_timeout
        does not end the connection."""
        reader = self._streaming
        if reader is not None:
            reader._keepalive()

    def stream_units(self, start: Offset, read_ahead: int) -> PgUnitStream:
        c = self.connector
        slot = c.wait_for_slot(self._conn)
        if slot is None:  # dropped since the position was checked
            raise self.lost_error(start, resumer="the checkpoint", fresh_start="use a new checkpoint location")
        collector = _ChunkCollector(read_ahead)
        reader = self._reader(start, lambda items: None, collector)
        collector.reader = reader
        collector.handed = _mark(reader.position)
        units = PgUnitStream(self, reader, collector)
        self._units = units
        self._streaming = reader
        reader.start()
        units.start()
        log.info("streaming from slot %s at %s", c.slot_name, format_lsn(start.get("lsn_commit") or 0))
        return units

    def current_position(self) -> int:
        with self._conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            return parse_lsn(cur.fetchone()[0])

    def acknowledge(self, offset: Offset) -> None:
        lsn = offset.get("lsn_commit")
        if self._streaming is not None and isinstance(lsn, int) and lsn > 0 and self.connector.flush_lsn_enabled():
            self._streaming.acknowledge(lsn)

    def release(self) -> None:
        """Close every connection (after a retriable failure, before the next run)."""
        if self._units is not None:
            self._units.close()
        self._units = None
        self._streaming = None
        if not self.parallel and self.connector.pool is not None:
            self.connector.pool.close()  # its workers start again with the next run's settings
        self.close_snapshot()
        for conn in (self._repl, self._conn, self._heartbeat_conn, self._xmin_conn):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        self._repl = self._conn = self._heartbeat_conn = self._xmin_conn = None
        if self._incremental is not None:
            self._incremental.close()
            self._incremental = None

    def close(self) -> None:
        if self._units is not None:
            self._units.close()
            self._units = None
        if self._streaming is not None:
            self._streaming.final_feedback()
        self.release()

    # -- the reader thread's own connections -----------------------------------------------

    def _fetch_slot_xmin(self) -> int | None:
        """The slot's catalog_xmin (Debezium's source.xmin), on its own connection (reader thread);
        None when it cannot be read, as Debezium's value before the first read."""
        try:
            if self._xmin_conn is None or self._xmin_conn.closed:
                self._xmin_conn = connect(self.config, application_name="headwater-xmin")
            return slot_catalog_xmin(self._xmin_conn, self.connector.slot_name)
        except (psycopg2.Error, ConnectorError) as exc:
            reason = first_line(exc) if isinstance(exc, psycopg2.Error) else str(exc)
            log.warning("could not read the xmin of replication slot %s: %s", self.connector.slot_name, reason)
            return None

    def _heartbeat_action(self) -> None:
        """Run `heartbeat.action.query` on its own autocommit connection (reader thread). A
        failure is logged with the query and does not stop capture; a broken connection is
        opened again at the next heartbeat (autocommit: a failed statement leaves no aborted
        transaction behind)."""
        query = self.config.get("heartbeat.action.query")
        try:
            if self._heartbeat_conn is None or self._heartbeat_conn.closed:
                self._heartbeat_conn = connect(self.config, application_name="headwater-heartbeat")
            with self._heartbeat_conn.cursor() as cur:
                cur.execute(query)
        except (psycopg2.Error, ConnectorError) as exc:
            reason = first_line(exc) if isinstance(exc, psycopg2.Error) else str(exc)
            log.error("heartbeat.action.query %r failed: %s", query, reason)


# -- chunk planning ----------------------------------------------------------------------------

def _key_columns(key: list[str]) -> tuple[sql.Composable, sql.Composable, sql.Composable]:
    """(k1, k2, …), (k1::text AS __hw_k0, …) and (k1 DESC, …) of a key. The text forms are
    aliased: an output column named like a key column is what ORDER BY would sort (as text)."""
    return (sql.SQL(", ").join(sql.Identifier(c) for c in key),
            sql.SQL(", ").join(sql.SQL("{}::text AS {}").format(sql.Identifier(c), sql.Identifier(f"__hw_k{i}"))
                               for i, c in enumerate(key)),
            sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(c)) for c in key))


def _ident(captured: Any) -> sql.Composable:
    table_id = captured.table.id
    return sql.Identifier(table_id.schema or "public", table_id.table)


class PgChunkDialect:
    """The planning queries in PostgreSQL's SQL, on a connection inside the snapshot.
    `keep_locks` False (the Spark source's driver, see PgCaptureSource._release_driver_locks):
    each query runs in a savepoint rolled back to once its rows are fetched, which gives up the
    table lock it took."""

    def __init__(self, conn: Any, *, keep_locks: bool = True) -> None:
        self.conn = conn
        self.keep_locks = keep_locks

    def _run(self, query: sql.Composable) -> list[tuple[Any, ...]]:
        try:
            with self.conn.cursor() as cur:
                if self.keep_locks:
                    cur.execute(query)
                    return cur.fetchall()
                cur.execute(f"SAVEPOINT {_PLANNING_QUERY}")
                cur.execute(query)
                rows = cur.fetchall()
                cur.execute(f"ROLLBACK TO SAVEPOINT {_PLANNING_QUERY}")
                cur.execute(f"RELEASE SAVEPOINT {_PLANNING_QUERY}")
                return rows
        except psycopg2.Error as exc:
            raise connection_error("planning the snapshot failed", exc) from None

    def count(self, table: Any, select: str | None) -> int:
        return int(self._run(sql.SQL("SELECT count(*) FROM {}").format(_ident(table)))[0][0])

    def block_range(self, table: Any) -> tuple[int, int, int] | None:
        # one scan counts the rows and finds the blocks of the first and last visible rows
        rows, first, last = self._run(sql.SQL(
            "SELECT count(*), min(b), max(b) FROM (SELECT (ctid::text::point)[0]::bigint AS b FROM {}) AS blocks"
        ).format(_ident(table)))[0]
        return int(rows), int(first or 0), int(last or 0)

    def sampled_bounds(self, table: Any, key: Any, rows: int, chunks: int, percent: float) -> list[Bound]:
        """``TABLESAMPLE BERNOULLI`` samples rows; SYSTEM would sample whole blocks, each a stretch
        of keys when the table is stored in key order, and chunks came out uneven."""
        cols, text_cols, descending = _key_columns(list(key))
        ident = _ident(table)
        return [tuple(r) for r in self._run(sql.SQL(
            "SELECT DISTINCT ON (share) {text_cols} FROM ("
            "SELECT {cols}, ntile({chunks}) OVER (ORDER BY {cols}) AS share "
            "FROM {t} TABLESAMPLE BERNOULLI ({percent}) REPEATABLE (0) "
            "WHERE ROW({cols}) < (SELECT {cols} FROM {t} ORDER BY {descending} LIMIT 1)) s "
            "WHERE share < {chunks} ORDER BY share, {descending}").format(
                text_cols=text_cols, cols=cols, chunks=sql.Literal(chunks), t=ident, percent=sql.Literal(percent),
                descending=descending))]

    def exact_bounds(self, table: Any, key: Any, rows: int, size: int) -> list[Bound]:
        cols, text_cols, _ = _key_columns(list(key))
        return [tuple(r) for r in self._run(sql.SQL(
            "SELECT {text_cols} FROM (SELECT {cols}, row_number() OVER (ORDER BY {cols}) AS rn FROM {t}) s "
            "WHERE rn % {n} = 0 AND rn < {rows} ORDER BY rn").format(
                text_cols=text_cols, cols=cols, t=_ident(table), n=sql.Literal(size), rows=sql.Literal(rows)))]


# -- streaming units for Spark -------------------------------------------------------------------

def _mark(pos: StreamPosition) -> tuple[Any, ...]:
    """What moves when the reader handles a message (restart LSN first)."""
    return pos.restart_lsn, pos.message_lsn, pos.xid, pos.final_lsn, pos.tx_msgs


class _ChunkCollector:
    """Stands in for the encoding pool of the standalone runner: the reader thread hands chunks
    here, with the position after them, into a queue bounded in messages (waiting keeps the
    connection alive)."""

    workers = 0

    def __init__(self, messages: int) -> None:
        self.chunks = UnitQueue(messages)
        self.reader: StreamingReader | None = None
        self.stop = threading.Event()
        self.handed: tuple[Any, ...] | None = None  # _mark() of the position after the last chunk queued

    def start(self, settings: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def submit(self, chunk: Chunk) -> Any:
        assert self.reader is not None
        after = copy.copy(self.reader.position)
        while not self.stop.is_set():
            try:
                self.chunks.put(StreamWork(chunk), after, len(chunk.messages), chunk_bytes(chunk), timeout=1.0)
                self.handed = _mark(after)
                break
            except queue.Full:
                self.reader._keepalive()
        return None


class PgUnitStream(UnitStream):
    """The slot's messages as :class:`StreamWork` units, read ahead on a background thread."""

    def __init__(self, source: PgCaptureSource, reader: StreamingReader, collector: _ChunkCollector) -> None:
        self.source = source
        self.reader = reader
        self.collector = collector
        self.tx_metadata = source.config.get("provide.transaction.metadata")
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="headwater-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.reader.run(self._stop)
        except BaseException as exc:  # handed to the caller of get()/check()
            self._failure = exc

    def get(self, timeout: float) -> tuple[StreamWork, Offset]:
        unit, after = self.collector.chunks.get(timeout)
        return unit, position_offset(after)

    def between_transactions(self, offset: Offset) -> bool:
        # with transaction metadata a batch ends between transactions only: BEGIN/END counts need
        # whole ones
        return not self.tx_metadata or offset.get("tx_final_lsn") is None

    def split(self, unit: StreamWork, end_key: tuple[Any, ...]) -> tuple[StreamWork | None, StreamWork]:
        head, tail = _split(unit.chunk, end_key)  # type: ignore[arg-type]
        return (StreamWork(head) if head is not None else None), StreamWork(tail)

    def append(self, units: list[Any], unit: StreamWork) -> None:
        chunk = unit.chunk
        if not chunk.messages:
            return
        if self.tx_metadata and units:
            # whole transactions stay together, so BEGIN/END counts are right
            last = units[-1].chunk
            if last.position.final_lsn is not None or _ends_inside_tx(last):
                if chunk.relations:  # adopted where this chunk starts (one may be a new version)
                    last.relation_changes.append((len(last.messages), chunk.relations))
                last.messages.extend(chunk.messages)
                return
        units.append(unit)

    def changes(self, unit: StreamWork) -> int:
        return change_messages(unit.chunk)

    def nbytes(self, unit: StreamWork) -> int:
        return chunk_bytes(unit.chunk)

    def past(self, offset: Offset, target: Any) -> bool:
        return offset_key(offset)[0] >= target

    def caught_up(self, target: Any) -> bool:
        """Every message before the target LSN was received and handed over (the server's
        keepalives tell how far it has sent; it sends one when it has nothing more)."""
        reader, collector = self.reader, self.collector
        # wal_end first: the reader handled every message that arrived before the keepalive
        cursor = reader._cursor
        wal_end = (getattr(cursor, "wal_end", 0) or 0) if cursor is not None else 0
        mark = _mark(reader.position)
        if mark != collector.handed:
            return False  # read, but still in the reader's open chunk (or on its way to the queue)
        if mark[0] < target and (wal_end < target or mark[2] is not None):
            return False
        return collector.chunks.empty()

    def check(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            if isinstance(failure, ConnectorError):
                raise self.source.connector.explain_stream_failure(failure)
            raise failure

    def close(self) -> None:
        self._stop.set()
        self.collector.stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def _transaction_status(record: Any) -> str | None:
    """BEGIN or END for a transaction metadata record (provide.transaction.metadata), else None."""
    value = record.value
    if record.table is None and isinstance(value, dict) and "op" not in value:
        status = value.get("status")
        if status in ("BEGIN", "END"):
            return str(status)
    return None


def _ends_inside_tx(chunk: Chunk) -> bool:
    pos = copy.copy(chunk.position)
    for payload, lsn in chunk.messages:
        advance_position(pos, payload, lsn)
    return pos.final_lsn is not None


def _split(chunk: Chunk, end_key: tuple[int, int]) -> tuple[Chunk | None, Chunk]:
    """Cut a chunk where the position reaches `end_key`. Only the reader's own chunks are cut,
    and each of them has one set of relation definitions."""
    assert not chunk.relation_changes, "a joined chunk is never cut"
    pos = copy.copy(chunk.position)
    for i, (payload, lsn) in enumerate(chunk.messages):
        advance_position(pos, payload, lsn)
        key = offset_key(position_offset(pos))
        if key == end_key:
            head = Chunk(chunk.position, chunk.messages[: i + 1], dict(chunk.relations))
            return head, Chunk(copy.copy(pos), chunk.messages[i + 1:], dict(chunk.relations))
        if key > end_key:
            raise ConnectorError(f"the stream moved past the checkpointed position {end_key} without reaching it; "
                                 "the slot no longer holds the changes of the batch being replayed")
    return chunk, Chunk(copy.copy(pos), [], dict(chunk.relations))

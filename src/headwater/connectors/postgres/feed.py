"""PostgreSQL as a :class:`~headwater.engine.feed.ChangeFeed`: the driver reads, executors build.

Driver side (:class:`PgChangeFeed`): one process owns the slot. The initial snapshot is planned
as chunks — key ranges of a table (ctid block ranges for tables without a key) — that executors
read in parallel inside the slot's exported snapshot, so together they are the consistent state
at the slot's consistent point, and streaming continues from exactly there. Streaming reuses
:class:`~headwater.connectors.postgres.streaming.StreamingReader` in its parallel mode on a
background thread: the reader tracks positions and cuts the raw messages into
:class:`~headwater.connectors.postgres.events.Chunk`\\ s, which wait in a bounded queue until a
batch plans them; executors build and serialize the events (the same `ChunkBuilder` as the
standalone worker processes).

Offsets are the standalone runner's PostgreSQL offsets (`PgOffset` dicts) plus `phase`; a batch
is replayable from them after a restart: streaming restarts at the batch's start position and the
messages are cut again at its end position, message for message.
"""

from __future__ import annotations

import collections
import copy
import itertools
import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

import psycopg2
from psycopg2 import sql

from headwater.config import Configuration
from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres import snapshot as snap
from headwater.connectors.postgres.connection import connect, connect_kwargs, connection_error
from headwater.connectors.postgres.connector import PostgresConnector
from headwater.connectors.postgres.events import (
    BuilderSettings,
    Chunk,
    StreamPosition,
    advance_position,
)
from headwater.connectors.postgres.metadata import CatalogReader
from headwater.connectors.postgres.pgoutput import format_lsn
from headwater.connectors.postgres.replication import create_slot, drop_slot, read_slot
from headwater.connectors.postgres.schemas import CapturedTable
from headwater.connectors.postgres.snapshot_lease import (
    HOLDER_APP,
    SnapshotHolder,
    export_snapshot,
)
from headwater.connectors.postgres.source_info import PgOffset
from headwater.connectors.postgres.streaming import StreamingReader
from headwater.connectors.postgres.work import (
    PHASE_SNAPSHOT,
    PHASE_STREAM,
    PgWorkDecoder,
    SnapshotWork,
    StreamWork,
    change_messages,
    chunk_bytes,
)
from headwater.engine.connector import ConnectorError
from headwater.engine.feed import ChangeFeed, Offset

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

# change messages the driver reads ahead of Spark (source option readAheadMessages), and at most
# this many of their bytes. A streaming micro-batch takes what has been read ahead (under
# AvailableNow it waits for the read-ahead to fill), so this also sizes the batches of a catch-up:
# each one costs the Delta sink a MERGE or rewrite of the whole table (a 1M-row transaction in
# one batch instead of two, bench/spark_pipeline.py). ~300 bytes of driver memory a message of a
# narrow table; the byte bound keeps wide rows in check.
DEFAULT_READ_AHEAD_MESSAGES = 1_048_576

# Properties of the standalone runner that the Spark source does not apply: a warning at start
# names each one that is set (the Spark source's own options are in docs/spark.md).
_OFFSETS_IN_CHECKPOINT = "Spark's checkpoint is the offset store"
_SPARK_BATCHES = ("the Spark source's batches are bounded by its maxRowsPerBatch and readAheadMessages "
                  "options")
NO_EFFECT_IN_SPARK: dict[str, str] = {
    "offset.storage": _OFFSETS_IN_CHECKPOINT,
    "offset.storage.file.filename": _OFFSETS_IN_CHECKPOINT,
    "offset.flush.interval.ms": _OFFSETS_IN_CHECKPOINT + ", written as each batch commits",
    "max.batch.size": _SPARK_BATCHES,
    "max.queue.size": _SPARK_BATCHES,
    "max.queue.size.in.bytes": _SPARK_BATCHES,
    "poll.interval.ms": "Spark's trigger decides when a batch is planned",
    "encoding.workers": "Spark's executors build the records",
    "heartbeat.interval.ms": "the Spark source emits no heartbeat records (the slot is acknowledged as "
                             "each batch commits)",
    "heartbeat.action.query": "the Spark source emits no heartbeat records",
    "snapshot.delay.ms": "the Spark source snapshots when its first batch is planned",
    "snapshot.isolation.mode": "the Spark source's parallel readers share one exported snapshot, read in "
                               "REPEATABLE READ",
}
READ_AHEAD_BYTES = 256 << 20


# -- positions --------------------------------------------------------------------------------

def offset_key(offset: Offset) -> tuple[int, int]:
    """Orders stream offsets: inside a transaction (its commit LSN, messages done); between
    transactions (the restart LSN, or the last non-transactional message's LSN). A commit's end
    LSN lies after its commit LSN, so a transaction's positions sort before the one after it."""
    if offset.get("tx_final_lsn") is not None:
        return offset["tx_final_lsn"], offset.get("tx_msgs", 0)
    return max(offset.get("lsn_commit") or 0, offset.get("message_lsn") or 0), 0


def position_offset(pos: StreamPosition) -> Offset:
    return {"phase": PHASE_STREAM, **pos.offset(None, pos.tx_msgs)}


def _mark(pos: StreamPosition) -> tuple[Any, ...]:
    """What moves when the reader handles a message (restart LSN first)."""
    return pos.restart_lsn, pos.message_lsn, pos.xid, pos.final_lsn, pos.tx_msgs


# -- the driver side --------------------------------------------------------------------------

class _MessageQueue:
    """A FIFO of (chunk, position after it) bounded by the messages it holds, not by the chunks:
    the reader hands over whatever the connection had buffered, from a few messages to
    WORKER_CHUNK, so a bound in chunks read ahead anywhere from a few thousand messages to the
    intended amount. A chunk larger than the bound still fits into an empty queue."""

    def __init__(self, messages: int, nbytes: int = READ_AHEAD_BYTES) -> None:
        self.capacity = max(1, messages)
        self.byte_capacity = max(1, nbytes)
        self.messages = 0  # held now
        self.nbytes = 0
        self._items: collections.deque[tuple[Chunk, StreamPosition, int]] = collections.deque()
        self._changed = threading.Condition()

    def put(self, item: tuple[Chunk, StreamPosition], timeout: float) -> None:
        """Raises queue.Full when there is no room within `timeout` seconds."""
        size, nbytes = len(item[0].messages), chunk_bytes(item[0])

        def room() -> bool:
            return not self._items or (self.messages + size <= self.capacity
                                       and self.nbytes + nbytes <= self.byte_capacity)

        with self._changed:
            if not self._changed.wait_for(room, timeout):
                raise queue.Full
            self._items.append((*item, nbytes))
            self.messages += size
            self.nbytes += nbytes
            self._changed.notify_all()

    def get(self, timeout: float) -> tuple[Chunk, StreamPosition]:
        """Raises queue.Empty when nothing arrives within `timeout` seconds (0: do not wait)."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self._items), timeout):
                raise queue.Empty
            chunk, position, nbytes = self._items.popleft()
            self.messages -= len(chunk.messages)
            self.nbytes -= nbytes
            self._changed.notify_all()
            return chunk, position

    def empty(self) -> bool:
        with self._changed:
            return not self._items


class _ChunkCollector:
    """Stands in for the encoding pool of the standalone runner: the reader thread hands chunks
    here, with the position after them, into a queue bounded in messages (waiting keeps the
    connection alive)."""

    workers = 0

    def __init__(self, messages: int) -> None:
        self.chunks = _MessageQueue(messages)
        self.reader: StreamingReader | None = None
        self.stop = threading.Event()
        self.handed: tuple[Any, ...] | None = None  # _mark() of the position after the last chunk queued

    def start(self, settings: BuilderSettings) -> None:
        pass

    def close(self) -> None:
        pass

    def submit(self, chunk: Chunk) -> Any:
        assert self.reader is not None
        item = (chunk, copy.copy(self.reader.position))
        while not self.stop.is_set():
            try:
                self.chunks.put(item, timeout=1.0)
                self.handed = _mark(item[1])
                break
            except queue.Full:
                self.reader._keepalive()
        return None


class PgChangeFeed(ChangeFeed):
    def __init__(self, config: Configuration, *, snapshot_chunk_rows: int = 100_000,
                 read_ahead_messages: int = DEFAULT_READ_AHEAD_MESSAGES) -> None:
        self.config = config
        self.read_ahead_messages = read_ahead_messages
        self.connector = PostgresConnector(config)
        self.settings = self.connector.builder_settings()
        for name, why in NO_EFFECT_IN_SPARK.items():
            if config.is_set(name):
                log.warning("property '%s' has no effect in the Spark source: %s", name, why)
        self.snapshot_chunk_rows = snapshot_chunk_rows
        self._conn: Any = None
        self._repl: Any = None
        self._snapshot_name: str | None = None
        self._snapshot_lsn: int | None = None
        self._snapshot_txid: int | None = None
        self._snapshot_conn: Any = None         # holds a snapshot exported by _export_snapshot open
        self._record_lsn: int | None = None     # source.lsn of its records (None: the slot's point)
        self._registry: Any = None
        self._table_ids: list[Any] = []         # the captured tables, as _open found them
        self._reader: StreamingReader | None = None
        self._collector: _ChunkCollector | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._stop = threading.Event()
        self._ready: list[tuple[Chunk, StreamPosition]] = []   # read ahead, in order
        self._reader_start: Offset | None = None
        self._target_lsn: int | None = None     # Trigger.AvailableNow: read up to here, then stop
        self._initial: Offset | None = None     # what initial_offset decided (Spark asks more than once)

    # -- ChangeFeed --------------------------------------------------------------------

    def decoder(self) -> PgWorkDecoder:
        return PgWorkDecoder(self.settings, connect_kwargs(self.config, application_name="headwater-executor"))

    def initial_offset(self) -> Offset:
        # Spark asks twice before batch 0 (for its start, then again to plan it): the second
        # answer must be the first, not a second exported snapshot of a slot this feed just made
        if self._initial is None:
            self._initial = self._decide_initial_offset()
        return dict(self._initial)

    def _decide_initial_offset(self) -> Offset:
        self._open()
        c = self.connector
        slot = read_slot(self._conn, c.slot_name)
        if c._wants_snapshot(None, slot is not None) and c.snapshot_mode != "no_data":
            if slot is not None and slot.confirmed_flush_lsn:
                # Spark asks again when it restarts inside the snapshot batch (batch 0 has no
                # logged start). The sinks may hold part of the old snapshot already, and the batch's
                # logged end streams from the slot's position: a new slot would lose the changes
                # made since. So the slot stays, a snapshot of the present is read, and the stream
                # sends the changes since the slot's position again (as Debezium does).
                log.warning("replication slot %s exists: taking a snapshot, then streaming from the slot's "
                            "position %s", c.slot_name, format_lsn(slot.confirmed_flush_lsn))
                self._export_snapshot(slot.confirmed_flush_lsn)
            else:
                self._take_slot_with_snapshot(slot is not None)
            return {"phase": PHASE_SNAPSHOT, "lsn_commit": self._snapshot_lsn}
        if slot is None:
            created = create_slot(self._replication(), c.slot_name, export_snapshot=False)
            return {"phase": PHASE_STREAM, **PgOffset(lsn_commit=created.consistent_point).to_dict()}
        return {"phase": PHASE_STREAM, **PgOffset(lsn_commit=slot.confirmed_flush_lsn or 0).to_dict()}

    def prepare_available_now(self) -> None:
        """Trigger.AvailableNow: everything committed up to now, then no more batches."""
        self._open()
        with self._conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            self._target_lsn = pg.parse_lsn(cur.fetchone()[0])

    def latest(self, start: Offset, max_records: int | None) -> Offset:
        if start.get("phase") == PHASE_SNAPSHOT:
            lsn = start["lsn_commit"]
            done = PgOffset(lsn_commit=lsn, lsn=lsn, snapshot_completed=True).to_dict()
            return {"phase": PHASE_STREAM, **done}
        if not self.connector._streams():
            return start
        if self._slot_vanished(start):
            # snapshot.mode=when_needed/always: a new slot and a snapshot of the present, as the
            # standalone runner does. This batch only moves there (it reads nothing); the next
            # one reads the snapshot, then the stream goes on from the new slot
            log.warning("replication slot %s no longer exists; the checkpoint resumes at %s: taking a new "
                        "snapshot from a new slot (snapshot.mode=%s; rows deleted in between may remain in "
                        "materialized tables)", self.connector.slot_name, format_lsn(offset_key(start)[0]),
                        self.connector.snapshot_mode)
            self._take_slot_with_snapshot(False)
            return {"phase": PHASE_SNAPSHOT, "lsn_commit": self._snapshot_lsn}
        self._ensure_streaming(start)
        if self._target_lsn is not None and offset_key(start)[0] >= self._target_lsn:
            return start
        limit = max_records or self.read_ahead_messages
        count = sum(change_messages(c) for c, _ in self._ready)
        volume = sum(chunk_bytes(c) for c, _ in self._ready)
        available_now = self._target_lsn is not None
        # AvailableNow catches up on a backlog: a batch waits until the reader has read ahead as
        # much as it may (or everything there is), since every batch pays the sinks' fixed costs
        # (a MERGE reads the whole table). Taking only what had arrived made the first batch a
        # few thousand rows and the rest as large as one batch's run time let the reader get.
        # Otherwise a batch takes what has arrived: latency first.
        fill = min(limit, self.read_ahead_messages) if available_now else 0
        deadline = time.monotonic() + (120.0 if available_now else 0.5)
        start_key = offset_key(start)
        progress = False
        while True:
            self._check_reader()
            # a chunk may end where the batch starts (e.g. only the BEGIN of the transaction a
            # restart resumes in): returning `start` then would end an AvailableNow run early.
            # Once the end has moved, more chunks cannot move it back: no need to look again.
            progress = progress or offset_key(self._batch_end(start, limit)) > start_key
            if progress and count >= limit:
                break
            if available_now and not progress and self._caught_up():
                break
            filled = count >= fill or volume >= READ_AHEAD_BYTES
            try:
                item = self._collector.chunks.get(timeout=0.0 if progress and filled else 0.2)  # type: ignore[union-attr]
            except queue.Empty:
                if progress and (filled or self._caught_up()):
                    break
                if time.monotonic() >= deadline:
                    break
                continue
            self._ready.append(item)
            count += change_messages(item[0])
            volume += chunk_bytes(item[0])
        return self._batch_end(start, limit)

    def _batch_end(self, start: Offset, limit: int) -> Offset:
        """The end of the next batch from what was read ahead: about `limit` messages, but never
        cut before the position moved past `start`."""
        end = start
        start_key = offset_key(start)
        counted = 0
        for chunk, after in self._ready:
            changes = change_messages(chunk)
            if counted and counted + changes > limit and offset_key(end) > start_key:
                break
            counted += changes
            candidate = position_offset(after)
            if self.settings.provide_transaction_metadata and candidate.get("tx_final_lsn") is not None:
                continue  # a batch ends between transactions: BEGIN/END counts need whole ones
            end = candidate
        return end

    def plan(self, start: Offset, end: Offset) -> list[Any]:
        if start.get("phase") == PHASE_SNAPSHOT:
            return self._plan_snapshot(start)
        if end.get("phase") == PHASE_SNAPSHOT:  # the move to a new slot's snapshot (see latest)
            return []
        if offset_key(end) <= offset_key(start):
            return []
        if self._slot_vanished(start):
            # a batch logged before the slot went, replayed: its changes cannot be read again; the
            # snapshot the next batch takes holds their result
            log.warning("replication slot %s no longer exists: the changes of the batch from %s to %s cannot be "
                        "read again; the new snapshot that follows replaces them", self.connector.slot_name,
                        format_lsn(offset_key(start)[0]), format_lsn(offset_key(end)[0]))
            return []
        self._ensure_streaming(start)
        end_key = offset_key(end)
        work: list[Any] = []
        while True:
            if not self._ready:
                self._check_reader()
                try:
                    self._ready.append(self._collector.chunks.get(timeout=1.0))  # type: ignore[union-attr]
                except queue.Empty:
                    continue
            chunk, after = self._ready[0]
            after_key = offset_key(position_offset(after))
            if after_key <= end_key:
                self._ready.pop(0)
                self._add_work(work, chunk)
                if after_key == end_key:
                    return work
                continue
            head, tail = _split(chunk, end_key)
            if head is not None:
                self._add_work(work, head)
            self._ready[0] = (tail, after)
            return work

    def _caught_up(self) -> bool:
        """AvailableNow: every message before the target LSN was received and handed over (the
        server's keepalives tell how far it has sent; it sends one when it has nothing more)."""
        reader, target, collector = self._reader, self._target_lsn, self._collector
        assert reader is not None and target is not None and collector is not None
        # wal_end first: the reader handled every message that arrived before the keepalive
        cursor = reader._cursor
        wal_end = (getattr(cursor, "wal_end", 0) or 0) if cursor is not None else 0
        mark = _mark(reader.position)
        if mark != collector.handed:
            return False  # read, but still in the reader's open chunk (or on its way to the queue)
        if mark[0] < target and (wal_end < target or mark[2] is not None):
            return False
        return collector.chunks.empty()

    def commit(self, end: Offset) -> None:
        if end.get("phase") != PHASE_STREAM:
            return
        if self._snapshot_name is not None and end.get("snapshot_completed"):
            self._release_snapshot()
        lsn = end.get("lsn_commit")
        if self._reader is not None and isinstance(lsn, int) and lsn > 0 and self.connector._flush_lsn_enabled():
            self._reader.acknowledge(lsn)

    def close(self) -> None:
        self._stop.set()
        if self._collector is not None:
            self._collector.stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._reader is not None:
            self._reader.final_feedback()
        self._release_snapshot()
        for conn in (self._repl, self._conn):
            if conn is not None:
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
        self._repl = self._conn = None
        self._initial = None

    # -- set-up ------------------------------------------------------------------------

    def _open(self, *, publication: bool = True) -> None:
        if self._conn is not None:
            return
        c = self.connector
        self._conn = connect(self.config, application_name="headwater-driver")
        if publication:  # an extract reads tables only: any wal_level will do
            c._check_server(self._conn)
        else:
            c._server_version = self._conn.server_version
        catalog = CatalogReader(self._conn)
        table_ids = c._captured_table_ids(catalog)
        if publication:
            c.ensure_publication(self._conn, table_ids)
        self._registry = self.settings.registry(catalog)
        self._table_ids = table_ids

    def _replication(self) -> Any:
        if self._repl is None:
            self._repl = connect(self.config, replication=True, application_name="headwater-stream")
        return self._repl

    def _take_slot_with_snapshot(self, slot_exists: bool) -> None:
        """(Re)create the slot with an exported snapshot; the replication connection keeps the
        snapshot alive until streaming starts."""
        c = self.connector
        if slot_exists:
            drop_slot(self._conn, c.slot_name)
        created = create_slot(self._replication(), c.slot_name, export_snapshot=True)
        self._snapshot_name = created.snapshot_name
        self._snapshot_lsn = created.consistent_point
        self._record_lsn = None
        with self._conn.cursor() as cur:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur.execute("SET TRANSACTION SNAPSHOT %s", (created.snapshot_name,))
            cur.execute("SELECT txid_snapshot_xmax(txid_current_snapshot())")
            self._snapshot_txid = cur.fetchone()[0]
            cur.execute("COMMIT")
        log.info("created replication slot %s at %s with an exported snapshot", c.slot_name,
                 format_lsn(created.consistent_point))

    def _export_snapshot(self, lsn: int) -> None:
        """A snapshot of the present, exported by a transaction of its own that stays open until
        the snapshot is released; the slot (still at `lsn`) is kept."""
        conn = connect(self.config, application_name="headwater-snapshot")
        try:
            with conn.cursor() as cur:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                name, txid, record_lsn = export_snapshot(cur)
        except BaseException:
            conn.close()
            raise
        self._snapshot_conn = conn
        self._snapshot_name, self._snapshot_lsn, self._snapshot_txid = name, lsn, txid
        self._record_lsn = record_lsn  # what the records say, as Debezium: where the snapshot was read

    def _release_snapshot(self) -> None:
        self._snapshot_name = None
        conn, self._snapshot_conn = self._snapshot_conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg2.Error:
                pass

    # -- snapshot ----------------------------------------------------------------------

    def _plan_snapshot(self, start: Offset) -> list[SnapshotWork]:
        self._open()
        lsn = start.get("lsn_commit") or 0
        if self._snapshot_name is None or self._snapshot_lsn != lsn:
            # the snapshot was planned by another process (its exported snapshot is gone): as in
            # initial_offset, the slot stays and a snapshot of the present is read
            slot = read_slot(self._conn, self.connector.slot_name)
            if slot is not None and (slot.confirmed_flush_lsn or 0) <= lsn:
                log.warning("the snapshot at %s did not complete; taking it again, then streaming from there",
                            format_lsn(lsn))
                self._export_snapshot(lsn)
            else:
                state = "no longer exists" if slot is None else \
                    f"has moved on to {format_lsn(slot.confirmed_flush_lsn or 0)}"
                if self.connector.snapshot_mode not in ("when_needed", "always"):
                    # a new slot starts after changes the sinks may need (deletes of rows the
                    # partial snapshot delivered): never silently
                    raise ConnectorError(
                        f"the snapshot at {format_lsn(lsn)} did not complete, and replication slot "
                        f"{self.connector.slot_name!r} {state}: the changes since then cannot be read again. "
                        "The outputs may hold part of that snapshot. Start over with a new checkpoint and "
                        "empty outputs, or set snapshot.mode=when_needed to take a new snapshot from a new "
                        "slot (rows deleted in between may then remain in materialized tables)")
                log.warning("the snapshot at %s did not complete and replication slot %s %s; taking a new snapshot "
                            "from a new slot (snapshot.mode=%s)", format_lsn(lsn), self.connector.slot_name, state,
                            self.connector.snapshot_mode)
                self._take_slot_with_snapshot(slot is not None)
        return self._plan_chunks(self._snapshot_name or "", self._record_lsn or self._snapshot_lsn or 0,
                                 self._snapshot_txid or 0)

    def plan_extract(self, idle_seconds: float) -> tuple[list[SnapshotWork], PgWorkDecoder]:
        """A one-off batch read: every captured table, chunked, inside one snapshot that a holder
        process keeps open for the tasks (see :mod:`~headwater.connectors.postgres.snapshot_lease`);
        no slot, no publication. The chunks' events carry the LSN current at the snapshot."""
        self._open(publication=False)
        holder = SnapshotHolder(connect_kwargs(self.config, application_name=HOLDER_APP), idle_seconds=idle_seconds)
        lease = holder.lease
        try:
            work = self._plan_chunks(lease.snapshot_name, lease.lsn, lease.txid)
        except BaseException:
            holder.release()
            raise
        holder.expect(len(work))
        log.info("batch read: %d chunk(s) inside snapshot %s at %s", len(work), lease.snapshot_name,
                 format_lsn(lease.lsn))
        task_args = connect_kwargs(self.config, application_name=lease.task_application_name)
        decoder = PgWorkDecoder(self.settings, task_args, lease=lease)
        return work, decoder

    def _plan_chunks(self, snapshot_name: str, lsn: int, txid: int) -> list[SnapshotWork]:
        c = self.connector
        catalog = CatalogReader(self._conn)
        table_ids = c._captured_table_ids(catalog)
        oids = [catalog.oid_of(t) for t, _ in table_ids]
        tables = self._registry.load([o for o in oids if o is not None])
        ordered = sorted(tables.values(), key=c._snapshot_order)
        include = self.config.get("snapshot.include.collection.list") or []
        if include:
            import re

            patterns = [re.compile(p, re.IGNORECASE) for p in include]
            ordered = [t for t in ordered if any(p.fullmatch(t.collection) for p in patterns)]
        # select overrides, else the custom snapshot query (which may leave tables out): a table
        # read with a custom SELECT is one chunk
        ordered, overrides = snap.snapshot_selects(self.config, c.snapshot_query, c.column_filter, ordered)
        conn = self._conn
        conn.autocommit = False
        try:
            with conn.cursor() as cur:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
            if self.config.get("snapshot.locking.mode") == "shared":
                # as Debezium: no exclusive access (ALTER, TRUNCATE, DROP) to the tables while the
                # snapshot is planned; the executors' reads take no table locks
                snap.lock_tables(conn, [t.table.id for t in ordered], self.config.get("snapshot.lock.timeout.ms"))
            plans = [(t, self._chunk_bounds(conn, t, overrides.get(t.collection))) for t in ordered]
        except psycopg2.Error as exc:
            raise connection_error("planning the snapshot failed", exc) from None
        finally:
            conn.rollback()
            conn.autocommit = True
        non_empty = [i for i, (_, (rows, _)) in enumerate(plans) if rows != 0]
        last_index = len(plans) - 1
        work: list[SnapshotWork] = []
        for index, (captured, (_, bounds)) in enumerate(plans):
            for n, (lower, upper, blocks) in enumerate(bounds):
                work.append(SnapshotWork(
                    table=captured.table, raw_columns=captured.raw_columns, table_index=index, chunk_index=n,
                    first_table=index == 0,
                    # Debezium forces "last" onto the snapshot's very last record, even when
                    # empty tables follow
                    last_table=index == (non_empty[-1] if non_empty else last_index),
                    first_chunk=n == 0, last_chunk=n == len(bounds) - 1,
                    key_columns=tuple(captured.table.primary_key) if blocks is None else (),
                    lower=lower, upper=upper, blocks=blocks, override=overrides.get(captured.collection),
                    snapshot_name=snapshot_name, lsn=lsn, txid=txid))
        return work

    def _chunk_bounds(self, conn: Any, captured: CapturedTable, override: str | None
                      ) -> tuple[int, list[tuple[tuple[str, ...] | None, tuple[str, ...] | None,
                                              tuple[int, int] | None]]]:
        """(row count, chunks) of a table: key ranges every `snapshot_chunk_rows` keys, ctid block
        ranges for a table without a key, one chunk for a small table or a custom SELECT."""
        table_id = captured.table.id
        ident = sql.Identifier(table_id.schema or "public", table_id.table)
        size = self.snapshot_chunk_rows
        key = list(captured.table.primary_key)
        with conn.cursor() as cur:
            if key or override:
                cur.execute(sql.SQL("SELECT count(*) FROM {}").format(ident))
                rows = cur.fetchone()[0]
            else:
                # ctid chunks run from the block of the first visible row to that of the last, so
                # that the first chunk holds the table's first row and the last chunk its last row
                # (the snapshot markers go on them); chunks in between may be empty. One scan
                # counts the rows and finds both blocks.
                cur.execute(sql.SQL("SELECT count(*), min(b), max(b) FROM "
                                    "(SELECT (ctid::text::point)[0]::bigint AS b FROM {}) AS blocks").format(ident))
                rows, first, last = cur.fetchone()
            if override or rows <= size:
                return rows, [(None, None, None)]
            if not key:
                per = max(1, (last - first + 1) * size // max(rows, 1))
                edges = [*range(first, last + 1, per), last + 1]
                return rows, [(None, None, (lo, hi)) for lo, hi in itertools.pairwise(edges)]
            bounds = _sampled_key_bounds(cur, ident, key, rows, size)
            if bounds is None:
                bounds = _exact_key_bounds(cur, ident, key, rows, size)
            edges: list[tuple[str, ...] | None] = [None, *bounds, None]
        return rows, [(lo, hi, None) for lo, hi in itertools.pairwise(edges)]

    # -- streaming ---------------------------------------------------------------------

    def _slot_vanished(self, start: Offset) -> bool:
        """Before streaming starts: True when the slot the checkpoint resumes from is gone and
        snapshot.mode takes a new snapshot then; an error (what is lost, what to do) when it does not."""
        if self._reader is not None:
            return False
        self._open()
        c = self.connector
        if read_slot(self._conn, c.slot_name) is not None:
            return False
        if c.snapshot_mode in ("when_needed", "always"):
            return True
        raise self._missing_slot_error(start)

    def _missing_slot_error(self, start: Offset) -> ConnectorError:
        return self.connector._vanished_slot_error(PgOffset.from_dict(_pg_part(start)), resumer="the checkpoint",
                                                   fresh_start="use a new checkpoint location")

    def _ensure_streaming(self, start: Offset) -> None:
        if self._reader is not None:
            return
        self._open()
        c = self.connector
        if self._snapshot_name is not None:
            self._release_snapshot()
        slot = c.wait_for_slot(self._conn)
        if slot is None:  # dropped since _slot_vanished looked
            raise self._missing_slot_error(start)
        c.apply_replica_identities(self._conn, self._table_ids)
        collector = _ChunkCollector(self.read_ahead_messages)
        position = StreamPosition.resume(PgOffset.from_dict(_pg_part(start)))
        reader = StreamingReader(
            repl_conn=self._replication(), registry=self._registry, settings=self.settings, slot_name=c.slot_name,
            publication=c.publication, status_interval_s=max(self.config.get("status.update.interval.ms") / 1000, 1.0),
            flush_lsn_to_server=c._flush_lsn_enabled(), emit=lambda items: None, position=position,
            pool=collector, spools=c._stream_spools(), server_version=c._server_version)
        c.configure_reader(reader)
        collector.reader = reader
        collector.handed = _mark(position)
        self._collector, self._reader, self._reader_start = collector, reader, start
        reader.start()
        self._thread = threading.Thread(target=self._run_reader, name="headwater-feed", daemon=True)
        self._thread.start()
        log.info("streaming from slot %s at %s", c.slot_name, format_lsn(start.get("lsn_commit") or 0))

    def _run_reader(self) -> None:
        try:
            assert self._reader is not None
            self._reader.run(self._stop)
        except BaseException as exc:  # handed to the caller of latest()/plan()
            self._failure = exc

    def _check_reader(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            if isinstance(failure, ConnectorError):
                raise self.connector._explain_stream_failure(failure)
            raise failure

    def _add_work(self, work: list[Any], chunk: Chunk) -> None:
        if not chunk.messages:
            return
        if self.settings.provide_transaction_metadata and work:
            # whole transactions stay together, so BEGIN/END counts are right
            last = work[-1].chunk
            if last.position.final_lsn is not None or _ends_inside_tx(last):
                if chunk.relations:  # adopted where this chunk starts (one may be a new version)
                    last.relation_changes.append((len(last.messages), chunk.relations))
                last.messages.extend(chunk.messages)
                return
        work.append(StreamWork(chunk))


# keys sampled per chunk: chunks then come out within a few per cent of their size
_SAMPLES_PER_CHUNK = 1024


def _key_columns(key: list[str]) -> tuple[sql.Composable, sql.Composable, sql.Composable]:
    """(k1, k2, …), (k1::text AS __hw_k0, …) and (k1 DESC, …) of a key. The text forms are
    aliased: an output column named like a key column is what ORDER BY would sort (as text)."""
    return (sql.SQL(", ").join(sql.Identifier(c) for c in key),
            sql.SQL(", ").join(sql.SQL("{}::text AS {}").format(sql.Identifier(c), sql.Identifier(f"__hw_k{i}"))
                               for i, c in enumerate(key)),
            sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(c)) for c in key))


def _sampled_key_bounds(cur: Any, ident: sql.Composable, key: list[str], rows: int,
                        size: int) -> list[tuple[str, ...]] | None:
    """Chunk bounds from a sample of the table's keys, cut into equal shares by the server:
    planning scans the table like ``count(*)`` and sorts a sliver of its keys, instead of numbering
    every row in key order. ``TABLESAMPLE BERNOULLI`` samples rows; SYSTEM would sample whole
    blocks, each a stretch of keys when the table is stored in key order, and chunks came out
    from a twentieth to twice their size. Chunks come out about `size` rows each.

    Every bound is a key of the snapshot below the largest one, and chunks are (lower, upper]: no
    chunk is empty, and the last one holds the table's last row (the snapshot's "last" marker goes
    on it). None for a table small enough to count (chunks of a few rows), or when the sample is
    too thin to cut the table into at least half the chunks wanted: the caller counts then."""
    chunks = -(-rows // size)
    wanted = chunks * _SAMPLES_PER_CHUNK
    if 4 * wanted >= rows:
        return None
    cols, text_cols, descending = _key_columns(key)
    percent = 100.0 * wanted / rows
    cur.execute(sql.SQL(
        "SELECT DISTINCT ON (share) {text_cols} FROM ("
        "SELECT {cols}, ntile({chunks}) OVER (ORDER BY {cols}) AS share "
        "FROM {t} TABLESAMPLE BERNOULLI ({percent}) REPEATABLE (0) "
        "WHERE ROW({cols}) < (SELECT {cols} FROM {t} ORDER BY {descending} LIMIT 1)) s "
        "WHERE share < {chunks} ORDER BY share, {descending}").format(
            text_cols=text_cols, cols=cols, chunks=sql.Literal(chunks), t=ident, percent=sql.Literal(percent),
            descending=descending))
    bounds = [tuple(r) for r in cur.fetchall()]
    return bounds if len(bounds) >= (chunks - 1) // 2 else None


def _exact_key_bounds(cur: Any, ident: sql.Composable, key: list[str], rows: int,
                      size: int) -> list[tuple[str, ...]]:
    """Chunk bounds every `size` keys, by numbering every row (one pass over the key's index)."""
    cols, text_cols, _ = _key_columns(key)
    cur.execute(sql.SQL(
        "SELECT {text_cols} FROM (SELECT {cols}, row_number() OVER (ORDER BY {cols}) AS rn FROM {t}) s "
        # never the last row as a bound: the chunk after it would be empty, and the snapshot's
        # "last" marker belongs on a record of the last chunk
        "WHERE rn % {n} = 0 AND rn < {rows} ORDER BY rn").format(
            text_cols=text_cols, cols=cols, t=ident, n=sql.Literal(size), rows=sql.Literal(rows)))
    return [tuple(r) for r in cur.fetchall()]


def _ends_inside_tx(chunk: Chunk) -> bool:
    pos = copy.copy(chunk.position)
    for payload, lsn in chunk.messages:
        advance_position(pos, payload, lsn)
    return pos.final_lsn is not None


def _split(chunk: Chunk, end_key: tuple[int, int]) -> tuple[Chunk | None, Chunk]:
    """Cut a chunk where the position reaches `end_key` (a restart reads the same messages in
    chunks of other sizes than the batch that logged the offset). Only the reader's own chunks are
    cut, and each of them has one set of relation definitions."""
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


def _pg_part(offset: Offset) -> dict[str, Any]:
    return {k: v for k, v in offset.items() if k != "phase"}


__all__ = ["PgChangeFeed", "PgWorkDecoder", "SnapshotWork", "StreamWork", "offset_key"]

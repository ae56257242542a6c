"""Streaming: the replication connection, feedback to the slot, and where events get built.

The reader thread owns the replication connection (psycopg2 connections are not to be shared
across threads): it receives XLogData payloads, sends the acknowledgements the consumer thread
posts, and keeps the stream position. Events are built either right here by a
`ChangeEventBuilder` (sequential mode), or — when the engine provides an encoding pool — by
worker processes fed with chunks of raw messages, the reader doing only the cheap position
bookkeeping. Both produce the same records: the workers run the same builder from the
position the reader tracked.

Heartbeats (`heartbeat.interval.ms`) are decided here too, between transactions only: after a
COMMIT once the interval has passed, or while the stream is idle. When idle (every message
received so far handled and handed on), the heartbeat's offset moves to the server's latest
position known from keepalives (`cursor.wal_end`): every transaction committing before it has
been received, so once the engine stores and acknowledges that offset the slot's
confirmed_flush_lsn advances even when only tables outside the publication change. In parallel
mode the heartbeat rides at the end of a chunk, so workers write it in stream order.

Idle positions (standalone runs, with or without heartbeats): psycopg2 reports the server's
keepalive position (`wal_end`) as flushed on its own once everything it received was
acknowledged (pqpath.c, keepalive handling), so the slot's confirmed_flush_lsn moves past the
last offset the engine stored while only tables outside the publication change — and a restart
would be refused as for a recreated slot (`PgCaptureSource.slot_problem`). So while idle the
reader moves its position to `wal_end` and hands on an offset-only marker (`OffsetMarker.idle`, no
record, as Debezium's offset updates without a heartbeat record) at most every
`_IDLE_MARKER_S`, and once more when it stops; the engine stores it as soon as everything
before it is, so the stored offset keeps up with what psycopg2 may acknowledge. Without
heartbeats, just before psycopg2's own status update is due (it sends at the start of a read once
its status interval has passed), the reader also waits briefly until the engine stored that
position, so what psycopg2 reports is stored even if the process is killed right after.

Large transactions (`streaming.in.progress.transactions`): with protocol 2 and `streaming 'on'`
(PostgreSQL 14+) the server sends a transaction that outgrows its logical_decoding_work_mem while
it runs, in Stream Start … Stream Stop segments, instead of spilling it on the server. The
segments go to a local spool (headwater.connectors.postgres.spool), bounded in memory; at Stream
Commit the transaction is replayed through the normal path as BEGIN, its messages, COMMIT — the
messages the protocol-1 path receives for it, at the same LSNs — so its events, offsets and
resume-inside-a-transaction logic are the protocol-1 ones. Stream Abort drops the transaction or
one subtransaction. The position only moves at commits, so nothing past the last committed
transaction is acknowledged while streamed transactions are open.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import select
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg2

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.connection import connection_error, first_line
from headwater.connectors.postgres.events import (
    BEGIN,
    COMMIT,
    DATA_CHANGES,
    RELATION,
    TRUNCATE,
    BuilderSettings,
    ChangeEventBuilder,
    Chunk,
    StreamPosition,
    advance_position,
)
from headwater.connectors.postgres.schemas import SchemaRegistry
from headwater.connectors.postgres.spool import SpoolError, StreamSpools
from headwater.engine.connector import ConnectorError, Emit
from headwater.engine.records import OffsetMarker, PendingBatch

log = logging.getLogger(__name__)

_EMIT_CHUNK = 512          # records per hand-over to the engine queue (sequential mode)
# at most one idle marker per this many seconds: each is an offset commit (an fsync) while idle;
# psycopg2 sends its position every status interval (at least 1 s)
_IDLE_MARKER_S = 0.5
_SETTLE_S = 1.0  # the longest wait for the engine to store the idle position before a status update
WORKER_CHUNK = 2048        # messages per chunk for a worker process

# protocol 2 stream messages: Stream Start, Stream Stop, Stream Commit, Stream Abort
STREAM_START, STREAM_STOP, STREAM_COMMIT, STREAM_ABORT = (ord(c) for c in "SEcA")
_STREAM_DATA = frozenset(b"IUDTM")   # messages that open a replayed transaction (see _stream_commit)
_BEGIN_MSG = struct.Struct("!cQqI")     # 'B', final lsn, commit ts (PostgreSQL epoch), xid
_COMMIT_MSG = struct.Struct("!cbQQq")   # 'C', flags, commit lsn, end lsn, commit ts
_BEGIN_FIELDS = struct.Struct("!QqI")   # after the type byte: final lsn, commit ts, xid
_COMMIT_FIELDS = struct.Struct("!bQQq")  # after the type byte: flags, commit lsn, end lsn, commit ts
_OID = struct.Struct("!I")              # the relation of an I/U/D message (right after the type byte)


class StreamingReader:
    def __init__(self, *, repl_conn: Any, registry: SchemaRegistry, settings: BuilderSettings, slot_name: str,
                 publication: str, status_interval_s: float, flush_lsn_to_server: bool, emit: Emit,
                 position: StreamPosition, pool: Any = None, heartbeat_interval_s: float = 0.0,
                 heartbeat_action: Callable[[], None] | None = None, spools: StreamSpools | None = None,
                 server_version: int = 0, idle_markers: bool = False) -> None:
        self.repl_conn = repl_conn
        self.registry = registry
        self.settings = settings
        self.slot_name = slot_name
        self.publication = publication
        self.status_interval_s = status_interval_s
        self.flush_lsn_to_server = flush_lsn_to_server
        self._emit = emit
        self.position = position
        self.pool = pool
        self.heartbeat_interval_s = heartbeat_interval_s
        self._heartbeat_action = heartbeat_action
        self._next_heartbeat = 0.0
        self._buffer: list[Any] = []
        self.builder = ChangeEventBuilder(settings, registry, position, self._buffer.append)
        self.stream_params: dict[str, str] = {}  # `slot.stream.params`, set by the connector
        # `xmin.fetch.interval.ms` (set by the connector): reads the slot's catalog_xmin into
        # source.xmin, as Debezium does before handling a message once the interval has passed
        self.xmin_fetch: Callable[[], int | None] | None = None
        self.xmin_interval_s = 0.0
        self._next_xmin = 0.0
        self._ack_lsn: int | None = None       # set by the consumer thread
        self._sent_ack: int | None = None
        self._cursor: Any = None
        # parallel mode
        self._chunk: list[tuple[bytes, int]] = []
        self._chunk_oids: set[int] = set()
        self._last_oid = -1                        # the relation last added to _chunk_oids
        self._chunk_start: StreamPosition | None = None
        self._in_flight = 0                        # chunks submitted and not finished
        self._wake: tuple[int, int] | None = None  # pipe: a finished chunk wakes the idle reader
        self._pool_lock = threading.Lock()         # the two above, with the pool's thread
        # protocol 2 streaming of in-progress transactions (None: protocol 1)
        self.spools = spools
        self.server_version = server_version
        self._stream_spool: Any = None        # the transaction whose segment is being received
        self._handle_tx: Callable[[bytes, int], None] = self._build  # ordinary messages (set by run)
        self._stop: threading.Event | None = None
        self._last_keepalive = 0.0
        # hand on the idle position as an offset-only marker (see the module doc); not for the
        # Spark source, whose checkpoint follows its batches
        self.idle_markers = idle_markers
        self._next_idle_marker = 0.0
        self._marked = 0                   # the last idle position handed on
        self._awaiting: int | None = None  # the idle position the reader waits to see stored
        self._stored = threading.Event()

    def acknowledge(self, lsn: int) -> None:
        """(On the engine's thread, once the offset up to `lsn` is stored.)"""
        self._ack_lsn = lsn
        awaiting = self._awaiting
        if awaiting is not None and lsn >= awaiting:
            self._stored.set()

    # -- the loop -------------------------------------------------------------------------

    def start(self) -> None:
        cur = self.repl_conn.cursor()
        # `slot.stream.params` first, the connector's own options over them (as Debezium does); an
        # option pgoutput does not know is refused by the server, and that error is surfaced below
        options = {**self.stream_params,
                   "proto_version": "1", "publication_names": self.publication, "messages": "true"}
        if self.spools is not None:
            # protocol 2 adds only the stream messages; every other message keeps its layout
            options.update(proto_version="2", streaming="on")
        try:
            cur.start_replication(slot_name=self.slot_name, decode=False, start_lsn=self.position.restart_lsn,
                                  options=options, status_interval=self.status_interval_s)
        except psycopg2.Error as exc:
            raise connection_error(f"cannot start streaming from slot {self.slot_name!r}", exc) from None
        self._cursor = cur
        if self.spools is not None:
            self.spools.prepare()  # the slot is ours now: what an earlier run spooled is sent again

    def run(self, stop: threading.Event) -> None:
        try:
            self._run(stop)
        finally:
            if self.spools is not None:
                self.spools.close()

    def _run(self, stop: threading.Event) -> None:
        cur = self._cursor
        read = cur.read_message
        handle = self._route if self.pool is not None else self._build
        if self.spools is not None:
            self._handle_tx = handle
            handle = self._receive_streaming
        self._stop = stop
        interval = self.heartbeat_interval_s
        beats = interval > 0
        last_feedback = time.monotonic()
        self._next_heartbeat = last_feedback + interval
        last_start = 0  # data_start of the last message received (psycopg2's last_msg_data_start)
        watch: list[Any] = [cur]
        if self.pool is not None and self.pool.workers:
            self._wake = os.pipe()
            for fd in self._wake:
                os.set_blocking(fd, False)
            watch.append(self._wake[0])
        try:
            while not stop.is_set():
                msg = read()
                if msg is None:
                    # Everything received is handed on now — unless a transaction is incomplete
                    # (the server sends the rest of it right away; a chunk per message would cost
                    # a worker round trip each), or every worker is busy: then the chunk would only
                    # wait in the pool's queue, so it grows here (batches grow with load) until a
                    # worker finishes and wakes this loop.
                    if self.position.xid is None and (self.pool is None or self._pool_has_room()):
                        self._flush()
                    now = time.monotonic()
                    if beats and now >= self._next_heartbeat:
                        self._heartbeat(idle=True)
                    if self.idle_markers and now >= self._next_idle_marker:
                        self._idle_marker()
                    self._send_feedback(force=False)
                    if self.idle_markers and not beats and (self._sent_ack or 0) >= last_start:
                        self._settle_idle_position(stop)
                    last_feedback = now
                    wait = 0.2 if not beats else min(0.2, max(self._next_heartbeat - time.monotonic(), 0.01))
                    ready = select.select(watch, [], [], wait)[0]
                    if self._wake is not None and self._wake[0] in ready:
                        with contextlib.suppress(BlockingIOError):
                            while os.read(self._wake[0], 4096):
                                pass
                    continue
                payload = msg.payload
                if self.xmin_fetch is not None:
                    self._refresh_xmin()
                last_start = msg.data_start
                handle(payload, last_start)
                if beats and payload[0] in (COMMIT, STREAM_COMMIT) and time.monotonic() >= self._next_heartbeat:
                    self._heartbeat(idle=False)
                if self._ack_lsn != self._sent_ack and time.monotonic() - last_feedback > 1.0:
                    self._send_feedback(force=False)
                    last_feedback = time.monotonic()
        except psycopg2.Error as exc:
            raise connection_error(f"replication stream from slot {self.slot_name!r} failed", exc) from None
        except SpoolError as exc:
            raise ConnectorError(str(exc)) from None
        finally:
            with self._pool_lock:
                if self._wake is not None:
                    for fd in self._wake:
                        os.close(fd)
                    self._wake = None
        if stop.is_set():
            # A clean stop: the idle position once more, so that the last stored offset is not
            # behind a keepalive position psycopg2 acknowledged on its own since the last heartbeat
            # or marker (it reports the server's wal_end as flushed once everything received was).
            if beats:
                self._heartbeat(idle=True)
            if self.idle_markers:
                self._flush()
                self._idle_marker()
        self._flush()

    def _refresh_xmin(self) -> None:
        """Debezium (PostgresStreamingChangeEventSource.getSlotXmin) reads the slot's catalog_xmin
        when none is known yet or the interval has passed; events carry the last value read."""
        now = time.monotonic()
        if self.position.xmin is not None and now < self._next_xmin:
            return
        assert self.xmin_fetch is not None
        self.position.xmin = self.xmin_fetch()
        self._next_xmin = now + self.xmin_interval_s

    def _send_feedback(self, force: bool) -> None:
        ack = self._ack_lsn
        if not self.flush_lsn_to_server or ack is None or (ack == self._sent_ack and not force):
            return
        self._cursor.send_feedback(flush_lsn=ack, reply=force)
        self._sent_ack = ack

    def final_feedback(self) -> None:
        """Send the last acknowledgement (called after the engine stored the last offsets)."""
        if self._cursor is None:
            return
        try:
            self._send_feedback(force=True)
        except psycopg2.Error as exc:
            log.warning("could not send the final position to the slot: %s", first_line(exc))

    def _heartbeat(self, idle: bool) -> None:
        """Emit a heartbeat if the position is between transactions (see the module doc)."""
        pos = self.position
        if pos.xid is not None:
            return
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
        if self._heartbeat_action is not None:
            self._heartbeat_action()
        wal_end = self._idle_wal_end() if idle else None
        if wal_end is not None:
            pos.restart_lsn = wal_end
        offset = pos.offset(pos.restart_lsn, pos.tx_msgs)
        ts_ms = time.time_ns() // 1_000_000
        if self.pool is not None:
            self._submit_chunk(heartbeat=(ts_ms, offset))
        else:
            self.builder.heartbeat(offset, ts_ms)
            if idle:
                self._flush()

    def _idle_marker(self) -> None:
        """Hand on the server's keepalive position as an offset-only marker when the stream is
        idle: no transaction open or being resumed, no streamed transaction open, everything
        received handed on (see the module doc)."""
        if self.position.xid is not None or self._buffer or self._chunk:
            return
        wal_end = self._idle_wal_end()
        if wal_end is None:
            return
        self._next_idle_marker = time.monotonic() + _IDLE_MARKER_S
        self._marked = wal_end
        self._emit([OffsetMarker(self.position.idle_offset(wal_end), idle=True)])

    def _idle_wal_end(self) -> int | None:
        """The server's keepalive position (`wal_end`) when the position may move there between
        transactions: past it, and no transaction being resumed or streamed open (the position
        stays at the last commit then); None otherwise."""
        pos = self.position
        if pos.skip_final_lsn is not None or (self.spools is not None and self.spools.open):
            return None
        wal_end = self._cursor.wal_end if self._cursor is not None else 0
        return wal_end if wal_end and wal_end > pos.restart_lsn else None

    def _settle_idle_position(self, stop: threading.Event) -> None:
        """Idle, with every message received acknowledged to psycopg2 (so it forwards its flushed
        position to keepalive positions on its own): if its status update is due before the next
        read, hand on the idle position now and wait (at most _SETTLE_S) until the engine stored
        it — with nothing else to store, it does so at once. psycopg2 reports only positions it
        received before this point, none past the reader's."""
        cur = self._cursor
        if cur is None or not self.flush_lsn_to_server:
            return
        due = cur.feedback_timestamp.timestamp() + self.status_interval_s
        if time.time() + 0.3 < due:  # (the loop waits at most 0.2 s before its next read)
            return
        self._idle_marker()
        target = self._marked
        if (self._ack_lsn or 0) >= target:
            return
        self._stored.clear()
        self._awaiting = target
        try:
            deadline = time.monotonic() + _SETTLE_S
            while (self._ack_lsn or 0) < target and not stop.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._stored.wait(min(remaining, 0.1))
        finally:
            self._awaiting = None
        self._send_feedback(force=False)

    def _flush(self) -> None:
        if self.pool is not None:
            self._submit_chunk()
        elif self._buffer:
            items = self._buffer[:]
            self._buffer.clear()
            self._emit(items)

    # -- sequential mode ------------------------------------------------------------------

    def _build(self, payload: bytes, lsn: int) -> None:
        self.builder.handle(payload, lsn)
        if len(self._buffer) >= _EMIT_CHUNK:
            self._flush()

    # -- streamed in-progress transactions (protocol 2) ----------------------------------

    def _receive_streaming(self, payload: bytes, lsn: int) -> None:
        """Protocol 2: spool stream segments, replay a transaction at its Stream Commit; every
        other message (ordinary transactions, non-transactional messages) goes on as in protocol 1."""
        kind = payload[0]
        spool = self._stream_spool
        if spool is not None:
            if kind == STREAM_STOP:
                self._stream_spool = None
            else:
                self.spools.append(spool, payload, lsn)  # type: ignore[union-attr]
        elif kind == STREAM_START:
            self._stream_spool = self.spools.get(pg.decode(payload).xid)  # type: ignore[union-attr]
        elif kind == STREAM_COMMIT:
            self._stream_commit(pg.decode(payload), lsn)
        elif kind == STREAM_ABORT:
            msg = pg.decode(payload)
            self.spools.abort(msg.xid, msg.subxid)  # type: ignore[union-attr]
        else:
            self._handle_tx(payload, lsn)

    def _stream_commit(self, msg: pg.StreamCommit, lsn: int) -> None:
        """Replay a committed streamed transaction as the protocol-1 path receives it: BEGIN
        (final LSN = commit LSN, commit time, xid), its messages at their LSNs, COMMIT at the
        Stream Commit's LSN. Like pgoutput (PostgreSQL 15+) for an ordinary transaction, BEGIN is
        sent just before the first change that is kept, and a transaction left without changes
        (all in aborted subtransactions) is not replayed at all."""
        spools = self.spools
        assert spools is not None
        spool = spools.take(msg.xid)
        ts = msg.commit_ts_us - pg.PG_EPOCH_OFFSET_US
        begin = _BEGIN_MSG.pack(b"B", msg.commit_lsn, ts, msg.xid)
        handle = self._handle_tx
        stop = self._stop
        begun = False
        if spool is not None and spool.spilled:
            log.info("streamed transaction %s committed at %s: replaying %d messages (%.1f MiB spooled on disk)",
                     msg.xid, pg.format_lsn(msg.commit_lsn), spool.messages, spool.spilled / 2**20)
        self.position.replaying_xid = msg.xid
        try:
            if spool is not None:
                for n, (payload, at) in enumerate(spool.replay()):
                    if not begun and payload[0] in _STREAM_DATA:
                        handle(begin, at)
                        begun = True
                    handle(payload, at)
                    if not n & 1023:
                        if stop is not None and stop.is_set():
                            return  # the server sends the transaction again after a restart
                        self._keepalive()
        finally:
            self.position.replaying_xid = None
            if spool is not None:
                spool.discard()
        if not begun:
            if self.server_version >= 150000:
                return  # an empty transaction: pgoutput 15+ sends nothing for it in protocol 1
            handle(begin, lsn)
        handle(_COMMIT_MSG.pack(b"C", msg.flags, msg.commit_lsn, msg.end_lsn, ts), lsn)

    def _keepalive(self) -> None:
        """While a long replay keeps the reader from the connection, send the acknowledgement
        the engine posted (or a bare status update) every second, so that neither the engine's
        progress waits for the replay nor the server's wal_sender_timeout ends the connection."""
        now = time.monotonic()
        if now - self._last_keepalive < 1.0:
            return
        self._last_keepalive = now
        if self.flush_lsn_to_server and self._ack_lsn is not None and self._ack_lsn != self._sent_ack:
            self._send_feedback(force=False)
        else:
            self._cursor.send_feedback(force=True)

    # -- parallel mode --------------------------------------------------------------------

    def _route(self, payload: bytes, lsn: int) -> None:
        """Track the position and collect the message into the current chunk; relation
        messages (which may read the catalog) are handled here, between chunks."""
        kind = payload[0]
        if kind == RELATION:
            self._submit_chunk()
            self.builder.handle(payload, lsn)  # registry update (catalog read) on this thread
            return
        pos = self.position
        if self._chunk_start is None:
            self._chunk_start = copy.copy(pos)
        if kind in DATA_CHANGES:
            # the hot path, inlined: advance_position's pos.data() and relation_oid
            if pos.skipping:
                pos.data()
            else:
                pos.tx_msgs += 1
            oid = _OID.unpack_from(payload, 1)[0]
            if oid != self._last_oid:
                self._chunk_oids.add(oid)
                self._last_oid = oid
        elif kind == BEGIN:  # as advance_position, without pgoutput.decode's dispatch
            final_lsn, ts, xid = _BEGIN_FIELDS.unpack_from(payload, 1)
            pos.begin(pg.Begin(final_lsn, ts + pg.PG_EPOCH_OFFSET_US, xid))
        elif kind == COMMIT:
            flags, commit_lsn, end_lsn, ts = _COMMIT_FIELDS.unpack_from(payload, 1)
            pos.commit(pg.Commit(flags, commit_lsn, end_lsn, ts + pg.PG_EPOCH_OFFSET_US))
        else:
            advance_position(pos, payload, lsn)
            if kind == TRUNCATE:
                self._chunk_oids.update(pg.decode(payload).relation_oids)
        chunk = self._chunk
        chunk.append((payload, lsn))
        if len(chunk) >= WORKER_CHUNK:
            self._submit_chunk()

    def _submit_chunk(self, heartbeat: tuple[int, dict[str, Any]] | None = None) -> None:
        if not self._chunk and heartbeat is None:
            return
        start = self._chunk_start if self._chunk_start is not None else copy.copy(self.position)
        relations = {oid: self.registry.definition(oid) for oid in self._chunk_oids}
        chunk = Chunk(start, self._chunk, relations, heartbeat)
        self._chunk, self._chunk_oids, self._chunk_start, self._last_oid = [], set(), None, -1
        future = self.pool.submit(chunk)
        if future is not None:  # None: the Spark feed's collector, which queues the chunk itself
            with self._pool_lock:
                self._in_flight += 1
            future.add_done_callback(self._chunk_done)
        self._emit([PendingBatch(future, max(len(chunk.messages), 1))])

    def _pool_has_room(self) -> bool:
        # a pool without workers of its own (the Spark feed's collector) always takes a chunk
        return not self.pool.workers or self._in_flight < self.pool.workers

    def _chunk_done(self, _: Any) -> None:
        """(On the pool's thread.) One chunk fewer in the pool: wake the reader if it is idle."""
        with self._pool_lock:
            self._in_flight -= 1
            if self._wake is not None:
                with contextlib.suppress(BlockingIOError):  # the pipe is full: a wake-up is pending
                    os.write(self._wake[1], b"\0")

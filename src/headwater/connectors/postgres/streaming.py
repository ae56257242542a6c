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
"""

from __future__ import annotations

import copy
import logging
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg2

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.connection import first_line
from headwater.connectors.postgres.events import (
    BEGIN,
    COMMIT,
    DATA_CHANGES,
    MESSAGE,
    RELATION,
    TRUNCATE,
    BuilderSettings,
    ChangeEventBuilder,
    Chunk,
    StreamPosition,
    relation_oid,
)
from headwater.connectors.postgres.schemas import SchemaRegistry
from headwater.engine.connector import ConnectorError, Emit
from headwater.engine.records import PendingBatch

log = logging.getLogger(__name__)

_EMIT_CHUNK = 512          # records per hand-over to the engine queue (sequential mode)
_WORKER_CHUNK = 2048       # messages per chunk for a worker process


class StreamingReader:
    def __init__(self, *, repl_conn: Any, registry: SchemaRegistry, settings: BuilderSettings, slot_name: str,
                 publication: str, status_interval_s: float, flush_lsn_to_server: bool, emit: Emit,
                 position: StreamPosition, pool: Any = None, heartbeat_interval_s: float = 0.0,
                 heartbeat_action: Callable[[], None] | None = None) -> None:
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
        self._ack_lsn: int | None = None       # set by the consumer thread
        self._sent_ack: int | None = None
        self._cursor: Any = None
        # parallel mode
        self._chunk: list[tuple[bytes, int]] = []
        self._chunk_oids: set[int] = set()
        self._chunk_start: StreamPosition | None = None

    def acknowledge(self, lsn: int) -> None:
        self._ack_lsn = lsn

    # -- the loop -------------------------------------------------------------------------

    def start(self) -> None:
        cur = self.repl_conn.cursor()
        options = {"proto_version": "1", "publication_names": self.publication, "messages": "true"}
        try:
            cur.start_replication(slot_name=self.slot_name, decode=False, start_lsn=self.position.restart_lsn,
                                  options=options, status_interval=self.status_interval_s)
        except psycopg2.Error as exc:
            raise ConnectorError(f"cannot start streaming from slot {self.slot_name!r}: {first_line(exc)}") from None
        self._cursor = cur

    def run(self, stop: threading.Event) -> None:
        cur = self._cursor
        read = cur.read_message
        handle = self._route if self.pool is not None else self._build
        interval = self.heartbeat_interval_s
        beats = interval > 0
        last_feedback = time.monotonic()
        self._next_heartbeat = last_feedback + interval
        try:
            while not stop.is_set():
                msg = read()
                if msg is None:
                    self._flush()
                    now = time.monotonic()
                    if beats and now >= self._next_heartbeat:
                        self._heartbeat(idle=True)
                    self._send_feedback(force=False)
                    last_feedback = now
                    wait = 0.2 if not beats else min(0.2, max(self._next_heartbeat - time.monotonic(), 0.01))
                    select.select([cur], [], [], wait)
                    continue
                payload = msg.payload
                handle(payload, msg.data_start)
                if beats and payload[0] == COMMIT and time.monotonic() >= self._next_heartbeat:
                    self._heartbeat(idle=False)
                if self._ack_lsn != self._sent_ack and time.monotonic() - last_feedback > 1.0:
                    self._send_feedback(force=False)
                    last_feedback = time.monotonic()
        except psycopg2.Error as exc:
            raise ConnectorError(
                f"replication stream from slot {self.slot_name!r} failed: {first_line(exc)}") from None
        self._flush()

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
        if idle and pos.skip_final_lsn is None:
            wal_end = self._cursor.wal_end if self._cursor is not None else 0
            if wal_end and wal_end > pos.restart_lsn:
                pos.restart_lsn = wal_end
        offset = pos.offset(pos.restart_lsn, pos.tx_msgs)
        ts_ms = time.time_ns() // 1_000_000
        if self.pool is not None:
            self._submit_chunk(heartbeat=(ts_ms, offset))
        else:
            self.builder.heartbeat(offset, ts_ms)
            if idle:
                self._flush()

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

    # -- parallel mode --------------------------------------------------------------------

    def _route(self, payload: bytes, lsn: int) -> None:
        """Track the position and collect the message into the current chunk; relation
        messages (which may read the catalog) are handled here, between chunks."""
        kind = payload[0]
        pos = self.position
        if self._chunk_start is None and kind != RELATION:
            self._chunk_start = copy.copy(pos)
        if kind in DATA_CHANGES:
            pos.data()
            self._chunk_oids.add(relation_oid(payload))
        elif kind == BEGIN:
            pos.begin(pg.decode(payload))
        elif kind == COMMIT:
            pos.commit(pg.decode(payload))
        elif kind == RELATION:
            self._submit_chunk()
            self.builder.handle(payload, lsn)  # registry update (catalog read) on this thread
            return
        elif kind == TRUNCATE:
            pos.data()
            self._chunk_oids.update(pg.decode(payload).relation_oids)
        elif kind == MESSAGE:
            msg = pg.decode(payload)
            if msg.transactional:
                pos.data()
            else:
                pos.non_transactional_message(lsn)
        self._chunk.append((payload, lsn))
        if len(self._chunk) >= _WORKER_CHUNK:
            self._submit_chunk()

    def _submit_chunk(self, heartbeat: tuple[int, dict[str, Any]] | None = None) -> None:
        if not self._chunk and heartbeat is None:
            return
        start = self._chunk_start if self._chunk_start is not None else copy.copy(self.position)
        relations = {oid: self.registry.definition(oid) for oid in self._chunk_oids}
        chunk = Chunk(start, self._chunk, relations, heartbeat)
        self._chunk, self._chunk_oids, self._chunk_start = [], set(), None
        self._emit([PendingBatch(self.pool.submit(chunk), max(len(chunk.messages), 1))])

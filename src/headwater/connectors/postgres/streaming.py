"""Streaming: the replication connection, feedback to the slot, and where events get built.

The reader thread owns the replication connection (psycopg2 connections are not to be shared
across threads): it receives XLogData payloads, sends the acknowledgements the consumer thread
posts, and keeps the stream position. Events are built either right here by a
`ChangeEventBuilder` (sequential mode), or — when the engine provides an encoding pool — by
worker processes fed with chunks of raw messages, the reader doing only the cheap position
bookkeeping. Both produce the same records: the workers run the same builder from the
position the reader tracked.
"""

from __future__ import annotations

import copy
import logging
import select
import threading
import time
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
                 position: StreamPosition, pool: Any = None) -> None:
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
        last_feedback = time.monotonic()
        try:
            while not stop.is_set():
                msg = read()
                if msg is None:
                    self._flush()
                    self._send_feedback(force=False)
                    last_feedback = time.monotonic()
                    select.select([cur], [], [], 0.2)
                    continue
                handle(msg.payload, msg.data_start)
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

    def _submit_chunk(self) -> None:
        if not self._chunk:
            return
        assert self._chunk_start is not None
        relations = {oid: self.registry.definition(oid) for oid in self._chunk_oids}
        chunk = Chunk(self._chunk_start, self._chunk, relations)
        self._chunk, self._chunk_oids, self._chunk_start = [], set(), None
        self._emit([PendingBatch(self.pool.submit(chunk), len(chunk.messages))])

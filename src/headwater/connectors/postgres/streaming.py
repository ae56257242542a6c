"""Streaming: pgoutput messages from the replication slot -> Debezium events.

This is the hot path. The reader thread receives raw XLogData payloads, decodes them with the
sans-I/O decoder, converts tuples with the table's precomputed plan and hands events to the
dispatcher, which buffers them into the engine's queue in chunks. Acknowledgements come from
the consumer thread as plain attributes and are sent on this thread, which owns the
replication connection (psycopg2 connections are not to be shared across threads).
"""

from __future__ import annotations

import logging
import select
import threading
import time
from typing import Any

import psycopg2

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.connection import first_line
from headwater.connectors.postgres.schemas import CapturedTable, SchemaRegistry
from headwater.connectors.postgres.source_info import (
    MESSAGE_COLLECTION,
    MESSAGE_KEY_SCHEMA,
    MESSAGE_VALUE_SCHEMA,
    PgOffset,
    source_block,
)
from headwater.engine.connector import ConnectorError
from headwater.engine.dispatcher import EventDispatcher
from headwater.engine.records import SourceRecord
from headwater.model.envelope import OP_CREATE, OP_DELETE, OP_MESSAGE, OP_UPDATE

log = logging.getLogger(__name__)

_EMIT_CHUNK = 512


class StreamingReader:
    def __init__(self, *, repl_conn: Any, registry: SchemaRegistry, server: str, dbname: str,
                 slot_name: str, publication: str, message_topic: str, status_interval_s: float,
                 flush_lsn_to_server: bool, emit_chunk: Any, start: PgOffset,
                 dispatcher_factory: Any) -> None:
        self.repl_conn = repl_conn
        self.registry = registry
        self.server = server
        self.dbname = dbname
        self.slot_name = slot_name
        self.publication = publication
        self.message_topic = message_topic
        self.status_interval_s = status_interval_s
        self.flush_lsn_to_server = flush_lsn_to_server
        self._emit_chunk = emit_chunk
        self._buffer: list[Any] = []

        # position state
        self._restart_lsn = start.lsn_commit or 0
        self._last_commit_lsn = start.last_commit_lsn
        self._message_lsn = start.message_lsn
        self._skip_tx_final = start.tx_final_lsn
        self._skip_records = start.tx_records if start.tx_final_lsn is not None else 0
        self._skip_remaining = 0

        # transaction state
        self._xid: int | None = None
        self._final_lsn: int | None = None
        self._commit_ts_us = 0
        self._tx_records = 0
        self._lsn: int | None = None

        self.dispatcher: EventDispatcher = dispatcher_factory(self._emit, self._next_offset)
        self._ack_lsn: int | None = None       # set by the consumer thread
        self._sent_ack: int | None = None

    # -- emission and offsets -------------------------------------------------------------

    def _emit(self, item: Any) -> None:
        if self._skip_remaining > 0 and isinstance(item, SourceRecord):
            self._skip_remaining -= 1
            return
        self._buffer.append(item)
        if len(self._buffer) >= _EMIT_CHUNK:
            self._flush_buffer()

    def _flush_buffer(self) -> None:
        if self._buffer:
            items, self._buffer = self._buffer, []
            self._emit_chunk(items)

    def _next_offset(self) -> dict[str, Any]:
        self._tx_records += 1
        d: dict[str, Any] = {"lsn_commit": self._restart_lsn, "lsn": self._lsn, "txId": self._xid,
                             "ts_usec": self._commit_ts_us}
        if self._final_lsn is not None:
            d["tx_final_lsn"] = self._final_lsn
            d["tx_records"] = self._tx_records
        if self._last_commit_lsn is not None:
            d["last_commit_lsn"] = self._last_commit_lsn
        if self._message_lsn is not None:
            d["message_lsn"] = self._message_lsn
        return d

    def acknowledge(self, lsn: int) -> None:
        self._ack_lsn = lsn

    # -- the loop -------------------------------------------------------------------------

    def start(self) -> None:
        cur = self.repl_conn.cursor()
        options = {"proto_version": "1", "publication_names": self.publication, "messages": "true"}
        try:
            cur.start_replication(slot_name=self.slot_name, decode=False, start_lsn=self._restart_lsn,
                                  options=options, status_interval=self.status_interval_s)
        except psycopg2.Error as exc:
            raise ConnectorError(f"cannot start streaming from slot {self.slot_name!r}: {first_line(exc)}") from None
        self._cursor = cur

    def run(self, stop: threading.Event) -> None:
        cur = self._cursor
        read = cur.read_message
        handle = self._handle
        last_feedback = time.monotonic()
        try:
            while not stop.is_set():
                msg = read()
                if msg is None:
                    self._flush_buffer()
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
        self._flush_buffer()

    def _send_feedback(self, force: bool) -> None:
        ack = self._ack_lsn
        if not self.flush_lsn_to_server or ack is None or (ack == self._sent_ack and not force):
            return
        self._cursor.send_feedback(flush_lsn=ack, reply=force)
        self._sent_ack = ack

    def final_feedback(self) -> None:
        """Send the last acknowledgement (called after the engine stored the last offsets)."""
        try:
            self._send_feedback(force=True)
        except psycopg2.Error as exc:
            log.warning("could not send the final position to the slot: %s", first_line(exc))

    # -- message handling -----------------------------------------------------------------

    def _handle(self, payload: bytes, data_start: int) -> None:
        msg = pg.decode(payload)
        kind = type(msg)
        self._lsn = data_start
        if kind is pg.Insert or kind is pg.Update or kind is pg.Delete:
            self._change(msg, data_start)
        elif kind is pg.Begin:
            self._xid = msg.xid
            self._final_lsn = msg.final_lsn
            self._commit_ts_us = msg.commit_ts_us
            self._tx_records = 0
            if self._skip_tx_final is not None and msg.final_lsn == self._skip_tx_final:
                self._skip_remaining = self._skip_records
            self._skip_tx_final = None
        elif kind is pg.Commit:
            self._commit(msg, data_start)
        elif kind is pg.Relation:
            self.registry.for_relation(msg.oid, msg.namespace, msg.name, msg.columns)
        elif kind is pg.Truncate:
            self._truncate(msg, data_start)
        elif kind is pg.Message:
            self._message(msg, data_start)
        # Origin and Type messages carry nothing Debezium emits

    def _tx_id(self, lsn: int) -> str:
        return f"{self._xid}:{lsn}"

    def _source(self, captured: CapturedTable, lsn: int) -> dict[str, Any]:
        return source_block(self.server, self.dbname, ts_us=self._commit_ts_us, snapshot="false",
                            schema=captured.table.id.schema or "", table=captured.table.id.table,
                            tx_id=self._xid, lsn=lsn, last_commit_lsn=self._last_commit_lsn)

    def _change(self, msg: Any, lsn: int) -> None:
        captured = self.registry.get(msg.relation_oid)
        if captured is None:
            return
        schema = captured.schema
        if type(msg) is pg.Insert:
            op, before, after = OP_CREATE, None, schema.row(msg.new)
        elif type(msg) is pg.Update:
            op = OP_UPDATE
            after = schema.row(msg.new)
            before = schema.row(msg.old) if msg.old is not None else None
        else:
            op, before, after = OP_DELETE, schema.row(msg.old), None
        self.dispatcher.dispatch_change(
            schema, captured.topic, op, before, after, self._source(captured, lsn),
            collection=captured.collection, tx_id=self._tx_id(lsn), tx_ts_ms=self._commit_ts_us // 1000)

    def _truncate(self, msg: pg.Truncate, lsn: int) -> None:
        for oid in msg.relation_oids:
            captured = self.registry.get(oid)
            if captured is None:
                continue
            self.dispatcher.dispatch_truncate(
                captured.schema, captured.topic, self._source(captured, lsn), collection=captured.collection,
                tx_id=self._tx_id(lsn), tx_ts_ms=self._commit_ts_us // 1000)

    def _message(self, msg: pg.Message, lsn: int) -> None:
        if not msg.transactional:
            if self._message_lsn is not None and lsn <= self._message_lsn:
                return  # already delivered before a restart
            now_us = time.time_ns() // 1000 // 1000 * 1000
            self._last_commit_lsn = lsn
            self._message_lsn = lsn
            source = source_block(self.server, self.dbname, ts_us=now_us, snapshot="false", schema="",
                                  table="", tx_id=None, lsn=lsn, last_commit_lsn=self._last_commit_lsn)
            saved = (self._xid, self._final_lsn, self._tx_records)
            self._xid = None
            self._final_lsn = None
            self.dispatcher.dispatch_record(
                self.message_topic, MESSAGE_KEY_SCHEMA, {"prefix": msg.prefix}, MESSAGE_VALUE_SCHEMA,
                self._message_value(msg, source), collection=MESSAGE_COLLECTION, op=OP_MESSAGE)
            self._xid, self._final_lsn, self._tx_records = saved
            return
        source = source_block(self.server, self.dbname, ts_us=self._commit_ts_us, snapshot="false", schema="",
                              table="", tx_id=self._xid, lsn=lsn, last_commit_lsn=self._last_commit_lsn)
        self.dispatcher.dispatch_record(
            self.message_topic, MESSAGE_KEY_SCHEMA, {"prefix": msg.prefix}, MESSAGE_VALUE_SCHEMA,
            self._message_value(msg, source), collection=MESSAGE_COLLECTION, op=OP_MESSAGE,
            tx_id=self._tx_id(lsn), tx_ts_ms=self._commit_ts_us // 1000)

    @staticmethod
    def _message_value(msg: pg.Message, source: dict[str, Any]) -> dict[str, Any]:
        return {"op": OP_MESSAGE, "ts_ms": time.time_ns() // 1_000_000, "source": source, "transaction": None,
                "message": {"prefix": msg.prefix, "content": msg.content}}

    def _commit(self, msg: pg.Commit, lsn: int) -> None:
        self.dispatcher.transaction_end(f"{self._xid}:{lsn}", msg.commit_ts_us // 1000)
        self._last_commit_lsn = msg.end_lsn
        self._restart_lsn = msg.end_lsn
        self._final_lsn = None
        self._skip_remaining = 0
        self.dispatcher.dispatch_offset(self._next_offset())
        self._xid = None

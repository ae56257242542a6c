"""The dispatcher: turns a connector's row changes into Debezium's records.

It owns what is the same for every connector: envelopes, tombstones, the split of a key change
into delete + tombstone + create with the `__debezium.oldkey/newkey` headers, skipped
operations, and transaction metadata. Connectors hand it rows already converted by their
table schemas, a source block and the transaction id; every record it emits carries the offset
the connector's `next_offset` callable returns for it.

`dispatch_heartbeat` emits Debezium's heartbeat record (`heartbeat.interval.ms`); the seam
`on_streamed_key` (incremental-snapshot windows evict buffered snapshot rows by key) is called
at the point where Debezium's dispatcher calls it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from headwater.engine.records import OffsetMarker, SourceRecord
from headwater.engine.transaction import (
    TRANSACTION_KEY_SCHEMA,
    TRANSACTION_VALUE_SCHEMA,
    TransactionContext,
)
from headwater.model.envelope import OP_CREATE, OP_DELETE, OP_READ, OP_TRUNCATE, OP_UPDATE
from headwater.model.schema import INT64, STRING, Schema, struct
from headwater.relational.table_schema import TableSchema

OLD_KEY_HEADER = "__debezium.oldkey"
NEW_KEY_HEADER = "__debezium.newkey"

# Debezium's heartbeat record (io.debezium.heartbeat.HeartbeatImpl)
HEARTBEAT_KEY_SCHEMA = struct("io.debezium.connector.common.ServerNameKey", [("serverName", STRING)], version=1)
HEARTBEAT_VALUE_SCHEMA = struct("io.debezium.connector.common.Heartbeat", [("ts_ms", INT64)], version=1)


class EventDispatcher:
    def __init__(
        self,
        *,
        emit: Callable[[Any], None],
        next_offset: Callable[[], dict[str, Any]],
        tombstones_on_delete: bool = True,
        skipped_operations: frozenset[str] = frozenset({"t"}),
        provide_transaction_metadata: bool = False,
        transaction_topic: str = "transaction",
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self._emit = emit
        self._next_offset = next_offset
        self.tombstones_on_delete = tombstones_on_delete
        self.skipped_operations = skipped_operations
        self.provide_transaction_metadata = provide_transaction_metadata
        self.transaction_topic = transaction_topic
        self._clock = clock
        self._tx = TransactionContext()
        self.on_streamed_key: Callable[[str, Any], None] | None = None

    # -- data changes ---------------------------------------------------------------------

    def dispatch_change(
        self,
        table_schema: TableSchema,
        topic: str,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        source: dict[str, Any],
        *,
        collection: str,
        tx_id: str | None = None,
        tx_ts_ms: int | None = None,
    ) -> None:
        key_schema = table_schema.key_schema
        if op in self.skipped_operations:
            return  # a skipped update emits nothing, not even the delete/create of a key change
        if op == OP_UPDATE:
            if key_schema is not None and before is not None:
                old_key = table_schema.key(before)
                new_key = table_schema.key(after)
                if old_key != new_key:
                    self._key_change(table_schema, topic, old_key, new_key, before, after, source,
                                     collection, tx_id, tx_ts_ms)
                    return
            key = table_schema.key(after)
        elif op == OP_DELETE:
            key = table_schema.key(before)
        else:
            key = table_schema.key(after)
        if self.on_streamed_key is not None and op != OP_READ:
            self.on_streamed_key(collection, key)
        self._data(topic, key_schema, key, table_schema.envelope_schema,
                   self._envelope(before, after, source, op), collection, tx_id, tx_ts_ms, (), op)
        if op == OP_DELETE and self.tombstones_on_delete:
            self._emit(SourceRecord(topic, key_schema, key, None, None, self._next_offset(), (),
                                    None, collection))

    def _key_change(self, ts: TableSchema, topic: str, old_key: Any, new_key: Any, before: dict[str, Any],
                    after: dict[str, Any] | None, source: dict[str, Any], collection: str,
                    tx_id: str | None, tx_ts_ms: int | None) -> None:
        key_schema = ts.key_schema
        assert key_schema is not None
        new_header = ((NEW_KEY_HEADER, key_schema, new_key),)
        old_header = ((OLD_KEY_HEADER, key_schema, old_key),)
        if OP_DELETE not in self.skipped_operations:
            self._data(topic, key_schema, old_key, ts.envelope_schema,
                       self._envelope(before, None, source, OP_DELETE), collection, tx_id, tx_ts_ms,
                       new_header, OP_DELETE)
            if self.tombstones_on_delete:
                self._emit(SourceRecord(topic, key_schema, old_key, None, None, self._next_offset(),
                                        new_header, None, collection))
        if OP_CREATE not in self.skipped_operations:
            self._data(topic, key_schema, new_key, ts.envelope_schema,
                       self._envelope(None, after, source, OP_CREATE), collection, tx_id, tx_ts_ms,
                       old_header, OP_CREATE)

    def dispatch_truncate(self, table_schema: TableSchema, topic: str, source: dict[str, Any], *,
                          collection: str, tx_id: str | None = None, tx_ts_ms: int | None = None) -> None:
        if OP_TRUNCATE in self.skipped_operations:
            return
        self._data(topic, None, None, table_schema.envelope_schema,
                   self._envelope(None, None, source, OP_TRUNCATE), collection, tx_id, tx_ts_ms, (),
                   OP_TRUNCATE)

    def dispatch_record(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema,
                        value: dict[str, Any], *, collection: str, op: str, tx_id: str | None = None,
                        tx_ts_ms: int | None = None) -> None:
        """A connector-specific event (e.g. PostgreSQL's logical decoding messages) whose value
        has a `transaction` field."""
        self._data(topic, key_schema, key, value_schema, value, collection, tx_id, tx_ts_ms, (), op,
                   context_headers=False)

    def dispatch_offset(self, offset: dict[str, Any]) -> None:
        """A processed position with no record (commit, filtered change)."""
        self._emit(OffsetMarker(offset))

    def dispatch_heartbeat(self, offset: dict[str, Any], topic: str | None = None, server_name: str = "",
                           ts_ms: int | None = None) -> None:
        """A heartbeat (`heartbeat.interval.ms`): the record Debezium sends to
        `<topic.heartbeat.prefix>.<topic.prefix>` — key {serverName}, value {ts_ms}, no headers —
        carrying `offset`; without a topic only the position (an OffsetMarker)."""
        if topic is None:
            self._emit(OffsetMarker(offset))
            return
        if ts_ms is None:
            ts_ms = self._clock() // 1_000_000
        self._emit(SourceRecord(topic, HEARTBEAT_KEY_SCHEMA, {"serverName": server_name}, HEARTBEAT_VALUE_SCHEMA,
                                {"ts_ms": ts_ms}, offset, (), None, None, context_headers=False))

    # -- transactions ---------------------------------------------------------------------

    def transaction_begin(self, tx_id: str, ts_ms: int) -> None:
        """BEGIN of a transaction, where the connector's stream begins it: Debezium emits it then,
        so a transaction whose changes are all left out (filtered tables, skipped operations,
        filtered message prefixes) still has its BEGIN and an END with `event_count` 0. (Without
        this call BEGIN comes with the transaction's first event.)"""
        if self.provide_transaction_metadata and not self._tx.begun:
            self._tx.begun = True
            self._emit(SourceRecord(self.transaction_topic, TRANSACTION_KEY_SCHEMA, {"id": tx_id},
                                    TRANSACTION_VALUE_SCHEMA, self._tx.begin_value(tx_id, ts_ms),
                                    self._next_offset(), (), None, None, context_headers=False))

    def transaction_end(self, tx_id: str, ts_ms: int) -> None:
        if self.provide_transaction_metadata and self._tx.begun:
            self._emit(SourceRecord(self.transaction_topic, TRANSACTION_KEY_SCHEMA, {"id": tx_id},
                                    TRANSACTION_VALUE_SCHEMA, self._tx.end_value(tx_id, ts_ms),
                                    self._next_offset(), (), None, None, context_headers=False))
        self._tx.reset()

    def open_transaction(self) -> dict[str, int] | None:
        """The open transaction's events per data collection (what an offset stores so that a
        restart inside it goes on counting: Debezium's TransactionContext.store), or None."""
        return dict(self._tx.per_collection) if self._tx.begun else None

    def resume_transaction(self, per_collection: dict[str, int]) -> None:
        """Go on with a transaction a stored offset says is open (Debezium's
        TransactionContext.load): no second BEGIN; the total and per-collection orders continue."""
        self._tx.begun = True
        self._tx.per_collection = dict(per_collection)
        self._tx.total = sum(per_collection.values())

    # -- internals ------------------------------------------------------------------------

    def _envelope(self, before: dict[str, Any] | None, after: dict[str, Any] | None,
                  source: dict[str, Any], op: str) -> dict[str, Any]:
        now = self._clock()
        return {
            "before": before,
            "after": after,
            "source": source,
            "transaction": None,
            "op": op,
            "ts_ms": now // 1_000_000,
            "ts_us": now // 1_000,
            "ts_ns": now,
        }

    def _data(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema,
              value: dict[str, Any], collection: str, tx_id: str | None, tx_ts_ms: int | None,
              headers: tuple[tuple[str, Schema, Any], ...], op: str, context_headers: bool = True) -> None:
        if self.provide_transaction_metadata and tx_id is not None:
            tx = self._tx
            if not tx.begun:
                tx.begun = True
                self._emit(SourceRecord(self.transaction_topic, TRANSACTION_KEY_SCHEMA, {"id": tx_id},
                                        TRANSACTION_VALUE_SCHEMA,
                                        tx.begin_value(tx_id, tx_ts_ms if tx_ts_ms is not None
                                                       else self._clock() // 1_000_000),
                                        self._next_offset(), (), None, None, context_headers=False))
            total, per_collection = tx.event(collection)
            value["transaction"] = {"id": tx_id, "total_order": total, "data_collection_order": per_collection}
        self._emit(SourceRecord(topic, key_schema, key, value_schema, value, self._next_offset(), headers,
                                op, collection, context_headers))

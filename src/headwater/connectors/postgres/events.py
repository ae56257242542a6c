"""pgoutput messages -> Debezium records, without I/O.

`StreamPosition` is the stream's position state (transaction, last commit, restart point). It
is cheap to advance, so the replication reader keeps one for every message it receives, even
when the heavy work — decoding tuples, building rows and envelopes, serializing — happens
elsewhere. `ChangeEventBuilder` does that heavy work for a run of messages, starting from a
copy of the position; given the same position and messages it emits the same records wherever
it runs (the reader thread, or a worker process fed with `Chunk`s).

Offsets count *messages*: a record's offset says how many data messages of its transaction are
completely emitted (`tx_msgs`); only the last record of a message advances it. A restart skips
that many data messages of the partly delivered transaction, so nothing is lost and nothing
fully written is emitted again.
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.schemas import CapturedTable, SchemaRegistry
from headwater.connectors.postgres.source_info import (
    MESSAGE_COLLECTION,
    MESSAGE_KEY_SCHEMA,
    MESSAGE_VALUE_SCHEMA,
    PgOffset,
    source_block,
)
from headwater.connectors.postgres.types import DEFAULT_UNAVAILABLE_PLACEHOLDER, TypeSettings, encode_binary
from headwater.engine.connector import ConnectorError
from headwater.engine.dispatcher import EventDispatcher
from headwater.engine.records import OffsetMarker, SourceRecord
from headwater.engine.transaction import store_open_transaction
from headwater.model.envelope import OP_CREATE, OP_DELETE, OP_MESSAGE, OP_READ, OP_UPDATE
from headwater.model.schema import OPTIONAL_STRING, Schema, struct
from headwater.model.values import same_value
from headwater.relational.column_mappers import ColumnMappers
from headwater.relational.converters import CustomConverters
from headwater.relational.filters import PrefixFilter
from headwater.relational.key_mapper import KeyColumnMapper
from headwater.relational.table import Table
from headwater.relational.topic_naming import TopicNaming

log = logging.getLogger(__name__)

_UNCHANGED = pg.UNCHANGED_TOAST

# pgoutput message type bytes
BEGIN, COMMIT, RELATION, INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE = (ord(c) for c in "BCRIUDTM")
DATA_CHANGES = frozenset((INSERT, UPDATE, DELETE))


@dataclass
class StreamPosition:
    restart_lsn: int = 0                # every transaction committing before this is done
    last_commit_lsn: int | None = None  # for source.sequence; None until the first commit of a run
    message_lsn: int | None = None      # last non-transactional message delivered
    xid: int | None = None
    final_lsn: int | None = None        # commit LSN of the transaction in progress
    commit_ts_us: int = 0
    tx_msgs: int = 0                    # data messages of the transaction seen so far
    skip_final_lsn: int | None = None   # resume inside this transaction ...
    skip_msgs: int = 0                  # ... after this many of its data messages
    skip_tx: tuple[Any, dict[str, int]] | None = None  # ... whose metadata context is this (id, counts)
    skipping: int = 0
    resumed_tx: tuple[Any, dict[str, int]] | None = None  # skip_tx of the transaction begun, when resumed
    xmin: int | None = None             # the slot's catalog_xmin for source.xmin (xmin.fetch.interval.ms)
    replaying_xid: int | None = None    # a committed streamed transaction being replayed (set before its BEGIN)
    last_xid: int | None = None         # the last committed transaction's xid (None after a later message)

    @classmethod
    def resume(cls, offset: PgOffset) -> StreamPosition:
        inside = offset.tx_final_lsn is not None
        return cls(restart_lsn=offset.lsn_commit or 0, last_commit_lsn=offset.last_commit_lsn,
                   message_lsn=offset.message_lsn, skip_final_lsn=offset.tx_final_lsn,
                   skip_msgs=offset.tx_msgs if inside else 0, skip_tx=offset.open_transaction if inside else None,
                   last_xid=offset.tx_id if not inside else None)

    def begin(self, msg: pg.Begin) -> None:
        self.xid = msg.xid
        self.final_lsn = msg.final_lsn
        self.commit_ts_us = msg.commit_ts_us
        self.tx_msgs = 0
        resumed = msg.final_lsn == self.skip_final_lsn
        self.skipping = self.skip_msgs if resumed else 0
        self.resumed_tx = self.skip_tx if resumed else None
        self.skip_final_lsn = None
        self.skip_tx = None

    def data(self) -> bool:
        """A data message of the transaction (I/U/D/T/transactional M): False if already delivered."""
        self.tx_msgs += 1
        if self.skipping > 0:
            self.skipping -= 1
            return False
        return True

    def commit(self, msg: pg.Commit) -> None:
        self.last_commit_lsn = msg.end_lsn
        self.restart_lsn = msg.end_lsn
        self.final_lsn = None
        self.last_xid = self.xid
        self.xid = None
        self.skipping = 0

    def non_transactional_message(self, lsn: int) -> bool:
        """False if this message was delivered before a restart."""
        if self.message_lsn is not None and lsn <= self.message_lsn:
            return False
        self.last_commit_lsn = lsn
        self.message_lsn = lsn
        self.last_xid = None
        return True

    def idle_offset(self, wal_end: int) -> dict[str, Any]:
        """The offset of an idle position: resume at `wal_end` (every transaction committing
        before it was received and handled), and otherwise the last processed message's offset
        (its LSN and transaction, as the offset after a COMMIT or a non-transactional message
        says), which a blocking snapshot's records carry."""
        self.restart_lsn = wal_end
        d = self.offset(self.last_commit_lsn, 0)
        d["txId"] = self.last_xid
        return d

    def offset(self, lsn: int | None, msgs_done: int) -> dict[str, Any]:
        d: dict[str, Any] = {"lsn_commit": self.restart_lsn, "lsn": lsn, "txId": self.xid,
                             "ts_usec": self.commit_ts_us}
        if self.final_lsn is not None:
            d["tx_final_lsn"] = self.final_lsn
            d["tx_msgs"] = msgs_done
        if self.last_commit_lsn is not None:
            d["last_commit_lsn"] = self.last_commit_lsn
        if self.message_lsn is not None:
            d["message_lsn"] = self.message_lsn
        return d


def message_type(payload: bytes) -> int:
    return payload[0]


def relation_oid(payload: bytes) -> int:
    """The relation of an I/U/D message (protocol 1: right after the type byte)."""
    return int.from_bytes(payload[1:5], "big")


@dataclass
class BuilderSettings:
    """Everything a builder needs besides the messages; picklable, for worker processes."""

    server: str
    dbname: str
    message_topic: str
    topic_delimiter: str
    table_filter: Any
    column_filter: Any
    key_columns: KeyColumnMapper | None  # message.key.columns
    include_unknown: bool
    tombstones_on_delete: bool
    skipped_operations: frozenset[str]
    provide_transaction_metadata: bool
    transaction_topic: str
    unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER
    # column.truncate/mask/mask.hash/propagate rules (headwater.relational.column_mappers); picklable
    column_mappers: ColumnMappers | None = None
    heartbeat_topic: str | None = None  # `<topic.heartbeat.prefix>.<topic.prefix>` when heartbeats are on
    # topic.naming.strategy (data topics; the topics above come from it too) and the
    # schema/field name adjustment modes; None: Debezium's default strategy with `topic_delimiter`
    topic_naming: TopicNaming | None = None
    schema_name_adjustment: str = "none"
    field_name_adjustment: str = "none"
    failure_mode: str = "fail"  # event.processing.failure.handling.mode: fail, warn or skip
    # decimal/time/binary/hstore/interval handling modes (headwater.connectors.postgres.types)
    type_settings: TypeSettings = field(default_factory=TypeSettings)
    # `converters` (headwater.relational.converters): names and settings; instances made per process
    custom_converters: CustomConverters | None = None
    # message.prefix.include/exclude.list (None: every logical decoding message)
    message_filter: PrefixFilter | None = None
    # skip.messages.without.change: an update whose captured columns kept their values is left out
    skip_unchanged: bool = False

    def dispatcher(self, emit: Callable[[Any], None], next_offset: Callable[[], dict[str, Any]]) -> EventDispatcher:
        return EventDispatcher(
            emit=emit, next_offset=next_offset, tombstones_on_delete=self.tombstones_on_delete,
            skipped_operations=self.skipped_operations,
            provide_transaction_metadata=self.provide_transaction_metadata,
            transaction_topic=self.transaction_topic)

    def registry(self, catalog: Any) -> SchemaRegistry:
        return SchemaRegistry(catalog, topic_prefix=self.server, delimiter=self.topic_delimiter,
                              table_filter=self.table_filter, column_filter=self.column_filter,
                              key_columns=self.key_columns, include_unknown=self.include_unknown,
                              unavailable_placeholder=self.unavailable_placeholder,
                              column_mappers=self.column_mappers, topic_naming=self.topic_naming,
                              schema_name_adjustment=self.schema_name_adjustment,
                              field_name_adjustment=self.field_name_adjustment,
                              type_settings=self.type_settings,
                              custom_converters=self.custom_converters)

    def create_builder(self) -> ChunkBuilder:
        """Worker-side factory (see `headwater.engine.encoding`)."""
        return ChunkBuilder(self)


# oid -> (version, table, raw column order): the relation definitions a chunk is decoded with
Relations = dict[int, tuple[int, Table | None, tuple[str, ...]]]
_CHANGE_KINDS = frozenset(ord(c) for c in "IUDTM")


@dataclass
class Chunk:
    """A run of messages for a worker: the position before them, and the definitions of the
    relations they touch (oid -> (version, table, raw column order))."""

    position: StreamPosition
    messages: list[tuple[bytes, int]]
    relations: Relations = field(default_factory=dict)
    heartbeat: tuple[int, dict[str, Any]] | None = None  # (ts_ms, offset) of a heartbeat after the messages
    # chunks joined into one (a transaction kept whole): (message index, the definitions the
    # joined chunk carried) — a table altered inside the transaction changes definition there
    relation_changes: list[tuple[int, Relations]] = field(default_factory=list)
    # (messages counted, bytes, change messages): the Spark feed asks for both several times per
    # chunk (read-ahead bound, batch end, task sizes), and each count walks every message on the
    # driver (bench/README.md, "Fixed costs cut"). Keyed on the message count: joined chunks grow.
    _counts: tuple[int, int, int] | None = field(default=None, repr=False, compare=False)

    def counts(self) -> tuple[int, int]:
        """(bytes, change messages) of the messages: rows, truncates and logical messages count
        as changes, BEGIN, COMMIT, RELATION and TYPE do not."""
        held = len(self.messages)
        if self._counts is None or self._counts[0] != held:
            changes = _CHANGE_KINDS
            self._counts = (held, sum(len(payload) for payload, _ in self.messages),
                            sum(1 for payload, _ in self.messages if payload[0] in changes))
        return self._counts[1], self._counts[2]

    def runs(self) -> Iterator[tuple[Relations, list[tuple[bytes, int]]]]:
        """The messages in runs, each with the relation definitions to adopt before it."""
        start, relations = 0, self.relations
        for index, changed in self.relation_changes:
            yield relations, self.messages[start:index]
            start, relations = index, changed
        yield relations, (self.messages if start == 0 else self.messages[start:])


class ChangeEventBuilder:
    """Turns messages into records through the dispatcher, advancing a StreamPosition."""

    def __init__(self, settings: BuilderSettings, registry: SchemaRegistry, position: StreamPosition,
                 emit: Callable[[Any], None]) -> None:
        self.settings = settings
        self.registry = registry
        self.position = position
        self._emit = emit
        self._lsn: int | None = None
        self._msgs_done = 0
        self._last_offset: dict[str, Any] | None = None
        # provide.transaction.metadata: the open transaction's id and its events per collection
        # before the message being built (set at BEGIN, then after each data message), which its
        # offsets store (Debezium's TransactionContext)
        self._tx_id_stored: Any = None
        self._tx_counts: dict[str, int] | None = None
        self._source_key: tuple[Any, ...] | None = None
        self._source_template: dict[str, Any] = {}
        self._sequence_prefix = ""
        self.dispatcher = settings.dispatcher(emit, self._next_offset)

    def _next_offset(self) -> dict[str, Any]:
        d = self.position.offset(self._lsn, self._msgs_done)
        if self._tx_counts is not None and "tx_final_lsn" in d:
            store_open_transaction(d, self._tx_id_stored, self._tx_counts)
        self._last_offset = d
        return d

    def handle(self, payload: bytes, lsn: int) -> None:
        kind = payload[0]
        pos = self.position
        self._lsn = lsn
        if kind in DATA_CHANGES:
            if pos.data():
                self._data_message(lambda: self._change(pg.decode(payload), lsn))
        elif kind == BEGIN:
            msg = pg.decode(payload)
            pos.begin(msg)
            if self.settings.provide_transaction_metadata:
                self._begin_transaction(msg, lsn)
        elif kind == COMMIT:
            msg = pg.decode(payload)
            self._msgs_done = pos.tx_msgs
            self._tx_counts = None
            self.dispatcher.transaction_end(f"{pos.xid}:{lsn}", msg.commit_ts_us // 1000)
            xid = pos.xid
            pos.commit(msg)
            offset = self._next_offset()
            # Debezium's offset after a COMMIT keeps that transaction's id (recorded, signals/blocking):
            # a blocking snapshot started there stamps it as source.txId
            offset["txId"] = xid
            self.dispatcher.dispatch_offset(offset)
        elif kind == RELATION:
            msg = pg.decode(payload)
            # protocol 1 sends a transaction once it has committed: the catalog is read once that
            # commit is visible (its xid; a replayed streamed transaction's Relation messages come
            # before its BEGIN, when only the replay knows the xid)
            xid = pos.xid if pos.xid is not None else pos.replaying_xid
            self.registry.for_relation(msg.oid, msg.namespace, msg.name, msg.columns, committed_xid=xid)
        elif kind == TRUNCATE:
            if pos.data():
                self._data_message(lambda: self._truncate(pg.decode(payload), lsn))
        elif kind == MESSAGE:
            msg = pg.decode(payload)
            if msg.transactional:
                if pos.data():
                    self._data_message(lambda: self._message(msg, lsn))
            elif pos.non_transactional_message(lsn):
                self._msgs_done = pos.tx_msgs
                if not self._message(msg, lsn):
                    self.dispatcher.dispatch_offset(self._next_offset())
        # Origin and Type messages carry nothing Debezium emits

    def _begin_transaction(self, msg: pg.Begin, lsn: int) -> None:
        """provide.transaction.metadata at a BEGIN: Debezium emits BEGIN here, whatever the
        transaction's changes turn out to be — unless a restart resumes inside a transaction
        delivered in part (BEGIN was sent then): its counts go on from the stored offset's."""
        resumed = self.position.resumed_tx
        if resumed is not None:
            self._tx_id_stored, counts = resumed
            self.dispatcher.resume_transaction(counts)
            self._tx_counts = counts
        elif not self.position.skipping:  # (an offset stored without the counts: as before them)
            self._msgs_done = 0
            self._tx_id_stored, self._tx_counts = f"{msg.xid}:{lsn}", {}
            self.dispatcher.transaction_begin(self._tx_id_stored, msg.commit_ts_us // 1000)

    def heartbeat(self, offset: dict[str, Any], ts_ms: int) -> None:
        """Emit a heartbeat record carrying `offset` (a position the reader decided is safe)."""
        s = self.settings
        self.dispatcher.dispatch_heartbeat(offset, s.heartbeat_topic, s.server, ts_ms)

    def _data_message(self, build: Callable[[], None]) -> None:
        """Emit one data message's records: all carry `tx_msgs` = messages done before it, and
        the last one then advances it, so a batch cut inside the message stores a position that
        re-emits the whole message."""
        done = self.position.tx_msgs
        self._msgs_done = done - 1
        self._last_offset = None
        build()
        if self._tx_counts is not None:
            # only a data message's events move the counts: after it is before the next one
            self._tx_counts = self.dispatcher.open_transaction() or {}
        last = self._last_offset
        if last is not None and "tx_msgs" in last:
            last["tx_msgs"] = done
            if self._tx_counts is not None:
                store_open_transaction(last, self._tx_id_stored, self._tx_counts)
        self._msgs_done = done

    def _tx_id(self, lsn: int) -> str:
        return f"{self.position.xid}:{lsn}"

    def _source(self, captured: CapturedTable, lsn: int) -> dict[str, Any]:
        """The source block: everything but the LSN is the same for a table within a
        transaction, so it is built once and copied: building it for every event was a large
        share of the hot path (bench/README.md, "Measurements behind design choices")."""
        pos = self.position
        key = (id(captured), pos.xid, pos.commit_ts_us, pos.last_commit_lsn, pos.xmin)
        if self._source_key != key:
            self._source_key = key
            self._source_template = source_block(
                self.settings.server, self.settings.dbname, ts_us=pos.commit_ts_us, snapshot="false",
                schema=captured.table.id.schema or "", table=captured.table.id.table, tx_id=pos.xid, lsn=None,
                last_commit_lsn=pos.last_commit_lsn, xmin=pos.xmin)
            last = pos.last_commit_lsn
            self._sequence_prefix = "[null," if last is None else f'["{last}",'
        block = self._source_template.copy()
        block["lsn"] = lsn
        block["sequence"] = f'{self._sequence_prefix}"{lsn}"]'
        return block

    def _change(self, msg: Any, lsn: int) -> None:
        captured = self.registry.get(msg.relation_oid)
        if captured is None:
            return
        schema = captured.schema
        kind = type(msg)
        try:
            if kind is pg.Insert:
                op, before, after = OP_CREATE, None, schema.row(msg.new)
            elif kind is pg.Update:
                op = OP_UPDATE
                new = msg.new
                if msg.old_kind == "O" and _UNCHANGED in new:
                    # REPLICA IDENTITY FULL: the old tuple has every value, so an unchanged TOAST
                    # value is taken from it instead of becoming the placeholder (as Debezium does)
                    new = [o if n is _UNCHANGED else n for n, o in zip(new, msg.old)]
                after = schema.row(new)
                before = schema.row(msg.old) if msg.old is not None else None
                if self.settings.skip_unchanged and before is not None and same_value(before, after):
                    return  # skip.messages.without.change (no old tuple: nothing to compare, emitted)
            else:
                op, before, after = OP_DELETE, schema.row(msg.old), None
        except Exception as exc:  # a value the converters cannot take: event.processing.failure.handling.mode
            event_failed(self.settings.failure_mode, captured, exc,
                         [getattr(msg, "new", None), getattr(msg, "old", None)],
                         f"at LSN {pg.format_lsn(lsn)} (transaction {self.position.xid})")
            return
        self.dispatcher.dispatch_change(
            schema, captured.topic, op, before, after, self._source(captured, lsn),
            collection=captured.collection, tx_id=self._tx_id(lsn), tx_ts_ms=self.position.commit_ts_us // 1000)

    def _truncate(self, msg: pg.Truncate, lsn: int) -> None:
        for oid in msg.relation_oids:
            captured = self.registry.get(oid)
            if captured is None:
                continue
            self.dispatcher.dispatch_truncate(
                captured.schema, captured.topic, self._source(captured, lsn), collection=captured.collection,
                tx_id=self._tx_id(lsn), tx_ts_ms=self.position.commit_ts_us // 1000)

    def _message(self, msg: pg.Message, lsn: int) -> bool:
        """Emit a logical decoding message's record; False when its prefix is filtered out."""
        s = self.settings
        if s.message_filter is not None and not s.message_filter(msg.prefix):
            return False
        pos = self.position
        if msg.transactional:
            ts_us, tx_id, tx, tx_ts = pos.commit_ts_us, pos.xid, self._tx_id(lsn), pos.commit_ts_us // 1000
        else:
            # Debezium stamps non-transactional messages with the time it saw them, in milliseconds
            ts_us, tx_id, tx, tx_ts = time.time_ns() // 1_000_000 * 1000, None, None, None
        source = source_block(s.server, s.dbname, ts_us=ts_us, snapshot="false", schema="", table="",
                              tx_id=tx_id, lsn=lsn, last_commit_lsn=pos.last_commit_lsn, xmin=pos.xmin)
        mode = s.type_settings.binary_mode
        content = msg.content if msg.content is None else encode_binary(msg.content, mode)
        value = {"op": OP_MESSAGE, "ts_ms": time.time_ns() // 1_000_000, "source": source, "transaction": None,
                 "message": {"prefix": msg.prefix, "content": content}}
        self.dispatcher.dispatch_record(s.message_topic, MESSAGE_KEY_SCHEMA, {"prefix": msg.prefix},
                                        message_value_schema(mode), value, collection=MESSAGE_COLLECTION,
                                        op=OP_MESSAGE, tx_id=tx, tx_ts_ms=tx_ts)
        return True




@functools.cache
def message_value_schema(binary_mode: str) -> Schema:
    """The message event's value schema: `content` follows binary.handling.mode (a string
    unless bytes; recorded, types_binary_*)."""
    if binary_mode == "bytes":
        return MESSAGE_VALUE_SCHEMA
    block = MESSAGE_VALUE_SCHEMA.field("message").schema  # type: ignore[union-attr]
    block = struct(block.name, [("prefix", OPTIONAL_STRING), ("content", OPTIONAL_STRING)], version=block.version)
    return struct(MESSAGE_VALUE_SCHEMA.name, [(f.name, block if f.name == "message" else f.schema)
                                              for f in MESSAGE_VALUE_SCHEMA.fields],
                  version=MESSAGE_VALUE_SCHEMA.version)


def failing_column(captured: CapturedTable, tuples: list[Any]) -> tuple[str | None, str | None]:
    """(column, reason) of the first value of `tuples` (raw rows) its converter refuses."""
    for raw in tuples:
        if raw is None:
            continue
        for p in captured.schema.plan:
            value = raw[p.index] if p.index < len(raw) else None
            if value is None or value is _UNCHANGED:
                continue
            try:
                p.convert(value)
            except Exception as exc:
                return p.name, (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return None, None


def event_failed(mode: str, captured: CapturedTable, exc: BaseException, tuples: list[Any], where: str) -> None:
    """Debezium's `event.processing.failure.handling.mode` for an event that cannot be built:
    fail raises (the connector stops, naming table, position and column), warn logs it and skips
    the event, skip skips it (logged at debug level, as Debezium does)."""
    column, reason = failing_column(captured, tuples)
    if reason is None:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    what = f"table {captured.collection} {where}" + (f", column {column}" if column else "")
    if mode == "fail":
        raise ConnectorError(
            f"cannot process the change event of {what}: {reason}. event.processing.failure.handling.mode=fail "
            "stops here; set it to warn or skip to leave such events out")
    level = logging.WARNING if mode == "warn" else logging.DEBUG
    log.log(level, "skipped the change event of %s (event.processing.failure.handling.mode=%s): %s", what, mode,
            reason)


class SnapshotRows:
    """Snapshot rows of one table (or one chunk of it) -> `r` records through a dispatcher.

    Rows are handed on one row late, so the last one is known when it is emitted (its marker
    says so). `first_in_table`/`last_in_table` say whether this run of rows starts/ends the table
    (False for the inner chunks of a table read in parts); markers as Debezium's
    (`snapshot_marker`). A row that cannot be converted is handled per
    `event.processing.failure.handling.mode`, as in streaming."""

    def __init__(self, settings: BuilderSettings, captured: CapturedTable, dispatcher: EventDispatcher, *,
                 txid: int | None, lsn: int | None, first_table: bool, last_table: bool, first_in_table: bool = True,
                 last_in_table: bool = True, last_commit_lsn: int | None = None) -> None:
        self.settings = settings
        self.captured = captured
        self.dispatcher = dispatcher
        self.txid = txid
        self.lsn = lsn
        self.first_table = first_table
        self.last_table = last_table
        self._first = first_in_table
        self._last_in_table = last_in_table
        self.last_commit_lsn = last_commit_lsn  # a blocking snapshot's: the stream position's (sequence)
        self._pending: list[list[str | None]] = []

    def on_row(self, raw: list[str | None]) -> None:
        if self._pending:
            self._emit(self._pending[0], False)
            self._pending[0] = raw
        else:
            self._pending.append(raw)

    def finish(self) -> None:
        if self._pending:
            self._emit(self._pending.pop(), self._last_in_table)

    def _emit(self, raw: list[str | None], last: bool) -> None:
        from headwater.connectors.postgres.snapshot import now_us
        from headwater.engine.snapshot_plan import snapshot_marker

        captured, s = self.captured, self.settings
        marker = snapshot_marker(self._first, last, self.first_table, self.last_table)
        self._first = False
        table_id = captured.table.id
        source = source_block(s.server, s.dbname, ts_us=now_us(), snapshot=marker, schema=table_id.schema or "",
                              table=table_id.table, tx_id=self.txid, lsn=self.lsn,
                              last_commit_lsn=self.last_commit_lsn)
        try:
            row = captured.schema.row(raw)
        except Exception as exc:  # event.processing.failure.handling.mode, as in streaming
            event_failed(s.failure_mode, captured, exc, [raw], f"in the snapshot at LSN {pg.format_lsn(self.lsn)}")
            return
        self.dispatcher.dispatch_change(captured.schema, captured.topic, OP_READ, None, row, source,
                                        collection=captured.collection)


def advance_position(pos: StreamPosition, payload: bytes, lsn: int) -> None:
    """The reader's bookkeeping for one message: moves `pos` without decoding any tuple."""
    kind = payload[0]
    if kind in DATA_CHANGES or kind == TRUNCATE:
        pos.data()
    elif kind == BEGIN:
        pos.begin(pg.decode(payload))
    elif kind == COMMIT:
        pos.commit(pg.decode(payload))
    elif kind == MESSAGE:
        msg = pg.decode(payload)
        if msg.transactional:
            pos.data()
        else:
            pos.non_transactional_message(lsn)


class ChunkBuilder:
    """Worker side: builds the records of `Chunk`s, caching table schemas by relation version."""

    def __init__(self, settings: BuilderSettings) -> None:
        self.settings = settings
        self.registry = settings.registry(None)
        self._versions: dict[int, int] = {}
        self._fast: Any = None

    def render_with(self, serializer: Any) -> None:
        """The records go straight to `serializer` (a worker's RecordSerializer): plain rows may
        then be rendered to lines here (headwater.connectors.postgres.fast_events)."""
        from headwater.connectors.postgres.fast_events import FastRows

        self._fast = FastRows(serializer)

    def update_relations(self, relations: Relations) -> None:
        """Adopt the relation definitions a chunk carries (rebuilding only changed versions)."""
        for oid, (version, table, raw_columns) in relations.items():
            if self._versions.get(oid) != version:
                self.registry.define(oid, None if table is None else self.registry.build(table, raw_columns))
                self._versions[oid] = version

    def build(self, chunk: Chunk) -> list[Any]:
        items: list[Any] = []
        builder = ChangeEventBuilder(self.settings, self.registry, copy.copy(chunk.position), items.append)
        handle = builder.handle
        fast = self._fast
        try:
            if fast is not None and fast.start(builder, items):
                fast_handle = fast.handle
                for relations, messages in chunk.runs():
                    self.update_relations(relations)
                    for payload, lsn in messages:
                        if not fast_handle(payload, lsn):
                            handle(payload, lsn)
            else:
                for relations, messages in chunk.runs():
                    self.update_relations(relations)
                    for payload, lsn in messages:
                        handle(payload, lsn)
            if chunk.heartbeat is not None:
                builder.heartbeat(chunk.heartbeat[1], chunk.heartbeat[0])
        finally:
            # The builder and its dispatcher refer to each other (bound methods), and through the
            # emit callback to `items`: left to the cycle collector, the chunk's multi-MB lines
            # would wait for a collection that the fast path, allocating few containers, rarely
            # triggers (a worker grew by hundreds of MB). Freed by reference counting instead.
            builder.dispatcher = None  # type: ignore[assignment]
            if fast is not None:
                fast.finish()
        return items


__all__ = ["BuilderSettings", "ChangeEventBuilder", "Chunk", "ChunkBuilder", "OffsetMarker", "SourceRecord",
           "StreamPosition"]

"""PostgreSQL's units of work for distributed runs, and their executor side.

A :class:`StreamWork` carries raw replication messages cut by the driver's reader; a
:class:`SnapshotWork` names one chunk of one table's snapshot (a key range, or a ctid block range
for a table without a key) to read inside an exported snapshot. :class:`PgWorkDecoder` is
picklable and shipped with the work: it builds records from stream messages (no I/O) and reads
snapshot chunks (its own connection, inside the exported snapshot).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg2
from psycopg2 import sql

from headwater.connectors.postgres import snapshot as snap
from headwater.connectors.postgres.connection import connection_error
from headwater.connectors.postgres.events import (
    BEGIN,
    DATA_CHANGES,
    BuilderSettings,
    ChangeEventBuilder,
    Chunk,
    SnapshotRows,
    relation_oid,
)
from headwater.connectors.postgres.schemas import CapturedTable
from headwater.connectors.postgres.snapshot_lease import SnapshotLease, chunk_done
from headwater.connectors.postgres.source_info import position_key
from headwater.engine.feed import PositionedRecord, WorkDecoder
from headwater.engine.records import SourceRecord
from headwater.engine.snapshot_plan import SnapshotChunk, snapshot_marker

if TYPE_CHECKING:
    from headwater.connectors.postgres.typed_changes import PgTypedRowChanges
    from headwater.engine.typed_rows import TypedRowChanges, TypedRows

log = logging.getLogger(__name__)

PHASE_SNAPSHOT = "snapshot"
PHASE_STREAM = "stream"
_SNAPSHOT_RUN = 1024        # snapshot records handed from the COPY thread to the task at a time


@dataclass
class StreamWork:
    chunk: Chunk

    @property
    def size(self) -> int:
        """Messages to decode (the source groups small items into tasks of about equal work)."""
        return len(self.chunk.messages)

    @property
    def nbytes(self) -> int:
        """The messages' bytes (a task's partition carries them to the executor)."""
        return chunk_bytes(self.chunk)


@dataclass
class SnapshotWork:
    """One chunk of the snapshot plan (its table, bounds and markers' places) and the exported
    snapshot to read it in: `lsn` and `txid` are what its records say."""

    chunk: SnapshotChunk
    snapshot_name: str
    lsn: int
    txid: int


class PgWorkDecoder(WorkDecoder):
    """Executor side: builds records from stream chunks and reads snapshot chunks."""

    def __init__(self, settings: BuilderSettings, connect_args: dict[str, Any],
                 lease: SnapshotLease | None = None) -> None:
        self.settings = settings
        self.connect_args = connect_args  # holds the password: never logged, never in an error
        self.lease = lease  # a batch extract's snapshot: report each chunk read to its holder
        self._builder: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "connect_args": self.connect_args, "lease": self.lease, "_builder": None}

    def decode(self, item: Any) -> Iterator[PositionedRecord]:
        if isinstance(item, StreamWork):
            return iter(self._stream(item.chunk))
        if isinstance(item, SnapshotWork):
            return self._snapshot(item)
        raise TypeError(f"not a PostgreSQL work item: {type(item).__name__}")

    def typed_row_changes(self) -> PgTypedRowChanges:
        """A task's gatherer of typed row changes (see :meth:`decode_changes`)."""
        from headwater.connectors.postgres.typed_changes import PgTypedRowChanges  # pyarrow: executors only

        return PgTypedRowChanges(self.settings)

    def decode_changes(self, item: Any, changes: TypedRowChanges) -> Iterator[PositionedRecord]:
        """Like :meth:`decode`, but the row changes `changes` takes (tables with a typed layout) go
        to it instead of becoming events (:mod:`typed_changes`); it hands them on as typed rows."""
        if isinstance(item, StreamWork):
            from headwater.connectors.postgres.typed_changes import PgTypedRowChanges

            assert isinstance(changes, PgTypedRowChanges)
            return iter(self._stream(item.chunk, changes))
        return self.decode(item)

    def _stream(self, chunk: Chunk, typed: PgTypedRowChanges | None = None) -> list[PositionedRecord]:
        if self._builder is None:
            self._builder = self.settings.create_builder()
        chunk_builder = self._builder
        out: list[PositionedRecord] = []
        # the position (major, minor) of the message being handled, and the records emitted for it;
        # its text is made for the messages that emit records only
        current = [0, 0, 0]

        def emit(item: Any) -> None:
            if isinstance(item, SourceRecord):
                out.append(PositionedRecord(position_key(current[0], current[1], current[2]), item))
                current[2] += 1

        registry = chunk_builder.registry
        builder = ChangeEventBuilder(self.settings, registry, copy.copy(chunk.position), emit)
        pos = builder.position

        def handle(payload: bytes, lsn: int) -> None:
            # a data message or COMMIT of a transaction is message number tx_msgs + 1 of it,
            # its BEGIN (the BEGIN record of provide.transaction.metadata) number 0; a
            # non-transactional message is ordered by its own LSN
            if pos.final_lsn is not None:
                major, minor = pos.final_lsn, pos.tx_msgs + 1
            elif payload[0] == BEGIN:
                major, minor = int.from_bytes(payload[1:9], "big"), 0  # its final (commit) LSN
            else:
                major, minor = lsn, 0
            if typed is not None and payload[0] in DATA_CHANGES:
                captured = registry.get(relation_oid(payload))
                if captured is not None and typed.take(captured, payload, lsn, major, minor, pos):
                    return
            current[0], current[1], current[2] = major, minor, 0
            builder.handle(payload, lsn)

        for relations, messages in chunk.runs():
            chunk_builder.update_relations(relations)
            if typed is not None:
                # the row changes in bulk; every other message (BEGIN, COMMIT, events) one by one
                typed.gather(messages, registry, pos, handle)
                continue
            for payload, lsn in messages:
                handle(payload, lsn)
        return out

    def decode_typed_rows(self, item: Any) -> list[TypedRows] | None:
        """A snapshot chunk as typed rows (:mod:`typed_snapshot`), or None when the chunk has to be
        read as events: not a snapshot chunk, a custom SELECT, a column without an exact typed
        form, or a value pyarrow does not accept."""
        import pyarrow as pa

        from headwater.connectors.postgres import typed_snapshot as typed
        from headwater.connectors.postgres.snapshot import now_us
        from headwater.connectors.postgres.source_info import source_block
        from headwater.engine.typed_rows import snapshot_chunk_rows
        from headwater.model.envelope import OP_READ

        if not isinstance(item, SnapshotWork) or item.chunk.select:
            return None
        work, s = item, self.settings
        captured = s.registry(None).build(work.chunk.table, work.chunk.raw_columns, from_relation=False)
        layout = typed.typed_row_layout(captured)
        if layout is None:
            return None
        # the record an event of this table would be (NULL values): its key and value JSON carry
        # the schemas the sink learns the table from, its source block the fields that do not vary
        # per row (all but the snapshot marker: the chunk's rows share the snapshot's LSN and
        # transaction)
        templates: list[SourceRecord] = []
        table_id = captured.table.id
        source = source_block(s.server, s.dbname, ts_us=now_us(), snapshot="true", schema=table_id.schema or "",
                              table=table_id.table, tx_id=work.txid, lsn=work.lsn, last_commit_lsn=None)
        dispatcher = s.dispatcher(lambda r: templates.append(r) if isinstance(r, SourceRecord) else None,
                                  lambda: {"phase": PHASE_SNAPSHOT})
        row = captured.schema.row([None] * len(captured.raw_columns))
        dispatcher.dispatch_change(captured.schema, captured.topic, OP_READ, None, row, source,
                                   collection=captured.collection)
        if len(templates) != 1:
            return None
        try:
            with snapshot_connection(self.connect_args, work.snapshot_name) as conn:
                data = typed.copy_text(conn, chunk_query(conn, captured, work))
        except typed.ChunkTooLarge:
            log.info("snapshot of table %s (chunk %d): more than %d MiB of text, read as events (in bounded "
                     "memory)", captured.collection, work.chunk.chunk_index, typed.MAX_CHUNK_BYTES >> 20)
            return None
        except psycopg2.Error as exc:
            raise connection_error(f"snapshot of table {captured.collection} (chunk {work.chunk.chunk_index})",
                                   exc) from None
        try:
            table = typed.parse_text(data, layout)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            log.info("snapshot of table %s (chunk %d): a value has no exact typed form (%s); the chunk is "
                     "read as events", captured.collection, work.chunk.chunk_index, str(exc).splitlines()[0][:200])
            return None
        if self.lease is not None:
            chunk_done(self.connect_args, self.lease, f"{work.chunk.table_index}:{work.chunk.chunk_index}")
        prefix = position_key(0, (work.chunk.table_index << 32) | work.chunk.chunk_index)[:32]
        return snapshot_chunk_rows(templates[0], table, prefix=prefix, first_in_table=work.chunk.first_chunk,
                                   last_in_table=work.chunk.last_chunk, first_table=work.chunk.first_table,
                                   last_table=work.chunk.last_table, marker=snapshot_marker)

    def _snapshot(self, work: SnapshotWork) -> Iterator[PositionedRecord]:
        s = self.settings
        registry = s.registry(None)
        captured = registry.build(work.chunk.table, work.chunk.raw_columns, from_relation=False)
        # The COPY pushes rows into a callback; a thread runs it and hands records over in runs of
        # _SNAPSHOT_RUN through a bounded queue, so a chunk of any size streams in bounded memory.
        handoff: queue.Queue[Any] = queue.Queue(maxsize=4)
        run: list[Any] = []
        cancelled = threading.Event()

        def emit(item: Any) -> None:
            if isinstance(item, SourceRecord):
                run.append(item)
                if len(run) >= _SNAPSHOT_RUN:
                    put(run[:])
                    run.clear()

        def put(item: Any) -> None:
            while not cancelled.is_set():
                try:
                    handoff.put(item, timeout=0.5)
                    return
                except queue.Full:
                    continue
            raise snap.SnapshotStopped()

        dispatcher = s.dispatcher(emit, lambda: {"phase": PHASE_SNAPSHOT})
        rows = SnapshotRows(s, captured, dispatcher, txid=work.txid, lsn=work.lsn, first_table=work.chunk.first_table,
                            last_table=work.chunk.last_table, first_in_table=work.chunk.first_chunk,
                            last_in_table=work.chunk.last_chunk)

        def read() -> None:
            try:
                with snapshot_connection(self.connect_args, work.snapshot_name) as conn:
                    copy_rows(conn, captured, work, rows.on_row, cancelled)
                    rows.finish()
                put(run[:])
                put(None)
            except snap.SnapshotStopped:
                pass
            except psycopg2.Error as exc:
                put(connection_error(f"snapshot of table {captured.collection} (chunk {work.chunk.chunk_index})", exc))
            except BaseException as exc:
                put(exc)

        prefix = position_key(0, (work.chunk.table_index << 32) | work.chunk.chunk_index)[:32]
        reader = threading.Thread(target=read, name="headwater-snapshot-chunk", daemon=True)
        reader.start()
        n = 0
        try:
            while True:
                item = handoff.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                for record in item:
                    yield PositionedRecord(prefix + f"{n:08X}", record)
                    n += 1
            if self.lease is not None:
                chunk_done(self.connect_args, self.lease, f"{work.chunk.table_index}:{work.chunk.chunk_index}")
        finally:
            cancelled.set()
            reader.join(timeout=30)


def _chunk_condition(work: SnapshotWork) -> tuple[sql.Composable | None, list[Any]]:
    if work.chunk.blocks is not None:
        lo, hi = work.chunk.blocks
        return sql.SQL("ctid >= %s::tid AND ctid < %s::tid"), [f"({lo},0)", f"({hi},0)"]
    if not work.chunk.key_columns or (work.chunk.lower is None and work.chunk.upper is None):
        return None, []
    key = sql.SQL("ROW({})").format(sql.SQL(", ").join(sql.Identifier(c) for c in work.chunk.key_columns))
    parts: list[sql.Composable] = []
    params: list[Any] = []
    for op, bound in ((">", work.chunk.lower), ("<=", work.chunk.upper)):
        if bound is not None:
            parts.append(sql.SQL("{} {} ROW({})").format(
                key, sql.SQL(op), sql.SQL(", ").join(sql.Placeholder() for _ in bound)))
            params += list(bound)
    return sql.SQL(" AND ").join(parts), params


@contextlib.contextmanager
def snapshot_connection(connect_args: dict[str, Any], snapshot_name: str) -> Iterator[Any]:
    """A connection inside the exported snapshot `snapshot_name` (a read-only REPEATABLE READ
    transaction), closed afterwards."""
    conn = psycopg2.connect(**connect_args)
    try:
        conn.autocommit = False
        with conn.cursor() as cur:
            cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
        yield conn
        conn.rollback()
    finally:
        conn.close()


def chunk_query(conn: Any, captured: CapturedTable, work: SnapshotWork) -> str:
    base = snap.select_statement(captured, {captured.collection: work.chunk.select} if work.chunk.select else {}, conn)
    condition, params = _chunk_condition(work)
    query: sql.Composable = base
    if condition is not None:
        # chunks exist only without a custom SELECT (one chunk then): the condition goes on the
        # table itself, where ctid (keyless tables) is a column and the key's index is usable
        assert work.chunk.select is None, "a table read with a custom SELECT is one chunk"
        query = sql.SQL("{} WHERE {}").format(base, condition)
    with conn.cursor() as cur:
        text = cur.mogrify(query, params) if params else query.as_string(conn)
    return text.decode() if isinstance(text, bytes) else text


def copy_rows(conn: Any, captured: CapturedTable, work: SnapshotWork, on_row: Any, stop: threading.Event) -> None:
    text = chunk_query(conn, captured, work)
    with conn.cursor() as cur:
        sink = snap._LineSink(lambda line: on_row(snap.parse_copy_line(line)), stop)
        cur.copy_expert(f"COPY ({text}) TO STDOUT", sink, size=1 << 16)



def chunk_bytes(chunk: Chunk) -> int:
    return chunk.counts()[0]


def change_messages(chunk: Chunk) -> int:
    """The chunk's change messages (rows, truncates, logical messages): what a batch's size
    counts. BEGIN and COMMIT are not counted: they were a sixth of the messages of 10-row
    transactions, and a batch limit in messages cut a backlog of them one batch short."""
    return chunk.counts()[1]

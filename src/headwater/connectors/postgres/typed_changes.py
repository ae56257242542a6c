"""Streamed row changes as typed rows (:mod:`headwater.engine.typed_rows`), for sinks that store
rows rather than events.

The streaming counterpart of :mod:`typed_snapshot`. A lake sink turns each change event back into
a row: Python builds the event (row dict, envelope, source block), the JSON converter writes it,
and the sink parses it again — most of a streamed row's cost. For a table with a typed layout
(every value column has an exact typed form, see :func:`typed_snapshot.typed_row_layout`),
inserts, plain updates and deletes skip all of that: a message is taken on its first bytes (type,
old-tuple marker), the tuples of a run of them are parsed together into Arrow text columns
(:mod:`tuple_columns`) and cast by pyarrow into the types the sink stores, with what the events
would say per row: op, ordering position, commit time, and the source block's ``lsn``, ``txId``
and ``sequence`` (the fields of PostgreSQL's source block that vary per row).

Only what an event would carry exactly goes this way. These stay events, built by the usual
path: an update with an old tuple (a primary-key change becomes a delete and a create;
``REPLICA IDENTITY FULL`` gives a ``before``), a row with an unchanged-TOAST value (the sink
keeps the stored value for it; found when the run is parsed, the row is built as its event
then), every change while ``xmin.fetch.interval.ms`` puts the slot's
xmin in the source block, every change with ``provide.transaction.metadata`` (each event carries
its ``transaction`` block, and the END record counts the events), and every change of a run
whose values pyarrow does not accept (``NaN``, ``infinity``, BC dates): that run is built as
events, row by row, with the failure handling of the event path. Truncates, transaction
boundaries, logical decoding messages and heartbeats are events as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.events import BuilderSettings, StreamPosition, event_failed, relation_oid
from headwater.connectors.postgres.schemas import CapturedTable, SchemaRegistry
from headwater.connectors.postgres.source_info import LAST_COMMIT_LSN, position_key, source_block
from headwater.connectors.postgres.tuple_columns import tuple_columns
from headwater.connectors.postgres.typed_snapshot import TypedRowLayout, typed_row_layout
from headwater.engine.feed import PositionedRecord
from headwater.engine.records import SourceRecord
from headwater.engine.typed_rows import (
    BATCH_ROWS,
    EVENT_MS,
    OP,
    POSITION,
    TS_US,
    TypedRowChanges,
    TypedRows,
    hex_digits,
    source_column,
    string_rows,
)
from headwater.model.envelope import OP_CREATE, OP_DELETE, OP_READ, OP_UPDATE

log = logging.getLogger(__name__)

# the source block's fields that vary per row, as typed rows carry them
SOURCE_LSN = source_column("lsn")
SOURCE_TX_ID = source_column("txId")

# where the tuple of a taken message starts: after the type byte, the relation OID and the 'N'
# (the new tuple of an insert or an update without an old one) or the 'K' / 'O' (a delete's old)
_TUPLE_AT = 6
_NEW, _KEY, _OLD = ord("N"), ord("K"), ord("O")
_INSERT, _UPDATE, _DELETE = ord("I"), ord("U"), ord("D")
_TAKEN_KINDS = frozenset((_INSERT, _UPDATE, _DELETE))
_BEGIN, _COMMIT = ord("B"), ord("C")
_SKIPPED = "skipped"  # PgTypedRowChanges._target: a message of skipped.operations
_UNDECIDED: Any = object()


def _transaction(pos: StreamPosition) -> Transaction | None:
    """The transaction fields of the rows :meth:`PgTypedRowChanges.gather` takes at `pos` on its
    own, or None where it takes none: outside a transaction, and while skipping what was
    delivered before a restart."""
    if pos.final_lsn is None or pos.skipping:
        return None
    return pos.final_lsn, pos.xid, pos.commit_ts_us, pos.last_commit_lsn


def stream_positions(majors: np.ndarray, minors: np.ndarray) -> pa.Array:
    """The positions of streamed messages' first records, ``source_info.position_key(major,
    minor)`` per row (uint64 arrays), as one byte matrix."""
    text = np.empty((len(majors), 40), dtype=np.uint8)
    text[:, :16] = hex_digits(majors, 16)
    text[:, 16:32] = hex_digits(minors, 16)
    text[:, 32:] = ord("0")
    return string_rows(text)


# what a row's source block and position take from its transaction: (the position's major: the
# commit LSN, or the LSN of a message outside a transaction; xid; commit time; last commit LSN).
# One tuple is shared by the rows of a transaction, so a row costs one tuple of four references.
Transaction = tuple[int, int | None, int, int | None]
# a taken row, as TypedRowRun.rows holds it (flat: four items a row): its message as pgoutput
# sent it, its LSN, its number in its transaction (the position's minor) and its transaction.
# Flat, of bytes, ints and the shared transaction tuples: a row adds no object the cycle
# collector tracks (a tuple per row made the collector walk them all, again and again)
Row = tuple[bytes, int, int, Transaction]
_STRIDE = 4


@dataclass
class TypedRowRun:
    """Gathered messages of one table version and one op, in arrival order, undecoded: their
    tuples are parsed together when the run is converted (:mod:`tuple_columns`)."""

    captured: CapturedTable
    layout: TypedRowLayout
    op: str
    rows: list[Any] = field(default_factory=list)  # Row after Row, flat

    def add(self, payload: bytes, major: int, minor: int, lsn: int, xid: int | None, commit_ts_us: int,
            last_commit_lsn: int | None) -> None:
        self.rows += (payload, lsn, minor, (major, xid, commit_ts_us, last_commit_lsn))

    def __len__(self) -> int:
        return len(self.rows) // _STRIDE

    def row(self, i: int) -> Row:
        return tuple(self.rows[i * _STRIDE:(i + 1) * _STRIDE])  # type: ignore[return-value]

    @property
    def key(self) -> tuple[int, str]:
        """The run's key among a task's runs: one per table version (its CapturedTable) and op."""
        return id(self.captured), self.op

    def detach(self) -> TypedRowRun:
        """A run of the rows gathered so far; this one is left empty (and keeps gathering)."""
        out = TypedRowRun(self.captured, self.layout, self.op, self.rows)
        self.rows = []
        return out

    def raw(self, i: int) -> list[Any]:
        """Row `i`'s tuple, decoded one by one (raises pgoutput.ProtocolError for a malformed one)."""
        msg = pg.decode(self.row(i)[0])
        return msg.old if self.op == OP_DELETE else msg.new

    def subset(self, rows: list[int]) -> TypedRowRun:
        """A run of these rows only."""
        return TypedRowRun(self.captured, self.layout, self.op, [item for i in rows for item in self.row(i)])

    def position(self, i: int, record: int = 0) -> str:
        _, _, minor, tx = self.row(i)
        return position_key(tx[0], minor, record)

    def to_batch(self) -> tuple[pa.RecordBatch, list[int]]:
        """The rows as typed rows (their columns and row columns), and the rows left out: those
        whose tuple is not plain text and NULL values (an unchanged-TOAST value, a malformed
        tuple), which go the event path. Raises pyarrow.ArrowInvalid (or ArrowNotImplementedError)
        for a value without an exact typed form."""
        rows = self.rows
        payloads, lsns, minors, txs = (rows[i::_STRIDE] for i in range(_STRIDE))
        parsed = tuple_columns(payloads, _TUPLE_AT, self.layout.raw_count)
        fast = parsed.fast
        arrays: list[pa.Array] = []
        names: list[str] = []
        for name, index, arrow in self.layout.fields:
            arrays.append(_typed(parsed.text(index), arrow))
            names.append(name)
        n = int(fast.sum())
        # the transaction fields: once per run of rows sharing a transaction tuple, then taken per row
        ids = np.fromiter(map(id, txs), dtype=np.uint64, count=len(txs))
        change = np.ones(len(ids), dtype=bool)
        change[1:] = ids[1:] != ids[:-1]
        first = np.flatnonzero(change)
        groups = [txs[i] for i in first.tolist()]
        tx_row = np.repeat(np.arange(len(first), dtype=np.int64), np.diff(np.append(first, len(txs))))[fast]
        majors, txids, commit_ts_us, last_commits = (list(map(itemgetter(i), groups)) for i in range(4))

        def per_row(values: list[Any]) -> pa.Array:  # lists: pa.array takes a tuple of ints ~100x slower
            return pa.array(values, pa.int64()).take(tx_row)

        lsn_array = pa.array(lsns, pa.int64())
        positions = stream_positions(np.array(majors, dtype=np.uint64)[tx_row],
                                     np.array(minors, dtype=np.uint64)[fast])
        arrays += [positions, per_row(commit_ts_us), pa.repeat(pa.scalar(self.op, pa.string()), n),
                   pa.repeat(pa.scalar(time.time_ns() // 1_000_000, pa.int64()), n),
                   lsn_array if n == len(lsns) else lsn_array.filter(pa.array(fast)),
                   per_row(txids), per_row(last_commits)]
        names += [POSITION, TS_US, OP, EVENT_MS, SOURCE_LSN, SOURCE_TX_ID, LAST_COMMIT_LSN]
        return pa.RecordBatch.from_arrays(arrays, names=names), parsed.slow_rows()


def _typed(text: pa.Array, arrow: pa.DataType) -> pa.Array:
    """pgoutput's text output (ISO dates in UTC: the replication session's settings) as `arrow`."""
    if pa.types.is_string(arrow):
        return text
    if pa.types.is_boolean(arrow):
        # imported here, like the array: importing pyarrow.compute or building an array at import
        # time loads pandas, slow to import and never needed on the driver's side of the source
        import pyarrow.compute as pc

        if (pc.sum(pc.is_in(text, pa.array(["t", "f"]))).as_py() or 0) != len(text) - text.null_count:
            raise pa.ArrowInvalid("a boolean that is neither 't' nor 'f'")
        return pc.equal(text, "t")
    return text.cast(arrow)


class PgTypedRowChanges(TypedRowChanges):
    """Executor side, one per task: takes the row changes of tables with a typed layout out of the
    message stream (:meth:`take`) and hands them on as typed rows (:meth:`ready`, :meth:`finish`),
    with the table's template record: the record of a NULL row (its key and value carry the
    schemas the sink learns the table from, its source block the fields that do not vary per
    row). A run pyarrow refuses comes back as events instead, as :class:`PositionedRecord` s."""

    def __init__(self, settings: BuilderSettings, batch_rows: int = BATCH_ROWS) -> None:
        self.settings = settings
        self.batch_rows = batch_rows
        self._layouts: dict[int, tuple[CapturedTable, TypedRowLayout | None, SourceRecord | None]] = {}
        self._runs: dict[tuple[int, str], TypedRowRun] = {}
        self._full: list[TypedRowRun] = []

    def take(self, captured: CapturedTable, payload: bytes, lsn: int, major: int, minor: int,
             pos: StreamPosition) -> bool:
        """Gather this I/U/D message of `captured` as a typed row (True), or leave it to the event
        path (False: nothing was changed, `pos` included). `major` and `minor` are the message's
        position (``source_info.position_key``).

        Decided from the message's first bytes; its tuple is parsed with the run's. A row whose
        tuple turns out to hold an unchanged-TOAST value is built as an event then."""
        if self.settings.provide_transaction_metadata or pos.xmin is not None:
            # metadata: each event carries its transaction block, and the END record counts the events
            return False
        target = self._target(captured, payload)
        if target is None:
            return False
        if not pos.data() or target is _SKIPPED:
            return True  # delivered before a restart, or skipped.operations
        self._add(target, payload, lsn, minor, (major, pos.xid, pos.commit_ts_us, pos.last_commit_lsn))
        return True

    def gather(self, messages: Sequence[tuple[bytes, int]], registry: SchemaRegistry, pos: StreamPosition,
               other: Callable[[bytes, int], None]) -> None:
        """Take the row changes among `messages` (relation definitions that do not change among
        them) as :meth:`take` would, in bulk; `other(payload, lsn)` handles every other message,
        and every message this cannot decide on its own, exactly as one by one: it advances `pos`
        and takes (:meth:`take`) or builds them. BEGIN and COMMIT, which only move `pos` on this
        path, are handled here.

        The decision :meth:`take` makes from a message's first bytes (type, relation, tuple
        marker) is made once per distinct first bytes; a row inside a transaction (not one
        delivered before a restart) then costs a tuple and an append. Its transaction's fields
        are one tuple shared by its rows, made again after each message `other` handles (only
        those change `pos`)."""
        if self.settings.provide_transaction_metadata or pos.xmin is not None:
            for payload, lsn in messages:
                other(payload, lsn)
            return
        heads: dict[bytes, TypedRowRun | None] = {}
        limit, at = self.batch_rows * _STRIDE, _TUPLE_AT
        tx, msgs = _transaction(pos), pos.tx_msgs
        for payload, lsn in messages:
            head = payload[:at]
            run = heads.get(head, _UNDECIDED)
            if run is _UNDECIDED:
                run = None
                if payload[0] in _TAKEN_KINDS:  # decided (and cached) for I/U/D only: other heads vary
                    captured = registry.get(relation_oid(payload))
                    target = self._target(captured, payload) if captured is not None else None
                    run = heads[head] = target if isinstance(target, TypedRowRun) else None
            if run is None or tx is None or len(payload) <= at:
                pos.tx_msgs = msgs
                kind = payload[0]
                # BEGIN and COMMIT only move `pos` here (ChangeEventBuilder.handle without
                # transaction metadata: what else it makes is a COMMIT's offset marker, which
                # decode_changes drops, and its own per-message state, set again before use)
                if kind == _BEGIN:
                    pos.begin(pg.decode(payload))
                elif kind == _COMMIT:
                    pos.commit(pg.decode(payload))
                else:
                    other(payload, lsn)
                    if kind not in _TAKEN_KINDS:
                        heads.clear()  # a relation message may have changed the registry: decide again
                tx, msgs = _transaction(pos), pos.tx_msgs
                continue
            msgs += 1  # pos.data(): the message number in the transaction
            rows = run.rows
            if not rows:
                self._runs[run.key] = self._runs.pop(run.key)  # runs are handed on in order of first row
            rows += (payload, lsn, msgs, tx)
            if len(rows) >= limit:
                self._full.append(run.detach())
        pos.tx_msgs = msgs

    def _target(self, captured: CapturedTable, payload: bytes) -> TypedRowRun | str | None:
        """Where a message of `captured` with these first bytes goes: the run it joins, _SKIPPED
        (skipped.operations: taken, and dropped), None (the event path)."""
        layout, _ = self._layout(captured)
        if layout is None or len(payload) <= _TUPLE_AT:
            return None
        kind, marker = payload[0], payload[_TUPLE_AT - 1]
        if kind == _INSERT and marker == _NEW:
            op = OP_CREATE
        elif kind == _UPDATE and marker == _NEW:  # no old tuple ('K' / 'O': a key change or FULL)
            op = OP_UPDATE
        elif kind == _DELETE and (marker == _KEY or marker == _OLD):
            op = OP_DELETE
        else:
            return None
        if op in self.settings.skipped_operations:
            return _SKIPPED
        key = (id(captured), op)
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = TypedRowRun(captured, layout, op)
        return run

    def _add(self, run: TypedRowRun, payload: bytes, lsn: int, minor: int, tx: Transaction) -> None:
        rows = run.rows
        if not rows:
            self._runs[run.key] = self._runs.pop(run.key)  # runs are handed on in order of first row
        rows += (payload, lsn, minor, tx)
        if len(run) >= self.batch_rows:
            self._full.append(run.detach())

    def ready(self) -> list[TypedRows | PositionedRecord]:
        """The runs that are full, converted."""
        full, self._full = self._full, []
        return [out for run in full for out in self._convert(run)]

    def finish(self) -> list[TypedRows | PositionedRecord]:
        """Everything gathered, converted."""
        self._full.extend(run.detach() for run in self._runs.values() if run.rows)
        self._runs.clear()
        return self.ready()

    def _layout(self, captured: CapturedTable) -> tuple[TypedRowLayout | None, SourceRecord | None]:
        entry = self._layouts.get(id(captured))
        if entry is None or entry[0] is not captured:
            layout = typed_row_layout(captured)
            template = self._template(captured) if layout is not None else None
            entry = (captured, layout if template is not None else None, template)
            self._layouts[id(captured)] = entry  # the entry keeps `captured`, so its id stays unique
        return entry[1], entry[2]

    def _template(self, captured: CapturedTable) -> SourceRecord | None:
        s = self.settings
        templates: list[SourceRecord] = []
        table_id = captured.table.id
        source = source_block(s.server, s.dbname, ts_us=0, snapshot="false", schema=table_id.schema or "",
                              table=table_id.table, tx_id=None, lsn=None, last_commit_lsn=None)
        dispatcher = s.dispatcher(lambda r: templates.append(r) if isinstance(r, SourceRecord) else None,
                                  lambda: {})
        try:
            row = captured.schema.row([None] * len(captured.raw_columns))
        except Exception:  # a table whose NULL row the converters refuse goes as events
            return None
        dispatcher.dispatch_change(captured.schema, captured.topic, OP_READ, None, row, source,
                                   collection=captured.collection)
        return templates[0] if len(templates) == 1 else None

    def _convert(self, run: TypedRowRun) -> Iterator[TypedRows | PositionedRecord]:
        _, template = self._layout(run.captured)
        assert template is not None
        try:
            rows, slow = run.to_batch()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            log.info("table %s: a streamed value has no exact typed form (%s); %d change(s) are built as events",
                     run.captured.collection, str(exc).splitlines()[0][:200], len(run))
            yield from self._events(run)
            return
        if rows.num_rows:
            yield TypedRows(template, run.op, rows)
        if slow:  # an unchanged-TOAST value (the sink keeps the stored one) or a tuple to decode alone
            yield from self._events(run.subset(slow))

    def _events(self, run: TypedRowRun) -> Iterator[PositionedRecord]:
        """The run's rows as the events the event path builds (the same positions, source blocks
        and failure handling)."""
        s, captured = self.settings, run.captured
        table_id = captured.table.id
        out: list[SourceRecord] = []
        dispatcher = s.dispatcher(lambda r: out.append(r) if isinstance(r, SourceRecord) else None, lambda: {})
        for i in range(len(run)):
            raw = run.raw(i)
            _, lsn, _, (_, xid, commit_ts_us, last_commit_lsn) = run.row(i)
            source = source_block(s.server, s.dbname, ts_us=commit_ts_us, snapshot="false",
                                  schema=table_id.schema or "", table=table_id.table, tx_id=xid, lsn=lsn,
                                  last_commit_lsn=last_commit_lsn)
            try:
                row = captured.schema.row(raw)
            except Exception as exc:  # event.processing.failure.handling.mode, as in the event path
                event_failed(s.failure_mode, captured, exc, [raw],
                             f"at LSN {pg.format_lsn(lsn)} (transaction {xid})")
                continue
            before, after = (row, None) if run.op == OP_DELETE else (None, row)
            dispatcher.dispatch_change(captured.schema, captured.topic, run.op, before, after, source,
                                       collection=captured.collection, tx_id=f"{xid}:{lsn}",
                                       tx_ts_ms=commit_ts_us // 1000)
            for n, record in enumerate(out):
                yield PositionedRecord(run.position(i, n), record)
            out.clear()

"""Debezium's "Initial Snapshot" notifications in distributed runs (Spark), where executors read
the snapshot's chunks.

The standalone runner sends them as it reads (engine/capture.py `_snapshot`,
engine/signals/snapshot_notifications.py): STARTED, IN_PROGRESS before each table,
TABLE_SCAN_COMPLETED with the table's row count, COMPLETED — each past the snapshot's one-record
look-ahead (the record held back to be marked `last`), as Debezium's are. So a notification
comes just before the last row read when it was sent: a table's TABLE_SCAN_COMPLETED, the
notifications of the empty tables after it and the next table's IN_PROGRESS come before that
table's last row; COMPLETED after the snapshot's last row. When nothing is held back (at the
start; after a partition's last row, which a partition change releases) a notification comes
before the next row read.

Here the driver replays that order over the plan (:class:`SnapshotNotificationPlan`) and builds
each notification record with the NotificationService when it plans the batch whose chunk
carries it; a chunk carrying some is wrapped in a :class:`NotifyingUnit`: notifications before
its first record (`head`), before its last (`before_last`), after its last (`tail`). Rows are
never held on the driver: a table's row count is the plan's (counted inside the snapshot), and
where the plan does not know it — a custom SELECT, a plan without counts — the chunk reading the
table (then its only one) counts what it reads.

Positions. :class:`NotifyingDecoder` decodes the inner unit with the connector's decoder,
holding one record back, and gives each notification a position between its neighbours': after
a record P, P + ``~`` + a fixed-width number (above P and its own extensions, below the next
record, which differs from P before P ends); before a chunk's first record F, F with its last
character one lower + ``~~`` + a number (below F, above any record below F and that record's
``~`` extensions). A snapshot with no row at all sends its notifications in one unit of their own
at the position of the offset streaming starts at.

Wrapped units are decoded as events (:meth:`NotifyingDecoder.decode_typed_rows` says None): a
notification must sit between two rows of the chunk.

A resumed snapshot (engine/snapshot_resume.py: a restarted query's checkpoint) is one the new
process reads from its progress on, as the standalone runner resumes: STARTED again, then the
tables still to read. Unlike the standalone runner, which counts the rows it reads after the
resume, a table resumed mid-way reports its rows at the new point (what Debezium, which takes it
again whole, reports): a restart's batches may cut it anywhere. Each snapshot point read in one
process sends STARTED once, whatever the batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.engine.capture import captured_collections
from headwater.engine.feed import PositionedRecord, WorkDecoder
from headwater.engine.records import SourceRecord
from headwater.engine.signals.run import initial_notifications
from headwater.engine.snapshot_plan import SnapshotChunk

if TYPE_CHECKING:
    from headwater.engine.connector import SourceConnector
    from headwater.engine.source import Offset, SnapshotPoint
    from headwater.engine.typed_rows import TypedRowChanges, TypedRows

log = logging.getLogger(__name__)

# a notification's number after the position it is anchored at (fixed width: they sort in order)
_SUFFIX = "~{:012X}"

# what the plan sends, in the standalone runner's order (NotificationService methods)
STARTED, IN_PROGRESS, TABLE_SCAN_COMPLETED, COMPLETED = "started", "in_progress", "table_scan_completed", "completed"


@dataclass(frozen=True)
class Note:
    """A notification to build: its kind, the table it is about, the table's row count as planned,
    and whether the unit carrying it counts the rows instead (`counted`: then it sits before the
    last row of that table's last chunk)."""

    kind: str
    collection: str | None = None
    rows: int = 0
    counted: bool = False


def _head_key(chunk: SnapshotChunk) -> tuple[Any, ...]:
    """Identifies the chunk reading a table's first row in plans of one snapshot point cut by
    progress (engine/snapshot_resume: `remaining`, `between`): only a table's first chunk, or the
    rest of the table a resume reads, starts at its lower bound."""
    return chunk.collection, chunk.lower, chunk.blocks


@dataclass
class NotifyingUnit:
    """A snapshot unit (`inner`; None: notifications only) with the notification records placed
    around its records. `counted`: the index in `before_last` of a TABLE_SCAN_COMPLETED whose
    `total_rows_scanned` is the number of rows this unit reads. `fallback`: where notifications
    go when the unit reads no record after all."""

    inner: Any
    head: list[SourceRecord] = field(default_factory=list)
    before_last: list[SourceRecord] = field(default_factory=list)
    tail: list[SourceRecord] = field(default_factory=list)
    counted: int | None = None
    fallback: str = ""


class SnapshotNotificationPlan:
    """Where the notifications of one snapshot go, over the chunks this process reads at one point
    (`chunks`: from where it starts, in order); built once per point, it places the notifications
    of each batch's chunks."""

    def __init__(self, connector: SourceConnector, point: SnapshotPoint, chunks: Sequence[SnapshotChunk]) -> None:
        self.point = point
        self._built: list[SourceRecord] = []
        self.service = initial_notifications(connector, self._built.extend)
        names = list(dict.fromkeys(c.collection for c in chunks))
        self.snapshot_tables = names
        self.captured_tables = captured_collections(connector, names)
        self.heads: dict[tuple[Any, ...], list[Note]] = {}
        self.before_last: dict[str, list[Note]] = {}
        self.tails: dict[str, list[Note]] = {}
        self.alone: list[Note] = []   # a snapshot without rows: every notification, in a unit of its own
        self._place(chunks)

    @property
    def enabled(self) -> bool:
        return self.service is not None

    def _place(self, chunks: Sequence[SnapshotChunk]) -> None:
        """The standalone runner's order, replayed: `held` is the table whose last row read is
        held back (notifications go before it), None when no row is (they wait for the next row)."""
        held: str | None = None
        waiting: list[Note] = []
        last_with_rows: str | None = None

        def send(note: Note) -> None:
            if held is not None:
                self.before_last.setdefault(held, []).append(note)
            else:
                waiting.append(note)

        def completed(collection: str, first: SnapshotChunk) -> Note:
            # where the plan has no count of what is read, the unit reading the table counts it:
            # such a table is one chunk (a custom SELECT's is never cut by a resume either), and
            # the notification sits in it (before its last row) unless a partition change came between
            unknown = first.table_rows is None or first.select is not None
            return Note(TABLE_SCAN_COMPLETED, collection, first.table_rows or 0, unknown and held == collection)

        send(Note(STARTED))
        current: SnapshotChunk | None = None  # the first chunk of the table being read
        partition: str | None = None
        for chunk in chunks:
            if chunk.partition != partition:
                held = None  # the standalone runner releases a partition's last record before going on
                partition = chunk.partition
            if current is not None and chunk.collection == current.collection:
                continue
            if current is not None:
                send(completed(current.collection, current))
            current = chunk
            send(Note(IN_PROGRESS, chunk.collection))
            if chunk.table_rows != 0:  # its first row is read now (a table not counted is taken to have rows)
                if waiting:
                    self.heads[_head_key(chunk)] = waiting
                    waiting = []
                held = last_with_rows = chunk.collection
        if current is not None:
            send(completed(current.collection, current))
        held = None  # the snapshot's last record is released, then COMPLETED
        send(Note(COMPLETED))
        if last_with_rows is not None:
            self.tails[last_with_rows] = waiting
        else:
            self.alone = waiting

    # -- a batch's units -------------------------------------------------------------------------

    def _build(self, notes: Sequence[Note]) -> tuple[list[SourceRecord], int | None]:
        """The records of `notes` (none when only the log channel is on), and the index of the
        one whose row count the unit counts."""
        assert self.service is not None
        offset: Offset = dict(self.point.offset)
        out: list[SourceRecord] = []
        counted: int | None = None
        for note in notes:
            self._built.clear()
            if note.kind == STARTED:
                self.service.initial_started(offset)
            elif note.kind == IN_PROGRESS:
                self.service.initial_table_in_progress(note.collection, self.snapshot_tables, offset)
            elif note.kind == TABLE_SCAN_COMPLETED:
                self.service.initial_table_completed(note.collection, note.rows, self.captured_tables, offset)
            else:
                self.service.initial_completed(offset)
            if note.counted and self._built:
                counted = len(out)
            out += self._built
        self._built.clear()
        return out, counted

    def wrap(self, chunks: Sequence[SnapshotChunk], units: Sequence[Any], ends_snapshot: bool,
             fallback: Callable[[], str]) -> list[Any]:
        """A batch's units (one per chunk, in order), those carrying notifications wrapped;
        `ends_snapshot`: the batch is the snapshot's last (a snapshot without rows sends
        everything then). `fallback()`: the position of the offset streaming starts at, or one
        before the batch's records (for a unit that reads no record after all)."""
        if self.service is None:
            return list(units)
        out: list[Any] = []
        where: str | None = None
        for chunk, unit in zip(chunks, units, strict=True):
            head = self.heads.get(_head_key(chunk), [])
            last = chunk.last_chunk
            before_last = self.before_last.get(chunk.collection, []) if last else []
            tail = self.tails.get(chunk.collection, []) if last else []
            if not (head or before_last or tail):
                out.append(unit)
                continue
            head_records, _ = self._build(head)
            before_records, counted = self._build(before_last)
            tail_records, _ = self._build(tail)
            if not (head_records or before_records or tail_records):  # the log channel only
                out.append(unit)
                continue
            if where is None:
                where = fallback()
            out.append(NotifyingUnit(unit, head_records, before_records, tail_records, counted, where))
        if ends_snapshot and self.alone:
            records, _ = self._build(self.alone)
            if records:
                out.append(NotifyingUnit(None, tail=records, fallback=where if where is not None else fallback()))
        return out


# -- executors -------------------------------------------------------------------------------------


def _before(position: str) -> str:
    """An anchor below `position` and above every position below it (and their `~` extensions):
    its last character one lower, then `~` (the suffix adds the second)."""
    return position[:-1] + chr(max(ord(position[-1]) - 1, 0)) + "~" if position else ""


def _with_count(record: SourceRecord, rows: int) -> SourceRecord:
    value = dict(record.value)
    value["additional_data"] = {**value["additional_data"], "total_rows_scanned": str(rows)}
    return SourceRecord(record.topic, record.key_schema, record.key, record.value_schema, value, record.offset,
                        record.headers, record.op, record.table, record.context_headers)


class NotifyingDecoder(WorkDecoder):
    """Decodes :class:`NotifyingUnit` items: the inner unit's records (by `inner`), with the
    notifications placed among them; any other item as `inner` does."""

    def __init__(self, inner: WorkDecoder) -> None:
        self.inner = inner

    def decode(self, item: Any) -> Iterator[PositionedRecord]:
        if not isinstance(item, NotifyingUnit):
            return self.inner.decode(item)
        return self._place(item, self.inner.decode(item.inner) if item.inner is not None else iter(()))

    def decode_typed_rows(self, item: Any) -> list[TypedRows] | None:
        if isinstance(item, NotifyingUnit):
            return None  # the notifications go between its records: events
        return self.inner.decode_typed_rows(item)

    def typed_row_changes(self) -> TypedRowChanges | None:
        return self.inner.typed_row_changes()

    def decode_changes(self, item: Any, changes: TypedRowChanges) -> Iterator[PositionedRecord]:
        if not isinstance(item, NotifyingUnit):
            return self.inner.decode_changes(item, changes)
        records = self.inner.decode_changes(item.inner, changes) if item.inner is not None else iter(())
        return self._place(item, records)

    @staticmethod
    def _place(unit: NotifyingUnit, records: Iterator[PositionedRecord]) -> Iterator[PositionedRecord]:
        number = 0

        def placed(anchor: str, notes: Sequence[SourceRecord]) -> Iterator[PositionedRecord]:
            nonlocal number
            for note in notes:
                yield PositionedRecord(anchor + _SUFFIX.format(number), note)
                number += 1

        previous: PositionedRecord | None = None
        held: PositionedRecord | None = None
        rows = 0
        for positioned in records:
            if held is None:
                yield from placed(_before(positioned.position), unit.head)
            else:
                yield held
            previous, held = held, positioned
            if positioned.record.op == "r":
                rows += 1
        before_last = list(unit.before_last)
        if unit.counted is not None:
            before_last[unit.counted] = _with_count(before_last[unit.counted], rows)
        if held is None:
            if unit.inner is not None:
                # a chunk the plan expected rows in read none (a custom SELECT's table counted):
                # its notifications are sent where the driver could place them
                log.warning("a snapshot chunk carrying notifications read no record: they are placed at %r",
                            unit.fallback)
            yield from placed(unit.fallback, [*unit.head, *before_last, *unit.tail])
            return
        yield from placed(previous.position if previous is not None else _before(held.position), before_last)
        yield held
        yield from placed(held.position, unit.tail)

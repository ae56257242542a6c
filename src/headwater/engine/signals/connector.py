"""What a connector implements for signals and snapshots on demand (the database's part).

The engine runs Debezium's algorithms (headwater.engine.signals.incremental and .stage); a
connector answers the questions only the database can: which captured tables there are, the key
a table is chunked by, its largest key, one chunk of rows, how a chunk's window is marked in the
stream, and how rows become Debezium's read events. :meth:`CaptureSource.incremental_source`
returns one of these (None: the connector has no incremental snapshots).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.engine.records import SourceRecord
from headwater.engine.source import SnapshotPoint

Offset = dict[str, Any]


@dataclass(frozen=True)
class ChunkRow:
    """One row of an incremental-snapshot chunk: `message_key` is the record key the row's
    event gets (what streamed events are matched on, `message.key.columns` applied), `chunk_key`
    the values of the columns the table is chunked by (its primary key, or the signal's
    `surrogate-key`), in their order; `row` is the connector's own (turned into a read event by
    :meth:`IncrementalSource.read_events`)."""

    message_key: Any
    chunk_key: tuple[Any, ...]
    row: Any


class SnapshotTableError(Exception):
    """A table an incremental snapshot cannot read: `status` is Debezium's
    TableScanCompletionStatus for the notification (UNKNOWN_SCHEMA, NO_PRIMARY_KEY,
    SQL_EXCEPTION), the message says why."""

    def __init__(self, message: str, status: str) -> None:
        super().__init__(message)
        self.status = status


class WindowMarks(ABC):
    """How a chunk's window shows in the stream (Debezium's watermarking).

    The signal-table strategies (`insert_insert`, `insert_delete`) write rows to the signal table
    that come back through the change stream; a read-only connector (PostgreSQL's `read.only`)
    compares streamed transactions with database snapshots instead."""

    @abstractmethod
    def open(self, chunk_id: str) -> None:
        """Before the chunk is read (insert the open row; take the low watermark)."""

    @abstractmethod
    def close(self, chunk_id: str) -> None:
        """After the chunk is read (insert the close row, or delete the open row; take the high
        watermark)."""

    def classify(self, record: SourceRecord, chunk_id: str | None) -> str | None:
        """'open' or 'close' when `record` (a streamed record, before it is delivered) opens or
        closes the window of `chunk_id`; None otherwise. The signal-table strategies are told by
        the engine (it reads the signal table's records itself), so they return None."""
        return None


class IncrementalSource(ABC):
    """A connector's side of incremental and blocking snapshots. Called on the streaming thread
    (or the signal thread, never both at once); it keeps its own connection for queries and
    watermark writes (never the streaming one)."""

    @abstractmethod
    def captured_tables(self) -> list[str]:
        """Data-collection ids (as `signal.data.collection` and the signals name them: PostgreSQL
        `schema.table`, SQL Server `db.schema.table`) of every table the connector captures now,
        the signal table excluded. `data-collections` regexes are matched against these."""

    def collection_id(self, name: str) -> str:
        """The id records of table `name` carry (`SourceRecord.table`), for a name as a signal
        writes it (quoted parts, another case where the database ignores case); `name` itself when
        it names no captured table."""
        return name

    @abstractmethod
    def chunk_columns(self, collection: str, surrogate_key: str | None) -> list[str]:
        """The columns `collection` is chunked by: its primary key (or `message.key.columns`
        where Debezium uses it), or `surrogate_key`. SnapshotTableError when the table is gone or
        has no key."""

    @abstractmethod
    def maximum_key(self, collection: str, columns: Sequence[str], condition: str | None) -> tuple[Any, ...] | None:
        """The largest chunk key of the rows `condition` (an SQL condition, the signal's
        `additional-conditions` filter) selects; None for no rows. SnapshotTableError on failure."""

    @abstractmethod
    def read_chunk(self, collection: str, columns: Sequence[str], after: tuple[Any, ...] | None,
                   maximum: tuple[Any, ...], limit: int, condition: str | None) -> list[ChunkRow]:
        """At most `limit` rows with chunk keys greater than `after` (None: from the start) and
        not greater than `maximum`, in chunk-key order, with `condition`. SnapshotTableError on
        failure."""

    @abstractmethod
    def read_events(self, collection: str, rows: Sequence[ChunkRow], offset: Offset) -> list[SourceRecord]:
        """Debezium's read events (`op` r, `source.snapshot` incremental) for `rows`, emitted
        when their window closes at the stream position `offset` (their source block is that
        position's, as Debezium's offset context is at that moment); each record's offset is
        `offset` (the engine adds the snapshot's progress)."""

    def window_marks(self, strategy: str) -> WindowMarks:
        """The watermarks for `incremental.snapshot.watermarking.strategy` (`insert_insert`,
        `insert_delete`): rows in the signal table, by default. A connector with a read-only
        variant returns its own."""
        from headwater.engine.signals.watermarks import SignalTableMarks

        return SignalTableMarks(self, strategy)

    @abstractmethod
    def insert_signal(self, signal_id: str, signal_type: str, data: str | None) -> None:
        """Insert a row (id, type, data) into the signal table and commit: watermarks, and what
        `headwater signal --channel source` sends. A ConnectorError when there is no signal table."""

    @abstractmethod
    def delete_signal(self, signal_id: str) -> None:
        """Delete the signal table's row `signal_id` and commit (the `insert_delete` strategy)."""

    @abstractmethod
    def open_blocking_snapshot(self, position: Offset) -> SnapshotPoint:
        """A new consistent point for a blocking snapshot, read with the CaptureSource's
        `snapshot_tables`/`chunk_dialect`/`read_chunk` and ended with `close_snapshot` (PostgreSQL:
        a SERIALIZABLE READ ONLY DEFERRABLE transaction, never a slot's exported snapshot).
        `position`: the stream's offset when it stopped for the snapshot (Debezium's records carry
        its position in their source block); the records are stored with it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Close the connection."""

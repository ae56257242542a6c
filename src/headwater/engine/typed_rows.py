"""Typed rows: a table's rows as typed Arrow columns, the contract between a connector's decoder
and the lake sinks.

A lake sink stores rows, not events. Where a connector can read a table's values exactly in the
types the sink stores, its decoder (:class:`headwater.engine.feed.WorkDecoder`) hands over
:class:`TypedRows` instead of one event per row: no event is built, written as JSON and parsed
again by the sink. The Spark source carries each as one record — the topic, key and value of
its template, the rows as an Arrow IPC stream (:func:`to_ipc`) in its ``typed_rows`` column.

A batch of typed rows holds the table's value columns (named as the fields of the value's
``after``; no field name starts with :data:`RESERVED_PREFIX`) and these row columns:

- :data:`POSITION` (string): the row's position, the one its event would have;
- :data:`OP` (string): the row's op (``r``, ``c``, ``u``, ``d``; a delete's columns are its
  ``before``);
- :data:`TS_US` (int64): the source block's ``ts_us`` (``ts_ms`` and ``ts_ns`` follow from it): a
  snapshot row's read time, a change's commit time;
- :data:`EVENT_MS` (int64, optional): the envelope's ``ts_ms`` (when the row was converted);
  without it, ``TS_US`` in milliseconds;
- ``SOURCE_PREFIX + field`` (optional, see :func:`source_column`): the source block's ``field``
  for this row, for the fields whose value varies from row to row. The connector decides which
  (PostgreSQL: ``lsn``, ``txId`` and ``sequence`` of changes, :data:`MARKER` of snapshot rows);
  every other field of the source block is the template's. The time fields are never among them:
  they come from ``TS_US``. A batch that carries such a column has no NULL in it (a sink reads
  NULL as "not carried": the template's value).

The template is the record of the table's event for a row of NULLs: its key and value carry the
table's schemas (the sink learns the table from them), its source block the fields the rows do
not carry.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from headwater.engine.feed import PositionedRecord
    from headwater.engine.records import SourceRecord

# the row columns' names start with this; a table whose column names do too has no typed rows
RESERVED_PREFIX = "__hw_"
POSITION = "__hw_position"
OP = "__hw_op"
TS_US = "__hw_ts_us"
EVENT_MS = "__hw_event_ms"
SOURCE_PREFIX = "__hw_source_"
# the source block's `snapshot` per snapshot row (first, true, last, …): a per-row source field
MARKER = SOURCE_PREFIX + "snapshot"
# the source block's time fields: derived from TS_US, never carried per row
TIME_FIELDS = ("ts_ms", "ts_us", "ts_ns")

# rows per batch of typed rows (one record, one Arrow IPC stream each)
BATCH_ROWS = 65_536


def source_column(field: str) -> str:
    """The row column carrying the source block's `field` per row."""
    return SOURCE_PREFIX + field


@dataclass(frozen=True)
class TypedRows:
    """A batch of typed rows of one table (at least one row), and the table's template record."""

    template: SourceRecord
    op: str  # the op of the rows' records: r for snapshot rows, else the op of every row
    rows: pa.RecordBatch

    @property
    def position(self) -> str:
        """The first row's position: the record's."""
        return str(self.rows.column(POSITION)[0].as_py())

    @property
    def ts_ms(self) -> int:
        """The first row's source time in milliseconds: the record's."""
        return int(self.rows.column(TS_US)[0].as_py()) // 1000


class TypedRowChanges(ABC):
    """Executor side, one per task: gathers the row changes a connector's decoder takes out of its
    stream (``WorkDecoder.decode_changes``) and hands them on as typed rows. Rows it cannot type
    after all come back as events, in order with the typed rows around them."""

    @abstractmethod
    def ready(self) -> list[TypedRows | PositionedRecord]:
        """What is ready to hand on (full batches)."""

    @abstractmethod
    def finish(self) -> list[TypedRows | PositionedRecord]:
        """Everything gathered."""


def hex_digits(numbers: np.ndarray, digits: int) -> np.ndarray:
    """Unsigned `numbers` as `digits` upper-case hex digits each: a (len, digits) byte matrix."""
    shifts = np.arange(4 * (digits - 1), -4, -4, dtype=np.uint64)  # the most significant digit first
    text = ((numbers.astype(np.uint64)[:, None] >> shifts) & np.uint64(0xF)).astype(np.uint8)
    # '0'..'9', then 'A'..'F': arithmetic (a table lookup per digit cost twice as much)
    text += ord("0")
    text += (text > ord("9")) * np.uint8(ord("A") - ord("9") - 1)
    return text


def string_rows(text: np.ndarray) -> pa.Array:
    """The rows of a byte matrix as a string array."""
    count, width = text.shape
    offsets = np.arange(0, width * (count + 1), width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(text)])


def numbered_positions(prefix: str, start: int, count: int) -> pa.Array:
    """``prefix`` + the numbers ``start .. start + count`` as 8 upper-case hex digits each (the
    event path's ``f"{prefix}{n:08X}"``), built as one byte matrix: a Python string per row cost
    more than parsing the row."""
    head = prefix.encode("ascii")
    numbers = np.arange(start, start + count, dtype=np.uint64)
    if count and int(numbers[-1]) > 0xFFFFFFFF:
        raise ValueError(f"row number {int(numbers[-1])} does not fit 8 hex digits")
    text = np.empty((count, len(head) + 8), dtype=np.uint8)
    text[:, :len(head)] = np.frombuffer(head, dtype=np.uint8)
    text[:, len(head):] = hex_digits(numbers, 8)
    return string_rows(text)


# (first row of the table, last row of the table, first table, last table) -> source.snapshot
MarkerFn = Callable[[bool, bool, bool, bool], str]


def snapshot_row_columns(batch: pa.RecordBatch, *, prefix: str, start: int, total: int, first_in_table: bool,
                         last_in_table: bool, first_table: bool, last_table: bool, ts_us: int,
                         marker: MarkerFn) -> pa.RecordBatch:
    """Rows ``start .. start + len(batch)`` of a snapshot chunk of ``total`` rows with their row
    columns: the position (``prefix`` + the row's number in the chunk), op ``r``, the read time
    and the ``source.snapshot`` marker (:data:`MARKER`)."""
    n = batch.num_rows
    positions = numbered_positions(prefix, start, n)
    # "true" but on the table's first and last rows; arrays of one value repeated are built in C
    # (a Python list per column cost more than the rest of this function)
    head = [marker(first_in_table, total == 1 and last_in_table, first_table, last_table)] \
        if n and start == 0 else []
    tail = [marker(False, last_in_table, first_table, last_table)] \
        if n > len(head) and start + n == total and total > 1 else []
    markers = pa.concat_arrays([pa.array(head, pa.string()),
                                pa.repeat(pa.scalar("true", pa.string()), n - len(head) - len(tail)),
                                pa.array(tail, pa.string())])
    arrays = [*batch.columns, positions, pa.repeat(pa.scalar("r", pa.string()), n),
              pa.repeat(pa.scalar(ts_us, pa.int64()), n), markers]
    names = [*batch.schema.names, POSITION, OP, TS_US, MARKER]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def snapshot_chunk_rows(template: SourceRecord, table: pa.Table, *, prefix: str, first_in_table: bool,
                        last_in_table: bool, first_table: bool, last_table: bool,
                        marker: MarkerFn) -> list[TypedRows]:
    """A snapshot chunk's rows (the table's value columns) as typed rows, :data:`BATCH_ROWS` a
    batch, each batch with its own read time (:func:`snapshot_row_columns`). Row n of the chunk is
    at ``prefix`` + n as 8 hex digits, as in the event path."""
    out: list[TypedRows] = []
    total, start = table.num_rows, 0
    for batch in table.combine_chunks().to_batches(max_chunksize=BATCH_ROWS):
        if batch.num_rows:
            rows = snapshot_row_columns(batch, prefix=prefix, start=start, total=total,
                                        first_in_table=first_in_table, last_in_table=last_in_table,
                                        first_table=first_table, last_table=last_table,
                                        ts_us=time.time_ns() // 1000, marker=marker)
            out.append(TypedRows(template, "r", rows))
        start += batch.num_rows
    return out


def to_ipc(batch: pa.RecordBatch) -> bytes:
    """An Arrow IPC stream of the batch, LZ4-compressed: far fewer bytes for Spark to copy and
    cache, for little CPU (readers decompress transparently)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def read_ipc(blob: bytes) -> Iterator[pa.RecordBatch]:
    """The batches of one stream of :func:`to_ipc`."""
    yield from pa.ipc.open_stream(blob)


def from_ipc(records: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The typed rows in the first column of `records` (streams of :func:`to_ipc`; NULLs are
    skipped), batch by batch."""
    for record in records:
        for blob in record.column(0).to_pylist():
            if blob is not None:
                yield from read_ipc(blob)


# the first bytes of a stream of to_ipc that hold its schema, for a table of any realistic width
# (an IPC stream starts with its schema message; the rows follow)
IPC_SCHEMA_BYTES = 1 << 16


def ipc_schema(head: bytes) -> pa.Schema | None:
    """The schema of typed rows from the first bytes of their stream (at least
    :data:`IPC_SCHEMA_BYTES`, or all of it), or None when these bytes do not hold all of it."""
    try:
        return pa.ipc.open_stream(pa.BufferReader(head)).schema
    except (pa.ArrowException, OSError):
        return None

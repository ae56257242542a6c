"""The TupleData of many pgoutput messages, parsed at once into Arrow text columns.

:func:`pgoutput.decode_tuple` walks one tuple value by value in Python, most of a streamed row's
cost on the typed path (bench/README.md). Here the tuples of a whole run of messages
(one table, one op) are walked column by column with numpy — one vectorised step per column over
all rows — and each column's values are gathered into one Arrow string array, with no Python
object per value.

Only the common shape goes this way: every value text (``t``) or NULL (``n``), the column count
the relation has, and the tuple ending where the message ends. A row with anything else (an
unchanged-TOAST ``u``, a binary ``b``, a malformed or truncated tuple) is reported back by index
for the caller to decode one by one with :func:`pgoutput.decode`, which keeps its exact handling
and errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

_TEXT = ord("t")
_NULL = ord("n")
# bytes appended to the joined messages so that reading a value's 5-byte header at a message's
# end never leaves the buffer (those rows fail the bounds checks and are reported as slow)
_PAD = bytes(8)
# a column's values are gathered in pieces of about this many bytes: the gather's index costs 8
# bytes per value byte, so this bounds its memory whatever the values' size
_GATHER_BYTES = 4 << 20
_MAX_STRING_BYTES = (1 << 31) - 1


@dataclass
class TupleColumns:
    """The parsed tuples: `fast` marks the rows parsed here; the others are for the caller."""

    buf: np.ndarray  # the messages joined (and padded)
    fast: np.ndarray  # bool per row
    starts: np.ndarray  # (columns, rows) byte offset of each value in `buf`
    sizes: np.ndarray  # (columns, rows) value length in bytes (0 for NULL)
    nulls: np.ndarray  # (columns, rows) bool

    def slow_rows(self) -> list[int]:
        return np.flatnonzero(~self.fast).tolist()

    def text(self, column: int) -> pa.Array:
        """Column `column` of the fast rows as a UTF-8 validated ``pa.string()`` array; raises
        pyarrow.ArrowInvalid for invalid UTF-8 or more than 2 GiB of text."""
        fast = self.fast
        starts = self.starts[column][fast]
        sizes = self.sizes[column][fast]
        nulls = self.nulls[column][fast]
        n = len(sizes)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        if total > _MAX_STRING_BYTES:
            raise pa.ArrowInvalid(f"more than 2 GiB of text in one column of {n} rows")
        data = np.empty(total, dtype=np.uint8)
        row = 0
        while row < n:  # pieces of ~_GATHER_BYTES (at least one row each)
            end = max(row + 1, int(np.searchsorted(offsets, offsets[row] + _GATHER_BYTES, side="right")) - 1)
            end = min(end, n)
            lo, hi = int(offsets[row]), int(offsets[end])
            if hi > lo:
                # byte k of the piece comes from buf[start of its value + (k - offset of its value)]
                index = np.repeat(starts[row:end] - offsets[row:end], sizes[row:end])
                index += np.arange(lo, hi, dtype=np.int64)
                data[lo:hi] = self.buf[index]
            row = end
        validity = None
        if nulls.any():
            validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
        array = pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                       pa.py_buffer(data)])
        array.validate(full=True)  # UTF-8, as bytes.decode("utf-8") checks on the one-by-one path
        return array


def tuple_columns(payloads: Sequence[bytes], at: int, columns: int) -> TupleColumns:
    """Parse the TupleData at byte `at` of every message in `payloads`, each expected to have
    `columns` columns and to end with its tuple."""
    n = len(payloads)
    lengths = np.fromiter(map(len, payloads), dtype=np.int64, count=n)
    ends = np.cumsum(lengths)
    joined = b"".join(payloads)
    buf = np.frombuffer(joined + _PAD, dtype=np.uint8)
    last = len(joined)  # reads are clamped here: buf[last:last + 8] is padding

    p = ends - lengths + at
    fast = p + 2 <= ends
    q = np.minimum(p, last)
    count = (buf[q].astype(np.int64) << 8) | buf[q + 1]
    fast &= count == columns
    p = p + 2
    starts = np.empty((columns, n), dtype=np.int64)
    sizes = np.empty((columns, n), dtype=np.int64)
    nulls = np.empty((columns, n), dtype=bool)
    for column in range(columns):
        fast &= p < ends
        q = np.minimum(p, last)
        kind = buf[q]
        text = kind == _TEXT
        null = kind == _NULL
        fast &= text | null
        size = ((buf[q + 1].astype(np.int64) << 24) | (buf[q + 2].astype(np.int64) << 16)
                | (buf[q + 3].astype(np.int64) << 8) | buf[q + 4])
        size = np.where(text, size, 0)
        starts[column] = q + 5
        sizes[column] = size
        nulls[column] = null
        p = np.where(text, p + 5 + size, p + 1)
    fast &= p == ends
    # values of slow rows may point anywhere: they are never gathered (`text` takes fast rows only)
    return TupleColumns(buf, fast, starts, sizes, nulls)

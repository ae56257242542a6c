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
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

_TEXT = ord("t")
_NULL = ord("n")
# bytes appended to the joined messages so that reading 8 bytes (a value's 5-byte header and
# more) at a message's end never leaves the buffer (those rows fail the bounds checks and are
# reported as slow)
_PAD = bytes(8)
_MAX_STRING_BYTES = (1 << 31) - 1


@dataclass
class TupleColumns:
    """The parsed tuples: `fast` marks the rows parsed here; the others are for the caller."""

    buf: np.ndarray  # the messages joined (and padded)
    fast: np.ndarray  # bool per row
    starts: np.ndarray  # (columns, rows) byte offset of each value in `buf` (a NULL: where its 'n' ends)
    sizes: np.ndarray  # (columns, rows) value length in bytes (0 for NULL)
    nulls: np.ndarray  # (columns, rows) bool
    _values: pa.Array | None = field(default=None, repr=False)

    def slow_rows(self) -> list[int]:
        return np.flatnonzero(~self.fast).tolist()

    def _all_values(self) -> pa.Array:
        """Every value of the fast rows, row by row, as elements 0, 2, 4, … of one binary array over
        `buf`, not copied: the values lie in `buf` in that order, and the odd elements are what
        lies between them (value headers, message headers)."""
        if self._values is None:
            fast = self.fast
            starts = self.starts[:, fast].T.ravel()
            bounds = np.empty(2 * len(starts), dtype=np.int64)
            bounds[0::2] = starts
            bounds[1::2] = starts + self.sizes[:, fast].T.ravel()
            if not len(bounds):
                bounds = np.zeros(1, dtype=np.int64)
            small = len(self.buf) <= _MAX_STRING_BYTES
            self._values = pa.Array.from_buffers(
                pa.binary() if small else pa.large_binary(), len(bounds) - 1,
                [None, pa.py_buffer(bounds.astype(np.int32) if small else bounds), pa.py_buffer(self.buf)])
        return self._values

    def text(self, column: int) -> pa.Array:
        """Column `column` of the fast rows as a UTF-8 validated ``pa.string()`` array; raises
        pyarrow.ArrowInvalid for invalid UTF-8 or more than 2 GiB of text."""
        fast = self.fast
        nulls = self.nulls[column][fast]
        n = len(nulls)
        if int(self.sizes[column][fast].sum()) > _MAX_STRING_BYTES:
            raise pa.ArrowInvalid(f"more than 2 GiB of text in one column of {n} rows")
        # the values are gathered by Arrow's take (a copy per value): an index per byte (numpy)
        # cost more than the rest of the conversion
        picked = self._all_values().take(
            pa.array(np.arange(0, 2 * n * len(self.starts), 2 * len(self.starts), dtype=np.int64) + 2 * column))
        if picked.type != pa.binary():
            picked = picked.cast(pa.binary())
        validity = None
        if nulls.any():
            validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
        _, offsets, data = picked.buffers()
        array = pa.Array.from_buffers(pa.string(), n, [validity, offsets, data], offset=picked.offset)
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

    # the 8 bytes from every offset as one big-endian integer (a strided view, no copy): a value's
    # kind byte and 4-byte length are one gather per column instead of five
    words = np.ndarray(shape=(len(buf) - 7,), dtype=">u8", buffer=buf, strides=(1,))
    p = ends - lengths + at
    fast = p + 2 <= ends
    q = np.minimum(p, last)
    count = (words[q] >> np.uint64(48)).astype(np.int64)
    fast &= count == columns
    p = p + 2
    starts = np.empty((columns, n), dtype=np.int64)
    sizes = np.empty((columns, n), dtype=np.int64)
    nulls = np.empty((columns, n), dtype=bool)
    for column in range(columns):
        fast &= p < ends
        q = np.minimum(p, last)
        word = words[q].astype(np.uint64)
        kind = word >> np.uint64(56)
        text = kind == _TEXT
        null = kind == _NULL
        fast &= text | null
        size = np.where(text, ((word >> np.uint64(24)) & np.uint64(0xFFFFFFFF)).astype(np.int64), 0)
        # a NULL's "start" is where its 'n' ends: the values of a row stay in order in `buf`
        starts[column] = np.where(text, q + 5, q + 1)
        sizes[column] = size
        nulls[column] = null
        p = np.where(text, p + 5 + size, p + 1)
    fast &= p == ends
    # values of slow rows may point anywhere: they are never gathered (`text` takes fast rows only)
    return TupleColumns(buf, fast, starts, sizes, nulls)

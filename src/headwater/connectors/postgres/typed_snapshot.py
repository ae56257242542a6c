"""Snapshot chunks as typed rows (:mod:`headwater.engine.typed_rows`), for sinks that store rows
rather than events.

A lake sink turns each snapshot event back into a typed row: Python builds the event, the JSON
converter writes the whole Connect schema with every row's payload, and the sink parses it
again. For a table whose every column has a plain, lossless typed form this module skips all of
that: the chunk is read with ``COPY … TO STDOUT`` (text format) and parsed by pyarrow's
vectorized CSV reader straight into the types the sink stores (int16/32/64, bool, string,
decimal128(p, s), date32, timestamp[us] and timestamp[us, UTC]), the values the events would
carry, converted.

Only the values of the events are replaced, and only where that is exact. A table has typed rows
when every value column has a type :func:`_plain_type` maps, with the Connect schema Debezium gives it
in the connector's configuration (``decimal.handling.mode=precise`` with a declared precision,
``time.precision.mode`` giving microseconds, …), no column mapper, and no schema default
(Kafka's JSON converter writes a field's default for NULL). Anything else — and any chunk whose
text pyarrow does not accept (``NaN``, ``infinity``, BC dates, years past 9999) — is read as
events, as before.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv

from headwater.connectors.postgres.schemas import CapturedTable
from headwater.engine.typed_rows import RESERVED_PREFIX
from headwater.model.schema import NO_DEFAULT, Schema

DECIMAL = "org.apache.kafka.connect.data.Decimal"
_DATES = frozenset({"org.apache.kafka.connect.data.Date", "io.debezium.time.Date"})
_STRINGS = {"text": None, "varchar": None, "bpchar": None, "json": "io.debezium.data.Json",
            "jsonb": "io.debezium.data.Json", "uuid": "io.debezium.data.Uuid"}
_INTEGERS = {"int2": ("int16", pa.int16()), "int4": ("int32", pa.int32()), "int8": ("int64", pa.int64())}


def _plain_type(type_name: str, field: Schema) -> pa.DataType | None:
    """The Arrow type a column of this PostgreSQL type and Connect field schema is exactly
    represented by, or None."""
    kind, name = field.type, field.name
    if type_name in _INTEGERS:
        connect, arrow = _INTEGERS[type_name]
        return arrow if kind == connect and name is None else None
    if type_name == "bool":
        return pa.bool_() if kind == "boolean" and name is None else None
    if type_name in _STRINGS:
        return pa.string() if kind == "string" and name == _STRINGS[type_name] else None
    if type_name == "numeric":
        if kind != "bytes" or name != DECIMAL:
            return None
        params = field.parameters or {}
        try:
            scale, digits = int(params.get("scale", "")), int(params.get("connect.decimal.precision", ""))
        except ValueError:
            return None
        return pa.decimal128(digits, scale) if 0 <= scale <= digits <= 38 else None
    if type_name == "date":
        return pa.date32() if kind == "int32" and name in _DATES else None
    if type_name == "timestamp":
        return pa.timestamp("us") if kind == "int64" and name == "io.debezium.time.MicroTimestamp" else None
    if type_name == "timestamptz":
        # ZonedTimestamp: ISO text with offset; the lake stores the instant (the session runs in UTC)
        return pa.timestamp("us", tz="UTC") if kind == "string" and name == "io.debezium.time.ZonedTimestamp" \
            else None
    return None


@dataclass(frozen=True)
class TypedRowLayout:
    """How one table's rows become typed columns: per value field, its raw column index and type."""

    fields: tuple[tuple[str, int, pa.DataType], ...]  # (field name, raw column index, Arrow type)
    raw_count: int

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(name, arrow) for name, _, arrow in self.fields])


def typed_row_layout(captured: CapturedTable) -> TypedRowLayout | None:
    """The typed layout of this table's rows, or None when some value column has no exact typed
    form (the table is then read as events)."""
    schema = captured.schema
    by_name = {c.name: c for c in captured.table.columns}
    fields_by_name = {f.name: f.schema for f in schema.row_schema.fields}
    out: list[tuple[str, int, pa.DataType]] = []
    for plan in schema.plan:
        field = fields_by_name.get(plan.name)
        # a custom converter's column (`converters`) has no typed form: its values are the converter's
        if field is None or plan.mapper is not None or plan.custom or field.default is not NO_DEFAULT \
                or plan.name.startswith(RESERVED_PREFIX):
            return None
        raw_name = captured.raw_columns[plan.index] if plan.index < len(captured.raw_columns) else None
        column = by_name.get(raw_name) if raw_name is not None else None
        if column is None:
            return None
        arrow = _plain_type(column.type_name, field)
        if arrow is None:
            return None
        out.append((plan.name, plan.index, arrow))
    names = {name for name, _, _ in out}
    if not out or any(k not in names for k in schema.key_fields):
        return None
    return TypedRowLayout(tuple(out), len(captured.raw_columns))


# the most text one chunk may buffer for the typed path; a chunk with more (wide rows) is read
# as events, which stream in bounded memory
MAX_CHUNK_BYTES = 64 << 20


class ChunkTooLarge(Exception):
    """The chunk's text passed MAX_CHUNK_BYTES."""


class _BoundedBuffer(io.BytesIO):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > self.limit:
            raise ChunkTooLarge(f"more than {self.limit} bytes")
        return super().write(data)


def copy_text(conn: Any, query_text: str, limit: int | None = None) -> bytes:
    """The query's rows in PostgreSQL's text format (tab-separated, NULL as ``\\N``, backslash
    escapes), in the session's ISO date style and UTC time zone, so pyarrow reads timestamps as
    instants. Raises ChunkTooLarge past `limit` bytes (default MAX_CHUNK_BYTES; the COPY is
    abandoned: close the connection). Text rather than CSV: the server writes it faster
    (bench/README.md), and escaped values are rare."""
    with conn.cursor() as cur:
        cur.execute("SET LOCAL TimeZone = 'UTC'")
        cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
        buffer = _BoundedBuffer(limit or MAX_CHUNK_BYTES)
        cur.copy_expert(f"COPY ({query_text}) TO STDOUT", buffer, size=1 << 20)
    return buffer.getvalue()


# what COPY TO writes for a backslash, the delimiter (tab) and these control characters; it never
# writes octal or hex escapes (PostgreSQL's COPY documentation, "Text Format")
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def _unescape(text: str) -> str:
    return _ESCAPED.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def parse_text(data: bytes, layout: TypedRowLayout) -> pa.Table:
    """Typed columns named after the value fields; raises pyarrow.ArrowInvalid for a value that
    has no exact typed form (the caller reads the chunk as events then). Each row is one line
    (newlines and tabs in values are escaped), so the values split without quoting; only string
    values can hold a backslash escape, and only those that do are undone, in Python."""
    import pyarrow.compute as pc

    raw_names = [f"c{i}" for i in range(layout.raw_count)]
    wanted = {f"c{index}": arrow for _, index, arrow in layout.fields}
    if not data:
        return layout.arrow_schema().empty_table()
    table = pa_csv.read_csv(
        io.BytesIO(data),
        read_options=pa_csv.ReadOptions(column_names=raw_names, use_threads=False, block_size=1 << 22),
        # an empty line is a row (one text column holding ''), not a line to skip
        parse_options=pa_csv.ParseOptions(delimiter="\t", quote_char=False, double_quote=False, escape_char=False,
                                          newlines_in_values=False, ignore_empty_lines=False),
        convert_options=pa_csv.ConvertOptions(
            column_types=wanted, include_columns=list(wanted), true_values=["t"], false_values=["f"],
            null_values=["\\N"], strings_can_be_null=True))
    escapes = b"\\" in data  # one scan of the text; most chunks have no escape at all
    columns = []
    for _, index, arrow in layout.fields:
        column = table.column(f"c{index}")
        if escapes and pa.types.is_string(arrow):
            column = column.combine_chunks()
            mask = pc.match_substring(column, "\\")
            if pc.any(mask).as_py():
                fixed = [_unescape(v) for v in column.filter(mask).to_pylist()]
                column = pc.replace_with_mask(column, mask, pa.array(fixed, pa.string()))
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=layout.arrow_schema())

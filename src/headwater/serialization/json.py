"""Kafka Connect's JsonConverter, as Debezium's users see it.

With `schemas.enable=true` a key or value is `{"schema": …, "payload": …}`; without, the bare
payload. Payload rendering follows the converter: bytes and `Decimal` logical values as base64,
non-finite floats as the strings Jackson writes for them, and (`replace.null.with.default`,
default true) a null field value replaced by its schema default.

Conversion is compiled once per schema into an adapter that touches only the fields needing
work, and the schema's JSON text is cached, so a record costs one `orjson.dumps` of its payload.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from headwater.engine.records import SourceRecord
from headwater.model.schema import Schema, render_json_bytes
from headwater.model.values import decimal_json_number, decimal_to_unscaled_bytes

Adapter = Callable[[Any], Any]

DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _float(value: float) -> Any:
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


# how every value (or key) written with its schema starts: {"schema": …, "payload": …}
ENVELOPE_START = b'{"schema":'


class JsonConverter:
    def __init__(self, schemas_enable: bool = True, replace_null_with_default: bool = True, *,
                 in_place: bool = False, decimal_format: str = "base64") -> None:
        self.schemas_enable = schemas_enable
        self.replace_null_with_default = replace_null_with_default
        # decimal.format: Connect Decimal values as base64 bytes (Kafka's default) or JSON numbers
        self.decimal_numeric = decimal_format == "numeric"
        self._schema_texts: dict[int, tuple[Schema, bytes]] = {}
        # Rewrite values inside the record's own dicts instead of copying them: for records that
        # are serialized once and dropped (worker processes), the copies are pure overhead.
        self.in_place = in_place
        self._adapters: dict[int, tuple[Schema, Adapter | None]] = {}

    # -- public --------------------------------------------------------------------------

    def to_bytes(self, schema: Schema | None, value: Any) -> bytes | None:
        """The converter's output for one key or value; None for a null (tombstone) value."""
        if value is None and schema is None:
            return None
        parts: list[bytes] = []
        self.append_parts(parts, schema, value)
        return b"".join(parts)

    def append_parts(self, parts: list[bytes], schema: Schema | None, value: Any) -> None:
        """Append the output's pieces to `parts` (joined once by the caller: the cached schema
        text is kilobytes, and copying it into intermediate strings dominated the cost)."""
        if value is None:
            payload = b"null"
        elif schema is None:
            payload = orjson.dumps(value)
        else:
            cached = self._adapters.get(id(schema))
            adapter = cached[1] if cached is not None and cached[0] is schema else self._adapter(schema)
            payload = orjson.dumps(adapter(value) if adapter is not None else value)
        if not self.schemas_enable:
            parts.append(payload)
            return
        parts += (ENVELOPE_START, self.schema_text(schema) if schema is not None else b"null", b',"payload":',
                  payload, b"}")

    def schema_text(self, schema: Schema) -> bytes:
        if not self.decimal_numeric:
            return schema.json_bytes
        cached = self._schema_texts.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = (schema, render_json_bytes(schema, decimal_numeric=True))  # keeps schema alive (id)
            self._schema_texts[id(schema)] = cached
        return cached[1]

    def to_jsonable(self, schema: Schema | None, value: Any) -> Any:
        """The same as `to_bytes`, as Python objects (for sinks that embed it)."""
        data = self.to_bytes(schema, value)
        return None if data is None else orjson.loads(data)

    # -- adapters ------------------------------------------------------------------------

    def _adapter(self, schema: Schema) -> Adapter | None:
        cached = self._adapters.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        adapter = self._compile(schema)
        self._adapters[id(schema)] = (schema, adapter)  # keeps schema alive so id() stays unique
        return adapter

    def _compile(self, schema: Schema) -> Adapter | None:
        t = schema.type
        if schema.name == DECIMAL_LOGICAL:
            scale = int((schema.parameters or {}).get("scale", "0"))
            if self.decimal_numeric:
                return lambda v: orjson.Fragment(decimal_json_number(v, scale)) if isinstance(v, Decimal) \
                    else (_b64(v) if isinstance(v, (bytes, bytearray)) else v)
            return lambda v: _b64(decimal_to_unscaled_bytes(v, scale)) if isinstance(v, Decimal) \
                else (_b64(v) if isinstance(v, (bytes, bytearray)) else v)
        if t == "bytes":
            return lambda v: _b64(v) if isinstance(v, (bytes, bytearray, memoryview)) else v
        if t in ("float32", "float64"):
            return lambda v: _float(v) if isinstance(v, float) else v
        if t == "array":
            assert schema.items is not None
            item = self._compile(schema.items)
            if item is None:
                return None
            return lambda v: [None if x is None else item(x) for x in v]
        if t == "map":
            assert schema.values is not None
            val = self._compile(schema.values)
            if val is None:
                return None
            return lambda v: {k: None if x is None else val(x) for k, x in v.items()}
        if t == "struct":
            return self._compile_struct(schema)
        return None

    def _compile_struct(self, schema: Schema) -> Adapter | None:
        """Generate a function specialised to this struct: it copies the dict only when a field
        actually needs a new value, and inlines the null-to-default replacement (a per-field
        loop costs several times more on the hot path)."""
        env: dict[str, Any] = {}
        lines = ["def adapt(value):", "    out = value"]
        copy = "        pass" if self.in_place else "        if out is value: out = dict(value)"
        for i, f in enumerate(schema.fields):
            adapter = self._compile(f.schema)
            use_default = self.replace_null_with_default and f.schema.has_default and f.schema.default is not None
            if adapter is None and not use_default:
                continue
            lines.append(f"    x = value.get({f.name!r})")
            if use_default:
                default = adapter(f.schema.default) if adapter is not None else f.schema.default
                env[f"d{i}"] = default
                lines += ["    if x is None:", copy, f"        out[{f.name!r}] = d{i}"]
                if adapter is not None:
                    env[f"a{i}"] = adapter
                    lines += ["    else:", copy, f"        out[{f.name!r}] = a{i}(x)"]
            else:
                env[f"a{i}"] = adapter
                lines += ["    if x is not None:", copy, f"        out[{f.name!r}] = a{i}(x)"]
        if len(lines) == 2:
            return None
        lines.append("    return out")
        exec("\n".join(lines), env)  # field names are embedded via repr()
        return env["adapt"]


class EncodedLines:
    """A run of records of one topic already rendered by the converters (lines, in `parts`),
    as a worker's fast path produces them; `offset()` is the last one's offset. `position` is
    the connector's position object for the run (`position.offset(lsn, msgs)` gives it)."""

    __slots__ = ("count", "lsn", "msgs", "parts", "position", "topic")

    def __init__(self, topic: str, position: Any) -> None:
        self.topic = topic
        self.position = position
        self.parts: list[bytes] = []
        self.count = 0
        self.lsn = 0
        self.msgs = 0

    def offset(self) -> dict[str, Any]:
        return self.position.offset(self.lsn, self.msgs)


class RecordSerializer:
    """Key, value and headers of a record as the converters render them, with Debezium's
    context headers (`__debezium.context.*`) appended after the record's own."""

    def __init__(self, key_converter: JsonConverter, value_converter: JsonConverter,
                 header_converter: JsonConverter, context_headers: list[tuple[str, str]]) -> None:
        from headwater.model.schema import STRING

        self.key_converter = key_converter
        self.value_converter = value_converter
        self.header_converter = header_converter
        self._context = [
            {"key": name, "value": orjson.loads(header_converter.to_bytes(STRING, value) or b"null")}
            for name, value in context_headers
        ]
        self._context_bytes = orjson.dumps(self._context)[1:-1]  # the items, without brackets
        self._context_pairs = [(name, header_converter.to_bytes(STRING, value) or b"null")
                               for name, value in context_headers]

    def key(self, record: SourceRecord) -> bytes | None:
        return self.key_converter.to_bytes(record.key_schema, record.key)

    def value(self, record: SourceRecord) -> bytes | None:
        return self.value_converter.to_bytes(record.value_schema, record.value)

    def headers_json(self, record: SourceRecord) -> bytes:
        """The headers as a JSON array of {"key","value"} with converter output as values."""
        if not record.context_headers:
            if not record.headers:
                return b"[]"
            context = b""
        else:
            context = self._context_bytes
        if not record.headers:
            return b"[" + context + b"]"
        own = b",".join(
            b'{"key":' + orjson.dumps(name) + b',"value":' + (self.header_converter.to_bytes(schema, value)
                                                               or b"null") + b"}"
            for name, schema, value in record.headers
        )
        return b"[" + own + (b"," + context if context else b"") + b"]"

    def header_pairs(self, record: SourceRecord) -> list[tuple[str, bytes]]:
        """The headers as Kafka holds them: (name, converter output), context headers last."""
        own = [(name, self.header_converter.to_bytes(schema, value) or b"null")
               for name, schema, value in record.headers]
        return own + self._context_pairs if record.context_headers else own

    def line(self, record: SourceRecord) -> bytes:
        """The conformance line format: {"topic","key","value","headers"} + newline."""
        parts: list[bytes] = []
        self.append_line(parts, record)
        return b"".join(parts)

    def append_line(self, parts: list[bytes], record: SourceRecord) -> None:
        parts += (b'{"topic":', orjson.dumps(record.topic), b',"key":')
        if record.key is None and record.key_schema is None:
            parts.append(b"null")
        else:
            self.key_converter.append_parts(parts, record.key_schema, record.key)
        parts.append(b',"value":')
        if record.value is None and record.value_schema is None:
            parts.append(b"null")
        else:
            self.value_converter.append_parts(parts, record.value_schema, record.value)
        parts += (b',"headers":', self.headers_json(record), b"}\n")

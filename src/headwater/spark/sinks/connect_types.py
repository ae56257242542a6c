"""Kafka Connect schemas (as the JSON converter writes them with ``schemas.enable=true``) → Spark.

Three views of one Connect schema, all built without touching the data:

- :func:`json_type`: the Spark type to parse the JSON payload with (``from_json``). Bytes and
  base64 decimals are parsed as strings here, everything else as its final type.
- :func:`spark_type`: the type stored in Delta (bytes → binary, Decimal → decimal(p, s), Debezium
  dates/timestamps → date/timestamp_ntz/timestamp, …).
- :func:`convert_sql`: a Spark SQL expression taking a parsed (JSON-level) value to the stored one,
  or the input unchanged when no conversion is needed. Everything runs in the JVM (no Python UDF),
  so decoding a batch is a handful of vectorized expressions.

:func:`placeholder_sql` tells whether a parsed value is Debezium's "unchanged TOAST" placeholder
(``unavailable.value.placeholder``) in the shape Debezium gives it for the column's type.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

Schema = dict[str, Any]  # a Connect schema as the JSON converter renders it

DECIMAL = "org.apache.kafka.connect.data.Decimal"
# the "format" of values that are already of their spark_type (typed rows): nothing to convert
NATIVE = "native"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_DATES = frozenset({"org.apache.kafka.connect.data.Date", "io.debezium.time.Date"})
_MILLI_TIMESTAMPS = frozenset({"org.apache.kafka.connect.data.Timestamp", "io.debezium.time.Timestamp"})
_MICRO_TIMESTAMPS = frozenset({"io.debezium.time.MicroTimestamp"})
_NANO_TIMESTAMPS = frozenset({"io.debezium.time.NanoTimestamp"})
_ZONED_TIMESTAMPS = frozenset({"io.debezium.time.ZonedTimestamp"})
_UUID = "io.debezium.data.Uuid"

_PRIMITIVES: dict[str, DataType] = {
    "int8": ByteType(), "int16": ShortType(), "int32": IntegerType(), "int64": LongType(),
    "float": FloatType(), "float32": FloatType(), "double": DoubleType(), "float64": DoubleType(),
    "boolean": BooleanType(), "string": StringType(),
}
_EPOCH_NTZ = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"
_MAX_DECIMAL_DIGITS = 38


class SchemaError(ValueError):
    """A Connect schema this sink cannot map to Spark."""


def quote(name: str) -> str:
    """A Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A Spark SQL string literal (no escape processing surprises: backslashes and quotes doubled)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _name(schema: Schema) -> str | None:
    return schema.get("name")


def _decimal_params(schema: Schema) -> tuple[int, int] | None:
    """(precision, scale) of a Connect Decimal that fits a Spark decimal, else None (→ string)."""
    params = schema.get("parameters") or {}
    try:
        scale = int(params.get("scale", "0"))
    except ValueError:
        raise SchemaError(f"Decimal with a non-integer scale parameter {params.get('scale')!r}") from None
    raw = params.get("connect.decimal.precision")
    precision = int(raw) if raw is not None and str(raw).isdigit() else _MAX_DECIMAL_DIGITS
    if scale < 0:
        return None
    precision = max(precision, scale)
    if precision > _MAX_DECIMAL_DIGITS:
        return None
    return precision, scale


def _decimal_scale(schema: Schema) -> int:
    return int((schema.get("parameters") or {}).get("scale", "0"))


def json_type(schema: Schema, decimal_format: str = "base64") -> DataType:
    """The type ``from_json`` parses this schema's JSON value with."""
    kind = schema.get("type")
    name = _name(schema)
    if kind == "bytes":
        if name == DECIMAL and decimal_format == "numeric":
            params = _decimal_params(schema)
            return DecimalType(*params) if params else StringType()
        return StringType()  # base64 text
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        return ArrayType(json_type(_child(schema, "items"), decimal_format), True)
    if kind == "map":
        keys = _child(schema, "keys")
        if keys.get("type") != "string":
            return StringType()  # an array of [key, value] pairs in JSON: kept as its JSON text
        return MapType(StringType(), json_type(_child(schema, "values"), decimal_format), True)
    if kind == "struct":
        return StructType([StructField(f["field"], json_type(f, decimal_format), True) for f in _fields(schema)])
    raise SchemaError(f"unknown Connect schema type {kind!r} in {json.dumps(schema)[:200]}")


def spark_type(schema: Schema, decimal_format: str = "base64") -> DataType:
    """The type a value of this schema is stored as."""
    kind = schema.get("type")
    name = _name(schema)
    if name == DECIMAL:
        params = _decimal_params(schema)
        return DecimalType(*params) if params else StringType()
    if name == VARIABLE_SCALE_DECIMAL:
        return StringType()
    if name in _DATES:
        return DateType()
    if name in _MILLI_TIMESTAMPS or name in _MICRO_TIMESTAMPS or name in _NANO_TIMESTAMPS:
        return TimestampNTZType()
    if name in _ZONED_TIMESTAMPS:
        return TimestampType()
    if kind == "bytes":
        return BinaryType()
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        return ArrayType(spark_type(_child(schema, "items"), decimal_format), True)
    if kind == "map":
        keys = _child(schema, "keys")
        if keys.get("type") != "string":
            return StringType()
        return MapType(StringType(), spark_type(_child(schema, "values"), decimal_format), True)
    if kind == "struct":
        return StructType([StructField(f["field"], spark_type(f, decimal_format), True) for f in _fields(schema)])
    raise SchemaError(f"unknown Connect schema type {kind!r} in {json.dumps(schema)[:200]}")


def needs_conversion(schema: Schema, decimal_format: str = "base64") -> bool:
    if decimal_format == NATIVE:
        return False
    kind = schema.get("type")
    name = _name(schema)
    if name == DECIMAL:
        return decimal_format != "numeric" or _decimal_params(schema) is None
    if name == VARIABLE_SCALE_DECIMAL or name in _DATES or name in _MILLI_TIMESTAMPS \
            or name in _MICRO_TIMESTAMPS or name in _NANO_TIMESTAMPS or name in _ZONED_TIMESTAMPS:
        return True
    if kind == "bytes":
        return True
    if kind == "array":
        return needs_conversion(_child(schema, "items"), decimal_format)
    if kind == "map":
        keys = _child(schema, "keys")
        return keys.get("type") == "string" and needs_conversion(_child(schema, "values"), decimal_format)
    if kind == "struct":
        return any(needs_conversion(f, decimal_format) for f in _fields(schema))
    return False


def convert_sql(expr: str, schema: Schema, decimal_format: str = "base64", depth: int = 0) -> str:
    """SQL taking the parsed value ``expr`` (of :func:`json_type`) to :func:`spark_type`."""
    if not needs_conversion(schema, decimal_format):
        return expr
    kind = schema.get("type")
    name = _name(schema)
    if name == DECIMAL:
        params = _decimal_params(schema)
        if decimal_format == "numeric":
            return f"CAST({expr} AS STRING)"  # only reached for decimals wider than Spark's
        if params and params[0] <= _LONG_DECIMAL_DIGITS:
            return _long_decimal_sql(expr, *params)
        text = _decimal_text_sql(expr, str(_decimal_scale(schema)))
        return f"CAST({text} AS DECIMAL({params[0]}, {params[1]}))" if params else text
    if name == VARIABLE_SCALE_DECIMAL:
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE {_decimal_text_sql(f'{expr}.value', f'{expr}.scale')} END"
    if name in _DATES:
        return f"date_from_unix_date({expr})"
    if name in _MILLI_TIMESTAMPS:
        return f"timestampadd(MILLISECOND, {expr}, {_EPOCH_NTZ})"
    if name in _MICRO_TIMESTAMPS:
        return f"timestampadd(MICROSECOND, {expr}, {_EPOCH_NTZ})"
    if name in _NANO_TIMESTAMPS:  # floor division: pre-1970 values round down like Java's floorDiv
        return f"timestampadd(MICROSECOND, CAST(floor({expr} / 1000BD) AS BIGINT), {_EPOCH_NTZ})"
    if name in _ZONED_TIMESTAMPS:  # ISO-8601 with offset; 'infinity' and friends become NULL
        return f"try_cast({expr} AS TIMESTAMP)"
    if kind == "bytes":
        return f"unbase64({expr})"
    var = f"x{depth}"
    if kind == "array":
        inner = convert_sql(var, _child(schema, "items"), decimal_format, depth + 1)
        return f"transform({expr}, {var} -> {inner})"
    if kind == "map":
        k, v = f"k{depth}", var
        inner = convert_sql(v, _child(schema, "values"), decimal_format, depth + 1)
        return f"transform_values({expr}, ({k}, {v}) -> {inner})"
    if kind == "struct":
        parts = ", ".join(sql_string(f["field"]) + ", "
                          + convert_sql(f"{expr}.{quote(f['field'])}", f, decimal_format, depth)
                          for f in _fields(schema))
        return f"CASE WHEN {expr} IS NULL THEN NULL ELSE named_struct({parts}) END"
    return expr


# the most digits any 8-byte two's-complement value has room for (2^63 > 10^18)
_LONG_DECIMAL_DIGITS = 18
# 2^(8n) for n = 1..8 bytes: what a negative n-byte value read as unsigned is too large by
_UNSIGNED_EXCESS = " ".join(f"WHEN {2 * n} THEN {2 ** (8 * n)}BD" for n in range(1, 9))


def _long_decimal_sql(b64: str, precision: int, scale: int) -> str:
    """A decimal of at most 18 digits from its base64 big-endian two's-complement unscaled value:
    the bytes read as an unsigned number by ``conv``, less 2^(8n) when the sign bit is set, times
    10^-scale (exact decimal arithmetic). Much cheaper per row than the 128-bit text route
    (bench/README.md, "Per-row costs"), and nearly every numeric column is this narrow. Longer
    than 8 bytes: NULL, like the wide route for values it cannot hold (the schema's precision
    rules them out)."""
    h = f"hex(unbase64({b64}))"
    unsigned = f"CAST(conv({h}, 16, 10) AS DECIMAL(20, 0))"
    # 19 digits hold any signed 64-bit value and keep the product within Spark's 38 digits (a
    # wider operand would make Spark round the scale away)
    signed = (f"CAST({unsigned} - if(substr({h}, 1, 1) >= '8', CASE length({h}) {_UNSIGNED_EXCESS} END, 0BD) "
              "AS DECIMAL(19, 0))")
    value = f"{signed} * {Decimal(1).scaleb(-scale):f}BD" if scale else signed
    return f"CASE WHEN length({h}) > 16 THEN NULL ELSE CAST({value} AS DECIMAL({precision}, {scale})) END"


def _decimal_text_sql(b64: str, scale: str) -> str:
    """The decimal text of a big-endian two's-complement unscaled value (base64) and a scale.

    The bytes are sign-extended to 128 bits, negative values complemented (−x = ~x + 1), and the
    two 64-bit halves turned into decimals with ``conv``. A 128-bit magnitude can have 39 digits,
    one more than Spark's decimals hold, so it is printed as ``M div 10`` and ``M mod 10``:
    with M = hi·2⁶⁴ + lo and 2⁶⁴ = 10·1844674407370955161 + 6, M = 10·A + B where
    A = hi·1844674407370955161 and B = 6·hi + lo (+1 for negatives), all within 38 digits.
    Each sub-expression appears only a few times (no LET in SQL; lambdas would do, but nested
    one-element ``transform`` calls gave wrong results here). Wider than 16 bytes: NULL."""
    h = f"hex(unbase64({b64}))"
    neg = f"(substr({h}, 1, 1) >= '8')"
    mag_hex = f"translate(lpad({h}, 32, if({neg}, 'F', '0')), if({neg}, 'FEDCBA9876543210', ''), '0123456789ABCDEF')"
    hi = f"CAST(conv(substr({mag_hex}, 1, 16), 16, 10) AS DECIMAL(38, 0))"
    lo = f"CAST(conv(substr({mag_hex}, 17, 16), 16, 10) AS DECIMAL(38, 0))"
    b = f"({hi} * CAST(6 AS DECIMAL(1, 0)) + {lo} + if({neg}, CAST(1 AS DECIMAL(1, 0)), CAST(0 AS DECIMAL(1, 0))))"
    quotient = f"CAST({hi} * CAST(1844674407370955161 AS DECIMAL(19, 0)) + floor({b} / 10) AS DECIMAL(38, 0))"
    digits = f"concat(CAST({quotient} AS STRING), CAST(CAST({b} % 10 AS INT) AS STRING))"  # may start with 0
    s = f"({scale})"
    # pad with `scale` zeros, then the point before the last `scale` digits; leading zeros go
    fraction = (f"regexp_replace(concat(repeat('0', {s}), {digits}), "
                f"concat('^0*([0-9]+)([0-9]{{', CAST({s} AS STRING), '}})$'), '$1.$2')")
    whole = f"regexp_replace(concat({digits}, repeat('0', -{s})), '^0+([0-9])', '$1')"
    body = f"if({s} > 0, {fraction}, {whole})"
    return f"CASE WHEN {b64} IS NULL OR length({h}) > 32 THEN NULL ELSE concat(if({neg}, '-', ''), {body}) END"


def placeholder_sql(expr: str, schema: Schema, placeholder: bytes) -> str | None:
    """SQL true when the parsed value ``expr`` is the unchanged-TOAST placeholder for this column
    type (see headwater.connectors.postgres.types.unavailable_value for the shapes), or None when
    values of this type never carry it."""
    text = placeholder.decode("utf-8", "replace")
    b64 = base64.b64encode(placeholder).decode()
    kind = schema.get("type")
    name = _name(schema)
    if name in (DECIMAL, VARIABLE_SCALE_DECIMAL) or name in _DATES or name in _MILLI_TIMESTAMPS \
            or name in _MICRO_TIMESTAMPS or name in _NANO_TIMESTAMPS:
        return None
    if kind == "string":
        return f"({expr} <=> {sql_string(text)})"
    if kind == "bytes":
        return f"({expr} <=> {sql_string(b64)})"
    if kind == "map":
        if _child(schema, "keys").get("type") == "string" and _child(schema, "values").get("type") == "string":
            return f"(size({expr}) = 1 AND try_element_at({expr}, {sql_string(text)}) <=> {sql_string(text)})"
        return None
    if kind == "array":
        items = _child(schema, "items")
        first = f"try_element_at({expr}, 1)"
        if items.get("type") == "string":
            candidates = [text] + ([uuid_placeholder(placeholder)] if _name(items) == _UUID else [])
            listed = ", ".join(sql_string(c) for c in candidates)
            return f"(size({expr}) = 1 AND {first} IN ({listed}))"
        if items.get("type") == "bytes" and _name(items) is None:
            return f"(size({expr}) = 1 AND {first} <=> {sql_string(b64)})"
        if items.get("type") in ("int32", "int64"):  # Debezium's signed bytes of the placeholder
            values = ", ".join(str(b - 256 if b > 127 else b) for b in placeholder)
            cast = "INT" if items.get("type") == "int32" else "BIGINT"
            return f"({expr} <=> CAST(array({values}) AS ARRAY<{cast}>))"
        return None
    return None


def uuid_placeholder(placeholder: bytes) -> str:
    """Java's UUID.nameUUIDFromBytes(placeholder): what Debezium puts in a uuid[] placeholder."""
    return str(uuid.UUID(bytes=hashlib.md5(placeholder).digest(), version=3))


def placeholder_needles(placeholder: bytes) -> list[str]:
    """Substrings of a JSON value that may hold a placeholder (a cheap pre-check per record)."""
    text = placeholder.decode("utf-8", "replace")
    b64 = base64.b64encode(placeholder).decode()
    signed = ",".join(str(b - 256 if b > 127 else b) for b in placeholder)
    return [json.dumps(text)[1:-1], b64, signed, uuid_placeholder(placeholder)]


def merge_structs(schemas: Iterable[Schema]) -> Schema:
    """The union of struct schemas' fields in order of first appearance; a later schema's
    definition of a field replaces an earlier one (a changed type takes effect)."""
    fields: dict[str, Schema] = {}
    name = None
    for schema in schemas:
        name = schema.get("name", name)
        for f in _fields(schema):
            fields[f["field"]] = f
    return {"type": "struct", "name": name, "optional": True, "fields": list(fields.values())}


def field(schema: Schema, name: str) -> Schema | None:
    for f in _fields(schema):
        if f.get("field") == name:
            return f
    return None


def ddl(data_type: DataType) -> str:
    """A type as Spark SQL DDL, field names quoted (for ALTER TABLE … ADD COLUMNS)."""
    if isinstance(data_type, StructType):
        return "STRUCT<" + ", ".join(f"{quote(f.name)}: {ddl(f.dataType)}" for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{ddl(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{ddl(data_type.keyType)}, {ddl(data_type.valueType)}>"
    return data_type.simpleString()


def _fields(schema: Schema) -> list[Schema]:
    fields = schema.get("fields")
    if not isinstance(fields, list):
        raise SchemaError(f"struct schema without fields: {json.dumps(schema)[:200]}")
    return fields


def _child(schema: Schema, key: str) -> Schema:
    child = schema.get(key)
    if not isinstance(child, dict):
        raise SchemaError(f"{schema.get('type')} schema without {key}: {json.dumps(schema)[:200]}")
    return child

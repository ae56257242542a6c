"""PostgreSQL column types -> Connect schemas and value converters (Debezium's default modes).

Both capture paths read values in PostgreSQL's text form: pgoutput sends text, and the snapshot
reads `COPY … TO STDOUT` text. So one converter per column serves both, which keeps snapshot
and streaming events identical by construction. Converters take the text (never None) and
return the Connect value (int, str, bytes, Decimal, float, bool, dict, list).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from headwater.model.schema import NO_DEFAULT, Schema, struct
from headwater.relational.table import Column, Table

Converter = Callable[[str], Any]

_EPOCH_DATE_ORDINAL = dt.date(1970, 1, 1).toordinal()
_DAYS_PER_MONTH_AVG = 365.25 / 12


@dataclass(frozen=True, slots=True)
class PgType:
    """What the catalog says about a column's type (domains already resolved to their base)."""

    name: str                          # base type name, e.g. "int4", "_text", "mood"
    oid: int
    modifier: int = -1                 # base type modifier (domains: the domain's typmod)
    category: str = ""                 # pg_type.typcategory of the base type
    kind: str = "b"                    # typtype: b base, e enum, d domain (resolved), c composite ...
    element: PgType | None = None      # for arrays
    enum_labels: tuple[str, ...] = ()
    declared_name: str | None = None   # the name the column was declared with (domain/enum name)


class UnsupportedType(Exception):
    pass


# -- text parsers -----------------------------------------------------------------------------

def _bool(text: str) -> bool:
    return text == "t"


def _bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    # escape format (bytea_output=escape): octal escapes and doubled backslashes
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if text[i + 1] == "\\":
                out.append(92)
                i += 2
            else:
                out.append(int(text[i + 1:i + 4], 8))
                i += 4
        else:
            out.extend(ch.encode("utf-8"))
            i += 1
    return bytes(out)


def _date_days(text: str) -> int:
    return dt.date.fromisoformat(text).toordinal() - _EPOCH_DATE_ORDINAL


def _time_micros(text: str) -> int:
    if text.startswith("24:00:00"):
        return 86_400_000_000
    hh, mm, rest = text.split(":")
    if "." in rest:
        ss, frac = rest.split(".")
        micros = int((frac + "000000")[:6])
    else:
        ss, micros = rest, 0
    return ((int(hh) * 60 + int(mm)) * 60 + int(ss)) * 1_000_000 + micros


_TS_RE = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::?\d\d)?(?::?\d\d)?)?( BC)?$")


def _split_timestamp(text: str) -> tuple[dt.datetime, int, int]:
    """(naive datetime without micros, micros, utc offset seconds)."""
    m = _TS_RE.match(text)
    if m is None:
        raise ValueError(f"unrecognised timestamp {text!r}")
    year, month, day, hh, mi, ss, frac, tz, bc = m.groups()
    if bc:
        raise ValueError("BC timestamps are not supported yet")
    micros = int((frac or "").ljust(6, "0")) if frac else 0
    offset = 0
    if tz:
        sign = -1 if tz[0] == "-" else 1
        parts = tz[1:].replace(":", "")
        offset = sign * (int(parts[0:2]) * 3600 + int(parts[2:4] or 0) * 60 + int(parts[4:6] or 0))
    return dt.datetime(int(year), int(month), int(day), int(hh), int(mi), int(ss)), micros, offset


_EPOCH = dt.datetime(1970, 1, 1)


def _timestamp_micros(text: str) -> int:
    base, micros, _ = _split_timestamp(text)
    delta = base - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + micros


def _fraction(micros: int) -> str:
    if not micros:
        return ""
    return "." + f"{micros:06d}".rstrip("0")


def _timestamptz_iso(text: str) -> str:
    # Sessions run with TimeZone=UTC, so the common form is 'YYYY-MM-DD HH:MM:SS[.ffffff]+00':
    # a purely textual rewrite (the general path below is ~20x slower).
    if len(text) >= 22 and text[-3:] == "+00" and text[4] == "-" and text[10] == " ":
        body = text[:-3]
        if "." in body:
            body = body.rstrip("0").rstrip(".")
        return body[:10] + "T" + body[11:] + "Z"
    base, micros, offset = _split_timestamp(text)
    utc = base - dt.timedelta(seconds=offset)
    return f"{utc.strftime('%Y-%m-%dT%H:%M:%S')}{_fraction(micros)}Z"


def _timetz_iso(text: str) -> str:
    m = re.match(r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::?\d\d)?(?::?\d\d)?)$", text)
    if m is None:
        raise ValueError(f"unrecognised time with time zone {text!r}")
    hh, mi, ss, frac, tz = m.groups()
    sign = -1 if tz[0] == "-" else 1
    parts = tz[1:].replace(":", "")
    offset = sign * (int(parts[0:2]) * 3600 + int(parts[2:4] or 0) * 60 + int(parts[4:6] or 0))
    secs = (int(hh) * 3600 + int(mi) * 60 + int(ss) - offset) % 86_400
    micros = int(frac.ljust(6, "0")) if frac else 0
    return f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}{_fraction(micros)}Z"


_INTERVAL_PART = re.compile(r"(-?\d+) (year|mon|day)s?")
_INTERVAL_TIME = re.compile(r"(-)?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")


def _interval_micros(text: str) -> int:
    """PostgreSQL's `postgres` interval style -> microseconds, months as 30.4375 days (Debezium)."""
    years = months = days = 0
    for amount, unit in _INTERVAL_PART.findall(text):
        if unit == "year":
            years = int(amount)
        elif unit == "mon":
            months = int(amount)
        else:
            days = int(amount)
    micros = 0
    tm = _INTERVAL_TIME.search(text)
    if tm:
        neg, hh, mi, ss, frac = tm.groups()
        micros = ((int(hh) * 60 + int(mi)) * 60 + int(ss)) * 1_000_000 + (int(frac.ljust(6, "0")) if frac else 0)
        if neg:
            micros = -micros
    month_total = years * 12 + months
    return round((month_total * _DAYS_PER_MONTH_AVG + days) * 86_400_000_000) + micros


def parse_array(text: str, element: Converter) -> list[Any]:
    """A one-dimensional PostgreSQL array literal, e.g. {1,2,NULL} or {"a b","c\\"d"}."""
    if not text.startswith("{"):
        # a lower bound decoration like [0:1]={...}
        text = text[text.index("=") + 1:]
    if text == "{}":
        return []
    out: list[Any] = []
    i, n = 1, len(text) - 1
    while i < n:
        if text[i] == '"':
            i += 1
            buf = []
            while text[i] != '"':
                if text[i] == "\\":
                    i += 1
                buf.append(text[i])
                i += 1
            i += 1
            out.append(element("".join(buf)))
        else:
            j = i
            while j < n and text[j] != ",":
                j += 1
            token = text[i:j]
            out.append(None if token == "NULL" else element(token))
            i = j
        if i < n and text[i] == ",":
            i += 1
    return out


def _decimal(text: str) -> Decimal:
    return Decimal(text)


def _variable_scale(text: str) -> dict[str, Any]:
    from headwater.model.values import decimal_to_unscaled_bytes

    value = Decimal(text)
    exponent = value.as_tuple().exponent
    scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return {"scale": scale, "value": decimal_to_unscaled_bytes(value, scale)}


def _money(text: str) -> Decimal:
    cleaned = text.replace("$", "").replace(",", "")
    negative = cleaned.startswith("(") or cleaned.startswith("-")
    cleaned = cleaned.strip("()-")
    value = Decimal(cleaned)
    return -value if negative else value


def _bits(text: str) -> bytes:
    """Debezium's Bits: the bit string as an integer, little-endian bytes (Java BitSet)."""
    if not text:
        return b""
    value = int(text, 2)
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "little") if value else b"\x00"


# -- the mapping ------------------------------------------------------------------------------

_SIMPLE: dict[str, tuple[Schema, Converter]] = {
    "int2": (Schema("int16"), int),
    "int4": (Schema("int32"), int),
    "int8": (Schema("int64"), int),
    "oid": (Schema("int64"), int),
    "float4": (Schema("float32"), float),
    "float8": (Schema("float64"), float),
    "bool": (Schema("boolean"), _bool),
    "text": (Schema("string"), str),
    "varchar": (Schema("string"), str),
    "bpchar": (Schema("string"), str),
    "char": (Schema("string"), str),
    "name": (Schema("string"), str),
    "bytea": (Schema("bytes"), _bytea),
    "date": (Schema("int32", name="io.debezium.time.Date", version=1), _date_days),
    "time": (Schema("int64", name="io.debezium.time.MicroTime", version=1), _time_micros),
    "timetz": (Schema("string", name="io.debezium.time.ZonedTime", version=1), _timetz_iso),
    "timestamp": (Schema("int64", name="io.debezium.time.MicroTimestamp", version=1), _timestamp_micros),
    "timestamptz": (Schema("string", name="io.debezium.time.ZonedTimestamp", version=1), _timestamptz_iso),
    "interval": (Schema("int64", name="io.debezium.time.MicroDuration", version=1), _interval_micros),
    "uuid": (Schema("string", name="io.debezium.data.Uuid", version=1), str),
    "json": (Schema("string", name="io.debezium.data.Json", version=1), str),
    "jsonb": (Schema("string", name="io.debezium.data.Json", version=1), str),
    "xml": (Schema("string", name="io.debezium.data.Xml", version=1), str),
    "inet": (Schema("string"), str),
    "cidr": (Schema("string"), str),
    "macaddr": (Schema("string"), str),
    "macaddr8": (Schema("string"), str),
    "ltree": (Schema("string", name="io.debezium.data.Ltree", version=1), str),
    "tsvector": (Schema("string", name="io.debezium.data.Tsvector", version=1), str),
}

_VARIABLE_SCALE_SCHEMA = struct(
    "io.debezium.data.VariableScaleDecimal",
    [("scale", Schema("int32")), ("value", Schema("bytes"))],
    version=1,
)
_VARIABLE_SCALE_SCHEMA = Schema("struct", name="io.debezium.data.VariableScaleDecimal", version=1,
                                doc="Variable scaled decimal", fields=_VARIABLE_SCALE_SCHEMA.fields)

# Values a required column gets when a row carries none (Debezium's converter fallbacks).
_FALLBACK_BY_CONNECT_TYPE: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "float32": 0.0, "float64": 0.0,
    "boolean": False, "string": "", "bytes": b"",
}


def _numeric(pg: PgType) -> tuple[Schema, Converter]:
    if pg.modifier >= 4:
        precision = ((pg.modifier - 4) >> 16) & 0xFFFF
        scale = (pg.modifier - 4) & 0xFFFF
        schema = Schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                        parameters={"scale": str(scale), "connect.decimal.precision": str(precision)})
        return schema, _decimal
    return _VARIABLE_SCALE_SCHEMA, _variable_scale


def _bit_length(pg: PgType) -> int:
    if pg.name == "bit":
        return max(pg.modifier, 1)
    return pg.modifier if pg.modifier > 0 else 2_147_483_647


def schema_and_converter(pg: PgType, *, include_unknown: bool = False) -> tuple[Schema, Converter] | None:
    """Connect schema (required variant) and text converter for a type, or None to skip it."""
    if pg.element is not None:
        inner = schema_and_converter(pg.element, include_unknown=include_unknown)
        if inner is None:
            return None
        item_schema, item_conv = inner
        items = Schema(item_schema.type, optional=True, name=item_schema.name, version=item_schema.version,
                       parameters=item_schema.parameters, fields=item_schema.fields, items=item_schema.items,
                       doc=item_schema.doc)
        return Schema("array", items=items), lambda text, c=item_conv: parse_array(text, c)
    if pg.kind == "e":
        return (Schema("string", name="io.debezium.data.Enum", version=1,
                       parameters={"allowed": ",".join(pg.enum_labels)}), str)
    simple = _SIMPLE.get(pg.name)
    if simple is not None:
        return simple
    if pg.name == "numeric":
        return _numeric(pg)
    if pg.name == "money":
        return (Schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                       parameters={"scale": "2"}), _money)
    if pg.name in ("bit", "varbit"):
        length = _bit_length(pg)
        if pg.name == "bit" and length == 1:
            return Schema("boolean"), lambda text: text == "1"
        return (Schema("bytes", name="io.debezium.data.Bits", version=1,
                       parameters={"length": str(length)}), _bits)
    if include_unknown:
        return Schema("bytes"), lambda text: text.encode("utf-8")
    return None


def fallback_value(schema: Schema) -> Any:
    if schema.name == "org.apache.kafka.connect.data.Decimal":
        return Decimal(0)
    return _FALLBACK_BY_CONNECT_TYPE.get(schema.type)


_CAST_SUFFIX = re.compile(r"::[\w\s\".\[\]]+(\(\d+(,\d+)?\))?(\[\])?$")


def parse_default(expression: str | None, converter: Converter) -> Any:
    """The schema default for a column default expression: constants only (`0`, `'abc'::text`,
    `true`, `'2024-01-01'::date`); functions such as nextval() or now() give no default."""
    if expression is None:
        return NO_DEFAULT
    expr = expression.strip()
    while True:
        stripped = _CAST_SUFFIX.sub("", expr)
        if stripped == expr:
            break
        expr = stripped.strip()
    if expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1].strip()
    if expr.upper() == "NULL":
        return NO_DEFAULT
    if expr.startswith("'") and expr.endswith("'") and len(expr) >= 2:
        text = expr[1:-1].replace("''", "'")
    elif re.fullmatch(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?", expr):
        text = expr
    elif expr in ("true", "false"):
        text = "t" if expr == "true" else "f"
    else:
        return NO_DEFAULT
    try:
        return converter(text)
    except (ValueError, InvalidOperation, IndexError):
        return NO_DEFAULT


class PostgresValueConverters:
    """`ValueConverters` for PostgreSQL (see headwater.relational.table_schema)."""

    def __init__(self, *, include_unknown: bool = False) -> None:
        self.include_unknown = include_unknown

    def _mapping(self, column: Column) -> tuple[Schema, Converter] | None:
        pg = column.native
        if not isinstance(pg, PgType):
            raise UnsupportedType(f"column {column.name} has no PostgreSQL type information")
        return schema_and_converter(pg, include_unknown=self.include_unknown)

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        mapping = self._mapping(column)
        return None if mapping is None else mapping[0]

    def converter_for(self, table: Table, column: Column, schema: Schema) -> Converter:
        mapping = self._mapping(column)
        assert mapping is not None
        return mapping[1]

    def default_for(self, table: Table, column: Column, schema: Schema) -> Any:
        mapping = self._mapping(column)
        if mapping is None:
            return NO_DEFAULT
        value = parse_default(column.default_expression, mapping[1])
        if value is NO_DEFAULT or schema.type == "struct":
            return NO_DEFAULT
        return value

    def fallback_for(self, table: Table, column: Column, schema: Schema) -> Any:
        return fallback_value(schema)

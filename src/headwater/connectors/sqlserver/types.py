"""SQL Server column types -> Connect schemas and value converters, under every Debezium mode.

Values are read through mssql-python with the T-SQL expression `select_expression` gives per
column: most types come back exact as the driver's Python objects (int, bool, float, Decimal,
str, bytes, UUID, date); time, datetime, smalldatetime, datetime2 and datetimeoffset are cast to
their ODBC-canonical text (style 121), because the driver truncates fractions to microseconds
and SQL Server keeps 100 ns. Converters take that raw value (never None) and return the Connect
value as Debezium's SqlServerValueConverters / JdbcValueConverters produce it from mssql-jdbc's
objects; defaults are parsed from SQL Server's stored definitions as Debezium's
SqlServerDefaultValueConverter does. Every mode is resolved when the converters are built.
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date as _date
from datetime import datetime as _datetime
from datetime import time as _time
from decimal import Context, Decimal, InvalidOperation
from typing import Any

from headwater.connectors.sqlserver.columns import JDBC_TYPES, CatalogColumn, quote_name
from headwater.model.schema import NO_DEFAULT, Schema
from headwater.relational.column_mappers import UNSET_LENGTH, SourceColumn
from headwater.relational.java_time import civil_from_days, days_from_civil, days_java_hybrid, java_year
from headwater.relational.table import Column, Table

log = logging.getLogger(__name__)

Converter = Callable[[Any], Any]

DECIMAL_MODES = ("precise", "double", "string")
TIME_PRECISION_MODES = ("adaptive", "adaptive_time_microseconds", "connect", "microseconds", "nanoseconds")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")
DEFAULT_UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"

_NANOS_PER_DAY = 86_400 * 10**9
# wide enough for any SQL Server decimal (38 digits): quantize must never round or raise
_WIDE = Context(prec=80)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


class UnsupportedType(Exception):
    pass


class _Unavailable:
    """The raw value CORE puts for a LOB column SQL Server left NULL in an update row (Debezium's
    SqlServerValueConverters.UNAVAILABLE_VALUE)."""

    def __repr__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Any = _Unavailable()


@dataclass(frozen=True, slots=True)
class TypeSettings:
    """The connector options that shape values (SqlServerValueConverters' arguments)."""

    decimal_mode: str = "precise"            # decimal.handling.mode
    time_precision_mode: str = "adaptive"    # time.precision.mode
    binary_mode: str = "bytes"               # binary.handling.mode
    unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER   # unavailable.value.placeholder

    def __post_init__(self) -> None:
        for value, allowed, prop in ((self.decimal_mode, DECIMAL_MODES, "decimal.handling.mode"),
                                     (self.time_precision_mode, TIME_PRECISION_MODES, "time.precision.mode"),
                                     (self.binary_mode, BINARY_MODES, "binary.handling.mode")):
            if value not in allowed:
                raise ValueError(f"{prop}={value!r} is not supported by the SQL Server connector; "
                                 f"use one of {', '.join(allowed)}")

    @classmethod
    def from_config(cls, config: Any) -> TypeSettings:
        def get(key: str, default: Any) -> Any:
            value = config.get(key)
            return default if value is None else value

        return cls(decimal_mode=str(get("decimal.handling.mode", "precise")).lower(),
                   time_precision_mode=str(get("time.precision.mode", "adaptive")).lower(),
                   binary_mode=str(get("binary.handling.mode", "bytes")).lower(),
                   unavailable_placeholder=str(get("unavailable.value.placeholder",
                                                   DEFAULT_UNAVAILABLE_PLACEHOLDER)))


DEFAULT_TYPE_SETTINGS = TypeSettings()


def placeholder_bytes(setting: str) -> bytes:
    """`unavailable.value.placeholder` as bytes (`hex:` prefix: hex-encoded octets)."""
    if setting.startswith("hex:"):
        return bytes.fromhex(setting[4:])
    return setting.encode("utf-8")


# --- the T-SQL that reads a column's exact value

_TEXT_TEMPORAL = frozenset({"time", "datetime", "smalldatetime", "datetime2", "datetimeoffset"})
# CLR types: read as their serialized bytes (the driver has no type for them)
_CLR_BINARY = frozenset({"geometry", "geography", "hierarchyid"})


def _catalog(column: Column) -> CatalogColumn:
    native = column.native
    if not isinstance(native, CatalogColumn):
        raise UnsupportedType(f"column {column.name} has no SQL Server type information")
    return native


def select_expression(column: Column) -> str:
    """The T-SQL expression (the quoted column name inside) whose value, as mssql-python returns
    it, the column's converter takes: temporal types with fractions as ODBC-canonical text
    (style 121, SQL Server's default for them: every fraction digit the column keeps), CLR types
    as their serialized bytes, everything else as the driver's object."""
    name = quote_name(column.name)
    type_name = _catalog(column).type_name
    if type_name in _TEXT_TEMPORAL:
        return f"CONVERT(varchar(40), {name}, 121)"
    if type_name in _CLR_BINARY:
        return f"CAST({name} AS varbinary(max))"
    return name


# --- numbers

_N_5_BITS = [(5 ** i).bit_length() for i in range(27)]


def _java_wrap(value: int, width: int) -> int:
    """Java's int/long arithmetic: wraps at `width` bits."""
    value &= (1 << width) - 1
    return value - (1 << width) if value >> (width - 1) else value


def _java_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def java_float_digits(bits: int) -> tuple[str, int]:
    """The digits and decimal exponent (value = 0.DIGITS x 10^exp) of a positive float given as
    its IEEE bits, as Java 17's Float.toString prints them (jdk.internal.math.FloatingDecimal's
    dtoa: Steele & White with its estimate, its power-of-two hack and its int/long overflows; not
    always the shortest digits: Float.MIN_NORMAL prints 1.17549435E-38). Checked against the JVM
    in tests/connectors/sqlserver/test_types_float32.py."""
    e, fract = (bits >> 23) & 0xFF, bits & 0x7FFFFF
    if e == 0:
        if fract == 0:
            return "0", 1
        leading = 32 - fract.bit_length()
        shift = leading - 8
        fract <<= shift
        binexp, nsig = 1 - shift - 127, 32 - leading
    else:
        fract |= 1 << 23
        binexp, nsig = e - 127, 24
    fract_bits = fract << 29                       # the double layout dtoa works in
    tail = (fract_bits & -fract_bits).bit_length() - 1
    nfract = 53 - tail
    ntiny = max(0, nfract - binexp - 1)
    if -21 <= binexp <= 62 and ntiny == 0 and nfract < 64:
        # an integer: its digits, the ones past the float's precision rounded off
        p2 = binexp - nsig - 1
        insignificant = int(p2 * 0.3010299956639812) if binexp > nsig and 1 < p2 < 64 else 0
        value = fract_bits << (binexp - 52) if binexp >= 52 else fract_bits >> (52 - binexp)
        dec = 0
        if insignificant:
            pow10 = 10 ** insignificant
            residue = value % pow10
            value //= pow10
            dec = insignificant
            if residue >= pow10 >> 1:
                value += 1
        text = str(value)
        return text.rstrip("0") or "0", len(text) + dec
    d2 = 1.0 + (fract_bits & ((1 << 52) - 1)) / float(1 << 52)
    dec_exp = math.floor((d2 - 1.5) * 0.289529654 + 0.176091259 + binexp * 0.301029995663981)
    b5, s5 = max(0, -dec_exp), max(0, dec_exp)
    b2 = b5 + ntiny + binexp
    s2 = s5 + ntiny
    m5, m2 = b5, b2 - nsig
    fb = fract_bits >> tail
    b2 -= nfract - 1
    common = min(b2, s2)
    b2, s2, m2 = b2 - common, s2 - common, m2 - common
    if nfract == 1:
        m2 -= 1  # Java's hack for exact powers of two (halves M on both sides)
    if m2 < 0:
        b2, s2, m2 = b2 - m2, s2 - m2, 0
    bbits = nfract + b2 + (_N_5_BITS[b5] if b5 < 27 else b5 * 3)
    tensbits = s2 + 1 + (_N_5_BITS[s5 + 1] if s5 + 1 < 27 else (s5 + 1) * 3)
    digits: list[int] = []
    if bbits < 64 and tensbits < 64:
        width = 32 if bbits < 32 and tensbits < 32 else 64

        def w(v: int) -> int:
            return _java_wrap(v, width)
        b, s, m = w(w(fb * 5 ** b5) << b2), w(5 ** s5 << s2), w(5 ** m5 << m2)
        tens = w(s * 10)
        first = True
        while True:
            q = _java_div(b, s)
            b = w(10 * (b - q * s))
            m = w(m * 10)
            if m > 0:
                low, high = b < m, w(b + m) > tens
            else:
                low = high = True
            if first:
                first = False
                if q == 0 and not high:
                    dec_exp -= 1
                else:
                    digits.append(q)
                if dec_exp < -3 or dec_exp >= 8:
                    low = high = False
            else:
                digits.append(q)
            if low or high:
                break
        low_diff = w(w(b << 1) - tens)
    else:
        b, s, m = fb * 5 ** b5 << b2, 5 ** s5 << s2, 5 ** m5 << m2
        tens = s * 10
        first = True
        while True:
            q, b = divmod(b, s)
            b *= 10
            m *= 10
            low, high = b < m, tens <= b + m
            if first:
                first = False
                if q == 0 and not high:
                    dec_exp -= 1
                else:
                    digits.append(q)
                if dec_exp < -3 or dec_exp >= 8:
                    low = high = False
            else:
                digits.append(q)
            if low or high:
                break
        low_diff = (b << 1) - tens if high and low else 0
    dec = dec_exp + 1
    if high and (not low or low_diff > 0 or (low_diff == 0 and digits[-1] & 1)):
        i = len(digits) - 1
        while i >= 0 and digits[i] == 9:
            digits[i] = 0
            i -= 1
        if i < 0:
            digits = [1, *digits]
            dec += 1
        else:
            digits[i] += 1
    return "".join(map(str, digits)).rstrip("0") or "0", dec


def _float32(value: float) -> float:
    """A REAL as the double Debezium's JSON carries: Java prints the float (Float.toString), and
    that text read back is a double; Python would print the float's exact double
    (4.322999954223633 for 4.323f)."""
    return _float32_of_bits(struct.unpack(">I", struct.pack(">f", value))[0])


@functools.lru_cache(maxsize=4096)
def _float32_of_bits(bits: int) -> float:
    # cached by bits, not by value: -0.0 == 0.0 would share an entry
    if (bits >> 23) & 0xFF == 0xFF:
        return struct.unpack(">f", struct.pack(">I", bits))[0]  # NaN, infinities
    digits, exponent = java_float_digits(bits & 0x7FFFFFFF)
    number = float(f"0.{digits}e{exponent}")
    return -number if bits >> 31 else number


def _decimal_converter(mode: str, scale: int) -> Converter:
    quantum = Decimal(1).scaleb(-scale)

    def exact(value: Any) -> Decimal:
        d = value if isinstance(value, Decimal) else Decimal(str(value))
        return d if d.as_tuple().exponent == -scale else d.quantize(quantum, context=_WIDE)

    if mode == "double":
        return lambda value: float(exact(value))
    if mode == "string":
        return lambda value: format(exact(value), "f")
    return exact


def _decimal_schema(mode: str, precision: int, scale: int) -> Schema:
    if mode == "double":
        return Schema("float64")
    if mode == "string":
        return Schema("string")
    return Schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1,
                  parameters={"scale": str(scale), "connect.decimal.precision": str(precision)})


# --- binary

def _binary_encoder(mode: str) -> Callable[[bytes], Any]:
    if mode == "base64":
        return lambda b: base64.b64encode(b).decode("ascii")
    if mode == "base64-url-safe":
        return lambda b: base64.urlsafe_b64encode(b).decode("ascii")  # Java's URL encoder keeps '='
    if mode == "hex":
        return bytes.hex
    return bytes


# --- dates and times

_TIME_RE = re.compile(r"(\d{1,2}):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?$")
_DATETIME_RE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)(?:[ T](\d{1,2}):(\d\d)(?::(\d\d)(?:\.(\d{0,9}))?)?)?"
    r"\s*(?:(Z)|([+-])(\d\d):(\d\d))?$")


def _fraction_nanos(text: str | None) -> int:
    return int((text or "").ljust(9, "0")[:9] or 0)


def _time_nanos(value: Any) -> int:
    """time text (hh:mi:ss[.fffffff]) or a datetime.time -> nanoseconds past midnight."""
    if isinstance(value, _time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 10**9 + value.microsecond * 1000
    m = _TIME_RE.match(value)
    if m is None:
        raise ValueError(f"unrecognised time {value!r}")
    hh, mi, ss, frac = m.groups()
    return ((int(hh) * 60 + int(mi)) * 60 + int(ss or 0)) * 10**9 + _fraction_nanos(frac)


def _split_datetime(value: Any) -> tuple[int, int, int, int, int]:
    """datetime text (yyyy-mm-dd hh:mi:ss[.f][ +hh:mi]) or a datetime/date -> (year, month, day,
    nanoseconds of the day, offset minutes)."""
    if isinstance(value, _datetime):
        offset = value.utcoffset()
        nanos = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**9 + value.microsecond * 1000
        return (value.year, value.month, value.day, nanos,
                0 if offset is None else int(offset.total_seconds()) // 60)
    if isinstance(value, _date):
        return value.year, value.month, value.day, 0, 0
    m = _DATETIME_RE.match(value.strip())
    if m is None:
        raise ValueError(f"unrecognised date/time {value!r}")
    year, month, day, hh, mi, ss, frac, _z, sign, oh, om = m.groups()
    nanos = ((int(hh or 0) * 60 + int(mi or 0)) * 60 + int(ss or 0)) * 10**9 + _fraction_nanos(frac)
    offset = 0 if sign is None else (int(oh) * 60 + int(om)) * (-1 if sign == "-" else 1)
    return int(year), int(month), int(day), nanos, offset


def _epoch_nanos(value: Any) -> int:
    """A datetime without zone -> nanoseconds since the epoch, as if UTC (proleptic Gregorian, as
    Debezium's LocalDateTime conversions count)."""
    year, month, day, nanos, _ = _split_datetime(value)
    return days_from_civil(year, month, day) * _NANOS_PER_DAY + nanos


def _epoch_days(value: Any) -> int:
    year, month, day, _, _ = _split_datetime(value)
    return days_from_civil(year, month, day)


def _nano_timestamp(value: Any) -> int | None:
    nanos = _epoch_nanos(value)
    if not _LONG_MIN <= nanos <= _LONG_MAX:
        # Debezium: Math.multiplyExact overflows, it warns and writes null (datetime2(7) past 2262)
        log.warning("Failed to convert value %r: it does not fit NanoTimestamp's int64 nanoseconds; null", value)
        return None
    return nanos


def _offset_text(minutes: int) -> str:
    """java.time's offset id: Z for zero, else ±hh:mm."""
    if minutes == 0:
        return "Z"
    sign = "+" if minutes > 0 else "-"
    minutes = abs(minutes)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _zoned_timestamp(value: Any) -> str:
    """datetimeoffset -> Debezium's ZonedTimestamp keeping the offset. Debezium builds it from
    mssql-jdbc's DateTimeOffset.getTimestamp(): the UTC fields read as a java.sql.Timestamp (the
    Julian calendar before 1582-10-15), whose getTime()/1000 (truncated) and nanos become a
    LocalDateTime at the offset, printed with ISO_OFFSET_DATE_TIME (only the digits needed)."""
    year, month, day, nanos, offset = _split_datetime(value)
    utc_nanos = days_from_civil(year, month, day) * _NANOS_PER_DAY + nanos - offset * 60 * 10**9
    u_days, u_rest = divmod(utc_nanos, _NANOS_PER_DAY)
    uy, um, ud = civil_from_days(u_days)
    fraction = u_rest % 10**9
    millis = days_java_hybrid(uy, um, ud) * 86_400_000 + u_rest // 10**6
    seconds = int(millis / 1000)  # Java's long division truncates toward zero
    local = seconds + offset * 60
    l_days, l_secs = divmod(local, 86_400)
    ly, lm, ld = civil_from_days(l_days)
    text = f"{java_year(ly)}-{lm:02d}-{ld:02d}T{l_secs // 3600:02d}:{l_secs // 60 % 60:02d}:{l_secs % 60:02d}"
    if fraction:
        text += "." + f"{fraction:09d}".rstrip("0")
    return text + _offset_text(offset)


def _uuid(value: Any) -> str:
    return str(value).upper()  # mssql-jdbc's getString of a uniqueidentifier is upper case


_DATE = Schema("int32", name="io.debezium.time.Date", version=1)
_CONNECT_DATE = Schema("int32", name="org.apache.kafka.connect.data.Date", version=1)
_TIME = Schema("int32", name="io.debezium.time.Time", version=1)
_MICRO_TIME = Schema("int64", name="io.debezium.time.MicroTime", version=1)
_NANO_TIME = Schema("int64", name="io.debezium.time.NanoTime", version=1)
_CONNECT_TIME = Schema("int32", name="org.apache.kafka.connect.data.Time", version=1)
_TIMESTAMP = Schema("int64", name="io.debezium.time.Timestamp", version=1)
_MICRO_TIMESTAMP = Schema("int64", name="io.debezium.time.MicroTimestamp", version=1)
_NANO_TIMESTAMP = Schema("int64", name="io.debezium.time.NanoTimestamp", version=1)
_CONNECT_TIMESTAMP = Schema("int64", name="org.apache.kafka.connect.data.Timestamp", version=1)
_ZONED_TIMESTAMP = Schema("string", name="io.debezium.time.ZonedTimestamp", version=1)


def _time_mapping(mode: str, precision: int) -> tuple[Schema, Converter]:
    millis = (_TIME, lambda v: _time_nanos(v) // 10**6)
    micros = (_MICRO_TIME, lambda v: _time_nanos(v) // 1000)
    nanos = (_NANO_TIME, _time_nanos)
    if mode == "connect":
        return _CONNECT_TIME, lambda v: _time_nanos(v) // 10**6
    if mode in ("adaptive_time_microseconds", "microseconds"):
        return micros
    if mode == "nanoseconds":
        return nanos
    return millis if precision <= 3 else micros if precision <= 6 else nanos


def _timestamp_mapping(mode: str, precision: int) -> tuple[Schema, Converter]:
    millis = (_TIMESTAMP, lambda v: _epoch_nanos(v) // 10**6)
    micros = (_MICRO_TIMESTAMP, lambda v: _epoch_nanos(v) // 1000)
    nanos = (_NANO_TIMESTAMP, _may_be_null(_nano_timestamp))
    if mode == "connect":
        return _CONNECT_TIMESTAMP, lambda v: _epoch_nanos(v) // 10**6
    if mode == "microseconds":
        return micros
    if mode == "nanoseconds":
        return nanos
    return millis if precision <= 3 else micros if precision <= 6 else nanos


def _may_be_null(converter: Converter) -> Converter:
    converter.may_be_null = True  # type: ignore[attr-defined]
    return converter


# --- the mapping of every type

_STRING_TYPES = frozenset({"char", "varchar", "text", "nchar", "nvarchar", "ntext", "xml", "sysname"})
# hierarchyid: mssql-jdbc types it VARBINARY, so Debezium emits its bytes (unverified: the emulator has no
# CLR types). geometry/geography are JDBC GEOMETRY/GEOGRAPHY, for which Debezium 3.6 has no converter (a
# TODO in SqlServerValueConverters): left out, like sql_variant.
_BINARY_TYPES = frozenset({"binary", "varbinary", "image", "timestamp", "hierarchyid"})
_DECIMAL_TYPES = frozenset({"decimal", "numeric", "money", "smallmoney"})
_INTEGERS = {"tinyint": "int16", "smallint": "int16", "int": "int32", "bigint": "int64"}
# update rows may leave these NULL with the update mask bit unset (Debezium's "max" JDBC types:
# LONGVARCHAR, LONGNVARCHAR, LONGVARBINARY)
_LOB_TYPES = frozenset({"text", "ntext", "xml", "image"})


def unavailable_when_unchanged(column: Column) -> bool:
    """Whether Debezium replaces this column's NULL in an update row (change-table operations 3
    and 4) by its placeholder when the update mask says the column did not change: the columns
    mssql-jdbc types LONGVARCHAR, LONGNVARCHAR or LONGVARBINARY (text, ntext, xml, image). CORE
    then puts `UNAVAILABLE` as the raw value."""
    return _catalog(column).type_name in _LOB_TYPES


def schema_and_converter(c: CatalogColumn, settings: TypeSettings) -> tuple[Schema, Converter] | None:
    """Connect schema (required variant) and converter for a column's type, or None to leave the
    column out (types Debezium has no converter for: sql_variant)."""
    name = c.type_name
    if name == "bit":
        return Schema("boolean"), bool
    if name in _INTEGERS:
        return Schema(_INTEGERS[name]), int
    if name == "real":
        return Schema("float32"), _float32
    if name == "float":
        return Schema("float64"), float
    if name in _DECIMAL_TYPES:
        return (_decimal_schema(settings.decimal_mode, c.precision, c.scale),
                _decimal_converter(settings.decimal_mode, c.scale))
    if name in _STRING_TYPES:
        return Schema("string"), str
    if name == "uniqueidentifier":
        return Schema("string"), _uuid
    if name in _BINARY_TYPES:
        encoder = _binary_encoder(settings.binary_mode)
        return Schema("bytes") if settings.binary_mode == "bytes" else Schema("string"), encoder
    mode = settings.time_precision_mode
    if name == "date":
        return (_CONNECT_DATE if mode == "connect" else _DATE), _epoch_days
    if name == "time":
        return _time_mapping(mode, c.scale)
    if name in ("datetime", "smalldatetime"):
        return _timestamp_mapping(mode, 3)
    if name == "datetime2":
        return _timestamp_mapping(mode, c.scale)
    if name == "datetimeoffset":
        return _ZONED_TIMESTAMP, _zoned_timestamp
    return None


_FALLBACK_BY_TYPE = {"int8": 0, "int16": 0, "int32": 0, "int64": 0, "float32": 0.0, "float64": 0.0,
                     "boolean": False, "string": "", "bytes": b""}


# --- defaults, as SqlServerDefaultValueConverter parses SQL Server's stored definitions

def _nullable_value(v: str) -> str | None:
    """Debezium's nullableDefaultValueMapper: the text between the last '(' and the first ')';
    None for NULL."""
    start = v.rfind("(") + 1
    end = v.find(")")
    value = v[start:end if end >= 0 else len(v)]
    return None if value.upper() == "NULL" else value


def _nullable_string(v: str) -> str | None:
    """Debezium's nullableStringDefaultValueMapper: between the first and the last quote (quotes
    left doubled), then the parenthesis trimming above."""
    start = v.find("'") + 1
    end = v.rfind("'") if "'" in v else len(v)
    return _nullable_value(v[start:end])


_JAVA_INT = re.compile(r"[+-]?\d+$")
_JAVA_DOUBLE = re.compile(r"\s*[+-]?(NaN|Infinity|((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?)\s*$")
_JAVA_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _java_int(text: str, bits: int) -> int:
    if not _JAVA_INT.match(text):
        raise ValueError(text)
    value = int(text)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError(text)
    return value


def _java_double(text: str) -> float:
    if not _JAVA_DOUBLE.match(text):
        raise ValueError(text)
    return float(text.strip().rstrip("fFdD"))


def _parse_temporal(type_name: str, text: str) -> Any:
    """SELECT PARSE(<text> AS <type>) for the ISO forms (and m/d/y dates): the value the server
    would give, in the raw form the converters take."""
    us = re.match(r"(\d{1,2})/(\d{1,2})/(\d{4})(.*)$", text.strip())
    if us is not None:
        text = f"{us.group(3)}-{int(us.group(1)):02d}-{int(us.group(2)):02d}{us.group(4)}"
    if type_name == "time":
        only_time = _TIME_RE.match(text.strip())
        nanos = _time_nanos(text.strip()) if only_time else _split_datetime(text)[3]
        nanos = (nanos + 50) // 100 * 100  # time(7): 100 ns
        return _time_text(nanos)
    if _TIME_RE.match(text.strip()):
        text = "1900-01-01 " + text.strip()
    year, month, day, nanos, offset = _split_datetime(text)
    _date(year, month, day)  # validates
    if type_name == "date":
        return f"{year:04d}-{month:02d}-{day:02d}"
    days = days_from_civil(year, month, day)
    if type_name == "datetime":
        ticks = (nanos * 300 + 5 * 10**8) // 10**9          # 1/300 s, rounded
        nanos = (ticks * 10 + 1) // 3 * 10**6               # mssql-jdbc's milliseconds
    elif type_name == "smalldatetime":
        nanos = (nanos + 30_001_000_000) // (60 * 10**9) * 60 * 10**9  # ss.fff >= 29.999 rounds up
    else:
        nanos = (nanos + 50) // 100 * 100
    days, nanos = days + nanos // _NANOS_PER_DAY, nanos % _NANOS_PER_DAY
    y, m, d = civil_from_days(days)
    text = f"{y:04d}-{m:02d}-{d:02d} {_time_text(nanos)}"
    if type_name == "datetimeoffset":
        text += f" {'-' if offset < 0 else '+'}{abs(offset) // 60:02d}:{abs(offset) % 60:02d}"
    return text


def _time_text(nanos: int) -> str:
    secs, frac = divmod(nanos, 10**9)
    return f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}.{frac // 100:07d}"


_TEMPORAL_DEFAULTS = frozenset({"date", "datetime", "datetime2", "datetimeoffset", "smalldatetime", "time"})


def parse_default_raw(type_name: str, definition: str | None) -> Any:
    """A default definition -> the raw value (the form the converters take), None for a NULL
    default, NO_DEFAULT where Debezium takes none (no mapper for the type, an expression).
    Raises ValueError/InvalidOperation/IndexError when it cannot be parsed (Debezium: WARN)."""
    if definition is None:
        return NO_DEFAULT
    v = definition
    if type_name == "bigint":
        value = _nullable_value(v)
        return None if value is None else _java_int(value[:-1] if value.endswith(".") else value, 64)
    if type_name == "int":
        value = _nullable_value(v)
        return None if value is None else _java_int(value, 32)
    if type_name in ("smallint", "tinyint"):
        value = _nullable_value(v)
        return None if value is None else _java_int(value, 16)
    if type_name == "bit":
        return v == "((1))"
    if type_name in _DECIMAL_TYPES:
        text = v[2:-2]
        if not _JAVA_DECIMAL.match(text):
            raise InvalidOperation(text)
        return Decimal(text)
    if type_name in ("float", "real"):
        value = _nullable_value(v)
        return None if value is None else _java_double(value)
    if type_name in _TEMPORAL_DEFAULTS:
        return _parse_temporal(type_name, v[2:-2])
    if type_name in ("char", "text", "varchar", "nchar", "ntext", "nvarchar"):
        return _nullable_string(v)
    if type_name in ("binary", "image", "varbinary"):
        hex_text = v[3:-1]
        if len(hex_text) % 2:
            raise ValueError(hex_text)
        return bytes.fromhex(hex_text)
    return NO_DEFAULT  # uniqueidentifier, xml, rowversion, ...: Debezium has no mapper


class SqlServerValueConverters:
    """`ValueConverters` for SQL Server (see headwater.relational.table_schema). Raw values are
    what mssql-python returns for `select_expression(column)`; `UNAVAILABLE` marks a LOB column
    an update row left out."""

    def __init__(self, settings: TypeSettings | None = None) -> None:
        self.settings = settings or DEFAULT_TYPE_SETTINGS
        self.unavailable_marker = UNAVAILABLE
        self.unavailable_placeholder = placeholder_bytes(self.settings.unavailable_placeholder)

    def _mapping(self, column: Column) -> tuple[Schema, Converter] | None:
        return schema_and_converter(_catalog(column), self.settings)

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        mapping = self._mapping(column)
        if mapping is None:
            # as Debezium's TableSchemaBuilder: a column without a converter is left out (the SQL
            # Server connector has no include.unknown.datatypes)
            log.warning("Column %s.%s has type %s, for which Debezium has no converter: it is left out",
                        table.id, column.name, _catalog(column).type_name)
            return None
        return mapping[0]

    def converter_for(self, table: Table, column: Column, schema: Schema) -> Converter:
        mapping = self._mapping(column)
        assert mapping is not None
        convert = mapping[1]
        if column.optional or not getattr(convert, "may_be_null", False):
            return convert
        name = column.name

        def required(value: Any) -> Any:
            out = convert(value)
            if out is None:
                raise ValueError(f"column {name}: value {value!r} has no representation in its schema "
                                 "and the column is NOT NULL")
            return out
        return required

    def raw_default_for(self, table: Table, column: Column) -> Any:
        """The column's constant default in the raw form of its values, for custom converters;
        NO_DEFAULT where Debezium takes none."""
        c = _catalog(column)
        if c.identity:  # Debezium finds no mapper for "int identity"
            return NO_DEFAULT
        try:
            value = parse_default_raw(c.type_name, column.default_expression)
        except (ValueError, InvalidOperation, IndexError):
            log.warning("Cannot parse column default value '%s' to type '%s'. Expression evaluation is not "
                        "supported.", column.default_expression, c.type_name)
            return NO_DEFAULT
        return NO_DEFAULT if value is None else value

    def default_for(self, table: Table, column: Column, schema: Schema) -> Any:
        raw = self.raw_default_for(table, column)
        if raw is NO_DEFAULT:
            return NO_DEFAULT
        c = _catalog(column)
        mapping = self._mapping(column)
        if mapping is None:
            return NO_DEFAULT
        if c.type_name in _DECIMAL_TYPES:
            # the default keeps its own scale, raised (never lowered) to the column's in precise mode
            value: Any = raw
            mode = self.settings.decimal_mode
            if mode == "double":
                return float(value)
            if mode == "string":
                return format(value, "f")
            if -value.as_tuple().exponent < c.scale:
                value = value.quantize(Decimal(1).scaleb(-c.scale), context=_WIDE)
            return value
        try:
            value = mapping[1](raw)
        except (ValueError, OverflowError):
            return NO_DEFAULT
        return NO_DEFAULT if value is None else value

    def fallback_for(self, table: Table, column: Column, schema: Schema) -> Any:
        if schema.name == "org.apache.kafka.connect.data.Decimal":
            return Decimal(0)
        return _FALLBACK_BY_TYPE.get(schema.type)

    def unavailable_for(self, table: Table, column: Column, schema: Schema) -> Any:
        """What Debezium emits for a LOB column an update row left out: the placeholder as a
        string (text, ntext, xml) or as bytes in the binary mode's form (image)."""
        c = _catalog(column)
        name = c.type_name
        if name not in _LOB_TYPES:
            # (max) columns are NULL in such rows too, but mssql-jdbc types them VARCHAR/NVARCHAR/
            # VARBINARY, so Debezium keeps the NULL (recorded: types, update-before images)
            return None if c.max_length == -1 and name in ("varchar", "nvarchar", "varbinary") else NO_DEFAULT
        if name == "image":
            return _binary_encoder(self.settings.binary_mode)(self.unavailable_placeholder)
        return self.unavailable_placeholder.decode("utf-8", "replace")

    def source_column(self, table: Table, column: Column) -> SourceColumn:
        c = _catalog(column)
        return SourceColumn(column.name, column.type_name, JDBC_TYPES.get(c.type_name, 1111),
                            column.length if column.length is not None else UNSET_LENGTH, column.scale)



# --- the schema history's column descriptions

def describe_column(table: Table, column: Column) -> Any:
    """The column as Debezium's schema history and schema-change events describe it."""
    from headwater.relational.schema_change import ColumnDescription

    c = _catalog(column)
    return ColumnDescription(
        name=column.name, jdbc_type=JDBC_TYPES.get(c.type_name, 1111), type_name=column.type_name,
        position=column.position, native_type=None, type_expression=column.type_name, charset_name=None,
        length=column.length, scale=column.scale, optional=column.optional, auto_incremented=c.identity,
        generated=column.generated, comment=None,
        has_default_value=column.default_expression is not None or column.optional,
        default_value_expression=column.default_expression)


_MAX_SIZE = 2_147_483_647
_PRECISION_TYPES = frozenset({"bit", "tinyint", "smallint", "int", "bigint", "decimal", "numeric", "money",
                              "smallmoney", "time", "datetime", "smalldatetime", "datetime2", "datetimeoffset",
                              "real", "float", "date"})


def column_from_description(d: dict[str, Any], schema: str = "", table: str = "") -> Column:
    """A column back from a history record's JSON column (`columns[]` of a table change)."""
    from headwater.connectors.sqlserver.columns import column_from_catalog

    type_name = str(d["typeName"])
    identity = type_name.endswith(" identity")
    base = type_name[: -len(" identity")] if identity else type_name
    length = d.get("length")
    scale = d.get("scale")
    precision = int(length) if base in _PRECISION_TYPES and length is not None else 0
    if base in _PRECISION_TYPES or length is None:
        max_length = 0
    elif length == _MAX_SIZE and base in ("varchar", "nvarchar", "varbinary"):
        max_length = -1
    elif base in ("nchar", "nvarchar", "sysname"):
        max_length = int(length) * 2
    else:
        max_length = int(length)
    default = d.get("defaultValueExpression")
    catalog = CatalogColumn(schema, table, str(d["name"]), int(d["position"]), base, max_length, precision,
                            int(scale) if scale is not None else 0, bool(d.get("optional", True)), default,
                            identity, bool(d.get("generated", False)), None)
    return column_from_catalog(catalog)

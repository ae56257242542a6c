"""PostgreSQL column types -> Connect schemas and value converters, under every Debezium mode.

Both capture paths read values in PostgreSQL's text form: pgoutput sends text, and the snapshot
reads `COPY … TO STDOUT` text. Converters take that text (never None) and return the Connect
value (int, str, bytes, Decimal, float, bool, dict, list), or None where Debezium emits null.

Debezium itself reads snapshot rows through JDBC objects and streamed rows from pgoutput text, and
a few values come out differently on the two paths (dates that are infinite or BC, `name`
columns). Arrays are parsed by pgJDBC on both paths, so their elements behave like the snapshot's
JDBC values (java.sql.Date/Time/Timestamp). `schema_and_converter(streaming=…)` reproduces both;
the recorded evidence is tests/conformance/extra (types_*), the list in docs/compat.md ("Types").

Every mode (`TypeSettings`) is resolved when the converters are built, never per value. Here is
PostgreSQL's side of times (its text forms, infinities, BC dates, pgJDBC's sentinels); how Java
computes and prints them is headwater.relational.java_time's.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date as _date
from datetime import datetime as _datetime
from datetime import timedelta as _timedelta
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from struct import pack as struct_pack
from struct import unpack_from
from typing import Any

from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.model.schema import NO_DEFAULT, Field, Schema
from headwater.relational.java_time import (
    MICROS_PER_DAY,
    days_from_civil,
    days_java_hybrid,
    interval_iso,
    micro_duration,
    zoned_time_iso,
    zoned_timestamp_iso,
)
from headwater.relational.table import Column, Table

Converter = Callable[[str], Any]

# wide enough for any PostgreSQL numeric (Decimal.normalize must not round)
_EXACT_CONTEXT = Context(prec=150_000, Emax=999_999, Emin=-999_999)


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

    @property
    def is_domain(self) -> bool:
        return self.declared_name is not None and self.declared_name != self.name


@dataclass(frozen=True, slots=True)
class TypeSettings:
    """The connector options that shape values (Debezium's PostgresValueConverter arguments)."""

    decimal_mode: str = "precise"            # decimal.handling.mode: precise | double | string
    time_precision_mode: str = "adaptive"    # time.precision.mode: adaptive | adaptive_time_microseconds | connect
    binary_mode: str = "bytes"               # binary.handling.mode: bytes | base64 | base64-url-safe | hex
    hstore_mode: str = "json"                # hstore.handling.mode: json | map
    interval_mode: str = "numeric"           # interval.handling.mode: numeric | string
    money_fraction_digits: int = 2           # money.fraction.digits (scale of MONEY in precise mode)

    @classmethod
    def from_config(cls, config: Any) -> TypeSettings:
        return cls(decimal_mode=config.get("decimal.handling.mode"),
                   time_precision_mode=config.get("time.precision.mode"),
                   binary_mode=config.get("binary.handling.mode"),
                   hstore_mode=config.get("hstore.handling.mode"),
                   interval_mode=config.get("interval.handling.mode"),
                   money_fraction_digits=config.get("money.fraction.digits"))


DEFAULT_TYPE_SETTINGS = TypeSettings()


class UnsupportedType(Exception):
    pass


class _NullArray(Exception):
    """An array element Debezium cannot convert: the whole array value becomes null."""


def _may_be_null(converter: Converter) -> Converter:
    """Mark a converter that returns None for some non-null text (Debezium emits null there;
    for a NOT NULL column the event then fails, see PostgresValueConverters.converter_for)."""
    converter.may_be_null = True  # type: ignore[attr-defined]
    return converter


# -- text parsers: scalars ----------------------------------------------------------------------

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


def _binary_encoder(mode: str) -> Callable[[bytes], Any] | None:
    """binary.handling.mode: how raw bytes are emitted (None: as bytes)."""
    if mode == "base64":
        return lambda b: base64.b64encode(b).decode("ascii")
    if mode == "base64-url-safe":
        return lambda b: base64.urlsafe_b64encode(b).decode("ascii")  # Java's URL encoder keeps '='
    if mode == "hex":
        return bytes.hex
    return None


def _binary_schema(mode: str) -> Schema:
    return Schema("bytes") if mode == "bytes" else Schema("string")


def encode_binary(value: bytes, mode: str) -> Any:
    """Raw bytes (a bytea value, a logical message's content) as binary.handling.mode emits them."""
    encoder = _binary_encoder(mode)
    return value if encoder is None else encoder(value)


# --- dates and times (the Java calendar and text rules: headwater.relational.java_time)

_EPOCH_ORDINAL = _date(1970, 1, 1).toordinal()
_EPOCH_DATETIME = _datetime(1970, 1, 1)
_MICROSECOND = _timedelta(microseconds=1)
_MILLISECOND = _timedelta(milliseconds=1)
_DATE_RE = re.compile(r"(\d{4,})-(\d\d)-(\d\d)( BC)?$")

# pgJDBC's infinity sentinels as Debezium ends up emitting them (recorded, types_time_*):
# JDBC (snapshot, and arrays on both paths) turns ±infinity into java.sql.Date(±292 million years),
# whose epoch day Debezium truncates to an int; the streaming text parser maps them to
# LocalDate -5877611-06-21/22 (so +infinity is a negative day number too).
_DATE_INFINITY_JDBC = {"infinity": -622191234, "-infinity": -625821272}
_DATE_INFINITY_TEXT = {"infinity": -2147472692, "-infinity": -2147472691}
# PGStatement.DATE_POSITIVE/NEGATIVE_INFINITY (milliseconds), used as-is for µs columns too
_TS_INFINITY_MICROS = {"infinity": 9223372036825200000, "-infinity": -9223372036832400000}
_TS_INFINITY_MILLIS = {"infinity": 9223372036825200, "-infinity": -9223372036832400}


def _date_days(text: str) -> int:
    """date text -> epoch days, as Debezium's streaming path (pgoutput text) gives them."""
    if len(text) == 10:  # YYYY-MM-DD (AD, 4-digit year): the C parser is several times faster
        return _date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL
    special = _DATE_INFINITY_TEXT.get(text)
    if special is not None:
        return special
    m = _DATE_RE.match(text)
    if m is None:
        raise ValueError(f"unrecognised date {text!r}")
    year = int(m.group(1))
    return days_from_civil(1 - year if m.group(4) else year, int(m.group(2)), int(m.group(3)))


def _date_days_jdbc(text: str) -> int:
    """date text -> epoch days as a JDBC java.sql.Date gives them to Debezium (snapshot rows and
    array elements): `toLocalDate()` keeps the calendar fields and drops the era, so 44 BC
    becomes 44 AD."""
    if len(text) == 10:
        return _date.fromisoformat(text).toordinal() - _EPOCH_ORDINAL
    special = _DATE_INFINITY_JDBC.get(text)
    if special is not None:
        return special
    m = _DATE_RE.match(text)
    if m is None:
        raise ValueError(f"unrecognised date {text!r}")
    return days_from_civil(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def _time_micros(text: str) -> int:
    if text.startswith("24:00:00"):
        return MICROS_PER_DAY
    hh, mm, rest = text.split(":")
    if "." in rest:
        ss, frac = rest.split(".")
        micros = int((frac + "000000")[:6])
    else:
        ss, micros = rest, 0
    return ((int(hh) * 60 + int(mm)) * 60 + int(ss)) * 1_000_000 + micros


def _time_millis(text: str) -> int:
    return _time_micros(text) // 1000


def _time_millis_jdbc(text: str) -> int:
    """java.sql.Time (array elements): millisecond precision, 24:00:00 wraps to midnight."""
    return _time_micros(text) // 1000 % 86_400_000


def _time_micros_jdbc(text: str) -> int:
    return _time_millis_jdbc(text) * 1000


_TS_RE = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::?\d\d)?(?::?\d\d)?)?( BC)?$")


def _offset_seconds(tz: str) -> int:
    sign = -1 if tz[0] == "-" else 1
    parts = tz[1:].replace(":", "")
    return sign * (int(parts[0:2]) * 3600 + int(parts[2:4] or 0) * 60 + int(parts[4:6] or 0))


def _split_timestamp(text: str) -> tuple[int, int, int, int, int, int, int, int, bool]:
    """(year as printed, month, day, hour, minute, second, micros, utc offset seconds, BC)."""
    m = _TS_RE.match(text)
    if m is None:
        raise ValueError(f"unrecognised timestamp {text!r}")
    year, month, day, hh, mi, ss, frac, tz, bc = m.groups()
    micros = int(frac.ljust(6, "0")) if frac else 0
    return (int(year), int(month), int(day), int(hh), int(mi), int(ss), micros,
            _offset_seconds(tz) if tz else 0, bc is not None)


def _epoch_micros(text: str, days: Callable[[int, int, int], int] = days_from_civil) -> int:
    year, month, day, hh, mi, ss, micros, offset, bc = _split_timestamp(text)
    seconds = days(1 - year if bc else year, month, day) * 86_400 + hh * 3600 + mi * 60 + ss - offset
    return seconds * 1_000_000 + micros


def _timestamp_micros(text: str) -> int:
    """timestamp text -> µs since the epoch, as if UTC (proleptic Gregorian, BC included)."""
    if len(text) <= 26 and text[-1] != "C" and text[4:5] == "-":
        # the common case (a 4-digit AD year): datetime's C parser, several times faster
        return (_datetime.fromisoformat(text) - _EPOCH_DATETIME) // _MICROSECOND
    special = _TS_INFINITY_MICROS.get(text)
    return special if special is not None else _epoch_micros(text)


def _timestamp_millis(text: str) -> int:
    if len(text) <= 26 and text[-1] != "C" and text[4:5] == "-":
        return (_datetime.fromisoformat(text) - _EPOCH_DATETIME) // _MILLISECOND
    special = _TS_INFINITY_MILLIS.get(text)
    return special if special is not None else _epoch_micros(text) // 1000


def _timestamp_micros_jdbc(text: str) -> int:
    """java.sql.Timestamp (array elements): the Julian calendar before 1582-10-15."""
    special = _TS_INFINITY_MICROS.get(text)
    return special if special is not None else _epoch_micros(text, days_java_hybrid)


def _timestamp_millis_jdbc(text: str) -> int:
    special = _TS_INFINITY_MILLIS.get(text)
    return special if special is not None else _epoch_micros(text, days_java_hybrid) // 1000


def _timestamptz_iso(text: str) -> str:
    """timestamptz text -> ZonedTimestamp with exactly 6 fraction digits (Debezium formats with the
    column's scale as fractional width, and an unconstrained timestamptz has scale 6)."""
    # Sessions run with TimeZone=UTC, so the common form is 'YYYY-MM-DD HH:MM:SS[.ffffff]+00':
    # a purely textual rewrite, since the general path below computes the instant and formats it
    # anew for every value (bench/README.md, "Measurements behind design choices").
    if len(text) >= 22 and text[-3:] == "+00" and text[4] == "-" and text[10] == " ":
        body = text[:-3]
        if len(body) == 19:
            return body[:10] + "T" + body[11:] + ".000000Z"
        return body[:10] + "T" + body[11:].ljust(15, "0") + "Z"
    return _timestamptz_general(text, 6)


def _timestamptz_general(text: str, width: int) -> str:
    if text == "infinity" or text == "-infinity":
        return text
    return zoned_timestamp_iso(_epoch_micros(text), width)


# Debezium's array path: java.sql.Timestamp.toLocalDateTime() (fields without the era) and
# -infinity's far-future sentinel formatted as such (recorded, types_time_*, types_arrays)
_TSTZ_ARRAY_NEGATIVE_INFINITY = "+292269055-12-02T23:00:00.000000Z"


def _timestamptz_jdbc(text: str, width: int) -> str:
    if text == "infinity":
        return text
    if text == "-infinity":
        return _TSTZ_ARRAY_NEGATIVE_INFINITY
    year, month, day, hh, mi, ss, micros, offset, _bc = _split_timestamp(text)
    total = (days_from_civil(year, month, day) * 86_400 + hh * 3600 + mi * 60 + ss - offset) * 1_000_000 + micros
    return zoned_timestamp_iso(total, width)


def _timestamptz_converter(pg: PgType, jdbc: bool = False) -> Converter:
    """timestamptz(p): the fraction has exactly p digits (p = 6 without a modifier)."""
    width = pg.modifier if pg.modifier >= 0 else 6
    if jdbc:
        return lambda text: _timestamptz_jdbc(text, width)
    if width == 6:
        return _timestamptz_iso  # ±infinity take its general path
    return lambda text: _timestamptz_general(text, width)


_TIMETZ_RE = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?([+-]\d\d(?::?\d\d)?(?::?\d\d)?)$")


def _timetz_parts(text: str) -> tuple[int, int]:
    m = _TIMETZ_RE.match(text)
    if m is None:
        raise ValueError(f"unrecognised time with time zone {text!r}")
    hh, mi, ss, frac, tz = m.groups()
    secs = (int(hh) * 3600 + int(mi) * 60 + int(ss) - _offset_seconds(tz)) % 86_400
    return secs, int(frac.ljust(6, "0")) if frac else 0


def _timetz_iso(text: str) -> str:
    return zoned_time_iso(*_timetz_parts(text))


def _timetz_iso_jdbc(text: str) -> str:
    """Array elements (java.sql.Time): whole seconds only."""
    secs, _ = _timetz_parts(text)
    return zoned_time_iso(secs, 0)


# --- intervals, as pgJDBC's PGInterval reads PostgreSQL's `postgres` interval style

_INTERVAL_PART = re.compile(r"(-?\d+) (year|mon|day)s?")
_INTERVAL_TIME = re.compile(r"([-+])?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")


def _interval_fields(text: str) -> tuple[int, int, int, int, int, float]:
    """(years, months, days, hours, minutes, seconds) as PGInterval holds them: the time part's
    sign applies to each of its fields; seconds = whole + micros / 1e6 (a double)."""
    years = months = days = 0
    for amount, unit in _INTERVAL_PART.findall(text):
        if unit == "year":
            years = int(amount)
        elif unit == "mon":
            months = int(amount)
        else:
            days = int(amount)
    hours = minutes = 0
    seconds = 0.0
    tm = _INTERVAL_TIME.search(text)
    if tm:
        sign, hh, mi, ss, frac = tm.groups()
        factor = -1 if sign == "-" else 1
        hours, minutes = factor * int(hh), factor * int(mi)
        micros = int(frac.ljust(6, "0")) if frac else 0
        seconds = factor * int(ss) + factor * micros / 1_000_000
    return years, months, days, hours, minutes, seconds


def _interval_micros(text: str) -> int:
    """interval -> Debezium's MicroDuration (months as 30.4375 days, in doubles)."""
    return micro_duration(*_interval_fields(text))


def _interval_iso(text: str) -> str:
    """interval.handling.mode=string: Debezium's Interval (P…Y…M…DT…H…M…S)."""
    return interval_iso(*_interval_fields(text))


# --- arrays

# A multi-dimensional value ({{1,2},{3,4}}, [0:1][1:2]={{...}}) reaches Debezium as pgJDBC's nested
# Java arrays: each element of the first dimension is a whole sub-array, which no element converter
# expects (recorded: types_arrays_multidim*). How each element type's sub-arrays come out:
MULTIDIM_NULL = "null"        # one null per sub-array (numbers, temporals, bool, bytea, hstore, ...)
MULTIDIM_TEXT = "text"        # one string per sub-array: Debezium writes the Java array's identity
#                               (`[Ljava.lang.String;@1b2c3d4e`, new on every run); Headwater the
#                               sub-array's PostgreSQL text (`{a,"b c"}`), see docs/compat.md (Types)
MULTIDIM_NUMERIC = "numeric"  # MULTIDIM_NULL, but a NaN/±Infinity anywhere nulls the whole value
MULTIDIM_REQUIRED = "required"  # required elements (unknown types): the whole value is null
# element types whose Debezium converter takes any object as a string (toString())
_MULTIDIM_TEXT_ELEMENTS = frozenset({
    "text", "varchar", "bpchar", "char", "uuid", "json", "jsonb", "inet", "cidr", "macaddr", "macaddr8",
    "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange", "tsvector", "ltree",
})
_NUMERIC_LEAVES = re.compile(r"[{},]")


def _sub_arrays(text: str) -> list[str]:
    """The first dimension's sub-arrays of a multi-dimensional literal `{{…},{…}}`, as their text."""
    out: list[str] = []
    depth, start, quoted = 0, 0, False
    i, n = 1, len(text) - 1
    while i < n:
        ch = text[i]
        if quoted:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                out.append(text[start:i + 1])
        i += 1
    return out


def _multidim(text: str, mode: str) -> list[Any]:
    """A multi-dimensional value (without its bounds decoration) as Debezium gives it (`mode`)."""
    if mode == MULTIDIM_REQUIRED:
        raise _NullArray
    if mode == MULTIDIM_NUMERIC and not _NUMERIC_SPECIAL.isdisjoint(_NUMERIC_LEAVES.split(text)):
        raise _NullArray
    subs = _sub_arrays(text)
    if mode == MULTIDIM_TEXT:
        return subs
    return [None] * len(subs)


def parse_array(text: str, element: Converter, required: bool = False, delimiter: str = ",",
                multidim: str | Callable[[str], list[Any]] = MULTIDIM_NULL) -> list[Any]:
    """A PostgreSQL array literal, e.g. {1,2,NULL} or {"a b","c\\"d"}; bounds decorations
    (`[0:2]={…}`) are dropped. `required`: a NULL element cannot be represented (raises
    _NullArray); `delimiter`: the element type's typdelim (`:` for PostGIS types); `multidim`: what a
    multi-dimensional value gives (a MULTIDIM_* mode, or a function of its text)."""
    if not text.startswith("{"):
        # a bounds decoration like [0:1]={...} or [0:1][1:2]={{...}}
        text = text[text.index("=") + 1:]
    if text == "{}":
        return []
    if text.startswith("{{"):  # an element that starts with `{` is quoted: a sub-array
        return multidim(text) if callable(multidim) else _multidim(text, multidim)
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
            while j < n and text[j] != delimiter:
                j += 1
            token = text[i:j]
            if token == "NULL":
                if required:
                    raise _NullArray
                out.append(None)
            else:
                out.append(element(token))
            i = j
        if i < n and text[i] == delimiter:
            i += 1
    return out


def _array_converter(element: Converter, *, required: bool = False, nullable: bool = False,
                     delimiter: str = ",", multidim: str | Callable[[str], list[Any]] = MULTIDIM_NULL,
                     not_null_multidim: str | Callable[[str], list[Any]] | None = None) -> Converter:
    """Array text -> list. `nullable`: an element Debezium cannot convert (a required element
    that is NULL, NaN where no decimal can hold it) makes the whole value null, as in Debezium.
    `not_null_multidim`: what a multi-dimensional value gives in a NOT NULL column where `multidim`
    would null it (Debezium stops there; see PostgresValueConverters.converter_for)."""
    if not (required or nullable or multidim in (MULTIDIM_NUMERIC, MULTIDIM_REQUIRED)):
        if delimiter != "," or multidim != MULTIDIM_NULL:
            return lambda text: parse_array(text, element, False, delimiter, multidim)
        return lambda text: parse_array(text, element)

    def convert(text: str) -> list[Any] | None:
        try:
            return parse_array(text, element, required, delimiter, multidim)
        except _NullArray:
            return None
    converter = _may_be_null(convert)
    if not_null_multidim is not None:
        converter.not_null = _array_converter(  # type: ignore[attr-defined]
            element, required=required, nullable=nullable, delimiter=delimiter, multidim=not_null_multidim)
    return converter


# --- numbers

_NUMERIC_SPECIAL = frozenset({"NaN", "Infinity", "-Infinity"})
# decimal.handling.mode=string: SpecialValueDecimal's names
_NUMERIC_SPECIAL_STRING = {"NaN": "NAN", "Infinity": "POSITIVE_INFINITY", "-Infinity": "NEGATIVE_INFINITY"}


def _decimal(text: str) -> Decimal | None:
    """precise mode: no Connect Decimal holds NaN/±Infinity; Debezium emits null."""
    if text in _NUMERIC_SPECIAL:
        return None
    return Decimal(text)


def _decimal_element(text: str) -> Decimal:
    if text in _NUMERIC_SPECIAL:
        raise _NullArray
    return Decimal(text)


def _variable_scale(text: str) -> dict[str, Any] | None:
    """VariableScaleDecimal {scale, value}: trailing zeros stripped (BigDecimal.stripTrailingZeros),
    never a negative scale."""
    from headwater.model.values import decimal_to_unscaled_bytes

    if text in _NUMERIC_SPECIAL:
        return None
    value = Decimal(text)
    value = value.normalize(_EXACT_CONTEXT) if value else Decimal(0)
    exponent = value.as_tuple().exponent
    scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return {"scale": scale, "value": decimal_to_unscaled_bytes(value, scale)}


def _variable_scale_element(text: str) -> dict[str, Any]:
    value = _variable_scale(text)
    if value is None:
        raise _NullArray
    return value


def _numeric_string(text: str) -> str:
    special = _NUMERIC_SPECIAL_STRING.get(text)
    return text if special is None else special


def _numeric_string_element(text: str) -> str:
    if text in _NUMERIC_SPECIAL:
        raise _NullArray
    return text


def _numeric_double_element(text: str) -> float:
    if text in _NUMERIC_SPECIAL:
        raise _NullArray
    return float(text)


def _money(text: str) -> Decimal:
    cleaned = text.replace("$", "").replace(",", "")
    negative = cleaned.startswith("(") or cleaned.startswith("-")
    cleaned = cleaned.strip("()-")
    value = Decimal(cleaned)
    return -value if negative else value


def _bits(text: str) -> bytes:
    """Debezium's Bits: the bit string as an integer, little-endian bytes (Java BitSet)."""
    value = int(text, 2) if text else 0
    # BitSet.toByteArray(): as many bytes as the highest set bit needs, so no bit set -> no bytes
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


# --- hstore

def _hstore_pairs(text: str) -> list[tuple[str, str | None]]:
    """hstore's text output (`"k"=>"v", "k2"=>NULL`) -> pairs in text order."""
    pairs: list[tuple[str, str | None]] = []
    i, n = 0, len(text)

    def token(i: int) -> tuple[str | None, int]:
        if text[i] == '"':
            buf = []
            i += 1
            while text[i] != '"':
                if text[i] == "\\":
                    i += 1
                buf.append(text[i])
                i += 1
            return "".join(buf), i + 1
        j = i
        while j < n and text[j] not in ",=> ":
            j += 1
        word = text[i:j]
        return (None if word.upper() == "NULL" else word), j

    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i >= n:
            break
        key, i = token(i)
        while text[i] == " ":
            i += 1
        i += 2  # =>
        while text[i] == " ":
            i += 1
        value, i = token(i)
        pairs.append((key or "", value))
    return pairs


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for k in range(0, len(data), 2):
        h = (31 * h + (data[k] << 8 | data[k + 1])) & 0xFFFFFFFF
    return h


def java_hashmap_order(keys: list[str]) -> list[str]:
    """The iteration order of a java.util.HashMap<String, …> the keys were put into, in order
    (duplicates keep their first position): bucket by bucket, insertion order inside a bucket."""
    unique = list(dict.fromkeys(keys))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2
    mask = capacity - 1

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & mask

    return sorted(unique, key=bucket)  # sorted() is stable: insertion order within a bucket


_JSON_CONTROL = re.compile(r"\\u00([0-9a-f]{2})")


def jackson_string_object(pairs: list[tuple[str, str | None]]) -> str:
    """A string->string map as Jackson's JsonGenerator writes it: compact, non-ASCII kept,
    control characters as upper-case \\u escapes."""
    import json

    text = json.dumps(dict(pairs), ensure_ascii=False, separators=(",", ":"))
    if "\\u00" in text:
        text = _JSON_CONTROL.sub(lambda m: "\\u00" + m.group(1).upper(), text)
    return text


def _hstore_map(text: str) -> dict[str, str | None]:
    """hstore -> pgJDBC's HStoreConverter map (a HashMap: Java's iteration order)."""
    pairs = _hstore_pairs(text)
    if len(pairs) > 1:
        values = dict(pairs)
        return {k: values[k] for k in java_hashmap_order([k for k, _ in pairs])}
    return dict(pairs)


def _hstore_json(text: str) -> str:
    """hstore -> Debezium's JSON string: pgJDBC's HStoreConverter fills a HashMap, which Jackson
    then writes in HashMap order."""
    return jackson_string_object(list(_hstore_map(text).items()))


# --- geometry

_POINT_SCHEMA = Schema("struct", name="io.debezium.data.geometry.Point", version=1, doc="Geometry (POINT)",
                       fields=[Field("x", Schema("float64")), Field("y", Schema("float64")),
                               Field("wkb", Schema("bytes", optional=True)),
                               Field("srid", Schema("int32", optional=True))])


def _point_value(x: float, y: float) -> dict[str, Any]:
    return {"x": x, "y": y, "wkb": struct_pack("<bIdd", 1, 1, x, y), "srid": None}


def _point(text: str) -> dict[str, Any]:
    """`(x,y)` -> Debezium's Point struct (with the point as little-endian WKB)."""
    x, y = text.strip().lstrip("(").rstrip(")").split(",")
    return _point_value(float(x), float(y))


def _spatial_schema(name: str, doc: str) -> Schema:
    return Schema("struct", name=name, version=1, doc=doc,
                  fields=[Field("wkb", Schema("bytes")), Field("srid", Schema("int32", optional=True))])


_GEOMETRY_SCHEMA = _spatial_schema("io.debezium.data.geometry.Geometry", "Geometry")
_GEOGRAPHY_SCHEMA = _spatial_schema("io.debezium.data.geometry.Geography", "Geography")


def _postgis(text: str) -> dict[str, Any]:
    """PostGIS text output (hex EWKB) -> {wkb: the EWKB bytes as they are, srid: from the header}."""
    wkb = bytes.fromhex(text)
    order = "<" if wkb[0] == 1 else ">"
    (kind,) = unpack_from(order + "I", wkb, 1)
    srid = unpack_from(order + "i", wkb, 5)[0] if kind & 0x20000000 else None
    return {"wkb": wkb, "srid": srid}


# --- types Debezium does not know (include.unknown.datatypes=true): the text's bytes

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# pgJDBC parses these into PGbox/PGcircle/… and Debezium takes their toString(): Java doubles
_PG_GEOMETRIC = frozenset({"box", "circle", "line", "lseg", "path", "polygon"})


def _java_double_text(value: float) -> str:
    """Double.toString: plain between 1e-3 and 1e7, else d.dddE±n; always a fraction digit."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = format(Decimal(repr(value)), "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    power = exponent + len(mantissa) - 1
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{power}"


def _geometric_text(text: str) -> str:
    return _NUMBER.sub(lambda m: _java_double_text(float(m.group(0))), text)


def _unknown_converter(pg: PgType, mode: str) -> Converter:
    encoder = _binary_encoder(mode)
    if pg.name in _PG_GEOMETRIC:
        if encoder is None:
            return lambda text: _geometric_text(text).encode("utf-8")
        return lambda text: encoder(_geometric_text(text).encode("utf-8"))
    if encoder is None:
        return lambda text: text.encode("utf-8")
    return lambda text: encoder(text.encode("utf-8"))


def _int2vector(text: str) -> list[Any] | None:
    """int2vector (recorded, types_unknown_*): Debezium takes it for an array but never finds
    elements in its `1 2 3` text: an empty value gives null, any other an empty list."""
    return None if text == "" else []


def _always_null(text: str) -> None:
    return None


# -- the mapping ------------------------------------------------------------------------------

_STRING = Schema("string")

_SIMPLE: dict[str, tuple[Schema, Converter]] = {
    "int2": (Schema("int16"), int),
    "int4": (Schema("int32"), int),
    "int8": (Schema("int64"), int),
    "oid": (Schema("int64"), int),
    "float4": (Schema("float32"), float),
    "float8": (Schema("float64"), float),
    "bool": (Schema("boolean"), _bool),
    "uuid": (Schema("string", name="io.debezium.data.Uuid", version=1), str),
    "json": (Schema("string", name="io.debezium.data.Json", version=1), str),
    "jsonb": (Schema("string", name="io.debezium.data.Json", version=1), str),
    "xml": (Schema("string", name="io.debezium.data.Xml", version=1), str),
    "ltree": (Schema("string", name="io.debezium.data.Ltree", version=1), str),
    "tsvector": (Schema("string", name="io.debezium.data.Tsvector", version=1), str),
    "point": (_POINT_SCHEMA, _point),
}
# plain strings: character types, network addresses, ranges (their text form)
for _name in ("text", "varchar", "bpchar", "char", "citext", "inet", "cidr", "macaddr", "macaddr8",
              "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange"):
    _SIMPLE[_name] = (_STRING, str)

_DEBEZIUM_DATE = Schema("int32", name="io.debezium.time.Date", version=1)
_CONNECT_DATE = Schema("int32", name="org.apache.kafka.connect.data.Date", version=1)
_MILLI_TIME = Schema("int32", name="io.debezium.time.Time", version=1)
_MICRO_TIME = Schema("int64", name="io.debezium.time.MicroTime", version=1)
_CONNECT_TIME = Schema("int32", name="org.apache.kafka.connect.data.Time", version=1)
_MILLI_TIMESTAMP = Schema("int64", name="io.debezium.time.Timestamp", version=1)
_MICRO_TIMESTAMP = Schema("int64", name="io.debezium.time.MicroTimestamp", version=1)
_CONNECT_TIMESTAMP = Schema("int64", name="org.apache.kafka.connect.data.Timestamp", version=1)
_ZONED_TIME = Schema("string", name="io.debezium.time.ZonedTime", version=1)
_ZONED_TIMESTAMP = Schema("string", name="io.debezium.time.ZonedTimestamp", version=1)
_MICRO_DURATION = Schema("int64", name="io.debezium.time.MicroDuration", version=1)
_INTERVAL = Schema("string", name="io.debezium.time.Interval", version=1)

_VARIABLE_SCALE_SCHEMA = Schema(
    "struct", name="io.debezium.data.VariableScaleDecimal", version=1, doc="Variable scaled decimal",
    fields=[Field("scale", Schema("int32")), Field("value", Schema("bytes"))],
)
_HSTORE_MAP_SCHEMA = Schema("map", keys=Schema("string"), values=Schema("string", optional=True))

# Array types Debezium has no schema for (DBZ-459): the column is left out, whatever
# include.unknown.datatypes says.
_UNSUPPORTED_ARRAY_ELEMENTS = frozenset({"money", "name", "interval", "varbit", "xml", "point", "refcursor"})

# Values a required column gets when a row carries none (Debezium's converter fallbacks).
_FALLBACK_BY_CONNECT_TYPE: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "float32": 0.0, "float64": 0.0,
    "boolean": False, "string": "", "bytes": b"",
}


def _decimal_schema(scale: int, precision: int | None = None) -> Schema:
    parameters = {"scale": str(scale)}
    if precision is not None:
        parameters["connect.decimal.precision"] = str(precision)
    return Schema("bytes", name="org.apache.kafka.connect.data.Decimal", version=1, parameters=parameters)


def _numeric(pg: PgType, mode: str, element: bool) -> tuple[Schema, Converter]:
    constrained = pg.modifier >= 4
    if mode == "double":
        return Schema("float64"), _numeric_double_element if element else float
    if mode == "string":
        return _STRING, _numeric_string_element if element else _numeric_string
    if constrained:
        precision = ((pg.modifier - 4) >> 16) & 0xFFFF
        scale = (pg.modifier - 4) & 0xFFFF
        return _decimal_schema(scale, precision), _decimal_element if element else _may_be_null(_decimal)
    return _VARIABLE_SCALE_SCHEMA, _variable_scale_element if element else _may_be_null(_variable_scale)


def _money_mapping(settings: TypeSettings) -> tuple[Schema, Converter]:
    if settings.decimal_mode == "double":
        return Schema("float64"), lambda text: float(_money(text))
    if settings.decimal_mode == "string":
        return _STRING, lambda text: format(_money(text), "f")
    digits = settings.money_fraction_digits
    quantum = Decimal(1).scaleb(-digits)
    return _decimal_schema(digits), lambda text: _money(text).quantize(quantum, ROUND_HALF_UP)


def _temporal(pg: PgType, settings: TypeSettings, streaming: bool, jdbc: bool) -> tuple[Schema, Converter] | None:
    """Temporal types. `jdbc`: converted as pgJDBC's java.sql objects reach Debezium (array
    elements on both paths; for dates also snapshot rows)."""
    name, mode = pg.name, settings.time_precision_mode
    connect = mode == "connect"
    if name == "date":
        schema = _CONNECT_DATE if connect else _DEBEZIUM_DATE
        return schema, _date_days_jdbc if jdbc or not streaming else _date_days
    precision = pg.modifier if pg.modifier >= 0 else 6
    if name == "time":
        if connect or (mode == "adaptive" and precision <= 3):
            return _CONNECT_TIME if connect else _MILLI_TIME, _time_millis_jdbc if jdbc else _time_millis
        return _MICRO_TIME, _time_micros_jdbc if jdbc else _time_micros
    if name == "timestamp":
        if connect or precision <= 3:
            return (_CONNECT_TIMESTAMP if connect else _MILLI_TIMESTAMP,
                    _timestamp_millis_jdbc if jdbc else _timestamp_millis)
        return _MICRO_TIMESTAMP, _timestamp_micros_jdbc if jdbc else _timestamp_micros
    if name == "timetz":
        return _ZONED_TIME, _timetz_iso_jdbc if jdbc else _timetz_iso
    if name == "timestamptz":
        return _ZONED_TIMESTAMP, _timestamptz_converter(pg, jdbc)
    if name == "interval":
        if settings.interval_mode == "string":
            return _INTERVAL, _interval_iso
        return _MICRO_DURATION, _interval_micros
    return None


_TEMPORAL = frozenset({"date", "time", "timestamp", "timetz", "timestamptz", "interval"})


def _bit_length(pg: PgType) -> int:
    if pg.name == "bit":
        return max(pg.modifier, 1)
    return pg.modifier if pg.modifier > 0 else 2_147_483_647


def _scalar(pg: PgType, settings: TypeSettings, streaming: bool, element: bool) -> tuple[Schema, Converter] | None:
    """A known non-array type, or None. `element`: as an array element (pgJDBC's conversions)."""
    name = pg.name
    if pg.kind == "e":
        return (Schema("string", name="io.debezium.data.Enum", version=1,
                       parameters={"allowed": ",".join(pg.enum_labels)}), str)
    simple = _SIMPLE.get(name)
    if simple is not None:
        return simple
    if name in _TEMPORAL:
        return _temporal(pg, settings, streaming, element)
    if name == "numeric":
        return _numeric(pg, settings.decimal_mode, element)
    if name == "bytea":
        encoder = _binary_encoder(settings.binary_mode)
        return (_binary_schema(settings.binary_mode),
                _bytea if encoder is None else lambda text: encoder(_bytea(text)))
    if name == "money":
        return _money_mapping(settings)
    if name == "hstore":
        if settings.hstore_mode == "map":
            return _HSTORE_MAP_SCHEMA, _hstore_map
        return Schema("string", name="io.debezium.data.Json", version=1), _hstore_json
    if name == "name":
        # Debezium's pgoutput value resolver has no case for `name`: streamed values are null
        return _STRING, _may_be_null(_always_null) if streaming else str
    if name in ("bit", "varbit"):
        length = _bit_length(pg)
        if length == 1:
            return Schema("boolean"), lambda text: "1" in text
        return (Schema("bytes", name="io.debezium.data.Bits", version=1,
                       parameters={"length": str(length)}), _bits)
    if name == "geometry":
        return _GEOMETRY_SCHEMA, _postgis
    if name == "geography":
        return _GEOGRAPHY_SCHEMA, _postgis
    return None


def _optional(schema: Schema) -> Schema:
    return Schema(schema.type, optional=True, name=schema.name, version=schema.version,
                  parameters=schema.parameters, fields=schema.fields, items=schema.items, keys=schema.keys,
                  values=schema.values, doc=schema.doc)


def _array(pg: PgType, element: PgType, settings: TypeSettings, include_unknown: bool,
           streaming: bool) -> tuple[Schema, Converter] | None:
    if element.modifier < 0 and pg.modifier >= 0:
        # Debezium describes the element with the array column's length and scale
        element = PgType(element.name, element.oid, pg.modifier, element.category, element.kind, None,
                         element.enum_labels, element.declared_name)
    name = element.name
    if name in _UNSUPPORTED_ARRAY_ELEMENTS:
        return None
    if name == "bit":
        # bit(n)[] gets the Bits schema of a bit(n) column and no converter that can fill it
        return (Schema("bytes", name="io.debezium.data.Bits", version=1,
                       parameters={"length": str(_bit_length(element))}), _may_be_null(_always_null))
    if element.kind == "e" or name == "tsvector":
        # the Enum and Tsvector element schemas (Debezium's generic array path) are not optional:
        # a NULL element fails the whole array (null)
        items = Schema("string", name="io.debezium.data.Enum", version=1,
                       parameters={"allowed": ",".join(element.enum_labels)}) if element.kind == "e" \
            else _SIMPLE["tsvector"][0]
        return Schema("array", items=items), _array_converter(str, required=True, multidim=MULTIDIM_TEXT)
    inner = None if element.is_domain or element.kind == "c" else _scalar(element, settings, streaming, True)
    if inner is None:
        # Debezium finds no element schema (domains, composites, unknown types): opaque bytes of
        # each element's text with include.unknown.datatypes, required elements
        if not include_unknown:
            return None
        items = _binary_schema(settings.binary_mode)
        unknown = _unknown_converter(element, settings.binary_mode)
        # a multi-dimensional value is null (Debezium: a null element); in a NOT NULL column, where
        # Debezium stops, each sub-array's text as an element (docs/compat.md, Types)
        return Schema("array", items=items), _array_converter(
            unknown, required=True, multidim=MULTIDIM_REQUIRED,
            not_null_multidim=lambda text: [unknown(sub) for sub in _sub_arrays(text)])
    item_schema, item_conv = inner
    nullable = name == "numeric"  # NaN/±Infinity elements make the array null in every decimal mode
    delimiter = ":" if name in ("geometry", "geography") else ","
    if nullable:
        # NaN anywhere in a multi-dimensional value nulls it too; in a NOT NULL column, where
        # Debezium stops, one null per sub-array as for any other value (docs/compat.md, Types)
        multidim, not_null = MULTIDIM_NUMERIC, MULTIDIM_NULL
    else:
        multidim = MULTIDIM_TEXT if name in _MULTIDIM_TEXT_ELEMENTS else MULTIDIM_NULL
        not_null = None
    return (Schema("array", items=_optional(item_schema)),
            _array_converter(item_conv, nullable=nullable, delimiter=delimiter, multidim=multidim,
                             not_null_multidim=not_null))


def schema_and_converter(pg: PgType, *, include_unknown: bool = False, settings: TypeSettings | None = None,
                         streaming: bool = False) -> tuple[Schema, Converter] | None:
    """Connect schema (required variant) and text converter for a type, or None to skip it.
    `streaming`: for values from pgoutput (else the snapshot)."""
    settings = settings or DEFAULT_TYPE_SETTINGS
    if pg.name == "int2vector":
        return Schema("array", items=Schema("int16")), _may_be_null(_int2vector)
    if pg.element is not None:
        return _array(pg, pg.element, settings, include_unknown, streaming)
    known = None if pg.kind == "c" else _scalar(pg, settings, streaming, False)
    if known is not None:
        return known
    if include_unknown:
        return _binary_schema(settings.binary_mode), _unknown_converter(pg, settings.binary_mode)
    return None


def fallback_value(schema: Schema) -> Any:
    if schema.name == "org.apache.kafka.connect.data.Decimal":
        return Decimal(0)
    if schema.name == _POINT_SCHEMA.name:
        return _point_value(0.0, 0.0)
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


# Debezium emits no schema default for these (recorded: types_decimal_*, types_binary_*, types_misc)
_NO_DEFAULT_TYPES = frozenset({"money", "bytea"})


# -- unchanged TOAST values -------------------------------------------------------------------

DEFAULT_UNAVAILABLE_PLACEHOLDER = "__debezium_unavailable_value"

# Fixed-width types are never stored out of line, so their values are never "unchanged TOAST".
_FIXED_WIDTH = frozenset({
    "int2", "int4", "int8", "oid", "float4", "float8", "bool", "char", "name", "date", "time", "timetz",
    "timestamp", "timestamptz", "interval", "uuid", "money", "macaddr", "macaddr8", "point",
})
# Array types whose placeholder Debezium builds specially (UnchangedToastedReplicationMessageColumn).
_TEXT_ARRAY_ELEMENTS = frozenset({"text", "varchar", "json", "jsonb"})
_BYTE_VALUE_ARRAY_ELEMENTS = frozenset({"int4", "date", "int8"})


def placeholder_bytes(setting: str) -> bytes:
    """`unavailable.value.placeholder` as bytes (`hex:` prefix: hex-encoded octets)."""
    if setting.startswith("hex:"):
        return bytes.fromhex(setting[4:])
    return setting.encode("utf-8")


def _java_name_uuid(data: bytes) -> str:
    import hashlib
    import uuid

    return str(uuid.UUID(bytes=hashlib.md5(data).digest(), version=3))


def unavailable_value(pg: PgType, schema: Schema, placeholder: bytes, binary_mode: str = "bytes") -> Any:
    """What Debezium emits for an unchanged TOAST value of this type (`unavailable.value.placeholder`
    in the type's shape), or NO_DEFAULT for types that are never TOASTed or that Debezium cannot
    represent (the converter then fails loudly on the marker)."""
    text = placeholder.decode("utf-8", "replace")  # Java: new String(bytes)
    if pg.element is not None:
        element = pg.element.name
        if element in _TEXT_ARRAY_ELEMENTS:
            return [text]
        if element in _BYTE_VALUE_ARRAY_ELEMENTS:
            return [b - 256 if b > 127 else b for b in placeholder]  # Java's signed bytes
        if element == "uuid":
            return [_java_name_uuid(placeholder)]
        items = schema.items
        if items is not None and items.type == "bytes" and items.name is None:
            return [placeholder]
        if items is not None and items.type == "string":
            return [text]
        return NO_DEFAULT
    if pg.kind == "e" or pg.name in _FIXED_WIDTH:
        return NO_DEFAULT
    if pg.name == "hstore":
        if schema.type == "map":
            return {text: text}
        return jackson_string_object([(text, text)])
    if pg.name == "bytea" and binary_mode in ("base64", "base64-url-safe"):
        return None  # recorded (types_binary_base64*): Debezium emits null, not the placeholder
    if schema.type == "string":
        return text
    if schema.type == "bytes" and schema.name is None:
        return placeholder
    return NO_DEFAULT


class PostgresValueConverters:
    """`ValueConverters` for PostgreSQL (see headwater.relational.table_schema). `streaming`: for
    values from pgoutput (Relation-message schemas), else for snapshot rows."""

    def __init__(self, *, include_unknown: bool = False,
                 unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER,
                 type_settings: TypeSettings | None = None, streaming: bool = False) -> None:
        self.include_unknown = include_unknown
        self.type_settings = type_settings or DEFAULT_TYPE_SETTINGS
        self.streaming = streaming
        # raw value the streaming decoder puts for an unchanged TOAST column
        self.unavailable_marker = UNCHANGED_TOAST
        self.unavailable_placeholder = placeholder_bytes(unavailable_placeholder)

    def _mapping(self, column: Column) -> tuple[Schema, Converter] | None:
        pg = column.native
        if not isinstance(pg, PgType):
            raise UnsupportedType(f"column {column.name} has no PostgreSQL type information")
        return schema_and_converter(pg, include_unknown=self.include_unknown, settings=self.type_settings,
                                    streaming=self.streaming)

    def schema_for(self, table: Table, column: Column) -> Schema | None:
        mapping = self._mapping(column)
        return None if mapping is None else mapping[0]

    def converter_for(self, table: Table, column: Column, schema: Schema) -> Converter:
        mapping = self._mapping(column)
        assert mapping is not None
        convert = mapping[1]
        if not column.optional:
            # arrays: a multi-dimensional value that would be null gets a value instead
            convert = getattr(convert, "not_null", convert)
        if column.optional or not getattr(convert, "may_be_null", False):
            return convert
        name = column.name

        def required(text: str) -> Any:
            # Debezium's converter gives null, which a required field refuses: the event fails
            value = convert(text)
            if value is None:
                raise ValueError(f"column {name}: value {text!r} has no representation in its schema "
                                 f"and the column is NOT NULL")
            return value
        return required

    def _default_kind(self, column: Column, schema: Schema) -> str | None:
        """How Debezium takes the column's default: "serial" (a sequence default, reported as 0 by
        its default-value parser; recorded: tests/conformance/extra, serial_default; identity
        columns have none), "parse" (the expression, when it is a constant), or None (no default:
        money, bytea, domains, structs, maps)."""
        expression = column.default_expression
        if expression is not None and expression.startswith("nextval(") and \
                schema.type in ("int16", "int32", "int64"):
            return "serial"
        pg = column.native
        assert isinstance(pg, PgType)
        if pg.name in _NO_DEFAULT_TYPES or pg.is_domain or schema.type in ("struct", "map"):
            return None
        return "parse"

    def raw_default_for(self, table: Table, column: Column) -> Any:
        """The column's constant default in the raw form of its values (text), for a custom
        converter, or NO_DEFAULT where Debezium takes none."""
        mapping = self._mapping(column)
        if mapping is None or column.default_expression is None or not isinstance(column.native, PgType):
            return NO_DEFAULT
        kind = self._default_kind(column, mapping[0])
        if kind == "serial":
            return "0"
        return NO_DEFAULT if kind is None else parse_default(column.default_expression, str)

    def default_for(self, table: Table, column: Column, schema: Schema) -> Any:
        mapping = self._mapping(column)
        if mapping is None:
            return NO_DEFAULT
        kind = self._default_kind(column, schema)
        if kind != "parse":
            return 0 if kind == "serial" else NO_DEFAULT
        expression = column.default_expression
        pg = column.native
        assert isinstance(pg, PgType)
        convert = mapping[1]
        if pg.name == "numeric" and self.type_settings.decimal_mode == "string" and pg.modifier >= 4:
            # the default is set to the column's scale first (`0` in a numeric(6,3) -> "0.000")
            quantum = Decimal(1).scaleb(-((pg.modifier - 4) & 0xFFFF))
            convert = lambda text: _numeric_string(text) if text in _NUMERIC_SPECIAL else \
                format(Decimal(text).quantize(quantum), "f")  # noqa: E731
        value = parse_default(expression, convert)
        return NO_DEFAULT if value is None else value

    def fallback_for(self, table: Table, column: Column, schema: Schema) -> Any:
        return fallback_value(schema)

    def unavailable_for(self, table: Table, column: Column, schema: Schema) -> Any:
        pg = column.native
        assert isinstance(pg, PgType)
        return unavailable_value(pg, schema, self.unavailable_placeholder, self.type_settings.binary_mode)

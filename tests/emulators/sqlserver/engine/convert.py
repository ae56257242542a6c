"""Value conversions between SQL Server types, Python values (values.py) and PostgreSQL text:

- ``from_pg``: a value psycopg2 returned for a column of a known SqlType → the Python value;
- ``sqltype_for_pg``: the SqlType of a result column known only by its PostgreSQL type;
- ``to_pg_literal``: a Python/T-SQL value going into a SqlType → PostgreSQL SQL text, rounded
  and checked as SQL Server does (datetime 1/300 s, smalldatetime minutes, 100 ns scales,
  binary padding, ranges, 2628 truncation) — raising SqlServerError instead of truncating;
- ``pg_type``: the PostgreSQL column type for a SqlType (DESIGN.md's table).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Context, Decimal, InvalidOperation, localcontext
from typing import Any

from ..results import SqlServerError
from ..sqltypes import MAX, SqlType
from ..values import TICKS_PER_DAY, TICKS_PER_SECOND, DateTime2, DateTimeOffset, Time, Variant

COMPOSITES = {"time": "sys.time_", "datetime2": "sys.datetime2", "datetimeoffset": "sys.datetimeoffset",
              "sql_variant": "sys.sql_variant"}


def pg_type(t: SqlType) -> str:
    n = t.name
    simple = {
        "bit": "boolean", "tinyint": "sys.tinyint", "smallint": "int2", "int": "int4", "bigint": "int8",
        "money": "sys.money", "smallmoney": "sys.smallmoney", "real": "float4", "float": "float8",
        "date": "date", "datetime": "sys.datetime", "smalldatetime": "sys.smalldatetime",
        "uniqueidentifier": "uuid", "xml": "sys.xml", "text": "text", "ntext": "text", "image": "bytea",
        "timestamp": "bytea", "rowversion": "bytea", "sysname": "varchar(128)",
    }
    if n in simple:
        return simple[n]
    if n in COMPOSITES:
        return COMPOSITES[n]
    if n in ("decimal", "numeric"):
        return f"numeric({t.precision},{t.scale})"
    if n in ("char", "nchar"):
        return "text" if t.length == MAX else f"char({t.length})"
    if n in ("varchar", "nvarchar"):
        return "text" if t.length == MAX else f"varchar({t.length})"
    if n in ("binary", "varbinary"):
        return "bytea"
    raise SqlServerError(2715, f"Column, parameter, or variable #1: Cannot find data type {n}.")


# ---------------------------------------------------------------- PostgreSQL → Python

_COMPOSITE_FIELDS = re.compile(r'"((?:[^"]|"")*)"|([^,()]*)')


def _fields(text: str) -> list[str | None]:
    inner = text.strip()[1:-1]
    out: list[str | None] = []
    i = 0
    while i <= len(inner):
        if i < len(inner) and inner[i] == '"':
            j = i + 1
            buf = []
            while j < len(inner):
                if inner[j] == '"' and j + 1 < len(inner) and inner[j + 1] == '"':
                    buf.append('"')
                    j += 2
                elif inner[j] == "\\" and j + 1 < len(inner):
                    buf.append(inner[j + 1])
                    j += 2
                elif inner[j] == '"':
                    j += 1
                    break
                else:
                    buf.append(inner[j])
                    j += 1
            out.append("".join(buf))
            i = j + 1
        else:
            j = inner.find(",", i)
            if j < 0:
                j = len(inner)
            piece = inner[i:j]
            out.append(piece if piece else None)
            i = j + 1
    return out


def _ticks_of(t: dt.time | dt.datetime, ns100: int | None) -> int:
    return (t.hour * 3600 + t.minute * 60 + t.second) * TICKS_PER_SECOND + t.microsecond * 10 + (ns100 or 0)


def _parse_ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def from_pg(value: Any, t: SqlType) -> Any:
    if value is None:
        return None
    n = t.name
    if n in ("datetime2", "time", "datetimeoffset") and isinstance(value, str):
        f = _fields(value)
        if n == "time":
            tm = dt.time.fromisoformat(f[0])
            return Time(_ticks_of(tm, int(f[1] or 0)))
        ts = _parse_ts(f[0])
        d2 = DateTime2(ts.date(), Time(_ticks_of(ts, int(f[1] or 0))))
        if n == "datetime2":
            return d2
        return DateTimeOffset(d2, int(f[2] or 0))
    if n == "sql_variant" and isinstance(value, str):
        f = _fields(value)
        if f[0] is None:
            return None
        base = SqlType.parse(f[0])
        return Variant(_from_text(f[1], base), base)
    if n in ("binary", "varbinary", "image", "timestamp", "rowversion"):
        return bytes(value)
    if n == "uniqueidentifier":
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    if n == "bit":
        return bool(value)
    if n in ("tinyint", "smallint", "int", "bigint"):
        return int(value)
    if n in ("money", "smallmoney"):
        return Decimal(value).quantize(Decimal("0.0001"))
    if n in ("real", "float"):
        return float(value)
    if n in ("datetime", "smalldatetime") and isinstance(value, dt.datetime):
        return value
    if n == "date" and isinstance(value, dt.datetime):
        return value.date()
    if n in ("datetime2",) and isinstance(value, dt.datetime):
        return DateTime2.from_datetime(value)
    if n == "time" and isinstance(value, dt.time):
        return Time.from_time(value)
    if n == "datetimeoffset" and isinstance(value, dt.datetime):
        off = value.utcoffset() or dt.timedelta(0)
        utc = value.replace(tzinfo=None) - off
        return DateTimeOffset(DateTime2.from_datetime(utc), int(off.total_seconds() // 60))
    if n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "sysname") \
            and isinstance(value, bytes | memoryview):
        # character data PostgreSQL text cannot hold (U+0000) is kept in a bytea column as UTF-8 — the
        # NUL-terminated LSN strings of sys.dm_cdc_log_scan_sessions (cdc/objects.py)
        return bytes(value).decode("utf-8")
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _from_text(text: str | None, base: SqlType) -> Any:
    if text is None:
        return None
    n = base.name
    if n in ("tinyint", "smallint", "int", "bigint"):
        return int(text)
    if n in ("decimal", "numeric", "money", "smallmoney"):
        return Decimal(text)
    if n in ("real", "float"):
        return float(text)
    if n == "bit":
        return text in ("1", "t", "true")
    if n in ("date",):
        return dt.date.fromisoformat(text)
    if n in ("datetime", "smalldatetime"):
        return dt.datetime.fromisoformat(text)
    if n == "datetime2":
        return parse_datetime2(text, base.scale or 7)
    if n == "uniqueidentifier":
        return uuid.UUID(text)
    if n in ("binary", "varbinary"):
        return bytes.fromhex(text[2:] if text.startswith("\\x") else text)
    return text


# PostgreSQL type OID → SqlType when no registry column or hint says better
_PG_OIDS: dict[int, SqlType] = {
    16: SqlType("bit"), 21: SqlType("smallint"), 23: SqlType("int"), 20: SqlType("bigint"), 26: SqlType("int"),
    700: SqlType("real"), 701: SqlType("float"), 25: SqlType("nvarchar", length=MAX),
    19: SqlType("nvarchar", length=128), 18: SqlType("nchar", length=1),
    17: SqlType("varbinary", length=MAX), 1082: SqlType("date"), 1114: SqlType("datetime2", scale=7),
    1184: SqlType("datetimeoffset", scale=7), 1083: SqlType("time", scale=7), 2950: SqlType("uniqueidentifier"),
    705: SqlType("varchar", length=MAX), 1042: SqlType("nchar", length=1), 1043: SqlType("nvarchar", length=4000),
    1700: SqlType("decimal", precision=38, scale=0), 114: SqlType("nvarchar", length=MAX),
    3802: SqlType("nvarchar", length=MAX), 1186: SqlType("nvarchar", length=100), 3220: SqlType("nvarchar", length=64),
}


def sqltype_for_pg(type_code: int, internal_size: int | None, precision: int | None, scale: int | None,
                   composites: dict[int, str]) -> SqlType:
    if type_code in composites:
        name = composites[type_code]
        return SqlType.parse("sql_variant" if name == "sql_variant" else name)
    if type_code == 1700:
        if precision and precision > 0 and precision < 65535:
            return SqlType("decimal", precision=min(precision, 38), scale=scale or 0)
        return SqlType("decimal", precision=38, scale=10)
    if type_code in (1043, 1042) and internal_size and 0 < internal_size < 65535:
        return SqlType("nvarchar" if type_code == 1043 else "nchar", length=internal_size)
    return _PG_OIDS.get(type_code, SqlType("nvarchar", length=MAX))


# ---------------------------------------------------------------- T-SQL value → PostgreSQL literal

def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_DATE_RE = re.compile(r"^\s*(\d{4})-?(\d{2})-?(\d{2})\s*(?:[T ]\s*(.*?))?\s*$")
_TIME_RE = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?\s*(AM|PM)?$", re.IGNORECASE)
_OFFSET_RE = re.compile(r"^(.*?)\s*(Z|[+-]\d{2}:?\d{2})$")


def _conversion_failed(kind: str = "date and/or time") -> SqlServerError:
    return SqlServerError(241, f"Conversion failed when converting {kind} from character string.")


def _time_ticks(text: str) -> int:
    m = _TIME_RE.match(text.strip())
    if not m:
        raise _conversion_failed()
    h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    frac = (m.group(4) or "")
    if m.group(5):
        if h > 12:
            raise _conversion_failed()
        h = h % 12 + (12 if m.group(5).upper() == "PM" else 0)
    if h > 23 or mi > 59 or s > 59:
        raise _conversion_failed()
    digits = (frac + "0" * 9)[:9]
    ns = int(digits)
    # 100 ns ticks, rounding the 8th and 9th digits
    return (h * 3600 + mi * 60 + s) * TICKS_PER_SECOND + (ns + 50) // 100


def _split_datetime(text: str) -> tuple[dt.date, int]:
    m = _DATE_RE.match(text)
    if m:
        try:
            date = dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            raise _conversion_failed() from None
        ticks = _time_ticks(m.group(4)) if m.group(4) else 0
        return date, ticks
    # a bare time means 1900-01-01
    return dt.date(1900, 1, 1), _time_ticks(text)


def _round_ticks(ticks: int, scale: int) -> int:
    unit = 10 ** (7 - scale)
    return (ticks + unit // 2) // unit * unit


def _normalize(date: dt.date, ticks: int) -> tuple[dt.date, int]:
    days, ticks = divmod(ticks, TICKS_PER_DAY)
    try:
        return date + dt.timedelta(days=days), ticks
    except OverflowError:
        # past 9999-12-31 or before 0001-01-01 (rounding up, or a datetimeoffset whose UTC
        # instant falls outside): SQL Server refuses the conversion
        raise _conversion_failed() from None


def parse_datetime2(text: str, scale: int = 7) -> DateTime2:
    date, ticks = _split_datetime(text)
    date, ticks = _normalize(date, _round_ticks(ticks, scale))
    return DateTime2(date, Time(ticks))


def parse_datetimeoffset(text: str, scale: int = 7) -> DateTimeOffset:
    m = _OFFSET_RE.match(text.strip())
    offset = 0
    body = text
    if m and (m.group(2) == "Z" or ":" in m.group(2) or len(m.group(2)) == 5) and _DATE_RE.match(m.group(1)):
        body = m.group(1)
        if m.group(2) != "Z":
            sign = -1 if m.group(2)[0] == "-" else 1
            digits = m.group(2)[1:].replace(":", "")
            offset = sign * (int(digits[:2]) * 60 + int(digits[2:]))
            if abs(offset) > 14 * 60:
                raise _conversion_failed()
    local = parse_datetime2(body, scale)
    ticks = local.time.ticks - offset * 60 * TICKS_PER_SECOND
    date, ticks = _normalize(local.date, ticks)
    return DateTimeOffset(DateTime2(date, Time(ticks)), offset)


def round_datetime(date: dt.date, ticks: int) -> dt.datetime:
    """SQL Server's datetime: 1/300 s, shown as .000/.003/.007."""
    units = (ticks * 300 + TICKS_PER_SECOND // 2) // TICKS_PER_SECOND
    date, _ = _normalize(date, 0)
    seconds, part = divmod(units, 300)
    ms = (part * 1000 + 150) // 300
    base = dt.datetime.combine(date, dt.time()) + dt.timedelta(seconds=seconds, milliseconds=ms)
    return base


def round_smalldatetime(date: dt.date, ticks: int) -> dt.datetime:
    minutes, rest = divmod(ticks, 60 * TICKS_PER_SECOND)
    # 29.998 s and less round down, 29.999 s and more round up
    if rest >= 29_999 * 10_000:
        minutes += 1
    return dt.datetime.combine(date, dt.time()) + dt.timedelta(minutes=minutes)


def _ts_text(d: DateTime2) -> tuple[str, int]:
    """timestamp(6) text + the 7th digit."""
    t = d.time.ticks
    us, ns100 = divmod(t, 10)
    seconds, micro = divmod(us, 1_000_000)
    return f"{d.date.isoformat()} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}", ns100


def datetime2_sql(d: DateTime2) -> str:
    ts, ns = _ts_text(d)
    return f"ROW('{ts}'::timestamp, {ns})::sys.datetime2"


def datetimeoffset_sql(d: DateTimeOffset) -> str:
    ts, ns = _ts_text(d.utc)
    return f"ROW('{ts}'::timestamp, {ns}, {d.offset_minutes})::sys.datetimeoffset"


def time_sql(t: Time) -> str:
    us, ns = divmod(t.ticks, 10)
    seconds, micro = divmod(us, 1_000_000)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{micro:06d}"
    return f"ROW('{text}'::time, {ns})::sys.time_"


_INT_RANGES = {"tinyint": (0, 255), "smallint": (-32768, 32767), "int": (-2**31, 2**31 - 1),
               "bigint": (-2**63, 2**63 - 1)}


def _type_label(t: SqlType) -> str:
    return t.name


def python_type_of(value: Any) -> SqlType:
    """The SqlType SQL Server gives a Python value (an untyped literal / parameter)."""
    if isinstance(value, bool):
        return SqlType("bit")
    if isinstance(value, int):
        return SqlType("int") if -2**31 <= value < 2**31 else SqlType("bigint")
    if isinstance(value, Decimal):
        exp_ = value.as_tuple().exponent
        scale = -exp_ if isinstance(exp_, int) and exp_ < 0 else 0
        return SqlType("decimal", precision=38, scale=scale)
    if isinstance(value, float):
        return SqlType("float")
    if isinstance(value, str):
        return SqlType("nvarchar", length=max(1, len(value)))
    if isinstance(value, bytes):
        return SqlType("varbinary", length=max(1, len(value)))
    if isinstance(value, dt.datetime):
        return SqlType("datetime")
    if isinstance(value, dt.date):
        return SqlType("date")
    if isinstance(value, DateTime2):
        return SqlType("datetime2", scale=7)
    if isinstance(value, DateTimeOffset):
        return SqlType("datetimeoffset", scale=7)
    if isinstance(value, Time):
        return SqlType("time", scale=7)
    if isinstance(value, uuid.UUID):
        return SqlType("uniqueidentifier")
    return SqlType("sql_variant")


def to_pg_literal(value: Any, t: SqlType, *, table: str = "", column: str = "", explicit: bool = False) -> str:
    """SQL text for ``value`` converted to ``t`` as SQL Server converts on INSERT/UPDATE/CAST
    (``explicit``: CAST/CONVERT, where strings are truncated silently instead of error 2628)."""
    if value is None:
        return f"NULL::{pg_type(t)}"
    n = t.name
    if isinstance(value, Variant):
        value = value.value
    if n == "bit":
        if isinstance(value, str):
            low = value.strip().lower()
            if low in ("true", "false"):
                return low.upper()
            try:
                value = Decimal(low)
            except InvalidOperation:
                raise SqlServerError(245, f"Conversion failed when converting the varchar value '{value}' "
                                          "to data type bit.") from None
        return "TRUE" if value else "FALSE"
    if n in _INT_RANGES:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise SqlServerError(245, f"Conversion failed when converting the nvarchar value '{value}' to "
                                          f"data type {n}.") from None
        if isinstance(value, (float, Decimal)):
            value = int(value)
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise _clash(value, t)
        lo, hi = _INT_RANGES[n]
        if not lo <= value <= hi:
            if n == "tinyint":
                raise SqlServerError(220, f"Arithmetic overflow error for data type tinyint, value = {value}.")
            raise SqlServerError(8115, f"Arithmetic overflow error converting expression to data type {n}.")
        return f"({value})::{pg_type(t)}"
    if n in ("decimal", "numeric", "money", "smallmoney"):
        try:
            d = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
        except InvalidOperation:
            raise SqlServerError(8114, f"Error converting data type nvarchar to {n}.") from None
        scale = 4 if n in ("money", "smallmoney") else (t.scale or 0)
        precision = {"money": 19, "smallmoney": 10}.get(n, t.precision or 18)
        with localcontext(Context(prec=80)):  # numeric(38, s) needs more than the default 28 digits
            q = d.quantize(Decimal(1).scaleb(-scale)) if scale else d.quantize(Decimal(1))
        if len(q.as_tuple().digits) - max(0, -int(q.as_tuple().exponent)) > precision - scale and q != 0:
            if n in ("money", "smallmoney"):
                raise SqlServerError(8115, f"Arithmetic overflow error converting expression to data type {n}.")
            raise SqlServerError(8115, "Arithmetic overflow error converting numeric to data type numeric.")
        return f"({q})::{pg_type(t)}"
    if n in ("real", "float"):
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise SqlServerError(8114, f"Error converting data type nvarchar to {n}.") from None
        return f"'{f!r}'::{pg_type(t)}"
    if n in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml", "sysname"):
        text = _as_text(value)
        if t.length not in (None, MAX) and n not in ("text", "ntext", "xml"):
            if len(text.rstrip(" ")) > t.length and not explicit:
                raise truncation(table, column, text[: t.length])
            text = text[: t.length]
        return f"{quote(text)}::{pg_type(t)}"
    if n in ("binary", "varbinary", "image", "timestamp"):
        if isinstance(value, str):
            data = value.encode("utf-8")
        elif isinstance(value, int):
            data = value.to_bytes(4 if -2**31 <= value < 2**31 else 8, "big", signed=True)
        else:
            data = bytes(value)
        if t.length not in (None, MAX):
            if len(data) > t.length:
                if not explicit:
                    raise truncation(table, column, "")
                data = data[: t.length]
            if n == "binary":
                data = data.ljust(t.length, b"\0")
        return f"'\\x{data.hex()}'::bytea"
    if n == "uniqueidentifier":
        try:
            u = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value).strip().strip("{}"))
        except ValueError:
            raise SqlServerError(8169, "Conversion failed when converting from a character string to "
                                       "uniqueidentifier.") from None
        return f"'{u}'::uuid"
    if n == "date":
        date, _ = _to_date_ticks(value)
        return f"'{date.isoformat()}'::date"
    if n in ("datetime", "smalldatetime"):
        date, ticks = _to_date_ticks(value)
        v = round_datetime(date, ticks) if n == "datetime" else round_smalldatetime(date, ticks)
        if n == "smalldatetime" and not dt.date(1900, 1, 1) <= v.date() <= dt.date(2079, 6, 6):
            raise SqlServerError(242, "The conversion of a nvarchar data type to a smalldatetime data type "
                                      "resulted in an out-of-range value.")
        if n == "datetime" and v.year < 1753:
            raise SqlServerError(242, "The conversion of a nvarchar data type to a datetime data type resulted "
                                      "in an out-of-range value.")
        return f"'{v.isoformat(sep=' ', timespec='milliseconds')}'::{pg_type(t)}"
    if n == "datetime2":
        date, ticks = _to_date_ticks(value)
        date, ticks = _normalize(date, _round_ticks(ticks, t.scale if t.scale is not None else 7))
        return datetime2_sql(DateTime2(date, Time(ticks)))
    if n == "time":
        if isinstance(value, Time):
            ticks = value.ticks
        elif isinstance(value, dt.time):
            ticks = Time.from_time(value).ticks
        elif isinstance(value, (DateTime2, dt.datetime)):
            ticks = _to_date_ticks(value)[1]
        else:
            ticks = _split_datetime(_as_text(value))[1]
        ticks = _round_ticks(ticks, t.scale if t.scale is not None else 7) % TICKS_PER_DAY
        return time_sql(Time(ticks))
    if n == "datetimeoffset":
        scale = t.scale if t.scale is not None else 7
        if isinstance(value, DateTimeOffset):
            d = value
        elif isinstance(value, str):
            d = parse_datetimeoffset(value, scale)
        else:
            date, ticks = _to_date_ticks(value)
            d = DateTimeOffset(DateTime2(date, Time(ticks)), 0)
        date, ticks = _normalize(d.utc.date, _round_ticks(d.utc.time.ticks, scale))
        return datetimeoffset_sql(DateTimeOffset(DateTime2(date, Time(ticks)), d.offset_minutes))
    if n == "sql_variant":
        base = python_type_of(value)
        return f"ROW({quote(str(base))}, {quote(_variant_text(value))})::sys.sql_variant"
    raise SqlServerError(50000, f"emulator: conversion to {t} is not supported")


def _variant_text(value: Any) -> str:
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, (DateTime2, DateTimeOffset, Time)):
        return value.isoformat()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    return str(value)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (DateTime2, DateTimeOffset, Time)):
        return value.isoformat()
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="milliseconds")
    return str(value)


def _to_date_ticks(value: Any) -> tuple[dt.date, int]:
    if isinstance(value, DateTimeOffset):
        local = value.local()
        return local.date, local.time.ticks
    if isinstance(value, DateTime2):
        return value.date, value.time.ticks
    if isinstance(value, dt.datetime):
        return value.date(), Time.from_time(value.time()).ticks
    if isinstance(value, dt.date):
        return value, 0
    if isinstance(value, str):
        m = _OFFSET_RE.match(value.strip())
        if m and _DATE_RE.match(m.group(1)) and (m.group(2) == "Z" or ":" in m.group(2)):
            d = parse_datetimeoffset(value)
            return d.local().date, d.local().time.ticks
        return _split_datetime(value)
    raise SqlServerError(206, f"Operand type clash: {python_type_of(value).name} is incompatible with datetime2")


def _clash(value: Any, t: SqlType) -> SqlServerError:
    return SqlServerError(206, f"Operand type clash: {python_type_of(value).name} is incompatible with {t.name}")


def truncation(table: str, column: str, value: str) -> SqlServerError:
    return SqlServerError(2628, f"String or binary data would be truncated in table '{table}', column "
                                f"'{column}'. Truncated value: '{value}'.", state=1, aborts_batch=False)

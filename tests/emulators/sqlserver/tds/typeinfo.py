"""TYPE_INFO and value codecs (MS-TDS 2.2.5.4-2.2.5.5) for every SQL Server type of ``sqltypes``.

Writing (result columns, RETURNVALUE): ``type_info(sqltype)`` gives the TYPE_INFO bytes and
``encoder(sqltype)`` a function turning a Python value (see ``values.py``) into the value bytes,
length prefix included, ``None`` into that type's NULL. Nullable "N" types are always used
(INTN, FLTN, …): they can carry NULL whatever the column's nullability, and clients accept them
for NOT NULL columns as well.

Reading (RPC parameters): ``read_type_info`` and ``read_value`` accept what clients send, the
fixed-length legacy types (INT4, FLT8, DATETIME, …) included.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from ..sqltypes import MAX, SqlType
from ..values import TICKS_PER_DAY, DateTime2, DateTimeOffset, Time, Variant
from .packets import ProtocolError
from .wire import Reader

# SQL_Latin1_General_CP1_CI_AS: LCID 0x0409, flags IgnoreCase|IgnoreKana|IgnoreWidth, sort id 52
COLLATION = bytes.fromhex("0904d00034")
CODEPAGE = "cp1252"

# TDS data type tokens
NULLTYPE, INT1, BIT, INT2, INT4, INT8 = 0x1F, 0x30, 0x32, 0x34, 0x38, 0x7F
DATETIM4, FLT4, MONEY, DATETIME, FLT8, MONEY4 = 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x7A
GUID, INTN, DECIMAL, NUMERIC, BITN, DECIMALN, NUMERICN = 0x24, 0x26, 0x37, 0x3F, 0x68, 0x6A, 0x6C
FLTN, MONEYN, DATETIMN = 0x6D, 0x6E, 0x6F
DATEN, TIMEN, DATETIME2N, DATETIMEOFFSETN = 0x28, 0x29, 0x2A, 0x2B
CHAR, VARCHAR, BINARY, VARBINARY = 0x2F, 0x27, 0x2D, 0x25
BIGVARBIN, BIGVARCHAR, BIGBINARY, BIGCHAR, NVARCHAR, NCHAR = 0xA5, 0xA7, 0xAD, 0xAF, 0xE7, 0xEF
TEXT, IMAGE, NTEXT, SSVARIANT, XML, UDT = 0x23, 0x22, 0x63, 0x62, 0xF1, 0xF0

USER_TYPE_TIMESTAMP = 80  # what SQL Server sends as UserType for timestamp/rowversion columns

_ROUND = Context(prec=100, rounding=ROUND_HALF_UP)
_DATETIME_EPOCH = dt.date(1900, 1, 1).toordinal()
_PLP_NULL = 0xFFFFFFFFFFFFFFFF
_PLP_UNKNOWN = 0xFFFFFFFFFFFFFFFE
_TEXTPTR = b"\x10" + b"\x00" * 16 + b"\x00" * 8  # 16-byte text pointer + 8-byte timestamp

_INTN_BY_NAME = {"tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}
_INT_BY_SIZE = {1: "tinyint", 2: "smallint", 4: "int", 8: "bigint"}


class EncodeError(ValueError):
    """A value that does not fit the column's type (a bug in the layer that produced it)."""


def decimal_size(precision: int) -> int:
    """Bytes of the magnitude of a decimal(p, s) value."""
    return 4 if precision <= 9 else 8 if precision <= 19 else 12 if precision <= 28 else 16


def time_size(scale: int) -> int:
    return 3 if scale <= 2 else 4 if scale <= 4 else 5


# ---------------------------------------------------------------------------------------------
# TYPE_INFO writing


def type_info(t: SqlType) -> bytes:
    name = t.name
    if name == "bit":
        return bytes([BITN, 1])
    if name in _INTN_BY_NAME:
        return bytes([INTN, _INTN_BY_NAME[name]])
    if name in ("decimal", "numeric"):
        p, s = t.precision or 18, t.scale or 0
        return bytes([DECIMALN if name == "decimal" else NUMERICN, 1 + decimal_size(p), p, s])
    if name in ("money", "smallmoney"):
        return bytes([MONEYN, 8 if name == "money" else 4])
    if name in ("real", "float"):
        return bytes([FLTN, 4 if name == "real" else 8])
    if name in ("char", "varchar", "nchar", "nvarchar"):
        token = {"char": BIGCHAR, "varchar": BIGVARCHAR, "nchar": NCHAR, "nvarchar": NVARCHAR}[name]
        size = 0xFFFF if t.length == MAX else t.max_length
        return bytes([token]) + struct.pack("<H", size) + COLLATION
    if name in ("binary", "varbinary"):
        size = 0xFFFF if t.length == MAX else t.max_length
        return bytes([BIGBINARY if name == "binary" else BIGVARBIN]) + struct.pack("<H", size)
    if name in ("timestamp", "rowversion"):
        return bytes([BIGBINARY]) + struct.pack("<H", 8)
    if name == "text":
        return bytes([TEXT]) + struct.pack("<I", 0x7FFFFFFF) + COLLATION
    if name == "ntext":
        return bytes([NTEXT]) + struct.pack("<I", 0x7FFFFFFE) + COLLATION
    if name == "image":
        return bytes([IMAGE]) + struct.pack("<I", 0x7FFFFFFF)
    if name == "date":
        return bytes([DATEN])
    if name in ("time", "datetime2", "datetimeoffset"):
        token = {"time": TIMEN, "datetime2": DATETIME2N, "datetimeoffset": DATETIMEOFFSETN}[name]
        return bytes([token, 7 if t.scale is None else t.scale])
    if name in ("datetime", "smalldatetime"):
        return bytes([DATETIMN, 8 if name == "datetime" else 4])
    if name == "uniqueidentifier":
        return bytes([GUID, 16])
    if name == "xml":
        return bytes([XML, 0])  # no schema collection
    if name == "sql_variant":
        return bytes([SSVARIANT]) + struct.pack("<I", 8016)
    raise EncodeError(f"the TDS layer cannot describe type {t}")


def user_type(t: SqlType) -> int:
    return USER_TYPE_TIMESTAMP if t.name in ("timestamp", "rowversion") else 0


def is_long_type(t: SqlType) -> bool:
    """text/ntext/image: COLMETADATA carries a TableName, ROW values a text pointer."""
    return t.name in ("text", "ntext", "image")


# ---------------------------------------------------------------------------------------------
# value encoding (pure functions of the value; used per row, so kept lean)

_B = struct.Struct("<B")
_LEN_I8 = struct.Struct("<Bb")
_LEN_U8 = struct.Struct("<BB")
_LEN_I16 = struct.Struct("<Bh")
_LEN_I32 = struct.Struct("<Bi")
_LEN_I64 = struct.Struct("<Bq")
_LEN_F32 = struct.Struct("<Bf")
_LEN_F64 = struct.Struct("<Bd")
_LEN_MONEY = struct.Struct("<BiI")
_LEN_SMALLDT = struct.Struct("<BHH")
_LEN_DT = struct.Struct("<BiI")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_NULL1 = b"\x00"
_NULL2 = b"\xff\xff"
_PLP_NULL_BYTES = _U64.pack(_PLP_NULL)
_PLP_CHUNK = 1 << 20


def _plp(data: bytes) -> bytes:
    parts = [_U64.pack(len(data))]
    for i in range(0, len(data), _PLP_CHUNK):
        chunk = data[i:i + _PLP_CHUNK]
        parts.append(_U32.pack(len(chunk)))
        parts.append(chunk)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def scaled_decimal(value: Any, precision: int, scale: int) -> int:
    """``value`` × 10^scale as an integer (half-up, as SQL Server rounds), checked against precision."""
    d = value if isinstance(value, Decimal) else Decimal(str(value)) if isinstance(value, float) else Decimal(value)
    scaled = d.scaleb(scale, _ROUND)
    n = int(scaled)
    if n != scaled:  # more digits than the scale keeps: round half up, as SQL Server does
        n = int(scaled.to_integral_value(context=_ROUND))
    if abs(n) >= 10 ** precision:
        raise EncodeError(f"{value} does not fit decimal({precision},{scale})")
    return n


def _money_units(value: Any, lo: int, hi: int) -> int:
    n = scaled_decimal(value, 19, 4)
    if not lo <= n <= hi:
        raise EncodeError(f"{value} out of range for money")
    return n


def _as_time_ticks(value: Any) -> int:
    if isinstance(value, Time):
        return value.ticks
    if isinstance(value, dt.time):
        return Time.from_time(value).ticks
    raise EncodeError(f"not a time value: {value!r}")


def _as_datetime2(value: Any) -> DateTime2:
    if isinstance(value, DateTime2):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            raise EncodeError(f"datetime2 value with a time zone: {value!r}")
        return DateTime2.from_datetime(value)
    raise EncodeError(f"not a datetime2 value: {value!r}")


def _as_dto(value: Any) -> DateTimeOffset:
    if isinstance(value, DateTimeOffset):
        return value
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        offset = value.utcoffset()
        assert offset is not None
        utc = value.replace(tzinfo=None) - offset
        return DateTimeOffset(DateTime2.from_datetime(utc), int(offset.total_seconds()) // 60)
    raise EncodeError(f"not a datetimeoffset value: {value!r}")


def _time_bytes(ticks: int, scale: int) -> bytes:
    if not 0 <= ticks < TICKS_PER_DAY:
        raise EncodeError(f"time ticks out of range: {ticks}")
    return (ticks // 10 ** (7 - scale)).to_bytes(time_size(scale), "little")


def _date_bytes(value: dt.date) -> bytes:
    return (value.toordinal() - 1).to_bytes(3, "little")


def _datetime_parts(value: Any) -> tuple[int, int]:
    """(days since 1900-01-01, 1/300 s ticks) with SQL Server's rounding."""
    if isinstance(value, DateTime2):
        value = value.to_datetime()
    if not isinstance(value, dt.datetime):
        raise EncodeError(f"not a datetime value: {value!r}")
    days = value.toordinal() - _DATETIME_EPOCH
    micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    ticks = (micros * 300 + 500_000) // 1_000_000
    if ticks >= 300 * 86_400:
        days, ticks = days + 1, 0
    return days, ticks


def _smalldatetime_parts(value: Any) -> tuple[int, int]:
    if isinstance(value, DateTime2):
        value = value.to_datetime()
    if not isinstance(value, dt.datetime):
        raise EncodeError(f"not a smalldatetime value: {value!r}")
    days = value.toordinal() - _DATETIME_EPOCH
    minutes = (value.hour * 3600 + value.minute * 60 + value.second + 30) // 60
    if minutes >= 1440:
        days, minutes = days + 1, 0
    if not 0 <= days <= 0xFFFF:
        raise EncodeError(f"{value} out of range for smalldatetime")
    return days, minutes


def _char_bytes(value: Any, unicode: bool) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"not a string value: {value!r}")
    if unicode:
        return value.encode("utf-16-le")
    if value.isascii():  # the common case, and much faster than the cp1252 codec
        return value.encode("ascii")
    # SQL Server itself replaces characters a varchar's code page lacks with '?'
    return value.encode(CODEPAGE, errors="replace")


def _binary_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise EncodeError(f"not a binary value: {value!r}")


def encoder(t: SqlType) -> Callable[[Any], bytes]:
    """The value encoder of a column of type ``t`` (NULL included)."""
    name = t.name
    if name == "bit":
        return lambda v: _NULL1 if v is None else (b"\x01\x01" if v else b"\x01\x00")
    if name in _INTN_BY_NAME:
        packer = {"tinyint": _LEN_U8, "smallint": _LEN_I16, "int": _LEN_I32, "bigint": _LEN_I64}[name].pack
        size = _INTN_BY_NAME[name]
        return lambda v: _NULL1 if v is None else packer(size, v)
    if name in ("real", "float"):
        packer = (_LEN_F32 if name == "real" else _LEN_F64).pack
        size = 4 if name == "real" else 8
        return lambda v: _NULL1 if v is None else packer(size, v)
    if name in ("decimal", "numeric"):
        precision, scale = t.precision or 18, t.scale or 0
        size = decimal_size(precision)

        def enc_decimal(v: Any) -> bytes:
            if v is None:
                return _NULL1
            n = scaled_decimal(v, precision, scale)
            return bytes([size + 1, 1 if n >= 0 else 0]) + abs(n).to_bytes(size, "little")
        return enc_decimal
    if name == "money":
        def enc_money(v: Any) -> bytes:
            if v is None:
                return _NULL1
            n = _money_units(v, -(2 ** 63), 2 ** 63 - 1)
            return _LEN_MONEY.pack(8, n >> 32, n & 0xFFFFFFFF)
        return enc_money
    if name == "smallmoney":
        return lambda v: _NULL1 if v is None else _LEN_I32.pack(4, _money_units(v, -(2 ** 31), 2 ** 31 - 1))
    if name in ("char", "varchar", "nchar", "nvarchar"):
        unicode = name in ("nchar", "nvarchar")
        if t.length == MAX:
            return lambda v: _PLP_NULL_BYTES if v is None else _plp(_char_bytes(v, unicode))
        limit = t.max_length
        pad = name in ("char", "nchar")

        def enc_char(v: Any) -> bytes:
            if v is None:
                return _NULL2
            data = _char_bytes(v, unicode)
            if len(data) > limit:
                raise EncodeError(f"string of {len(data)} bytes does not fit {t}")
            if pad and len(data) < limit:
                data += (" " * ((limit - len(data)) // (2 if unicode else 1))).encode(
                    "utf-16-le" if unicode else "ascii")
            return _U16.pack(len(data)) + data
        return enc_char
    if name in ("binary", "varbinary", "timestamp", "rowversion"):
        if t.length == MAX:
            return lambda v: _PLP_NULL_BYTES if v is None else _plp(_binary_bytes(v))
        limit = 8 if name in ("timestamp", "rowversion") else t.max_length
        pad = name != "varbinary"

        def enc_binary(v: Any) -> bytes:
            if v is None:
                return _NULL2
            data = _binary_bytes(v)
            if len(data) > limit:
                raise EncodeError(f"binary value of {len(data)} bytes does not fit {t}")
            if pad and len(data) < limit:
                data += b"\x00" * (limit - len(data))
            return _U16.pack(len(data)) + data
        return enc_binary
    if name in ("text", "ntext", "image"):
        def enc_long(v: Any) -> bytes:
            if v is None:
                return _NULL1  # a zero-length text pointer
            data = _binary_bytes(v) if name == "image" else _char_bytes(v, name == "ntext")
            return _TEXTPTR + _U32.pack(len(data)) + data
        return enc_long
    if name == "xml":
        return lambda v: _PLP_NULL_BYTES if v is None else _plp(_char_bytes(v, True))
    if name == "date":
        def enc_date(v: Any) -> bytes:
            if v is None:
                return _NULL1
            if isinstance(v, dt.datetime) or not isinstance(v, dt.date):
                raise EncodeError(f"not a date value: {v!r}")
            return b"\x03" + _date_bytes(v)
        return enc_date
    if name in ("time", "datetime2", "datetimeoffset"):
        scale = 7 if t.scale is None else t.scale
        size = time_size(scale) + {"time": 0, "datetime2": 3, "datetimeoffset": 5}[name]
        prefix = bytes([size])
        if name == "time":
            return lambda v: _NULL1 if v is None else prefix + _time_bytes(_as_time_ticks(v), scale)
        if name == "datetime2":
            def enc_dt2(v: Any) -> bytes:
                if v is None:
                    return _NULL1
                v = _as_datetime2(v)
                return prefix + _time_bytes(v.time.ticks, scale) + _date_bytes(v.date)
            return enc_dt2

        def enc_dto(v: Any) -> bytes:
            if v is None:
                return _NULL1
            v = _as_dto(v)
            return (prefix + _time_bytes(v.utc.time.ticks, scale) + _date_bytes(v.utc.date)
                    + struct.pack("<h", v.offset_minutes))
        return enc_dto
    if name == "datetime":
        def enc_datetime(v: Any) -> bytes:
            if v is None:
                return _NULL1
            days, ticks = _datetime_parts(v)
            return _LEN_DT.pack(8, days, ticks)
        return enc_datetime
    if name == "smalldatetime":
        def enc_smalldatetime(v: Any) -> bytes:
            if v is None:
                return _NULL1
            days, minutes = _smalldatetime_parts(v)
            return _LEN_SMALLDT.pack(4, days, minutes)
        return enc_smalldatetime
    if name == "uniqueidentifier":
        def enc_guid(v: Any) -> bytes:
            if v is None:
                return _NULL1
            if not isinstance(v, uuid.UUID):
                v = uuid.UUID(str(v))
            return b"\x10" + v.bytes_le
        return enc_guid
    if name == "sql_variant":
        def enc_variant(v: Any) -> bytes:
            if v is None:
                return b"\x00\x00\x00\x00"
            if not isinstance(v, Variant):
                raise EncodeError(f"sql_variant value must be a Variant: {v!r}")
            if v.value is None:
                return b"\x00\x00\x00\x00"
            body = variant_body(v)
            return _U32.pack(len(body)) + body
        return enc_variant
    raise EncodeError(f"the TDS layer cannot encode type {t}")


def variant_body(v: Variant) -> bytes:
    """BaseType, PropBytes, the properties and the bare value of a non-NULL ``sql_variant``."""
    t, value = v.type, v.value
    name = t.name
    fixed = {"tinyint": (INT1, "<B"), "smallint": (INT2, "<h"), "int": (INT4, "<i"), "bigint": (INT8, "<q"),
             "real": (FLT4, "<f"), "float": (FLT8, "<d")}
    if name in fixed:
        token, fmt = fixed[name]
        return bytes([token, 0]) + struct.pack(fmt, value)
    if name == "bit":
        return bytes([BIT, 0, 1 if value else 0])
    if name == "money":
        n = _money_units(value, -(2 ** 63), 2 ** 63 - 1)
        return bytes([MONEY, 0]) + struct.pack("<iI", n >> 32, n & 0xFFFFFFFF)
    if name == "smallmoney":
        return bytes([MONEY4, 0]) + struct.pack("<i", _money_units(value, -(2 ** 31), 2 ** 31 - 1))
    if name == "datetime":
        return bytes([DATETIME, 0]) + struct.pack("<iI", *_datetime_parts(value))
    if name == "smalldatetime":
        return bytes([DATETIM4, 0]) + struct.pack("<HH", *_smalldatetime_parts(value))
    if name == "uniqueidentifier":
        u = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
        return bytes([GUID, 0]) + u.bytes_le
    if name == "date":
        return bytes([DATEN, 0]) + _date_bytes(value)
    if name in ("time", "datetime2", "datetimeoffset"):
        scale = 7 if t.scale is None else t.scale
        if name == "time":
            return bytes([TIMEN, 1, scale]) + _time_bytes(_as_time_ticks(value), scale)
        if name == "datetime2":
            d2 = _as_datetime2(value)
            return bytes([DATETIME2N, 1, scale]) + _time_bytes(d2.time.ticks, scale) + _date_bytes(d2.date)
        dto = _as_dto(value)
        return (bytes([DATETIMEOFFSETN, 1, scale]) + _time_bytes(dto.utc.time.ticks, scale)
                + _date_bytes(dto.utc.date) + struct.pack("<h", dto.offset_minutes))
    if name in ("decimal", "numeric"):
        precision, scale = t.precision or 18, t.scale or 0
        n = scaled_decimal(value, precision, scale)
        return (bytes([DECIMALN if name == "decimal" else NUMERICN, 2, precision, scale, 1 if n >= 0 else 0])
                + abs(n).to_bytes(decimal_size(precision), "little"))
    if name in ("binary", "varbinary") and t.length != MAX:
        data = _binary_bytes(value)
        if name == "binary" and len(data) < t.max_length:
            data += b"\x00" * (t.max_length - len(data))
        return bytes([BIGBINARY if name == "binary" else BIGVARBIN, 2]) + struct.pack("<H", t.max_length) + data
    if name in ("char", "varchar", "nchar", "nvarchar") and t.length != MAX:
        unicode = name in ("nchar", "nvarchar")
        data = _char_bytes(value, unicode)
        token = {"char": BIGCHAR, "varchar": BIGVARCHAR, "nchar": NCHAR, "nvarchar": NVARCHAR}[name]
        return bytes([token, 7]) + COLLATION + struct.pack("<H", t.max_length) + data
    raise EncodeError(f"type {t} cannot be the base type of a sql_variant")


# ---------------------------------------------------------------------------------------------
# reading TYPE_INFO and values (RPC parameters)


@dataclass(frozen=True, slots=True)
class TypeInfo:
    token: int
    size: int = 0              # the declared length (bytes); 0xFFFF for (max) USHORTLEN types
    precision: int = 0
    scale: int = 0
    collation: bytes = b""
    sqltype: SqlType = field(default_factory=lambda: SqlType("int"))

    @property
    def plp(self) -> bool:
        return self.token == XML or (self.token in _USHORTLEN and self.size == 0xFFFF)


_FIXED = {INT1: 1, BIT: 1, INT2: 2, INT4: 4, INT8: 8, DATETIM4: 4, FLT4: 4, MONEY: 8, DATETIME: 8,
          FLT8: 8, MONEY4: 4, NULLTYPE: 0}
_FIXED_SQLTYPE = {INT1: "tinyint", BIT: "bit", INT2: "smallint", INT4: "int", INT8: "bigint",
                  DATETIM4: "smalldatetime", FLT4: "real", MONEY: "money", DATETIME: "datetime",
                  FLT8: "float", MONEY4: "smallmoney", NULLTYPE: "int"}
_USHORTLEN = {BIGVARBIN, BIGVARCHAR, BIGBINARY, BIGCHAR, NVARCHAR, NCHAR}
_CHAR_TOKENS = {BIGCHAR: "char", BIGVARCHAR: "varchar", NCHAR: "nchar", NVARCHAR: "nvarchar"}


def read_type_info(r: Reader) -> TypeInfo:
    token = r.u8()
    if token in _FIXED:
        return TypeInfo(token, _FIXED[token], sqltype=SqlType(_FIXED_SQLTYPE[token]))
    if token in (INTN, BITN, FLTN, MONEYN, DATETIMN, GUID):
        size = r.u8()
        if token == INTN:
            if size not in _INT_BY_SIZE:
                raise ProtocolError(f"INTN of length {size}")
            name = _INT_BY_SIZE[size]
        else:
            name = {BITN: "bit", GUID: "uniqueidentifier",
                    FLTN: "real" if size == 4 else "float",
                    MONEYN: "smallmoney" if size == 4 else "money",
                    DATETIMN: "smalldatetime" if size == 4 else "datetime"}[token]
        return TypeInfo(token, size, sqltype=SqlType(name))
    if token in (DECIMALN, NUMERICN, DECIMAL, NUMERIC):
        size, precision, scale = r.u8(), r.u8(), r.u8()
        name = "decimal" if token in (DECIMALN, DECIMAL) else "numeric"
        return TypeInfo(token, size, precision, scale, sqltype=SqlType(name, precision=precision, scale=scale))
    if token == DATEN:
        return TypeInfo(token, sqltype=SqlType("date"))
    if token in (TIMEN, DATETIME2N, DATETIMEOFFSETN):
        scale = r.u8()
        if scale > 7:
            raise ProtocolError(f"time scale {scale}")
        name = {TIMEN: "time", DATETIME2N: "datetime2", DATETIMEOFFSETN: "datetimeoffset"}[token]
        return TypeInfo(token, scale=scale, sqltype=SqlType(name, scale=scale))
    if token in _USHORTLEN:
        size = r.u16()
        collation = r.take(5) if token in _CHAR_TOKENS else b""
        if token in _CHAR_TOKENS:
            name = _CHAR_TOKENS[token]
            unicode = token in (NCHAR, NVARCHAR)
            length = MAX if size == 0xFFFF else (size // 2 if unicode else size)
        else:
            name = "binary" if token == BIGBINARY else "varbinary"
            length = MAX if size == 0xFFFF else size
        return TypeInfo(token, size, collation=collation, sqltype=SqlType(name, length=length))
    if token in (TEXT, NTEXT, IMAGE):
        size = r.u32()
        collation = r.take(5) if token != IMAGE else b""
        return TypeInfo(token, size, collation=collation,
                        sqltype=SqlType({TEXT: "text", NTEXT: "ntext", IMAGE: "image"}[token]))
    if token == XML:
        if r.u8():  # schema collection: database, owning schema, collection name
            r.b_varchar()
            r.b_varchar()
            r.us_varchar()
        return TypeInfo(token, sqltype=SqlType("xml"))
    if token == SSVARIANT:
        return TypeInfo(token, r.u32(), sqltype=SqlType("sql_variant"))
    if token in (CHAR, VARCHAR, BINARY, VARBINARY):
        raise ProtocolError(f"legacy TDS type 0x{token:02X} is not accepted by the emulator (TDS 7.4 clients "
                            "send BIGCHAR/BIGVARCHAR/BIGBINARY/BIGVARBINARY)")
    if token == UDT:
        raise ProtocolError("CLR UDT parameters are not supported by the emulator")
    raise ProtocolError(f"unknown TDS type 0x{token:02X}")


def _read_plp(r: Reader) -> bytes | None:
    total = r.u64()
    if total == _PLP_NULL:
        return None
    parts = []
    while True:
        size = r.u32()
        if size == 0:
            break
        parts.append(r.take(size))
    return b"".join(parts)


def _decode_chars(data: bytes, ti: TypeInfo) -> str:
    if ti.token in (NCHAR, NVARCHAR, NTEXT, XML):
        return data.decode("utf-16-le")
    return data.decode(CODEPAGE, errors="replace")


def read_value(r: Reader, ti: TypeInfo) -> Any:
    token = ti.token
    if token in _FIXED:
        return None if token == NULLTYPE else _fixed_value(token, r.take(ti.size))
    if token in (INTN, BITN, FLTN, MONEYN, DATETIMN, GUID):
        size = r.u8()
        if size == 0:
            return None
        data = r.take(size)
        if token == GUID:
            return uuid.UUID(bytes_le=data)
        fixed = {(INTN, 1): INT1, (INTN, 2): INT2, (INTN, 4): INT4, (INTN, 8): INT8, (BITN, 1): BIT,
                 (FLTN, 4): FLT4, (FLTN, 8): FLT8, (MONEYN, 4): MONEY4, (MONEYN, 8): MONEY,
                 (DATETIMN, 4): DATETIM4, (DATETIMN, 8): DATETIME}.get((token, size))
        if fixed is None:
            raise ProtocolError(f"type 0x{token:02X} with value length {size}")
        return _fixed_value(fixed, data)
    if token in (DECIMALN, NUMERICN, DECIMAL, NUMERIC):
        size = r.u8()
        if size == 0:
            return None
        return _decimal_value(r.take(size), ti.scale)
    if token == DATEN:
        size = r.u8()
        return None if size == 0 else _date_value(r.take(size))
    if token in (TIMEN, DATETIME2N, DATETIMEOFFSETN):
        size = r.u8()
        return None if size == 0 else _temporal_value(token, ti.scale, r.take(size))
    if token in _USHORTLEN:
        if ti.plp:
            data = _read_plp(r)
        else:
            size = r.u16()
            data = None if size == 0xFFFF else r.take(size)
        if data is None:
            return None
        return _decode_chars(data, ti) if token in _CHAR_TOKENS else data
    if token == XML:
        data = _read_plp(r)
        return None if data is None else data.decode("utf-16-le")
    if token in (TEXT, NTEXT, IMAGE):
        size = r.u32()
        if size == 0xFFFFFFFF:
            return None
        data = r.take(size)
        return data if token == IMAGE else _decode_chars(data, ti)
    if token == SSVARIANT:
        size = r.u32()
        return None if size == 0 else read_variant(r.take(size))
    raise ProtocolError(f"cannot read a value of TDS type 0x{token:02X}")


def _fixed_value(token: int, data: bytes) -> Any:
    if token == INT1:
        return data[0]
    if token == BIT:
        return bool(data[0])
    if token in (INT2, INT4, INT8):
        return int.from_bytes(data, "little", signed=True)
    if token == FLT4:
        return struct.unpack("<f", data)[0]
    if token == FLT8:
        return struct.unpack("<d", data)[0]
    if token == MONEY:
        high, low = struct.unpack("<iI", data)
        return Decimal((high << 32) | low).scaleb(-4)
    if token == MONEY4:
        return Decimal(struct.unpack("<i", data)[0]).scaleb(-4)
    if token == DATETIME:
        days, ticks = struct.unpack("<iI", data)
        millis = (ticks * 20 + 3) // 6  # 1/300 s ticks, rounded to the millisecond as SQL Server shows them
        return dt.datetime.fromordinal(_DATETIME_EPOCH + days) + dt.timedelta(milliseconds=millis)
    if token == DATETIM4:
        days, minutes = struct.unpack("<HH", data)
        return dt.datetime.fromordinal(_DATETIME_EPOCH + days) + dt.timedelta(minutes=minutes)
    raise ProtocolError(f"fixed type 0x{token:02X}")


def _decimal_value(data: bytes, scale: int) -> Decimal:
    magnitude = int.from_bytes(data[1:], "little")
    return Decimal(magnitude if data[0] else -magnitude).scaleb(-scale, _ROUND)


def _date_value(data: bytes) -> dt.date:
    return dt.date.fromordinal(int.from_bytes(data[:3], "little") + 1)


def _time_ticks(data: bytes, scale: int) -> int:
    return int.from_bytes(data, "little") * 10 ** (7 - scale)


def _temporal_value(token: int, scale: int, data: bytes) -> Any:
    n = time_size(scale)
    ticks = _time_ticks(data[:n], scale)
    if ticks >= TICKS_PER_DAY:
        raise ProtocolError("time value past midnight")
    if token == TIMEN:
        return Time(ticks)
    value = DateTime2(_date_value(data[n:n + 3]), Time(ticks))
    if token == DATETIME2N:
        return value
    (offset,) = struct.unpack("<h", data[n + 3:n + 5])
    return DateTimeOffset(value, offset)


def read_variant(body: bytes) -> Variant:
    """A non-NULL sql_variant value: BaseType, PropBytes, properties, data."""
    base, nprops = body[0], body[1]
    props, data = body[2:2 + nprops], body[2 + nprops:]
    if base in _FIXED and base != NULLTYPE:
        return Variant(_fixed_value(base, data), SqlType(_FIXED_SQLTYPE[base]))
    if base == GUID:
        return Variant(uuid.UUID(bytes_le=data), SqlType("uniqueidentifier"))
    if base == DATEN:
        return Variant(_date_value(data), SqlType("date"))
    if base in (TIMEN, DATETIME2N, DATETIMEOFFSETN):
        scale = props[0]
        name = {TIMEN: "time", DATETIME2N: "datetime2", DATETIMEOFFSETN: "datetimeoffset"}[base]
        return Variant(_temporal_value(base, scale, data), SqlType(name, scale=scale))
    if base in (DECIMALN, NUMERICN):
        precision, scale = props[0], props[1]
        name = "decimal" if base == DECIMALN else "numeric"
        return Variant(_decimal_value(data, scale), SqlType(name, precision=precision, scale=scale))
    if base in (BIGBINARY, BIGVARBIN):
        (size,) = struct.unpack("<H", props[:2])
        return Variant(bytes(data), SqlType("binary" if base == BIGBINARY else "varbinary", length=size))
    if base in _CHAR_TOKENS:
        (size,) = struct.unpack("<H", props[5:7])
        unicode = base in (NCHAR, NVARCHAR)
        text = data.decode("utf-16-le") if unicode else data.decode(CODEPAGE, errors="replace")
        return Variant(text, SqlType(_CHAR_TOKENS[base], length=size // 2 if unicode else size))
    raise ProtocolError(f"sql_variant with base type 0x{base:02X}")


__all__ = [
    "COLLATION", "EncodeError", "TypeInfo", "encoder", "is_long_type", "read_type_info", "read_value",
    "read_variant", "type_info", "user_type", "variant_body",
]

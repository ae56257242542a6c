"""Token writers for the server's token stream (MS-TDS 2.2.7): each function returns the bytes of
one token."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from ..results import Column, Message, ReturnValue
from ..sqltypes import SqlType
from . import typeinfo
from .prelogin import SERVER_VERSION
from .wire import b_varbyte, b_varchar, i32, u16, u32, us_varchar

TDS_VERSION_74 = 0x74000004

COLMETADATA = 0x81
ROW = 0xD1
NBCROW = 0xD2
DONE = 0xFD
DONEPROC = 0xFE
DONEINPROC = 0xFF
ERROR = 0xAA
INFO = 0xAB
ENVCHANGE = 0xE3
LOGINACK = 0xAD
FEATUREEXTACK = 0xAE
RETURNSTATUS = 0x79
RETURNVALUE = 0xAC
ORDER = 0xA9

# DONE status bits
DONE_FINAL = 0x00
DONE_MORE = 0x01
DONE_ERROR = 0x02
DONE_INXACT = 0x04
DONE_COUNT = 0x10
DONE_ATTN = 0x20
DONE_SRVERROR = 0x100

# CurCmd values SQL Server puts in DONE tokens (clients such as mssql-jdbc tell update counts from
# result-set ends by them)
CMD_SELECT = 0xC1
CMD_SELECT_INTO = 0xC2
CMD_TABCREATE = 0xC6
CMD_MERGE = 0x117
CMD_INSERT = 0xC3
CMD_DELETE = 0xC4
CMD_UPDATE = 0xC5
CMD_EXECUTE = 0xE0

# ENVCHANGE types
ENV_DATABASE = 1
ENV_LANGUAGE = 2
ENV_PACKET_SIZE = 4
ENV_COLLATION = 7
ENV_BEGIN_TRAN = 8
ENV_COMMIT_TRAN = 9
ENV_ROLLBACK_TRAN = 10
ENV_RESET_ACK = 18

SERVER_NAME = "EMULATOR"
PROGRAM_NAME = "Microsoft SQL Server"

_DONE = struct.Struct("<BHHQ")

# column flags
_F_NULLABLE = 0x0001
_F_UPDATEABLE_RW = 0x0004
_F_UPDATEABLE_UNKNOWN = 0x0008
_F_IDENTITY = 0x0010


def done(status: int, count: int = 0, cmd: int = 0, token: int = DONE) -> bytes:
    return _DONE.pack(token, status, cmd, count)


def message(m: Message, server_name: str = SERVER_NAME) -> bytes:
    body = (i32(m.number) + bytes([m.state & 0xFF, m.severity & 0xFF]) + us_varchar(m.text)
            + b_varchar(server_name) + b_varchar(m.procedure) + i32(m.line))
    return bytes([ERROR if m.is_error else INFO]) + u16(len(body)) + body


def envchange(kind: int, new: bytes, old: bytes) -> bytes:
    body = bytes([kind]) + new + old
    return bytes([ENVCHANGE]) + u16(len(body)) + body


def env_text(kind: int, new: str, old: str) -> bytes:
    return envchange(kind, b_varchar(new), b_varchar(old))


def env_bytes(kind: int, new: bytes, old: bytes) -> bytes:
    return envchange(kind, b_varbyte(new), b_varbyte(old))


def loginack() -> bytes:
    major, minor, build = SERVER_VERSION
    body = (b"\x01" + struct.pack(">I", TDS_VERSION_74) + b_varchar(PROGRAM_NAME)
            + bytes([major, minor, build >> 8, build & 0xFF]))
    return bytes([LOGINACK]) + u16(len(body)) + body


def featureextack(acks: dict[int, bytes]) -> bytes:
    body = b"".join(bytes([feature]) + u32(len(data)) + data for feature, data in acks.items())
    return bytes([FEATUREEXTACK]) + body + b"\xff"


def returnstatus(value: int) -> bytes:
    return bytes([RETURNSTATUS]) + i32(value)


def returnvalue(rv: ReturnValue) -> bytes:
    name = rv.name if not rv.name or rv.name.startswith("@") else "@" + rv.name
    return (bytes([RETURNVALUE]) + u16(rv.ordinal) + b_varchar(name) + b"\x01"
            + u32(typeinfo.user_type(rv.type)) + u16(_F_NULLABLE) + typeinfo.type_info(rv.type)
            + typeinfo.encoder(rv.type)(rv.value))


def colmetadata(columns: Sequence[Column]) -> bytes:
    parts = [bytes([COLMETADATA]), u16(len(columns))]
    for col in columns:
        flags = _F_NULLABLE if col.nullable else 0
        flags |= _F_UPDATEABLE_RW if col.writable else _F_UPDATEABLE_UNKNOWN
        if col.identity:
            flags |= _F_IDENTITY
        parts.append(u32(typeinfo.user_type(col.type)) + u16(flags) + typeinfo.type_info(col.type))
        if typeinfo.is_long_type(col.type):
            # 1..4 parts: mssql-jdbc rejects a TableName of 0 parts, so an unknown table is one empty part
            names = col.table.split(".")[-4:] if col.table else [""]
            parts.append(bytes([len(names)]) + b"".join(us_varchar(n) for n in names))
        parts.append(b_varchar(col.name))
    return b"".join(parts)


def row_encoder(types: Sequence[SqlType], names: Sequence[str] = ()) -> Callable[[Sequence[Any]], bytes]:
    """A function encoding one row (a tuple of Python values) as a ROW token; a value that does not
    fit raises ``EncodeError`` naming the column."""
    encoders = [typeinfo.encoder(t) for t in types]
    width = len(encoders)
    head = bytes([ROW])
    nbc_head = bytes([NBCROW])
    bitmap_size = (width + 7) // 8

    def encode(row: Sequence[Any]) -> bytes:
        if len(row) != width:
            raise typeinfo.EncodeError(f"row of {len(row)} values for {width} columns")
        try:
            if None in row:
                return _with_nulls(row)
            return head + b"".join([enc(v) for enc, v in zip(encoders, row)])
        except Exception:
            _name_the_culprit(row)
            raise

    def _with_nulls(row: Sequence[Any]) -> bytes:
        # NBCROW (a NULL bitmap, then only the non-NULL values) when that is shorter, as SQL Server
        # chooses; ROW otherwise
        values = [enc(v) for enc, v in zip(encoders, row)]
        bitmap = bytearray(bitmap_size)
        present = []
        for index, (value, data) in enumerate(zip(row, values)):
            if value is None:
                bitmap[index >> 3] |= 1 << (index & 7)
            else:
                present.append(data)
        saved = sum(len(data) for value, data in zip(row, values) if value is None)
        if saved > bitmap_size:
            return nbc_head + bytes(bitmap) + b"".join(present)
        return head + b"".join(values)

    def _name_the_culprit(row: Sequence[Any]) -> None:
        for index, (enc, value) in enumerate(zip(encoders, row)):
            try:
                enc(value)
            except Exception as exc:
                name = names[index] if names else str(index + 1)
                raise typeinfo.EncodeError(f"column '{name}' ({types[index]}): cannot encode {value!r:.80} "
                                           f"({type(value).__name__}): {exc}") from exc
    return encode

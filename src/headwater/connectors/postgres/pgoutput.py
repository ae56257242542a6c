"""Decoder for PostgreSQL's `pgoutput` logical replication protocol (versions 1 and 2).

Sans-I/O: functions take the payload bytes of one XLogData message and return plain message
objects; nothing here touches a socket, so every branch is unit-testable on bytes. The message
layouts are those of the PostgreSQL manual, "Logical Replication Message Formats".

Tuple values stay as the server sent them (text, or `UNCHANGED_TOAST` for an unchanged
out-of-line value); turning text into typed values is the job of the value converters, which
the snapshot path shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct
from struct import error as StructError
from typing import Any

# Microseconds between the Unix epoch and PostgreSQL's epoch (2000-01-01 UTC).
PG_EPOCH_OFFSET_US = 946_684_800_000_000

_I8 = Struct("!b")
_I16 = Struct("!h")
_I32 = Struct("!i")
_U32 = Struct("!I")
_I64 = Struct("!q")
_Q = Struct("!Q")
_BEGIN = Struct("!QqI")           # final lsn, commit ts, xid
_COMMIT = Struct("!bQQq")         # flags, commit lsn, end lsn, commit ts
_STREAM_COMMIT = Struct("!IbQQq")  # xid, flags, commit lsn, end lsn, commit ts


class _Unchanged:
    """Marker for a TOASTed value the server did not send because it did not change."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Any = _Unchanged()


class ProtocolError(Exception):
    """The bytes are not a well-formed pgoutput message."""


@dataclass(slots=True)
class Begin:
    final_lsn: int
    commit_ts_us: int  # Unix epoch microseconds
    xid: int


@dataclass(slots=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(slots=True)
class Origin:
    lsn: int
    name: str


@dataclass(slots=True)
class RelationColumn:
    flags: int  # 1 = part of the replica identity key
    name: str
    type_oid: int
    type_modifier: int

    @property
    def is_key(self) -> bool:
        return bool(self.flags & 1)


@dataclass(slots=True)
class Relation:
    xid: int | None
    oid: int
    namespace: str
    name: str
    replica_identity: str  # 'd' default, 'n' nothing, 'f' full, 'i' index
    columns: list[RelationColumn]


@dataclass(slots=True)
class TypeInfo:
    xid: int | None
    oid: int
    namespace: str
    name: str


@dataclass(slots=True)
class Insert:
    xid: int | None
    relation_oid: int
    new: list[Any]


@dataclass(slots=True)
class Update:
    xid: int | None
    relation_oid: int
    old_kind: str | None  # 'K' old key only, 'O' full old row, None when not sent
    old: list[Any] | None
    new: list[Any]


@dataclass(slots=True)
class Delete:
    xid: int | None
    relation_oid: int
    old_kind: str  # 'K' or 'O'
    old: list[Any]


@dataclass(slots=True)
class Truncate:
    xid: int | None
    options: int  # 1 = CASCADE, 2 = RESTART IDENTITY
    relation_oids: list[int]


@dataclass(slots=True)
class Message:
    xid: int | None
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


@dataclass(slots=True)
class StreamStart:
    xid: int
    first_segment: bool


@dataclass(slots=True)
class StreamStop:
    pass


@dataclass(slots=True)
class StreamCommit:
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(slots=True)
class StreamAbort:
    xid: int
    subxid: int


def _cstring(buf: bytes, pos: int) -> tuple[str, int]:
    end = buf.index(0, pos)
    return buf[pos:end].decode("utf-8"), end + 1


def decode_tuple(buf: bytes, pos: int, _len: Any = _I32.unpack_from, _count: Any = _I16.unpack_from
                 ) -> tuple[list[Any], int]:
    """TupleData: Int16 column count, then per column 'n' | 'u' | 't' Int32 len bytes | 'b' ...

    The hottest loop of streaming: the struct methods are bound as defaults and the text case
    comes first (pgoutput sends text unless binary mode is requested)."""
    (ncols,) = _count(buf, pos)
    pos += 2
    values: list[Any] = []
    append = values.append
    for _ in range(ncols):
        kind = buf[pos]
        if kind == 116:  # 't'
            end = pos + 5 + _len(buf, pos + 1)[0]
            append(buf[pos + 5:end].decode("utf-8"))
            pos = end
        elif kind == 110:  # 'n'
            append(None)
            pos += 1
        elif kind == 117:  # 'u'
            append(UNCHANGED_TOAST)
            pos += 1
        elif kind == 98:  # 'b' (binary mode is never requested, but decode it faithfully)
            end = pos + 5 + _len(buf, pos + 1)[0]
            append(bytes(buf[pos + 5:end]))
            pos = end
        else:
            raise ProtocolError(f"unknown tuple column kind {chr(kind)!r} at byte {pos}")
    if pos > len(buf):
        raise ProtocolError(f"tuple data runs past the end of the message ({pos} > {len(buf)} bytes)")
    return values, pos


def decode(buf: bytes, *, in_stream: bool = False) -> Any:
    """Decode one pgoutput message. `in_stream` is true between Stream Start and Stream Stop
    (protocol 2), where data messages carry the subtransaction xid first."""
    if not buf:
        raise ProtocolError("empty pgoutput message")
    kind = buf[0]
    try:
        if kind == 73:  # 'I'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            (rel,) = _U32.unpack_from(buf, pos)
            pos += 4
            if buf[pos] != 78:  # 'N'
                raise ProtocolError("insert without a new tuple")
            new, _ = decode_tuple(buf, pos + 1)
            return Insert(xid, rel, new)
        if kind == 85:  # 'U'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            (rel,) = _U32.unpack_from(buf, pos)
            pos += 4
            old_kind = None
            old = None
            marker = buf[pos]
            if marker in (75, 79):  # 'K' | 'O'
                old_kind = chr(marker)
                old, pos = decode_tuple(buf, pos + 1)
                marker = buf[pos]
            if marker != 78:
                raise ProtocolError("update without a new tuple")
            new, _ = decode_tuple(buf, pos + 1)
            return Update(xid, rel, old_kind, old, new)
        if kind == 68:  # 'D'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            (rel,) = _U32.unpack_from(buf, pos)
            pos += 4
            marker = buf[pos]
            if marker not in (75, 79):
                raise ProtocolError("delete without an old tuple")
            old, _ = decode_tuple(buf, pos + 1)
            return Delete(xid, rel, chr(marker), old)
        if kind == 66:  # 'B'
            final_lsn, ts, xid = _BEGIN.unpack_from(buf, 1)
            return Begin(final_lsn, ts + PG_EPOCH_OFFSET_US, xid)
        if kind == 67:  # 'C'
            flags, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(buf, 1)
            return Commit(flags, commit_lsn, end_lsn, ts + PG_EPOCH_OFFSET_US)
        if kind == 82:  # 'R'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            (oid,) = _U32.unpack_from(buf, pos)
            namespace, pos = _cstring(buf, pos + 4)
            name, pos = _cstring(buf, pos)
            identity = chr(buf[pos])
            (ncols,) = _I16.unpack_from(buf, pos + 1)
            pos += 3
            columns = []
            for _ in range(ncols):
                flags = buf[pos]
                col_name, pos = _cstring(buf, pos + 1)
                (type_oid,) = _U32.unpack_from(buf, pos)
                (typmod,) = _I32.unpack_from(buf, pos + 4)
                pos += 8
                columns.append(RelationColumn(flags, col_name, type_oid, typmod))
            return Relation(xid, oid, namespace, name, identity, columns)
        if kind == 84:  # 'T'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            (nrels,) = _I32.unpack_from(buf, pos)
            options = buf[pos + 4]
            pos += 5
            oids = [_U32.unpack_from(buf, pos + 4 * i)[0] for i in range(nrels)]
            return Truncate(xid, options, oids)
        if kind == 77:  # 'M'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            flags = buf[pos]
            (lsn,) = _Q.unpack_from(buf, pos + 1)
            prefix, pos = _cstring(buf, pos + 9)
            (length,) = _I32.unpack_from(buf, pos)
            pos += 4
            return Message(xid, bool(flags & 1), lsn, prefix, bytes(buf[pos:pos + length]))
        if kind == 89:  # 'Y'
            pos = 1
            xid = None
            if in_stream:
                (xid,) = _U32.unpack_from(buf, pos)
                pos += 4
            (oid,) = _U32.unpack_from(buf, pos)
            namespace, pos = _cstring(buf, pos + 4)
            name, pos = _cstring(buf, pos)
            return TypeInfo(xid, oid, namespace, name)
        if kind == 79:  # 'O'
            (lsn,) = _Q.unpack_from(buf, 1)
            name, _ = _cstring(buf, 9)
            return Origin(lsn, name)
        if kind == 83:  # 'S'
            (xid,) = _U32.unpack_from(buf, 1)
            return StreamStart(xid, buf[5] == 1)
        if kind == 69:  # 'E'
            return StreamStop()
        if kind == 99:  # 'c'
            xid, flags, commit_lsn, end_lsn, ts = _STREAM_COMMIT.unpack_from(buf, 1)
            return StreamCommit(xid, flags, commit_lsn, end_lsn, ts + PG_EPOCH_OFFSET_US)
        if kind == 65:  # 'A'
            xid, subxid = _U32.unpack_from(buf, 1)[0], _U32.unpack_from(buf, 5)[0]
            return StreamAbort(xid, subxid)
    except ProtocolError:
        raise
    except (IndexError, ValueError, UnicodeDecodeError, StructError) as exc:
        raise ProtocolError(f"malformed pgoutput {chr(kind)!r} message ({len(buf)} bytes): {exc}") from exc
    raise ProtocolError(f"unknown pgoutput message type {chr(kind)!r} (0x{kind:02x})")


def format_lsn(lsn: int) -> str:
    """PostgreSQL's textual LSN form, e.g. 0/16B3748."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    try:
        hi, lo = text.split("/")
        return (int(hi, 16) << 32) | int(lo, 16)
    except ValueError as exc:
        raise ValueError(f"invalid LSN {text!r}: expected the form 'X/X' in hexadecimal") from exc

"""Little-endian readers and writers for the TDS primitive forms (B_VARCHAR, US_VARCHAR, …)."""

from __future__ import annotations

import struct

from .packets import ProtocolError

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")


class Reader:
    """A cursor over a message payload; running past the end is a ``ProtocolError``."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise ProtocolError(f"message ends early: need {n} bytes at offset {self.pos}")
        chunk = self.data[self.pos:end]
        self.pos = end
        return chunk

    def peek(self) -> int:
        if self.pos >= len(self.data):
            raise ProtocolError("message ends early")
        return self.data[self.pos]

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return _U16.unpack(self.take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self.take(4))[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self.take(8))[0]

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def b_varchar(self) -> str:
        return self.take(2 * self.u8()).decode("utf-16-le")

    def us_varchar(self) -> str:
        return self.take(2 * self.u16()).decode("utf-16-le")


def u8(v: int) -> bytes:
    return _U8.pack(v)


def u16(v: int) -> bytes:
    return _U16.pack(v)


def i32(v: int) -> bytes:
    return _I32.pack(v)


def u32(v: int) -> bytes:
    return _U32.pack(v)


def u64(v: int) -> bytes:
    return _U64.pack(v)


def b_varchar(text: str) -> bytes:
    """1-byte character count + UTF-16LE (names, at most 255 UTF-16 code units)."""
    data = text.encode("utf-16-le")
    if len(data) // 2 > 255:
        data = data[:510]
    return _U8.pack(len(data) // 2) + data


def us_varchar(text: str) -> bytes:
    """2-byte character count + UTF-16LE (message texts)."""
    data = text.encode("utf-16-le")[: 2 * 0xFFFF]
    return _U16.pack(len(data) // 2) + data


def b_varbyte(data: bytes) -> bytes:
    return _U8.pack(len(data)) + data

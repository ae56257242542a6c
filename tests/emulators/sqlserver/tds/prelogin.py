"""PRELOGIN (MS-TDS 2.2.6.5): parse the client's options, answer with ours.

The emulator never encrypts: ENCRYPTION is always ENCRYPT_NOT_SUP, so LOGIN7 and everything after
it travel in clear. A client that insists on encryption (ENCRYPT_ON/REQ) gives up by itself with
its own "server does not support encryption" error, as it would against such a SQL Server.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .packets import ProtocolError

VERSION, ENCRYPTION, INSTOPT, THREADID, MARS, TRACEID, FEDAUTHREQUIRED, NONCEOPT = range(8)
TERMINATOR = 0xFF

ENCRYPT_OFF, ENCRYPT_ON, ENCRYPT_NOT_SUP, ENCRYPT_REQ = 0, 1, 2, 3

# the SQL Server version we claim: 16.0.4135 (SQL Server 2022 CU)
SERVER_VERSION = (16, 0, 4135)


@dataclass(slots=True)
class PreLogin:
    options: dict[int, bytes] = field(default_factory=dict)

    @property
    def encryption(self) -> int | None:
        value = self.options.get(ENCRYPTION)
        return value[0] if value else None

    @property
    def mars(self) -> bool:
        value = self.options.get(MARS)
        return bool(value and value[0])


def parse(payload: bytes) -> PreLogin:
    options: dict[int, bytes] = {}
    pos = 0
    while True:
        if pos >= len(payload):
            raise ProtocolError("PRELOGIN without terminator")
        token = payload[pos]
        if token == TERMINATOR:
            break
        if pos + 5 > len(payload):
            raise ProtocolError("PRELOGIN option table ends early")
        offset, length = struct.unpack_from(">HH", payload, pos + 1)
        if offset + length > len(payload):
            raise ProtocolError(f"PRELOGIN option {token} points past the end")
        options[token] = payload[offset:offset + length]
        pos += 5
    return PreLogin(options)


def build_response() -> bytes:
    """VERSION, ENCRYPTION = NOT_SUP, INSTOPT = 0 (instance name matched), THREADID (empty, as
    SQL Server sends it), MARS = 0 (MARS not supported)."""
    major, minor, build = SERVER_VERSION
    items = [
        (VERSION, struct.pack(">BBHH", major, minor, build, 0)),
        (ENCRYPTION, bytes([ENCRYPT_NOT_SUP])),
        (INSTOPT, b"\x00"),
        (THREADID, b""),
        (MARS, b"\x00"),
    ]
    offset = 5 * len(items) + 1
    table, data = bytearray(), bytearray()
    for token, value in items:
        table += struct.pack(">BHH", token, offset + len(data), len(value))
        data += value
    return bytes(table) + bytes([TERMINATOR]) + bytes(data)

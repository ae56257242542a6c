"""TDS packets: the 8-byte header, reassembly of a message from packets, and splitting a
response into packets of the negotiated size (MS-TDS 2.2.3)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

HEADER = struct.Struct(">BBHHBB")  # type, status, length, spid, packet id, window
HEADER_SIZE = HEADER.size

STATUS_EOM = 0x01
STATUS_IGNORE = 0x02
STATUS_RESET_CONNECTION = 0x08
STATUS_RESET_CONNECTION_SKIP_TRAN = 0x10

DEFAULT_PACKET_SIZE = 4096
MIN_PACKET_SIZE = 512
MAX_PACKET_SIZE = 32767


class PacketType(IntEnum):
    SQL_BATCH = 1
    PRE_TDS7_LOGIN = 2
    RPC = 3
    TABULAR_RESULT = 4
    ATTENTION = 6
    BULK_LOAD = 7
    FEDAUTH_TOKEN = 8
    TRANSACTION_MANAGER = 14
    LOGIN7 = 16
    SSPI = 17
    PRELOGIN = 18


class ProtocolError(Exception):
    """The client broke the framing or sent something this layer cannot parse; the connection ends."""


@dataclass(slots=True)
class Message:
    """A complete client message: the packet type, the status bits of its first packet
    (RESETCONNECTION lives there) and the concatenated payload."""

    type: int
    status: int
    payload: bytes


class MessageAssembler:
    """Feeds raw packets in, hands complete messages out (a message ends at the EOM bit)."""

    def __init__(self, max_message: int = 512 * 1024 * 1024) -> None:
        self._parts: list[bytes] = []
        self._type: int | None = None
        self._status = 0
        self._size = 0
        self._max = max_message

    def add(self, header: bytes, body: bytes) -> Message | None:
        ptype, status, _length, _spid, _pid, _window = HEADER.unpack(header)
        if self._type is None:
            self._type, self._status = ptype, status
        elif ptype != self._type and ptype != PacketType.ATTENTION:
            raise ProtocolError(f"packet type {ptype} inside a message of type {self._type}")
        self._parts.append(body)
        self._size += len(body)
        if self._size > self._max:
            raise ProtocolError("message too large")
        if not status & STATUS_EOM:
            return None
        message = Message(self._type, self._status, b"".join(self._parts))
        self._parts, self._type, self._status, self._size = [], None, 0, 0
        # a packet with the IGNORE bit asks the server to drop the whole message
        return None if status & STATUS_IGNORE else message


def read_packet(recv_exactly: Callable[[int], bytes]) -> tuple[bytes, bytes]:
    """Read one packet with ``recv_exactly(n)`` (which raises EOFError at end of stream)."""
    header = recv_exactly(HEADER_SIZE)
    length = HEADER.unpack(header)[2]
    if length < HEADER_SIZE:
        raise ProtocolError(f"packet length {length} shorter than its header")
    return header, recv_exactly(length - HEADER_SIZE)


class PacketWriter:
    """Buffers one response message and emits packets of at most ``packet_size`` bytes through
    ``send``; only the last packet of the message carries EOM. Writing is streamed: a large result
    leaves in full packets as it is produced."""

    def __init__(self, send: Callable[[bytes], None], packet_size: int = DEFAULT_PACKET_SIZE,
                 spid: int = 0) -> None:
        self._send = send
        self.packet_size = packet_size
        self.spid = spid
        self._buffer = bytearray()
        self._packet_id = 1
        self._ptype = PacketType.TABULAR_RESULT

    def write(self, data: bytes) -> None:
        self._buffer += data
        room = self.packet_size - HEADER_SIZE
        if len(self._buffer) > room:
            # keep at least one byte back so the EOM packet is never empty
            cut = (len(self._buffer) - 1) // room * room
            view = memoryview(self._buffer)
            chunks = [self._packet(view[i:i + room], False) for i in range(0, cut, room)]
            del view
            del self._buffer[:cut]
            self._send(b"".join(chunks))

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def end_message(self) -> None:
        """Send what is buffered as the last packet of the message (EOM)."""
        self._send(self._packet(self._buffer, True))
        self._buffer = bytearray()

    def _packet(self, body: bytes | memoryview, last: bool) -> bytes:
        header = HEADER.pack(self._ptype, STATUS_EOM if last else 0, len(body) + HEADER_SIZE,
                             self.spid & 0xFFFF, self._packet_id, 0)
        self._packet_id = (self._packet_id + 1) % 256
        return header + bytes(body)

"""LOGIN7 (MS-TDS 2.2.6.4): parse the login record into a ``LoginInfo``.

The password arrives obfuscated (each byte: nibbles swapped, then XOR 0xA5); it is decoded here
and never logged. Feature extensions are parsed and listed; the emulator acknowledges none of
them (an unacknowledged feature is "not supported" for the client, exactly as SQL Server answers
features it does not know).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..results import LoginInfo
from .packets import DEFAULT_PACKET_SIZE, MAX_PACKET_SIZE, MIN_PACKET_SIZE, ProtocolError

_FIXED = struct.Struct("<IIIIII BBBB iI")  # Length … ClientLCID (36 bytes)
_OFFSETS = 9  # HostName, UserName, Password, AppName, ServerName, Extension, CltIntName, Language, Database

# OptionFlags3
F_EXTENSION = 0x10
# TypeFlags
F_READ_ONLY_INTENT = 0x20
# OptionFlags2
F_INT_SECURITY = 0x80

FEATURE_NAMES = {
    0x01: "SESSIONRECOVERY", 0x02: "FEDAUTH", 0x04: "COLUMNENCRYPTION", 0x05: "GLOBALTRANSACTIONS",
    0x08: "AZURESQLSUPPORT", 0x09: "DATACLASSIFICATION", 0x0A: "UTF8_SUPPORT",
    0x0B: "AZURESQLDNSCACHING", 0x0D: "JSONSUPPORT", 0x0E: "VECTORSUPPORT",
}


@dataclass(slots=True)
class Login7:
    tds_version: int
    packet_size: int
    client_prog_version: int
    client_pid: int
    option_flags1: int
    option_flags2: int
    type_flags: int
    option_flags3: int
    client_timezone: int
    client_lcid: int
    host_name: str
    user: str
    password: str
    app_name: str
    server_name: str
    client_interface: str
    language: str
    database: str
    sspi: bytes
    features: dict[int, bytes] = field(default_factory=dict)

    @property
    def requests_extension(self) -> bool:
        return bool(self.option_flags3 & F_EXTENSION)

    def negotiated_packet_size(self) -> int:
        """The client's wish when SQL Server would accept it (512..32767); 0 means "server's default"."""
        if self.packet_size == 0:
            return DEFAULT_PACKET_SIZE
        return max(MIN_PACKET_SIZE, min(MAX_PACKET_SIZE, self.packet_size))

    def to_login_info(self) -> LoginInfo:
        return LoginInfo(
            user=self.user, password=self.password, database=self.database, app_name=self.app_name,
            host_name=self.host_name, language=self.language, packet_size=self.negotiated_packet_size(),
            options={
                "tds_version": self.tds_version,
                "client_pid": self.client_pid,
                "client_interface": self.client_interface,
                "server_name": self.server_name,
                "option_flags1": self.option_flags1,
                "option_flags2": self.option_flags2,
                "type_flags": self.type_flags,
                "option_flags3": self.option_flags3,
                "read_only_intent": bool(self.type_flags & F_READ_ONLY_INTENT),
                "integrated_security": bool(self.option_flags2 & F_INT_SECURITY),
                "client_timezone": self.client_timezone,
                "client_lcid": self.client_lcid,
                "features": sorted(FEATURE_NAMES.get(f, f"0x{f:02X}") for f in self.features),
            },
        )


def deobfuscate_password(data: bytes) -> str:
    return bytes(((b ^ 0xA5) << 4 & 0xF0) | ((b ^ 0xA5) >> 4) for b in data).decode("utf-16-le")


def parse(payload: bytes) -> Login7:
    if len(payload) < _FIXED.size + 4 * _OFFSETS:
        raise ProtocolError("LOGIN7 record too short")
    (length, tds_version, packet_size, prog_version, pid, _conn_id, flags1, flags2, type_flags, flags3,
     timezone, lcid) = _FIXED.unpack_from(payload, 0)
    if length > len(payload):
        raise ProtocolError("LOGIN7 length exceeds the message")
    pairs = [struct.unpack_from("<HH", payload, _FIXED.size + 4 * i) for i in range(_OFFSETS)]

    def text(index: int) -> str:
        offset, chars = pairs[index]
        if offset + 2 * chars > len(payload):
            raise ProtocolError("LOGIN7 field points past the end")
        return payload[offset:offset + 2 * chars].decode("utf-16-le", errors="replace")

    pos = _FIXED.size + 4 * _OFFSETS + 6  # ClientID (MAC address) follows the offsets
    sspi_offset, sspi_length = struct.unpack_from("<HH", payload, pos)
    password_offset, password_chars = pairs[2]
    password = deobfuscate_password(payload[password_offset:password_offset + 2 * password_chars])
    features: dict[int, bytes] = {}
    # with fExtension set, ibExtension points to a DWORD holding the FeatureExt offset; otherwise
    # the slot is the (ignored) "unused" pair
    if flags3 & F_EXTENSION and pairs[5][1] >= 4:
        (feature_offset,) = struct.unpack_from("<I", payload, pairs[5][0])
        features = _parse_features(payload, feature_offset)
    return Login7(
        tds_version=tds_version, packet_size=packet_size, client_prog_version=prog_version, client_pid=pid,
        option_flags1=flags1, option_flags2=flags2, type_flags=type_flags, option_flags3=flags3,
        client_timezone=timezone, client_lcid=lcid, host_name=text(0), user=text(1), password=password,
        app_name=text(3), server_name=text(4),
        client_interface=text(6), language=text(7), database=text(8),
        sspi=payload[sspi_offset:sspi_offset + sspi_length], features=features,
    )


def _parse_features(payload: bytes, pos: int) -> dict[int, bytes]:
    features: dict[int, bytes] = {}
    while pos < len(payload):
        feature = payload[pos]
        if feature == 0xFF:
            break
        if pos + 5 > len(payload):
            raise ProtocolError("LOGIN7 feature extension ends early")
        (size,) = struct.unpack_from("<I", payload, pos + 1)
        features[feature] = payload[pos + 5:pos + 5 + size]
        pos += 5 + size
    return features

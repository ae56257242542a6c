"""The TDS layer at packet level, with a raw socket client: framing and packet sizes, PRELOGIN and
LOGIN7 answers, RPC parameter decoding (types the Python drivers cannot send: binary(10), 100 ns
datetime2, sql_variant…), several RPCs per request, attention, RESETCONNECTION, transaction
manager requests, refused requests."""

from __future__ import annotations

import datetime as dt
import socket
import struct
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from test_tds_scripted import PASSWORD, ScriptedEngine, build_engine, eventually

from emulators.sqlserver.sqltypes import SqlType
from emulators.sqlserver.tds import TdsServer
from emulators.sqlserver.tds.typeinfo import read_type_info, read_value
from emulators.sqlserver.tds.wire import Reader
from emulators.sqlserver.values import DateTime2, Time, Variant

EOM = 0x01
DONE_MORE, DONE_ERROR, DONE_COUNT, DONE_ATTN = 0x01, 0x02, 0x10, 0x20


@pytest.fixture(scope="module")
def wire() -> Iterator[tuple[ScriptedEngine, str, int]]:
    engine = build_engine()
    server = TdsServer(engine)
    host, port = server.start()
    yield engine, host, port
    server.stop()


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le")


def _b_varchar(text: str) -> bytes:
    return bytes([len(text.encode("utf-16-le")) // 2]) + _utf16(text)


def login7(user: str, password: str, database: str = "master", packet_size: int = 4096,
           extension: bool = False) -> bytes:
    """A LOGIN7 record as MS-TDS 2.2.6.4 lays it out (built independently of the server's parser)."""
    obfuscated = bytes((((b << 4) & 0xF0) | (b >> 4)) ^ 0xA5 for b in _utf16(password))
    fields = [_utf16("rawhost"), _utf16(user), obfuscated, _utf16("raw-test"), _utf16("server"), b"",
              _utf16("raw-lib"), _utf16(""), _utf16(database)]
    header_size = 36 + 9 * 4 + 6 + 4 * 3 + 4
    data = bytearray()
    pairs = []
    feature_at = None
    for index, value in enumerate(fields):
        offset = header_size + len(data)
        if index == 5 and extension:
            feature_at = len(data)
            data += b"\0\0\0\0"  # the DWORD pointing at FeatureExt, filled in below
            pairs.append((offset, 4))
            continue
        data += value
        pairs.append((offset, len(value) // 2 if index != 5 else 0))
    if extension:
        assert feature_at is not None
        struct.pack_into("<I", data, feature_at, header_size + len(data))
        data += bytes([0x01]) + struct.pack("<I", 0) + bytes([0x0A]) + struct.pack("<I", 1) + b"\x01" + b"\xff"
    flags3 = 0x10 if extension else 0
    fixed = struct.pack("<IIIIIIBBBBiI", 0, 0x74000004, packet_size, 7, 1234, 0, 0xE0, 0x03, 0, flags3, 0, 0x409)
    offsets = b"".join(struct.pack("<HH", o, n) for o, n in pairs)
    rest = b"\x00" * 6 + struct.pack("<HHHHHHI", header_size + len(data), 0, header_size + len(data), 0,
                                     header_size + len(data), 0, 0)
    record = bytearray(fixed + offsets + rest + data)
    struct.pack_into("<I", record, 0, len(record))
    return bytes(record)


PRELOGIN = bytes.fromhex("00000f0006" "01001500" "01" "ff") + bytes([0x0C, 0, 0, 0, 0, 0]) + b"\x00"
PRELOGIN = (struct.pack(">BHH", 0, 11, 6) + struct.pack(">BHH", 1, 17, 1) + b"\xff"
            + bytes([0x0C, 0, 0, 0, 0, 0]) + bytes([1]))  # VERSION, ENCRYPTION = ON


class RawClient:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.packets: list[tuple[int, int, int, int, int]] = []  # type, status, length, spid, id of responses

    def close(self) -> None:
        self.sock.close()

    def send(self, ptype: int, payload: bytes, *, status: int = 0, packet_size: int = 4096) -> None:
        room = packet_size - 8
        chunks = [payload[i:i + room] for i in range(0, len(payload), room)] or [b""]
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            flags = (status | EOM) if last else (status & ~EOM & 0xFF)
            self.sock.sendall(struct.pack(">BBHHBB", ptype, flags, len(chunk) + 8, 0, i + 1, 0) + chunk)

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def receive(self) -> bytes:
        """One response message (up to the EOM packet)."""
        body = b""
        while True:
            header = struct.unpack(">BBHHBB", self._exactly(8))
            self.packets.append(header[:5])
            body += self._exactly(header[2] - 8)
            if header[1] & EOM:
                return body

    def login(self, user: str = "sa", password: str = PASSWORD, packet_size: int = 4096,
              extension: bool = False) -> list[tuple[str, Any]]:
        self.send(18, PRELOGIN)
        self.receive()
        self.send(16, login7(user, password, packet_size=packet_size, extension=extension))
        return parse_tokens(self.receive())

    def batch(self, sql: str, *, status: int = 0, packet_size: int = 4096) -> list[tuple[str, Any]]:
        self.send(1, ALL_HEADERS + _utf16(sql), status=status, packet_size=packet_size)
        return parse_tokens(self.receive())


ALL_HEADERS = struct.pack("<IIH", 22, 18, 2) + b"\0" * 8 + struct.pack("<I", 1)


def parse_tokens(payload: bytes) -> list[tuple[str, Any]]:
    """A small token-stream reader (enough for the tests' result shapes)."""
    r = Reader(payload)
    out: list[tuple[str, Any]] = []
    columns: list[Any] = []
    names = {0xFD: "DONE", 0xFE: "DONEPROC", 0xFF: "DONEINPROC"}
    while not r.at_end():
        token = r.u8()
        if token in names:
            status, _cmd, count = r.u16(), r.u16(), r.u64()
            out.append((names[token], (status, count)))
        elif token in (0xAA, 0xAB):
            body = Reader(r.take(r.u16()))
            number, state, severity = body.i32(), body.u8(), body.u8()
            out.append(("ERROR" if token == 0xAA else "INFO", (number, severity, state, body.us_varchar())))
        elif token == 0xE3:
            body = r.take(r.u16())
            out.append(("ENVCHANGE", (body[0], body[1:])))
        elif token == 0xAD:
            out.append(("LOGINACK", r.take(r.u16())))
        elif token == 0xAE:
            acks = {}
            while (feature := r.u8()) != 0xFF:
                acks[feature] = r.take(r.u32())
            out.append(("FEATUREEXTACK", acks))
        elif token == 0x79:
            out.append(("RETURNSTATUS", r.i32()))
        elif token == 0x81:
            count = r.u16()
            columns = []
            for _ in range(count):
                r.u32()
                r.u16()
                columns.append(read_type_info(r))
                if columns[-1].token in LONG_TYPES:  # text/ntext/image: TableName
                    for _part in range(r.u8()):
                        r.us_varchar()
                r.b_varchar()
            out.append(("COLMETADATA", [c.sqltype for c in columns]))
        elif token == 0xD1:
            out.append(("ROW", tuple(_row_value(r, c) for c in columns)))
        elif token == 0xD2:
            bitmap = r.take((len(columns) + 7) // 8)
            out.append(("NBCROW", tuple(None if bitmap[i >> 3] >> (i & 7) & 1 else _row_value(r, c)
                                        for i, c in enumerate(columns))))
        elif token == 0xAC:
            ordinal, name, _status, _user, _flags = r.u16(), r.b_varchar(), r.u8(), r.u32(), r.u16()
            ti = read_type_info(r)
            out.append(("RETURNVALUE", (ordinal, name, read_value(r, ti))))
        else:
            raise AssertionError(f"unexpected token 0x{token:02X} at {r.pos - 1}")
    return out


LONG_TYPES = (0x23, 0x63, 0x22)


def _row_value(r: Reader, ti: Any) -> Any:
    if ti.token not in LONG_TYPES:
        return read_value(r, ti)
    if r.u8() == 0:  # no text pointer: NULL
        return None
    r.take(16 + 8)  # text pointer, timestamp
    data = r.take(r.u32())
    return data if ti.token == 0x22 else data.decode("utf-16-le" if ti.token == 0x63 else "cp1252")


def kinds(tokens: list[tuple[str, Any]]) -> list[str]:
    return [t[0] for t in tokens]


@pytest.fixture()
def client(wire: tuple[ScriptedEngine, str, int]) -> Iterator[RawClient]:
    c = RawClient(wire[1], wire[2])
    yield c
    c.close()


def _session(engine: ScriptedEngine, tokens: list[tuple[str, Any]]) -> Any:
    return engine.sessions[-1]


# ------------------------------------------------------------------------------------------------


def test_prelogin_answer(client: RawClient) -> None:
    client.send(18, PRELOGIN)
    answer = client.receive()
    assert client.packets[-1][0] == 4  # tabular result
    options = {}
    pos = 0
    while answer[pos] != 0xFF:
        token, offset, length = struct.unpack_from(">BHH", answer, pos)
        options[token] = answer[offset:offset + length]
        pos += 5
    assert options[0] == bytes([16, 0]) + struct.pack(">HH", 4135, 0)
    assert options[1] == b"\x02"  # ENCRYPT_NOT_SUP, whatever the client asked
    assert options[2] == b"\x00" and options[4] == b"\x00"  # INSTOPT, MARS off


def test_login_answer_sequence(client: RawClient, wire: tuple[ScriptedEngine, str, int]) -> None:
    tokens = client.login(extension=True)
    assert kinds(tokens) == ["ENVCHANGE", "INFO", "ENVCHANGE", "ENVCHANGE", "INFO", "LOGINACK", "FEATUREEXTACK",
                             "ENVCHANGE", "DONE"]
    assert tokens[0][1] == (1, _b_varchar("master") + _b_varchar("master"))
    assert tokens[1][1] == (5701, 0, 2, "Changed database context to 'master'.")
    assert tokens[2][1] == (7, bytes([5]) + bytes.fromhex("0904d00034") + b"\x00")
    assert tokens[4][1][0] == 5703
    loginack = tokens[5][1]
    assert loginack[0] == 1 and loginack[1:5] == bytes.fromhex("74000004")
    assert loginack[5:] == _b_varchar("Microsoft SQL Server") + bytes([16, 0, 0x10, 0x27])
    assert tokens[6][1] == {}  # SESSIONRECOVERY and UTF8_SUPPORT requested, neither acknowledged
    assert tokens[7][1] == (4, _b_varchar("4096") + _b_varchar("4096"))
    assert tokens[8][1] == (0, 0)
    login = wire[0].logins[-1]
    assert (login.user, login.password, login.app_name, login.host_name) == ("sa", PASSWORD, "raw-test", "rawhost")
    assert login.options["features"] == ["SESSIONRECOVERY", "UTF8_SUPPORT"]


def test_login_failure(client: RawClient) -> None:
    tokens = client.login(password="nope")
    assert tokens == [("ERROR", (18456, 14, 1, "Login failed for user 'sa'.")), ("DONE", (DONE_ERROR, 0))]
    with pytest.raises((EOFError, ConnectionError)):
        client.receive()  # the server closed the connection


@pytest.mark.parametrize("size", [512, 1000, 32767])
def test_responses_respect_the_negotiated_packet_size(client: RawClient, wire: tuple[ScriptedEngine, str, int],
                                                      size: int) -> None:
    tokens = client.login(packet_size=size)
    assert tokens[-2][1] == (4, _b_varchar(str(size)) + _b_varchar("4096"))
    client.packets.clear()
    tokens = client.batch("SELECT types", packet_size=size)
    assert kinds(tokens) == ["COLMETADATA", "ROW", "NBCROW", "ROW", "DONE"]
    assert tokens[-1][1] == (DONE_COUNT, 3)
    assert tokens[2][1] == tuple(None for _ in tokens[0][1])
    assert tokens[3][1] == (None, *tokens[1][1][1:])
    lengths = [p[2] for p in client.packets]
    assert len(lengths) > 2 and max(lengths) <= size
    assert all(length == size for length in lengths[:-1])  # only the last packet is short
    assert [p[1] for p in client.packets] == [0] * (len(lengths) - 1) + [EOM]
    assert [p[4] for p in client.packets] == [(i + 3) % 256 for i in range(len(lengths))]  # ids go on counting
    assert {p[3] for p in client.packets} == {wire[0].sessions[-1].spid}


def test_request_split_over_many_packets(client: RawClient) -> None:
    client.login(packet_size=512)
    tokens = client.batch(" " * 5000 + "SELECT 1" + " " * 5000, packet_size=512)
    assert tokens == [("COLMETADATA", [SqlType("int")]), ("ROW", (1,)), ("DONE", (DONE_COUNT, 1))]


def test_errors_and_done_bits(client: RawClient) -> None:
    client.login()
    tokens = client.batch("SELECT fail")
    assert tokens == [("COLMETADATA", [SqlType("int")]), ("ROW", (1,)), ("DONE", (DONE_COUNT | DONE_MORE, 1)),
                      ("ERROR", (8134, 16, 1, "Divide by zero error encountered.")), ("DONE", (DONE_ERROR, 0))]
    tokens = client.batch("SELECT soft error")
    assert tokens == [("ERROR", (2627, 14, 1, "Violation of PRIMARY KEY constraint 'pk'.")),
                      ("DONE", (DONE_ERROR | DONE_MORE, 0)), ("COLMETADATA", [SqlType("int")]), ("ROW", (5,)),
                      ("DONE", (DONE_COUNT, 1))]
    tokens = client.batch("SELECT two")
    assert kinds(tokens) == ["COLMETADATA", "ROW", "ROW", "DONE", "INFO", "DONE", "COLMETADATA", "ROW", "DONE"]
    assert [t[1] for t in tokens if t[0] == "DONE"] == [(DONE_COUNT | DONE_MORE, 2), (DONE_COUNT | DONE_MORE, 3),
                                                        (DONE_COUNT, 1)]


# ------------------------------------------------------------------------------------------------
# RPC


def _param(name: str, type_info: bytes, value: bytes, status: int = 0) -> bytes:
    return _b_varchar(name) + bytes([status]) + type_info + value


def _nvarchar_max(text: str) -> tuple[bytes, bytes]:
    data = _utf16(text)
    chunks = [data[i:i + 1000] for i in range(0, len(data), 1000)]  # several PLP chunks
    value = struct.pack("<Q", len(data)) + b"".join(struct.pack("<I", len(c)) + c for c in chunks) + b"\0\0\0\0"
    return bytes([0xE7, 0xFF, 0xFF]) + bytes.fromhex("0904d00034"), value


def _executesql(params: list[bytes], by_id: bool = True) -> bytes:
    ti, stmt = _nvarchar_max("SELECT echo")
    head = struct.pack("<HH", 0xFFFF, 10) if by_id else struct.pack("<H", 13) + _utf16("sp_executesql")
    declaration = _param("", ti, _nvarchar_max("@p int")[1])
    return head + struct.pack("<H", 0) + _param("", ti, stmt) + declaration + b"".join(params)


LSN = bytes.fromhex("0000002500000110000f")
TICKS = ((13 * 60 + 45) * 60 + 30) * 10_000_000 + 1_234_567


def test_rpc_parameters_of_every_kind(client: RawClient, wire: tuple[ScriptedEngine, str, int]) -> None:
    client.login()
    long_text = "ü😀" * 3000
    ti_max, value_max = _nvarchar_max(long_text)
    params = [
        _param("@lsn", bytes([0xAD]) + struct.pack("<H", 10), struct.pack("<H", 10) + LSN),
        _param("@null_lsn", bytes([0xAD]) + struct.pack("<H", 10), b"\xff\xff"),
        _param("@text", ti_max, value_max),
        _param("@dec", bytes([0x6A, 17, 38, 4]), bytes([17, 1]) + (10**38 - 1).to_bytes(16, "little")),
        _param("@dt2", bytes([0x2A, 7]), bytes([8]) + TICKS.to_bytes(5, "little")
               + (dt.date(2024, 2, 29).toordinal() - 1).to_bytes(3, "little")),
        _param("@dto", bytes([0x2B, 3]), bytes([9]) + (TICKS // 10_000).to_bytes(4, "little")
               + (dt.date(2024, 2, 29).toordinal() - 1).to_bytes(3, "little") + struct.pack("<h", -330)),
        _param("@int4", bytes([0x38]), struct.pack("<i", -5)),
        _param("@bigint", bytes([0x26, 8]), bytes([8]) + struct.pack("<q", -(2**63))),
        _param("@money", bytes([0x6E, 8]), bytes([8]) + struct.pack("<iI", -1, 0xFFFFFFFF)),
        _param("@dt", bytes([0x6F, 8]), bytes([8]) + struct.pack("<iI", 2, 300 * 3600 + 299)),
        _param("@var", bytes([0x62]) + struct.pack("<I", 8016),
               struct.pack("<I", 2 + 7 + 6) + bytes([0xE7, 7]) + bytes.fromhex("0904d00034") + struct.pack("<H", 20)
               + _utf16("abc")),
        _param("@guid", bytes([0x24, 16]), bytes([16]) + bytes.fromhex("ff19966f868b11d0b42d00c04fc964ff")),
        _param("@out", bytes([0x26, 4]), b"\x00", status=0x01),
        _param("@default", bytes([0x26, 4]), b"\x00", status=0x02),
        _param("@xml", bytes([0xF1, 0]), _nvarchar_max("<a/>")[1]),
        _param("@vc", bytes([0xA7]) + struct.pack("<H", 50) + bytes.fromhex("0904d00034"),
               struct.pack("<H", 5) + "héllo".encode("cp1252")),
    ]
    client.send(3, ALL_HEADERS + _executesql(params))
    tokens = parse_tokens(client.receive())
    proc, got = wire[0].rpc_log[-1]
    assert proc == "sp_executesql"
    echoed = {p.name: p for p in got[2:]}
    assert (str(echoed["@lsn"].type), echoed["@lsn"].value) == ("binary(10)", LSN)
    assert echoed["@null_lsn"].value is None
    assert (str(echoed["@text"].type), echoed["@text"].value) == ("nvarchar(max)", long_text)
    assert str(echoed["@dec"].type) == "decimal(38,4)"
    assert echoed["@dec"].value == Decimal("9999999999999999999999999999999999.9999")
    assert echoed["@dt2"].value == DateTime2(dt.date(2024, 2, 29), Time(TICKS))  # all 7 digits
    assert str(echoed["@dto"].type) == "datetimeoffset(3)"
    assert echoed["@dto"].value.offset_minutes == -330
    assert echoed["@dto"].value.utc == DateTime2(dt.date(2024, 2, 29), Time(TICKS // 10_000 * 10_000))
    assert (str(echoed["@int4"].type), echoed["@int4"].value) == ("int", -5)
    assert echoed["@bigint"].value == -(2**63)
    assert echoed["@money"].value == Decimal("-0.0001")
    assert echoed["@dt"].value == dt.datetime(1900, 1, 3, 1, 0, 0, 997000)
    assert echoed["@var"].value == Variant("abc", SqlType("nvarchar", length=10))
    assert str(echoed["@guid"].value).upper() == "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    assert echoed["@out"].output and echoed["@out"].value is None and not echoed["@lsn"].output
    assert echoed["@xml"].value == "<a/>" and echoed["@xml"].type == SqlType("xml")
    assert echoed["@vc"].value == "héllo" and str(echoed["@vc"].type) == "varchar(50)"
    # and back out through the column encoders, byte for byte where the client could tell
    assert kinds(tokens) == ["COLMETADATA", "NBCROW", "DONEINPROC", "RETURNSTATUS", "DONEPROC"]  # NULLs: NBCROW
    row = tokens[1][1]
    assert row[0] == LSN and row[2] == long_text and row[4] == DateTime2(dt.date(2024, 2, 29), Time(TICKS))
    assert tokens[2][1] == (DONE_COUNT | DONE_MORE, 1)
    assert tokens[4][1] == (0, 0)


def test_several_rpcs_in_one_request(client: RawClient, wire: tuple[ScriptedEngine, str, int]) -> None:
    client.login()
    one = _executesql([_param("@a", bytes([0x26, 4]), bytes([4]) + struct.pack("<i", 1))])
    two = _executesql([_param("@b", bytes([0x26, 4]), bytes([4]) + struct.pack("<i", 2))], by_id=False)
    named = struct.pack("<H", 9) + _utf16("sp_custom") + struct.pack("<H", 0) + _param(
        "@c", bytes([0x26, 2]), bytes([2]) + struct.pack("<h", 3))
    client.send(3, ALL_HEADERS + one + b"\xff" + two + b"\xff" + named)
    tokens = parse_tokens(client.receive())
    assert [t[1] for t in tokens if t[0] == "ROW"] == [(1,), (2,), (3,)]
    assert [t[1][0] for t in tokens if t[0] == "DONEPROC"] == [DONE_MORE, DONE_MORE, 0]
    assert [rpc[0] for rpc in wire[0].rpc_log[-3:]] == ["sp_executesql", "sp_executesql", "sp_custom"]


def test_prepexec_output_handle(client: RawClient) -> None:
    client.login()
    ti, text = _nvarchar_max("SELECT 1")
    body = (struct.pack("<HHH", 0xFFFF, 13, 0) + _param("@handle", bytes([0x26, 4]), b"\x00", status=0x01)
            + _param("", ti, _nvarchar_max("@a int")[1]) + _param("", ti, text)
            + _param("@a", bytes([0x26, 4]), bytes([4]) + struct.pack("<i", 42)))
    client.send(3, ALL_HEADERS + body)
    tokens = parse_tokens(client.receive())
    assert kinds(tokens) == ["COLMETADATA", "ROW", "DONEINPROC", "RETURNSTATUS", "RETURNVALUE", "DONEPROC"]
    assert tokens[4][1] == (0, "@handle", 1)


def test_malformed_rpc_is_refused_and_the_connection_lives(client: RawClient) -> None:
    client.login()
    client.send(3, ALL_HEADERS + struct.pack("<HHH", 0xFFFF, 99, 0))
    tokens = parse_tokens(client.receive())
    assert kinds(tokens) == ["ERROR", "DONE"] and "procedure id 99" in tokens[0][1][3]
    assert client.batch("SELECT 1")[1] == ("ROW", (1,))


# ------------------------------------------------------------------------------------------------
# attention, reset, transactions, refused packet types


def test_attention_while_idle_is_acknowledged(client: RawClient) -> None:
    client.login()
    client.send(6, b"")
    assert parse_tokens(client.receive()) == [("DONE", (DONE_ATTN, 0))]
    assert client.batch("SELECT 1")[1] == ("ROW", (1,))


def test_attention_stops_a_long_result(client: RawClient, wire: tuple[ScriptedEngine, str, int]) -> None:
    client.login()
    client.send(1, ALL_HEADERS + _utf16("SELECT forever"))
    header = client._exactly(8)
    assert header[0] == 4
    client.send(6, b"")
    session = wire[0].sessions[-1]
    data = client._exactly(struct.unpack(">H", header[2:4])[0] - 8)
    while not header[1] & EOM:
        header = client._exactly(8)
        data = client._exactly(struct.unpack(">H", header[2:4])[0] - 8)
    # the interrupted response ends with DONE(ERROR); the acknowledgement is a message of its own
    assert data[-13:] == bytes([0xFD]) + struct.pack("<HHQ", DONE_ERROR, 0, 0)
    assert parse_tokens(client.receive()) == [("DONE", (DONE_ATTN, 0))]
    assert session.cancelled.is_set()
    assert client.batch("SELECT 1")[1] == ("ROW", (1,))


def test_reset_connection(client: RawClient, wire: tuple[ScriptedEngine, str, int]) -> None:
    client.login()
    session = wire[0].sessions[-1]
    tokens = client.batch("SELECT 1", status=0x08)
    assert tokens[0] == ("ENVCHANGE", (18, b"\x00\x00"))
    assert tokens[2] == ("ROW", (1,))
    assert session.resets == 1


def test_transaction_manager_requests(client: RawClient, wire: tuple[ScriptedEngine, str, int]) -> None:
    client.login()
    session = wire[0].sessions[-1]
    client.send(14, ALL_HEADERS + struct.pack("<HB", 5, 4) + b"\x00")  # begin, SERIALIZABLE
    tokens = parse_tokens(client.receive())
    assert session.batches == ["SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "BEGIN TRANSACTION"]
    descriptor = session.transaction_descriptor
    assert tokens == [("ENVCHANGE", (8, b"\x08" + descriptor + b"\x00")), ("DONE", (0x04, 0))]  # INXACT
    client.send(14, ALL_HEADERS + struct.pack("<H", 7) + b"\x00" + b"\x01" + b"\x00" + b"\x00")  # commit + begin
    tokens = parse_tokens(client.receive())
    assert session.batches[2:] == ["COMMIT TRANSACTION", "BEGIN TRANSACTION"]
    assert tokens[0] == ("ENVCHANGE", (9, b"\x00\x08" + descriptor))
    assert tokens[1] == ("ENVCHANGE", (8, b"\x08" + session.transaction_descriptor + b"\x00"))
    client.send(14, ALL_HEADERS + struct.pack("<H", 8) + _b_varchar("") + b"\x00")  # rollback
    tokens = parse_tokens(client.receive())
    assert session.batches[-1] == "ROLLBACK TRANSACTION"
    assert tokens[-1] == ("DONE", (0, 0))
    client.send(14, ALL_HEADERS + struct.pack("<H", 6))  # promote (DTC): refused by name
    tokens = parse_tokens(client.receive())
    assert tokens[0][0] == "ERROR" and "TM_PROMOTE_XACT" in tokens[0][1][3]


def test_bulk_load_is_refused(client: RawClient) -> None:
    client.login()
    client.send(7, b"\x81\x00\x00")
    tokens = parse_tokens(client.receive())
    assert kinds(tokens) == ["ERROR", "DONE"]
    assert "Bulk load" in tokens[0][1][3] and tokens[1][1] == (DONE_ERROR, 0)
    assert client.batch("SELECT 1")[1] == ("ROW", (1,))


def test_tls_first_is_refused(client: RawClient) -> None:
    client.sock.sendall(bytes.fromhex("160301002e") + b"\x01" + b"\x00" * 45)
    with pytest.raises((EOFError, ConnectionError)):
        client.receive()


def test_disconnect_mid_result_closes_the_session(wire: tuple[ScriptedEngine, str, int]) -> None:
    c = RawClient(wire[1], wire[2])
    c.login()
    session = wire[0].sessions[-1]
    c.send(1, ALL_HEADERS + _utf16("SELECT forever"))
    c._exactly(8)
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()  # RST: the server's next send fails
    assert eventually(lambda: session.closed)

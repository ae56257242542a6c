"""The TDS protocol core without sockets: value codecs byte for byte against MS-TDS, packet
framing, LOGIN7 password decoding, and the renderer's contract with the engine."""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from test_tds_scripted import TYPE_CASES, T

from emulators.sqlserver.results import Column, Message, ResultSet, RowCount, SqlServerError
from emulators.sqlserver.tds import tokens, typeinfo
from emulators.sqlserver.tds.login7 import deobfuscate_password
from emulators.sqlserver.tds.packets import MessageAssembler, PacketWriter
from emulators.sqlserver.tds.render import ATTENTION, ERROR, OK, Renderer
from emulators.sqlserver.tds.wire import Reader
from emulators.sqlserver.values import DateTime2, DateTimeOffset, Time, Variant


def enc(spec: str, value: Any) -> bytes:
    return typeinfo.encoder(T(spec))(value)


def round_trip(spec: str, value: Any) -> Any:
    r = Reader(typeinfo.type_info(T(spec)) + enc(spec, value))
    info = typeinfo.read_type_info(r)
    assert info.sqltype == T(spec) or spec in ("timestamp",)
    result = typeinfo.read_value(r, info)
    assert r.at_end()
    return result


# ------------------------------------------------------------------------------------------------
# exact bytes


def test_fixed_and_nullable_numbers() -> None:
    assert enc("int", -2) == b"\x04\xfe\xff\xff\xff"
    assert enc("tinyint", 255) == b"\x01\xff"
    assert enc("bit", True) == b"\x01\x01"
    assert enc("bigint", None) == b"\x00"
    assert typeinfo.type_info(T("smallint")) == bytes([0x26, 2])
    assert enc("float", 1.0) == b"\x08" + struct.pack("<d", 1.0)
    assert enc("real", None) == b"\x00"


def test_decimal_bytes() -> None:
    assert typeinfo.type_info(T("decimal(38,38)")) == bytes([0x6A, 17, 38, 38])
    assert typeinfo.type_info(T("numeric(9,2)")) == bytes([0x6C, 5, 9, 2])
    # 1234.56 as decimal(9,2): sign 1, 123456 little-endian in 4 bytes
    assert enc("decimal(9,2)", Decimal("1234.56")) == bytes([5, 1]) + (123456).to_bytes(4, "little")
    assert enc("decimal(9,2)", Decimal("-0.5")) == bytes([5, 0]) + (50).to_bytes(4, "little")
    assert enc("decimal(38,0)", Decimal(10**38 - 1)) == bytes([17, 1]) + (10**38 - 1).to_bytes(16, "little")
    assert enc("decimal(5,2)", Decimal("1.005")) == bytes([5, 1]) + (101).to_bytes(4, "little")  # half up
    with pytest.raises(typeinfo.EncodeError):
        enc("decimal(5,2)", Decimal("1000.00"))


def test_money_bytes() -> None:
    # money is 8 bytes: the high 32 bits first, then the low 32 bits, of value × 10 000
    units = 922337203685477_5807
    expected = b"\x08" + struct.pack("<iI", units >> 32, units & 0xFFFFFFFF)
    assert enc("money", Decimal("922337203685477.5807")) == expected
    assert enc("smallmoney", Decimal("-1")) == b"\x04" + struct.pack("<i", -10000)
    with pytest.raises(typeinfo.EncodeError):
        enc("smallmoney", Decimal("214748.3648"))


def test_character_bytes() -> None:
    collation = bytes.fromhex("0904d00034")
    assert typeinfo.type_info(T("nvarchar(10)")) == bytes([0xE7, 20, 0]) + collation
    assert typeinfo.type_info(T("varchar(max)")) == bytes([0xA7, 0xFF, 0xFF]) + collation
    assert enc("nvarchar(10)", "𝄞") == b"\x04\x00" + "𝄞".encode("utf-16-le")  # a surrogate pair
    assert enc("varchar(10)", "é€") == b"\x02\x00\xe9\x80"  # code page 1252
    assert enc("varchar(10)", "ж") == b"\x01\x00?"  # not in the code page: '?' as SQL Server stores it
    assert enc("char(3)", "a") == b"\x03\x00a  "
    assert enc("nvarchar(10)", None) == b"\xff\xff"
    assert enc("varchar(max)", None) == b"\xff" * 8
    assert enc("varchar(max)", "ab") == struct.pack("<Q", 2) + struct.pack("<I", 2) + b"ab" + b"\0\0\0\0"
    with pytest.raises(typeinfo.EncodeError):
        enc("nvarchar(2)", "abc")


def test_long_types_use_text_pointers() -> None:
    assert typeinfo.type_info(T("ntext")) == bytes([0x63]) + struct.pack("<I", 0x7FFFFFFE) + bytes.fromhex("0904d00034")
    assert enc("image", b"\x01") == b"\x10" + b"\0" * 24 + struct.pack("<I", 1) + b"\x01"
    assert enc("text", None) == b"\x00"
    columns = tokens.colmetadata([Column("t", T("text"), table="dbo.notes")])
    assert columns.endswith(bytes([2]) + b"\x03\x00" + "dbo".encode("utf-16-le") + b"\x05\x00"
                            + "notes".encode("utf-16-le") + b"\x01" + "t".encode("utf-16-le"))


def test_temporal_bytes() -> None:
    day = (dt.date(2024, 2, 29).toordinal() - 1).to_bytes(3, "little")
    ticks = ((13 * 60 + 45) * 60 + 30) * 10_000_000 + 1_234_567
    value = DateTime2(dt.date(2024, 2, 29), Time(ticks))
    assert enc("datetime2(7)", value) == b"\x08" + ticks.to_bytes(5, "little") + day
    assert enc("datetime2(3)", DateTime2(dt.date(2024, 2, 29), Time(ticks // 10_000 * 10_000))) == (
        b"\x07" + (ticks // 10_000).to_bytes(4, "little") + day)
    assert enc("datetime2(0)", DateTime2(dt.date(2024, 2, 29), Time(ticks // 10**7 * 10**7))) == (
        b"\x06" + (ticks // 10**7).to_bytes(3, "little") + day)
    assert enc("time(7)", Time(1)) == b"\x05\x01\x00\x00\x00\x00"
    assert enc("date", dt.date(1, 1, 1)) == b"\x03\x00\x00\x00"
    # datetimeoffset carries the UTC instant and the offset in minutes
    dto = DateTimeOffset(value, -330)
    assert enc("datetimeoffset(7)", dto) == b"\x0a" + ticks.to_bytes(5, "little") + day + struct.pack("<h", -330)
    # datetime: days since 1900-01-01 and 1/300 s ticks; .997 s is tick 299
    assert enc("datetime", dt.datetime(1900, 1, 2, 0, 0, 0, 997000)) == b"\x08" + struct.pack("<iI", 1, 299)
    assert enc("datetime", dt.datetime(1753, 1, 1)) == b"\x08" + struct.pack("<iI", -53690, 0)
    assert enc("smalldatetime", dt.datetime(1900, 1, 1, 0, 1)) == b"\x04" + struct.pack("<HH", 0, 1)


def test_guid_is_mixed_endian() -> None:
    value = uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")
    assert enc("uniqueidentifier", value) == b"\x10" + bytes.fromhex("ff19966f868b11d0b42d00c04fc964ff")


def test_sql_variant_bytes() -> None:
    assert typeinfo.type_info(T("sql_variant")) == bytes([0x62]) + struct.pack("<I", 8016)
    assert enc("sql_variant", Variant(7, T("int"))) == struct.pack("<I", 6) + bytes([0x38, 0]) + struct.pack("<i", 7)
    assert enc("sql_variant", Variant("ab", T("varchar(5)"))) == (
        struct.pack("<I", 11) + bytes([0xA7, 7]) + bytes.fromhex("0904d00034") + struct.pack("<H", 5) + b"ab")
    assert enc("sql_variant", Variant(Decimal("1.5"), T("decimal(5,2)"))) == (
        struct.pack("<I", 9) + bytes([0x6A, 2, 5, 2, 1]) + (150).to_bytes(4, "little"))
    assert enc("sql_variant", None) == b"\0\0\0\0"
    with pytest.raises(typeinfo.EncodeError):
        enc("sql_variant", Variant("x", T("nvarchar(max)")))


def test_timestamp_is_binary8_with_user_type_80() -> None:
    assert typeinfo.type_info(T("timestamp")) == bytes([0xAD, 8, 0])
    metadata = tokens.colmetadata([Column("rv", T("rowversion"), nullable=False)])
    assert metadata[3:7] == struct.pack("<I", 80)


# ------------------------------------------------------------------------------------------------
# round trips through the parameter decoder (the drivers check the encoder independently)

ROUND_TRIP_CASES = [case for case in TYPE_CASES if case[0] not in ("text", "ntext", "image")]


@pytest.mark.parametrize(("spec", "value"), [(c[0], c[1]) for c in ROUND_TRIP_CASES],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ROUND_TRIP_CASES)])
def test_round_trip(spec: str, value: Any) -> None:
    back = round_trip(spec, value)
    expected = value
    if spec.startswith("char(") or spec.startswith("nchar("):
        expected = value.ljust(T(spec).length or 1)
    if spec == "binary(4)":
        expected = value.ljust(4, b"\0")
    assert back == expected
    if isinstance(value, Decimal):
        assert str(back) == str(value) or spec.startswith("money") or spec == "smallmoney"
    if isinstance(value, DateTimeOffset):
        assert back.offset_minutes == value.offset_minutes
    if isinstance(value, Variant):
        assert back.type == value.type and str(back.value) == str(value.value)
    assert round_trip(spec, None) is None


# ------------------------------------------------------------------------------------------------
# framing and login


def test_packet_writer_splits_at_the_packet_size() -> None:
    sent: list[bytes] = []
    writer = PacketWriter(sent.append, packet_size=512, spid=51)
    writer.write(b"x" * 1500)
    writer.end_message()
    data = b"".join(sent)
    packets = []
    while data:
        length = struct.unpack(">H", data[2:4])[0]
        packets.append(data[:length])
        data = data[length:]
    assert [len(p) for p in packets] == [512, 512, 500]
    assert [p[1] for p in packets] == [0, 0, 1]
    assert b"".join(p[8:] for p in packets) == b"x" * 1500


def test_message_assembly() -> None:
    assembler = MessageAssembler()
    header = struct.Struct(">BBHHBB")
    assert assembler.add(header.pack(1, 0x08, 12, 0, 1, 0), b"abcd") is None
    message = assembler.add(header.pack(1, 0x01, 10, 0, 2, 0), b"ef")
    assert message is not None and (message.type, message.status, message.payload) == (1, 0x08, b"abcdef")
    assert assembler.add(header.pack(1, 0x03, 10, 0, 1, 0), b"zz") is None  # IGNORE: dropped


def test_password_deobfuscation() -> None:
    # MS-TDS: swap the nibbles of each byte, then XOR with 0xA5; this undoes it
    clear = "Pässwörd;😀".encode("utf-16-le")
    wire = bytes((((b << 4) & 0xF0) | (b >> 4)) ^ 0xA5 for b in clear)
    assert deobfuscate_password(wire) == "Pässwörd;😀"


# ------------------------------------------------------------------------------------------------
# the renderer's contract with the engine


def _render(results: Any, *, attention: Any = lambda: False) -> tuple[str, bytes]:
    out = bytearray()
    renderer = Renderer(out.extend, in_transaction=lambda: False, attention=attention)
    outcome = renderer.render(lambda: results)
    renderer.flush_pending(more=False)
    return outcome, bytes(out)


def _dones(data: bytes) -> list[int]:
    """Status words of the DONE tokens in a stream made of INFO/ERROR, one-int-column result sets and DONEs."""
    r = Reader(data)
    statuses = []
    while not r.at_end():
        token = r.u8()
        if token == 0xFD:
            statuses.append(r.u16())
            r.take(10)
        elif token in (0xAA, 0xAB):
            r.take(r.u16())
        elif token == 0x81:
            r.take(2 + 4 + 2 + 2)
            r.b_varchar()
        elif token == 0xD1:
            r.take(r.u8())
        else:
            raise AssertionError(f"token 0x{token:02X}")
    return statuses


class ResumingIterator:
    """An engine iterator that can raise a statement-level error and go on (not a generator)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self) -> ResumingIterator:
        return self

    def __next__(self) -> Any:
        if not self.items:
            raise StopIteration
        item = self.items.pop(0)
        if isinstance(item, SqlServerError):
            raise item
        return item


def test_non_aborting_error_continues_with_the_same_iterator() -> None:
    results = ResumingIterator([RowCount(1), SqlServerError(2627, "dup", aborts_batch=False), RowCount(2)])
    outcome, data = _render(results)
    assert outcome == OK
    assert _dones(data) == [0x11, 0x03, 0x10]  # COUNT|MORE, ERROR|MORE, COUNT (final)


def test_aborting_error_ends_the_batch() -> None:
    results = ResumingIterator([RowCount(1), SqlServerError(245, "conversion"), RowCount(2)])
    outcome, data = _render(results)
    assert outcome == ERROR
    assert _dones(data) == [0x11, 0x02]


def test_yielded_error_message_ends_only_its_statement() -> None:
    def gen() -> Iterator[Any]:
        yield Message(547, "conflict", 16)
        yield ResultSet([Column("a", T("int"))], [(1,)])
    outcome, data = _render(gen())
    assert outcome == OK
    assert _dones(data) == [0x03, 0x10]


def test_engine_bug_becomes_error_50000() -> None:
    def gen() -> Iterator[Any]:
        yield ResultSet([Column("a", T("int"))], [("not an int",)])
    outcome, data = _render(gen())
    assert outcome == ERROR
    assert "emulator internal error: EncodeError: column 'a' (int): cannot encode 'not an int'".encode(
        "utf-16-le") in data


def test_attention_stops_between_rows() -> None:
    seen = []

    def rows() -> Iterator[tuple[int]]:
        for i in range(1000):
            seen.append(i)
            yield (i,)
    outcome, _ = _render(iter([ResultSet([Column("a", T("int"))], rows())]), attention=lambda: len(seen) >= 10)
    assert outcome == ATTENTION and len(seen) == 10


@pytest.mark.parametrize(("command", "status", "count", "cmd"), [
    ("insert", 0x10, 3, 0xC3), ("update", 0x10, 3, 0xC5), ("delete", 0x10, 3, 0xC4), ("merge", 0x10, 3, 0x117),
    ("select_into", 0x10, 3, 0xC2), ("ddl", 0x00, 0, 0xC6)])
def test_row_count_commands(command: str, status: int, count: int, cmd: int) -> None:
    outcome, data = _render(iter([RowCount(3, command)]))
    assert outcome == OK
    assert data == bytes([0xFD]) + struct.pack("<HHQ", status, cmd, count)

"""The pgoutput decoder on hand-built bytes (layouts from PostgreSQL's protocol docs)."""

from __future__ import annotations

import struct

import pytest

from headwater.connectors.postgres import pgoutput as pg


def tuple_data(*cols: str | object | None) -> bytes:
    out = struct.pack("!h", len(cols))
    for c in cols:
        if c is None:
            out += b"n"
        elif c is pg.UNCHANGED_TOAST:
            out += b"u"
        else:
            data = str(c).encode()
            out += b"t" + struct.pack("!i", len(data)) + data
    return out


def test_begin_and_commit():
    b = pg.decode(b"B" + struct.pack("!QqI", 0x16B3748, 1_000_000, 42))
    assert b == pg.Begin(0x16B3748, 1_000_000 + pg.PG_EPOCH_OFFSET_US, 42)
    c = pg.decode(b"C" + struct.pack("!bQQq", 0, 100, 180, 5))
    assert c == pg.Commit(0, 100, 180, 5 + pg.PG_EPOCH_OFFSET_US)


def test_relation():
    body = struct.pack("!I", 16384) + b"public\0customers\0" + b"d" + struct.pack("!h", 2)
    body += b"\x01id\0" + struct.pack("!Ii", 23, -1) + b"\x00name\0" + struct.pack("!Ii", 1043, 68)
    r = pg.decode(b"R" + body)
    assert (r.oid, r.namespace, r.name, r.replica_identity) == (16384, "public", "customers", "d")
    assert [(c.name, c.is_key, c.type_oid, c.type_modifier) for c in r.columns] == [
        ("id", True, 23, -1), ("name", False, 1043, 68)]


def test_insert_update_delete():
    ins = pg.decode(b"I" + struct.pack("!I", 7) + b"N" + tuple_data("1", None, "Zoë"))
    assert ins == pg.Insert(None, 7, ["1", None, "Zoë"])
    upd = pg.decode(b"U" + struct.pack("!I", 7) + b"K" + tuple_data("1", None) + b"N" + tuple_data("2", "x"))
    assert (upd.old_kind, upd.old, upd.new) == ("K", ["1", None], ["2", "x"])
    plain = pg.decode(b"U" + struct.pack("!I", 7) + b"N" + tuple_data("2", pg.UNCHANGED_TOAST))
    assert (plain.old_kind, plain.old, plain.new) == (None, None, ["2", pg.UNCHANGED_TOAST])
    dele = pg.decode(b"D" + struct.pack("!I", 7) + b"O" + tuple_data("2", "x"))
    assert dele == pg.Delete(None, 7, "O", ["2", "x"])


def test_truncate_and_message():
    t = pg.decode(b"T" + struct.pack("!ib", 2, 1) + struct.pack("!II", 10, 11))
    assert t == pg.Truncate(None, 1, [10, 11])
    m = pg.decode(b"M" + b"\x01" + struct.pack("!Q", 99) + b"audit\0" + struct.pack("!i", 3) + b"\x00\xff\x10")
    assert m == pg.Message(None, True, 99, "audit", b"\x00\xff\x10")


def test_streamed_insert_carries_xid():
    ins = pg.decode(b"I" + struct.pack("!II", 900, 7) + b"N" + tuple_data("1"), in_stream=True)
    assert (ins.xid, ins.relation_oid, ins.new) == (900, 7, ["1"])


@pytest.mark.parametrize("payload", [b"", b"Z", b"I\x00\x00", b"C\x00", b"I" + struct.pack("!I", 7) + b"X"])
def test_malformed_messages_raise_protocol_error(payload):
    with pytest.raises(pg.ProtocolError):
        pg.decode(payload)


def test_lsn_text_round_trip():
    assert pg.format_lsn(0x1_0000_00FF) == "1/FF"
    assert pg.parse_lsn("16/B374D848") == (0x16 << 32) | 0xB374D848
    with pytest.raises(ValueError, match="X/X"):
        pg.parse_lsn("nonsense")


def test_truncated_tuple_is_a_protocol_error():
    full = b"I" + struct.pack("!I", 7) + b"N" + tuple_data("12345")
    with pytest.raises(pg.ProtocolError, match="past the end"):
        pg.decode(full[:-2])


def test_running_transaction_in_a_snapshot():
    from headwater.connectors.postgres.metadata import _running_in

    assert _running_in("724:724:", 724)            # above the latest completed one (PostgreSQL 14+)
    assert _running_in("720:730:722,725", 725)     # listed as running
    assert not _running_in("720:730:722,725", 723)  # completed before the snapshot
    assert not _running_in("724:724:", 723)
    epoch = 2**32
    assert _running_in(f"{epoch + 5}:{epoch + 10}:{epoch + 7}", 7)       # ids carry their epoch
    assert not _running_in(f"{epoch + 5}:{epoch + 10}:", 2**32 - 3)      # the previous epoch's last ids
    assert _running_in(f"{epoch - 5}:{epoch - 2}:", 1)                   # just assigned, in the next epoch

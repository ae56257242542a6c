"""The spool of streamed in-progress transactions, on bytes (the end-to-end behaviour against a
real server is in tests/connectors/postgres/test_streaming_v2.py)."""

from __future__ import annotations

import struct

import pytest

from headwater.connectors.postgres import spool as sp
from headwater.connectors.postgres.pgoutput import decode
from headwater.connectors.postgres.spool import SpoolError, StreamSpools


def _insert(xid: int, rel: int, value: str) -> bytes:
    """An in-stream Insert: 'I', xid, relation, 'N', one text column."""
    data = value.encode()
    return b"I" + struct.pack("!IIch", xid, rel, b"N", 1) + b"t" + struct.pack("!i", len(data)) + data


def _relation(xid: int, rel: int) -> bytes:
    return (b"R" + struct.pack("!II", xid, rel) + b"public\0t\0d" + struct.pack("!h", 1)
            + b"\x01id\0" + struct.pack("!Ii", 23, -1))


def test_replay_gives_protocol_1_messages_in_order(tmp_path):
    spools = StreamSpools(tmp_path / "s", memory_budget=1 << 20)
    spools.prepare()
    s = spools.get(700)
    spools.append(s, _relation(700, 16384), 0)
    for i in range(10):
        spools.append(s, _insert(700, 16384, f"v{i}"), 1000 + i)
    assert not (tmp_path / "s").exists()  # under the budget: nothing on disk
    got = list(spools.take(700).replay())
    assert [lsn for _, lsn in got] == [0, *range(1000, 1010)]
    rel = decode(got[0][0])
    assert rel.xid is None and rel.oid == 16384 and rel.name == "t"
    rows = [decode(p) for p, _ in got[1:]]
    assert [r.new for r in rows] == [[f"v{i}"] for i in range(10)]
    assert all(r.xid is None and r.relation_oid == 16384 for r in rows)


def test_spills_beyond_the_budget_and_reads_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(sp, "_READ_BLOCK", 37)  # records straddle every block boundary
    spools = StreamSpools(tmp_path / "s", memory_budget=200)
    spools.prepare()
    a, b = spools.get(1), spools.get(2)
    for i in range(300):
        spools.append(a, _insert(1, 10, "a" * (i % 13)), i)
        spools.append(b, _insert(2, 10, f"b{i}"), 10_000 + i)
        assert spools.buffered <= 200 + 64
    assert a.spilled and b.spilled and spools.spilled_bytes > 0
    assert [decode(p).new[0] for p, _ in spools.take(1).replay()] == ["a" * (i % 13) for i in range(300)]
    assert [lsn for _, lsn in spools.take(2).replay()] == list(range(10_000, 10_300))


def test_subtransaction_abort_drops_only_its_changes(tmp_path):
    spools = StreamSpools(tmp_path / "s", memory_budget=0)  # everything goes through the file
    spools.prepare()
    s = spools.get(100)
    spools.append(s, _insert(100, 10, "top"), 1)
    spools.append(s, _relation(101, 11), 0)           # a schema sent from the subtransaction
    spools.append(s, _insert(101, 11, "sub"), 2)
    spools.append(s, _insert(102, 10, "kept sub"), 3)
    spools.abort(100, 101)
    got = [(p[:1], decode(p)) for p, _ in spools.take(100).replay()]
    assert [k for k, _ in got] == [b"I", b"R", b"I"]  # the relation stays, its aborted change goes
    assert [m.new[0] for k, m in got if k == b"I"] == ["top", "kept sub"]


def test_abort_of_the_whole_transaction_removes_its_file(tmp_path):
    spools = StreamSpools(tmp_path / "s", memory_budget=0)
    spools.prepare()
    s = spools.get(5)
    spools.append(s, _insert(5, 10, "x"), 1)
    assert s.path.exists()
    spools.abort(5, 5)
    assert not s.path.exists() and 5 not in spools.open
    spools.abort(6, 6)  # never seen: nothing to do
    spools.close()
    assert not (tmp_path / "s").exists()


def test_prepare_empties_what_a_killed_run_left(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    (d / "123.spool").write_bytes(b"stale")
    StreamSpools(d, 0).prepare()
    assert not d.exists()


def test_unexpected_message_in_a_stream_is_an_error(tmp_path):
    spools = StreamSpools(tmp_path / "s", 1 << 20)
    with pytest.raises(SpoolError, match="unexpected pgoutput message 'B'"):
        spools.append(spools.get(1), b"B" + bytes(20), 0)
    spools.append(spools.get(1), b"O" + bytes(8) + b"origin\0", 0)  # origin: ignored
    assert list(spools.take(1).replay()) == []


def test_default_directory_is_per_slot_and_server(tmp_path):
    one = StreamSpools.default_directory(str(tmp_path), "debezium", sp.directory_identity("h1", 5432, "db", "a"))
    two = StreamSpools.default_directory(str(tmp_path), "debezium", sp.directory_identity("h2", 5432, "db", "a"))
    assert one.parent == tmp_path and one.name.startswith("headwater-spool-debezium-") and one != two

"""Typed rows, the contract between connectors' decoders and lake sinks: positions (the same text
the event path gives each row), a snapshot chunk's row columns and batches, the Arrow IPC form
records carry, and the schema a sink reads from the start of it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from headwater.engine import typed_rows as tr
from headwater.engine.records import SourceRecord


@pytest.mark.parametrize(("start", "count"), [(0, 3), (9, 8), (65_530, 20), (0xFFFFFFF0, 16)])
def test_positions_are_the_prefix_and_the_row_number_in_hex(start, count):
    prefix = "0000000000000000" + "00000001000000A3"
    got = tr.numbered_positions(prefix, start, count).to_pylist()
    assert got == [f"{prefix}{n:08X}" for n in range(start, start + count)]


def test_no_rows_no_positions():
    assert tr.numbered_positions("AB", 5, 0).to_pylist() == []


def test_a_row_number_past_eight_hex_digits_is_refused():
    with pytest.raises(ValueError, match="8 hex digits"):
        tr.numbered_positions("AB", 0xFFFFFFFF, 2)


def _marker(first: bool, last: bool, first_table: bool, last_table: bool) -> str:
    return f"{'F' if first else ''}{'L' if last else ''}{'f' if first_table else ''}{'l' if last_table else ''}"


@pytest.mark.parametrize(("start", "n", "total"), [(0, 1, 1), (0, 3, 3), (0, 2, 5), (2, 3, 5), (4, 1, 5), (1, 2, 5),
                                                   (0, 0, 0)])
def test_row_columns_mark_the_chunks_first_and_last_rows(start, n, total):
    batch = pa.RecordBatch.from_arrays([pa.array(range(start, start + n), pa.int32())], names=["id"])
    out = tr.snapshot_row_columns(batch, prefix="P", start=start, total=total, first_in_table=True,
                                  last_in_table=True, first_table=False, last_table=True, ts_us=7, marker=_marker)
    want = ["true"] * n
    if n and start == 0:
        want[0] = _marker(True, total == 1, False, True)
    if n and start + n == total and total > 1:
        want[-1] = _marker(False, True, False, True)
    assert out.column(tr.MARKER).to_pylist() == want
    assert tr.MARKER == tr.source_column("snapshot")  # the source block's `snapshot`, per row
    assert out.column(tr.POSITION).to_pylist() == [f"P{i:08X}" for i in range(start, start + n)]
    assert out.column(tr.OP).to_pylist() == ["r"] * n and out.column(tr.TS_US).to_pylist() == [7] * n
    assert out.schema.field(tr.TS_US).type == pa.int64() and out.schema.field(tr.MARKER).type == pa.string()
    assert out.column("id").to_pylist() == list(range(start, start + n))


def test_a_snapshot_chunk_comes_in_batches_each_with_its_read_time(monkeypatch):
    monkeypatch.setattr(tr, "BATCH_ROWS", 4)
    template = SourceRecord("t", None, None, None, {"source": {}}, {})
    table = pa.table({"id": pa.array(range(10), pa.int64())})
    out = tr.snapshot_chunk_rows(template, table, prefix="P", first_in_table=True, last_in_table=True,
                                 first_table=True, last_table=True, marker=_marker)
    assert [b.rows.num_rows for b in out] == [4, 4, 2]
    assert all(b.template is template and b.op == "r" for b in out)
    assert [b.position for b in out] == ["P00000000", "P00000004", "P00000008"]
    assert out[0].ts_ms == out[0].rows.column(tr.TS_US)[0].as_py() // 1000
    markers = [m for b in out for m in b.rows.column(tr.MARKER).to_pylist()]
    assert markers == [_marker(True, False, True, True)] + ["true"] * 8 + [_marker(False, True, True, True)]
    empty = tr.snapshot_chunk_rows(template, table.slice(0, 0), prefix="P", first_in_table=True,
                                   last_in_table=True, first_table=True, last_table=True, marker=_marker)
    assert empty == []


def test_the_ipc_form_round_trips_and_starts_with_the_schema():
    batch = pa.RecordBatch.from_pydict({"id": pa.array(range(1000), pa.int64()), tr.POSITION: ["p"] * 1000,
                                        tr.source_column("lsn"): pa.array([5] * 1000, pa.int64())})
    blob = tr.to_ipc(batch)
    records = [pa.RecordBatch.from_pydict({"typed_rows": pa.array([blob, None, blob], pa.binary())})]
    assert [b.equals(batch) for b in tr.from_ipc(records)] == [True, True]
    assert tr.ipc_schema(blob[:tr.IPC_SCHEMA_BYTES]) == batch.schema
    assert tr.ipc_schema(blob[:16]) is None, "a head shorter than the schema message"

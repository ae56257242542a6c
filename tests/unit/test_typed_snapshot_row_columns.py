"""The per-row columns of typed snapshot rows: positions (the same text the event path gives each
row), snapshot markers, times, LSN and transaction id."""

from __future__ import annotations

import pytest

from headwater.connectors.postgres.typed_snapshot import numbered_positions


@pytest.mark.parametrize(("start", "count"), [(0, 3), (9, 8), (65_530, 20), (0xFFFFFFF0, 16)])
def test_positions_are_the_prefix_and_the_row_number_in_hex(start, count):
    prefix = "0000000000000000" + "00000001000000A3"
    got = numbered_positions(prefix, start, count).to_pylist()
    assert got == [f"{prefix}{n:08X}" for n in range(start, start + count)]


def test_no_rows_no_positions():
    assert numbered_positions("AB", 5, 0).to_pylist() == []


def test_a_row_number_past_eight_hex_digits_is_refused():
    with pytest.raises(ValueError, match="8 hex digits"):
        numbered_positions("AB", 0xFFFFFFFF, 2)


def _marker(first: bool, last: bool, first_table: bool, last_table: bool) -> str:
    return f"{'F' if first else ''}{'L' if last else ''}{'f' if first_table else ''}{'l' if last_table else ''}"


@pytest.mark.parametrize(("start", "n", "total"), [(0, 1, 1), (0, 3, 3), (0, 2, 5), (2, 3, 5), (4, 1, 5), (1, 2, 5),
                                                   (0, 0, 0)])
def test_row_columns_mark_the_chunks_first_and_last_rows(start, n, total):
    import pyarrow as pa

    from headwater.connectors.postgres import typed_snapshot as ts

    batch = pa.RecordBatch.from_arrays([pa.array(range(start, start + n), pa.int32())], names=["id"])
    out = ts.with_row_columns(batch, prefix="P", start=start, total=total, first_in_table=True, last_in_table=True,
                              first_table=False, last_table=True, ts_us=7, marker=_marker, lsn=8, txid=9)
    want = ["true"] * n
    if n and start == 0:
        want[0] = _marker(True, total == 1, False, True)
    if n and start + n == total and total > 1:
        want[-1] = _marker(False, True, False, True)
    assert out.column(ts.MARKER).to_pylist() == want
    assert out.column(ts.POSITION).to_pylist() == [f"P{i:08X}" for i in range(start, start + n)]
    assert [out.column(c).to_pylist() for c in (ts.TS_US, ts.LSN, ts.TXID)] == [[7] * n, [8] * n, [9] * n]
    assert out.schema.field(ts.TS_US).type == pa.int64() and out.schema.field(ts.MARKER).type == pa.string()

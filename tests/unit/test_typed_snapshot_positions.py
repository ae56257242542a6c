"""The ordering positions of typed snapshot rows: the same text the event path gives each row."""

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

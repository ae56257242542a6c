"""Tuples of many pgoutput messages parsed at once (tuple_columns) give exactly what decoding
them one by one (pgoutput.decode) gives, and every row of another shape is left to that path."""

from __future__ import annotations

import random
import struct

import pyarrow as pa
import pytest

from headwater.connectors.postgres import pgoutput as pg
from headwater.connectors.postgres.tuple_columns import tuple_columns

COLUMNS = 4


def _tuple(values: list[object]) -> bytes:
    out = bytearray(struct.pack("!h", len(values)))
    for v in values:
        if v is None:
            out += b"n"
        elif v is pg.UNCHANGED_TOAST:
            out += b"u"
        elif isinstance(v, bytes):
            out += b"b" + struct.pack("!i", len(v)) + v
        else:
            data = str(v).encode()
            out += b"t" + struct.pack("!i", len(data)) + data
    return bytes(out)


def _insert(values: list[object]) -> bytes:
    return b"I" + struct.pack("!I", 16384) + b"N" + _tuple(values)


def _value(rng: random.Random) -> object:
    return rng.choice([None, "", "x", "name-12345", "ünïcødé ✓", "a" * rng.randint(0, 300), "1.25",
                       "2024-01-01 00:00:00+00", "line\nbreak \"q\" \\ \x00"[: rng.randint(0, 20)]])


def _check(payloads: list[bytes], fast_expected: list[bool]) -> None:
    parsed = tuple_columns(payloads, 6, COLUMNS)
    assert parsed.fast.tolist() == fast_expected
    fast = [i for i, ok in enumerate(fast_expected) if ok]
    for column in range(COLUMNS):
        expected = [pg.decode(payloads[i]).new[column] for i in fast]
        assert parsed.text(column).to_pylist() == expected
    assert parsed.slow_rows() == [i for i, ok in enumerate(fast_expected) if not ok]


def test_text_and_null_values_equal_the_one_by_one_decode():
    rng = random.Random(7)
    payloads = [_insert([_value(rng) for _ in range(COLUMNS)]) for _ in range(2_000)]
    _check(payloads, [True] * len(payloads))


def test_values_among_rows_of_other_shapes_and_nulls_keep_their_rows():
    # the values are taken from one array of every fast row's values in buffer order: rows left
    # out (of other shapes), NULLs and empty values between them must not shift any value
    rng = random.Random(11)
    payloads, fast = [], []
    for i in range(600):
        values = [_value(rng) for _ in range(COLUMNS)]
        if i % 7 == 3:
            values[rng.randrange(COLUMNS)] = pg.UNCHANGED_TOAST
        payloads.append(_insert(values))
        fast.append(i % 7 != 3)
    _check(payloads, fast)


def test_rows_of_other_shapes_are_left_to_the_one_by_one_decode():
    good = _insert(["1", None, "", "x"])
    toast = _insert(["2", pg.UNCHANGED_TOAST, "a", "b"])
    binary = _insert(["3", b"\x00\x01", "a", "b"])
    fewer = _insert(["4", "a", "b"])
    more = _insert(["5", "a", "b", "c", "d"])
    trailing = good + b"\x00"
    truncated = good[:-1]
    header_cut = good[:len(good) - 3]  # a value's length runs past the end
    unknown_kind = good.replace(b"n", b"z", 1)
    huge_length = _insert(["6", "a", "b", "c"])
    huge_length = huge_length[:8] + b"t\xff\xff\xff\xff" + huge_length[13:]
    too_short = b"I" + struct.pack("!I", 16384) + b"N"  # no column count
    payloads = [good, toast, good, binary, fewer, more, trailing, truncated, header_cut, unknown_kind,
                huge_length, too_short, good]
    parsed = tuple_columns(payloads, 6, COLUMNS)
    assert parsed.slow_rows() == list(range(1, 2)) + list(range(3, 12))
    assert parsed.text(0).to_pylist() == ["1", "1", "1"]
    assert parsed.text(1).to_pylist() == [None, None, None]
    # the slow rows decode (or fail) exactly as before
    assert pg.decode(toast).new[1] is pg.UNCHANGED_TOAST
    assert pg.decode(binary).new[1] == b"\x00\x01"
    for bad in (truncated, header_cut, unknown_kind, too_short):
        with pytest.raises(pg.ProtocolError):
            pg.decode(bad)


def test_invalid_utf8_is_refused_like_the_one_by_one_decode():
    bad = b"I" + struct.pack("!I", 16384) + b"N" + struct.pack("!h", 1) + b"t" + struct.pack("!i", 2) + b"\xc3\x28"
    parsed = tuple_columns([bad], 6, 1)
    assert parsed.fast.tolist() == [True]
    with pytest.raises(pa.ArrowInvalid):
        parsed.text(0)
    with pytest.raises(pg.ProtocolError, match="utf-8"):  # the run then goes to that path, which says where
        pg.decode(bad)


def test_no_rows_and_all_null_columns():
    assert tuple_columns([], 6, COLUMNS).text(2).to_pylist() == []
    parsed = tuple_columns([_insert([None] * COLUMNS)] * 3, 6, COLUMNS)
    assert parsed.text(3).to_pylist() == [None, None, None]

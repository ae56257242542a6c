"""Text forms shared by COPY and pgoutput -> Connect values (default modes)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from headwater.connectors.postgres import types as t
from headwater.connectors.postgres.snapshot import parse_copy_line
from headwater.engine.snapshot_plan import snapshot_marker


def test_copy_text_unescaping():
    assert parse_copy_line("1\t\\N\ta\\tb\\\\c\\nd\t\\x41\\101") == ["1", None, "a\tb\\c\nd", "AA"]


@pytest.mark.parametrize(("first", "last", "first_table", "last_table", "want"), [
    (True, False, True, False, "first"),
    (True, True, True, True, "last"),
    (False, True, False, True, "last"),
    (True, True, False, False, "last_in_data_collection"),
    (True, False, False, True, "first_in_data_collection"),
    (False, False, True, True, "true"),
])
def test_snapshot_markers(first, last, first_table, last_table, want):
    assert snapshot_marker(first, last, first_table, last_table) == want


def test_temporal_and_numeric_text():
    assert t._date_days("2024-02-29") == 19782
    assert t._time_micros("13:45:30.123456") == 49530123456
    assert t._time_micros("24:00:00") == 86_400_000_000
    assert t._timestamp_micros("2024-02-29 13:45:30.123456") == 1709214330123456
    assert t._timestamptz_iso("2024-02-29 11:45:30.123456+00") == "2024-02-29T11:45:30.123456Z"
    assert t._timestamptz_iso("2024-02-29 13:45:30+02") == "2024-02-29T11:45:30.000000Z"
    assert t._timestamptz_iso("2000-01-01 00:00:00+00") == "2000-01-01T00:00:00.000000Z"
    assert t._timestamptz_iso("2000-01-01 00:00:00.5+00") == "2000-01-01T00:00:00.500000Z"
    assert t._timetz_iso("13:45:30.5+05:30") == "08:15:30.5Z"
    assert t._interval_micros("1 year 2 mons 3 days 04:05:06.789") == 37091106789000
    assert t._money("-$1,234.56") == Decimal("-1234.56")
    assert t._bits("101") == b"\x05"
    assert t._bits("000") == b""  # BitSet.toByteArray() of no set bit
    assert t._bits("") == b""


def test_array_literals():
    assert t.parse_array('{"a","b c",NULL,"d\\"e"}', str) == ["a", "b c", None, 'd"e']
    assert t.parse_array("{1,2,NULL,4}", int) == [1, 2, None, 4]
    assert t.parse_array("{}", int) == []


def test_default_expressions():
    assert t.parse_default("0", int) == 0
    assert t.parse_default("'abc'::character varying", str) == "abc"
    assert t.parse_default("'it''s'::text", str) == "it's"
    assert t.parse_default("nextval('s'::regclass)", int) is t.NO_DEFAULT
    assert t.parse_default("now()", str) is t.NO_DEFAULT
    assert t.parse_default(None, str) is t.NO_DEFAULT

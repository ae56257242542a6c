"""Conversions the recorded scenarios do not reach, as Debezium 3.6's SqlServerValueConverters /
JdbcValueConverters compute them (the recorded ones: test_types_golden.py)."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.connectors.sqlserver.columns import CatalogColumn, column_from_catalog
from headwater.connectors.sqlserver.types import (
    SqlServerValueConverters,
    TypeSettings,
    select_expression,
    unavailable_when_unchanged,
)
from headwater.model.schema import NO_DEFAULT
from headwater.relational.table import Column, Table, TableId


def _column(type_name: str, precision: int = 0, scale: int = 0, *, max_length: int = 8,
            nullable: bool = True, name: str = "c") -> Column:
    return column_from_catalog(CatalogColumn("dbo", "t", name, 1, type_name, max_length, precision, scale,
                                             nullable, None, False, False, None))


def _convert(column: Column, raw: Any, **settings: Any) -> tuple[str | None, Any]:
    table = Table(TableId("db", "dbo", "t"), (column,))
    converters = SqlServerValueConverters(TypeSettings(**settings))
    schema = converters.schema_for(table, column)
    assert schema is not None
    return schema.name, converters.converter_for(table, column, schema)(raw)


@pytest.mark.parametrize(("mode", "type_name", "precision", "scale", "raw", "expected"), [
    ("adaptive_time_microseconds", "time", 11, 2, "10:23:45.68", ("io.debezium.time.MicroTime", 37425680000)),
    ("adaptive_time_microseconds", "datetime2", 27, 7, "2018-07-13 11:23:45.3400000",
     ("io.debezium.time.NanoTimestamp", 1531481025340000000)),
    ("microseconds", "time", 16, 7, "10:23:45.6789123", ("io.debezium.time.MicroTime", 37425678912)),
    ("microseconds", "datetime", 23, 3, "2018-07-13 13:23:45.780", ("io.debezium.time.MicroTimestamp",
                                                                    1531488225780000)),
    ("nanoseconds", "time", 8, 0, "10:23:45", ("io.debezium.time.NanoTime", 37425000000000)),
    ("nanoseconds", "datetime2", 19, 0, "2018-07-13 11:23:46", ("io.debezium.time.NanoTimestamp",
                                                                 1531481026000000000)),
])
def test_other_time_precision_modes(mode: str, type_name: str, precision: int, scale: int, raw: str,
                                    expected: tuple[str, int]) -> None:
    assert _convert(_column(type_name, precision, scale), raw, time_precision_mode=mode) == expected


def test_nano_timestamp_overflow_is_null_or_an_error() -> None:
    """Debezium warns and writes null when datetime2(7) does not fit int64 nanoseconds; a NOT NULL
    column cannot take the null."""
    assert _convert(_column("datetime2", 27, 7), "1600-01-01 00:00:00.0000000") == (
        "io.debezium.time.NanoTimestamp", None)
    with pytest.raises(ValueError, match="NOT NULL"):
        _convert(_column("datetime2", 27, 7, nullable=False), "1600-01-01 00:00:00.0000000")


def test_zoned_timestamp_before_1970_keeps_debeziums_truncation() -> None:
    """LocalDateTime.ofEpochSecond(Timestamp.getTime() / 1000, getNanos()): the division truncates
    toward zero, so a fraction before the epoch lands one second late."""
    assert _convert(_column("datetimeoffset", 34, 7), "1969-12-31 23:59:59.5000000 +00:00")[1] == \
        "1970-01-01T00:00:00.5Z"
    assert _convert(_column("datetimeoffset", 34, 7), "1970-01-01 05:30:00.2500000 +05:30")[1] == \
        "1970-01-01T05:30:00.25+05:30"


def test_types_without_a_converter_are_left_out() -> None:
    column = _column("sql_variant")
    table = Table(TableId("db", "dbo", "t"), (column,))
    assert SqlServerValueConverters().schema_for(table, column) is None


def test_select_expressions() -> None:
    assert select_expression(_column("datetime2", 27, 7, name="a]b")) == "CONVERT(varchar(40), [a]]b], 121)"
    assert select_expression(_column("int", 10)) == "[c]"
    assert select_expression(_column("hierarchyid")) == "CAST([c] AS varbinary(max))"


def test_lob_columns_and_placeholders() -> None:
    table = Table(TableId("db", "dbo", "t"), ())
    converters = SqlServerValueConverters(TypeSettings(unavailable_placeholder="hex:0a0b", binary_mode="hex"))
    image, ntext = _column("image", max_length=16), _column("ntext", max_length=16)
    varchar_max, varchar = _column("varchar", max_length=-1), _column("varchar", max_length=10)
    assert [unavailable_when_unchanged(c) for c in (image, ntext, varchar_max, varchar)] == [True, True, False, False]
    assert converters.unavailable_for(table, image, converters.schema_for(table, image)) == "0a0b"
    assert converters.unavailable_for(table, ntext, converters.schema_for(table, ntext)) == "\n\x0b"
    assert converters.unavailable_for(table, varchar_max, converters.schema_for(table, varchar_max)) is None
    assert converters.unavailable_for(table, varchar, converters.schema_for(table, varchar)) is NO_DEFAULT


def test_unsupported_modes_are_refused() -> None:
    with pytest.raises(ValueError, match=r"time\.precision\.mode='isostring'"):
        TypeSettings(time_precision_mode="isostring")

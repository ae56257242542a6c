"""Column defaults as Debezium's SqlServerDefaultValueConverter parses SQL Server's stored
definitions (v3.6.1), under every mode; temporal literals as SQL Server's PARSE reads them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from headwater.connectors.sqlserver.columns import CatalogColumn, column_from_catalog
from headwater.connectors.sqlserver.types import (
    SqlServerValueConverters,
    TypeSettings,
    _parse_temporal,
    parse_default_raw,
)
from headwater.model.schema import NO_DEFAULT
from headwater.relational.table import Table, TableId
from helpers.sqlserver import SqlServerEmulator

# (type, max_length, precision, scale)
_SHAPES = {"int": (4, 10, 0), "bigint": (8, 19, 0), "smallint": (2, 5, 0), "tinyint": (1, 3, 0), "bit": (1, 1, 0),
           "decimal": (5, 8, 2), "money": (8, 19, 4), "float": (8, 53, 0), "real": (4, 24, 0),
           "char": (4, 0, 0), "nvarchar": (40, 0, 0), "varbinary": (8, 0, 0), "binary": (2, 0, 0),
           "uniqueidentifier": (16, 0, 0), "xml": (-1, 0, 0), "date": (3, 10, 0), "time": (5, 16, 7),
           "datetime": (8, 23, 3), "smalldatetime": (4, 16, 0), "datetime2": (8, 27, 7),
           "datetimeoffset": (10, 34, 7)}


def _default(type_name: str, definition: str | None, identity: bool = False, **settings: Any) -> Any:
    max_length, precision, scale = _SHAPES[type_name]
    c = CatalogColumn("dbo", "t", "c", 1, type_name, max_length, precision, scale, True, definition, identity,
                      False, None)
    column = column_from_catalog(c)
    table = Table(TableId("db", "dbo", "t"), (column,))
    converters = SqlServerValueConverters(TypeSettings(**settings))
    schema = converters.schema_for(table, column)
    assert schema is not None
    return converters.default_for(table, column, schema)


@pytest.mark.parametrize(("type_name", "definition", "expected"), [
    ("int", "((42))", 42), ("int", "((-7))", -7), ("int", "(NULL)", NO_DEFAULT), ("int", "((2147483648))", NO_DEFAULT),
    ("bigint", "((3147483648.))", 3147483648), ("smallint", "((32767))", 32767), ("tinyint", "((255))", 255),
    ("bit", "((1))", True), ("bit", "((0))", False), ("bit", "(1)", False),  # Debezium: equals "((1))"
    ("float", "((1.2345000000000000e+003))", 1234.5), ("real", "((1.25))", 1.25), ("real", "((4.323))", 4.323),
    ("char", "('ab')", "ab"), ("nvarchar", "(N'fallback')", "fallback"), ("nvarchar", "('it''s')", "it''s"),
    ("nvarchar", "('a(b)c')", "b"), ("nvarchar", "(NULL)", NO_DEFAULT),
    ("varbinary", "(0x0A0B)", b"\x0a\x0b"), ("binary", "(0x0A0)", NO_DEFAULT),
    ("uniqueidentifier", "(newid())", NO_DEFAULT), ("xml", "('<a/>')", NO_DEFAULT),
    ("datetime", "(getdate())", NO_DEFAULT), ("int", "((1)+(1))", NO_DEFAULT),
    ("date", "('2020-02-29')", 18321), ("time", "('08:00:00')", 28800000000000),
    ("datetime2", "('2019-01-01 00:00:00.1234567')", 1546300800123456700),
    ("datetime", "('2020-01-01T12:34:56.789')", 1577882096790), ("smalldatetime", "('2020-01-01 12:00:29.999')",
                                                                  1577880060000),
    ("datetimeoffset", "('2019-01-01 00:00:00.1234567+02:00')", "2019-01-01T00:00:00.1234567+02:00"),
])
def test_default_parsing(type_name: str, definition: str, expected: Any) -> None:
    assert _default(type_name, definition) == expected


def test_identity_columns_have_no_default() -> None:
    assert _default("int", "((1))", identity=True) is NO_DEFAULT


@pytest.mark.parametrize(("mode", "expected"), [("precise", Decimal("3.50")), ("double", 3.5), ("string", "3.5")])
def test_decimal_default_scale_per_mode(mode: str, expected: Any) -> None:
    got = _default("decimal", "((3.5))", decimal_mode=mode)
    assert got == expected and type(got) is type(expected)
    if mode == "precise":
        assert got.as_tuple().exponent == -2


@pytest.mark.parametrize(("mode", "expected"), [("bytes", b"\x0a\x0b"), ("base64", "Cgs="), ("hex", "0a0b")])
def test_binary_default_per_mode(mode: str, expected: Any) -> None:
    assert _default("varbinary", "(0x0A0B)", binary_mode=mode) == expected


def test_unknown_types_have_no_mapper() -> None:
    assert parse_default_raw("timestamp", "(0x01)") is NO_DEFAULT
    assert parse_default_raw("int", None) is NO_DEFAULT


LITERALS = ["2020-02-29", "2020-01-01T12:34:56.789", "08:00:00", "2019-01-01 00:00:00.1234567",
            "2020-01-01 12:00:00.001", "2020-01-01 12:00:29.999", "2020-01-01 12:00:29.998",
            "2020-01-01 23:59:59.9999999", "10:11"]


@pytest.mark.parametrize("type_name", ["datetime", "datetime2", "smalldatetime", "time", "datetimeoffset"])
def test_temporal_literals_as_parse_reads_them(sqlserver: SqlServerEmulator, type_name: str) -> None:
    """What Debezium asks the server (SELECT PARSE(? AS <type>)), here computed locally."""
    for literal in LITERALS:
        server = sqlserver.execute(f"SELECT CONVERT(varchar(40), PARSE(N'{literal}' AS {type_name}), 121)")[0][0]
        ours = _parse_temporal(type_name, literal)
        if type_name in ("datetime", "smalldatetime"):
            ours = ours[:23]  # style 121 prints datetime with 3 digits
        assert ours == server, literal

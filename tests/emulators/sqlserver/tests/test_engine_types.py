"""SQL layer, types: every SQL Server type stored in the backing PostgreSQL and read back exactly
(100 ns temporal values, offsets, money, tinyint, binary padding, uniqueidentifier, xml,
sql_variant), SQL Server's rounding rules and the errors for values that do not fit."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import collect, engine_with, session_in
from emulators.sqlserver.values import DateTime2, DateTimeOffset, Time, Variant


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with engine_with("CREATE DATABASE Types") as srv:
        yield srv


@pytest.fixture()
def session(server: EmulatorServer) -> Iterator[Any]:
    with session_in(server, "Types") as s:
        yield s


def ticks(h: int, m: int, s: int, frac7: int = 0) -> int:
    return ((h * 60 + m) * 60 + s) * 10_000_000 + frac7


def test_round_trip_of_every_type(session) -> None:
    ddl = """CREATE TABLE dbo.AllTypes (
        id int NOT NULL PRIMARY KEY, b bit, ti tinyint, si smallint, bi bigint, de decimal(12,3), nu numeric(5,0),
        mo money, sm smallmoney, r real, f float, c char(4), vc varchar(10), nc nchar(3), nv nvarchar(20),
        nvm nvarchar(max), t text, bn binary(4), vb varbinary(8), d date, tm time(7), tm3 time(3),
        d2 datetime2(7), d20 datetime2(0), dto datetimeoffset(7), dtm datetime, sdt smalldatetime,
        u uniqueidentifier, x xml, v sql_variant)"""
    assert collect(session.execute_batch(ddl)).error is None
    out = collect(session.execute_batch("""INSERT INTO AllTypes VALUES (1, 1, 255, -32768,
        9223372036854775807, 123456789.1235, 99999, 922337203685477.5807, -214748.3648, 1.5, 2.25, 'ab', 'hello',
        N'ü', N'Grüße 😀', N'long text', 'old text', 0x0102, 0xDEADBEEF, '2024-02-29', '23:59:59.9999999',
        '12:34:56.7895', '2024-02-29 13:45:30.1234567', '2024-02-29 13:45:30.5', '2024-01-01 20:15:00.9999999 +05:30',
        '2024-01-01 10:00:00.0049', '2024-01-01 10:00:29.999', '6F9619FF-8B86-D011-B42D-00C04FC964FF',
        N'<root a="1"/>', 42)"""))
    assert out.error is None and out.errors == [] and out.counts == [1]
    got = collect(session.execute_batch("SELECT * FROM AllTypes"))
    assert got.types == ["int", "bit", "tinyint", "smallint", "bigint", "decimal(12,3)", "numeric(5,0)", "money",
                         "smallmoney", "real", "float", "char(4)", "varchar(10)", "nchar(3)", "nvarchar(20)",
                         "nvarchar(max)", "text", "binary(4)", "varbinary(8)", "date", "time(7)", "time(3)",
                         "datetime2(7)", "datetime2(0)", "datetimeoffset(7)", "datetime", "smalldatetime",
                         "uniqueidentifier", "xml", "sql_variant"]
    row = got.rows[0]
    assert row[:11] == (1, True, 255, -32768, 9223372036854775807, Decimal("123456789.124"), Decimal("99999"),
                        Decimal("922337203685477.5807"), Decimal("-214748.3648"), 1.5, 2.25)
    assert row[11:17] == ("ab  ", "hello", "ü  ", "Grüße 😀", "long text", "old text")
    assert row[17] == b"\x01\x02\x00\x00"            # binary(n) is zero-padded
    assert row[18] == b"\xde\xad\xbe\xef"
    assert row[19] == dt.date(2024, 2, 29)
    assert row[20] == Time(ticks(23, 59, 59, 9_999_999))
    assert row[21] == Time(ticks(12, 34, 56, 7_900_000))   # time(3) rounds .7895 → .790
    assert row[22] == DateTime2(dt.date(2024, 2, 29), Time(ticks(13, 45, 30, 1_234_567)))
    assert row[23] == DateTime2(dt.date(2024, 2, 29), Time(ticks(13, 45, 31)))  # datetime2(0) rounds up
    dto = row[24]
    assert isinstance(dto, DateTimeOffset) and dto.offset_minutes == 330
    assert dto.utc == DateTime2(dt.date(2024, 1, 1), Time(ticks(14, 45, 0, 9_999_999)))
    assert dto.local() == DateTime2(dt.date(2024, 1, 1), Time(ticks(20, 15, 0, 9_999_999)))
    assert row[25] == dt.datetime(2024, 1, 1, 10, 0, 0, 3000)    # 1/300 s: .0049 → .003
    assert row[26] == dt.datetime(2024, 1, 1, 10, 1)              # 29.999 s rounds up to the next minute
    assert row[27] == uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")
    assert row[28] == '<root a="1"/>'
    assert isinstance(row[29], Variant) and row[29].value == 42 and row[29].type.name == "int"


@pytest.mark.parametrize(("literal", "expected"), [
    ("'2024-01-01 23:59:59.998'", dt.datetime(2024, 1, 1, 23, 59, 59, 997000)),
    ("'2024-01-01 23:59:59.999'", dt.datetime(2024, 1, 2, 0, 0, 0)),
    ("'2024-01-01 00:00:00.001'", dt.datetime(2024, 1, 1, 0, 0, 0, 0)),
    ("'2024-01-01 00:00:00.002'", dt.datetime(2024, 1, 1, 0, 0, 0, 3000)),
    ("'2024-01-01 00:00:00.005'", dt.datetime(2024, 1, 1, 0, 0, 0, 7000)),
])
def test_datetime_rounds_to_three_hundredths(session, literal: str, expected: dt.datetime) -> None:
    out = collect(session.execute_batch(f"SELECT CAST({literal} AS datetime)"))
    assert out.types == ["datetime"] and out.rows == [(expected,)]


def test_datetime2_scales_and_offsets_through_cast(session) -> None:
    out = collect(session.execute_batch(
        "SELECT CAST('2020-05-06 07:08:09.1234567' AS datetime2(4)), CAST('01:02:03.45' AS time(1)), "
        "CAST('2020-05-06 07:08:09.1234567 -08:00' AS datetimeoffset(7))"))
    assert out.types == ["datetime2(4)", "time(1)", "datetimeoffset(7)"]
    d2, tm, dto = out.rows[0]
    assert d2 == DateTime2(dt.date(2020, 5, 6), Time(ticks(7, 8, 9, 1_235_000)))
    assert tm == Time(ticks(1, 2, 3, 5_000_000))
    assert dto.offset_minutes == -480 and dto.utc == DateTime2(dt.date(2020, 5, 6), Time(ticks(15, 8, 9, 1_234_567)))


def test_too_long_string_is_error_2628_never_truncated(session) -> None:
    collect(session.execute_batch("CREATE TABLE dbo.Short (id int NOT NULL PRIMARY KEY, code varchar(3), "
                                  "bin binary(2))"))
    out = collect(session.execute_batch("INSERT INTO Short VALUES (1, 'abcd', NULL); SELECT COUNT(*) FROM Short"))
    assert [(m.number, m.text) for m in out.errors] == [
        (2628, "String or binary data would be truncated in table 'Types.dbo.Short', column 'code'. "
               "Truncated value: 'abc'.")]
    assert out.rows == [(0,)]   # the statement failed, the batch went on
    out = collect(session.execute_batch("INSERT INTO Short VALUES (2, 'ab', 0x010203)"))
    assert out.errors[0].number == 2628
    # trailing blanks beyond the length are dropped without an error
    out = collect(session.execute_batch("INSERT INTO Short VALUES (3, 'ab   ', 0x01); SELECT code, bin FROM Short"))
    assert out.errors == [] and out.rows == [("ab ", b"\x01\x00")]
    # an UPDATE from an expression is checked in PostgreSQL, with the same message
    out = collect(session.execute_batch("UPDATE Short SET code = code + 'xyz' WHERE id = 3"))
    assert [m.number for m in out.errors] == [2628]
    assert "column 'code'" in out.errors[0].text


def test_tinyint_range_and_conversion_errors(session) -> None:
    collect(session.execute_batch("CREATE TABLE dbo.Tiny (t tinyint, d datetime2, u uniqueidentifier)"))
    out = collect(session.execute_batch("INSERT INTO Tiny (t) VALUES (256)"))
    assert out.errors[0].number == 220
    assert out.errors[0].text == "Arithmetic overflow error for data type tinyint, value = 256."
    out = collect(session.execute_batch("INSERT INTO Tiny (d) VALUES ('not a date')"))
    assert out.errors[0].number == 241
    assert out.errors[0].text == "Conversion failed when converting date and/or time from character string."
    out = collect(session.execute_batch("INSERT INTO Tiny (u) VALUES ('xyz')"))
    assert out.errors[0].number == 8169
    out = collect(session.execute_batch("SELECT CAST('abc' AS int)"))
    assert out.errors[0].number == 245


def test_temporal_where_clauses_compare_exactly(session) -> None:
    collect(session.execute_batch("CREATE TABLE dbo.Ev (id int, at datetime2(7), tz datetimeoffset(3))"))
    collect(session.execute_batch("INSERT INTO Ev VALUES (1, '2021-01-01 00:00:00.0000001', '2021-01-01 10:00 +01:00'),"
                                  " (2, '2021-01-01 00:00:00.0000002', '2021-01-01 09:00 +00:00')"))
    out = collect(session.execute_batch("SELECT id FROM Ev WHERE at = '2021-01-01 00:00:00.0000002'"))
    assert out.rows == [(2,)]
    out = collect(session.execute_batch("SELECT id FROM Ev WHERE at > '2021-01-01 00:00:00.0000001' ORDER BY id"))
    assert out.rows == [(2,)]
    # datetimeoffset compares instants: 10:00 +01:00 is 09:00 UTC
    out = collect(session.execute_batch("SELECT COUNT(*) FROM Ev WHERE tz = '2021-01-01 09:00:00 +00:00'"))
    assert out.rows == [(2,)]


def test_money_and_decimal_arithmetic_stay_exact(session) -> None:
    out = collect(session.execute_batch("SELECT CAST(1.23456 AS money), CAST(10 AS decimal(5,2)) / 3"))
    assert out.types[0] == "money" and out.rows[0][0] == Decimal("1.2346")
    assert out.rows[0][1].quantize(Decimal("0.01")) == Decimal("3.33")


def test_rowversion_identity_and_scope_identity(session) -> None:
    out = collect(session.execute_batch(
        "CREATE TABLE dbo.Versioned (Id int IDENTITY(5, 5) NOT NULL PRIMARY KEY, rv rowversion, v int); "
        "INSERT INTO Versioned (v) VALUES (1), (2); SELECT SCOPE_IDENTITY(), @@IDENTITY; "
        "SELECT Id, rv FROM Versioned ORDER BY Id"))
    assert out.error is None, out.error
    assert list(out.result_sets[0].rows) == [(Decimal(10), Decimal(10))]
    assert out.result_sets[0].columns[0].type.name == "numeric"
    (a, rv_a), (b, rv_b) = out.rows
    assert (a, b) == (5, 10) and len(rv_a) == 8 and rv_b > rv_a
    out = collect(session.execute_batch("UPDATE Versioned SET v = 3 WHERE Id = 5; SELECT rv FROM Versioned "
                                        "WHERE Id = 5"))
    assert out.rows[0][0] > rv_b   # every change takes a new, larger row version
    out = collect(session.execute_batch("SELECT seed_value, increment_value FROM sys.identity_columns "
                                        "WHERE object_id = OBJECT_ID('Versioned')"))
    assert [(v.value, v.type.name) for v in out.rows[0]] == [(5, "int"), (5, "int")]


def test_date_functions_over_every_temporal_type(session) -> None:
    collect(session.execute_batch(
        "CREATE TABLE dbo.Dates (d2 datetime2(3), dt datetime, dd date, o datetimeoffset(0), tm time(0)); "
        "INSERT INTO Dates VALUES ('2020-01-31 10:00:00.5', '2020-01-31 10:00:00', '2020-01-31', "
        "'2020-01-31 10:00 +02:00', '10:00')"))
    out = collect(session.execute_batch(
        "SELECT YEAR(dt), MONTH(dd), DAY(d2), DATEPART(hour, o), DATEPART(TZOFFSET, o), DATEADD(month, 1, dd), "
        "DATEADD(hour, 1, d2), DATEDIFF(day, dd, d2) FROM Dates"))
    assert out.error is None, out.error
    assert out.types[:6] == ["int", "int", "int", "int", "int", "date"]
    assert out.rows == [(2020, 1, 31, 10, 120, dt.date(2020, 2, 29),
                         DateTime2(dt.date(2020, 1, 31), Time(ticks(11, 0, 0, 5_000_000))), 0)]
    out = collect(session.execute_batch(
        "SELECT COUNT(*) FROM Dates WHERE d2 > '2020-01-31 10:00:00.499' AND o = '2020-01-31 08:00 +00:00' "
        "AND tm >= '09:59' AND dt < GETDATE()"))
    assert out.rows == [(1,)]

"""Microsoft's drivers against the REAL emulator (engine + TDS + CDC together, in this process, over
TCP): mssql-python (ODBC 18 inside) and mssql-jdbc 12.4.2 (through jvm/JdbcProbe.java) read every
type of spec §3 exactly, bind typed parameters both ways, get SQL Server's errors, see SQL Server's
DatabaseMetaData, and see interleaved transactions in the change table in commit order (issue 20).

Expected values are what SQL Server returns for the same statements (rounding of time/datetime2/
datetimeoffset to the column's scale, datetime's 1/300 s, padding of char/nchar/binary), as each
driver hands them over. One JVM per script: the JDBC checks share one probe run (plus one for the
failed login, run at the same time)."""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import re
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import mssql_python
import pytest

from headwater.embedded.postgres import ThrowawayPostgres
from helpers.sqlserver import PASSWORD, emulator_in_process, wait_for

pytestmark = pytest.mark.postgres


def tz(minutes: int) -> dt.timezone:
    return dt.timezone(dt.timedelta(minutes=minutes))


# ------------------------------------------------------------------------------------------------
# the table of every type: column, type, literal of row 1 (maxima), literal of row 2 (minima);
# row 3 is all NULL

HI_TIME = "'12:34:56.1234567'"
HI_DT2 = "'2024-02-29 12:34:56.1234567'"
HI_DTO = "'2024-02-29 12:34:56.1234567 -05:30'"
LONG_VARCHAR = "REPLICATE(CAST('v' AS varchar(max)), 9000)"           # > 8000 bytes: PLP chunks
LONG_NVARCHAR = "REPLICATE(CAST(N'é😀' AS nvarchar(max)), 5000)"      # 15000 UTF-16 units

COLUMNS: list[tuple[str, str, str, str]] = [
    ("b", "bit", "1", "0"),
    ("ti", "tinyint", "255", "0"),
    ("si", "smallint", "32767", "-32768"),
    ("i", "int", "2147483647", "-2147483648"),
    ("bi", "bigint", "9223372036854775807", "-9223372036854775808"),
    ("d", "decimal(38,10)", "9999999999999999999999999999.9999999999", "-9999999999999999999999999999.9999999999"),
    ("n", "numeric(5,2)", "999.99", "-999.99"),
    ("mo", "money", "922337203685477.5807", "-922337203685477.5808"),
    ("smo", "smallmoney", "214748.3647", "-214748.3648"),
    ("r", "real", "3.4028235E+38", "-1.17549435E-38"),
    ("f", "float", "1.7976931348623157E+308", "-2.2250738585072014E-308"),
    ("c", "char(5)", "'abc'", "''"),
    ("vc", "varchar(20)", "'hello'", "''"),
    ("nc", "nchar(5)", "N'žž'", "N''"),
    ("nvc", "nvarchar(20)", "N'Grüße 😀 𝄞'", "N''"),        # 😀 and 𝄞 lie outside the BMP
    ("vcm", "varchar(max)", LONG_VARCHAR, "''"),
    ("nvcm", "nvarchar(max)", LONG_NVARCHAR, "N''"),
    ("tx", "text", "'old text'", "''"),
    ("ntx", "ntext", "N'ñtext 😀'", "N''"),
    ("bin", "binary(10)", "0x0102", "0x"),
    ("vbin", "varbinary(20)", "0xDEADBEEF", "0x"),
    ("vbinm", "varbinary(max)", "REPLICATE(CAST(0x00FF AS varbinary(max)), 5000)", "0x"),
    ("dd", "date", "'9999-12-31'", "'0001-01-01'"),
    *[(f"t{s}", f"time({s})", HI_TIME, f"'00:00:00{'.' + '0' * (s - 1) + '1' if s else ''}'") for s in range(7)],
    ("t7", "time(7)", "'23:59:59.9999999'", "'00:00:00.0000001'"),
    ("dtm", "datetime", "'9999-12-31 23:59:59.997'", "'1753-01-01 00:00:00'"),
    *[(f"d2{s}", f"datetime2({s})", HI_DT2, "'0001-01-01'") for s in range(7)],
    ("d27", "datetime2(7)", "'9999-12-31 23:59:59.9999999'", "'0001-01-01 00:00:00.0000001'"),
    ("sdt", "smalldatetime", "'2079-06-06 23:59:00'", "'1900-01-01'"),
    *[(f"o{s}", f"datetimeoffset({s})", HI_DTO, f"'2000-01-01 00:00:00.{'0' * (s - 1)}1 {off}'" if s else
       f"'0001-01-01 14:00 {off}'") for s, off in enumerate(("+14:00", "+14:00", "-14:00", "+00:00", "+01:00",
                                                               "-00:01", "+05:45"))],
    ("o7", "datetimeoffset(7)", "'9999-12-31 09:59:59.9999999 -14:00'", "'2000-01-01 00:00:00.0000001 -12:34'"),
    ("u", "uniqueidentifier", "'6F9619FF-8B86-D011-B42D-00C04FC964FF'", "'00000000-0000-0000-0000-000000000000'"),
    ("x", "xml", "N'<r a=\"1\"><x>ü</x></r>'", "N'<e/>'"),
    ("vi", "sql_variant", "CAST(42 AS int)", "CAST(-1 AS bigint)"),
    ("vs", "sql_variant", "CAST(N'text' AS nvarchar(10))", "CAST('x' AS varchar(3))"),
    ("vd", "sql_variant", "CAST(1.25 AS decimal(5,2))", "CAST(0x0A0B AS varbinary(4))"),
    ("vdt", "sql_variant", "CAST('2020-01-02 03:04:05.123' AS datetime)", "CAST('2020-01-02' AS date)"),
]
NAMES = ["id", *(c[0] for c in COLUMNS), "rv"]


def _types_ddl() -> str:
    cols = ", ".join(f"{name} {type_}" for name, type_, _, _ in COLUMNS)
    return f"CREATE TABLE dbo.all_types (id int NOT NULL PRIMARY KEY, {cols}, rv rowversion)"


def _types_insert(row_id: int, which: int) -> str:
    names = ", ".join(c[0] for c in COLUMNS)
    values = ", ".join(c[which] for c in COLUMNS)
    return f"INSERT INTO dbo.all_types (id, {names}) VALUES ({row_id}, {values})"


def us(h: int, m: int, s: int, micro: int = 0) -> dt.time:
    return dt.time(h, m, s, micro)


# What mssql-python returns for rows 1 and 2. mssql-python builds Python datetime/time objects,
# which hold microseconds: ODBC hands it the fraction in nanoseconds (SQL_SS_TIME2_STRUCT,
# SQL_TIMESTAMP_STRUCT) and it drops the 7th digit (100 ns) by truncation — 23:59:59.9999999
# arrives as 23:59:59.999999, 00:00:00.0000001 as 00:00:00. That is the driver, not the server
# (JDBC below sees the 7th digit).
FRAC = {0: 0, 1: 100000, 2: 120000, 3: 123000, 4: 123500, 5: 123460, 6: 123457}  # .1234567 rounded to s digits
MINUS_0530 = tz(-330)
ODBC_HI: dict[str, Any] = {
    "b": True, "ti": 255, "si": 32767, "i": 2147483647, "bi": 9223372036854775807,
    "d": Decimal("9999999999999999999999999999.9999999999"), "n": Decimal("999.99"),
    "mo": Decimal("922337203685477.5807"), "smo": Decimal("214748.3647"),
    "r": 3.4028234663852886e+38,   # real's maximum, widened to a double exactly
    "f": 1.7976931348623157e+308,
    "c": "abc  ", "vc": "hello", "nc": "žž   ", "nvc": "Grüße 😀 𝄞", "vcm": "v" * 9000, "nvcm": "é😀" * 5000,
    "tx": "old text", "ntx": "ñtext 😀",
    "bin": b"\x01\x02" + bytes(8), "vbin": b"\xde\xad\xbe\xef", "vbinm": b"\x00\xff" * 5000,
    "dd": dt.date(9999, 12, 31),
    **{f"t{s}": us(12, 34, 56, FRAC[s]) for s in range(7)},
    "t7": us(23, 59, 59, 999999),
    "dtm": dt.datetime(9999, 12, 31, 23, 59, 59, 997000),
    **{f"d2{s}": dt.datetime(2024, 2, 29, 12, 34, 56, FRAC[s]) for s in range(7)},
    "d27": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
    "sdt": dt.datetime(2079, 6, 6, 23, 59),
    **{f"o{s}": dt.datetime(2024, 2, 29, 12, 34, 56, FRAC[s], tzinfo=MINUS_0530) for s in range(7)},
    "o7": dt.datetime(9999, 12, 31, 9, 59, 59, 999999, tzinfo=tz(-14 * 60)),
    "u": uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"), "x": '<r a="1"><x>ü</x></r>',
    "vi": 42, "vs": "text", "vd": Decimal("1.25"), "vdt": dt.datetime(2020, 1, 2, 3, 4, 5, 123000),
}
ODBC_LO: dict[str, Any] = {
    "b": False, "ti": 0, "si": -32768, "i": -2147483648, "bi": -9223372036854775808,
    "d": Decimal("-9999999999999999999999999999.9999999999"), "n": Decimal("-999.99"),
    "mo": Decimal("-922337203685477.5808"), "smo": Decimal("-214748.3648"),
    "r": -1.1754943508222875e-38, "f": -2.2250738585072014e-308,
    "c": "     ", "vc": "", "nc": "     ", "nvc": "", "vcm": "", "nvcm": "", "tx": "", "ntx": "",
    "bin": bytes(10), "vbin": b"", "vbinm": b"",
    "dd": dt.date(1, 1, 1),
    **{f"t{s}": us(0, 0, 0, 10 ** (6 - s) if s else 0) for s in range(7)},
    "t7": us(0, 0, 0),                                  # 100 ns: below what datetime.time holds
    "dtm": dt.datetime(1753, 1, 1),
    **{f"d2{s}": dt.datetime(1, 1, 1) for s in range(7)},
    "d27": dt.datetime(1, 1, 1),
    "sdt": dt.datetime(1900, 1, 1),
    "o0": dt.datetime(1, 1, 1, 14, 0, tzinfo=tz(14 * 60)),
    **{f"o{s}": dt.datetime(2000, 1, 1, 0, 0, 0, 10 ** (6 - s), tzinfo=tz(off))
       for s, off in ((1, 840), (2, -840), (3, 0), (4, 60), (5, -1), (6, 345))},
    "o7": dt.datetime(2000, 1, 1, tzinfo=tz(-(12 * 60 + 34))),
    "u": uuid.UUID(int=0), "x": "<e/>",
    "vi": -1, "vs": "x", "vd": b"\x0a\x0b", "vdt": dt.date(2020, 1, 2),
}


# ------------------------------------------------------------------------------------------------
# fixtures


class RpcSpy:
    """Records the RPCs each session receives (procedure name, parameter types): which of
    sp_executesql / sp_prepexec / sp_execute a driver really sent is only visible server-side."""

    def __init__(self, engine: Any) -> None:
        self.calls: list[tuple[int, str, list[str]]] = []
        original = engine.open_session

        def open_session(login: Any) -> Any:
            session = original(login)
            rpc = session.execute_rpc

            def execute_rpc(proc: str, params: list[Any]) -> Any:
                self.calls.append((session.spid, proc, [str(p.type) for p in params]))
                return rpc(proc, params)

            session.execute_rpc = execute_rpc
            return session

        engine.open_session = open_session


@pytest.fixture(scope="module")
def emulator() -> Iterator[Any]:
    pg = ThrowawayPostgres().start()
    try:
        with emulator_in_process(pg, capture_interval=0.1) as engine:
            engine.spy = RpcSpy(engine)
            yield engine
    finally:
        pg.stop()


def odbc(engine: Any, database: str = "master", *, password: str = PASSWORD, autocommit: bool = True) -> Any:
    host, port = engine.address
    conn = mssql_python.connect(f"Server={host},{port};UID=sa;PWD={{{password}}};Database={database};"
                                "Encrypt=no;TrustServerCertificate=yes;")
    conn.autocommit = autocommit
    return conn


def run(conn: Any, *batches: str) -> list[tuple]:
    """Each batch in turn; the rows of the last result set."""
    cur = conn.cursor()
    rows: list[tuple] = []
    for sql in batches:
        cur.execute(sql)
        if cur.description is not None:
            rows = [tuple(r) for r in cur.fetchall()]
    return rows


PARAMS_DDL = ("CREATE TABLE dbo.params (id int NOT NULL PRIMARY KEY, b bit, ti tinyint, si smallint, bi bigint, "
              "d decimal(20,6), r real, f float, nv nvarchar(50), lsn binary(10), vb varbinary(max), dd date, "
              "t7 time(7), dtm datetime, d27 datetime2(7), o7 datetimeoffset(7), u uniqueidentifier, "
              "nvm nvarchar(max))")
LSN_A = bytes.fromhex("0000002A000001F00003")
LSN_B = bytes.fromhex("0000002A000001F80001")
ODBC_PARAMS = (1, True, 200, -32768, -9223372036854775808, Decimal("-12345678901234.123456"), 1.5,
               -2.2250738585072014e-308, "Grüße 😀 𝄞", LSN_A, b"\x00\xff" * 5000, dt.date(2024, 2, 29),
               dt.time(23, 59, 59, 999999), dt.datetime(2024, 2, 29, 12, 34, 56, 123000),
               dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
               dt.datetime(2024, 2, 29, 12, 34, 56, 123456, tzinfo=MINUS_0530),
               uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF"), "x" * 5000)

META_DDL = [
    "CREATE TABLE dbo.meta (id int IDENTITY(1,1) NOT NULL, code nvarchar(10) NOT NULL, "
    "price decimal(9,2) NOT NULL CONSTRAINT df_price DEFAULT 3.5, qty smallint DEFAULT -7, note varchar(max) NULL, "
    "flag bit DEFAULT 1, created datetime2(3) DEFAULT '2020-02-29', t time(7), dto datetimeoffset(4), big bigint, "
    "money_ money, u uniqueidentifier, bin binary(10), x xml, nc nchar(3), ntx ntext, rv rowversion, "
    "dt datetime DEFAULT getdate(), d date, tiny tinyint, CONSTRAINT pk_meta PRIMARY KEY (id, code))",
    "CREATE UNIQUE INDEX ux_meta_big ON dbo.meta (big, qty)",
    "CREATE TABLE dbo.nopk (a int NOT NULL, b int)",
    "CREATE UNIQUE INDEX ux_nopk ON dbo.nopk (a)",
]


@pytest.fixture(scope="module")
def world(emulator: Any) -> Any:
    """Databases Clients (types, parameters), Meta (metadata) and Cdc (a captured table), all made
    through mssql-python with T-SQL literals."""
    conn = odbc(emulator)
    try:
        run(conn, "CREATE DATABASE Clients", "CREATE DATABASE Meta", "CREATE DATABASE Cdc",
            "USE Clients", _types_ddl(), _types_insert(1, 2), _types_insert(2, 3),
            "INSERT INTO dbo.all_types (id) VALUES (3)", PARAMS_DDL,
            "CREATE TABLE dbo.lsns (id int NOT NULL PRIMARY KEY, lsn binary(10) NOT NULL, seqval varbinary(10), "
            "op int, name nvarchar(20))",
            "USE Meta", *META_DDL,
            "USE Cdc", "CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, name nvarchar(20))",
            "EXEC sys.sp_cdc_enable_db",
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', @role_name = NULL",
            "INSERT INTO dbo.t VALUES (1, N'one')")
        cur = conn.cursor()
        cur.execute("USE Clients")
        cur.execute("INSERT INTO dbo.params VALUES (" + ", ".join("?" * len(ODBC_PARAMS)) + ")", ODBC_PARAMS)
    finally:
        conn.close()
    return emulator


# ------------------------------------------------------------------------------------------------
# the JDBC side: one probe script for everything that connects, one for the failed login

def _p(type_: str, value: Any) -> dict[str, Any]:
    return {"type": type_, "value": value}


JDBC_PARAMS = [_p("int", 2), _p("bit", False), _p("tinyint", 255), _p("smallint", 32767),
               _p("bigint", 9223372036854775807), _p("decimal", "99999999999999.999999"), _p("real", "-0.5"),
               _p("float", "1.7976931348623157E308"), _p("nstring", "𝄞 Grüße"), _p("bytes", LSN_B.hex()),
               _p("bytes", "ff" * 9000), _p("date", "2024-02-29"), _p("time", "23:59:59"),
               _p("timestamp", "2024-02-29 12:34:56.123"), _p("timestamp", "2024-02-29 12:34:56.1234567"),
               _p("datetimeoffset", "2024-02-29T12:34:56.1234567-05:30"),
               _p("uuid", "6F9619FF-8B86-D011-B42D-00C04FC964FF"), _p("null", None) | {"sql_type": "NVARCHAR"}]
TEMPORAL_GETTERS = {str(NAMES.index(n) + 1): g for n, g in (
    ("t7", "getObject:java.time.LocalTime"), ("d27", "getObject:java.time.LocalDateTime"),
    ("o7", "getObject:java.time.OffsetDateTime"), ("dd", "getObject:java.time.LocalDate"))}
INSERT_LSN = "INSERT INTO dbo.lsns (id, lsn, seqval, op, name) VALUES (?, ?, ?, ?, ?)"
SELECT_LSN = "SELECT id, lsn, seqval, name FROM dbo.lsns WHERE lsn = ? AND op >= ? ORDER BY id"
ALL_CHANGES_T = ("SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_t(0x00000000000000000000, sys.fn_cdc_get_max_lsn(), "
                 "N'all')")

JDBC_SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("types", {"op": "execute", "sql": "SELECT * FROM dbo.all_types ORDER BY id", "get": TEMPORAL_GETTERS}),
    ("prepare", {"op": "prepare", "id": "ins", "sql": INSERT_LSN}),
    *[(f"insert{k}", {"op": "run", "id": "ins", "params": [
        _p("int", k), _p("bytes", lsn.hex()), _p("bytes", lsn[:8].hex() + f"{k:04x}"), _p("int", k),
        _p("nstring", f"row {k} ✓")]}) for k, lsn in ((1, LSN_A), (2, LSN_A), (3, LSN_B), (4, LSN_A))],
    ("prepare_select", {"op": "prepare", "id": "sel", "sql": SELECT_LSN}),
    *[(f"select{k}", {"op": "run", "id": "sel", "params": [_p("bytes", LSN_A.hex()), _p("int", k)],
                      "get": {"2": "getBytes", "3": "getBytes"}}) for k in (1, 2, 4)],
    ("insert_params", {"op": "execute", "sql": "INSERT INTO dbo.params VALUES (" + ", ".join("?" * 18) + ")",
                       "params": JDBC_PARAMS}),
    ("params", {"op": "execute", "sql": "SELECT * FROM dbo.params ORDER BY id",
                "get": {"13": "getObject:java.time.LocalTime", "15": "getObject:java.time.LocalDateTime",
                        "16": "getObject:java.time.OffsetDateTime"}}),
    ("unknown_table", {"op": "execute", "sql": "SELECT * FROM nope"}),
    ("duplicate_key", {"op": "execute", "sql": "INSERT INTO dbo.params (id) VALUES (1)"}),
    ("use_cdc", {"op": "catalog", "value": "Cdc"}),
    ("lsn_out_of_range", {"op": "execute", "sql": ALL_CHANGES_T}),
    ("snapshot", {"op": "isolation", "value": "snapshot"}),
    ("snapshot_select", {"op": "execute", "sql": "SELECT * FROM dbo.t"}),
    ("read_committed", {"op": "isolation", "value": "read_committed"}),
    ("after_errors", {"op": "execute", "sql": "SELECT name FROM dbo.t"}),
    ("tables", {"op": "metadata", "method": "getTables", "args": ["Meta", "dbo", "%", ["TABLE"]]}),
    ("columns", {"op": "metadata", "method": "getColumns", "args": ["Meta", "dbo", "meta", None]}),
    ("pkeys", {"op": "metadata", "method": "getPrimaryKeys", "args": ["Meta", "dbo", "meta"]}),
    ("indexes", {"op": "metadata", "method": "getIndexInfo", "args": ["Meta", "dbo", "meta", False, True]}),
    ("nopk_pkeys", {"op": "metadata", "method": "getPrimaryKeys", "args": ["Meta", "dbo", "nopk"]}),
    ("nopk_indexes", {"op": "metadata", "method": "getIndexInfo", "args": ["Meta", "dbo", "nopk", True, True]}),
]


@pytest.fixture(scope="module")
def jdbc(world: Any) -> dict[str, Any]:
    """The probe's output lines by label (lists where a command printed several), plus "login" —
    the output of a connection attempt with a wrong password."""
    from emulators.sqlserver.jvm import ClasspathError, find_classpath, source_launcher_problem
    from emulators.sqlserver.jvm.classpath import JDBC_JARS
    from emulators.sqlserver.jvm.launch import run_jdbc_probe

    problem = source_launcher_problem()
    if problem:
        pytest.fail(problem)
    try:
        classpath = find_classpath(JDBC_JARS)
    except ClasspathError as e:
        pytest.fail(str(e))
    host, port = world.address
    server = f"{host}:{port}"
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        main = pool.submit(run_jdbc_probe, server, PASSWORD, [c for _, c in JDBC_SCRIPT],
                           url_properties="databaseName=Clients", classpath=classpath)
        login = pool.submit(run_jdbc_probe, server, "not-the-password", [{"op": "info"}], classpath=classpath)
        lines, login_lines = main.result(), login.result()
    assert lines[-1] == {"done": True}, lines[-3:]
    out: dict[str, Any] = {"login": login_lines}
    for line in lines[:-1]:
        label = JDBC_SCRIPT[line["i"]][0]
        out.setdefault(label, []).append(line)
    return out


def one(out: dict[str, Any], label: str, key: str) -> Any:
    lines = [line for line in out[label] if key in line]
    assert len(lines) == 1, out[label]
    return lines[0][key]


def rows_of(resultset: dict[str, Any], field: str = "string") -> list[list[Any]]:
    return [[cell[field] for cell in row] for row in resultset["rows"]]


# ------------------------------------------------------------------------------------------------
# every type, read with mssql-python


def test_odbc_reads_every_type_as_sql_server_returns_it(world: Any) -> None:
    conn = odbc(world, "Clients")
    try:
        cur = conn.cursor()
        cur.execute("SELECT * FROM dbo.all_types ORDER BY id")
        names = [d[0] for d in cur.description]
        rows = [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()
    assert names == NAMES
    assert [r[0] for r in rows] == [1, 2, 3]
    for row, expected in ((rows[0], ODBC_HI), (rows[1], ODBC_LO)):
        got = dict(zip(NAMES[1:-1], row[1:-1]))
        wrong = {k: (repr(got[k])[:80], repr(v)[:80]) for k, v in expected.items()
                 if got[k] != v or type(got[k]) is not type(v)}
        assert wrong == {}
    # offsets survive (== on aware datetimes compares instants only)
    assert [rows[0][NAMES.index(f"o{s}")].utcoffset() for s in range(8)] == \
        [dt.timedelta(minutes=-330)] * 7 + [dt.timedelta(hours=-14)]
    assert [rows[1][NAMES.index(f"o{s}")].utcoffset().total_seconds() / 60 for s in range(8)] == \
        [840, 840, -840, 0, 60, -1, 345, -754]
    assert str(rows[0][NAMES.index("d")]) == "9999999999999999999999999999.9999999999"
    assert str(rows[0][NAMES.index("mo")]) == "922337203685477.5807"  # money keeps its 4 decimals
    assert rows[2][1:-1] == (None,) * (len(NAMES) - 2)
    # rowversion: 8 bytes, never NULL, a new, larger value for each row written
    versions = [r[-1] for r in rows]
    assert all(isinstance(v, bytes) and len(v) == 8 for v in versions)
    assert versions == sorted(versions) and len(set(versions)) == 3


def test_odbc_result_metadata_names_python_types(world: Any) -> None:
    conn = odbc(world, "Clients")
    try:
        cur = conn.cursor()
        cur.execute("SELECT id, d, nvcm, t7, d27, o7, u, vi FROM dbo.all_types WHERE id = 1")
        description = [(d[0], d[1]) for d in cur.description]
        cur.fetchall()
    finally:
        conn.close()
    assert description == [("id", int), ("d", Decimal), ("nvcm", str), ("t7", dt.time), ("d27", dt.datetime),
                           ("o7", dt.datetime), ("u", uuid.UUID), ("vi", str)]


# ------------------------------------------------------------------------------------------------
# every type, read with mssql-jdbc

# column: (JDBC type name, getColumnTypeName, getColumnClassName, precision, scale)
JDBC_META: dict[str, tuple[str, str, str, int, int]] = {
    "id": ("INTEGER", "int", "java.lang.Integer", 10, 0),
    "b": ("BIT", "bit", "java.lang.Boolean", 1, 0),
    "ti": ("TINYINT", "tinyint", "java.lang.Short", 3, 0),
    "si": ("SMALLINT", "smallint", "java.lang.Short", 5, 0),
    "i": ("INTEGER", "int", "java.lang.Integer", 10, 0),
    "bi": ("BIGINT", "bigint", "java.lang.Long", 19, 0),
    "d": ("DECIMAL", "decimal", "java.math.BigDecimal", 38, 10),
    "n": ("NUMERIC", "numeric", "java.math.BigDecimal", 5, 2),
    "mo": ("DECIMAL", "money", "java.math.BigDecimal", 19, 4),
    "smo": ("DECIMAL", "smallmoney", "java.math.BigDecimal", 10, 4),
    "r": ("REAL", "real", "java.lang.Float", 7, 0),
    "f": ("DOUBLE", "float", "java.lang.Double", 15, 0),
    "c": ("CHAR", "char", "java.lang.String", 5, 0),
    "vc": ("VARCHAR", "varchar", "java.lang.String", 20, 0),
    "nc": ("NCHAR", "nchar", "java.lang.String", 5, 0),
    "nvc": ("NVARCHAR", "nvarchar", "java.lang.String", 20, 0),
    "vcm": ("VARCHAR", "varchar", "java.lang.String", 2147483647, 0),
    "nvcm": ("NVARCHAR", "nvarchar", "java.lang.String", 1073741823, 0),
    "tx": ("LONGVARCHAR", "text", "java.lang.String", 2147483647, 0),
    "ntx": ("LONGNVARCHAR", "ntext", "java.lang.String", 1073741823, 0),
    "bin": ("BINARY", "binary", "[B", 10, 0),
    "vbin": ("VARBINARY", "varbinary", "[B", 20, 0),
    "vbinm": ("VARBINARY", "varbinary", "[B", 2147483647, 0),
    "dd": ("DATE", "date", "java.sql.Date", 10, 0),
    **{f"t{s}": ("TIME", "time", "java.sql.Time", 9 + s if s else 8, s) for s in range(8)},
    "dtm": ("TIMESTAMP", "datetime", "java.sql.Timestamp", 23, 3),
    **{f"d2{s}": ("TIMESTAMP", "datetime2", "java.sql.Timestamp", 20 + s if s else 19, s) for s in range(8)},
    "sdt": ("TIMESTAMP", "smalldatetime", "java.sql.Timestamp", 16, 0),
    **{f"o{s}": ("DATETIMEOFFSET", "datetimeoffset", "microsoft.sql.DateTimeOffset", 27 + s if s else 26, s)
       for s in range(8)},
    "u": ("CHAR", "uniqueidentifier", "java.lang.String", 36, 0),
    "x": ("LONGNVARCHAR", "xml", "java.lang.String", 1073741823, 0),
    **{v: ("SQL_VARIANT", "sql_variant", "java.lang.Object", 0, 0) for v in ("vi", "vs", "vd", "vdt")},
    "rv": ("BINARY", "timestamp", "[B", 8, 0),
}

# getString of rows 1 and 2: the driver formats temporal values with the column's scale, so these
# show the full 100 ns value SQL Server stored (rounded to the scale)
HI_STR = {f"t{s}": "12:34:56" + (".1234567"[:s + 1] if s else "") for s in range(7)}
HI_STR.update({"t4": "12:34:56.1235", "t5": "12:34:56.12346", "t6": "12:34:56.123457"})
JDBC_HI: dict[str, str] = {
    "b": "1", "ti": "255", "si": "32767", "i": "2147483647", "bi": "9223372036854775807",
    "d": "9999999999999999999999999999.9999999999", "n": "999.99", "mo": "922337203685477.5807",
    "smo": "214748.3647", "r": "3.4028235E38", "f": "1.7976931348623157E308",
    "c": "abc  ", "vc": "hello", "nc": "žž   ", "nvc": "Grüße 😀 𝄞", "tx": "old text", "ntx": "ñtext 😀",
    "bin": "01020000000000000000", "vbin": "DEADBEEF", "dd": "9999-12-31",
    **HI_STR, "t7": "23:59:59.9999999",
    "dtm": "9999-12-31 23:59:59.997",
    **{f"d2{s}": "2024-02-29 " + HI_STR[f"t{s}"] for s in range(7)},
    "d27": "9999-12-31 23:59:59.9999999", "sdt": "2079-06-06 23:59:00.0",
    **{f"o{s}": "2024-02-29 " + HI_STR[f"t{s}"] + " -05:30" for s in range(7)},
    "o7": "9999-12-31 09:59:59.9999999 -14:00",
    "u": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "x": '<r a="1"><x>ü</x></r>',
    "vi": "42", "vs": "text", "vd": "1.25", "vdt": "2020-01-02 03:04:05.123",
}
JDBC_LO: dict[str, str] = {
    "b": "0", "ti": "0", "si": "-32768", "i": "-2147483648", "bi": "-9223372036854775808",
    "d": "-9999999999999999999999999999.9999999999", "n": "-999.99", "mo": "-922337203685477.5808",
    "smo": "-214748.3648", "r": "-1.17549435E-38", "f": "-2.2250738585072014E-308",
    "c": "     ", "vc": "", "nc": "     ", "nvc": "", "vcm": "", "nvcm": "", "tx": "", "ntx": "",
    "bin": "00000000000000000000", "vbin": "", "vbinm": "", "dd": "0001-01-01",
    **{f"t{s}": "00:00:00" + ("." + "0" * (s - 1) + "1" if s else "") for s in range(8)},
    "dtm": "1753-01-01 00:00:00.0",
    **{f"d2{s}": "0001-01-01 00:00:00" + ("." + "0" * s if s else "") for s in range(7)},
    "d27": "0001-01-01 00:00:00.0000001", "sdt": "1900-01-01 00:00:00.0",
    "o0": "0001-01-01 14:00:00 +14:00",
    **{f"o{s}": f"2000-01-01 00:00:00.{'0' * (s - 1)}1 {off}"
       for s, off in ((1, "+14:00"), (2, "-14:00"), (3, "+00:00"), (4, "+01:00"), (5, "-00:01"), (6, "+05:45"),
                      (7, "-12:34"))},
    "u": "00000000-0000-0000-0000-000000000000", "x": "<e/>",
    "vi": "-1", "vs": "x", "vdt": "2020-01-02",   # vd: getString of a varbinary variant is byte[].toString()
}


def test_jdbc_result_metadata_of_every_type(jdbc: dict[str, Any]) -> None:
    columns = one(jdbc, "types", "resultset")["columns"]
    assert [c["name"] for c in columns] == NAMES
    got = {c["name"]: (c["jdbc_type"], c["type_name"], c["class"], c["precision"], c["scale"]) for c in columns}
    assert {k: v for k, v in got.items() if JDBC_META[k] != v} == {}
    # (rv left out: whether a rowversion column declared without NULL/NOT NULL is nullable is not
    # settled from the documentation here)
    assert [c["nullable"] for c in columns][:-1] == [0] + [1] * (len(NAMES) - 2)


def test_jdbc_reads_every_type_exactly(jdbc: dict[str, Any]) -> None:
    rs = one(jdbc, "types", "resultset")
    hi, lo, nulls = (dict(zip(NAMES, row)) for row in rs["rows"])
    for row, expected in ((hi, JDBC_HI), (lo, JDBC_LO)):
        wrong = {k: (row[k]["string"][:60], v[:60]) for k, v in expected.items() if row[k]["string"] != v}
        assert wrong == {}
    # getObject's classes: what the driver makes of each TDS type
    classes = {k: hi[k]["class"] for k in NAMES}
    assert classes["ti"] == "java.lang.Short" and classes["u"] == "java.lang.String"
    assert classes["o7"] == "microsoft.sql.DateTimeOffset" and classes["dd"] == "java.sql.Date"
    assert {k: classes[k] for k in ("vi", "vs", "vd", "vdt")} == {
        "vi": "java.lang.Integer", "vs": "java.lang.String", "vd": "java.math.BigDecimal",
        "vdt": "java.sql.Timestamp"}
    assert {k: lo[k]["class"] for k in ("vi", "vs", "vd", "vdt")} == {
        "vi": "java.lang.Long", "vs": "java.lang.String", "vd": "[B", "vdt": "java.sql.Date"}
    assert lo["vd"]["object"] == {"hex": "0A0B"}
    # long values arrive whole (PLP chunks reassembled)
    assert hi["vcm"]["string"] == "v" * 9000 and hi["nvcm"]["string"] == "é😀" * 5000
    assert hi["vbinm"]["object"] == {"hex": "00FF" * 5000}
    # 100 ns exactly, through java.time and java.sql.Timestamp
    assert hi["t7"]["getObject:java.time.LocalTime"]["text"] == "23:59:59.999999900"
    assert lo["t7"]["getObject:java.time.LocalTime"]["text"] == "00:00:00.000000100"
    assert hi["d27"]["getObject:java.time.LocalDateTime"]["text"] == "9999-12-31T23:59:59.999999900"
    assert lo["d27"]["object"] == {"timestamp": "0001-01-01T00:00:00.000000100", "nanos": 100}
    assert hi["d26"]["object"] == {"timestamp": "2024-02-29T12:34:56.123457", "nanos": 123457000}
    assert hi["o7"]["getObject:java.time.OffsetDateTime"]["text"] == "9999-12-31T09:59:59.999999900-14:00"
    assert lo["o7"]["getObject:java.time.OffsetDateTime"]["text"] == "2000-01-01T00:00:00.000000100-12:34"
    assert hi["dd"]["getObject:java.time.LocalDate"]["text"] == "9999-12-31"
    assert hi["dtm"]["object"] == {"timestamp": "9999-12-31T23:59:59.997", "nanos": 997000000}
    assert all(nulls[k]["object"] is None and nulls[k]["string"] is None for k in NAMES[1:-1])
    assert re.fullmatch(r"[0-9A-F]{16}", nulls["rv"]["string"])


# ------------------------------------------------------------------------------------------------
# typed parameters


def test_odbc_parameters_round_trip_every_type(world: Any) -> None:
    conn = odbc(world, "Clients")
    try:
        cur = conn.cursor()
        cur.execute("SELECT * FROM dbo.params WHERE id = ?", (1,))
        row = tuple(cur.fetchone())
        # a binary(10) LSN as a parameter finds its row; nvarchar/decimal/date parameters compare exactly
        cur.execute("SELECT id FROM dbo.params WHERE lsn = ? AND nv = ? AND d = ? AND dd = ?",
                    (LSN_A, "Grüße 😀 𝄞", Decimal("-12345678901234.123456"), dt.date(2024, 2, 29)))
        found = [tuple(r) for r in cur.fetchall()]
        cur.execute("SELECT id FROM dbo.params WHERE lsn = ?", (LSN_B[:9],))
        none = cur.fetchall()
    finally:
        conn.close()
    assert row == ODBC_PARAMS
    assert row[15].utcoffset() == dt.timedelta(minutes=-330)
    assert found == [(1,)] and none == []
    # what went over the wire for the INSERT of the world fixture: ODBC prepares (sp_prepare, the
    # handle comes back as an OUT parameter) and executes with typed parameters (sp_execute)
    first = world.spy.calls[0]
    assert first[1] == "sp_prepare"
    execute = next(c for c in world.spy.calls if c[0] == first[0] and c[1] == "sp_execute")
    assert execute[2][0] == "int" and len(execute[2]) == 1 + len(ODBC_PARAMS)
    assert (execute[2][10], execute[2][11], execute[2][17]) == ("varbinary(10)", "varbinary(max)", "uniqueidentifier")


def test_jdbc_prepared_statement_goes_executesql_prepexec_execute(jdbc: dict[str, Any], world: Any) -> None:
    assert [one(jdbc, f"insert{k}", "update_count") for k in (1, 2, 3, 4)] == [1, 1, 1, 1]
    # the probe's session: the one whose first RPC carried setBytes parameters (varbinary(8000))
    spid = next(c[0] for c in world.spy.calls if "varbinary(8000)" in c[2])
    procs = [c[1] for c in world.spy.calls if c[0] == spid]
    # ins: 1st sp_executesql, 2nd sp_prepexec (handle back as RETURNVALUE after RETURNSTATUS),
    # 3rd and 4th sp_execute with that handle; then sel the same way
    assert procs[:7] == ["sp_executesql", "sp_prepexec", "sp_execute", "sp_execute",
                         "sp_executesql", "sp_prepexec", "sp_execute"]
    # setBytes → varbinary(8000); setInt → int; setNString → nvarchar(4000)
    first = next(c for c in world.spy.calls if c[1] == "sp_executesql" and any("binary" in t for t in c[2]))
    assert first[2][2:] == ["int", "varbinary(8000)", "varbinary(8000)", "int", "nvarchar(4000)"]
    # a binary(10) column compared with varbinary parameters: rows with lsn = LSN_A and op >= k
    lsn_a = LSN_A.hex().upper()
    results = {k: one(jdbc, f"select{k}", "resultset")["rows"] for k in (1, 2, 4)}
    assert {k: [(r[0]["string"], r[1]["getBytes"]["hex"], r[2]["getBytes"]["hex"], r[3]["string"]) for r in rows]
            for k, rows in results.items()} == {
        1: [("1", lsn_a, lsn_a[:16] + "0001", "row 1 ✓"), ("2", lsn_a, lsn_a[:16] + "0002", "row 2 ✓"),
            ("4", lsn_a, lsn_a[:16] + "0004", "row 4 ✓")],
        2: [("2", lsn_a, lsn_a[:16] + "0002", "row 2 ✓"), ("4", lsn_a, lsn_a[:16] + "0004", "row 4 ✓")],
        4: [("4", lsn_a, lsn_a[:16] + "0004", "row 4 ✓")]}
    columns = one(jdbc, "select1", "resultset")["columns"]
    assert [(c["type_name"], c["precision"]) for c in columns] == [("int", 10), ("binary", 10), ("varbinary", 10),
                                                                   ("nvarchar", 20)]


def test_jdbc_parameters_of_every_type_and_odbc_row_read_by_jdbc(jdbc: dict[str, Any], world: Any) -> None:
    assert one(jdbc, "insert_params", "update_count") == 1
    # the RPC parameter types as the TDS layer decoded them from mssql-jdbc's TYPE_INFOs: setTime
    # goes as datetime (sendTimeAsDatetime), setTimestamp as datetime2(7), a GUID and NULL as nvarchar
    insert = next(c for c in world.spy.calls if c[1] == "sp_executesql" and len(c[2]) == 20)
    assert insert[2] == ["nvarchar(4000)", "nvarchar(4000)", "int", "bit", "tinyint", "smallint", "bigint",
                         "decimal(38,6)", "real", "float", "nvarchar(4000)", "varbinary(8000)", "varbinary(max)",
                         "date", "datetime", "datetime2(7)", "datetime2(7)", "datetimeoffset(7)", "nvarchar(4000)",
                         "nvarchar(4000)"]
    rs = one(jdbc, "params", "resultset")
    names = [c["name"] for c in rs["columns"]]
    odbc_row, jdbc_row = (dict(zip(names, row)) for row in rs["rows"])
    # the row mssql-python inserted with parameters, read by JDBC: the same values
    assert {k: odbc_row[k]["string"] for k in names if k not in ("vb", "nvm")} == {
        "id": "1", "b": "1", "ti": "200", "si": "-32768", "bi": "-9223372036854775808",
        "d": "-12345678901234.123456", "r": "1.5", "f": "-2.2250738585072014E-308", "nv": "Grüße 😀 𝄞",
        "lsn": LSN_A.hex().upper(), "dd": "2024-02-29", "t7": "23:59:59.9999990",
        "dtm": "2024-02-29 12:34:56.123", "d27": "9999-12-31 23:59:59.9999990",
        "o7": "2024-02-29 12:34:56.1234560 -05:30", "u": "6F9619FF-8B86-D011-B42D-00C04FC964FF"}
    assert odbc_row["vb"]["string"] == "00FF" * 5000 and odbc_row["nvm"]["string"] == "x" * 5000
    # the row JDBC inserted: setTime's datetime gives time(7) its time of day, setTimestamp keeps
    # 100 ns in datetime2(7), and its .123 s stays .123 in datetime (1/300 s rounding)
    assert {k: jdbc_row[k]["string"] for k in names if k != "vb"} == {
        "id": "2", "b": "0", "ti": "255", "si": "32767", "bi": "9223372036854775807",
        "d": "99999999999999.999999", "r": "-0.5", "f": "1.7976931348623157E308", "nv": "𝄞 Grüße",
        "lsn": LSN_B.hex().upper(), "dd": "2024-02-29", "t7": "23:59:59.0000000",
        "dtm": "2024-02-29 12:34:56.123", "d27": "2024-02-29 12:34:56.1234567",
        "o7": "2024-02-29 12:34:56.1234567 -05:30", "u": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "nvm": None}
    assert jdbc_row["vb"]["string"] == "FF" * 9000
    assert jdbc_row["o7"]["getObject:java.time.OffsetDateTime"]["text"] == "2024-02-29T12:34:56.123456700-05:30"
    assert jdbc_row["d27"]["getObject:java.time.LocalDateTime"]["text"] == "2024-02-29T12:34:56.123456700"


# ------------------------------------------------------------------------------------------------
# errors


def test_wrong_password_gives_18456_through_both_drivers(world: Any, jdbc: dict[str, Any]) -> None:
    with pytest.raises(mssql_python.Error) as info:
        odbc(world, password="not-the-password")
    # ODBC turns 18456 into SQLSTATE 28000 ("Invalid authorization specification")
    assert "Invalid authorization specification" in str(info.value)
    assert info.value.ddbc_error.endswith("Login failed for user 'sa'.")
    login = jdbc["login"]
    assert len(login) == 1 and "connect" in login[0]
    assert (login[0]["error"]["error_code"], login[0]["error"]["sql_state"]) == (18456, "S0001")  # S000<state 1>
    # the driver appends its connection id to a login failure
    assert login[0]["error"]["message"].startswith("Login failed for user 'sa'. ClientConnectionId:")


def _odbc_error(engine: Any, database: str, *batches: str, reset: str = "") -> Any:
    conn = odbc(engine, database)
    try:
        cur = conn.cursor()
        with pytest.raises(mssql_python.Error) as info:
            for sql in batches:
                cur.execute(sql)
        # the connection stays usable after the error
        if reset:
            cur.execute(reset)
        cur.execute("SELECT 1")
        assert tuple(cur.fetchone()) == (1,)
    finally:
        conn.close()
    return info.value


def test_unknown_object_gives_208(world: Any, jdbc: dict[str, Any]) -> None:
    e = _odbc_error(world, "Clients", "SELECT * FROM nope")
    assert isinstance(e, mssql_python.ProgrammingError)
    assert "Base table or view not found" in e.driver_error   # SQLSTATE 42S02 = ODBC's name for 208
    assert e.ddbc_error.endswith("[SQL Server]Invalid object name 'nope'.")
    assert one(jdbc, "unknown_table", "error") | {"class": None} == {
        "class": None, "message": "Invalid object name 'nope'.", "sql_state": "S0002", "error_code": 208}


def test_out_of_range_lsn_gives_313(world: Any, jdbc: dict[str, Any]) -> None:
    text = ("An insufficient number of arguments were supplied for the procedure or function "
            "cdc.fn_cdc_get_all_changes_ ... .")
    e = _odbc_error(world, "Cdc", ALL_CHANGES_T)
    assert e.ddbc_error.endswith("[SQL Server]" + text)
    # mssql-jdbc's SQLState for errors it has no mapping for is "S000" + the error's state: 3
    assert one(jdbc, "lsn_out_of_range", "error") | {"class": None} == {
        "class": None, "message": text, "sql_state": "S0003", "error_code": 313}


def test_duplicate_key_gives_2627(world: Any, jdbc: dict[str, Any]) -> None:
    pattern = (r"Violation of PRIMARY KEY constraint 'PK__params__[0-9A-F]{16}'\. Cannot insert duplicate key in "
               r"object 'dbo\.params'\. The duplicate key value is \(1\)\.")
    e = _odbc_error(world, "Clients", "INSERT INTO dbo.params (id) VALUES (1)")
    assert isinstance(e, mssql_python.IntegrityError)   # SQLSTATE 23000
    assert re.search("\\[SQL Server\\]" + pattern + "$", e.ddbc_error), e.ddbc_error
    err = one(jdbc, "duplicate_key", "error")
    assert (err["error_code"], err["sql_state"]) == (2627, "23000")
    assert re.fullmatch(pattern, err["message"]), err["message"]


def test_snapshot_isolation_refused_with_3952(world: Any, jdbc: dict[str, Any]) -> None:
    text = ("Snapshot isolation transaction failed accessing database 'Cdc' because snapshot isolation is not "
            "allowed in this database. Use ALTER DATABASE to allow snapshot isolation.")
    e = _odbc_error(world, "Cdc", "SET TRANSACTION ISOLATION LEVEL SNAPSHOT", "SELECT * FROM dbo.t",
                    reset="SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
    assert e.ddbc_error.endswith("[SQL Server]" + text)
    assert one(jdbc, "snapshot", "ok") is True          # SET itself succeeds; the first read fails
    assert one(jdbc, "snapshot_select", "error") | {"class": None} == {
        "class": None, "message": text, "sql_state": "S0001", "error_code": 3952}
    # back at read committed the same connection reads again
    assert rows_of(one(jdbc, "after_errors", "resultset")) == [["one"]]


# ------------------------------------------------------------------------------------------------
# DatabaseMetaData (sp_tables, sp_columns_100, sp_pkeys, sp_statistics_100 behind the driver)


def test_jdbc_get_tables(jdbc: dict[str, Any]) -> None:
    rs = one(jdbc, "tables", "resultset")
    assert [c["name"] for c in rs["columns"]] == ["TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "TABLE_TYPE", "REMARKS"]
    assert rows_of(rs) == [["Meta", "dbo", "meta", "TABLE", None], ["Meta", "dbo", "nopk", "TABLE", None]]


# column: TYPE_NAME, COLUMN_SIZE, DECIMAL_DIGITS, NULLABLE, COLUMN_DEF, IS_AUTOINCREMENT, DATA_TYPE
# as sp_columns_100 reports them (ODBC 3) after mssql-jdbc's fix-ups (DATA_TYPE -154 → 92 TIME,
# -11 → 1 CHAR for uniqueidentifier, -8 → -15 NCHAR, -10 → -16 LONGNVARCHAR, -152 → -16 xml;
# COLUMN_SIZE 0 → 2147483647 for the (max) types)
META_COLUMNS: dict[str, tuple[Any, ...]] = {
    "id": ("int identity", "10", "0", "0", None, "YES", "4"),
    "code": ("nvarchar", "10", None, "0", None, "NO", "-9"),
    "price": ("decimal", "9", "2", "0", "((3.5))", "NO", "3"),
    "qty": ("smallint", "5", "0", "1", "((-7))", "NO", "5"),
    "note": ("varchar", "2147483647", None, "1", None, "NO", "12"),
    "flag": ("bit", "1", "0", "1", "((1))", "NO", "-7"),
    "created": ("datetime2", "23", "3", "1", "('2020-02-29')", "NO", "93"),
    "t": ("time", "16", "7", "1", None, "NO", "92"),
    "dto": ("datetimeoffset", "31", "4", "1", None, "NO", "-155"),
    "big": ("bigint", "19", "0", "1", None, "NO", "-5"),
    "money_": ("money", "19", "4", "1", None, "NO", "3"),
    "u": ("uniqueidentifier", "36", None, "1", None, "NO", "1"),
    "bin": ("binary", "10", None, "1", None, "NO", "-2"),
    "x": ("xml", "2147483647", None, "1", None, "NO", "-16"),
    "nc": ("nchar", "3", None, "1", None, "NO", "-15"),
    "ntx": ("ntext", "1073741823", None, "1", None, "NO", "-16"),
    "rv": ("timestamp", "8", None, None, None, "NO", "-2"),  # NULLABLE not compared: unsettled for rowversion
    "dt": ("datetime", "23", "3", "1", "(getdate())", "NO", "93"),
    "d": ("date", "10", None, "1", None, "NO", "91"),
    "tiny": ("tinyint", "3", "0", "1", None, "NO", "-6"),
}


def test_jdbc_get_columns(jdbc: dict[str, Any]) -> None:
    rs = one(jdbc, "columns", "resultset")
    header = [c["name"] for c in rs["columns"]]
    assert header[:18] == ["TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE", "TYPE_NAME",
                           "COLUMN_SIZE", "BUFFER_LENGTH", "DECIMAL_DIGITS", "NUM_PREC_RADIX", "NULLABLE",
                           "REMARKS", "COLUMN_DEF", "SQL_DATA_TYPE", "SQL_DATETIME_SUB", "CHAR_OCTET_LENGTH",
                           "ORDINAL_POSITION", "IS_NULLABLE"]
    assert header[22:24] == ["IS_AUTOINCREMENT", "IS_GENERATEDCOLUMN"]
    rows = [dict(zip(header, r)) for r in rows_of(rs)]
    assert [r["COLUMN_NAME"] for r in rows] == list(META_COLUMNS)
    assert [r["ORDINAL_POSITION"] for r in rows] == [str(k) for k in range(1, len(META_COLUMNS) + 1)]
    assert {(r["TABLE_CAT"], r["TABLE_SCHEM"], r["TABLE_NAME"]) for r in rows} == {("Meta", "dbo", "meta")}
    got = {r["COLUMN_NAME"]: (r["TYPE_NAME"], r["COLUMN_SIZE"], r["DECIMAL_DIGITS"],
                              None if r["COLUMN_NAME"] == "rv" else r["NULLABLE"],
                              r["COLUMN_DEF"], r["IS_AUTOINCREMENT"], r["DATA_TYPE"]) for r in rows}
    assert {k: v for k, v in got.items() if META_COLUMNS[k] != v} == {}
    assert [r["IS_NULLABLE"] for r in rows][:4] == ["NO", "NO", "NO", "YES"]
    assert {r["IS_GENERATEDCOLUMN"] for r in rows} == {"NO"}
    # BUFFER_LENGTH (sp_columns LENGTH): bytes — 2 per nchar, precision + 2 for decimal
    lengths = {r["COLUMN_NAME"]: r["BUFFER_LENGTH"] for r in rows}
    assert (lengths["id"], lengths["code"], lengths["price"], lengths["nc"], lengths["u"], lengths["money_"]) == \
        ("4", "20", "11", "6", "16", "21")


def test_jdbc_get_primary_keys_and_index_info(jdbc: dict[str, Any]) -> None:
    pk = one(jdbc, "pkeys", "resultset")
    assert [c["name"] for c in pk["columns"]] == ["TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME",
                                                  "KEY_SEQ", "PK_NAME"]
    assert rows_of(pk) == [["Meta", "dbo", "meta", "id", "1", "pk_meta"],
                           ["Meta", "dbo", "meta", "code", "2", "pk_meta"]]
    assert rows_of(one(jdbc, "nopk_pkeys", "resultset")) == []
    ix = one(jdbc, "indexes", "resultset")
    header = [c["name"] for c in ix["columns"]]
    assert header == ["TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "NON_UNIQUE", "INDEX_QUALIFIER", "INDEX_NAME",
                      "TYPE", "ORDINAL_POSITION", "COLUMN_NAME", "ASC_OR_DESC", "CARDINALITY", "PAGES",
                      "FILTER_CONDITION"]
    # first the table statistic row (TYPE 0 = SQL_TABLE_STAT), then per index and key column:
    # the clustered primary key (TYPE 1), the nonclustered unique index (TYPE 3 = SQL_INDEX_OTHER)
    picked = [r[3:10] for r in rows_of(ix)]
    assert picked == [[None, None, None, "0", None, None, None],
                      ["0", "meta", "pk_meta", "1", "1", "id", "A"],
                      ["0", "meta", "pk_meta", "1", "2", "code", "A"],
                      ["0", "meta", "ux_meta_big", "3", "1", "big", "A"],
                      ["0", "meta", "ux_meta_big", "3", "2", "qty", "A"]]
    assert [r[3:10] for r in rows_of(one(jdbc, "nopk_indexes", "resultset"))] == [
        [None, None, None, "0", None, None, None], ["0", "nopk", "ux_nopk", "3", "1", "a", "A"]]


# ------------------------------------------------------------------------------------------------
# interleaved transactions on a captured table


def test_interleaved_transactions_reach_the_change_table_in_commit_order(world: Any) -> None:
    setup = odbc(world, "Cdc")
    try:
        run(setup, "CREATE TABLE dbo.ledger (id int NOT NULL PRIMARY KEY, amount int, who nvarchar(10))",
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'ledger', @role_name = NULL",
            "INSERT INTO dbo.ledger VALUES (10, 100, N'setup'), (20, 200, N'setup')")
        conns = {name: odbc(world, "Cdc", autocommit=False) for name in "ABC"}
        try:
            a, b, c = (conns[n].cursor() for n in "ABC")
            a.execute("INSERT INTO dbo.ledger VALUES (1, 1, N'A')")      # A starts first...
            b.execute("INSERT INTO dbo.ledger VALUES (2, 2, N'B')")
            c.execute("UPDATE dbo.ledger SET amount = 201, who = N'C' WHERE id = 20")
            a.execute("UPDATE dbo.ledger SET amount = 101, who = N'A' WHERE id = 10")
            b.execute("DELETE FROM dbo.ledger WHERE id = 2")
            c.execute("INSERT INTO dbo.ledger VALUES (3, 3, N'C')")
            conns["B"].commit()                                          # ...but commits last but one
            conns["C"].commit()
            a.execute("INSERT INTO dbo.ledger VALUES (4, 4, N'A')")
            conns["A"].commit()
        finally:
            for conn in conns.values():
                conn.close()

        def changes() -> list[tuple]:
            try:
                rows = run(setup, "DECLARE @from binary(10) = sys.fn_cdc_get_min_lsn('dbo_ledger'); "
                                  "DECLARE @to binary(10) = sys.fn_cdc_get_max_lsn(); "
                                  "SELECT __$start_lsn, __$seqval, __$operation, id, amount, who FROM "
                                  "cdc.fn_cdc_get_all_changes_dbo_ledger(@from, @to, N'all update old')")
            except mssql_python.ProgrammingError as e:   # 313 while the capture job has not reached @from yet
                assert "cdc.fn_cdc_get_all_changes_ ... ." in str(e)
                return []
            return rows if len(rows) == 11 else []

        rows = wait_for(changes, "11 change rows of dbo_ledger")
        order = run(setup, "SELECT __$start_lsn, __$seqval, __$operation FROM cdc.dbo_ledger_CT "
                           "ORDER BY __$start_lsn, __$seqval, __$operation")
    finally:
        setup.close()
    data = [(op, id_, amount, who) for _, _, op, id_, amount, who in rows]
    assert data == [
        (2, 10, 100, "setup"), (2, 20, 200, "setup"),                  # the setup insert
        (2, 2, 2, "B"), (1, 2, 2, "B"),                                # B committed first
        (3, 20, 200, "setup"), (4, 20, 201, "C"), (2, 3, 3, "C"),      # then C
        (2, 1, 1, "A"), (3, 10, 100, "setup"), (4, 10, 101, "A"), (2, 4, 4, "A")]  # A last
    starts = [r[0] for r in rows]
    groups = [starts[0:2], starts[2:4], starts[4:7], starts[7:11]]
    assert all(len(set(g)) == 1 for g in groups)                       # one commit LSN per transaction
    assert [g[0] for g in groups] == sorted({*starts}) and len({*starts}) == 4
    assert all(isinstance(s, bytes) and len(s) == 10 for s in starts)
    seqvals = [r[1] for r in rows]
    assert seqvals[4] == seqvals[5] and seqvals[8] == seqvals[9]      # an update's two rows share a seqval
    for g in ((0, 2), (2, 4), (4, 7), (7, 11)):
        assert seqvals[g[0]:g[1]] == sorted(seqvals[g[0]:g[1]])       # statement order inside a transaction
    assert [tuple(r) for r in order] == [r[:3] for r in rows]         # the function returns the table's order

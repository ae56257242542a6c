"""The scripted engine the TDS tests talk to (no tests here): it implements the Engine API of
DESIGN.md by answering fixed SQL texts with prepared results and echoing RPC parameters back as a
one-row result set, so that the wire layer can be tested before (and independently of) the real
SQL engine."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest

from emulators.sqlserver.results import (
    Column,
    EnvChange,
    LoginInfo,
    Message,
    Result,
    ResultSet,
    ReturnStatus,
    ReturnValue,
    RowCount,
    RpcParam,
    SqlServerError,
)
from emulators.sqlserver.sqltypes import SqlType
from emulators.sqlserver.tds import TdsServer
from emulators.sqlserver.values import DateTime2, DateTimeOffset, Time, Variant

PASSWORD = "Str0ng!Pass;word"

# ------------------------------------------------------------------------------------------------
# the scripted engine


def T(spec: str) -> SqlType:
    return SqlType.parse(spec)


# (type, value the engine yields, what python-tds returns, what mssql-python returns)
LONG_ASCII = "".join(chr(32 + i % 90) for i in range(20_000))
LONG_UNICODE = ("Grüße 😀 𝄞 " * 1500)[:15_000]
LONG_BYTES = bytes(i % 251 for i in range(50_000))
GUID = uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")
DT2 = DateTime2(dt.date(2024, 2, 29), Time(((13 * 60 + 45) * 60 + 30) * 10_000_000 + 1_234_567))
DTO_PLUS = DateTimeOffset(DateTime2(dt.date(2024, 1, 1), Time(((20 * 60 + 15) * 60) * 10_000_000 + 9_999_999)), 330)
DTO_MINUS = DateTimeOffset(DateTime2(dt.date(2000, 1, 1), Time(3 * 3600 * 10_000_000 + 5)), -480)
TZ_PLUS = dt.timezone(dt.timedelta(minutes=330))
TZ_MINUS = dt.timezone(dt.timedelta(minutes=-480))
SAME = object()  # the driver returns the engine's value unchanged

TYPE_CASES: list[tuple[str, Any, Any, Any]] = [
    ("bit", True, True, True),
    ("bit", False, False, False),
    ("tinyint", 255, 255, 255),
    ("smallint", -32768, -32768, -32768),
    ("int", -2147483648, -2147483648, -2147483648),
    ("bigint", 9223372036854775807, 9223372036854775807, 9223372036854775807),
    ("decimal(38,0)", Decimal("99999999999999999999999999999999999999"), SAME, SAME),
    ("decimal(38,0)", Decimal("-99999999999999999999999999999999999999"), SAME, SAME),
    ("decimal(38,38)", Decimal("0.99999999999999999999999999999999999999"), SAME, SAME),
    ("numeric(38,10)", Decimal("-1234567890123456789012345678.0123456789"), SAME, SAME),
    # python-tds divides by 10**scale and so drops trailing zeros; the wire carries the scale
    ("decimal(10,2)", Decimal("-12345678.90"), Decimal("-12345678.9"), SAME),
    ("decimal(5,5)", Decimal("0.00001"), SAME, SAME),
    ("money", Decimal("922337203685477.5807"), SAME, SAME),
    ("money", Decimal("-922337203685477.5808"), SAME, SAME),
    ("smallmoney", Decimal("-214748.3648"), SAME, SAME),
    ("real", 1.5, 1.5, 1.5),
    ("float", 1.7976931348623157e308, SAME, SAME),
    ("float", -2.2250738585072014e-308, SAME, SAME),
    ("char(5)", "ab", "ab   ", "ab   "),
    ("varchar(10)", "héllo", SAME, SAME),
    ("nchar(3)", "ü", "ü  ", "ü  "),
    ("nvarchar(20)", "𝄞 😀 ∑ ü", SAME, SAME),
    ("varchar(max)", LONG_ASCII, SAME, SAME),
    ("nvarchar(max)", LONG_UNICODE, SAME, SAME),
    ("text", "some text é", SAME, SAME),
    ("ntext", "ntext 😀", SAME, SAME),
    ("image", b"\x00\x01\xff", SAME, SAME),
    ("binary(10)", b"\x00\x00\x00\x25\x00\x00\x01\x10\x00\x03", SAME, SAME),
    ("binary(4)", b"\x01", b"\x01\x00\x00\x00", b"\x01\x00\x00\x00"),
    ("varbinary(20)", b"\xde\xad\xbe\xef", SAME, SAME),
    ("varbinary(max)", LONG_BYTES, SAME, SAME),
    ("timestamp", b"\x00\x00\x00\x00\x00\x00\x07\xd1", SAME, SAME),
    ("date", dt.date(1, 1, 1), SAME, SAME),
    ("date", dt.date(9999, 12, 31), SAME, SAME),
    ("time(7)", Time(((23 * 60 + 59) * 60 + 59) * 10_000_000 + 9_999_999), dt.time(23, 59, 59, 999999),
     dt.time(23, 59, 59, 999999)),
    ("time(0)", Time(3600 * 10_000_000), dt.time(1), dt.time(1)),
    ("datetime2(7)", DT2, dt.datetime(2024, 2, 29, 13, 45, 30, 123456), dt.datetime(2024, 2, 29, 13, 45, 30, 123456)),
    ("datetime2(3)", DateTime2(dt.date(1, 1, 1), Time(1_230_000)), dt.datetime(1, 1, 1, 0, 0, 0, 123000),
     dt.datetime(1, 1, 1, 0, 0, 0, 123000)),
    ("datetime2(0)", DateTime2(dt.date(9999, 12, 31), Time(86_399 * 10_000_000)), dt.datetime(9999, 12, 31, 23, 59, 59),
     dt.datetime(9999, 12, 31, 23, 59, 59)),
    ("datetimeoffset(7)", DTO_PLUS, dt.datetime(2024, 1, 2, 1, 45, 0, 999999, TZ_PLUS),
     dt.datetime(2024, 1, 2, 1, 45, 0, 999999, TZ_PLUS)),
    ("datetimeoffset(7)", DTO_MINUS, dt.datetime(1999, 12, 31, 19, 0, 0, 0, TZ_MINUS),
     dt.datetime(1999, 12, 31, 19, 0, 0, 0, TZ_MINUS)),
    ("datetime", dt.datetime(2024, 2, 29, 23, 59, 59, 997000), SAME, SAME),
    ("datetime", dt.datetime(1753, 1, 1, 0, 0, 0, 3000), SAME, SAME),
    ("smalldatetime", dt.datetime(2079, 6, 6, 23, 59), SAME, SAME),
    ("uniqueidentifier", GUID, SAME, SAME),
    ("xml", "<a b=\"1\">ü 😀</a>", SAME, SAME),
    ("sql_variant", Variant(42, T("int")), 42, 42),
    ("sql_variant", Variant("abc", T("nvarchar(10)")), "abc", "abc"),
    ("sql_variant", Variant(Decimal("-1.50"), T("decimal(5,2)")), Decimal("-1.5"), Decimal("-1.50")),
    ("sql_variant", Variant(dt.date(2020, 5, 17), T("date")), dt.date(2020, 5, 17), dt.date(2020, 5, 17)),
    ("sql_variant", Variant(b"\x01\x02", T("varbinary(8)")), b"\x01\x02", b"\x01\x02"),
]


def _generated_rows(n: int, width: int = 5) -> Iterator[tuple[Any, ...]]:
    text = "row value text"
    for i in range(n):
        yield (i, i * 10, f"name {i}", Decimal(i).scaleb(-2), text)[:width]


WIDE_COLUMNS = [Column("id", T("int"), nullable=False), Column("big", T("bigint")), Column("name", T("nvarchar(50)")),
                Column("amount", T("decimal(12,2)")), Column("note", T("varchar(100)"))]


class ScriptedSession:
    def __init__(self, engine: ScriptedEngine, login: LoginInfo) -> None:
        self.engine = engine
        self.spid = 51 + len(engine.sessions)
        self.database = login.database or "master"
        self.transaction_descriptor = b"\0" * 8
        self.cancelled = threading.Event()
        self.batches: list[str] = []
        self.rpcs: list[tuple[str, list[RpcParam]]] = []
        self.resets = 0
        self.closed = False

    # the batches this script knows; anything else is error 2812-like "not scripted"
    def execute_batch(self, sql: str) -> Iterator[Result]:
        self.batches.append(sql)
        key = sql.strip()
        if key.upper().startswith("BEGIN TRANSACTION"):
            return self._begin()
        if key.upper().startswith(("COMMIT TRANSACTION", "ROLLBACK TRANSACTION")):
            return self._end(key.split()[0].lower())
        if key.upper().startswith("SET TRANSACTION ISOLATION LEVEL"):
            return iter(())
        handler = self.engine.batches.get(key)
        if handler is None:
            raise SqlServerError(2812, f"not scripted: {key[:100]}", severity=16)
        return handler(self)

    def _begin(self) -> Iterator[Result]:
        self.engine.tx_counter += 1
        self.transaction_descriptor = self.engine.tx_counter.to_bytes(8, "little")
        yield EnvChange("begin_transaction", self.transaction_descriptor)

    def _end(self, verb: str) -> Iterator[Result]:
        old, self.transaction_descriptor = self.transaction_descriptor, b"\0" * 8
        if any(old):
            yield EnvChange(f"{verb}_transaction", b"", old)

    def execute_rpc(self, proc: str, params: list[RpcParam]) -> Iterator[Result]:
        self.rpcs.append((proc, params))
        self.engine.rpc_log.append((proc, params))
        if proc == "sp_executesql":
            echoed = params[2:]
        elif proc == "sp_prepexec":
            echoed = params[3:]
        elif proc == "sp_execute":
            echoed = params[1:]
        elif proc in ("sp_prepare", "sp_unprepare"):
            echoed = None  # no result set
        elif proc == "sp_custom":
            echoed = params
        else:
            raise SqlServerError(2812, f"Could not find stored procedure '{proc}'.", severity=16, state=62)
        if echoed is not None:
            yield ResultSet([Column(p.name.lstrip("@") or f"p{i}", p.type) for i, p in enumerate(echoed)],
                            [tuple(p.value for p in echoed)])
        # as SQL Server orders them: the return status, then the OUTPUT parameters
        yield ReturnStatus(0)
        if proc in ("sp_prepexec", "sp_prepare"):
            yield ReturnValue(params[0].name, 0, T("int"), 1)

    def cancel(self) -> None:
        self.cancelled.set()

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        self.closed = True


class ScriptedEngine:
    def __init__(self) -> None:
        self.sessions: list[ScriptedSession] = []
        self.logins: list[LoginInfo] = []
        self.rpc_log: list[tuple[str, list[RpcParam]]] = []
        self.tx_counter = 0
        self.batches: dict[str, Callable[[ScriptedSession], Iterator[Result]]] = {}

    def authenticate(self, login: LoginInfo) -> None:
        self.logins.append(login)
        if login.user != "sa" or login.password != PASSWORD:
            raise SqlServerError(18456, f"Login failed for user '{login.user}'.", severity=14, state=1)

    def session(self, spid: int) -> ScriptedSession:
        return next(s for s in self.sessions if s.spid == spid)

    def open_session(self, login: LoginInfo) -> ScriptedSession:
        session = ScriptedSession(self, login)
        self.sessions.append(session)
        return session

    def script(self, sql: str) -> Callable[[Callable[[ScriptedSession], Iterator[Result]]], Any]:
        def register(fn: Callable[[ScriptedSession], Iterator[Result]]) -> Any:
            self.batches[sql] = fn
            return fn
        return register


def build_engine() -> ScriptedEngine:
    engine = ScriptedEngine()

    @engine.script("SELECT types")
    def _types(s: ScriptedSession) -> Iterator[Result]:
        columns = [Column(f"c{i}", T(spec)) for i, (spec, *_rest) in enumerate(TYPE_CASES)]
        values = tuple(case[1] for case in TYPE_CASES)
        # row 2: all NULL (sent as NBCROW); row 3: one NULL among values (ROW: the bitmap would not pay)
        yield ResultSet(columns, [values, tuple(None for _ in TYPE_CASES), (None, *values[1:])])

    @engine.script("SELECT two")
    def _two(s: ScriptedSession) -> Iterator[Result]:
        yield ResultSet([Column("a", T("int"))], [(1,), (2,)])
        yield Message(0, "between the result sets", 0)
        yield RowCount(3)
        yield ResultSet([Column("b", T("nvarchar(10)")), Column("c", T("bit"))], [("x", True)])

    @engine.script("UPDATE t")
    def _update(s: ScriptedSession) -> Iterator[Result]:
        yield RowCount(7)

    @engine.script("PRINT")
    def _print(s: ScriptedSession) -> Iterator[Result]:
        yield Message(50001, "a message from PRINT", 0, 1)
        yield ResultSet([Column("x", T("int"))], [(1,)])

    @engine.script("SELECT fail")
    def _fail(s: ScriptedSession) -> Iterator[Result]:
        yield ResultSet([Column("a", T("int"))], [(1,)])
        raise SqlServerError(8134, "Divide by zero error encountered.", severity=16, state=1)

    @engine.script("SELECT soft error")
    def _soft(s: ScriptedSession) -> Iterator[Result]:
        yield Message(2627, "Violation of PRIMARY KEY constraint 'pk'.", 14, 1)
        yield ResultSet([Column("after", T("int"))], [(5,)])

    @engine.script("SELECT big")
    def _big(s: ScriptedSession) -> Iterator[Result]:
        yield ResultSet(WIDE_COLUMNS, _generated_rows(100_000))

    @engine.script("SELECT forever")
    def _forever(s: ScriptedSession) -> Iterator[Result]:
        def rows() -> Iterator[tuple[Any, ...]]:
            i = 0
            while not s.cancelled.is_set():
                i += 1
                yield (i, "x" * 200)
        yield ResultSet([Column("i", T("int")), Column("pad", T("varchar(200)"))], rows())

    @engine.script("SELECT @@SPID")
    def _spid(s: ScriptedSession) -> Iterator[Result]:
        yield ResultSet([Column("", T("smallint"))], [(s.spid,)])

    @engine.script("SELECT 1")
    def _one(s: ScriptedSession) -> Iterator[Result]:
        yield ResultSet([Column("", T("int"))], [(1,)])

    return engine


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ScriptedEngine, str, int]]:
    engine = build_engine()
    server = TdsServer(engine)
    host, port = server.start()
    yield engine, host, port
    server.stop()


def pytds_connect(served: tuple[ScriptedEngine, str, int], **kwargs: Any) -> Any:
    import pytds
    _engine, host, port = served
    options: dict[str, Any] = {"user": "sa", "password": PASSWORD, "database": "master", "autocommit": True,
                               "login_timeout": 5, "timeout": 20}
    options.update(kwargs)
    return pytds.connect(dsn=host, port=port, **options)


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def odbc_connect(served: tuple[ScriptedEngine, str, int], extra: str = "", password: str = PASSWORD) -> Any:
    import mssql_python
    _engine, host, port = served
    conn = mssql_python.connect(f"Server={host},{port};UID=sa;PWD={{{password}}};Database=master;Encrypt=no;"
                                f"TrustServerCertificate=yes;{extra}")
    conn.autocommit = True
    return conn


def expected_value(case: tuple[str, Any, Any, Any], driver: int) -> Any:
    value = case[driver]
    return case[1] if value is SAME else value



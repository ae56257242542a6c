"""The TDS layer against real Python drivers (python-tds and mssql-python/ODBC 18) over real
sockets, with the scripted engine of test_tds_scripted.py standing in for the SQL layer."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import mssql_python
import pytds
import pytest
from test_tds_scripted import (
    LONG_BYTES,
    PASSWORD,
    SAME,
    TYPE_CASES,
    ScriptedEngine,
    eventually,
    expected_value,
    odbc_connect,
    pytds_connect,
    served,
)

from emulators.sqlserver.values import DateTime2, Time

__all__ = ["served"]  # the fixture, imported


def _same(actual: Any, expected: Any) -> bool:
    """Equal, of the same class, and for Decimal and aware datetimes also in scale and offset."""
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, Decimal):
        return str(actual) == str(expected)
    if isinstance(expected, dt.datetime) and expected.tzinfo is not None:
        return actual == expected and actual.utcoffset() == expected.utcoffset()
    return bool(actual == expected)


# ------------------------------------------------------------------------------------------------
# connecting


def test_pytds_login_reaches_the_engine(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    with pytds_connect(served, appname="probe-app") as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchall() == [(1,)]
    login = engine.logins[-1]
    assert (login.user, login.password, login.database, login.app_name) == ("sa", PASSWORD, "master", "probe-app")
    assert login.packet_size == 4096
    assert eventually(lambda: engine.sessions[-1].closed)


def test_odbc_login_reaches_the_engine(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("SELECT 1")
        assert [tuple(r) for r in cur.fetchall()] == [(1,)]
    finally:
        conn.close()
    login = engine.logins[-1]
    assert (login.user, login.password, login.database) == ("sa", PASSWORD, "master")
    assert login.app_name == "MSSQL-Python"
    assert login.options["client_interface"] == "ODBC"


def test_wrong_password_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytest.raises(pytds.Error) as info:
        pytds_connect(served, password="wrong")
    assert "Login failed for user 'sa'." in str(info.value)
    assert (info.value.number, info.value.severity, info.value.state) == (18456, 14, 1)


def test_wrong_password_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytest.raises(mssql_python.Error) as info:
        odbc_connect(served, password="wrong")
    text = str(info.value)
    assert "Login failed for user 'sa'." in text
    assert "Invalid authorization specification" in text  # SQLSTATE 28000, what ODBC makes of 18456


# ------------------------------------------------------------------------------------------------
# values of every type, both drivers


@pytest.mark.parametrize("driver", ["pytds", "odbc"])
def test_every_type_reads_back(served: tuple[ScriptedEngine, str, int], driver: str) -> None:
    if driver == "pytds":
        conn = pytds_connect(served)
    else:
        conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("SELECT types")
        rows = [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()
    assert len(rows) == 3
    assert rows[2] == (None, *rows[0][1:])
    column = 2 if driver == "pytds" else 3
    wrong = [(case[0], repr(rows[0][i])[:120]) for i, case in enumerate(TYPE_CASES)
             if not _same(rows[0][i], expected_value(case, column))]
    assert wrong == []
    assert rows[1] == tuple(None for _ in TYPE_CASES)  # NULL of every type


def test_result_metadata_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytds_connect(served) as conn, conn.cursor() as cur:
        cur.execute("SELECT types")
        names = [d[0] for d in cur.description]
        cur.fetchall()
    assert names == [f"c{i}" for i in range(len(TYPE_CASES))]


# ------------------------------------------------------------------------------------------------
# result shapes, counts, messages, errors


def test_multiple_result_sets_and_counts_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytds_connect(served) as conn, conn.cursor() as cur:
        cur.execute("SELECT two")
        assert cur.fetchall() == [(1,), (2,)]
        assert cur.nextset()
        # python-tds surfaces the row count between the sets as an extra "set" (stale description)
        assert cur.rowcount == 3
        assert cur.nextset()
        assert [d[0] for d in cur.description] == ["b", "c"]
        assert cur.fetchall() == [("x", True)]
        assert not cur.nextset()
        messages = [str(m[1]) for m in cur.messages]
        assert any("between the result sets" in m for m in messages)
        cur.execute("UPDATE t")
        assert cur.rowcount == 7


def test_multiple_result_sets_and_counts_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("SELECT two")
        assert [tuple(r) for r in cur.fetchall()] == [(1,), (2,)]
        assert cur.nextset()
        # ODBC reports the RowCount between the two sets as a result without columns (mssql-python
        # does not refresh rowcount on nextset)
        assert cur.description is None
        assert cur.nextset()
        assert [tuple(r) for r in cur.fetchall()] == [("x", True)]
        assert not cur.nextset()
        cur.execute("UPDATE t")
        assert cur.rowcount == 7
    finally:
        conn.close()


def test_error_after_rows_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytds_connect(served) as conn, conn.cursor() as cur:
        with pytest.raises(pytds.Error) as info:
            cur.execute("SELECT fail")
            cur.fetchall()
            while cur.nextset():
                cur.fetchall()
        assert info.value.number == 8134
        assert "Divide by zero error encountered." in str(info.value)
        cur.execute("SELECT 1")  # the connection is still usable
        assert cur.fetchall() == [(1,)]


def test_error_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        with pytest.raises(mssql_python.Error) as info:
            cur.execute("SELECT fail")
            cur.fetchall()
            while cur.nextset():
                cur.fetchall()
        assert "Divide by zero error encountered." in str(info.value)
        cur = conn.cursor()
        cur.execute("SELECT 1")
        assert [tuple(r) for r in cur.fetchall()] == [(1,)]
    finally:
        conn.close()


def test_unknown_batch_error_number_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytds_connect(served) as conn, conn.cursor() as cur:
        with pytest.raises(pytds.Error) as info:
            cur.execute("SELECT not scripted")
        assert info.value.number == 2812


def test_statement_error_does_not_end_the_batch_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytds_connect(served) as conn, conn.cursor() as cur:
        with pytest.raises(pytds.IntegrityError) as info:
            cur.execute("SELECT soft error")
        assert info.value.number == 2627


def test_info_message_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    with pytds_connect(served) as conn, conn.cursor() as cur:
        cur.execute("PRINT")
        assert cur.fetchall() == [(1,)]
        (message,) = [m[1] for m in cur.messages]
        assert message.msg_no == 50001
        assert message.text == "a message from PRINT"


def test_info_message_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("PRINT")
        assert [tuple(r) for r in cur.fetchall()] == [(1,)]
        assert any("a message from PRINT" in str(m) for m in cur.messages)
    finally:
        conn.close()


# ------------------------------------------------------------------------------------------------
# RPC parameters: sent typed by the driver, decoded by the TDS layer, echoed back by the engine

PARAMS_PY = [
    7, 2**40, "Grüße 😀 𝄞", Decimal("-12345678901234567890.123456789"), True, 2.5,
    dt.datetime(2024, 5, 6, 7, 8, 9, 123456), dt.date(2024, 5, 6), dt.time(12, 0, 1, 5),
    uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"), None, b"\x00\x01\x02",
]


def test_rpc_parameters_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    from pytds.tds_base import Param
    from pytds.tds_types import DateTime2Type, DecimalType, NVarCharType, VarBinaryType

    lsn = b"\x00\x00\x00\x25\x00\x00\x01\x10\x00\x03"
    # (python-tds cannot send binary(n): its BinaryType serializer is broken; the raw-wire tests cover it)
    typed = [Param(type=VarBinaryType(10), value=lsn),
             Param(type=DateTime2Type(7), value=dt.datetime(2020, 1, 2, 3, 4, 5, 6)),
             Param(type=DecimalType(38, 10), value=Decimal("-1234567890123456789012345678.0123456789")),
             Param(type=NVarCharType(20), value="x😀y")]
    engine = served[0]
    with pytds_connect(served) as conn, conn.cursor() as cur:
        # python-tds inlines None as NULL and sends bytes as nvarchar(max): those two go typed
        plain = [v for v in PARAMS_PY if v is not None and not isinstance(v, bytes)]
        placeholders = ", ".join(["%s"] * (len(plain) + len(typed)))
        cur.execute(f"SELECT {placeholders}", [*plain, *typed])
        (row,) = cur.fetchall()
    proc, params = engine.rpc_log[-1]
    assert proc == "sp_executesql"
    echoed = params[2:]
    assert [str(p.type) for p in echoed[-4:]] == ["varbinary(10)", "datetime2(7)", "decimal(38,10)", "nvarchar(20)"]
    assert echoed[-4].value == lsn
    assert echoed[-3].value == DateTime2(dt.date(2020, 1, 2), Time((3 * 3600 + 4 * 60 + 5) * 10_000_000 + 60))
    assert list(row) == [*plain, lsn, dt.datetime(2020, 1, 2, 3, 4, 5, 6),
                         Decimal("-1234567890123456789012345678.0123456789"), "x😀y"]
    assert str(row[3]) == "-12345678901234567890.123456789"


def test_rpc_parameters_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    lsn = b"\x00\x00\x00\x25\x00\x00\x01\x10\x00\x03"
    values = [*PARAMS_PY, lsn]
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("SELECT " + ", ".join(["?"] * len(values)), values)
        (row,) = [tuple(r) for r in cur.fetchall()]
    finally:
        conn.close()
    # the last execution (closing the cursor sends sp_unprepare after it)
    proc, params = next(rpc for rpc in reversed(engine.rpc_log) if rpc[0] in ("sp_prepexec", "sp_executesql"))
    echoed = params[3:] if proc == "sp_prepexec" else params[2:]
    assert echoed[-1].value == lsn and echoed[-1].type.name in ("binary", "varbinary")
    # what ODBC sends for each Python value is its business; what comes back must be equal
    expected = list(values)
    assert [_round_trip_equal(a, b) for a, b in zip(row, expected)] == [True] * len(values)


def _round_trip_equal(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float | Decimal | int) and not isinstance(expected, bool):
        return actual == expected
    return bool(actual == expected)


# ------------------------------------------------------------------------------------------------
# transactions through transaction manager requests


def test_transaction_manager_requests_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    with pytds_connect(served, autocommit=False) as conn:
        session = engine.sessions[-1]
        assert any(session.transaction_descriptor)
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchall()
        conn.commit()
        conn.rollback()
    assert [b for b in session.batches if "TRANSACTION" in b][:3] == [
        "BEGIN TRANSACTION", "COMMIT TRANSACTION", "BEGIN TRANSACTION"]


def test_transaction_manager_requests_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("SELECT @@SPID")  # connections are pooled: find this one's session
        session = engine.session(cur.fetchall()[0][0])
        conn.autocommit = False
        cur.execute("SELECT 1")
        cur.fetchall()
        assert any(session.transaction_descriptor)
        conn.commit()
    finally:
        conn.close()
    assert "BEGIN TRANSACTION" in session.batches
    assert "COMMIT TRANSACTION" in session.batches


# ------------------------------------------------------------------------------------------------
# cancel, packet sizes, large results


def test_attention_cancels_a_long_result_pytds(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    with pytds_connect(served) as conn, conn.cursor() as cur:
        cur.execute("SELECT forever")
        for _ in range(2000):
            assert cur.fetchone() is not None
        session = engine.sessions[-1]
        cur.cancel()
        assert session.cancelled.is_set()
        cur.execute("SELECT 1")
        assert cur.fetchall() == [(1,)]


@pytest.mark.parametrize("size", [512, 32767])
def test_packet_size_negotiation_pytds(served: tuple[ScriptedEngine, str, int], size: int) -> None:
    engine = served[0]
    with pytds_connect(served, blocksize=size) as conn, conn.cursor() as cur:
        assert engine.logins[-1].packet_size == size
        cur.execute("SELECT types")  # max values far longer than one packet
        rows = cur.fetchall()
        assert rows[0][TYPE_CASES.index(("varbinary(max)", LONG_BYTES, SAME, SAME))] == LONG_BYTES
        cur.execute("SELECT big")
        assert sum(1 for _ in cur) == 100_000


def test_packet_size_negotiation_odbc(served: tuple[ScriptedEngine, str, int]) -> None:
    engine = served[0]
    conn = odbc_connect(served, "Packet Size=16384;")
    try:
        assert engine.logins[-1].packet_size == 16384
        cur = conn.cursor()
        cur.execute("SELECT big")
        rows = cur.fetchall()
        assert len(rows) == 100_000
        assert tuple(rows[-1]) == (99_999, 999_990, "name 99999", Decimal("999.99"), "row value text")
    finally:
        conn.close()


def test_pooled_odbc_connection_is_reset(served: tuple[ScriptedEngine, str, int]) -> None:
    """mssql-python pools connections; reusing one sets RESETCONNECTION on the next request."""
    engine = served[0]
    conn = odbc_connect(served)
    cur = conn.cursor()
    cur.execute("SELECT @@SPID")
    spid = cur.fetchall()[0][0]
    conn.close()
    conn = odbc_connect(served)
    try:
        cur = conn.cursor()
        cur.execute("SELECT @@SPID")
        again = cur.fetchall()[0][0]
    finally:
        conn.close()
    if again != spid:
        pytest.skip("the driver did not reuse the pooled connection")
    assert engine.session(spid).resets >= 1

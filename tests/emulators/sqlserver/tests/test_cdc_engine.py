"""CDC through the SQL layer: the T-SQL Debezium sends (SqlServerConnection.java, 3.6) against the
emulator's Engine API, with the capture job running in the background as the server runs it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import PASSWORD, collect, engine_with
from emulators.sqlserver.results import LoginInfo

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with engine_with(capture_interval=0.1) as srv:
        yield srv


def run(session, sql: str):
    out = collect(session.execute_batch(sql))
    assert out.error is None, out.error
    return out


def test_debezium_queries(server: EmulatorServer) -> None:
    s = server.open_session(LoginInfo("sa", PASSWORD))
    run(s, "CREATE DATABASE testDB")
    run(s, "USE testDB")
    run(s, "CREATE TABLE dbo.customers (id int NOT NULL PRIMARY KEY, first_name nvarchar(255) NOT NULL, "
           "email nvarchar(255) NULL)")
    run(s, "EXEC sys.sp_cdc_enable_db")
    run(s, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', @role_name = NULL, "
           "@supports_net_changes = 0")
    help_rows = run(s, "EXEC testDB.sys.sp_cdc_help_change_data_capture")
    assert help_rows.names[:3] == ["source_schema", "source_table", "capture_instance"]
    assert [r[2] for r in help_rows.rows] == ["dbo_customers"]
    jobs = run(s, "EXEC sys.sp_cdc_help_jobs")
    assert dict(zip(jobs.names, jobs.rows[0], strict=True))["pollinginterval"] == 5

    run(s, "INSERT INTO dbo.customers VALUES (1001, N'Sally', N'sally@acme.com')")
    run(s, "UPDATE dbo.customers SET email = N'thomas@acme.com' WHERE id = 1001")
    deadline = time.monotonic() + 20
    to_lsn = None
    while to_lsn is None and time.monotonic() < deadline:
        to_lsn = run(s, "SELECT MAX(start_lsn) FROM testDB.cdc.lsn_time_mapping WHERE tran_id <> 0x00").rows[0][0]
        if to_lsn is None or len(run(s, "SELECT * FROM cdc.dbo_customers_CT").rows) < 3:
            to_lsn = None
            time.sleep(0.05)
    assert to_lsn is not None and len(to_lsn) == 10
    max_lsn = run(s, "SELECT testDB.sys.fn_cdc_get_max_lsn()")
    assert max_lsn.types == ["binary(10)"] and max_lsn.rows[0][0] >= to_lsn
    from_lsn = run(s, "SELECT testDB.sys.fn_cdc_get_min_lsn('dbo_customers')").rows[0][0]
    out = run(s, "SELECT *, TODATETIMEOFFSET(testDB.sys.fn_cdc_map_lsn_to_time([__$start_lsn]), "
                 "DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) FROM testDB.cdc.[fn_cdc_get_all_changes_dbo_customers]"
                 f"(0x{from_lsn.hex()}, 0x{to_lsn.hex()}, N'all update old') "
                 "order by [__$start_lsn] ASC, [__$seqval] ASC, [__$operation] ASC")
    assert out.names[:7] == ["__$start_lsn", "__$seqval", "__$operation", "__$update_mask", "id", "first_name",
                             "email"]
    assert out.types[:7] == ["binary(10)", "binary(10)", "int", "varbinary(128)", "int", "nvarchar(255)",
                             "nvarchar(255)"]
    assert [(r[2], r[4], r[6]) for r in out.rows] == [
        (2, 1001, "sally@acme.com"), (3, 1001, "sally@acme.com"), (4, 1001, "thomas@acme.com")]
    bad = collect(s.execute_batch(
        "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_customers(NULL, NULL, N'all')"))
    assert bad.error is not None and bad.error.message.number == 313
    last_scan = run(s, "SELECT TOP 1 start_lsn from sys.dm_cdc_log_scan_sessions ORDER BY session_id DESC")
    assert len(last_scan.rows) == 1
    s.close()

"""sys.sp_cdc_* procedures, the CDC objects they create and SQL Server's errors for them."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from test_cdc_support import CdcDb, SourceColumn, create_table, customers_columns

from emulators.sqlserver.results import Message, SqlServerError

pytestmark = pytest.mark.postgres
pytest_plugins = ["test_cdc_support"]  # the fixtures cdc_jobs, cdc_db, customers


def registry_columns(db: CdcDb, schema: str, name: str) -> list[tuple[str, str, bool]]:
    return db.query("SELECT c.name, c.type, c.is_nullable FROM hw_emulator.columns c "
                    "JOIN hw_emulator.objects o USING (object_id) WHERE o.schema_name = %s AND o.name = %s "
                    "ORDER BY c.column_id", (schema, name))


def raises(number: int, call, *args, **kwargs) -> SqlServerError:
    with pytest.raises(SqlServerError) as info:
        call(*args, **kwargs)
    assert info.value.message.number == number, info.value
    return info.value


def test_enable_db_creates_the_cdc_objects_with_sql_server_types(cdc_db: CdcDb) -> None:
    assert cdc_db.call("sp_cdc_enable_db") == []
    assert registry_columns(cdc_db, "cdc", "lsn_time_mapping") == [
        ("start_lsn", "binary(10)", False), ("tran_begin_time", "datetime", True),
        ("tran_end_time", "datetime", True), ("tran_id", "varbinary(10)", True),
        ("tran_begin_lsn", "binary(10)", True)]
    assert [c[0] for c in registry_columns(cdc_db, "cdc", "change_tables")] == [
        "object_id", "version", "source_object_id", "capture_instance", "start_lsn", "end_lsn",
        "supports_net_changes", "has_drop_pending", "role_name", "index_name", "filegroup_name", "create_date",
        "partition_switch"]
    assert [c[:2] for c in registry_columns(cdc_db, "cdc", "captured_columns")][:5] == [
        ("object_id", "int"), ("column_name", "nvarchar(128)"), ("column_id", "int"),
        ("column_type", "nvarchar(128)"), ("column_ordinal", "int")]
    assert len(registry_columns(cdc_db, "sys", "dm_cdc_log_scan_sessions")) == 21
    assert cdc_db.query("SELECT type, is_ms_shipped FROM hw_emulator.objects WHERE schema_name = 'cdc' "
                        "AND name = 'ddl_history'") == [("U ", True)]
    assert cdc_db.scalar("SELECT sys.fn_cdc_get_max_lsn()") is None
    assert bytes(cdc_db.scalar("SELECT sys.fn_cdc_get_min_lsn('nope')")) == bytes(10)
    # a second call only says so (severity 10), as SQL Server does
    (message,) = cdc_db.call("sp_cdc_enable_db")
    assert isinstance(message, Message) and message.number == 22905 and message.severity == 10


def test_enable_db_refuses_system_databases_and_an_existing_cdc_schema(cdc_db: CdcDb) -> None:
    from emulators.sqlserver.cdc import CdcContext
    from emulators.sqlserver.cdc.procedures import sp_cdc_enable_db
    error = raises(22989, lambda: list(sp_cdc_enable_db(CdcContext(cdc_db.conn, "master", cdc_db.jobs), {})))
    assert "'master'" in error.message.text
    cdc_db.execute("CREATE SCHEMA cdc")
    raises(22906, cdc_db.call, "sp_cdc_enable_db")


def test_lsn_functions(customers: CdcDb) -> None:
    scalar = customers.scalar
    assert bytes(scalar("SELECT sys.fn_cdc_increment_lsn('\\x0000002a00000d9800ff'::bytea)")).hex() == \
        "0000002a00000d980100"
    assert bytes(scalar("SELECT sys.fn_cdc_increment_lsn('\\x0000002a00000d98ffff'::bytea)")).hex() == \
        "0000002a00000d990000"
    assert bytes(scalar("SELECT sys.fn_cdc_decrement_lsn('\\x0000002a00000d990000'::bytea)")).hex() == \
        "0000002a00000d98ffff"
    assert scalar("SELECT sys.fn_cdc_is_bit_set(3, '\\x0104'::bytea)") is True
    assert scalar("SELECT sys.fn_cdc_is_bit_set(9, '\\x0104'::bytea)") is True
    assert scalar("SELECT sys.fn_cdc_is_bit_set(1, '\\x0104'::bytea)") is False
    assert scalar("SELECT sys.fn_cdc_get_column_ordinal('dbo_customers', 'EMAIL')") == 4
    with pytest.raises(Exception) as info:
        scalar("SELECT sys.fn_cdc_map_time_to_lsn('nearest', localtimestamp::timestamp)")
    assert info.value.diag.message_detail == "sqlserver:313:16:3"


def test_enable_table_records_the_instance(customers: CdcDb) -> None:
    db = customers
    (row,) = db.query("SELECT capture_instance, version, supports_net_changes, role_name, index_name, "
                      "partition_switch, start_lsn, end_lsn FROM cdc.change_tables")
    assert row[:6] == ("dbo_customers", 0, True, None, "PK_customers", True)
    start_lsn = bytes(row[6])
    assert len(start_lsn) == 10 and start_lsn[8:] == b"\0\0" and row[7] is None
    assert db.min_lsn("dbo_customers") == start_lsn
    assert db.min_lsn("DBO_CUSTOMERS") == start_lsn  # names compare case-insensitively
    assert db.query("SELECT column_name, column_id, column_type, column_ordinal, is_computed "
                    "FROM cdc.captured_columns ORDER BY column_ordinal") == [
        ("id", 1, "int", 1, False), ("first_name", 2, "nvarchar", 2, False),
        ("last_name", 3, "nvarchar", 3, False), ("email", 4, "nvarchar", 4, False)]
    assert db.query("SELECT column_name, index_ordinal, column_id FROM cdc.index_columns") == [("id", 1, 1)]
    assert registry_columns(db, "cdc", "dbo_customers_CT") == [
        ("__$start_lsn", "binary(10)", False), ("__$end_lsn", "binary(10)", True),
        ("__$seqval", "binary(10)", False), ("__$operation", "int", False),
        ("__$update_mask", "varbinary(128)", True), ("id", "int", True), ("first_name", "nvarchar(255)", True),
        ("last_name", "nvarchar(255)", True), ("email", "nvarchar(255)", True), ("__$command_id", "int", False)]
    assert db.query("SELECT type FROM hw_emulator.objects WHERE name = 'fn_cdc_get_all_changes_dbo_customers'") \
        == [("IF",)]
    assert db.scalar("SELECT relreplident FROM pg_class WHERE oid = 'dbo.customers'::regclass") == "f"
    assert db.query("SELECT tablename FROM pg_publication_tables") == [("customers",)]

    (help_row,) = db.result_rows("sp_cdc_help_change_data_capture")
    assert help_row["source_schema"] == "dbo" and help_row["source_table"] == "customers"
    assert help_row["capture_instance"] == "dbo_customers" and help_row["start_lsn"] == start_lsn
    assert help_row["index_column_list"] == "[id]"
    assert help_row["captured_column_list"] == "[id], [first_name], [last_name], [email]"
    assert isinstance(help_row["create_date"], dt.datetime) and help_row["supports_net_changes"] is True
    assert db.result_rows("sp_cdc_help_change_data_capture", source_schema="dbo", source_name="customers") \
        == [help_row]


def test_jobs_are_created_with_the_first_table_and_can_be_changed(cdc_db: CdcDb) -> None:
    cdc_db.call("sp_cdc_enable_db")
    assert cdc_db.result_rows("sp_cdc_help_jobs") == []
    raises(22997, cdc_db.call, "sp_cdc_change_job", job_type="capture", pollinginterval=1)
    create_table(cdc_db.conn, "dbo", "customers", customers_columns(), pk=["id"])
    cdc_db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None)
    jobs = {r["job_type"]: r for r in cdc_db.result_rows("sp_cdc_help_jobs")}
    assert set(jobs) == {"capture", "cleanup"}
    capture, cleanup = jobs["capture"], jobs["cleanup"]
    assert isinstance(capture["job_id"], uuid.UUID)
    assert capture["job_name"] == f"cdc.{cdc_db.name}_capture"
    assert (capture["maxtrans"], capture["maxscans"], capture["continuous"], capture["pollinginterval"],
            capture["retention"], capture["threshold"]) == (500, 10, True, 5, 0, 0)
    assert (cleanup["maxtrans"], cleanup["pollinginterval"], cleanup["retention"], cleanup["threshold"]) == \
        (0, 0, 4320, 5000)
    cdc_db.call("sp_cdc_change_job", job_type="capture", pollinginterval=1, maxtrans=50)
    cdc_db.call("sp_cdc_change_job", job_type="cleanup", retention=60)
    jobs = {r["job_type"]: r for r in cdc_db.result_rows("sp_cdc_help_jobs")}
    assert (jobs["capture"]["pollinginterval"], jobs["capture"]["maxtrans"]) == (1, 50)
    assert jobs["cleanup"]["retention"] == 60
    raises(22995, cdc_db.call, "sp_cdc_change_job", job_type="capture", retention=5)
    raises(22996, cdc_db.call, "sp_cdc_change_job", job_type="cleanup", maxtrans=5)
    raises(22990, cdc_db.call, "sp_cdc_change_job", pollinginterval=86400)
    raises(22991, cdc_db.call, "sp_cdc_change_job", maxtrans=0)
    raises(22992, cdc_db.call, "sp_cdc_change_job", job_type="nightly")
    raises(22994, cdc_db.call, "sp_cdc_change_job", job_type="cleanup", retention=0)


def test_enable_table_errors(cdc_db: CdcDb) -> None:
    db = cdc_db
    create_table(db.conn, "dbo", "customers", customers_columns(), pk=["id"])
    create_table(db.conn, "dbo", "heap", [SourceColumn("a", "int", "int4")])
    error = raises(22901, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers",
                   role_name=None)
    assert f"The database '{db.name}' is not enabled for Change Data Capture." in error.message.text
    raises(22901, db.call, "sp_cdc_help_change_data_capture")
    db.call("sp_cdc_enable_db")
    raises(201, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers")
    raises(22907, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=" ")
    raises(22963, db.call, "sp_cdc_enable_table", source_schema=None, source_name="customers", role_name=None)
    raises(22931, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="nope", role_name=None)
    raises(22974, db.call, "sp_cdc_enable_table", source_schema="cdc", source_name="change_tables",
           role_name=None)
    raises(22930, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None,
           captured_column_list="id, nope")
    raises(22939, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="heap", role_name=None,
           supports_net_changes=1)
    raises(22943, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None,
           supports_net_changes=1, captured_column_list="email")
    raises(22928, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None,
           index_name="IX_nope")
    raises(8145, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None,
           bogus=1)
    # none of the failed calls left anything behind
    assert db.scalar("SELECT count(*) FROM cdc.change_tables") == 0
    assert db.scalar("SELECT count(*) FROM hw_emulator.objects WHERE schema_name = 'cdc' AND name LIKE '%%_CT'") == 0

    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="heap", role_name=None)
    (row,) = db.query("SELECT capture_instance, supports_net_changes, index_name FROM cdc.change_tables")
    assert row == ("dbo_heap", False, None)
    error = raises(22926, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers",
                   role_name=None, capture_instance="DBO_HEAP")
    assert error.message.text == (
        "Could not create a capture instance because the capture instance name 'DBO_HEAP' already exists in the "
        "current database. Specify an explicit unique name for the parameter @capture_instance.")


def test_two_instances_per_table_at_most(customers: CdcDb) -> None:
    db = customers
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None,
            capture_instance="dbo_customers_v2", captured_column_list="[id], [email]")
    error = raises(22962, db.call, "sp_cdc_enable_table", source_schema="dbo", source_name="customers",
                   role_name=None, capture_instance="dbo_customers_v3")
    assert error.message.text.startswith("Two capture instances already exist for source table 'dbo.customers'.")
    rows = db.result_rows("sp_cdc_help_change_data_capture")
    assert [(r["capture_instance"], r["captured_column_list"]) for r in rows] == [
        ("dbo_customers", "[id], [first_name], [last_name], [email]"), ("dbo_customers_v2", "[id], [email]")]
    # disabling one leaves the other; 'all' removes the rest and stops publishing the table
    raises(22960, db.call, "sp_cdc_disable_table", source_schema="dbo", source_name="customers",
           capture_instance="dbo_nope")
    db.call("sp_cdc_disable_table", source_schema="dbo", source_name="customers", capture_instance="dbo_customers")
    assert [r["capture_instance"] for r in db.result_rows("sp_cdc_help_change_data_capture")] == ["dbo_customers_v2"]
    assert db.scalar("SELECT to_regclass('cdc.dbo_customers_ct')") is None
    assert db.scalar("SELECT count(*) FROM hw_emulator.objects WHERE name LIKE '%%dbo_customers' "
                     "OR name = 'dbo_customers_CT'") == 0
    db.call("sp_cdc_disable_table", source_schema="dbo", source_name="customers", capture_instance="all")
    assert db.result_rows("sp_cdc_help_change_data_capture") == []
    assert db.query("SELECT tablename FROM pg_publication_tables") == []
    assert db.scalar("SELECT relreplident FROM pg_class WHERE oid = 'dbo.customers'::regclass") == "d"
    raises(22985, db.call, "sp_cdc_disable_table", source_schema="dbo", source_name="customers",
           capture_instance="all")


def test_help_lists_only_instances_the_caller_may_read(customers: CdcDb) -> None:
    from emulators.sqlserver.cdc import CdcContext
    from emulators.sqlserver.cdc.procedures import sp_cdc_help_change_data_capture
    db = customers
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name="cdc_reader",
            capture_instance="gated")
    ctx = CdcContext(db.conn, db.name, db.jobs, login="bob", can_access_role=lambda role: role is None)
    (rs,) = list(sp_cdc_help_change_data_capture(ctx, {}))
    assert [row[2] for row in rs.rows] == ["dbo_customers"]


def test_disable_db_removes_everything(customers: CdcDb) -> None:
    db = customers
    db.call("sp_cdc_disable_db")
    assert db.scalar("SELECT to_regnamespace('cdc')") is None
    assert db.scalar("SELECT count(*) FROM hw_emulator.objects WHERE schema_name = 'cdc'") == 0
    assert db.scalar("SELECT count(*) FROM pg_publication") == 0
    assert db.scalar("SELECT sys.fn_cdc_get_max_lsn()") is None
    raises(22901, db.call, "sp_cdc_help_jobs")
    # enabling again works (new slot, new objects)
    db.call("sp_cdc_enable_db")
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None)
    assert db.scalar("SELECT count(*) FROM cdc.change_tables") == 1


def test_dropping_a_tracked_table_drops_its_instances(customers: CdcDb) -> None:
    from emulators.sqlserver.cdc.procedures import drop_source_instances
    db = customers
    source_id = db.scalar("SELECT source_object_id FROM cdc.change_tables")
    with db.conn.cursor() as cur:
        drop_source_instances(cur, source_id)
        cur.execute("DROP TABLE dbo.customers")
    assert db.scalar("SELECT count(*) FROM cdc.change_tables") == 0
    assert db.scalar("SELECT to_regclass('cdc.dbo_customers_ct')") is None

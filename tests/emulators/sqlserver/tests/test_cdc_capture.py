"""The capture job: change rows, LSNs, lsn_time_mapping, fn_cdc_get_all_changes, agent and restart."""

from __future__ import annotations

import datetime as dt
import io
import time
from typing import Any

import psycopg2
import psycopg2.extras
import pytest
from test_cdc_support import CdcDb, SourceColumn, create_table

from emulators.sqlserver.cdc import CaptureJobs, all_changes_sql_for, lsn
from emulators.sqlserver.cdc.capture import record_end

pytestmark = pytest.mark.postgres
pytest_plugins = ["test_cdc_support"]  # the fixtures cdc_jobs, cdc_db, customers

DATA = ("id", "first_name", "last_name", "email")


def data(row: dict) -> tuple:
    return tuple(row[c] for c in DATA)


def test_capture_is_asynchronous_and_rows_follow_sql_server(customers: CdcDb) -> None:
    db = customers
    db.execute("INSERT INTO dbo.customers VALUES (1001, 'Sally', 'Thomas', 'sally.thomas@acme.com')")
    assert db.ct_rows("dbo_customers") == []  # nothing until the capture job scans
    assert db.capture()
    db.execute("UPDATE dbo.customers SET first_name = 'Anne Marie' WHERE id = 1001")
    db.execute("DELETE FROM dbo.customers WHERE id = 1001")
    assert len(db.ct_rows("dbo_customers")) == 1
    assert db.capture()
    rows = db.ct_rows("dbo_customers")
    assert [(r["__$operation"], data(r)) for r in rows] == [
        (2, (1001, "Sally", "Thomas", "sally.thomas@acme.com")),
        (3, (1001, "Sally", "Thomas", "sally.thomas@acme.com")),
        (4, (1001, "Anne Marie", "Thomas", "sally.thomas@acme.com")),
        (1, (1001, "Anne Marie", "Thomas", "sally.thomas@acme.com"))]
    insert, before, after, delete = rows
    assert insert["__$update_mask"] == b"\x0f" and delete["__$update_mask"] == b"\x0f"
    assert before["__$update_mask"] == after["__$update_mask"] == b"\x02"  # first_name = ordinal 2
    assert before["__$seqval"] == after["__$seqval"] and before["__$start_lsn"] == after["__$start_lsn"]
    assert insert["__$start_lsn"] < before["__$start_lsn"] < delete["__$start_lsn"]
    assert all(r["__$end_lsn"] is None and r["__$command_id"] == 1 for r in rows)
    for r in rows:  # commit LSNs have slot 0; a change's LSN precedes its commit's
        assert r["__$start_lsn"][8:] == b"\0\0" and r["__$seqval"] < r["__$start_lsn"]
    # one lsn_time_mapping row per transaction, at the commit LSN, with a non-zero tran_id
    mapping = db.mapping()
    starts = sorted({r["__$start_lsn"] for r in rows})
    assert [m[0] for m in mapping if m[3] != b"\0"] == starts
    for start_lsn, begin_time, end_time, tran_id, begin_lsn in mapping:
        if tran_id == b"\0":
            continue
        assert len(tran_id) == 10 and tran_id != bytes(10)
        assert begin_lsn <= start_lsn and begin_time <= end_time
        assert abs(end_time - dt.datetime.now(dt.UTC).replace(tzinfo=None)) < dt.timedelta(minutes=1)
        assert end_time.microsecond % 1000 == 0 and end_time.microsecond // 1000 % 10 in (0, 3, 7)
    assert db.scalar("SELECT sys.fn_cdc_map_lsn_to_time(%s)", (psycopg2.Binary(starts[1]),)) == mapping[
        [m[0] for m in mapping].index(starts[1])][2]
    # fn_cdc_get_all_changes: 'all update old' has both update rows, 'all' only the new values
    changes = db.changes("dbo_customers")
    assert list(changes[0]) == ["__$start_lsn", "__$seqval", "__$operation", "__$update_mask", *DATA]
    assert [c["__$operation"] for c in changes] == [2, 3, 4, 1]
    assert [c["__$operation"] for c in db.changes("dbo_customers", option="all")] == [2, 4, 1]
    # closed interval on __$start_lsn
    assert [c["__$operation"] for c in db.changes("dbo_customers", starts[1], starts[1])] == [3, 4]
    increment = bytes(db.scalar("SELECT sys.fn_cdc_increment_lsn(%s)", (psycopg2.Binary(starts[1]),)))
    assert [c["__$operation"] for c in db.changes("dbo_customers", increment, starts[2])] == [1]
    # the scans were logged; SQL Server's string form of the LSN
    (last,) = db.query("SELECT start_lsn, tran_count, scan_phase FROM sys.dm_cdc_log_scan_sessions "
                       "ORDER BY session_id DESC LIMIT 1")
    assert last == (lsn.to_string(starts[1]), 2, "Done")


def test_interleaved_transactions_appear_in_commit_order(customers: CdcDb) -> None:
    db = customers
    a, b, c = (db.connect(autocommit=False) for _ in range(3))
    with a.cursor() as cur:
        cur.execute("INSERT INTO dbo.customers VALUES (1, 'a-first', NULL, NULL)")
    with b.cursor() as cur:
        cur.execute("INSERT INTO dbo.customers VALUES (2, 'b-first', NULL, NULL)")
    with c.cursor() as cur:
        cur.execute("INSERT INTO dbo.customers VALUES (3, 'c-only', NULL, NULL)")
    with a.cursor() as cur:
        cur.execute("INSERT INTO dbo.customers VALUES (4, 'a-second', NULL, NULL)")
        cur.execute("UPDATE dbo.customers SET email = 'one@a' WHERE id = 1")
    with b.cursor() as cur:
        cur.execute("INSERT INTO dbo.customers VALUES (5, 'b-second', NULL, NULL)")
    b.commit()
    c.rollback()  # a rolled-back transaction never appears
    a.commit()
    assert db.capture()
    rows = db.ct_rows("dbo_customers")
    assert [(r["__$operation"], r["id"], r["__$command_id"]) for r in rows] == [
        (2, 2, 1), (2, 5, 2),                            # b committed first
        (2, 1, 1), (2, 4, 2), (3, 1, 3), (4, 1, 3)]      # then a, in statement order
    b_lsn, a_lsn = rows[0]["__$start_lsn"], rows[2]["__$start_lsn"]
    assert b_lsn < a_lsn and {r["__$start_lsn"] for r in rows} == {a_lsn, b_lsn}
    seqvals = [r["__$seqval"] for r in rows]
    assert seqvals[0] < seqvals[1] and seqvals[2] < seqvals[3] < seqvals[4] == seqvals[5]
    assert [m[0] for m in db.mapping() if m[3] != b"\0"] == [b_lsn, a_lsn]
    for conn in (a, b, c):
        conn.close()


def test_primary_key_update_is_a_delete_and_an_insert(customers: CdcDb) -> None:
    db = customers
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', 'y', 'z'), (2, 'p', 'q', 'r')")
    assert db.capture()
    db.execute("UPDATE dbo.customers SET id = id + 10")
    assert db.capture()
    rows = db.ct_rows("dbo_customers")[2:]
    assert [(r["__$operation"], r["id"], r["__$update_mask"], r["__$command_id"]) for r in rows] == [
        (1, 1, b"\x0f", 1), (2, 11, b"\x0f", 1), (1, 2, b"\x0f", 2), (2, 12, b"\x0f", 2)]
    assert rows[0]["__$seqval"] == rows[1]["__$seqval"] != rows[2]["__$seqval"] == rows[3]["__$seqval"]
    assert len({r["__$start_lsn"] for r in rows}) == 1


def test_captured_column_list_and_later_schema_changes(cdc_db: CdcDb) -> None:
    db = cdc_db
    create_table(db.conn, "dbo", "t", [SourceColumn("id", "int", "int4", False), SourceColumn("a", "int", "int4"),
                                       SourceColumn("b", "nvarchar(10)", "varchar(10)"),
                                       SourceColumn("c", "varchar(max)", "text")], pk=["id"])
    db.call("sp_cdc_enable_db")
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="t", role_name=None,
            captured_column_list="id, [b], c")
    db.execute("INSERT INTO dbo.t VALUES (1, 10, 'x', 'long')")
    db.execute("UPDATE dbo.t SET a = 11 WHERE id = 1")            # not a captured column: no rows
    db.execute("UPDATE dbo.t SET b = 'y' WHERE id = 1")           # c (max) unchanged: NULL in the old image
    db.execute("ALTER TABLE dbo.t ADD COLUMN d int")              # added later: never captured
    db.execute("UPDATE dbo.t SET d = 5, b = 'z' WHERE id = 1")
    db.execute("ALTER TABLE dbo.t DROP COLUMN c")                 # dropped: NULL from now on
    db.execute("INSERT INTO dbo.t (id, a, b) VALUES (2, 20, 'w')")
    assert db.capture()
    rows = db.ct_rows("dbo_t")
    assert [(r["__$operation"], r["id"], r["b"], r["c"], r["__$update_mask"]) for r in rows] == [
        (2, 1, "x", "long", b"\x07"),
        (3, 1, "x", None, b"\x02"), (4, 1, "y", "long", b"\x02"),
        (3, 1, "y", None, b"\x02"), (4, 1, "z", "long", b"\x02"),
        (2, 2, "w", None, b"\x07")]
    assert "a" not in rows[0] and "d" not in rows[0]


def test_two_capture_instances_both_receive_changes(customers: CdcDb) -> None:
    db = customers
    db.execute("INSERT INTO dbo.customers VALUES (1, 'before', 'v2', NULL)")
    assert db.capture()
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None,
            capture_instance="dbo_customers_v2", captured_column_list="id, email")
    db.execute("UPDATE dbo.customers SET email = 'e@x' WHERE id = 1")
    assert db.capture()
    v1, v2 = db.ct_rows("dbo_customers"), db.ct_rows("dbo_customers_v2")
    assert [r["__$operation"] for r in v1] == [2, 3, 4]
    assert [(r["__$operation"], r["id"], r["email"], r["__$update_mask"]) for r in v2] == [
        (3, 1, None, b"\x02"), (4, 1, "e@x", b"\x02")]  # the insert predates the v2 instance
    assert v2[0]["__$start_lsn"] == v1[1]["__$start_lsn"] and v2[0]["__$seqval"] == v1[1]["__$seqval"]
    assert db.min_lsn("dbo_customers_v2") > v1[0]["__$start_lsn"]
    assert db.min_lsn("dbo_customers_v2") <= v2[0]["__$start_lsn"]


def error_313(db: CdcDb, *args, **kwargs) -> None:
    with pytest.raises(psycopg2.Error) as info:
        db.changes("dbo_customers", *args, **kwargs)
    assert info.value.diag.message_detail == "sqlserver:313:16:3"
    assert info.value.diag.message_primary == (
        "An insufficient number of arguments were supplied for the procedure or function "
        "cdc.fn_cdc_get_all_changes_ ... .")


def test_error_313_for_invalid_ranges(customers: CdcDb) -> None:
    db = customers
    assert db.capture()  # an empty change table still checks its arguments
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', NULL, NULL)")
    assert db.capture()
    low, high = db.min_lsn("dbo_customers"), db.max_lsn()
    assert db.changes("dbo_customers", low, high)
    before_low = bytes(db.scalar("SELECT sys.fn_cdc_decrement_lsn(%s)", (psycopg2.Binary(low),)))
    past_high = bytes(db.scalar("SELECT sys.fn_cdc_increment_lsn(%s)", (psycopg2.Binary(high),)))
    error_313(db, before_low, high)
    error_313(db, low, past_high)
    error_313(db, high, low)
    error_313(db, low, high, option="all with merge")
    with pytest.raises(psycopg2.Error) as info:  # a NULL bound
        with db.conn.cursor() as cur:
            cur.execute("SELECT * FROM " + all_changes_sql_for(db.conn, "dbo_customers", "NULL::bytea", "%(t)s",
                                                                 "'all'") + " AS c", {"t": psycopg2.Binary(high)})
    assert info.value.diag.message_detail == "sqlserver:313:16:3"
    db.execute("DELETE FROM dbo.customers")  # the same guard on an interval with no rows
    assert db.capture()
    error_313(db, high, low)


def test_cleanup_raises_the_low_endpoint(customers: CdcDb) -> None:
    db = customers
    for i in range(3):
        db.execute("INSERT INTO dbo.customers VALUES (%s, 'x', NULL, NULL)", (i,))
        assert db.capture()
    starts = sorted({r["__$start_lsn"] for r in db.ct_rows("dbo_customers")})
    assert len(starts) == 3
    db.call("sp_cdc_cleanup_change_table", capture_instance="dbo_customers", low_water_mark=starts[1])
    assert db.min_lsn("dbo_customers") == starts[1]
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [1, 2]
    assert min(m[0] for m in db.mapping()) == starts[1]
    error_313(db, starts[0], starts[2])
    assert [c["id"] for c in db.changes("dbo_customers", starts[1], starts[2])] == [1, 2]
    from emulators.sqlserver.results import SqlServerError
    with pytest.raises(SqlServerError) as info:
        db.call("sp_cdc_cleanup_change_table", capture_instance="dbo_customers",
                low_water_mark=lsn.from_pg(1))
    assert info.value.message.number == 22964
    # the retention-based job: everything older than the retention window goes
    conn = db.connect(autocommit=False)
    from emulators.sqlserver.cdc.cleanup import run_cleanup
    with conn.cursor() as cur:
        mark = run_cleanup(cur, retention_minutes=1, now=dt.datetime.now() + dt.timedelta(minutes=5))
    conn.commit()
    assert mark == db.max_lsn()
    assert db.min_lsn("dbo_customers") == mark
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [2]


def test_idle_scans_record_progress_with_tran_id_zero(customers: CdcDb) -> None:
    db = customers
    create_table(db.conn, "dbo", "other", [SourceColumn("a", "int", "int4")])
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', NULL, NULL)")
    assert db.capture()
    tran_lsn, max_before = db.max_tran_lsn(), db.max_lsn()
    assert tran_lsn is not None and max_before >= tran_lsn
    db.execute("INSERT INTO dbo.other VALUES (1)")  # log activity on a table CDC does not track
    assert db.capture()
    assert db.max_lsn() > max_before and db.max_tran_lsn() == tran_lsn
    idle = [m for m in db.mapping() if m[3] == b"\0"]
    assert idle and idle[-1][0] == db.max_lsn()
    # the next transaction's LSN lies beyond the idle entry
    db.execute("INSERT INTO dbo.customers VALUES (2, 'y', NULL, NULL)")
    assert db.capture()
    assert db.max_tran_lsn() > idle[-1][0]
    # Debezium's "did the transaction end" check: the last scan session, empty or not
    assert db.scalar("SELECT count(*) FROM sys.dm_cdc_log_scan_sessions WHERE tran_count = 0") >= 1


def test_agent_stopped_captures_nothing_until_started(customers: CdcDb) -> None:
    db = customers
    db.jobs.agent_running = False
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', NULL, NULL)")
    assert db.capture() is False
    time.sleep(0.2)
    assert db.ct_rows("dbo_customers") == []
    db.jobs.agent_running = True
    assert db.capture()
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [1]
    # sp_cdc_stop_job stops this database's capture job likewise
    db.call("sp_cdc_stop_job", job_type="capture")
    db.execute("INSERT INTO dbo.customers VALUES (2, 'y', NULL, NULL)")
    assert db.capture() is False
    db.call("sp_cdc_start_job")
    assert db.capture()
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [1, 2]


def test_background_scans_follow_the_polling_interval(customers: CdcDb) -> None:
    db = customers
    db.jobs.interval = None  # use the job's pollinginterval (seconds)
    db.call("sp_cdc_change_job", job_type="capture", pollinginterval=0)
    db.jobs.wake(db.name)  # SQL Server applies job changes when the job restarts; here at the next wake-up
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', NULL, NULL)")
    deadline = time.monotonic() + 15
    while not db.ct_rows("dbo_customers") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [1]


def test_restart_loses_and_duplicates_nothing(customers: CdcDb, pg_server, monkeypatch) -> None:
    db = customers
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', NULL, NULL)")
    assert db.capture()
    # a job that writes its rows but dies before confirming the slot position
    original = psycopg2.extras.ReplicationCursor.send_feedback

    def forgetful(self, *args, flush_lsn=0, **kwargs):
        return original(self, *args, **kwargs)

    monkeypatch.setattr(psycopg2.extras.ReplicationCursor, "send_feedback", forgetful)
    db.execute("INSERT INTO dbo.customers VALUES (2, 'y', NULL, NULL)")
    db.execute("UPDATE dbo.customers SET email = 'e' WHERE id = 1")
    assert db.capture()
    db.jobs.close()
    monkeypatch.setattr(psycopg2.extras.ReplicationCursor, "send_feedback", original)
    db.execute("INSERT INTO dbo.customers VALUES (3, 'z', NULL, NULL)")  # while no job runs
    jobs = CaptureJobs(pg_server, interval=3600)
    try:
        db.jobs = jobs
        jobs.start_enabled([db.name])
        assert db.capture()
        rows = db.ct_rows("dbo_customers")
        assert [(r["__$operation"], r["id"]) for r in rows] == [(2, 1), (2, 2), (3, 1), (4, 1), (2, 3)]
        assert len([m for m in db.mapping() if m[3] != b"\0"]) == 4
    finally:
        jobs.close()


def test_tables_enabled_while_the_stream_runs_and_multi_row_records(customers: CdcDb) -> None:
    db = customers
    assert db.capture()  # the replication stream is open now
    create_table(db.conn, "dbo", "orders", [SourceColumn("id", "int", "int4", False),
                                            SourceColumn("note", "nvarchar(20)", "varchar(20)")], pk=["id"])
    db.execute("INSERT INTO dbo.orders VALUES (1, 'before')")
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="orders", role_name=None)
    db.execute("INSERT INTO dbo.orders VALUES (2, 'after')")
    # COPY writes several rows with one WAL record: each row still gets its own __$seqval
    with db.conn.cursor() as cur:
        cur.copy_expert("COPY dbo.orders FROM STDIN", io.StringIO("3\tc1\n4\tc2\n5\tc3\n"))
    assert db.capture()
    rows = db.ct_rows("dbo_orders")
    assert [(r["__$operation"], r["id"], r["note"]) for r in rows] == [
        (2, 2, "after"), (2, 3, "c1"), (2, 4, "c2"), (2, 5, "c3")]
    copied = rows[1:]
    assert len({r["__$seqval"] for r in copied}) == 3 and [r["__$command_id"] for r in copied] == [1, 2, 3]
    assert sorted(r["__$seqval"] for r in copied) == [r["__$seqval"] for r in copied]


def test_values_of_many_types_round_trip(cdc_db: CdcDb) -> None:
    db = cdc_db
    columns = [SourceColumn("id", "int", "int4", False), SourceColumn("flag", "bit", "boolean"),
               SourceColumn("amount", "decimal(10,2)", "numeric(10,2)"), SourceColumn("cash", "money", "sys.money"),
               SourceColumn("blob", "varbinary(16)", "bytea"), SourceColumn("guid", "uniqueidentifier", "uuid"),
               SourceColumn("at", "datetime2(7)", "sys.datetime2"), SourceColumn("dt", "datetime", "sys.datetime"),
               SourceColumn("day", "date", "date"), SourceColumn("txt", "nvarchar(max)", "text")]
    create_table(db.conn, "dbo", "typed", columns, pk=["id"])
    db.call("sp_cdc_enable_db")
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="typed", role_name=None)
    db.execute("INSERT INTO dbo.typed VALUES (1, true, 12.5, 3.25, '\\x00ff10'::bytea, "
               "'6f9619ff-8b86-d011-b42d-00c04fc964ff', ROW('2024-02-29 23:59:59.123456', 7)::sys.datetime2, "
               "'2024-01-02 03:04:05.007', '2024-03-01', repeat('x', 5000))")
    db.execute("UPDATE dbo.typed SET flag = false, blob = NULL WHERE id = 1")
    assert db.capture()
    source = db.query("SELECT * FROM dbo.typed")
    rows = db.ct_rows("dbo_typed")
    assert [r["__$operation"] for r in rows] == [2, 3, 4]
    names = [c.name for c in columns]
    inserted = tuple(rows[0][n] for n in names)
    assert inserted[:2] == (1, True) and inserted[4] == b"\x00\xff\x10" and inserted[9] == "x" * 5000
    assert tuple(rows[2][n] for n in names) == tuple(bytes(v) if isinstance(v, memoryview) else v
                                                      for v in source[0])
    assert rows[1]["txt"] is None  # (max) column unchanged by the update: NULL in the before image
    assert rows[1]["blob"] == b"\x00\xff\x10" and rows[2]["blob"] is None
    assert rows[1]["__$update_mask"] == b"\x00\x12"  # ordinals 2 (flag) and 5 (blob)
    assert db.scalar("SELECT (at).ns100 FROM cdc.dbo_typed_ct WHERE \"__$operation\" = 4") == 7


def test_enable_inside_an_explicit_transaction(cdc_db: CdcDb) -> None:
    db = cdc_db
    conn = db.connect(autocommit=False)
    create_table(conn, "dbo", "t", [SourceColumn("id", "int", "int4", False)], pk=["id"])
    from emulators.sqlserver.cdc import CdcContext
    from emulators.sqlserver.cdc.procedures import PROCEDURES
    ctx = CdcContext(conn, db.name, db.jobs)
    # the transaction has written already: the slot cannot be created inside it, the job creates it
    list(PROCEDURES["sp_cdc_enable_db"](ctx, {}))
    list(PROCEDURES["sp_cdc_enable_table"](ctx, {"@source_schema": "dbo", "@source_name": "t",
                                                 "@role_name": None}))
    conn.commit()
    deadline = time.monotonic() + 20
    while db.scalar("SELECT count(*) FROM pg_replication_slots WHERE confirmed_flush_lsn IS NOT NULL "
                    "AND database = current_database()") == 0:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert db.capture()
    # the instance starts where the slot became consistent
    slot_lsn = db.scalar("SELECT slot_lsn::text FROM hw_emulator.cdc_state")
    assert db.min_lsn("dbo_t") == lsn.from_pg(lsn.parse_pg(slot_lsn))
    db.execute("INSERT INTO dbo.t VALUES (1)")
    assert db.capture()
    assert [r["id"] for r in db.ct_rows("dbo_t")] == [1]
    conn.close()


def test_disable_and_enable_again_switches_slots(customers: CdcDb) -> None:
    db = customers
    db.execute("INSERT INTO dbo.customers VALUES (1, 'x', NULL, NULL)")
    assert db.capture()
    old_slot = db.scalar("SELECT slot_name FROM hw_emulator.cdc_state")
    db.call("sp_cdc_disable_db")
    db.execute("INSERT INTO dbo.customers VALUES (2, 'y', NULL, NULL)")  # not captured by anyone
    db.call("sp_cdc_enable_db")
    db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None)
    db.execute("INSERT INTO dbo.customers VALUES (3, 'z', NULL, NULL)")
    db.jobs.wake(db.name)
    deadline = time.monotonic() + 20
    while db.scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (old_slot,)):
        assert time.monotonic() < deadline, "the old slot was not dropped"
        time.sleep(0.05)
    assert db.capture()
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [3]


def test_maxtrans_and_maxscans_bound_a_cycle(customers: CdcDb) -> None:
    db = customers
    db.call("sp_cdc_change_job", job_type="capture", maxtrans=2, maxscans=1)
    assert db.capture()  # the job has read its new parameters (the change woke it up)
    for i in range(5):
        db.execute("INSERT INTO dbo.customers VALUES (%s, 'x', NULL, NULL)", (i,))
    seen = []
    for _ in range(3):
        assert db.capture()
        seen.append(len(db.ct_rows("dbo_customers")))
    assert seen == [2, 4, 5]
    assert [r["id"] for r in db.ct_rows("dbo_customers")] == [0, 1, 2, 3, 4]


def test_record_end_steps_back_over_a_page_header() -> None:
    block, segment = 8192, 16 << 20
    assert record_end(5 * block + 24, block, segment) == 5 * block  # short header
    assert record_end(3 * segment + 40, block, segment) == 3 * segment  # a segment's first page: long header
    assert record_end(5 * block + 32, block, segment) == 5 * block + 32
    assert record_end(5 * block + 4000, block, segment) == 5 * block + 4000


def _lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def test_the_stream_reaches_the_target_of_a_commit_ending_on_a_page_boundary(pg_db: Any) -> None:
    """A scan waits until the walsender's wal_end reaches where the WAL stood when the scan began. When
    the last commit ends exactly on a page boundary, pg_current_wal_insert_lsn() lies past the next
    page's header while wal_end stops at the boundary (until some other record comes, up to 15 s
    later): a scan waiting for the insert position stalled the capture job (the
    incremental_snapshot_conditions scenario's missing window row). record_end() is what wal_end reaches."""
    ctl = pg_db.connect()
    with ctl.cursor() as cur:
        cur.execute("SET synchronous_commit TO on")  # as the capture job's control connection
        cur.execute("SELECT current_setting('wal_block_size')::int, pg_size_bytes(current_setting('wal_segment_size'))")
        block, segment = cur.fetchone()
        cur.execute("SELECT pg_create_logical_replication_slot('boundary', 'pgoutput')")
        cur.execute("CREATE PUBLICATION boundary_pub FOR ALL TABLES")
    repl = psycopg2.connect(pg_db.dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    try:
        stream = repl.cursor()
        stream.start_replication(slot_name="boundary", decode=False,
                                 options={"proto_version": "1", "publication_names": "boundary_pub"})
        insert = 0
        # WAL bytes of a message (content of 256 bytes or more) and its commit, beyond the content
        overhead: int | None = None
        for _ in range(200):  # pad the WAL until a commit ends exactly on a page boundary
            with ctl.cursor() as cur:
                cur.execute("SELECT pg_current_wal_insert_lsn()::text")
                before = _lsn(cur.fetchone()[0])
                room = block - before % block
                pad = room - overhead if overhead is not None and room - overhead >= 256 else 1000
                cur.execute("BEGIN")
                cur.execute("SELECT pg_logical_emit_message(true, 'pad', %s)", ("x" * pad,))
                cur.execute("COMMIT")
                cur.execute("SELECT pg_current_wal_insert_lsn()::text")
                insert = _lsn(cur.fetchone()[0])
            if insert % block == 24:
                break
            if insert // block == before // block:  # no page header in between
                overhead = insert - before - pad
        else:
            pytest.fail("no commit ended on a page boundary")
        target = record_end(insert, block, segment)
        assert target == insert - 24
        deadline = time.monotonic() + 10
        while (stream.wal_end or 0) < target:
            assert time.monotonic() < deadline, f"wal_end {stream.wal_end:X} did not reach {target:X}"
            if stream.read_message() is None:
                stream.send_feedback(reply=True, force=True)
                time.sleep(0.02)
    finally:
        repl.close()

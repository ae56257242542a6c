"""Logins, database users, roles and permissions over the wire: what SQL Server refuses, with its
numbers and texts, and Debezium's least-privileged CDC reader (spec §4.7, QUERIES.md §2 and §5)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mssql_python
import pytds
import pytest

from emulators.sqlserver.engine.security import ServerSecurity
from emulators.sqlserver.results import LoginInfo, Message, ResultSet
from helpers.sqlserver import connect, emulator_in_process, wait_for

PW = "Str0ng#Passw0rd"
DENIED = "The {} permission was denied on the object '{}', database 'testDB', schema '{}'."


@pytest.fixture(scope="module")
def pg() -> Iterator[Any]:
    from headwater.embedded.postgres import ThrowawayPostgres

    server = ThrowawayPostgres().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def engine(pg: Any) -> Iterator[Any]:
    with emulator_in_process(pg) as eng:
        sa = connect(*eng.address)
        cur = sa.cursor()
        for statement in [
            "CREATE DATABASE testDB", "USE testDB",
            "CREATE TABLE dbo.customers (id int PRIMARY KEY, name nvarchar(50))",
            "CREATE TABLE dbo.orders (id int PRIMARY KEY, qty int)",
            "INSERT INTO dbo.customers VALUES (1, N'Ann')", "INSERT INTO dbo.orders VALUES (1, 5)",
            "EXEC sys.sp_cdc_enable_db",
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'customers', "
            "@role_name = N'cdc_reader', @supports_net_changes = 0",
        ]:
            cur.execute(statement)
        sa.close()
        yield eng


def sa_run(engine: Any, *statements: str, database: str = "testDB") -> None:
    conn = connect(*engine.address, database=database)
    try:
        cur = conn.cursor()
        for statement in statements:
            cur.execute(statement)
    finally:
        conn.close()


def login_as(engine: Any, user: str, password: str = PW, database: str = "master") -> Any:
    host, port = engine.address
    conn = mssql_python.connect(f"Server={host},{port};UID={user};PWD={{{password}}};Database={database};"
                                "Encrypt=no;TrustServerCertificate=yes")
    conn.autocommit = True
    return conn


def pytds_login(engine: Any, user: str, database: str = "master", password: str = PW) -> Any:
    host, port = engine.address
    return pytds.connect(dsn=host, port=port, user=user, password=password, database=database, autocommit=True,
                         login_timeout=10)


def new_user(engine: Any, name: str, *grants: str) -> None:
    """A login with a user of the same name in testDB, and the given statements run by sa in testDB."""
    sa_run(engine, f"CREATE LOGIN {name} WITH PASSWORD = '{PW}'", database="master")
    sa_run(engine, f"CREATE USER {name} FOR LOGIN {name}", *grants)


def error_text(call: Any, *args: Any) -> str:
    with pytest.raises(mssql_python.Error) as info:
        call(*args)
    return str(info.value)


def rows(conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql, *params) if params else cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()] if cur.description else []


# ------------------------------------------------------------------------------------------- logins
def test_wrong_password_and_unknown_login_are_18456(engine: Any) -> None:
    new_user(engine, "pwcheck")
    with pytest.raises(pytds.Error) as info:
        host, port = engine.address
        pytds.connect(dsn=host, port=port, user="pwcheck", password="wrong", autocommit=True, login_timeout=10)
    assert (info.value.number, info.value.severity) == (18456, 14)
    assert "Login failed for user 'pwcheck'." in str(info.value)
    assert "Login failed for user 'nobody'." in error_text(login_as, engine, "nobody")


def test_login_without_user_in_database_gets_4060_and_916(engine: Any) -> None:
    sa_run(engine, f"CREATE LOGIN lonely WITH PASSWORD = '{PW}'", database="master")
    text = error_text(login_as, engine, "lonely", PW, "testDB")
    assert 'Cannot open database "testDB" requested by the login. The login failed.' in text
    # master lets every login in (guest), the other databases do not
    conn = pytds_login(engine, "lonely")
    with conn.cursor() as cur:
        cur.execute("SELECT DB_NAME()")
        assert cur.fetchone()[0] == "master"
        with pytest.raises(pytds.Error) as info:
            cur.execute("USE testDB")
        assert info.value.number == 916
        assert info.value.args[0] == ('The server principal "lonely" is not able to access the database "testDB" '
                                      "under the current security context.")
        with pytest.raises(pytds.Error) as info:
            cur.execute("SELECT COUNT(*) FROM testDB.dbo.customers")
        assert info.value.number == 916
    conn.close()


def test_alter_and_drop_login(engine: Any) -> None:
    # python-tds: mssql-python pools connections, so a pooled one would skip the login (as with SQL Server)
    sa_run(engine, f"CREATE LOGIN changing WITH PASSWORD = '{PW}'", "CREATE USER changing", database="master")
    pytds_login(engine, "changing").close()
    sa_run(engine, "ALTER LOGIN changing WITH PASSWORD = 'N3w#Password'", database="master")
    with pytest.raises(pytds.Error) as info:
        pytds_login(engine, "changing")
    assert info.value.number == 18456
    pytds_login(engine, "changing", password="N3w#Password").close()
    text = error_text(sa_run, engine, f"CREATE LOGIN changing WITH PASSWORD = '{PW}'")
    assert "The server principal 'changing' already exists." in text
    # the server ends a session when it sees the socket close; DROP LOGIN refuses logged-in logins (15434)
    wait_for(lambda: not any(x.login.user == "changing" for x in list(engine.sessions.values())), "logout")
    sa_run(engine, "DROP LOGIN changing", database="master")
    with pytest.raises(pytds.Error) as info:
        pytds_login(engine, "changing", password="N3w#Password")
    assert info.value.number == 18456
    text = error_text(sa_run, engine, "DROP LOGIN changing")
    assert "Cannot drop the login 'changing', because it does not exist or you do not have permission." in text


def test_logins_are_kept_in_master(engine: Any) -> None:
    sa_run(engine, f"CREATE LOGIN persistent WITH PASSWORD = '{PW}'", database="master")
    again = ServerSecurity(engine)  # what a restart on the same data directory reads
    assert "persistent" in again.logins and not again.is_sysadmin("persistent") and again.is_sysadmin("sa")


def test_principals_survive_a_restart_on_the_same_data_dir() -> None:
    import shutil
    import tempfile
    from pathlib import Path

    from helpers.sqlserver import SqlServerEmulator

    # under /tmp: the backing PostgreSQL runs as the postgres user, which cannot enter pytest's tmp_path
    data_dir = Path(tempfile.mkdtemp(prefix="sqlserver-emulator-data-", dir="/tmp"))
    data_dir.chmod(0o755)
    em = SqlServerEmulator(data_dir=data_dir).start()
    try:
        em.execute(f"CREATE LOGIN keeper WITH PASSWORD = '{PW}'")
        em.execute("CREATE DATABASE kept")
        em.execute("CREATE TABLE dbo.t (id int); INSERT INTO dbo.t VALUES (3); CREATE TABLE dbo.hidden (id int)",
                   "kept")
        em.execute("CREATE USER keeper FOR LOGIN keeper; GRANT SELECT ON dbo.t TO keeper", "kept")
        em.kill()
        em.start()
        conn = pytds.connect(dsn=em.host, port=em.port, user="keeper", password=PW, database="kept",
                             autocommit=True, login_timeout=10)
        with conn.cursor() as cur:
            cur.execute("SELECT id FROM dbo.t")
            assert cur.fetchall() == [(3,)]
            with pytest.raises(pytds.Error) as info:
                cur.execute("SELECT id FROM dbo.hidden")
            assert info.value.number == 229
        conn.close()
    finally:
        em.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_only_sysadmin_creates_logins_and_only_db_owner_grants(engine: Any) -> None:
    new_user(engine, "plain")
    conn = login_as(engine, "plain", database="testDB")
    assert "User does not have permission to perform this action." in error_text(
        rows, conn, f"CREATE LOGIN sneaky WITH PASSWORD = '{PW}'")
    assert "User does not have permission to perform this action." in error_text(
        rows, conn, "GRANT SELECT ON dbo.customers TO plain")
    assert "CREATE TABLE permission denied in database 'testDB'." in error_text(
        rows, conn, "CREATE TABLE dbo.mine (id int)")
    conn.close()


# ------------------------------------------------------------------------------------------- object permissions
def test_user_without_grants_gets_229_per_operation(engine: Any) -> None:
    new_user(engine, "nogrants")
    conn = login_as(engine, "nogrants", database="testDB")
    assert DENIED.format("SELECT", "customers", "dbo") in error_text(rows, conn, "SELECT * FROM dbo.customers")
    assert DENIED.format("INSERT", "customers", "dbo") in error_text(
        rows, conn, "INSERT INTO dbo.customers VALUES (9, N'x')")
    assert DENIED.format("UPDATE", "customers", "dbo") in error_text(
        rows, conn, "UPDATE dbo.customers SET name = N'y' WHERE id = 1")
    assert DENIED.format("DELETE", "customers", "dbo") in error_text(rows, conn, "DELETE FROM dbo.customers")
    # the catalog stays usable
    assert ("customers",) in rows(conn, "SELECT name FROM sys.tables")
    assert rows(conn, "SELECT DB_NAME()") == [("testDB",)]
    conn.close()
    with pytds_login(engine, "nogrants", "testDB") as c, c.cursor() as cur:
        with pytest.raises(pytds.Error) as info:
            cur.execute("SELECT * FROM dbo.customers")
        assert (info.value.number, info.value.severity, info.value.state) == (229, 14, 5)
    # a permission error ends the statement, not the batch
    session = engine.open_session(LoginInfo(user="nogrants", password=PW, database="testDB"))
    try:
        out = list(session.execute_batch("SELECT name FROM dbo.customers; SELECT 42"))
    finally:
        session.close()
    assert isinstance(out[0], Message) and out[0].number == 229
    assert isinstance(out[-1], ResultSet) and list(out[-1].rows) == [(42,)]


def test_grant_then_success(engine: Any) -> None:
    new_user(engine, "granted", "GRANT SELECT, INSERT, UPDATE, DELETE ON OBJECT::dbo.orders TO granted")
    conn = login_as(engine, "granted", database="testDB")
    rows(conn, "INSERT INTO dbo.orders VALUES (100, 1)")
    rows(conn, "UPDATE dbo.orders SET qty = 2 WHERE id = 100")
    assert rows(conn, "SELECT qty FROM dbo.orders WHERE id = 100") == [(2,)]
    rows(conn, "DELETE FROM dbo.orders WHERE id = 100")
    assert DENIED.format("SELECT", "customers", "dbo") in error_text(rows, conn, "SELECT * FROM dbo.customers")
    sa_run(engine, "REVOKE INSERT ON dbo.orders FROM granted")
    assert DENIED.format("INSERT", "orders", "dbo") in error_text(rows, conn, "INSERT INTO dbo.orders VALUES (101, 1)")
    conn.close()


def test_deny_beats_a_roles_grant(engine: Any) -> None:
    new_user(engine, "denied", "CREATE ROLE readers", "GRANT SELECT ON dbo.customers TO readers",
             "ALTER ROLE readers ADD MEMBER denied")
    conn = login_as(engine, "denied", database="testDB")
    assert rows(conn, "SELECT name FROM dbo.customers WHERE id = 1") == [("Ann",)]
    sa_run(engine, "DENY SELECT ON dbo.customers TO denied")
    assert DENIED.format("SELECT", "customers", "dbo") in error_text(rows, conn, "SELECT name FROM dbo.customers")
    sa_run(engine, "REVOKE SELECT ON dbo.customers FROM denied")
    assert rows(conn, "SELECT name FROM dbo.customers WHERE id = 1") == [("Ann",)]
    # a DENY to the role beats a GRANT to the user as well
    sa_run(engine, "GRANT SELECT ON dbo.orders TO denied", "DENY SELECT ON SCHEMA::dbo TO readers")
    assert DENIED.format("SELECT", "orders", "dbo") in error_text(rows, conn, "SELECT * FROM dbo.orders")
    sa_run(engine, "REVOKE SELECT ON SCHEMA::dbo FROM readers")
    assert rows(conn, "SELECT qty FROM dbo.orders WHERE id = 1") == [(5,)]
    conn.close()


def test_db_datareader_reads_everything_and_writes_nothing(engine: Any) -> None:
    new_user(engine, "reader", "ALTER ROLE db_datareader ADD MEMBER reader")
    sa_run(engine, "CREATE TABLE dbo.later (id int)", "INSERT INTO dbo.later VALUES (7)")
    conn = login_as(engine, "reader", database="testDB")
    assert rows(conn, "SELECT name FROM dbo.customers WHERE id = 1") == [("Ann",)]
    assert rows(conn, "SELECT qty FROM dbo.orders WHERE id = 1") == [(5,)]
    assert rows(conn, "SELECT id FROM dbo.later") == [(7,)]  # created after the membership
    assert rows(conn, "SELECT COUNT(*) FROM cdc.change_tables") == [(1,)]
    assert DENIED.format("INSERT", "orders", "dbo") in error_text(rows, conn, "INSERT INTO dbo.orders VALUES (5, 5)")
    conn.close()


def test_db_owner_member_may_do_what_dbo_does(engine: Any) -> None:
    new_user(engine, "owner", "ALTER ROLE db_owner ADD MEMBER owner")
    conn = login_as(engine, "owner", database="testDB")
    rows(conn, "CREATE TABLE dbo.owned (id int PRIMARY KEY)")
    rows(conn, "INSERT INTO dbo.owned VALUES (1)")
    rows(conn, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'owned', @role_name = NULL")
    assert ("dbo_owned",) in rows(conn, "SELECT capture_instance FROM cdc.change_tables")
    assert "Caller is not authorized to initiate the requested action. Sysadmin privileges are required." in \
        error_text(rows, conn, "EXEC sys.sp_cdc_enable_db")
    conn.close()


# ------------------------------------------------------------------------------------------- CDC
def test_sp_cdc_enable_table_needs_db_owner(engine: Any) -> None:
    new_user(engine, "notowner", "GRANT SELECT ON dbo.orders TO notowner")
    conn = login_as(engine, "notowner", database="testDB")
    text = error_text(rows, conn, "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                                  "@role_name = NULL")
    assert "Caller is not authorized to initiate the requested action. DBO privileges are required." in text
    for call in ("EXEC sys.sp_cdc_help_jobs", "EXEC sys.sp_cdc_start_job", "EXEC sys.sp_cdc_stop_job",
                 "EXEC sys.sp_cdc_change_job @job_type = N'capture', @pollinginterval = 1",
                 "EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_customers', @low_water_mark = NULL"):
        assert "DBO privileges are required." in error_text(rows, conn, call), call
    assert "Sysadmin privileges are required." in error_text(rows, conn, "EXEC sys.sp_cdc_disable_db")
    conn.close()


def _wait_for_change(engine: Any, name: str) -> None:
    sa_run(engine, f"INSERT INTO dbo.customers VALUES ((SELECT MAX(id) + 1 FROM dbo.customers), N'{name}')")
    sa = connect(*engine.address, database="testDB")
    wait_for(lambda: rows(sa, "SELECT COUNT(*) FROM cdc.dbo_customers_CT WHERE name = ?", name)[0][0] > 0,
             "the capture job")
    sa.close()


AGENT = ("SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM [testDB].sys.dm_server_services dss "
         "WHERE dss.[servicename] LIKE N'SQL Server Agent (%';")
FUNCTION_QUERY = ("SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], [id], [name], "
                  "TODATETIMEOFFSET([testDB].sys.fn_cdc_map_lsn_to_time([__$start_lsn]), DATEPART(TZOFFSET, "
                  "SYSDATETIMEOFFSET())) FROM [testDB].cdc.[fn_cdc_get_all_changes_dbo_customers](?, ?, "
                  "N'all update old')  WHERE [__$start_lsn] <= ? ORDER BY [__$start_lsn] ASC, [__$seqval] ASC, "
                  "[__$operation] ASC")
DIRECT_QUERY = ("SELECT cdc_data.[__$start_lsn], cdc_data.[__$seqval], cdc_data.[__$operation], "
                "cdc_data.[__$update_mask], [cdc_data].[id], [cdc_data].[name], TODATETIMEOFFSET(ltm.tran_end_time, "
                "DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) FROM [testDB].cdc.[dbo_customers_CT] AS cdc_data "
                "LEFT JOIN [testDB].cdc.lsn_time_mapping ltm ON ltm.start_lsn = cdc_data.[__$start_lsn]  WHERE "
                "[cdc_data].[__$start_lsn] <= ? ORDER BY cdc_data.[__$start_lsn] ASC, cdc_data.[__$command_id] ASC, "
                "cdc_data.[__$seqval] ASC, cdc_data.[__$operation] ASC")


def test_least_privileged_cdc_reader_runs_debeziums_statements(engine: Any) -> None:
    new_user(engine, "dbz", "GRANT SELECT ON dbo.customers TO dbz", "ALTER ROLE cdc_reader ADD MEMBER dbz",
             "GRANT SELECT ON SCHEMA::cdc TO dbz")
    sa_run(engine, "GRANT VIEW SERVER STATE TO dbz", database="master")
    _wait_for_change(engine, "Bea")
    conn = login_as(engine, "dbz")  # Debezium's multi-database mode: master, three-part names
    assert len(rows(conn, "EXEC [testDB].sys.sp_cdc_help_change_data_capture")) == 1
    sa = connect(*engine.address)
    assert rows(conn, "SELECT COUNT(*) FROM [testDB].cdc.change_tables") == rows(
        sa, "SELECT COUNT(*) FROM [testDB].cdc.change_tables")
    sa.close()
    assert rows(conn, AGENT) == [(1,)]
    (to_lsn,), = rows(conn, "SELECT MAX(start_lsn) FROM (SELECT TOP (? + 1) start_lsn FROM "
                            "[testDB].cdc.lsn_time_mapping WHERE start_lsn >= ? AND tran_id <> 0x00 ORDER BY "
                            "start_lsn) as next_lsns", 500, b"\x00" * 10)
    assert isinstance(to_lsn, bytes) and len(to_lsn) == 10
    (max_lsn,), = rows(conn, "SELECT [testDB].sys.fn_cdc_get_max_lsn()")
    assert max_lsn >= to_lsn
    (min_lsn,), = rows(conn, "SELECT [testDB].sys.fn_cdc_get_min_lsn(?)", "dbo_customers")
    (incremented,), = rows(conn, "SELECT [testDB].sys.fn_cdc_increment_lsn(?)", min_lsn)
    assert incremented > min_lsn
    by_function = rows(conn, FUNCTION_QUERY, min_lsn, max_lsn, max_lsn)
    direct = rows(conn, DIRECT_QUERY, max_lsn)
    assert [r[5] for r in by_function if r[2] == 2] == [r[5] for r in direct if r[2] == 2]
    assert "Bea" in [r[5] for r in direct]
    conn.close()


def test_cdc_reader_outside_the_gating_role(engine: Any) -> None:
    new_user(engine, "outsider", "GRANT SELECT ON dbo.customers TO outsider", "GRANT SELECT ON SCHEMA::cdc TO outsider")
    _wait_for_change(engine, "Cid")
    conn = login_as(engine, "outsider", database="testDB")
    listed = rows(conn, "EXEC sys.sp_cdc_help_change_data_capture")
    assert all(r[2] != "dbo_customers" for r in listed)  # only the instance without a gating role
    min_lsn, max_lsn = rows(conn, "SELECT sys.fn_cdc_get_min_lsn('dbo_customers'), sys.fn_cdc_get_max_lsn()")[0]
    text = error_text(rows, conn, FUNCTION_QUERY.replace("[testDB].", ""), min_lsn, max_lsn, max_lsn)
    assert DENIED.format("SELECT", "fn_cdc_get_all_changes_dbo_customers", "cdc") in text
    text = error_text(rows, conn, DIRECT_QUERY, max_lsn)
    assert DENIED.format("SELECT", "dbo_customers_CT", "cdc") in text
    # no VIEW SERVER STATE: 300, then 297
    assert "VIEW SERVER STATE permission was denied on object 'server', database 'master'." in error_text(
        rows, conn, AGENT)
    session = engine.open_session(LoginInfo(user="outsider", password=PW, database="testDB"))
    try:
        out = list(session.execute_batch(AGENT + " SELECT 1"))
    finally:
        session.close()
    assert [(m.number, m.severity, m.text) for m in out[:2]] == [
        (300, 14, "VIEW SERVER STATE permission was denied on object 'server', database 'master'."),
        (297, 16, "The user does not have permission to perform this action.")]
    conn.close()


def test_no_access_path_of_debeziums_validation(engine: Any) -> None:
    new_user(engine, "nocdc", "GRANT SELECT ON dbo.customers TO nocdc")
    conn = login_as(engine, "nocdc")
    # the gating role hides dbo_customers; no SELECT on the source hides any other instance
    assert rows(conn, "EXEC [testDB].sys.sp_cdc_help_change_data_capture") == []
    assert DENIED.format("SELECT", "change_tables", "cdc") in error_text(
        rows, conn, "SELECT COUNT(*) FROM [testDB].cdc.change_tables")
    conn.close()


def test_sa_still_does_everything(engine: Any) -> None:
    new_user(engine, "listed")
    sa = connect(*engine.address, database="testDB")
    assert rows(sa, "SELECT COUNT(*) FROM cdc.change_tables")[0][0] >= 1
    assert any(r[2] == "dbo_customers" for r in rows(sa, "EXEC sys.sp_cdc_help_change_data_capture"))
    assert rows(sa, AGENT) == [(1,)]
    rows(sa, "INSERT INTO dbo.orders VALUES (500, 1)")
    rows(sa, "DELETE FROM dbo.orders WHERE id = 500")
    names = [r[0] for r in rows(sa, "SELECT name FROM sys.server_principals")]
    assert "sa" in names and "listed" in names
    sa.close()


def test_principal_statement_errors(engine: Any) -> None:
    sa_run(engine, f"CREATE LOGIN twice WITH PASSWORD = '{PW}'", database="master")
    sa_run(engine, "CREATE USER twice FOR LOGIN twice")
    assert "User, group, or role 'twice' already exists in the current database." in error_text(
        sa_run, engine, "CREATE USER twice FOR LOGIN twice")
    assert "The login already has an account under a different user name." in error_text(
        sa_run, engine, "CREATE USER other FOR LOGIN twice")
    assert "'ghost' is not a valid login or you do not have permission." in error_text(
        sa_run, engine, "CREATE USER ghost FOR LOGIN ghost")
    assert "Cannot alter the role 'nosuchrole', because it does not exist or you do not have permission." in \
        error_text(sa_run, engine, "ALTER ROLE nosuchrole ADD MEMBER twice")
    assert "Cannot find the object 'nosuchtable', because it does not exist or you do not have permission." in \
        error_text(sa_run, engine, "GRANT SELECT ON dbo.nosuchtable TO twice")
    assert "Permissions at the server scope can only be granted when the current database is master" in \
        error_text(sa_run, engine, "GRANT VIEW SERVER STATE TO twice")
    sa_run(engine, "DROP USER twice")
    assert "Cannot drop the user 'twice', because it does not exist or you do not have permission." in error_text(
        sa_run, engine, "DROP USER twice")
    sa_run(engine, "DROP LOGIN twice", database="master")


def test_gating_role_is_created_by_sp_cdc_enable_table(engine: Any) -> None:
    sa = connect(*engine.address, database="testDB")
    assert rows(sa, "SELECT role_name FROM cdc.change_tables WHERE capture_instance = 'dbo_customers'") == [
        ("cdc_reader",)]
    rows(sa, "CREATE ROLE probe_role")
    assert "User, group, or role 'cdc_reader' already exists in the current database." in error_text(
        rows, sa, "CREATE ROLE cdc_reader")
    sa.close()


# ------------------------------------------------------------------------------------------- Debezium itself
DBZ_GRANTS = """
USE master;
GO
CREATE LOGIN dbz WITH PASSWORD = 'Dbz#Passw0rd1';
GO
GRANT VIEW SERVER STATE TO dbz;
GO
USE basic_crud;
GO
CREATE USER dbz FOR LOGIN dbz;
GO
GRANT SELECT ON dbo.customers TO dbz;
GO
GRANT SELECT ON SCHEMA::cdc TO dbz;
GO
ALTER ROLE cdc_reader ADD MEMBER dbz;
GO
"""


def test_debezium_as_the_least_privileged_user_records_the_golden_file(tmp_path: Any) -> None:
    """basic_crud with a gating role and Debezium connecting as a login that has only what spec §4.7
    lists: the same events as the golden file recorded as sa."""
    import json

    from emulators.sqlserver import record as rec
    from emulators.sqlserver.jvm.classpath import DEBEZIUM_JARS, ClasspathError, find_classpath

    try:
        find_classpath(DEBEZIUM_JARS, prefer="maven")
    except ClasspathError as e:
        pytest.fail(f"Debezium/mssql-jdbc jars not found (run `bash scripts/setup.sh`): {e}")
    source = rec.HERE / "scenarios" / "basic_crud"
    scenario = tmp_path / "basic_crud_least_privileged"
    scenario.mkdir()
    setup = (source / "setup.sql").read_text(encoding="utf-8")
    assert "@role_name = NULL" in setup
    (scenario / "setup.sql").write_text(setup.replace("@role_name = NULL", "@role_name = N'cdc_reader'")
                                        + DBZ_GRANTS, encoding="utf-8")
    (scenario / "workload.sql").write_text((source / "workload.sql").read_text(encoding="utf-8"), encoding="utf-8")
    props = (source / "props.txt").read_text(encoding="utf-8")
    assert "database.user=sa" in props
    (scenario / "props.txt").write_text(props.replace("database.user=sa", "database.user=dbz").replace(
        "database.password=${PASSWORD}", "database.password=Dbz#Passw0rd1"), encoding="utf-8")

    password = "E2e-Emulator-Pw1"
    em = rec.start_emulator(password, tmp_path / "emulator.log")
    try:
        recording = rec.record(rec.Scenario.load(scenario), tmp_path / "out", emulator=em, password=password,
                               workdir=tmp_path, prefer="maven", startup_timeout=120, log=lambda _msg: None)
    finally:
        em.stop()
    assert recording.result.exit_code == 0

    def lines(path: Any) -> list[str]:
        with open(path, encoding="utf-8") as f:
            return [json.dumps(json.loads(x), ensure_ascii=False, separators=(",", ":")) for x in f if x.strip()]

    golden = rec.TESTS_DIR / "conformance" / "sqlserver" / "basic_crud" / "events.jsonl"
    assert lines(tmp_path / "out" / "events.jsonl") == lines(golden)

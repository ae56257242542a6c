"""SQL layer, catalogs: sys.* views and INFORMATION_SCHEMA over the registry, server-level views
(sys.databases, sys.dm_server_services), and the metadata procedures mssql-jdbc's DatabaseMetaData
calls (sp_columns_100 through the table-variable batch getColumns sends, sp_pkeys,
sp_statistics_100, sp_tables) with their exact shapes; plus the statements Debezium's SQL Server
connector sends, through the cdc layer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from emulators.sqlserver.engine.server import EmulatorServer
from emulators.sqlserver.engine.testing import collect, engine_with, param, session_in

GET_COLUMNS = (
    "DECLARE @mssqljdbc_temp_sp_columns_result TABLE(TABLE_QUALIFIER SYSNAME, TABLE_OWNER SYSNAME,"
    "TABLE_NAME SYSNAME, COLUMN_NAME SYSNAME, DATA_TYPE SMALLINT, TYPE_NAME SYSNAME, PRECISION INT,"
    "LENGTH INT, SCALE SMALLINT, RADIX SMALLINT, NULLABLE SMALLINT, REMARKS VARCHAR(254), COLUMN_DEF NVARCHAR(4000),"
    "SQL_DATA_TYPE SMALLINT, SQL_DATETIME_SUB SMALLINT, CHAR_OCTET_LENGTH INT, ORDINAL_POSITION INT,"
    "IS_NULLABLE VARCHAR(254), SS_IS_SPARSE SMALLINT, SS_IS_COLUMN_SET SMALLINT, SS_IS_COMPUTED SMALLINT,"
    "SS_IS_IDENTITY SMALLINT, SS_UDT_CATALOG_NAME NVARCHAR(128), SS_UDT_SCHEMA_NAME NVARCHAR(128),"
    "SS_UDT_ASSEMBLY_TYPE_NAME NVARCHAR(max), SS_XML_SCHEMACOLLECTION_CATALOG_NAME NVARCHAR(128),"
    "SS_XML_SCHEMACOLLECTION_SCHEMA_NAME NVARCHAR(128), SS_XML_SCHEMACOLLECTION_NAME NVARCHAR(128),"
    "SS_DATA_TYPE TINYINT);"
    "INSERT INTO @mssqljdbc_temp_sp_columns_result EXEC sp_columns_100 @P0,@P1,@P2,@P3,@P4,@P5;"
    "SELECT TABLE_QUALIFIER AS TABLE_CAT, TABLE_OWNER AS TABLE_SCHEM, TABLE_NAME, COLUMN_NAME, DATA_TYPE,"
    "TYPE_NAME, PRECISION AS COLUMN_SIZE, LENGTH AS BUFFER_LENGTH, SCALE AS DECIMAL_DIGITS, RADIX AS NUM_PREC_RADIX,"
    "NULLABLE, REMARKS, COLUMN_DEF, SQL_DATA_TYPE, SQL_DATETIME_SUB, CHAR_OCTET_LENGTH, ORDINAL_POSITION, IS_NULLABLE,"
    "NULL AS SCOPE_CATALOG, NULL AS SCOPE_SCHEMA, NULL AS SCOPE_TABLE, SS_DATA_TYPE AS SOURCE_DATA_TYPE,"
    "CASE SS_IS_IDENTITY WHEN 0 THEN 'NO' WHEN 1 THEN 'YES' WHEN '' THEN '' END AS IS_AUTOINCREMENT,"
    "CASE SS_IS_COMPUTED WHEN 0 THEN 'NO' WHEN 1 THEN 'YES' WHEN '' THEN '' END AS IS_GENERATEDCOLUMN, "
    "SS_IS_SPARSE, SS_IS_COLUMN_SET, SS_UDT_CATALOG_NAME, SS_UDT_SCHEMA_NAME, SS_UDT_ASSEMBLY_TYPE_NAME,"
    "SS_XML_SCHEMACOLLECTION_CATALOG_NAME, SS_XML_SCHEMACOLLECTION_SCHEMA_NAME, SS_XML_SCHEMACOLLECTION_NAME "
    "FROM @mssqljdbc_temp_sp_columns_result ORDER BY TABLE_CAT, TABLE_SCHEM, TABLE_NAME, ORDINAL_POSITION;")


@pytest.fixture(scope="module")
def server() -> Iterator[EmulatorServer]:
    with engine_with("""CREATE DATABASE Inventory; USE Inventory;
            CREATE TABLE dbo.Products (Id int IDENTITY(1,1) NOT NULL, Sku varchar(20) NOT NULL,
                Price decimal(10,2) NOT NULL DEFAULT 0, Updated datetime2(3) NULL, Notes nvarchar(max),
                Tag uniqueidentifier NULL,
                CONSTRAINT PK_Products PRIMARY KEY (Id), CONSTRAINT UQ_Products_Sku UNIQUE (Sku));
            CREATE INDEX IX_Products_Price ON dbo.Products (Price);
            INSERT INTO Products (Sku, Price) VALUES ('A-1', 9.99), ('B-2', 19.5)""", capture_interval=0.2) as srv:
        yield srv


@pytest.fixture()
def session(server: EmulatorServer) -> Iterator[Any]:
    with session_in(server, "Inventory") as s:
        yield s


def test_sys_tables_and_columns(session) -> None:
    out = collect(session.execute_batch(
        "SELECT name, object_id, schema_id, type, type_desc, is_ms_shipped, is_tracked_by_cdc FROM sys.tables"))
    assert out.types == ["nvarchar(128)", "int", "int", "char(2)", "nvarchar(60)", "bit", "bit"]
    ((name, object_id, schema_id, type_, desc, shipped, tracked),) = out.rows
    assert (name, schema_id, type_, desc, shipped, tracked) == ("Products", 1, "U ", "USER_TABLE", False, False)
    assert collect(session.execute_batch("SELECT OBJECT_ID('Inventory.dbo.Products'), OBJECT_ID('dbo.products')")
                   ).rows == [(object_id, object_id)]
    out = collect(session.execute_batch(
        "SELECT c.name, t.name AS type_name, c.max_length, c.precision, c.scale, c.is_nullable, c.is_identity "
        "FROM sys.columns c JOIN sys.types t ON t.user_type_id = c.user_type_id "
        f"WHERE c.object_id = {object_id} ORDER BY c.column_id"))
    assert out.types == ["nvarchar(128)", "nvarchar(128)", "smallint", "tinyint", "tinyint", "bit", "bit"]
    assert out.rows == [("Id", "int", 4, 10, 0, False, True), ("Sku", "varchar", 20, 0, 0, False, False),
                        ("Price", "decimal", 9, 10, 2, False, False), ("Updated", "datetime2", 7, 23, 3, True, False),
                        ("Notes", "nvarchar", -1, 0, 0, True, False),
                        ("Tag", "uniqueidentifier", 16, 0, 0, True, False)]


def test_indexes_keys_defaults_and_information_schema(session) -> None:
    out = collect(session.execute_batch(
        "SELECT i.name, i.index_id, i.type_desc, i.is_unique, i.is_primary_key, i.is_unique_constraint "
        "FROM sys.indexes i WHERE i.object_id = OBJECT_ID('dbo.Products') ORDER BY i.index_id"))
    assert out.rows == [("PK_Products", 1, "CLUSTERED", True, True, False),
                        ("UQ_Products_Sku", 2, "NONCLUSTERED", True, False, True),
                        ("IX_Products_Price", 3, "NONCLUSTERED", False, False, False)]
    out = collect(session.execute_batch(
        "SELECT name, type FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID('dbo.Products') ORDER BY name"))
    assert out.rows == [("PK_Products", "PK"), ("UQ_Products_Sku", "UQ")]
    out = collect(session.execute_batch("SELECT definition FROM sys.default_constraints"))
    assert out.rows == [("((0))",)]
    out = collect(session.execute_batch(
        "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, IS_NULLABLE "
        "FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'Products' ORDER BY ORDINAL_POSITION"))
    assert out.names == ["TABLE_NAME", "COLUMN_NAME", "DATA_TYPE", "CHARACTER_MAXIMUM_LENGTH", "NUMERIC_PRECISION",
                         "IS_NULLABLE"]
    assert out.rows[:3] == [("Products", "Id", "int", None, 10, "NO"), ("Products", "Sku", "varchar", 20, None, "NO"),
                            ("Products", "Price", "decimal", None, 10, "NO")]
    out = collect(session.execute_batch(
        "SELECT k.COLUMN_NAME FROM INFORMATION_SCHEMA.TABLE_CONSTRAINTS t JOIN INFORMATION_SCHEMA.KEY_COLUMN_USAGE k "
        "ON k.CONSTRAINT_NAME = t.CONSTRAINT_NAME WHERE t.CONSTRAINT_TYPE = 'PRIMARY KEY'"))
    assert out.rows == [("Id",)]
    out = collect(session.execute_batch("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM INFORMATION_SCHEMA.TABLES"))
    assert out.rows == [("dbo", "Products", "BASE TABLE")]


def test_jdbc_get_columns_batch(session) -> None:
    out = collect(session.execute_rpc("sp_executesql", [
        param(GET_COLUMNS, "nvarchar(max)"),
        param("@P0 nvarchar(4000),@P1 nvarchar(4000),@P2 nvarchar(4000),@P3 nvarchar(4000),@P4 int,@P5 int"),
        param("Products"), param("dbo"), param("Inventory"), param("%"), param(2, "int"), param(3, "int")]))
    assert out.error is None, out.error
    assert out.names[:18] == ["TABLE_CAT", "TABLE_SCHEM", "TABLE_NAME", "COLUMN_NAME", "DATA_TYPE", "TYPE_NAME",
                              "COLUMN_SIZE", "BUFFER_LENGTH", "DECIMAL_DIGITS", "NUM_PREC_RADIX", "NULLABLE",
                              "REMARKS", "COLUMN_DEF", "SQL_DATA_TYPE", "SQL_DATETIME_SUB", "CHAR_OCTET_LENGTH",
                              "ORDINAL_POSITION", "IS_NULLABLE"]
    assert out.names[21:24] == ["SOURCE_DATA_TYPE", "IS_AUTOINCREMENT", "IS_GENERATEDCOLUMN"]
    assert len(out.names) == 32
    cols = {r[3]: r for r in out.rows}
    assert [r[3] for r in out.rows] == ["Id", "Sku", "Price", "Updated", "Notes", "Tag"]
    # DATA_TYPE, TYPE_NAME, COLUMN_SIZE, BUFFER_LENGTH, DECIMAL_DIGITS, NUM_PREC_RADIX, NULLABLE
    assert cols["Id"][4:11] == (4, "int identity", 10, 4, 0, 10, 0)
    assert cols["Id"][22] == "YES"
    assert cols["Sku"][4:11] == (12, "varchar", 20, 20, None, None, 0)
    assert cols["Price"][4:13] == (3, "decimal", 10, 12, 2, 10, 0, None, "((0))")
    assert cols["Updated"][4:11] == (93, "datetime2", 23, 16, 3, None, 1)
    assert cols["Notes"][4:8] == (-9, "nvarchar", 0, 0)   # (max): 0, the driver turns it into its maximum
    assert cols["Tag"][4:8] == (-11, "uniqueidentifier", 36, 16)
    assert cols["Sku"][16:18] == (2, "NO") and cols["Sku"][22] == "NO"


def test_sp_pkeys_statistics_tables(session) -> None:
    out = collect(session.execute_rpc("sp_pkeys", [param("Products"), param("dbo"), param("Inventory")]))
    assert out.names == ["TABLE_QUALIFIER", "TABLE_OWNER", "TABLE_NAME", "COLUMN_NAME", "KEY_SEQ", "PK_NAME"]
    assert out.types == ["nvarchar(128)"] * 4 + ["smallint", "nvarchar(128)"]
    assert out.rows == [("Inventory", "dbo", "Products", "Id", 1, "PK_Products")]
    out = collect(session.execute_rpc("sp_statistics_100", [
        param("Products"), param("dbo"), param("Inventory"), param("%"), param("N"), param("Q")]))
    assert out.names == ["TABLE_QUALIFIER", "TABLE_OWNER", "TABLE_NAME", "NON_UNIQUE", "INDEX_QUALIFIER",
                         "INDEX_NAME", "TYPE", "SEQ_IN_INDEX", "COLUMN_NAME", "COLLATION", "CARDINALITY", "PAGES",
                         "FILTER_CONDITION"]
    assert [(r[3], r[5], r[6], r[7], r[8]) for r in out.rows] == [
        (None, None, 0, None, None), (0, "PK_Products", 1, 1, "Id"), (0, "UQ_Products_Sku", 3, 1, "Sku"),
        (1, "IX_Products_Price", 3, 1, "Price")]
    assert out.rows[0][10] == 2   # table cardinality
    out = collect(session.execute_rpc("sp_statistics_100", [
        param("Products"), param("dbo"), param("Inventory"), param("%"), param("Y"), param("Q")]))
    assert [r[5] for r in out.rows] == [None, "PK_Products", "UQ_Products_Sku"]
    out = collect(session.execute_rpc("sp_tables", [param(None), param("dbo"), param("Inventory"),
                                                    param("'TABLE'")]))
    assert out.names == ["TABLE_QUALIFIER", "TABLE_OWNER", "TABLE_NAME", "TABLE_TYPE", "REMARKS"]
    assert out.rows == [("Inventory", "dbo", "Products", "TABLE", None)]
    out = collect(session.execute_rpc("sp_tables", [param(""), param(""), param("%"), param(None)]))
    assert ("Inventory", None, None, None, None) in out.rows and ("master", None, None, None, None) in out.rows


def test_server_level_views(server: EmulatorServer, session) -> None:
    out = collect(session.execute_batch(
        "SELECT name, database_id, is_cdc_enabled, state_desc, collation_name FROM sys.databases ORDER BY database_id"))
    assert out.rows[0] == ("master", 1, False, "ONLINE", "SQL_Latin1_General_CP1_CI_AS")
    assert out.rows[1][:2] == ("Inventory", 5)
    query = ("SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM [Inventory].sys.dm_server_services "
             "dss WHERE dss.[servicename] LIKE N'SQL Server Agent (%';")
    assert collect(session.execute_batch(query)).rows == [(1,)]
    server.agent_running = False
    try:
        assert collect(session.execute_batch(query)).rows == [(0,)]
    finally:
        server.agent_running = True
    out = collect(session.execute_batch("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int), "
                                        "SERVERPROPERTY('ProductVersion')"))
    assert out.rows[0][0] == 3 and out.rows[0][1].value.startswith("16.0.")


def test_debezium_statements_over_cdc(server: EmulatorServer, session) -> None:
    out = collect(session.execute_batch(
        "EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', "
        "@source_name = N'Products', @role_name = NULL, @supports_net_changes = 0"))
    assert out.error is None and out.errors == [], out.errors
    out = collect(session.execute_batch("SELECT name, is_cdc_enabled FROM sys.databases WHERE name = 'Inventory'"))
    assert out.rows == [("Inventory", True)]
    out = collect(session.execute_batch("SELECT is_tracked_by_cdc FROM sys.tables WHERE name = 'Products'"))
    assert out.rows == [(True,)]
    out = collect(session.execute_batch(
        "WITH ordered_change_tables AS (SELECT ROW_NUMBER() OVER (PARTITION BY ct.source_object_id, ct.start_lsn "
        "ORDER BY ct.create_date DESC) AS ct_sequence, ct.* FROM [Inventory].cdc.change_tables AS ct) "
        "SELECT OBJECT_SCHEMA_NAME(source_object_id, DB_ID('Inventory')), OBJECT_NAME(source_object_id, "
        "DB_ID('Inventory')), capture_instance, object_id, start_lsn FROM ordered_change_tables WHERE ct_sequence = 1"))
    assert out.error is None, out.error
    assert out.rows[0][:3] == ("dbo", "Products", "dbo_Products")
    assert out.types[4] == "binary(10)"
    collect(session.execute_batch("UPDATE Products SET Price = 1.25 WHERE Sku = 'A-1'"))
    deadline = time.monotonic() + 15
    rows: list = []
    while time.monotonic() < deadline:
        mx = collect(session.execute_batch("SELECT [Inventory].sys.fn_cdc_get_max_lsn()")).rows[0][0]
        mn = collect(session.execute_batch("SELECT [Inventory].sys.fn_cdc_get_min_lsn('dbo_Products')")).rows[0][0]
        query = ("SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], *, "
                 "TODATETIMEOFFSET([Inventory].sys.fn_cdc_map_lsn_to_time([__$start_lsn]), "
                 "DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) FROM [Inventory].cdc.[fn_cdc_get_all_changes_dbo_Products]"
                 "(@P0, @P1, N'all update old') order by [__$start_lsn] ASC, [__$seqval] ASC, [__$operation] ASC")
        out = collect(session.execute_rpc("sp_executesql", [
            param(query, "nvarchar(max)"), param("@P0 binary(10),@P1 binary(10)"), param(mn, "binary(10)"),
            param(mx, "binary(10)")]))
        if out.error is not None and out.error.message.number == 313:
            # the capture job has not scanned past the instance's start yet (SQL Server says 313 too)
            time.sleep(0.3)
            continue
        assert out.error is None, out.error
        rows = out.rows
        if len(rows) >= 2:
            break
        time.sleep(0.3)
    assert [r[2] for r in rows] == [3, 4]
    names = out.names
    assert names[:4] == ["__$start_lsn", "__$seqval", "__$operation", "__$update_mask"]
    assert out.types[0] == "binary(10)" and out.types[-1] == "datetimeoffset(7)"
    price = names.index("Price")
    assert [str(r[price]) for r in rows] == ["9.99", "1.25"]
    # data.query.mode=direct (Debezium 3.6.3), with the markers as mssql-jdbc rewrites them
    direct = ("SELECT cdc_data.[__$start_lsn], cdc_data.[__$seqval], cdc_data.[__$operation], "
              "cdc_data.[__$update_mask], [cdc_data].[Id], [cdc_data].[Price], TODATETIMEOFFSET(ltm.tran_end_time, "
              "DATEPART(TZOFFSET, SYSDATETIMEOFFSET())) FROM [Inventory].cdc.[dbo_Products_CT] AS cdc_data LEFT JOIN "
              "[Inventory].cdc.lsn_time_mapping ltm ON ltm.start_lsn = cdc_data.[__$start_lsn]  WHERE "
              "(([cdc_data].[__$start_lsn] =  @P0  AND [cdc_data].[__$seqval] =  @P1  AND [cdc_data].[__$operation] >"
              "  @P2 ) OR ([cdc_data].[__$start_lsn] =  @P3  AND [cdc_data].[__$seqval] >  @P4 ) OR "
              "([cdc_data].[__$start_lsn] >  @P5 )) AND [cdc_data].[__$start_lsn] <=  @P6  ORDER BY "
              "cdc_data.[__$start_lsn] ASC, cdc_data.[__$command_id] ASC, cdc_data.[__$seqval] ASC, "
              "cdc_data.[__$operation] ASC")
    zero = bytes(10)
    binary = "varbinary(8000)"
    out = collect(session.execute_rpc("sp_executesql", [
        param(direct),
        param("@P0 varbinary(8000),@P1 varbinary(8000),@P2 int,@P3 varbinary(8000),@P4 varbinary(8000),"
              "@P5 varbinary(8000),@P6 varbinary(8000)"),
        param(zero, binary), param(zero, binary), param(0, "int"), param(zero, binary), param(zero, binary),
        param(zero, binary), param(mx, binary)]))
    assert out.error is None, out.error
    assert [(r[2], str(r[5])) for r in out.rows] == [(3, "9.99"), (4, "1.25")]
    assert out.types[-1] == "datetimeoffset(7)"
    # getTables as the connector calls it lists the table, not the cdc objects (SYSTEM TABLE)
    types = "'" + "''VIEW'',''MATERIALIZED VIEW'',''TABLE''" + "'"
    out = collect(session.execute_rpc("sp_executesql", [
        param("EXEC sp_tables  @P0 ,  @P1 ,  @P2 ,  @P3 "),
        param("@P0 nvarchar(4000),@P1 nvarchar(4000),@P2 nvarchar(4000),@P3 nvarchar(4000)"),
        param("%"), param(None), param("Inventory"), param(types)]))
    assert [r[:4] for r in out.rows] == [("Inventory", "dbo", "Products", "TABLE")]


def test_database_name_lookup_is_case_insensitive_and_returns_the_original_spelling(session) -> None:
    out = collect(session.execute_rpc("sp_executesql", [
        param("SELECT name FROM sys.databases WHERE name =  @P0 "), param("@P0 nvarchar(4000)"),
        param("INVENTORY")]))
    assert out.error is None and out.rows == [("Inventory",)]


class _ActsBetweenQueries:
    """A connection whose first SELECT is followed by another session's statement (``act``)."""

    def __init__(self, conn: Any, act: Any) -> None:
        self._conn = conn
        self._act = act
        self.autocommit = conn.autocommit
        self.info = conn.info

    def cursor(self) -> Any:
        outer = self

        class Cursor:
            def __init__(self, inner: Any) -> None:
                self._inner = inner

            def __enter__(self) -> Cursor:
                return self

            def __exit__(self, *exc: object) -> None:
                self._inner.close()

            def execute(self, sql: str, *args: Any) -> None:
                self._inner.execute(sql, *args)
                if outer._act is not None and sql.startswith("SELECT"):
                    act, outer._act = outer._act, None
                    act()

            def fetchall(self) -> list[Any]:
                return self._inner.fetchall()

        return Cursor(self._conn.cursor())

    def rollback(self) -> None:
        self._conn.rollback()


def _run(session: Any, sql: str) -> None:
    assert collect(session.execute_batch(sql)).error is None


@pytest.mark.parametrize("in_transaction", [False, True])
def test_a_table_created_while_the_registry_loads_waits_for_the_next_load(server: EmulatorServer,
                                                                          in_transaction: bool) -> None:
    """The registry reads objects, columns, indexes and attributes in four statements. A table another
    session creates in between (sp_cdc_enable_table creating a change table while a connector reads
    cdc.lsn_time_mapping) is found by the next load, not a KeyError in the middle of the connector's
    query: outside a transaction the load reads one snapshot (the table is not in it at all); inside
    the reader's transaction each statement sees the commits made before it."""
    registry = server.database("Inventory").registry
    with session_in(server, "Inventory") as reader, session_in(server, "Inventory") as other:
        if in_transaction:
            _run(reader, "BEGIN TRANSACTION")
        conn = reader._conn("Inventory")
        try:
            registry._load(_ActsBetweenQueries(conn, lambda: _run(other, "CREATE TABLE dbo.Racing (Id int NOT NULL)")))
            assert registry.lookup(conn, "dbo", "Racing") is not None  # the miss reloads
        finally:
            if in_transaction:
                _run(reader, "ROLLBACK TRANSACTION")
            collect(other.execute_batch("DROP TABLE dbo.Racing"))  # 3701 when the test failed before creating it


def test_a_table_dropped_while_the_registry_loads_is_not_left_without_columns(server: EmulatorServer) -> None:
    """Statements each seeing the newest commits would load the table from the first one and none of
    its columns from the next ones (the drop's own invalidate() comes after; a lookup in between got a
    table without columns): the load reads one snapshot, in which the table still has its columns."""
    registry = server.database("Inventory").registry
    with session_in(server, "Inventory") as reader, session_in(server, "Inventory") as other:
        _run(other, "CREATE TABLE dbo.Doomed (Id int NOT NULL, Name nvarchar(10) NULL)")
        try:
            conn = reader._conn("Inventory")
            registry._load(_ActsBetweenQueries(conn, lambda: _run(other, "DROP TABLE dbo.Doomed")))
            doomed = [o for o in registry._by_id.values() if o.name == "Doomed"]
            assert [[c.name for c in o.columns] for o in doomed] == [["Id", "Name"]]
        finally:
            collect(other.execute_batch("DROP TABLE dbo.Doomed"))  # 3701 when the load dropped it

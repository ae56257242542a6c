"""The catalog query and `column_from_catalog` against what mssql-jdbc's DatabaseMetaData.getColumns
reports for the same columns (Debezium's source of type names, lengths and scales), and the
column descriptions the schema history stores and reads back."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest

from emulators.sqlserver.jvm.classpath import JDBC_JARS, ClasspathError, find_classpath
from emulators.sqlserver.jvm.launch import run_jdbc_probe, source_launcher_problem
from headwater.connectors.sqlserver.columns import JDBC_TYPES, CatalogColumn, column_from_catalog, columns_query
from headwater.connectors.sqlserver.types import column_from_description, describe_column
from headwater.relational.table import Table, TableId
from helpers.sqlserver import SqlServerEmulator

TABLE = """CREATE TABLE dbo.cols (
    id int IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    c_bit bit NOT NULL DEFAULT ((0)), c_tinyint tinyint, c_smallint smallint, c_bigint bigint DEFAULT ((3147483648.)),
    c_real real, c_float float, c_float24 float(24), c_decimal decimal(6, 3), c_numeric numeric,
    c_numeric_38 numeric(38, 10),
    c_smallmoney smallmoney, c_money money,
    c_char char(3), c_varchar varchar(1000), c_varchar_max varchar(max), c_text text,
    c_nchar nchar(3), c_nvarchar nvarchar(50) DEFAULT (N'x'), c_nvarchar_max nvarchar(max), c_ntext ntext, c_xml xml,
    c_uniqueidentifier uniqueidentifier, c_date date, c_time0 time(0), c_time2 time(2), c_time7 time,
    c_datetime datetime DEFAULT (getdate()), c_smalldatetime smalldatetime, c_datetime2_0 datetime2(0),
    c_datetime2_4 datetime2(4), c_datetime2_7 datetime2, c_datetimeoffset datetimeoffset(3),
    c_datetimeoffset7 datetimeoffset,
    c_binary binary(4), c_varbinary varbinary(16), c_varbinary_max varbinary(max), c_image image,
    c_rowversion rowversion NOT NULL
)"""


def _catalog(sqlserver: SqlServerEmulator, db: str) -> list[CatalogColumn]:
    with contextlib.closing(sqlserver.connect(db)) as conn:
        cur = conn.cursor()
        cur.execute(columns_query(db))
        return [CatalogColumn.from_row(r) for r in cur.fetchall()]


def test_catalog_columns_in_order(sqlserver: SqlServerEmulator, sqlserver_db: str) -> None:
    sqlserver.execute("CREATE TABLE dbo.b (z int NOT NULL, a nvarchar(10) NULL)", database=sqlserver_db)
    sqlserver.execute("CREATE TABLE dbo.a (k bigint NOT NULL, dropped int, kept date)", database=sqlserver_db)
    sqlserver.execute("ALTER TABLE dbo.a DROP COLUMN dropped", database=sqlserver_db)
    got = [(c.schema, c.table, c.name, c.ordinal, c.type_name, c.nullable) for c in _catalog(sqlserver, sqlserver_db)]
    assert got == [("dbo", "a", "k", 1, "bigint", False), ("dbo", "a", "kept", 2, "date", True),
                   ("dbo", "b", "z", 1, "int", False), ("dbo", "b", "a", 2, "nvarchar", True)]


@pytest.fixture
def jdbc_columns(sqlserver: SqlServerEmulator, sqlserver_db: str) -> dict[str, dict[str, Any]]:
    problem = source_launcher_problem()
    if problem is not None:
        pytest.skip(problem)
    try:
        find_classpath(JDBC_JARS)
    except ClasspathError as exc:
        pytest.skip(str(exc))
    sqlserver.execute(TABLE, database=sqlserver_db)
    out = run_jdbc_probe(sqlserver.address, sqlserver.password,
                         [{"op": "metadata", "method": "getColumns", "args": [sqlserver_db, "dbo", "cols", None]}],
                         url_properties=f"databaseName={sqlserver_db}")
    rs = next(line["resultset"] for line in out if "resultset" in line)
    names = [c["name"] for c in rs["columns"]]
    rows = [dict(zip(names, [cell.get("string") if cell else None for cell in row])) for row in rs["rows"]]
    return {r["COLUMN_NAME"]: r for r in rows}


def test_lengths_and_scales_are_mssql_jdbc_getcolumns(sqlserver: SqlServerEmulator, sqlserver_db: str,
                                                      jdbc_columns: dict[str, dict[str, Any]]) -> None:
    catalog = [c for c in _catalog(sqlserver, sqlserver_db) if c.table == "cols"]
    assert [c.name for c in catalog] == list(jdbc_columns)
    for c in catalog:
        column = column_from_catalog(c)
        jdbc = jdbc_columns[c.name]
        want = (jdbc["TYPE_NAME"], int(jdbc["DATA_TYPE"]), int(jdbc["COLUMN_SIZE"]),
                None if jdbc["DECIMAL_DIGITS"] is None else int(jdbc["DECIMAL_DIGITS"]),
                jdbc["NULLABLE"] == "1", jdbc["COLUMN_DEF"], int(jdbc["ORDINAL_POSITION"]))
        got = (column.type_name, JDBC_TYPES[c.type_name], column.length, column.scale, column.optional,
               column.default_expression, column.position)
        assert got == want, c.name


def test_history_description_round_trip(sqlserver: SqlServerEmulator, sqlserver_db: str) -> None:
    sqlserver.execute(TABLE, database=sqlserver_db)
    columns = tuple(column_from_catalog(c) for c in _catalog(sqlserver, sqlserver_db) if c.table == "cols")
    table = Table(TableId(sqlserver_db, "dbo", "cols"), columns, ("id",))
    for column in columns:
        d = describe_column(table, column)
        back = column_from_description(d.to_json(), "dbo", "cols")  # the history's rendering
        assert (back.name, back.type_name, back.length, back.scale, back.optional, back.default_expression,
                back.position) == (column.name, column.type_name, column.length, column.scale, column.optional,
                                   column.default_expression, column.position)
        assert describe_column(table, back) == d


def test_descriptions_equal_golden_schema_changes(sqlserver: SqlServerEmulator) -> None:
    """The columns of the include_schema_changes scenario's CREATE events, described from the catalog."""
    import json
    from pathlib import Path

    from emulators.sqlserver.record import run_batches, split_batches
    from headwater.relational.schema_change import table_change

    tests = Path(__file__).resolve().parents[2]
    name = f"hwisc{os.getpid()}"
    setup = (tests / "emulators/sqlserver/scenarios/include_schema_changes/setup.sql").read_text()
    setup = setup.replace("include_schema_changes", name)
    with contextlib.closing(sqlserver.connect()) as conn:
        run_batches(conn, split_batches(setup))
    try:
        catalog = _catalog(sqlserver, name)
    finally:
        sqlserver.execute(f"DROP DATABASE {name}")  # CDC databases hold backing-store resources
    events = [json.loads(line) for line in
              (tests / "conformance/sqlserver/include_schema_changes/events.jsonl").read_text().splitlines()]
    creates = {}
    for e in events:
        for change in (e["value"] or {}).get("payload", {}).get("tableChanges") or []:
            if change["type"] == "CREATE":
                creates.setdefault(change["id"].split(".")[-1].strip('"'), change["table"]["columns"])
    assert set(creates) == {"products", "not_captured", "brands"}
    for table_name in ("products", "not_captured"):
        columns = tuple(column_from_catalog(c) for c in catalog if c.table == table_name)
        table = Table(TableId(name, "dbo", table_name), columns, ("id",))
        got = table_change("CREATE", table, describe_column).to_struct()["table"]["columns"]
        assert json.dumps(got) == json.dumps(creates[table_name])

"""docs/configuration.md's SQL Server section and docs/sqlserver.md: generated, complete, and what
docs/sqlserver.md shows works (its configuration loads, its grants let a login run the statements the
connector sends, against the emulator)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import mssql_python
import pytest

from headwater.config import connector_fields, load
from headwater.config.docs import render_markdown
from headwater.connectors.sqlserver.config import SQLSERVER_FIELDS
from helpers.sqlserver import SqlServerEmulator, wait_for

DOCS = Path(__file__).resolve().parents[3] / "docs"
GUIDE = DOCS / "sqlserver.md"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end == -1 else text[start:end]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    text = heading.lstrip("#").strip().lower().replace("`", "")
    return re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-")


def test_the_reference_is_generated_and_current() -> None:
    assert (DOCS / "configuration.md").read_text(encoding="utf-8") == render_markdown(), (
        "docs/configuration.md is stale: run `python -m headwater.config.docs > docs/configuration.md`")


def test_every_sqlserver_property_is_documented_once_where_it_applies() -> None:
    text = render_markdown()
    section = _section(text, "## Connector `sqlserver`")
    assert "`io.debezium.connector.sqlserver.SqlServerConnector`" in section
    shared = _section(text, "## Properties of every database connector")
    postgres = _section(text, "## Connector `postgresql`")
    for f in connector_fields("sqlserver"):
        assert f"`{f.name}`" in text, f.name
        if f.ignored_reason:
            assert f.ignored_reason in text, f.name
        else:
            assert f.doc, f"{f.name} has no doc"
    for f in SQLSERVER_FIELDS:
        if f.ignored_reason:
            continue
        row = f"| `{f.name}`"
        # a definition of its own appears in the SQL Server section, a shared one in the shared section
        assert (row in section) != (row in shared), f.name
    # SQL Server-only properties stay out of PostgreSQL's section, and the other way round
    for name in ("database.names", "data.query.mode", "max.iteration.transactions", "table.ignore.builtin"):
        assert f"| `{name}`" not in postgres
    assert "| `database.dbname`" not in section and "| `slot.name`" not in section
    # a common property SQL Server defines its own way says so in the common section
    common = _section(text, "## Common properties")
    assert "Connector `sqlserver` defines it its own way" in common
    for d in SQLSERVER_FIELDS.dynamic:
        assert d.pattern in text


def test_ignored_properties_name_their_connector() -> None:
    table = _section(render_markdown(), "## Accepted but ignored")
    assert "| Property | Connectors | Why it is ignored |" in table
    assert re.search(r"\| `include.schema.changes` \| `postgresql` \|", table)
    assert re.search(r"\| `snapshot.max.threads` \| `sqlserver` \|", table)
    assert re.search(r"\| `transforms` \| all \|", table)


def test_the_guide_links_to_existing_reference_sections() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    anchors = {_anchor(line) for line in (DOCS / "configuration.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("#")}
    links = re.findall(r"\(configuration\.md#([^)]+)\)", guide)
    assert links and all(link in anchors for link in links), (links, sorted(anchors))
    for topic in ("sp_cdc_enable_db", "sp_cdc_enable_table", "VIEW SERVER STATE", "GRANT SELECT ON SCHEMA::cdc",
                  "data.query.mode", "snapshot.isolation.mode", "database.names", '"databases"'):
        assert topic in guide, topic


def test_the_guides_configuration_loads(tmp_path: Path) -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```properties\n(.*?)```", guide, re.DOTALL)
                if "debezium.source.connector.class" in b]
    path = tmp_path / "application.properties"
    path.write_text(block, encoding="utf-8")
    config = load(path)
    assert config.connector_key == "sqlserver" and config.sink_type == "jsonl"
    assert config.connector.get("database.names") == ["inventory"]
    assert config.warnings == []


# ------------------------------------------------------------------------------------------ permissions


def _grant_batches(database: str, login: str, password: str) -> list[str]:
    """The least-privileged user's SQL from docs/sqlserver.md, for this database and login."""
    guide = GUIDE.read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```sql\n(.*?)```", guide, re.DOTALL) if "CREATE LOGIN" in b]
    sql = (block.replace("inventory", database).replace("dbz", login)
           .replace("<a strong password>", password))
    return [b.strip() for b in re.split(r"^GO\s*$", sql, flags=re.MULTILINE) if b.strip()]


def _rows(conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    cur = conn.cursor()
    cur.execute(sql, *params) if params else cur.execute(sql)
    return [tuple(r) for r in cur.fetchall()] if cur.description else []


def test_the_documented_grants_let_a_login_run_the_connectors_statements(
        sqlserver: SqlServerEmulator, sqlserver_db: str) -> None:
    db = sqlserver_db
    for table in ("customers", "orders"):
        sqlserver.execute(f"CREATE TABLE dbo.{table} (id int PRIMARY KEY, name nvarchar(50))", database=db)
        sqlserver.execute(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{table}', "
                          "@role_name = N'cdc_reader', @supports_net_changes = 0", database=db)
    sqlserver.execute("INSERT INTO dbo.customers VALUES (1, N'Ann')", database=db)
    login, password = f"reader_{db}", "Reader#Passw0rd1"
    sa = sqlserver.connect()
    try:
        for batch in _grant_batches(db, login, password):
            sa.cursor().execute(batch)
    finally:
        sa.close()

    # several databases: the connector stays in the login's default database and uses three-part names
    conn = mssql_python.connect(f"Server={sqlserver.host},{sqlserver.port};UID={login};PWD={{{password}}};"
                                "Database=master;Encrypt=no;TrustServerCertificate=yes")
    conn.autocommit = True
    try:
        listed = _rows(conn, f"EXEC [{db}].sys.sp_cdc_help_change_data_capture")
        assert sorted(r[2] for r in listed) == ["dbo_customers", "dbo_orders"]
        assert len(_rows(conn, f"SELECT object_id, column_name FROM [{db}].cdc.captured_columns")) == 4
        agent = (f"SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM [{db}].sys.dm_server_services "
                 "dss WHERE dss.[servicename] LIKE N'SQL Server Agent (%';")
        assert _rows(conn, agent) == [(1,)]
        max_lsn = wait_for(lambda: _rows(conn, f"SELECT MAX(start_lsn) FROM [{db}].cdc.lsn_time_mapping "
                                               "WHERE tran_id <> 0x00")[0][0], "a captured transaction")
        assert _rows(conn, f"SELECT [{db}].sys.fn_cdc_get_max_lsn()")[0][0] >= max_lsn
        # the snapshot's schema lock and read (repeatable_read / exclusive)
        conn.autocommit = False
        _rows(conn, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        _rows(conn, f"SELECT TOP(0) * FROM [{db}].[dbo].[customers] WITH (TABLOCKX)")
        assert _rows(conn, f"SELECT [id], [name] FROM [{db}].[dbo].[customers]") == [(1, "Ann")]
        conn.rollback()
        conn.autocommit = True
        # the changes, both data.query.mode values
        direct = _rows(conn, f"SELECT [__$start_lsn], [__$operation], [name] FROM [{db}].cdc.[dbo_customers_CT] "
                             "WHERE [__$start_lsn] <= ?", max_lsn)
        (min_lsn,), = _rows(conn, f"SELECT [{db}].sys.fn_cdc_get_min_lsn(?)", "dbo_customers")
        function = _rows(conn, f"SELECT [__$start_lsn], [__$operation], [name] FROM "
                               f"[{db}].cdc.[fn_cdc_get_all_changes_dbo_customers](?, ?, N'all update old')",
                         min_lsn, max_lsn)
        assert direct == function and [r[1:] for r in direct] == [(2, "Ann")]
    finally:
        conn.close()

    # the gating role is what opens the change table: without it the same read is refused
    sqlserver.execute(f"ALTER ROLE cdc_reader DROP MEMBER {login}", database=db)
    conn = mssql_python.connect(f"Server={sqlserver.host},{sqlserver.port};UID={login};PWD={{{password}}};"
                                "Database=master;Encrypt=no;TrustServerCertificate=yes")
    try:
        with pytest.raises(mssql_python.Error, match="permission was denied"):
            _rows(conn, f"SELECT [__$start_lsn] FROM [{db}].cdc.[dbo_customers_CT]")
    finally:
        conn.close()

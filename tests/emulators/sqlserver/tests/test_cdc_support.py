"""Helpers for the CDC tests (no tests here): a backing database with the registry, source tables
registered as the engine registers them, procedure calls in a transaction of their own, and
fn_cdc_get_all_changes through the subquery the translator substitutes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg2
import pytest
from psycopg2 import sql

from emulators.sqlserver.cdc import CaptureJobs, CdcContext, all_changes_sql_for
from emulators.sqlserver.cdc.procedures import PROCEDURES
from emulators.sqlserver.results import ResultSet

REGISTRY_DDL = """
CREATE SCHEMA IF NOT EXISTS hw_emulator;
CREATE TABLE hw_emulator.objects (
    object_id int PRIMARY KEY, schema_name text NOT NULL, name text NOT NULL, type char(2) NOT NULL,
    pg_schema text NOT NULL, pg_name text NOT NULL, is_ms_shipped boolean NOT NULL DEFAULT false,
    create_date timestamp(3) NOT NULL DEFAULT localtimestamp, modify_date timestamp(3) NOT NULL DEFAULT localtimestamp,
    UNIQUE (schema_name, name));
CREATE SEQUENCE hw_emulator.object_ids START 245575913;
CREATE TABLE hw_emulator.columns (
    object_id int NOT NULL REFERENCES hw_emulator.objects ON DELETE CASCADE, column_id int NOT NULL,
    name text NOT NULL, pg_name text NOT NULL, type text NOT NULL, is_nullable boolean NOT NULL,
    is_identity boolean NOT NULL DEFAULT false, default_definition text, PRIMARY KEY (object_id, column_id));
CREATE TABLE hw_emulator.indexes (
    object_id int NOT NULL REFERENCES hw_emulator.objects ON DELETE CASCADE, index_id int NOT NULL,
    name text NOT NULL, is_primary_key boolean NOT NULL, is_unique boolean NOT NULL, type_desc text NOT NULL,
    column_ids int[] NOT NULL, PRIMARY KEY (object_id, index_id));
CREATE SCHEMA IF NOT EXISTS dbo;
"""


def install_registry(conn: Any) -> None:
    """The engine's bootstrap when it is there (it is the real thing), else DESIGN.md's registry DDL."""
    try:
        from emulators.sqlserver.engine.bootstrap import install_sql
        ddl = install_sql()
    except ImportError:
        ddl = REGISTRY_DDL
    with conn.cursor() as cur:
        cur.execute(ddl)


@dataclass
class SourceColumn:
    name: str
    type: str      # SQL Server type
    pg_type: str
    nullable: bool = True


def create_table(conn: Any, schema: str, name: str, columns: list[SourceColumn], pk: list[str] | None = None) -> int:
    """A user table as the engine creates one: the PostgreSQL table plus its registry rows."""
    with conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema.lower())))
        body = [sql.SQL("{} {}{}").format(sql.Identifier(c.name.lower()), sql.SQL(c.pg_type),
                                          sql.SQL("" if c.nullable else " NOT NULL")) for c in columns]
        if pk:
            body.append(sql.SQL("PRIMARY KEY ({})").format(
                sql.SQL(", ").join(sql.Identifier(c.lower()) for c in pk)))
        cur.execute(sql.SQL("CREATE TABLE {}.{} ({})").format(
            sql.Identifier(schema.lower()), sql.Identifier(name.lower()), sql.SQL(", ").join(body)))
        cur.execute("SELECT nextval('hw_emulator.object_ids')")
        object_id = cur.fetchone()[0]
        cur.execute("INSERT INTO hw_emulator.objects (object_id, schema_name, name, type, pg_schema, pg_name) "
                    "VALUES (%s, %s, %s, 'U ', %s, %s)", (object_id, schema, name, schema.lower(), name.lower()))
        for i, c in enumerate(columns, start=1):
            cur.execute("INSERT INTO hw_emulator.columns (object_id, column_id, name, pg_name, type, is_nullable) "
                        "VALUES (%s, %s, %s, %s, %s, %s)", (object_id, i, c.name, c.name.lower(), c.type, c.nullable))
        if pk:
            ids = [next(i for i, c in enumerate(columns, start=1) if c.name == k) for k in pk]
            cur.execute("INSERT INTO hw_emulator.indexes VALUES (%s, 1, %s, true, true, 'CLUSTERED', %s)",
                        (object_id, f"PK_{name}", ids))
    return object_id


def customers_columns() -> list[SourceColumn]:
    return [SourceColumn("id", "int", "int4", False), SourceColumn("first_name", "nvarchar(255)", "varchar(255)"),
            SourceColumn("last_name", "nvarchar(255)", "varchar(255)"),
            SourceColumn("email", "nvarchar(255)", "varchar(255)")]


class CdcDb:
    """One SQL Server database on the session's cluster with CDC tooling around it."""

    def __init__(self, pg_db: Any, jobs: CaptureJobs) -> None:
        self.pg_db = pg_db
        self.name = pg_db.name
        self.jobs = jobs
        self.conn = pg_db.connect(autocommit=True)

    def connect(self, autocommit: bool = True) -> Any:
        return self.pg_db.connect(autocommit=autocommit)

    def call(self, procedure: str, **params: Any) -> list[Any]:
        """EXEC sys.<procedure> in a transaction of its own (rolled back when it raises)."""
        conn = self.pg_db.connect(autocommit=False)
        try:
            ctx = CdcContext(conn, self.name, self.jobs)
            results = list(PROCEDURES[procedure](ctx, {f"@{k}": v for k, v in params.items()}))
            conn.commit()
            return results
        except BaseException:
            conn.rollback()
            raise
        finally:
            conn.close()

    def result_rows(self, procedure: str, **params: Any) -> list[dict[str, Any]]:
        (rs,) = [r for r in self.call(procedure, **params) if isinstance(r, ResultSet)]
        return [dict(zip([c.name for c in rs.columns], row, strict=True)) for row in rs.rows]

    def query(self, text: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            cur.execute(text, params)
            return cur.fetchall()

    def scalar(self, text: str, params: Any = None) -> Any:
        return self.query(text, params)[0][0]

    def execute(self, text: str, params: Any = None) -> None:
        with self.conn.cursor() as cur:
            cur.execute(text, params)

    def capture(self) -> bool:
        return self.jobs.run_capture(self.name, timeout=60)

    def changes(self, instance: str, from_lsn: Any = None, to_lsn: Any = None, option: str = "all update old"
                ) -> list[dict[str, Any]]:
        """SELECT * FROM cdc.fn_cdc_get_all_changes_<instance>(from, to, option) ORDER BY position;
        from/to default to the instance's min LSN and the max LSN."""
        if from_lsn is None:
            from_lsn = self.min_lsn(instance)
        if to_lsn is None:
            to_lsn = self.max_lsn()
        subquery = all_changes_sql_for(self.conn, instance, "%(f)s", "%(t)s", "%(o)s")
        assert subquery is not None, f"no capture instance {instance}"
        with self.conn.cursor() as cur:
            cur.execute(f'SELECT * FROM {subquery} AS c ORDER BY "__$start_lsn", "__$seqval", "__$operation"',
                        {"f": _bin(from_lsn), "t": _bin(to_lsn), "o": option})
            names = [d[0] for d in cur.description]
            return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in zip(names, row, strict=True)}
                    for row in cur.fetchall()]

    def ct_rows(self, instance: str) -> list[dict[str, Any]]:
        """The change table itself, in SQL Server's position order."""
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL('SELECT * FROM cdc.{} ORDER BY "__$start_lsn", "__$seqval", "__$operation"').format(
                sql.Identifier(f"{instance.lower()}_ct")))
            names = [d[0] for d in cur.description]
            return [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in zip(names, row, strict=True)}
                    for row in cur.fetchall()]

    def min_lsn(self, instance: str) -> bytes:
        return bytes(self.scalar("SELECT sys.fn_cdc_get_min_lsn(%s)", (instance,)))

    def max_lsn(self) -> bytes | None:
        value = self.scalar("SELECT sys.fn_cdc_get_max_lsn()")
        return None if value is None else bytes(value)

    def max_tran_lsn(self) -> bytes | None:
        value = self.scalar("SELECT max(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_id <> '\\x00'::bytea")
        return None if value is None else bytes(value)

    def mapping(self) -> list[tuple[Any, ...]]:
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                for row in self.query("SELECT * FROM cdc.lsn_time_mapping ORDER BY start_lsn")]


def _bin(value: Any) -> Any:
    return psycopg2.Binary(value) if isinstance(value, bytes) else value


@pytest.fixture
def cdc_jobs(pg_server: Any) -> Iterator[CaptureJobs]:
    # scans only when a test asks (run_capture): capture is asynchronous, tests are deterministic
    jobs = CaptureJobs(pg_server, interval=3600)
    yield jobs
    jobs.close()


@pytest.fixture
def cdc_db(pg_db: Any, cdc_jobs: CaptureJobs) -> CdcDb:
    db = CdcDb(pg_db, cdc_jobs)
    install_registry(db.conn)
    return db


@pytest.fixture
def customers(cdc_db: CdcDb) -> CdcDb:
    """CDC on the database and on dbo.customers (capture instance dbo_customers)."""
    create_table(cdc_db.conn, "dbo", "customers", customers_columns(), pk=["id"])
    cdc_db.call("sp_cdc_enable_db")
    cdc_db.call("sp_cdc_enable_table", source_schema="dbo", source_name="customers", role_name=None)
    return cdc_db

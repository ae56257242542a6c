"""One database's initial snapshot, Debezium's steps in Debezium's order (spec §1.2, MS-10..14;
SqlServerSnapshotChangeEventSource + RelationalSnapshotChangeEventSource of 3.6):

1. `snapshot.isolation.mode=snapshot`: end any transaction, `SET TRANSACTION ISOLATION LEVEL SNAPSHOT`
   (it must be set before the transaction starts);
2. lock: `read_uncommitted`/`read_committed` set that level and take no lock; `repeatable_read` and
   `exclusive` set `SET LOCK_TIMEOUT <snapshot.lock.timeout.ms>`, REPEATABLE READ, the savepoint
   `dbz_schema_snapshot`, and (`snapshot.locking.mode=exclusive`) run
   `SELECT TOP(0) * FROM [db].[schema].[table] WITH (TABLOCKX)` per captured table;
3. the maximum LSN (`fn_cdc_get_max_lsn()`): the snapshot's position, streaming resumes after it;
4. the tables' structure (restricted to the newest capture instance's captured columns);
5. schema events (history; schema-change topic);
6. `repeatable_read`: locks released by rolling back to the savepoint (`exclusive` keeps them to
   the end of the transaction);
7. per table `SELECT SYSDATETIMEOFFSET()` (the rows' `source.ts_ms`), then
   `SELECT <captured columns> FROM [db].[schema].[table]` (no ORDER BY), `snapshot.fetch.size` rows
   at a time;
8. end: rollback, isolation back to READ COMMITTED, `SET LOCK_TIMEOUT -1`, commit.

:func:`table_rows` takes only picklable inputs besides the connection (for executors).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.metadata import max_lsn
from headwater.relational.table import Column, TableId

log = logging.getLogger(__name__)

SAVEPOINT = "dbz_schema_snapshot"
LOCKING_STATEMENT = "SELECT TOP(0) * FROM {table} WITH (TABLOCKX)"


def quoted_table(table_id: TableId) -> str:
    return ".".join(quote(p) for p in (table_id.catalog, table_id.schema, table_id.table) if p is not None)


def begin(conn: SqlServerConnection, isolation_mode: str) -> None:
    """Step 1 (Debezium's connectionCreated)."""
    if isolation_mode == "snapshot":
        conn.rollback()
        conn.set_isolation("snapshot")


def lock_tables(conn: SqlServerConnection, isolation_mode: str, locking_mode: str, lock_timeout_ms: int,
                tables: Sequence[TableId]) -> None:
    """Step 2 (lockTablesForSchemaSnapshot)."""
    if isolation_mode in ("read_uncommitted", "read_committed"):
        conn.set_isolation(isolation_mode)
        log.info("schema locking was disabled (snapshot.isolation.mode=%s)", isolation_mode)
        return
    if isolation_mode == "snapshot":
        log.info("schema locking was disabled (snapshot.isolation.mode=snapshot)")
        return
    if isolation_mode not in ("repeatable_read", "exclusive"):
        raise ValueError(f"unknown snapshot.isolation.mode {isolation_mode!r}")
    conn.set_lock_timeout(lock_timeout_ms)
    conn.set_isolation("repeatable_read")
    conn.savepoint(SAVEPOINT)
    if locking_mode != "exclusive":
        return
    for table_id in tables:
        log.info("locking table %s", table_id)
        conn.execute(LOCKING_STATEMENT.format(table=quoted_table(table_id)),
                     what=f"locking table {table_id.catalog}.{table_id.identifier()} for the snapshot "
                          f"(snapshot.lock.timeout.ms={lock_timeout_ms})")


def snapshot_lsn(conn: SqlServerConnection, database: str) -> bytes | None:
    """Step 3: the snapshot's position."""
    return max_lsn(conn, database)


def release_schema_locks(conn: SqlServerConnection, isolation_mode: str) -> None:
    """Step 6 (releaseSchemaSnapshotLocks): only repeatable_read releases its table locks here."""
    if isolation_mode == "repeatable_read":
        conn.rollback_to(SAVEPOINT)
        log.info("schema locks released")


def snapshot_timestamp(conn: SqlServerConnection) -> Any:
    """The database's clock for a table's rows (Debezium 3.6: SYSDATETIMEOFFSET())."""
    return conn.query_one("SELECT SYSDATETIMEOFFSET()", what="reading the server's clock")


def select_statement(table_id: TableId, columns: Sequence[Column]) -> str:
    """The snapshot SELECT of a table: its captured columns (each read by the TYPES helper's
    expression) from `[db].[schema].[table]`, without ORDER BY (Debezium's)."""
    from headwater.connectors.sqlserver.types import select_expression

    return f"SELECT {', '.join(select_expression(c) for c in columns)} FROM {quoted_table(table_id)}"


def override_statement(statement: str, columns: Sequence[Column]) -> str:
    """`snapshot.select.statement.overrides`: every `*` becomes the captured columns (Debezium's
    regex replace, so a `*` inside an expression is replaced too)."""
    from headwater.connectors.sqlserver.types import select_expression

    return re.sub(r"\*", lambda _: ", ".join(select_expression(c) for c in columns), statement)


def table_rows(conn: SqlServerConnection, table_id: TableId, columns: Sequence[Column], *,
               override: str | None = None, fetch_size: int = 2000) -> Iterator[tuple[Any, ...]]:
    """Step 7's rows of one table (raw values in column order)."""
    statement = override_statement(override, columns) if override else select_statement(table_id, columns)
    yield from conn.stream(statement, fetch_size=fetch_size,
                           what=f"snapshot of table {table_id.catalog}.{table_id.identifier()} failed")


def type_spec(column: Column) -> str:
    """The column's T-SQL type with its length/precision (what a key bound, read as text, is cast
    back to)."""
    native = column.native
    name = getattr(native, "type_name", column.type_name.removesuffix(" identity"))
    if name in ("decimal", "numeric"):
        return f"{name}({native.precision}, {native.scale})"
    if name in ("datetime2", "time", "datetimeoffset"):
        return f"{name}({native.scale})"
    if name in ("char", "varchar", "binary", "varbinary"):
        return f"{name}({'max' if native.max_length == -1 else native.max_length})"
    if name in ("nchar", "nvarchar"):
        return f"{name}({'max' if native.max_length == -1 else native.max_length // 2})"
    return name


def bound_text(column: Column) -> str:
    """The T-SQL expression reading a key column's value as text that `type_spec` casts back
    exactly (style 121 keeps every fraction digit of the temporal types)."""
    return f"CONVERT(nvarchar(4000), {quote(column.name)}, 121)"


def _after(keys: Sequence[Column]) -> str:
    """`CASE WHEN (k1, k2, ...) > (?, ?, ...) THEN 1 ELSE 0 END`, the row comparison spelled out
    for T-SQL, which has none: k1 > ? OR (k1 = ? AND (k2 > ? OR ...)). As a CASE, a NULL key
    (lowest in SQL Server's order) counts as not after any bound. Parameters: `_bound_params`."""
    def after(keys: Sequence[Column]) -> str:
        first, rest = keys[0], keys[1:]
        col, cast = quote(first.name), f"CAST(? AS {type_spec(first)})"
        if not rest:
            return f"{col} > {cast}"
        return f"({col} > {cast} OR ({col} = {cast} AND {after(rest)}))"
    return f"CASE WHEN {after(keys)} THEN 1 ELSE 0 END"


def _bound_params(bound: Sequence[str]) -> list[str]:
    out: list[str] = []
    for i, value in enumerate(bound):
        out.append(value)
        if i < len(bound) - 1:
            out.append(value)
    return out


def chunk_rows(conn: SqlServerConnection, table_id: TableId, columns: Sequence[Column], key: Sequence[Column],
               lower: Sequence[str] | None, upper: Sequence[str] | None, *,
               fetch_size: int = 2000) -> Iterator[tuple[Any, ...]]:
    """The rows with `lower < key <= upper` (None: unbounded), in key order: one chunk of a table
    the engine planned in key ranges (bounds from SqlServerChunkDialect.exact_bounds)."""
    from headwater.connectors.sqlserver.types import select_expression

    where: list[str] = []
    params: list[Any] = []
    if lower is not None:
        where.append(f"{_after(key)} = 1")
        params += _bound_params(lower)
    if upper is not None:
        where.append(f"{_after(key)} = 0")
        params += _bound_params(upper)
    statement = (f"SELECT {', '.join(select_expression(c) for c in columns)} FROM {quoted_table(table_id)}"
                 + (f" WHERE {' AND '.join(where)}" if where else "")
                 + f" ORDER BY {', '.join(quote(k.name) for k in key)}")
    yield from conn.stream(statement, params, fetch_size=fetch_size,
                           what=f"snapshot of table {table_id.catalog}.{table_id.identifier()} failed")


def end(conn: SqlServerConnection) -> None:
    """Step 8: end the snapshot transaction and restore the session."""
    conn.rollback()
    conn.set_isolation("read_committed")
    conn.set_lock_timeout(-1)
    conn.commit()

"""What the connector reads from SQL Server's catalogs: the tables of a database with their
columns and keys, the capture instances (`cdc.change_tables`) with their captured columns, and
the LSN functions. One place for the statements; Debezium's text where Debezium has one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from headwater.connectors.sqlserver.connection import SqlServerConnection, quote
from headwater.connectors.sqlserver.lsn import describe
from headwater.relational.table import Table, TableId

log = logging.getLogger(__name__)

# Debezium's SqlServerConnection statements ([db] = the quoted database name)
GET_MAX_LSN = "SELECT {db}.sys.fn_cdc_get_max_lsn()"
GET_MAX_TRANSACTION_LSN = "SELECT MAX(start_lsn) FROM {db}.cdc.lsn_time_mapping WHERE tran_id <> 0x00"
GET_NTH_TRANSACTION_LSN_FROM_BEGINNING = (
    "SELECT MAX(start_lsn) FROM (SELECT TOP (?) start_lsn FROM {db}.cdc.lsn_time_mapping WHERE tran_id <> 0x00 "
    "ORDER BY start_lsn) as next_lsns")
GET_NTH_TRANSACTION_LSN_FROM_LAST = (
    "SELECT MAX(start_lsn) FROM (SELECT TOP (? + 1) start_lsn FROM {db}.cdc.lsn_time_mapping WHERE start_lsn >= ? "
    "AND tran_id <> 0x00 ORDER BY start_lsn) as next_lsns")
GET_MIN_LSN = "SELECT {db}.sys.fn_cdc_get_min_lsn(?)"
INCREMENT_LSN = "SELECT {db}.sys.fn_cdc_increment_lsn(?)"
GET_CAPTURED_COLUMNS = "SELECT object_id, column_name FROM {db}.cdc.captured_columns ORDER BY object_id, column_id"
GET_CHANGE_TABLES = (
    "WITH ordered_change_tables AS (SELECT ROW_NUMBER() OVER (PARTITION BY ct.source_object_id, ct.start_lsn "
    "ORDER BY ct.create_date DESC) AS ct_sequence, ct.* FROM {db}.cdc.change_tables AS ct{where}) "
    "SELECT OBJECT_SCHEMA_NAME(source_object_id, DB_ID(?)), OBJECT_NAME(source_object_id, DB_ID(?)), "
    "capture_instance, object_id, start_lsn FROM ordered_change_tables WHERE ct_sequence = 1")
GET_START_LSNS = "SELECT capture_instance, start_lsn FROM {db}.cdc.change_tables"
GET_NEW_CHANGE_TABLES = "SELECT * FROM {db}.cdc.change_tables WHERE start_lsn BETWEEN ? AND ?"
GET_MIN_LSN_FROM_ALL_CHANGE_TABLES = "select min(start_lsn) from {db}.cdc.change_tables"
GET_DATABASE_NAME = "SELECT name FROM sys.databases WHERE name = ?"
AGENT_STATUS_QUERY = ("SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM #db.sys.dm_server_services "
                      "dss WHERE dss.[servicename] LIKE N'SQL Server Agent (%';")
GET_START_LSN_FOR_LAST_BATCH_SCANNED = ("SELECT TOP 1 start_lsn from sys.dm_cdc_log_scan_sessions "
                                        "ORDER BY session_id DESC")
GET_CDC_JOBS = "EXEC sys.sp_cdc_help_jobs"
# the primary key, else the unique indexes in the order of mssql-jdbc's getIndexInfo (sp_statistics:
# by index name), key columns in key order
GET_KEYS = (
    "SELECT s.name, t.name, i.name, i.is_primary_key, c.name "
    "FROM {db}.sys.indexes i "
    "JOIN {db}.sys.tables t ON t.object_id = i.object_id "
    "JOIN {db}.sys.schemas s ON s.schema_id = t.schema_id "
    "JOIN {db}.sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id "
    "JOIN {db}.sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id "
    "WHERE (i.is_primary_key = 1 OR i.is_unique = 1) AND ic.key_ordinal > 0 AND t.is_ms_shipped = 0 "
    "ORDER BY s.name, t.name, i.is_primary_key DESC, i.name, ic.key_ordinal")


def sql(template: str, database: str, **extra: str) -> str:
    return template.format(db=quote(database), **extra)


@dataclass
class ChangeTable:
    """A capture instance (Debezium's SqlServerChangeTable)."""

    database: str
    source: TableId                  # (database, schema, table)
    capture_instance: str
    object_id: int                   # the change table's object id
    start_lsn: bytes | None
    captured_columns: tuple[str, ...]
    stop_lsn: bytes | None = None    # set when a newer instance of the same table supersedes this one
    table: Table | None = None       # the source table's schema this instance's rows are read with

    @property
    def change_table_name(self) -> str:
        return f"{self.capture_instance}_CT"

    def __str__(self) -> str:
        return (f'Capture instance "{self.capture_instance}" [sourceTableId={self.source}, '
                f"startLsn={describe(self.start_lsn)}, stopLsn={describe(self.stop_lsn)}]")


@dataclass
class CatalogTables:
    """A database's user tables: columns (relational Columns in position order) and keys."""

    columns: dict[TableId, list[Any]] = field(default_factory=dict)
    keys: dict[TableId, tuple[str, ...]] = field(default_factory=dict)

    def table(self, table_id: TableId, captured: Sequence[str] | None = None) -> Table | None:
        """The table as Debezium builds it: restricted to the capture instance's captured
        columns (when given; positions renumbered as Debezium's `Table` keeps them ordered), and
        the key restricted likewise."""
        columns = self.columns.get(table_id)
        if columns is None:
            return None
        if captured is not None:
            wanted = set(captured)
            columns = [c for c in columns if c.name in wanted]
        key = tuple(k for k in self.keys.get(table_id, ()) if captured is None or k in set(captured))
        return Table(table_id, tuple(columns), key)


def read_catalog(conn: SqlServerConnection, database: str) -> CatalogTables:
    """Every user table of `database` with its columns (via the TYPES helper's catalog query) and
    its key: the primary key, else the first unique index."""
    from headwater.connectors.sqlserver.columns import CatalogColumn, column_from_catalog, columns_query

    out = CatalogTables()
    for row in conn.query(columns_query(database), what=f"reading the columns of database {database!r}"):
        c = CatalogColumn.from_row(row)
        out.columns.setdefault(TableId(database, c.schema, c.table), []).append(column_from_catalog(c))
    seen_index: dict[TableId, str] = {}
    keys: dict[TableId, list[str]] = {}
    for schema, table, index, _primary, column in conn.query(sql(GET_KEYS, database),
                                                             what=f"reading the keys of database {database!r}"):
        tid = TableId(database, schema, table)
        first = seen_index.setdefault(tid, index)
        if first == index:
            keys.setdefault(tid, []).append(column)
    out.keys = {t: tuple(k) for t, k in keys.items()}
    return out


def real_database_name(conn: SqlServerConnection, name: str) -> str:
    """The database's name as the server spells it (offsets and topics stay the same whatever the
    case in `database.names`)."""
    rows = conn.query(GET_DATABASE_NAME, (name,), what=f"looking up database {name!r}")
    if len(rows) != 1:
        from headwater.engine.connector import ConnectorError
        raise ConnectorError(f"database {name!r} of database.names does not exist on the server (or matches more "
                             "than one database)")
    return rows[0][0]


def change_tables(conn: SqlServerConnection, database: str, to_lsn: bytes | None = None) -> list[ChangeTable]:
    """The capture instances of `database` (bounded by `to_lsn` when given), with their captured
    columns (Debezium's getChangeTables)."""
    columns: dict[int, list[str]] = {}
    for object_id, name in conn.query(sql(GET_CAPTURED_COLUMNS, database),
                                      what=f"reading cdc.captured_columns of database {database!r}"):
        columns.setdefault(int(object_id), []).append(name)
    if to_lsn is not None:
        query = sql(GET_CHANGE_TABLES, database, where=" WHERE ct.start_lsn <= ?")
        params: tuple[Any, ...] = (to_lsn, database, database)
    else:
        query = sql(GET_CHANGE_TABLES, database, where="")
        params = (database, database)
    out = []
    for schema, table, instance, object_id, start_lsn in conn.query(
            query, params, what=f"reading cdc.change_tables of database {database!r}"):
        out.append(ChangeTable(database, TableId(database, schema, table), instance, int(object_id),
                               bytes(start_lsn) if start_lsn is not None else None,
                               tuple(columns.get(int(object_id), ()))))
    return out


def new_change_tables(conn: SqlServerConnection, database: str, from_lsn: bytes, to_lsn: bytes) -> int:
    """How many capture instances start inside [from_lsn, to_lsn] (Debezium re-reads the list
    when there is any)."""
    return len(conn.query(sql(GET_NEW_CHANGE_TABLES, database), (from_lsn, to_lsn),
                          what=f"reading cdc.change_tables of database {database!r}"))


def _lsn(value: Any) -> bytes | None:
    return bytes(value) if value is not None else None


def max_lsn(conn: SqlServerConnection, database: str) -> bytes | None:
    return _lsn(conn.query_one(sql(GET_MAX_LSN, database), what=f"reading the maximum LSN of database {database!r}"))


def min_lsn(conn: SqlServerConnection, database: str, capture_instance: str) -> bytes | None:
    return _lsn(conn.query_one(sql(GET_MIN_LSN, database), (capture_instance,),
                               what=f"reading the minimum LSN of capture instance {capture_instance!r}"))


def min_lsn_of_all(conn: SqlServerConnection, database: str) -> bytes | None:
    return _lsn(conn.query_one(sql(GET_MIN_LSN_FROM_ALL_CHANGE_TABLES, database),
                               what=f"reading the oldest LSN of database {database!r}"))


def increment_lsn(conn: SqlServerConnection, database: str, lsn: bytes) -> bytes:
    value = _lsn(conn.query_one(sql(INCREMENT_LSN, database), (lsn,), what="fn_cdc_increment_lsn failed"))
    assert value is not None
    return value


def to_lsn(conn: SqlServerConnection, database: str, last_commit: bytes | None, max_transactions: int) -> bytes | None:
    """The upper bound of one streaming iteration (Debezium's getToLsn): the last transaction's
    LSN, or the N-th transaction after the last processed commit (`max.iteration.transactions`)."""
    what = f"reading the change window of database {database!r}"
    if max_transactions == 0:
        return _lsn(conn.query_one(sql(GET_MAX_TRANSACTION_LSN, database), what=what))
    if last_commit is None:
        return _lsn(conn.query_one(sql(GET_NTH_TRANSACTION_LSN_FROM_BEGINNING, database), (max_transactions,),
                                   what=what))
    return _lsn(conn.query_one(sql(GET_NTH_TRANSACTION_LSN_FROM_LAST, database), (max_transactions, last_commit),
                               what=what))


def agent_running(conn: SqlServerConnection, database: str, query: str | None) -> bool:
    """`database.sqlserver.agent.status.query` (`#db` = the quoted database name)."""
    text = (query or AGENT_STATUS_QUERY).replace("#db", quote(database))
    rows = conn.query(text, what="the SQL Server Agent status query failed")
    if len(rows) != 1:
        from headwater.engine.connector import ConnectorError
        raise ConnectorError(f"the SQL Server Agent status query must return exactly one value, got {len(rows)} rows")
    value = rows[0][0]
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true")
    return bool(value)


def capture_polling_interval(conn: SqlServerConnection) -> float:
    """The capture job's polling interval in seconds (sp_cdc_help_jobs; 5 s when unknown, as
    Debezium)."""
    try:
        import mssql_python

        cur = conn._cursor()
        cur.execute(GET_CDC_JOBS)
        names = [d[0] for d in cur.description or ()]
        interval = 5
        for row in cur.fetchall():
            record = dict(zip(names, row, strict=False))
            if record.get("job_type") == "capture" and record.get("pollinginterval") is not None:
                interval = int(record["pollinginterval"])
        cur.close()
        conn.rollback()
    except (mssql_python.Error, Exception) as exc:
        log.warning("could not read the capture job's polling interval (sys.sp_cdc_help_jobs): %s", exc)
        return 5.0
    return float(interval if interval > 0 else 5)


def scan_ended_empty(conn: SqlServerConnection) -> bool:
    """Whether the capture job's last log scan found nothing (sys.dm_cdc_log_scan_sessions):
    Debezium's signal that the last transaction ended (END of transaction metadata)."""
    try:
        value = conn.query_one(GET_START_LSN_FOR_LAST_BATCH_SCANNED)
    except Exception as exc:
        log.warning("could not query sys.dm_cdc_log_scan_sessions: %s", exc)
        return False
    return isinstance(value, str) and value.rstrip("\x00") == "00000000:00000000:0000"


def with_stop(ct: ChangeTable, stop: bytes | None) -> ChangeTable:
    return replace(ct, stop_lsn=stop)

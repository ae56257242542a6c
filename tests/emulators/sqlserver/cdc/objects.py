"""The CDC objects inside a backing PostgreSQL database: schema ``cdc`` and its metadata tables, the
change tables ``cdc.<capture_instance>_CT``, the ``sys.fn_cdc_*`` LSN functions, the error-313 range
check, ``sys.dm_cdc_log_scan_sessions`` — each registered in ``hw_emulator`` with its SQL Server
types, so that ``SELECT *`` describes them as SQL Server does.

Everything here runs on a cursor the caller gives (the caller's transaction): creating a capture
instance and rolling back leaves nothing behind.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from psycopg2 import sql

from ..sqltypes import SqlType
from .errors import ALL_CHANGES_313, MAP_TIME_TO_LSN_313, STATE_313

PUBLICATION = "hw_cdc"
SYSNAME = "nvarchar(128)"


@dataclass(frozen=True, slots=True)
class Col:
    """A column of an object CDC creates: SQL Server name and type, PostgreSQL type, nullability."""

    name: str
    type: str
    pg_type: str
    nullable: bool = True
    pg: str | None = None   # the PostgreSQL column name when it is not the lowercased name

    @property
    def pg_name(self) -> str:
        return self.pg if self.pg is not None else self.name.lower()


def _c(name: str, type_: str, nullable: bool = True) -> Col:
    return Col(name, type_, pg_type(type_), nullable)


def pg_type(type_: str) -> str:
    """The PostgreSQL column type for the SQL Server types the CDC metadata uses (DESIGN.md table)."""
    t = SqlType.parse(type_)
    if t.name in ("binary", "varbinary", "image", "timestamp"):
        return "bytea"
    if t.name in ("nvarchar", "varchar"):
        return "text" if t.length == -1 else f"varchar({t.length})"
    simple = {"int": "int4", "bigint": "int8", "smallint": "int2", "bit": "boolean", "datetime": "sys.datetime",
              "tinyint": "sys.tinyint", "uniqueidentifier": "uuid"}
    if t.name in simple:
        return simple[t.name]
    raise ValueError(f"no PostgreSQL type for {type_!r} in the CDC metadata")


def pg_ident(name: str) -> str:
    """A PostgreSQL identifier for a SQL Server name: lowercased (DESIGN.md); names past PostgreSQL's
    63-byte limit are shortened with a hash so that two long capture instances never collide."""
    lowered = name.lower()
    if len(lowered.encode()) <= 63:
        return lowered
    digest = hashlib.md5(lowered.encode()).hexdigest()[:10]
    return lowered.encode()[:52].decode(errors="ignore") + "_" + digest


# --- the metadata tables, in SQL Server's column order (Microsoft's docs for each table) ---------

CHANGE_TABLES = [
    _c("object_id", "int", False), _c("version", "int"), _c("source_object_id", "int"),
    _c("capture_instance", SYSNAME, False), _c("start_lsn", "binary(10)"), _c("end_lsn", "binary(10)"),
    _c("supports_net_changes", "bit"), _c("has_drop_pending", "bit"), _c("role_name", SYSNAME),
    _c("index_name", SYSNAME), _c("filegroup_name", SYSNAME), _c("create_date", "datetime"),
    _c("partition_switch", "bit", False),
]
CAPTURED_COLUMNS = [
    _c("object_id", "int", False), _c("column_name", SYSNAME, False), _c("column_id", "int"),
    _c("column_type", SYSNAME, False), _c("column_ordinal", "int", False), _c("is_computed", "bit"),
    _c("masking_function", "nvarchar(4000)"),
]
INDEX_COLUMNS = [
    _c("object_id", "int", False), _c("column_name", SYSNAME, False), _c("index_ordinal", "tinyint", False),
    _c("column_id", "int", False),
]
LSN_TIME_MAPPING = [
    _c("start_lsn", "binary(10)", False), _c("tran_begin_time", "datetime"), _c("tran_end_time", "datetime"),
    _c("tran_id", "varbinary(10)"), _c("tran_begin_lsn", "binary(10)"),
]
DDL_HISTORY = [
    _c("source_object_id", "int"), _c("object_id", "int", False), _c("required_column_update", "bit"),
    _c("ddl_command", "nvarchar(max)"), _c("ddl_lsn", "binary(10)", False), _c("ddl_time", "datetime"),
]
SYSTRANSCHEMAS = [
    _c("tabid", "int", False), _c("startlsn", "binary(10)", False), _c("endlsn", "binary(10)", False),
    _c("typeid", "int", False),
]
LOG_SCAN_SESSIONS = [
    _c("session_id", "int"), _c("start_time", "datetime"), _c("end_time", "datetime"), _c("duration", "int"),
    _c("scan_phase", "nvarchar(200)"), _c("error_count", "int"), _c("start_lsn", "nvarchar(23)"),
    _c("current_lsn", "nvarchar(23)"), _c("end_lsn", "nvarchar(23)"), _c("tran_count", "bigint"),
    _c("last_commit_lsn", "nvarchar(23)"), _c("last_commit_time", "datetime"), _c("log_record_count", "bigint"),
    _c("schema_change_count", "int"), _c("command_count", "bigint"), _c("first_begin_cdc_lsn", "nvarchar(23)"),
    _c("last_commit_cdc_lsn", "nvarchar(23)"), _c("last_commit_cdc_time", "datetime"), _c("latency", "int"),
    _c("empty_scan_count", "int"), _c("failed_sessions_count", "int"),
]

# (SQL Server schema, name, registry type, columns, extra DDL after the column list)
CDC_TABLES: list[tuple[str, str, list[Col], str]] = [
    ("cdc", "change_tables", CHANGE_TABLES, ", PRIMARY KEY (object_id)"),
    ("cdc", "captured_columns", CAPTURED_COLUMNS, ", PRIMARY KEY (object_id, column_ordinal)"),
    ("cdc", "index_columns", INDEX_COLUMNS, ", PRIMARY KEY (object_id, index_ordinal)"),
    ("cdc", "lsn_time_mapping", LSN_TIME_MAPPING, ", PRIMARY KEY (start_lsn)"),
    ("cdc", "ddl_history", DDL_HISTORY, ""),
    ("dbo", "systranschemas", SYSTRANSCHEMAS, ""),
]

CHANGE_TABLE_HEAD = [
    _c("__$start_lsn", "binary(10)", False), _c("__$end_lsn", "binary(10)"), _c("__$seqval", "binary(10)", False),
    _c("__$operation", "int", False), _c("__$update_mask", "varbinary(128)"),
]
CHANGE_TABLE_TAIL = [_c("__$command_id", "int", False)]
RESERVED_COLUMNS = frozenset(c.name for c in CHANGE_TABLE_HEAD)

# Per-database state the emulator keeps beside SQL Server's objects (not visible through sys.*):
# the capture job's position and the job parameters SQL Server keeps in msdb.dbo.cdc_jobs.
STATE_DDL = """
CREATE TABLE hw_emulator.cdc_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    slot_name text NOT NULL,
    slot_lsn pg_lsn,                        -- where the slot became consistent (set by the capture job)
    last_commit_lsn bytea,                  -- newest commit written to the change tables (restart dedup)
    idle_lsn bytea,                         -- newest tran_id = 0x00 row written
    enabled_at timestamp NOT NULL DEFAULT localtimestamp
);
CREATE TABLE hw_emulator.cdc_jobs (
    job_type text PRIMARY KEY,              -- 'capture' / 'cleanup'
    job_id uuid NOT NULL,
    maxtrans int, maxscans int, continuous boolean, pollinginterval bigint,
    retention bigint, threshold bigint
);
"""

# ------------------------------------------------------------------------------------------------
# Functions in schema sys, installed in every database (they answer NULL/0x00… while CDC is off,
# as SQL Server's do) and replaced when CDC is enabled.

FUNCTIONS_SQL = r"""
-- PostgreSQL has no max/min over bytea; SQL Server compares binary values byte-wise, as bytea does
CREATE OR REPLACE FUNCTION public.hw_bytea_larger(a bytea, b bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT CASE WHEN a >= b THEN a ELSE b END $$;
CREATE OR REPLACE FUNCTION public.hw_bytea_smaller(a bytea, b bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT CASE WHEN a <= b THEN a ELSE b END $$;
DO $$ BEGIN
  IF to_regprocedure('public.max(bytea)') IS NULL THEN
    CREATE AGGREGATE public.max(bytea) (SFUNC = public.hw_bytea_larger, STYPE = bytea,
                                        COMBINEFUNC = public.hw_bytea_larger, PARALLEL = SAFE);
  END IF;
  IF to_regprocedure('public.min(bytea)') IS NULL THEN
    CREATE AGGREGATE public.min(bytea) (SFUNC = public.hw_bytea_smaller, STYPE = bytea,
                                        COMBINEFUNC = public.hw_bytea_smaller, PARALLEL = SAFE);
  END IF;
END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_get_max_lsn() RETURNS bytea LANGUAGE plpgsql STABLE AS $$
DECLARE r bytea;
BEGIN
  IF to_regclass('cdc.lsn_time_mapping') IS NULL THEN RETURN NULL; END IF;
  EXECUTE 'SELECT public.max(start_lsn) FROM cdc.lsn_time_mapping' INTO r;
  RETURN r;
END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_get_min_lsn(capture_instance text) RETURNS bytea
LANGUAGE plpgsql STABLE AS $$
DECLARE r bytea;
BEGIN
  IF to_regclass('cdc.change_tables') IS NOT NULL THEN
    EXECUTE 'SELECT start_lsn FROM cdc.change_tables WHERE lower(capture_instance) = lower($1)'
      INTO r USING capture_instance;
  END IF;
  RETURN coalesce(r, '\x00000000000000000000'::bytea);
END $$;

-- the next/previous 80-bit big-endian value: no LSN lies strictly between an LSN and its increment
CREATE OR REPLACE FUNCTION sys.fn_cdc_increment_lsn(lsn bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE r bytea := lsn; b int;
BEGIN
  FOR i IN REVERSE length(r) - 1 .. 0 LOOP
    b := get_byte(r, i);
    IF b < 255 THEN RETURN set_byte(r, i, b + 1); END IF;
    r := set_byte(r, i, 0);
  END LOOP;
  RETURN r;
END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_decrement_lsn(lsn bytea) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE r bytea := lsn; b int;
BEGIN
  FOR i IN REVERSE length(r) - 1 .. 0 LOOP
    b := get_byte(r, i);
    IF b > 0 THEN RETURN set_byte(r, i, b - 1); END IF;
    r := set_byte(r, i, 255);
  END LOOP;
  RETURN r;
END $$;

-- tran_end_time of the commit at (or, for an LSN between commits, the last commit before) lsn
CREATE OR REPLACE FUNCTION sys.fn_cdc_map_lsn_to_time(lsn bytea) RETURNS sys.datetime
LANGUAGE plpgsql STABLE AS $$
DECLARE r sys.datetime;
BEGIN
  IF lsn IS NULL OR to_regclass('cdc.lsn_time_mapping') IS NULL THEN RETURN NULL; END IF;
  EXECUTE 'SELECT tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn <= $1 ORDER BY start_lsn DESC LIMIT 1'
    INTO r USING lsn;
  RETURN r;
END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_map_time_to_lsn(relational_operator text, tracking_time timestamp)
RETURNS bytea LANGUAGE plpgsql STABLE AS $$
DECLARE r bytea; op text := lower(btrim(relational_operator));
BEGIN
  IF op IS NULL OR op NOT IN ('largest less than', 'largest less than or equal', 'smallest greater than',
                              'smallest greater than or equal') THEN
    RAISE EXCEPTION USING MESSAGE = '@@MAP313@@', DETAIL = 'sqlserver:313:16:@@STATE@@';
  END IF;
  IF tracking_time IS NULL OR to_regclass('cdc.lsn_time_mapping') IS NULL THEN RETURN NULL; END IF;
  EXECUTE CASE op
    WHEN 'largest less than' THEN 'SELECT public.max(start_lsn) FROM cdc.lsn_time_mapping
                                   WHERE tran_end_time < $1'
    WHEN 'largest less than or equal' THEN 'SELECT public.max(start_lsn) FROM cdc.lsn_time_mapping
                                            WHERE tran_end_time <= $1'
    WHEN 'smallest greater than' THEN 'SELECT public.min(start_lsn) FROM cdc.lsn_time_mapping
                                       WHERE tran_end_time > $1'
    ELSE 'SELECT public.min(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_end_time >= $1' END
    INTO r USING tracking_time;
  RETURN r;
END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_is_bit_set(ordinal int, update_mask bytea) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN ordinal IS NULL OR update_mask IS NULL THEN NULL
              WHEN ordinal < 1 OR (ordinal - 1) / 8 >= length(update_mask) THEN false
              ELSE get_byte(update_mask, length(update_mask) - 1 - (ordinal - 1) / 8)
                   & (1 << ((ordinal - 1) % 8)) <> 0
         END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_get_column_ordinal(capture_instance text, column_name text) RETURNS int
LANGUAGE plpgsql STABLE AS $$
DECLARE r int;
BEGIN
  IF to_regclass('cdc.captured_columns') IS NULL THEN RETURN -1; END IF;
  EXECUTE 'SELECT cc.column_ordinal FROM cdc.captured_columns cc JOIN cdc.change_tables ct USING (object_id)
           WHERE lower(ct.capture_instance) = lower($1) AND lower(cc.column_name) = lower($2)'
    INTO r USING capture_instance, column_name;
  RETURN coalesce(r, -1);
END $$;

CREATE OR REPLACE FUNCTION sys.fn_cdc_has_column_changed(capture_instance text, column_name text,
                                                         update_mask bytea) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT sys.fn_cdc_is_bit_set(sys.fn_cdc_get_column_ordinal(capture_instance, column_name), update_mask) $$;
"""

# The guard of fn_cdc_get_all_changes_<ci>: STABLE and called with constants only, so PostgreSQL
# evaluates it once as a one-time filter before scanning — it raises even when no row would match.
CHECK_SQL = r"""
CREATE OR REPLACE FUNCTION cdc.check_lsn_range(capture_instance text, from_lsn bytea, to_lsn bytea,
                                               row_filter_option text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE max_lsn bytea := sys.fn_cdc_get_max_lsn();
BEGIN
  IF row_filter_option IS NULL OR lower(btrim(row_filter_option)) NOT IN ('all', 'all update old')
     OR from_lsn IS NULL OR to_lsn IS NULL OR max_lsn IS NULL
     OR from_lsn < sys.fn_cdc_get_min_lsn(capture_instance) OR to_lsn > max_lsn OR from_lsn > to_lsn THEN
    RAISE EXCEPTION USING MESSAGE = '@@ALL313@@', DETAIL = 'sqlserver:313:16:@@STATE@@';
  END IF;
  RETURN true;
END $$;
"""


def _fill(text: str) -> str:
    return (text.replace("@@ALL313@@", ALL_CHANGES_313.replace("'", "''"))
            .replace("@@MAP313@@", MAP_TIME_TO_LSN_313.replace("'", "''"))
            .replace("@@STATE@@", str(STATE_313)))


def _ensure_domains(cur: Any) -> None:
    # The engine's bootstrap creates these; CDC only makes sure its column types exist.
    cur.execute("""
        CREATE SCHEMA IF NOT EXISTS sys;
        DO $$ BEGIN
          IF to_regtype('sys.datetime') IS NULL THEN CREATE DOMAIN sys.datetime AS timestamp(3); END IF;
          IF to_regtype('sys.tinyint') IS NULL THEN
            CREATE DOMAIN sys.tinyint AS int2 CHECK (VALUE BETWEEN 0 AND 255);
          END IF;
        END $$;""")


def install_system_objects(cur: Any) -> None:
    """The objects every database has whether or not CDC is on: the ``sys.fn_cdc_*`` functions and
    ``sys.dm_cdc_log_scan_sessions``. Idempotent; the engine may call it when creating a database."""
    _ensure_domains(cur)
    cur.execute(_fill(FUNCTIONS_SQL))
    cur.execute("SELECT to_regclass('sys.dm_cdc_log_scan_sessions')")
    if cur.fetchone()[0] is None:
        _create_log_scan_sessions(cur)


# SQL Server's LSN strings in sys.dm_cdc_log_scan_sessions are nvarchar(23): the 22 characters and a
# terminating U+0000, which Debezium relies on (an empty scan's start_lsn "00000000:00000000:0000\u0000"
# tells it that the last transaction has ended). PostgreSQL text cannot hold U+0000, so the capture job
# writes the table sys.dm_cdc_log_scan_sessions (text) and SQL Server's view is a PostgreSQL view
# returning those columns as UTF-8 bytes with the NUL; the engine reads a character column backed by
# bytea as UTF-8.
NUL_TERMINATED_COLUMNS = ("start_lsn", "current_lsn", "end_lsn", "last_commit_lsn", "first_begin_cdc_lsn",
                          "last_commit_cdc_lsn")
LOG_SCAN_SESSIONS_VIEW = "hw_dm_cdc_log_scan_sessions"


def _create_log_scan_sessions(cur: Any) -> None:
    body = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c.pg_name), sql.SQL(c.pg_type))
                              for c in LOG_SCAN_SESSIONS)
    cur.execute(sql.SQL("CREATE TABLE sys.dm_cdc_log_scan_sessions ({})").format(body))
    columns = sql.SQL(", ").join(
        sql.SQL("convert_to({0}, 'UTF8') || '\\x00'::bytea AS {0}").format(sql.Identifier(c.pg_name))
        if c.pg_name in NUL_TERMINATED_COLUMNS else sql.Identifier(c.pg_name)
        for c in LOG_SCAN_SESSIONS)
    cur.execute(sql.SQL("CREATE VIEW sys.{} AS SELECT {} FROM sys.dm_cdc_log_scan_sessions").format(
        sql.Identifier(LOG_SCAN_SESSIONS_VIEW), columns))
    register(cur, "sys", "dm_cdc_log_scan_sessions", "V ", "sys", LOG_SCAN_SESSIONS_VIEW, LOG_SCAN_SESSIONS)


# --- registry ------------------------------------------------------------------------------------

def register(cur: Any, schema: str, name: str, type_: str, pg_schema: str, pg_name: str,
             columns: list[Col] | None = None, *, is_ms_shipped: bool = True) -> int:
    """Insert an object (and its columns) into ``hw_emulator``; returns its object id."""
    cur.execute("SELECT nextval('hw_emulator.object_ids')")
    object_id = int(cur.fetchone()[0])
    cur.execute("INSERT INTO hw_emulator.objects (object_id, schema_name, name, type, pg_schema, pg_name, "
                "is_ms_shipped) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (object_id, schema, name, type_, pg_schema, pg_name, is_ms_shipped))
    for column_id, col in enumerate(columns or [], start=1):
        cur.execute("INSERT INTO hw_emulator.columns (object_id, column_id, name, pg_name, type, is_nullable) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (object_id, column_id, col.name, col.pg_name, col.type, col.nullable))
    return object_id


def _create_table(cur: Any, schema: str, name: str, columns: list[Col], extra: str, *, type_: str = "U ") -> int:
    body = sql.SQL(", ").join(
        sql.SQL("{} {}{}").format(sql.Identifier(c.pg_name), sql.SQL(c.pg_type),
                                  sql.SQL("" if c.nullable else " NOT NULL"))
        for c in columns)
    cur.execute(sql.SQL("CREATE TABLE {}.{} ({}{})").format(
        sql.Identifier(schema), sql.Identifier(pg_ident(name)), body, sql.SQL(extra)))
    return register(cur, schema, name, type_, schema, pg_ident(name), columns)


# --- enable / disable the database ---------------------------------------------------------------

def cdc_schema_exists(cur: Any) -> bool:
    cur.execute("SELECT to_regnamespace('cdc') IS NOT NULL")
    return bool(cur.fetchone()[0])


def is_enabled(cur: Any) -> bool:
    cur.execute("SELECT to_regclass('hw_emulator.cdc_state') IS NOT NULL")
    if not cur.fetchone()[0]:
        return False
    cur.execute("SELECT count(*) FROM hw_emulator.cdc_state")
    return cur.fetchone()[0] > 0


def create_database_objects(cur: Any, slot_name: str) -> None:
    """What ``sys.sp_cdc_enable_db`` creates: schema cdc, the metadata tables, the functions, the
    publication the capture job reads (empty until a table is enabled) and the capture state."""
    # The publication comes first: pgoutput looks it up for every change it decodes, including the
    # changes of this very transaction when the slot was created at its start.
    cur.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(PUBLICATION)))
    cur.execute(sql.SQL("CREATE PUBLICATION {} WITH (publish = 'insert, update, delete')").format(
        sql.Identifier(PUBLICATION)))
    install_system_objects(cur)
    cur.execute("CREATE SCHEMA cdc")
    cur.execute("SELECT to_regclass('hw_emulator.schemas') IS NOT NULL")
    if cur.fetchone()[0]:
        cur.execute("INSERT INTO hw_emulator.schemas (schema_id, name, pg_name) "
                    "SELECT nextval('hw_emulator.schema_ids'), 'cdc', 'cdc' "
                    "WHERE NOT EXISTS (SELECT 1 FROM hw_emulator.schemas WHERE lower(name) = 'cdc')")
    for schema, name, columns, extra in CDC_TABLES:
        if schema == "dbo":
            cur.execute("CREATE SCHEMA IF NOT EXISTS dbo")
            cur.execute("SELECT to_regclass('dbo.systranschemas')")
            if cur.fetchone()[0] is not None:
                continue
        _create_table(cur, schema, name, columns, extra)
    cur.execute(_fill(CHECK_SQL))
    cur.execute("DROP TABLE IF EXISTS hw_emulator.cdc_state, hw_emulator.cdc_jobs")
    cur.execute(STATE_DDL)
    cur.execute("INSERT INTO hw_emulator.cdc_state (slot_name) VALUES (%s)", (slot_name,))


def drop_database_objects(cur: Any) -> None:
    """What ``sys.sp_cdc_disable_db`` removes (after every capture instance has been dropped)."""
    cur.execute("DELETE FROM hw_emulator.objects WHERE lower(schema_name) = 'cdc' "
                "OR (schema_name = 'dbo' AND name = 'systranschemas')")
    cur.execute("DROP SCHEMA cdc CASCADE")
    cur.execute("DROP TABLE IF EXISTS dbo.systranschemas")
    cur.execute("SELECT to_regclass('hw_emulator.schemas') IS NOT NULL")
    if cur.fetchone()[0]:
        cur.execute("DELETE FROM hw_emulator.schemas WHERE lower(name) = 'cdc'")
    cur.execute("DROP TABLE IF EXISTS hw_emulator.cdc_state, hw_emulator.cdc_jobs")
    # last: the old slot may still decode this transaction, and pgoutput needs its publication
    cur.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(PUBLICATION)))


# --- capture instances ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class CapturedColumn:
    """A source column as a capture instance records it."""

    name: str           # original spelling
    pg_name: str
    column_id: int      # in the source table
    type: str           # registry type of the change-table column
    pg_type: str        # PostgreSQL type of the change-table column (the source column's)


def change_table_name(instance: str) -> str:
    return f"{instance}_CT"


def all_changes_function_name(instance: str) -> str:
    return f"fn_cdc_get_all_changes_{instance}"


def create_change_table(cur: Any, instance: str, columns: list[CapturedColumn]) -> int:
    """``cdc.<instance>_CT`` in SQL Server's column order, its index and registry entries, plus a
    plain PostgreSQL function ``cdc.fn_cdc_get_all_changes_<instance>`` for callers that do not use
    :func:`queries.all_changes_sql`. Returns the change table's object id."""
    captured = [Col(c.name, c.type, c.pg_type, True, c.pg_name) for c in columns]
    all_columns = CHANGE_TABLE_HEAD + captured + CHANGE_TABLE_TAIL
    body = sql.SQL(", ").join(
        sql.SQL("{} {}{}").format(sql.Identifier(c.pg_name), sql.SQL(c.pg_type),
                                  sql.SQL("" if c.nullable else " NOT NULL"))
        for c in all_columns)
    table = pg_ident(change_table_name(instance))
    cur.execute(sql.SQL("CREATE TABLE cdc.{} ({})").format(sql.Identifier(table), body))
    cur.execute(sql.SQL("CREATE INDEX {} ON cdc.{} (\"__$start_lsn\", \"__$seqval\", \"__$operation\")").format(
        sql.Identifier(pg_ident(f"{instance}_ct_idx")), sql.Identifier(table)))
    object_id = register(cur, "cdc", change_table_name(instance), "U ", "cdc", table, all_columns)
    function = pg_ident(all_changes_function_name(instance))
    out_cols = [c for c in all_columns if c.name not in ("__$end_lsn", "__$command_id")]
    out_names = [c.pg_name for c in out_cols]
    cur.execute(sql.SQL(
        "CREATE FUNCTION cdc.{fn}(from_lsn bytea, to_lsn bytea, row_filter_option text) "
        "RETURNS TABLE ({out}) LANGUAGE sql STABLE AS $f$ SELECT {cols} FROM cdc.{table} t "
        "WHERE cdc.check_lsn_range({ci}, from_lsn, to_lsn, row_filter_option) "
        "AND t.\"__$start_lsn\" BETWEEN coalesce(from_lsn, ''::bytea) AND coalesce(to_lsn, ''::bytea) "
        "AND (t.\"__$operation\" <> 3 OR lower(btrim(row_filter_option)) = 'all update old') $f$").format(
        fn=sql.Identifier(function),
        out=sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(c.pg_type))
                               for n, c in zip(out_names, out_cols, strict=True)),
        cols=sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(n)) for n in out_names),
        table=sql.Identifier(table), ci=sql.Literal(instance)))
    register(cur, "cdc", all_changes_function_name(instance), "IF", "cdc", function, out_cols)
    return object_id


def drop_change_table(cur: Any, instance: str) -> None:
    table = pg_ident(change_table_name(instance))
    function = pg_ident(all_changes_function_name(instance))
    cur.execute(sql.SQL("DROP FUNCTION IF EXISTS cdc.{}(bytea, bytea, text)").format(sql.Identifier(function)))
    cur.execute(sql.SQL("DROP TABLE IF EXISTS cdc.{}").format(sql.Identifier(table)))
    cur.execute("DELETE FROM hw_emulator.objects WHERE schema_name = 'cdc' AND lower(name) IN (lower(%s), lower(%s))",
                (change_table_name(instance), all_changes_function_name(instance)))

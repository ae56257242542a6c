"""The ``sys.sp_cdc_*`` procedures. The engine calls ``PROCEDURES[name](ctx, params)`` for
``EXEC sys.sp_cdc_…``; ``params`` maps parameter names (with or without ``@``, any case) to values —
positional arguments are bound with :func:`bind` first. Each procedure is a generator of
``results.py`` items; errors are raised as ``SqlServerError`` while iterating. Procedures do not
yield the ReturnStatus (the engine adds ``0`` after a procedure that finished).
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg2
from psycopg2 import sql

from ..results import Column, Message, Result, ResultSet, SqlServerError
from ..sqltypes import SqlType
from . import errors
from . import lsn as lsns
from .capture import DEFAULT_JOB, create_slot, round_datetime, slot_name_for
from .cleanup import clean_instance, run_cleanup, trim_lsn_time_mapping
from .context import CdcContext
from .objects import (
    PUBLICATION,
    RESERVED_COLUMNS,
    CapturedColumn,
    create_change_table,
    create_database_objects,
    drop_change_table,
    drop_database_objects,
    is_enabled,
)

SYSTEM_DATABASES = frozenset({"master", "model", "msdb", "tempdb"})
NO_DEFAULT = object()

# parameter order (for positional EXEC arguments) and defaults; NO_DEFAULT = required
PARAMETERS: dict[str, list[tuple[str, Any]]] = {
    "sp_cdc_enable_db": [],
    "sp_cdc_disable_db": [],
    "sp_cdc_enable_table": [("source_schema", NO_DEFAULT), ("source_name", NO_DEFAULT), ("role_name", NO_DEFAULT),
                            ("capture_instance", None), ("supports_net_changes", None), ("index_name", None),
                            ("captured_column_list", None), ("filegroup_name", None),
                            ("allow_partition_switch", 1)],
    "sp_cdc_disable_table": [("source_schema", NO_DEFAULT), ("source_name", NO_DEFAULT),
                             ("capture_instance", NO_DEFAULT)],
    "sp_cdc_change_job": [("job_type", "capture"), ("maxtrans", None), ("maxscans", None), ("continuous", None),
                          ("pollinginterval", None), ("retention", None), ("threshold", None)],
    "sp_cdc_help_change_data_capture": [("source_schema", None), ("source_name", None)],
    "sp_cdc_help_jobs": [],
    "sp_cdc_cleanup_change_table": [("capture_instance", NO_DEFAULT), ("low_water_mark", NO_DEFAULT),
                                    ("threshold", None), ("fcleanupfailed", None)],
    "sp_cdc_start_job": [("job_type", "capture")],
    "sp_cdc_stop_job": [("job_type", "capture")],
}


def bind(procedure: str, positional: list[Any], named: dict[str, Any]) -> dict[str, Any]:
    """Positional and named EXEC arguments → the ``params`` dict the procedures take (raises 8144,
    8145 as SQL Server does)."""
    spec = PARAMETERS[procedure]
    if len(positional) > len(spec):
        raise errors.too_many_arguments(procedure)
    params = {spec[i][0]: value for i, value in enumerate(positional)}
    params.update(named)
    return params


def _params(procedure: str, given: dict[str, Any]) -> dict[str, Any]:
    spec = dict(PARAMETERS[procedure])
    out: dict[str, Any] = {}
    for key, value in given.items():
        name = key.lstrip("@").lower()
        if name not in spec:
            raise errors.unknown_parameter(procedure, key.lstrip("@"))
        out[name] = value
    for name, default in spec.items():
        if name not in out:
            if default is NO_DEFAULT:
                raise errors.missing_parameter(procedure, name)
            out[name] = default
    return out


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return str(value).strip()


def _int(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    return int(value)


def _now(cur: Any) -> dt.datetime:
    cur.execute("SELECT localtimestamp")
    return round_datetime(cur.fetchone()[0])


def _require_enabled(ctx: CdcContext, cur: Any, procedure: str) -> None:
    if not is_enabled(cur):
        raise errors.db_not_enabled(ctx.database, procedure)


def _source(cur: Any, schema: str, name: str) -> tuple[int, str, str, str, str] | None:
    """(object_id, schema_name, name, pg_schema, pg_name) of a user table."""
    cur.execute("SELECT object_id, schema_name, name, pg_schema, pg_name FROM hw_emulator.objects "
                "WHERE lower(schema_name) = lower(%s) AND lower(name) = lower(%s) AND type = 'U '",
                (schema, name))
    return cur.fetchone()


def _instances(cur: Any, source_object_id: int | None = None) -> list[dict[str, Any]]:
    cur.execute("""
        SELECT ct.object_id, ct.capture_instance, ct.source_object_id, ct.start_lsn, ct.end_lsn,
               ct.supports_net_changes, ct.has_drop_pending, ct.role_name, ct.index_name, ct.filegroup_name,
               ct.create_date, o.schema_name, o.name
        FROM cdc.change_tables ct LEFT JOIN hw_emulator.objects o ON o.object_id = ct.source_object_id
        WHERE %s::int IS NULL OR ct.source_object_id = %s
        ORDER BY o.schema_name, o.name, ct.capture_instance""", (source_object_id, source_object_id))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


# --- sp_cdc_enable_db / sp_cdc_disable_db -----------------------------------------------------------

def sp_cdc_enable_db(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    _params("sp_cdc_enable_db", params)
    if not ctx.is_sysadmin:
        raise errors.not_authorized("Sysadmin", "sp_cdc_enable_db")
    if ctx.pg_database in SYSTEM_DATABASES:
        raise errors.system_database(ctx.database)
    with ctx.conn.cursor() as cur:
        if is_enabled(cur):
            yield Message(22905, errors.already_enabled_text(ctx.database), severity=10,
                          procedure="sp_cdc_enable_db")
            return
        cur.execute("SELECT to_regnamespace('cdc') IS NOT NULL")
        if cur.fetchone()[0]:
            raise errors.cdc_schema_exists(ctx.database)
        slot = slot_name_for(ctx.database)
        slot_lsn = None
        cur.execute("SELECT txid_current_if_assigned() IS NULL")
        if cur.fetchone()[0]:
            # Before any write of this transaction (PostgreSQL requires that, and the slot waits for
            # transactions holding an id): from its consistent point on every change is decodable.
            # Otherwise the capture job creates it once this transaction has committed.
            slot_lsn = create_slot(cur, slot, ctx.jobs.dsn(ctx.database))
        create_database_objects(cur, slot)
        if slot_lsn is not None:
            cur.execute("UPDATE hw_emulator.cdc_state SET slot_lsn = %s", (slot_lsn,))
    ctx.jobs.start(ctx.database, new_slot=slot if slot_lsn is not None else None)


def sp_cdc_disable_db(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    _params("sp_cdc_disable_db", params)
    if not ctx.is_sysadmin:
        raise errors.not_authorized("Sysadmin", "sp_cdc_disable_db")
    with ctx.conn.cursor() as cur:
        if not is_enabled(cur):
            return
        for instance in _instances(cur):
            _drop_instance(cur, instance)
        drop_database_objects(cur)
    ctx.jobs.wake(ctx.database)  # the job drops its slot once this has committed
    yield from ()


# --- sp_cdc_enable_table ---------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"^[A-Za-z_@#][A-Za-z0-9_@#$]*$")


def _parse_column_list(text: str) -> list[str]:
    names: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] in "[\"":
            close = "]" if text[i] == "[" else '"'
            j = i + 1
            name = []
            while True:
                if j >= n:
                    raise errors.error(22965, "A quoted column in the column list is not properly terminated. "
                                       "Verify that columns are correctly delimited and retry the operation. For "
                                       "more information, see 'Delimited Identifiers' in Books Online.")
                if text[j] == close:
                    if j + 1 < n and text[j + 1] == close:
                        name.append(close)
                        j += 2
                        continue
                    break
                name.append(text[j])
                j += 1
            names.append("".join(name))
            i = j + 1
        else:
            j = text.find(",", i)
            j = n if j < 0 else j
            names.append(text[i:j].strip())
            i = j
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i < n and text[i] == ",":
            i += 1
    return [name for name in names if name != ""]


def sp_cdc_enable_table(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    proc = "sp_cdc_enable_table"
    p = _params(proc, params)
    schema, name = _text(p["source_schema"]), _text(p["source_name"])
    if not schema:
        raise errors.parameter_null("@source_schema")
    if not name:
        raise errors.parameter_null("@source_name")
    role = p["role_name"]
    if role is not None:
        role = str(role).strip()
        if role == "":
            raise errors.role_name_empty()
    if not ctx.is_db_owner:
        raise errors.not_dbo(proc)
    with ctx.conn.cursor() as cur:
        _require_enabled(ctx, cur, proc)
        if schema.lower() == "cdc":
            raise errors.cdc_schema_table()
        source = _source(cur, schema, name)
        if source is None:
            raise errors.source_not_found(schema, name)
        source_id, schema, name, pg_schema, pg_name = source
        instance = _text(p["capture_instance"]) or f"{schema}_{name}"
        if len(instance) > 100:
            raise errors.instance_name_too_long(instance)
        if not _IDENTIFIER.match(instance):
            raise errors.instance_name_invalid(instance)
        cur.execute("SELECT 1 FROM cdc.change_tables WHERE lower(capture_instance) = lower(%s)", (instance,))
        if cur.fetchone():
            raise errors.instance_exists(instance)
        cur.execute("SELECT count(*) FROM cdc.change_tables WHERE source_object_id = %s", (source_id,))
        if cur.fetchone()[0] >= 2:
            raise errors.two_instances(schema, name)

        cur.execute("""
            SELECT c.column_id, c.name, c.pg_name, c.type, format_type(a.atttypid, a.atttypmod)
            FROM hw_emulator.columns c
            JOIN pg_attribute a ON a.attrelid = (quote_ident(%s) || '.' || quote_ident(%s))::regclass
                               AND a.attname = c.pg_name AND NOT a.attisdropped
            WHERE c.object_id = %s ORDER BY c.column_id""", (pg_schema, pg_name, source_id))
        source_columns = cur.fetchall()
        by_name = {c[1].lower(): c for c in source_columns}

        column_list = _text(p["captured_column_list"])
        if column_list:
            chosen = []
            for col in _parse_column_list(column_list):
                if col.lower() not in by_name:
                    raise errors.column_not_found(col, schema, name)
                if by_name[col.lower()] not in chosen:
                    chosen.append(by_name[col.lower()])
            chosen.sort(key=lambda c: c[0])
        else:
            chosen = list(source_columns)
        if any(c[1] in RESERVED_COLUMNS for c in chosen):
            raise errors.reserved_column(f"{schema}.{name}")

        cur.execute("SELECT index_id, name, is_primary_key, is_unique, column_ids FROM hw_emulator.indexes "
                    "WHERE object_id = %s ORDER BY index_id", (source_id,))
        indexes = cur.fetchall()
        index_name = _text(p["index_name"])
        index = None
        if index_name:
            index = next((i for i in indexes if i[1].lower() == index_name.lower()), None)
            if index is None:
                raise errors.index_not_found(index_name, schema, name)
            if not (index[2] or index[3]):
                raise errors.index_not_unique(index_name, schema, name)
        else:
            index = next((i for i in indexes if i[2]), None)
        net = _int(p["supports_net_changes"])
        if net is None:
            net = 1 if index is not None else 0
        if net and index is None:
            raise errors.net_changes_without_key()
        if net and index is not None and not set(index[4]) <= {c[0] for c in chosen}:
            raise errors.key_not_captured()

        cur.execute("SELECT slot_name FROM hw_emulator.cdc_state")
        slot = cur.fetchone()[0]
        cur.execute("SELECT txid_current_if_assigned() IS NULL")
        if cur.fetchone()[0]:
            # Before writing anything: the slot must be consistent, or changes made right after this
            # could not be decoded. (A caller whose transaction already wrote cannot wait here —
            # slot creation waits for it — and the capture job then moves start_lsn to the slot.)
            ctx.jobs.wait_for_slot(ctx.database, slot, ctx.conn)

        cur.execute("SELECT count(*) FROM hw_emulator.cdc_jobs")
        if cur.fetchone()[0] == 0:  # the first table of the database gets the capture and cleanup jobs
            cur.execute("INSERT INTO hw_emulator.cdc_jobs VALUES ('capture', %s, %s, %s, %s, %s, NULL, NULL), "
                        "('cleanup', %s, NULL, NULL, NULL, NULL, %s, %s)",
                        (str(uuid.uuid4()), DEFAULT_JOB["maxtrans"], DEFAULT_JOB["maxscans"],
                         DEFAULT_JOB["continuous"], DEFAULT_JOB["pollinginterval"], str(uuid.uuid4()),
                         DEFAULT_JOB["retention"], DEFAULT_JOB["threshold"]))

        cur.execute("SELECT pg_current_wal_insert_lsn()::text")
        start_lsn = lsns.from_pg(lsns.parse_pg(cur.fetchone()[0]))
        captured = [CapturedColumn(c[1], c[2], c[0], _change_table_type(c[3]), c[4]) for c in chosen]
        object_id = create_change_table(cur, instance, captured)
        cur.execute("INSERT INTO cdc.change_tables VALUES (%s, 0, %s, %s, %s, NULL, %s, NULL, %s, %s, %s, %s, %s)",
                    (object_id, source_id, instance, psycopg2.Binary(start_lsn), bool(net), role,
                     index[1] if index is not None else None, _text(p["filegroup_name"]), _now(cur),
                     bool(_int(p["allow_partition_switch"]))))
        for ordinal, c in enumerate(chosen, start=1):
            cur.execute("INSERT INTO cdc.captured_columns VALUES (%s, %s, %s, %s, %s, false, NULL)",
                        (object_id, c[1], c[0], SqlType.parse(c[3]).name, ordinal))
        if index is not None:
            names = {c[0]: c[1] for c in source_columns}
            for ordinal, column_id in enumerate(index[4], start=1):
                cur.execute("INSERT INTO cdc.index_columns VALUES (%s, %s, %s, %s)",
                            (object_id, names.get(column_id), ordinal, column_id))
        # before images of updates and deletes need the whole old row in the WAL
        table = sql.SQL("{}.{}").format(sql.Identifier(pg_schema), sql.Identifier(pg_name))
        cur.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(table))
        cur.execute("SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s AND tablename = %s",
                    (PUBLICATION, pg_schema, pg_name))
        if cur.fetchone() is None:
            cur.execute(sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(sql.Identifier(PUBLICATION), table))
    ctx.jobs.start(ctx.database)
    yield from ()


def _change_table_type(type_: str) -> str:
    # rowversion/timestamp values are kept as binary(8) in change tables
    return "binary(8)" if SqlType.parse(type_).name == "timestamp" else type_


# --- sp_cdc_disable_table ---------------------------------------------------------------------------

def _drop_instance(cur: Any, instance: dict[str, Any]) -> None:
    object_id = instance["object_id"]
    drop_change_table(cur, instance["capture_instance"])
    cur.execute("DELETE FROM cdc.captured_columns WHERE object_id = %s", (object_id,))
    cur.execute("DELETE FROM cdc.index_columns WHERE object_id = %s", (object_id,))
    cur.execute("DELETE FROM cdc.ddl_history WHERE object_id = %s", (object_id,))
    cur.execute("DELETE FROM cdc.change_tables WHERE object_id = %s", (object_id,))
    cur.execute("SELECT 1 FROM cdc.change_tables WHERE source_object_id = %s", (instance["source_object_id"],))
    if cur.fetchone() is None:  # the table's last instance: stop publishing it
        cur.execute("SELECT pg_schema, pg_name FROM hw_emulator.objects WHERE object_id = %s",
                    (instance["source_object_id"],))
        row = cur.fetchone()
        if row is not None:
            cur.execute("SELECT to_regclass(quote_ident(%s) || '.' || quote_ident(%s))", row)
            if cur.fetchone()[0] is not None:
                table = sql.SQL("{}.{}").format(sql.Identifier(row[0]), sql.Identifier(row[1]))
                cur.execute("SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s "
                            "AND tablename = %s", (PUBLICATION, row[0], row[1]))
                if cur.fetchone() is not None:
                    cur.execute(sql.SQL("ALTER PUBLICATION {} DROP TABLE {}").format(
                        sql.Identifier(PUBLICATION), table))
                cur.execute(sql.SQL("ALTER TABLE {} REPLICA IDENTITY DEFAULT").format(table))


def drop_source_instances(cur: Any, source_object_id: int) -> None:
    """For the engine's DROP TABLE of a tracked table (before dropping it): SQL Server drops the
    table's capture instances with it."""
    if is_enabled(cur):
        for inst in _instances(cur, source_object_id):
            _drop_instance(cur, inst)


def sp_cdc_disable_table(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    proc = "sp_cdc_disable_table"
    p = _params(proc, params)
    schema, name, instance = _text(p["source_schema"]), _text(p["source_name"]), _text(p["capture_instance"])
    if not schema:
        raise errors.parameter_null("@source_schema")
    if not name:
        raise errors.parameter_null("@source_name")
    if not instance:
        raise errors.parameter_null("@capture_instance")
    if not ctx.is_db_owner:
        raise errors.not_dbo(proc)
    with ctx.conn.cursor() as cur:
        _require_enabled(ctx, cur, proc)
        source = _source(cur, schema, name)
        if source is None:
            raise errors.source_not_found(schema, name)
        source_id, schema, name = source[0], source[1], source[2]
        instances = _instances(cur, source_id)
        if not instances:
            raise errors.table_not_tracked(schema, name)
        if instance.lower() != "all":
            instances = [i for i in instances if i["capture_instance"].lower() == instance.lower()]
            if not instances:
                raise errors.instance_not_enabled(instance, schema, name)
        for inst in instances:
            _drop_instance(cur, inst)
        cur.execute("SELECT count(*) FROM cdc.change_tables")
        if cur.fetchone()[0] == 0:  # the database's last table: SQL Server drops the jobs and the mapping
            cur.execute("DELETE FROM hw_emulator.cdc_jobs")
            cur.execute("DELETE FROM cdc.lsn_time_mapping")
    yield from ()


# --- jobs ------------------------------------------------------------------------------------------

def _job_type(value: Any) -> str:
    job_type = (_text(value) or "").lower()
    if job_type not in ("capture", "cleanup"):
        raise errors.bad_job_type(value)
    return job_type


def sp_cdc_change_job(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    proc = "sp_cdc_change_job"
    p = _params(proc, params)
    if not ctx.is_db_owner:
        raise errors.not_dbo(proc)
    job_type = _job_type(p["job_type"])
    values = {k: _int(p[k]) for k in ("maxtrans", "maxscans", "continuous", "pollinginterval", "retention",
                                       "threshold")}
    if job_type == "capture" and values["retention"] is not None:
        raise errors.retention_for_capture()
    if job_type == "cleanup" and any(values[k] is not None
                                     for k in ("maxtrans", "maxscans", "continuous", "pollinginterval")):
        raise errors.capture_params_for_cleanup()
    if values["maxtrans"] is not None and values["maxtrans"] <= 0:
        raise errors.bad_maxtrans()
    if values["maxscans"] is not None and values["maxscans"] <= 0:
        raise errors.bad_maxscans()
    if values["continuous"] is not None and values["continuous"] not in (0, 1):
        raise errors.bad_continuous()
    if values["pollinginterval"] is not None and not 0 <= values["pollinginterval"] <= 86399:
        raise errors.bad_polling_interval()
    if values["retention"] is not None and not 0 < values["retention"] <= 52594800:
        raise errors.bad_retention()
    with ctx.conn.cursor() as cur:
        _require_enabled(ctx, cur, proc)
        cur.execute("SELECT 1 FROM hw_emulator.cdc_jobs WHERE job_type = %s", (job_type,))
        if cur.fetchone() is None:
            raise errors.job_missing(job_type)
        for key, value in values.items():
            if value is not None:
                if key == "continuous":
                    value = bool(value)
                cur.execute(sql.SQL("UPDATE hw_emulator.cdc_jobs SET {} = %s WHERE job_type = %s").format(
                    sql.Identifier(key)), (value, job_type))
    ctx.jobs.wake(ctx.database)
    yield from ()


HELP_JOBS_COLUMNS = [
    Column("job_id", SqlType("uniqueidentifier")), Column("job_type", SqlType("nvarchar", length=20)),
    Column("job_name", SqlType("nvarchar", length=128)), Column("maxtrans", SqlType("int")),
    Column("maxscans", SqlType("int")), Column("continuous", SqlType("bit")),
    Column("pollinginterval", SqlType("bigint")), Column("retention", SqlType("bigint")),
    Column("threshold", SqlType("bigint")),
]


def sp_cdc_help_jobs(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    proc = "sp_cdc_help_jobs"
    _params(proc, params)
    if not ctx.is_db_owner:  # documented: db_owner only (Debezium then logs it and polls every 5 s)
        raise errors.not_dbo(proc)
    with ctx.conn.cursor() as cur:
        _require_enabled(ctx, cur, proc)
        cur.execute("SELECT job_id, job_type, maxtrans, maxscans, continuous, pollinginterval, retention, threshold "
                    "FROM hw_emulator.cdc_jobs ORDER BY job_type")
        rows = [(uuid.UUID(str(job_id)), job_type, f"cdc.{ctx.database}_{job_type}", maxtrans or 0, maxscans or 0,
                 bool(continuous), pollinginterval or 0, retention or 0, threshold or 0)
                for job_id, job_type, maxtrans, maxscans, continuous, pollinginterval, retention, threshold
                in cur.fetchall()]
    yield ResultSet(HELP_JOBS_COLUMNS, rows)


def _start_stop(ctx: CdcContext, params: dict[str, Any], proc: str, running: bool) -> Iterator[Result]:
    p = _params(proc, params)
    if not ctx.is_db_owner:
        raise errors.not_dbo(proc)
    job_type = _job_type(p["job_type"])
    with ctx.conn.cursor() as cur:
        _require_enabled(ctx, cur, proc)
        cur.execute("SELECT 1 FROM hw_emulator.cdc_jobs WHERE job_type = %s", (job_type,))
        if cur.fetchone() is None:
            raise errors.job_missing(job_type)
        if job_type == "cleanup":
            if running:  # one run of the cleanup job, with its retention
                run_cleanup(cur)
            return
    ctx.jobs.set_job_running(ctx.database, running)
    yield from ()


def sp_cdc_start_job(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    yield from _start_stop(ctx, params, "sp_cdc_start_job", True)


def sp_cdc_stop_job(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    yield from _start_stop(ctx, params, "sp_cdc_stop_job", False)


# --- sp_cdc_help_change_data_capture -------------------------------------------------------------

def _sysname() -> SqlType:
    return SqlType("nvarchar", length=128)


HELP_CDC_COLUMNS = [
    Column("source_schema", _sysname()), Column("source_table", _sysname()), Column("capture_instance", _sysname()),
    Column("object_id", SqlType("int")), Column("source_object_id", SqlType("int")),
    Column("start_lsn", SqlType("binary", length=10)), Column("end_lsn", SqlType("binary", length=10)),
    Column("supports_net_changes", SqlType("bit")), Column("has_drop_pending", SqlType("bit")),
    Column("role_name", _sysname()), Column("index_name", _sysname()), Column("filegroup_name", _sysname()),
    Column("create_date", SqlType("datetime")), Column("index_column_list", SqlType("nvarchar", length=-1)),
    Column("captured_column_list", SqlType("nvarchar", length=-1)),
]


def _quoted_list(names: list[str]) -> str:
    return ", ".join("[" + n.replace("]", "]]") + "]" for n in names)


def sp_cdc_help_change_data_capture(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    proc = "sp_cdc_help_change_data_capture"
    p = _params(proc, params)
    schema, name = _text(p["source_schema"]), _text(p["source_name"])
    if bool(schema) != bool(name):
        raise errors.help_needs_both()
    with ctx.conn.cursor() as cur:
        _require_enabled(ctx, cur, proc)
        source_id = None
        if schema:
            source = _source(cur, schema, name)
            if source is None:
                raise errors.source_not_found(schema, name)
            source_id = source[0]
            if not _instances(cur, source_id):
                raise errors.table_not_tracked(source[1], source[2])
        rows = []
        for inst in _instances(cur, source_id):
            if not ctx.can_access_role(inst["role_name"]) or not ctx.can_read_source(inst["schema_name"],
                                                                                      inst["name"]):
                continue
            cur.execute("SELECT column_name FROM cdc.index_columns WHERE object_id = %s ORDER BY index_ordinal",
                        (inst["object_id"],))
            index_columns = [r[0] for r in cur.fetchall()]
            cur.execute("SELECT column_name FROM cdc.captured_columns WHERE object_id = %s ORDER BY column_ordinal",
                        (inst["object_id"],))
            captured = [r[0] for r in cur.fetchall()]
            rows.append((inst["schema_name"], inst["name"], inst["capture_instance"], inst["object_id"],
                         inst["source_object_id"], _bytes(inst["start_lsn"]), _bytes(inst["end_lsn"]),
                         inst["supports_net_changes"], inst["has_drop_pending"], inst["role_name"],
                         inst["index_name"], inst["filegroup_name"], inst["create_date"],
                         _quoted_list(index_columns) if index_columns else None, _quoted_list(captured)))
    yield ResultSet(HELP_CDC_COLUMNS, rows)


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


# --- sp_cdc_cleanup_change_table -------------------------------------------------------------------

def sp_cdc_cleanup_change_table(ctx: CdcContext, params: dict[str, Any]) -> Iterator[Result]:
    proc = "sp_cdc_cleanup_change_table"
    p = _params(proc, params)
    if not ctx.is_db_owner:
        raise errors.not_dbo(proc)
    instance = _text(p["capture_instance"])
    if not instance:
        raise errors.parameter_null("@capture_instance")
    with ctx.conn.cursor() as cur:
        if not is_enabled(cur):
            raise errors.cleanup_not_enabled(ctx.database)
        cur.execute("SELECT capture_instance, start_lsn FROM cdc.change_tables "
                    "WHERE lower(capture_instance) = lower(%s)", (instance,))
        row = cur.fetchone()
        if row is None:
            raise errors.error(22920, f"The named capture instance {instance} does not exist for database "
                               f"{ctx.database}.")
        instance = row[0]
        mark = p["low_water_mark"]
        if mark is None:
            mark = bytes(row[1]) if row[1] is not None else None
        else:
            mark = bytes(mark)
            cur.execute("SELECT tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn = %s",
                        (psycopg2.Binary(mark),))
            hit = cur.fetchone()
            if hit is None:
                raise errors.low_water_mark_not_mapped("0x" + mark.hex().upper())
            # entries sharing the commit time of the mark: the smallest of them is the mark
            cur.execute("SELECT public.min(start_lsn) FROM cdc.lsn_time_mapping WHERE tran_end_time = %s", (hit[0],))
            mark = bytes(cur.fetchone()[0])
        if mark is not None:
            clean_instance(cur, instance, mark, _int(p["threshold"]))
            trim_lsn_time_mapping(cur)
    yield from ()


PROCEDURES: dict[str, Callable[[CdcContext, dict[str, Any]], Iterator[Result]]] = {
    "sp_cdc_enable_db": sp_cdc_enable_db,
    "sp_cdc_disable_db": sp_cdc_disable_db,
    "sp_cdc_enable_table": sp_cdc_enable_table,
    "sp_cdc_disable_table": sp_cdc_disable_table,
    "sp_cdc_change_job": sp_cdc_change_job,
    "sp_cdc_help_change_data_capture": sp_cdc_help_change_data_capture,
    "sp_cdc_help_jobs": sp_cdc_help_jobs,
    "sp_cdc_cleanup_change_table": sp_cdc_cleanup_change_table,
    "sp_cdc_start_job": sp_cdc_start_job,
    "sp_cdc_stop_job": sp_cdc_stop_job,
}


def run(ctx: CdcContext, name: str, params: dict[str, Any]) -> list[Result]:
    """Call a procedure by name and collect its results (convenience for the engine and tests)."""
    procedure = PROCEDURES.get(name.lower().removeprefix("sys."))
    if procedure is None:
        raise SqlServerError(2812, f"Could not find stored procedure '{name}'.", state=62)
    return list(procedure(ctx, params))


"""What the engine's translator substitutes for CDC's query functions, and the result types of the
scalar CDC functions.

``cdc.fn_cdc_get_all_changes_<ci>(@from, @to, N'all update old')`` becomes the subquery of
:func:`all_changes_sql`: a SELECT over ``cdc.<ci>_CT`` whose columns come straight from the table,
so the engine types them from the registry (binary(10), int, the source columns' types) — a
PostgreSQL function would hide that origin.
"""

from __future__ import annotations

from typing import Any

from psycopg2 import sql

from .objects import CHANGE_TABLE_HEAD, change_table_name, pg_ident

# result type of each scalar function (SqlType strings), for the translator's typing hints
FUNCTION_TYPES: dict[str, str] = {
    "sys.fn_cdc_get_max_lsn": "binary(10)",
    "sys.fn_cdc_get_min_lsn": "binary(10)",
    "sys.fn_cdc_increment_lsn": "binary(10)",
    "sys.fn_cdc_decrement_lsn": "binary(10)",
    "sys.fn_cdc_map_lsn_to_time": "datetime",
    "sys.fn_cdc_map_time_to_lsn": "binary(10)",
    "sys.fn_cdc_is_bit_set": "bit",
    "sys.fn_cdc_get_column_ordinal": "int",
    "sys.fn_cdc_has_column_changed": "bit",
}

ALL_CHANGES_PREFIX = "fn_cdc_get_all_changes_"


def captured_pg_columns(conn: Any, capture_instance: str) -> list[str] | None:
    """The PostgreSQL names of the captured columns of an instance, in column_ordinal order; None
    when the instance does not exist (the engine then raises 208 for the function name)."""
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass('cdc.change_tables') IS NOT NULL")
        if not cur.fetchone()[0]:
            return None
        cur.execute("SELECT ct.object_id FROM cdc.change_tables ct WHERE lower(ct.capture_instance) = lower(%s)",
                    (capture_instance,))
        row = cur.fetchone()
        if row is None:
            return None
        cur.execute("SELECT c.pg_name FROM hw_emulator.columns c WHERE c.object_id = %s "
                    "AND c.name NOT LIKE '\\_\\_$%%' ORDER BY c.column_id", (row[0],))
        return [r[0] for r in cur.fetchall()]


def all_changes_sql(capture_instance: str, from_sql: str, to_sql: str, row_filter_sql: str,
                    captured_columns: list[str] | None = None) -> str:
    """A parenthesised PostgreSQL subquery returning what ``cdc.fn_cdc_get_all_changes_<ci>`` returns:
    ``__$start_lsn, __$seqval, __$operation, __$update_mask`` and the captured columns (no
    ``__$end_lsn``, no ``__$command_id``), rows with ``from <= __$start_lsn <= to``; with
    ``'all'`` an update yields only its op-4 row, with ``'all update old'`` its op-3 and op-4 rows.
    ``from_sql``/``to_sql``/``row_filter_sql`` are PostgreSQL expressions (constants, parameters,
    calls of the sys.fn_cdc_* functions — nothing referring to other tables of the query).

    ``captured_columns``: the PostgreSQL names of the captured columns (required; see
    :func:`captured_pg_columns`, or use :func:`all_changes_sql_for`).

    The guard ``cdc.check_lsn_range`` (error 313) is a one-time filter: PostgreSQL evaluates it
    before scanning, so invalid bounds fail even when no row lies in the interval.
    """
    if captured_columns is None:
        raise ValueError("all_changes_sql needs the captured columns (captured_pg_columns())")
    table = pg_ident(change_table_name(capture_instance))
    head = [c.pg_name for c in CHANGE_TABLE_HEAD if c.name != "__$end_lsn"]
    names = head + list(captured_columns)
    columns = sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(n)) for n in names)
    query = sql.SQL(
        "(SELECT {columns} FROM cdc.{table} AS t "
        "WHERE cdc.check_lsn_range({ci}, {from_}, {to}, {filter}) "
        # coalesce: a NULL bound must not let PostgreSQL fold the WHERE clause to "false" and skip
        # the guard, which reports the NULL
        "AND t.\"__$start_lsn\" BETWEEN coalesce({from_}, ''::bytea) AND coalesce({to}, ''::bytea) "
        "AND (t.\"__$operation\" <> 3 OR lower(btrim({filter})) = 'all update old'))").format(
        columns=columns, table=sql.Identifier(table), ci=sql.Literal(capture_instance),
        from_=sql.SQL(from_sql), to=sql.SQL(to_sql), filter=sql.SQL(row_filter_sql))
    return _render(query)


def _render(composed: sql.Composable) -> str:
    """Render without a connection: only Identifier/Literal(str)/SQL parts are used above."""
    if isinstance(composed, sql.Composed):
        return "".join(_render(part) for part in composed.seq)
    if isinstance(composed, sql.SQL):
        return composed.string
    if isinstance(composed, sql.Identifier):
        return ".".join('"' + s.replace('"', '""') + '"' for s in composed.strings)
    if isinstance(composed, sql.Literal):
        value = composed.wrapped
        if not isinstance(value, str):
            raise TypeError(value)
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(composed)


def all_changes_sql_for(conn: Any, capture_instance: str, from_sql: str, to_sql: str,
                        row_filter_sql: str) -> str | None:
    """:func:`all_changes_sql` with the captured columns looked up on ``conn``; None when the capture
    instance does not exist (SQL Server: 208 "Invalid object name '<db>.cdc.fn_cdc_get_all_changes_<ci>'.")."""
    columns = captured_pg_columns(conn, capture_instance)
    if columns is None:
        return None
    return all_changes_sql(capture_instance, from_sql, to_sql, row_filter_sql, columns)

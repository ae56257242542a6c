"""PostgreSQL errors → SqlServerError (numbers and texts as SQL Server words them).

``Namer`` gives the SQL Server spelling of PostgreSQL names (from the registry) and the name of a
relation as the statement wrote it (for 208)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..results import SqlServerError

_SQLSERVER_DETAIL = re.compile(r"^sqlserver:(\d+):(\d+):(\d+)$")


class Namer:
    """What the mapping needs to know about the statement and the registry."""

    def __init__(self, database: str, *, written_tables: dict[str, str] | None = None,
                 table_name: Callable[[str, str], str | None] | None = None,
                 column_name: Callable[[str, str, str], str | None] | None = None,
                 constraint: Callable[[str], tuple[str, str, bool] | None] | None = None,
                 statement_kind: str = "INSERT",
                 denied: Callable[[str, str], tuple[str, str, str] | None] | None = None) -> None:
        self.database = database
        # 42501: (kind of object, PostgreSQL name) → (permission, SQL Server object name, schema)
        self.denied = denied or (lambda kind, name: None)
        self.written_tables = written_tables or {}
        self.table_name = table_name or (lambda s, t: None)
        self.column_name = column_name or (lambda s, t, c: None)
        self.constraint = constraint or (lambda n: None)
        self.statement_kind = statement_kind


def map_pg_error(exc: Any, namer: Namer) -> SqlServerError:
    code = getattr(exc, "pgcode", None) or ""
    diag = getattr(exc, "diag", None)
    primary = (diag.message_primary if diag is not None else None) or str(exc).split("\n")[0]
    detail = (diag.message_detail if diag is not None else None) or ""
    m = _SQLSERVER_DETAIL.match(detail)
    if m:
        number, severity, state = (int(x) for x in m.groups())
        return SqlServerError(number, primary, severity=severity, state=state,
                              aborts_batch=number not in (2628, 2627, 2601, 515, 547, 3621, 50000))
    schema = getattr(diag, "schema_name", None) or "dbo"
    table = getattr(diag, "table_name", None) or ""
    column = getattr(diag, "column_name", None) or ""
    constraint_name = getattr(diag, "constraint_name", None) or ""
    if code == "42P01":
        m2 = re.search(r'relation "([^"]+)" does not exist', primary)
        pgname = m2.group(1) if m2 else ""
        written = namer.written_tables.get(pgname.lower(), pgname)
        return SqlServerError(208, f"Invalid object name '{written}'.", state=1)
    if code == "42703":
        m2 = re.search(r'column "?([^"\s]+)"? (?:of relation "[^"]+" )?does not exist', primary)
        col = m2.group(1) if m2 else column
        if "." in col:
            col = col.split(".")[-1]
        return SqlServerError(207, f"Invalid column name '{namer.written_tables.get('#col:' + col, col)}'.")
    if code == "42702":
        m2 = re.search(r'column reference "([^"]+)" is ambiguous', primary)
        return SqlServerError(209, f"Ambiguous column name '{m2.group(1) if m2 else column}'.")
    if code == "42883":
        m2 = re.search(r"function ([\w.]+)\(", primary)
        name = m2.group(1) if m2 else primary
        if "operator does not exist" in primary:
            return SqlServerError(402, f"The data types are incompatible in the operator. ({primary})")
        return SqlServerError(195, f"'{name.split('.')[-1]}' is not a recognized built-in function name.")
    if code == "23505":
        info = namer.constraint(constraint_name)
        km = re.search(r"Key \((.*)\)=\((.*)\) already exists", detail)
        value = km.group(2) if km else ""
        obj = namer.table_name(schema, table) or f"{schema}.{table}"
        if info is not None and not info[2]:  # unique index (not a constraint)
            return SqlServerError(2601, f"Cannot insert duplicate key row in object '{obj}' with unique index "
                                        f"'{info[0]}'. The duplicate key value is ({value}).", severity=14,
                                  aborts_batch=False)
        kind = "PRIMARY KEY" if info is None or info[1] == "PK" else "UNIQUE KEY"
        name = info[0] if info else constraint_name
        return SqlServerError(2627, f"Violation of {kind} constraint '{name}'. Cannot insert duplicate key in "
                                    f"object '{obj}'. The duplicate key value is ({value}).", severity=14,
                              aborts_batch=False)
    if code == "23502":
        col = namer.column_name(schema, table, column) or column
        tbl = namer.table_name(schema, table) or f"{schema}.{table}"
        return SqlServerError(515, f"Cannot insert the value NULL into column '{col}', table "
                                   f"'{namer.database}.{tbl}'; column does not allow nulls. "
                                   f"{namer.statement_kind} fails.", aborts_batch=False, state=2)
    if code == "23503":
        tm = re.search(r'table "([^"]+)"', detail) or re.search(r'table "([^"]+)"', primary)
        ref = tm.group(1) if tm else table
        return SqlServerError(547, f'The {namer.statement_kind} statement conflicted with the FOREIGN KEY constraint '
                                   f'"{constraint_name}". The conflict occurred in database "{namer.database}", '
                                   f'table "{namer.table_name(schema, ref) or schema + "." + ref}".',
                              aborts_batch=False)
    if code == "23514":
        if constraint_name == "hw_tinyint_range":
            return SqlServerError(8115, "Arithmetic overflow error converting expression to data type tinyint.")
        if constraint_name in ("hw_money_range", "hw_smallmoney_range"):
            kind = "money" if constraint_name == "hw_money_range" else "smallmoney"
            return SqlServerError(8115, f"Arithmetic overflow error converting expression to data type {kind}.")
        return SqlServerError(547, f'The {namer.statement_kind} statement conflicted with the CHECK constraint '
                                   f'"{constraint_name}". The conflict occurred in database "{namer.database}", '
                                   f'table "{namer.table_name(schema, table) or schema + "." + table}".',
                              aborts_batch=False)
    if code == "40P01":
        return SqlServerError(1205, "Transaction (Process ID 51) was deadlocked on lock resources with another "
                                    "process and has been chosen as the deadlock victim. Rerun the transaction.",
                              severity=13, state=51)
    if code in ("40001",):
        return SqlServerError(3960, "Snapshot isolation transaction aborted due to update conflict. You cannot use "
                                    "snapshot isolation to access table directly or indirectly in database "
                                    f"'{namer.database}' to update, delete, or insert the row that has been modified "
                                    "or deleted by another transaction. Retry the transaction or change the "
                                    "isolation level for the update/delete statement.", state=2)
    if code == "55P03":
        return SqlServerError(1222, "Lock request time out period exceeded.", state=56, aborts_batch=False)
    if code == "42501":
        dm = re.search(r"permission denied for (table|view|function|sequence|schema|materialized view) (\S+)",
                       primary)
        kind, pgname = (dm.group(1), dm.group(2).strip('"')) if dm else ("table", table)
        if kind == "schema":
            # only CREATE needs more than USAGE on a schema (which everyone has)
            return SqlServerError(262, f"CREATE TABLE permission denied in database '{namer.database}'.",
                                  severity=14, state=1, aborts_batch=False)
        found = namer.denied("table" if kind in ("view", "materialized view") else kind, pgname)
        permission, obj, schema = found if found else (
            "EXECUTE" if kind == "function" else namer.statement_kind, pgname, schema)
        # a permission error ends the statement, not the batch
        return SqlServerError(229, f"The {permission} permission was denied on the object '{obj}', database "
                                   f"'{namer.database}', schema '{schema}'.", severity=14, state=5,
                              aborts_batch=False)
    if code == "22012":
        return SqlServerError(8134, "Divide by zero error encountered.", state=1)
    if code == "22001":
        return SqlServerError(2628, f"String or binary data would be truncated. ({primary})", aborts_batch=False)
    if code in ("22003",):
        return SqlServerError(8115, "Arithmetic overflow error converting expression to data type "
                                    f"{_overflow_type(primary)}.")
    if code in ("22P02", "22007", "22008"):
        if "uuid" in primary:
            return SqlServerError(8169, "Conversion failed when converting from a character string to "
                                        "uniqueidentifier.")
        if "timestamp" in primary or "date" in primary or "time" in primary:
            return SqlServerError(241, "Conversion failed when converting date and/or time from character string.")
        vm = re.search(r'input syntax for type (\w+(?: \w+)?): "(.*)"', primary)
        if vm:
            target = {"integer": "int", "bigint": "bigint", "smallint": "smallint", "numeric": "numeric",
                      "boolean": "bit"}.get(vm.group(1), vm.group(1))
            if target in ("numeric", "double precision", "real"):
                return SqlServerError(8114, f"Error converting data type varchar to {target}.")
            return SqlServerError(245, f"Conversion failed when converting the varchar value '{vm.group(2)}' "
                                       f"to data type {target}.")
        return SqlServerError(245, f"Conversion failed. ({primary})")
    if code == "57014":
        return SqlServerError(3618, "The query was canceled.", severity=11, state=1)
    if code == "42P07":
        m2 = re.search(r'relation "([^"]+)" already exists', primary)
        return SqlServerError(2714, f"There is already an object named '{m2.group(1) if m2 else ''}' in the "
                                    "database.", state=6)
    if code == "42601":
        return SqlServerError(102, f"Incorrect syntax near '{_near(primary)}'.")
    if code.startswith("42804") or code == "42846":
        return SqlServerError(206, f"Operand type clash: {primary}")
    if code == "25P02":
        return SqlServerError(3930, "The current transaction cannot be committed and cannot support operations "
                                    "that write to the log file. Roll back the transaction.")
    return SqlServerError(50000, f"emulator: backing store error {code}: {primary}")


def _overflow_type(text: str) -> str:
    if "smallint" in text:
        return "smallint"
    if "bigint" in text:
        return "bigint"
    if "numeric" in text:
        return "numeric"
    return "int"


def _near(text: str) -> str:
    m = re.search(r'at or near "([^"]*)"', text)
    return m.group(1) if m else ""

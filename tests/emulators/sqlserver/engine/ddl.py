"""CREATE/ALTER/DROP TABLE, CREATE/DROP INDEX, CREATE SCHEMA: PostgreSQL DDL plus registry rows.

SQL Server names keep their spelling in the registry; PostgreSQL relations and columns are the
lowercased names (quoted); constraint names are kept as written (they are what errors show)."""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from ..cdc import procedures as cdc_procedures
from ..results import SqlServerError
from ..sqltypes import SqlType
from . import convert
from .registry import ColumnInfo, IndexInfo, ObjectInfo, register_column, register_index, register_object
from .translate import TYPE_PREFIX, Translator, parse, type_from_datatype


@dataclass(slots=True)
class ColumnSpec:
    info: ColumnInfo
    pg_sql: str
    seed: int = 1
    increment: int = 1


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _default_definition(node: exp.Expression) -> str:
    """The default as sys.default_constraints.definition shows it: ((0)), (N'x'), (getdate())."""
    while isinstance(node, exp.Paren):
        node = node.this
    if (isinstance(node, exp.Literal) and not node.is_string) or isinstance(node, exp.Neg):
        return f"(({node.sql('tsql')}))"
    if isinstance(node, exp.National):
        return "(N'" + node.this.replace("'", "''") + "')"
    if isinstance(node, exp.Literal):
        return "('" + node.this.replace("'", "''") + "')"
    if isinstance(node, exp.Null):
        return "(NULL)"
    text = node.sql("tsql")
    text = {"CURRENT_TIMESTAMP()": "getdate()", "CURRENT_TIMESTAMP": "getdate()", "NEWID()": "newid()"}.get(
        text.upper(), text)
    if re.match(r"^[A-Za-z_]+\(\)$", text):
        text = text.lower()
    return f"({text})"


def column_spec(translator: Translator, table_name: str, coldef: exp.ColumnDef, column_id: int,
                pk_columns: list[str]) -> tuple[ColumnSpec, list[tuple[str | None, str, list[str]]]]:
    """One column definition → its PostgreSQL text and registry row; inline PK/UNIQUE come back as
    (name, kind, [column]) for the table-level handling."""
    name = coldef.name
    kind = coldef.args.get("kind")
    constraints = coldef.args.get("constraints") or []
    if kind is None:
        if any(isinstance(c.args.get("kind"), exp.ComputedColumnConstraint) for c in constraints):
            raise SqlServerError(50000, f"emulator: computed column '{name}' is not supported")
        raise SqlServerError(173, f"The definition for column '{name}' must include a data type.")
    t = type_from_datatype(kind)
    nullable: bool | None = None
    identity: tuple[int, int] | None = None
    default: exp.Expression | None = None
    keys: list[tuple[str | None, str, list[str]]] = []
    for c in constraints:
        k = c.args.get("kind")
        cname = c.this.name if isinstance(c.this, exp.Identifier) else None
        if isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint):
            start = k.args.get("start")
            inc = k.args.get("increment")
            identity = (int(start.sql()) if start is not None else 1, int(inc.sql()) if inc is not None else 1)
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            keys.append((cname, "PK", [name]))
        elif isinstance(k, exp.UniqueColumnConstraint):
            keys.append((cname, "UQ", [name]))
        elif isinstance(k, exp.DefaultColumnConstraint):
            default = k.this
        elif isinstance(k, exp.ComputedColumnConstraint):
            raise SqlServerError(50000, f"emulator: computed column '{name}' is not supported")
        elif isinstance(k, (exp.ClusteredColumnConstraint, exp.NonClusteredColumnConstraint)):
            pass
        else:
            raise SqlServerError(50000, f"emulator: column constraint {k.key if k else c.sql('tsql')} on column "
                                        f"'{name}' is not supported")
    is_pk = any(k[1] == "PK" for k in keys) or name.lower() in pk_columns
    if nullable is None:  # rowversion (timestamp) columns are NOT NULL unless declared NULL
        nullable = not is_pk and identity is None and t.name != "timestamp"
    if is_pk and nullable:
        raise SqlServerError(8111, f"Cannot define PRIMARY KEY constraint on nullable column in table "
                                   f"'{table_name}'.")
    pg = f"{q(name.lower())} {convert.pg_type(t)}"
    if identity is not None:
        if t.name not in ("int", "bigint", "smallint", "tinyint") and not (
                t.name in ("decimal", "numeric") and t.scale == 0):
            raise SqlServerError(2749, f"Identity column '{name}' must be of data type int, bigint, smallint, "
                                       "tinyint, or decimal or numeric with a scale of 0, and constrained to be "
                                       "nonnullable.")
        pg_int = {"tinyint": "int2", "smallint": "int2", "int": "int4", "bigint": "int8"}.get(t.name, "int8")
        pg = (f"{q(name.lower())} {pg_int} GENERATED BY DEFAULT AS IDENTITY "
              f"(START WITH {identity[0]} INCREMENT BY {identity[1]} MINVALUE {min(identity[0], 0) - 1})")
    if not nullable:
        pg += " NOT NULL"
    definition = None
    if default is not None:
        definition = _default_definition(default)
        pg += " DEFAULT " + _default_pg(translator, default, t)
    info = ColumnInfo(column_id, name, name.lower(), t, nullable, identity is not None, definition)
    return ColumnSpec(info, pg, *(identity or (1, 1))), keys


def _default_pg(translator: Translator, node: exp.Expression, t: SqlType) -> str:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.National):
        node = exp.Literal.string(node.this)
    if isinstance(node, exp.HexString):
        return convert.to_pg_literal(bytes.fromhex(node.this), t, explicit=True)
    if isinstance(node, (exp.Literal, exp.Neg)):
        v: Any = node.this if isinstance(node, exp.Literal) and node.is_string else node.sql("tsql")
        if not (isinstance(node, exp.Literal) and node.is_string):
            from decimal import Decimal
            v = Decimal(v) if "." in v else int(v)
        return convert.to_pg_literal(v, t, explicit=True)
    wrapper = exp.Select(expressions=[node.copy()])
    translator._functions(wrapper)
    translator._casts(wrapper)
    expr = wrapper.expressions[0]
    expr = translator._assign(expr, ColumnInfo(0, "", "", t, True), "")
    return f"({expr.sql('postgres')})"


def _pk_name(table: str, object_id: int, kind: str) -> str:
    suffix = f"{zlib.crc32(f'{table}{object_id}{kind}'.encode()):08X}{object_id & 0xFFFFFFFF:08X}"
    return f"{kind}__{table[:8]}__{suffix}"


@dataclass
class TableConstraint:
    """A table-level PRIMARY KEY, UNIQUE or FOREIGN KEY constraint as written."""

    name: str | None
    kind: str                          # "PK", "UQ" or "FK"
    columns: list[str]
    clustered: bool | None             # CLUSTERED / NONCLUSTERED, None when not said
    foreign_key: exp.ForeignKey | None


def table_constraint(item: exp.Expression) -> TableConstraint:
    """The constraint of a CREATE TABLE element or of ALTER TABLE … ADD CONSTRAINT; anything else
    (CHECK, …) is refused by name."""
    name = item.name if isinstance(item, exp.Constraint) else None
    parts = list(item.expressions) if isinstance(item, exp.Constraint) else [item]
    kind: str | None = None
    cols: list[str] = []
    clustered: bool | None = None
    foreign_key = None
    for p in parts:
        if isinstance(p, exp.PrimaryKeyColumnConstraint):
            kind = "PK"
        elif isinstance(p, exp.PrimaryKey):
            kind = "PK"
            cols = [c.name for c in p.expressions]
        elif isinstance(p, exp.UniqueColumnConstraint):
            kind = "UQ"
            if isinstance(p.this, exp.Schema):
                cols = [c.name for c in p.this.expressions]
        elif isinstance(p, (exp.ClusteredColumnConstraint, exp.NonClusteredColumnConstraint)):
            clustered = isinstance(p, exp.ClusteredColumnConstraint)
            cols = [o.this.name if isinstance(o, exp.Ordered) else o.name for o in p.this]
        elif isinstance(p, exp.ForeignKey):
            kind, foreign_key = "FK", p
        else:
            raise SqlServerError(50000, f"emulator: table constraint {p.sql('tsql')[:60]} is not supported")
    if kind is None:
        raise SqlServerError(50000, f"emulator: table constraint {item.sql('tsql')[:60]} is not supported")
    return TableConstraint(name, kind, cols, clustered, foreign_key)


def create_table(translator: Translator, cur: Any, tree: exp.Create, database: str,
                 lookup: Any) -> None:
    schema_node = tree.this
    if not isinstance(schema_node, exp.Schema):
        raise SqlServerError(50000, "emulator: CREATE TABLE … AS SELECT is not supported")
    table = schema_node.this
    schema = table.args.get("db").name if table.args.get("db") is not None else "dbo"
    name = table.name
    if name.startswith("#"):
        raise SqlServerError(50000, "emulator: temporary tables (#name) are not supported")
    pg_schema = _pg_schema(cur, schema)
    if lookup(schema, name) is not None:
        raise SqlServerError(2714, f"There is already an object named '{name}' in the database.", state=6)
    # table-level keys first: their columns are NOT NULL
    table_keys: list[tuple[str | None, str, list[str], str]] = []
    fks: list[str] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            continue
        c = table_constraint(item)
        if c.foreign_key is not None:
            fks.append(_foreign_key(cur, c.name, c.foreign_key, lookup))
        else:
            table_keys.append((c.name, c.kind, c.columns, "CLUSTERED" if c.clustered or (
                c.clustered is None and c.kind == "PK") else "NONCLUSTERED"))
    pk_cols = [c.lower() for k in table_keys if k[1] == "PK" for c in k[2]]
    specs: list[ColumnSpec] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            spec, keys = column_spec(translator, name, item, len(specs) + 1, pk_cols)
            specs.append(spec)
            for k in keys:
                table_keys.append((k[0], k[1], k[2], "CLUSTERED" if k[1] == "PK" else "NONCLUSTERED"))
    if not specs:
        raise SqlServerError(102, "Incorrect syntax near ')'.")
    if sum(1 for k in table_keys if k[1] == "PK") > 1:
        raise SqlServerError(8110, f"Cannot add multiple PRIMARY KEY constraints to table '{name}'.")
    by_name = {s.info.name.lower(): s for s in specs}
    object_id = register_object(cur, schema, name, "U ", pg_schema, name.lower())
    pieces = [s.pg_sql for s in specs]
    indexes: list[IndexInfo] = []
    next_index = 2
    for cname, kind, cols, type_desc in table_keys:
        for c in cols:
            if c.lower() not in by_name:
                raise SqlServerError(1911, f"Column name '{c}' does not exist in the target table or view.")
        cname = cname or _pk_name(name, object_id, kind)
        if kind == "PK":
            for c in cols:
                if by_name[c.lower()].info.nullable:
                    raise SqlServerError(8111, f"Cannot define PRIMARY KEY constraint on nullable column in table "
                                               f"'{name}'.")
        pg_kind = "PRIMARY KEY" if kind == "PK" else "UNIQUE"
        pieces.append(f"CONSTRAINT {q(cname)} {pg_kind} ({', '.join(q(c.lower()) for c in cols)})")
        index_id = 1 if type_desc == "CLUSTERED" else next_index
        if index_id != 1:
            next_index += 1
        indexes.append(IndexInfo(index_id, cname, kind == "PK", True, type_desc,
                                 [by_name[c.lower()].info.column_id for c in cols]))
    pieces.extend(fks)
    cur.execute(f"CREATE TABLE {q(pg_schema)}.{q(name.lower())} ({', '.join(pieces)})")
    for s in specs:
        register_column(cur, object_id, s.info)
        if s.info.type.name == "timestamp":
            _rowversion_trigger(cur, pg_schema, name.lower(), s.info.pg_name)
    for ix in indexes:
        register_index(cur, object_id, ix)
    # SQL Server refuses to truncate a table enabled for CDC (error 4711); PostgreSQL's logical
    # replication would not carry the truncate to the capture job either
    cur.execute(f"CREATE TRIGGER hw_refuse_cdc_truncate BEFORE TRUNCATE ON {q(pg_schema)}.{q(name.lower())} "
                f"FOR EACH STATEMENT EXECUTE FUNCTION sys.hw_refuse_cdc_truncate({object_id}, "
                f"{convert.quote(schema + '.' + name)})")


def _rowversion_trigger(cur: Any, pg_schema: str, table: str, column: str) -> None:
    cur.execute(f"CREATE TRIGGER {q('hw_rowversion_' + table)} BEFORE INSERT OR UPDATE ON {q(pg_schema)}.{q(table)} "
                f"FOR EACH ROW EXECUTE FUNCTION sys.hw_rowversion({convert.quote(column)})")


def _foreign_key(cur: Any, cname: str | None, fk: exp.ForeignKey, lookup: Any) -> str:
    ref = fk.args.get("reference")
    target = ref.this if ref is not None else None
    table = target.this if isinstance(target, exp.Schema) else target
    if not isinstance(table, exp.Table):
        raise SqlServerError(50000, "emulator: this FOREIGN KEY form is not supported")
    schema = table.args.get("db").name if table.args.get("db") is not None else "dbo"
    obj = lookup(schema, table.name)
    if obj is None:
        raise SqlServerError(1767, f"Foreign key '{cname or 'FK'}' references invalid table '{table.name}'.")
    cols = ", ".join(q(c.name.lower()) for c in fk.expressions)
    ref_cols = ", ".join(q(c.name.lower()) for c in target.expressions) if isinstance(target, exp.Schema) else ""
    head = f"CONSTRAINT {q(cname)} " if cname else ""
    tail = f" ({ref_cols})" if ref_cols else ""
    return f"{head}FOREIGN KEY ({cols}) REFERENCES {q(obj.pg_schema)}.{q(obj.pg_name)}{tail}"


def _pg_schema(cur: Any, schema: str) -> str:
    cur.execute("SELECT pg_name FROM hw_emulator.schemas WHERE lower(name) = lower(%s)", (schema,))
    row = cur.fetchone()
    if row is None:
        raise SqlServerError(2760, f'The specified schema name "{schema}" either does not exist or you do not have '
                                   "permission to use it.")
    return row[0]


def create_schema(cur: Any, name: str) -> None:
    cur.execute("SELECT 1 FROM hw_emulator.schemas WHERE lower(name) = lower(%s)", (name,))
    if cur.fetchone():
        raise SqlServerError(2714, f"There is already an object named '{name}' in the database.", state=6)
    cur.execute(f"CREATE SCHEMA IF NOT EXISTS {q(name.lower())}")
    cur.execute("INSERT INTO hw_emulator.schemas VALUES (nextval('hw_emulator.schema_ids'), %s, %s)",
                (name, name.lower()))


def drop_table(cur: Any, obj: ObjectInfo) -> None:
    cdc_procedures.drop_source_instances(cur, obj.object_id)  # SQL Server drops its capture instances too
    cur.execute(f"DROP TABLE {q(obj.pg_schema)}.{q(obj.pg_name)} CASCADE")
    cur.execute("DELETE FROM hw_emulator.objects WHERE object_id = %s", (obj.object_id,))


def create_index(cur: Any, tree: exp.Create, obj: ObjectInfo) -> None:
    index = tree.this
    unique = bool(tree.args.get("unique"))
    name = index.name
    params = index.args.get("params")
    cols_exprs = params.args.get("columns") if params is not None else index.expressions
    cols = []
    for c in cols_exprs or []:
        node = c.this if isinstance(c, exp.Ordered) else c
        cols.append(node.name)
    if any(ix.name.lower() == name.lower() for ix in obj.indexes):
        raise SqlServerError(1913, f"The operation failed because an index or statistics with name '{name}' already "
                                   f"exists on table '{obj.schema}.{obj.name}'.")
    ids = []
    for c in cols:
        info = obj.column(c)
        if info is None:
            raise SqlServerError(1911, f"Column name '{c}' does not exist in the target table or view.")
        ids.append(info.column_id)
    clustered = "CLUSTERED" in tree.sql("tsql").upper().split("INDEX")[0] and \
        "NONCLUSTERED" not in tree.sql("tsql").upper().split("INDEX")[0]
    pg_name = f"{name}${obj.pg_name}"
    cur.execute(f"CREATE {'UNIQUE ' if unique else ''}INDEX {q(pg_name)} ON {q(obj.pg_schema)}.{q(obj.pg_name)} "
                f"({', '.join(q(c.lower()) for c in cols)})")
    used = {ix.index_id for ix in obj.indexes}
    index_id = 1 if clustered and 1 not in used else max([1, *used]) + 1
    register_index(cur, obj.object_id, IndexInfo(index_id, name, False, unique,
                                                 "CLUSTERED" if index_id == 1 else "NONCLUSTERED", ids))


def alter_table(translator: Translator, cur: Any, text: str, obj: ObjectInfo, database: str) -> None:
    """ALTER TABLE t ADD …, DROP COLUMN …, ALTER COLUMN …, DROP CONSTRAINT …."""
    m = re.match(r"^\s*ALTER\s+TABLE\s+(?:\[[^\]]+\]|[\w#$@\"]+)(?:\s*\.\s*(?:\[[^\]]+\]|[\w#$@\"]+)){0,2}\s+(.*)$",
                 text, re.IGNORECASE | re.DOTALL)
    if not m:
        raise SqlServerError(102, "Incorrect syntax near 'TABLE'.")
    rest = m.group(1).strip().rstrip(";")
    table = f"{q(obj.pg_schema)}.{q(obj.pg_name)}"
    low = rest.lower()
    if low.startswith("add "):
        body = rest[4:]
        probe = parse(f"CREATE TABLE hw_probe ({body})")
        next_id = max([c.column_id for c in obj.columns] + _dropped_ids(cur, obj)) + 1
        for item in probe.this.expressions:
            if isinstance(item, exp.ColumnDef):
                spec, keys = column_spec(translator, obj.name, item, next_id, [])
                if obj.column(spec.info.name):
                    raise SqlServerError(2705, f"Column names in each table must be unique. Column name "
                                               f"'{spec.info.name}' in table '{obj.name}' is specified more than once.")
                if not spec.info.nullable and spec.info.default is None and not spec.info.identity:
                    cur.execute(f"SELECT EXISTS (SELECT 1 FROM {table})")
                    if cur.fetchone()[0]:
                        raise SqlServerError(4901, f"ALTER TABLE only allows columns to be added that can contain "
                                                   f"nulls, or have a DEFAULT definition specified, or the column "
                                                   f"being added is an identity or timestamp column, or alternatively "
                                                   f"if none of the previous conditions are satisfied the table must "
                                                   f"be empty to allow addition of this column. Column "
                                                   f"'{spec.info.name}' cannot be added to non-empty table "
                                                   f"'{obj.name}' because it does not satisfy these conditions.")
                cur.execute(f"ALTER TABLE {table} ADD COLUMN {spec.pg_sql}")
                register_column(cur, obj.object_id, spec.info)
                if spec.info.type.name == "timestamp":
                    _rowversion_trigger(cur, obj.pg_schema, obj.pg_name, spec.info.pg_name)
                next_id += 1
                for k in keys:
                    _add_key(cur, obj, table, k[0], k[1], [spec.info.name], extra={spec.info.name.lower():
                                                                                     spec.info.column_id})
            elif isinstance(item, exp.Constraint):
                c = table_constraint(item)
                if c.foreign_key is not None:
                    fk = _foreign_key(cur, c.name, c.foreign_key, lambda s, n: translator.ctx.lookup(database, s, n))
                    cur.execute(f"ALTER TABLE {table} ADD {fk}")
                else:
                    _add_key(cur, obj, table, c.name, c.kind, c.columns)
            else:
                raise SqlServerError(50000, f"emulator: ALTER TABLE ADD {item.sql('tsql')[:60]} is not supported")
        return
    m2 = re.match(r"^drop\s+column\s+(.*)$", rest, re.IGNORECASE | re.DOTALL)
    if m2:
        for raw in m2.group(1).split(","):
            cname = raw.strip().strip("[]\"")
            c = obj.column(cname)
            if c is None:
                raise SqlServerError(4924, f"ALTER TABLE DROP COLUMN failed because column '{cname}' does not exist "
                                           f"in table '{obj.name}'.")
            cur.execute(f"ALTER TABLE {table} DROP COLUMN {q(c.pg_name)}")
            cur.execute("DELETE FROM hw_emulator.columns WHERE object_id = %s AND column_id = %s",
                        (obj.object_id, c.column_id))
            _remember_dropped(cur, obj, c.column_id)
        return
    m3 = re.match(r"^alter\s+column\s+(\[[^\]]+\]|\w+)\s+(.*?)\s*(not\s+null|null)?\s*$", rest,
                  re.IGNORECASE | re.DOTALL)
    if m3:
        cname = m3.group(1).strip("[]")
        c = obj.column(cname)
        if c is None:
            raise SqlServerError(4924, f"ALTER TABLE ALTER COLUMN failed because column '{cname}' does not exist in "
                                       f"table '{obj.name}'.")
        type_text = re.sub(rf"^{TYPE_PREFIX}", "", m3.group(2).strip(), flags=re.IGNORECASE)
        try:
            t = SqlType.parse(type_text.replace("[", "").replace("]", ""))
        except ValueError:
            raise SqlServerError(2715, f"Column, parameter, or variable #1: Cannot find data type {type_text}.") \
                from None
        nullable = not (m3.group(3) or "").lower().startswith("not")
        using = f"{q(c.pg_name)}::{convert.pg_type(t)}"
        if c.type.name in ("datetime2", "time", "datetimeoffset") or t.name in ("datetime2", "time",
                                                                                 "datetimeoffset"):
            if c.type.name != t.name:
                raise SqlServerError(50000, f"emulator: ALTER COLUMN from {c.type} to {t} is not supported")
        cur.execute(f"ALTER TABLE {table} ALTER COLUMN {q(c.pg_name)} TYPE {convert.pg_type(t)} USING {using}")
        cur.execute(f"ALTER TABLE {table} ALTER COLUMN {q(c.pg_name)} {'DROP' if nullable else 'SET'} NOT NULL")
        cur.execute("UPDATE hw_emulator.columns SET type = %s, is_nullable = %s WHERE object_id = %s AND "
                    "column_id = %s", (str(t), nullable, obj.object_id, c.column_id))
        return
    m4 = re.match(r"^drop\s+constraint\s+(?:if\s+exists\s+)?(\[[^\]]+\]|\w+)\s*$", rest, re.IGNORECASE)
    if m4:
        cname = m4.group(1).strip("[]")
        cur.execute(f"ALTER TABLE {table} DROP CONSTRAINT {q(cname)}")
        cur.execute("DELETE FROM hw_emulator.indexes WHERE object_id = %s AND lower(name) = lower(%s)",
                    (obj.object_id, cname))
        return
    raise SqlServerError(50000, f"emulator: ALTER TABLE {rest.split()[0] if rest else ''} … is not supported")


def _add_key(cur: Any, obj: ObjectInfo, table: str, cname: str | None, kind: str, cols: list[str],
             extra: dict[str, int] | None = None) -> None:
    ids = []
    for c in cols:
        info = obj.column(c)
        cid = info.column_id if info else (extra or {}).get(c.lower())
        if cid is None:
            raise SqlServerError(1911, f"Column name '{c}' does not exist in the target table or view.")
        ids.append(cid)
    if kind == "PK" and any(ix.is_primary_key for ix in obj.indexes):
        raise SqlServerError(1779, f"Table '{obj.name}' already has a primary key defined on it.")
    cname = cname or _pk_name(obj.name, obj.object_id, kind)
    cur.execute(f"ALTER TABLE {table} ADD CONSTRAINT {q(cname)} {'PRIMARY KEY' if kind == 'PK' else 'UNIQUE'} "
                f"({', '.join(q(c.lower()) for c in cols)})")
    used = {ix.index_id for ix in obj.indexes}
    index_id = 1 if kind == "PK" and 1 not in used else max([1, *used]) + 1
    register_index(cur, obj.object_id, IndexInfo(index_id, cname, kind == "PK", True,
                                                 "CLUSTERED" if index_id == 1 else "NONCLUSTERED", ids))


def _dropped_ids(cur: Any, obj: ObjectInfo) -> list[int]:
    cur.execute("SELECT value FROM hw_emulator.settings WHERE name = %s", (f"max_column_id:{obj.object_id}",))
    row = cur.fetchone()
    return [int(row[0])] if row else [0]


def _remember_dropped(cur: Any, obj: ObjectInfo, column_id: int) -> None:
    # column ids are never reused after DROP COLUMN
    top = max([c.column_id for c in obj.columns] + [column_id] + _dropped_ids(cur, obj))
    cur.execute("INSERT INTO hw_emulator.settings VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET value = "
                "EXCLUDED.value", (f"max_column_id:{obj.object_id}", str(top)))



"""T-SQL query statements (SELECT, INSERT, UPDATE, DELETE, TRUNCATE) → PostgreSQL, with sqlglot.

The translator parses one statement (splitter.py cut the batch), resolves names against the
registry (routing three-part names to their database), replaces variables, parameters and
@@functions by literals, maps T-SQL built-ins onto the functions bootstrap.py installed, converts
literals going into typed columns (convert.py), and records how to name and type the result
columns (``Query.names``/``Query.hints``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokens import TokenType

from ..results import SqlServerError
from ..sqltypes import MAX, SqlType
from . import convert
from .registry import ObjectInfo
from .splitter import tokenize

# SQL Server type names the pre-parse pass protects from sqlglot's normalisation (text → varchar…)
TYPE_NAMES = frozenset({
    "bit", "tinyint", "smallint", "int", "integer", "bigint", "decimal", "numeric", "dec", "money", "smallmoney",
    "real", "float", "date", "time", "datetime2", "datetimeoffset", "datetime", "smalldatetime", "char",
    "varchar", "nchar", "nvarchar", "text", "ntext", "binary", "varbinary", "image", "uniqueidentifier", "xml",
    "sql_variant", "timestamp", "rowversion", "sysname", "character",
})
TYPE_PREFIX = "hw_"

# server-level catalog views answered from Python (EmulatorServer), injected as derived tables
SERVER_VIEWS = frozenset({"databases", "dm_server_services", "server_principals", "sql_logins", "configurations",
                          "dm_exec_sessions", "syslanguages", "dm_os_host_info", "dm_hadr_database_replica_states",
                          "availability_replicas", "dm_os_sys_info"})

CDC_FUNCTION_TYPES = {
    "fn_cdc_get_max_lsn": SqlType("binary", length=10), "fn_cdc_get_min_lsn": SqlType("binary", length=10),
    "fn_cdc_increment_lsn": SqlType("binary", length=10), "fn_cdc_decrement_lsn": SqlType("binary", length=10),
    "fn_cdc_map_time_to_lsn": SqlType("binary", length=10), "fn_cdc_map_lsn_to_time": SqlType("datetime"),
    "fn_cdc_get_column_ordinal": SqlType("int"), "fn_cdc_is_bit_set": SqlType("bit"),
    "fn_cdc_has_column_changed": SqlType("bit"),
}


class Context(Protocol):
    """What the translator asks the session."""

    database: str

    def database_name(self, name: str) -> str | None: ...            # original spelling or None
    def lookup(self, database: str, schema: str, name: str) -> ObjectInfo | None: ...
    def pg_relation_exists(self, database: str, schema: str, name: str) -> bool: ...
    def variable(self, name: str) -> tuple[SqlType, Any] | None: ...
    def global_variable(self, name: str) -> tuple[SqlType, Any] | None: ...
    def server_view(self, name: str) -> tuple[list[tuple[str, SqlType]], list[tuple[Any, ...]]] | None: ...
    def server_property(self, name: str) -> Any: ...
    def table_variable(self, name: str) -> tuple[list[tuple[str, SqlType]], list[tuple[Any, ...]]] | None: ...
    def connection(self, database: str) -> Any: ...
    def database_id(self, name: str | None) -> int | None: ...
    def database_name_of(self, database_id: int) -> str | None: ...
    def identity_insert(self, database: str, object_id: int) -> bool: ...


@dataclass(slots=True)
class Query:
    sql: str
    database: str
    kind: str                                     # select / insert / update / delete / truncate
    names: dict[str, str] = field(default_factory=dict)        # pg output name → SQL Server name
    hints: dict[str, SqlType] = field(default_factory=dict)     # pg output name → SqlType
    written: dict[str, str] = field(default_factory=dict)       # pg relation → name as written
    target: ObjectInfo | None = None
    reseed: tuple[str, str] | None = None         # (pg table, pg column) to resync identity after insert
    assignments: list[tuple[str, SqlType]] = field(default_factory=list)  # SELECT @v = … targets
    locks: list[tuple[str, str]] = field(default_factory=list)  # (pg relation, PostgreSQL lock mode)


def protect_types(sql: str) -> str:
    """Prefix SQL Server type names in type positions with hw_ so sqlglot keeps them verbatim."""
    tokens = tokenize(sql)
    out: list[str] = []
    pos = 0
    for i, tok in enumerate(tokens):
        if tok.token_type == TokenType.IDENTIFIER and tok.text.lower() == "0x" and sql[tok.start] == "0":
            # the empty binary literal 0x (sqlglot reads it as a name)
            out.append(sql[pos:tok.start])
            out.append(f"CAST('' AS {TYPE_PREFIX}varbinary(max))")
            pos = tok.end + 1
            continue
        if tok.token_type in (TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.IDENTIFIER):
            continue
        word = tok.text.lower()
        if word not in TYPE_NAMES or i == 0:
            continue
        prev = tokens[i - 1]
        prev_word = prev.text.upper()
        ok = False
        if prev_word == "AS" and prev.token_type == TokenType.ALIAS:
            ok = _inside_cast(tokens, i)
        elif prev.token_type == TokenType.L_PAREN and i >= 2 and tokens[i - 2].text.upper() in (
                "CONVERT", "TRY_CONVERT"):
            ok = True
        elif prev.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or (
                prev.token_type not in (TokenType.COMMA, TokenType.L_PAREN, TokenType.DOT, TokenType.SELECT)
                and prev_word not in ("TABLE", "FROM", "JOIN", "INTO", "UPDATE", "ON", "BY", "WHERE", "AND", "OR",
                                      "SELECT", "SET", "=", "VALUES", "AS", "COLUMN", "ADD", "EXEC", "EXECUTE")
                and _is_column_name_token(prev)):
            ok = _in_declaration(tokens, i)
        if ok:
            out.append(sql[pos:tok.start])
            out.append(TYPE_PREFIX + word)
            pos = tok.end + 1
    out.append(sql[pos:])
    return "".join(out)


def _is_column_name_token(tok: Any) -> bool:
    return bool(re.match(r"^[A-Za-z_#@$][\w$#@]*$", tok.text))


def _inside_cast(tokens: list[Any], i: int) -> bool:
    depth = 0
    for j in range(i - 1, -1, -1):
        t = tokens[j]
        if t.token_type == TokenType.R_PAREN:
            depth += 1
        elif t.token_type == TokenType.L_PAREN:
            if depth == 0:
                return j >= 1 and tokens[j - 1].text.upper() in ("CAST", "TRY_CAST")
            depth -= 1
    return False


def _in_declaration(tokens: list[Any], i: int) -> bool:
    """A type after a name: CREATE/ALTER TABLE column definitions, DECLARE @v type, procedure params."""
    first = tokens[0].text.upper()
    if first in ("CREATE", "ALTER", "DECLARE"):
        return True
    return tokens[i - 1].text.startswith("@") or (i >= 2 and tokens[i - 2].token_type == TokenType.PARAMETER)


def type_from_datatype(dt_: exp.DataType) -> SqlType:
    """A DataType sqlglot parsed from protected text (hw_nvarchar(50)) → SqlType."""
    if dt_.this == exp.DataType.Type.USERDEFINED:
        kind = str(dt_.args.get("kind") or "")
        name = kind[len(TYPE_PREFIX):] if kind.lower().startswith(TYPE_PREFIX) else kind
    else:
        name = dt_.sql("tsql").split("(")[0]
    params = []
    for p in dt_.expressions:
        v = p.this if isinstance(p, exp.DataTypeParam) else p
        params.append(str(v.name if isinstance(v, exp.Expression) else v))
    name = name.lower()
    name = {"integer": "int", "dec": "decimal", "character": "char"}.get(name, name)
    if name == "sysname":
        return SqlType("nvarchar", length=128)
    spec = name + (f"({','.join(params)})" if params else "")
    try:
        return SqlType.parse(spec)
    except ValueError:
        raise SqlServerError(2715, f"Column, parameter, or variable #1: Cannot find data type {name}.") from None


_PARSE_FN = re.compile(r"(?<![\w.])PARSE\s*\(", re.IGNORECASE)


def parse(sql: str) -> exp.Expression:
    # PARSE(x AS type) is CAST with culture rules; the emulator knows the invariant culture only
    sql = _PARSE_FN.sub("CAST(", sql)
    try:
        parsed = sqlglot.parse(protect_types(sql), read="tsql")
    except ParseError as exc:
        near = ""
        errs = getattr(exc, "errors", None) or []
        if errs:
            near = str(errs[0].get("highlight") or "")
        raise SqlServerError(102, f"Incorrect syntax near '{near or sql.split()[-1] if sql.split() else ''}'.") \
            from None
    stmts = [p for p in parsed if p is not None]
    if len(stmts) != 1:
        raise SqlServerError(102, f"Incorrect syntax near '{sql.split()[-1]}'.")
    return stmts[0]


def _ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name.lower(), quoted=True)


def sql_literal(value: Any, t: SqlType | None = None) -> exp.Expression:
    """A literal for a value whose type is known (variables, parameters): typed so PostgreSQL
    resolves overloads, but plain strings stay untyped so they compare with any column type."""
    if value is None:
        return exp.Null()
    if t is None:
        t = convert.python_type_of(value)
    if t.name in ("varchar", "nvarchar", "char", "nchar", "text", "ntext", "sysname") and isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int) and t.name in ("int", "bigint", "smallint", "tinyint"):
        return exp.Literal.number(value)
    return _raw(convert.to_pg_literal(value, t, explicit=True))


def _raw(sql: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read="postgres")


class Translator:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # ------------------------------------------------------------------ entry
    def translate(self, tree: exp.Expression) -> Query:
        if isinstance(tree, exp.Merge):
            raise SqlServerError(50000, "emulator: MERGE statements are not supported")
        if isinstance(tree, exp.Select) and tree.args.get("into") is not None:
            raise SqlServerError(50000, "emulator: SELECT … INTO is not supported")
        if tree.args.get("returning") is not None:
            raise SqlServerError(50000, "emulator: the OUTPUT clause is not supported")
        q = Query("", self.ctx.database, _kind(tree))
        self.q = q
        self.cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        q.database = self._route(tree)
        self.scope: dict[str, ObjectInfo] = {}
        self.view_hints: dict[str, SqlType] = {}
        self._assignment(tree)
        self._values(tree)
        self._tables(tree)
        self._functions(tree)
        self._casts(tree)
        self._composite_comparisons(tree)
        self._concat(tree)
        self._collation(tree)
        self._columns(tree)
        if isinstance(tree, exp.Insert):
            tree = self._insert(tree)
        elif isinstance(tree, exp.Update):
            self._update(tree)
        if isinstance(tree, exp.Select):
            self._clustered_order(tree)
        if isinstance(tree, (exp.Select, exp.Union, exp.Except, exp.Intersect)):
            self._naming(tree)
        elif isinstance(tree, exp.Subquery):
            self._naming(tree.this)
        q.sql = tree.sql("postgres")
        return q

    # ------------------------------------------------------------------ databases
    def _route(self, tree: exp.Expression) -> str:
        dbs: dict[str, str] = {}
        for t in tree.find_all(exp.Table):
            cat = t.args.get("catalog")
            if cat is not None and cat.name:
                dbs[cat.name.lower()] = cat.name
        for d in tree.find_all(exp.Dot):
            inner = d.this
            if isinstance(inner, exp.Dot) and isinstance(d.expression, (exp.Anonymous, exp.Func)) and \
                    isinstance(inner.this, exp.Identifier):
                dbs[inner.this.name.lower()] = inner.this.name
        if not dbs:
            return self.ctx.database
        if len(dbs) > 1:
            raise SqlServerError(50000, "emulator: a statement may refer to one database only "
                                        f"(it names {', '.join(sorted(dbs.values()))})")
        (written,) = dbs.values()
        real = self.ctx.database_name(written)
        if real is None:
            raise SqlServerError(911, f"Database '{written}' does not exist. Make sure that the name is entered "
                                      "correctly.")
        return real

    # ------------------------------------------------------------------ tables
    def _tables(self, tree: exp.Expression) -> None:
        for t in list(tree.find_all(exp.Table)):
            self._table(t)

    def _table(self, t: exp.Table) -> None:
        q = self.q
        catalog = t.args.get("catalog")
        schema_id = t.args.get("db")
        if schema_id is not None and not isinstance(schema_id, exp.Expression):
            schema_id = exp.Identifier(this=str(schema_id)) if str(schema_id) else None
            t.set("db", schema_id)
        this = t.this
        written = ".".join(p.name for p in (catalog, schema_id) if p is not None and p.name)
        if catalog is not None and catalog.name and schema_id is None:
            written += "."
        alias = t.alias
        if isinstance(this, exp.Parameter):
            tv = self.ctx.table_variable("@" + this.name)
            if tv is None:
                raise SqlServerError(1087, f'Must declare the table variable "@{this.name}".', severity=15, state=2)
            self._derived(t, tv[0], tv[1], alias or this.name)
            return
        if isinstance(this, exp.Anonymous) or isinstance(this, exp.Func):
            self._table_function(t)
            return
        name = this.name
        written = f"{written}.{name}" if written else name
        if catalog is not None:
            t.set("catalog", None)
        schema = schema_id.name if schema_id is not None else ""
        low_schema = schema.lower()
        if not schema and name.lower() in self.cte_names:
            t.set("this", _ident(name))
            return
        if name.startswith("#"):
            raise SqlServerError(50000, "emulator: temporary tables (#name) are not supported")
        if low_schema == "sys" and name.lower() in SERVER_VIEWS:
            self._server_view(t, name.lower(), alias or name)
            return
        if low_schema == "information_schema":
            t.set("db", exp.Identifier(this="hw_information_schema", quoted=False))
            t.set("this", _ident(name))
            q.written[name.lower()] = written
            if not alias:
                t.set("alias", exp.TableAlias(this=_ident(name)))
            return
        obj = self.ctx.lookup(q.database, schema or "dbo", name)
        if obj is None and not schema:
            obj = self.ctx.lookup(q.database, "sys", name) if name.lower() in ("objects", "tables") else None
        if obj is not None:
            self._lock_hints(t, f'"{obj.pg_schema}"."{obj.pg_name}"')
            t.set("db", exp.Identifier(this=obj.pg_schema, quoted=True))
            t.set("this", exp.Identifier(this=obj.pg_name, quoted=True))
            self.scope[(alias or name).lower()] = obj
            self.scope.setdefault(obj.name.lower(), obj)
            q.written[obj.pg_name.lower()] = written
            return
        pg_schema = {"": "dbo", "information_schema": "hw_information_schema"}.get(low_schema, low_schema)
        if self.ctx.pg_relation_exists(q.database, pg_schema, name.lower()):
            t.set("db", exp.Identifier(this=pg_schema, quoted=True))
            t.set("this", _ident(name))
            q.written[name.lower()] = written
            return
        raise SqlServerError(208, f"Invalid object name '{written}'.")

    def _lock_hints(self, t: exp.Table, relation: str) -> None:
        """WITH (TABLOCKX) / (TABLOCK, HOLDLOCK): table locks PostgreSQL takes before the statement
        (inside a transaction they last until it ends, as SQL Server's do)."""
        words = {h.name.upper() for hint in t.args.get("hints") or [] for h in hint.expressions}
        if "TABLOCKX" in words or ("XLOCK" in words and "TABLOCK" in words):
            self.q.locks.append((relation, "EXCLUSIVE"))
        elif "TABLOCK" in words and ("HOLDLOCK" in words or "SERIALIZABLE" in words):
            self.q.locks.append((relation, "SHARE"))

    def _server_view(self, t: exp.Table, name: str, alias: str) -> None:
        view = self.ctx.server_view(name)
        if view is None:
            raise SqlServerError(208, f"Invalid object name 'sys.{name}'.")
        self._derived(t, view[0], view[1], alias)

    def _derived(self, t: exp.Table, columns: list[tuple[str, SqlType]], rows: list[tuple[Any, ...]],
                 alias: str) -> None:
        """Rows computed in Python as a derived table (server views, table variables)."""
        selects = []
        for row in rows or [tuple(None for _ in columns)]:
            selects.append("SELECT " + ", ".join(
                f"{convert.to_pg_literal(v, ct, explicit=True) if v is not None else 'NULL::' + convert.pg_type(ct)}"
                f" AS \"{cn.lower()}\"" for v, (cn, ct) in zip(row, columns)))
        body = " UNION ALL ".join(selects)
        if not rows:
            body = f"SELECT * FROM ({body}) AS e WHERE false"
        sub = exp.Subquery(this=_raw(body), alias=exp.TableAlias(this=_ident(alias)))
        for cn, ct in columns:
            self.q.hints.setdefault(cn.lower(), ct)
            self.view_hints[cn.lower()] = ct
        t.replace(sub)

    def _table_function(self, t: exp.Table) -> None:
        fn = t.this
        schema_id = t.args.get("db")
        schema = schema_id.name.lower() if schema_id is not None else "dbo"
        name = fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()
        low = name.lower()
        alias = t.alias or name
        if schema == "cdc" and (low.startswith("fn_cdc_get_all_changes_") or low.startswith("fn_cdc_get_net_changes_")):
            if low.startswith("fn_cdc_get_net_changes_"):
                raise SqlServerError(50000, "emulator: cdc.fn_cdc_get_net_changes_* is not supported")
            ci = name[len("fn_cdc_get_all_changes_"):]
            args = list(fn.expressions)
            if len(args) != 3:
                raise SqlServerError(313, "An insufficient number of arguments were supplied for the procedure or "
                                          f"function cdc.fn_cdc_get_all_changes_{ci}.")
            from ..cdc.queries import all_changes_sql_for
            lo, hi, filt = (a.sql("postgres") for a in args)
            body = all_changes_sql_for(self.ctx.connection(self.q.database), ci, lo, hi, filt)
            if body is None:
                raise SqlServerError(208, f"Invalid object name '{self.q.database}.cdc.fn_cdc_get_all_changes_{ci}'.")
            ct = self.ctx.lookup(self.q.database, "cdc", f"{ci}_CT")
            sub = exp.Subquery(this=sqlglot.parse_one(body, read="postgres").unnest(),
                               alias=exp.TableAlias(this=_ident(alias)))
            if ct is not None:
                self.scope[alias.lower()] = ct
            t.replace(sub)
            return
        raise SqlServerError(50000, f"emulator: table-valued function {schema}.{name} is not supported")

    # ------------------------------------------------------------------ SELECT @v = …
    def _assignment(self, tree: exp.Expression) -> None:
        if not isinstance(tree, exp.Select):
            return
        targets = []
        for e in tree.expressions:
            if isinstance(e, exp.EQ) and isinstance(e.this, exp.Parameter):
                targets.append(e)
        if not targets:
            return
        if len(targets) != len(tree.expressions):
            raise SqlServerError(141, "A SELECT statement that assigns a value to a variable must not be combined "
                                      "with data-retrieval operations.")
        new = []
        for e in targets:
            vname = "@" + e.this.name
            var = self.ctx.variable(vname)
            if var is None:
                raise SqlServerError(137, f'Must declare the scalar variable "{vname}".', severity=15, state=2)
            self.q.assignments.append((vname, var[0]))
            new.append(e.expression)
        tree.set("expressions", new)

    # ------------------------------------------------------------------ variables, literals
    def _values(self, tree: exp.Expression) -> None:
        for node in list(tree.find_all(exp.Parameter)):
            if isinstance(node.parent, (exp.Parameter, exp.Table)):
                continue  # @@name's inner part; a table variable
            inner = node.this
            if isinstance(inner, exp.Parameter):
                gname = "@@" + inner.name.upper()
                g = self.ctx.global_variable(gname)
                if g is None:
                    raise SqlServerError(50000, f"emulator: {gname} is not supported")
                lit = sql_literal(g[1], g[0])
                self._hint_replace(node, lit, g[0], gname)
                continue
            vname = "@" + node.name
            var = self.ctx.variable(vname)
            if var is None:
                raise SqlServerError(137, f'Must declare the scalar variable "{vname}".', severity=15, state=2)
            self._hint_replace(node, sql_literal(var[1], var[0]), var[0], None)
        for node in list(tree.find_all(exp.HexString)):
            node.replace(_raw(f"'\\x{node.this.lower()}'::bytea"))
        for node in list(tree.find_all(exp.National)):
            node.replace(exp.Literal.string(node.this))
        # CASE n WHEN 0 … WHEN '' …: SQL Server converts '' to 0; PostgreSQL would reject it
        for case in list(tree.find_all(exp.Case)):
            if case.this is None:
                continue
            ifs = case.args.get("ifs") or []
            if any(isinstance(i.this, exp.Literal) and not i.this.is_string for i in ifs):
                for i in ifs:
                    if isinstance(i.this, exp.Literal) and i.this.is_string and i.this.this.strip() == "":
                        i.set("this", exp.Literal.number(0))

    def _hint_replace(self, node: exp.Expression, new: exp.Expression, t: SqlType, name: str | None) -> None:
        # remember the SQL Server type for the output column when the node is a whole select item
        parent = node.parent
        node.replace(new)
        if parent is not None and isinstance(parent, exp.Select):
            new.meta["hw_type"] = t
        elif isinstance(parent, exp.Alias):
            parent.meta["hw_type"] = t
        new.meta["hw_type"] = t

    # ------------------------------------------------------------------ functions
    def _functions(self, tree: exp.Expression) -> None:
        for node in list(tree.find_all(exp.Dot)):
            if isinstance(node.expression, (exp.Anonymous,)):
                self._schema_function(node)
        # innermost first, so that arguments are translated before the calls that copy them
        for node in reversed(list(tree.find_all(exp.Func))):
            self._function(node)

    def _schema_function(self, node: exp.Dot) -> None:
        fn = node.expression
        schema = node.this.expression if isinstance(node.this, exp.Dot) else node.this
        schema_name = schema.name.lower()
        name = fn.name.lower()
        new = exp.Dot(this=exp.Identifier(this=schema_name, quoted=False),
                      expression=exp.Anonymous(this=name, expressions=fn.expressions))
        if name in CDC_FUNCTION_TYPES:
            new.meta["hw_type"] = CDC_FUNCTION_TYPES[name]
            args = new.expression.expressions
            # untyped string literals into bytea/datetime parameters
            for i, a in enumerate(args):
                if isinstance(a, exp.Literal) and a.is_string and name == "fn_cdc_map_time_to_lsn" and i == 1:
                    args[i] = _raw(convert.to_pg_literal(a.this, SqlType("datetime"), explicit=True))
        node.replace(new)

    def _function(self, node: exp.Func) -> None:
        ctx = self.ctx
        name = node.sql_name().upper() if not isinstance(node, exp.Anonymous) else node.name.upper()
        if isinstance(node, exp.Anonymous):
            args = list(node.expressions)
        else:
            args = [v for k, v in node.args.items() if isinstance(v, exp.Expression) and k != "_type"]
        if isinstance(node, exp.ObjectId):
            name = "OBJECT_ID"

        def put(sql_text: str | exp.Expression, t: SqlType | None) -> None:
            new = _raw(sql_text) if isinstance(sql_text, str) else sql_text
            if t is not None:
                new.meta["hw_type"] = t
            node.replace(new)

        if isinstance(node, exp.CurrentTimestamp):
            put("sys.getdate()", SqlType("datetime"))
        elif isinstance(node, exp.CurrentTimestampLTZ) or name == "SYSDATETIMEOFFSET":
            put("sys.sysdatetimeoffset()", SqlType("datetimeoffset", scale=7))
        elif name == "GETUTCDATE":
            put("sys.getutcdate()", SqlType("datetime"))
        elif name == "SYSDATETIME":
            put("sys.sysdatetime()", SqlType("datetime2", scale=7))
        elif name == "SYSUTCDATETIME":
            put("sys.sysutcdatetime()", SqlType("datetime2", scale=7))
        elif isinstance(node, exp.Extract):
            unit = node.this.name.upper()
            arg = node.expression
            if unit in ("TIMEZONE_MINUTE", "TZOFFSET", "TZ"):
                put(exp.Anonymous(this="sys.datepart_tzoffset", expressions=[arg]), SqlType("int"))
            else:
                pg_unit = {"WEEKDAY": "DOW", "DW": "DOW", "DAYOFYEAR": "DOY", "DY": "DOY", "YY": "YEAR",
                           "YYYY": "YEAR", "MM": "MONTH", "DD": "DAY", "HH": "HOUR", "MI": "MINUTE", "N": "MINUTE",
                           "SS": "SECOND", "S": "SECOND", "MS": "MILLISECONDS", "MILLISECOND": "MILLISECONDS",
                           "QQ": "QUARTER", "Q": "QUARTER", "WK": "WEEK", "WW": "WEEK"}.get(unit, unit)
                expr = _raw(f"floor(EXTRACT({pg_unit} FROM sys.ts(x)))::int" if pg_unit != "DOW"
                            else "(EXTRACT(DOW FROM sys.ts(x)) + 1)::int")
                expr.find(exp.Column).replace(arg)
                put(expr, SqlType("int"))
        elif isinstance(node, (exp.Year, exp.Month, exp.Day)):
            new = exp.Cast(this=node.copy(), to=exp.DataType.build("int"))
            new.meta["hw_type"] = SqlType("int")
            node.replace(new)
        elif name == "TODATETIMEOFFSET":
            a0 = self._literal_as(args[0], SqlType("datetime2", scale=7))
            put(exp.Anonymous(this="sys.todatetimeoffset", expressions=[a0, args[1]]),
                SqlType("datetimeoffset", scale=7))
        elif name == "DB_NAME":
            if not args:
                put(exp.Literal.string(self.q.database), SqlType("nvarchar", length=128))
            elif isinstance(args[0], exp.Literal):
                dbn = ctx.database_name_of(int(args[0].name))
                put(exp.Literal.string(dbn) if dbn else exp.Null(), SqlType("nvarchar", length=128))
            else:
                raise SqlServerError(50000, "emulator: DB_NAME() of an expression is not supported")
        elif name == "DB_ID":
            if not args:
                put(exp.Literal.number(ctx.database_id(self.q.database) or 0), SqlType("smallint"))
            elif isinstance(args[0], exp.Literal):
                dbid = ctx.database_id(args[0].name)
                put(exp.Literal.number(dbid) if dbid else exp.Null(), SqlType("smallint"))
            else:
                raise SqlServerError(50000, "emulator: DB_ID() of an expression is not supported")
        elif name == "SCHEMA_NAME":
            if not args:
                put(exp.Literal.string("dbo"), SqlType("nvarchar", length=128))
            else:
                put(_with_arg("(SELECT name::varchar(128) FROM hw_emulator.schemas WHERE schema_id = hw_arg)",
                              args[0]), SqlType("nvarchar", length=128))
        elif name == "SCHEMA_ID":
            put(_with_arg("(SELECT schema_id FROM hw_emulator.schemas WHERE lower(name) = lower(hw_arg))",
                          args[0] if args else exp.Literal.string("dbo")), SqlType("int"))
        elif name == "OBJECT_ID":
            if not args or not isinstance(args[0], exp.Literal):
                raise SqlServerError(50000, "emulator: OBJECT_ID() of an expression is not supported")
            put(self._object_id(args[0].name), SqlType("int"))
        elif name in ("OBJECT_NAME", "OBJECT_SCHEMA_NAME"):
            col = "name" if name == "OBJECT_NAME" else "schema_name"
            put(_with_arg(f"(SELECT {col}::varchar(128) FROM hw_emulator.objects WHERE object_id = hw_arg)",
                          args[0]), SqlType("nvarchar", length=128))
        elif name == "SERVERPROPERTY":
            prop = args[0].name if args and isinstance(args[0], exp.Literal) else ""
            value = ctx.server_property(prop)
            put(_raw(convert.to_pg_literal(value, SqlType("sql_variant"))) if value is not None
                else _raw("NULL::sys.sql_variant"), SqlType("sql_variant"))
        elif name == "SCOPE_IDENTITY":
            g = ctx.global_variable("@@IDENTITY")
            put(sql_literal(g[1], g[0]) if g else exp.Null(), SqlType("numeric", precision=38, scale=0))
        elif isinstance(node, exp.Count):
            big = "COUNT_BIG" in node.sql("tsql").upper()
            new = exp.Cast(this=node.copy(), to=exp.DataType.build("bigint" if big else "int"))
            new.meta["hw_type"] = SqlType("bigint" if big else "int")
            node.replace(new)
        elif isinstance(node, exp.Length):
            arg = node.this
            put(exp.Anonymous(this="length", expressions=[
                exp.Anonymous(this="rtrim", expressions=[exp.Cast(this=arg, to=exp.DataType.build("text"))])]),
                SqlType("int"))
        elif name == "DATALENGTH":
            put(exp.Anonymous(this="octet_length", expressions=args), SqlType("int"))
        elif name in ("USER_NAME", "SUSER_NAME", "SUSER_SNAME", "CURRENT_USER", "SYSTEM_USER", "ORIGINAL_LOGIN"):
            put(exp.Literal.string("dbo" if name == "USER_NAME" else "sa"), SqlType("nvarchar", length=128))
        elif name == "HAS_PERMS_BY_NAME" or name == "IS_SRVROLEMEMBER" or name == "IS_MEMBER":
            put(exp.Literal.number(1), SqlType("int"))
        elif name == "NEWSEQUENTIALID":
            put("gen_random_uuid()", SqlType("uniqueidentifier"))
        elif isinstance(node, exp.Anonymous) and name in ("RAND",):
            put("random()", SqlType("float"))

    def _object_id(self, text: str) -> exp.Expression:
        parts = [p.strip().strip("[]\"") for p in split_name(text)]
        db = self.q.database
        if len(parts) == 3:
            db_real = self.ctx.database_name(parts[0])
            if db_real is None:
                return exp.Null()
            db, parts = db_real, parts[1:]
        schema, name = (parts if len(parts) == 2 else ["dbo", parts[-1]])
        obj = self.ctx.lookup(db, schema or "dbo", name)
        return exp.Literal.number(obj.object_id) if obj else exp.Null()

    def _literal_as(self, node: exp.Expression, t: SqlType) -> exp.Expression:
        if isinstance(node, exp.Literal) and node.is_string:
            return _raw(convert.to_pg_literal(node.this, t, explicit=True))
        return node

    # ------------------------------------------------------------------ CAST / CONVERT
    def _casts(self, tree: exp.Expression) -> None:
        for node in reversed(list(tree.find_all(exp.Cast, exp.TryCast, exp.Convert))):
            if isinstance(node, exp.Convert):
                target, value = node.this, node.expression
            else:
                target, value = node.args["to"], node.this
            if not isinstance(target, exp.DataType):
                continue
            if target.this != exp.DataType.Type.USERDEFINED or not str(target.args.get("kind", "")).lower() \
                    .startswith(TYPE_PREFIX):
                continue
            t = type_from_datatype(target)
            new = self._cast_to(value, t)
            new.meta["hw_type"] = t
            node.replace(new)

    def _cast_to(self, value: exp.Expression, t: SqlType) -> exp.Expression:
        if isinstance(value, exp.Literal) or (isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal)):
            v: Any = value.this if isinstance(value, exp.Literal) and value.is_string else _number(value)
            return _raw(convert.to_pg_literal(v, t, explicit=True))
        if isinstance(value, exp.Null):
            return _raw(f"NULL::{convert.pg_type(t)}")
        hint = value.meta.get("hw_type")
        if hint is not None and hint.name == "sql_variant" and t.name != "sql_variant":
            value = exp.Anonymous(this="sys.variant_text", expressions=[value])
            if t.name not in ("datetime2", "time", "datetimeoffset", "datetime", "smalldatetime", "date"):
                return exp.Cast(this=value, to=exp.DataType.build(convert.pg_type(t), dialect="postgres"))
        n = t.name
        scale = t.scale if t.scale is not None else 7
        if n == "datetime2":
            return exp.Anonymous(this="sys.to_datetime2", expressions=[value, exp.Literal.number(scale)])
        if n == "time":
            return exp.Anonymous(this="sys.to_time", expressions=[value, exp.Literal.number(scale)])
        if n == "datetimeoffset":
            return exp.Anonymous(this="sys.to_datetimeoffset", expressions=[value, exp.Literal.number(scale)])
        if n == "datetime":
            return exp.Anonymous(this="sys.to_datetime",
                                 expressions=[exp.Anonymous(this="sys.ts", expressions=[value])])
        if n == "smalldatetime":
            return exp.Anonymous(this="sys.to_smalldatetime",
                                 expressions=[exp.Anonymous(this="sys.ts", expressions=[value])])
        if n == "date":
            return exp.Cast(this=exp.Anonymous(this="sys.ts", expressions=[value]), to=exp.DataType.build("date"))
        if n in ("varchar", "nvarchar", "char", "nchar", "text", "ntext"):
            source = exp.Anonymous(this="sys.hw_text", expressions=[value])
            if t.length not in (None, MAX):
                return _with_arg(f"left(hw_arg, {t.length})::{convert.pg_type(t)}", source)
            return exp.Cast(this=source, to=exp.DataType.build("text"))
        return exp.Cast(this=value, to=exp.DataType.build(convert.pg_type(t), dialect="postgres"))

    # ------------------------------------------------------------------ composite-typed comparisons
    def _column_info(self, col: exp.Column) -> tuple[ObjectInfo, Any] | None:
        qual = col.table.lower() if col.table else ""
        if qual:
            obj = self.scope.get(qual)
            if obj is None:
                return None
            c = obj.column(col.name)
            return (obj, c) if c else None
        hits = [(o, o.column(col.name)) for o in {id(o): o for o in self.scope.values()}.values()]
        hits = [h for h in hits if h[1] is not None]
        return hits[0] if len(hits) == 1 else None

    def _composite_comparisons(self, tree: exp.Expression) -> None:
        for node in list(tree.find_all(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            for a, b in ((node.this, node.expression), (node.expression, node.this)):
                if isinstance(a, exp.Column) and isinstance(b, exp.Literal) and b.is_string:
                    info = self._column_info(a)
                    if info and info[1].type.name in ("datetime2", "time", "datetimeoffset", "binary", "varbinary",
                                                      "uniqueidentifier", "datetime", "smalldatetime"):
                        b.replace(_raw(convert.to_pg_literal(b.this, info[1].type, explicit=True)))
        for node in list(tree.find_all(exp.Between)):
            if isinstance(node.this, exp.Column):
                info = self._column_info(node.this)
                if info and info[1].type.name in ("datetime2", "time", "datetimeoffset"):
                    for key in ("low", "high"):
                        v = node.args.get(key)
                        if isinstance(v, exp.Literal) and v.is_string:
                            v.replace(_raw(convert.to_pg_literal(v.this, info[1].type, explicit=True)))

    # ------------------------------------------------------------------ string +
    def _is_string(self, node: exp.Expression) -> bool:
        if isinstance(node, exp.Literal):
            return node.is_string
        if isinstance(node, exp.DPipe):
            return True
        if isinstance(node, exp.Paren):
            return self._is_string(node.this)
        t = node.meta.get("hw_type")
        if t is not None:
            return t.name in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml")
        if isinstance(node, exp.Column):
            info = self._column_info(node)
            if info is None and node.name.lower() in self.view_hints:  # server views, table variables
                return self.view_hints[node.name.lower()].name in ("char", "varchar", "nchar", "nvarchar")
            return bool(info) and info[1].type.name in ("char", "varchar", "nchar", "nvarchar", "text", "ntext")
        if isinstance(node, exp.Cast):
            return node.to.this in (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR,
                                    exp.DataType.Type.NVARCHAR, exp.DataType.Type.NCHAR)
        if isinstance(node, (exp.Upper, exp.Lower, exp.Substring, exp.Left, exp.Right, exp.Trim, exp.Concat)):
            return True
        return False

    def _aggregate_type(self, node: exp.Expression) -> SqlType | None:
        """MIN/MAX keep their argument's type (binary(10) LSNs stay binary(10)); so does DATEADD."""
        if isinstance(node, exp.DateAdd):
            arg = node.this
            while isinstance(arg, (exp.Cast, exp.TsOrDsToDate, exp.TimeStrToTime)) and arg.meta.get("hw_type") is None:
                arg = arg.this
            if arg.meta.get("hw_type") is not None:
                return arg.meta["hw_type"]
            if isinstance(arg, exp.Column):
                info = self._column_info(arg)
                return info[1].type if info else None
            return None
        if isinstance(node, (exp.Max, exp.Min)) and isinstance(node.this, exp.Column):
            info = self._column_info(node.this)
            if info:
                return info[1].type
        return None

    def _collation(self, tree: exp.Expression) -> None:
        """SQL_Latin1_General_CP1_CI_AS: string comparisons ignore case and trailing blanks, LIKE ignores
        case. (Sorting, grouping and unique indexes stay PostgreSQL's: see the engine's limits.)"""
        def folded(node: exp.Expression) -> exp.Expression:
            return exp.Lower(this=exp.Anonymous(this="rtrim", expressions=[node]))

        for node in list(tree.find_all(exp.EQ, exp.NEQ)):
            if isinstance(node.parent, exp.Update) or isinstance(node.this, exp.Parameter):
                continue  # SET col = value, SELECT @v = value: assignments, not comparisons
            a, b = node.this, node.expression
            if self._is_string(a) and self._is_string(b) and not (isinstance(a, exp.Literal)
                                                                   and isinstance(b, exp.Literal)):
                node.set("this", folded(a.copy()))
                node.set("expression", folded(b.copy()))
        for node in list(tree.find_all(exp.In)):
            values = node.expressions
            if values and self._is_string(node.this) and all(isinstance(v, exp.Literal) and v.is_string
                                                               for v in values):
                node.set("this", folded(node.this.copy()))
                node.set("expressions", [folded(v.copy()) for v in values])
        for node in list(tree.find_all(exp.Like)):
            node.replace(exp.ILike(this=node.this, expression=node.expression))

    def _concat(self, tree: exp.Expression) -> None:
        """T-SQL's + on strings is concatenation (PostgreSQL's ||); bottom-up so chains convert."""
        for node in reversed(list(tree.find_all(exp.Add))):
            if self._is_string(node.this) or self._is_string(node.expression):
                node.replace(exp.DPipe(this=node.this, expression=node.expression))

    # ------------------------------------------------------------------ identifiers
    def _columns(self, tree: exp.Expression) -> None:
        for col in list(tree.find_all(exp.Column)):
            col.meta.setdefault("hw_written", col.name)
            self.q.written.setdefault("#col:" + col.name.lower(), col.name)
            for key in ("this", "table"):
                part = col.args.get(key)
                if isinstance(part, exp.Identifier):
                    part.set("this", part.this.lower())
                    part.set("quoted", True)
            # db.schema.table.column → table.column (the table is already routed)
            col.set("db", None)
            col.set("catalog", None)
        for alias in list(tree.find_all(exp.TableAlias)):
            ident = alias.this
            if isinstance(ident, exp.Identifier):
                ident.set("this", ident.this.lower())
                ident.set("quoted", True)
            for c in alias.columns:
                if isinstance(c, exp.Identifier):
                    c.set("this", c.this.lower())
                    c.set("quoted", True)
        for cte in tree.find_all(exp.CTE):
            a = cte.args.get("alias")
            if isinstance(a, exp.TableAlias) and isinstance(a.this, exp.Identifier):
                a.this.set("this", a.this.this.lower())
                a.this.set("quoted", True)

    # ------------------------------------------------------------------ INSERT
    def _insert(self, tree: exp.Insert) -> exp.Expression:
        q = self.q
        schema_node = tree.this
        table = schema_node.this if isinstance(schema_node, exp.Schema) else schema_node
        obj = self._target(table)
        q.target = obj
        explicit_cols = [c for c in schema_node.expressions] if isinstance(schema_node, exp.Schema) else []
        if explicit_cols:
            cols = []
            for ident in explicit_cols:
                c = obj.column(ident.name)
                if c is None:
                    raise SqlServerError(207, f"Invalid column name '{ident.name}'.")
                cols.append(c)
        else:
            cols = [c for c in obj.columns if not c.identity and c.type.name != "timestamp"]
        ident_cols = [c for c in obj.columns if c.identity]
        ii = self.ctx.identity_insert(q.database, obj.object_id)
        if any(c.identity for c in cols):
            if not ii:
                raise SqlServerError(544, f"Cannot insert explicit value for identity column in table '{obj.name}' "
                                          "when IDENTITY_INSERT is set to OFF.", aborts_batch=False)
            q.reseed = (f'"{obj.pg_schema}"."{obj.pg_name}"', next(c for c in cols if c.identity).pg_name)
        elif ii and ident_cols and tree.expression is not None:
            if not explicit_cols:
                raise SqlServerError(8101, f"An explicit value for the identity column in table '{obj.name}' can "
                                           "only be specified when a column list is used and IDENTITY_INSERT is ON.")
            raise SqlServerError(545, f"Explicit value must be specified for identity column in table '{obj.name}' "
                                      "either when IDENTITY_INSERT is set to ON or when a replication user is "
                                      "inserting into a NOT FOR REPLICATION identity column.")
        tname = f"{q.database}.{obj.schema}.{obj.name}"
        source = tree.expression
        if isinstance(source, exp.Values):
            for row in source.expressions:
                values = list(row.expressions) if isinstance(row, exp.Tuple) else [row]
                if len(values) != len(cols):
                    if len(values) > len(cols):
                        raise SqlServerError(110, "There are more columns in the INSERT statement than values "
                                                  "specified in the VALUES clause. The number of columns in the "
                                                  "INSERT statement must match the number of values.")
                    raise SqlServerError(109, "There are fewer columns in the INSERT statement than values "
                                              "specified in the VALUES clause. The number of values in the VALUES "
                                              "clause must match the number of columns specified in the INSERT "
                                              "statement.")
                new_values = [self._assign(v, c, tname) for v, c in zip(values, cols)]
                if isinstance(row, exp.Tuple):
                    row.set("expressions", new_values)
                else:
                    row.replace(new_values[0])
        elif source is not None:
            names = [f"c{i}" for i in range(len(cols))]
            outer = exp.select(*[self._assign(exp.column(n), c, tname) for n, c in zip(names, cols)]).from_(
                exp.Subquery(this=source.copy(), alias=exp.TableAlias(
                    this=exp.to_identifier("hw_src"), columns=[exp.to_identifier(n) for n in names])))
            tree.set("expression", outer)
        tree.set("this", exp.Schema(this=table, expressions=[exp.Identifier(this=c.pg_name, quoted=True)
                                                              for c in cols]))
        return tree

    def _target(self, table: exp.Expression) -> ObjectInfo:
        if not isinstance(table, exp.Table):
            raise SqlServerError(50000, "emulator: this INSERT target is not supported")
        pg_name = table.name.lower()
        for obj in self.scope.values():
            if obj.pg_name == pg_name:
                return obj
        raise SqlServerError(50000, f"emulator: inserting into {table.sql('postgres')} is not supported")

    def _assign(self, value: exp.Expression, c: Any, tname: str) -> exp.Expression:
        t: SqlType = c.type
        if isinstance(value, exp.Literal) or (isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal)):
            v = value.this if isinstance(value, exp.Literal) and value.is_string else _number(value)
            return _raw(convert.to_pg_literal(v, t, table=tname, column=c.name))
        if isinstance(value, (exp.Null, exp.Var)) and value.sql().upper() in ("NULL", "DEFAULT"):
            return value
        if isinstance(value, exp.Null):
            return value
        n = t.name
        if n in ("varchar", "nvarchar", "char", "nchar") and t.length not in (None, MAX):
            return _raw(f"sys.hw_check_len(CAST(x AS text), {t.length}, {convert.quote(tname)}, "
                        f"{convert.quote(c.name)})").transform(_put(value))
        if n in ("binary", "varbinary") and t.length not in (None, MAX):
            return _raw(f"sys.hw_check_bin(x, {t.length}, {'true' if n == 'binary' else 'false'}, "
                        f"{convert.quote(tname)}, {convert.quote(c.name)})").transform(_put(value))
        if n in ("datetime2", "time", "datetimeoffset", "datetime", "smalldatetime"):
            return self._cast_to(value, t)
        if n == "tinyint":
            return exp.Anonymous(this="sys.to_tinyint", expressions=[value])
        if n == "sql_variant":
            return self._variant_of(value)
        return value

    def _variant_of(self, value: exp.Expression) -> exp.Expression:
        """A typed expression (CAST(42 AS int), a column) going into a sql_variant column keeps its
        type as the variant's base type; the text form is what convert.from_pg reads back."""
        vt = value.meta.get("hw_type")
        if vt is None and isinstance(value, exp.Column):
            info = self._column_info(value)
            vt = info[1].type if info else None
        if vt is None or vt.name == "sql_variant":
            return value
        if vt.name in ("xml", "text", "ntext", "image", "timestamp", "rowversion") or vt.length == MAX:
            raise SqlServerError(206, f"Operand type clash: {vt} is incompatible with sql_variant")
        if vt.name in ("time", "datetimeoffset"):
            # convert.from_pg reads no text form of these back yet
            raise SqlServerError(50000, f"emulator: a sql_variant holding {vt.name} is not supported")
        # binary as \\x hex and date as ISO text (PostgreSQL's own forms, also what from_pg reads back;
        # sys.hw_text(date) would be ambiguous)
        text = "CAST(x AS text)" if vt.name in ("binary", "varbinary", "date") else "sys.hw_text(x)"
        return _raw(f"ROW({convert.quote(str(vt))}, {text})::sys.sql_variant").transform(_put(value))

    # ------------------------------------------------------------------ UPDATE
    def _update(self, tree: exp.Update) -> None:
        q = self.q
        table = tree.this
        obj = self._target(table)
        q.target = obj
        tname = f"{q.database}.{obj.schema}.{obj.name}"
        for eq in tree.expressions:
            if isinstance(eq, exp.EQ) and isinstance(eq.this, exp.Column):
                c = obj.column(eq.this.name)
                if c is None:
                    raise SqlServerError(207, f"Invalid column name '{eq.this.name}'.")
                if c.identity:
                    raise SqlServerError(8102, f"Cannot update identity column '{c.name}'.")
                eq.set("expression", self._assign(eq.expression, c, tname))
                eq.this.set("table", None)

    # ------------------------------------------------------------------ result names and types
    def _clustered_order(self, tree: exp.Select) -> None:
        """A plain scan of one table with a clustered index and no ORDER BY: SQL Server reads the clustered
        index, so the rows come in its key order (Debezium's snapshot SELECTs and a blocking snapshot's
        additional-condition SELECT rely on it for the order of their events); PostgreSQL's heap order
        changes with every UPDATE. Statements that group, aggregate, join or deduplicate are left alone,
        as SQL Server's own order is the plan's there."""
        if tree.args.get("order") or tree.args.get("group") or tree.args.get("distinct") or \
                tree.args.get("joins") or tree.args.get("having") or tree.find(exp.AggFunc, exp.Window) or \
                tree.parent is not None:
            return
        source = tree.args.get("from_")
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table):
            return
        obj = self.scope.get((table.alias or table.name).lower())
        if obj is None or obj.is_ms_shipped or obj.type.strip().upper() != "U":
            return
        clustered = next((ix for ix in obj.indexes if ix.type_desc == "CLUSTERED"), None)
        if clustered is None:
            return
        by_id = {c.column_id: c for c in obj.columns}
        if any(i not in by_id for i in clustered.column_ids):
            return
        qualifier = exp.Identifier(this=table.alias, quoted=True) if table.alias else None
        keys = []
        for column_id in clustered.column_ids:
            column = exp.Column(this=exp.Identifier(this=by_id[column_id].pg_name, quoted=True))
            if qualifier is not None:
                column.set("table", qualifier.copy())
            else:
                column.set("table", exp.Identifier(this=obj.pg_name, quoted=True))
                column.set("db", exp.Identifier(this=obj.pg_schema, quoted=True))
            keys.append(exp.Ordered(this=column))
        tree.set("order", exp.Order(expressions=keys))

    def _naming(self, tree: exp.Expression) -> None:
        first = tree
        while isinstance(first, (exp.Union, exp.Except, exp.Intersect)):
            first = first.this
        if isinstance(first, exp.Subquery):
            first = first.this
        if not isinstance(first, exp.Select):
            return
        new = []
        for i, e in enumerate(first.expressions):
            if isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star)):
                new.append(e)
                continue
            t = e.meta.get("hw_type") or (e.this.meta.get("hw_type") if isinstance(e, exp.Alias) else None)
            if t is None:
                t = self._aggregate_type(e.this if isinstance(e, exp.Alias) else e)
            if isinstance(e, exp.Alias):
                if t is None and isinstance(e.this, exp.Column):
                    t = self.view_hints.get(e.this.name.lower())
                written = e.alias
                out = written.lower()
                e.set("alias", exp.Identifier(this=out, quoted=True))
            elif isinstance(e, exp.Column):
                written = e.meta.get("hw_written", e.name)
                if t is None:
                    t = self.view_hints.get(e.name.lower())
                out = e.name.lower()  # its own name: ORDER BY and UNION still find it
                e = exp.Alias(this=e, alias=exp.Identifier(this=out, quoted=True))
            else:
                written = ""
                out = f"hw_expr_{i}"
                e = exp.Alias(this=e, alias=exp.Identifier(this=out, quoted=True))
            self.q.names[out] = written
            if t is not None:
                self.q.hints[out] = t
            new.append(e)
        first.set("expressions", new)


def _with_arg(sql_text: str, arg: exp.Expression) -> exp.Expression:
    return _raw(sql_text).transform(lambda e: arg.copy() if isinstance(e, exp.Column) and e.name == "hw_arg" else e)


def _put(value: exp.Expression) -> Callable[[exp.Expression], exp.Expression]:
    def fn(e: exp.Expression) -> exp.Expression:
        if isinstance(e, exp.Column) and e.name == "x":
            return value.copy()
        return e
    return fn


def _number(node: exp.Expression) -> Any:
    from decimal import Decimal
    text = node.sql("tsql")
    try:
        return int(text)
    except ValueError:
        try:
            return Decimal(text)
        except Exception:
            return text


def split_name(text: str) -> list[str]:
    """``[db].dbo.[t.x]`` → ["[db]", "dbo", "[t.x]"]: split at dots outside brackets."""
    parts, cur, in_br = [], "", False
    for ch in text:
        if ch == "[":
            in_br = True
        elif ch == "]":
            in_br = False
        elif ch == "." and not in_br:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return parts


def _kind(tree: exp.Expression) -> str:
    if isinstance(tree, exp.Insert):
        return "insert"
    if isinstance(tree, exp.Update):
        return "update"
    if isinstance(tree, exp.Delete):
        return "delete"
    if isinstance(tree, exp.TruncateTable):
        return "truncate"
    return "select"

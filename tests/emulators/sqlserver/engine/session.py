"""Session: runs T-SQL batches and RPCs for one client connection.

Each SQL Server database the session touches has its own psycopg2 connection (autocommit; the
session issues BEGIN/COMMIT itself so that SQL Server's transaction rules apply: @@TRANCOUNT,
statement-level rollback through savepoints, isolation levels checked against the database's
ALLOW_SNAPSHOT_ISOLATION)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg2
from sqlglot import exp

from ..results import (
    Column,
    EnvChange,
    LoginInfo,
    Message,
    Result,
    ResultSet,
    ReturnStatus,
    ReturnValue,
    RowCount,
    RpcParam,
    SqlServerError,
)
from ..sqltypes import SqlType
from . import catalog, convert, ddl, security
from .errors import Namer, map_pg_error
from .splitter import Statement, split
from .translate import Query, Translator, parse, split_name, type_from_datatype

ISOLATION = {"READ UNCOMMITTED": "READ COMMITTED", "READ COMMITTED": "READ COMMITTED",
             "REPEATABLE READ": "REPEATABLE READ", "SNAPSHOT": "REPEATABLE READ", "SERIALIZABLE": "SERIALIZABLE"}
ISOLATION_NUMBER = {"READ UNCOMMITTED": 1, "READ COMMITTED": 2, "REPEATABLE READ": 3, "SERIALIZABLE": 4,
                    "SNAPSHOT": 5}


class Session:
    def __init__(self, server: Any, spid: int, login: LoginInfo) -> None:
        self.server = server
        self.spid = spid
        self.login = login
        self.database = server.databases[(login.database or "master").lower()].name
        self.transaction_descriptor = b"\0" * 8
        self.trancount = 0
        self.isolation = "READ COMMITTED"
        self.lock_timeout = -1
        self.nocount = False
        self.xact_abort = False
        self.implicit_transactions = False
        self.rowcount = 0
        self.last_identity: Decimal | None = None
        self.identity_inserts: set[tuple[str, int]] = set()
        self.variables: dict[str, tuple[SqlType, Any]] = {}
        self.table_vars: dict[str, tuple[list[tuple[str, SqlType]], list[tuple[Any, ...]]]] = {}
        self.prepared: dict[int, tuple[str, str]] = {}
        self._next_handle = 1
        self._conns: dict[str, Any] = {}
        self._in_tx: set[str] = set()          # databases with an open PostgreSQL transaction
        self._running: Any = None               # connection executing right now (for cancel)
        self._cancelled = False
        self._lock = threading.Lock()
        self._tx_counter = 0

    # ------------------------------------------------------------------ connections
    def _conn(self, database: str) -> Any:
        key = database.lower()
        if self.server.database(database) is None:
            raise SqlServerError(911, f"Database '{database}' does not exist. Make sure that the name is entered "
                                      "correctly.")
        conn = self._conns.get(key)
        if conn is None or conn.closed:
            conn = self.server.pg.connect(key)
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SET search_path = dbo, public")
                if self.server.time_zone:
                    cur.execute("SELECT set_config('TimeZone', %s, false)", (self.server.time_zone,))
                if self.lock_timeout >= 0:
                    cur.execute(f"SET lock_timeout = {int(self.lock_timeout)}")
            try:
                security.enter(self, conn, key)  # SET ROLE to the database user's role, or 916
            except Exception:
                conn.close()
                raise
            self._conns[key] = conn
        if self.trancount > 0 and key not in self._in_tx:
            self._begin_pg(database, conn)
        return conn

    def _begin_pg(self, database: str, conn: Any) -> None:
        info = self.server.database(database)
        if self.isolation == "SNAPSHOT" and info is not None and not info.allow_snapshot:
            raise SqlServerError(3952, f"Snapshot isolation transaction failed accessing database '{info.name}' "
                                       "because snapshot isolation is not allowed in this database. Use ALTER "
                                       "DATABASE to allow snapshot isolation.", state=1)
        with conn.cursor() as cur:
            cur.execute(f"BEGIN ISOLATION LEVEL {ISOLATION[self.isolation]}")
        self._in_tx.add(database.lower())

    def _forget_database(self, name: str) -> None:
        conn = self._conns.pop(name.lower(), None)
        self._in_tx.discard(name.lower())
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def close(self) -> None:
        for conn in list(self._conns.values()):
            try:
                conn.close()
            except Exception:
                pass
        self._conns.clear()
        self.server._session_closed(self.spid)

    def cancel(self) -> None:
        self._cancelled = True
        conn = self._running
        if conn is not None:
            try:
                conn.cancel()
            except Exception:
                pass

    def reset(self) -> None:
        """sp_reset_connection: roll back, default options, keep the login's database."""
        if self.trancount:
            self._rollback_all()
        self.trancount = 0
        self.transaction_descriptor = b"\0" * 8
        self.isolation = "READ COMMITTED"
        self.nocount = False
        self.xact_abort = False
        self.implicit_transactions = False
        self.identity_inserts.clear()
        self.variables.clear()
        if self.lock_timeout != -1:
            self.lock_timeout = -1
            for conn in self._conns.values():
                with conn.cursor() as cur:
                    cur.execute("SET lock_timeout = 0")
        self.database = self.server.databases[(self.login.database or "master").lower()].name

    # ------------------------------------------------------------------ Translator context
    def database_name(self, name: str) -> str | None:
        info = self.server.database(name)
        return info.name if info else None

    def lookup(self, database: str, schema: str, name: str) -> Any:
        info = self.server.database(database)
        if info is None:
            return None
        return info.registry.lookup(self._conn(database), schema, name)

    def pg_relation_exists(self, database: str, schema: str, name: str) -> bool:
        with self._conn(database).cursor() as cur:
            cur.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}"."{name}"',))
            return bool(cur.fetchone()[0])

    def variable(self, name: str) -> tuple[SqlType, Any] | None:
        return self.variables.get(name.lower())

    def global_variable(self, name: str) -> tuple[SqlType, Any] | None:
        n = name.upper()
        if n == "@@DBTS":  # the current database's last rowversion value (2000 in a new database)
            with self._conn(self.database).cursor() as cur:
                cur.execute("SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END "
                            "FROM hw_emulator.rowversion")
                return SqlType("varbinary", length=8), int(cur.fetchone()[0]).to_bytes(8, "big")
        values: dict[str, tuple[SqlType, Any]] = {
            "@@VERSION": (SqlType("nvarchar", length=300), _version()),
            "@@SPID": (SqlType("smallint"), self.spid),
            "@@TRANCOUNT": (SqlType("int"), self.trancount),
            "@@ROWCOUNT": (SqlType("int"), self.rowcount),
            "@@SERVERNAME": (SqlType("nvarchar", length=128), self.server.server_name),
            "@@SERVICENAME": (SqlType("nvarchar", length=128), "MSSQLSERVER"),
            "@@ERROR": (SqlType("int"), 0),
            "@@LANGUAGE": (SqlType("nvarchar", length=128), "us_english"),
            "@@LOCK_TIMEOUT": (SqlType("int"), self.lock_timeout),
            "@@MAX_PRECISION": (SqlType("tinyint"), 38),
            "@@OPTIONS": (SqlType("int"), 5496 | (512 if self.nocount else 0) | (2 if self.implicit_transactions
                                                                                 else 0)),
            "@@DATEFIRST": (SqlType("tinyint"), 7),
            "@@TEXTSIZE": (SqlType("int"), 2147483647),
            "@@MICROSOFTVERSION": (SqlType("int"), 268439555),
        }
        if n == "@@IDENTITY":
            return SqlType("numeric", precision=38, scale=0), self.last_identity
        return values.get(n)

    def server_view(self, name: str) -> Any:
        security.check_server_view(self, name)  # 300 without VIEW SERVER STATE
        return self.server.server_view(name, self.database)

    def server_property(self, name: str) -> Any:
        return self.server.server_property(name)

    def connection(self, database: str) -> Any:
        return self._conn(database)

    def table_variable(self, name: str) -> Any:
        return self.table_vars.get(name.lower())

    def database_id(self, name: str | None) -> int | None:
        info = self.server.database(name or self.database)
        return info.database_id if info else None

    def database_name_of(self, database_id: int) -> str | None:
        for info in self.server.databases.values():
            if info.database_id == database_id:
                return info.name
        return None

    def identity_insert(self, database: str, object_id: int) -> bool:
        return (database.lower(), object_id) in self.identity_inserts

    # ------------------------------------------------------------------ batches
    def execute_batch(self, sql: str) -> Iterator[Result]:
        self._cancelled = False
        declared_here: list[str] = []
        try:
            statements = split(sql)
            for st in statements:
                if self._cancelled:
                    return
                yield from self._guarded(st, declared_here)
        finally:
            # variables live for one batch
            for name in declared_here:
                self.variables.pop(name, None)
                self.table_vars.pop(name, None)

    def _guarded(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        try:
            yield from self._protected(self._statement(st, declared))
        except SqlServerError as err:
            yield from getattr(err, "preceding", ())  # messages SQL Server sends before this error (300 → 297)
            if err.message.number == 1205 or (self.xact_abort and self.trancount and err.message.severity > 10):
                if self.trancount:
                    yield from self._rollback_all_env()
                raise
            if err.aborts_batch:
                raise
            yield err.message

    def _protected(self, results: Iterator[Result]) -> Iterator[Result]:
        """Whatever goes wrong below reaches the client as a SQL Server error, never as a Python one."""
        try:
            yield from results
        except SqlServerError:
            raise
        except psycopg2.Error as exc:
            raise map_pg_error(exc, Namer(self.database)) from None
        except Exception as exc:  # an emulator bug must still be an error message
            raise SqlServerError(50000, f"emulator: internal error: {type(exc).__name__}: {exc}") from exc

    def _statement(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        kw = st.keyword
        text = st.text
        if kw == "GO":
            raise SqlServerError(102, "Incorrect syntax near 'GO'.")
        if security.handles(kw, st.word(1)):
            yield from security.execute(self, text)
            return
        if kw == "{":
            yield from self._odbc_call(text, declared)
            return
        if (kw in ("BEGIN", "COMMIT", "ROLLBACK", "SAVE") and st.word(1) in ("TRAN", "TRANSACTION", "WORK", "",
                                                                              "DISTRIBUTED")) or (
                kw in ("COMMIT", "ROLLBACK") and st.word(1) not in ("",)):
            yield from self._transaction(st)
            return
        if kw == "BEGIN":
            yield from self._block(st, declared)
            return
        if kw == "SET":
            yield from self._set(st, declared)
            return
        if kw == "DECLARE":
            yield from self._declare(st, declared)
            return
        if kw == "USE":
            yield from self._use(text)
            return
        if kw == "PRINT":
            value = self._scalar(text[5:].strip())
            yield Message(0, "" if value is None else _text(value), severity=0, line=st.line)
            return
        if kw == "RAISERROR":
            yield from self._raiserror(st)
            return
        if kw == "THROW":
            m = re.match(r"^THROW\s+(.+?)\s*,\s*(.+?)\s*,\s*(.+?)\s*;?$", text, re.IGNORECASE | re.DOTALL)
            if not m:
                raise SqlServerError(50000, "emulator: THROW without arguments is not supported outside CATCH")
            num, msg, state = (self._scalar(g) for g in m.groups())
            raise SqlServerError(int(num), str(msg), severity=16, state=int(state))
        if kw == "WAITFOR":
            m = re.match(r"^WAITFOR\s+DELAY\s+(.+)$", text, re.IGNORECASE | re.DOTALL)
            if not m:
                raise SqlServerError(50000, "emulator: WAITFOR TIME/RECEIVE is not supported")
            delay = str(self._scalar(m.group(1)))
            h, mi, s = [*delay.split(":"), "0", "0"][:3]
            seconds = int(h) * 3600 + int(mi) * 60 + float(s)
            end = time.monotonic() + seconds
            while time.monotonic() < end and not self._cancelled:
                time.sleep(min(0.05, end - time.monotonic()) if end > time.monotonic() else 0)
            if self._cancelled:
                return
            return
        if kw in ("EXEC", "EXECUTE"):
            yield from self._exec_statement(st, declared)
            return
        if kw == "IF":
            yield from self._if(st, declared)
            return
        if kw == "CREATE":
            yield from self._create(st)
            return
        if kw == "ALTER":
            yield from self._alter(st)
            return
        if kw == "DROP":
            yield from self._drop(st)
            return
        if kw == "MERGE":
            raise SqlServerError(50000, "emulator: MERGE statements are not supported")
        if kw == "INSERT":
            im = re.match(r"^INSERT\s+(?:INTO\s+)?(@\w+)\s*(?:\(([^)]*)\))?\s*(EXEC(?:UTE)?\b.*)$", text,
                          re.IGNORECASE | re.DOTALL)
            if im:
                yield from self._insert_exec(im.group(1), im.group(3), st, declared)
                return
        if kw in ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "TRUNCATE", "("):
            yield from self._query(text)
            return
        if kw == "RETURN":
            return
        raise SqlServerError(50000, f"emulator: {kw} statements are not supported")

    def _insert_exec(self, name: str, exec_text: str, st: Statement, declared: list[str]) -> Iterator[Result]:
        tv = self.table_vars.get(name.lower())
        if tv is None:
            raise SqlServerError(1087, f'Must declare the table variable "{name}".', severity=15, state=2)
        inner = split(exec_text)[0]
        count = 0
        for r in self._exec_statement(inner, declared):
            if isinstance(r, ResultSet):
                rows = list(r.rows)
                if rows and len(rows[0]) != len(tv[0]):
                    raise SqlServerError(213, "Column name or number of supplied values does not match table "
                                              "definition.")
                tv[1].extend(rows)
                count += len(rows)
        self.rowcount = count
        if not self.nocount:
            yield RowCount(count)

    # ------------------------------------------------------------------ transactions
    def _new_descriptor(self) -> bytes:
        self._tx_counter += 1
        return ((self.spid << 40) | self._tx_counter).to_bytes(8, "little")

    def _begin(self) -> Iterator[Result]:
        if self.trancount == 0:
            self.transaction_descriptor = self._new_descriptor()
            self.trancount = 1
            yield EnvChange("begin_transaction", self.transaction_descriptor, b"")
        else:
            self.trancount += 1

    def _commit_all(self) -> None:
        errors = []
        for key in list(self._in_tx):
            try:
                with self._conns[key].cursor() as cur:
                    cur.execute("COMMIT")
            except psycopg2.Error as exc:
                errors.append(exc)
            info = self.server.database(key)
            if info is not None:
                info.registry.invalidate()  # DDL of the transaction is now visible to the others
        self._in_tx.clear()
        if errors:
            raise map_pg_error(errors[0], Namer(self.database))

    def _rollback_all(self) -> None:
        for key in list(self._in_tx):
            info = self.server.database(key)
            if info is not None:
                info.registry.invalidate()  # DDL of the transaction is gone too
            try:
                with self._conns[key].cursor() as cur:
                    cur.execute("ROLLBACK")
            except psycopg2.Error:
                pass
        self._in_tx.clear()
        self.trancount = 0

    def _rollback_all_env(self) -> Iterator[Result]:
        old = self.transaction_descriptor
        self._rollback_all()
        self.transaction_descriptor = b"\0" * 8
        yield EnvChange("rollback_transaction", b"", old)

    def _transaction(self, st: Statement) -> Iterator[Result]:
        kw = st.keyword
        words = [t.text for t in st.tokens]
        name = words[2] if len(words) > 2 else (words[1] if len(words) == 2 and st.word(1) not in (
            "TRAN", "TRANSACTION", "WORK") else "")
        if kw == "BEGIN":
            if st.word(1) == "DISTRIBUTED":
                raise SqlServerError(50000, "emulator: distributed transactions are not supported")
            yield from self._begin()
            return
        if kw == "SAVE":
            if self.trancount == 0:
                raise SqlServerError(628, "Cannot issue SAVE TRANSACTION when there is no active transaction.")
            if not name:
                raise SqlServerError(102, "Incorrect syntax near 'TRAN'.")
            for db in {self.database.lower()} | self._in_tx:
                conn = self._conn(db)
                with conn.cursor() as cur:
                    cur.execute(f'SAVEPOINT "sp_{name.lower()}"')
            return
        if kw == "COMMIT":
            if self.trancount == 0:
                raise SqlServerError(3902, "The COMMIT TRANSACTION request has no corresponding BEGIN TRANSACTION.",
                                     aborts_batch=False)
            if self.trancount > 1:
                self.trancount -= 1
                return
            old = self.transaction_descriptor
            self.trancount = 0
            self.transaction_descriptor = b"\0" * 8
            self._commit_all()
            yield EnvChange("commit_transaction", b"", old)
            return
        # ROLLBACK
        if self.trancount == 0:
            raise SqlServerError(3903, "The ROLLBACK TRANSACTION request has no corresponding BEGIN TRANSACTION.",
                                 aborts_batch=False)
        if name and not name.startswith("@"):
            savepoint = f"sp_{name.lower()}"
            ok = False
            for key in list(self._in_tx):
                try:
                    with self._conns[key].cursor() as cur:
                        cur.execute(f'ROLLBACK TO SAVEPOINT "{savepoint}"')
                        ok = True
                except psycopg2.Error:
                    with self._conns[key].cursor() as cur:
                        cur.execute("ROLLBACK")
                    self._in_tx.discard(key)
            if ok:
                return
            if self.trancount and not ok and not self._in_tx:
                raise SqlServerError(6401, f"Cannot roll back {name}. No transaction or savepoint of that name was "
                                           "found.", aborts_batch=False)
        yield from self._rollback_all_env()

    def _implicit_begin(self) -> Iterator[Result]:
        if self.implicit_transactions and self.trancount == 0:
            yield from self._begin()

    # ------------------------------------------------------------------ SET
    def _set(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        yield from ()
        text = st.text
        if st.word(1).startswith("@") or st.tokens[1].text == "@":
            m = re.match(r"^SET\s+(@\w+)\s*(=|\+=|-=)\s*(.+)$", text, re.IGNORECASE | re.DOTALL)
            if not m:
                raise SqlServerError(102, "Incorrect syntax near '='.")
            var = self.variables.get(m.group(1).lower())
            if var is None:
                raise SqlServerError(137, f'Must declare the scalar variable "{m.group(1)}".', severity=15, state=1)
            expr = m.group(3)
            if m.group(2) != "=":
                expr = f"{m.group(1)} {m.group(2)[0]} ({expr})"
            value = self._scalar(expr, var[0])
            self.variables[m.group(1).lower()] = (var[0], value)
            return
        words = [t.text.upper() for t in st.tokens]
        opt = words[1]
        rest = words[2:]
        on = bool(rest) and rest[-1] == "ON"
        if opt == "TRANSACTION":
            level = " ".join(words[4:]) if len(words) > 4 else ""
            if words[2:4] != ["ISOLATION", "LEVEL"] or level not in ISOLATION:
                raise SqlServerError(102, f"Incorrect syntax near '{words[-1].lower()}'.")
            self.isolation = level
            return
        if opt == "NOCOUNT":
            self.nocount = on
            return
        if opt == "XACT_ABORT":
            self.xact_abort = on
            return
        if opt == "IMPLICIT_TRANSACTIONS":
            self.implicit_transactions = on
            return
        if opt == "LOCK_TIMEOUT":
            value = int(st.text.split()[-1])
            self.lock_timeout = value
            for conn in self._conns.values():
                with conn.cursor() as cur:
                    cur.execute(f"SET lock_timeout = {max(0, value) if value >= 0 else 0}")
            return
        if opt == "IDENTITY_INSERT":
            m = re.match(r"^SET\s+IDENTITY_INSERT\s+(.+?)\s+(ON|OFF)\s*$", text, re.IGNORECASE | re.DOTALL)
            if not m:
                raise SqlServerError(102, "Incorrect syntax near 'IDENTITY_INSERT'.")
            db, schema, name = self._split_object(m.group(1))
            obj = self.lookup(db, schema, name)
            if obj is None:
                raise SqlServerError(208, f"Invalid object name '{m.group(1)}'.")
            if not any(c.identity for c in obj.columns):
                raise SqlServerError(8106, f"Table '{obj.schema}.{obj.name}' does not have the identity property. "
                                           "Cannot perform SET operation.")
            key = (db.lower(), obj.object_id)
            if m.group(2).upper() == "ON":
                for other in self.identity_inserts:
                    if other != key:
                        raise SqlServerError(8107, f"IDENTITY_INSERT is already ON for table '{obj.name}'. Cannot "
                                                   f"perform SET operation for table '{obj.name}'.")
                self.identity_inserts.add(key)
            else:
                self.identity_inserts.discard(key)
            return
        if opt == "ROWCOUNT":
            if rest and rest[0] not in ("0",):
                raise SqlServerError(50000, "emulator: SET ROWCOUNT other than 0 is not supported")
            return
        if opt in ("ANSI_NULLS", "ANSI_PADDING", "ANSI_WARNINGS", "ARITHABORT", "CONCAT_NULL_YIELDS_NULL",
                   "QUOTED_IDENTIFIER", "ANSI_NULL_DFLT_ON", "ANSI_DEFAULTS", "CURSOR_CLOSE_ON_COMMIT",
                   "TEXTSIZE", "DATEFORMAT", "DATEFIRST", "LANGUAGE", "DEADLOCK_PRIORITY", "NUMERIC_ROUNDABORT",
                   "ARITHIGNORE", "NOEXEC", "FMTONLY", "STATISTICS", "SHOWPLAN_ALL", "QUERY_GOVERNOR_COST_LIMIT",
                   "ANSI_NULL_DFLT_OFF", "CONTEXT_INFO", "NO_BROWSETABLE", "REMOTE_PROC_TRANSACTIONS"):
            if opt in ("NOEXEC", "FMTONLY", "SHOWPLAN_ALL", "NO_BROWSETABLE") and on:
                raise SqlServerError(50000, f"emulator: SET {opt} ON is not supported")
            if opt in ("ANSI_NULLS", "QUOTED_IDENTIFIER", "CONCAT_NULL_YIELDS_NULL") and rest and rest[-1] == "OFF":
                raise SqlServerError(50000, f"emulator: SET {opt} OFF is not supported")
            return
        raise SqlServerError(50000, f"emulator: SET {opt} is not supported")

    # ------------------------------------------------------------------ variables
    def _declare(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        body = st.text[len("DECLARE"):].strip()
        tm = re.match(r"^(@\w+)\s+(?:AS\s+)?TABLE\s*\((.*)\)\s*;?$", body, re.IGNORECASE | re.DOTALL)
        if tm:
            probe = parse(f"CREATE TABLE hw_probe ({tm.group(2)})")
            cols = [(cd.name, type_from_datatype(cd.args["kind"])) for cd in probe.this.expressions
                    if isinstance(cd, exp.ColumnDef)]
            self.table_vars[tm.group(1).lower()] = (cols, [])
            declared.append(tm.group(1).lower())
            return
        for part in _split_top(body):
            m = re.match(r"^(@\w+)\s+(?:AS\s+)?(\w+(?:\s*\(\s*(?:max|\d+)\s*(?:,\s*\d+\s*)?\))?)\s*(?:=\s*(.+))?$",
                         part.strip(), re.IGNORECASE | re.DOTALL)
            if not m:
                if re.match(r"^@\w+\s+(?:AS\s+)?TABLE\b", part.strip(), re.IGNORECASE):
                    raise SqlServerError(50000, "emulator: table variables are not supported")
                if re.match(r"^@?\w+\s+CURSOR\b", part.strip(), re.IGNORECASE):
                    raise SqlServerError(50000, "emulator: cursors are not supported")
                raise SqlServerError(102, f"Incorrect syntax near '{part.strip()[:20]}'.")
            name = m.group(1).lower()
            try:
                t = SqlType.parse(m.group(2).replace(" ", ""))
            except ValueError:
                raise SqlServerError(2715, f"Column, parameter, or variable #1: Cannot find data type "
                                           f"{m.group(2)}.") from None
            if t.name == "sysname":
                t = SqlType("nvarchar", length=128)
            value = self._scalar(m.group(3), t) if m.group(3) else None
            self.variables[name] = (t, value)
            declared.append(name)
        return
        yield

    def _scalar(self, expr: str, t: SqlType | None = None) -> Any:
        """Evaluate a T-SQL expression (through PostgreSQL) and convert it to ``t``."""
        expr = expr.strip().rstrip(";")
        sel = f"SELECT CAST(({expr}) AS {t})" if t is not None and t.name not in ("sql_variant",) else \
            f"SELECT ({expr})"
        rs = list(self._query(sel, internal=True))
        rows = list(rs[0].rows) if rs and isinstance(rs[0], ResultSet) else []
        return rows[0][0] if rows else None

    # ------------------------------------------------------------------ queries
    def _query(self, text: str, internal: bool = False) -> Iterator[Result]:
        tree = parse(text)
        if isinstance(tree, exp.Command):
            raise SqlServerError(102, f"Incorrect syntax near '{text.split()[0]}'.")
        tr = Translator(self)
        q = tr.translate(tree)
        if (not internal and q.kind != "select") or self._touches_tables(tree):
            yield from self._implicit_begin()
        yield from self._run(q, internal=internal)

    @staticmethod
    def _touches_tables(tree: exp.Expression) -> bool:
        return tree.find(exp.Table) is not None

    def _run(self, q: Query, internal: bool = False) -> Iterator[Result]:
        conn = self._conn(q.database)
        info = self.server.database(q.database)
        autocommit_iso = self.trancount == 0 and self.isolation in ("SNAPSHOT", "SERIALIZABLE", "REPEATABLE READ")
        if autocommit_iso and self.isolation == "SNAPSHOT" and info is not None and not info.allow_snapshot:
            raise SqlServerError(3952, f"Snapshot isolation transaction failed accessing database '{info.name}' "
                                       "because snapshot isolation is not allowed in this database. Use ALTER "
                                       "DATABASE to allow snapshot isolation.")
        namer = self._namer(q, info)
        in_tx = self.trancount > 0
        cur = conn.cursor()
        try:
            self._running = conn
            if in_tx:
                cur.execute("SAVEPOINT hw_stmt")
            elif autocommit_iso:
                cur.execute(f"BEGIN ISOLATION LEVEL {ISOLATION[self.isolation]}")
            try:
                for relation, mode in q.locks:
                    if in_tx or autocommit_iso:
                        security.lock_table(self, conn, cur, relation, mode)  # SELECT suffices, as in SQL Server
                cur.execute(q.sql)
                rows = cur.fetchall() if cur.description else None
                description = cur.description
                rowcount = cur.rowcount
                if q.kind == "insert" and rowcount > 0 and q.target is not None:
                    self._remember_identity(cur, q)
                if q.reseed is not None:
                    table, column = q.reseed
                    cur.execute(f"SELECT setval(pg_get_serial_sequence(%s, %s), GREATEST((SELECT max(\"{column}\") "
                                f"FROM {table}), 1))", (table, column))
                if in_tx:
                    cur.execute("RELEASE SAVEPOINT hw_stmt")
                elif autocommit_iso:
                    cur.execute("COMMIT")
            except psycopg2.Error as exc:
                err = map_pg_error(exc, namer)
                try:
                    if in_tx and exc.pgcode != "40P01":
                        cur.execute("ROLLBACK TO SAVEPOINT hw_stmt")
                    elif autocommit_iso or in_tx:
                        cur.execute("ROLLBACK")
                except psycopg2.Error:
                    pass
                if exc.pgcode == "57014":
                    self._cancelled = True
                if exc.pgcode == "40P01" and in_tx:
                    self._in_tx.discard(q.database.lower())
                raise err from None
            finally:
                self._running = None
        finally:
            cur.close()
        if description is not None and rows is not None:
            if q.assignments:
                for i, (vname, vtype) in enumerate(q.assignments):
                    if rows:
                        self.variables[vname.lower()] = (vtype, rows[-1][i])
                self.rowcount = len(rows)
                return
            columns, converters = self._columns(q, description, info)
            converted = [tuple(f(v) for f, v in zip(converters, row)) for row in rows]
            self.rowcount = len(converted)
            yield ResultSet(columns, converted)
            return
        self.rowcount = max(rowcount, 0)
        if q.kind in ("insert", "update", "delete") and not self.nocount and not internal:
            yield RowCount(self.rowcount)

    def _remember_identity(self, cur: Any, q: Query) -> None:
        """@@IDENTITY / SCOPE_IDENTITY(): the identity value the INSERT generated (its sequence's currval;
        with IDENTITY_INSERT ON, the largest value in the column)."""
        target = q.target
        ident = next((c for c in target.columns if c.identity), None)
        if ident is None:
            return
        table = f'"{target.pg_schema}"."{target.pg_name}"'
        if q.reseed is None:
            cur.execute("SELECT currval(pg_get_serial_sequence(%s, %s))", (table, ident.pg_name))
        else:
            cur.execute(f'SELECT max("{ident.pg_name}") FROM {table}')
        value = cur.fetchone()[0]
        self.last_identity = None if value is None else Decimal(value)

    def _namer(self, q: Query, info: Any) -> Namer:
        conn = self._conn(q.database)

        def table_name(schema: str, table: str) -> str | None:
            for obj in info.registry.objects(conn):
                if obj.pg_schema == schema and obj.pg_name == table:
                    return f"{obj.schema}.{obj.name}"
            return None

        def column_name(schema: str, table: str, column: str) -> str | None:
            for obj in info.registry.objects(conn):
                if obj.pg_schema == schema and obj.pg_name == table:
                    for c in obj.columns:
                        if c.pg_name == column:
                            return c.name
            return None

        def constraint(name: str) -> tuple[str, str, bool] | None:
            for obj in info.registry.objects(conn):
                for ix in obj.indexes:
                    if ix.name == name or f"{ix.name}${obj.pg_name}" == name:
                        is_constraint = ix.name == name
                        return ix.name, "PK" if ix.is_primary_key else "UQ", is_constraint
            return None

        kind = {"insert": "INSERT", "update": "UPDATE", "delete": "DELETE"}.get(q.kind, "INSERT")
        return Namer(info.name if info else q.database, written_tables=q.written, table_name=table_name,
                     column_name=column_name, constraint=constraint, statement_kind=kind,
                     denied=security.denied_namer(self, q, info))

    def _columns(self, q: Query, description: Any, info: Any) -> tuple[list[Column], list[Any]]:
        conn = self._conn(q.database)
        composites = self._composites(info, conn)
        columns = []
        converters = []
        for d in description:
            pg_name = d.name
            t: SqlType | None = None
            nullable = True
            identity = False
            table = None
            name = q.names.get(pg_name)
            hit = info.registry.by_attribute(conn, d.table_oid, d.table_column) if d.table_oid else None
            if hit is not None:
                obj, col = hit
                t = col.type
                nullable = col.nullable
                identity = col.identity
                table = f"{obj.schema}.{obj.name}"
                if name is None:
                    name = col.name  # SELECT *: the name as the table defines it
            if t is None:
                t = q.hints.get(pg_name)
            if t is None and d.table_oid:
                t = self._attribute_type(info, conn, d.table_oid, d.table_column)
            if t is None:
                t = convert.sqltype_for_pg(d.type_code, d.internal_size, d.precision, d.scale, composites)
            if name is None:
                name = "" if pg_name.startswith("hw_expr_") or pg_name == "?column?" else pg_name
                if name and d.table_oid and self._in_information_schema(info, conn, d.table_oid):
                    name = name.upper()
            columns.append(Column(name, t, nullable, identity, table))
            converters.append(lambda v, t=t: convert.from_pg(v, t))
        return columns, converters

    def _in_information_schema(self, info: Any, conn: Any, rel: int) -> bool:
        cache = info.__dict__.setdefault("info_schema_rels", {})
        if rel not in cache:
            with conn.cursor() as cur:
                cur.execute("SELECT n.nspname = 'hw_information_schema' FROM pg_class c JOIN pg_namespace n "
                            "ON n.oid = c.relnamespace WHERE c.oid = %s", (rel,))
                row = cur.fetchone()
            cache[rel] = bool(row and row[0])
        return cache[rel]

    def _attribute_type(self, info: Any, conn: Any, rel: int, attnum: int) -> SqlType | None:
        """A column of a relation outside the registry (our sys views): its domain says more than the
        base type PostgreSQL reports (sys.tinyint → tinyint, sys.datetime → datetime…)."""
        cache = info.__dict__.setdefault("attr_types", {})
        key = (rel, attnum)
        if key not in cache:
            with conn.cursor() as cur:
                cur.execute("SELECT n.nspname, t.typname, a.atttypmod, format_type(a.atttypid, a.atttypmod) "
                            "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
                            "JOIN pg_namespace n ON n.oid = t.typnamespace WHERE a.attrelid = %s AND a.attnum = %s",
                            (rel, attnum))
                row = cur.fetchone()
            t = None
            if row is not None:
                nsp, typname, typmod, _ = row
                if nsp == "sys":
                    t = {"tinyint": SqlType("tinyint"), "money": SqlType("money"), "smallmoney": SqlType("smallmoney"),
                         "datetime": SqlType("datetime"), "smalldatetime": SqlType("smalldatetime"),
                         "xml": SqlType("xml")}.get(typname)
                elif typname == "varchar" and typmod > 4:
                    t = SqlType("nvarchar", length=typmod - 4)
                elif typname == "bpchar" and typmod > 4:
                    t = SqlType("char", length=typmod - 4)
            cache[key] = t
        return cache[key]

    def _composites(self, info: Any, conn: Any) -> dict[int, str]:
        if info.composites is None:
            with conn.cursor() as cur:
                cur.execute("SELECT t.oid::int, t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace "
                            "WHERE n.nspname = 'sys' AND t.typname IN ('time_', 'datetime2', 'datetimeoffset', "
                            "'sql_variant')")
                info.composites = {oid: {"time_": "time"}.get(name, name) for oid, name in cur.fetchall()}
        return info.composites

    # ------------------------------------------------------------------ USE / databases
    def _use(self, text: str) -> Iterator[Result]:
        name = text.split(None, 1)[1].strip().rstrip(";").strip("[]\"")
        info = self.server.database(name)
        if info is None:
            raise SqlServerError(911, f"Database '{name}' does not exist. Make sure that the name is entered "
                                      "correctly.")
        security.check_access(self, info.name)
        old = self.database
        self.database = info.name
        yield EnvChange("database", info.name, old)
        yield Message(5701, f"Changed database context to '{info.name}'.", severity=0, state=1)

    def _split_object(self, text: str) -> tuple[str, str, str]:
        parts = [p.strip().strip("[]\"") for p in split_name(text.strip())]
        if len(parts) == 3:
            return parts[0] or self.database, parts[1] or "dbo", parts[2]
        if len(parts) == 2:
            return self.database, parts[0] or "dbo", parts[1]
        return self.database, "dbo", parts[0]

    def _create(self, st: Statement) -> Iterator[Result]:
        w1 = st.word(1)
        if w1 == "DATABASE":
            if self.trancount:
                raise SqlServerError(226, "CREATE DATABASE statement not allowed within multi-statement transaction.")
            name = st.tokens[2].text
            self.server.create_database(name)
            return
        if w1 == "SCHEMA":
            name = st.tokens[2].text
            conn = self._conn(self.database)
            with conn.cursor() as cur:
                ddl.create_schema(cur, name)
            return
        if w1 == "TABLE":
            yield from self._implicit_begin()
            tree = parse(st.text)
            table = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
            db = self._db_of(table)
            security.require_ddl(self, db, "CREATE TABLE")
            tr = Translator(self)
            tr.q = Query("", db, "ddl")
            tr.scope = {}
            info = self.server.database(db)
            self._ddl(db, lambda cur: ddl.create_table(tr, cur, tree, db, lambda s, n: self.lookup(db, s, n)))
            info.registry.invalidate()
            return
        if w1 in ("UNIQUE", "INDEX", "CLUSTERED", "NONCLUSTERED") or (w1 == "UNIQUE" and st.word(2) in (
                "INDEX", "CLUSTERED", "NONCLUSTERED")):
            text = re.sub(r"\b(NON)?CLUSTERED\b", "", st.text, flags=re.IGNORECASE)
            text = re.sub(r"\bWITH\s*\(.*\)\s*$", "", text, flags=re.IGNORECASE | re.DOTALL)
            tree = parse(text)
            clustered = re.search(r"\bCLUSTERED\b", st.text, re.IGNORECASE) is not None and \
                re.search(r"\bNONCLUSTERED\b", st.text, re.IGNORECASE) is None
            table = tree.this.args.get("table")
            db = self._db_of(table)
            obj = self.lookup(db, table.args.get("db").name if table.args.get("db") else "dbo", table.name)
            if obj is None:
                raise SqlServerError(1088, f"Cannot find the object \"{table.name}\" because it does not exist or "
                                           "you do not have permissions.")
            if clustered:
                tree.set("kind", "INDEX")
                tree.meta["clustered"] = True
            self._ddl(db, lambda cur: ddl.create_index(cur, tree, obj))
            self.server.database(db).registry.invalidate()
            return
        raise SqlServerError(50000, f"emulator: CREATE {w1} is not supported")

    def _db_of(self, table: exp.Expression) -> str:
        cat = table.args.get("catalog") if isinstance(table, exp.Table) else None
        if cat is not None and cat.name:
            real = self.database_name(cat.name)
            if real is None:
                raise SqlServerError(911, f"Database '{cat.name}' does not exist. Make sure that the name is entered "
                                          "correctly.")
            return real
        return self.database

    def _ddl(self, db: str, action: Any) -> None:
        conn = self._conn(db)
        security.require_ddl(self, db)  # PostgreSQL would refuse the registry writes anyway
        in_tx = self.trancount > 0
        with conn.cursor() as cur:
            try:
                cur.execute("SAVEPOINT hw_stmt" if in_tx else "BEGIN")
                action(cur)
                security.after_ddl(cur)  # new tables get what schema/role permissions give them
                cur.execute("RELEASE SAVEPOINT hw_stmt" if in_tx else "COMMIT")
            except SqlServerError:
                cur.execute("ROLLBACK TO SAVEPOINT hw_stmt" if in_tx else "ROLLBACK")
                raise
            except psycopg2.Error as exc:
                cur.execute("ROLLBACK TO SAVEPOINT hw_stmt" if in_tx else "ROLLBACK")
                raise map_pg_error(exc, Namer(db)) from None

    def _alter(self, st: Statement) -> Iterator[Result]:
        w1 = st.word(1)
        if w1 == "DATABASE":
            m = re.match(r"^ALTER\s+DATABASE\s+(\[[^\]]+\]|\w+)\s+SET\s+(\w+)\s*(=\s*)?(\w+)(\s+WITH\s+.*)?$",
                         st.text.strip().rstrip(";"), re.IGNORECASE | re.DOTALL)
            if not m:
                raise SqlServerError(50000, "emulator: this ALTER DATABASE form is not supported")
            name = m.group(1).strip("[]")
            if name.upper() == "CURRENT":
                name = self.database
            info = self.server.database(name)
            if info is None:
                raise SqlServerError(5011, f"User does not have permission to alter database '{name}', the database "
                                           "does not exist, or the database is not in a state that allows access "
                                           "checks.", severity=14, state=5)
            option, value = m.group(2).upper(), m.group(4).upper()
            if option in ("ALLOW_SNAPSHOT_ISOLATION", "READ_COMMITTED_SNAPSHOT"):
                if value not in ("ON", "OFF"):
                    raise SqlServerError(102, f"Incorrect syntax near '{m.group(4)}'.")
                self.server.set_database_option(info.name, option.lower(), value == "ON")
                return
            if option in ("RECOVERY", "MULTI_USER", "SINGLE_USER", "AUTO_CLOSE", "AUTO_SHRINK", "PAGE_VERIFY",
                          "COMPATIBILITY_LEVEL", "TRUSTWORTHY"):
                return
            raise SqlServerError(50000, f"emulator: ALTER DATABASE … SET {option} is not supported")
        if w1 == "TABLE":
            yield from self._implicit_begin()
            m = re.match(r"^ALTER\s+TABLE\s+((?:\[[^\]]+\]|[\w$#@\"]+)(?:\s*\.\s*(?:\[[^\]]+\]|[\w$#@\"]+)){0,2})",
                         st.text, re.IGNORECASE)
            if not m:
                raise SqlServerError(102, "Incorrect syntax near 'TABLE'.")
            db, schema, name = self._split_object(m.group(1))
            real = self.database_name(db)
            if real is None:
                raise SqlServerError(911, f"Database '{db}' does not exist. Make sure that the name is entered "
                                          "correctly.")
            obj = self.lookup(real, schema, name)
            if obj is None:
                raise SqlServerError(4902, f"Cannot find the object \"{m.group(1).strip()}\" because it does not "
                                           "exist or you do not have permissions.")
            tr = Translator(self)
            tr.q = Query("", real, "ddl")
            tr.scope = {}
            self._ddl(real, lambda cur: ddl.alter_table(tr, cur, st.text, obj, real))
            self.server.database(real).registry.invalidate()
            return
        raise SqlServerError(50000, f"emulator: ALTER {w1} is not supported")

    def _drop(self, st: Statement) -> Iterator[Result]:
        w1 = st.word(1)
        text = st.text.strip().rstrip(";")
        if_exists = st.word(2) == "IF" and st.word(3) == "EXISTS"
        body = re.sub(r"^DROP\s+\w+\s+(IF\s+EXISTS\s+)?", "", text, flags=re.IGNORECASE)
        if w1 == "DATABASE":
            for raw in _split_top(body):
                name = raw.strip().strip("[]")
                if name.lower() == self.database.lower():
                    raise SqlServerError(3702, f'Cannot drop database "{name}" because it is currently in use.')
                if self.server.database(name) is None and if_exists:
                    continue
                self.server.drop_database(name)
            return
        if w1 == "TABLE":
            yield from self._implicit_begin()
            for raw in _split_top(body):
                db, schema, name = self._split_object(raw)
                real = self.database_name(db) or db
                obj = self.lookup(real, schema, name) if self.server.database(real) else None
                if obj is None:
                    if if_exists:
                        continue
                    raise SqlServerError(3701, f"Cannot drop the table '{raw.strip()}', because it does not exist or "
                                               "you do not have permission.", severity=11, aborts_batch=False)
                self._ddl(real, lambda cur, obj=obj: ddl.drop_table(cur, obj))
                self.server.database(real).registry.invalidate()
            return
        if w1 == "INDEX":
            for raw in _split_top(body):
                m = re.match(r"^\s*(\S+)\s+ON\s+(.+)$", raw, re.IGNORECASE) or re.match(r"^\s*(.+)\.([^.]+)\s*$", raw)
                if not m:
                    raise SqlServerError(102, "Incorrect syntax near 'INDEX'.")
                if " on " in raw.lower():
                    index, table = m.group(1).strip("[]"), m.group(2)
                else:
                    table, index = m.group(1), m.group(2).strip("[]")
                db, schema, name = self._split_object(table)
                obj = self.lookup(db, schema, name)
                ix = next((i for i in (obj.indexes if obj else []) if i.name.lower() == index.lower()), None)
                if obj is None or ix is None:
                    if if_exists:
                        continue
                    raise SqlServerError(3701, f"Cannot drop the index '{table.strip()}.{index}', because it does not "
                                               "exist or you do not have permission.", severity=11)

                def act(cur: Any, obj: Any = obj, ix: Any = ix) -> None:
                    cur.execute(f'DROP INDEX "{obj.pg_schema}"."{ix.name}${obj.pg_name}"')
                    cur.execute("DELETE FROM hw_emulator.indexes WHERE object_id = %s AND index_id = %s",
                                (obj.object_id, ix.index_id))
                self._ddl(db, act)
                self.server.database(db).registry.invalidate()
            return
        if w1 == "SCHEMA":
            name = body.strip().strip("[]")

            def act_schema(cur: Any) -> None:
                cur.execute("DELETE FROM hw_emulator.schemas WHERE lower(name) = lower(%s) RETURNING pg_name",
                            (name,))
                row = cur.fetchone()
                if row is None:
                    if if_exists:
                        return
                    raise SqlServerError(3701, f"Cannot drop the schema '{name}', because it does not exist or you do "
                                               "not have permission.", severity=11)
                cur.execute(f'DROP SCHEMA "{row[0]}"')
            self._ddl(self.database, act_schema)
            return
        raise SqlServerError(50000, f"emulator: DROP {w1} is not supported")

    # ------------------------------------------------------------------ control flow
    def _block(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        text = st.text.strip()
        m = re.match(r"^BEGIN\b(.*)\bEND$", text, re.IGNORECASE | re.DOTALL)
        if not m:
            if re.match(r"^BEGIN\s+TRY\b", text, re.IGNORECASE):
                raise SqlServerError(50000, "emulator: TRY…CATCH is not supported")
            raise SqlServerError(102, "Incorrect syntax near 'BEGIN'.")
        for inner in split(m.group(1)):
            yield from self._guarded(inner, declared)

    def _if(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        from .splitter import _STARTERS
        toks = st.tokens
        depth = 0
        cond_end = None
        for i, t in enumerate(toks[1:], start=1):
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
            elif depth == 0 and t.text.upper() in _STARTERS and t.token_type.name not in ("STRING", "IDENTIFIER") \
                    and i > 1:
                cond_end = i
                break
        if cond_end is None:
            raise SqlServerError(102, "Incorrect syntax near the end of the IF statement.")
        cond = st.text[toks[1].start - toks[0].start:toks[cond_end].start - toks[0].start]
        body = st.text[toks[cond_end].start - toks[0].start:]
        depth = 0
        else_at = None
        for t in toks[cond_end:]:
            w = t.text.upper()
            if w == "BEGIN":
                depth += 1
            elif w == "END":
                depth -= 1
            elif w == "ELSE" and depth == 0:
                else_at = t.start - toks[0].start
                break
        then_text, else_text = (body, "") if else_at is None else (st.text[toks[cond_end].start - toks[0].start:
                                                                           else_at], st.text[else_at + 4:])
        truth = self._scalar(f"CASE WHEN {cond} THEN 1 ELSE 0 END")
        chosen = then_text if truth == 1 else else_text
        for inner in split(chosen) if chosen.strip() else []:
            yield from self._guarded(inner, declared)

    def _raiserror(self, st: Statement) -> Iterator[Result]:
        m = re.match(r"^RAISERROR\s*\((.*)\)\s*(WITH\s+.*)?$", st.text.strip().rstrip(";"), re.IGNORECASE | re.DOTALL)
        if not m:
            raise SqlServerError(102, "Incorrect syntax near 'RAISERROR'.")
        args = [self._scalar(a) for a in _split_top(m.group(1))]
        if len(args) < 3:
            raise SqlServerError(102, "Incorrect syntax near ')'.")
        msg, severity, state = args[0], int(args[1]), int(args[2])
        number = 50000
        if isinstance(msg, int):
            number, msg = msg, f"Error {msg}"
        text = _format_raiserror(str(msg), args[3:])
        if severity <= 10:
            yield Message(0 if number == 50000 else number, text, severity=severity, state=state, line=st.line)
            return
        raise SqlServerError(number, text, severity=severity, state=state, aborts_batch=False, line=st.line)

    # ------------------------------------------------------------------ procedures
    def _odbc_call(self, text: str, declared: list[str]) -> Iterator[Result]:
        m = re.match(r"^\{\s*(\?\s*=\s*)?call\s+([^\s(}]+)\s*(?:\((.*)\))?\s*\}$", text.strip(), re.IGNORECASE |
                     re.DOTALL)
        if not m:
            raise SqlServerError(102, "Incorrect syntax near '{'.")
        args = [(None, a) for a in _split_top(m.group(3) or "")]
        yield from self._call(m.group(2), [(n, self._arg_value(v)) for n, v in args])

    def _exec_statement(self, st: Statement, declared: list[str]) -> Iterator[Result]:
        body = st.text.split(None, 1)[1].strip().rstrip(";") if len(st.text.split(None, 1)) > 1 else ""
        if body.startswith("("):
            inner = self._scalar(body[1:body.rindex(")")])
            for stmt in split(str(inner)):
                yield from self._guarded(stmt, declared)
            return
        m = re.match(r"^(?:(@\w+)\s*=\s*)?((?:\[[^\]]+\]|[\w#$@]+)(?:\s*\.\s*(?:\[[^\]]+\]|[\w#$@]*))*)\s*(.*)$", body,
                     re.DOTALL)
        if not m:
            raise SqlServerError(102, "Incorrect syntax near 'EXEC'.")
        _, proc, rest = m.groups()
        args: list[tuple[str | None, Any]] = []
        outputs: list[tuple[str, str]] = []
        for raw in _split_top(rest):
            am = re.match(r"^(@\w+)\s*=\s*(.+?)(\s+(?:OUT|OUTPUT))?$", raw.strip(), re.IGNORECASE | re.DOTALL)
            if am:
                args.append((am.group(1), self._arg_value(am.group(2))))
                if am.group(3) and am.group(2).strip().startswith("@"):
                    outputs.append((am.group(1), am.group(2).strip()))
            else:
                om = re.match(r"^(.+?)(\s+(?:OUT|OUTPUT))?$", raw.strip(), re.IGNORECASE | re.DOTALL)
                args.append((None, self._arg_value(om.group(1) if om else raw)))
        yield from self._call(proc, args)

    def _arg_value(self, text: str) -> Any:
        text = text.strip()
        if text.upper() == "DEFAULT":
            return _DEFAULT
        if text.upper() == "NULL":
            return None
        if re.match(r"^N?'(?:[^']|'')*'$", text, re.DOTALL):
            return text[text.index("'") + 1:-1].replace("''", "'")
        if re.match(r"^0x[0-9a-fA-F]*$", text):
            return bytes.fromhex(text[2:])
        if re.match(r"^[+-]?\d+$", text):
            return int(text)
        if re.match(r"^[+-]?\d*\.\d+$", text):
            return Decimal(text)
        if text.startswith("@") and not text.startswith("@@"):
            var = self.variables.get(text.lower())
            if var is None:
                raise SqlServerError(137, f'Must declare the scalar variable "{text}".', severity=15, state=2)
            return var[1]
        if re.match(r"^[A-Za-z_]\w*$", text):
            return text  # T-SQL lets procedure arguments be bare words
        return self._scalar(text)

    def _call(self, proc: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
        parts = [p.strip().strip("[]") for p in split_name(proc)]
        db = self.database
        if len(parts) == 3:
            real = self.database_name(parts[0])
            if real is None:
                raise SqlServerError(911, f"Database '{parts[0]}' does not exist. Make sure that the name is entered "
                                          "correctly.")
            db = real
            parts = parts[1:]
        name = parts[-1]
        low = name.lower()
        yield from self._implicit_begin()
        if low.startswith("sp_cdc_"):
            yield from self._cdc_procedure(db, low, args)
            yield ReturnStatus(0)
            return
        if low in ("sp_prepare", "sp_execute", "sp_prepexec", "sp_unprepare", "sp_reset_connection"):
            # the RPC procedures also run as EXEC statements (drivers send EXEC sp_unprepare n)
            params = [RpcParam(n or "", convert.python_type_of(v), None if v is _DEFAULT else v) for n, v in args]
            yield from self._rpc(low, params)
            return
        if low in ("sp_executesql",):
            values = [v for _, v in args]
            named = [(n, v) for n, v in args]
            stmt = values[0] if values else ""
            decl = values[1] if len(values) > 1 else ""
            yield from self._executesql(str(stmt or ""), str(decl or ""), named[2:])
            yield ReturnStatus(0)
            return
        if low in catalog.PROCEDURES:
            yield from catalog.PROCEDURES[low](self, db, args)
            yield ReturnStatus(0)
            return
        if (low.startswith("sp_") or low.startswith("xp_")) and (len(parts) == 1 or parts[0].lower() == "sys"):
            raise SqlServerError(50000, f"emulator: system procedure {name} is not supported")
        raise SqlServerError(2812, f"Could not find stored procedure '{proc}'.", aborts_batch=False)

    def _cdc_procedure(self, db: str, name: str, args: list[tuple[str | None, Any]]) -> Iterator[Result]:
        try:
            from ..cdc import procedures
            from ..cdc.context import CdcContext
        except ImportError:
            raise SqlServerError(50000, f"emulator: sys.{name} is not available (the CDC layer is missing)") from None
        fn = procedures.PROCEDURES.get(name)
        if fn is None:
            raise SqlServerError(2812, f"Could not find stored procedure 'sys.{name}'.", state=62)
        positional = [None if v is _DEFAULT else v for n, v in args if not n]
        named = {n: v for n, v in args if n and v is not _DEFAULT}
        params = procedures.bind(name, positional, named)
        conn = self._conn(db)
        info = self.server.database(db)
        in_tx = self.trancount > 0
        with conn.cursor() as cur:
            cur.execute("SAVEPOINT hw_stmt" if in_tx else "BEGIN")
        ctx = CdcContext(conn=conn, database=info.name, jobs=self.server.jobs, login=self.login.user,
                         **security.cdc_rights(self, conn, info.name))
        try:
            with security.elevated(self, conn):  # the procedure checks the caller's rights itself
                results = list(fn(ctx, params))
                with conn.cursor() as cur:
                    security.after_cdc_procedure(cur, name, info.name.lower())
            with conn.cursor() as cur:
                cur.execute("RELEASE SAVEPOINT hw_stmt" if in_tx else "COMMIT")
        except SqlServerError:
            self._undo(conn, in_tx)
            raise
        except psycopg2.Error as exc:
            self._undo(conn, in_tx)
            raise map_pg_error(exc, Namer(info.name)) from None
        info.registry.invalidate()
        info.composites = None
        if not in_tx and self.server.jobs is not None and name in ("sp_cdc_enable_db", "sp_cdc_enable_table",
                                                                   "sp_cdc_start_job"):
            try:
                self.server.jobs.start(info.name)
            except Exception:
                pass
        yield from results

    @staticmethod
    def _undo(conn: Any, in_tx: bool) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute("ROLLBACK TO SAVEPOINT hw_stmt" if in_tx else "ROLLBACK")
        except psycopg2.Error:
            pass

    # ------------------------------------------------------------------ RPC
    def execute_rpc(self, proc: str, params: list[RpcParam]) -> Iterator[Result]:
        self._cancelled = False
        yield from self._protected(self._rpc(proc, params))

    def _rpc(self, proc: str, params: list[RpcParam]) -> Iterator[Result]:
        low = proc.lower().split(".")[-1].strip("[]")
        if low == "sp_executesql":
            stmt = params[0].value if params else ""
            decl = params[1].value if len(params) > 1 else ""
            yield from self._executesql(str(stmt or ""), str(decl or ""), [(p.name, p.value) for p in params[2:]],
                                        rpc_params=params[2:])
            yield ReturnStatus(0)
            return
        if low == "sp_prepare":
            handle = self._next_handle
            self._next_handle += 1
            decl = params[1].value if len(params) > 1 else ""
            stmt = params[2].value if len(params) > 2 else ""
            parse_check = split(str(stmt or ""))
            del parse_check
            self.prepared[handle] = (str(decl or ""), str(stmt or ""))
            # SQL Server's order: RETURNSTATUS, then the OUT parameters (mssql-jdbc takes the handle
            # only from a RETURNVALUE that follows a RETURNSTATUS)
            yield ReturnStatus(0)
            yield ReturnValue(params[0].name if params else "@handle", 0, SqlType("int"), handle)
            return
        if low == "sp_prepexec":
            handle = self._next_handle
            self._next_handle += 1
            decl = str(params[1].value or "") if len(params) > 1 else ""
            stmt = str(params[2].value or "") if len(params) > 2 else ""
            self.prepared[handle] = (decl, stmt)
            yield from self._executesql(stmt, decl, [(p.name, p.value) for p in params[3:]], rpc_params=params[3:])
            yield ReturnStatus(0)
            yield ReturnValue(params[0].name if params else "@handle", 0, SqlType("int"), handle)
            return
        if low == "sp_execute":
            handle = int(params[0].value) if params else 0
            if handle not in self.prepared:
                raise SqlServerError(8179, f"Could not find prepared statement with handle {handle}.")
            decl, stmt = self.prepared[handle]
            yield from self._executesql(stmt, decl, [(p.name, p.value) for p in params[1:]], rpc_params=params[1:])
            yield ReturnStatus(0)
            return
        if low == "sp_unprepare":
            if params:
                self.prepared.pop(int(params[0].value), None)
            yield ReturnStatus(0)
            return
        if low in ("sp_cursor", "sp_cursoropen", "sp_cursorprepare", "sp_cursorexecute", "sp_cursorprepexec",
                   "sp_cursorunprepare", "sp_cursorfetch", "sp_cursoroption", "sp_cursorclose", "sp_prepexecrpc"):
            raise SqlServerError(50000, f"emulator: {low} (server cursors) is not supported")
        if low == "sp_reset_connection":
            self.reset()
            return
        yield from self._call(proc, [(p.name or None, p.value) for p in params])

    def _executesql(self, stmt: str, decl: str, values: list[tuple[str | None, Any]],
                    rpc_params: list[RpcParam] | None = None) -> Iterator[Result]:
        declared = _parse_declarations(decl)
        saved = dict(self.variables)
        try:
            self.variables = {}
            for i, (name, t) in enumerate(declared):
                value: Any = None
                found = False
                for pname, pvalue in values:
                    if pname and pname.lower() == name:
                        value, found = pvalue, True
                        break
                if not found and i < len(values) and not values[i][0]:
                    value = values[i][1]
                if isinstance(value, str) and t.name not in ("varchar", "nvarchar", "char", "nchar", "text",
                                                              "ntext", "xml", "sql_variant"):
                    value = self._scalar(convert.quote(value), t)
                self.variables[name] = (t, value)
            declared_here: list[str] = []
            for st in split(stmt):
                yield from self._guarded(st, declared_here)
        finally:
            self.variables = saved


class _Default:
    def __repr__(self) -> str:
        return "DEFAULT"


_DEFAULT = _Default()


def _parse_declarations(decl: str) -> list[tuple[str, SqlType]]:
    out = []
    for part in _split_top(decl):
        m = re.match(r"^\s*(@\w+)\s+(?:AS\s+)?(\w+(?:\s*\(\s*(?:max|\d+)\s*(?:,\s*\d+\s*)?\))?)(\s+(?:OUT|OUTPUT))?"
                     r"\s*(?:=.*)?$", part, re.IGNORECASE)
        if not m:
            raise SqlServerError(102, f"Incorrect syntax near '{part.strip()[:20]}'.")
        try:
            t = SqlType.parse(m.group(2).replace(" ", ""))
        except ValueError:
            raise SqlServerError(2715, f"Column, parameter, or variable #1: Cannot find data type {m.group(2)}.") \
                from None
        out.append((m.group(1).lower(), t))
    return out


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses and quotes."""
    parts, cur, depth, quote = [], [], 0, False
    for ch in text:
        if ch == "'":
            quote = not quote
        elif not quote and ch == "(":
            depth += 1
        elif not quote and ch == ")":
            depth -= 1
        elif not quote and ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def _format_raiserror(msg: str, args: list[Any]) -> str:
    it = iter(args)

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        try:
            return str(next(it))
        except StopIteration:
            return "(null)"
    return re.sub(r"%%|%[-+ 0#]*\d*(?:\.\d+)?(?:h|l)?[diosuxX]", sub, msg)


def _text(value: Any) -> str:
    if hasattr(value, "isoformat") and not isinstance(value, str):
        return value.isoformat()
    return str(value)


def _version() -> str:
    from .server import VERSION
    return VERSION


__all__ = ["Session"]

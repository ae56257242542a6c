"""The one narrow I/O interface to SQL Server (mssql-python, Microsoft's driver over ODBC 18).

Everything the connector sends goes through :class:`SqlServerConnection`: statements with `?`
parameters, rows fetched in batches of a fetch size, the transaction controls Debezium uses
(isolation level, `SET LOCK_TIMEOUT`, savepoints, commit and rollback). Errors become
:class:`~headwater.engine.connector.ConnectorError` with one line naming the cause — retriable
when the connection was lost (the engine retries per `errors.max.retries`), never with the
password in it.

A connection is opened per database (`Database=` in the connection string, like Debezium's
single-database URL) and keeps an explicit transaction (autocommit off), as Debezium's
`SqlServerConnection` does after `setAutoCommit(false)`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from typing import Any

from headwater.engine.connector import ConnectorError, connector_error

log = logging.getLogger(__name__)

# SQL Server's `SET TRANSACTION ISOLATION LEVEL` names, by snapshot.isolation.mode's level
ISOLATION_LEVELS = {
    "read_uncommitted": "READ UNCOMMITTED",
    "read_committed": "READ COMMITTED",
    "repeatable_read": "REPEATABLE READ",
    "serializable": "SERIALIZABLE",
    "snapshot": "SNAPSHOT",
}

# mssql-python raises its exceptions with the ODBC SQLSTATE's text as `driver_error`; these are
# the states of a connection that was lost or could not be reached (08S01 communication link
# failure, 08001 client unable to establish connection, 08003 connection not open, 08004, 08007,
# HYT00/HYT01 timeouts).
_LOST_STATES = (
    "Communication link failure",
    "Client unable to establish connection",
    "Connection not open",
    "Server rejected the connection",
    "Connection failure during transaction",
    "Timeout expired",
    "Connection timeout expired",
)
_LOST_TEXTS = (
    "tcp provider",
    "connection is closed",
    "connection was closed",
    "connection reset",
    "broken pipe",
    "login timeout expired",
    "server has closed the connection",
    "an existing connection was forcibly closed",
)
# SQL Server errors that look transient to ODBC but are answers: 1222 lock request time out
# (snapshot.lock.timeout.ms), 18456 login failed (a wrong user or password does not fix itself)
_NOT_RETRIABLE = ("lock request time out", "login failed")

_ODBC_PREFIX = re.compile(r"^(\[[^\]]*\])+")


def error_text(exc: BaseException) -> str:
    """SQL Server's message of a driver error, without the ODBC prefixes and SQLSTATE text."""
    ddbc = getattr(exc, "ddbc_error", None)
    text = str(ddbc if ddbc else exc).strip() or exc.__class__.__name__
    text = _ODBC_PREFIX.sub("", text.splitlines()[0]).strip()
    return text


def is_connection_loss(exc: BaseException) -> bool:
    """True for a lost or unreachable server (a restart, a network failure, a killed session)."""
    if isinstance(exc, ConnectorError):
        return exc.retriable
    import mssql_python

    if not isinstance(exc, mssql_python.Error):
        return isinstance(exc, ConnectionError | TimeoutError)
    text = f"{getattr(exc, 'driver_error', '')} {exc}".lower()
    if any(m in text for m in _NOT_RETRIABLE):
        return False
    driver_error = getattr(exc, "driver_error", "") or ""
    return driver_error in _LOST_STATES or any(m in text for m in _LOST_TEXTS) or \
        isinstance(exc, mssql_python.InterfaceError)


def database_error(what: str, exc: BaseException) -> ConnectorError:
    """A ConnectorError for a failed operation, retriable when the connection was lost."""
    lost = is_connection_loss(exc)
    return connector_error(f"{what}: {error_text(exc)}{' (the connection to the server was lost)' if lost else ''}",
                           retriable=lost)


def quote(identifier: str) -> str:
    """`[name]` with `]` doubled (Debezium's quoteIdentifier for SQL Server)."""
    return "[" + identifier.replace("]", "]]") + "]"


def _odbc_value(value: str) -> str:
    """A connection-string value in braces (`}` doubled), so `;` and `=` in it are data."""
    return "{" + value.replace("}", "}}") + "}"


def connection_string(config: Any, database: str | None, *, with_password: bool = True) -> str:
    """The ODBC connection string for `database` (None: the login's default database): server
    from `database.hostname`, `database.instance`, `database.port`; the credentials; then the
    keywords the CONFIG helper derives (`config.driver_options`: database.encrypt,
    database.trustServerCertificate, the application intent, the `driver.*`/`database.*`
    pass-through)."""
    from headwater.connectors.sqlserver.config import driver_options

    host = config.get("database.hostname")
    instance = config.get("database.instance", None)
    server = f"{host}\\{instance}" if instance else host
    if not instance or config.is_set("database.port"):
        server = f"{server},{config.get('database.port')}"
    parts = [f"Server={server}"]
    user = config.get("database.user", None)
    if user:
        parts.append(f"UID={_odbc_value(user)}")
        password = config.get("database.password", None)
        if password is not None:
            parts.append(f"PWD={_odbc_value(password) if with_password else '***'}")
    if database:
        parts.append(f"Database={_odbc_value(database)}")
    for key, value in driver_options(config).items():
        parts.append(f"{key}={_odbc_value(str(value))}")
    return ";".join(parts)


def read_only_intent(config: Any) -> bool:
    """ApplicationIntent=ReadOnly (an Always On readable secondary)."""
    from headwater.connectors.sqlserver.config import application_intent

    return application_intent(config) == "ReadOnly"


def describe_target(config: Any, database: str | None = None) -> str:
    where = f"SQL Server at {config.get('database.hostname')}:{config.get('database.port', 1433)}"
    if database:
        where += f", database {database!r}"
    return f"{where}, user {config.get('database.user', None)!r}"


class SqlServerConnection:
    """One connection to one database, in an explicit transaction (autocommit off)."""

    def __init__(self, config: Any, database: str | None, *, purpose: str = "headwater") -> None:
        self.config = config
        self.database = database
        self.purpose = purpose
        self._conn: Any = None
        self.connect()

    # -- connection ---------------------------------------------------------------------------

    def connect(self) -> None:
        import mssql_python

        try:
            from headwater.connectors.sqlserver.config import login_timeout

            conn = mssql_python.connect(connection_string(self.config, self.database),
                                        timeout=login_timeout(self.config) or 0)
        except mssql_python.Error as exc:
            text = error_text(exc)
            if "login failed" in text.lower():
                raise ConnectorError(
                    f"cannot connect to {describe_target(self.config, self.database)}: {text} (SQL Server error "
                    "18456: check database.user and database.password, and that the login may connect to the "
                    "database)") from None
            if "cannot open database" in text.lower():
                raise ConnectorError(f"cannot connect to {describe_target(self.config, self.database)}: {text} "
                                     "(check database.names)") from None
            raise database_error(f"cannot connect to {describe_target(self.config, self.database)}", exc) from None
        conn.autocommit = False
        timeout_ms = self.config.get("database.query.timeout.ms", 0) or 0
        if timeout_ms > 0:  # the driver's per-statement timeout is in whole seconds
            conn.timeout = max(1, -(-timeout_ms // 1000))
        self._conn = conn
        self._run_initial_statements()

    def _run_initial_statements(self) -> None:
        """`database.initial.statements` on every new connection (Debezium's JDBC initial
        statements: session settings such as SET options), committed."""
        from headwater.config.relational import split_statements

        text = self.config.get("database.initial.statements", None)
        if not text:
            return
        for statement in split_statements(text):
            try:
                self.execute(statement, what="database.initial.statements")
                self.commit()
            except ConnectorError as exc:
                self.close()
                if exc.retriable:
                    raise
                raise ConnectorError(f"database.initial.statements: statement {statement!r} failed: {exc}") from None

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def reconnect(self) -> None:
        self.close()
        self.connect()

    def is_valid(self) -> bool:
        try:
            self.query_one("SELECT 1")
            return True
        except ConnectorError:
            return False

    # -- statements ---------------------------------------------------------------------------

    def _cursor(self) -> Any:
        if self._conn is None:
            raise ConnectorError(f"the connection to {describe_target(self.config, self.database)} is closed",
                                 retriable=True)
        return self._conn.cursor()

    def execute(self, sql: str, params: Sequence[Any] = (), *, what: str | None = None) -> None:
        """Run a statement whose results (if any) are not read."""
        import mssql_python

        try:
            cur = self._cursor()
            cur.execute(sql, *params)
            cur.close()
        except mssql_python.Error as exc:
            raise database_error(what or f"statement {_short(sql)!r} failed", exc) from None

    def query(self, sql: str, params: Sequence[Any] = (), *, what: str | None = None) -> list[tuple[Any, ...]]:
        """All rows of the statement's result."""
        import mssql_python

        try:
            cur = self._cursor()
            cur.execute(sql, *params)
            rows = [tuple(r) for r in cur.fetchall()] if cur.description is not None else []
            cur.close()
            return rows
        except mssql_python.Error as exc:
            raise database_error(what or f"query {_short(sql)!r} failed", exc) from None

    def query_one(self, sql: str, params: Sequence[Any] = (), *, what: str | None = None) -> Any:
        """The single value of a one-row, one-column query (None when it has no row)."""
        rows = self.query(sql, params, what=what)
        return rows[0][0] if rows else None

    def stream(self, sql: str, params: Sequence[Any] = (), *, fetch_size: int = 2000,
               what: str | None = None) -> Iterator[tuple[Any, ...]]:
        """The statement's rows, fetched `fetch_size` at a time (the connection can run nothing
        else until the iterator is exhausted or closed)."""
        import mssql_python

        try:
            cur = self._cursor()
            cur.execute(sql, *params)
        except mssql_python.Error as exc:
            raise database_error(what or f"query {_short(sql)!r} failed", exc) from None
        try:
            size = max(1, fetch_size)
            while True:
                try:
                    batch = cur.fetchmany(size)
                except mssql_python.Error as exc:
                    raise database_error(what or f"reading the rows of {_short(sql)!r} failed", exc) from None
                if not batch:
                    return
                for row in batch:
                    yield tuple(row)
        finally:
            try:
                cur.close()
            except Exception:
                pass

    # -- transactions -------------------------------------------------------------------------

    def commit(self) -> None:
        import mssql_python

        try:
            self._conn.commit()
        except mssql_python.Error as exc:
            raise database_error("commit failed", exc) from None

    def rollback(self) -> None:
        import mssql_python

        if self._conn is None:
            return
        try:
            self._conn.rollback()
        except mssql_python.Error as exc:
            raise database_error("rollback failed", exc) from None

    def set_isolation(self, mode: str) -> None:
        """`SET TRANSACTION ISOLATION LEVEL` (what JDBC's setTransactionIsolation sends)."""
        self.execute(f"SET TRANSACTION ISOLATION LEVEL {ISOLATION_LEVELS[mode]}")

    def set_lock_timeout(self, millis: int) -> None:
        self.execute(f"SET LOCK_TIMEOUT {int(millis)}")

    def savepoint(self, name: str) -> None:
        """A savepoint inside the transaction (JDBC's setSavepoint: open one if none is open)."""
        # mssql-jdbc's text: under IMPLICIT_TRANSACTIONS ON (autocommit off) BEGIN TRAN at count 0
        # opens the implicit transaction too, so one of the two is committed again
        self.execute(f"IF @@TRANCOUNT = 0 BEGIN BEGIN TRAN IF @@TRANCOUNT = 2 COMMIT TRAN END SAVE TRAN {quote(name)}")

    def rollback_to(self, name: str) -> None:
        self.execute(f"IF @@TRANCOUNT > 0 ROLLBACK TRAN {quote(name)}")


def _short(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= 120 else text[:117] + "..."

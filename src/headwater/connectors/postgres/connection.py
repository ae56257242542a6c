"""Connections to PostgreSQL, with errors that say what went wrong and never show passwords.

Connection properties (spec §11, PG-254..256, PG-283..288): SSL (`database.sslmode`,
`database.sslrootcert`, `database.sslcert`, `database.sslkey`, `database.sslpassword`) and TCP
keep-alive (`database.tcpKeepAlive`) map onto libpq's parameters of the same meaning;
`database.<libpq parameter>` pass-through properties are added as given. Non-replication
connections also get `database.query.timeout.ms` (as `statement_timeout`) and run
`database.initial.statements` once connected; the replication connection gets neither, as in
Debezium (its statements are replication commands, and the walsender has no statement timeout).
"""

from __future__ import annotations

from typing import Any

import psycopg2
import psycopg2.extensions
import psycopg2.extras

from headwater.config import Configuration
from headwater.config.relational import split_statements
from headwater.connectors.postgres.config import libpq_options
from headwater.engine.connector import ConnectorError, connector_error

# Session settings that fix the text form of values, so that pgoutput (which formats values in
# the walsender's session) and the snapshot's COPY produce the same text for the converters.
# They come after any user-supplied `database.options`, so they win.
SESSION_OPTIONS = (
    "-c TimeZone=UTC -c DateStyle=ISO,MDY -c IntervalStyle=postgres "
    "-c extra_float_digits=1 -c bytea_output=hex -c lc_monetary=C"
)

# Parts of libpq's messages for a server that is (temporarily) unreachable or a connection
# that broke: worth a retry (errors.max.retries), unlike authentication or SSL failures.
_CONNECTION_LOST = (
    "connection refused",
    "could not connect",
    "server closed the connection",
    "terminating connection",
    "connection reset",
    "connection timed out",
    "timeout expired",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
    "no connection to the server",
    "connection already closed",
    "could not receive data from server",
    "could not send data to server",
    "ssl syscall error: eof detected",
    "eof detected",
    "broken pipe",
    "administrator command",
    "no copy in progress",  # libpq, reading a COPY stream whose connection went away
)
_NOT_RETRIABLE = ("password authentication failed", "certificate", "ssl error", "does not exist",
                  "no pg_hba.conf entry", "permission denied", "authentication failed")


def is_connection_loss(exc: BaseException) -> bool:
    """True for errors of a lost or unreachable server (a restart, a network glitch, a
    terminated backend), which the engine retries per errors.max.retries."""
    if isinstance(exc, ConnectorError):
        return exc.retriable
    if not isinstance(exc, psycopg2.Error):
        return False
    text = str(exc).lower()
    if any(m in text for m in _NOT_RETRIABLE):
        return False
    if isinstance(exc, psycopg2.InterfaceError):
        return True  # "connection already closed"
    return any(m in text for m in _CONNECTION_LOST) or exc.pgcode in ("57P01", "57P02", "57P03")


def connect_kwargs(config: Configuration, *, application_name: str, replication: bool = False) -> dict[str, Any]:
    passthrough = libpq_options(config)
    options = " ".join(o for o in (passthrough.pop("options", ""), SESSION_OPTIONS) if o)
    if not replication:
        timeout_ms = config.get("database.query.timeout.ms")
        # 0 = no limit, PostgreSQL's default; set explicitly so a role/database default does not apply
        options += f" -c statement_timeout={timeout_ms}"
    kwargs: dict[str, Any] = {
        "host": config.get("database.hostname"),
        "port": config.get("database.port"),
        "user": config.get("database.user"),
        "dbname": config.get("database.dbname"),
        "application_name": application_name,
        "connect_timeout": 30,
        **passthrough,
        "options": options,
    }
    password = config.get("database.password")
    if password:
        kwargs["password"] = password
    kwargs["sslmode"] = config.get("database.sslmode")
    for arg, name in (("sslcert", "database.sslcert"), ("sslkey", "database.sslkey"),
                      ("sslrootcert", "database.sslrootcert"), ("sslpassword", "database.sslpassword")):
        if config.is_set(name):
            kwargs[arg] = config.get(name)
    kwargs["keepalives"] = 1 if config.get("database.tcpKeepAlive") else 0
    return kwargs


def describe_target(config: Configuration) -> str:
    return (f"PostgreSQL at {config.get('database.hostname')}:{config.get('database.port')}, "
            f"database {config.get('database.dbname')!r}, user {config.get('database.user')!r}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    line = text.splitlines()[0].removeprefix("FATAL:").strip()
    # libpq repeats the target before the reason: 'connection to server at "h" (1.2.3.4), port 5432
    # failed: FATAL:  reason'; the caller names the target already, keep the reason
    if line.startswith("connection to server") and "failed: " in line:
        line = line.split("failed: ", 1)[1].removeprefix("FATAL:").strip()
    return line


def connection_error(what: str, exc: BaseException) -> ConnectorError:
    """A ConnectorError for a failed database operation, retriable when the connection was lost."""
    return connector_error(f"{what}: {first_line(exc)}", retriable=is_connection_loss(exc))


def connect(config: Configuration, *, replication: bool = False, application_name: str = "headwater") -> Any:
    kwargs = connect_kwargs(config, application_name=application_name, replication=replication)
    try:
        if replication:
            conn = psycopg2.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection, **kwargs)
        else:
            conn = psycopg2.connect(**kwargs)
            conn.autocommit = True
    except psycopg2.OperationalError as exc:
        raise connection_error(f"cannot connect to {describe_target(config)}", exc) from None
    if not replication:
        run_initial_statements(conn, config)
    return conn


def run_initial_statements(conn: Any, config: Configuration) -> None:
    """`database.initial.statements`: run on every new non-replication connection (PG-255)."""
    text = config.get("database.initial.statements")
    if not text:
        return
    for statement in split_statements(text):
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        except psycopg2.Error as exc:
            conn.close()
            if is_connection_loss(exc):
                raise connection_error("connection lost while running database.initial.statements", exc) from None
            raise ConnectorError(f"database.initial.statements: statement {statement!r} failed: "
                                 f"{first_line(exc)}") from None

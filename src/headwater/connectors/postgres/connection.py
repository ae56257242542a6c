"""Connections to PostgreSQL, with errors that say what went wrong and never show passwords."""

from __future__ import annotations

from typing import Any

import psycopg2
import psycopg2.extensions
import psycopg2.extras

from headwater.config import Configuration
from headwater.engine.connector import ConnectorError

# Session settings that fix the text form of values, so that pgoutput (which formats values in
# the walsender's session) and the snapshot's COPY produce the same text for the converters.
SESSION_OPTIONS = (
    "-c TimeZone=UTC -c DateStyle=ISO,MDY -c IntervalStyle=postgres "
    "-c extra_float_digits=1 -c bytea_output=hex"
)


def connect_kwargs(config: Configuration, *, application_name: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "host": config.get("database.hostname"),
        "port": config.get("database.port"),
        "user": config.get("database.user"),
        "dbname": config.get("database.dbname"),
        "application_name": application_name,
        "options": SESSION_OPTIONS,
        "connect_timeout": 30,
    }
    password = config.get("database.password")
    if password:
        kwargs["password"] = password
    sslmode = config.get("database.sslmode")
    if sslmode:
        kwargs["sslmode"] = sslmode
    for arg in ("sslcert", "sslkey", "sslrootcert", "sslpassword"):
        if config.is_set(f"database.{arg}"):
            kwargs[arg] = config.get(f"database.{arg}")
    if config.get("database.tcpKeepAlive"):
        kwargs["keepalives"] = 1
    return kwargs


def describe_target(config: Configuration) -> str:
    return (f"PostgreSQL at {config.get('database.hostname')}:{config.get('database.port')}, "
            f"database {config.get('database.dbname')!r}, user {config.get('database.user')!r}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0].removeprefix("FATAL:").strip()


def connect(config: Configuration, *, replication: bool = False, application_name: str = "headwater") -> Any:
    kwargs = connect_kwargs(config, application_name=application_name)
    try:
        if replication:
            conn = psycopg2.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection, **kwargs)
        else:
            conn = psycopg2.connect(**kwargs)
            conn.autocommit = True
    except psycopg2.OperationalError as exc:
        raise ConnectorError(f"cannot connect to {describe_target(config)}: {first_line(exc)}") from None
    return conn

"""The SQL Server emulator's fixtures, for every conftest and test module that needs one: the emulator as a
process, and a fresh CDC-enabled database dropped after its test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Literal

import pytest

from helpers.sqlserver import SqlServerEmulator


def emulator_fixture(scope: Literal["session", "module"]) -> Any:
    """A fixture of the emulator as its own process (serve.py) with its own backing PostgreSQL, one per
    `scope`, its capture job running every 0.1 s; named after the attribute it is assigned to
    (``sqlserver = emulator_fixture("module")``)."""

    @pytest.fixture(scope=scope)
    def emulator() -> Iterator[SqlServerEmulator]:
        """The SQL Server emulator as its own process (serve.py) with its own backing PostgreSQL."""
        with SqlServerEmulator(capture_interval=0.1) as server:
            yield server

    return emulator


@contextlib.contextmanager
def cdc_database(server: SqlServerEmulator, name: str, *, snapshot_isolation: bool = True) -> Iterator[str]:
    """A new database `name` with CDC enabled (and snapshot isolation allowed, unless told not to), dropped
    afterwards: each CDC database holds a replication slot of the emulator's backing PostgreSQL."""
    server.execute(f"CREATE DATABASE {name}")
    try:
        if snapshot_isolation:
            server.execute(f"ALTER DATABASE {name} SET ALLOW_SNAPSHOT_ISOLATION ON")
        server.execute("EXEC sys.sp_cdc_enable_db", database=name)
        yield name
    finally:
        if server.proc is not None and server.proc.poll() is None:
            with contextlib.suppress(Exception):  # a test that killed the server, or holds a connection
                server.execute(f"DROP DATABASE {name}")

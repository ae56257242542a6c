"""Fixtures for the SQL Server connector's tests: the SQL Server emulator (tests/emulators/sqlserver)
as a process on a free port, one per test session (worker), and a fresh CDC-enabled database per
test."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator

import pytest

from helpers.sqlserver import SqlServerEmulator

_names = itertools.count(1)


@pytest.fixture(scope="session")
def sqlserver() -> Iterator[SqlServerEmulator]:
    """The emulator as its own process (serve.py) with its own backing PostgreSQL."""
    with SqlServerEmulator(capture_interval=0.1) as emulator:
        yield emulator


@pytest.fixture
def sqlserver_db(sqlserver: SqlServerEmulator) -> Iterator[str]:
    """A new database with CDC enabled and snapshot isolation allowed; its name. Dropped after the
    test (each CDC database holds a replication slot of the emulator's backing PostgreSQL)."""
    name = f"hw{os.getpid()}_{next(_names)}"
    sqlserver.execute(f"CREATE DATABASE {name}")
    sqlserver.execute(f"ALTER DATABASE {name} SET ALLOW_SNAPSHOT_ISOLATION ON")
    sqlserver.execute("EXEC sys.sp_cdc_enable_db", database=name)
    yield name
    if sqlserver.proc is not None and sqlserver.proc.poll() is None:
        with contextlib.suppress(Exception):  # a test that killed the server, or holds a connection
            sqlserver.execute(f"DROP DATABASE {name}")

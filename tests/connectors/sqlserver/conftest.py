"""Fixtures for the SQL Server connector's tests: the SQL Server emulator (tests/emulators/sqlserver)
as a process on a free port, one per test session (worker), and a fresh CDC-enabled database per
test."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from helpers.sqlserver import SqlServerEmulator
from helpers.sqlserver_fixtures import cdc_database, emulator_fixture

_names = itertools.count(1)


sqlserver = emulator_fixture("session")


@pytest.fixture
def sqlserver_db(sqlserver: SqlServerEmulator) -> Iterator[str]:
    """A new database with CDC enabled and snapshot isolation allowed; its name. Dropped after the
    test (each CDC database holds a replication slot of the emulator's backing PostgreSQL)."""
    with cdc_database(sqlserver, f"hw{os.getpid()}_{next(_names)}") as name:
        yield name
